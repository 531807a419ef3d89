//! VEX-encoded floating-point arithmetic, compares and blends (AVX, 128 and 256 bit):
//! VADD/VSUB/VMUL/VDIV/VMIN/VMAX/VSQRT {PS,PD,SS,SD}, VRCPPS/SS, VRSQRTPS/SS, VADDSUBPS/PD,
//! VHADD/VHSUB, VROUNDPS/PD/SS/SD, VDPPS (per 128-bit lane)/VDPPD, VCMPPS/PD/SS/SD with all 32
//! predicates, V(U)COMISS/SD, VBLENDPS/PD, VBLENDVPS/PD, VINSERTPS, VEXTRACTPS.
//!
//! The lane arithmetic is [`crate::fp`]; VEX memory operands need no alignment. Scalar forms
//! take bits 127:32 (or 127:64) from the first source (VEX.vvvv) and zero bits 255:128.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags::set_status;
use crate::fp::host::{self, Op};
use crate::fp::sse::{arith, comi, minmax, sqrt, Arith};
use crate::fp::{approx, cvt, daz, denormal_flag, is_nan, is_qnan, is_snan, mxcsr, Format, Mx};
use crate::fp::{F32, F64};
use crate::ops::avx_common::{check_avx, get_ymm, read_vec, vec_index, vlen, write_vec, V256};
use crate::ops::sse_blend::{blendpd, blendps, blendvpd, blendvps, insertps};
use crate::ops::sse_common::dwords;
use crate::ops::sse_fp::{addsub, commit_flags, dppd, dpps, hadd, hsub, lane, lanes};
use crate::ops::sse_fp::{packed_lanes, read_scalar, round_packed, with_lane, Full, Lane};
use crate::state::flags::STATUS;
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family (VEX encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code::*;
    Some(match ins.code() {
        VEX_Vaddps_xmm_xmm_xmmm128 | VEX_Vaddps_ymm_ymm_ymmm256 => packed::<F32, ADD>,
        VEX_Vaddpd_xmm_xmm_xmmm128 | VEX_Vaddpd_ymm_ymm_ymmm256 => packed::<F64, ADD>,
        VEX_Vsubps_xmm_xmm_xmmm128 | VEX_Vsubps_ymm_ymm_ymmm256 => packed::<F32, SUB>,
        VEX_Vsubpd_xmm_xmm_xmmm128 | VEX_Vsubpd_ymm_ymm_ymmm256 => packed::<F64, SUB>,
        VEX_Vmulps_xmm_xmm_xmmm128 | VEX_Vmulps_ymm_ymm_ymmm256 => packed::<F32, MUL>,
        VEX_Vmulpd_xmm_xmm_xmmm128 | VEX_Vmulpd_ymm_ymm_ymmm256 => packed::<F64, MUL>,
        VEX_Vdivps_xmm_xmm_xmmm128 | VEX_Vdivps_ymm_ymm_ymmm256 => packed::<F32, DIV>,
        VEX_Vdivpd_xmm_xmm_xmmm128 | VEX_Vdivpd_ymm_ymm_ymmm256 => packed::<F64, DIV>,
        VEX_Vminps_xmm_xmm_xmmm128 | VEX_Vminps_ymm_ymm_ymmm256 => packed::<F32, MIN>,
        VEX_Vminpd_xmm_xmm_xmmm128 | VEX_Vminpd_ymm_ymm_ymmm256 => packed::<F64, MIN>,
        VEX_Vmaxps_xmm_xmm_xmmm128 | VEX_Vmaxps_ymm_ymm_ymmm256 => packed::<F32, MAX>,
        VEX_Vmaxpd_xmm_xmm_xmmm128 | VEX_Vmaxpd_ymm_ymm_ymmm256 => packed::<F64, MAX>,
        VEX_Vsqrtps_xmm_xmmm128 | VEX_Vsqrtps_ymm_ymmm256 => packed::<F32, SQRT>,
        VEX_Vsqrtpd_xmm_xmmm128 | VEX_Vsqrtpd_ymm_ymmm256 => packed::<F64, SQRT>,
        VEX_Vrcpps_xmm_xmmm128 | VEX_Vrcpps_ymm_ymmm256 => packed::<F32, RCP>,
        VEX_Vrsqrtps_xmm_xmmm128 | VEX_Vrsqrtps_ymm_ymmm256 => packed::<F32, RSQRT>,
        VEX_Vaddss_xmm_xmm_xmmm32 => scalar::<F32, ADD>,
        VEX_Vaddsd_xmm_xmm_xmmm64 => scalar::<F64, ADD>,
        VEX_Vsubss_xmm_xmm_xmmm32 => scalar::<F32, SUB>,
        VEX_Vsubsd_xmm_xmm_xmmm64 => scalar::<F64, SUB>,
        VEX_Vmulss_xmm_xmm_xmmm32 => scalar::<F32, MUL>,
        VEX_Vmulsd_xmm_xmm_xmmm64 => scalar::<F64, MUL>,
        VEX_Vdivss_xmm_xmm_xmmm32 => scalar::<F32, DIV>,
        VEX_Vdivsd_xmm_xmm_xmmm64 => scalar::<F64, DIV>,
        VEX_Vminss_xmm_xmm_xmmm32 => scalar::<F32, MIN>,
        VEX_Vminsd_xmm_xmm_xmmm64 => scalar::<F64, MIN>,
        VEX_Vmaxss_xmm_xmm_xmmm32 => scalar::<F32, MAX>,
        VEX_Vmaxsd_xmm_xmm_xmmm64 => scalar::<F64, MAX>,
        VEX_Vsqrtss_xmm_xmm_xmmm32 => scalar::<F32, SQRT>,
        VEX_Vsqrtsd_xmm_xmm_xmmm64 => scalar::<F64, SQRT>,
        VEX_Vrcpss_xmm_xmm_xmmm32 => scalar::<F32, RCP>,
        VEX_Vrsqrtss_xmm_xmm_xmmm32 => scalar::<F32, RSQRT>,
        VEX_Vaddsubps_xmm_xmm_xmmm128 | VEX_Vaddsubps_ymm_ymm_ymmm256 => h_addsubps,
        VEX_Vaddsubpd_xmm_xmm_xmmm128 | VEX_Vaddsubpd_ymm_ymm_ymmm256 => h_addsubpd,
        VEX_Vhaddps_xmm_xmm_xmmm128 | VEX_Vhaddps_ymm_ymm_ymmm256 => h_haddps,
        VEX_Vhaddpd_xmm_xmm_xmmm128 | VEX_Vhaddpd_ymm_ymm_ymmm256 => h_haddpd,
        VEX_Vhsubps_xmm_xmm_xmmm128 | VEX_Vhsubps_ymm_ymm_ymmm256 => h_hsubps,
        VEX_Vhsubpd_xmm_xmm_xmmm128 | VEX_Vhsubpd_ymm_ymm_ymmm256 => h_hsubpd,
        VEX_Vroundps_xmm_xmmm128_imm8 | VEX_Vroundps_ymm_ymmm256_imm8 => h_roundps,
        VEX_Vroundpd_xmm_xmmm128_imm8 | VEX_Vroundpd_ymm_ymmm256_imm8 => h_roundpd,
        VEX_Vdpps_xmm_xmm_xmmm128_imm8 => h_dpps,
        VEX_Vdpps_ymm_ymm_ymmm256_imm8 => h_dpps256,
        VEX_Vdppd_xmm_xmm_xmmm128_imm8 => h_dppd,
        VEX_Vroundss_xmm_xmm_xmmm32_imm8 => round_scalar::<F32>,
        VEX_Vroundsd_xmm_xmm_xmmm64_imm8 => round_scalar::<F64>,
        VEX_Vcmpps_xmm_xmm_xmmm128_imm8 | VEX_Vcmpps_ymm_ymm_ymmm256_imm8 => h_cmpps,
        VEX_Vcmppd_xmm_xmm_xmmm128_imm8 | VEX_Vcmppd_ymm_ymm_ymmm256_imm8 => h_cmppd,
        VEX_Vcmpss_xmm_xmm_xmmm32_imm8 => cmp_scalar::<F32>,
        VEX_Vcmpsd_xmm_xmm_xmmm64_imm8 => cmp_scalar::<F64>,
        VEX_Vcomiss_xmm_xmmm32 => comis::<F32, true>,
        VEX_Vcomisd_xmm_xmmm64 => comis::<F64, true>,
        VEX_Vucomiss_xmm_xmmm32 => comis::<F32, false>,
        VEX_Vucomisd_xmm_xmmm64 => comis::<F64, false>,
        VEX_Vblendps_xmm_xmm_xmmm128_imm8 | VEX_Vblendps_ymm_ymm_ymmm256_imm8 => h_blendps,
        VEX_Vblendpd_xmm_xmm_xmmm128_imm8 | VEX_Vblendpd_ymm_ymm_ymmm256_imm8 => h_blendpd,
        VEX_Vblendvps_xmm_xmm_xmmm128_xmm | VEX_Vblendvps_ymm_ymm_ymmm256_ymm => h_blendvps,
        VEX_Vblendvpd_xmm_xmm_xmmm128_xmm | VEX_Vblendvpd_ymm_ymm_ymmm256_ymm => h_blendvpd,
        VEX_Vinsertps_xmm_xmm_xmmm32_imm8 => h_insertps,
        VEX_Vextractps_rm32_xmm_imm8 | VEX_Vextractps_r64m32_xmm_imm8 => h_extractps,
        _ => return None,
    })
}

