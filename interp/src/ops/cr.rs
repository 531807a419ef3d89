//! Control and debug registers: MOV to/from CR0/CR2/CR3/CR4/CR8 and DR0-DR7, CLTS, LMSW, SMSW,
//! WBINVD/INVD/WBNOINVD and INVLPG.
//!
//! Everything here except SMSW is CPL 0 only (#GP(0) otherwise). The pure functions
//! [`cr0_write`], [`cr4_write`] and [`cr3_write`] decide the new register values (and EFER.LMA
//! for long-mode entry/exit) or the fault; the handlers then store them and flush the TLB when
//! paging-relevant state changed. Every instruction that writes state ends its block (see
//! [`ends_block`]): the decoded-block lookup re-reads the code bitness from CS/EFER at the next
//! block, and the execute TLB epoch moves with every flush, so no block-cache flush is needed
//! (`BlockKey` holds the bitness, not the CPL; handlers check the CPL at run time).

use crate::cpuid;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::MAX_PHYS_BITS;
use crate::operand::{mask, op_size, read_reg};
use crate::ops::check_no_lock;
use crate::state::{ctl, sreg, CpuState};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic, OpKind, Register};

/// CR0 bits that exist (the others read as 0 and writes to them are ignored, bits 63:32 #GP).
const CR0_DEFINED: u64 = ctl::CR0_PE
    | ctl::CR0_MP
    | ctl::CR0_EM
    | ctl::CR0_TS
    | ctl::CR0_ET
    | ctl::CR0_NE
    | ctl::CR0_WP
    | ctl::CR0_AM
    | ctl::CR0_NW
    | ctl::CR0_CD
    | ctl::CR0_PG;

/// CR4 bits whose paging effect requires a TLB flush when they change.
const CR4_PAGING: u64 = ctl::CR4_PSE
    | ctl::CR4_PAE
    | ctl::CR4_PGE
    | ctl::CR4_SMEP
    | ctl::CR4_SMAP
    | ctl::CR4_PCIDE
    | ctl::CR4_PKE
    | ctl::CR4_LA57;

/// DR6 bits software can write (B0-B3, BD, BS, BT); bits 4-11 and 16-31 read as 1.
const DR6_WRITABLE: u64 = 0xe00f;
const DR6_FIXED1: u64 = 0xffff_0ff0;
/// DR7 bits software can write (L0-G3, LE, GE, GD, R/W and LEN); bit 10 reads as 1.
const DR7_WRITABLE: u64 = 0xffff_23ff;
const DR7_FIXED1: u64 = 0x400;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Mov => {
            let r0 = reg_op(ins, 0);
            let r1 = reg_op(ins, 1);
            if r0.is_cr() {
                mov_to_cr
            } else if r1.is_cr() {
                mov_from_cr
            } else if r0.is_dr() {
                mov_to_dr
            } else if r1.is_dr() {
                mov_from_dr
            } else {
                return None;
            }
        }
        Mnemonic::Clts => clts,
        Mnemonic::Lmsw => lmsw,
        Mnemonic::Smsw => smsw,
        Mnemonic::Wbinvd | Mnemonic::Invd | Mnemonic::Wbnoinvd => wbinvd,
        Mnemonic::Invlpg => invlpg,
        _ => return None,
    })
}

/// Instructions of this family that end their block: every one that writes a control or debug
/// register, and the cache/TLB maintenance instructions.
pub fn ends_block(ins: &Instruction) -> bool {
    match ins.mnemonic() {
        Mnemonic::Mov => {
            let r0 = reg_op(ins, 0);
            r0.is_cr() || r0.is_dr()
        }
        Mnemonic::Clts
        | Mnemonic::Lmsw
        | Mnemonic::Wbinvd
        | Mnemonic::Invd
        | Mnemonic::Wbnoinvd
        | Mnemonic::Invlpg => true,
        _ => false,
    }
}

fn reg_op(ins: &Instruction, n: u32) -> Register {
    if n < ins.op_count() && ins.op_kind(n) == OpKind::Register {
        ins.op_register(n)
    } else {
        Register::None
    }
}

