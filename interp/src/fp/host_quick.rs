//! The quickest host path: operations whose flags can be decided from the operands and the
//! result alone run as plain host arithmetic, without touching MXCSR at all.
//!
//! Loading MXCSR (LDMXCSR) costs about as much as the rest of an interpreted instruction, so
//! for the common case the MXCSR kernels of `host.rs` are skipped:
//! - compares, MIN/MAX, COMIS*: with no NaN and no denormal operand they raise no flag under
//!   any MXCSR, and their result does not depend on MXCSR;
//! - arithmetic and conversions when the guest runs in the default environment (round to
//!   nearest, no DAZ/FTZ, all exceptions masked: the environment Rust code itself runs in, so
//!   the host computes the guest's result) and the operands and result are zero or normal
//!   numbers well inside the exponent range (a band in which every error term below is
//!   exactly representable): then IE/DE/ZE/OE/UE cannot occur and PE is decided exactly by an
//!   error-free transformation (TwoSum; the product, quotient remainder or square-root
//!   remainder, exact in double for single operands and by one host FMA for doubles).
//!
//! Anything else answers `None` and the MXCSR kernels (or the soft-float path) decide. The
//! host's MXCSR control bits are never changed here; its sticky status flags may be set, as by
//! any Rust floating-point code (nothing reads them).

use crate::fp::host::{has_fma, Op};
use crate::fp::{is_denormal, is_nan, mxcsr, Format, Mx};
use crate::state::flags::{CF, ZF};
use core::arch::asm;

/// Masks all set, RC nearest, no DAZ/FTZ (flags may be anything).
#[inline]
fn default_env(mx: Mx) -> bool {
    const MASKS: u32 = mxcsr::FLAGS << mxcsr::MASK_SHIFT;
    const CONTROL: u32 = (3 << mxcsr::RC_SHIFT) | mxcsr::FTZ | mxcsr::DAZ;
    mx.0 & (MASKS | CONTROL) == MASKS
}

/// A host float type the quick path computes in.
trait Native:
    Copy
    + PartialOrd
    + core::ops::Neg<Output = Self>
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
{
    /// Biased exponents of the band (normal numbers far from underflow and overflow).
    const LO: u64;
    const HI: u64;
    const FRAC: u32;
    const EXP: u64;
    fn from(bits: u64) -> Self;
    fn bits(self) -> u64;
    fn sqrt(self) -> Self;
    fn is_zero(self) -> bool;
    /// Is `a * b` exactly `r`? (`None`: cannot tell here.)
    fn mul_exact(a: Self, b: Self, r: Self) -> Option<bool>;
    /// Is `a / b` exactly `r`, i.e. `r * b == a` exactly?
    fn div_exact(a: Self, b: Self, r: Self) -> Option<bool> {
        Self::mul_exact(r, b, a)
    }
    /// In the band (a normal number with the exponent between LO and HI)?
    #[inline]
    fn in_band(self) -> bool {
        let e = (self.bits() >> Self::FRAC) & Self::EXP;
        (Self::LO..=Self::HI).contains(&e)
    }
    #[inline]
    fn zero_or_band(self) -> bool {
        self.is_zero() || self.in_band()
    }
}

