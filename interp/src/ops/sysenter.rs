//! Fast system calls: SYSCALL/SYSRET and SYSENTER/SYSEXIT (Intel semantics: the model is
//! GenuineIntel).
//!
//! SYSCALL and SYSRET exist only in 64-bit mode with EFER.SCE = 1 (#UD elsewhere, including
//! compatibility mode: Intel never uses IA32_CSTAR, which is stored but unused). With
//! `CpuConfig::syscall_to_host` SYSCALL keeps its old behaviour for the user-mode harness: the
//! register effects (RCX, R11) happen and the engine stops with `Trap::Syscall`.
//!
//! The code and stack segments these instructions load are the fixed flat descriptors the SDM
//! specifies (nothing is read from the GDT). CPL changes, so the TLB is flushed (its entries
//! do not record the privilege they were checked at). All four end their block.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::is_canonical;
use crate::ops::check_no_lock;
use crate::state::flags::{FIXED1, IF, RF, VM};
use crate::state::{ctl, reg, sreg, CpuState, Segment};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Syscall => syscall,
        Code::Sysretd => sysret::<false>,
        Code::Sysretq => sysret::<true>,
        Code::Sysenter => sysenter,
        Code::Sysexitd => sysexit::<false>,
        Code::Sysexitq => sysexit::<true>,
        _ => return None,
    })
}

/// All four change CPL and the code segment.
pub fn ends_block(ins: &Instruction) -> bool {
    lookup(ins).is_some()
}

/// Flat code segment: type 11 (execute/read, accessed), S, P, G, DPL `dpl`; 64-bit (L=1,
/// D=0) or 32-bit (L=0, D=1).
fn flat_code(selector: u16, dpl: u16, long: bool) -> Segment {
    let size = if long { 1 << 13 } else { 1 << 14 };
    Segment {
        selector,
        attr: 0x809b | (dpl << 5) | size,
        limit: 0xffff_ffff,
        base: 0,
    }
}

/// Flat stack segment: type 3 (read/write, accessed), S, P, B, G, DPL `dpl`.
fn flat_stack(selector: u16, dpl: u16) -> Segment {
    Segment {
        selector,
        attr: 0xc093 | (dpl << 5),
        limit: 0xffff_ffff,
        base: 0,
    }
}

/// RFLAGS bits SYSRET loads from R11 (SDM: R11 AND 3C7FD7H, bit 1 set): RF and VM are cleared.
const SYSRET_RFLAGS: u64 = 0x3c_7fd7;

fn syscall(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    if st.efer & ctl::EFER_SCE == 0 || !st.in_64bit_mode() {
        return Err(Fault::ud("SYSCALL with EFER.SCE clear or outside 64-bit mode").into());
    }
    st.gpr[reg::RCX] = st.rip;
    st.gpr[reg::R11] = st.rflags & !RF;
    if x.cpu.config.syscall_to_host {
        // The architectural register effects happen; the kernel side is the host's.
        return Err(Trap::Syscall);
    }
    syscall_enter(st);
    // The TLB's set for the new privilege (no flush: see `mmu::Tlb`).
    x.sync_tlb_privilege();
    Ok(())
}

/// The SYSCALL transition after RCX/R11 are saved: RIP = LSTAR, RFLAGS &= ~SFMASK (and RF),
/// CS = STAR[47:32] & ~3 (64-bit, DPL 0), SS = STAR[47:32] + 8.
pub fn syscall_enter(st: &mut CpuState) {
    let sel = ((st.star >> 32) as u16) & 0xfffc;
    st.rip = st.lstar;
    st.rflags = (st.rflags & !(st.sfmask & 0xffff_ffff) & !RF) | FIXED1;
    st.seg[sreg::CS] = flat_code(sel, 0, true);
    st.seg[sreg::SS] = flat_stack(sel.wrapping_add(8), 0);
}