// ----- lane operations -----

const ADD: u8 = 0;
const SUB: u8 = 1;
const MUL: u8 = 2;
const DIV: u8 = 3;
const MIN: u8 = 4;
const MAX: u8 = 5;
const SQRT: u8 = 6;
const RCP: u8 = 7;
const RSQRT: u8 = 8;

/// Lane function of operation `OP` (`a` from the first source, `b` from the second; the unary
/// operations use `b` only).
fn lane_op<P: Format, const OP: u8>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    match OP {
        ADD => arith::<P>(Arith::Add, a, b, mx),
        SUB => arith::<P>(Arith::Sub, a, b, mx),
        MUL => arith::<P>(Arith::Mul, a, b, mx),
        DIV => arith::<P>(Arith::Div, a, b, mx),
        MIN => minmax::<P>(a, b, false, mx),
        MAX => minmax::<P>(a, b, true, mx),
        SQRT => sqrt::<P>(b, mx),
        RCP => (approx::rcp(b as u32) as u64, 0),
        _ => (approx::rsqrt(b as u32) as u64, 0),
    }
}

/// The host kernel of operation `OP` (none for the approximations RCP/RSQRT).
const fn host_op(op: u8) -> Option<Op> {
    match op {
        ADD => Some(Op::Add),
        SUB => Some(Op::Sub),
        MUL => Some(Op::Mul),
        DIV => Some(Op::Div),
        MIN => Some(Op::Min),
        MAX => Some(Op::Max),
        SQRT => Some(Op::Sqrt),
        _ => None,
    }
}

