//! Soft floating point for the SIMD instructions: IEEE single and double precision under the
//! x86 MXCSR rules (rounding control, DAZ, FTZ, sticky exception flags, x86 NaN propagation).
//!
//! The arithmetic core is `rustc_apfloat` (rust-lang's port of LLVM's APFloat): an operation is
//! done exactly or with round-to-odd in a wider format (double for single, quad for double),
//! then rounded once to the destination format by [`round_pack`], which applies the x86 rules
//! apfloat does not know: tininess after rounding with unbounded exponent, flush-to-zero, and
//! the underflow rule that depends on the UM mask. Every function is pure: bit patterns and
//! MXCSR in, bit pattern and detected exception flags out. The rules are written down in
//! `docs/floating-point.md`.
//!
//! On an x86-64 host the entry points first try [`host`], which runs the same operation on the
//! host's SSE unit when that is exact (every guest exception masked); the `*_soft` functions
//! are the reference and the only path elsewhere.

pub mod approx;
pub mod cvt;
pub mod f16;
pub mod fma;
pub mod host;
#[cfg(target_arch = "x86_64")]
pub mod host_quick;
#[cfg(all(test, target_arch = "x86_64"))]
mod host_tests;
pub mod sse;

use rustc_apfloat::ieee::{Double, Quad, Single};
use rustc_apfloat::{Float, FloatConvert, Round, Status, StatusAnd};

/// MXCSR bits.
pub mod mxcsr {
    /// Invalid operation.
    pub const IE: u32 = 1 << 0;
    /// Denormal operand.
    pub const DE: u32 = 1 << 1;
    /// Divide by zero.
    pub const ZE: u32 = 1 << 2;
    /// Overflow.
    pub const OE: u32 = 1 << 3;
    /// Underflow.
    pub const UE: u32 = 1 << 4;
    /// Precision (inexact).
    pub const PE: u32 = 1 << 5;
    /// The six exception flags.
    pub const FLAGS: u32 = 0x3f;
    /// The pre-computation exceptions (detected before the arithmetic).
    pub const PRE: u32 = IE | DE | ZE;
    /// Denormals are zeros (inputs).
    pub const DAZ: u32 = 1 << 6;
    /// Shift from a flag bit to its mask bit (IM = IE << 7, ...).
    pub const MASK_SHIFT: u32 = 7;
    /// Underflow mask.
    pub const UM: u32 = UE << MASK_SHIFT;
    /// Rounding control field (bits 14:13).
    pub const RC_SHIFT: u32 = 13;
    /// Flush to zero (results).
    pub const FTZ: u32 = 1 << 15;
}

/// The MXCSR value an operation runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mx(pub u32);

impl Mx {
    /// Rounding mode of MXCSR.RC.
    #[inline]
    pub fn round(self) -> Round {
        round_mode(self.0 >> mxcsr::RC_SHIFT)
    }
    #[inline]
    pub fn daz(self) -> bool {
        self.0 & mxcsr::DAZ != 0
    }
    #[inline]
    pub fn ftz(self) -> bool {
        self.0 & mxcsr::FTZ != 0
    }
    /// Is the underflow exception masked?
    #[inline]
    pub fn um(self) -> bool {
        self.0 & mxcsr::UM != 0
    }
    /// Is the overflow exception masked?
    #[inline]
    pub fn om(self) -> bool {
        self.0 & (mxcsr::OE << mxcsr::MASK_SHIFT) != 0
    }
    /// The same MXCSR with another rounding control (ROUNDPS immediate).
    #[inline]
    pub fn with_rc(self, rc: u32) -> Mx {
        Mx((self.0 & !(3 << mxcsr::RC_SHIFT)) | ((rc & 3) << mxcsr::RC_SHIFT))
    }
}

/// Rounding mode of a 2-bit RC field: 0 nearest-even, 1 down, 2 up, 3 toward zero.
#[inline]
pub fn round_mode(rc: u32) -> Round {
    match rc & 3 {
        0 => Round::NearestTiesToEven,
        1 => Round::TowardNegative,
        2 => Round::TowardPositive,
        _ => Round::TowardZero,
    }
}

/// An IEEE binary format handled by the SIMD unit, with the wider apfloat format its
/// operations are first computed in (at least two bits more precision, so that round-to-odd
/// followed by one rounding is exact, and a wide enough exponent that no intermediate result
/// of one operation is ever denormal or infinite there).
pub trait Format {
    /// The apfloat type of the format itself.
    type F: Float + FloatConvert<Self::W>;
    /// The wider apfloat type.
    type W: Float + FloatConvert<Self::F>;
    /// Width in bits (32 / 64).
    const WIDTH: u32;
    /// Fraction bits (23 / 52).
    const FRAC: u32;
    /// Exponent bias.
    const BIAS: i32;
    const SIGN: u64;
    const EXP_MASK: u64;
    const FRAC_MASK: u64;
    /// The quiet bit of a NaN (most significant fraction bit).
    const QUIET: u64;
    /// The default NaN ("QNaN floating-point indefinite"): sign set, quiet, payload zero.
    const DEFAULT_NAN: u64 = Self::SIGN | Self::EXP_MASK | Self::QUIET;
    /// Precision in bits including the hidden bit.
    const PREC: i32 = Self::FRAC as i32 + 1;
}

