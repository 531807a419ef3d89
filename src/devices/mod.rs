//! PC platform devices as plain deterministic state machines.
//!
//! # Conventions
//! - **Access traits.** Port devices implement [`PioDevice`], memory-mapped ones [`MmioDevice`].
//!   Offsets are relative to the device's base (e.g. the UART at 0x3f8 sees offsets 0..=7).
//!   `size` is the access width in bytes (1, 2, 4, 8). Byte-wide registers answer a wider access
//!   with the byte at `offset` in the low byte and zeros above (documented per device).
//! - **Virtual time.** `now` is virtual time in nanoseconds (retired instructions × rate), computed
//!   by the machine; devices never read a host clock. Every conversion to a device clock is exact
//!   integer math on `now` (no accumulated rounding): `ticks = now * hz / 1e9` and the first
//!   nanosecond at which tick `k` has happened is `ceil(k * 1e9 / hz)` ([`ticks_at`],
//!   [`ns_of_tick`]).
//! - **Timers.** Devices that raise interrupts on their own expose `next_event(&self) ->
//!   Option<u64>` (the virtual-ns deadline of the next interrupt-line change) and
//!   `advance(&mut self, now)` (process everything up to and including `now`). The run loop sets
//!   the engine budget so it stops at the earliest `next_event`, then calls `advance(now)`.
//!   Register accesses also bring the device up to `now` first, so the order "advance then access"
//!   or "access" alone gives the same result.
//! - **Interrupt lines.** Each interrupt output is an [`IrqLine`] owned by its device: a level
//!   plus a "rose since last taken" flag, so a pulse shorter than the machine's sampling interval
//!   (PIT mode 2, RTC periodic edge) is never lost. After any access or `advance` the machine
//!   calls [`IrqLine::forward`] with the line's ISA/GSI number and the interrupt controller(s)
//!   ([`IrqSink`]: the 8259 pair and the I/O APIC both implement it). Controllers do their own
//!   edge detection from the sequence of levels they are given.
//! - **Interrupt delivery to the CPU.** The PIC's INTR output is [`pic8259::Pic::intr`]; the CPU's
//!   INTA is [`pic8259::Pic::acknowledge`]. The I/O APIC turns line changes into
//!   [`ioapic::IoApicMsg`]s the machine hands to the addressed [`lapic::Lapic::accept`]; the
//!   LAPIC's EOI of a level-triggered vector is reported by [`lapic::Lapic::take_eoi_broadcast`]
//!   and given to [`ioapic::IoApic::eoi`].
//! - **Requests to the machine** (reset, power-off, exit code, UART output) are fields the
//!   machine polls/drains after a device access; devices never act on the machine themselves.
//! - **Snapshots.** Every device implements [`Persist`] over [`snap::SnapWriter`]/[`snap::SnapReader`].
//!   Restoring never panics on bad input.
//!
//! See docs/devices.md for what each device models and what it does not.

pub mod acpi_pm;
pub mod i8042;
pub mod ioapic;
pub mod lapic;
pub mod misc;
pub mod pic8259;
pub mod pit8254;
pub mod rtc_cmos;
pub mod snap;
pub mod uart16550;

pub use snap::{SnapError, SnapReader, SnapWriter};

/// A device reached through x86 port I/O.
pub trait PioDevice {
    fn pio_read(&mut self, offset: u16, size: u8, now: u64) -> u32;
    fn pio_write(&mut self, offset: u16, size: u8, value: u32, now: u64);
}

/// A device reached through memory-mapped I/O.
pub trait MmioDevice {
    fn mmio_read(&mut self, offset: u64, size: u8, now: u64) -> u64;
    fn mmio_write(&mut self, offset: u64, size: u8, value: u64, now: u64);
}

/// Save/restore of a device's complete guest-visible state.
pub trait Persist: Sized {
    fn save(&self, w: &mut SnapWriter);
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError>;
}

