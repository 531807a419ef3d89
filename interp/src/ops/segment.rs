//! Segment register loads: MOV Sreg, POP Sreg, LDS/LES/LFS/LGS/LSS, with the checks of real,
//! virtual-8086, protected, compatibility and 64-bit mode (SDM vol. 3 ch. 5 and the MOV/POP/
//! LDS pages). The shared `check_*` functions are also used by far transfers (`ops::far`).
//!
//! An unusable segment (a null selector loaded into DS/ES/FS/GS, or a null SS in 64-bit mode)
//! has its present bit (attr bit 7) clear; the other attribute bits keep only the DPL of SS.

use crate::decode::Handler;
use crate::desc::{self, sel_error, Descriptor};
use crate::fault::{Fault, Trap};
use crate::operand::{op_size, sreg_index, write_reg};
use crate::ops::check_no_lock;
use crate::state::{sreg, Segment};
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code as C;
    Some(match ins.code() {
        C::Mov_Sreg_rm16 | C::Mov_Sreg_r32m16 | C::Mov_Sreg_r64m16 => mov_to_sreg,
        C::Lds_r16_m1616 | C::Lds_r32_m1632 => load_far_ptr::<{ sreg::DS }>,
        C::Les_r16_m1616 | C::Les_r32_m1632 => load_far_ptr::<{ sreg::ES }>,
        C::Lfs_r16_m1616 | C::Lfs_r32_m1632 | C::Lfs_r64_m1664 => load_far_ptr::<{ sreg::FS }>,
        C::Lgs_r16_m1616 | C::Lgs_r32_m1632 | C::Lgs_r64_m1664 => load_far_ptr::<{ sreg::GS }>,
        C::Lss_r16_m1616 | C::Lss_r32_m1632 | C::Lss_r64_m1664 => load_far_ptr::<{ sreg::SS }>,
        _ if ins.mnemonic() == Mnemonic::Pop
            && ins.op0_kind() == OpKind::Register
            && ins.op0_register().is_segment_register() =>
        {
            match ins.stack_pointer_increment() {
                2 => pop_sreg::<2>,
                4 => pop_sreg::<4>,
                _ => pop_sreg::<8>,
            }
        }
        _ => return None,
    })
}

/// Loads of SS end the block: they set the interrupt shadow and yield to the machine.
pub fn ends_block(ins: &Instruction) -> bool {
    let to_ss = ins.op_count() > 0
        && ins.op0_kind() == OpKind::Register
        && ins.op0_register() == iced_x86::Register::SS;
    to_ss && matches!(ins.mnemonic(), Mnemonic::Mov | Mnemonic::Pop)
}

/// A checked segment load, ready to commit: the new hidden cache, and the descriptor whose
/// accessed bit must be set (with its selector).
#[derive(Clone, Copy, Debug)]
pub struct SegLoad {
    pub seg: Segment,
    pub mark: Option<(u16, Descriptor)>,
}

/// Hidden cache of an unusable (null) segment: P clear, DPL = `dpl`. Intel clears the base
/// (Linux's X86_BUG_NULL_SEG is the AMD behaviour of keeping it).
pub fn unusable(selector: u16, dpl: u8) -> Segment {
    Segment {
        selector,
        attr: (dpl as u16 & 3) << 5,
        limit: 0,
        base: 0,
    }
}

/// Is a segment usable (present bit of the cached attributes)?
#[inline]
pub fn usable(s: &Segment) -> bool {
    s.attr & 0x80 != 0
}

/// Read the code/data descriptor `sel` names; beyond the table limit -> #GP(sel).
pub fn read_desc_or_gp(x: &mut Ctx, sel: u16) -> Result<Descriptor, Fault> {
    desc::read_segment_descriptor(x, sel)?.ok_or(Fault::GeneralProtection(sel_error(sel)))
}

/// The checks for loading `sel` into data segment register `i` (DS, ES, FS or GS) or SS,
/// in the current mode. Nothing changes.
pub fn check_load(x: &mut Ctx, i: usize, sel: u16) -> Result<SegLoad, Fault> {
    let st = &x.cpu.state;
    if st.in_real_mode() || st.in_v86_mode() {
        // Real mode: only the selector and base change. Virtual-8086: a 64 KiB DPL-3
        // read/write data segment.
        let mut seg = st.seg[i];
        seg.selector = sel;
        seg.base = (sel as u64) << 4;
        if st.in_v86_mode() {
            seg.limit = 0xffff;
            seg.attr = 0x00f3;
        }
        return Ok(SegLoad { seg, mark: None });
    }
    let cpl = st.cpl();
    let rpl = (sel & 3) as u8;
    if i == sreg::SS {
        if desc::is_null(sel) {
            // A null SS is allowed only in 64-bit mode below CPL 3 with RPL = CPL.
            if st.in_64bit_mode() && cpl != 3 && rpl == cpl {
                return Ok(SegLoad {
                    seg: unusable(sel, cpl),
                    mark: None,
                });
            }
            return Err(Fault::GP0);
        }
        let d = read_desc_or_gp(x, sel)?;
        check_stack_desc(&d, sel, cpl, Fault::GeneralProtection(sel_error(sel)))?;
        if !d.present() {
            return Err(Fault::StackFault(sel_error(sel)));
        }
        return Ok(loaded(&d, sel));
    }
    if desc::is_null(sel) {
        return Ok(SegLoad {
            seg: unusable(sel, 0),
            mark: None,
        });
    }
    let d = read_desc_or_gp(x, sel)?;
    let gp = Fault::GeneralProtection(sel_error(sel));
    if !d.readable() {
        // System descriptors and execute-only code.
        return Err(gp);
    }
    if (d.is_data() || !d.is_conforming()) && (rpl > d.dpl() || cpl > d.dpl()) {
        return Err(gp);
    }
    if !d.present() {
        return Err(Fault::SegmentNotPresent(sel_error(sel)));
    }
    Ok(loaded(&d, sel))
}

