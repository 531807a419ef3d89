//! ACPI fixed hardware: PM1a event block (status/enable), PM1a control and the PM timer, laid
//! out as QEMU's PIIX4 PM device at I/O base 0x600 (the FADT must point there):
//! PM1a_EVT_BLK = 0x600 (PM1_STS 0x600, PM1_EN 0x602), PM1a_CNT_BLK = 0x604, PM_TMR_BLK = 0x608.
//!
//! [`AcpiPm`] implements [`PioDevice`] with base 0x600 (offsets 0..=0xb). The PM timer is
//! 3.579545 MHz of virtual time, 24 bits wide (the FADT must not set TMR_VAL_EXT); TMR_STS is
//! set every time bit 23 of the counter flips. The SCI (ISA IRQ 9, level, active high as the
//! MADT's interrupt source override should say) is high while any enabled status bit is set and
//! SCI_EN is 1. SCI_EN reads 1 from reset (no SMI command port: the FADT's SMI_CMD is 0, so
//! the OS finds the hardware already in ACPI mode). Writing SLP_EN with SLP_TYP = [`S5_SLP_TYP`]
//! requests power-off ([`AcpiPm::power_off_requested`]); other sleep types are recorded in
//! [`AcpiPm::sleep_request`] and otherwise ignored. The DSDT's `_S5` package must hold
//! [`S5_SLP_TYP`].

use super::{ns_of_tick, ticks_at, IrqLine, Persist, PioDevice, SnapError, SnapReader, SnapWriter};

pub const PM_BASE: u16 = 0x600;
pub const PM_TIMER_HZ: u64 = 3_579_545;
pub const SCI_IRQ: u8 = 9;
/// SLP_TYP value meaning soft-off (QEMU's PIIX4 convention: `_S5` = 0).
pub const S5_SLP_TYP: u8 = 0;

const STS_TMR: u16 = 0x0001;
const STS_WAK: u16 = 0x8000;
const STS_MASK: u16 = 0x8d31;
const EN_MASK: u16 = 0x0521;
const CNT_SCI_EN: u16 = 0x0001;
const CNT_SLP_EN: u16 = 0x2000;
const TMR_HALF: u64 = 1 << 23;

/// PM1a registers and the PM timer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcpiPm {
    sts: u16,
    en: u16,
    cnt: u16,
    /// Timer ticks up to which TMR_STS was computed.
    processed_tick: u64,
    /// SLP_TYP of a sleep request other than S5.
    pub sleep_request: Option<u8>,
    pub power_off_requested: bool,
    /// The SCI (ISA IRQ 9).
    pub sci: IrqLine,
}

impl Default for AcpiPm {
    fn default() -> Self {
        Self::new()
    }
}

impl AcpiPm {
    pub fn new() -> Self {
        AcpiPm {
            sts: 0,
            en: 0,
            cnt: CNT_SCI_EN,
            processed_tick: 0,
            sleep_request: None,
            power_off_requested: false,
            sci: IrqLine::default(),
        }
    }

    /// The 24-bit PM timer value at `now`.
    pub fn timer(&self, now: u64) -> u32 {
        (ticks_at(now, PM_TIMER_HZ) & 0xff_ffff) as u32
    }

    /// Set TMR_STS for every flip of bit 23 up to `now`.
    pub fn advance(&mut self, now: u64) {
        let t = ticks_at(now, PM_TIMER_HZ);
        if t / TMR_HALF > self.processed_tick / TMR_HALF {
            self.sts |= STS_TMR;
        }
        self.processed_tick = self.processed_tick.max(t);
        self.update_sci();
    }

    /// Deadline of the next timer-carry SCI (only when TMR_EN is set and TMR_STS clear).
    pub fn next_event(&self) -> Option<u64> {
        if self.en & STS_TMR == 0 || self.sts & STS_TMR != 0 || self.cnt & CNT_SCI_EN == 0 {
            return None;
        }
        let next = (self.processed_tick / TMR_HALF + 1).saturating_mul(TMR_HALF);
        Some(ns_of_tick(next, PM_TIMER_HZ))
    }

    fn update_sci(&mut self) {
        let level = self.cnt & CNT_SCI_EN != 0 && self.sts & self.en & EN_MASK != 0;
        self.sci.set(level);
    }

    fn write_cnt(&mut self, v: u16) {
        self.cnt = v & !CNT_SLP_EN & 0x1c07;
        if v & CNT_SLP_EN != 0 {
            let typ = ((v >> 10) & 7) as u8;
            if typ == S5_SLP_TYP {
                self.power_off_requested = true;
            } else {
                self.sleep_request = Some(typ);
                self.sts |= STS_WAK;
            }
        }
    }
}

