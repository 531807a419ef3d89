//! Local APIC (xAPIC MMIO at 0xfee00000, one instance per vCPU; x2APIC MSR view in
//! [`Lapic::msr_read`]/[`Lapic::msr_write`]).
//!
//! [`Lapic`] implements [`MmioDevice`] with offsets from the APIC base (0..0x1000); registers are
//! 32 bits at 16-byte strides, other widths/alignments read the addressed bytes of the register
//! and writes not at a register's start are ignored. The timer clock is a 1 GHz bus (one timer
//! tick per virtual ns, as QEMU's APIC_BUS_CYCLE_NS = 1) divided by the divide configuration; its
//! current count and expiry are computed from virtual time exactly. TSC-deadline mode uses the
//! IA32_TSC_DEADLINE value the machine passes to [`Lapic::set_tsc_deadline`], converted with the
//! TSC frequency given at construction (`tsc = now * tsc_hz / 1e9`).
//!
//! Interrupt flow: [`Lapic::accept`] (from the I/O APIC, the PIC in ExtINT mode is separate,
//! IPIs, the timer) sets IRR; [`Lapic::pending_vector`] is the highest IRR vector above the
//! processor priority; [`Lapic::ack`] moves it to ISR when the CPU takes it; an EOI write clears
//! the highest ISR bit and, for a level-triggered vector (TMR set), queues an EOI broadcast
//! ([`Lapic::take_eoi_broadcast`]) for the I/O APIC. ICR writes are recorded as [`Ipi`]s
//! ([`Lapic::take_ipis`]); a self-IPI (shorthand self, or all-including-self, or a fixed physical
//! IPI to the own ID) is accepted locally at once.

use super::{ns_of_tick, IrqLine, MmioDevice, Persist, SnapError, SnapReader, SnapWriter};

pub const LAPIC_BASE: u64 = 0xfee0_0000;
pub const LAPIC_VERSION: u32 = 0x0005_0014;

const LVT_TIMER: usize = 0;
const LVT_THERMAL: usize = 1;
const LVT_PERF: usize = 2;
const LVT_LINT0: usize = 3;
const LVT_LINT1: usize = 4;
const LVT_ERROR: usize = 5;
const LVT_CMCI: usize = 6;
const LVT_MASKED: u32 = 1 << 16;
const SVR_ENABLE: u32 = 1 << 8;
const MAX_IPIS: usize = 256;

/// Timer mode from LVT timer bits 18:17.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerMode {
    OneShot,
    Periodic,
    TscDeadline,
}

/// An interprocessor interrupt as written to the ICR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipi {
    pub vector: u8,
    /// ICR bits 10:8 (0 fixed, 1 lowest priority, 2 SMI, 4 NMI, 5 INIT, 6 start-up).
    pub delivery_mode: u8,
    pub logical: bool,
    pub level_assert: bool,
    pub level_trigger: bool,
    /// ICR bits 19:18 (0 none, 1 self, 2 all including self, 3 all excluding self).
    pub shorthand: u8,
    /// Destination (xAPIC: ICR bits 63:56; x2APIC: 32 bits).
    pub dest: u32,
}

fn bit_set(bits: &mut [u32; 8], v: u8, on: bool) {
    let (i, m) = ((v >> 5) as usize, 1u32 << (v & 31));
    if on {
        bits[i] |= m;
    } else {
        bits[i] &= !m;
    }
}

fn bit_get(bits: &[u32; 8], v: u8) -> bool {
    bits[(v >> 5) as usize] & (1 << (v & 31)) != 0
}

fn highest(bits: &[u32; 8]) -> Option<u8> {
    (0..8)
        .rev()
        .find(|&i| bits[i] != 0)
        .map(|i| (i as u32 * 32 + 31 - bits[i].leading_zeros()) as u8)
}

/// One local APIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lapic {
    id: u32,
    tsc_hz: u64,
    /// IA32_APIC_BASE global enable (bit 11).
    hw_enabled: bool,
    x2apic: bool,
    tpr: u32,
    ldr: u32,
    dfr: u32,
    svr: u32,
    isr: [u32; 8],
    tmr: [u32; 8],
    irr: [u32; 8],
    esr: u32,
    esr_pending: u32,
    icr_lo: u32,
    icr_hi: u32,
    lvt: [u32; 7],
    dcr: u32,
    initial_count: u32,
    /// Timer counting started here (virtual ns) with `first_count` for the first period.
    timer_start: u64,
    first_count: u32,
    /// Next expiry of the timer (one-shot/periodic/deadline), None when disarmed.
    timer_next: Option<u64>,
    tsc_deadline: u64,
    eoi_broadcast: [u32; 8],
    ipis: Vec<Ipi>,
    /// LINT0/LINT1 input levels (for the machine's own use; not delivered here).
    pub lint: [IrqLine; 2],
}