/// The load of a checked descriptor: its cache with the accessed bit set, and the descriptor
/// to mark in memory.
pub fn loaded(d: &Descriptor, sel: u16) -> SegLoad {
    let mut seg = d.to_segment(sel);
    seg.attr |= 1;
    SegLoad {
        seg,
        mark: Some((sel, *d)),
    }
}

/// SS descriptor checks for a stack at privilege `cpl`: RPL = DPL = CPL and a writable data
/// segment, else `fault` (#GP(sel) for MOV/POP/LSS/RETF, #TS(sel) for a stack switch).
pub fn check_stack_desc(d: &Descriptor, sel: u16, cpl: u8, fault: Fault) -> Result<(), Fault> {
    if (sel & 3) as u8 != cpl || !d.writable() || d.dpl() != cpl {
        return Err(fault);
    }
    Ok(())
}

/// Commit a checked load: set the descriptor's accessed bit (may fault, before any register
/// changes), then write the segment register.
pub fn commit(x: &mut Ctx, i: usize, l: SegLoad) -> Result<(), Fault> {
    mark_accessed(x, &l)?;
    x.cpu.state.seg[i] = l.seg;
    Ok(())
}

/// Set the accessed bit of a checked load's descriptor (the cached attribute gets it too).
pub fn mark_accessed(x: &mut Ctx, l: &SegLoad) -> Result<(), Fault> {
    if let Some((sel, d)) = l.mark {
        desc::set_accessed(x, sel, &d)?;
    }
    Ok(())
}

/// Load `sel` into segment register `i` with every check; nothing changes on a fault.
pub fn load_seg(x: &mut Ctx, i: usize, sel: u16) -> Result<(), Fault> {
    let l = check_load(x, i, sel)?;
    commit(x, i, l)
}

/// After a load of SS by MOV or POP: the interrupt shadow covers the next instruction, and the
/// machine must see it (yield).
fn ss_shadow(x: &mut Ctx) {
    x.cpu.state.interrupt_shadow = true;
    x.cpu.yield_requested = true;
}

/// MOV Sreg, r/m16 (a register source is read at 16 bits whatever the operand size).
/// MOV CS is #UD.
fn mov_to_sreg(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let i = sreg_index(ins.op0_register()).ok_or(Fault::ud("MOV to a non-existent Sreg"))?;
    if i == sreg::CS {
        return Err(Fault::ud("MOV to CS").into());
    }
    let sel = (x.read_op(ins, 1)? & 0xffff) as u16;
    load_seg(x, i, sel)?;
    if i == sreg::SS {
        ss_shadow(x);
    }
    Ok(())
}

/// POP Sreg with an `S`-byte stack slot: the low 16 bits are the selector. RSP moves by the
/// old stack width (before a new SS takes effect) only once the load has succeeded.
fn pop_sreg<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let i = sreg_index(ins.op0_register()).ok_or(Fault::ud("POP of a non-existent Sreg"))?;
    if i == sreg::CS {
        return Err(Fault::ud("POP CS").into());
    }
    let sel = (x.peek_stack(0, S)? & 0xffff) as u16;
    let l = check_load(x, i, sel)?;
    mark_accessed(x, &l)?;
    x.add_rsp(S as u64);
    x.cpu.state.seg[i] = l.seg;
    if i == sreg::SS {
        ss_shadow(x);
    }
    Ok(())
}

/// LDS/LES/LFS/LGS/LSS r, m16:16/m16:32/m16:64: offset (operand size) then selector. The
/// segment is loaded (with all checks) before the register is written.
fn load_far_ptr<const SEG: usize>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.op1_kind() != OpKind::Memory {
        return Err(Fault::ud("LDS/LES/LFS/LGS/LSS with a register operand").into());
    }
    let osz = op_size(ins, 0);
    let a = x.mem_addr(ins, osz as u64, false)?;
    let off = x.read(a, osz)?;
    let b = x.mem_addr_plus(ins, osz as u64, 2, false)?;
    let sel = x.read(b, 2)? as u16;
    load_seg(x, SEG, sel)?;
    write_reg(&mut x.cpu.state, ins.op0_register(), off);
    Ok(())
}

#[cfg(test)]
#[path = "segment_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "segcheck_tests.rs"]
mod segcheck_tests;
