//! 16550A UART (COM1 at 0x3f8, IRQ4): registers, 16-byte FIFOs, loopback, interrupts.
//!
//! Transmission is instantaneous: a THR write appends the byte to [`Uart::output`] (or to the
//! receive FIFO in loopback mode) and the transmitter is empty again right away, as in QEMU.
//! Received bytes come from the machine through [`Uart::push_rx`] (the machine's input feeder,
//! src/machine/input.rs, only offers a byte when [`Uart::accepts_input`]: room in the FIFO, RTS
//! asserted as hardware flow control, not in loopback). The receive-data interrupt is raised as
//! soon as data is present (at or above the FIFO trigger level it reads as "data available",
//! below it as "character timeout"), so no timer is needed and input is deterministic.
//!
//! Overrun (a byte arriving with no room) sets LSR.OE like a real 16550A: with the FIFO on the
//! new byte is lost and the FIFO kept; with the FIFO off (16450 mode) the new byte overwrites the
//! holding register.

use super::{IrqLine, Persist, PioDevice, SnapError, SnapReader, SnapWriter};
use std::collections::VecDeque;

pub const COM1_BASE: u16 = 0x3f8;
pub const COM1_IRQ: u8 = 4;
const FIFO_LEN: usize = 16;

const IER_RDA: u8 = 0x01;
const IER_THRE: u8 = 0x02;
const IER_RLS: u8 = 0x04;
const IER_MS: u8 = 0x08;
const LCR_DLAB: u8 = 0x80;
const MCR_RTS: u8 = 0x02;
const MCR_LOOP: u8 = 0x10;
const LSR_DR: u8 = 0x01;
const LSR_OE: u8 = 0x02;
const LSR_THRE: u8 = 0x20;
const LSR_TEMT: u8 = 0x40;

/// The 16550A.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uart {
    ier: u8,
    lcr: u8,
    mcr: u8,
    /// Error bits of LSR (OE/PE/FE/BI), cleared by reading LSR.
    lsr_err: u8,
    msr: u8,
    scr: u8,
    fcr: u8,
    dll: u8,
    dlm: u8,
    /// THR-empty interrupt pending (set when the transmitter empties, cleared by an IIR read
    /// that reports it or a THR write).
    thr_ipending: bool,
    rx: VecDeque<u8>,
    /// Bytes transmitted by the guest, for the machine to drain.
    pub output: Vec<u8>,
    pub irq: IrqLine,
}

impl Default for Uart {
    fn default() -> Self {
        Self::new()
    }
}

impl Uart {
    pub fn new() -> Self {
        Uart {
            ier: 0,
            lcr: 0,
            mcr: 0,
            lsr_err: 0,
            // CTS, DSR and DCD asserted: a terminal is attached.
            msr: 0xb0,
            scr: 0,
            fcr: 0,
            dll: 0x0c,
            dlm: 0,
            thr_ipending: false,
            rx: VecDeque::with_capacity(FIFO_LEN),
            output: Vec::new(),
            irq: IrqLine::default(),
        }
    }

    fn fifo_on(&self) -> bool {
        self.fcr & 1 != 0
    }

    fn rx_capacity(&self) -> usize {
        if self.fifo_on() {
            FIFO_LEN
        } else {
            1
        }
    }

    /// Free places in the receive FIFO (the machine keeps further input queued).
    pub fn rx_space(&self) -> usize {
        self.rx_capacity().saturating_sub(self.rx.len())
    }

    /// Whether an attached terminal may send a byte now: there is room in the receive FIFO,
    /// the guest asserts RTS (hardware flow control; drivers raise RTS when the port is opened),
    /// and the port is not in loopback (which disconnects the receiver from the line).
    pub fn accepts_input(&self) -> bool {
        self.rx_space() > 0 && self.mcr & MCR_RTS != 0 && self.mcr & MCR_LOOP == 0
    }

    /// Deliver one received byte; returns false if there was no room (overrun: LSR.OE is set,
    /// and the byte is lost with the FIFO on or replaces the holding register with it off).
    pub fn push_rx(&mut self, byte: u8) -> bool {
        let ok = self.receive(byte);
        self.update_irq();
        ok
    }

