//! MC146818 RTC and CMOS NVRAM at 0x70 (index, bit 7 = NMI mask) / 0x71 (data), IRQ8.
//!
//! [`Rtc`] implements [`PioDevice`] with base 0x70 (offsets 0 and 1). Wall-clock time is
//! `epoch + virtual time`: the clock holds `base_secs` (seconds since 1970 at virtual time
//! `base_ns`) and derives the time registers on every read, so it never drifts. Guest writes to
//! the time registers move `base_secs` (keeping the sub-second phase, or restarting it when the
//! SET bit is cleared, as a real chip does). The update cycle is deterministic: register A's UIP
//! bit reads 1 during the last 244 µs of every virtual second. Periodic (register A rate),
//! alarm and update-ended interrupts set register C flags and drive IRQ8 while C.IRQF is set;
//! reading C clears it.

use super::{
    ns_of_tick, ticks_at, IrqLine, Persist, PioDevice, SnapError, SnapReader, SnapWriter,
    NS_PER_SEC,
};

pub const RTC_IRQ: u8 = 8;
/// 2000-01-01T00:00:00Z.
pub const DEFAULT_EPOCH: i64 = 946_684_800;
const UIP_NS: u64 = 244_000;
const RTC_HZ: u64 = 32_768;

const REG_A: usize = 0x0a;
const REG_B: usize = 0x0b;
const REG_C: usize = 0x0c;
const REG_D: usize = 0x0d;
const REG_CENTURY: usize = 0x32;
const B_SET: u8 = 0x80;
const B_PIE: u8 = 0x40;
const B_AIE: u8 = 0x20;
const B_UIE: u8 = 0x10;
const B_DM_BINARY: u8 = 0x04;
const B_24H: u8 = 0x02;
const C_IRQF: u8 = 0x80;
const C_PF: u8 = 0x40;
const C_AF: u8 = 0x20;
const C_UF: u8 = 0x10;

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month 1-12, day 1-31) of a day number since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

fn to_bcd(v: u8) -> u8 {
    ((v / 10) << 4) | (v % 10)
}

fn from_bcd(v: u8) -> u8 {
    (v >> 4).wrapping_mul(10).wrapping_add(v & 0x0f)
}

/// RAM sizes the CMOS memory bytes describe (as QEMU's pc_cmos_init fills them).
#[derive(Clone, Copy, Debug)]
pub struct RtcConfig {
    /// Wall-clock seconds since 1970 at virtual time 0.
    pub epoch: i64,
    pub ram_below_4g: u64,
    pub ram_above_4g: u64,
    pub cpus: u8,
}

impl Default for RtcConfig {
    fn default() -> Self {
        RtcConfig {
            epoch: DEFAULT_EPOCH,
            ram_below_4g: 128 << 20,
            ram_above_4g: 0,
            cpus: 1,
        }
    }
}

/// The RTC + NVRAM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rtc {
    cmos: [u8; 128],
    index: u8,
    nmi_disabled: bool,
    base_secs: i64,
    base_ns: u64,
    /// Virtual time up to which interrupt flags were computed.
    last_ns: u64,
    pub irq: IrqLine,
}

impl Rtc {
    pub fn new(cfg: RtcConfig) -> Self {
        let mut cmos = [0u8; 128];
        cmos[REG_A] = 0x26;
        cmos[REG_B] = B_24H;
        cmos[REG_D] = 0x80;
        // base memory 640 KiB
        cmos[0x15] = 0x80;
        cmos[0x16] = 0x02;
        let ext_kb = (cfg.ram_below_4g.saturating_sub(1 << 20) / 1024).min(0xffff) as u16;
        cmos[0x17..0x19].copy_from_slice(&ext_kb.to_le_bytes());
        cmos[0x30..0x32].copy_from_slice(&ext_kb.to_le_bytes());
        let above16 = (cfg.ram_below_4g.saturating_sub(16 << 20) >> 16).min(0xffff) as u16;
        cmos[0x34..0x36].copy_from_slice(&above16.to_le_bytes());
        let above4g = (cfg.ram_above_4g >> 16).min(0xff_ffff) as u32;
        cmos[0x5b..0x5e].copy_from_slice(&above4g.to_le_bytes()[..3]);
        cmos[0x5f] = cfg.cpus.saturating_sub(1);
        let mut r = Rtc {
            cmos,
            index: 0,
            nmi_disabled: false,
            base_secs: cfg.epoch,
            base_ns: 0,
            last_ns: 0,
            irq: IrqLine::default(),
        };
        r.refresh_time_regs(0);
        r
    }