/// The 32 VEX compare predicates (imm8[4:0]). Bits 2:0 with bit 3 select the relation and
/// its unordered result; bit 4 swaps the signalling behaviour on QNaN (the 16..31 predicates
/// are the 0..15 ones with "ordered/unordered, signalling/quiet" S and Q exchanged). SNaN
/// always signals IE; DE for a denormal source when neither is a NaN.
pub fn compare32<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (bool, u32) {
    host::compare::<P>(a, b, pred & 31, mx).unwrap_or_else(|| compare32_soft::<P>(a, b, pred, mx))
}

/// [`compare32`] in soft-float (the reference).
pub fn compare32_soft<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (bool, u32) {
    let p = pred & 31;
    let base = p & 15;
    // Predicates 1, 2, 5, 6, 9, 10, 13, 14 signal on QNaN; 16..31 invert this.
    let signalling = matches!(base & 3, 1 | 2) != (p >= 16);
    if is_nan::<P>(a) || is_nan::<P>(b) {
        let ie = is_snan::<P>(a)
            || is_snan::<P>(b)
            || (signalling && (is_qnan::<P>(a) || is_qnan::<P>(b)));
        let unordered = matches!(base, 3..=6 | 8..=10 | 15);
        return (unordered, if ie { mxcsr::IE } else { 0 });
    }
    let de = denormal_flag::<P>(&[a, b], mx);
    let (a, b) = (daz::<P>(a, mx), daz::<P>(b, mx));
    // `compare` with the SSE predicates gives the relations (no NaN left here).
    let rel = |q: u8| crate::fp::sse::compare_soft::<P>(a, b, q, Mx(mx.0 & !mxcsr::DAZ)).0;
    let r = match base {
        0 | 8 => rel(0),
        1 | 9 => rel(1),
        2 | 10 => rel(2),
        3 | 11 => false,
        4 | 12 => rel(4),
        5 | 13 => rel(5),
        6 | 14 => rel(6),
        _ => true,
    };
    (r, de)
}

