//! MMX: the 64-bit packed-integer instructions on MM0..MM7 (MMX itself, the SSE-era MMX
//! extensions PAVG*/PMIN*/PMAX*/PEXTRW/PINSRW/PMOVMSKB/PSADBW/PSHUFW/PMULHUW/MOVNTQ/MASKMOVQ,
//! SSE2's PADDQ/PSUBQ/PMULUDQ mm forms), MOVQ2DQ/MOVDQ2Q, MASKMOVDQU (shares MASKMOVQ's byte
//! store) and EMMS.
//!
//! MMi is the significand (bytes 0..8) of physical x87 register i. Every MMX instruction except
//! EMMS sets TOP = 0 and marks all eight registers valid, and writing MMi sets its sign and
//! exponent (bytes 8..10) to 0xFFFF. EMMS marks all registers empty and also sets TOP = 0.
//!
//! The lane-wise semantics are the 128-bit functions of `sse_int`/`sse_shuf` applied to
//! zero-extended operands: the low 64 bits of such a result are the MMX result. Unpacks of the
//! high halves and packs rearrange the operands first (see [`lane`] and [`pack`]).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::ops::check_no_lock;
use crate::ops::sse_common::{check_sse, get_xmm, set_xmm, xmm_op};
use crate::ops::{sse_int, sse_shuf};
use crate::state::{ctl, CpuState};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind, Register};

/// FSW.ES: an unmasked x87 exception is pending.
pub const FSW_ES: u16 = 1 << 7;
/// FSW.TOP (bits 13:11).
pub const FSW_TOP: u16 = 7 << 11;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if let Some(h) = mmx_binary_lookup(ins) {
        return Some(h);
    }
    Some(match ins.code() {
        Code::Psllw_mm_imm8 => h_psllw_imm,
        Code::Pslld_mm_imm8 => h_pslld_imm,
        Code::Psllq_mm_imm8 => h_psllq_imm,
        Code::Psrlw_mm_imm8 => h_psrlw_imm,
        Code::Psrld_mm_imm8 => h_psrld_imm,
        Code::Psrlq_mm_imm8 => h_psrlq_imm,
        Code::Psraw_mm_imm8 => h_psraw_imm,
        Code::Psrad_mm_imm8 => h_psrad_imm,
        Code::Movd_mm_rm32 | Code::Movq_mm_rm64 | Code::Movq_mm_mmm64 => mov_to_mm,
        Code::Movd_rm32_mm | Code::Movq_rm64_mm | Code::Movq_mmm64_mm | Code::Movntq_m64_mm => {
            mov_from_mm
        }
        Code::Pshufw_mm_mmm64_imm8 => h_pshufw,
        Code::Pextrw_r32_mm_imm8 | Code::Pextrw_r64_mm_imm8 => h_pextrw,
        Code::Pinsrw_mm_r32m16_imm8 | Code::Pinsrw_mm_r64m16_imm8 => h_pinsrw,
        Code::Pmovmskb_r32_mm | Code::Pmovmskb_r64_mm => h_pmovmskb,
        Code::Maskmovq_rDI_mm_mm => h_maskmovq,
        Code::Maskmovdqu_rDI_xmm_xmm => h_maskmovdqu,
        Code::VEX_Vmaskmovdqu_rDI_xmm_xmm => h_vmaskmovdqu,
        Code::Movq2dq_xmm_mm => h_movq2dq,
        Code::Movdq2q_mm_xmm => h_movdq2q,
        _ => return None,
    })
}

// ----- state access -----

/// Availability check of every MMX-register instruction, in priority order: LOCK or
/// CR0.EM = 1 -> #UD, CR0.TS = 1 -> #NM, a pending unmasked x87 exception (FSW.ES) -> #MF.
/// CR4.OSFXSR is not consulted (the SDM's MMX-form exception table lists only CR0.EM).
#[inline]
pub fn check_mmx(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    if st.cr0 & ctl::CR0_EM != 0 {
        return Err(Fault::ud("MMX instruction with CR0.EM set"));
    }
    if st.cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    check_x87_pending(st)
}

/// #MF if FSW.ES says an unmasked x87 exception is pending.
#[inline]
pub fn check_x87_pending(st: &CpuState) -> Result<(), Fault> {
    if st.x87.fsw & FSW_ES != 0 {
        Err(Fault::X87Error)
    } else {
        Ok(())
    }
}

/// Index (0..7) of an MMX register; anything else is folded into range.
#[inline]
pub fn mm_index(r: Register) -> usize {
    (r as usize).wrapping_sub(Register::MM0 as usize) & 7
}