    /// Whether the guest masked NMIs (bit 7 of the last index write).
    pub fn nmi_disabled(&self) -> bool {
        self.nmi_disabled
    }

    /// Raw NVRAM byte (for tests and firmware tables).
    pub fn cmos(&self, i: usize) -> u8 {
        self.cmos[i & 0x7f]
    }

    fn b(&self) -> u8 {
        self.cmos[REG_B]
    }

    fn halted(&self) -> bool {
        self.b() & B_SET != 0
    }

    /// Wall seconds since 1970 at `now`.
    pub fn wall_secs(&self, now: u64) -> i64 {
        self.base_secs
            .saturating_add((now.saturating_sub(self.base_ns) / NS_PER_SEC) as i64)
    }

    fn enc(&self, v: u8) -> u8 {
        if self.b() & B_DM_BINARY != 0 {
            v
        } else {
            to_bcd(v)
        }
    }

    fn dec(&self, v: u8) -> u8 {
        if self.b() & B_DM_BINARY != 0 {
            v
        } else {
            from_bcd(v)
        }
    }

    fn enc_hour(&self, h: u8) -> u8 {
        if self.b() & B_24H != 0 {
            self.enc(h)
        } else {
            let pm = if h >= 12 { 0x80 } else { 0 };
            let h12 = if h.is_multiple_of(12) { 12 } else { h % 12 };
            self.enc(h12) | pm
        }
    }

    fn dec_hour(&self, v: u8) -> u8 {
        if self.b() & B_24H != 0 {
            self.dec(v) % 24
        } else {
            let h12 = self.dec(v & 0x7f) % 12;
            h12 + if v & 0x80 != 0 { 12 } else { 0 }
        }
    }

    fn refresh_time_regs(&mut self, now: u64) {
        if self.halted() {
            return;
        }
        let t = self.wall_secs(now);
        let days = t.div_euclid(86_400);
        let sod = t.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let wday = (days + 4).rem_euclid(7) + 1; // 1970-01-01 was a Thursday; Sunday = 1
        self.cmos[0] = self.enc((sod % 60) as u8);
        self.cmos[2] = self.enc((sod / 60 % 60) as u8);
        self.cmos[4] = self.enc_hour((sod / 3600) as u8);
        self.cmos[6] = self.enc(wday as u8);
        self.cmos[7] = self.enc(d as u8);
        self.cmos[8] = self.enc(m as u8);
        self.cmos[9] = self.enc(y.rem_euclid(100) as u8);
        self.cmos[REG_CENTURY] = self.enc(y.div_euclid(100).clamp(0, 99) as u8);
    }

    /// Wall seconds described by the time registers.
    fn secs_from_regs(&self) -> i64 {
        let sec = self.dec(self.cmos[0]).min(59) as i64;
        let min = self.dec(self.cmos[2]).min(59) as i64;
        let hour = self.dec_hour(self.cmos[4]) as i64;
        let day = self.dec(self.cmos[7]).clamp(1, 31) as i64;
        let mon = self.dec(self.cmos[8]).clamp(1, 12) as i64;
        let yy = (self.dec(self.cmos[9]) % 100) as i64;
        let cent = self.dec(self.cmos[REG_CENTURY]) as i64;
        let cent = if (19..=99).contains(&cent) {
            cent
        } else if yy < 70 {
            20
        } else {
            19
        };
        days_from_civil(cent * 100 + yy, mon, day) * 86_400 + hour * 3600 + min * 60 + sec
    }

    fn periodic_ticks(&self) -> Option<u64> {
        match self.cmos[REG_A] & 0x0f {
            0 => None,
            1 => Some(1 << 7),
            2 => Some(1 << 8),
            rs => Some(1 << (rs - 1)),
        }
    }

    fn alarm_matches(&self, sod: i64) -> bool {
        let want = |reg: usize, actual: i64, hour: bool| {
            let v = self.cmos[reg];
            v & 0xc0 == 0xc0 || (if hour { self.dec_hour(v) } else { self.dec(v) }) as i64 == actual
        };
        want(1, sod % 60, false) && want(3, sod / 60 % 60, false) && want(5, sod / 3600, true)
    }

