//! Legacy SSE/SSE2 floating-point compares: CMPccPS/PD/SS/SD (the eight SSE predicates of
//! imm8[2:0]; bits 7:3 are ignored by legacy encodings) and COMISS/COMISD/UCOMISS/UCOMISD.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags::set_status;
use crate::fp::host;
use crate::fp::sse::{comi, compare};
use crate::fp::{Format, Mx, F32, F64};
use crate::ops::sse_common::{check_sse, get_xmm, read_xmm_m128, set_xmm, xmm_op};
use crate::ops::sse_fp::{commit_flags, lane, lanes, read_scalar, with_lane};
use crate::state::flags::STATUS;
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family (legacy encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Cmpps_xmm_xmmm128_imm8 => cmp_packed::<F32>,
        Code::Cmppd_xmm_xmmm128_imm8 => cmp_packed::<F64>,
        Code::Cmpss_xmm_xmmm32_imm8 => cmp_scalar::<F32>,
        Code::Cmpsd_xmm_xmmm64_imm8 => cmp_scalar::<F64>,
        Code::Comiss_xmm_xmmm32 => comis::<F32, true>,
        Code::Comisd_xmm_xmmm64 => comis::<F64, true>,
        Code::Ucomiss_xmm_xmmm32 => comis::<F32, false>,
        Code::Ucomisd_xmm_xmmm64 => comis::<F64, false>,
        _ => return None,
    })
}

/// One compare lane: all ones when the predicate holds, else zero.
#[inline]
fn cmp_lane<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (u64, u32) {
    let (t, f) = compare::<P>(a, b, pred, mx);
    (if t { u64::MAX } else { 0 }, f)
}

/// CMPPS/CMPPD on every lane.
pub fn cmp_lanes<P: Format>(a: u128, b: u128, pred: u8, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::compare_packed::<P>(a, b, pred & 7, mx) {
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

fn cmp_packed<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let (r, flags) = cmp_lanes::<P>(a, b, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

fn cmp_scalar<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_scalar::<P>(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let (v, flags) = cmp_lane::<P>(lane::<P>(a, 0), b, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, with_lane::<P>(a, 0, v));
    Ok(())
}

/// COMIS*/UCOMIS*: ZF/PF/CF from the compare, OF/SF/AF cleared; RFLAGS is not changed when an
/// unmasked exception faults.
fn comis<P: Format, const SIGNAL_QNAN: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_scalar::<P>(x, ins, 1)?;
    let a = lane::<P>(get_xmm(&x.cpu.state, xmm_op(ins, 0)), 0);
    let (rf, flags) = comi::<P>(a, b, SIGNAL_QNAN, Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_status(&mut x.cpu.state, STATUS, rf);
    Ok(())
}