/// The MMX register of operand `n` (which must be a register operand).
#[inline]
pub fn mm_op(ins: &Instruction, n: u32) -> usize {
    mm_index(ins.op_register(n))
}

/// MMi: bytes 0..8 of physical x87 register i.
#[inline]
pub fn get_mm(st: &CpuState, i: usize) -> u64 {
    let r = &st.x87.regs[i & 7];
    u64::from_le_bytes(core::array::from_fn(|k| r[k]))
}

/// Write MMi: the significand takes `v`, sign and exponent become all ones.
#[inline]
pub fn set_mm(st: &mut CpuState, i: usize, v: u64) {
    let r = &mut st.x87.regs[i & 7];
    r[..8].copy_from_slice(&v.to_le_bytes());
    r[8] = 0xff;
    r[9] = 0xff;
}

/// The x87 side effect of every MMX instruction but EMMS: TOP = 0, all tags valid.
#[inline]
pub fn mmx_enter(st: &mut CpuState) {
    st.x87.fsw &= !FSW_TOP;
    st.x87.ftw = 0xff;
}

/// Read operand `n`: an MMX register, or memory of the instruction's operand size (m64, or
/// m32 for the low unpacks), zero-extended. No alignment rule (only #AC, not modelled).
#[inline]
pub fn read_mm_rm(x: &mut Ctx, ins: &Instruction, n: u32) -> Result<u64, Fault> {
    if ins.op_kind(n) == OpKind::Memory {
        let size = (ins.memory_size().size() as u8).clamp(1, 8);
        let a = x.mem_addr(ins, size as u64, false)?;
        x.read(a, size)
    } else {
        Ok(get_mm(&x.cpu.state, mm_op(ins, n)))
    }
}

// ----- shared handlers -----

/// A 64-bit packed binary operation `dst = f(dst, src)`.
pub type MmBinOp = fn(u64, u64) -> u64;

/// Shared handler of every `op mm, mm/m64` form.
#[inline(always)]
pub fn mm_binary(x: &mut Ctx, ins: &Instruction, f: MmBinOp) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let src = read_mm_rm(x, ins, 1)?;
    let d = mm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_mm(st, d), src);
    set_mm(st, d, r);
    mmx_enter(st);
    Ok(())
}

/// Shared handler of `op mm, mm/m64, imm8` forms: `dst = f(dst, src, imm8)`.
#[inline(always)]
pub fn mm_binary_imm(
    x: &mut Ctx,
    ins: &Instruction,
    f: fn(u64, u64, u8) -> u64,
) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let src = read_mm_rm(x, ins, 1)?;
    let d = mm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_mm(st, d), src, ins.immediate8());
    set_mm(st, d, r);
    mmx_enter(st);
    Ok(())
}

/// A 128-bit lane-wise operation applied to zero-extended 64-bit operands.
#[inline(always)]
pub fn lane(f: fn(u128, u128) -> u128, a: u64, b: u64) -> u64 {
    f(a as u128, b as u128) as u64
}

/// A 128-bit pack or horizontal operation (`dst` lanes make the low half of the result, `src`
/// lanes the high half) on 64-bit operands: `dst:src` is passed as the 128-bit destination,
/// so the low half of the result holds the `dst` part followed by the `src` part.
#[inline(always)]
pub fn pack(f: fn(u128, u128) -> u128, a: u64, b: u64) -> u64 {
    f(a as u128 | (b as u128) << 64, 0) as u64
}

/// Declares `op mm, mm/m64` forms: for each semantic function `name(a, b) = expr` the iced
/// codes it serves. Generates the functions, `mmx_binary_semantic` (code -> function, for
/// tests and the JIT), one handler per function and `mmx_binary_lookup`.
macro_rules! mmx_binary_family {
    ($($name:ident($a:ident, $b:ident): $($code:ident)|+ => $e:expr;)*) => {
        $(
            #[inline]
            pub fn $name($a: u64, $b: u64) -> u64 {
                $e
            }
        )*

        /// The semantic function of an `op mm, mm/m64` form of this family.
        pub fn mmx_binary_semantic(code: iced_x86::Code) -> Option<$crate::ops::mmx::MmBinOp> {
            Some(match code {
                $($(iced_x86::Code::$code)|+ => $name,)*
                _ => return None,
            })
        }

        /// Handlers of the `op mm, mm/m64` forms of this family.
        pub fn mmx_binary_lookup(ins: &iced_x86::Instruction) -> Option<$crate::decode::Handler> {
            Some(match ins.code() {
                $($(iced_x86::Code::$code)|+ => mmx_handlers::$name,)*
                _ => return None,
            })
        }

        mod mmx_handlers {
            $(
                pub fn $name(
                    x: &mut $crate::Ctx,
                    ins: &iced_x86::Instruction,
                ) -> Result<(), $crate::fault::Trap> {
                    $crate::ops::mmx::mm_binary(x, ins, super::$name)
                }
            )*
        }
    };
}
pub(crate) use mmx_binary_family;