    fn receive(&mut self, byte: u8) -> bool {
        if self.rx_space() > 0 {
            self.rx.push_back(byte);
            return true;
        }
        self.lsr_err |= LSR_OE;
        if !self.fifo_on() {
            self.rx.clear();
            self.rx.push_back(byte);
        }
        false
    }

    /// Take the bytes the guest transmitted so far.
    pub fn drain_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Divisor latch value (baud = 115200 / divisor).
    pub fn divisor(&self) -> u16 {
        u16::from_le_bytes([self.dll, self.dlm])
    }

    fn trigger_level(&self) -> usize {
        [1, 4, 8, 14][(self.fcr >> 6) as usize]
    }

    fn lsr(&self) -> u8 {
        let dr = if self.rx.is_empty() { 0 } else { LSR_DR };
        dr | self.lsr_err | LSR_THRE | LSR_TEMT
    }

    /// Interrupt identification: (IIR low nibble, is it the THRE source).
    fn iir_source(&self) -> u8 {
        if self.ier & IER_RLS != 0 && self.lsr_err & 0x1e != 0 {
            0x06
        } else if self.ier & IER_RDA != 0 && !self.rx.is_empty() {
            if self.fifo_on() && self.rx.len() < self.trigger_level() {
                0x0c
            } else {
                0x04
            }
        } else if self.ier & IER_THRE != 0 && self.thr_ipending {
            0x02
        } else if self.ier & IER_MS != 0 && self.msr & 0x0f != 0 {
            0x00
        } else {
            0x01
        }
    }

    fn update_irq(&mut self) {
        let pending = self.iir_source() & 1 == 0;
        self.irq.set(pending);
    }

    fn modem_inputs(&self) -> u8 {
        if self.mcr & MCR_LOOP != 0 {
            // DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD
            let m = self.mcr;
            ((m & 1) << 5) | ((m & 2) << 3) | ((m & 4) << 4) | ((m & 8) << 4)
        } else {
            0xb0
        }
    }

    fn set_msr_state(&mut self, new: u8) {
        let old = self.msr & 0xf0;
        let changed = old ^ new;
        let mut delta = self.msr & 0x0f;
        delta |= (changed >> 4) & 0x0b; // DCTS, DDSR, DDCD
        if old & 0x40 != 0 && new & 0x40 == 0 {
            delta |= 0x04; // TERI: RI went inactive
        }
        self.msr = new | delta;
    }

    fn transmit(&mut self, byte: u8) {
        if self.mcr & MCR_LOOP != 0 {
            self.receive(byte);
        } else {
            self.output.push(byte);
        }
        self.thr_ipending = true;
    }

    fn read_reg(&mut self, reg: u16) -> u8 {
        let dlab = self.lcr & LCR_DLAB != 0;
        let v = match reg {
            0 if dlab => self.dll,
            0 => self.rx.pop_front().unwrap_or(0),
            1 if dlab => self.dlm,
            1 => self.ier,
            2 => {
                let src = self.iir_source();
                if src == 0x02 {
                    self.thr_ipending = false;
                }
                let fifo = if self.fifo_on() { 0xc0 } else { 0 };
                src | fifo
            }
            3 => self.lcr,
            4 => self.mcr,
            5 => {
                let v = self.lsr();
                self.lsr_err = 0;
                v
            }
            6 => {
                let v = self.msr;
                self.msr &= 0xf0;
                v
            }
            _ => self.scr,
        };
        self.update_irq();
        v
    }

    fn write_reg(&mut self, reg: u16, v: u8) {
        let dlab = self.lcr & LCR_DLAB != 0;
        match reg {
            0 if dlab => self.dll = v,
            0 => self.transmit(v),
            1 if dlab => self.dlm = v,
            1 => {
                let old = self.ier;
                self.ier = v & 0x0f;
                // Enabling the THRE interrupt while the transmitter is empty raises it.
                if self.ier & IER_THRE != 0 && old & IER_THRE == 0 {
                    self.thr_ipending = true;
                }
            }
            2 => {
                let was_on = self.fifo_on();
                if (v & 1 != 0) != was_on {
                    self.rx.clear();
                }
                if v & 2 != 0 {
                    self.rx.clear();
                }
                self.fcr = v & 0xc9;
                if !self.fifo_on() {
                    self.fcr = 0;
                    self.rx.truncate(1);
                }
            }
            3 => self.lcr = v,
            4 => {
                self.mcr = v & 0x1f;
                let m = self.modem_inputs();
                self.set_msr_state(m);
            }
            5 => {} // LSR: writes ignored (factory test only)
            6 => {}
            _ => self.scr = v,
        }
        self.update_irq();
    }
}

