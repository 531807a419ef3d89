//! Legacy SSE/SSE2 conversions: CVTSI2SS/SD (32/64-bit source), CVT(T)SS2SI/CVT(T)SD2SI (32/64
//! destination), CVTSS2SD/CVTSD2SS, CVTPS2PD/CVTPD2PS, CVTDQ2PS/CVT(T)PS2DQ, CVTDQ2PD/
//! CVT(T)PD2DQ, and the MMX forms CVTPI2PS/CVTPI2PD, CVT(T)PS2PI/CVT(T)PD2PI.
//!
//! m128 sources must be aligned; the m64 sources of CVTPS2PD/CVTDQ2PD/CVTPI2P*/CVT(T)PS2PI and
//! scalar sources need not be. Results narrower than 128 bits (CVTPD2PS, CVT(T)PD2DQ) zero bits
//! 127:64.
//!
//! MMX forms (this host, measured with native programs; see `mmx_forms_*` tests): an MMX
//! register operand (any mm destination, or an mm source) makes the instruction check for a
//! pending x87 exception first (#MF, before a memory fault or a misaligned-m128 #GP) and enter
//! the MMX state (TOP = 0, all tags valid) once its source has been read, also when it then
//! raises #XM; a fault reading memory leaves the x87 state alone. CVTPI2PS/CVTPI2PD with a
//! memory source are plain SSE instructions: no #MF, no MMX transition.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::fp::cvt::{f32_to_f64, f64_to_f32, float_to_int, int_to_float};
use crate::fp::host::{self, Cvt};
use crate::fp::{Format, Mx, F32, F64};
use crate::ops::mmx::{check_x87_pending, get_mm, mm_op, mmx_enter, read_mm_rm, set_mm};
use crate::ops::sse_common::{check_sse, get_xmm, read_xmm_m128, read_xmm_m64, set_xmm, xmm_op};
use crate::ops::sse_fp::{commit_flags, lane, read_scalar, with_lane};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};
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
        Code::Cvtpi2ps_xmm_mmm64 => cvtpi2ps,
        Code::Cvtpi2pd_xmm_mmm64 => cvtpi2pd,
        Code::Cvtps2pi_mm_xmmm64 => cvtps2pi::<false>,
        Code::Cvttps2pi_mm_xmmm64 => cvtps2pi::<true>,
        Code::Cvtpd2pi_mm_xmmm128 => cvtpd2pi::<false>,
        Code::Cvttpd2pi_mm_xmmm128 => cvtpd2pi::<true>,
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
    if let Some(r) = host::cvt_packed(Cvt::Ps2pd, src as u128, mx) {
        return r;
    }
    let (lo, f0) = f32_to_f64(src as u32, mx);
    let (hi, f1) = f32_to_f64((src >> 32) as u32, mx);
    ((hi as u128) << 64 | lo as u128, f0 | f1)
}

/// CVTPD2PS: two doubles to singles in bits 63:0, bits 127:64 zero.
pub fn pd2ps(src: u128, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::cvt_packed(Cvt::Pd2ps, src, mx) {
        return r;
    }
    let (lo, f0) = f64_to_f32(src as u64, mx);
    let (hi, f1) = f64_to_f32((src >> 64) as u64, mx);
    ((hi as u128) << 32 | lo as u128, f0 | f1)
}

/// CVTDQ2PS: four signed dwords to singles.
pub fn dq2ps(src: u128, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::cvt_packed(Cvt::Dq2ps, src, mx) {
        return r;
    }
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
    if let Some(r) = host::cvt_packed(if truncate { Cvt::Tps2dq } else { Cvt::Ps2dq }, src, mx) {
        return r;
    }
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
    if let Some(r) = host::cvt_packed(Cvt::Dq2pd, src as u128, mx) {
        return r;
    }
    let (lo, _) = int_to_float::<F64>(src as u32 as i32 as i64, mx);
    let (hi, _) = int_to_float::<F64>((src >> 32) as u32 as i32 as i64, mx);
    ((hi as u128) << 64 | lo as u128, 0)
}

/// CVTPD2DQ/CVTTPD2DQ: two doubles to signed dwords in bits 63:0, bits 127:64 zero.
pub fn pd2dq(src: u128, truncate: bool, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::cvt_packed(if truncate { Cvt::Tpd2dq } else { Cvt::Pd2dq }, src, mx) {
        return r;
    }
    let round = int_round(truncate, mx);
    let (lo, f0) = float_to_int::<F64>(src as u64, 32, round, mx);
    let (hi, f1) = float_to_int::<F64>((src >> 64) as u64, 32, round, mx);
    ((hi as u32 as u128) << 32 | lo as u32 as u128, f0 | f1)
}