mmx_binary_family! {
    paddb(a, b): Paddb_mm_mmm64 => lane(sse_int::paddb, a, b);
    paddw(a, b): Paddw_mm_mmm64 => lane(sse_int::paddw, a, b);
    paddd(a, b): Paddd_mm_mmm64 => lane(sse_int::paddd, a, b);
    paddq(a, b): Paddq_mm_mmm64 => a.wrapping_add(b);
    psubb(a, b): Psubb_mm_mmm64 => lane(sse_int::psubb, a, b);
    psubw(a, b): Psubw_mm_mmm64 => lane(sse_int::psubw, a, b);
    psubd(a, b): Psubd_mm_mmm64 => lane(sse_int::psubd, a, b);
    psubq(a, b): Psubq_mm_mmm64 => a.wrapping_sub(b);
    paddusb(a, b): Paddusb_mm_mmm64 => lane(sse_int::paddusb, a, b);
    paddusw(a, b): Paddusw_mm_mmm64 => lane(sse_int::paddusw, a, b);
    psubusb(a, b): Psubusb_mm_mmm64 => lane(sse_int::psubusb, a, b);
    psubusw(a, b): Psubusw_mm_mmm64 => lane(sse_int::psubusw, a, b);
    paddsb(a, b): Paddsb_mm_mmm64 => lane(sse_int::paddsb, a, b);
    paddsw(a, b): Paddsw_mm_mmm64 => lane(sse_int::paddsw, a, b);
    psubsb(a, b): Psubsb_mm_mmm64 => lane(sse_int::psubsb, a, b);
    psubsw(a, b): Psubsw_mm_mmm64 => lane(sse_int::psubsw, a, b);
    pcmpeqb(a, b): Pcmpeqb_mm_mmm64 => lane(sse_int::pcmpeqb, a, b);
    pcmpeqw(a, b): Pcmpeqw_mm_mmm64 => lane(sse_int::pcmpeqw, a, b);
    pcmpeqd(a, b): Pcmpeqd_mm_mmm64 => lane(sse_int::pcmpeqd, a, b);
    pcmpgtb(a, b): Pcmpgtb_mm_mmm64 => lane(sse_int::pcmpgtb, a, b);
    pcmpgtw(a, b): Pcmpgtw_mm_mmm64 => lane(sse_int::pcmpgtw, a, b);
    pcmpgtd(a, b): Pcmpgtd_mm_mmm64 => lane(sse_int::pcmpgtd, a, b);
    pminub(a, b): Pminub_mm_mmm64 => lane(sse_int::pminub, a, b);
    pmaxub(a, b): Pmaxub_mm_mmm64 => lane(sse_int::pmaxub, a, b);
    pminsw(a, b): Pminsw_mm_mmm64 => lane(sse_int::pminsw, a, b);
    pmaxsw(a, b): Pmaxsw_mm_mmm64 => lane(sse_int::pmaxsw, a, b);
    pavgb(a, b): Pavgb_mm_mmm64 => lane(sse_int::pavgb, a, b);
    pavgw(a, b): Pavgw_mm_mmm64 => lane(sse_int::pavgw, a, b);
    pmullw(a, b): Pmullw_mm_mmm64 => lane(sse_int::pmullw, a, b);
    pmulhw(a, b): Pmulhw_mm_mmm64 => lane(sse_int::pmulhw, a, b);
    pmulhuw(a, b): Pmulhuw_mm_mmm64 => lane(sse_int::pmulhuw, a, b);
    pmuludq(a, b): Pmuludq_mm_mmm64 => lane(sse_int::pmuludq, a, b);
    pmaddwd(a, b): Pmaddwd_mm_mmm64 => lane(sse_int::pmaddwd, a, b);
    psadbw(a, b): Psadbw_mm_mmm64 => lane(sse_int::psadbw, a, b);
    pand(a, b): Pand_mm_mmm64 => a & b;
    pandn(a, b): Pandn_mm_mmm64 => !a & b;
    por(a, b): Por_mm_mmm64 => a | b;
    pxor(a, b): Pxor_mm_mmm64 => a ^ b;
    // Low unpacks take an m32 source: only its low 32 bits reach the result anyway.
    punpcklbw(a, b): Punpcklbw_mm_mmm32 => lane(sse_shuf::punpcklbw, a, b);
    punpcklwd(a, b): Punpcklwd_mm_mmm32 => lane(sse_shuf::punpcklwd, a, b);
    punpckldq(a, b): Punpckldq_mm_mmm32 => lane(sse_shuf::punpckldq, a, b);
    // High unpacks interleave bits 63:32, i.e. the low unpack of the shifted operands.
    punpckhbw(a, b): Punpckhbw_mm_mmm64 => lane(sse_shuf::punpcklbw, a >> 32, b >> 32);
    punpckhwd(a, b): Punpckhwd_mm_mmm64 => lane(sse_shuf::punpcklwd, a >> 32, b >> 32);
    punpckhdq(a, b): Punpckhdq_mm_mmm64 => lane(sse_shuf::punpckldq, a >> 32, b >> 32);
    packsswb(a, b): Packsswb_mm_mmm64 => pack(sse_shuf::packsswb, a, b);
    packssdw(a, b): Packssdw_mm_mmm64 => pack(sse_shuf::packssdw, a, b);
    packuswb(a, b): Packuswb_mm_mmm64 => pack(sse_shuf::packuswb, a, b);
    // Shifts by mm/m64: the count is all 64 bits of the source.
    psllw(a, b): Psllw_mm_mmm64 => sse_shuf::psllw(a as u128, b) as u64;
    pslld(a, b): Pslld_mm_mmm64 => sse_shuf::pslld(a as u128, b) as u64;
    psllq(a, b): Psllq_mm_mmm64 => sse_shuf::psllq(a as u128, b) as u64;
    psrlw(a, b): Psrlw_mm_mmm64 => sse_shuf::psrlw(a as u128, b) as u64;
    psrld(a, b): Psrld_mm_mmm64 => sse_shuf::psrld(a as u128, b) as u64;
    psrlq(a, b): Psrlq_mm_mmm64 => sse_shuf::psrlq(a as u128, b) as u64;
    psraw(a, b): Psraw_mm_mmm64 => sse_shuf::psraw(a as u128, b) as u64;
    psrad(a, b): Psrad_mm_mmm64 => sse_shuf::psrad(a as u128, b) as u64;
}