impl Lapic {
    /// The APIC with `id`; the bootstrap processor's LINT0 starts in ExtINT mode (virtual wire,
    /// as the BIOS leaves it and QEMU resets it) so the 8259 reaches the CPU.
    pub fn new(id: u32, bsp: bool, tsc_hz: u64) -> Self {
        let mut lvt = [LVT_MASKED; 7];
        if bsp {
            lvt[LVT_LINT0] = 0x700;
        }
        Lapic {
            id,
            tsc_hz: tsc_hz.max(1),
            hw_enabled: true,
            x2apic: false,
            tpr: 0,
            ldr: 0,
            dfr: 0xffff_ffff,
            svr: 0xff,
            isr: [0; 8],
            tmr: [0; 8],
            irr: [0; 8],
            esr: 0,
            esr_pending: 0,
            icr_lo: 0,
            icr_hi: 0,
            lvt,
            dcr: 0,
            initial_count: 0,
            timer_start: 0,
            first_count: 0,
            timer_next: None,
            tsc_deadline: 0,
            eoi_broadcast: [0; 8],
            ipis: Vec::new(),
            lint: [IrqLine::default(); 2],
        }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// IA32_APIC_BASE bit 11 (global enable) and bit 10 (x2APIC mode), set by the machine.
    pub fn set_apic_base_msr(&mut self, value: u64) {
        self.hw_enabled = value & (1 << 11) != 0;
        self.x2apic = self.hw_enabled && value & (1 << 10) != 0;
        if !self.hw_enabled {
            self.svr &= !SVR_ENABLE;
            self.mask_all_lvts();
        }
    }

    fn sw_enabled(&self) -> bool {
        self.hw_enabled && self.svr & SVR_ENABLE != 0
    }

    fn mask_all_lvts(&mut self) {
        for l in &mut self.lvt {
            *l |= LVT_MASKED;
        }
    }

    /// Whether the 8259's INTR reaches the CPU through LINT0 (APIC globally disabled, or LINT0
    /// unmasked in ExtINT mode). The machine then gets the vector from the PIC's INTA.
    pub fn accepts_pic_intr(&self) -> bool {
        let l = self.lvt[LVT_LINT0];
        !self.hw_enabled || (l & LVT_MASKED == 0 && (l >> 8) & 7 == 7)
    }

    pub fn timer_mode(&self) -> TimerMode {
        match (self.lvt[LVT_TIMER] >> 17) & 3 {
            1 => TimerMode::Periodic,
            2 => TimerMode::TscDeadline,
            _ => TimerMode::OneShot,
        }
    }

    fn divisor(&self) -> u64 {
        let v = (self.dcr & 3) | ((self.dcr >> 1) & 4);
        if v == 7 {
            1
        } else {
            2 << v
        }
    }

    fn ppr(&self) -> u32 {
        let isrv = highest(&self.isr).map_or(0, |v| v as u32);
        if (self.tpr & 0xf0) >= (isrv & 0xf0) {
            self.tpr & 0xff
        } else {
            isrv & 0xf0
        }
    }

    /// Accept an interrupt message: set IRR (and TMR for level-triggered). Vectors 0-15 are
    /// illegal: they set ESR bit 6 (receive illegal vector) and raise the error LVT instead.
    pub fn accept(&mut self, vector: u8, level: bool) {
        if vector < 16 {
            self.esr_pending |= 0x40;
            let e = self.lvt[LVT_ERROR];
            if e & LVT_MASKED == 0 && (e as u8) >= 16 {
                bit_set(&mut self.irr, e as u8, true);
                bit_set(&mut self.tmr, e as u8, false);
            }
            return;
        }
        bit_set(&mut self.irr, vector, true);
        bit_set(&mut self.tmr, vector, level);
    }

    /// The highest-priority requested vector that the processor priority lets through.
    pub fn pending_vector(&self) -> Option<u8> {
        if !self.sw_enabled() {
            return None;
        }
        let v = highest(&self.irr)?;
        if (v as u32 & 0xf0) > (self.ppr() & 0xf0) {
            Some(v)
        } else {
            None
        }
    }

    /// INTA: move the pending vector from IRR to ISR and return it (the spurious vector if
    /// nothing is deliverable any more).
    pub fn ack(&mut self) -> u8 {
        match self.pending_vector() {
            Some(v) => {
                bit_set(&mut self.irr, v, false);
                bit_set(&mut self.isr, v, true);
                v
            }
            None => self.svr as u8,
        }
    }

    fn eoi(&mut self) {
        if let Some(v) = highest(&self.isr) {
            bit_set(&mut self.isr, v, false);
            if bit_get(&self.tmr, v) {
                bit_set(&mut self.eoi_broadcast, v, true);
            }
        }
    }

    /// A level-triggered vector whose EOI must be broadcast to the I/O APIC(s).
    pub fn take_eoi_broadcast(&mut self) -> Option<u8> {
        let v = highest(&self.eoi_broadcast)?;
        bit_set(&mut self.eoi_broadcast, v, false);
        Some(v)
    }

    /// IPIs written to the ICR since the last call.
    pub fn take_ipis(&mut self) -> Vec<Ipi> {
        std::mem::take(&mut self.ipis)
    }

    fn send_ipi(&mut self) {
        let lo = self.icr_lo;
        let ipi = Ipi {
            vector: lo as u8,
            delivery_mode: ((lo >> 8) & 7) as u8,
            logical: lo & (1 << 11) != 0,
            level_assert: lo & (1 << 14) != 0,
            level_trigger: lo & (1 << 15) != 0,
            shorthand: ((lo >> 18) & 3) as u8,
            dest: if self.x2apic {
                self.icr_hi
            } else {
                self.icr_hi >> 24
            },
        };
        let own_id = if self.x2apic { self.id } else { self.id & 0xff };
        let to_self = match ipi.shorthand {
            1 | 2 => true,
            0 => !ipi.logical && ipi.dest == own_id,
            _ => false,
        };
        if to_self && ipi.delivery_mode == 0 {
            self.accept(ipi.vector, false);
        }
        if ipi.shorthand != 1 && self.ipis.len() < MAX_IPIS {
            self.ipis.push(ipi);
        }
    }

    // ---- timer ----

    /// Current count register at `now`.
    pub fn current_count(&self, now: u64) -> u32 {
        if self.timer_mode() == TimerMode::TscDeadline || self.initial_count == 0 {
            return 0;
        }
        let elapsed = now.saturating_sub(self.timer_start) / self.divisor();
        let first = self.first_count as u64;
        if elapsed < first {
            return (first - elapsed) as u32;
        }
        match self.timer_mode() {
            TimerMode::Periodic => {
                let ic = self.initial_count as u64;
                (ic - (elapsed - first) % ic) as u32
            }
            _ => 0,
        }
    }

    fn arm_count(&mut self, now: u64, first: u32) {
        self.timer_start = now;
        self.first_count = first;
        self.timer_next = if first == 0 {
            None
        } else {
            Some(now.saturating_add((first as u64).saturating_mul(self.divisor())))
        };
    }

    /// The machine's write of IA32_TSC_DEADLINE (0 disarms).
    pub fn set_tsc_deadline(&mut self, tsc: u64, _now: u64) {
        if self.timer_mode() != TimerMode::TscDeadline {
            return;
        }
        self.tsc_deadline = tsc;
        self.timer_next = if tsc == 0 {
            None
        } else {
            Some(ns_of_tick(tsc, self.tsc_hz))
        };
    }

    /// IA32_TSC_DEADLINE as the guest reads it (0 after it fired or outside deadline mode).
    pub fn tsc_deadline(&self) -> u64 {
        if self.timer_mode() == TimerMode::TscDeadline {
            self.tsc_deadline
        } else {
            0
        }
    }

    /// Deadline (virtual ns) of the next timer interrupt, if one will be raised.
    pub fn next_event(&self) -> Option<u64> {
        if self.lvt[LVT_TIMER] & LVT_MASKED != 0 {
            return None;
        }
        self.timer_next
    }

    /// Expire the timer up to `now`, raising its vector in IRR (once, however many periods
    /// passed) unless the LVT is masked.
    pub fn advance(&mut self, now: u64) {
        let Some(t) = self.timer_next else { return };
        if t > now {
            return;
        }
        let lvt = self.lvt[LVT_TIMER];
        if lvt & LVT_MASKED == 0 {
            self.accept(lvt as u8, false);
        }
        match self.timer_mode() {
            TimerMode::Periodic if self.initial_count != 0 => {
                let period = (self.initial_count as u64).saturating_mul(self.divisor());
                let missed = (now - t) / period + 1;
                self.timer_next = Some(t.saturating_add(missed.saturating_mul(period)));
            }
            TimerMode::TscDeadline => {
                self.tsc_deadline = 0;
                self.timer_next = None;
            }
            _ => self.timer_next = None,
        }
    }

    // ---- registers ----

    fn read_reg(&mut self, reg: u32, now: u64) -> u32 {
        self.advance(now);
        match reg {
            0x02 => {
                if self.x2apic {
                    self.id
                } else {
                    self.id << 24
                }
            }
            0x03 => LAPIC_VERSION,
            0x08 => self.tpr,
            0x0a => self.ppr(),
            0x0d => {
                if self.x2apic {
                    ((self.id >> 4) << 16) | (1 << (self.id & 0xf))
                } else {
                    self.ldr
                }
            }
            0x0e => self.dfr,
            0x0f => self.svr,
            0x10..=0x17 => self.isr[(reg - 0x10) as usize],
            0x18..=0x1f => self.tmr[(reg - 0x18) as usize],
            0x20..=0x27 => self.irr[(reg - 0x20) as usize],
            0x28 => self.esr,
            0x2f => self.lvt[LVT_CMCI],
            0x30 => self.icr_lo,
            0x31 => self.icr_hi,
            0x32..=0x37 => self.lvt[(reg - 0x32) as usize],
            0x38 => self.initial_count,
            0x39 => self.current_count(now),
            0x3e => self.dcr,
            _ => 0,
        }
    }

    fn write_lvt(&mut self, idx: usize, v: u32, now: u64) {
        let mask = match idx {
            LVT_TIMER => 0x0007_00ff,
            LVT_LINT0 | LVT_LINT1 => 0x0001_a7ff,
            LVT_ERROR => 0x0001_00ff,
            LVT_THERMAL | LVT_PERF | LVT_CMCI => 0x0001_07ff,
            _ => 0x0001_07ff,
        };
        let mut v = v & mask;
        if !self.sw_enabled() {
            v |= LVT_MASKED;
        }
        let old_mode = self.timer_mode();
        self.lvt[idx] = v;
        if idx == LVT_TIMER && self.timer_mode() != old_mode {
            // a mode change disarms the timer
            self.timer_next = None;
            self.tsc_deadline = 0;
            self.initial_count = 0;
            self.first_count = 0;
        }
        let _ = now;
    }

    fn write_reg(&mut self, reg: u32, v: u32, now: u64) {
        self.advance(now);
        match reg {
            0x02 if !self.x2apic => self.id = v >> 24,
            0x08 => self.tpr = v & 0xff,
            0x0b => self.eoi(),
            0x0d if !self.x2apic => self.ldr = v & 0xff00_0000,
            0x0e if !self.x2apic => self.dfr = v | 0x0fff_ffff,
            0x0f => {
                self.svr = v & 0x13ff;
                if self.svr & SVR_ENABLE == 0 {
                    self.mask_all_lvts();
                }
            }
            0x28 => {
                self.esr = self.esr_pending;
                self.esr_pending = 0;
            }
            0x2f => self.write_lvt(LVT_CMCI, v, now),
            0x30 => {
                self.icr_lo = v & !(1 << 12);
                self.send_ipi();
            }
            0x31 if !self.x2apic => self.icr_hi = v & 0xff00_0000,
            0x32..=0x37 => self.write_lvt((reg - 0x32) as usize, v, now),
            // initial count writes are ignored in TSC-deadline mode
            0x38 if self.timer_mode() != TimerMode::TscDeadline => {
                self.initial_count = v;
                self.arm_count(now, v);
            }
            0x3e => {
                let cur = self.current_count(now);
                self.dcr = v & 0xb;
                if self.timer_next.is_some() && self.timer_mode() != TimerMode::TscDeadline {
                    // keep counting from the current value at the new rate
                    self.arm_count(now, cur);
                }
            }
            0x3f if self.x2apic => self.accept(v as u8, false),
            _ => {}
        }
    }

    /// x2APIC MSR read (0x800..=0x8ff); None = #GP (not in x2APIC mode or no such register).
    pub fn msr_read(&mut self, msr: u32, now: u64) -> Option<u64> {
        if !self.x2apic || !(0x800..=0x8ff).contains(&msr) {
            return None;
        }
        let reg = msr - 0x800;
        match reg {
            0x30 => Some(self.icr_lo as u64 | (self.icr_hi as u64) << 32),
            0x02 | 0x03 | 0x08 | 0x0a | 0x0d | 0x0f | 0x10..=0x28 | 0x2f | 0x32..=0x3e => {
                Some(self.read_reg(reg, now) as u64)
            }
            _ => None,
        }
    }

    /// x2APIC MSR write; false = #GP.
    pub fn msr_write(&mut self, msr: u32, value: u64, now: u64) -> bool {
        if !self.x2apic || !(0x800..=0x8ff).contains(&msr) {
            return false;
        }
        let reg = msr - 0x800;
        match reg {
            0x30 => {
                self.icr_hi = (value >> 32) as u32;
                self.write_reg(0x30, value as u32, now);
                true
            }
            0x08 | 0x0b | 0x0f | 0x28 | 0x2f | 0x32..=0x38 | 0x3e | 0x3f => {
                self.write_reg(reg, value as u32, now);
                true
            }
            _ => false,
        }
    }
}

impl MmioDevice for Lapic {
    fn mmio_read(&mut self, offset: u64, size: u8, now: u64) -> u64 {
        if offset >= 0x1000 {
            return 0;
        }
        let sub = (offset & 0xf) as u32;
        if sub >= 4 {
            return 0;
        }
        let v = self.read_reg((offset >> 4) as u32, now) >> (8 * sub);
        v as u64 & super::size_mask(size)
    }
    fn mmio_write(&mut self, offset: u64, _size: u8, value: u64, now: u64) {
        if offset < 0x1000 && offset & 0xf == 0 && !self.x2apic {
            self.write_reg((offset >> 4) as u32, value as u32, now);
        }
    }
}

impl Persist for Lapic {
    fn save(&self, w: &mut SnapWriter) {
        w.u32(self.id);
        w.u64(self.tsc_hz);
        w.bool(self.hw_enabled);
        w.bool(self.x2apic);
        for v in [
            self.tpr,
            self.ldr,
            self.dfr,
            self.svr,
            self.esr,
            self.esr_pending,
            self.icr_lo,
            self.icr_hi,
            self.dcr,
            self.initial_count,
            self.first_count,
        ] {
            w.u32(v);
        }
        for arr in [&self.isr, &self.tmr, &self.irr, &self.eoi_broadcast] {
            for v in arr {
                w.u32(*v);
            }
        }
        for v in &self.lvt {
            w.u32(*v);
        }
        w.u64(self.timer_start);
        w.opt_u64(self.timer_next);
        w.u64(self.tsc_deadline);
        w.u32(self.ipis.len() as u32);
        for i in &self.ipis {
            w.u8(i.vector);
            w.u8(i.delivery_mode);
            w.bool(i.logical);
            w.bool(i.level_assert);
            w.bool(i.level_trigger);
            w.u8(i.shorthand);
            w.u32(i.dest);
        }
        self.lint[0].save(w);
        self.lint[1].save(w);
    }

    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let id = r.u32()?;
        let tsc_hz = r.u64()?;
        if tsc_hz == 0 {
            return Err(SnapError::Invalid("lapic tsc_hz"));
        }
        let mut l = Lapic::new(id, false, tsc_hz);
        l.hw_enabled = r.bool()?;
        l.x2apic = r.bool()?;
        l.tpr = r.u32()?;
        l.ldr = r.u32()?;
        l.dfr = r.u32()?;
        l.svr = r.u32()?;
        l.esr = r.u32()?;
        l.esr_pending = r.u32()?;
        l.icr_lo = r.u32()?;
        l.icr_hi = r.u32()?;
        l.dcr = r.u32()? & 0xb;
        l.initial_count = r.u32()?;
        l.first_count = r.u32()?;
        for arr in [&mut l.isr, &mut l.tmr, &mut l.irr, &mut l.eoi_broadcast] {
            for v in arr.iter_mut() {
                *v = r.u32()?;
            }
        }
        for v in l.lvt.iter_mut() {
            *v = r.u32()?;
        }
        l.timer_start = r.u64()?;
        l.timer_next = r.opt_u64()?;
        l.tsc_deadline = r.u64()?;
        let n = r.u32()? as usize;
        if n > MAX_IPIS {
            return Err(SnapError::Invalid("lapic ipi count"));
        }
        for _ in 0..n {
            let ipi = Ipi {
                vector: r.u8()?,
                delivery_mode: r.u8()? & 7,
                logical: r.bool()?,
                level_assert: r.bool()?,
                level_trigger: r.bool()?,
                shorthand: r.u8()? & 3,
                dest: r.u32()?,
            };
            l.ipis.push(ipi);
        }
        l.lint = [IrqLine::restore(r)?, IrqLine::restore(r)?];
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn w(l: &mut Lapic, off: u64, v: u32, now: u64) {
        l.mmio_write(off, 4, v as u64, now)
    }
    fn r(l: &mut Lapic, off: u64, now: u64) -> u32 {
        l.mmio_read(off, 4, now) as u32
    }
    fn enabled() -> Lapic {
        let mut l = Lapic::new(0, true, 1_000_000_000);
        w(&mut l, 0xf0, 0x1ff, 0);
        l
    }