/// CVTPI2PS: two signed dwords to singles (bits 63:0 of the result).
pub fn pi2ps(src: u64, mx: Mx) -> (u64, u32) {
    let (r, flags) = dq2ps(src as u128, mx);
    (r as u64, flags)
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

// ----- MMX forms -----

/// CVTPI2PS/CVTPI2PD source: an MMX register (x87-pending check) or m64 (plain SSE). Returns
/// the value and whether it came from an MMX register.
fn read_pi_source(x: &mut Ctx, ins: &Instruction) -> Result<(u64, bool), Trap> {
    check_sse(x, ins)?;
    if ins.op1_kind() == OpKind::Memory {
        return Ok((read_mm_rm(x, ins, 1)?, false));
    }
    check_x87_pending(&x.cpu.state)?;
    Ok((get_mm(&x.cpu.state, mm_op(ins, 1)), true))
}

/// CVTPI2PS xmm, mm/m64: bits 63:0 of the destination; bits 127:64 kept.
fn cvtpi2ps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let (a, from_mm) = read_pi_source(x, ins)?;
    let (r, flags) = pi2ps(a, Mx(x.cpu.state.mxcsr));
    if from_mm {
        mmx_enter(&mut x.cpu.state);
    }
    let d = get_xmm(&x.cpu.state, xmm_op(ins, 0));
    finish(x, ins, (d >> 64) << 64 | r as u128, flags)
}

/// CVTPI2PD xmm, mm/m64: exact, the whole low 128 bits.
fn cvtpi2pd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let (a, from_mm) = read_pi_source(x, ins)?;
    let (r, flags) = dq2pd(a, Mx(x.cpu.state.mxcsr));
    if from_mm {
        mmx_enter(&mut x.cpu.state);
    }
    finish(x, ins, r, flags)
}

/// The end of CVT(T)PS2PI/CVT(T)PD2PI: the MMX state is entered, then the flags are committed
/// (#XM leaves the destination alone but the transition done), then MMi is written.
fn finish_mm(x: &mut Ctx, ins: &Instruction, v: u64, flags: u32) -> Result<(), Trap> {
    mmx_enter(&mut x.cpu.state);
    commit_flags(x, flags)?;
    set_mm(&mut x.cpu.state, mm_op(ins, 0), v);
    Ok(())
}

/// CVT(T)PS2PI mm, xmm/m64: the two low singles to signed dwords (indefinite 0x80000000).
fn cvtps2pi<const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    check_x87_pending(&x.cpu.state)?;
    let a = read_xmm_m64(x, ins, 1)?;
    let (r, flags) = ps2dq(a as u128, TRUNCATE, Mx(x.cpu.state.mxcsr));
    finish_mm(x, ins, r as u64, flags)
}

