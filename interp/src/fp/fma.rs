//! Fused multiply-add (FMA3) on one lane: `±(a*b) ± c` with a single rounding under MXCSR.

use super::host;
use super::{
    daz, denormal_flag, is_inf, is_nan, is_snan, is_zero, jam, mxcsr, round_pack, widen, Format, Mx,
};
use rustc_apfloat::{Float, FloatConvert, Round, Status};

/// `(neg_prod ? -(a*b) : a*b) + (neg_c ? -c : c)`, rounded once.
///
/// Rules (measured on the host): a NaN source wins first, in the order a, b, c (the operands
/// of the multiplication first), quietened and never negated, IE for any SNaN among the three;
/// then `inf * 0` (IE, default NaN), then `inf - inf` between the product and the addend (IE,
/// default NaN); then DE for a denormal source (DAZ off); then the rounded result with OE/UE/PE.
pub fn fma<P: Format>(a: u64, b: u64, c: u64, neg_prod: bool, neg_c: bool, mx: Mx) -> (u64, u32) {
    host::fma::<P>(a, b, c, neg_prod, neg_c, mx)
        .unwrap_or_else(|| fma_soft::<P>(a, b, c, neg_prod, neg_c, mx))
}

/// [`fma`] in soft-float (the reference).
pub fn fma_soft<P: Format>(
    a: u64,
    b: u64,
    c: u64,
    neg_prod: bool,
    neg_c: bool,
    mx: Mx,
) -> (u64, u32) {
    if is_nan::<P>(a) || is_nan::<P>(b) || is_nan::<P>(c) {
        let ie = if is_snan::<P>(a) || is_snan::<P>(b) || is_snan::<P>(c) {
            mxcsr::IE
        } else {
            0
        };
        let r = [a, b, c].into_iter().find(|&v| is_nan::<P>(v)).unwrap_or(a);
        return (r | P::QUIET, ie);
    }
    let de = denormal_flag::<P>(&[a, b, c], mx);
    let (a, b, c) = (daz::<P>(a, mx), daz::<P>(b, mx), daz::<P>(c, mx));
    if (is_inf::<P>(a) && is_zero::<P>(b)) || (is_zero::<P>(a) && is_inf::<P>(b)) {
        return (P::DEFAULT_NAN, mxcsr::IE);
    }
    let psign = ((a ^ b) & P::SIGN != 0) ^ neg_prod;
    let c = if neg_c { c ^ P::SIGN } else { c };
    let prod_inf = is_inf::<P>(a) || is_inf::<P>(b);
    if prod_inf && is_inf::<P>(c) && psign != (c & P::SIGN != 0) {
        return (P::DEFAULT_NAN, mxcsr::IE);
    }
    if prod_inf {
        return (if psign { P::SIGN } else { 0 } | P::EXP_MASK, de);
    }
    if is_inf::<P>(c) {
        return (c, de);
    }
    let round = mx.round();
    let mut p = widen::<P>(a).mul_r(widen::<P>(b), Round::TowardZero).value;
    if neg_prod {
        p = -p;
    }
    let wc = widen::<P>(c);
    let s = p.add_r(wc, Round::TowardZero);
    if s.value.is_zero() {
        // An exact zero: its sign depends on the rounding mode.
        let z: P::F = FloatConvert::<P::F>::convert(p.add_r(wc, round).value, &mut false).value;
        return (z.to_bits() as u64, de);
    }
    let (r, f) = round_pack::<P>(jam(s.value, s.status.contains(Status::INEXACT)), mx);
    (r, f | de)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::mxcsr::{IE, PE};
    use crate::fp::{F32, F64};

    const M: Mx = Mx(0x1f80);

    #[test]
    fn single_rounding() {
        // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly: a separate rounding of the product
        // would lose the 2^-24 term.
        let a = 0x3f80_0800;
        let (r, f) = fma::<F32>(a, a, 0x3f80_0000, false, true, M);
        assert_eq!((r, f), (0x3a00_0400, 0));
        // 0.1 * 10 - 1 in double: the exact residue of the rounded 0.1.
        let (r, f) = fma::<F64>(
            0x3fb9_9999_9999_999a,
            0x4024_0000_0000_0000,
            0x3ff0_0000_0000_0000,
            false,
            true,
            M,
        );
        assert_eq!((r, f), (0x3c90_0000_0000_0000, 0));
        assert_eq!(
            fma::<F32>(0x7f80_0000, 0, 0x7fc0_0000, false, false, M).1 & IE,
            0,
            "a QNaN addend wins over inf*0"
        );
        assert_eq!(
            fma::<F32>(0x7f80_0000, 0x3f80_0000, 0x7f80_0000, false, true, M),
            (0xffc0_0000, IE)
        );
        // Exact zero: -0 when rounding down.
        let one = 0x3f80_0000;
        assert_eq!(fma::<F32>(one, one, one, false, true, M), (0, 0));
        assert_eq!(
            fma::<F32>(one, one, one, false, true, Mx(0x3f80)),
            (0x8000_0000, 0)
        );
        assert_eq!(
            fma::<F32>(one, 0x3380_0000, one, false, false, M),
            (one, PE)
        );
    }
}