// ----- other semantic functions -----

/// Word `i` of the result is word `imm[2i+1:2i]` of `src`.
pub fn pshufw(src: u64, imm: u8) -> u64 {
    sse_shuf::pshuflw(src as u128, imm) as u64
}

/// Word `imm[1:0]`, zero-extended.
pub fn pextrw(v: u64, imm: u8) -> u64 {
    (v >> (16 * (imm as u32 & 3))) & 0xffff
}

/// Replace word `imm[1:0]` with `w`.
pub fn pinsrw(v: u64, w: u16, imm: u8) -> u64 {
    let sh = 16 * (imm as u32 & 3);
    (v & !(0xffff << sh)) | (w as u64) << sh
}

/// Bit i = sign bit of byte i.
pub fn pmovmskb(v: u64) -> u64 {
    sse_shuf::pmovmskb(v as u128)
}

// ----- handlers -----

/// `mm = f(mm, imm8)` (shifts by immediate).
#[inline(always)]
fn shift_imm(x: &mut Ctx, ins: &Instruction, f: fn(u128, u64) -> u128) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let d = mm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_mm(st, d) as u128, ins.immediate8() as u64) as u64;
    set_mm(st, d, r);
    mmx_enter(st);
    Ok(())
}

macro_rules! shift_imm_handlers {
    ($($h:ident = $f:path;)*) => {
        $(
            fn $h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                shift_imm(x, ins, $f)
            }
        )*
    };
}

shift_imm_handlers! {
    h_psllw_imm = sse_shuf::psllw;
    h_pslld_imm = sse_shuf::pslld;
    h_psllq_imm = sse_shuf::psllq;
    h_psrlw_imm = sse_shuf::psrlw;
    h_psrld_imm = sse_shuf::psrld;
    h_psrlq_imm = sse_shuf::psrlq;
    h_psraw_imm = sse_shuf::psraw;
    h_psrad_imm = sse_shuf::psrad;
}

/// MOVD mm, r/m32 (zero-extended), MOVQ mm, r/m64, MOVQ mm, mm/m64.
fn mov_to_mm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let v = if ins.op1_kind() == OpKind::Register && ins.op1_register().is_mm() {
        get_mm(&x.cpu.state, mm_op(ins, 1))
    } else {
        x.read_op(ins, 1)?
    };
    let st = &mut x.cpu.state;
    set_mm(st, mm_op(ins, 0), v);
    mmx_enter(st);
    Ok(())
}

