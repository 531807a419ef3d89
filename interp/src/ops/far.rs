//! Far transfers: JMP FAR and CALL FAR (ptr16:16/32, m16:16/32/64) and RETF (with imm16) in
//! real, virtual-8086, protected, compatibility and 64-bit mode: direct code-segment targets
//! (conforming and non-conforming), call gates (16/32-bit and 64-bit) including the
//! privilege-raising CALL with a stack switch from the TSS, and RETF to an outer level.
//! Loading a CS with L = 1 in long mode enters 64-bit mode, L = 0 compatibility mode.
//!
//! Task gates and TSS targets would need a hardware task switch, which is not modelled:
//! they raise #UD naming that (docs/system-cpu.md).

use crate::decode::Handler;
use crate::desc::{self, sel_error, sys_type, Descriptor};
use crate::fault::{Fault, Trap};
use crate::mmu::is_canonical;
use crate::operand::mask;
use crate::ops::check_no_lock;
use crate::ops::segment::{
    check_stack_desc, loaded, mark_accessed, read_desc_or_gp, unusable, SegLoad,
};
use crate::state::{reg, sreg, Segment};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code as C;
    Some(match ins.code() {
        C::Jmp_ptr1616 | C::Jmp_ptr1632 | C::Jmp_m1616 | C::Jmp_m1632 | C::Jmp_m1664 => jmp_far,
        C::Call_ptr1616 | C::Call_ptr1632 | C::Call_m1616 | C::Call_m1632 | C::Call_m1664 => {
            call_far
        }
        C::Retfw | C::Retfw_imm16 => retf::<2>,
        C::Retfd | C::Retfd_imm16 => retf::<4>,
        C::Retfq | C::Retfq_imm16 => retf::<8>,
        _ => return None,
    })
}

/// Far transfers are branches (iced's flow control ends the block); nothing else to add.
pub fn ends_block(_ins: &Instruction) -> bool {
    false
}

/// Selector, offset and operand size (bytes) of a far pointer operand.
fn far_operand(x: &mut Ctx, ins: &Instruction) -> Result<(u16, u64, u8), Fault> {
    Ok(match ins.op0_kind() {
        OpKind::FarBranch16 => (ins.far_branch_selector(), ins.far_branch16() as u64, 2),
        OpKind::FarBranch32 => (ins.far_branch_selector(), ins.far_branch32() as u64, 4),
        OpKind::Memory => {
            let osz = match ins.code() {
                Code::Jmp_m1616 | Code::Call_m1616 => 2,
                Code::Jmp_m1632 | Code::Call_m1632 => 4,
                _ => 8,
            };
            let a = x.mem_addr(ins, osz as u64, false)?;
            let off = x.read(a, osz)?;
            let b = x.mem_addr_plus(ins, osz as u64, 2, false)?;
            let sel = x.read(b, 2)? as u16;
            (sel, off, osz)
        }
        _ => return Err(Fault::ud("far transfer with a register operand")),
    })
}

/// A resolved far JMP/CALL target.
struct Target {
    cs: SegLoad,
    rip: u64,
    /// Through a call gate: the gate's push size (2, 4 or 8) and parameter count.
    gate: Option<(u8, u8)>,
    /// CPL after the transfer (lower than now only for a CALL through a gate).
    new_cpl: u8,
}

/// Real-mode/virtual-8086 CS cache for `sel`: only selector and base change.
fn real_cs(old: &Segment, sel: u16) -> Segment {
    Segment {
        selector: sel,
        base: (sel as u64) << 4,
        ..*old
    }
}

/// The new RIP must lie within the CS limit (legacy and compatibility mode) or be canonical
/// (a 64-bit code segment in long mode); else #GP(0).
fn check_offset(long_mode: bool, cs: &Segment, off: u64) -> Result<u64, Fault> {
    if long_mode && cs.long() {
        if !is_canonical(off) {
            return Err(Fault::GP0);
        }
    } else if off > cs.limit as u64 {
        return Err(Fault::GP0);
    }
    Ok(off)
}

/// The CS cache for a checked code descriptor, selector RPL set to `cpl`, accessed.
fn code_load(d: &Descriptor, sel: u16, cpl: u8) -> SegLoad {
    let sel = (sel & !3) | cpl as u16;
    let mut seg = d.to_segment(sel);
    seg.attr |= 1;
    SegLoad {
        seg,
        mark: Some((sel, *d)),
    }
}

