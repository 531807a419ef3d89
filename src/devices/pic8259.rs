//! The 8259A PIC pair: master at 0x20/0x21, slave at 0xa0/0xa1 cascaded on master IRQ2,
//! edge/level control (ELCR) at 0x4d0/0x4d1.
//!
//! [`Pic`] implements [`PioDevice`] with base 0: the offset is the port number itself
//! (0x20, 0x21, 0xa0, 0xa1, 0x4d0, 0x4d1; other ports read 0xff). Inputs arrive through
//! [`IrqSink::set_irq`] (lines 0..=15). The CPU side is [`Pic::intr`] (INTR pin) and
//! [`Pic::acknowledge`] (the INTA cycle, returning the vector).

use super::{IrqSink, Persist, PioDevice, SnapError, SnapReader, SnapWriter};

/// One 8259A.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Chip {
    /// Input levels last seen (for edge detection).
    last_irr: u8,
    irr: u8,
    isr: u8,
    imr: u8,
    elcr: u8,
    elcr_mask: u8,
    irq_base: u8,
    priority_add: u8,
    read_isr: bool,
    poll: bool,
    special_mask: bool,
    init_state: u8,
    init4: bool,
    single: bool,
    auto_eoi: bool,
    rotate_on_auto_eoi: bool,
    special_fully_nested: bool,
}

impl Chip {
    fn new(elcr_mask: u8) -> Self {
        Chip {
            elcr_mask,
            ..Default::default()
        }
    }

    /// Priority (0 = highest) of the highest-priority bit of `mask`, 8 if none.
    fn priority(&self, mask: u8) -> u8 {
        if mask == 0 {
            return 8;
        }
        let mut p = 0u8;
        while mask & (1 << ((p + self.priority_add) & 7)) == 0 {
            p += 1;
        }
        p
    }

    /// The input that would be delivered now, if any.
    fn get_irq(&self, is_master: bool) -> Option<u8> {
        let p = self.priority(self.irr & !self.imr);
        if p == 8 {
            return None;
        }
        let mut in_service = self.isr;
        if self.special_mask {
            in_service &= !self.imr;
        }
        if self.special_fully_nested && is_master {
            in_service &= !(1 << 2);
        }
        if p < self.priority(in_service) {
            Some((p + self.priority_add) & 7)
        } else {
            None
        }
    }

    fn set_irq(&mut self, irq: u8, level: bool) {
        let m = 1u8 << (irq & 7);
        if self.elcr & m != 0 {
            if level {
                self.irr |= m;
                self.last_irr |= m;
            } else {
                self.irr &= !m;
                self.last_irr &= !m;
            }
        } else if level {
            if self.last_irr & m == 0 {
                self.irr |= m;
            }
            self.last_irr |= m;
        } else {
            self.last_irr &= !m;
        }
    }

    fn intack(&mut self, irq: u8) {
        let m = 1u8 << (irq & 7);
        if self.auto_eoi {
            if self.rotate_on_auto_eoi {
                self.priority_add = (irq + 1) & 7;
            }
        } else {
            self.isr |= m;
        }
        if self.elcr & m == 0 {
            self.irr &= !m;
        }
    }

    fn init_reset(&mut self) {
        let keep_elcr = (self.elcr, self.elcr_mask);
        self.last_irr = 0;
        self.irr &= self.elcr;
        *self = Chip {
            irr: self.irr,
            elcr: keep_elcr.0,
            elcr_mask: keep_elcr.1,
            ..Default::default()
        };
    }

