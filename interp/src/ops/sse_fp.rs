//! Legacy SSE/SSE2/SSE3/SSE4.1 floating-point arithmetic: ADD/SUB/MUL/DIV/MIN/MAX/SQRT
//! {PS,PD,SS,SD}, RCPPS/RCPSS/RSQRTPS/RSQRTSS, ADDSUBPS/PD, HADDPS/PD, HSUBPS/PD,
//! ROUNDPS/PD/SS/SD and DPPS/DPPD; plus the MXCSR commit step every SIMD floating-point
//! handler ends with.
//!
//! The lane arithmetic is the pure soft-float layer in [`crate::fp`]; handlers only move
//! operands. Every m128 operand must be 16-byte aligned (#GP(0)); scalar m32/m64 operands need
//! no alignment.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::fp::host::{self, Op};
use crate::fp::sse::{arith, minmax, sqrt, Arith};
use crate::fp::{approx, cvt, mxcsr, Format, Mx, F32, F64};
use crate::ops::sse_common::{check_sse, get_xmm, read_xmm_m128, read_xmm_m32, read_xmm_m64};
use crate::ops::sse_common::{set_xmm, xmm_op};
use crate::state::ctl;
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// One lane of a two-source operation: (dst lane, src lane, MXCSR) -> (lane, flags).
pub type Lane = fn(u64, u64, Mx) -> (u64, u32);
/// A whole-register operation: (dst, src, imm8, MXCSR) -> (result, flags).
pub type Full = fn(u128, u128, u8, Mx) -> (u128, u32);

/// Handlers of this family (legacy encodings only; VEX forms are not claimed).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Addps_xmm_xmmm128 => addps,
        Code::Addpd_xmm_xmmm128 => addpd,
        Code::Addss_xmm_xmmm32 => addss,
        Code::Addsd_xmm_xmmm64 => addsd,
        Code::Subps_xmm_xmmm128 => subps,
        Code::Subpd_xmm_xmmm128 => subpd,
        Code::Subss_xmm_xmmm32 => subss,
        Code::Subsd_xmm_xmmm64 => subsd,
        Code::Mulps_xmm_xmmm128 => mulps,
        Code::Mulpd_xmm_xmmm128 => mulpd,
        Code::Mulss_xmm_xmmm32 => mulss,
        Code::Mulsd_xmm_xmmm64 => mulsd,
        Code::Divps_xmm_xmmm128 => divps,
        Code::Divpd_xmm_xmmm128 => divpd,
        Code::Divss_xmm_xmmm32 => divss,
        Code::Divsd_xmm_xmmm64 => divsd,
        Code::Minps_xmm_xmmm128 => minps,
        Code::Minpd_xmm_xmmm128 => minpd,
        Code::Minss_xmm_xmmm32 => minss,
        Code::Minsd_xmm_xmmm64 => minsd,
        Code::Maxps_xmm_xmmm128 => maxps,
        Code::Maxpd_xmm_xmmm128 => maxpd,
        Code::Maxss_xmm_xmmm32 => maxss,
        Code::Maxsd_xmm_xmmm64 => maxsd,
        Code::Sqrtps_xmm_xmmm128 => sqrtps,
        Code::Sqrtpd_xmm_xmmm128 => sqrtpd,
        Code::Sqrtss_xmm_xmmm32 => sqrtss,
        Code::Sqrtsd_xmm_xmmm64 => sqrtsd,
        Code::Rcpps_xmm_xmmm128 => rcpps,
        Code::Rcpss_xmm_xmmm32 => rcpss,
        Code::Rsqrtps_xmm_xmmm128 => rsqrtps,
        Code::Rsqrtss_xmm_xmmm32 => rsqrtss,
        Code::Addsubps_xmm_xmmm128 => addsubps,
        Code::Addsubpd_xmm_xmmm128 => addsubpd,
        Code::Haddps_xmm_xmmm128 => haddps,
        Code::Haddpd_xmm_xmmm128 => haddpd,
        Code::Hsubps_xmm_xmmm128 => hsubps,
        Code::Hsubpd_xmm_xmmm128 => hsubpd,
        Code::Roundps_xmm_xmmm128_imm8 => roundps,
        Code::Roundpd_xmm_xmmm128_imm8 => roundpd,
        Code::Roundss_xmm_xmmm32_imm8 => roundss,
        Code::Roundsd_xmm_xmmm64_imm8 => roundsd,
        Code::Dpps_xmm_xmmm128_imm8 => h_dpps,
        Code::Dppd_xmm_xmmm128_imm8 => h_dppd,
        _ => return None,
    })
}

