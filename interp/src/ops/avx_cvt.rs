//! VEX-encoded conversions (AVX): VCVTSI2SS/SD (3-operand), VCVT(T)SS2SI/SD2SI,
//! VCVTSS2SD/VCVTSD2SS (3-operand), VCVTPS2PD/VCVTDQ2PD (128 and 256-bit widening),
//! VCVTPD2PS/VCVT(T)PD2DQ (128 and 256-bit narrowing to xmm), VCVTDQ2PS/VCVT(T)PS2DQ.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::fp::cvt::{f32_to_f64, f64_to_f32, float_to_int, int_to_float};
use crate::fp::{Format, Mx, F32, F64};
use crate::ops::avx_common::{check_avx, get_ymm, is_ymm, read_vec, vec_index};
use crate::ops::avx_fp::finish;
use crate::ops::sse_cvt::{dq2pd, dq2ps, pd2dq, pd2ps, ps2dq, ps2pd};
use crate::ops::sse_fp::{commit_flags, read_scalar, with_lane};
use crate::Ctx;
use iced_x86::{Code, Instruction};
use rustc_apfloat::Round;

/// Handlers of this family (VEX encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code::*;
    Some(match ins.code() {
        VEX_Vcvtsi2ss_xmm_xmm_rm32 | VEX_Vcvtsi2ss_xmm_xmm_rm64 => cvtsi2s::<F32>,
        VEX_Vcvtsi2sd_xmm_xmm_rm32 | VEX_Vcvtsi2sd_xmm_xmm_rm64 => cvtsi2s::<F64>,
        VEX_Vcvtss2si_r32_xmmm32 | VEX_Vcvtss2si_r64_xmmm32 => cvts2si::<F32, false>,
        VEX_Vcvttss2si_r32_xmmm32 | VEX_Vcvttss2si_r64_xmmm32 => cvts2si::<F32, true>,
        VEX_Vcvtsd2si_r32_xmmm64 | VEX_Vcvtsd2si_r64_xmmm64 => cvts2si::<F64, false>,
        VEX_Vcvttsd2si_r32_xmmm64 | VEX_Vcvttsd2si_r64_xmmm64 => cvts2si::<F64, true>,
        VEX_Vcvtss2sd_xmm_xmm_xmmm32 => cvtss2sd,
        VEX_Vcvtsd2ss_xmm_xmm_xmmm64 => cvtsd2ss,
        VEX_Vcvtps2pd_xmm_xmmm64 | VEX_Vcvtps2pd_ymm_xmmm128 => widen_op::<0>,
        VEX_Vcvtdq2pd_xmm_xmmm64 | VEX_Vcvtdq2pd_ymm_xmmm128 => widen_op::<1>,
        VEX_Vcvtpd2ps_xmm_xmmm128 | VEX_Vcvtpd2ps_xmm_ymmm256 => narrow_op::<0>,
        VEX_Vcvtpd2dq_xmm_xmmm128 | VEX_Vcvtpd2dq_xmm_ymmm256 => narrow_op::<1>,
        VEX_Vcvttpd2dq_xmm_xmmm128 | VEX_Vcvttpd2dq_xmm_ymmm256 => narrow_op::<2>,
        VEX_Vcvtdq2ps_xmm_xmmm128 | VEX_Vcvtdq2ps_ymm_ymmm256 => same_op::<0>,
        VEX_Vcvtps2dq_xmm_xmmm128 | VEX_Vcvtps2dq_ymm_ymmm256 => same_op::<1>,
        VEX_Vcvttps2dq_xmm_xmmm128 | VEX_Vcvttps2dq_ymm_ymmm256 => same_op::<2>,
        _ => return None,
    })
}

/// Destination length: 32 for a YMM operand 0, else 16.
fn dst_len(ins: &Instruction) -> u8 {
    if is_ymm(ins.op_register(0)) {
        32
    } else {
        16
    }
}

/// The low 128 bits of the first source register (operand 1).
fn src1(x: &Ctx, ins: &Instruction) -> u128 {
    get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0]
}

/// VCVTSI2SS/SD xmm1, xmm2, r/m32|r/m64.
fn cvtsi2s<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let raw = x.read_op(ins, 2)?;
    let v = if x.op_size(ins, 2) == 8 {
        raw as i64
    } else {
        raw as u32 as i32 as i64
    };
    let (r, flags) = int_to_float::<P>(v, Mx(x.cpu.state.mxcsr));
    let a = src1(x, ins);
    finish(x, ins, [with_lane::<P>(a, 0, r), 0], 16, flags)
}

