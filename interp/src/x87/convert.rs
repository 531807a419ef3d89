//! Conversions between the 80-bit format and binary32/binary64, integers and packed BCD.

use super::arith::{check1, propagate1, with_de, Res};
use super::float::{rc, round, sw, Class, Env, Rounded, DOUBLE, F80, INT_BIT, SINGLE};

/// Widen a binary32/binary64 value (`bits` with `frac` fraction bits and `ebits` exponent
/// bits). Exact; a denormal raises DE, an SNaN raises IE and is quieted.
fn widen(bits: u64, frac: u32, ebits: u32) -> Res {
    let sign = (bits >> (frac + ebits)) & 1 != 0;
    let emax = (1u64 << ebits) - 1;
    let e = (bits >> frac) & emax;
    let f = bits & ((1u64 << frac) - 1);
    let bias = (emax >> 1) as i32;
    let s = if sign { 0x8000 } else { 0 };
    if e == emax {
        let sig = INT_BIT | (f << (63 - frac));
        if f == 0 {
            return (F80::inf(sign), 0);
        }
        // A NaN keeps its kind here; loads quiet it (see `load_f32`/`load_f64`).
        return (
            F80 {
                se: s | 0x7fff,
                sig,
            },
            0,
        );
    }
    if e == 0 {
        if f == 0 {
            return (F80::zero(sign), 0);
        }
        let lz = f.leading_zeros();
        let sig = f << lz;
        // value = f * 2^(1 - bias - frac); bit 63 of sig has exponent (63 - lz) + 1 - bias - frac.
        let ue = (63 - lz as i32) + 1 - bias - frac as i32;
        return (
            F80 {
                se: s | (ue + 16383) as u16,
                sig,
            },
            sw::DE,
        );
    }
    let ue = e as i32 - bias;
    (
        F80 {
            se: s | (ue + 16383) as u16,
            sig: INT_BIT | (f << (63 - frac)),
        },
        0,
    )
}

/// A binary32 operand as an exact 80-bit value (an SNaN stays signalling) and DE for a
/// denormal.
pub fn from_f32(bits: u32) -> Res {
    widen(bits as u64, 23, 8)
}

/// A binary64 operand, as [`from_f32`].
pub fn from_f64(bits: u64) -> Res {
    widen(bits, 52, 11)
}

/// FLD m32/m64 semantics of a widened operand: an SNaN raises IE and is quieted.
pub fn load_widened(r: Res) -> Res {
    let (v, f) = r;
    if v.class() == Class::SNaN {
        (v.quiet(), f | sw::IE)
    } else {
        (v, f)
    }
}

/// Narrow to a binary format: returns the rounded result (to encode) or the NaN/invalid bits.
fn narrow(a: F80, env: &Env, fmt: super::float::Format) -> Result<(Rounded, u16), (u64, u16)> {
    let (frac, ebits) = if fmt == SINGLE { (23, 8) } else { (52, 11) };
    let inf_bits = ((1u64 << ebits) - 1) << frac;
    let sbit = (a.sign() as u64) << (frac + ebits);
    match a.class() {
        Class::Unsupported => return Err((sbit | inf_bits | (1 << (frac - 1)), sw::IE)),
        Class::QNaN | Class::SNaN => {
            let (q, f) = propagate1(a);
            return Err((sbit | inf_bits | ((q.sig << 1) >> (64 - frac)), f));
        }
        Class::Infinity => return Err((sbit | inf_bits, 0)),
        Class::Zero => return Err((sbit, 0)),
        _ => {}
    }
    // Stores never raise DE (a denormal source is just a small number here).
    let u = a.unpack();
    let mut r = round(u.sign, u.exp, (u.sig as u128) << 64, fmt, env.rc, env.masks);
    // An unmasked overflow/underflow stores nothing and reports only OE/UE (no PE, C1 = 0).
    let ou = r.flags & (sw::OE | sw::UE) & !env.masks;
    if ou != 0 {
        r.flags = ou;
    }
    Ok((r, 0))
}

/// FST m32: (bits, flags). With an unmasked IE/DE/OE/UE the caller stores nothing.
pub fn to_f32(a: F80, env: &Env) -> (u32, u16) {
    // Unsupported encodings store the negative indefinite.
    if a.class() == Class::Unsupported {
        return (0xffc0_0000, sw::IE);
    }
    match narrow(a, env, SINGLE) {
        Ok((r, de)) => (r.to_f32(), r.flags | de),
        Err((b, f)) => (b as u32, f),
    }
}

/// FST m64.
pub fn to_f64(a: F80, env: &Env) -> (u64, u16) {
    if a.class() == Class::Unsupported {
        return (0xfff8_0000_0000_0000, sw::IE);
    }
    match narrow(a, env, DOUBLE) {
        Ok((r, de)) => (r.to_f64(), r.flags | de),
        Err((b, f)) => (b, f),
    }
}

/// FILD: exact.
pub fn from_i64(v: i64) -> F80 {
    if v == 0 {
        return F80::ZERO;
    }
    let sign = v < 0;
    let m = v.unsigned_abs();
    let lz = m.leading_zeros();
    F80 {
        se: if sign { 0x8000 } else { 0 } | (16383 + 63 - lz) as u16,
        sig: m << lz,
    }
}

