//! The other numeric x87 operations: comparisons and classification, FSCALE, FXTRACT,
//! FPREM/FPREM1, and the constants of FLDPI and friends.

use super::arith::{check2, with_de, Res};
use super::float::{rc, round, sw, Class, Env, EXT, F80};

/// Outcome of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ordering {
    Greater,
    Less,
    Equal,
    Unordered,
}

impl Ordering {
    /// C3/C2/C0 in status-word positions.
    pub fn cc(self) -> u16 {
        match self {
            Ordering::Greater => 0,
            Ordering::Less => sw::C0,
            Ordering::Equal => sw::C3,
            Ordering::Unordered => sw::C3 | sw::C2 | sw::C0,
        }
    }

    /// ZF/PF/CF (FCOMI and friends) as RFLAGS bits.
    pub fn eflags(self) -> u64 {
        use crate::state::flags::{CF, PF, ZF};
        match self {
            Ordering::Greater => 0,
            Ordering::Less => CF,
            Ordering::Equal => ZF,
            Ordering::Unordered => ZF | PF | CF,
        }
    }
}

/// Compare `a` with `b`. `quiet` (FUCOM*) raises IE only for SNaNs; otherwise any NaN raises
/// IE. Unsupported encodings raise IE either way. Returns the ordering and DE/IE flags.
pub fn compare(a: F80, b: F80, quiet: bool, env: &Env) -> (Ordering, u16) {
    let (ca, cb) = (a.class(), b.class());
    if ca == Class::Unsupported || cb == Class::Unsupported {
        return (Ordering::Unordered, sw::IE);
    }
    if a.is_nan() || b.is_nan() {
        let snan = ca == Class::SNaN || cb == Class::SNaN;
        let ie = if snan || !quiet { sw::IE } else { 0 };
        return (Ordering::Unordered, ie);
    }
    let de = if a.is_denormal() || b.is_denormal() {
        sw::DE
    } else {
        0
    };
    (order(a, b), with_de((F80::ZERO, 0), de, env).1)
}

/// Numeric order of two numbers (not NaN, not unsupported).
fn order(a: F80, b: F80) -> Ordering {
    use core::cmp::Ordering as O;
    let za = a.class() == Class::Zero;
    let zb = b.class() == Class::Zero;
    if za && zb {
        return Ordering::Equal;
    }
    let key = |x: F80, z: bool| -> (i32, u64) {
        if z {
            (i32::MIN, 0)
        } else if x.class() == Class::Infinity {
            (i32::MAX, 0)
        } else {
            let u = x.unpack();
            (u.exp, u.sig)
        }
    };
    let mag = key(a, za).cmp(&key(b, zb));
    let (pa, pb) = (za || !a.sign(), zb || !b.sign());
    let o = match (pa, pb) {
        (true, false) => O::Greater,
        (false, true) => O::Less,
        (true, true) => mag,
        (false, false) => mag.reverse(),
    };
    match o {
        O::Greater => Ordering::Greater,
        O::Less => Ordering::Less,
        O::Equal => Ordering::Equal,
    }
}

/// FXAM classification of a non-empty register: C3, C2, C0 and C1 (the sign).
pub fn examine(a: F80) -> u16 {
    let c1 = if a.sign() { sw::C1 } else { 0 };
    c1 | match a.class() {
        Class::Unsupported => 0,
        Class::QNaN | Class::SNaN => sw::C0,
        Class::Normal => sw::C2,
        Class::Infinity => sw::C2 | sw::C0,
        Class::Zero => sw::C3,
        Class::Denormal | Class::PseudoDenormal => sw::C3 | sw::C2,
    }
}

/// FXAM of an empty register (C1 still shows the register's sign bit).
pub const EXAMINE_EMPTY: u16 = sw::C3 | sw::C0;

/// FSCALE: `a * 2^trunc(b)`, rounded to 64 bits in the RC mode.
pub fn scale(a: F80, b: F80, env: &Env) -> Res {
    let de = match check2(a, b) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let (ca, cb) = (a.class(), b.class());
    if cb == Class::Infinity {
        return match (ca, b.sign()) {
            (Class::Infinity, true) | (Class::Zero, false) => (F80::INDEFINITE, sw::IE),
            (_, true) => with_de((F80::zero(a.sign()), 0), de, env),
            (_, false) => with_de((F80::inf(a.sign()), 0), de, env),
        };
    }
    if ca == Class::Zero || ca == Class::Infinity || cb == Class::Zero {
        return with_de((canonical(a), 0), de, env);
    }
    // trunc(b), clamped far beyond any result range.
    let n: i32 = if cb == Class::Zero {
        0
    } else {
        let u = b.unpack();
        let m = if u.exp < 0 {
            0
        } else if u.exp > 20 {
            1 << 20
        } else {
            (u.sig >> (63 - u.exp)) as i32
        };
        if u.sign {
            -m
        } else {
            m
        }
    };
    let u = a.unpack();
    let r = round(
        u.sign,
        u.exp + n,
        (u.sig as u128) << 64,
        EXT,
        env.rc,
        env.masks,
    );
    with_de((r.to_f80(), r.flags), de, env)
}