fn cmp_lane<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (u64, u32) {
    let (t, f) = compare32::<P>(a, b, pred, mx);
    (if t { u64::MAX } else { 0 }, f)
}

/// VCMPPS/VCMPPD on one 128-bit lane.
pub fn cmp_lanes<P: Format>(a: u128, b: u128, pred: u8, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::compare_packed::<P>(a, b, pred & 31, mx) {
        return r;
    }
    let mut r = 0;
    let mut flags = 0;
    for i in 0..lanes::<P>() {
        let (v, f) = cmp_lane::<P>(lane::<P>(a, i), lane::<P>(b, i), pred, mx);
        r = with_lane::<P>(r, i, v);
        flags |= f;
    }
    (r, flags)
}

// ----- operand shapes -----

/// The immediate, when the last operand is one.
fn imm_of(ins: &Instruction) -> Option<u8> {
    let n = ins.op_count().checked_sub(1)?;
    (ins.op_kind(n) == OpKind::Immediate8).then(|| ins.immediate8())
}

/// Sources of a packed form: `op dst, src1, src2[, imm]` gives (src1, src2); the unary
/// `op dst, src[, imm]` gives (0, src).
fn sources(x: &mut Ctx, ins: &Instruction) -> Result<(V256, V256), Fault> {
    let n = ins.op_count() - imm_of(ins).is_some() as u32;
    if n >= 3 {
        let a = read_vec(x, ins, 1, false)?;
        Ok((a, read_vec(x, ins, 2, false)?))
    } else {
        Ok(([0, 0], read_vec(x, ins, 1, false)?))
    }
}

/// Commit the flags, then write `v` (VEX zeroing for `len`) to operand 0.
pub fn finish(x: &mut Ctx, ins: &Instruction, v: V256, len: u8, flags: u32) -> Result<(), Trap> {
    commit_flags(x, flags)?;
    write_vec(x, ins, 0, v, len, false)?;
    Ok(())
}

/// Packed lane-by-lane operation, 128 or 256 bit.
fn packed<P: Format, const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let (a, b) = sources(x, ins)?;
    let mx = Mx(x.cpu.state.mxcsr);
    let f: Lane = lane_op::<P, OP>;
    let op = host_op(OP);
    let (lo, f0) = packed_lanes::<P>(a[0], b[0], mx, f, op);
    let (hi, f1) = if len == 32 {
        packed_lanes::<P>(a[1], b[1], mx, f, op)
    } else {
        (0, 0)
    };
    finish(x, ins, [lo, hi], len, f0 | f1)
}

/// A whole-128-bit-lane operation applied to each lane (imm8 passed through).
fn per_lane_full(x: &mut Ctx, ins: &Instruction, f: Full) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let (a, b) = sources(x, ins)?;
    let imm = imm_of(ins).unwrap_or(0);
    let mx = Mx(x.cpu.state.mxcsr);
    let (lo, f0) = f(a[0], b[0], imm, mx);
    let (hi, f1) = if len == 32 {
        f(a[1], b[1], imm, mx)
    } else {
        (0, 0)
    };
    finish(x, ins, [lo, hi], len, f0 | f1)
}