/// Resolve a far JMP/CALL destination in protected or long mode with all checks.
fn resolve(x: &mut Ctx, sel: u16, off: u64, call: bool) -> Result<Target, Fault> {
    let st = &x.cpu.state;
    let cpl = st.cpl();
    let lma = st.in_long_mode();
    let rpl = (sel & 3) as u8;
    let gp = Fault::GeneralProtection(sel_error(sel));
    if desc::is_null(sel) {
        return Err(Fault::GP0);
    }
    let d = read_desc_or_gp(x, sel)?;
    if d.is_code() {
        if d.is_conforming() {
            if d.dpl() > cpl {
                return Err(gp);
            }
        } else if rpl > cpl || d.dpl() != cpl {
            return Err(gp);
        }
        if lma && d.long() && d.default_big() {
            return Err(gp);
        }
        if !d.present() {
            return Err(Fault::SegmentNotPresent(sel_error(sel)));
        }
        let cs = code_load(&d, sel, cpl);
        let rip = check_offset(lma, &cs.seg, off)?;
        return Ok(Target {
            cs,
            rip,
            gate: None,
            new_cpl: cpl,
        });
    }
    if d.is_code_or_data() {
        return Err(gp);
    }
    match d.typ() {
        sys_type::CALL_GATE | sys_type::CALL_GATE16 => {}
        sys_type::TASK_GATE
        | sys_type::TSS16_AVAIL
        | sys_type::TSS16_BUSY
        | sys_type::TSS_AVAIL
        | sys_type::TSS_BUSY
            if !lma =>
        {
            return Err(Fault::ud("hardware task switch not modelled"));
        }
        _ => return Err(gp),
    }
    // A call gate. In long mode only the 16-byte 64-bit form exists.
    let gate = if lma {
        if d.typ() != sys_type::CALL_GATE {
            return Err(gp);
        }
        let g = desc::read_system_descriptor(x, sel)?.ok_or(gp)?;
        if !g.upper_type_is_zero() {
            return Err(gp);
        }
        g
    } else {
        d
    };
    if gate.dpl() < cpl || rpl > gate.dpl() {
        return Err(gp);
    }
    if !gate.present() {
        return Err(Fault::SegmentNotPresent(sel_error(sel)));
    }
    let cs_sel = gate.gate_selector();
    if desc::is_null(cs_sel) {
        return Err(Fault::GP0);
    }
    let cgp = Fault::GeneralProtection(sel_error(cs_sel));
    let cd = read_desc_or_gp(x, cs_sel)?;
    if !cd.is_code() || cd.dpl() > cpl {
        return Err(cgp);
    }
    if lma && (!cd.long() || cd.default_big()) {
        return Err(cgp);
    }
    if !call && !cd.is_conforming() && cd.dpl() != cpl {
        return Err(cgp);
    }
    if !cd.present() {
        return Err(Fault::SegmentNotPresent(sel_error(cs_sel)));
    }
    let new_cpl = if call && !cd.is_conforming() && cd.dpl() < cpl {
        cd.dpl()
    } else {
        cpl
    };
    let cs = code_load(&cd, cs_sel, new_cpl);
    let rip = check_offset(lma, &cs.seg, gate.gate_offset(lma))?;
    let size = if lma {
        8
    } else if gate.typ() == sys_type::CALL_GATE {
        4
    } else {
        2
    };
    Ok(Target {
        cs,
        rip,
        gate: Some((size, gate.gate_param_count())),
        new_cpl,
    })
}

/// Write the new CS and RIP (the accessed bit first; it may fault).
fn enter_cs(x: &mut Ctx, cs: &SegLoad, rip: u64) -> Result<(), Fault> {
    mark_accessed(x, cs)?;
    x.cpu.state.seg[sreg::CS] = cs.seg;
    x.cpu.state.rip = rip;
    Ok(())
}

/// JMP FAR ptr16:16/32 or m16:16/32/64.
fn jmp_far(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let (sel, off, osz) = far_operand(x, ins)?;
    let st = &x.cpu.state;
    if st.in_real_mode() || st.in_v86_mode() {
        let cs = real_cs(&st.seg[sreg::CS], sel);
        let rip = check_offset(false, &cs, off & mask(osz))?;
        x.cpu.state.seg[sreg::CS] = cs;
        x.cpu.state.rip = rip;
        return Ok(());
    }
    let t = resolve(x, sel, off, false)?;
    enter_cs(x, &t.cs, t.rip)?;
    Ok(())
}