    #[test]
    fn reset_values() {
        let mut l = Lapic::new(3, false, 1);
        assert_eq!(r(&mut l, 0x20, 0), 3 << 24);
        assert_eq!(r(&mut l, 0x30, 0), 0x50014);
        assert_eq!(r(&mut l, 0xe0, 0), 0xffff_ffff);
        assert_eq!(r(&mut l, 0xf0, 0), 0xff);
        assert_eq!(r(&mut l, 0x320, 0), 0x10000);
        assert_eq!(r(&mut l, 0x350, 0), 0x10000);
        assert!(!l.accepts_pic_intr());
        assert!(
            Lapic::new(0, true, 1).accepts_pic_intr(),
            "BSP LINT0 is ExtINT"
        );
        // software-disabled: LVTs cannot be unmasked
        w(&mut l, 0x320, 0x30, 0);
        assert_eq!(r(&mut l, 0x320, 0), 0x10030);
    }

    #[test]
    fn priority_ack_eoi() {
        let mut l = enabled();
        l.accept(0x31, false);
        l.accept(0x52, true);
        assert_eq!(l.pending_vector(), Some(0x52));
        assert_eq!(l.ack(), 0x52);
        assert_eq!(r(&mut l, 0xa0, 0), 0x50, "PPR follows ISR");
        assert_eq!(l.pending_vector(), None, "0x31 below PPR");
        w(&mut l, 0xb0, 0, 0);
        assert_eq!(
            l.take_eoi_broadcast(),
            Some(0x52),
            "level vector broadcasts"
        );
        assert_eq!(l.take_eoi_broadcast(), None);
        w(&mut l, 0x80, 0x40, 0);
        assert_eq!(l.pending_vector(), None, "TPR 0x40 blocks 0x31");
        w(&mut l, 0x80, 0x20, 0);
        assert_eq!(l.ack(), 0x31);
        w(&mut l, 0xb0, 0, 0);
        assert_eq!(
            l.take_eoi_broadcast(),
            None,
            "edge vector does not broadcast"
        );
        assert_eq!(l.ack(), 0xff, "spurious");
        assert_eq!(r(&mut l, 0x110, 0), 0);
        // illegal vector -> ESR
        l.accept(3, false);
        w(&mut l, 0x280, 0, 0);
        assert_eq!(r(&mut l, 0x280, 0), 0x40);
        // self IPI
        w(&mut l, 0x300, 0x0004_0077, 0);
        assert_eq!(l.pending_vector(), Some(0x77));
        assert!(l.take_ipis().is_empty());
        w(&mut l, 0x310, 5 << 24, 0);
        w(&mut l, 0x300, 0x0000_4500, 0);
        let ipis = l.take_ipis();
        assert_eq!(ipis.len(), 1);
        assert_eq!((ipis[0].delivery_mode, ipis[0].dest), (5, 5));
    }

