//! 8254 PIT: three channels at 0x40-0x42, control word at 0x43, and port 0x61 (channel 2
//! gate, speaker enable, refresh toggle, channel 2 output).
//!
//! [`Pit`] implements [`PioDevice`] with base 0x40: offsets 0..=3 are ports 0x40-0x43 and
//! offset 0x21 is port 0x61. The counters run at exactly 1.193182 MHz of virtual time:
//! the count at `now` is computed from the tick at which it was loaded (`ticks_at(now)`),
//! so there is no drift. Channel 0's output drives [`Pit::irq`] (ISA IRQ0). The refresh bit 4
//! of port 0x61 toggles every 15.085 µs of virtual time (as QEMU's PIT_REFRESH_PERIOD).
//! Gate: channel 0 and 1 gates are tied high; channel 2's gate is port 0x61 bit 0. A rising gate
//! restarts counting in modes 1, 2, 3 and 5; a low gate does not pause modes 0/4 (as QEMU).

use super::{ns_of_tick, ticks_at, IrqLine, Persist, PioDevice, SnapError, SnapReader, SnapWriter};

/// PIT input clock in Hz.
pub const PIT_HZ: u64 = 1_193_182;
/// Period of the port 0x61 refresh toggle (bit 4) in ns.
pub const REFRESH_PERIOD_NS: u64 = 15_085;
pub const PIT_IRQ: u8 = 0;

const RW_LSB: u8 = 1;
const RW_MSB: u8 = 2;
const RW_WORD0: u8 = 3;
const RW_WORD1: u8 = 4;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Channel {
    mode: u8,
    rw_mode: u8,
    bcd: bool,
    /// The count as written (0 means the maximum: 65536, or 10000 in BCD).
    reload: u16,
    load_tick: u64,
    counting: bool,
    gate: bool,
    read_state: u8,
    write_state: u8,
    write_latch: u8,
    latched_count: u16,
    /// Which bytes of the latched count remain to be read (0 = no latch).
    count_latched: u8,
    status: u8,
    status_latched: bool,
}

fn from_bcd16(v: u16) -> u32 {
    let mut n = 0u32;
    for i in (0..4).rev() {
        n = n * 10 + ((v >> (i * 4)) & 0xf).min(9) as u32;
    }
    n
}

fn to_bcd16(mut n: u32) -> u16 {
    let mut v = 0u16;
    for i in 0..4 {
        v |= ((n % 10) as u16) << (i * 4);
        n /= 10;
    }
    v
}

impl Channel {
    fn new(gate: bool) -> Self {
        Channel {
            gate,
            rw_mode: RW_WORD0,
            read_state: RW_WORD0,
            write_state: RW_WORD0,
            ..Default::default()
        }
    }

    /// The period in clocks (1..=65536, or 1..=10000 in BCD).
    fn period(&self) -> u64 {
        let (v, max) = if self.bcd {
            (from_bcd16(self.reload), 10_000)
        } else {
            (self.reload as u32, 65_536)
        };
        if v == 0 {
            max
        } else {
            v as u64
        }
    }

    fn modulus(&self) -> u64 {
        if self.bcd {
            10_000
        } else {
            65_536
        }
    }

    fn count_at(&self, tick: u64) -> u16 {
        if !self.counting {
            return self.reload;
        }
        let n = self.period();
        let d = tick.saturating_sub(self.load_tick);
        let m = self.modulus();
        let c = match self.mode {
            2 => n - d % n,
            3 => n - (d.wrapping_mul(2)) % n,
            _ => (n + m - d % m) % m,
        } % m;
        if self.bcd {
            to_bcd16(c as u32)
        } else {
            c as u16
        }
    }

    fn out_at(&self, tick: u64) -> bool {
        if !self.counting {
            return self.mode != 0;
        }
        let n = self.period();
        let d = tick.saturating_sub(self.load_tick);
        match self.mode {
            0 | 1 => d >= n,
            2 => d % n != n - 1 || n == 1,
            3 => d % n < n.div_ceil(2),
            _ => d != n,
        }
    }

    /// First tick after `after` at which the output rises, if any.
    fn next_rise(&self, after: u64) -> Option<u64> {
        if !self.counting {
            return None;
        }
        let n = self.period();
        let l = self.load_tick;
        let once = |t: u64| if t > after { Some(t) } else { None };
        match self.mode {
            0 | 1 => once(l.saturating_add(n)),
            2 | 3 => {
                let k = if after < l { 1 } else { (after - l) / n + 1 };
                Some(l.saturating_add(k.saturating_mul(n)))
            }
            _ => once(l.saturating_add(n + 1)),
        }
    }

    fn load(&mut self, v: u16, tick: u64) {
        self.reload = v;
        self.load_tick = tick;
        self.counting = true;
    }

