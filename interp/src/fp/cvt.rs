//! Conversions between single, double and integers, and rounding to an integral value
//! (ROUNDSS/ROUNDPS...), under the MXCSR rules.

use super::host;
use super::{
    daz, denormal_flag, is_inf, is_nan, is_neg, is_snan, is_zero, mxcsr, round_pack, to_f, Format,
    Mx, F32, F64,
};
use rustc_apfloat::{Float, FloatConvert, Round, Status};

/// CVTSS2SD/CVTPS2PD: single to double, always exact. A NaN keeps its payload (shifted to the
/// top of the wider fraction) and is quietened, IE for an SNaN; DE for a denormal source (DAZ
/// off; with DAZ it converts as a zero).
pub fn f32_to_f64(a: u32, mx: Mx) -> (u64, u32) {
    host::f32_to_f64(a, mx).unwrap_or_else(|| f32_to_f64_soft(a, mx))
}

/// [`f32_to_f64`] in soft-float (the reference).
pub fn f32_to_f64_soft(a: u32, mx: Mx) -> (u64, u32) {
    let a = a as u64;
    if is_nan::<F32>(a) {
        let ie = if is_snan::<F32>(a) { mxcsr::IE } else { 0 };
        let r = (a & F32::SIGN) << 32 | F64::EXP_MASK | F64::QUIET | (a & F32::FRAC_MASK) << 29;
        return (r, ie);
    }
    let de = denormal_flag::<F32>(&[a], mx);
    let x = to_f::<F32>(daz::<F32>(a, mx));
    let r: <F64 as Format>::F = x.convert(&mut false).value;
    (r.to_bits() as u64, de)
}

/// CVTSD2SS/CVTPD2PS: double to single, rounded under MXCSR (OE/UE/PE as for arithmetic). A
/// NaN keeps the top of its payload and is quietened, IE for an SNaN; DE for a denormal source.
pub fn f64_to_f32(a: u64, mx: Mx) -> (u32, u32) {
    host::f64_to_f32(a, mx).unwrap_or_else(|| f64_to_f32_soft(a, mx))
}

/// [`f64_to_f32`] in soft-float (the reference).
pub fn f64_to_f32_soft(a: u64, mx: Mx) -> (u32, u32) {
    if is_nan::<F64>(a) {
        let ie = if is_snan::<F64>(a) { mxcsr::IE } else { 0 };
        let r = (a >> 32) as u32 & 0x8000_0000 | 0x7fc0_0000 | ((a & F64::FRAC_MASK) >> 29) as u32;
        return (r, ie);
    }
    let de = denormal_flag::<F64>(&[a], mx);
    let x = daz::<F64>(a, mx);
    if is_zero::<F64>(x) || is_inf::<F64>(x) {
        let r = (x >> 32) as u32 & 0x8000_0000 | if is_inf::<F64>(x) { 0x7f80_0000 } else { 0 };
        return (r, de);
    }
    // The source itself is the exact wide value.
    let (r, f) = round_pack::<F32>(to_f::<F64>(x), mx);
    (r as u32, f | de)
}

/// CVTSI2SS/CVTSI2SD/CVTDQ2PS/CVTDQ2PD: a signed integer to `P`, rounded under MXCSR.RC; PE when
/// inexact (no other exception is possible).
pub fn int_to_float<P: Format>(v: i64, mx: Mx) -> (u64, u32) {
    host::int_to_float::<P>(v, mx).unwrap_or_else(|| int_to_float_soft::<P>(v, mx))
}

/// [`int_to_float`] in soft-float (the reference).
pub fn int_to_float_soft<P: Format>(v: i64, mx: Mx) -> (u64, u32) {
    let r = P::F::from_i128_r(v as i128, mx.round());
    let pe = if r.status.contains(Status::INEXACT) {
        mxcsr::PE
    } else {
        0
    };
    (r.value.to_bits() as u64, pe)
}