/// MOVD r/m32, mm, MOVQ r/m64, mm, MOVQ mm/m64, mm, MOVNTQ m64, mm (the non-temporal hint has
/// no architectural effect). A 32-bit GPR destination zero-extends.
fn mov_from_mm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let v = get_mm(&x.cpu.state, mm_op(ins, 1));
    if ins.op0_kind() == OpKind::Register && ins.op0_register().is_mm() {
        set_mm(&mut x.cpu.state, mm_op(ins, 0), v);
    } else if let Err(e) = x.write_op(ins, 0, v) {
        // This host: a store that faults has already set TOP = 0 (the tags are unchanged).
        if ins.op0_kind() == OpKind::Memory {
            x.cpu.state.x87.fsw &= !FSW_TOP;
        }
        return Err(e.into());
    }
    mmx_enter(&mut x.cpu.state);
    Ok(())
}

/// PSHUFW mm, mm/m64, imm8.
fn h_pshufw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mm_binary_imm(x, ins, |_, src, imm| pshufw(src, imm))
}

/// PEXTRW r32/r64, mm, imm8.
fn h_pextrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let v = pextrw(get_mm(&x.cpu.state, mm_op(ins, 1)), ins.immediate8());
    x.write_op(ins, 0, v)?;
    mmx_enter(&mut x.cpu.state);
    Ok(())
}

/// PINSRW mm, r32/r64/m16, imm8 (bits 15:0 of a register source).
fn h_pinsrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let w = x.read_op(ins, 1)? as u16;
    let d = mm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = pinsrw(get_mm(st, d), w, ins.immediate8());
    set_mm(st, d, r);
    mmx_enter(st);
    Ok(())
}

/// PMOVMSKB r32/r64, mm.
fn h_pmovmskb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let v = pmovmskb(get_mm(&x.cpu.state, mm_op(ins, 1)));
    x.write_op(ins, 0, v)?;
    mmx_enter(&mut x.cpu.state);
    Ok(())
}

/// Linear address of the implicit DS:rDI destination of MASKMOVQ/MASKMOVDQU (segment
/// override allowed; the address size picks RDI, EDI or DI), with the legacy-mode segment
/// checks for a `len`-byte write.
fn rdi_dest(x: &mut Ctx, ins: &Instruction, len: u64) -> Result<u64, Fault> {
    let rdi = x.cpu.state.gpr[crate::state::reg::RDI];
    let off = match ins.op0_kind() {
        OpKind::MemorySegEDI => rdi & 0xffff_ffff,
        OpKind::MemorySegDI => rdi & 0xffff,
        _ => rdi,
    };
    x.seg_linear_checked(ins.memory_segment(), off, len, true)
}

/// Store the bytes of `data` whose `mask` byte has bit 7 set to consecutive addresses from
/// `lin`. This host checks the whole area as 8-byte writes whatever the mask (an all-zero
/// mask faults too), the high quadword first (MASKMOVDQU); a quadword reports its first
/// byte, or the first byte of its second page. Nothing is written on a fault.
fn masked_store(x: &mut Ctx, lin: u64, data: &[u8], mask: &[u8]) -> Result<(), Fault> {
    let selected = |i: usize| mask.get(i).is_some_and(|m| m & 0x80 != 0);
    for q in (0..data.len() / 8).rev() {
        x.probe_write(lin.wrapping_add(8 * q as u64), 8)?;
    }
    for (i, &b) in data.iter().enumerate().filter(|&(i, _)| selected(i)) {
        x.write(lin.wrapping_add(i as u64), 1, b as u64)?;
    }
    Ok(())
}

/// MASKMOVQ mm1, mm2: bytes of mm1 selected by the sign bits of mm2's bytes go to DS:rDI.
fn h_maskmovq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_mmx(x, ins)?;
    let st = &x.cpu.state;
    let data = get_mm(st, mm_op(ins, 1)).to_le_bytes();
    let mask = get_mm(st, mm_op(ins, 2)).to_le_bytes();
    // This host enters the MMX state (TOP = 0, all tags valid) even when the store faults.
    mmx_enter(&mut x.cpu.state);
    let lin = rdi_dest(x, ins, 8)?;
    masked_store(x, lin, &data, &mask)?;
    Ok(())
}

/// MASKMOVDQU xmm1, xmm2: the 16-byte form (an SSE2 instruction: SSE checks, no x87 effect).
fn h_maskmovdqu(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let st = &x.cpu.state;
    let data = get_xmm(st, xmm_op(ins, 1)).to_le_bytes();
    let mask = get_xmm(st, xmm_op(ins, 2)).to_le_bytes();
    let lin = rdi_dest(x, ins, 16)?;
    masked_store(x, lin, &data, &mask)?;
    Ok(())
}

