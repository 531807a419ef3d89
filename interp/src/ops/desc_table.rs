//! Descriptor-table and segment-inspection instructions: LGDT/LIDT/SGDT/SIDT, LLDT/SLDT,
//! LTR/STR, LAR/LSL/VERR/VERW, ARPL, SWAPGS and RDFSBASE/WRFSBASE/RDGSBASE/WRGSBASE.

use crate::decode::Handler;
use crate::desc::{self, sel_error, sys_type, Descriptor};
use crate::fault::{Fault, Trap};
use crate::mmu::is_canonical;
use crate::operand::{op_size, write_reg};
use crate::ops::check_no_lock;
use crate::state::{ctl, flags::ZF, sreg, TableReg};
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// CR4.UMIP: SGDT/SIDT/SLDT/STR/SMSW are privileged when set.
const CR4_UMIP: u64 = 1 << 11;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code as C;
    Some(match ins.code() {
        C::Lgdt_m1632_16 | C::Lidt_m1632_16 => load_table::<2>,
        C::Lgdt_m1632 | C::Lidt_m1632 => load_table::<4>,
        C::Lgdt_m1664 | C::Lidt_m1664 => load_table::<8>,
        C::Sgdt_m1632_16 | C::Sgdt_m1632 | C::Sidt_m1632_16 | C::Sidt_m1632 => store_table::<4>,
        C::Sgdt_m1664 | C::Sidt_m1664 => store_table::<8>,
        C::Lldt_rm16 | C::Lldt_r32m16 | C::Lldt_r64m16 => lldt,
        C::Ltr_rm16 | C::Ltr_r32m16 | C::Ltr_r64m16 => ltr,
        C::Sldt_rm16 | C::Sldt_r32m16 | C::Sldt_r64m16 => sldt_str::<false>,
        C::Str_rm16 | C::Str_r32m16 | C::Str_r64m16 => sldt_str::<true>,
        C::Lar_r16_rm16 | C::Lar_r32_r32m16 | C::Lar_r64_r64m16 => lar_lsl::<false>,
        C::Lsl_r16_rm16 | C::Lsl_r32_r32m16 | C::Lsl_r64_r64m16 => lar_lsl::<true>,
        C::Verr_rm16 | C::Verr_r32m16 | C::Verr_r64m16 => verr_verw::<false>,
        C::Verw_rm16 | C::Verw_r32m16 | C::Verw_r64m16 => verr_verw::<true>,
        C::Arpl_rm16_r16 | C::Arpl_r32m16_r32 => arpl,
        C::Swapgs => swapgs,
        C::Rdfsbase_r32 | C::Rdfsbase_r64 => rd_base::<{ sreg::FS }>,
        C::Rdgsbase_r32 | C::Rdgsbase_r64 => rd_base::<{ sreg::GS }>,
        C::Wrfsbase_r32 | C::Wrfsbase_r64 => wr_base::<{ sreg::FS }>,
        C::Wrgsbase_r32 | C::Wrgsbase_r64 => wr_base::<{ sreg::GS }>,
        _ => return None,
    })
}

/// None of these changes decoding or interrupt state.
pub fn ends_block(_ins: &Instruction) -> bool {
    false
}

/// #UD in real and virtual-8086 mode (LLDT, LTR, SLDT, STR, LAR, LSL, VERR, VERW, ARPL).
fn protected_only(x: &Ctx, what: &'static str) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.in_real_mode() || st.in_v86_mode() {
        return Err(Fault::ud(what));
    }
    Ok(())
}

fn cpl0(x: &Ctx) -> Result<(), Fault> {
    if x.cpu.state.cpl() != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// With CR4.UMIP set, the store instructions are #GP(0) above CPL 0.
fn check_umip(x: &Ctx) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.cr4 & CR4_UMIP != 0 && st.cpl() != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

fn set_zf(x: &mut Ctx, z: bool) {
    let f = &mut x.cpu.state.rflags;
    *f = (*f & !ZF) | if z { ZF } else { 0 };
}

/// The table register an LGDT/SGDT/LIDT/SIDT names.
fn table_reg<'a>(x: &'a mut Ctx, ins: &Instruction) -> &'a mut TableReg {
    if matches!(ins.mnemonic(), Mnemonic::Lgdt | Mnemonic::Sgdt) {
        &mut x.cpu.state.gdtr
    } else {
        &mut x.cpu.state.idtr
    }
}

/// LGDT/LIDT m16&base: CPL 0. The base is `B` bytes: 8 in 64-bit mode, else 4, of which a
/// 16-bit operand size keeps 24 bits.
fn load_table<const B: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.op0_kind() != OpKind::Memory {
        return Err(Fault::ud("LGDT/LIDT with a register operand").into());
    }
    cpl0(x)?;
    let a = x.mem_addr(ins, 2, false)?;
    let limit = x.read(a, 2)? as u16;
    let b = x.mem_addr_plus(ins, 2, if B == 8 { 8 } else { 4 }, false)?;
    let base = match B {
        2 => x.read(b, 4)? & 0xff_ffff,
        4 => x.read(b, 4)?,
        _ => x.read(b, 8)?,
    };
    *table_reg(x, ins) = TableReg { base, limit };
    Ok(())
}