    fn write(&mut self, v: u8, tick: u64) {
        match self.write_state {
            RW_LSB => self.load(v as u16, tick),
            RW_MSB => self.load((v as u16) << 8, tick),
            RW_WORD0 => {
                self.write_latch = v;
                self.write_state = RW_WORD1;
            }
            _ => {
                self.load(self.write_latch as u16 | (v as u16) << 8, tick);
                self.write_state = RW_WORD0;
            }
        }
    }

    fn read(&mut self, tick: u64) -> u8 {
        if self.status_latched {
            self.status_latched = false;
            return self.status;
        }
        if self.count_latched != 0 {
            let c = self.latched_count;
            return match self.count_latched {
                RW_LSB => {
                    self.count_latched = 0;
                    c as u8
                }
                RW_MSB => {
                    self.count_latched = 0;
                    (c >> 8) as u8
                }
                _ => {
                    self.count_latched = RW_MSB;
                    c as u8
                }
            };
        }
        let c = self.count_at(tick);
        match self.read_state {
            RW_LSB => c as u8,
            RW_MSB => (c >> 8) as u8,
            RW_WORD0 => {
                self.read_state = RW_WORD1;
                c as u8
            }
            _ => {
                self.read_state = RW_WORD0;
                (c >> 8) as u8
            }
        }
    }

    fn latch_count(&mut self, tick: u64) {
        if self.count_latched == 0 {
            self.latched_count = self.count_at(tick);
            self.count_latched = self.rw_mode;
        }
    }

    fn latch_status(&mut self, tick: u64) {
        if !self.status_latched {
            self.status = (self.out_at(tick) as u8) << 7
                | (!self.counting as u8) << 6
                | self.rw_mode << 4
                | self.mode << 1
                | self.bcd as u8;
            self.status_latched = true;
        }
    }

    fn set_gate(&mut self, gate: bool, tick: u64) {
        if gate && !self.gate && matches!(self.mode, 1 | 2 | 3 | 5) && self.counting {
            self.load_tick = tick;
        }
        self.gate = gate;
    }

    fn save(&self, w: &mut SnapWriter) {
        for b in [
            self.mode,
            self.rw_mode,
            self.read_state,
            self.write_state,
            self.write_latch,
            self.count_latched,
            self.status,
        ] {
            w.u8(b);
        }
        w.bool(self.bcd);
        w.bool(self.counting);
        w.bool(self.gate);
        w.bool(self.status_latched);
        w.u16(self.reload);
        w.u16(self.latched_count);
        w.u64(self.load_tick);
    }

    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let mut c = Channel::new(true);
        c.mode = r.u8()?;
        c.rw_mode = r.u8()?;
        c.read_state = r.u8()?;
        c.write_state = r.u8()?;
        c.write_latch = r.u8()?;
        c.count_latched = r.u8()?;
        c.status = r.u8()?;
        if c.mode > 5
            || !(1..=3).contains(&c.rw_mode)
            || !(1..=4).contains(&c.read_state)
            || !(1..=4).contains(&c.write_state)
            || c.count_latched > 4
        {
            return Err(SnapError::Invalid("pit channel state"));
        }
        c.bcd = r.bool()?;
        c.counting = r.bool()?;
        c.gate = r.bool()?;
        c.status_latched = r.bool()?;
        c.reload = r.u16()?;
        c.latched_count = r.u16()?;
        c.load_tick = r.u64()?;
        Ok(c)
    }
}

/// The 8254 and port 0x61.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pit {
    ch: [Channel; 3],
    /// Port 0x61 bits 0-3 as written.
    port61: u8,
    /// Ticks up to which channel 0's output edges were turned into IRQ0 changes.
    processed_tick: u64,
    /// ISA IRQ0 (channel 0 output).
    pub irq: IrqLine,
}

impl Default for Pit {
    fn default() -> Self {
        Self::new()
    }
}

impl Pit {
    pub fn new() -> Self {
        Pit {
            ch: [Channel::new(true), Channel::new(true), Channel::new(false)],
            port61: 0,
            processed_tick: 0,
            irq: IrqLine::default(),
        }
    }

    /// Virtual-ns deadline of the next IRQ0 rising edge.
    pub fn next_event(&self) -> Option<u64> {
        self.ch[0]
            .next_rise(self.processed_tick)
            .map(|t| ns_of_tick(t, PIT_HZ))
    }

    /// Raise IRQ0 for every channel-0 rising edge up to `now` (several missed periodic edges
    /// collapse into one, as a real edge-triggered input would see them).
    pub fn advance(&mut self, now: u64) {
        let t = ticks_at(now, PIT_HZ);
        if t < self.processed_tick {
            return;
        }
        if let Some(rise) = self.ch[0].next_rise(self.processed_tick) {
            if rise <= t {
                match self.ch[0].mode {
                    0 | 1 => self.irq.set(true),
                    _ => self.irq.pulse(),
                }
            }
        }
        self.processed_tick = t;
    }