impl Native for f32 {
    // Unbiased exponents -87..=87: products, quotients and remainders of band values are
    // exact in double.
    const LO: u64 = 40;
    const HI: u64 = 214;
    const FRAC: u32 = 23;
    const EXP: u64 = 0xff;
    fn from(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn mul_exact(a: Self, b: Self, r: Self) -> Option<bool> {
        // 24 x 24 bits fit the 53 of a double.
        Some(a as f64 * b as f64 == r as f64)
    }
}

impl Native for f64 {
    // Unbiased exponents -923..=924: the error terms (down to about 2^-1030 for a product or
    // quotient of band values) stay exactly representable.
    const LO: u64 = 100;
    const HI: u64 = 1947;
    const FRAC: u32 = 52;
    const EXP: u64 = 0x7ff;
    fn from(bits: u64) -> Self {
        f64::from_bits(bits)
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn mul_exact(a: Self, b: Self, r: Self) -> Option<bool> {
        if !has_fma() {
            return None;
        }
        // a*b - r with one rounding: the exact error of the product (representable in the band).
        let mut z = -r;
        // SAFETY: the host has FMA (checked); register operands only, no memory, no stack; the
        // MXCSR control bits are Rust's own (nearest), exceptions masked.
        unsafe {
            asm!(
                "vfmadd231sd {z}, {x}, {y}",
                z = inout(xmm_reg) z, x = in(xmm_reg) a, y = in(xmm_reg) b,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        Some(z == 0.0)
    }
}

/// `true` when `a + b` (the rounded sum `s`) is exact (TwoSum error term zero; no overflow in
/// the band).
#[inline]
fn sum_exact<T: Native>(a: T, b: T, s: T) -> bool {
    let bp = s - a;
    let ap = s - bp;
    ((a - ap) + (b - bp)).is_zero()
}

fn arith_native<T: Native>(op: Op, a: u64, b: u64) -> Option<(u64, bool)> {
    let (x, y) = (T::from(a), T::from(b));
    if !y.zero_or_band() || (op != Op::Sqrt && !x.zero_or_band()) {
        return None;
    }
    let (r, exact) = match op {
        Op::Add | Op::Sub => {
            let y = if op == Op::Sub { -y } else { y };
            let r = x + y;
            // An exact cancellation of band values (or of zeros) is an exact zero.
            if r.is_zero() {
                return Some((r.bits(), true));
            }
            (r, sum_exact(x, y, r))
        }
        Op::Mul => {
            if x.is_zero() || y.is_zero() {
                return Some(((x * y).bits(), true));
            }
            let r = x * y;
            (r, T::mul_exact(x, y, r)?)
        }
        Op::Div => {
            if y.is_zero() {
                return None;
            }
            if x.is_zero() {
                return Some(((x / y).bits(), true));
            }
            let r = x / y;
            (r, T::div_exact(x, y, r)?)
        }
        Op::Sqrt => {
            if y < -y {
                return None;
            }
            if y.is_zero() {
                return Some((y.bits(), true));
            }
            let r = y.sqrt();
            (r, T::mul_exact(r, r, y)?)
        }
        Op::Min | Op::Max => return None,
    };
    // A nonzero result outside the band may be tiny or overflowed: not decided here.
    if !r.in_band() {
        return None;
    }
    Some((r.bits(), exact))
}

/// ADD/SUB/MUL/DIV/SQRT (scalar lane) in the default environment; MIN/MAX under any MXCSR.
#[inline]
pub fn scalar<P: Format>(op: Op, a: u64, b: u64, mx: Mx) -> Option<(u64, u32)> {
    if matches!(op, Op::Min | Op::Max) {
        return minmax::<P>(a, b, op == Op::Max);
    }
    if !default_env(mx) {
        return None;
    }
    let (r, exact) = if P::WIDTH == 32 {
        arith_native::<f32>(op, a, b)?
    } else {
        arith_native::<f64>(op, a, b)?
    };
    Some((r, if exact { 0 } else { mxcsr::PE }))
}

/// Neither operand a NaN or a denormal: no flag is possible and MXCSR is irrelevant.
#[inline]
fn plain<P: Format>(a: u64, b: u64) -> bool {
    !is_nan::<P>(a) && !is_nan::<P>(b) && !is_denormal::<P>(a) && !is_denormal::<P>(b)
}

/// `a < b` and `a == b` of two non-NaN values.
#[inline]
fn order<P: Format>(a: u64, b: u64) -> (bool, bool) {
    if P::WIDTH == 32 {
        let (x, y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
        (x < y, x == y)
    } else {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        (x < y, x == y)
    }
}

/// MIN/MAX: the first operand when strictly smaller (larger), else the second.
#[inline]
pub fn minmax<P: Format>(a: u64, b: u64, max: bool) -> Option<(u64, u32)> {
    if !plain::<P>(a, b) {
        return None;
    }
    let first = if max {
        order::<P>(b, a).0
    } else {
        order::<P>(a, b).0
    };
    Some((if first { a } else { b }, 0))
}

/// CMPcc with the 32 VEX predicates (the legacy ones are 0..7): ordered operands only.
#[inline]
pub fn compare<P: Format>(a: u64, b: u64, pred: u8) -> Option<(bool, u32)> {
    if !plain::<P>(a, b) {
        return None;
    }
    let (lt, eq) = order::<P>(a, b);
    let r = match pred & 15 {
        0 | 8 => eq,
        1 | 9 => lt,
        2 | 10 => lt || eq,
        3 | 11 => false,
        4 | 12 => !eq,
        5 | 13 => !lt,
        6 | 14 => !(lt || eq),
        _ => true,
    };
    Some((r, 0))
}

/// COMIS*/UCOMIS* of ordered operands.
#[inline]
pub fn comi<P: Format>(a: u64, b: u64) -> Option<(u64, u32)> {
    if !plain::<P>(a, b) {
        return None;
    }
    let (lt, eq) = order::<P>(a, b);
    Some((
        if lt {
            CF
        } else if eq {
            ZF
        } else {
            0
        },
        0,
    ))
}

// ----- conversions (default environment) -----

/// CVTSS2SD: exact; flags only for a NaN (IE if signalling) or a denormal (DE).
#[inline]
pub fn f32_to_f64(a: u32, mx: Mx) -> Option<(u64, u32)> {
    let x = a as u64;
    if is_nan::<crate::fp::F32>(x) || is_denormal::<crate::fp::F32>(x) || !default_env(mx) {
        return None;
    }
    Some(((f32::from_bits(a) as f64).to_bits(), 0))
}

/// CVTSD2SS of a zero, an infinity or a band value whose single result is in the band.
#[inline]
pub fn f64_to_f32(a: u64, mx: Mx) -> Option<(u32, u32)> {
    let x = f64::from_bits(a);
    if !default_env(mx) || !(x.is_infinite() || x.zero_or_band()) {
        return None;
    }
    let r = x as f32;
    if x.is_infinite() || x == 0.0 {
        return Some((r.to_bits(), 0));
    }
    if !r.in_band() {
        return None;
    }
    Some((r.to_bits(), if r as f64 == x { 0 } else { mxcsr::PE }))
}

/// CVTSI2SS/SD: rounded to nearest; PE unless the integer is representable.
#[inline]
pub fn int_to_float<P: Format>(v: i64, mx: Mx) -> Option<(u64, u32)> {
    if !default_env(mx) {
        return None;
    }
    let (bits, back) = if P::WIDTH == 32 {
        let r = v as f32;
        (r.to_bits() as u64, r as i128)
    } else {
        let r = v as f64;
        (r.to_bits(), r as i128)
    };
    Some((bits, if back == v as i128 { 0 } else { mxcsr::PE }))
}

/// CVT(T)SS2SI/CVT(T)SD2SI: the host instruction under Rust's own MXCSR (nearest or
/// truncating); a result that is not the integer indefinite is valid, and PE says whether it
/// differs from the source.
#[inline]
pub fn float_to_int<P: Format>(a: u64, bits: u32, truncate: bool, mx: Mx) -> Option<(i64, u32)> {
    if !default_env(mx) || is_nan::<P>(a) {
        return None;
    }
    let x = if P::WIDTH == 32 {
        f32::from_bits(a as u32) as f64
    } else {
        f64::from_bits(a)
    };
    let mut r = 0i64;
    // SAFETY: register operands only; SSE2 is baseline on x86-64; the control bits are Rust's
    // own (nearest) and every exception is masked, so the conversion cannot fault.
    unsafe {
        match (bits, truncate) {
            (32, false) => asm!("cvtsd2si {r:e}, {x}", r = out(reg) r, x = in(xmm_reg) x,
                options(pure, nomem, nostack, preserves_flags)),
            (32, true) => asm!("cvttsd2si {r:e}, {x}", r = out(reg) r, x = in(xmm_reg) x,
                options(pure, nomem, nostack, preserves_flags)),
            (64, false) => asm!("cvtsd2si {r}, {x}", r = out(reg) r, x = in(xmm_reg) x,
                options(pure, nomem, nostack, preserves_flags)),
            (64, true) => asm!("cvttsd2si {r}, {x}", r = out(reg) r, x = in(xmm_reg) x,
                options(pure, nomem, nostack, preserves_flags)),
            _ => return None,
        }
    }
    let r = if bits == 32 {
        r as u32 as i32 as i64
    } else {
        r
    };
    let indefinite = (-1i64) << (bits - 1);
    if r == indefinite {
        return None;
    }
    // Below 2^52 in magnitude the integer converts back exactly; above, the source is
    // integral already.
    let exact = x.abs() >= 4_503_599_627_370_496.0 || r as f64 == x;
    Some((r, if exact { 0 } else { mxcsr::PE }))
}