/// A finite value rounded to an integer: (negative, magnitude or None when it is above 2^64,
/// inexact).
fn round_integer<P: Format>(x: u64, round: Round) -> (bool, Option<u128>, bool) {
    let neg = is_neg::<P>(x);
    if is_zero::<P>(x) {
        return (neg, Some(0), false);
    }
    let biased = ((x & P::EXP_MASK) >> P::FRAC) as i32;
    let (m, e) = if biased == 0 {
        (x & P::FRAC_MASK, 1 - P::BIAS - P::FRAC as i32)
    } else {
        (
            (x & P::FRAC_MASK) | (1 << P::FRAC),
            biased - P::BIAS - P::FRAC as i32,
        )
    };
    if e >= 0 {
        if e > 64 {
            return (neg, None, false);
        }
        return (neg, Some((m as u128) << e), false);
    }
    // m < 2^53: beyond 62 bits of right shift the value is below one half.
    let rs = (-e).min(62) as u32;
    let int = (m >> rs) as u128;
    let rem = m & ((1u64 << rs) - 1);
    let half = 1u64 << (rs - 1);
    let below_half = -e > 62 || rem < half;
    let inexact = rem != 0 || -e > 62;
    let up = match round {
        Round::NearestTiesToEven => !below_half && (rem > half || int & 1 == 1),
        Round::NearestTiesToAway => !below_half,
        Round::TowardNegative => neg && inexact,
        Round::TowardPositive => !neg && inexact,
        Round::TowardZero => false,
    };
    (neg, Some(int + up as u128), inexact)
}

/// CVTSS2SI/CVTSD2SI (`round` from MXCSR) and CVTTSS2SI/CVTTSD2SI (toward zero) to a signed
/// integer of `bits` (32 or 64), sign-extended into the `i64`: a NaN or a result out of range
/// gives the integer indefinite (the most negative value) with IE; otherwise PE when inexact.
/// DAZ turns a denormal source into zero; DE is never reported.
pub fn float_to_int<P: Format>(a: u64, bits: u32, round: Round, mx: Mx) -> (i64, u32) {
    // The host instructions round toward zero (CVTT*) or per MXCSR.RC.
    let truncate = round == Round::TowardZero;
    if truncate || round == mx.round() {
        if let Some(r) = host::float_to_int::<P>(a, bits, truncate, mx) {
            return r;
        }
    }
    float_to_int_soft::<P>(a, bits, round, mx)
}

/// [`float_to_int`] in soft-float (the reference).
pub fn float_to_int_soft<P: Format>(a: u64, bits: u32, round: Round, mx: Mx) -> (i64, u32) {
    let indefinite = (-1i64) << (bits - 1);
    if is_nan::<P>(a) || is_inf::<P>(a) {
        return (indefinite, mxcsr::IE);
    }
    let (neg, mag, inexact) = round_integer::<P>(daz::<P>(a, mx), round);
    let limit = 1u128 << (bits - 1);
    match mag {
        Some(m) if (neg && m <= limit) || (!neg && m < limit) => {
            let v = if neg {
                (m as i128).wrapping_neg() as i64
            } else {
                m as i64
            };
            (v, if inexact { mxcsr::PE } else { 0 })
        }
        _ => (indefinite, mxcsr::IE),
    }
}

/// ROUNDSS/ROUNDPS/...: round to an integral value of the same format with the immediate's
/// rounding control (imm[1:0], or MXCSR.RC when imm[2] is set); imm[3] suppresses PE. A NaN is
/// quietened (IE for an SNaN); the sign of a zero result is the source's. DAZ applies, but a
/// denormal source never reports DE.
pub fn round_to_integral<P: Format>(a: u64, imm: u8, mx: Mx) -> (u64, u32) {
    host::round_to_integral::<P>(a, imm, mx)
        .unwrap_or_else(|| round_to_integral_soft::<P>(a, imm, mx))
}

/// [`round_to_integral`] in soft-float (the reference).
pub fn round_to_integral_soft<P: Format>(a: u64, imm: u8, mx: Mx) -> (u64, u32) {
    if is_nan::<P>(a) {
        let ie = if is_snan::<P>(a) { mxcsr::IE } else { 0 };
        return (a | P::QUIET, ie);
    }
    let x = daz::<P>(a, mx);
    if is_inf::<P>(x) || is_zero::<P>(x) {
        return (x, 0);
    }
    let round = if imm & 4 != 0 {
        mx.round()
    } else {
        super::round_mode(imm as u32)
    };
    let (neg, mag, inexact) = round_integer::<P>(x, round);
    let r = match mag {
        // Large values are integral already.
        Some(m) if m < (1u128 << P::PREC) => {
            let v = P::F::from_u128(m).value.to_bits() as u64;
            if neg {
                v | P::SIGN
            } else {
                v
            }
        }
        _ => x,
    };
    let pe = if inexact && imm & 8 == 0 {
        mxcsr::PE
    } else {
        0
    };
    (r, pe)
}