    #[test]
    fn timer_one_shot_and_periodic_exact() {
        let mut l = enabled();
        w(&mut l, 0x3e0, 0x3, 100); // divide by 16
        w(&mut l, 0x320, 0x40, 100); // one-shot vector 0x40
        w(&mut l, 0x380, 1000, 100);
        assert_eq!(l.next_event(), Some(100 + 16_000));
        assert_eq!(r(&mut l, 0x390, 100 + 15), 1000);
        assert_eq!(r(&mut l, 0x390, 100 + 16), 999);
        l.advance(100 + 15_999);
        assert_eq!(l.pending_vector(), None);
        l.advance(100 + 16_000);
        assert_eq!(l.pending_vector(), Some(0x40));
        assert_eq!(l.next_event(), None);
        assert_eq!(r(&mut l, 0x390, 100 + 16_000), 0);
        l.ack();
        w(&mut l, 0xb0, 0, 0);
        // periodic, divide by 1
        w(&mut l, 0x3e0, 0xb, 0);
        w(&mut l, 0x320, 0x20041, 0);
        w(&mut l, 0x380, 500, 1000);
        assert_eq!(l.next_event(), Some(1500));
        l.advance(1500);
        assert_eq!(l.ack(), 0x41);
        assert_eq!(l.next_event(), Some(2000));
        assert_eq!(r(&mut l, 0x390, 2100), 400);
        l.advance(10_250);
        assert_eq!(l.next_event(), Some(10_500));
        // masked: no event
        w(&mut l, 0x320, 0x30041, 10_250);
        assert_eq!(l.next_event(), None);
    }

