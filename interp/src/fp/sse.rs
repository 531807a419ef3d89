//! SSE arithmetic on one lane: ADD/SUB/MUL/DIV, MIN/MAX, SQRT, compare predicates and
//! COMIS/UCOMIS, each `(bits, bits, MXCSR) -> (bits, detected flags)`.

use super::host::{self, Op};
use super::{
    daz, denormal_flag, is_inf, is_nan, is_neg, is_qnan, is_snan, is_zero, jam, mxcsr,
    propagate_nan, round_pack, to_f, widen, Format, Mx,
};
use crate::state::flags::{CF, PF, ZF};
use rustc_apfloat::{Float, Round, Status, StatusAnd};

/// The four rounded binary operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

fn apply<T: Float>(op: Arith, a: T, b: T, round: Round) -> StatusAnd<T> {
    match op {
        Arith::Add => a.add_r(b, round),
        Arith::Sub => a.sub_r(b, round),
        Arith::Mul => a.mul_r(b, round),
        Arith::Div => a.div_r(b, round),
    }
}

/// `a op b` under MXCSR.
///
/// Order of checks (x86): a NaN source wins over everything (no DE); then invalid operations
/// (inf - inf, 0 * inf, 0/0, inf/inf: default NaN, IE, no DE); then DE for a denormal source
/// (DAZ off) together with ZE for finite / 0; then the rounded result with OE/UE/PE.
pub fn arith<P: Format>(op: Arith, a: u64, b: u64, mx: Mx) -> (u64, u32) {
    let hop = match op {
        Arith::Add => Op::Add,
        Arith::Sub => Op::Sub,
        Arith::Mul => Op::Mul,
        Arith::Div => Op::Div,
    };
    host::scalar::<P>(hop, a, b, mx).unwrap_or_else(|| arith_soft::<P>(op, a, b, mx))
}

/// [`arith`] in soft-float (the reference).
pub fn arith_soft<P: Format>(op: Arith, a: u64, b: u64, mx: Mx) -> (u64, u32) {
    if is_nan::<P>(a) || is_nan::<P>(b) {
        return propagate_nan::<P>(a, b);
    }
    let de = denormal_flag::<P>(&[a, b], mx);
    let (a, b) = (daz::<P>(a, mx), daz::<P>(b, mx));
    let invalid = match op {
        Arith::Add => is_inf::<P>(a) && is_inf::<P>(b) && (a ^ b) & P::SIGN != 0,
        Arith::Sub => is_inf::<P>(a) && is_inf::<P>(b) && (a ^ b) & P::SIGN == 0,
        Arith::Mul => (is_inf::<P>(a) && is_zero::<P>(b)) || (is_zero::<P>(a) && is_inf::<P>(b)),
        Arith::Div => (is_zero::<P>(a) && is_zero::<P>(b)) || (is_inf::<P>(a) && is_inf::<P>(b)),
    };
    if invalid {
        return (P::DEFAULT_NAN, mxcsr::IE);
    }
    let round = mx.round();
    let (fa, fb) = (to_f::<P>(a), to_f::<P>(b));
    if op == Arith::Div && is_zero::<P>(b) && !is_inf::<P>(a) {
        // Divide by zero has priority over the denormal operand: no DE.
        let r = (a ^ b) & P::SIGN | P::EXP_MASK;
        return (r, mxcsr::ZE);
    }
    if is_inf::<P>(a) || is_inf::<P>(b) {
        // Exact: an infinity, or zero for finite / inf.
        return (apply(op, fa, fb, round).value.to_bits() as u64, de);
    }
    let w = apply(op, widen::<P>(a), widen::<P>(b), Round::TowardZero);
    if w.value.is_zero() {
        // Zero results of finite operands are exact (the wide format has the range to hold any
        // nonzero one); their sign depends on the rounding mode, so take them from the
        // operation in the format itself.
        return (apply(op, fa, fb, round).value.to_bits() as u64, de);
    }
    let (r, f) = round_pack::<P>(jam(w.value, w.status.contains(Status::INEXACT)), mx);
    (r, f | de)
}

