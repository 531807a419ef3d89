//! Interrupt instructions: INT n, INT3, INTO, INT1 (ICEBP), IRET/IRETD/IRETQ, and HLT.
//!
//! INT n, INT3, INTO and INT1 do not deliver anything themselves: they complete (a trap, RIP
//! after the instruction) and return the event as a fault (`Fault::SoftwareInterrupt(n)`,
//! `Breakpoint`, `Overflow`, `Int1`), which the engine hands to the machine; a system machine
//! delivers it with `interrupt::deliver`, the user-mode harness turns it into a signal.
//!
//! IRET is modelled in real mode, protected mode (same privilege, and return to an outer
//! privilege with SS:ESP popped and data segments nulled) and long mode (IRETQ always pops
//! SS:RSP in 64-bit mode; returns to compatibility mode). Not modelled, raising a named #UD:
//! IRET with NT = 1 outside IA-32e mode (a task return), IRET to or in virtual-8086 mode.

use crate::decode::Handler;
use crate::desc;
use crate::fault::{Fault, Trap};
use crate::interrupt::null_ss;
use crate::mmu::is_canonical;
use crate::ops::check_no_lock;
use crate::state::{ctl, flags, reg, sreg};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Int_imm8 => int_n,
        Code::Int3 => int3,
        Code::Into => into,
        Code::Int1 => int1,
        Code::Iretw => iret::<2>,
        Code::Iretd => iret::<4>,
        Code::Iretq => iret::<8>,
        Code::Hlt => hlt,
        _ => return None,
    })
}

/// IRET changes CS (mode, CPL) and interrupt state: it ends its block. (INT n and friends end
/// it anyway: they stop the engine.)
pub fn ends_block(ins: &Instruction) -> bool {
    matches!(ins.code(), Code::Iretw | Code::Iretd | Code::Iretq)
}

fn iopl(rflags: u64) -> u8 {
    ((rflags >> 12) & 3) as u8
}

/// In virtual-8086 mode INT n needs IOPL = 3 (no VME modelled), else #GP(0).
fn check_v86_iopl(x: &Ctx) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.cr0 & ctl::CR0_PE != 0 && st.rflags & flags::VM != 0 && iopl(st.rflags) < 3 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// INT n: a software interrupt through vector n (a trap).
fn int_n(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_v86_iopl(x)?;
    Err(Fault::SoftwareInterrupt(ins.immediate8()).into())
}

/// INT3: #BP, a trap (RIP after the instruction).
fn int3(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Err(Fault::Breakpoint.into())
}

/// INTO: invalid in 64-bit mode (iced decodes CE as invalid there; checked again here);
/// elsewhere #OF (a trap) when OF is set.
fn into(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if x.cpu.state.in_64bit_mode() {
        return Err(Fault::ud("INTO in 64-bit mode").into());
    }
    if x.cpu.state.rflags & flags::OF != 0 {
        return Err(Fault::Overflow.into());
    }
    Ok(())
}

/// INT1 (ICEBP): #DB as a trap, delivered like a hardware event.
fn int1(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Err(Fault::Int1.into())
}

/// HLT: privileged (#GP(0) above CPL 0; CPL is 0 in real mode). Marks the CPU halted and stops
/// the engine with RIP after the instruction.
fn hlt(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if x.cpu.state.cpl() != 0 {
        return Err(Fault::GP0.into());
    }
    x.cpu.state.halted = true;
    Err(Trap::Halt)
}

/// IRET with an `S`-byte operand size.
fn iret<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    if st.cr0 & ctl::CR0_PE == 0 {
        return iret_real::<S>(x);
    }
    if st.rflags & flags::VM != 0 {
        return Err(Fault::ud("IRET in virtual-8086 mode is not modelled").into());
    }
    if st.rflags & flags::NT != 0 {
        if st.efer & ctl::EFER_LMA != 0 {
            // No task switches in IA-32e mode.
            return Err(Fault::GP0.into());
        }
        return Err(Fault::ud("IRET task return (NT=1) is not modelled").into());
    }
    iret_protected::<S>(x)
}

/// Flags an IRET may write, by operand size and the privilege it runs at (before returning).
/// RF, AC and ID need a 32/64-bit operand; IF needs CPL ≤ IOPL; IOPL, VIF and VIP need CPL 0.
fn iret_flag_mask(size: u8, cpl: u8, iopl: u8) -> u64 {
    use flags::*;
    let mut m = CF | PF | AF | ZF | SF | TF | DF | OF | NT;
    if size >= 4 {
        m |= RF | AC | ID;
    }
    if cpl <= iopl {
        m |= IF;
    }
    if cpl == 0 {
        m |= IOPL;
        if size >= 4 {
            m |= VIF | VIP;
        }
    }
    if size == 2 {
        m &= 0xffff;
    }
    m
}

/// Real-mode IRET: pop IP, CS, FLAGS. A 32-bit IRETD needs EIP[31:16] = 0 (#GP(0)) and keeps
/// VM, VIF and VIP; a 16-bit one writes FLAGS[15:0] only.
fn iret_real<const S: u8>(x: &mut Ctx) -> Result<(), Trap> {
    let ip = x.peek_stack(0, S)?;
    let cs = x.peek_stack(S as u64, S)? as u16;
    let fl = x.peek_stack(2 * S as u64, S)?;
    if ip > 0xffff {
        return Err(Fault::GP0.into());
    }
    x.add_rsp(3 * S as u64);
    let st = &mut x.cpu.state;
    let old = st.rflags;
    st.rflags = if S == 2 {
        (old & !0xffff) | (fl & 0x7fd5) | flags::FIXED1
    } else {
        (fl & 0x25_7fd5) | (old & 0x1a_0000) | flags::FIXED1
    };
    let c = &mut st.seg[sreg::CS];
    c.selector = cs;
    c.base = (cs as u64) << 4;
    st.rip = ip;
    finish(x);
    Ok(())
}

