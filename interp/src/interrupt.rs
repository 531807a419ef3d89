//! Exception and interrupt delivery: the real-mode IVT, protected-mode and long-mode IDT gates,
//! stack switches (TSS, IST), error codes, double fault and triple-fault shutdown.
//!
//! Engines never deliver events themselves: they stop with `ExitReason::Exception(fault)` (RIP
//! at a fault, after a trap) and the machine calls [`deliver`], which pushes the frame and
//! points RIP at the handler. External interrupts are delivered the same way, by the machine,
//! between engine runs (see `testkit_sys::SysMachine::inject_external`).
//!
//! Delivery is precise: every check and every frame write that can fault happens before any
//! register changes, so a fault while delivering leaves the CPU as it was and the next event
//! (the new exception, #DF, or shutdown) is delivered from the same state.
//!
//! Not modelled (delivery stops with a [`Shutdown`] whose cause says so, instead of guessing):
//! task gates in the IDT (hardware task switches) and events raised in virtual-8086 mode.

use crate::cpu::Cpu;
use crate::ctx::Ctx;
use crate::desc::{self, sys_type, Descriptor};
use crate::fault::{Fault, FaultClass};
use crate::mem::{Bus, GuestRam};
use crate::mmu::is_canonical;
use crate::state::{ctl, flags, reg, sreg, CpuState, Segment};
use std::fmt;

/// Which instruction raised a software interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftKind {
    /// INT n (CD ib).
    IntN,
    /// INT3 (CC).
    Int3,
    /// INTO (CE) with OF set.
    Into,
    /// INT1 / ICEBP (F1): delivered like a hardware #DB (no DPL check, EXT set).
    Int1,
}

/// An event to deliver through the IVT/IDT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A processor exception (fault or abort). Trap-like faults that come from instructions
    /// (INT3, INTO, INT n, INT1) are turned into [`Event::Software`] by [`Event::from_fault`].
    Exception(Fault),
    /// An external (maskable) interrupt from the interrupt controller.
    External(u8),
    /// A software interrupt instruction; RIP already points after it.
    Software { vector: u8, kind: SoftKind },
}

impl Event {
    /// The event an engine's `ExitReason::Exception(fault)` stands for.
    pub fn from_fault(f: Fault) -> Event {
        match f {
            Fault::SoftwareInterrupt(vector) => Event::Software {
                vector,
                kind: SoftKind::IntN,
            },
            Fault::Breakpoint => Event::Software {
                vector: 3,
                kind: SoftKind::Int3,
            },
            Fault::Overflow => Event::Software {
                vector: 4,
                kind: SoftKind::Into,
            },
            Fault::Int1 => Event::Software {
                vector: 1,
                kind: SoftKind::Int1,
            },
            other => Event::Exception(other),
        }
    }

    /// Interrupt vector.
    pub fn vector(&self) -> u8 {
        match *self {
            Event::Exception(f) => f.vector(),
            Event::External(v) => v,
            Event::Software { vector, .. } => vector,
        }
    }

    /// The EXT bit of error codes raised while delivering this event: set for hardware
    /// events (exceptions, external interrupts, INT1), clear for INT n, INT3 and INTO.
    pub fn ext(&self) -> u16 {
        match self {
            Event::Software { kind, .. } => (*kind == SoftKind::Int1) as u16,
            _ => 1,
        }
    }

    /// INT n, INT3 and INTO check the gate's DPL against CPL; nothing else does.
    fn dpl_checked(&self) -> bool {
        matches!(self, Event::Software { kind, .. } if *kind != SoftKind::Int1)
    }

    /// Error code pushed in protected and long mode (never for external or software
    /// interrupts, whatever the vector).
    pub fn error_code(&self) -> Option<u32> {
        match self {
            Event::Exception(f) => f.error_code(),
            _ => None,
        }
    }

    /// Fault-class exceptions push RFLAGS with RF set (so that IRET does not re-trigger an
    /// instruction breakpoint); traps, aborts, #DB and interrupts push RF as it is.
    fn sets_rf(&self) -> bool {
        match self {
            Event::Exception(f) => !f.is_trap() && !matches!(f, Fault::Debug | Fault::DoubleFault),
            _ => false,
        }
    }