/// Round a finite value to an integer value in mode `mode`: (integer magnitude as u128 with
/// saturation at 2^64 and above, inexact, rounded up in magnitude). `None` for huge values.
fn round_int(a: F80, mode: u8) -> (Option<u128>, bool, bool) {
    if a.class() == Class::Zero {
        return (Some(0), false, false);
    }
    let u = a.unpack();
    if u.exp >= 64 {
        return (None, false, false);
    }
    if u.exp < -1 {
        // |a| < 1/2: the integer part is 0 and everything is the fraction.
        let up = match mode {
            rc::DOWN => u.sign,
            rc::UP => !u.sign,
            _ => false,
        };
        return (Some(up as u128), true, up);
    }
    // Fixed point with 64 fraction bits: sig * 2^(exp - 63) = v * 2^-64 -> v = sig << (exp + 1).
    let v = (u.sig as u128) << (u.exp + 1) as u32;
    let int = v >> 64;
    let frac = v as u64;
    let half = 1u64 << 63;
    let up = match mode {
        rc::NEAREST => frac > half || (frac == half && int & 1 == 1),
        rc::DOWN => u.sign && frac != 0,
        rc::UP => !u.sign && frac != 0,
        _ => false,
    };
    (Some(int + up as u128), frac != 0, up)
}

/// FIST/FISTP/FISTTP to a `bits`-wide integer (16, 32, 64) with rounding mode `mode`:
/// (value, flags). Out of range, NaN, infinity and unsupported give IE and the integer
/// indefinite (only stored when IE is masked).
pub fn to_int(a: F80, bits: u32, mode: u8, env: &Env) -> (u64, u16) {
    let indef = 1u64 << (bits - 1);
    // Integer stores never raise DE.
    if check1(a).is_err() {
        return (indef, sw::IE);
    }
    if a.class() == Class::Infinity {
        return (indef, sw::IE);
    }
    let (v, inexact, up) = round_int(a, mode);
    let v = match v {
        Some(v) => v,
        None => return (indef, sw::IE),
    };
    let neg = a.sign();
    let max = if neg {
        1u128 << (bits - 1)
    } else {
        (1u128 << (bits - 1)) - 1
    };
    if v > max {
        return (indef, sw::IE);
    }
    let r = if neg {
        (v as u64).wrapping_neg()
    } else {
        v as u64
    };
    let mut f = 0;
    if inexact {
        f |= sw::PE;
        if up {
            f |= sw::C1;
        }
    }
    let _ = env;
    (r & (u64::MAX >> (64 - bits)), f)
}

/// FRNDINT: round to an integral value in the RC mode (not PC).
pub fn round_to_int(a: F80, env: &Env) -> Res {
    let de = match check1(a) {
        Ok(d) => d,
        Err(r) => return r,
    };
    match a.class() {
        Class::Zero | Class::Infinity => return (a, de),
        _ => {}
    }
    if a.unpack().exp >= 63 {
        return with_de((a, 0), de, env);
    }
    let (v, inexact, up) = round_int(a, env.rc);
    let v = v.unwrap_or(0) as u64;
    let mut r = from_i64(0);
    if v != 0 {
        let lz = v.leading_zeros();
        r = F80 {
            se: (16383 + 63 - lz) as u16,
            sig: v << lz,
        };
    }
    r = r.with_sign(a.sign());
    let mut f = 0;
    if inexact {
        f |= sw::PE;
        if up {
            f |= sw::C1;
        }
    }
    with_de((r, f), de, env)
}

/// FBLD: 18 packed BCD digits and a sign byte. Exact for valid digits; invalid digit nibbles
/// (A-F) are combined arithmetically like valid ones (digit * 10^k), as this host does.
pub fn from_bcd(b: &[u8; 10]) -> F80 {
    let mut v: u64 = 0;
    for i in (0..9).rev() {
        let hi = (b[i] >> 4) as u64;
        let lo = (b[i] & 15) as u64;
        v = v.wrapping_mul(10).wrapping_add(hi);
        v = v.wrapping_mul(10).wrapping_add(lo);
    }
    let r = if v == 0 {
        F80::ZERO
    } else {
        let lz = v.leading_zeros();
        F80 {
            se: (16383 + 63 - lz) as u16,
            sig: v << lz,
        }
    };
    r.with_sign(b[9] & 0x80 != 0)
}

/// The packed-BCD indefinite.
pub const BCD_INDEFINITE: [u8; 10] = [0, 0, 0, 0, 0, 0, 0, 0xc0, 0xff, 0xff];

/// FBSTP: round in the RC mode, then encode 18 digits; out of range or not a number -> IE.
pub fn to_bcd(a: F80, env: &Env) -> ([u8; 10], u16) {
    if check1(a).is_err() {
        return (BCD_INDEFINITE, sw::IE);
    }
    if a.class() == Class::Infinity {
        return (BCD_INDEFINITE, sw::IE);
    }
    let (v, inexact, up) = round_int(a, env.rc);
    let v = match v {
        Some(v) if v < 1_000_000_000_000_000_000 => v as u64,
        _ => return (BCD_INDEFINITE, sw::IE),
    };
    let mut out = [0u8; 10];
    let mut x = v;
    for o in out.iter_mut().take(9) {
        let lo = (x % 10) as u8;
        x /= 10;
        let hi = (x % 10) as u8;
        x /= 10;
        *o = (hi << 4) | lo;
    }
    out[9] = if a.sign() { 0x80 } else { 0 };
    let mut f = 0;
    if inexact {
        f |= sw::PE;
        if up {
            f |= sw::C1;
        }
    }
    (out, f)
}
