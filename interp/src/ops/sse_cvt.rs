//! Legacy SSE/SSE2 conversions: CVTSI2SS/SD (32/64-bit source), CVT(T)SS2SI/CVT(T)SD2SI (32/64
//! destination), CVTSS2SD/CVTSD2SS, CVTPS2PD/CVTPD2PS, CVTDQ2PS/CVT(T)PS2DQ, CVTDQ2PD/
//! CVT(T)PD2DQ. The MMX forms (CVTPI2PS, ...) are not claimed.
//!
//! m128 sources must be aligned; the m64 sources of CVTPS2PD/CVTDQ2PD and scalar sources need
//! not be. Results narrower than 128 bits (CVTPD2PS, CVT(T)PD2DQ) zero bits 127:64.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::fp::cvt::{f32_to_f64, f64_to_f32, float_to_int, int_to_float};
use crate::fp::{Format, Mx, F32, F64};
use crate::ops::sse_common::{check_sse, get_xmm, read_xmm_m128, read_xmm_m64, set_xmm, xmm_op};
use crate::ops::sse_fp::{commit_flags, lane, read_scalar, with_lane};
use crate::Ctx;
use iced_x86::{Code, Instruction};
use rustc_apfloat::Round;

/// Handlers of this family (legacy encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Cvtsi2ss_xmm_rm32 | Code::Cvtsi2ss_xmm_rm64 => cvtsi2s::<F32>,
        Code::Cvtsi2sd_xmm_rm32 | Code::Cvtsi2sd_xmm_rm64 => cvtsi2s::<F64>,
        Code::Cvtss2si_r32_xmmm32 | Code::Cvtss2si_r64_xmmm32 => cvts2si::<F32, false>,
        Code::Cvttss2si_r32_xmmm32 | Code::Cvttss2si_r64_xmmm32 => cvts2si::<F32, true>,
        Code::Cvtsd2si_r32_xmmm64 | Code::Cvtsd2si_r64_xmmm64 => cvts2si::<F64, false>,
        Code::Cvttsd2si_r32_xmmm64 | Code::Cvttsd2si_r64_xmmm64 => cvts2si::<F64, true>,
        Code::Cvtss2sd_xmm_xmmm32 => cvtss2sd,
        Code::Cvtsd2ss_xmm_xmmm64 => cvtsd2ss,
        Code::Cvtps2pd_xmm_xmmm64 => cvtps2pd,
        Code::Cvtpd2ps_xmm_xmmm128 => cvtpd2ps,
        Code::Cvtdq2ps_xmm_xmmm128 => cvtdq2ps,
        Code::Cvtps2dq_xmm_xmmm128 => cvtps2dq::<false>,
        Code::Cvttps2dq_xmm_xmmm128 => cvtps2dq::<true>,
        Code::Cvtdq2pd_xmm_xmmm64 => cvtdq2pd,
        Code::Cvtpd2dq_xmm_xmmm128 => cvtpd2dq::<false>,
        Code::Cvttpd2dq_xmm_xmmm128 => cvtpd2dq::<true>,
        _ => return None,
    })
}

/// Rounding of a float-to-integer conversion: toward zero for the CVTT forms, else MXCSR.RC.
#[inline]
fn int_round(truncate: bool, mx: Mx) -> Round {
    if truncate {
        Round::TowardZero
    } else {
        mx.round()
    }
}

// ----- whole-register semantic functions -----

/// CVTPS2PD: the two low singles of `src` to doubles.
pub fn ps2pd(src: u64, mx: Mx) -> (u128, u32) {
    let (lo, f0) = f32_to_f64(src as u32, mx);
    let (hi, f1) = f32_to_f64((src >> 32) as u32, mx);
    ((hi as u128) << 64 | lo as u128, f0 | f1)
}

/// CVTPD2PS: two doubles to singles in bits 63:0, bits 127:64 zero.
pub fn pd2ps(src: u128, mx: Mx) -> (u128, u32) {
    let (lo, f0) = f64_to_f32(src as u64, mx);
    let (hi, f1) = f64_to_f32((src >> 64) as u64, mx);
    ((hi as u128) << 32 | lo as u128, f0 | f1)
}

/// CVTDQ2PS: four signed dwords to singles.
pub fn dq2ps(src: u128, mx: Mx) -> (u128, u32) {
    let mut r = 0;
    let mut flags = 0;
    for i in 0..4 {
        let v = lane::<F32>(src, i) as u32 as i32 as i64;
        let (x, f) = int_to_float::<F32>(v, mx);
        r = with_lane::<F32>(r, i, x);
        flags |= f;
    }
    (r, flags)
}

