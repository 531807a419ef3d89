//! Basic arithmetic on 80-bit values: operand checks (invalid encodings, SNaNs, denormal
//! operands), x87 NaN propagation, and exactly rounded add, subtract, multiply, divide and
//! square root with precision and rounding control.

use super::float::{round_ext, shr_jam, sw, Class, Env, F80};
use crate::ops::muldiv::div_128_by_64;

/// The result of an operation: the value and the status-word bits it raises (exception flags
/// and C1 round-up). Whether the value is delivered depends on the masks (the caller decides).
pub type Res = (F80, u16);

/// The x87 rule for two NaN operands (at least one is a NaN). SNaN + QNaN gives the QNaN; two
/// NaNs of the same kind give the one with the larger significand (then the larger
/// exponent/sign word loses: the positive one wins a full tie). The result is quiet; IE is
/// raised for any SNaN.
pub fn propagate2(a: F80, b: F80) -> Res {
    let (ca, cb) = (a.class(), b.class());
    let ie = if ca == Class::SNaN || cb == Class::SNaN {
        sw::IE
    } else {
        0
    };
    let a_nan = matches!(ca, Class::QNaN | Class::SNaN);
    let b_nan = matches!(cb, Class::QNaN | Class::SNaN);
    let pick = match (a_nan, b_nan) {
        (true, false) => a,
        (false, true) => b,
        _ => {
            if ca == Class::QNaN && cb == Class::SNaN {
                a
            } else if ca == Class::SNaN && cb == Class::QNaN {
                b
            } else {
                larger_nan(a, b)
            }
        }
    };
    (pick.quiet(), ie)
}

fn larger_nan(a: F80, b: F80) -> F80 {
    let (ma, mb) = (a.sig & !(1 << 62), b.sig & !(1 << 62));
    if ma > mb {
        a
    } else if mb > ma {
        b
    } else if a.se < b.se {
        a
    } else {
        b
    }
}

/// A single NaN operand: quieted, IE if it was signalling.
pub fn propagate1(a: F80) -> Res {
    let ie = if a.class() == Class::SNaN { sw::IE } else { 0 };
    (a.quiet(), ie)
}

/// Common checks of a two-operand arithmetic operation. `Err` is the final result (invalid
/// encoding or NaN); `Ok(de)` means both operands are numbers, `de` holding DE if one is a
/// denormal.
#[inline]
pub fn check2(a: F80, b: F80) -> Result<u16, Res> {
    if a.is_normal() && b.is_normal() {
        return Ok(0);
    }
    check2_special(a, b)
}

/// [`check2`] when an operand is not a normal number.
fn check2_special(a: F80, b: F80) -> Result<u16, Res> {
    let (ca, cb) = (a.class(), b.class());
    if ca == Class::Unsupported || cb == Class::Unsupported {
        return Err((F80::INDEFINITE, sw::IE));
    }
    if a.is_nan() || b.is_nan() {
        return Err(propagate2(a, b));
    }
    Ok(if a.is_denormal() || b.is_denormal() {
        sw::DE
    } else {
        0
    })
}

/// One-operand version of [`check2`].
pub fn check1(a: F80) -> Result<u16, Res> {
    match a.class() {
        Class::Unsupported => Err((F80::INDEFINITE, sw::IE)),
        Class::QNaN | Class::SNaN => Err(propagate1(a)),
        Class::Denormal | Class::PseudoDenormal => Ok(sw::DE),
        _ => Ok(0),
    }
}

/// Merge the denormal-operand flag into a result. An unmasked #D stops the operation before
/// it computes anything: only DE is reported (no PE/UE/C1) and the value is not delivered.
#[inline]
pub fn with_de(r: Res, de: u16, env: &Env) -> Res {
    if de != 0 && !env.masked(sw::DE) {
        (r.0, sw::DE)
    } else {
        (r.0, r.1 | de)
    }
}