/// CALL FAR ptr16:16/32 or m16:16/32/64: push CS and the return offset (operand size, or the
/// gate's size through a call gate), with a stack switch when a gate raises privilege.
fn call_far(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let (sel, off, osz) = far_operand(x, ins)?;
    let st = &x.cpu.state;
    let old_cs = st.seg[sreg::CS].selector as u64;
    let ret = st.rip;
    if st.in_real_mode() || st.in_v86_mode() {
        let cs = real_cs(&st.seg[sreg::CS], sel);
        let rip = check_offset(false, &cs, off & mask(osz))?;
        x.push_many(&[old_cs, ret & mask(osz)], osz)?;
        x.cpu.state.seg[sreg::CS] = cs;
        x.cpu.state.rip = rip;
        return Ok(());
    }
    let cpl = st.cpl();
    let t = resolve(x, sel, off, true)?;
    match t.gate {
        Some((size, params)) if t.new_cpl < cpl => {
            call_inner(x, &t, size, params)?;
        }
        Some((size, _)) => {
            x.push_many(&[old_cs, ret & mask(size)], size)?;
            enter_cs(x, &t.cs, t.rip)?;
        }
        None => {
            x.push_many(&[old_cs, ret & mask(osz)], osz)?;
            enter_cs(x, &t.cs, t.rip)?;
        }
    }
    Ok(())
}

/// Read `N` bytes of the current TSS at offset `off`; beyond TR.limit -> #TS(TR).
fn tss_read<const N: usize>(x: &mut Ctx, off: u64) -> Result<u64, Fault> {
    let tr = x.cpu.state.tr;
    if off + N as u64 - 1 > tr.limit as u64 {
        return Err(Fault::InvalidTss(sel_error(tr.selector)));
    }
    let mut lin = tr.base.wrapping_add(off);
    if !x.cpu.state.in_long_mode() {
        lin &= 0xffff_ffff;
    }
    let mut b = [0u8; 8];
    x.read_bytes_supervisor(lin, &mut b[..N])?;
    Ok(u64::from_le_bytes(b))
}

/// CALL through a call gate to a more privileged non-conforming segment: new SS:RSP from the
/// TSS for the new CPL (a 32-bit TSS's SSn:ESPn, a 16-bit TSS's SSn:SPn, or in long mode
/// RSPn with a null SS), then push old SS, old RSP, the gate's parameters (legacy gates) and
/// old CS:RIP on the new stack, all as supervisor writes of the gate's size.
fn call_inner(x: &mut Ctx, t: &Target, size: u8, params: u8) -> Result<(), Fault> {
    let st = &x.cpu.state;
    let n = t.new_cpl as u64;
    let old_ss = st.seg[sreg::SS].selector as u64;
    let old_rsp = st.gpr[reg::RSP];
    let old_cs = st.seg[sreg::CS].selector as u64;
    let ret = st.rip & mask(size);
    let lma = st.in_long_mode();
    let tr_type = st.tr.attr & 0xf;
    let (ss, new_sp) = if lma {
        let rsp = tss_read::<8>(x, 4 + 8 * n)?;
        (
            SegLoad {
                seg: unusable(t.new_cpl as u16, t.new_cpl),
                mark: None,
            },
            rsp,
        )
    } else {
        let (ss_sel, sp) =
            if tr_type == sys_type::TSS_AVAIL as u16 || tr_type == sys_type::TSS_BUSY as u16 {
                let sp = tss_read::<4>(x, 4 + 8 * n)?;
                (tss_read::<2>(x, 8 + 8 * n)? as u16, sp)
            } else {
                let sp = tss_read::<2>(x, 2 + 4 * n)?;
                (tss_read::<2>(x, 4 + 4 * n)? as u16, sp)
            };
        let ts = Fault::InvalidTss(sel_error(ss_sel));
        if desc::is_null(ss_sel) {
            return Err(ts);
        }
        let d = desc::read_segment_descriptor(x, ss_sel)?.ok_or(ts)?;
        check_stack_desc(&d, ss_sel, t.new_cpl, ts)?;
        if !d.present() {
            return Err(Fault::StackFault(sel_error(ss_sel)));
        }
        (loaded(&d, ss_sel), sp)
    };
    // The values, in push order.
    let mut vals = [0u64; 36];
    let mut k = 0;
    vals[k] = old_ss;
    vals[k + 1] = old_rsp & mask(size);
    k += 2;
    if !lma {
        for i in (0..params as u64).rev() {
            vals[k] = x.peek_stack(i * size as u64, size)?;
            k += 1;
        }
    }
    vals[k] = old_cs;
    vals[k + 1] = ret;
    k += 2;
    // Write them on the new stack (its width: 64-bit code in long mode, else SS.B).
    let width: u8 = if lma {
        8
    } else if ss.seg.default_big() {
        4
    } else {
        2
    };
    let mut sp = new_sp;
    x.ss_operand = true;
    for &v in &vals[..k] {
        sp = sp.wrapping_sub(size as u64);
        let lin = if width == 8 {
            sp
        } else {
            ss.seg.base.wrapping_add(sp & mask(width)) & 0xffff_ffff
        };
        x.write_bytes_supervisor(lin, &v.to_le_bytes()[..size as usize])?;
    }
    mark_accessed(x, &ss)?;
    enter_cs(x, &t.cs, t.rip)?;
    let st = &mut x.cpu.state;
    st.seg[sreg::SS] = ss.seg;
    st.gpr[reg::RSP] = match width {
        8 => sp,
        4 => sp & 0xffff_ffff,
        _ => (old_rsp & !0xffff) | (sp & 0xffff),
    };
    Ok(())
}