// ----- the MXCSR commit step -----

/// A marker bit in a detected-flags word (outside the six flags): see [`commit_flags`].
pub const RESOLVED: u32 = 1 << 31;

/// Record the exception flags an instruction detected (the OR over its lanes) in MXCSR and
/// decide whether it may write its result.
///
/// All detected exceptions masked: the flags are ORed into MXCSR (sticky) and the result is
/// written. Otherwise nothing is written and #XM is raised (#UD when CR4.OSXMMEXCPT is clear):
/// if an unmasked exception is a pre-computation one (IE, DE, ZE), only the pre-computation
/// flags are set (the computation is not done); else all detected flags are set.
///
/// With [`RESOLVED`] in `flags` the operation already applied that rule itself (per stage,
/// the dot products) and every flag given is set.
pub fn commit_flags(x: &mut Ctx, flags: u32) -> Result<(), Fault> {
    let st = &mut x.cpu.state;
    let resolved = flags & RESOLVED != 0;
    let flags = flags & mxcsr::FLAGS;
    let masks = (st.mxcsr >> mxcsr::MASK_SHIFT) & mxcsr::FLAGS;
    let unmasked = flags & !masks;
    if unmasked == 0 {
        st.mxcsr |= flags;
        return Ok(());
    }
    st.mxcsr |= if unmasked & mxcsr::PRE != 0 && !resolved {
        flags & mxcsr::PRE
    } else {
        flags
    };
    if st.cr4 & ctl::CR4_OSXMMEXCPT != 0 {
        Err(Fault::SimdError)
    } else {
        Err(Fault::ud(
            "unmasked SIMD floating-point exception with CR4.OSXMMEXCPT clear",
        ))
    }
}

// ----- lane views -----

#[inline]
fn lane_mask<P: Format>() -> u64 {
    u64::MAX >> (64 - P::WIDTH)
}

/// Lane `i` of `v`.
#[inline]
pub fn lane<P: Format>(v: u128, i: usize) -> u64 {
    (v >> (i as u32 * P::WIDTH)) as u64 & lane_mask::<P>()
}

/// `v` with lane `i` replaced by `x`.
#[inline]
pub fn with_lane<P: Format>(v: u128, i: usize, x: u64) -> u128 {
    let sh = i as u32 * P::WIDTH;
    let m = (lane_mask::<P>() as u128) << sh;
    (v & !m) | ((x & lane_mask::<P>()) as u128) << sh
}

/// Number of lanes of `P` in 128 bits.
#[inline]
pub fn lanes<P: Format>() -> usize {
    (128 / P::WIDTH) as usize
}

/// Apply `f` to every lane pair; flags ORed.
pub fn map_lanes<P: Format>(a: u128, b: u128, mx: Mx, f: Lane) -> (u128, u32) {
    let mut r = 0u128;
    let mut flags = 0;
    for i in 0..lanes::<P>() {
        let (v, fl) = f(lane::<P>(a, i), lane::<P>(b, i), mx);
        r = with_lane::<P>(r, i, v);
        flags |= fl;
    }
    (r, flags)
}

/// [`map_lanes`] of the lane function `f`, or the host's packed `op` when it applies.
#[inline]
pub fn packed_lanes<P: Format>(a: u128, b: u128, mx: Mx, f: Lane, op: Option<Op>) -> (u128, u32) {
    op.and_then(|op| host::packed::<P>(op, a, b, mx))
        .unwrap_or_else(|| map_lanes::<P>(a, b, mx, f))
}

// ----- handler shapes -----

/// The scalar source operand 1: an XMM register's low lane or an m32/m64.
#[inline]
pub fn read_scalar<P: Format>(x: &mut Ctx, ins: &Instruction, n: u32) -> Result<u64, Fault> {
    if P::WIDTH == 32 {
        Ok(read_xmm_m32(x, ins, n)? as u64)
    } else {
        read_xmm_m64(x, ins, n)
    }
}