/// IEEE single precision (bits in the low 32 bits of a `u64`).
pub struct F32;
/// IEEE double precision.
pub struct F64;

impl Format for F32 {
    type F = Single;
    type W = Double;
    const WIDTH: u32 = 32;
    const FRAC: u32 = 23;
    const BIAS: i32 = 127;
    const SIGN: u64 = 1 << 31;
    const EXP_MASK: u64 = 0xff << 23;
    const FRAC_MASK: u64 = (1 << 23) - 1;
    const QUIET: u64 = 1 << 22;
}

impl Format for F64 {
    type F = Double;
    type W = Quad;
    const WIDTH: u32 = 64;
    const FRAC: u32 = 52;
    const BIAS: i32 = 1023;
    const SIGN: u64 = 1 << 63;
    const EXP_MASK: u64 = 0x7ff << 52;
    const FRAC_MASK: u64 = (1 << 52) - 1;
    const QUIET: u64 = 1 << 51;
}

// ----- classification on bit patterns -----

#[inline]
pub fn is_nan<P: Format>(x: u64) -> bool {
    x & !P::SIGN > P::EXP_MASK
}
#[inline]
pub fn is_snan<P: Format>(x: u64) -> bool {
    is_nan::<P>(x) && x & P::QUIET == 0
}
#[inline]
pub fn is_qnan<P: Format>(x: u64) -> bool {
    is_nan::<P>(x) && x & P::QUIET != 0
}
#[inline]
pub fn is_inf<P: Format>(x: u64) -> bool {
    x & !P::SIGN == P::EXP_MASK
}
#[inline]
pub fn is_zero<P: Format>(x: u64) -> bool {
    x & !P::SIGN == 0
}
#[inline]
pub fn is_denormal<P: Format>(x: u64) -> bool {
    x & P::EXP_MASK == 0 && x & P::FRAC_MASK != 0
}
#[inline]
pub fn is_neg<P: Format>(x: u64) -> bool {
    x & P::SIGN != 0
}

/// DAZ: a denormal input becomes a zero of the same sign.
#[inline]
pub fn daz<P: Format>(x: u64, mx: Mx) -> u64 {
    if mx.daz() && is_denormal::<P>(x) {
        x & P::SIGN
    } else {
        x
    }
}

/// DE when an input is denormal and DAZ is off.
#[inline]
pub fn denormal_flag<P: Format>(xs: &[u64], mx: Mx) -> u32 {
    if !mx.daz() && xs.iter().any(|&x| is_denormal::<P>(x)) {
        mxcsr::DE
    } else {
        0
    }
}

/// x86 NaN propagation for two sources (at least one a NaN): the first source's NaN if it is
/// one, else the second's, quietened; IE if either is signalling.
#[inline]
pub fn propagate_nan<P: Format>(a: u64, b: u64) -> (u64, u32) {
    let ie = if is_snan::<P>(a) || is_snan::<P>(b) {
        mxcsr::IE
    } else {
        0
    };
    let r = if is_nan::<P>(a) { a } else { b };
    (r | P::QUIET, ie)
}

// ----- apfloat glue -----

#[inline]
pub(crate) fn to_f<P: Format>(x: u64) -> P::F {
    P::F::from_bits(x as u128)
}

#[inline]
pub(crate) fn widen<P: Format>(x: u64) -> P::W {
    let f: P::F = to_f::<P>(x);
    f.convert(&mut false).value
}

/// Round-to-odd: a wide result that was truncated (inexact) gets its last bit set, so that
/// rounding it once more to the narrower format gives the correctly rounded result.
#[inline]
pub(crate) fn jam<W: Float>(w: W, inexact: bool) -> W {
    if inexact {
        W::from_bits(w.to_bits() | 1)
    } else {
        w
    }
}

/// Round a nonzero finite wide value `w` (exact, or round-to-odd) to the format `P` under
/// MXCSR: RC, overflow per RC, tininess after rounding with unbounded exponent, FTZ, and the
/// flags. Returns the result bits and OE/UE/PE as detected.
///
/// Underflow: with UM set, UE only for a tiny inexact result (and FTZ then returns a zero of
/// the result's sign with UE|PE); with UM clear, UE for every tiny result (the instruction then
/// faults and the result is not used).
pub fn round_pack<P: Format>(w: P::W, mx: Mx) -> (u64, u32) {
    use mxcsr::{OE, PE, UE};
    let round = mx.round();
    let r = FloatConvert::<P::F>::convert_r(w, round, &mut false);
    let bits = r.value.to_bits() as u64;
    let inexact = r.status.contains(Status::INEXACT);
    // apfloat reports OVERFLOW only when it returns an infinity; rounding toward zero from
    // 2^(EMAX+1) or beyond gives the largest finite number without it.
    let overflow_limit = P::W::from_u128(1).value.scalbn(P::BIAS + 1);
    // With OE or UE unmasked the instruction faults and PE reports whether the result
    // rounded to the format's precision with an unbounded exponent is inexact (this host; the
    // SDM's "unmasked response" delivers that bias-adjusted result).
    let pe_unbounded = || {
        if inexact_unbounded::<P>(w, round) {
            PE
        } else {
            0
        }
    };
    if r.status.contains(Status::OVERFLOW) || w.abs() >= overflow_limit {
        return (bits, OE | if mx.om() { PE } else { pe_unbounded() });
    }
    let pe = if inexact { PE } else { 0 };
    if !is_tiny::<P>(w, round) {
        return (bits, pe);
    }
    if !mx.um() {
        (bits, UE | pe_unbounded())
    } else if mx.ftz() {
        (bits & P::SIGN, UE | PE)
    } else if inexact {
        (bits, UE | PE)
    } else {
        (bits, 0)
    }
}

