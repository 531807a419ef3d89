//! I/O APIC at 0xfec00000: IOREGSEL (offset 0x00) / IOWIN (offset 0x10), 24 redirection
//! entries, edge and level triggering with remote IRR, EOI from the local APICs.
//!
//! [`IoApic`] implements [`MmioDevice`] (offsets from its base) and [`IrqSink`] (GSI 0..=23).
//! Line levels are taken as "asserted" (the polarity bit is stored but not applied, as in QEMU:
//! the MADT must describe every ISA line as active high). Deliveries are queued as
//! [`IoApicMsg`]s for the machine ([`IoApic::take_messages`]), which hands fixed/lowest-priority
//! ones to the addressed [`super::lapic::Lapic::accept`]; level-triggered deliveries set remote
//! IRR until [`IoApic::eoi`] with the vector.

use super::{IrqSink, MmioDevice, Persist, SnapError, SnapReader, SnapWriter};

pub const IOAPIC_BASE: u64 = 0xfec0_0000;
pub const IOAPIC_PINS: usize = 24;
const VERSION: u32 = 0x0017_0011;
const RTE_MASKED: u64 = 1 << 16;
const RTE_LEVEL: u64 = 1 << 15;
const RTE_REMOTE_IRR: u64 = 1 << 14;
const RTE_DELIVS: u64 = 1 << 12;
const RTE_RO: u64 = RTE_REMOTE_IRR | RTE_DELIVS;
const MAX_MSGS: usize = 256;

/// An interrupt message from the I/O APIC to local APIC(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoApicMsg {
    pub vector: u8,
    /// 0 fixed, 1 lowest priority, 2 SMI, 4 NMI, 5 INIT, 7 ExtINT.
    pub delivery_mode: u8,
    pub logical: bool,
    /// Destination APIC ID (physical) or logical mask (bits 63:56 of the entry).
    pub dest: u8,
    pub level: bool,
}

/// The I/O APIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoApic {
    id: u8,
    sel: u8,
    rte: [u64; IOAPIC_PINS],
    /// Input levels.
    levels: u32,
    /// Requests waiting for delivery (edge: latched edge; level: line asserted).
    irr: u32,
    msgs: Vec<IoApicMsg>,
}

impl IoApic {
    pub fn new(id: u8) -> Self {
        IoApic {
            id: id & 0x0f,
            sel: 0,
            rte: [RTE_MASKED; IOAPIC_PINS],
            levels: 0,
            irr: 0,
            msgs: Vec::new(),
        }
    }

    /// Redirection entry `pin` (for tests and diagnostics).
    pub fn entry(&self, pin: usize) -> u64 {
        self.rte[pin % IOAPIC_PINS]
    }

    /// Deliveries since the last call, in order.
    pub fn take_messages(&mut self) -> Vec<IoApicMsg> {
        std::mem::take(&mut self.msgs)
    }

    fn service(&mut self) {
        // Only the requested pins, in ascending order (this runs on every pass of the run
        // loop, and almost always finds nothing).
        let mut todo = self.irr;
        while todo != 0 {
            let pin = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            if pin >= IOAPIC_PINS {
                break;
            }
            let m = 1u32 << pin;
            let e = self.rte[pin];
            if e & RTE_MASKED != 0 {
                continue;
            }
            let level = e & RTE_LEVEL != 0;
            if level {
                if e & RTE_REMOTE_IRR != 0 {
                    continue;
                }
                self.rte[pin] |= RTE_REMOTE_IRR;
            } else {
                self.irr &= !m;
            }
            if self.msgs.len() < MAX_MSGS {
                self.msgs.push(IoApicMsg {
                    vector: e as u8,
                    delivery_mode: ((e >> 8) & 7) as u8,
                    logical: e & (1 << 11) != 0,
                    dest: (e >> 56) as u8,
                    level,
                });
            }
        }
    }