    fn class(&self) -> FaultClass {
        match self {
            Event::Exception(f) => f.class(),
            _ => FaultClass::Benign,
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Event::Exception(x) => write!(f, "{x}"),
            Event::External(v) => write!(f, "external interrupt {v:#04x}"),
            Event::Software { vector, kind } => match kind {
                SoftKind::IntN => write!(f, "INT {vector:#04x}"),
                SoftKind::Int3 => f.write_str("INT3 (#BP)"),
                SoftKind::Into => f.write_str("INTO (#OF)"),
                SoftKind::Int1 => f.write_str("INT1 (#DB)"),
            },
        }
    }
}

/// Why the processor stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownCause {
    /// A fault while delivering #DF.
    TripleFault,
    /// The event needs a feature Lockstep does not model (task gates, virtual-8086 mode).
    NotModelled(&'static str),
}

/// The processor entered the shutdown state: a report for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shutdown {
    pub cause: ShutdownCause,
    /// The events whose delivery was attempted, in order: the original one, then the
    /// exception (or #DF) that delivering the previous one led to.
    pub events: Vec<Event>,
    /// The fault each attempt in `events` raised (for a triple fault, one per event; the
    /// last is the fault while delivering #DF).
    pub raised: Vec<Fault>,
    pub rip: u64,
    pub cs: u16,
    pub cpl: u8,
    pub cr0: u64,
    pub cr2: u64,
    pub cr3: u64,
    pub cr4: u64,
    pub efer: u64,
    pub rflags: u64,
}

impl Shutdown {
    /// The fault that ended it (for a triple fault: the one raised while delivering #DF).
    pub fn last_fault(&self) -> Option<Fault> {
        self.raised.last().copied()
    }

    fn new(st: &CpuState, cause: ShutdownCause, events: Vec<Event>, raised: Vec<Fault>) -> Self {
        Shutdown {
            cause,
            events,
            raised,
            rip: st.rip,
            cs: st.seg[sreg::CS].selector,
            cpl: st.cpl(),
            cr0: st.cr0,
            cr2: st.cr2,
            cr3: st.cr3,
            cr4: st.cr4,
            efer: st.efer,
            rflags: st.rflags,
        }
    }
}

impl fmt::Display for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause {
            ShutdownCause::TripleFault => f.write_str("triple fault: processor shutdown")?,
            ShutdownCause::NotModelled(what) => write!(f, "shutdown: {what} is not modelled")?,
        }
        let mode = if self.cr0 & ctl::CR0_PE == 0 {
            "real mode"
        } else if self.efer & ctl::EFER_LMA != 0 {
            "long mode"
        } else {
            "protected mode"
        };
        writeln!(
            f,
            " at CS:RIP {:#06x}:{:#x} (CPL {}, {mode})",
            self.cs, self.rip, self.cpl
        )?;
        f.write_str("  events:")?;
        for (i, e) in self.events.iter().enumerate() {
            write!(f, "\n    delivering {e}")?;
            if let Some(x) = self.raised.get(i) {
                write!(f, " raised {x}")?;
            }
        }
        write!(
            f,
            "\n  CR0={:#x} CR2={:#x} CR3={:#x} CR4={:#x} EFER={:#x} RFLAGS={:#x}",
            self.cr0, self.cr2, self.cr3, self.cr4, self.efer, self.rflags
        )
    }
}

/// Can an external (maskable) interrupt be taken at this instruction boundary? IF = 1 and
/// no interrupt shadow (after STI or MOV SS/POP SS) in force. The machine's interrupt
/// controller asks this between engine runs and then calls [`deliver`] with
/// [`Event::External`].
pub fn accepts_external(st: &CpuState) -> bool {
    st.rflags & flags::IF != 0 && !st.interrupt_shadow
}