fn check_cpl0(x: &Ctx) -> Result<(), Fault> {
    if x.cpu.state.cpl() != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

fn ok_if(cond: bool) -> Result<(), Fault> {
    if cond {
        Ok(())
    } else {
        Err(Fault::GP0)
    }
}

/// Control-register number of a CRn register operand.
fn cr_number(r: Register) -> u32 {
    (r as u32).wrapping_sub(Register::CR0 as u32)
}

/// Debug-register number of a DRn register operand.
fn dr_number(r: Register) -> u32 {
    (r as u32).wrapping_sub(Register::DR0 as u32)
}

/// CR4 bits this CPU accepts: the ones whose feature CPUID advertises and whose semantics are
/// modelled. VME/PVI, UMIP, LA57, VMXE, SMXE, PCIDE, PKE and CET are never accepted.
pub fn cr4_supported() -> u64 {
    let l1 = cpuid::query(1, 0, 0, cpuid::OsState::RESET);
    let l7 = cpuid::query(7, 0, 0, cpuid::OsState::RESET);
    let edx = |bit: u32| l1.edx & (1 << bit) != 0;
    let mut m = ctl::CR4_PCE;
    let pairs_edx = [
        (2, ctl::CR4_DE),
        (3, ctl::CR4_PSE),
        (4, ctl::CR4_TSD),
        (6, ctl::CR4_PAE),
        (7, ctl::CR4_MCE),
        (13, ctl::CR4_PGE),
        (24, ctl::CR4_OSFXSR),
        (25, ctl::CR4_OSXMMEXCPT),
    ];
    for (bit, cr4) in pairs_edx {
        if edx(bit) {
            m |= cr4;
        }
    }
    if l1.ecx & cpuid::bits::XSAVE != 0 {
        m |= ctl::CR4_OSXSAVE;
    }
    for (bit, cr4) in [
        (0, ctl::CR4_FSGSBASE),
        (7, ctl::CR4_SMEP),
        (20, ctl::CR4_SMAP),
    ] {
        if l7.ebx & (1 << bit) != 0 {
            m |= cr4;
        }
    }
    m
}

/// New CR0 and EFER for MOV to CR0 of `v` in state `st`, or #GP(0).
/// Bits 63:32 set: #GP. Undefined low bits are dropped, ET reads as 1. PG without PE, NW
/// without CD: #GP. Setting PG with EFER.LME enters long mode (EFER.LMA = 1); that needs
/// CR4.PAE and a code segment with L = 0. Clearing PG with LMA set leaves long mode, which is
/// only allowed from compatibility mode (#GP in 64-bit mode).
pub fn cr0_write(st: &CpuState, v: u64) -> Result<(u64, u64), Fault> {
    ok_if(v >> 32 == 0)?;
    let v = (v & CR0_DEFINED) | ctl::CR0_ET;
    ok_if(v & ctl::CR0_PG == 0 || v & ctl::CR0_PE != 0)?;
    ok_if(v & ctl::CR0_NW == 0 || v & ctl::CR0_CD != 0)?;
    let old = st.cr0;
    let mut efer = st.efer;
    let pg_on = v & ctl::CR0_PG != 0 && old & ctl::CR0_PG == 0;
    let pg_off = v & ctl::CR0_PG == 0 && old & ctl::CR0_PG != 0;
    if pg_on && efer & ctl::EFER_LME != 0 {
        ok_if(st.cr4 & ctl::CR4_PAE != 0)?;
        ok_if(!st.seg[sreg::CS].long())?;
        efer |= ctl::EFER_LMA;
    }
    if pg_off && efer & ctl::EFER_LMA != 0 {
        ok_if(!st.in_64bit_mode())?;
        efer &= !ctl::EFER_LMA;
    }
    Ok((v, efer))
}

/// New CR4 for MOV to CR4 of `v`, or #GP(0): unsupported or reserved bits, or clearing PAE
/// while long mode is active.
pub fn cr4_write(st: &CpuState, v: u64) -> Result<u64, Fault> {
    ok_if(v & !cr4_supported() == 0)?;
    ok_if(st.efer & ctl::EFER_LMA == 0 || v & ctl::CR4_PAE != 0)?;
    Ok(v)
}

/// New CR3 for MOV to CR3 of `v`, or #GP(0): in long mode bits 63:MAXPHYADDR are reserved
/// (bit 63 too: no PCIDs). Outside long mode the source is 32 bits.
pub fn cr3_write(st: &CpuState, v: u64) -> Result<u64, Fault> {
    if st.efer & ctl::EFER_LMA != 0 {
        ok_if(v >> MAX_PHYS_BITS == 0)?;
        Ok(v)
    } else {
        Ok(v & 0xffff_ffff)
    }
}

/// The PDPTEs a MOV to CR0/CR3/CR4 loads when the result is PAE legacy paging (PG = 1,
/// PAE = 1, LMA = 0): read from the new CR3, #GP(0) for a present entry with reserved bits,
/// before anything is committed. `None` in every other paging mode.
fn pae_pdptes(x: &Ctx, cr0: u64, cr3: u64, cr4: u64, efer: u64) -> Result<Option<[u64; 4]>, Fault> {
    if cr0 & ctl::CR0_PG == 0 || cr4 & ctl::CR4_PAE == 0 || efer & ctl::EFER_LMA != 0 {
        return Ok(None);
    }
    let mut probe = CpuState::power_on();
    probe.cr0 = cr0;
    probe.cr3 = cr3;
    probe.cr4 = cr4;
    probe.efer = efer;
    crate::mmu::load_pdptes(x.ram, &probe).map(Some)
}

/// The register-width mask of a MOV CR/DR GPR operand: 64 bits in 64-bit mode, else 32.
fn gpr_value(x: &Ctx, r: Register) -> u64 {
    read_reg(&x.cpu.state, r)
}

fn mov_to_cr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let n = cr_number(ins.op0_register());
    if !matches!(n, 0 | 2 | 3 | 4 | 8) {
        return Err(Fault::ud("MOV to a non-existent control register").into());
    }
    check_cpl0(x)?;
    let v = gpr_value(x, ins.op1_register());
    let st = &x.cpu.state;
    match n {
        0 => {
            let (cr0, efer) = cr0_write(st, v)?;
            let flush =
                (cr0 ^ st.cr0) & (ctl::CR0_PG | ctl::CR0_WP | ctl::CR0_PE) != 0 || efer != st.efer;
            let reload = (cr0 ^ st.cr0) & (ctl::CR0_PG | ctl::CR0_CD | ctl::CR0_NW) != 0;
            let pdptes = if reload {
                pae_pdptes(x, cr0, st.cr3, st.cr4, efer)?
            } else {
                None
            };
            let st = &mut x.cpu.state;
            st.cr0 = cr0;
            st.efer = efer;
            if flush {
                x.cpu.flush_tlb();
            }
            if reload {
                x.cpu.tlb.set_pdptes(pdptes);
            }
        }
        2 => x.cpu.state.cr2 = v,
        3 => {
            let cr3 = cr3_write(st, v)?;
            let pdptes = pae_pdptes(x, st.cr0, cr3, st.cr4, st.efer)?;
            x.cpu.state.cr3 = cr3;
            // No PCIDs: a CR3 load drops every non-global translation.
            x.cpu.tlb.flush_non_global();
            x.cpu.tlb.set_pdptes(pdptes);
        }
        4 => {
            let cr4 = cr4_write(st, v)?;
            let changed = cr4 ^ st.cr4;
            let pdptes = if changed & CR4_PAGING != 0 {
                pae_pdptes(x, st.cr0, st.cr3, cr4, st.efer)?
            } else {
                None
            };
            x.cpu.state.cr4 = cr4;
            if changed & CR4_PAGING != 0 {
                x.cpu.flush_tlb();
                x.cpu.tlb.set_pdptes(pdptes);
            }
        }
        _ => {
            // CR8 = TPR[7:4]; bits 63:4 are reserved. A lower TPR may unmask an interrupt.
            ok_if(v >> 4 == 0)?;
            x.cpu.state.cr8 = v;
            x.cpu.yield_requested = true;
        }
    }
    Ok(())
}