fn is_zero(a: F80) -> bool {
    a.class() == Class::Zero
}

fn is_inf(a: F80) -> bool {
    a.class() == Class::Infinity
}

/// `a + b` (`negate_b` gives `a - b`), rounded with PC and RC.
pub fn add(a: F80, b: F80, negate_b: bool, env: &Env) -> Res {
    let de = match check2(a, b) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let b = if negate_b { b.negated() } else { b };
    let zero_sign_diff = env.rc == super::float::rc::DOWN;
    if !(a.is_normal() && b.is_normal()) {
        if let Some(r) = add_special(a, b, de, zero_sign_diff, env) {
            return r;
        }
    }
    add_finite(a, b, de, zero_sign_diff, env)
}

/// The cases of [`add`] with an infinity or a zero operand (`None`: both finite non-zero).
fn add_special(a: F80, b: F80, de: u16, zero_sign_diff: bool, env: &Env) -> Option<Res> {
    if is_inf(a) || is_inf(b) {
        if is_inf(a) && is_inf(b) && a.sign() != b.sign() {
            return Some((F80::INDEFINITE, sw::IE | de));
        }
        return Some((if is_inf(a) { a } else { b }, de));
    }
    if is_zero(a) && is_zero(b) {
        let s = if a.sign() == b.sign() {
            a.sign()
        } else {
            zero_sign_diff
        };
        return Some((F80::zero(s), de));
    }
    if is_zero(a) || is_zero(b) {
        // x + 0 = x, rounded to the precision control (a denormal stays denormal).
        let x = if is_zero(a) { b } else { a };
        let u = x.unpack();
        return Some(with_de(
            round_ext(u.sign, u.exp, (u.sig as u128) << 64, env, true),
            de,
            env,
        ));
    }
    None
}

/// [`add`] of two finite non-zero operands.
fn add_finite(a: F80, b: F80, de: u16, zero_sign_diff: bool, env: &Env) -> Res {
    let (ua, ub) = (a.unpack(), b.unpack());
    // Order by magnitude: x is the larger.
    let (x, y) = if (ua.exp, ua.sig) >= (ub.exp, ub.sig) {
        (ua, ub)
    } else {
        (ub, ua)
    };
    let d = (x.exp - y.exp) as u32;
    // Significands at bits 126..63 of a u128 (one bit of headroom for the carry).
    let xs = (x.sig as u128) << 63;
    let ys = shr_jam((y.sig as u128) << 63, d);
    if x.sign == y.sign {
        let s = xs + ys;
        with_de(round_ext(x.sign, x.exp + 1, s, env, true), de, env)
    } else {
        let s = xs - ys;
        if s == 0 {
            return (F80::zero(zero_sign_diff), de);
        }
        with_de(round_ext(x.sign, x.exp + 1, s, env, true), de, env)
    }
}

/// `a * b` rounded with PC and RC.
pub fn mul(a: F80, b: F80, env: &Env) -> Res {
    let de = match check2(a, b) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let sign = a.sign() != b.sign();
    if !(a.is_normal() && b.is_normal()) {
        if is_inf(a) || is_inf(b) {
            if is_zero(a) || is_zero(b) {
                return (F80::INDEFINITE, sw::IE | de);
            }
            return (F80::inf(sign), de);
        }
        if is_zero(a) || is_zero(b) {
            return (F80::zero(sign), de);
        }
    }
    let (ua, ub) = (a.unpack(), b.unpack());
    let p = ua.sig as u128 * ub.sig as u128;
    with_de(round_ext(sign, ua.exp + ub.exp + 1, p, env, true), de, env)
}