/// After IRET: interrupts may have become deliverable (yield), and the TLB's set must be
/// the one for the (possibly new) privilege (a no-op when the CPL is unchanged; no flush: the
/// sets are per privilege, and the tables never hold a translation whose outcome depends on
/// RFLAGS.AC; see `mmu::Tlb`).
fn finish(x: &mut Ctx) {
    x.cpu.yield_requested = true;
    x.sync_tlb_privilege();
}

/// Protected-mode and long-mode IRET.
fn iret_protected<const S: u8>(x: &mut Ctx) -> Result<(), Trap> {
    let st = &x.cpu.state;
    let cpl = st.cpl();
    let long_mode = st.efer & ctl::EFER_LMA != 0;
    let in64 = st.in_64bit_mode();
    let w = S as u64;
    let ip = x.peek_stack(0, S)?;
    let cs_sel = x.peek_stack(w, S)? as u16;
    let fl = x.peek_stack(2 * w, S)?;
    let rpl = (cs_sel & 3) as u8;

    // The return code segment.
    if desc::is_null(cs_sel) {
        return Err(Fault::GP0.into());
    }
    let e = desc::sel_error(cs_sel);
    let d = desc::read_segment_descriptor(x, cs_sel)?.ok_or(Fault::GeneralProtection(e))?;
    if !d.is_code()
        || rpl < cpl
        || (d.is_conforming() && d.dpl() > rpl)
        || (!d.is_conforming() && d.dpl() != rpl)
    {
        return Err(Fault::GeneralProtection(e).into());
    }
    if !d.present() {
        return Err(Fault::SegmentNotPresent(e).into());
    }
    let to64 = long_mode && d.long();
    if to64 && d.default_big() {
        return Err(Fault::GeneralProtection(e).into());
    }
    if !long_mode && S == 4 && fl & flags::VM != 0 && cpl == 0 {
        return Err(Fault::ud("IRET to virtual-8086 mode is not modelled").into());
    }

    // In 64-bit mode IRET always pops SS:RSP; elsewhere only when returning outward.
    let outer = rpl > cpl;
    let pops_stack = outer || in64;
    let ip = match S {
        2 => ip & 0xffff,
        4 => ip & 0xffff_ffff,
        _ => ip,
    };
    if to64 {
        if !is_canonical(ip) {
            return Err(Fault::GP0.into());
        }
    } else if ip > d.limit() as u64 {
        return Err(Fault::GP0.into());
    }

    let mut new_ss = None;
    if pops_stack {
        let sp = x.peek_stack(3 * w, S)?;
        let ss_sel = x.peek_stack(4 * w, S)? as u16;
        let seg = if desc::is_null(ss_sel) {
            // A null SS is allowed only when returning to 64-bit code at CPL 0..2.
            if !(to64 && rpl != 3) {
                return Err(Fault::GP0.into());
            }
            let mut s = null_ss(rpl);
            s.selector = ss_sel;
            s
        } else {
            let se = desc::sel_error(ss_sel);
            let sd =
                desc::read_segment_descriptor(x, ss_sel)?.ok_or(Fault::GeneralProtection(se))?;
            if (ss_sel & 3) as u8 != rpl || !sd.writable() || sd.dpl() != rpl {
                return Err(Fault::GeneralProtection(se).into());
            }
            if !sd.present() {
                return Err(Fault::StackFault(se).into());
            }
            desc::set_accessed(x, ss_sel, &sd)?;
            let mut s = sd.to_segment(ss_sel);
            s.attr |= 1;
            s
        };
        new_ss = Some((seg, sp));
    }
    desc::set_accessed(x, cs_sel, &d)?;

    // Commit.
    let st = &x.cpu.state;
    let old_flags = st.rflags;
    let mask = iret_flag_mask(S, cpl, iopl(old_flags));
    let new_flags = (old_flags & !mask) | (fl & mask) | flags::FIXED1;
    match new_ss {
        Some((seg, sp)) => {
            let st = &mut x.cpu.state;
            st.gpr[reg::RSP] = if to64 {
                sp
            } else if seg.default_big() {
                sp & 0xffff_ffff
            } else {
                (st.gpr[reg::RSP] & !0xffff) | (sp & 0xffff)
            };
            st.seg[sreg::SS] = seg;
        }
        None => x.add_rsp(3 * w),
    }
    let st = &mut x.cpu.state;
    st.rflags = new_flags;
    let mut c = d.to_segment(cs_sel);
    c.attr |= 1;
    st.seg[sreg::CS] = c;
    st.rip = ip;
    if outer {
        null_data_segments(st, rpl);
    }
    finish(x);
    Ok(())
}

/// On a return to an outer privilege, ES, DS, FS and GS holding a data or non-conforming code
/// segment more privileged than the new CPL become null (unusable; the selector reads 0).
fn null_data_segments(st: &mut crate::state::CpuState, new_cpl: u8) {
    for i in [sreg::ES, sreg::DS, sreg::FS, sreg::GS] {
        let s = &mut st.seg[i];
        let code = s.attr & 0x08 != 0;
        let conforming = code && s.attr & 0x04 != 0;
        let usable = s.attr & 0x80 != 0 && s.attr & 0x10 != 0;
        if usable && !conforming && s.dpl() < new_cpl {
            s.selector = 0;
            s.attr &= !0x80;
        }
    }
}

#[cfg(test)]
#[path = "interrupt_tests.rs"]
mod tests;