/// Receiver of interrupt-line levels (8259 pair, I/O APIC).
pub trait IrqSink {
    /// The input `line` is now at `level`. Edge-triggered inputs latch on a low→high change.
    fn set_irq(&mut self, line: u8, level: bool);
}

/// One interrupt output pin of a device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqLine {
    level: bool,
    rose: bool,
}

impl IrqLine {
    /// Drive the pin to `level`.
    pub fn set(&mut self, level: bool) {
        if level && !self.level {
            self.rose = true;
        }
        self.level = level;
    }
    /// A short high pulse: a rising edge, then low again.
    pub fn pulse(&mut self) {
        self.rose = true;
        self.level = false;
    }
    /// Current level of the pin.
    pub fn level(&self) -> bool {
        self.level
    }
    /// Whether a rising edge happened since the last [`IrqLine::take`]/[`IrqLine::forward`].
    pub fn rose(&self) -> bool {
        self.rose
    }
    /// Returns (rose since last take, current level) and clears the edge flag.
    pub fn take(&mut self) -> (bool, bool) {
        let r = (self.rose, self.level);
        self.rose = false;
        r
    }
    /// Replays this pin's change since the last call into `sink` as input `line`: a rising edge
    /// becomes low→high, then the current level is set.
    pub fn forward(&mut self, line: u8, sink: &mut dyn IrqSink) {
        let (rose, level) = self.take();
        replay_irq(rose, level, line, sink);
    }
    pub(crate) fn save(&self, w: &mut SnapWriter) {
        w.bool(self.level);
        w.bool(self.rose);
    }
    pub(crate) fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        Ok(IrqLine {
            level: r.bool()?,
            rose: r.bool()?,
        })
    }
}

/// Replays a pin change taken with [`IrqLine::take`] into `sink` as input `line` (use this to
/// feed one device line to both the 8259 and the I/O APIC).
pub fn replay_irq(rose: bool, level: bool, line: u8, sink: &mut dyn IrqSink) {
    if rose {
        sink.set_irq(line, false);
        sink.set_irq(line, true);
    }
    sink.set_irq(line, level);
}

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// Number of whole ticks of a `hz` clock that have happened by virtual time `now_ns`.
pub fn ticks_at(now_ns: u64, hz: u64) -> u64 {
    ((now_ns as u128 * hz as u128) / NS_PER_SEC as u128) as u64
}