/// CVT(T)PD2PI mm, xmm/m128 (aligned): two doubles to signed dwords.
fn cvtpd2pi<const TRUNCATE: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    check_x87_pending(&x.cpu.state)?;
    let a = read_xmm_m128(x, ins, 1, true)?;
    let (r, flags) = pd2dq(a, TRUNCATE, Mx(x.cpu.state.mxcsr));
    finish_mm(x, ins, r as u64, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::fp::round_mode;
    use crate::ops::mmx::get_mm;
    use crate::ops::sse_common::get_xmm;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::{
        mm0, mm1, mm2, qword_ptr, xmm0, xmm1, xmm2, xmm3, xmm4, xmmword_ptr, CodeAssembler,
    };
    use iced_x86::IcedError;

    /// FSW with TOP = 5, tags of R5..R7 valid: the x87 state before an MMX form.
    const FSW_TOP5: u16 = 5 << 11;

    fn machine(mxcsr: u32, fsw: u16) -> TestMachine {
        let mut m = TestMachine::new();
        m.cpu.state.mxcsr = mxcsr;
        m.cpu.state.x87.fsw = fsw;
        m.cpu.state.x87.ftw = 0xe0;
        // MM1 = [3, 0x7fffffff]; XMM1 = [1.5, QNaN, 2.0, 3.0]; XMM2 = [1.5, 1e300].
        set_mm(&mut m.cpu.state, 1, 0x7fff_ffff_0000_0003);
        m.cpu.state.x87.regs[1][8..10].copy_from_slice(&[0xff, 0xff]);
        set_xmm(
            &mut m.cpu.state,
            1,
            0x4040_0000_4000_0000_7fc0_0000_3fc0_0000,
        );
        set_xmm(
            &mut m.cpu.state,
            2,
            (1e300f64.to_bits() as u128) << 64 | 1.5f64.to_bits() as u128,
        );
        set_xmm(&mut m.cpu.state, 0, u128::MAX);
        m.load(DATA_BASE, &0x7fff_ffff_0000_0003u64.to_le_bytes());
        m.load(DATA_BASE + 16, &1.5f64.to_bits().to_le_bytes());
        m.load(DATA_BASE + 24, &1e300f64.to_bits().to_le_bytes());
        m
    }

    fn run(
        m: &mut TestMachine,
        f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
    ) -> ExitReason {
        let code = TestMachine::assemble(f);
        m.run_code(&code, 1).reason
    }

    #[test]
    fn mmx_forms_convert() {
        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(run(&mut m, |a| a.cvtpi2ps(xmm0, mm1)), ExitReason::Budget);
        // 3.0 and 2^31 (rounded: PE); bits 127:64 kept; the MMX state entered.
        assert_eq!(
            get_xmm(&m.cpu.state, 0),
            u128::MAX << 64 | 0x4f00_0000_4040_0000
        );
        assert_eq!(m.cpu.state.mxcsr, 0x1fa0);
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (0, 0xff));

        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(
            run(&mut m, |a| a.cvtpi2pd(xmm0, qword_ptr(DATA_BASE))),
            ExitReason::Budget
        );
        assert_eq!(
            get_xmm(&m.cpu.state, 0),
            (2147483647f64.to_bits() as u128) << 64 | 3f64.to_bits() as u128
        );
        // A memory source: no MMX transition, no flags.
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (FSW_TOP5, 0xe0));
        assert_eq!(m.cpu.state.mxcsr, 0x1f80);

        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(run(&mut m, |a| a.cvtps2pi(mm0, xmm1)), ExitReason::Budget);
        assert_eq!(get_mm(&m.cpu.state, 0), 0x8000_0000_0000_0002);
        assert_eq!(m.cpu.state.x87.regs[0][8..10], [0xff, 0xff]);
        assert_eq!(m.cpu.state.mxcsr, 0x1fa1);
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (0, 0xff));

        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(run(&mut m, |a| a.cvttps2pi(mm0, xmm1)), ExitReason::Budget);
        assert_eq!(get_mm(&m.cpu.state, 0), 0x8000_0000_0000_0001);

        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(
            run(&mut m, |a| a.cvtpd2pi(mm0, xmmword_ptr(DATA_BASE + 16))),
            ExitReason::Budget
        );
        assert_eq!(get_mm(&m.cpu.state, 0), 0x8000_0000_0000_0002);
        assert_eq!(m.cpu.state.mxcsr, 0x1fa1);
        let mut m = machine(0x1f80, FSW_TOP5);
        assert_eq!(run(&mut m, |a| a.cvttpd2pi(mm0, xmm2)), ExitReason::Budget);
        assert_eq!(get_mm(&m.cpu.state, 0), 0x8000_0000_0000_0001);
    }

    /// Fault order and x87 side effects, as measured on the host with native programs.
    #[test]
    fn mmx_forms_faults_and_transition() {
        let pending = FSW_TOP5 | 0x8084; // B, ES, ZE
                                         // #MF before the memory fault (misaligned m128) for an mm destination.
        let mut m = machine(0x1f80, pending);
        let r = run(&mut m, |a| a.cvtpd2pi(mm0, xmmword_ptr(DATA_BASE + 1)));
        assert_eq!(r, ExitReason::Exception(Fault::X87Error));
        // An mm source: #MF; a memory source: no x87 check at all.
        let mut m = machine(0x1f80, pending);
        let r = run(&mut m, |a| a.cvtpi2ps(xmm0, mm1));
        assert_eq!(r, ExitReason::Exception(Fault::X87Error));
        let mut m = machine(0x1f80, pending);
        let r = run(&mut m, |a| a.cvtpi2ps(xmm0, qword_ptr(DATA_BASE)));
        assert_eq!(r, ExitReason::Budget);
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (pending, 0xe0));
        // A misaligned m128 (#GP) leaves the x87 state alone.
        let mut m = machine(0x1f80, FSW_TOP5);
        let r = run(&mut m, |a| a.cvtpd2pi(mm0, xmmword_ptr(DATA_BASE + 8)));
        assert_eq!(r, ExitReason::Exception(Fault::GP0));
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (FSW_TOP5, 0xe0));
        // #XM (IE unmasked, NaN source): MMX state entered, MM0 not written.
        let mut m = machine(0x1f00, FSW_TOP5);
        let r = run(&mut m, |a| a.cvtps2pi(mm0, xmm1));
        assert_eq!(r, ExitReason::Exception(Fault::SimdError));
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (0, 0xff));
        assert_eq!(m.cpu.state.mxcsr, 0x1f01);
        assert_ne!(get_mm(&m.cpu.state, 0), 0x8000_0000_0000_0002);
        // #XM (PE unmasked) from an mm source: transition done, XMM0 unchanged.
        let mut m = machine(0x0f80, FSW_TOP5);
        let r = run(&mut m, |a| a.cvtpi2ps(xmm0, mm1));
        assert_eq!(r, ExitReason::Exception(Fault::SimdError));
        assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (0, 0xff));
        assert_eq!(
            (m.cpu.state.mxcsr, get_xmm(&m.cpu.state, 0)),
            (0x0fa0, u128::MAX)
        );
    }

    /// The masked conversions against this CPU (SSE2 is baseline on x86-64).
    #[test]
    fn mmx_forms_match_the_host() {
        let inputs: [u64; 6] = [
            0x7fff_ffff_8000_0000,
            0x4f00_0000_cf00_0001,
            0x3f00_0000_bfc0_0000,
            0x7f80_0000_ff80_0001,
            0x0000_0001_4eff_ffff,
            0x4040_0000_c040_0000,
        ];
        for mx in [0x1f80u32, 0x3f80, 0x5f80, 0x7f80, 0x1fc0] {
            for &v in &inputs {
                let native = native_cvt(v, mx);
                let mut m = machine(mx, FSW_TOP5);
                set_xmm(&mut m.cpu.state, 1, v as u128);
                set_mm(&mut m.cpu.state, 1, v);
                let code = TestMachine::assemble(|a| {
                    a.cvtps2pi(mm0, xmm1)?;
                    a.cvttps2pi(mm2, xmm1)?;
                    a.cvtpi2ps(xmm3, mm1)?;
                    a.cvtpi2pd(xmm4, mm1)
                });
                assert_eq!(m.run_code(&code, 4).reason, ExitReason::Budget);
                let st = &m.cpu.state;
                let got = (
                    get_mm(st, 0),
                    get_mm(st, 2),
                    get_xmm(st, 3) as u64,
                    get_xmm(st, 4),
                    st.mxcsr,
                );
                assert_eq!(got, native, "input {v:#x} mxcsr {mx:#x}");
            }
        }
    }

    /// Run the four MMX conversions natively on `v` under `mxcsr` (all exceptions masked).
    fn native_cvt(v: u64, mxcsr: u32) -> (u64, u64, u64, u128, u32) {
        let (mut a, mut b, mut c): (u64, u64, u64) = (0, 0, 0);
        let mut d = [0u64; 2];
        let mut mx_in = mxcsr;
        let mut saved = 0u32;
        // SAFETY: only MMX/XMM registers named as clobbers and the locals passed by pointer are
        // touched; MXCSR is saved before and restored after; EMMS leaves the x87 state usable.
        unsafe {
            core::arch::asm!(
                "stmxcsr [{saved}]",
                "ldmxcsr [{mx}]",
                "movq mm1, {v}",
                "movq xmm1, {v}",
                "cvtps2pi mm0, xmm1",
                "cvttps2pi mm2, xmm1",
                "cvtpi2ps xmm3, mm1",
                "cvtpi2pd xmm4, mm1",
                "movq {a}, mm0",
                "movq {b}, mm2",
                "movq {c}, xmm3",
                "movdqu [{d}], xmm4",
                "stmxcsr [{mx}]",
                "ldmxcsr [{saved}]",
                "emms",
                v = in(reg) v,
                a = out(reg) a,
                b = out(reg) b,
                c = out(reg) c,
                d = in(reg) d.as_mut_ptr(),
                mx = in(reg) &mut mx_in,
                saved = in(reg) &mut saved,
                out("xmm1") _, out("xmm3") _, out("xmm4") _,
                out("mm0") _, out("mm1") _, out("mm2") _,
            );
        }
        (a, b, c, (d[1] as u128) << 64 | d[0] as u128, mx_in)
    }

    #[test]
    fn rounding_field_decodes() {
        assert_eq!(round_mode(1), Round::TowardNegative);
        assert_eq!(int_round(true, Mx(0x1f80)), Round::TowardZero);
        assert_eq!(int_round(false, Mx(0x3f80)), Round::TowardNegative);
    }
}