impl PioDevice for AcpiPm {
    fn pio_read(&mut self, offset: u16, size: u8, now: u64) -> u32 {
        self.advance(now);
        let regs = [self.sts, self.en, self.cnt, 0];
        let v = match offset {
            8..=11 => (self.timer(now) as u64) >> (8 * (offset - 8) as u32),
            0..=7 => {
                let word = regs[(offset / 2) as usize] as u64
                    | (regs[((offset / 2 + 1) & 3) as usize] as u64) << 16;
                word >> (8 * (offset & 1) as u32)
            }
            _ => u64::MAX,
        };
        (v & super::size_mask(size)) as u32
    }

    fn pio_write(&mut self, offset: u16, size: u8, value: u32, now: u64) {
        self.advance(now);
        // Registers are 16 bits; byte writes merge into the word.
        let merge = |old: u16, off: u16| -> u16 {
            if size == 1 {
                let sh = 8 * (off & 1) as u32;
                (old & !(0xff << sh)) | (((value & 0xff) as u16) << sh)
            } else {
                value as u16
            }
        };
        match offset {
            0 | 1 => {
                // write 1 to clear; a byte write only touches its byte
                let clear = if size == 1 {
                    ((value & 0xff) as u16) << (8 * (offset & 1) as u32)
                } else {
                    value as u16
                };
                self.sts &= !(clear & STS_MASK);
            }
            2 | 3 => self.en = merge(self.en, offset) & EN_MASK,
            4 | 5 => {
                let v = merge(self.cnt, offset);
                self.write_cnt(v);
            }
            _ => {}
        }
        self.update_sci();
    }
}

impl Persist for AcpiPm {
    fn save(&self, w: &mut SnapWriter) {
        w.u16(self.sts);
        w.u16(self.en);
        w.u16(self.cnt);
        w.u64(self.processed_tick);
        w.opt_u64(self.sleep_request.map(u64::from));
        w.bool(self.power_off_requested);
        self.sci.save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let sts = r.u16()? & STS_MASK;
        let en = r.u16()? & EN_MASK;
        let cnt = r.u16()? & 0x1c07;
        let processed_tick = r.u64()?;
        let sleep_request = match r.opt_u64()? {
            Some(v) if v < 8 => Some(v as u8),
            Some(_) => return Err(SnapError::Invalid("acpi sleep type")),
            None => None,
        };
        Ok(AcpiPm {
            sts,
            en,
            cnt,
            processed_tick,
            sleep_request,
            power_off_requested: r.bool()?,
            sci: IrqLine::restore(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    #[test]
    fn pm_timer_counts_exactly() {
        let mut p = AcpiPm::new();
        assert_eq!(p.pio_read(8, 4, 0), 0);
        assert_eq!(p.pio_read(8, 4, 1_000_000_000), 3_579_545);
        assert_eq!(
            p.pio_read(8, 4, ns_of_tick(1 << 24, PM_TIMER_HZ)),
            0,
            "24-bit wrap"
        );
        assert_eq!(p.pio_read(8, 4, ns_of_tick((1 << 24) + 5, PM_TIMER_HZ)), 5);
    }

    #[test]
    fn timer_carry_sci_and_power_off() {
        let mut p = AcpiPm::new();
        p.pio_write(2, 2, 0x0001, 0); // TMR_EN
        let t = p.next_event().unwrap();
        assert_eq!(t, ns_of_tick(1 << 23, PM_TIMER_HZ));
        p.advance(t - 1);
        assert!(!p.sci.level());
        p.advance(t);
        assert!(p.sci.level());
        assert_eq!(p.pio_read(0, 2, t) & 1, 1);
        assert_eq!(p.next_event(), None);
        p.pio_write(0, 2, 0x0001, t);
        assert!(!p.sci.level());
        assert_eq!(p.next_event(), Some(ns_of_tick(1 << 24, PM_TIMER_HZ)));
        assert_eq!(p.pio_read(4, 2, t) & 1, 1, "SCI_EN set");
        // S3 request is recorded, S5 powers off
        p.pio_write(4, 2, (1 << 10) | 0x2000 | 1, t);
        assert_eq!(p.sleep_request, Some(1));
        assert!(!p.power_off_requested);
        assert_eq!(p.pio_read(4, 2, t) & 0x2000, 0, "SLP_EN reads 0");
        p.pio_write(4, 2, ((S5_SLP_TYP as u32) << 10) | 0x2000, t);
        assert!(p.power_off_requested);
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut p = AcpiPm::new();
        p.pio_write(2, 2, 0x21, 5);
        p.advance(10_000_000_000);
        let mut w = SnapWriter::new();
        p.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(AcpiPm::restore(&mut SnapReader::new(&b)).unwrap(), p);
        for n in 0..b.len() {
            assert!(AcpiPm::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(7);
        for _ in 0..100_000 {
            let now = g.tick();
            let off = g.below(14) as u16;
            if g.below(2) == 0 {
                p.pio_write(off, g.size(), g.next() as u32, now);
            } else {
                p.pio_read(off, g.size(), now);
            }
        }
    }
}