fn mov_from_cr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let n = cr_number(ins.op1_register());
    let st = &x.cpu.state;
    let v = match n {
        0 => st.cr0,
        2 => st.cr2,
        3 => st.cr3,
        4 => st.cr4,
        8 => st.cr8,
        _ => return Err(Fault::ud("MOV from a non-existent control register").into()),
    };
    check_cpl0(x)?;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// The debug register a MOV DR operand names after DR4/DR5 aliasing (to DR6/DR7 while
/// CR4.DE = 0; #UD while CR4.DE = 1). DR8-DR15: #UD.
fn dr_target(st: &CpuState, r: Register) -> Result<usize, Fault> {
    match dr_number(r) {
        n @ (0..=3 | 6 | 7) => Ok(n as usize),
        n @ (4 | 5) if st.cr4 & ctl::CR4_DE == 0 => Ok(n as usize + 2),
        4 | 5 => Err(Fault::ud("DR4/DR5 with CR4.DE set")),
        _ => Err(Fault::ud("MOV with a non-existent debug register")),
    }
}

/// Stored value of a write of `v` to DRn (n after aliasing), or #GP(0) for bits 63:32 of
/// DR6/DR7. DR7.GD (general detect) and breakpoints are not modelled: the values are kept.
pub fn dr_write_value(n: usize, v: u64) -> Result<u64, Fault> {
    match n {
        6 => {
            ok_if(v >> 32 == 0)?;
            Ok((v & DR6_WRITABLE) | DR6_FIXED1)
        }
        7 => {
            ok_if(v >> 32 == 0)?;
            Ok((v & DR7_WRITABLE) | DR7_FIXED1)
        }
        _ => Ok(v),
    }
}