    /// Bring the interrupt flags up to `now`.
    pub fn advance(&mut self, now: u64) {
        if now <= self.last_ns {
            return;
        }
        let last = self.last_ns;
        let mut flags = 0u8;
        if let Some(p) = self.periodic_ticks() {
            if ticks_at(now, RTC_HZ) / p > ticks_at(last, RTC_HZ) / p {
                flags |= C_PF;
            }
        }
        if !self.halted() {
            let s_last = last.saturating_sub(self.base_ns) / NS_PER_SEC;
            let s_now = now.saturating_sub(self.base_ns) / NS_PER_SEC;
            if s_now > s_last && now >= self.base_ns {
                flags |= C_UF;
                let crossed = (s_now - s_last).min(86_400) as i64;
                let end = self.wall_secs(now);
                if (0..crossed).any(|i| self.alarm_matches((end - i).rem_euclid(86_400))) {
                    flags |= C_AF;
                }
            }
        }
        self.last_ns = now;
        self.raise(flags);
    }

    fn raise(&mut self, flags: u8) {
        let b = self.cmos[REG_B];
        let c = &mut self.cmos[REG_C];
        *c |= flags;
        if (*c & b) & (C_PF | C_AF | C_UF) != 0 {
            *c |= C_IRQF;
        }
        let level = *c & C_IRQF != 0;
        self.irq.set(level);
    }

    /// Virtual-ns deadline of the next interrupt this RTC will raise (only for enabled sources,
    /// and not while IRQF is still set: the line is already high).
    pub fn next_event(&self) -> Option<u64> {
        if self.cmos[REG_C] & C_IRQF != 0 {
            return None;
        }
        let b = self.b();
        let mut next: Option<u64> = None;
        if b & B_PIE != 0 {
            if let Some(p) = self.periodic_ticks() {
                let k = ticks_at(self.last_ns, RTC_HZ) / p + 1;
                next = Some(ns_of_tick(k.saturating_mul(p), RTC_HZ));
            }
        }
        if b & (B_UIE | B_AIE) != 0 && !self.halted() {
            let s = self.last_ns.saturating_sub(self.base_ns) / NS_PER_SEC + 1;
            let t = self.base_ns.saturating_add(s.saturating_mul(NS_PER_SEC));
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }

    fn read_data(&mut self, now: u64) -> u8 {
        self.advance(now);
        let i = self.index as usize;
        match i {
            0..=9 | REG_CENTURY => {
                self.refresh_time_regs(now);
                self.cmos[i]
            }
            REG_A => {
                let phase = now.saturating_sub(self.base_ns) % NS_PER_SEC;
                let uip = !self.halted()
                    && self.cmos[REG_A] & 0x70 == 0x20
                    && phase >= NS_PER_SEC - UIP_NS;
                self.cmos[REG_A] & 0x7f | (uip as u8) << 7
            }
            REG_C => {
                let v = self.cmos[REG_C];
                self.cmos[REG_C] = 0;
                self.irq.set(false);
                v
            }
            _ => self.cmos[i],
        }
    }

    fn write_data(&mut self, v: u8, now: u64) {
        self.advance(now);
        let i = self.index as usize;
        match i {
            0..=9 | REG_CENTURY => {
                self.refresh_time_regs(now);
                self.cmos[i] = v;
                if !self.halted() {
                    let phase = now.saturating_sub(self.base_ns) % NS_PER_SEC;
                    self.base_secs = self.secs_from_regs();
                    self.base_ns = now - phase.min(now);
                }
            }
            REG_A => self.cmos[REG_A] = v & 0x7f,
            REG_B => {
                let was_set = self.halted();
                if v & B_SET != 0 && !was_set {
                    self.refresh_time_regs(now);
                }
                // keep the clock's value across a change of format
                let secs = if was_set {
                    self.secs_from_regs()
                } else {
                    self.wall_secs(now)
                };
                self.cmos[REG_B] = v;
                if was_set && v & B_SET == 0 {
                    self.base_secs = secs;
                    self.base_ns = now;
                    self.last_ns = now;
                }
                if v & B_SET != 0 {
                    self.cmos[REG_B] &= !B_UIE;
                }
                self.refresh_time_regs(now);
                self.raise(0);
            }
            REG_C | REG_D => {}
            _ => self.cmos[i] = v,
        }
    }
}

impl PioDevice for Rtc {
    fn pio_read(&mut self, offset: u16, _size: u8, now: u64) -> u32 {
        match offset {
            1 => self.read_data(now) as u32,
            _ => 0xff,
        }
    }
    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, now: u64) {
        match offset {
            0 => {
                self.index = value as u8 & 0x7f;
                self.nmi_disabled = value & 0x80 != 0;
            }
            1 => self.write_data(value as u8, now),
            _ => {}
        }
    }
}

