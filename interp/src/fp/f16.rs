//! Half precision (F16C): VCVTPH2PS and VCVTPS2PH lanes.

use super::{
    daz, denormal_flag, is_inf, is_nan, is_snan, is_zero, mxcsr, round_pack, widen, Format, Mx, F32,
};
use rustc_apfloat::ieee::{Double, Half, Single};
use rustc_apfloat::{Float, FloatConvert};

/// IEEE half precision (bits in the low 16 bits of a `u64`), computed through double.
pub struct F16;

impl Format for F16 {
    type F = Half;
    type W = Double;
    const WIDTH: u32 = 16;
    const FRAC: u32 = 10;
    const BIAS: i32 = 15;
    const SIGN: u64 = 1 << 15;
    const EXP_MASK: u64 = 0x1f << 10;
    const FRAC_MASK: u64 = (1 << 10) - 1;
    const QUIET: u64 = 1 << 9;
}

/// VCVTPH2PS lane: exact. A NaN keeps its payload (shifted up) and is quietened, IE for an
/// SNaN. A denormal half is converted exactly: neither DAZ nor DE applies (measured).
pub fn f16_to_f32(h: u16) -> (u32, u32) {
    let h = h as u64;
    if is_nan::<F16>(h) {
        let ie = if is_snan::<F16>(h) { mxcsr::IE } else { 0 };
        let r = (h & F16::SIGN) << 16 | F32::EXP_MASK | F32::QUIET | (h & F16::FRAC_MASK) << 13;
        return (r as u32, ie);
    }
    let x = Half::from_bits(h as u128);
    let r: Single = x.convert(&mut false).value;
    (r.to_bits() as u32, 0)
}

/// VCVTPS2PH lane with the immediate's rounding control (imm[1:0], or MXCSR.RC when imm[2] is
/// set). A NaN keeps the top of its payload and is quietened (IE for an SNaN); DAZ applies to
/// the source with DE for a denormal one; OE/UE/PE as for arithmetic, but MXCSR.FTZ is
/// ignored (denormal halves are produced).
pub fn f32_to_f16(a: u32, imm: u8, mx: Mx) -> (u16, u32) {
    let a = a as u64;
    if is_nan::<F32>(a) {
        let ie = if is_snan::<F32>(a) { mxcsr::IE } else { 0 };
        let r = (a >> 16) & F16::SIGN | F16::EXP_MASK | F16::QUIET | (a & F32::FRAC_MASK) >> 13;
        return (r as u16, ie);
    }
    let de = denormal_flag::<F32>(&[a], mx);
    let x = daz::<F32>(a, mx);
    if is_zero::<F32>(x) || is_inf::<F32>(x) {
        let r = (x >> 16) & F16::SIGN | if is_inf::<F32>(x) { F16::EXP_MASK } else { 0 };
        return (r as u16, de);
    }
    let rc = if imm & 4 != 0 {
        mx.0 >> mxcsr::RC_SHIFT
    } else {
        imm as u32
    };
    let m = Mx(mx.with_rc(rc).0 & !mxcsr::FTZ);
    let (r, mut f) = round_pack::<F16>(widen::<F32>(x), m);
    // With UE unmasked, PE follows the arithmetic rule (the result rounded to 11 bits with an
    // unbounded exponent) for a normal source, but a denormal single (DAZ off) always reports
    // UE|PE, even an exact one such as 2^-127 (host-measured over all exponents and random
    // denormals, every RC: `unmasked_underflow_of_a_denormal_source_sets_pe`).
    if de != 0 && !mx.um() {
        f |= mxcsr::PE;
    }
    (r as u16, f | de)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fp::mxcsr::{DE, IE, OE, PE, UE};

    const M: Mx = Mx(0x1f80);

    #[test]
    fn conversions() {
        assert_eq!(f16_to_f32(0x3c00), (0x3f80_0000, 0));
        assert_eq!(f16_to_f32(0x0001), (0x3380_0000, 0));
        assert_eq!(f16_to_f32(0xfc01), (0xffc0_2000, IE));
        assert_eq!(f32_to_f16(0x3f80_0000, 0, M), (0x3c00, 0));
        assert_eq!(f32_to_f16(0x4780_0000, 0, M), (0x7c00, OE | PE));
        assert_eq!(f32_to_f16(0x4780_0000, 3, M), (0x7bff, OE | PE));
        assert_eq!(f32_to_f16(0x3380_0000, 0, M), (0x0001, 0));
        assert_eq!(f32_to_f16(0x3300_0001, 0, M), (0x0001, UE | PE));
        assert_eq!(f32_to_f16(0x3300_0001, 3, M), (0x0000, UE | PE));
        assert_eq!(f32_to_f16(0x3300_0001, 4, Mx(0x5f80)), (0x0001, UE | PE));
        assert_eq!(f32_to_f16(0x7f80_0001, 0, M), (0x7e00, IE));
    }

    /// Measured natively (VCVTPS2PH with UM clear, flags read from the #XM signal frame): a
    /// normal single reports PE only when inexact at 11 bits with an unbounded exponent, a
    /// denormal single always UE|PE (with DE).
    #[test]
    fn unmasked_underflow_of_a_denormal_source_sets_pe() {
        let um_clear = Mx(0x1780);
        // Normal sources, exact at 11 bits: UE alone (2^-126, 1.5 * 2^-20, 2^-15).
        assert_eq!(f32_to_f16(0x0080_0000, 4, um_clear).1, UE);
        assert_eq!(f32_to_f16(0x35c0_0000, 4, um_clear).1, UE);
        assert_eq!(f32_to_f16(0x3800_0000, 4, um_clear).1, UE);
        // Normal source inexact at 11 bits: UE|PE.
        assert_eq!(f32_to_f16(0x0080_0001, 4, um_clear).1, UE | PE);
        // Denormal sources, exact or not: DE|UE|PE (RN, RZ, with FTZ).
        assert_eq!(f32_to_f16(0x0040_0000, 4, um_clear).1, DE | UE | PE);
        assert_eq!(f32_to_f16(0x0000_0001, 3, um_clear).1, DE | UE | PE);
        assert_eq!(f32_to_f16(0x8040_0000, 4, Mx(0x9780)).1, DE | UE | PE);
        // DAZ: the source is a zero, no flags.
        assert_eq!(f32_to_f16(0x8040_0000, 4, Mx(0x17c0)), (0x8000, 0));
        // UM set (masked response): a denormal source is tiny and inexact anyway.
        assert_eq!(f32_to_f16(0x0040_0000, 4, M), (0, DE | UE | PE));
        // Unmasked overflow keeps the unbounded rule: 65536 exact, OE alone.
        assert_eq!(f32_to_f16(0x4780_0000, 4, Mx(0x1b80)).1, OE);
        assert_eq!(f32_to_f16(0x4780_0800, 4, Mx(0x1b80)).1, OE | PE);
    }
}