/// Is the nonzero finite `w` inexact when rounded to `P`'s precision with an unbounded
/// exponent? (Scaled to about 1 first; power-of-two scaling is exact in the wide format.)
fn inexact_unbounded<P: Format>(w: P::W, round: Round) -> bool {
    let scaled = w.scalbn(-w.ilogb());
    let r: StatusAnd<P::F> = FloatConvert::<P::F>::convert_r(scaled, round, &mut false);
    r.status.contains(Status::INEXACT)
}

/// Is `w` tiny: nonzero and, rounded to `P`'s precision with unbounded exponent, smaller in
/// magnitude than `P`'s smallest normal number?
fn is_tiny<P: Format>(w: P::W, round: Round) -> bool {
    let min_normal: P::W = widen::<P>(1 << P::FRAC);
    let a = w.abs();
    if a >= min_normal {
        return false;
    }
    // Below half the smallest normal no rounding reaches it.
    if a < min_normal.scalbn(-1) {
        return true;
    }
    // Scale into the normal range (exact in the wide format), round there, compare.
    let scaled = w.scalbn(P::PREC);
    let r: P::F = FloatConvert::<P::F>::convert_r(scaled, round, &mut false).value;
    // The smallest normal number times 2^PREC: biased exponent PREC + 1.
    let limit: P::F = to_f::<P>(((P::PREC + 1) as u64) << P::FRAC);
    r.abs() < limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(is_nan::<F32>(0x7fc0_0000) && is_qnan::<F32>(0xffc0_0001));
        assert!(is_snan::<F32>(0x7f80_0001) && !is_snan::<F32>(0x7f80_0000));
        assert!(is_inf::<F32>(0xff80_0000) && !is_nan::<F32>(0xff80_0000));
        assert!(is_denormal::<F64>(1) && !is_denormal::<F64>(0x8000_0000_0000_0000));
        assert_eq!(F64::DEFAULT_NAN, 0xfff8_0000_0000_0000);
        assert_eq!(F32::DEFAULT_NAN, 0xffc0_0000);
        assert_eq!(daz::<F32>(0x8000_0001, Mx(0x1fc0)), 0x8000_0000);
        assert_eq!(daz::<F32>(0x8000_0001, Mx(0x1f80)), 0x8000_0001);
        assert_eq!(
            propagate_nan::<F32>(1, 0x7f80_0001),
            (0x7fc0_0001, mxcsr::IE)
        );
        assert_eq!(
            propagate_nan::<F32>(0xffc0_0002, 0x7f80_0001),
            (0xffc0_0002, mxcsr::IE)
        );
    }

    #[test]
    fn tininess_is_after_rounding_with_unbounded_exponent() {
        // (2^24 - 1) * 2^-150 = 2^-126 - 2^-150: representable with 24 bits, so tiny, but on
        // the denormal grid it is a tie that rounds (to even) up to 2^-126.
        let w = Double::from_u128((1 << 24) - 1).value.scalbn(-150);
        let (r, f) = round_pack::<F32>(jam(w, false), Mx(0x1f80));
        assert_eq!(r, 0x0080_0000);
        assert_eq!(f, mxcsr::UE | mxcsr::PE);
        // Slightly above it rounds (unbounded) to 2^-126: not tiny.
        let w = Double::from_u128((1 << 25) - 1).value.scalbn(-151);
        let (r, f) = round_pack::<F32>(w, Mx(0x1f80));
        assert_eq!((r, f), (0x0080_0000, mxcsr::PE));
        // FTZ flushes a tiny result to a signed zero with UE|PE.
        let w = -Double::from_u128(3).value.scalbn(-149);
        assert_eq!(
            round_pack::<F32>(w, Mx(0x9f80)),
            (0x8000_0000, mxcsr::UE | mxcsr::PE)
        );
        // Exact denormal result: no flags when UM is set, UE when it is clear.
        assert_eq!(round_pack::<F32>(w, Mx(0x1f80)), (0x8000_0003, 0));
        assert_eq!(round_pack::<F32>(w, Mx(0x1780)), (0x8000_0003, mxcsr::UE));
    }
}