/// `op xmm, xmm/m128` lane by lane (`op`: the whole register in one host instruction when
/// the host fast path applies).
pub fn packed<P: Format>(
    x: &mut Ctx,
    ins: &Instruction,
    f: Lane,
    op: Option<Op>,
) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let (r, flags) = packed_lanes::<P>(a, b, Mx(x.cpu.state.mxcsr), f, op);
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

/// `op xmm, xmm/m32|m64` on the low lane; the other lanes of the destination are kept.
pub fn scalar<P: Format>(x: &mut Ctx, ins: &Instruction, f: Lane) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_scalar::<P>(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let (v, flags) = f(lane::<P>(a, 0), b, Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, with_lane::<P>(a, 0, v));
    Ok(())
}

/// `op xmm, xmm/m128[, imm8]` computed on the whole register.
pub fn full(x: &mut Ctx, ins: &Instruction, f: Full) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let imm = if ins.op_count() > 2 {
        ins.immediate8()
    } else {
        0
    };
    let (r, flags) = f(a, b, imm, Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

// ----- lane functions -----

fn add<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    arith::<P>(Arith::Add, a, b, mx)
}
fn sub<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    arith::<P>(Arith::Sub, a, b, mx)
}
fn mul<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    arith::<P>(Arith::Mul, a, b, mx)
}
fn div<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    arith::<P>(Arith::Div, a, b, mx)
}
fn min<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    minmax::<P>(a, b, false, mx)
}
fn max<P: Format>(a: u64, b: u64, mx: Mx) -> (u64, u32) {
    minmax::<P>(a, b, true, mx)
}
fn sqrt_src<P: Format>(_: u64, b: u64, mx: Mx) -> (u64, u32) {
    sqrt::<P>(b, mx)
}
fn rcp_src(_: u64, b: u64, _: Mx) -> (u64, u32) {
    (approx::rcp(b as u32) as u64, 0)
}
fn rsqrt_src(_: u64, b: u64, _: Mx) -> (u64, u32) {
    (approx::rsqrt(b as u32) as u64, 0)
}

macro_rules! handlers {
    ($($name:ident = $shape:ident::<$p:ident>($($f:expr),*);)*) => {
        $(
            fn $name(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                $shape::<$p>(x, ins, $($f),*)
            }
        )*
    };
}

handlers! {
    addps = packed::<F32>(add::<F32>, Some(Op::Add));
    addpd = packed::<F64>(add::<F64>, Some(Op::Add));
    addss = scalar::<F32>(add::<F32>);
    addsd = scalar::<F64>(add::<F64>);
    subps = packed::<F32>(sub::<F32>, Some(Op::Sub));
    subpd = packed::<F64>(sub::<F64>, Some(Op::Sub));
    subss = scalar::<F32>(sub::<F32>);
    subsd = scalar::<F64>(sub::<F64>);
    mulps = packed::<F32>(mul::<F32>, Some(Op::Mul));
    mulpd = packed::<F64>(mul::<F64>, Some(Op::Mul));
    mulss = scalar::<F32>(mul::<F32>);
    mulsd = scalar::<F64>(mul::<F64>);
    divps = packed::<F32>(div::<F32>, Some(Op::Div));
    divpd = packed::<F64>(div::<F64>, Some(Op::Div));
    divss = scalar::<F32>(div::<F32>);
    divsd = scalar::<F64>(div::<F64>);
    minps = packed::<F32>(min::<F32>, Some(Op::Min));
    minpd = packed::<F64>(min::<F64>, Some(Op::Min));
    minss = scalar::<F32>(min::<F32>);
    minsd = scalar::<F64>(min::<F64>);
    maxps = packed::<F32>(max::<F32>, Some(Op::Max));
    maxpd = packed::<F64>(max::<F64>, Some(Op::Max));
    maxss = scalar::<F32>(max::<F32>);
    maxsd = scalar::<F64>(max::<F64>);
    sqrtps = packed::<F32>(sqrt_src::<F32>, Some(Op::Sqrt));
    sqrtpd = packed::<F64>(sqrt_src::<F64>, Some(Op::Sqrt));
    sqrtss = scalar::<F32>(sqrt_src::<F32>);
    sqrtsd = scalar::<F64>(sqrt_src::<F64>);
    rcpps = packed::<F32>(rcp_src, None);
    rcpss = scalar::<F32>(rcp_src);
    rsqrtps = packed::<F32>(rsqrt_src, None);
    rsqrtss = scalar::<F32>(rsqrt_src);
}