/// VDPPS ymm: both halves at once (their stages are synchronised; see `sse_fp::dpps256`).
fn h_dpps256(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let (a, b) = sources(x, ins)?;
    let (r, f) = crate::ops::sse_fp::dpps256(a, b, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, 32, f)
}

/// `op xmm1, xmm2, xmm3/m32|m64`: the low lane from `f(src1, src2)`, bits 127:W from src1.
fn scalar<P: Format, const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<P>(x, ins, 2)?;
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    let (v, flags) = lane_op::<P, OP>(lane::<P>(a, 0), b, Mx(x.cpu.state.mxcsr));
    finish(x, ins, [with_lane::<P>(a, 0, v), 0], 16, flags)
}

fn round_scalar<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<P>(x, ins, 2)?;
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    let (v, flags) = cvt::round_to_integral::<P>(b, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    finish(x, ins, [with_lane::<P>(a, 0, v), 0], 16, flags)
}

fn cmp_scalar<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<P>(x, ins, 2)?;
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    let mx = Mx(x.cpu.state.mxcsr);
    let (v, flags) = cmp_lane::<P>(lane::<P>(a, 0), b, ins.immediate8(), mx);
    finish(x, ins, [with_lane::<P>(a, 0, v), 0], 16, flags)
}

/// VCOMIS*/VUCOMIS*: as the legacy forms (ZF/PF/CF, OF/SF/AF cleared).
fn comis<P: Format, const SIGNAL_QNAN: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<P>(x, ins, 1)?;
    let a = lane::<P>(get_ymm(&x.cpu.state, vec_index(ins.op_register(0)))[0], 0);
    let (rf, flags) = comi::<P>(a, b, SIGNAL_QNAN, Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_status(&mut x.cpu.state, STATUS, rf);
    Ok(())
}

fn cmpps(a: u128, b: u128, imm: u8, mx: Mx) -> (u128, u32) {
    cmp_lanes::<F32>(a, b, imm, mx)
}
fn cmppd(a: u128, b: u128, imm: u8, mx: Mx) -> (u128, u32) {
    cmp_lanes::<F64>(a, b, imm, mx)
}

macro_rules! full_handlers {
    ($($name:ident = $f:expr;)*) => {
        $(
            fn $name(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                per_lane_full(x, ins, $f)
            }
        )*
    };
}

full_handlers! {
    h_addsubps = addsub::<F32>;
    h_addsubpd = addsub::<F64>;
    h_haddps = hadd::<F32>;
    h_haddpd = hadd::<F64>;
    h_hsubps = hsub::<F32>;
    h_hsubpd = hsub::<F64>;
    h_roundps = round_packed::<F32>;
    h_roundpd = round_packed::<F64>;
    h_dpps = dpps;
    h_dppd = dppd;
    h_cmpps = cmpps;
    h_cmppd = cmppd;
}

// ----- blends and inserts (no MXCSR) -----

/// VBLENDPS/PD: the upper 128-bit lane uses the next immediate bits.
fn blend_imm(
    x: &mut Ctx,
    ins: &Instruction,
    f: fn(u128, u128, u8) -> u128,
    per: u32,
) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let (a, b) = sources(x, ins)?;
    let imm = ins.immediate8();
    write_vec(
        x,
        ins,
        0,
        [f(a[0], b[0], imm), f(a[1], b[1], imm >> per)],
        len,
        false,
    )?;
    Ok(())
}

fn h_blendps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blend_imm(x, ins, blendps, 4)
}

fn h_blendpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blend_imm(x, ins, blendpd, 2)
}

/// VBLENDVPS/PD dst, src1, src2, mask (the is4 register).
fn blendv(x: &mut Ctx, ins: &Instruction, f: fn(u128, u128, u128) -> u128) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let a = read_vec(x, ins, 1, false)?;
    let b = read_vec(x, ins, 2, false)?;
    let m = read_vec(x, ins, 3, false)?;
    write_vec(
        x,
        ins,
        0,
        [f(a[0], b[0], m[0]), f(a[1], b[1], m[1])],
        len,
        false,
    )?;
    Ok(())
}

fn h_blendvps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blendv(x, ins, blendvps)
}