/// CVTPS2DQ/CVTTPS2DQ: four singles to signed dwords (indefinite 0x80000000 on invalid).
pub fn ps2dq(src: u128, truncate: bool, mx: Mx) -> (u128, u32) {
    let mut r = 0;
    let mut flags = 0;
    for i in 0..4 {
        let (v, f) = float_to_int::<F32>(lane::<F32>(src, i), 32, int_round(truncate, mx), mx);
        r = with_lane::<F32>(r, i, v as u64);
        flags |= f;
    }
    (r, flags)
}

/// CVTDQ2PD: the two low signed dwords of `src` to doubles (exact).
pub fn dq2pd(src: u64, mx: Mx) -> (u128, u32) {
    let (lo, _) = int_to_float::<F64>(src as u32 as i32 as i64, mx);
    let (hi, _) = int_to_float::<F64>((src >> 32) as u32 as i32 as i64, mx);
    ((hi as u128) << 64 | lo as u128, 0)
}

/// CVTPD2DQ/CVTTPD2DQ: two doubles to signed dwords in bits 63:0, bits 127:64 zero.
pub fn pd2dq(src: u128, truncate: bool, mx: Mx) -> (u128, u32) {
    let round = int_round(truncate, mx);
    let (lo, f0) = float_to_int::<F64>(src as u64, 32, round, mx);
    let (hi, f1) = float_to_int::<F64>((src >> 64) as u64, 32, round, mx);
    ((hi as u32 as u128) << 32 | lo as u32 as u128, f0 | f1)
}

// ----- handlers -----

/// Commit the flags, then write `v` to the XMM destination (operand 0).
fn finish(x: &mut Ctx, ins: &Instruction, v: u128, flags: u32) -> Result<(), Trap> {
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v);
    Ok(())
}

/// CVTSI2SS/CVTSI2SD xmm, r/m32|r/m64: the low lane; the rest of the destination kept.
fn cvtsi2s<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let raw = x.read_op(ins, 1)?;
    let v = if x.op_size(ins, 1) == 8 {
        raw as i64
    } else {
        raw as u32 as i32 as i64
    };
    let (r, flags) = int_to_float::<P>(v, Mx(x.cpu.state.mxcsr));
    let d = get_xmm(&x.cpu.state, xmm_op(ins, 0));
    finish(x, ins, with_lane::<P>(d, 0, r), flags)
}

/// CVT(T)SS2SI/CVT(T)SD2SI r32|r64, xmm/m32|m64 (a 32-bit destination zero-extends).
fn cvts2si<P: Format, const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_scalar::<P>(x, ins, 1)?;
    let bits = x.op_size(ins, 0) as u32 * 8;
    let mx = Mx(x.cpu.state.mxcsr);
    let (v, flags) = float_to_int::<P>(a, bits, int_round(TRUNCATE, mx), mx);
    commit_flags(x, flags)?;
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

/// CVTSS2SD xmm, xmm/m32: bits 63:0; bits 127:64 of the destination kept.
fn cvtss2sd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_scalar::<F32>(x, ins, 1)?;
    let (r, flags) = f32_to_f64(a as u32, Mx(x.cpu.state.mxcsr));
    let d = get_xmm(&x.cpu.state, xmm_op(ins, 0));
    finish(x, ins, with_lane::<F64>(d, 0, r), flags)
}

/// CVTSD2SS xmm, xmm/m64: bits 31:0; bits 127:32 of the destination kept.
fn cvtsd2ss(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_scalar::<F64>(x, ins, 1)?;
    let (r, flags) = f64_to_f32(a, Mx(x.cpu.state.mxcsr));
    let d = get_xmm(&x.cpu.state, xmm_op(ins, 0));
    finish(x, ins, with_lane::<F32>(d, 0, r as u64), flags)
}

fn cvtps2pd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m64(x, ins, 1)?;
    let (r, flags) = ps2pd(a, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

fn cvtdq2pd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m64(x, ins, 1)?;
    let (r, flags) = dq2pd(a, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

fn cvtpd2ps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m128(x, ins, 1, true)?;
    let (r, flags) = pd2ps(a, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

fn cvtdq2ps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m128(x, ins, 1, true)?;
    let (r, flags) = dq2ps(a, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

fn cvtps2dq<const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m128(x, ins, 1, true)?;
    let (r, flags) = ps2dq(a, TRUNCATE, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

fn cvtpd2dq<const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let a = read_xmm_m128(x, ins, 1, true)?;
    let (r, flags) = pd2dq(a, TRUNCATE, Mx(x.cpu.state.mxcsr));
    finish(x, ins, r, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::round_mode;

    #[test]
    fn rounding_field_decodes() {
        assert_eq!(round_mode(1), Round::TowardNegative);
        assert_eq!(int_round(true, Mx(0x1f80)), Round::TowardZero);
        assert_eq!(int_round(false, Mx(0x3f80)), Round::TowardNegative);
    }
}