/// The machine's half of the interrupt-shadow rule, called after every engine run: a shadow
/// that was in force when the run started covers exactly one instruction, so it ends once the
/// run retired at least one. (A run that retires the STI/MOV SS itself starts without the
/// shadow and so keeps it; the machine then runs one more instruction before delivering.)
pub fn end_shadow_after_run(st: &mut CpuState, shadow_at_start: bool, retired: u64) {
    if shadow_at_start && retired > 0 {
        st.interrupt_shadow = false;
    }
}

/// Why one delivery attempt failed.
enum Fail {
    Fault(Fault),
    NotModelled(&'static str),
}

impl From<Fault> for Fail {
    fn from(f: Fault) -> Self {
        Fail::Fault(f)
    }
}

/// Deliver `ev`: push the frame, load CS:RIP from the IVT/IDT, escalate faults raised on the
/// way to #DF, and a fault while delivering #DF to a triple-fault [`Shutdown`]. On success the
/// CPU is no longer halted and no interrupt shadow is in force.
pub fn deliver(
    cpu: &mut Cpu,
    ram: &mut GuestRam,
    bus: &mut dyn Bus,
    ev: Event,
) -> Result<(), Box<Shutdown>> {
    let mut ctx = Ctx::new(cpu, ram, bus);
    deliver_in(&mut ctx, ev)
}

/// [`deliver`] on an existing context.
pub fn deliver_in(ctx: &mut Ctx, ev: Event) -> Result<(), Box<Shutdown>> {
    let mut cur = match ev {
        Event::Exception(f) => Event::from_fault(f),
        other => other,
    };
    let mut chain: Vec<Event> = Vec::new();
    let mut raised: Vec<Fault> = Vec::new();
    loop {
        chain.push(cur);
        if let Event::Exception(Fault::PageFault { addr, .. }) = cur {
            ctx.cpu.state.cr2 = addr;
        }
        ctx.ss_operand = false;
        let r = match mode_of(&ctx.cpu.state) {
            Mode::Real => deliver_real(ctx, cur),
            Mode::V86 => Err(Fail::NotModelled(
                "an interrupt or exception in virtual-8086 mode",
            )),
            Mode::Protected => deliver_protected(ctx, cur),
            Mode::Long => deliver_long(ctx, cur),
        };
        match r {
            Ok(()) => break,
            Err(Fail::NotModelled(what)) => {
                let st = &ctx.cpu.state;
                return Err(Box::new(Shutdown::new(
                    st,
                    ShutdownCause::NotModelled(what),
                    chain,
                    raised,
                )));
            }
            Err(Fail::Fault(f)) => {
                raised.push(f);
                if let Fault::PageFault { addr, .. } = f {
                    // CR2 is loaded when the #PF is detected, also when it becomes #DF
                    // (kernels read it in their #DF handler to spot stack overflows).
                    ctx.cpu.state.cr2 = addr;
                }
                if let Event::Software { kind, .. } = cur {
                    unretire_soft_int(ctx.cpu, kind);
                }
                let first = cur.class();
                if first == FaultClass::DoubleFault || chain.len() >= 8 {
                    let st = &ctx.cpu.state;
                    return Err(Box::new(Shutdown::new(
                        st,
                        ShutdownCause::TripleFault,
                        chain,
                        raised,
                    )));
                }
                // SDM Vol. 3 table 6-5: contributory after contributory, and contributory or
                // #PF after #PF, become #DF; everything else is delivered in turn.
                let second = f.class();
                let double = matches!(
                    (first, second),
                    (FaultClass::Contributory, FaultClass::Contributory)
                        | (FaultClass::PageFault, FaultClass::Contributory)
                        | (FaultClass::PageFault, FaultClass::PageFault)
                );
                cur = Event::Exception(if double { Fault::DoubleFault } else { f });
            }
        }
    }
    let st = &mut ctx.cpu.state;
    st.halted = false;
    st.interrupt_shadow = false;
    // The TLB's set for the (possibly new) privilege; a no-op when the CPL is unchanged. No
    // flush: the sets are per privilege, and the tables never hold a translation whose
    // outcome depends on RFLAGS.AC (see `mmu::Tlb`).
    ctx.sync_tlb_privilege();
    Ok(())
}

/// A fault while delivering INT n, INT3 or INTO is a fault of that instruction: the saved
/// RIP points at it and it does not retire. The engine treated it as a trap (RIP after it,
/// retired), so step back over its canonical encoding (CD ib, CC, CE; prefixed forms are not
/// distinguished). INT1 is delivered like a hardware trap and keeps RIP after it.
fn unretire_soft_int(cpu: &mut Cpu, kind: SoftKind) {
    let len = match kind {
        SoftKind::IntN => 2,
        SoftKind::Int3 | SoftKind::Into => 1,
        SoftKind::Int1 => return,
    };
    let st = &mut cpu.state;
    let mask = match st.code_bitness() {
        64 => u64::MAX,
        32 => 0xffff_ffff,
        _ => 0xffff,
    };
    st.rip = st.rip.wrapping_sub(len) & mask;
    cpu.retired = cpu.retired.saturating_sub(1);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Real,
    V86,
    Protected,
    Long,
}

fn mode_of(st: &CpuState) -> Mode {
    if st.cr0 & ctl::CR0_PE == 0 {
        Mode::Real
    } else if st.efer & ctl::EFER_LMA != 0 {
        Mode::Long
    } else if st.rflags & flags::VM != 0 {
        Mode::V86
    } else {
        Mode::Protected
    }
}

/// RFLAGS as pushed in the frame.
fn pushed_flags(st: &CpuState, ev: Event) -> u64 {
    if ev.sets_rf() {
        st.rflags | flags::RF
    } else {
        st.rflags
    }
}

/// Serialise frame items (lowest address first) at `width` bytes each.
fn frame_bytes(items: &[u64], width: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(items.len() * width);
    for &x in items {
        v.extend_from_slice(&x.to_le_bytes()[..width]);
    }
    v
}

/// Does the stack segment `seg` hold the bytes `[off, off + len)`? Offsets are 16- or 32-bit
/// (SS.B); a frame may not wrap around the top of the offset space.
fn stack_room(seg: &Segment, off: u64, len: u64) -> bool {
    let top: u64 = if seg.default_big() {
        0xffff_ffff
    } else {
        0xffff
    };
    let last = off + len - 1;
    if last > top {
        return false;
    }
    // Expand-down data segment: type bit 3 clear (data), bit 2 set.
    let expand_down = seg.attr & 0x1c == 0x14;
    if expand_down {
        off > seg.limit as u64
    } else {
        last <= seg.limit as u64
    }
}

/// Write a frame: as a supervisor access when the handler runs at CPL 0..2 (so U/S is that
/// of the new privilege), else as an ordinary access at the current (user) privilege.
fn write_frame(ctx: &mut Ctx, lin: u64, bytes: &[u8], supervisor: bool) -> Result<(), Fault> {
    if supervisor {
        ctx.write_bytes_supervisor(lin, bytes)
    } else {
        ctx.write_bytes(lin, bytes)
    }
}

/// The new stack pointer value for a `width`-byte stack after moving down to `lo`.
fn with_sp(old: u64, lo: u64, big: bool) -> u64 {
    if big {
        lo & 0xffff_ffff
    } else {
        (old & !0xffff) | (lo & 0xffff)
    }
}

// ----- real mode -----

/// Real mode: 4-byte IVT entries at IDTR.base, push FLAGS, CS, IP (16 bits each), clear IF,
/// TF and AC. No error codes.
fn deliver_real(ctx: &mut Ctx, ev: Event) -> Result<(), Fail> {
    let v = ev.vector() as u64;
    let idtr = ctx.cpu.state.idtr;
    if v * 4 + 3 > idtr.limit as u64 {
        return Err(Fault::GP0.into());
    }
    let mut ent = [0u8; 4];
    ctx.read_bytes_supervisor(idtr.base.wrapping_add(v * 4) & 0xffff_ffff, &mut ent)?;
    let ip = u16::from_le_bytes([ent[0], ent[1]]) as u64;
    let cs = u16::from_le_bytes([ent[2], ent[3]]);
    let st = &ctx.cpu.state;
    let ss = st.seg[sreg::SS];
    let sp = st.gpr[reg::RSP];
    let wrap = if ss.default_big() {
        0xffff_ffff
    } else {
        0xffff
    };
    let lo = sp.wrapping_sub(6) & wrap;
    if !stack_room(&ss, lo, 6) {
        return Err(Fault::StackFault(0).into());
    }
    let fl = pushed_flags(st, ev);
    let items = [
        st.rip & 0xffff,
        st.seg[sreg::CS].selector as u64,
        fl & 0xffff,
    ];
    let bytes = frame_bytes(&items, 2);
    ctx.write_bytes_supervisor(ss.base.wrapping_add(lo) & 0xffff_ffff, &bytes)?;
    let st = &mut ctx.cpu.state;
    st.gpr[reg::RSP] = with_sp(sp, lo, ss.default_big());
    st.rflags &= !(flags::IF | flags::TF | flags::AC);
    let c = &mut st.seg[sreg::CS];
    c.selector = cs;
    c.base = (cs as u64) << 4;
    st.rip = ip;
    Ok(())
}

// ----- gates and target code segment (protected and long mode) -----

/// Read and check the IDT gate for `ev` (limit, type, software-interrupt DPL, present).
fn fetch_gate(ctx: &mut Ctx, ev: Event, cpl: u8, long: bool) -> Result<Descriptor, Fail> {
    let v = ev.vector() as u16;
    let idt_err = v * 8 + 2 + ev.ext();
    let gate = desc::read_idt_gate(ctx, ev.vector())?.ok_or(Fault::GeneralProtection(idt_err))?;
    let typ_ok = !gate.is_code_or_data()
        && if long {
            matches!(gate.typ(), sys_type::INT_GATE | sys_type::TRAP_GATE)
        } else {
            matches!(
                gate.typ(),
                sys_type::INT_GATE
                    | sys_type::TRAP_GATE
                    | sys_type::INT_GATE16
                    | sys_type::TRAP_GATE16
                    | sys_type::TASK_GATE
            )
        };
    if !typ_ok {
        return Err(Fault::GeneralProtection(idt_err).into());
    }
    if ev.dpl_checked() && gate.dpl() < cpl {
        return Err(Fault::GeneralProtection(v * 8 + 2).into());
    }
    if !gate.present() {
        return Err(Fault::SegmentNotPresent(idt_err).into());
    }
    Ok(gate)
}

/// Read and check the code segment a gate names: not null, inside its table, a code segment
/// with DPL ≤ CPL, present.
fn target_code(ctx: &mut Ctx, sel: u16, ext: u16, cpl: u8) -> Result<Descriptor, Fail> {
    if desc::is_null(sel) {
        return Err(Fault::GeneralProtection(ext).into());
    }
    let e = desc::sel_error(sel) | ext;
    let d = desc::read_segment_descriptor(ctx, sel)?.ok_or(Fault::GeneralProtection(e))?;
    if !d.is_code() || d.dpl() > cpl {
        return Err(Fault::GeneralProtection(e).into());
    }
    if !d.present() {
        return Err(Fault::SegmentNotPresent(e).into());
    }
    Ok(d)
}

/// Read `N` bytes at `off` in the current TSS, checking TR.limit (#TS(TR + EXT)).
fn tss_read<const N: usize>(ctx: &mut Ctx, off: u64, ext: u16) -> Result<[u8; N], Fail> {
    let tr = ctx.cpu.state.tr;
    if off + N as u64 - 1 > tr.limit as u64 {
        return Err(Fault::InvalidTss(desc::sel_error(tr.selector) | ext).into());
    }
    let mut b = [0u8; N];
    let mut lin = tr.base.wrapping_add(off);
    if ctx.cpu.state.efer & ctl::EFER_LMA == 0 {
        lin &= 0xffff_ffff;
    }
    ctx.read_bytes_supervisor(lin, &mut b)?;
    Ok(b)
}

/// Check the stack segment loaded from the TSS for a privilege change to `new_cpl`.
fn check_new_ss(ctx: &mut Ctx, ss: u16, new_cpl: u8, ext: u16) -> Result<Descriptor, Fail> {
    if desc::is_null(ss) {
        return Err(Fault::InvalidTss(ext).into());
    }
    let e = desc::sel_error(ss) | ext;
    let d = desc::read_segment_descriptor(ctx, ss)?.ok_or(Fault::InvalidTss(e))?;
    if (ss & 3) as u8 != new_cpl || d.dpl() != new_cpl || !d.writable() {
        return Err(Fault::InvalidTss(e).into());
    }
    if !d.present() {
        return Err(Fault::StackFault(e).into());
    }
    Ok(d)
}

// ----- protected mode -----

/// Protected mode: 8-byte gates; 16- and 32-bit interrupt/trap gates; a privilege change
/// takes SS:ESP for the new CPL from the TSS (32- or 16-bit TSS by TR's type).
fn deliver_protected(ctx: &mut Ctx, ev: Event) -> Result<(), Fail> {
    let ext = ev.ext();
    let cpl = ctx.cpu.state.cpl();
    let gate = fetch_gate(ctx, ev, cpl, false)?;
    if gate.typ() == sys_type::TASK_GATE {
        return Err(Fail::NotModelled(
            "a task gate in the IDT (hardware task switch)",
        ));
    }
    let is16 = matches!(gate.typ(), sys_type::INT_GATE16 | sys_type::TRAP_GATE16);
    let int_gate = matches!(gate.typ(), sys_type::INT_GATE16 | sys_type::INT_GATE);
    let sel = gate.gate_selector();
    let cs = target_code(ctx, sel, ext, cpl)?;
    let inner = !cs.is_conforming() && cs.dpl() < cpl;
    let new_cpl = if inner { cs.dpl() } else { cpl };

    // The stack the frame goes on.
    let (ss_seg, ss_new, sp) = if inner {
        let t = (ctx.cpu.state.tr.attr & 0xf) as u8;
        let tss32 = t == sys_type::TSS_AVAIL || t == sys_type::TSS_BUSY;
        let (nss, nsp) = if tss32 {
            let b = tss_read::<6>(ctx, 4 + 8 * new_cpl as u64, ext)?;
            (
                u16::from_le_bytes([b[4], b[5]]),
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
            )
        } else {
            let b = tss_read::<4>(ctx, 2 + 4 * new_cpl as u64, ext)?;
            (
                u16::from_le_bytes([b[2], b[3]]),
                u16::from_le_bytes([b[0], b[1]]) as u64,
            )
        };
        let d = check_new_ss(ctx, nss, new_cpl, ext)?;
        (d.to_segment(nss), Some((nss, d)), nsp)
    } else {
        let st = &ctx.cpu.state;
        (st.seg[sreg::SS], None, st.gpr[reg::RSP])
    };

    let st = &ctx.cpu.state;
    let mut items = Vec::with_capacity(6);
    if let Some(e) = ev.error_code() {
        items.push(e as u64);
    }
    items.push(st.rip);
    items.push(st.seg[sreg::CS].selector as u64);
    items.push(pushed_flags(st, ev));
    if inner {
        items.push(st.gpr[reg::RSP]);
        items.push(st.seg[sreg::SS].selector as u64);
    }
    let width: u64 = if is16 { 2 } else { 4 };
    let len = items.len() as u64 * width;
    let big = ss_seg.default_big();
    let wrap: u64 = if big { 0xffff_ffff } else { 0xffff };
    let lo = (sp & wrap).wrapping_sub(len) & wrap;
    if !stack_room(&ss_seg, lo, len) {
        let e = ss_new.map_or(0, |(s, _)| desc::sel_error(s)) | ext;
        return Err(Fault::StackFault(e).into());
    }
    let target = gate.gate_offset(false);
    if target > cs.limit() as u64 {
        return Err(Fault::GeneralProtection(ext).into());
    }
    let bytes = frame_bytes(&items, width as usize);
    write_frame(
        ctx,
        ss_seg.base.wrapping_add(lo) & 0xffff_ffff,
        &bytes,
        new_cpl < 3,
    )?;
    desc::set_accessed(ctx, sel, &cs)?;
    if let Some((nss, d)) = ss_new {
        desc::set_accessed(ctx, nss, &d)?;
    }

    let st = &mut ctx.cpu.state;
    let mut ss_seg = ss_seg;
    if inner {
        ss_seg.attr |= 1; // accessed
        st.seg[sreg::SS] = ss_seg;
    }
    st.gpr[reg::RSP] = with_sp(sp, lo, big);
    let mut c = cs.to_segment((sel & !3) | new_cpl as u16);
    c.attr |= 1;
    st.seg[sreg::CS] = c;
    st.rip = target;
    st.rflags &= !(flags::TF | flags::NT | flags::RF | flags::VM);
    if int_gate {
        st.rflags &= !flags::IF;
    }
    Ok(())
}

// ----- long mode -----

/// Long mode (64-bit and compatibility mode): 16-byte gates, a 64-bit handler, RSP aligned
/// to 16, SS:RSP always pushed; a privilege change takes RSPn from the 64-bit TSS and loads
/// a null SS with RPL = new CPL; a non-zero IST index always switches to that IST stack.
fn deliver_long(ctx: &mut Ctx, ev: Event) -> Result<(), Fail> {
    let ext = ev.ext();
    let cpl = ctx.cpu.state.cpl();
    let gate = fetch_gate(ctx, ev, cpl, true)?;
    let sel = gate.gate_selector();
    let cs = target_code(ctx, sel, ext, cpl)?;
    if !cs.long() || cs.default_big() {
        return Err(Fault::GeneralProtection(desc::sel_error(sel) | ext).into());
    }
    let inner = !cs.is_conforming() && cs.dpl() < cpl;
    let new_cpl = if inner { cs.dpl() } else { cpl };
    let ist = gate.gate_ist();
    let old_rsp = ctx.cpu.state.gpr[reg::RSP];
    let new_rsp = if ist != 0 {
        u64::from_le_bytes(tss_read::<8>(ctx, 0x24 + 8 * (ist as u64 - 1), ext)?)
    } else if inner {
        u64::from_le_bytes(tss_read::<8>(ctx, 4 + 8 * new_cpl as u64, ext)?)
    } else {
        old_rsp
    };
    let top = new_rsp & !0xf;
    let st = &ctx.cpu.state;
    let mut items = Vec::with_capacity(6);
    if let Some(e) = ev.error_code() {
        items.push(e as u64);
    }
    items.push(st.rip);
    items.push(st.seg[sreg::CS].selector as u64);
    items.push(pushed_flags(st, ev));
    items.push(old_rsp);
    items.push(st.seg[sreg::SS].selector as u64);
    let lo = top.wrapping_sub(items.len() as u64 * 8);
    if !is_canonical(lo) || !is_canonical(top.wrapping_sub(1)) {
        return Err(Fault::StackFault(ext).into());
    }
    let target = gate.gate_offset(true);
    if !is_canonical(target) {
        return Err(Fault::GeneralProtection(ext).into());
    }
    let bytes = frame_bytes(&items, 8);
    write_frame(ctx, lo, &bytes, new_cpl < 3)?;
    desc::set_accessed(ctx, sel, &cs)?;

    let st = &mut ctx.cpu.state;
    if inner {
        st.seg[sreg::SS] = null_ss(new_cpl);
    }
    st.gpr[reg::RSP] = lo;
    let mut c = cs.to_segment((sel & !3) | new_cpl as u16);
    c.attr |= 1;
    st.seg[sreg::CS] = c;
    st.rip = target;
    st.rflags &= !(flags::TF | flags::NT | flags::RF | flags::VM);
    if gate.typ() == sys_type::INT_GATE {
        st.rflags &= !flags::IF;
    }
    Ok(())
}

/// The SS a 64-bit privilege change (or IRETQ to CPL 0..2 with a null selector) loads: a null
/// selector with RPL = CPL; the hidden part is marked unusable (P = 0) with DPL = CPL.
pub fn null_ss(cpl: u8) -> Segment {
    Segment {
        selector: cpl as u16,
        attr: (cpl as u16) << 5,
        limit: 0,
        base: 0,
    }
}

#[cfg(test)]
#[path = "interrupt_tests.rs"]
pub(crate) mod tests;