/// SYSRET (`Q`: REX.W, back to 64-bit mode; else to compatibility mode).
fn sysret<const Q: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    if st.efer & ctl::EFER_SCE == 0 || !st.in_64bit_mode() {
        return Err(Fault::ud("SYSRET with EFER.SCE clear or outside 64-bit mode").into());
    }
    if st.cpl() != 0 {
        return Err(Fault::GP0.into());
    }
    let rcx = st.gpr[reg::RCX];
    // Intel: a non-canonical RCX faults here, at CPL 0 (before anything changes).
    if Q && !is_canonical(rcx) {
        return Err(Fault::GP0.into());
    }
    let base = (st.star >> 48) as u16;
    st.rip = if Q { rcx } else { rcx & 0xffff_ffff };
    st.rflags = (st.gpr[reg::R11] & SYSRET_RFLAGS) | FIXED1;
    let cs = if Q { base.wrapping_add(16) } else { base } | 3;
    st.seg[sreg::CS] = flat_code(cs, 3, Q);
    st.seg[sreg::SS] = flat_stack(base.wrapping_add(8) | 3, 3);
    // The TLB's set for the new privilege (no flush: see `mmu::Tlb`).
    x.sync_tlb_privilege();
    Ok(())
}

/// SYSENTER: to CPL 0 at SYSENTER_EIP with SYSENTER_ESP; CS = SYSENTER_CS & ~3, SS = CS + 8.
/// #GP(0) in real mode or with a null SYSENTER_CS. Clears VM, IF and RF. Allowed at any CPL
/// and in compatibility mode; lands in 64-bit mode whenever long mode is active.
fn sysenter(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    let cs = st.msr.sysenter_cs as u16;
    if st.cr0 & ctl::CR0_PE == 0 || cs & 0xfffc == 0 {
        return Err(Fault::GP0.into());
    }
    let long = st.efer & ctl::EFER_LMA != 0;
    st.rflags &= !(VM | IF | RF);
    if long {
        st.gpr[reg::RSP] = st.msr.sysenter_esp;
        st.rip = st.msr.sysenter_eip;
    } else {
        st.gpr[reg::RSP] = st.msr.sysenter_esp & 0xffff_ffff;
        st.rip = st.msr.sysenter_eip & 0xffff_ffff;
    }
    let sel = cs & 0xfffc;
    st.seg[sreg::CS] = flat_code(sel, 0, long);
    st.seg[sreg::SS] = flat_stack(sel.wrapping_add(8), 0);
    // The TLB's set for the new privilege (no flush: see `mmu::Tlb`).
    x.sync_tlb_privilege();
    Ok(())
}

/// SYSEXIT (`Q`: REX.W, to 64-bit mode): RSP = rCX, RIP = rDX, CPL 3; CS = SYSENTER_CS + 16
/// (+32 for 64-bit), SS = CS + 8, both RPL 3. #GP(0) in real mode, above CPL 0, with a null
/// SYSENTER_CS, or (64-bit) a non-canonical RCX or RDX.
fn sysexit<const Q: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    let base = st.msr.sysenter_cs as u16;
    if st.cr0 & ctl::CR0_PE == 0 || base & 0xfffc == 0 || st.cpl() != 0 {
        return Err(Fault::GP0.into());
    }
    let (rsp, rip) = (st.gpr[reg::RCX], st.gpr[reg::RDX]);
    if Q && !(is_canonical(rsp) && is_canonical(rip)) {
        return Err(Fault::GP0.into());
    }
    let (rsp, rip) = if Q {
        (rsp, rip)
    } else {
        (rsp & 0xffff_ffff, rip & 0xffff_ffff)
    };
    let cs = base.wrapping_add(if Q { 32 } else { 16 }) | 3;
    st.gpr[reg::RSP] = rsp;
    st.rip = rip;
    st.seg[sreg::CS] = flat_code(cs, 3, Q);
    st.seg[sreg::SS] = flat_stack(cs.wrapping_add(8) | 3, 3);
    // The TLB's set for the new privilege (no flush: see `mmu::Tlb`).
    x.sync_tlb_privilege();
    Ok(())
}

#[cfg(test)]
#[path = "sysenter_tests.rs"]
mod tests;
