//! x87 transcendentals (FSIN, FCOS, FSINCOS, FPTAN, FPATAN, F2XM1, FYL2X, FYL2XP1) in
//! soft-float: each function is evaluated in a 120-bit binary floating-point format
//! (`rustc_apfloat` with custom semantics, so no host floating point is involved) and rounded
//! once to the 64-bit significand in the RC mode (precision control does not apply).
//!
//! Like the hardware, the trigonometric functions reduce their argument by a 66-bit
//! approximation of pi (0xC90FDAA22168C234C * 2^-66), so large arguments give this host's
//! results rather than the mathematically exact ones. Results are within one unit in the
//! last place of the host's; docs/x87.md gives the measured distribution.

use super::arith::{check1, check2, with_de, Res};
use super::float::{round, sw, Class, Env, EXT, F80};
use rustc_apfloat::ieee::{IeeeFloat, Semantics};
use rustc_apfloat::{Float, Round};
use std::sync::OnceLock;

/// The evaluation format: 120-bit significand (one apfloat limb with the headroom its
/// division needs), wide exponent.
pub struct WideS;

impl Semantics for WideS {
    const BITS: usize = 1 + 20 + 119;
    const EXP_BITS: usize = 20;
    const PRECISION: usize = 120;
}

type W = IeeeFloat<WideS>;

const RN: Round = Round::NearestTiesToEven;

fn w(v: u128) -> W {
    W::from_u128(v).value
}

fn add(a: W, b: W) -> W {
    a.add_r(b, RN).value
}

fn sub(a: W, b: W) -> W {
    a.sub_r(b, RN).value
}

fn mul(a: W, b: W) -> W {
    a.mul_r(b, RN).value
}

fn div(a: W, b: W) -> W {
    a.div_r(b, RN).value
}

/// An 80-bit finite value exactly.
fn from_f80(a: F80) -> W {
    if a.class() == Class::Zero {
        return W::ZERO;
    }
    let u = a.unpack();
    let v = w(u.sig as u128).scalbn(u.exp - 63);
    if u.sign {
        -v
    } else {
        v
    }
}

/// Round a wide value to the 80-bit format in the RC mode (masks apply as for any result).
fn to_f80(v: W, env: &Env) -> Res {
    if v.is_zero() {
        return (F80::zero(v.is_negative()), 0);
    }
    if v.is_nan() {
        return (F80::INDEFINITE, sw::IE);
    }
    if v.is_infinite() {
        let r = round(v.is_negative(), 1 << 20, 1 << 127, EXT, env.rc, env.masks);
        return (r.to_f80(), r.flags);
    }
    let e = v.ilogb();
    let m = v.abs().scalbn(127 - e);
    let mut exact = false;
    let sig = m.to_u128_r(128, Round::TowardZero, &mut exact).value;
    let sig = sig | (!exact) as u128;
    let r = round(v.is_negative(), e, sig, EXT, env.rc, env.masks);
    // A transcendental result is never exact (the caller handles the exact special cases),
    // even where the 120-bit value happens to be: PE always, and UE for a tiny result.
    let mut flags = r.flags | sw::PE;
    if env.masked(sw::UE) && !r.inf && r.sig & super::float::INT_BIT == 0 {
        flags |= sw::UE;
    }
    (r.to_f80(), flags)
}

/// Sum of a series whose terms come from `next(k, term)`, until the terms no longer matter.
fn series(first: W, mut next: impl FnMut(u32, W) -> W) -> W {
    let mut sum = first;
    let mut term = first;
    if first.is_zero() {
        return first;
    }
    for k in 1..400 {
        term = next(k, term);
        if term.is_zero() || term.ilogb() < sum.ilogb().saturating_sub(125) {
            break;
        }
        sum = add(sum, term);
    }
    sum
}

/// atanh(z) = z + z^3/3 + z^5/5 + ... for |z| < 1/2.
fn atanh(z: W) -> W {
    let z2 = mul(z, z);
    let mut pow = z;
    series(z, |k, _| {
        pow = mul(pow, z2);
        div(pow, w(2 * k as u128 + 1))
    })
}