fn mov_to_dr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let n = dr_target(&x.cpu.state, ins.op0_register())?;
    check_cpl0(x)?;
    let v = gpr_value(x, ins.op1_register());
    x.cpu.state.dr[n] = dr_write_value(n, v)?;
    Ok(())
}

fn mov_from_dr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let n = dr_target(&x.cpu.state, ins.op1_register())?;
    check_cpl0(x)?;
    let v = x.cpu.state.dr[n];
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// CLTS: clear CR0.TS.
fn clts(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    x.cpu.state.cr0 &= !ctl::CR0_TS;
    Ok(())
}

/// CR0 after LMSW with source `src`: MP, EM and TS load from bits 1..3; PE can be set but not
/// cleared.
pub fn lmsw_value(cr0: u64, src: u64) -> u64 {
    let low = ctl::CR0_MP | ctl::CR0_EM | ctl::CR0_TS;
    (cr0 & !low) | (src & low) | (src & ctl::CR0_PE)
}

/// LMSW r/m16. Setting PE enters protected mode (the code segment's cached descriptor stays,
/// so the code stays 16-bit until a far jump).
fn lmsw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    let src = x.read_op(ins, 0)?;
    let st = &mut x.cpu.state;
    let new = lmsw_value(st.cr0, src);
    let changed = new ^ st.cr0;
    st.cr0 = new;
    if changed & ctl::CR0_PE != 0 {
        x.cpu.flush_tlb();
    }
    Ok(())
}

/// SMSW r/m: a register gets CR0 at its operand size (r16 keeps bits 63:16, r32 gets CR0[31:0]
/// zero-extended, r64 all of CR0); memory always gets 16 bits. Not privileged (no UMIP).
fn smsw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let v = x.cpu.state.cr0 & mask(size);
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// WBINVD/INVD/WBNOINVD: no caches are modelled; CPL 0 only.
fn wbinvd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    Ok(())
}

/// INVLPG m: drop the translation of the page holding the operand's linear address. Never
/// faults on the address (a non-canonical one is a no-op).
fn invlpg(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    // INVLPG never faults on its operand; a non-canonical address simply names no page.
    let lin = x.effective_addr(ins);
    x.cpu.tlb.invalidate_page(lin);
    Ok(())
}

#[cfg(test)]
#[path = "cr_tests.rs"]
mod tests;