    fn write(&mut self, port1: bool, v: u8) {
        if !port1 {
            if v & 0x10 != 0 {
                self.init_reset();
                self.init_state = 1;
                self.init4 = v & 1 != 0;
                self.single = v & 2 != 0;
            } else if v & 0x08 != 0 {
                if v & 0x04 != 0 {
                    self.poll = true;
                }
                if v & 0x02 != 0 {
                    self.read_isr = v & 1 != 0;
                }
                if v & 0x40 != 0 {
                    self.special_mask = v & 0x20 != 0;
                }
            } else {
                match v >> 5 {
                    0 | 4 => self.rotate_on_auto_eoi = v >> 7 != 0,
                    1 | 5 => {
                        let p = self.priority(self.isr);
                        if p != 8 {
                            let irq = (p + self.priority_add) & 7;
                            self.isr &= !(1 << irq);
                            if v >> 5 == 5 {
                                self.priority_add = (irq + 1) & 7;
                            }
                        }
                    }
                    3 => self.isr &= !(1 << (v & 7)),
                    6 => self.priority_add = ((v & 7) + 1) & 7,
                    7 => {
                        let irq = v & 7;
                        self.isr &= !(1 << irq);
                        self.priority_add = (irq + 1) & 7;
                    }
                    _ => {} // 2: no operation
                }
            }
        } else {
            match self.init_state {
                0 => self.imr = v,
                1 => {
                    self.irq_base = v & 0xf8;
                    self.init_state = match (self.single, self.init4) {
                        (true, true) => 3,
                        (true, false) => 0,
                        (false, _) => 2,
                    };
                }
                2 => self.init_state = if self.init4 { 3 } else { 0 },
                _ => {
                    self.special_fully_nested = v & 0x10 != 0;
                    self.auto_eoi = v & 0x02 != 0;
                    self.init_state = 0;
                }
            }
        }
    }

    fn save(&self, w: &mut SnapWriter) {
        for b in [
            self.last_irr,
            self.irr,
            self.isr,
            self.imr,
            self.elcr,
            self.irq_base,
            self.priority_add,
            self.init_state,
        ] {
            w.u8(b);
        }
        for b in [
            self.read_isr,
            self.poll,
            self.special_mask,
            self.init4,
            self.single,
            self.auto_eoi,
            self.rotate_on_auto_eoi,
            self.special_fully_nested,
        ] {
            w.bool(b);
        }
    }

    fn restore(r: &mut SnapReader, elcr_mask: u8) -> Result<Self, SnapError> {
        let mut c = Chip::new(elcr_mask);
        c.last_irr = r.u8()?;
        c.irr = r.u8()?;
        c.isr = r.u8()?;
        c.imr = r.u8()?;
        c.elcr = r.u8()? & elcr_mask;
        c.irq_base = r.u8()? & 0xf8;
        c.priority_add = r.u8()? & 7;
        c.init_state = r.u8()?;
        if c.init_state > 3 {
            return Err(SnapError::Invalid("pic init state"));
        }
        c.read_isr = r.bool()?;
        c.poll = r.bool()?;
        c.special_mask = r.bool()?;
        c.init4 = r.bool()?;
        c.single = r.bool()?;
        c.auto_eoi = r.bool()?;
        c.rotate_on_auto_eoi = r.bool()?;
        c.special_fully_nested = r.bool()?;
        Ok(c)
    }
}

/// Master and slave 8259A.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pic {
    chips: [Chip; 2],
}

impl Default for Pic {
    fn default() -> Self {
        Self::new()
    }
}

impl Pic {
    pub fn new() -> Self {
        Pic {
            chips: [Chip::new(0xf8), Chip::new(0xde)],
        }
    }

    /// Propagate the slave's output to master input 2.
    fn update(&mut self) {
        let slave = self.chips[1].get_irq(false).is_some();
        self.chips[0].set_irq(2, slave);
    }

    /// The INTR pin to the CPU (or to LAPIC LINT0 in ExtINT mode).
    pub fn intr(&self) -> bool {
        self.chips[0].get_irq(true).is_some()
    }

    /// The vector an INTA cycle would return now, without acknowledging.
    pub fn pending_vector(&self) -> Option<u8> {
        let irq = self.chips[0].get_irq(true)?;
        if irq == 2 {
            let s = self.chips[1].get_irq(false).unwrap_or(7);
            Some(self.chips[1].irq_base.wrapping_add(s))
        } else {
            Some(self.chips[0].irq_base.wrapping_add(irq))
        }
    }