    /// End of interrupt for `vector` (broadcast from a local APIC): clears remote IRR of the
    /// level-triggered entries with that vector and redelivers those still asserted.
    pub fn eoi(&mut self, vector: u8) {
        for pin in 0..IOAPIC_PINS {
            let e = self.rte[pin];
            if e as u8 == vector && e & RTE_LEVEL != 0 && e & RTE_REMOTE_IRR != 0 {
                self.rte[pin] &= !RTE_REMOTE_IRR;
                if self.levels & (1 << pin) != 0 {
                    self.irr |= 1 << pin;
                }
            }
        }
        self.service();
    }

    fn read_reg(&self) -> u32 {
        match self.sel {
            0x00 => (self.id as u32) << 24,
            0x01 => VERSION,
            0x02 => (self.id as u32) << 24,
            0x10..=0x3f => {
                let e = self.rte[((self.sel - 0x10) / 2) as usize];
                if self.sel & 1 == 0 {
                    e as u32
                } else {
                    (e >> 32) as u32
                }
            }
            _ => 0,
        }
    }

    fn write_reg(&mut self, v: u32) {
        match self.sel {
            0x00 => self.id = ((v >> 24) & 0x0f) as u8,
            0x10..=0x3f => {
                let pin = ((self.sel - 0x10) / 2) as usize;
                let e = self.rte[pin];
                let ne = if self.sel & 1 == 0 {
                    (e & !0xffff_ffff) | (v as u64 & !RTE_RO) | (e & RTE_RO)
                } else {
                    (e & 0xffff_ffff) | (v as u64) << 32
                };
                // Switching to edge drops remote IRR.
                let ne = if ne & RTE_LEVEL == 0 {
                    ne & !RTE_REMOTE_IRR
                } else {
                    ne
                };
                self.rte[pin] = ne & 0xff00_0000_0001_ffff;
                if ne & RTE_LEVEL != 0 && self.levels & (1 << pin) != 0 {
                    self.irr |= 1 << pin;
                }
                self.service();
            }
            _ => {}
        }
    }
}

impl IrqSink for IoApic {
    fn set_irq(&mut self, line: u8, level: bool) {
        let pin = line as usize;
        if pin >= IOAPIC_PINS {
            return;
        }
        let m = 1u32 << pin;
        let was = self.levels & m != 0;
        if level {
            self.levels |= m;
        } else {
            self.levels &= !m;
        }
        if self.rte[pin] & RTE_LEVEL != 0 {
            if level {
                self.irr |= m;
            } else {
                self.irr &= !m;
            }
        } else if level && !was {
            self.irr |= m;
        }
        self.service();
    }
}

impl MmioDevice for IoApic {
    fn mmio_read(&mut self, offset: u64, size: u8, _now: u64) -> u64 {
        let v = match offset {
            0x00 => self.sel as u32,
            0x10 => self.read_reg(),
            _ => 0,
        };
        v as u64 & super::size_mask(size)
    }
    fn mmio_write(&mut self, offset: u64, _size: u8, value: u64, _now: u64) {
        match offset {
            0x00 => self.sel = value as u8,
            0x10 => self.write_reg(value as u32),
            0x40 => self.eoi(value as u8), // the version 0x20 EOI register
            _ => {}
        }
    }
}