/// VMASKMOVDQU xmm1, xmm2 (VEX.128; AVX checks): as MASKMOVDQU, faults included (measured).
fn h_vmaskmovdqu(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    crate::ops::avx_common::check_avx(x, ins)?;
    let st = &x.cpu.state;
    let data = get_xmm(st, xmm_op(ins, 1)).to_le_bytes();
    let mask = get_xmm(st, xmm_op(ins, 2)).to_le_bytes();
    let lin = rdi_dest(x, ins, 16)?;
    masked_store(x, lin, &data, &mask)?;
    Ok(())
}

/// MOVQ2DQ xmm, mm: bits 127:64 of the XMM register are zeroed (255:128 kept, legacy SSE).
fn h_movq2dq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    check_x87_pending(&x.cpu.state)?;
    let st = &mut x.cpu.state;
    let v = get_mm(st, mm_op(ins, 1));
    set_xmm(st, xmm_op(ins, 0), v as u128);
    mmx_enter(st);
    Ok(())
}

/// MOVDQ2Q mm, xmm: the low 64 bits.
fn h_movdq2q(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    check_x87_pending(&x.cpu.state)?;
    let st = &mut x.cpu.state;
    let v = get_xmm(st, xmm_op(ins, 1)) as u64;
    set_mm(st, mm_op(ins, 0), v);
    mmx_enter(st);
    Ok(())
}

/// EMMS: all x87 tags empty, and TOP = 0 (what the reference host does; the SDM only
/// mentions the tags). Same checks as the MMX instructions.
#[cfg(test)]
mod tests {
    use super::get_mm;
    use super::*;
    use crate::cpu::ExitReason;
    use crate::state::reg;
    use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
    use iced_x86::code_asm::*;

    fn machine() -> TestMachine {
        let mut m = TestMachine::new();
        for i in 0..8 {
            m.cpu.state.x87.regs[i] = [0x11 * i as u8; 16];
            m.cpu.state.x87.regs[i][10..].fill(0);
        }
        m.cpu.state.x87.fsw = 5 << 11; // TOP = 5
        m.cpu.state.x87.ftw = 0x0f;
        m
    }

    #[test]
    fn lifted_semantics_spot_checks() {
        let a = 0x8001_7fff_00ff_ff00u64;
        let b = 0x0001_0001_0001_0101u64;
        assert_eq!(paddw(a, b), 0x8002_8000_0100_0001);
        assert_eq!(paddsw(a, b), 0x8002_7fff_0100_0001);
        assert_eq!(paddb(a, b), 0x8002_7f00_0000_0001);
        assert_eq!(
            punpcklbw(0x0706_0504_0302_0100, 0x1716_1514_1312_1110),
            0x1303_1202_1101_1000
        );
        assert_eq!(
            punpckhbw(0x0706_0504_0302_0100, 0x1716_1514_1312_1110),
            0x1707_1606_1505_1404
        );
        assert_eq!(
            punpckhdq(0x1111_1111_2222_2222, 0x3333_3333_4444_4444),
            0x3333_3333_1111_1111
        );
        assert_eq!(
            packsswb(0x7fff_8000_0005_fffb, 0x0100_00ff_ff80_0001),
            0x7f7f_8001_7f80_05fb
        );
        assert_eq!(packuswb(0x0000_0000_0100_0080, 0), 0x0000_0000_0000_ff80);
        assert_eq!(
            packssdw(0x8000_0000_7fff_ffff, 0x0000_0005_ffff_fffe),
            0x0005_fffe_8000_7fff
        );
        assert_eq!(psllq(1, 63), 1 << 63);
        assert_eq!(psllq(1, 64), 0);
        assert_eq!(psraw(0x8000, u64::MAX), 0xffff);
        assert_eq!(psadbw(0xff00, 0x00ff), 0x1fe);
        assert_eq!(
            pmuludq(0xffff_ffff_ffff_ffff, 0x0000_0001_0000_0002),
            0x1_ffff_fffe
        );
        assert_eq!(pshufw(0x4444_3333_2222_1111, 0x1b), 0x1111_2222_3333_4444);
        assert_eq!(pextrw(0x4444_3333_2222_1111, 6), 0x3333);
        assert_eq!(
            pinsrw(0x4444_3333_2222_1111, 0xabcd, 7),
            0xabcd_3333_2222_1111
        );
        assert_eq!(pmovmskb(0x8000_0000_0000_0080), 0x81);
    }