    /// Current output of channel `i` (0..=2).
    pub fn out(&self, i: usize, now: u64) -> bool {
        self.ch[i % 3].out_at(ticks_at(now, PIT_HZ))
    }

    fn read_port61(&self, now: u64) -> u8 {
        let refresh = ((now / REFRESH_PERIOD_NS) & 1) as u8;
        (self.port61 & 0x0f) | refresh << 4 | (self.out(2, now) as u8) << 5
    }

    fn write_control(&mut self, v: u8, tick: u64) {
        let sel = (v >> 6) as usize;
        if sel == 3 {
            // read-back: bit 5 low = latch count, bit 4 low = latch status
            for i in 0..3 {
                if v & (2 << i) != 0 {
                    if v & 0x20 == 0 {
                        self.ch[i].latch_count(tick);
                    }
                    if v & 0x10 == 0 {
                        self.ch[i].latch_status(tick);
                    }
                }
            }
            return;
        }
        let c = &mut self.ch[sel];
        let rw = (v >> 4) & 3;
        if rw == 0 {
            c.latch_count(tick);
            return;
        }
        let mut mode = (v >> 1) & 7;
        if mode > 5 {
            mode &= 3;
        }
        c.mode = mode;
        c.bcd = v & 1 != 0;
        c.rw_mode = rw;
        c.read_state = rw;
        c.write_state = rw;
        c.counting = false;
        c.count_latched = 0;
        if sel == 0 {
            self.irq.set(false);
        }
    }
}

impl PioDevice for Pit {
    fn pio_read(&mut self, offset: u16, _size: u8, now: u64) -> u32 {
        self.advance(now);
        let tick = ticks_at(now, PIT_HZ);
        match offset {
            0..=2 => self.ch[offset as usize].read(tick) as u32,
            0x21 => self.read_port61(now) as u32,
            _ => 0xff,
        }
    }

    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, now: u64) {
        self.advance(now);
        let tick = ticks_at(now, PIT_HZ);
        let v = value as u8;
        match offset {
            0..=2 => {
                self.ch[offset as usize].write(v, tick);
                if offset == 0 {
                    self.irq.set(false);
                    // edges before the new count do not count
                    self.processed_tick = tick;
                }
            }
            3 => self.write_control(v, tick),
            0x21 => {
                self.port61 = v & 0x0f;
                self.ch[2].set_gate(v & 1 != 0, tick);
            }
            _ => {}
        }
    }
}