// ----- SSE3 horizontal and alternating forms -----

/// ADDSUBPS/ADDSUBPD: even lanes `a - b`, odd lanes `a + b`.
pub fn addsub<P: Format>(a: u128, b: u128, _: u8, mx: Mx) -> (u128, u32) {
    let mut r = 0;
    let mut flags = 0;
    for i in 0..lanes::<P>() {
        let f = if i % 2 == 0 { sub::<P> } else { add::<P> };
        let (v, fl) = f(lane::<P>(a, i), lane::<P>(b, i), mx);
        r = with_lane::<P>(r, i, v);
        flags |= fl;
    }
    (r, flags)
}

/// HADD/HSUB: the low half of the result from adjacent pairs of `a`, the high half from
/// adjacent pairs of `b` (`x[2i] op x[2i+1]`).
fn horizontal<P: Format>(a: u128, b: u128, mx: Mx, f: Lane) -> (u128, u32) {
    let n = lanes::<P>();
    let mut r = 0;
    let mut flags = 0;
    for i in 0..n {
        let src = if i < n / 2 { a } else { b };
        let j = 2 * (i % (n / 2));
        let (v, fl) = f(lane::<P>(src, j), lane::<P>(src, j + 1), mx);
        r = with_lane::<P>(r, i, v);
        flags |= fl;
    }
    (r, flags)
}

pub fn hadd<P: Format>(a: u128, b: u128, _: u8, mx: Mx) -> (u128, u32) {
    horizontal::<P>(a, b, mx, add::<P>)
}

pub fn hsub<P: Format>(a: u128, b: u128, _: u8, mx: Mx) -> (u128, u32) {
    horizontal::<P>(a, b, mx, sub::<P>)
}

// ----- SSE4.1 -----

/// ROUNDPS/ROUNDPD: every lane of the source rounded to an integral value (see
/// [`cvt::round_to_integral`] for the immediate).
pub fn round_packed<P: Format>(_: u128, b: u128, imm: u8, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::round_packed::<P>(b, imm, mx) {
        return r;
    }
    let mut r = 0;
    let mut flags = 0;
    for i in 0..lanes::<P>() {
        let (v, fl) = cvt::round_to_integral::<P>(lane::<P>(b, i), imm, mx);
        r = with_lane::<P>(r, i, v);
        flags |= fl;
    }
    (r, flags)
}