/// Convert between formats through apfloat (used by tests as an independent reference).
#[cfg(test)]
fn convert_ref<A: Format, B: Format>(x: u64, round: Round) -> u64
where
    A::F: FloatConvert<B::F>,
{
    let r: B::F = to_f::<A>(x).convert_r(round, &mut false).value;
    r.to_bits() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::mxcsr::{DE, IE, OE, PE, UE};

    const M: Mx = Mx(0x1f80);

    #[test]
    fn float_conversions() {
        assert_eq!(f32_to_f64(0x3f80_0000, M), (0x3ff0_0000_0000_0000, 0));
        assert_eq!(f32_to_f64(0x7f80_0001, M), (0x7ff8_0000_2000_0000, IE));
        assert_eq!(f32_to_f64(1, M), (0x36a0_0000_0000_0000, DE));
        assert_eq!(
            f32_to_f64(0x8000_0001, Mx(0x1fc0)),
            (0x8000_0000_0000_0000, 0)
        );
        assert_eq!(f64_to_f32(0x3ff0_0000_0000_0001, M), (0x3f80_0000, PE));
        assert_eq!(f64_to_f32(0x47f0_0000_0000_0000, M), (0x7f80_0000, OE | PE));
        assert_eq!(f64_to_f32(0x3690_0000_0000_0000, M), (0, UE | PE));
        assert_eq!(f64_to_f32(0xfff0_0000_2000_0001, M), (0xffc0_0001, IE));
        assert_eq!(
            convert_ref::<F64, F32>(0x3ff0_0000_1000_0000, Round::TowardPositive),
            0x3f80_0001
        );
    }

    #[test]
    fn integer_conversions() {
        let rne = Round::NearestTiesToEven;
        let rz = Round::TowardZero;
        assert_eq!(
            float_to_int::<F32>(0x4f00_0000, 32, rne, M),
            (i32::MIN as i64, IE)
        );
        assert_eq!(
            float_to_int::<F32>(0xcf00_0000, 32, rne, M),
            (i32::MIN as i64, 0)
        );
        assert_eq!(float_to_int::<F32>(0x3fc0_0000, 32, rne, M), (2, PE));
        assert_eq!(float_to_int::<F32>(0x3fc0_0000, 32, rz, M), (1, PE));
        assert_eq!(float_to_int::<F32>(0x4020_0000, 32, rne, M), (2, PE));
        assert_eq!(float_to_int::<F32>(0xbf00_0000, 32, rne, M), (0, PE));
        assert_eq!(
            float_to_int::<F64>(0xc1e0_0000_0010_0000, 32, rz, M),
            (i32::MIN as i64, PE)
        );
        assert_eq!(
            float_to_int::<F64>(0xc1e0_0000_0010_0000, 32, rne, M),
            (i32::MIN as i64, PE)
        );
        assert_eq!(
            float_to_int::<F64>(0xc1e0_0000_0020_0000, 32, rz, M),
            (i32::MIN as i64, IE)
        );
        assert_eq!(
            float_to_int::<F64>(0x7ff8_0000_0000_0000, 64, rz, M),
            (i64::MIN, IE)
        );
        assert_eq!(
            float_to_int::<F64>(0x43e0_0000_0000_0000, 64, rz, M),
            (i64::MIN, IE)
        );
        assert_eq!(
            float_to_int::<F64>(1, 64, Round::TowardPositive, M),
            (1, PE)
        );
        assert_eq!(int_to_float::<F32>(16_777_217, M), (0x4b80_0000, PE));
        assert_eq!(int_to_float::<F32>(-1, M), (0xbf80_0000, 0));
        assert_eq!(int_to_float::<F64>(i64::MIN, M), (0xc3e0_0000_0000_0000, 0));
    }

    #[test]
    fn rounding_to_integral() {
        assert_eq!(
            round_to_integral::<F32>(0x3fc0_0000, 0, M),
            (0x4000_0000, PE)
        );
        assert_eq!(
            round_to_integral::<F32>(0x3fc0_0000, 8 | 1, M),
            (0x3f80_0000, 0)
        );
        assert_eq!(
            round_to_integral::<F32>(0xbe99_999a, 2, M),
            (0x8000_0000, PE)
        );
        assert_eq!(
            round_to_integral::<F32>(0xbe99_999a, 1, M),
            (0xbf80_0000, PE)
        );
        assert_eq!(
            round_to_integral::<F32>(0x4b80_0001, 0, M),
            (0x4b80_0001, 0)
        );
        assert_eq!(
            round_to_integral::<F32>(0x7f80_0001, 0, M),
            (0x7fc0_0001, IE)
        );
        // imm[2]: MXCSR.RC (toward zero here).
        assert_eq!(
            round_to_integral::<F32>(0x3fc0_0000, 4, Mx(0x7f80)),
            (0x3f80_0000, PE)
        );
    }
}