/// RETF [imm16] with `S`-byte slots: pop the offset and CS; to an outer privilege level also
/// pop SS:RSP (after the imm16 bytes of parameters), release imm16 bytes on the new stack
/// too, and null DS/ES/FS/GS when their DPL is below the new CPL (data or non-conforming code).
fn retf<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let imm = if ins.op_count() > 0 {
        ins.immediate16() as u64
    } else {
        0
    };
    let s = S as u64;
    let off = x.peek_stack(0, S)?;
    let sel = x.peek_stack(s, S)? as u16;
    let st = &x.cpu.state;
    if st.in_real_mode() || st.in_v86_mode() {
        let cs = real_cs(&st.seg[sreg::CS], sel);
        let rip = check_offset(false, &cs, off)?;
        x.add_rsp(2 * s + imm);
        x.cpu.state.seg[sreg::CS] = cs;
        x.cpu.state.rip = rip;
        return Ok(());
    }
    let cpl = st.cpl();
    let lma = st.in_long_mode();
    let rpl = (sel & 3) as u8;
    let gp = Fault::GeneralProtection(sel_error(sel));
    if desc::is_null(sel) {
        return Err(Fault::GP0.into());
    }
    let d = read_desc_or_gp(x, sel)?;
    if !d.is_code() || rpl < cpl {
        return Err(gp.into());
    }
    if (d.is_conforming() && d.dpl() > rpl) || (!d.is_conforming() && d.dpl() != rpl) {
        return Err(gp.into());
    }
    if lma && d.long() && d.default_big() {
        return Err(gp.into());
    }
    if !d.present() {
        return Err(Fault::SegmentNotPresent(sel_error(sel)).into());
    }
    let cs = code_load(&d, sel, rpl);
    let rip = check_offset(lma, &cs.seg, off)?;
    if rpl == cpl {
        mark_accessed(x, &cs)?;
        x.add_rsp(2 * s + imm);
        x.cpu.state.seg[sreg::CS] = cs.seg;
        x.cpu.state.rip = rip;
        return Ok(());
    }
    // Return to an outer level: SS:RSP follow the parameters.
    let new_sp = x.peek_stack(2 * s + imm, S)?;
    let ss_sel = x.peek_stack(3 * s + imm, S)? as u16;
    let to_64 = lma && cs.seg.long();
    let ss = if desc::is_null(ss_sel) {
        if !(to_64 && rpl != 3 && (ss_sel & 3) as u8 == rpl) {
            return Err(Fault::GP0.into());
        }
        SegLoad {
            seg: unusable(ss_sel, rpl),
            mark: None,
        }
    } else {
        let d = read_desc_or_gp(x, ss_sel)?;
        check_stack_desc(&d, ss_sel, rpl, Fault::GeneralProtection(sel_error(ss_sel)))?;
        if !d.present() {
            return Err(Fault::StackFault(sel_error(ss_sel)).into());
        }
        loaded(&d, ss_sel)
    };
    mark_accessed(x, &cs)?;
    mark_accessed(x, &ss)?;
    let old_rsp = x.cpu.state.gpr[reg::RSP];
    let st = &mut x.cpu.state;
    st.seg[sreg::CS] = cs.seg;
    st.seg[sreg::SS] = ss.seg;
    st.rip = rip;
    let sp = new_sp.wrapping_add(imm);
    st.gpr[reg::RSP] = if to_64 {
        sp
    } else if ss.seg.default_big() {
        sp & 0xffff_ffff
    } else {
        (old_rsp & !0xffff) | (sp & 0xffff)
    };
    null_outer_segments(st, rpl);
    Ok(())
}

/// After a return to an outer level: DS, ES, FS and GS whose DPL is below the new CPL (data or
/// non-conforming code) become unusable null selectors. The FS/GS base is kept (only the
/// selector and the valid bit change).
pub fn null_outer_segments(st: &mut crate::state::CpuState, new_cpl: u8) {
    for i in [sreg::ES, sreg::DS, sreg::FS, sreg::GS] {
        let s = st.seg[i];
        let conforming_code = s.attr & 0x1c == 0x1c;
        if s.attr & 0x80 != 0 && !conforming_code && s.dpl() < new_cpl {
            st.seg[i] = Segment {
                selector: 0,
                attr: 0,
                limit: 0,
                base: s.base,
            };
        }
    }
}

#[cfg(test)]
#[path = "far_tests.rs"]
mod tests;