/// VCVT(T)SS2SI/VCVT(T)SD2SI r32|r64, xmm/m32|m64.
fn cvts2si<P: Format, const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let a = read_scalar::<P>(x, ins, 1)?;
    let bits = x.op_size(ins, 0) as u32 * 8;
    let mx = Mx(x.cpu.state.mxcsr);
    let round = if TRUNCATE {
        Round::TowardZero
    } else {
        mx.round()
    };
    let (v, flags) = float_to_int::<P>(a, bits, round, mx);
    commit_flags(x, flags)?;
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

fn cvtss2sd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<F32>(x, ins, 2)?;
    let (r, flags) = f32_to_f64(b as u32, Mx(x.cpu.state.mxcsr));
    let a = src1(x, ins);
    finish(x, ins, [with_lane::<F64>(a, 0, r), 0], 16, flags)
}

fn cvtsd2ss(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_scalar::<F64>(x, ins, 2)?;
    let (r, flags) = f64_to_f32(b, Mx(x.cpu.state.mxcsr));
    let a = src1(x, ins);
    finish(x, ins, [with_lane::<F32>(a, 0, r as u64), 0], 16, flags)
}

/// VCVTPS2PD (`K` 0) / VCVTDQ2PD (1): two or four 32-bit lanes to 64-bit lanes.
fn widen_op<const K: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = dst_len(ins);
    let s = read_vec(x, ins, 1, false)?[0];
    let mx = Mx(x.cpu.state.mxcsr);
    let f = if K == 0 { ps2pd } else { dq2pd };
    let (lo, f0) = f(s as u64, mx);
    let (hi, f1) = if len == 32 {
        f((s >> 64) as u64, mx)
    } else {
        (0, 0)
    };
    finish(x, ins, [lo, hi], len, f0 | f1)
}

/// VCVTPD2PS (`K` 0) / VCVTPD2DQ (1) / VCVTTPD2DQ (2): two or four 64-bit lanes to 32-bit
/// lanes of an XMM destination (bits 255:128, or 255:64 for two lanes, zeroed).
fn narrow_op<const K: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let s = read_vec(x, ins, 1, false)?;
    let wide = ins.op_kind(1) == iced_x86::OpKind::Register && is_ymm(ins.op_register(1))
        || ins.memory_size().size() == 32;
    let mx = Mx(x.cpu.state.mxcsr);
    let f = |v: u128| match K {
        0 => pd2ps(v, mx),
        1 => pd2dq(v, false, mx),
        _ => pd2dq(v, true, mx),
    };
    let (lo, f0) = f(s[0]);
    let (hi, f1) = if wide { f(s[1]) } else { (0, 0) };
    finish(x, ins, [lo | hi << 64, 0], 16, f0 | f1)
}

/// VCVTDQ2PS (`K` 0) / VCVTPS2DQ (1) / VCVTTPS2DQ (2): four or eight lanes.
fn same_op<const K: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = dst_len(ins);
    let s = read_vec(x, ins, 1, false)?;
    let mx = Mx(x.cpu.state.mxcsr);
    let f = |v: u128| match K {
        0 => dq2ps(v, mx),
        1 => ps2dq(v, false, mx),
        _ => ps2dq(v, true, mx),
    };
    let (lo, f0) = f(s[0]);
    let (hi, f1) = if len == 32 { f(s[1]) } else { (0, 0) };
    finish(x, ins, [lo, hi], len, f0 | f1)
}

#[cfg(test)]
mod tests {
    use crate::cpu::ExitReason;
    use crate::ops::avx_common::{get_ymm, set_ymm};
    use crate::testkit::TestMachine;
    use iced_x86::code_asm::*;

    #[test]
    fn narrowing_256_zeroes_upper() {
        let code = TestMachine::assemble(|a| a.vcvtpd2ps(xmm0, ymm1));
        let mut m = TestMachine::new();
        set_ymm(&mut m.cpu.state, 0, [u128::MAX, u128::MAX]);
        let one = 0x3ff0_0000_0000_0000u128;
        let two = 0x4000_0000_0000_0000u128;
        set_ymm(&mut m.cpu.state, 1, [one | two << 64, two | one << 64]);
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(
            get_ymm(&m.cpu.state, 0),
            [0x3f80_0000_4000_0000_4000_0000_3f80_0000, 0]
        );
    }
}