/// `a / b` rounded with PC and RC.
pub fn div(a: F80, b: F80, env: &Env) -> Res {
    let de = match check2(a, b) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let sign = a.sign() != b.sign();
    if !(a.is_normal() && b.is_normal()) {
        if is_inf(a) {
            if is_inf(b) {
                return (F80::INDEFINITE, sw::IE | de);
            }
            return (F80::inf(sign), de);
        }
        if is_inf(b) {
            return (F80::zero(sign), de);
        }
        if is_zero(b) {
            if is_zero(a) {
                return (F80::INDEFINITE, sw::IE | de);
            }
            // A denormal dividend raises ZE alone.
            return (F80::inf(sign), sw::ZE);
        }
        if is_zero(a) {
            return (F80::zero(sign), de);
        }
    }
    let (ua, ub) = (a.unpack(), b.unpack());
    let (q, sticky) = div_sig(ua.sig, ub.sig);
    with_de(
        round_ext(sign, ua.exp - ub.exp, q | sticky as u128, env, true),
        de,
        env,
    )
}

/// The quotient of two normalised significands, `a * 2^127 / b` (in [2^126, 2^128)), to 64
/// significant bits and a guard bit, and whether anything is left below those (the sticky
/// bit): enough for every rounding. See [`div_sig_parts`].
pub fn div_sig(a: u64, b: u64) -> (u128, bool) {
    let (q, guard, sticky, a_ge_b) = div_sig_parts(a, b);
    let shift = if a_ge_b { 64 } else { 63 };
    (
        ((q as u128) << shift) | ((guard as u128) << (shift - 1)),
        sticky,
    )
}

/// [`div_sig`] in parts: the 64 quotient bits of `a / b` — one 128/64-bit division, the
/// dividend scaled by 2^63 when `a >= b`, else by 2^64, so that the quotient has exactly 64
/// — the guard bit and the sticky bit (from the remainder), and whether `a >= b`. Also
/// `x87::fast`'s division, which places the bits itself.
#[inline(always)]
pub fn div_sig_parts(a: u64, b: u64) -> (u64, bool, bool, bool) {
    let a_ge_b = a >= b;
    let (hi, lo) = if a_ge_b { (a >> 1, a << 63) } else { (a, 0) };
    let (q, r) = div_128_by_64(hi, lo, b);
    // Guard: 2r >= b; what is left after it: 2r - b or 2r.
    let guard = r >= b - r;
    let rest = if guard { r - (b - r) } else { r };
    (q, guard, rest != 0, a_ge_b)
}

/// Integer square root of a u128 and the remainder.
pub fn isqrt128(n: u128) -> (u64, u128) {
    if n == 0 {
        return (0, 0);
    }
    // Bit-by-bit method.
    let mut rem: u128 = n;
    let mut root: u128 = 0;
    let mut bit: u128 = 1 << ((127 - n.leading_zeros()) & !1);
    while bit != 0 {
        if rem >= root + bit {
            rem -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    (root as u64, rem)
}

/// Square root rounded with PC and RC.
pub fn sqrt(a: F80, env: &Env) -> Res {
    let de = match check1(a) {
        Ok(d) => d,
        Err(r) => return r,
    };
    if is_zero(a) {
        return (a, de);
    }
    if a.sign() {
        // Invalid takes priority: a negative denormal raises IE alone.
        return (F80::INDEFINITE, sw::IE);
    }
    if is_inf(a) {
        return (a, de);
    }
    let u = a.unpack();
    // value = sig * 2^(exp - 63) = n * 2^(exp - 63 - k) with exp - 63 - k even, n normalised
    // into [2^126, 2^128) so that its root has 64 significant bits.
    let k = if u.exp & 1 == 0 { 63 } else { 64 };
    let n = (u.sig as u128) << k;
    let (r, rem) = isqrt128(n);
    // The next bit of the root is 1 iff (r + 1/2)^2 <= n, i.e. rem > r; exact halves cannot occur.
    let round_bit = rem > r as u128;
    let s = ((r as u128) << 64) | ((round_bit as u128) << 63) | (rem != 0) as u128;
    let e = (u.exp - 63 - k) / 2 + 63;
    with_de(round_ext(false, e, s, env, true), de, env)
}