/// ROUNDSS/ROUNDSD xmm, xmm/m32|m64, imm8: the low lane; the rest of the destination kept.
fn round_scalar<P: Format>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_scalar::<P>(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let a = get_xmm(&x.cpu.state, d);
    let (v, flags) = cvt::round_to_integral::<P>(b, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    commit_flags(x, flags)?;
    set_xmm(&mut x.cpu.state, d, with_lane::<P>(a, 0, v));
    Ok(())
}

/// The dot products run in stages (the multiplies, then each level of additions). On this
/// host the stage that raises an unmasked exception ends the instruction: the flags of the
/// earlier stages are all recorded, that stage's by the usual rule (only its pre-computation
/// flags if one of those is unmasked), later stages add nothing. `Some(flags)` (marked
/// [`RESOLVED`]) when `stage` stops the instruction, else `None` with `done` updated.
fn dp_stage(done: &mut u32, stage: u32, mx: Mx) -> Option<u32> {
    let unmasked = stage & !(mx.0 >> mxcsr::MASK_SHIFT) & mxcsr::FLAGS;
    if unmasked == 0 {
        *done |= stage;
        return None;
    }
    let own = if unmasked & mxcsr::PRE != 0 {
        stage & mxcsr::PRE
    } else {
        stage
    };
    Some(RESOLVED | *done | own)
}

/// DPPS: products of the lanes selected by imm[7:4] (others +0.0), summed pairwise and then
/// across pairs, each step rounded under MXCSR; the sum goes to the lanes selected by
/// imm[3:0], +0.0 to the others.
///
/// Only the NaN a lane receives depends on the order of the additions, and on the reference
/// host it differs per destination lane: lane i gets `pair(i) + pair(i ^ 2)` with
/// `pair(j) = p[j ^ 1] + p[j]` (x86 NaN rule: first operand first). Measured natively.
pub fn dpps(a: u128, b: u128, imm: u8, mx: Mx) -> (u128, u32) {
    let (r, f) = dpps_lanes([a], [b], imm, mx);
    (r[0], f)
}

/// VDPPS ymm: each 128-bit half as DPPS, the two halves going through the stages together
/// (an unmasked exception in either half's stage ends both; host-measured).
pub fn dpps256(a: [u128; 2], b: [u128; 2], imm: u8, mx: Mx) -> ([u128; 2], u32) {
    dpps_lanes(a, b, imm, mx)
}

fn dpps_lanes<const N: usize>(a: [u128; N], b: [u128; N], imm: u8, mx: Mx) -> ([u128; N], u32) {
    let mut flags = 0;
    let mut stage = 0;
    let mut p = [[0u64; 4]; N];
    for h in 0..N {
        for (i, pi) in p[h].iter_mut().enumerate() {
            if imm & (0x10 << i) != 0 {
                let (v, f) = mul::<F32>(lane::<F32>(a[h], i), lane::<F32>(b[h], i), mx);
                *pi = v;
                stage |= f;
            }
        }
    }
    if let Some(f) = dp_stage(&mut flags, stage, mx) {
        return ([0; N], f);
    }
    stage = 0;
    let pair: [[u64; 4]; N] = core::array::from_fn(|h| {
        core::array::from_fn(|j| {
            let (v, f) = add::<F32>(p[h][j ^ 1], p[h][j], mx);
            stage |= f;
            v
        })
    });
    if let Some(f) = dp_stage(&mut flags, stage, mx) {
        return ([0; N], f);
    }
    stage = 0;
    let mut r = [0u128; N];
    for h in 0..N {
        for i in 0..4 {
            let (s, f) = add::<F32>(pair[h][i], pair[h][i ^ 2], mx);
            stage |= f;
            if imm & (1 << i) != 0 {
                r[h] = with_lane::<F32>(r[h], i, s);
            }
        }
    }
    if let Some(f) = dp_stage(&mut flags, stage, mx) {
        return ([0; N], f);
    }
    (r, flags)
}

/// DPPD: as DPPS with two lanes (products imm[5:4], destination lanes imm[1:0]); lane i gets
/// `p[i] + p[i ^ 1]` (the NaN order measured on the host).
pub fn dppd(a: u128, b: u128, imm: u8, mx: Mx) -> (u128, u32) {
    let mut flags = 0;
    let mut stage = 0;
    let mut p = [0u64; 2];
    for (i, pi) in p.iter_mut().enumerate() {
        if imm & (0x10 << i) != 0 {
            let (v, f) = mul::<F64>(lane::<F64>(a, i), lane::<F64>(b, i), mx);
            *pi = v;
            stage |= f;
        }
    }
    if let Some(f) = dp_stage(&mut flags, stage, mx) {
        return (0, f);
    }
    stage = 0;
    let mut r = 0;
    for i in 0..2 {
        let (s, f) = add::<F64>(p[i], p[i ^ 1], mx);
        stage |= f;
        if imm & (1 << i) != 0 {
            r = with_lane::<F64>(r, i, s);
        }
    }
    if let Some(f) = dp_stage(&mut flags, stage, mx) {
        return (0, f);
    }
    (r, flags)
}

macro_rules! full_handlers {
    ($($name:ident = $f:expr;)*) => {
        $(
            fn $name(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                full(x, ins, $f)
            }
        )*
    };
}

full_handlers! {
    addsubps = addsub::<F32>;
    addsubpd = addsub::<F64>;
    haddps = hadd::<F32>;
    haddpd = hadd::<F64>;
    hsubps = hsub::<F32>;
    hsubpd = hsub::<F64>;
    roundps = round_packed::<F32>;
    roundpd = round_packed::<F64>;
    h_dpps = dpps;
    h_dppd = dppd;
}

fn roundss(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    round_scalar::<F32>(x, ins)
}

fn roundsd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    round_scalar::<F64>(x, ins)
}