/// The first virtual nanosecond at which tick `tick` of a `hz` clock has happened
/// (saturating at `u64::MAX`). `ticks_at(ns_of_tick(k, hz), hz) == k` for every k.
pub fn ns_of_tick(tick: u64, hz: u64) -> u64 {
    if hz == 0 {
        return u64::MAX;
    }
    let n = tick as u128 * NS_PER_SEC as u128;
    let ns = n.div_ceil(hz as u128);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Mask of the low `size` bytes (size clamped to 1..=8).
pub(crate) fn size_mask(size: u8) -> u64 {
    match size {
        0 | 1 => 0xff,
        2 => 0xffff,
        3 | 4 => 0xffff_ffff,
        _ => u64::MAX,
    }
}

#[cfg(test)]
pub(crate) mod fuzz {
    //! Seeded random-access driver used by every device's "garbage never panics" test.
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    pub struct Garbage {
        rng: ChaCha8Rng,
        pub now: u64,
    }

    impl Garbage {
        pub fn new(seed: u64) -> Self {
            Garbage {
                rng: ChaCha8Rng::seed_from_u64(seed),
                now: 0,
            }
        }
        pub fn next(&mut self) -> u64 {
            self.rng.next_u64()
        }
        pub fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
        pub fn size(&mut self) -> u8 {
            [1u8, 1, 1, 2, 4, 8][self.below(6) as usize]
        }
        /// Advance time by a random small or occasionally huge step.
        pub fn tick(&mut self) -> u64 {
            let step = match self.below(10) {
                0 => self.below(1 << 40),
                1..=3 => 0,
                _ => self.below(100_000),
            };
            self.now = self.now.saturating_add(step);
            self.now
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_conversion_is_exact_inverse() {
        for hz in [1_193_182u64, 3_579_545, 32_768, 1_000_000_000, 7] {
            for k in [
                0u64,
                1,
                2,
                3,
                1000,
                1_193_181,
                1_193_182,
                123_456_789,
                1 << 40,
            ] {
                let ns = ns_of_tick(k, hz);
                if ns == u64::MAX {
                    continue;
                }
                assert_eq!(ticks_at(ns, hz), k, "hz {hz} k {k}");
                if ns > 0 {
                    assert_eq!(ticks_at(ns - 1, hz), k - 1, "hz {hz} k {k}");
                }
            }
        }
        // one second of PIT time is exactly 1193182 ticks, no drift after an hour
        assert_eq!(ticks_at(3600 * NS_PER_SEC, 1_193_182), 3600 * 1_193_182);
    }

    struct Rec(Vec<(u8, bool)>);
    impl IrqSink for Rec {
        fn set_irq(&mut self, line: u8, level: bool) {
            self.0.push((line, level));
        }
    }

    #[test]
    fn irq_line_forward_replays_pulses() {
        let mut l = IrqLine::default();
        let mut s = Rec(vec![]);
        l.pulse();
        l.forward(3, &mut s);
        assert_eq!(s.0, vec![(3, false), (3, true), (3, false)]);
        s.0.clear();
        l.forward(3, &mut s);
        assert_eq!(s.0, vec![(3, false)]);
        l.set(true);
        s.0.clear();
        l.forward(3, &mut s);
        assert_eq!(s.0, vec![(3, false), (3, true), (3, true)]);
        assert!(!l.rose());
    }

    /// The wiring the machine's run loop is expected to do, end to end: timers' deadlines set
    /// the budget, `advance` at the deadline, lines forwarded to both interrupt controllers,
    /// PIC INTA through LAPIC LINT0 (ExtINT) or I/O APIC messages into the LAPIC, EOI broadcast.
    #[test]
    fn platform_wiring_pit_to_cpu() {
        use super::ioapic::IoApic;
        use super::lapic::Lapic;
        use super::pic8259::Pic;
        use super::pit8254::Pit;
        let mut pit = Pit::new();
        let mut pic = Pic::new();
        let mut ioapic = IoApic::new(0);
        let mut lapic = Lapic::new(0, true, NS_PER_SEC);
        // PIC: base 0x20, cascade; PIT ch0 rate generator 1000 clocks
        for (port, v) in [(0x20, 0x11), (0x21, 0x20), (0x21, 0x04), (0x21, 0x01)] {
            pic.pio_write(port, 1, v, 0);
        }
        pit.pio_write(3, 1, 0x34, 0);
        pit.pio_write(0, 1, 0xe8, 0);
        pit.pio_write(0, 1, 0x03, 0);
        let deadline = [pit.next_event(), lapic.next_event()]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        assert_eq!(deadline, ns_of_tick(1000, 1_193_182));
        pit.advance(deadline);
        // ISA IRQ0 goes to PIC line 0 and (interrupt source override) to GSI 2
        let (rose, level) = pit.irq.take();
        assert!(rose);
        replay_irq(rose, level, 0, &mut pic);
        replay_irq(rose, level, 2, &mut ioapic);
        // legacy path: LINT0 in ExtINT mode lets the PIC's INTR through
        assert!(pic.intr() && lapic.accepts_pic_intr());
        assert_eq!(pic.acknowledge(), 0x20);
        // I/O APIC path: unmask GSI2 -> vector 0x30 level (to exercise EOI broadcast)
        ioapic.mmio_write(0, 4, 0x14, 0);
        ioapic.mmio_write(0x10, 4, 0x8030, 0);
        ioapic.set_irq(2, true);
        w_sw_enable(&mut lapic);
        for m in ioapic.take_messages() {
            lapic.accept(m.vector, m.level);
        }
        assert_eq!(lapic.pending_vector(), Some(0x30));
        assert_eq!(lapic.ack(), 0x30);
        lapic.mmio_write(0xb0, 4, 0, deadline);
        ioapic.set_irq(2, false);
        while let Some(v) = lapic.take_eoi_broadcast() {
            ioapic.eoi(v);
        }
        assert!(ioapic.take_messages().is_empty());
        assert_eq!(ioapic.entry(2) & (1 << 14), 0);
    }

    fn w_sw_enable(l: &mut super::lapic::Lapic) {
        l.mmio_write(0xf0, 4, 0x1ff, 0);
    }

    /// Corrupt snapshots (random bytes, and valid ones with random bytes flipped) never panic.
    #[test]
    fn restore_of_garbage_never_panics() {
        use super::fuzz::Garbage;
        fn feed<T: Persist>(bytes: &[u8]) {
            let _ = T::restore(&mut SnapReader::new(bytes));
        }
        // A restored device, however odd its state, must also survive being used.
        fn feed_pio<T: Persist + PioDevice>(bytes: &[u8], g: &mut Garbage) {
            if let Ok(mut d) = T::restore(&mut SnapReader::new(bytes)) {
                for _ in 0..20 {
                    let now = g.tick();
                    let off = g.below(0x30) as u16;
                    d.pio_write(off, g.size(), g.next() as u32, now);
                    d.pio_read(off, g.size(), now);
                }
            }
        }
        fn feed_mmio<T: Persist + MmioDevice>(bytes: &[u8], g: &mut Garbage) {
            if let Ok(mut d) = T::restore(&mut SnapReader::new(bytes)) {
                for _ in 0..20 {
                    let now = g.tick();
                    let off = g.below(0x400);
                    d.mmio_write(off, g.size(), g.next(), now);
                    d.mmio_read(off, g.size(), now);
                }
            }
        }
        fn valid<T: Persist>(t: &T) -> Vec<u8> {
            let mut w = SnapWriter::new();
            t.save(&mut w);
            w.into_bytes()
        }
        let seeds: Vec<Vec<u8>> = vec![
            valid(&uart16550::Uart::new()),
            valid(&pic8259::Pic::new()),
            valid(&pit8254::Pit::new()),
            valid(&rtc_cmos::Rtc::new(Default::default())),
            valid(&i8042::I8042::new()),
            valid(&misc::FwCfg::new(1 << 30, 1)),
            valid(&lapic::Lapic::new(0, true, 1)),
            valid(&ioapic::IoApic::new(0)),
            valid(&acpi_pm::AcpiPm::new()),
        ];
        let mut g = Garbage::new(10);
        for round in 0..20_000 {
            let mut b = if round % 2 == 0 {
                seeds[g.below(seeds.len() as u64) as usize].clone()
            } else {
                (0..g.below(300)).map(|_| g.next() as u8).collect()
            };
            for _ in 0..g.below(4) {
                if !b.is_empty() {
                    let i = g.below(b.len() as u64) as usize;
                    b[i] = g.next() as u8;
                }
            }
            feed_pio::<uart16550::Uart>(&b, &mut g);
            feed_pio::<pic8259::Pic>(&b, &mut g);
            feed_pio::<pit8254::Pit>(&b, &mut g);
            feed_pio::<rtc_cmos::Rtc>(&b, &mut g);
            feed_pio::<i8042::I8042>(&b, &mut g);
            feed_pio::<misc::FwCfg>(&b, &mut g);
            feed::<misc::DebugExit>(&b);
            feed_mmio::<lapic::Lapic>(&b, &mut g);
            feed_mmio::<ioapic::IoApic>(&b, &mut g);
            feed_pio::<acpi_pm::AcpiPm>(&b, &mut g);
        }
    }
}
