//! i8042 keyboard controller at 0x60 (data) / 0x64 (status/command), IRQ1 and IRQ12.
//!
//! [`I8042`] implements [`PioDevice`] with base 0x60: offset 0 is port 0x60, offset 4 is port
//! 0x64. Modelled: status, command byte, self-test (0xAA -> 0x55), interface tests (0xAB/0xA9 ->
//! 0), port enable/disable, output port (A20, reset line), the aux loopback (0xD3) and keyboard
//! loopback (0xD2) Linux uses to detect ports, and pulse-reset (0xFE, or output-port bit 0 low)
//! which sets [`I8042::reset_requested`]. A minimal AT keyboard answers commands with ACK (0xFA),
//! reset with 0xFA 0xAA and identify with 0xFA 0xAB 0x83; it never sends scancodes. No mouse is
//! attached: commands to the aux device (0xD4) are answered with 0xFE (NAK).

use super::{IrqLine, Persist, PioDevice, SnapError, SnapReader, SnapWriter};
use std::collections::VecDeque;

pub const KBD_IRQ: u8 = 1;
pub const AUX_IRQ: u8 = 12;
const QUEUE_MAX: usize = 16;

const ST_OBF: u8 = 0x01;
const ST_SYS: u8 = 0x04;
const ST_CMD: u8 = 0x08;
const ST_UNLOCKED: u8 = 0x10;
const ST_AUX_OBF: u8 = 0x20;
const CB_KBD_INT: u8 = 0x01;
const CB_AUX_INT: u8 = 0x02;
const CB_SYS: u8 = 0x04;

/// The controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct I8042 {
    cmd_byte: u8,
    /// Command waiting for its data byte on port 0x60.
    pending: u8,
    last_was_cmd: bool,
    out_port: u8,
    /// Output bytes: (value, from aux).
    queue: VecDeque<(u8, bool)>,
    last_out: u8,
    /// Pending keyboard command expecting a parameter byte (e.g. 0xED set LEDs).
    kbd_param: u8,
    /// The guest asked for a system reset (pulse of the reset line).
    pub reset_requested: bool,
    pub irq_kbd: IrqLine,
    pub irq_aux: IrqLine,
}

impl Default for I8042 {
    fn default() -> Self {
        Self::new()
    }
}

impl I8042 {
    pub fn new() -> Self {
        I8042 {
            cmd_byte: CB_KBD_INT | CB_SYS | 0x40,
            pending: 0,
            last_was_cmd: false,
            out_port: 0x03,
            queue: VecDeque::new(),
            last_out: 0,
            kbd_param: 0,
            reset_requested: false,
            irq_kbd: IrqLine::default(),
            irq_aux: IrqLine::default(),
        }
    }

    /// A20 gate as set through the output port.
    pub fn a20(&self) -> bool {
        self.out_port & 2 != 0
    }

    /// Take and clear the reset request.
    pub fn take_reset_request(&mut self) -> bool {
        std::mem::take(&mut self.reset_requested)
    }

    fn push(&mut self, v: u8, aux: bool) {
        if self.queue.len() < QUEUE_MAX {
            self.queue.push_back((v, aux));
        }
        self.update_irq();
    }

    fn update_irq(&mut self) {
        let front = self.queue.front().copied();
        let kbd = matches!(front, Some((_, false))) && self.cmd_byte & CB_KBD_INT != 0;
        let aux = matches!(front, Some((_, true))) && self.cmd_byte & CB_AUX_INT != 0;
        self.irq_kbd.set(kbd);
        self.irq_aux.set(aux);
    }

    fn status(&self) -> u8 {
        let mut s = ST_UNLOCKED;
        if let Some((_, aux)) = self.queue.front() {
            s |= ST_OBF;
            if *aux {
                s |= ST_AUX_OBF;
            }
        }
        if self.cmd_byte & CB_SYS != 0 {
            s |= ST_SYS;
        }
        if self.last_was_cmd {
            s |= ST_CMD;
        }
        s
    }

    fn command(&mut self, c: u8) {
        match c {
            0x20 => self.push(self.cmd_byte, false),
            0x60 | 0xd1 | 0xd2 | 0xd3 | 0xd4 => self.pending = c,
            0xa7 => self.cmd_byte |= 0x20,
            0xa8 => self.cmd_byte &= !0x20,
            0xa9 | 0xab => self.push(0x00, false),
            0xaa => {
                self.cmd_byte |= CB_SYS;
                self.push(0x55, false);
            }
            0xad => self.cmd_byte |= 0x10,
            0xae => self.cmd_byte &= !0x10,
            0xc0 => self.push(0x00, false),
            0xd0 => self.push(self.out_port, false),
            0xdd => self.out_port &= !2,
            0xdf => self.out_port |= 2,
            // pulse output-port lines: bit 0 low pulses the reset line
            0xf0..=0xff if c & 1 == 0 => self.reset_requested = true,
            _ => {}
        }
        self.update_irq();
    }

    fn keyboard(&mut self, v: u8) {
        if self.kbd_param != 0 {
            self.kbd_param = 0;
            self.push(0xfa, false);
            return;
        }
        match v {
            0xff => {
                self.push(0xfa, false);
                self.push(0xaa, false);
            }
            0xf2 => {
                self.push(0xfa, false);
                self.push(0xab, false);
                self.push(0x83, false);
            }
            0xee => self.push(0xee, false),
            0xed | 0xf0 | 0xf3 => {
                self.kbd_param = v;
                self.push(0xfa, false);
            }
            _ => self.push(0xfa, false),
        }
    }