/// SGDT/SIDT m: the limit, then the base (4 bytes, the full 32 bits even with a 16-bit operand
/// size; 8 in 64-bit mode). The whole store is checked before any byte is written.
fn store_table<const B: usize>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.op0_kind() != OpKind::Memory {
        return Err(Fault::ud("SGDT/SIDT with a register operand").into());
    }
    check_umip(x)?;
    let t = *table_reg(x, ins);
    let mut buf = [0u8; 10];
    buf[..2].copy_from_slice(&t.limit.to_le_bytes());
    buf[2..10].copy_from_slice(&t.base.to_le_bytes());
    let a = x.mem_addr(ins, 2 + B as u64, true)?;
    x.write_bytes(a, &buf[..2 + B])?;
    Ok(())
}

/// LLDT r/m16: CPL 0, protected mode. A null selector leaves LDTR unusable; otherwise the GDT
/// entry must be a present LDT descriptor (16 bytes in long mode, canonical base).
fn lldt(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "LLDT in real or virtual-8086 mode")?;
    cpl0(x)?;
    let sel = x.read_op(ins, 0)? as u16;
    if desc::is_null(sel) {
        let l = &mut x.cpu.state.ldtr;
        l.selector = sel;
        l.attr &= !0x80;
        return Ok(());
    }
    let d = system_desc(x, sel, sys_type::LDT)?;
    let lma = x.cpu.state.in_long_mode();
    let seg = d.to_system_segment(sel, lma);
    if lma && !is_canonical(seg.base) {
        return Err(Fault::GeneralProtection(sel_error(sel)).into());
    }
    x.cpu.state.ldtr = seg;
    Ok(())
}

/// The GDT system descriptor `sel` names, checked to be present and of type `want` (for a TSS,
/// a 32/64-bit available TSS, or a 16-bit one outside long mode): #GP(sel) for a TI=1
/// selector, an entry beyond the GDT limit, a wrong type or a non-zero upper type in long mode;
/// #NP(sel) if not present.
fn system_desc(x: &mut Ctx, sel: u16, want: u8) -> Result<Descriptor, Fault> {
    let gp = Fault::GeneralProtection(sel_error(sel));
    if sel & 4 != 0 {
        return Err(gp);
    }
    let lma = x.cpu.state.in_long_mode();
    let d = desc::read_system_descriptor(x, sel)?.ok_or(gp)?;
    let type_ok = !d.is_code_or_data()
        && (d.typ() == want || (want == sys_type::TSS_AVAIL && !lma && d.typ() == 1));
    if !type_ok || (lma && !d.upper_type_is_zero()) {
        return Err(gp);
    }
    if !d.present() {
        return Err(Fault::SegmentNotPresent(sel_error(sel)));
    }
    Ok(d)
}

/// LTR r/m16: CPL 0, protected mode. The TSS must be available (not busy); it is marked busy
/// in the GDT and in TR.
fn ltr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "LTR in real or virtual-8086 mode")?;
    cpl0(x)?;
    let sel = x.read_op(ins, 0)? as u16;
    if desc::is_null(sel) {
        return Err(Fault::GP0.into());
    }
    let d = system_desc(x, sel, sys_type::TSS_AVAIL)?;
    let lma = x.cpu.state.in_long_mode();
    let mut seg = d.to_system_segment(sel, lma);
    if lma && !is_canonical(seg.base) {
        return Err(Fault::GeneralProtection(sel_error(sel)).into());
    }
    desc::set_tss_busy(x, sel, &d)?;
    seg.attr |= 2;
    x.cpu.state.tr = seg;
    Ok(())
}

/// SLDT/STR r/m16: the selector (a 32/64-bit register gets it zero-extended, memory 16 bits).
fn sldt_str<const TR: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "SLDT/STR in real or virtual-8086 mode")?;
    check_umip(x)?;
    let st = &x.cpu.state;
    let sel = if TR { st.tr.selector } else { st.ldtr.selector };
    x.write_op(ins, 0, sel as u64)?;
    Ok(())
}

/// The descriptor a LAR/LSL/VERR/VERW selector names, if it passes the common checks (not
/// null, within its table). Page faults while reading it propagate.
fn inspect(x: &mut Ctx, sel: u16) -> Result<Option<Descriptor>, Fault> {
    if desc::is_null(sel) {
        return Ok(None);
    }
    desc::read_segment_descriptor(x, sel)
}