fn h_blendvpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blendv(x, ins, blendvpd)
}

/// VINSERTPS xmm1, xmm2, xmm3/m32, imm8: INSERTPS into a copy of xmm2.
fn h_insertps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let imm = ins.immediate8();
    let s = if ins.op2_kind() == OpKind::Memory {
        read_scalar::<F32>(x, ins, 2)? as u32
    } else {
        dwords(get_ymm(&x.cpu.state, vec_index(ins.op_register(2)))[0])[(imm >> 6) as usize]
    };
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    write_vec(x, ins, 0, [insertps(a, s, imm), 0], 16, false)?;
    Ok(())
}

/// VEXTRACTPS r/m32, xmm, imm8: dword imm[1:0] (zero-extended into a 64-bit register).
fn h_extractps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = dwords(get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0])
        [(ins.immediate8() & 3) as usize];
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::ops::avx_common::{get_ymm, set_ymm};
    use crate::testkit::TestMachine;
    use iced_x86::code_asm::*;

    const M: Mx = Mx(0x1f80);

    #[test]
    fn vex_predicates() {
        let qnan = 0x7fc0_0000;
        let one = 0x3f80_0000;
        // EQ_UQ (8) is true on unordered, NEQ_OQ (12) false; GT_OS (14) signals on QNaN,
        // GT_OQ (30) does not.
        assert_eq!(compare32::<F32>(qnan, one, 8, M), (true, 0));
        assert_eq!(compare32::<F32>(qnan, one, 12, M), (false, 0));
        assert_eq!(compare32::<F32>(qnan, one, 14, M), (false, mxcsr::IE));
        assert_eq!(compare32::<F32>(qnan, one, 30, M), (false, 0));
        assert_eq!(compare32::<F32>(qnan, one, 17, M), (false, 0));
        assert_eq!(compare32::<F32>(one, 0, 13, M), (true, 0));
        assert_eq!(compare32::<F32>(one, 0, 9, M), (false, 0));
        assert_eq!(compare32::<F32>(one, one, 11, M), (false, 0));
        assert_eq!(compare32::<F32>(one, one, 31, M), (true, 0));
    }

    #[test]
    fn scalar_copies_src1_and_zeroes_upper() {
        let code = TestMachine::assemble(|a| a.vaddss(xmm0, xmm1, xmm2));
        let mut m = TestMachine::new();
        set_ymm(&mut m.cpu.state, 0, [u128::MAX, u128::MAX]);
        set_ymm(
            &mut m.cpu.state,
            1,
            [0x1111_2222_3333_4444_5555_6666_3f80_0000, 7],
        );
        set_ymm(&mut m.cpu.state, 2, [0x4000_0000, 9]);
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(
            get_ymm(&m.cpu.state, 0),
            [0x1111_2222_3333_4444_5555_6666_4040_0000, 0]
        );
    }

    #[test]
    fn packed_256_and_unmasked_fault() {
        let code = TestMachine::assemble(|a| a.vdivps(ymm0, ymm1, ymm2));
        let mut m = TestMachine::new();
        let one = 0x3f80_0000u128;
        let v = one | one << 32 | one << 64 | one << 96;
        set_ymm(&mut m.cpu.state, 1, [v, v]);
        set_ymm(&mut m.cpu.state, 2, [v, v & !0xffff_ffff]);
        m.cpu.state.mxcsr = 0x1f80 & !(mxcsr::ZE << mxcsr::MASK_SHIFT);
        m.cpu.state.cr4 |= crate::state::ctl::CR4_OSXMMEXCPT;
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Exception(Fault::SimdError));
        assert_eq!(get_ymm(&m.cpu.state, 0), [0, 0]);
        assert_eq!(m.cpu.state.mxcsr & mxcsr::FLAGS, mxcsr::ZE);
        let mut m2 = TestMachine::new();
        set_ymm(&mut m2.cpu.state, 1, [v, v]);
        set_ymm(&mut m2.cpu.state, 2, [v, v]);
        m2.run_code(&code, 1);
        assert_eq!(get_ymm(&m2.cpu.state, 0), [v, v]);
    }
}