    fn data_write(&mut self, v: u8) {
        match std::mem::take(&mut self.pending) {
            0x60 => self.cmd_byte = v,
            0xd1 => {
                self.out_port = v;
                if v & 1 == 0 {
                    self.reset_requested = true;
                }
            }
            0xd2 => self.push(v, false),
            0xd3 => self.push(v, true),
            0xd4 => self.push(0xfe, true),
            _ => self.keyboard(v),
        }
        self.update_irq();
    }
}

impl PioDevice for I8042 {
    fn pio_read(&mut self, offset: u16, _size: u8, _now: u64) -> u32 {
        match offset {
            0 => {
                if let Some((v, _)) = self.queue.pop_front() {
                    self.last_out = v;
                }
                self.update_irq();
                self.last_out as u32
            }
            4 => self.status() as u32,
            _ => 0xff,
        }
    }
    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, _now: u64) {
        match offset {
            0 => {
                self.last_was_cmd = false;
                self.data_write(value as u8);
            }
            4 => {
                self.last_was_cmd = true;
                self.command(value as u8);
            }
            _ => {}
        }
    }
}

impl Persist for I8042 {
    fn save(&self, w: &mut SnapWriter) {
        for b in [
            self.cmd_byte,
            self.pending,
            self.out_port,
            self.last_out,
            self.kbd_param,
        ] {
            w.u8(b);
        }
        w.bool(self.last_was_cmd);
        w.bool(self.reset_requested);
        w.u8(self.queue.len() as u8);
        for (v, aux) in &self.queue {
            w.u8(*v);
            w.bool(*aux);
        }
        self.irq_kbd.save(w);
        self.irq_aux.save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let mut k = I8042::new();
        k.cmd_byte = r.u8()?;
        k.pending = r.u8()?;
        k.out_port = r.u8()?;
        k.last_out = r.u8()?;
        k.kbd_param = r.u8()?;
        k.last_was_cmd = r.bool()?;
        k.reset_requested = r.bool()?;
        let n = r.u8()? as usize;
        if n > QUEUE_MAX {
            return Err(SnapError::Invalid("i8042 queue length"));
        }
        for _ in 0..n {
            let v = r.u8()?;
            k.queue.push_back((v, r.bool()?));
        }
        k.irq_kbd = IrqLine::restore(r)?;
        k.irq_aux = IrqLine::restore(r)?;
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn cmd(k: &mut I8042, c: u8) {
        k.pio_write(4, 1, c as u32, 0)
    }
    fn data(k: &mut I8042) -> u8 {
        k.pio_read(0, 1, 0) as u8
    }

    #[test]
    fn linux_probe_and_reset() {
        let mut k = I8042::new();
        assert_eq!((k.pio_read(4, 1, 0) as u8) & ST_OBF, 0);
        cmd(&mut k, 0xaa);
        assert_eq!(
            (k.pio_read(4, 1, 0) as u8) & (ST_OBF | ST_SYS),
            ST_OBF | ST_SYS
        );
        assert_eq!(data(&mut k), 0x55);
        cmd(&mut k, 0x20);
        let cb = data(&mut k);
        cmd(&mut k, 0x60);
        k.pio_write(0, 1, (cb | 0x03) as u32, 0);
        cmd(&mut k, 0x20);
        assert_eq!(data(&mut k), cb | 0x03);
        // aux loopback (i8042_check_aux)
        cmd(&mut k, 0xd3);
        k.pio_write(0, 1, 0x5a, 0);
        assert_eq!((k.pio_read(4, 1, 0) as u8) & ST_AUX_OBF, ST_AUX_OBF);
        assert!(k.irq_aux.level());
        assert_eq!(data(&mut k), 0x5a);
        assert!(!k.irq_aux.level());
        cmd(&mut k, 0xab);
        assert_eq!(data(&mut k), 0);
        // keyboard identify
        k.pio_write(0, 1, 0xf2, 0);
        assert!(k.irq_kbd.level());
        assert_eq!(
            [data(&mut k), data(&mut k), data(&mut k)],
            [0xfa, 0xab, 0x83]
        );
        assert!(!k.irq_kbd.level());
        assert!(!k.reset_requested);
        cmd(&mut k, 0xfe);
        assert!(k.take_reset_request());
        assert!(!k.reset_requested);
        cmd(&mut k, 0xd1);
        k.pio_write(0, 1, 0x02, 0);
        assert!(k.take_reset_request(), "output port bit 0 low resets");
        assert!(k.a20());
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut k = I8042::new();
        cmd(&mut k, 0xaa);
        cmd(&mut k, 0xd3);
        let mut w = SnapWriter::new();
        k.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(I8042::restore(&mut SnapReader::new(&b)).unwrap(), k);
        for n in 0..b.len() {
            assert!(I8042::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(5);
        for _ in 0..100_000 {
            let off = [0u16, 4, 1][g.below(3) as usize];
            if g.below(2) == 0 {
                k.pio_write(off, g.size(), g.next() as u32, 0);
            } else {
                k.pio_read(off, g.size(), 0);
            }
            assert!(k.queue.len() <= QUEUE_MAX);
        }
    }
}