/// Order of two non-NaN values (after DAZ): `a < b`, with -0 == +0.
#[inline]
fn less<P: Format>(a: u64, b: u64) -> bool {
    if is_zero::<P>(a) && is_zero::<P>(b) {
        return false;
    }
    // Map sign-magnitude to a monotonic unsigned key.
    let key = |x: u64| {
        if is_neg::<P>(x) {
            !x & (P::SIGN | (P::SIGN - 1))
        } else {
            x | P::SIGN
        }
    };
    key(a) < key(b)
}

/// MINSS/MINPS/... (`max` false) and MAX*: a NaN in either source returns the second source
/// unchanged (even an SNaN) with IE; two zeros of any sign return the second source; DE for a
/// denormal source (DAZ off) when neither is a NaN. With DAZ a denormal source is replaced by
/// its zero first, and that zero is what may be returned (even next to a NaN).
pub fn minmax<P: Format>(a: u64, b: u64, max: bool, mx: Mx) -> (u64, u32) {
    let op = if max { Op::Max } else { Op::Min };
    host::scalar::<P>(op, a, b, mx).unwrap_or_else(|| minmax_soft::<P>(a, b, max, mx))
}

/// [`minmax`] in soft-float (the reference).
pub fn minmax_soft<P: Format>(a: u64, b: u64, max: bool, mx: Mx) -> (u64, u32) {
    let de = denormal_flag::<P>(&[a, b], mx);
    let (a, b) = (daz::<P>(a, mx), daz::<P>(b, mx));
    if is_nan::<P>(a) || is_nan::<P>(b) {
        return (b, mxcsr::IE);
    }
    let first = if max {
        less::<P>(b, a)
    } else {
        less::<P>(a, b)
    };
    (if first { a } else { b }, de)
}