    /// The CPU's INTA cycle: moves the request to in-service and returns its vector.
    /// With nothing pending this is the spurious IRQ7 (or IRQ15 from the slave).
    pub fn acknowledge(&mut self) -> u8 {
        let vec = match self.chips[0].get_irq(true) {
            Some(2) => {
                let s = match self.chips[1].get_irq(false) {
                    Some(s) => {
                        self.chips[1].intack(s);
                        s
                    }
                    None => 7,
                };
                self.chips[0].intack(2);
                self.chips[1].irq_base.wrapping_add(s)
            }
            Some(irq) => {
                self.chips[0].intack(irq);
                self.chips[0].irq_base.wrapping_add(irq)
            }
            None => self.chips[0].irq_base.wrapping_add(7),
        };
        self.update();
        vec
    }

    /// Interrupt mask register of master (0) or slave (1).
    pub fn imr(&self, chip: usize) -> u8 {
        self.chips[chip & 1].imr
    }
    pub fn isr(&self, chip: usize) -> u8 {
        self.chips[chip & 1].isr
    }
    pub fn irr(&self, chip: usize) -> u8 {
        self.chips[chip & 1].irr
    }

    fn poll_read(&mut self, chip: usize) -> u8 {
        let c = &mut self.chips[chip];
        c.poll = false;
        match c.get_irq(chip == 0) {
            Some(irq) => {
                c.intack(irq);
                self.update();
                0x80 | irq
            }
            None => 0,
        }
    }
}

impl IrqSink for Pic {
    fn set_irq(&mut self, line: u8, level: bool) {
        if line < 16 {
            self.chips[(line >> 3) as usize].set_irq(line & 7, level);
            self.update();
        }
    }
}

impl PioDevice for Pic {
    fn pio_read(&mut self, port: u16, _size: u8, _now: u64) -> u32 {
        let v = match port {
            0x20 | 0x21 | 0xa0 | 0xa1 => {
                let chip = (port >> 7) as usize & 1;
                if self.chips[chip].poll {
                    self.poll_read(chip)
                } else if port & 1 == 0 {
                    let c = &self.chips[chip];
                    if c.read_isr {
                        c.isr
                    } else {
                        c.irr
                    }
                } else {
                    self.chips[chip].imr
                }
            }
            0x4d0 => self.chips[0].elcr,
            0x4d1 => self.chips[1].elcr,
            _ => 0xff,
        };
        v as u32
    }

    fn pio_write(&mut self, port: u16, _size: u8, value: u32, _now: u64) {
        let v = value as u8;
        match port {
            0x20 | 0x21 | 0xa0 | 0xa1 => {
                let chip = (port >> 7) as usize & 1;
                self.chips[chip].write(port & 1 != 0, v);
            }
            0x4d0 | 0x4d1 => {
                let c = &mut self.chips[(port & 1) as usize];
                c.elcr = v & c.elcr_mask;
            }
            _ => return,
        }
        self.update();
    }
}