impl Persist for Rtc {
    fn save(&self, w: &mut SnapWriter) {
        w.raw(&self.cmos);
        w.u8(self.index);
        w.bool(self.nmi_disabled);
        w.i64(self.base_secs);
        w.u64(self.base_ns);
        w.u64(self.last_ns);
        self.irq.save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let cmos = r.raw::<128>()?;
        let index = r.u8()?;
        if index > 0x7f {
            return Err(SnapError::Invalid("rtc index"));
        }
        Ok(Rtc {
            cmos,
            index,
            nmi_disabled: r.bool()?,
            base_secs: r.i64()?,
            base_ns: r.u64()?,
            last_ns: r.u64()?,
            irq: IrqLine::restore(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn rd(r: &mut Rtc, i: u8, now: u64) -> u8 {
        r.pio_write(0, 1, i as u32, now);
        r.pio_read(1, 1, now) as u8
    }
    fn wr(r: &mut Rtc, i: u8, v: u8, now: u64) {
        r.pio_write(0, 1, i as u32, now);
        r.pio_write(1, 1, v as u32, now);
    }

    #[test]
    fn calendar_math() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 1, 1) * 86_400, DEFAULT_EPOCH);
        for d in [-1000i64, 0, 10_957, 11_016, 20_000, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn time_registers_bcd_binary_12h() {
        let mut r = Rtc::new(RtcConfig::default());
        // 2000-01-01 00:00:00 was a Saturday (7)
        let t = 3_723 * NS_PER_SEC + 5; // 01:02:03
        assert_eq!(rd(&mut r, 0, t), 0x03);
        assert_eq!(rd(&mut r, 2, t), 0x02);
        assert_eq!(rd(&mut r, 4, t), 0x01);
        assert_eq!(rd(&mut r, 6, t), 7);
        assert_eq!(rd(&mut r, 7, t), 0x01);
        assert_eq!(rd(&mut r, 8, t), 0x01);
        assert_eq!(rd(&mut r, 9, t), 0x00);
        assert_eq!(rd(&mut r, 0x32, t), 0x20);
        // binary, 12-hour: 13:00 is PM 1
        wr(&mut r, 0x0b, 0x04, t);
        let t2 = 13 * 3600 * NS_PER_SEC;
        assert_eq!(rd(&mut r, 4, t2), 0x81);
        assert_eq!(rd(&mut r, 0x32, t2), 20);
        // epoch respected: one day later in BCD
        let mut r = Rtc::new(RtcConfig {
            epoch: DEFAULT_EPOCH + 86_400 * 59,
            ..Default::default()
        });
        assert_eq!(rd(&mut r, 8, 0), 0x02);
        assert_eq!(rd(&mut r, 7, 0), 0x29);
    }

    #[test]
    fn set_time_like_linux() {
        let mut r = Rtc::new(RtcConfig::default());
        let now = 5 * NS_PER_SEC + 300;
        wr(&mut r, 0x0b, 0x82, now); // SET
        wr(&mut r, 9, 0x24, now);
        wr(&mut r, 8, 0x06, now);
        wr(&mut r, 7, 0x15, now);
        wr(&mut r, 4, 0x12, now);
        wr(&mut r, 2, 0x34, now);
        wr(&mut r, 0, 0x56, now);
        assert_eq!(
            rd(&mut r, 0, now + 10 * NS_PER_SEC),
            0x56,
            "frozen while SET"
        );
        wr(&mut r, 0x0b, 0x02, now + 10 * NS_PER_SEC);
        let later = now + 10 * NS_PER_SEC + 2 * NS_PER_SEC;
        assert_eq!(rd(&mut r, 0, later), 0x58);
        assert_eq!(rd(&mut r, 9, later), 0x24);
        assert_eq!(rd(&mut r, 7, later), 0x15);
    }

    #[test]
    fn uip_and_interrupts() {
        let mut r = Rtc::new(RtcConfig::default());
        assert_eq!(rd(&mut r, 0x0a, NS_PER_SEC - UIP_NS - 1) & 0x80, 0);
        assert_eq!(rd(&mut r, 0x0a, NS_PER_SEC - UIP_NS) & 0x80, 0x80);
        assert_eq!(rd(&mut r, 0x0a, NS_PER_SEC) & 0x80, 0);
        assert_eq!(rd(&mut r, 0x0d, 0), 0x80);
        // update-ended interrupt
        let t0 = NS_PER_SEC + 10;
        rd(&mut r, 0x0c, t0);
        wr(&mut r, 0x0b, 0x12, t0);
        assert_eq!(r.next_event(), Some(2 * NS_PER_SEC));
        r.advance(2 * NS_PER_SEC - 1);
        assert!(!r.irq.level());
        r.advance(2 * NS_PER_SEC);
        assert!(r.irq.level());
        assert_eq!(r.next_event(), None);
        assert_eq!(rd(&mut r, 0x0c, 2 * NS_PER_SEC) & 0x90, 0x90);
        assert!(!r.irq.level());
        assert_eq!(rd(&mut r, 0x0c, 2 * NS_PER_SEC), 0);
        // periodic 1024 Hz (RS=6): 32 ticks of 32768 Hz
        wr(&mut r, 0x0b, 0x42, 2 * NS_PER_SEC);
        let next = r.next_event().unwrap();
        assert_eq!(
            next,
            ns_of_tick((ticks_at(2 * NS_PER_SEC, RTC_HZ) / 32 + 1) * 32, RTC_HZ)
        );
        r.advance(next);
        assert_eq!(rd(&mut r, 0x0c, next), 0xc0);
        // alarm at 00:00:05 with don't-care hour
        wr(&mut r, 0x0b, 0x22, next);
        wr(&mut r, 1, 0x05, next);
        wr(&mut r, 3, 0x00, next);
        wr(&mut r, 5, 0xff, next);
        rd(&mut r, 0x0c, next);
        r.advance(4 * NS_PER_SEC);
        assert!(!r.irq.level());
        r.advance(5 * NS_PER_SEC);
        assert!(r.irq.level());
        assert_eq!(rd(&mut r, 0x0c, 5 * NS_PER_SEC) & 0xa0, 0xa0);
    }

    #[test]
    fn nvram_memory_bytes_and_nmi_bit() {
        let mut r = Rtc::new(RtcConfig {
            ram_below_4g: 3 << 30,
            ram_above_4g: 1 << 30,
            ..Default::default()
        });
        assert_eq!(r.cmos(0x30), 0xff);
        assert_eq!(r.cmos(0x31), 0xff);
        let above16 = (((3u64 << 30) - (16 << 20)) >> 16) as u16;
        assert_eq!(u16::from_le_bytes([r.cmos(0x34), r.cmos(0x35)]), above16);
        assert_eq!([r.cmos(0x5b), r.cmos(0x5c), r.cmos(0x5d)], [0, 0x40, 0]);
        r.pio_write(0, 1, 0x80 | 0x40, 0);
        assert!(r.nmi_disabled());
        r.pio_write(1, 1, 0x77, 0);
        assert_eq!(rd(&mut r, 0x40, 0), 0x77);
        assert!(!r.nmi_disabled());
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut r = Rtc::new(RtcConfig::default());
        wr(&mut r, 0x0b, 0x52, 77);
        r.advance(3 * NS_PER_SEC);
        let mut w = SnapWriter::new();
        r.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(Rtc::restore(&mut SnapReader::new(&b)).unwrap(), r);
        for n in 0..b.len() {
            assert!(Rtc::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(4);
        for _ in 0..50_000 {
            let now = g.tick();
            let off = g.below(3) as u16;
            if g.below(2) == 0 {
                r.pio_write(off, g.size(), g.next() as u32, now);
            } else {
                r.pio_read(off, g.size(), now);
            }
            if let Some(t) = r.next_event() {
                if g.below(4) == 0 && t >= now {
                    r.advance(t);
                }
            }
        }
    }
}