/// System descriptor types LAR (and, without gates, LSL) accepts: legacy modes take the
/// 16/32-bit TSSs, LDT and gates; long mode only LDT, 64-bit TSS and 64-bit call gate.
fn inspect_type_ok(typ: u8, lma: bool, lsl: bool) -> bool {
    match typ {
        sys_type::LDT | sys_type::TSS_AVAIL | sys_type::TSS_BUSY => true,
        sys_type::CALL_GATE => !lsl,
        sys_type::TSS16_AVAIL | sys_type::TSS16_BUSY => !lma,
        sys_type::CALL_GATE16 | sys_type::TASK_GATE => !lma && !lsl,
        _ => false,
    }
}

/// LAR/LSL r, r/m16: ZF = 1 and the access rights (dword 2 & 0x00f0ff00) or the scaled limit
/// are written when the descriptor is visible at CPL and RPL (conforming code always) and of
/// a valid type; else ZF = 0 and the destination is unchanged.
fn lar_lsl<const LSL: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "LAR/LSL in real or virtual-8086 mode")?;
    let sel = x.read_op(ins, 1)? as u16;
    let st = &x.cpu.state;
    let (cpl, lma) = (st.cpl(), st.in_long_mode());
    let ok = match inspect(x, sel)? {
        Some(d) => {
            let type_ok = d.is_code_or_data() || inspect_type_ok(d.typ(), lma, LSL);
            let visible = d.is_conforming() || (d.dpl() >= cpl && d.dpl() >= (sel & 3) as u8);
            (type_ok && visible).then_some(d)
        }
        None => None,
    };
    if let Some(d) = ok {
        let v = if LSL {
            d.limit() as u64
        } else {
            (d.lo >> 32) & 0x00f0_ff00
        };
        let v = if op_size(ins, 0) == 2 { v & 0xffff } else { v };
        write_reg(&mut x.cpu.state, ins.op0_register(), v);
    }
    set_zf(x, ok.is_some());
    Ok(())
}

/// VERR/VERW r/m16: ZF = 1 if the segment is readable (VERR: data or readable code) or
/// writable (VERW: writable data) at CPL and RPL (conforming code always passes the
/// privilege check).
fn verr_verw<const W: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "VERR/VERW in real or virtual-8086 mode")?;
    let sel = x.read_op(ins, 0)? as u16;
    let cpl = x.cpu.state.cpl();
    let ok = match inspect(x, sel)? {
        Some(d) => {
            let kind = if W { d.writable() } else { d.readable() };
            let visible = d.is_conforming() || (d.dpl() >= cpl && d.dpl() >= (sel & 3) as u8);
            kind && visible
        }
        None => false,
    };
    set_zf(x, ok);
    Ok(())
}

/// ARPL r/m16, r16 (legacy modes; 63h is MOVSXD in 64-bit mode): raise the destination's RPL
/// to the source's, ZF = 1 if it changed.
fn arpl(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    protected_only(x, "ARPL in real or virtual-8086 mode")?;
    let dst = x.read_op_rmw(ins, 0)? & 0xffff;
    let src = x.read_op(ins, 1)? & 3;
    let raise = dst & 3 < src;
    if raise {
        // A 32-bit register form writes only the low 16 bits.
        let v = (dst & !3) | src;
        if ins.op0_kind() == OpKind::Register {
            let r = ins.op0_register();
            let full = crate::operand::read_reg(&x.cpu.state, r);
            write_reg(&mut x.cpu.state, r, (full & !0xffff) | v);
        } else {
            x.write_op(ins, 0, v)?;
        }
    }
    set_zf(x, raise);
    Ok(())
}

/// SWAPGS: 64-bit mode, CPL 0; exchanges GS.base with IA32_KERNEL_GS_BASE.
fn swapgs(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    if !st.in_64bit_mode() {
        return Err(Fault::ud("SWAPGS outside 64-bit mode").into());
    }
    if st.cpl() != 0 {
        return Err(Fault::GP0.into());
    }
    std::mem::swap(&mut st.seg[sreg::GS].base, &mut st.kernel_gs_base);
    Ok(())
}

fn check_fsgsbase(x: &Ctx) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if !st.in_64bit_mode() || st.cr4 & ctl::CR4_FSGSBASE == 0 {
        return Err(Fault::ud(
            "RD/WR FS/GS BASE without CR4.FSGSBASE or outside 64-bit mode",
        ));
    }
    Ok(())
}

/// RDFSBASE/RDGSBASE r32/r64 (a 32-bit destination gets the low half, zero-extended).
fn rd_base<const SEG: usize>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_fsgsbase(x)?;
    let b = x.cpu.state.seg[SEG].base;
    write_reg(&mut x.cpu.state, ins.op0_register(), b);
    Ok(())
}

/// WRFSBASE/WRGSBASE r32/r64: a 32-bit source is zero-extended; a non-canonical 64-bit value
/// is #GP(0).
fn wr_base<const SEG: usize>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_fsgsbase(x)?;
    let v = x.read_op(ins, 0)?;
    if !is_canonical(v) {
        return Err(Fault::GP0.into());
    }
    x.cpu.state.seg[SEG].base = v;
    Ok(())
}

#[cfg(test)]
#[path = "desc_table_tests.rs"]
mod tests;