impl Persist for Pic {
    fn save(&self, w: &mut SnapWriter) {
        self.chips[0].save(w);
        self.chips[1].save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        Ok(Pic {
            chips: [Chip::restore(r, 0xf8)?, Chip::restore(r, 0xde)?],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    /// Linux's init_8259A: master base 0x30, slave 0x38, cascade, 8086 mode.
    fn linux_init(p: &mut Pic, auto_eoi: bool) {
        let w = |p: &mut Pic, port: u16, v: u8| p.pio_write(port, 1, v as u32, 0);
        w(p, 0x21, 0xff);
        w(p, 0xa1, 0xff);
        w(p, 0x20, 0x11);
        w(p, 0x21, 0x30);
        w(p, 0x21, 0x04);
        w(p, 0x21, if auto_eoi { 0x03 } else { 0x01 });
        w(p, 0xa0, 0x11);
        w(p, 0xa1, 0x38);
        w(p, 0xa1, 0x02);
        w(p, 0xa1, 0x01);
        w(p, 0x21, 0x00);
        w(p, 0xa1, 0x00);
    }

    #[test]
    fn edge_delivery_eoi_and_priority() {
        let mut p = Pic::new();
        linux_init(&mut p, false);
        assert!(!p.intr());
        p.set_irq(4, true);
        p.set_irq(1, true);
        assert_eq!(p.pending_vector(), Some(0x31));
        assert_eq!(p.acknowledge(), 0x31);
        assert_eq!(p.isr(0), 0x02);
        // IRQ4 is lower priority than the in-service IRQ1
        assert!(!p.intr());
        p.pio_write(0x20, 1, 0x20, 0); // non-specific EOI
        assert_eq!(p.isr(0), 0);
        assert_eq!(p.acknowledge(), 0x34);
        // edge: holding the line high does not re-request
        p.pio_write(0x20, 1, 0x64, 0); // specific EOI IRQ4
        assert!(!p.intr());
        p.set_irq(4, false);
        p.set_irq(4, true);
        assert!(p.intr());
        // mask
        p.pio_write(0x21, 1, 0x10, 0);
        assert!(!p.intr());
        assert_eq!(p.pio_read(0x21, 1, 0), 0x10);
        // OCW3 read IRR / ISR
        p.pio_write(0x20, 1, 0x0a, 0);
        assert_eq!(p.pio_read(0x20, 1, 0), 0x10);
        p.pio_write(0x20, 1, 0x0b, 0);
        assert_eq!(p.pio_read(0x20, 1, 0), 0x00);
    }

    #[test]
    fn cascade_level_spurious_and_auto_eoi() {
        let mut p = Pic::new();
        linux_init(&mut p, false);
        p.pio_write(0x4d1, 1, 0xff, 0);
        assert_eq!(p.pio_read(0x4d1, 1, 0), 0xde);
        p.set_irq(9, true); // level triggered on the slave
        assert_eq!(p.pending_vector(), Some(0x39));
        assert_eq!(p.acknowledge(), 0x39);
        assert_eq!(p.isr(1), 0x02);
        assert_eq!(p.isr(0), 0x04);
        p.pio_write(0xa0, 1, 0x20, 0);
        p.pio_write(0x20, 1, 0x20, 0);
        assert!(p.intr(), "level still high: requested again");
        p.set_irq(9, false);
        // master IRQ2 latched the edge; the slave has nothing any more: spurious IRQ15
        assert!(p.intr());
        assert_eq!(p.acknowledge(), 0x3f, "spurious IRQ15");
        assert_eq!(p.isr(1), 0, "spurious does not set the slave's ISR");
        p.pio_write(0x20, 1, 0x20, 0);
        assert!(!p.intr());
        assert_eq!(p.acknowledge(), 0x37, "spurious IRQ7");
        assert_eq!(p.isr(0), 0, "spurious does not set ISR");
        // auto-EOI
        let mut p = Pic::new();
        linux_init(&mut p, true);
        p.set_irq(0, true);
        assert_eq!(p.acknowledge(), 0x30);
        assert_eq!(p.isr(0), 0);
        // poll mode
        p.set_irq(3, true);
        p.pio_write(0x20, 1, 0x0c, 0);
        assert_eq!(p.pio_read(0x20, 1, 0), 0x83);
        assert!(!p.intr());
    }

    #[test]
    fn rotation_and_special_mask() {
        let mut p = Pic::new();
        linux_init(&mut p, false);
        p.pio_write(0x20, 1, 0xc4, 0); // set priority: IRQ4 lowest -> IRQ5 highest
        p.set_irq(1, true);
        p.set_irq(6, true);
        assert_eq!(p.acknowledge(), 0x36);
        p.pio_write(0x20, 1, 0x68, 0); // special mask mode on
        p.pio_write(0x21, 1, 0x40, 0); // mask in-service IRQ6
        assert_eq!(
            p.acknowledge(),
            0x31,
            "special mask lets lower priority through"
        );
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut p = Pic::new();
        linux_init(&mut p, false);
        p.set_irq(10, true);
        p.set_irq(3, true);
        p.acknowledge();
        let mut w = SnapWriter::new();
        p.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(Pic::restore(&mut SnapReader::new(&b)).unwrap(), p);
        for n in 0..b.len() {
            assert!(Pic::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(2);
        let ports = [0x20u16, 0x21, 0xa0, 0xa1, 0x4d0, 0x4d1, 0x22];
        for _ in 0..100_000 {
            let port = ports[g.below(7) as usize];
            match g.below(4) {
                0 => {
                    p.pio_read(port, 1, 0);
                }
                1 => p.set_irq(g.below(20) as u8, g.below(2) == 0),
                2 => {
                    p.acknowledge();
                }
                _ => p.pio_write(port, g.size(), g.next() as u32, 0),
            }
        }
    }
}