/// FXTRACT: (exponent as a value, significand with exponent 0, flags). Zero raises ZE and
/// gives (-inf, the zero); infinity gives (+inf, the infinity).
pub fn extract(a: F80, env: &Env) -> (F80, F80, u16) {
    match a.class() {
        Class::Unsupported => return (F80::INDEFINITE, F80::INDEFINITE, sw::IE),
        Class::QNaN | Class::SNaN => {
            let (q, f) = super::arith::propagate1(a);
            return (q, q, f);
        }
        Class::Zero => return (F80::inf(true), a, sw::ZE),
        Class::Infinity => return (F80::inf(false), a, 0),
        _ => {}
    }
    let de = if a.is_denormal() { sw::DE } else { 0 };
    if de != 0 && !env.masked(sw::DE) {
        return (a, a, sw::DE);
    }
    let u = a.unpack();
    let e = super::convert::from_i64(u.exp as i64);
    let s = F80 {
        se: 0x3fff | if u.sign { 0x8000 } else { 0 },
        sig: u.sig,
    };
    (e, s, de)
}

/// A pseudo-denormal re-encoded with exponent field 1 (the same value); anything else as is.
pub fn canonical(a: F80) -> F80 {
    if a.class() == Class::PseudoDenormal {
        F80 {
            se: a.se | 1,
            sig: a.sig,
        }
    } else {
        a
    }
}

/// A finite non-zero operand delivered as the result: re-encoded (a pseudo-denormal gets
/// exponent field 1) and, if tiny, subject to the underflow response like any result.
fn unchanged(a: F80, env: &Env) -> Res {
    let u = a.unpack();
    let r = round(
        u.sign,
        u.exp,
        (u.sig as u128) << 64,
        EXT,
        rc::NEAREST,
        env.masks,
    );
    (r.to_f80(), r.flags & !sw::C1)
}

/// FPREM (`ieee` = false, truncating quotient) and FPREM1 (`ieee`, round-to-nearest quotient):
/// (remainder, flags incl. C2 for a partial remainder and C0/C3/C1 = quotient bits 2/1/0).
pub fn prem(a: F80, b: F80, ieee: bool, env: &Env) -> Res {
    let de = match check2(a, b) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let (ca, cb) = (a.class(), b.class());
    if ca == Class::Infinity || cb == Class::Zero {
        return (F80::INDEFINITE, sw::IE);
    }
    if ca == Class::Zero {
        return with_de((a, 0), de, env);
    }
    if cb == Class::Infinity {
        // Returned as it is (no underflow response, unlike the d < -1 case below).
        return with_de((canonical(a), 0), de, env);
    }
    let (ua, ub) = (a.unpack(), b.unpack());
    let d = ua.exp - ub.exp;
    if d >= 64 {
        // Partial remainder: reduce by an exponent difference of n = 32..63.
        let n = (d & 31) | 32;
        let num = (ua.sig as u128) << n as u32;
        let r = num % ub.sig as u128;
        let out = round(
            ua.sign,
            ub.exp + (d - n),
            r << 64,
            EXT,
            rc::NEAREST,
            env.masks,
        );
        return with_de((out.to_f80(), (out.flags & !sw::C1) | sw::C2), de, env);
    }
    if d < -1 {
        return with_de(unchanged(a, env), de, env);
    }
    // |a| = num * 2^(eb - 64), |b| = den * 2^(eb - 64).
    let (num, den) = if d >= 0 {
        ((ua.sig as u128) << (d as u32 + 1), (ub.sig as u128) << 1)
    } else {
        (ua.sig as u128, (ub.sig as u128) << 1)
    };
    let mut q = num / den;
    let mut r = num % den;
    let mut sign = ua.sign;
    if ieee && (2 * r > den || (2 * r == den && q & 1 == 1)) {
        q += 1;
        r = den - r;
        sign = !sign;
    }
    let qf = (if q & 4 != 0 { sw::C0 } else { 0 })
        | (if q & 2 != 0 { sw::C3 } else { 0 })
        | (if q & 1 != 0 { sw::C1 } else { 0 });
    if r == 0 {
        return with_de((F80::zero(ua.sign), qf), de, env);
    }
    // value = r * 2^(eb - 64) = (r << 63) * 2^(E - 127) with E = eb (r < 2^65).
    let out = round(sign, ub.exp, r << 63, EXT, rc::NEAREST, env.masks);
    with_de((out.to_f80(), (out.flags & !sw::C1) | qf), de, env)
}

/// A constant of FLDL2T/FLDL2E/FLDPI/FLDLG2/FLDLN2 rounded in the RC mode: `g` = 1 if the
/// exact value lies below the midpoint after the 64-bit significand, 3 above (never exact,
/// never a tie). This host rounds correctly (FLDLG2 in round-to-nearest gives ..F799).
fn constant(se: u16, sig: u64, g: u8, mode: u8) -> F80 {
    let up = match mode {
        rc::NEAREST => g == 3 || (g == 2 && sig & 1 == 1),
        rc::UP => g != 0,
        _ => false,
    };
    F80 {
        se,
        sig: sig + up as u64,
    }
}

pub fn const_l2t(mode: u8) -> F80 {
    constant(0x4000, 0xd49a_784b_cd1b_8afe, 1, mode)
}
pub fn const_l2e(mode: u8) -> F80 {
    constant(0x3fff, 0xb8aa_3b29_5c17_f0bb, 3, mode)
}
pub fn const_pi(mode: u8) -> F80 {
    constant(0x4000, 0xc90f_daa2_2168_c234, 3, mode)
}
pub fn const_lg2(mode: u8) -> F80 {
    constant(0x3ffd, 0x9a20_9a84_fbcf_f798, 3, mode)
}
pub fn const_ln2(mode: u8) -> F80 {
    constant(0x3ffe, 0xb172_17f7_d1cf_79ab, 3, mode)
}