/// Integer square root: (floor(sqrt(n)), remainder != 0).
fn isqrt(mut n: u128) -> (u128, bool) {
    if n == 0 {
        return (0, false);
    }
    let mut root = 0u128;
    let mut bit = 1u128 << ((127 - n.leading_zeros()) & !1);
    while bit != 0 {
        if n >= root + bit {
            n -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    (root, n != 0)
}

/// SQRTSS/SQRTPS/...: NaN propagates (IE for SNaN); a negative nonzero source (after DAZ) gives
/// the default NaN with IE and no DE; ±0 and +inf are returned; otherwise the correctly rounded
/// root with PE, and DE for a denormal source.
pub fn sqrt<P: Format>(a: u64, mx: Mx) -> (u64, u32) {
    host::scalar::<P>(Op::Sqrt, 0, a, mx).unwrap_or_else(|| sqrt_soft::<P>(a, mx))
}

/// [`sqrt`] in soft-float (the reference).
pub fn sqrt_soft<P: Format>(a: u64, mx: Mx) -> (u64, u32) {
    if is_nan::<P>(a) {
        return propagate_nan::<P>(a, a);
    }
    let x = daz::<P>(a, mx);
    if is_zero::<P>(x) {
        return (x, 0);
    }
    if is_neg::<P>(x) {
        return (P::DEFAULT_NAN, mxcsr::IE);
    }
    if is_inf::<P>(x) {
        return (x, 0);
    }
    let de = denormal_flag::<P>(&[a], mx);
    // x = m * 2^e with an integer m.
    let biased = ((x & P::EXP_MASK) >> P::FRAC) as i32;
    let (mut m, mut e) = if biased == 0 {
        ((x & P::FRAC_MASK) as u128, 1 - P::BIAS - P::FRAC as i32)
    } else {
        (
            ((x & P::FRAC_MASK) | (1 << P::FRAC)) as u128,
            biased - P::BIAS - P::FRAC as i32,
        )
    };
    if e & 1 != 0 {
        m <<= 1;
        e -= 1;
    }
    // Scale so that the root has at least PREC + 3 bits: round-to-odd then needs no more.
    let want = 2 * (P::PREC + 3);
    let bits = 128 - m.leading_zeros() as i32;
    let s = (want - bits + 1).max(0) & !1;
    let (root, inexact) = isqrt(m << s);
    let w: P::W = P::W::from_u128(root | inexact as u128)
        .value
        .scalbn((e - s) / 2);
    let (r, f) = round_pack::<P>(w, mx);
    (r, f | de)
}

/// The eight SSE compare predicates (CMPPS imm8 bits 2:0): EQ, LT, LE, UNORD, NEQ, NLT, NLE,
/// ORD. LT/LE/NLT/NLE signal IE on a QNaN too, the others only on an SNaN. DE for a denormal
/// source when neither is a NaN.
pub fn compare<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (bool, u32) {
    host::compare::<P>(a, b, pred & 7, mx).unwrap_or_else(|| compare_soft::<P>(a, b, pred, mx))
}

/// [`compare`] in soft-float (the reference).
pub fn compare_soft<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> (bool, u32) {
    let pred = pred & 7;
    let signalling = matches!(pred, 1 | 2 | 5 | 6);
    if is_nan::<P>(a) || is_nan::<P>(b) {
        let ie = is_snan::<P>(a)
            || is_snan::<P>(b)
            || (signalling && (is_qnan::<P>(a) || is_qnan::<P>(b)));
        return (matches!(pred, 3..=6), if ie { mxcsr::IE } else { 0 });
    }
    let de = denormal_flag::<P>(&[a, b], mx);
    let (a, b) = (daz::<P>(a, mx), daz::<P>(b, mx));
    let eq = a == b || (is_zero::<P>(a) && is_zero::<P>(b));
    let lt = less::<P>(a, b);
    let r = match pred {
        0 => eq,
        1 => lt,
        2 => lt || eq,
        3 => false,
        4 => !eq,
        5 => !lt,
        6 => !(lt || eq),
        _ => true,
    };
    (r, de)
}

/// COMISS/COMISD (`signal_qnan`) and UCOMISS/UCOMISD: RFLAGS ZF/PF/CF (unordered 111,
/// greater 000, less 001, equal 100; OF/SF/AF are cleared by the caller) and MXCSR flags:
/// IE for an SNaN, or for a QNaN with COMI; DE for a denormal source when neither is a NaN.
pub fn comi<P: Format>(a: u64, b: u64, signal_qnan: bool, mx: Mx) -> (u64, u32) {
    host::comi::<P>(a, b, signal_qnan, mx).unwrap_or_else(|| comi_soft::<P>(a, b, signal_qnan, mx))
}

/// [`comi`] in soft-float (the reference).
pub fn comi_soft<P: Format>(a: u64, b: u64, signal_qnan: bool, mx: Mx) -> (u64, u32) {
    if is_nan::<P>(a) || is_nan::<P>(b) {
        let ie = is_snan::<P>(a) || is_snan::<P>(b) || signal_qnan;
        return (ZF | PF | CF, if ie { mxcsr::IE } else { 0 });
    }
    let de = denormal_flag::<P>(&[a, b], mx);
    let (a, b) = (daz::<P>(a, mx), daz::<P>(b, mx));
    let f = if less::<P>(a, b) {
        CF
    } else if less::<P>(b, a) {
        0
    } else {
        ZF
    };
    (f, de)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::mxcsr::{DE, IE, OE, PE, UE, ZE};
    use crate::fp::{F32, F64};

    const M: Mx = Mx(0x1f80);

    fn add32(a: u64, b: u64, mx: Mx) -> (u64, u32) {
        arith::<F32>(Arith::Add, a, b, mx)
    }

    #[test]
    fn add_rounding_and_flags() {
        // 1 + 2^-24 is a tie: nearest-even gives 1, up gives 1 + 2^-23.
        assert_eq!(add32(0x3f80_0000, 0x3380_0000, M), (0x3f80_0000, PE));
        assert_eq!(
            add32(0x3f80_0000, 0x3380_0000, Mx(0x5f80)),
            (0x3f80_0001, PE)
        );
        // x - x is +0, or -0 when rounding down.
        let (r, f) = arith::<F32>(Arith::Sub, 0x4000_0000, 0x4000_0000, M);
        assert_eq!((r, f), (0, 0));
        let (r, _) = arith::<F32>(Arith::Sub, 0x4000_0000, 0x4000_0000, Mx(0x3f80));
        assert_eq!(r, 0x8000_0000);
        // Overflow per rounding mode.
        assert_eq!(
            arith::<F32>(Arith::Mul, 0x7f00_0000, 0x4000_0000, M),
            (0x7f80_0000, OE | PE)
        );
        assert_eq!(
            arith::<F32>(Arith::Mul, 0x7f00_0000, 0x4000_0000, Mx(0x7f80)),
            (0x7f7f_ffff, OE | PE)
        );
        // Tiny inexact product: UE|PE; FTZ flushes.
        let (r, f) = arith::<F64>(Arith::Mul, 0x0010_0000_0000_0001, 0x3fe0_0000_0000_0000, M);
        assert_eq!((r, f), (0x0008_0000_0000_0000, UE | PE));
        let (r, f) = arith::<F64>(
            Arith::Mul,
            0x0010_0000_0000_0001,
            0x3fe0_0000_0000_0000,
            Mx(0x9f80),
        );
        assert_eq!((r, f), (0, UE | PE));
    }

    #[test]
    fn specials() {
        assert_eq!(
            arith::<F32>(Arith::Add, 0x7f80_0000, 0xff80_0000, M),
            (0xffc0_0000, IE)
        );
        assert_eq!(
            arith::<F32>(Arith::Div, 0x3f80_0000, 0x8000_0000, M),
            (0xff80_0000, ZE)
        );
        assert_eq!(arith::<F32>(Arith::Div, 0, 0, M), (0xffc0_0000, IE));
        assert_eq!(
            arith::<F32>(Arith::Add, 0x7f80_0000, 1, M),
            (0x7f80_0000, DE)
        );
        assert_eq!(
            arith::<F32>(Arith::Add, 1, 0x7fa0_0000, M),
            (0x7fe0_0000, IE)
        );
        assert_eq!(
            arith::<F32>(Arith::Add, 0x7fc0_0001, 1, M),
            (0x7fc0_0001, 0)
        );
        assert_eq!(
            arith::<F32>(Arith::Add, 1, 1, Mx(0x1fc0)),
            (0, 0),
            "DAZ: no DE, zero sum"
        );
        assert_eq!(minmax::<F32>(0x7fc0_0001, 1, false, M), (1, IE));
        assert_eq!(minmax::<F32>(0, 0x8000_0000, true, M), (0x8000_0000, 0));
        assert_eq!(
            minmax::<F32>(0xbf80_0000, 0x3f80_0000, false, M).0,
            0xbf80_0000
        );
        assert_eq!(sqrt::<F32>(0x8000_0001, M), (0xffc0_0000, IE));
        assert_eq!(sqrt::<F32>(0x4080_0000, M), (0x4000_0000, 0));
        assert_eq!(
            sqrt::<F64>(0x4000_0000_0000_0000, M),
            (0x3ff6_a09e_667f_3bcd, PE)
        );
        assert_eq!(sqrt::<F32>(1, M).1, DE | PE);
        assert_eq!(compare::<F32>(0x7fc0_0000, 0, 1, M), (false, IE));
        assert_eq!(compare::<F32>(0x7fc0_0000, 0, 0, M), (false, 0));
        assert_eq!(compare::<F32>(0x7fc0_0000, 0, 4, M), (true, 0));
        assert_eq!(compare::<F32>(0, 0x8000_0000, 0, M), (true, 0));
        assert_eq!(comi::<F32>(0x7fc0_0000, 0, false, M), (ZF | PF | CF, 0));
        assert_eq!(comi::<F32>(0x7fc0_0000, 0, true, M), (ZF | PF | CF, IE));
        assert_eq!(comi::<F32>(0xbf80_0000, 0, true, M), (CF, 0));
        assert_eq!(comi::<F32>(1, 0, true, M), (0, DE));
    }

    #[test]
    fn isqrt_exact() {
        for n in [0u128, 1, 2, 3, 4, 15, 16, 17, u64::MAX as u128, u128::MAX] {
            let (r, inexact) = isqrt(n);
            assert!(r * r <= n && (r + 1).checked_mul(r + 1).is_none_or(|s| s > n));
            assert_eq!(inexact, r * r != n);
        }
    }
}