impl Persist for Pit {
    fn save(&self, w: &mut SnapWriter) {
        for c in &self.ch {
            c.save(w);
        }
        w.u8(self.port61);
        w.u64(self.processed_tick);
        self.irq.save(w);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        Ok(Pit {
            ch: [
                Channel::restore(r)?,
                Channel::restore(r)?,
                Channel::restore(r)?,
            ],
            port61: r.u8()? & 0x0f,
            processed_tick: r.u64()?,
            irq: IrqLine::restore(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn w(p: &mut Pit, off: u16, v: u8, now: u64) {
        p.pio_write(off, 1, v as u32, now)
    }
    fn r(p: &mut Pit, off: u16, now: u64) -> u8 {
        p.pio_read(off, 1, now) as u8
    }

    #[test]
    fn mode2_periodic_irq0_at_exact_ns() {
        let mut p = Pit::new();
        // Linux: ch0 mode 2 lobyte/hibyte, LATCH = 1193182/250 rounded = 4773
        w(&mut p, 3, 0x34, 0);
        w(&mut p, 0, (4773 & 0xff) as u8, 0);
        w(&mut p, 0, (4773 >> 8) as u8, 0);
        let t1 = p.next_event().unwrap();
        // tick 4773 first happens at ceil(4773e9/1193182) ns
        assert_eq!(t1, (4773u128 * 1_000_000_000).div_ceil(1_193_182) as u64);
        assert_eq!(t1, 4_000_228);
        p.advance(t1 - 1);
        assert!(!p.irq.rose());
        p.advance(t1);
        assert!(p.irq.take().0);
        let t2 = p.next_event().unwrap();
        assert_eq!(t2, ns_of_tick(2 * 4773, PIT_HZ));
        // a long gap collapses into one edge and the next deadline is in the future
        p.advance(t2 + 10 * 4_000_000);
        assert!(p.irq.take().0);
        assert!(p.next_event().unwrap() > t2 + 10 * 4_000_000);
        // counter readback via latch
        let now = ns_of_tick(100, PIT_HZ);
        w(&mut p, 3, 0x00, now);
        let lo = r(&mut p, 0, now + 5000);
        let hi = r(&mut p, 0, now + 5000);
        assert_eq!(u16::from_le_bytes([lo, hi]), 4773 - 100);
    }

    #[test]
    fn mode0_one_shot_and_readback_status() {
        let mut p = Pit::new();
        w(&mut p, 3, 0x30, 0); // ch0 mode 0 lo/hi
        w(&mut p, 0, 100, 1000);
        w(&mut p, 0, 0, 1000);
        let start = ticks_at(1000, PIT_HZ);
        let t = p.next_event().unwrap();
        assert_eq!(t, ns_of_tick(start + 100, PIT_HZ));
        p.advance(t);
        assert!(p.irq.level());
        assert_eq!(p.next_event(), None, "one shot");
        // read-back status of ch0: OUT high, mode 0, rw 3
        w(&mut p, 3, 0xe2, t);
        assert_eq!(r(&mut p, 0, t), 0x80 | 0x30);
        // count wraps after terminal count
        w(&mut p, 3, 0xd2, t + ns_of_tick(5, PIT_HZ));
        let lo = r(&mut p, 0, t);
        let hi = r(&mut p, 0, t);
        assert_eq!(u16::from_le_bytes([lo, hi]), 0u16.wrapping_sub(5));
        // reprogramming drops the output
        w(&mut p, 3, 0x30, t + 1);
        assert!(!p.irq.level());
    }

    #[test]
    fn channel2_gate_and_port61() {
        let mut p = Pit::new();
        // Linux pit_calibrate_tsc: gate on, speaker off, ch2 mode 0, count 0xffff... use 1000
        w(&mut p, 0x21, 0x01, 0);
        assert_eq!(r(&mut p, 0x21, 0) & 0x0f, 0x01);
        w(&mut p, 3, 0xb0, 0);
        w(&mut p, 2, 0xe8, 0);
        w(&mut p, 2, 0x03, 0);
        let done = ns_of_tick(1000, PIT_HZ);
        assert_eq!(r(&mut p, 0x21, done - 1) & 0x20, 0);
        assert_eq!(r(&mut p, 0x21, done) & 0x20, 0x20);
        // refresh toggle depends on virtual time only
        assert_eq!(r(&mut p, 0x21, 0) & 0x10, 0);
        assert_eq!(r(&mut p, 0x21, REFRESH_PERIOD_NS) & 0x10, 0x10);
        assert_eq!(r(&mut p, 0x21, 2 * REFRESH_PERIOD_NS + 7) & 0x10, 0);
        // mode 2 on ch2: gate rising edge restarts the count
        w(&mut p, 3, 0xb4, 0);
        w(&mut p, 2, 50, 0);
        w(&mut p, 2, 0, 0);
        let t = ns_of_tick(20, PIT_HZ);
        w(&mut p, 0x21, 0x00, t);
        w(&mut p, 0x21, 0x01, t);
        w(&mut p, 3, 0x80, t);
        assert_eq!(r(&mut p, 2, t), 50);
        // lobyte-only access and mode 3 count by twos
        w(&mut p, 3, 0x96, 0);
        w(&mut p, 2, 10, 0);
        assert_eq!(r(&mut p, 2, ns_of_tick(2, PIT_HZ)), 6);
    }

    #[test]
    fn bcd_counting() {
        let mut p = Pit::new();
        w(&mut p, 3, 0x71, 0); // ch1 mode 0 bcd lo/hi
        w(&mut p, 1, 0x00, 0);
        w(&mut p, 1, 0x10, 0); // 1000 decimal
        let now = ns_of_tick(1, PIT_HZ);
        assert_eq!(r(&mut p, 1, now), 0x99);
        assert_eq!(r(&mut p, 1, now), 0x09);
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut p = Pit::new();
        w(&mut p, 3, 0x34, 0);
        w(&mut p, 0, 0x10, 0);
        w(&mut p, 3, 0xd2, 5);
        let mut wr = SnapWriter::new();
        p.save(&mut wr);
        let b = wr.into_bytes();
        assert_eq!(Pit::restore(&mut SnapReader::new(&b)).unwrap(), p);
        for n in 0..b.len() {
            assert!(Pit::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(3);
        for _ in 0..100_000 {
            let now = g.tick();
            let off = [0u16, 1, 2, 3, 0x21, 9][g.below(6) as usize];
            if g.below(2) == 0 {
                p.pio_write(off, g.size(), g.next() as u32, now);
            } else {
                p.pio_read(off, g.size(), now);
            }
            if let Some(t) = p.next_event() {
                if g.below(3) == 0 {
                    p.advance(t);
                    assert!(p.next_event().is_none_or(|n| n > t));
                }
            }
        }
    }
}