    #[test]
    fn timer_tsc_deadline() {
        let mut l = Lapic::new(0, true, 2_000_000_000); // 2 GHz TSC
        w(&mut l, 0xf0, 0x1ff, 0);
        w(&mut l, 0x320, 0x40050, 0);
        assert_eq!(l.timer_mode(), TimerMode::TscDeadline);
        w(&mut l, 0x380, 1234, 0);
        assert_eq!(l.next_event(), None, "initial count ignored");
        l.set_tsc_deadline(3001, 0);
        assert_eq!(l.next_event(), Some(1501), "ceil(3001 / 2)");
        assert_eq!(l.tsc_deadline(), 3001);
        l.advance(1500);
        assert_eq!(l.pending_vector(), None);
        l.advance(1501);
        assert_eq!(l.pending_vector(), Some(0x50));
        assert_eq!(l.tsc_deadline(), 0);
    }

    #[test]
    fn x2apic_msrs() {
        let mut l = enabled();
        assert_eq!(l.msr_read(0x802, 0), None);
        l.set_apic_base_msr(0xfee0_0000 | 0xc00);
        assert_eq!(l.msr_read(0x802, 0), Some(0));
        assert_eq!(l.msr_read(0x803, 0), Some(0x50014));
        assert!(l.msr_write(0x83f, 0x66, 0));
        assert_eq!(l.pending_vector(), Some(0x66));
        assert!(!l.msr_write(0x802, 1, 0), "ID is read-only in x2APIC mode");
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut l = enabled();
        l.accept(0x99, true);
        w(&mut l, 0x320, 0x20041, 0);
        w(&mut l, 0x380, 77, 5);
        w(&mut l, 0x300, 0x4500, 5);
        let mut sw = SnapWriter::new();
        l.save(&mut sw);
        let b = sw.into_bytes();
        assert_eq!(Lapic::restore(&mut SnapReader::new(&b)).unwrap(), l);
        for n in 0..b.len() {
            assert!(Lapic::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
        let mut g = Garbage::new(8);
        for _ in 0..100_000 {
            let now = g.tick();
            let off = if g.below(4) == 0 {
                g.below(0x2000)
            } else {
                g.below(0x40) << 4
            };
            match g.below(5) {
                0 => {
                    l.mmio_read(off, g.size(), now);
                }
                1 => l.accept(g.next() as u8, g.below(2) == 0),
                2 => {
                    l.ack();
                    l.take_eoi_broadcast();
                }
                3 => {
                    if let Some(t) = l.next_event() {
                        l.advance(t.max(now));
                    }
                    l.set_tsc_deadline(g.next() >> g.below(64), now);
                }
                _ => l.mmio_write(off, g.size(), g.next(), now),
            }
            assert!(l.ipis.len() <= MAX_IPIS);
        }
    }
}