    #[test]
    fn mmx_aliases_x87_registers_and_sets_tags_and_top() {
        let code = TestMachine::assemble(|a| {
            a.movq(mm1, rax)?;
            a.paddb(mm1, qword_ptr(DATA_BASE))?;
            a.movd(ecx, mm1)?;
            a.movq(qword_ptr(DATA_BASE + 8), mm1)?;
            a.punpcklwd(mm2, dword_ptr(DATA_BASE + 20))
        });
        let mut m = machine();
        m.cpu.state.gpr[reg::RAX] = 0x0102_0304_0506_0708;
        m.cpu.state.gpr[reg::RCX] = u64::MAX;
        m.load(DATA_BASE, &0x1010_1010_1010_10f8u64.to_le_bytes());
        m.load(DATA_BASE + 16, &0xdddd_cccc_bbbb_aaaau64.to_le_bytes());
        let e = m.run_code(&code, 5);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(get_mm(st, 1), 0x1112_1314_1516_1700);
        assert_eq!(st.x87.regs[1][8..10], [0xff, 0xff]);
        assert_eq!(st.x87.regs[1][10..], [0; 6]);
        assert_eq!(m.gpr(reg::RCX), 0x1516_1700);
        assert_eq!(m.read_u64(DATA_BASE + 8), 0x1112_1314_1516_1700);
        assert_eq!(get_mm(st, 2), 0xdddd_2222_cccc_2222);
        // Untouched registers keep their exponent bytes; TOP = 0 and all tags valid.
        assert_eq!(st.x87.regs[3][..10], [0x33; 10]);
        assert_eq!(st.x87.fsw & FSW_TOP, 0);
        assert_eq!(st.x87.ftw, 0xff);
    }