/// atan(z) = z - z^3/3 + z^5/5 - ... for small |z|.
fn atan_small(z: W) -> W {
    let z2 = -mul(z, z);
    let mut pow = z;
    series(z, |k, _| {
        pow = mul(pow, z2);
        div(pow, w(2 * k as u128 + 1))
    })
}

struct Consts {
    ln2: W,
    pi: W,
    /// The hardware's 66-bit pi, exactly.
    pi66: W,
}

fn consts() -> &'static Consts {
    static C: OnceLock<Consts> = OnceLock::new();
    C.get_or_init(|| {
        let third = div(w(1), w(3));
        let ln2 = mul(w(2), atanh(third));
        // Machin: pi = 16 atan(1/5) - 4 atan(1/239).
        let a5 = atan_small(div(w(1), w(5)));
        let a239 = atan_small(div(w(1), w(239)));
        let pi = sub(mul(w(16), a5), mul(w(4), a239));
        let pi66 = w(0xc_90fd_aa22_168c_234c).scalbn(-66);
        Consts { ln2, pi, pi66 }
    })
}

/// Square root by Newton's iteration (x > 0).
fn sqrt(x: W) -> W {
    let mut r = w(1).scalbn(x.ilogb() / 2);
    for _ in 0..12 {
        r = div(add(r, div(x, r)), w(2));
    }
    r
}

/// Natural logarithm of a finite x > 0.
fn ln(x: W) -> W {
    let mut e = x.ilogb();
    let mut m = x.scalbn(-e);
    // Centre the mantissa around 1: [0.707, 1.414).
    if m > div(w(99), w(70)) {
        m = m.scalbn(-1);
        e += 1;
    }
    let z = div(sub(m, w(1)), add(m, w(1)));
    let l = mul(w(2), atanh(z));
    let ew = W::from_i128(e as i128).value;
    add(l, mul(ew, consts().ln2))
}

/// exp(y) - 1 for |y| <= 1.
fn expm1(y: W) -> W {
    series(y, |k, t| div(mul(t, y), w(k as u128 + 1)))
}

/// sin(r) and cos(r) for |r| <= pi/4.
fn sin_cos(r: W) -> (W, W) {
    let r2 = -mul(r, r);
    let s = series(r, |k, t| {
        div(mul(t, r2), w((2 * k as u128) * (2 * k as u128 + 1)))
    });
    let c = series(w(1), |k, t| {
        div(mul(t, r2), w((2 * k as u128 - 1) * (2 * k as u128)))
    });
    (s, c)
}

/// atan(t) for |t| <= 1 by three argument halvings.
fn atan_unit(t: W) -> W {
    let mut z = t;
    for _ in 0..3 {
        // atan(z) = 2 atan(z / (1 + sqrt(1 + z^2)))
        z = div(z, add(w(1), sqrt(add(w(1), mul(z, z)))));
    }
    atan_small(z).scalbn(3)
}

/// Reduce x by multiples of pi66/2: (r, quadrant k mod 4), |r| <= pi66/4.
fn reduce(x: W) -> (W, u32) {
    let half_pi = consts().pi66.scalbn(-1);
    let q = div(x, half_pi).round_to_integral(RN).value;
    let mut exact = false;
    let k = q.to_i128_r(128, Round::TowardZero, &mut exact).value;
    // x - k * pi66/2 with pi66/2 split into two 33-bit halves: every product and the first
    // difference are exact in 120 bits, so only the final subtraction rounds.
    let p = 0xc_90fd_aa22_168c_234cu128 >> 2; // pi66 * 2^64 (66 bits)
    let hi = w(p >> 33 << 33).scalbn(-65);
    let lo = w(p & ((1 << 33) - 1)).scalbn(-65);
    let r = sub(sub(x, mul(q, hi)), mul(q, lo));
    (r, (k & 3) as u32)
}