impl Persist for IoApic {
    fn save(&self, w: &mut SnapWriter) {
        w.u8(self.id);
        w.u8(self.sel);
        for e in &self.rte {
            w.u64(*e);
        }
        w.u32(self.levels);
        w.u32(self.irr);
        w.u32(self.msgs.len() as u32);
        for m in &self.msgs {
            w.u8(m.vector);
            w.u8(m.delivery_mode);
            w.bool(m.logical);
            w.u8(m.dest);
            w.bool(m.level);
        }
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let mut a = IoApic::new(r.u8()?);
        a.sel = r.u8()?;
        for e in a.rte.iter_mut() {
            *e = r.u64()? & 0xff00_0000_0001_ffff;
        }
        a.levels = r.u32()? & 0xff_ffff;
        a.irr = r.u32()? & 0xff_ffff;
        let n = r.u32()? as usize;
        if n > MAX_MSGS {
            return Err(SnapError::Invalid("ioapic message count"));
        }
        for _ in 0..n {
            a.msgs.push(IoApicMsg {
                vector: r.u8()?,
                delivery_mode: r.u8()? & 7,
                logical: r.bool()?,
                dest: r.u8()?,
                level: r.bool()?,
            });
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn set_rte(a: &mut IoApic, pin: u8, lo: u32, hi: u32) {
        a.mmio_write(0, 4, (0x10 + 2 * pin) as u64, 0);
        a.mmio_write(0x10, 4, lo as u64, 0);
        a.mmio_write(0, 4, (0x11 + 2 * pin) as u64, 0);
        a.mmio_write(0x10, 4, hi as u64, 0);
    }

    #[test]
    fn registers() {
        let mut a = IoApic::new(1);
        a.mmio_write(0, 4, 1, 0);
        assert_eq!(a.mmio_read(0x10, 4, 0), 0x0017_0011);
        a.mmio_write(0, 4, 0, 0);
        assert_eq!(a.mmio_read(0x10, 4, 0), 1 << 24);
        a.mmio_write(0, 4, 0x10, 0);
        assert_eq!(a.mmio_read(0x10, 4, 0), 0x10000);
        set_rte(&mut a, 5, 0x0000_5031 | RTE_DELIVS as u32, 0x0300_0000);
        assert_eq!(
            a.entry(5),
            0x0300_0000_0000_0031,
            "remote IRR and delivery status are read-only"
        );
    }

    #[test]
    fn edge_and_level_delivery() {
        let mut a = IoApic::new(0);
        // pin 2 edge, vector 0x30, masked first
        a.set_irq(2, true);
        a.set_irq(2, false);
        assert!(a.take_messages().is_empty());
        set_rte(&mut a, 2, 0x30, 0);
        let m = a.take_messages();
        assert_eq!(
            m.len(),
            1,
            "edge latched while masked is delivered on unmask"
        );
        assert_eq!((m[0].vector, m[0].level), (0x30, false));
        a.set_irq(2, true);
        a.set_irq(2, true);
        assert_eq!(a.take_messages().len(), 1, "one edge, one message");
        // pin 9 level, vector 0x39
        set_rte(&mut a, 9, 0x8039, 0x0100_0000);
        a.set_irq(9, true);
        let m = a.take_messages();
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].vector, m[0].level, m[0].dest), (0x39, true, 1));
        assert_ne!(a.entry(9) & RTE_REMOTE_IRR, 0);
        a.set_irq(9, true);
        assert!(a.take_messages().is_empty(), "remote IRR blocks");
        a.eoi(0x39);
        assert_eq!(
            a.take_messages().len(),
            1,
            "still asserted: redelivered after EOI"
        );
        a.set_irq(9, false);
        a.eoi(0x39);
        assert!(a.take_messages().is_empty());
        assert_eq!(a.entry(9) & RTE_REMOTE_IRR, 0);
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut a = IoApic::new(2);
        set_rte(&mut a, 4, 0x8044, 0);
        a.set_irq(4, true);
        let mut w = SnapWriter::new();
        a.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(IoApic::restore(&mut SnapReader::new(&b)).unwrap(), a);
        for n in 0..b.len() {
            assert!(IoApic::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(9);
        for _ in 0..100_000 {
            let off = [0u64, 0x10, 0x40, 0x20, 0x1000][g.below(5) as usize];
            match g.below(5) {
                0 => {
                    a.mmio_read(off, g.size(), 0);
                }
                1 => a.set_irq(g.below(30) as u8, g.below(2) == 0),
                2 => a.eoi(g.next() as u8),
                3 => {
                    if g.below(8) == 0 {
                        a.take_messages();
                    }
                }
                _ => a.mmio_write(off, g.size(), g.next(), 0),
            }
            assert!(a.msgs.len() <= MAX_MSGS);
        }
    }
}