    #[test]
    fn emms_empties_the_tags_and_clears_top() {
        let code = TestMachine::assemble(|a| a.emms());
        let mut m = machine();
        m.cpu.state.x87.fsw |= 0x4700; // condition codes stay
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.cpu.state.x87.ftw, 0);
        assert_eq!(m.cpu.state.x87.fsw, 0x4700);
    }

    fn run_paddb(cr0_set: u64, fsw: u16) -> (ExitReason, u64, u8) {
        let code = TestMachine::assemble(|a| a.paddb(mm0, mm0));
        let mut m = machine();
        m.cpu.state.cr0 |= cr0_set;
        m.cpu.state.cr4 &= !ctl::CR4_OSFXSR; // MMX ignores OSFXSR
        m.cpu.state.x87.fsw |= fsw;
        let e = m.run_code(&code, 1);
        (e.reason, get_mm(&m.cpu.state, 0), m.cpu.state.x87.ftw)
    }

    #[test]
    fn availability_checks() {
        assert_eq!(run_paddb(0, 0), (ExitReason::Budget, 0, 0xff));
        assert_eq!(
            run_paddb(ctl::CR0_EM, 0),
            (
                ExitReason::Exception(Fault::ud("MMX instruction with CR0.EM set")),
                0,
                0x0f
            )
        );
        assert_eq!(
            run_paddb(ctl::CR0_TS, 0).0,
            ExitReason::Exception(Fault::DeviceNotAvailable)
        );
        assert_eq!(
            run_paddb(0, FSW_ES | 1).0,
            ExitReason::Exception(Fault::X87Error)
        );
        // #UD before #NM before #MF.
        assert!(matches!(
            run_paddb(ctl::CR0_EM | ctl::CR0_TS, FSW_ES).0,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        assert_eq!(
            run_paddb(ctl::CR0_TS, FSW_ES).0,
            ExitReason::Exception(Fault::DeviceNotAvailable)
        );
    }

    #[test]
    fn maskmovq_writes_selected_bytes_only_and_faults_precisely() {
        let code = TestMachine::assemble(|a| a.maskmovq(mm1, mm2));
        let mut m = machine();
        set_mm(&mut m.cpu.state, 1, 0x8877_6655_4433_2211);
        set_mm(&mut m.cpu.state, 2, 0x8000_0000_ff7f_0080);
        m.cpu.state.gpr[reg::RDI] = DATA_BASE;
        m.load(DATA_BASE, &[0xee; 8]);
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.read_u64(DATA_BASE), 0x88ee_eeee_44ee_ee11);
        // A selected byte on an unwritable page faults before anything is written.
        let mut m = machine();
        set_mm(&mut m.cpu.state, 1, u64::MAX);
        set_mm(&mut m.cpu.state, 2, 0x8000_0000_0000_0080);
        m.cpu.state.gpr[reg::RDI] = 0x1ff8; // page tables: supervisor-only
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { .. })
        ));
        assert_eq!(m.cpu.state.rip, CODE_BASE);
        // The MMX state is entered before the fault (TOP = 0, all tags valid; this host).
        assert_eq!(m.cpu.state.x87.ftw, 0xff);
        assert_eq!(m.cpu.state.x87.fsw & FSW_TOP, 0);
        // Host-measured (native runs next to a PROT_NONE page): the whole quadword is checked
        // whatever the mask, so an all-zero mask faults too, and a quadword running into the
        // bad page reports that page's first byte.
        set_mm(&mut m.cpu.state, 2, 0x7f7f_7f7f_7f7f_7f7f);
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { addr: 0x1ff8, .. })
        ));
    }

    #[test]
    fn vmaskmov_store_faults_at_the_lowest_selected_first_byte_or_highest_last_byte() {
        use crate::testkit::TEST_RAM;
        // Host-measured (vmaskmovps m256 next to a PROT_NONE page): (operand offset below the
        // bad page, selected elements, expected fault offset from the page or None).
        let cases: [(u64, u8, Option<u64>); 7] = [
            (16, 0x81, Some(15)),
            (16, 0x90, Some(0)),
            (16, 0x18, Some(3)),
            (16, 0x0f, None),
            (4, 0x11, Some(15)),
            (4, 0x18, Some(8)),
            (28, 0x90, Some(3)),
        ];
        let code = TestMachine::assemble(|a| a.vmaskmovps(ymmword_ptr(rdx), ymm1, ymm2));
        for (below, sel, want) in cases {
            let mut m = machine();
            for e in 0..8 {
                if sel & (1 << e) != 0 {
                    m.cpu.state.ymm[1][e / 2] |= 0x8000_0000 << (32 * (e % 2));
                }
            }
            m.cpu.state.gpr[reg::RDX] = TEST_RAM - below;
            let r = m.run_code(&code, 1).reason;
            match want {
                None => assert_eq!(r, ExitReason::Budget, "{below} {sel:#x}"),
                Some(o) => assert!(
                    matches!(r, ExitReason::Exception(Fault::PageFault { addr, .. }) if addr == TEST_RAM + o),
                    "{below} {sel:#x}: {r:?}"
                ),
            }
        }
    }

    #[test]
    fn maskmovdqu_checks_the_high_quadword_first_whatever_the_mask() {
        for code in [
            TestMachine::assemble(|a| a.maskmovdqu(xmm1, xmm2)),
            TestMachine::assemble(|a| a.vmaskmovdqu(xmm1, xmm2)),
        ] {
            maskmovdqu_case(&code);
        }
        // VMASKMOVDQU stores the selected bytes like MASKMOVDQU.
        let code = TestMachine::assemble(|a| a.vmaskmovdqu(xmm1, xmm2));
        let mut m = machine();
        m.cpu.state.ymm[1][0] = 0x8877_6655_4433_2211;
        m.cpu.state.ymm[1][1] = u64::MAX;
        m.cpu.state.ymm[2][0] = 0x8000_0000_ff7f_0080;
        m.cpu.state.ymm[2][1] = 0x80;
        m.cpu.state.gpr[reg::RDI] = DATA_BASE;
        m.load(DATA_BASE, &[0xee; 16]);
        assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
        assert_eq!(m.read_u64(DATA_BASE), 0x88ee_eeee_44ee_ee11);
        assert_eq!(m.read_u64(DATA_BASE + 8), 0xeeee_eeee_eeee_eeff);
    }

    fn maskmovdqu_case(code: &[u8]) {
        // Host-measured: with RDI 4 bytes below an unwritable page the fault reports RDI + 8
        // (the high quadword, checked first), for every mask including zero.
        for mask in [0u128, 0x80, 0x80 << 64] {
            let mut m = machine();
            m.cpu.state.ymm[2][0] = mask as u64;
            m.cpu.state.ymm[2][1] = (mask >> 64) as u64;
            m.cpu.state.gpr[reg::RDI] = 0x2000 - 4;
            let e = m.run_code(code, 1);
            assert!(
                matches!(
                    e.reason,
                    ExitReason::Exception(Fault::PageFault { addr: 0x2004, .. })
                ),
                "{:?}",
                e.reason
            );
        }
    }

    #[test]
    fn movq2dq_movdq2q() {
        let code = TestMachine::assemble(|a| {
            a.movq2dq(xmm3, mm4)?;
            a.movdq2q(mm5, xmm6)
        });
        let mut m = machine();
        set_mm(&mut m.cpu.state, 4, 0x1234);
        m.cpu.state.ymm[3] = [1, 2, 3, 4];
        m.cpu.state.ymm[6] = [0x5678, 9, 9, 9];
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.cpu.state.ymm[3], [0x1234, 0, 3, 4]);
        assert_eq!(get_mm(&m.cpu.state, 5), 0x5678);
        assert_eq!(m.cpu.state.x87.ftw, 0xff);
    }
}