/// Is |a| < 2^63 (the trigonometric instructions' operand range)?
fn in_trig_range(a: F80) -> bool {
    a.exp() < 0x3fff + 63
}

/// Outcome of a trigonometric instruction.
pub enum Trig {
    /// Operand out of range: C2 = 1, nothing changes.
    OutOfRange,
    /// (value, flags) results: one for FSIN/FCOS/FPTAN(tan), two for FSINCOS (sin, cos).
    Done(Res, Option<Res>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrigOp {
    Sin,
    Cos,
    SinCos,
    Tan,
}

/// FSIN, FCOS, FSINCOS, FPTAN on ST(0).
pub fn trig(a: F80, op: TrigOp, env: &Env) -> Trig {
    let de = match check1(a) {
        Ok(d) => d,
        Err(r) => {
            return Trig::Done(r, (op == TrigOp::SinCos).then_some(r));
        }
    };
    match a.class() {
        Class::Infinity => {
            let r = (F80::INDEFINITE, sw::IE);
            return Trig::Done(r, (op == TrigOp::SinCos).then_some(r));
        }
        Class::Zero => {
            let z = (a, 0);
            let one = (F80::ONE, 0);
            return Trig::Done(
                match op {
                    TrigOp::Cos => one,
                    _ => z,
                },
                (op == TrigOp::SinCos).then_some(one),
            );
        }
        _ => {}
    }
    if !in_trig_range(a) {
        return Trig::OutOfRange;
    }
    let x = from_f80(a);
    let (r, k) = reduce(x);
    let (s, c) = sin_cos(r);
    let (sin, cos) = match k {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    };
    let fin = |v: W| with_de(to_f80(v, env), de, env);
    match op {
        TrigOp::Sin => Trig::Done(fin(sin), None),
        TrigOp::Cos => Trig::Done(fin(cos), None),
        TrigOp::SinCos => Trig::Done(fin(sin), Some(fin(cos))),
        TrigOp::Tan => Trig::Done(fin(div(sin, cos)), None),
    }
}

/// F2XM1: 2^x - 1 (defined for -1 <= x <= 1).
pub fn f2xm1(a: F80, env: &Env) -> Res {
    let de = match check1(a) {
        Ok(d) => d,
        Err(r) => return r,
    };
    match a.class() {
        Class::Zero => return (a, 0),
        Class::Infinity => {
            return if a.sign() {
                (F80::ONE.negated(), 0)
            } else {
                (a, 0)
            }
        }
        _ => {}
    }
    let x = from_f80(a);
    let v = if a.exp() < 0x3fff || x.abs() == w(1) {
        // The architectural domain |x| <= 1: exp(x ln2) - 1 without cancellation.
        expm1(mul(x, consts().ln2))
    } else if a.exp() > 0x3fff + 15 {
        // Far outside the domain: 2^x - 1 is -1 or overflows.
        if a.sign() {
            -w(1)
        } else {
            w(1).scalbn(1 << 16)
        }
    } else {
        // Outside the domain the hardware result is undefined; give 2^x - 1.
        let n = x.round_to_integral(RN).value;
        let f = sub(x, n);
        let mut exact = false;
        let k = n.to_i128_r(32, Round::TowardZero, &mut exact).value as i32;
        let p = add(expm1(mul(f, consts().ln2)), w(1)).scalbn(k);
        sub(p, w(1))
    };
    with_de(to_f80(v, env), de, env)
}

/// FYL2X: y * log2(x) with x = ST(0), y = ST(1).
pub fn fyl2x(x: F80, y: F80, env: &Env) -> Res {
    let de = match check2(x, y) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let (cx, cy) = (x.class(), y.class());
    let ys = y.sign();
    if x.sign() && cx != Class::Zero {
        return (F80::INDEFINITE, sw::IE);
    }
    if cx == Class::Zero {
        return match cy {
            Class::Zero => (F80::INDEFINITE, sw::IE),
            Class::Infinity => (F80::inf(!ys), 0),
            // Like a division by zero: ZE alone, even for a denormal y.
            _ => (F80::inf(!ys), sw::ZE),
        };
    }
    if cx == Class::Infinity {
        return match cy {
            Class::Zero => (F80::INDEFINITE, sw::IE),
            _ => with_de((F80::inf(ys), 0), de, env),
        };
    }
    let is_one = x == F80::ONE;
    if cy == Class::Infinity {
        if is_one {
            return (F80::INDEFINITE, sw::IE);
        }
        let below_one = x.exp() < 0x3fff;
        return with_de((F80::inf(ys != below_one), 0), de, env);
    }
    if is_one {
        return with_de((F80::zero(ys), 0), de, env);
    }
    if cy == Class::Zero {
        let below_one = x.exp() < 0x3fff;
        return with_de((F80::zero(ys != below_one), 0), de, env);
    }
    let l = div(ln(from_f80(x)), consts().ln2);
    with_de(to_f80(mul(from_f80(y), l), env), de, env)
}

/// FYL2XP1: y * log2(x + 1) with x = ST(0), y = ST(1) (defined for |x| < 1 - sqrt(2)/2).
pub fn fyl2xp1(x: F80, y: F80, env: &Env) -> Res {
    let de = match check2(x, y) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let (cx, cy) = (x.class(), y.class());
    if (cx == Class::Infinity && (x.sign() || cy == Class::Zero))
        || (cy == Class::Infinity && cx == Class::Zero)
    {
        return (F80::INDEFINITE, sw::IE);
    }
    if cx == Class::Infinity {
        return with_de((F80::inf(y.sign()), 0), de, env);
    }
    if cx == Class::Zero || cy == Class::Zero {
        return with_de((F80::zero(x.sign() != y.sign()), 0), de, env);
    }
    if cy == Class::Infinity {
        return with_de((F80::inf(x.sign() != y.sign()), 0), de, env);
    }
    let xw = from_f80(x);
    let onep = add(w(1), xw);
    if onep.is_negative() || onep.is_zero() {
        return (F80::INDEFINITE, sw::IE);
    }
    // ln(1 + x) = 2 atanh(x / (2 + x)).
    let l = mul(w(2), atanh(div(xw, add(w(2), xw))));
    let l = div(l, consts().ln2);
    with_de(to_f80(mul(from_f80(y), l), env), de, env)
}

/// FPATAN: atan2(y, x) with x = ST(0), y = ST(1).
pub fn fpatan(x: F80, y: F80, env: &Env) -> Res {
    let de = match check2(x, y) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let c = consts();
    let (cx, cy) = (x.class(), y.class());
    let ys = y.sign();
    let signed = |v: W| if ys { -v } else { v };
    let pi = c.pi;
    // Special cases of atan2.
    let special = match (cx, cy) {
        (_, Class::Zero) => Some(if x.sign() {
            signed(pi)
        } else {
            return with_de((F80::zero(ys), 0), de, env);
        }),
        (Class::Zero, _) => Some(signed(pi.scalbn(-1))),
        (Class::Infinity, Class::Infinity) => Some(signed(if x.sign() {
            mul(pi, div(w(3), w(4)))
        } else {
            pi.scalbn(-2)
        })),
        (Class::Infinity, _) => {
            if x.sign() {
                Some(signed(pi))
            } else {
                return with_de((F80::zero(ys), 0), de, env);
            }
        }
        (_, Class::Infinity) => Some(signed(pi.scalbn(-1))),
        _ => None,
    };
    if let Some(v) = special {
        return with_de(to_f80(v, env), de, env);
    }
    let (xw, yw) = (from_f80(x).abs(), from_f80(y).abs());
    // atan(|y|/|x|) via atan(t) for t <= 1, or pi/2 - atan(1/t).
    let mut v = if yw <= xw {
        atan_unit(div(yw, xw))
    } else {
        sub(pi.scalbn(-1), atan_unit(div(xw, yw)))
    };
    if x.sign() {
        v = sub(pi, v);
    }
    with_de(to_f80(signed(v), env), de, env)
}