impl PioDevice for Uart {
    /// Byte registers; a wider access reads/writes the byte at `offset`, upper bytes read 0.
    fn pio_read(&mut self, offset: u16, _size: u8, _now: u64) -> u32 {
        if offset > 7 {
            return 0xff;
        }
        self.read_reg(offset) as u32
    }
    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, _now: u64) {
        if offset <= 7 {
            self.write_reg(offset, value as u8);
        }
    }
}

impl Persist for Uart {
    fn save(&self, w: &mut SnapWriter) {
        for b in [
            self.ier,
            self.lcr,
            self.mcr,
            self.lsr_err,
            self.msr,
            self.scr,
            self.fcr,
            self.dll,
            self.dlm,
        ] {
            w.u8(b);
        }
        w.bool(self.thr_ipending);
        let rx: Vec<u8> = self.rx.iter().copied().collect();
        w.blob(&rx);
        w.blob(&self.output);
        self.irq.save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let mut u = Uart::new();
        u.ier = r.u8()? & 0x0f;
        u.lcr = r.u8()?;
        u.mcr = r.u8()? & 0x1f;
        u.lsr_err = r.u8()? & 0x1e;
        u.msr = r.u8()?;
        u.scr = r.u8()?;
        u.fcr = r.u8()? & 0xc9;
        u.dll = r.u8()?;
        u.dlm = r.u8()?;
        u.thr_ipending = r.bool()?;
        let rx = r.blob("uart rx fifo", FIFO_LEN)?;
        if rx.len() > u.rx_capacity() {
            return Err(SnapError::Invalid("uart rx fifo longer than its capacity"));
        }
        u.rx = rx.into();
        u.output = r.blob("uart output", 1 << 30)?;
        u.irq = IrqLine::restore(r)?;
        Ok(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn rd(u: &mut Uart, r: u16) -> u8 {
        u.pio_read(r, 1, 0) as u8
    }
    fn wr(u: &mut Uart, r: u16, v: u8) {
        u.pio_write(r, 1, v as u32, 0)
    }

    #[test]
    fn linux_8250_probe_sequence_identifies_16550a() {
        let mut u = Uart::new();
        // scratch test (autoconfig)
        wr(&mut u, 1, 0);
        assert_eq!(rd(&mut u, 1) & 0x0f, 0);
        wr(&mut u, 1, 0x0f);
        assert_eq!(rd(&mut u, 1) & 0x0f, 0x0f);
        wr(&mut u, 1, 0);
        wr(&mut u, 7, 0xa5);
        assert_eq!(rd(&mut u, 7), 0xa5);
        // loopback test: MCR = LOOP | 0x0a -> MSR high nibble 0x90
        wr(&mut u, 4, 0x1a);
        assert_eq!(rd(&mut u, 6) & 0xf0, 0x90);
        wr(&mut u, 4, 0);
        // FIFO detection
        wr(&mut u, 2, 0x01);
        assert_eq!(rd(&mut u, 2) >> 6, 3);
        // EFR probe: LCR=0xbf then reading offset 2 must not be 0
        wr(&mut u, 3, 0xbf);
        assert_ne!(rd(&mut u, 2), 0);
        wr(&mut u, 3, 0x80);
        assert_eq!(rd(&mut u, 2) >> 5, 6, "no 64-byte FIFO (not a 16750)");
        wr(&mut u, 3, 0);
        // XScale UUE probe: IER bit 6 does not stick
        wr(&mut u, 1, 0x40);
        assert_eq!(rd(&mut u, 1) & 0x40, 0);
        assert_eq!(rd(&mut u, 5), 0x60);
    }

    #[test]
    fn transmit_divisor_and_loopback() {
        let mut u = Uart::new();
        wr(&mut u, 3, 0x80);
        wr(&mut u, 0, 0x01);
        wr(&mut u, 1, 0x00);
        wr(&mut u, 3, 0x03);
        assert_eq!(u.divisor(), 1);
        for b in b"hi\n" {
            wr(&mut u, 0, *b);
        }
        assert_eq!(u.drain_output(), b"hi\n");
        assert!(u.output.is_empty());
        wr(&mut u, 4, 0x10);
        wr(&mut u, 0, b'x');
        assert!(u.output.is_empty());
        assert_eq!(rd(&mut u, 5) & LSR_DR, 1);
        assert_eq!(rd(&mut u, 0), b'x');
        assert_eq!(rd(&mut u, 5), 0x60);
    }

    #[test]
    fn interrupt_priorities_and_thre() {
        let mut u = Uart::new();
        wr(&mut u, 2, 0x01); // FIFO on, trigger 1
        assert!(!u.irq.level());
        wr(&mut u, 1, IER_THRE);
        assert!(u.irq.level(), "THRE interrupt on enabling ETBEI");
        assert_eq!(rd(&mut u, 2), 0xc2);
        assert!(!u.irq.level(), "IIR read clears THRE");
        assert_eq!(rd(&mut u, 2), 0xc1);
        wr(&mut u, 0, b'a');
        assert!(u.irq.level(), "transmitter empty again");
        // RX data outranks THRE
        wr(&mut u, 1, IER_THRE | IER_RDA);
        assert!(u.push_rx(b'q'));
        assert_eq!(rd(&mut u, 2), 0xc4);
        assert_eq!(rd(&mut u, 0), b'q');
        assert_eq!(rd(&mut u, 2), 0xc2);
        // trigger level 4: below it reads as timeout
        wr(&mut u, 2, 0x41);
        u.push_rx(1);
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x0c);
        for b in 2..=4 {
            u.push_rx(b);
        }
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x04);
        // overrun -> line status interrupt (highest)
        wr(&mut u, 1, IER_RLS | IER_RDA);
        for b in 0..20 {
            u.push_rx(b);
        }
        assert_eq!(u.rx_space(), 0);
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x06);
        assert_eq!(rd(&mut u, 5) & LSR_OE, LSR_OE);
        assert_eq!(rd(&mut u, 5) & LSR_OE, 0, "LSR read clears OE");
        // FIFO off: capacity 1
        wr(&mut u, 2, 0);
        assert_eq!(u.rx_space(), 1, "disabling the FIFO clears it");
        u.push_rx(9);
        assert_eq!(rd(&mut u, 2), 0x04);
        assert_eq!(u.rx_space(), 0);
        rd(&mut u, 0);
        assert_eq!(u.rx_space(), 1);
    }

    #[test]
    fn rx_fifo_overrun_and_data_ready() {
        let mut u = Uart::new();
        wr(&mut u, 2, 0x07); // FIFO on, both cleared, trigger 1
        wr(&mut u, 4, 0x0b); // DTR | RTS | OUT2
        assert_eq!(rd(&mut u, 5) & LSR_DR, 0);
        assert_eq!(rd(&mut u, 0), 0, "empty RBR reads 0");
        for b in 0..16 {
            assert!(u.accepts_input());
            assert!(u.push_rx(b));
        }
        assert!(!u.accepts_input(), "FIFO full");
        assert!(!u.push_rx(99), "overrun");
        assert_eq!(rd(&mut u, 5), 0x60 | LSR_OE | LSR_DR);
        assert_eq!(rd(&mut u, 5), 0x60 | LSR_DR, "OE cleared by the LSR read");
        let got: Vec<u8> = (0..16).map(|_| rd(&mut u, 0)).collect();
        assert_eq!(
            got,
            (0..16).collect::<Vec<u8>>(),
            "FIFO kept, the new byte lost"
        );
        assert_eq!(rd(&mut u, 5) & LSR_DR, 0);
        // FCR bit 1 clears the receive FIFO.
        u.push_rx(1);
        u.push_rx(2);
        wr(&mut u, 2, 0x03);
        assert_eq!(rd(&mut u, 5) & LSR_DR, 0);
        // 16450 mode: an overrun replaces the holding register.
        wr(&mut u, 2, 0x00);
        assert!(u.push_rx(b'a'));
        assert!(!u.accepts_input());
        assert!(!u.push_rx(b'b'));
        assert_eq!(rd(&mut u, 5), 0x60 | LSR_OE | LSR_DR);
        assert_eq!(rd(&mut u, 0), b'b');
        // Loopback: transmitted bytes fill the receive FIFO, with overrun at 16.
        wr(&mut u, 2, 0x01);
        wr(&mut u, 4, 0x1b);
        assert!(!u.accepts_input(), "loopback disconnects the line");
        for b in 0..17 {
            wr(&mut u, 0, b);
        }
        assert!(u.output.is_empty());
        assert_eq!(rd(&mut u, 5) & LSR_OE, LSR_OE);
        assert_eq!(rd(&mut u, 0), 0);
        // RTS low: flow control holds input back.
        wr(&mut u, 4, 0x09);
        wr(&mut u, 2, 0x03);
        assert!(!u.accepts_input());
    }

    #[test]
    fn rx_interrupts_and_trigger_levels() {
        let mut u = Uart::new();
        wr(&mut u, 4, 0x0b);
        wr(&mut u, 2, 0x01);
        u.push_rx(b'x');
        assert!(!u.irq.level(), "IER bit 0 off: no interrupt");
        assert_eq!(rd(&mut u, 2), 0xc1);
        wr(&mut u, 1, IER_RDA);
        assert!(
            u.irq.level(),
            "enabling ERBFI with data present raises the line"
        );
        assert_eq!(rd(&mut u, 2), 0xc4, "trigger 1: data available");
        assert!(
            u.irq.level(),
            "an IIR read does not clear RX data available"
        );
        rd(&mut u, 0);
        assert!(!u.irq.level(), "reading the data clears it");
        assert_eq!(rd(&mut u, 2), 0xc1);
        for (fcr, level) in [(0x41, 4), (0x81, 8), (0xc1, 14)] {
            wr(&mut u, 2, fcr | 0x02);
            for i in 1..=level {
                u.push_rx(i as u8);
                let want = if i < level { 0xcc } else { 0xc4 };
                assert_eq!(rd(&mut u, 2), want, "trigger {level}, {i} bytes");
                assert!(u.irq.level());
            }
            for _ in 0..level {
                rd(&mut u, 0);
            }
            assert!(!u.irq.level());
        }
        // Priorities: line status > RX data > THRE > modem status.
        wr(&mut u, 2, 0x07);
        wr(&mut u, 1, IER_RLS | IER_RDA | IER_THRE | IER_MS);
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x02, "THRE on enabling");
        u.push_rx(5);
        wr(&mut u, 0, b'!');
        for _ in 0..16 {
            u.push_rx(6);
        }
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x06, "overrun: line status first");
        rd(&mut u, 5);
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x04, "then RX data");
        while rd(&mut u, 5) & LSR_DR != 0 {
            rd(&mut u, 0);
        }
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x02, "then THRE");
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x01, "THRE cleared by the IIR read");
        wr(&mut u, 4, 0x10); // loopback with all outputs off: CTS/DSR/DCD drop -> MSR deltas
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x00, "modem status last");
        rd(&mut u, 6);
        assert_eq!(rd(&mut u, 2) & 0x0f, 0x01);
        assert!(!u.irq.level());
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut u = Uart::new();
        wr(&mut u, 2, 0x81);
        wr(&mut u, 1, 0x07);
        u.push_rx(7);
        wr(&mut u, 0, b'z');
        let mut w = SnapWriter::new();
        u.save(&mut w);
        let b = w.into_bytes();
        let u2 = Uart::restore(&mut SnapReader::new(&b)).unwrap();
        assert_eq!(u, u2);
        for n in 0..b.len() {
            assert!(Uart::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(1);
        for _ in 0..100_000 {
            let now = g.tick();
            let off = g.below(10) as u16;
            let sz = g.size();
            if g.below(2) == 0 {
                let v = g.next() as u32;
                u.pio_write(off, sz, v, now);
            } else {
                u.pio_read(off, sz, now);
            }
            if g.below(5) == 0 {
                u.push_rx(g.next() as u8);
            }
            if u.output.len() > 4096 {
                u.drain_output();
            }
            assert!(u.rx.len() <= FIFO_LEN);
        }
    }
}
