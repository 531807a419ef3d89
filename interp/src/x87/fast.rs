//! The common case of x87 arithmetic on its own: add, subtract, multiply and divide of two
//! normal numbers whose rounded result is a normal number, on two 64-bit words. Everything
//! else (zeros, denormals, infinities, NaNs, unsupported encodings, underflow, overflow, an
//! exact zero difference) is declined, and the general routines of [`super::arith`] decide it.
//! Where it answers it gives the same value and status bits (PE, C1) as they do: the
//! property tests below compare the two on random operands in every precision and rounding
//! mode. It is what the JIT's x87 helper runs first (a harmonic sum in long double spent
//! ~800 host instructions per iteration in the general path's checks and 128-bit rounding).

use super::arith::div_sig_parts;
use super::float::{round_bits, shr_jam, sw, EXP_BIAS, F80, INT_BIT};
use crate::ops::x87_arith::Op;

/// Largest biased exponent of a finite number.
const EMAX: i32 = 0x7ffe;

/// `a op b` rounded to `prec` bits (24, 53 or 64) in rounding mode `mode`, with the status
/// bits it raises (PE when inexact, C1 when rounded up), or `None` when the general path must
/// decide (see the module comment). Never raises anything but PE and C1, so the caller needs
/// only PE masked to deliver the result.
#[inline(always)]
pub fn arith(op: Op, a: F80, b: F80, prec: u32, mode: u8) -> Option<(F80, u16)> {
    if !(a.is_normal() && b.is_normal()) {
        return None;
    }
    let (ea, eb) = ((a.se & 0x7fff) as i32, (b.se & 0x7fff) as i32);
    let sa = a.se & 0x8000 != 0;
    let sb = b.se & 0x8000 != 0;
    // The exact result (or its first 128 bits and a sticky bit in bit 0): `v` with bit 127
    // set, worth 2^(e - EXP_BIAS).
    let (sign, e, v) = match op {
        Op::Add | Op::Sub => {
            let sb = sb ^ (op == Op::Sub);
            // x: the operand of larger magnitude.
            let a_big = (ea, a.sig) >= (eb, b.sig);
            let (ex, mx, sx, ey, my) = if a_big {
                (ea, a.sig, sa, eb, b.sig)
            } else {
                (eb, b.sig, sb, ea, a.sig)
            };
            let d = (ex - ey) as u32;
            let xs = (mx as u128) << 63;
            // Up to 63 places the shift loses nothing (and is all the common case needs).
            let ys = if d < 64 {
                ((my as u128) << 63) >> d
            } else {
                shr_jam((my as u128) << 63, d)
            };
            let s = if sa == sb { xs + ys } else { xs - ys };
            if s == 0 {
                // x - x: a zero whose sign depends on the rounding mode.
                return None;
            }
            let lz = s.leading_zeros();
            (sx, ex + 1 - lz as i32, s << lz)
        }
        Op::Mul => {
            let p = (a.sig as u128) * (b.sig as u128);
            let lz = p.leading_zeros(); // 0 or 1: both factors are in [2^63, 2^64)
            (sa != sb, ea + eb - EXP_BIAS + 1 - lz as i32, p << lz)
        }
        Op::Div => {
            // 64 quotient bits, bit 63 worth 2^(ea - eb) when a >= b, else 2^(ea - eb - 1).
            let (q, guard, sticky, a_ge_b) = div_sig_parts(a.sig, b.sig);
            let e = ea - eb + EXP_BIAS - !a_ge_b as i32;
            let low = (guard as u128) << 63 | sticky as u128;
            (sa != sb, e, (q as u128) << 64 | low)
        }
    };
    if e < 1 {
        // Tiny before rounding: the general path decides underflow.
        return None;
    }
    round(sign, e, v, prec, mode)
}

/// Round `(-1)^sign * v * 2^(e - EXP_BIAS - 127)` (`v` with bit 127 set, `e >= 1`) to `prec` bits;
/// `None` if it overflows.
#[inline(always)]
fn round(sign: bool, e: i32, v: u128, prec: u32, mode: u8) -> Option<(F80, u16)> {
    let (hi, lo) = ((v >> 64) as u64, v as u64);
    // The kept bits, the first dropped bit (guard) and whether any other is set (sticky), on
    // 64-bit words: `sh` (0, 11 or 40) bits of `hi` and all of `lo` are dropped.
    let sh = 64 - prec;
    let (kept, guard, sticky) = if sh == 0 {
        (hi, lo >> 63 != 0, lo << 1 != 0)
    } else {
        let below = hi << prec;
        (hi >> sh, below >> 63 != 0, (below << 1 != 0) | (lo != 0))
    };
    let (inexact, up) = round_bits(sign, kept, guard, sticky, mode);
    // Carry out of the `prec` bits (all ones rounded up): 1.000… one binade up.
    let carry = up & (kept == u64::MAX >> sh);
    let e = e + carry as i32;
    if e > EMAX {
        return None;
    }
    let sig = if carry {
        INT_BIT
    } else {
        (kept + up as u64) << sh
    };
    let flags = (sw::PE * inexact as u16) | (sw::C1 * up as u16);
    Some((
        F80 {
            se: (sign as u16) << 15 | e as u16,
            sig,
        },
        flags,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x87::arith;
    use crate::x87::float::rc;
    use crate::x87::Env;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// A number in `lo..hi`.
    fn range(r: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
        lo + r.next_u64() % (hi - lo)
    }

    /// The general path's answer with every exception masked.
    fn general(op: Op, a: F80, b: F80, prec: u32, mode: u8) -> (F80, u16) {
        let pc = match prec {
            24 => 0,
            53 => 2,
            _ => 3,
        };
        let env = Env::from_fcw(0x3f | pc << 8 | (mode as u16) << 10);
        match op {
            Op::Add => arith::add(a, b, false, &env),
            Op::Sub => arith::add(a, b, true, &env),
            Op::Mul => arith::mul(a, b, &env),
            Op::Div => arith::div(a, b, &env),
        }
    }

    /// A random operand: mostly normal numbers with exponents spread over the whole range and
    /// clustered near each other and near the extremes, significands with runs of ones and
    /// zeros (carries, ties, exact results), some specials.
    fn operand(r: &mut ChaCha8Rng, near: u16) -> F80 {
        let e = match range(r, 0, 10) {
            0 => range(r, 0, 0x8000) as u16,
            1 => range(r, 1, 80) as u16,
            2 => 0x7ffe - range(r, 0, 80) as u16,
            3 => 0,
            4 => 0x7fff,
            _ => near.wrapping_add(range(r, 0, 140) as u16).wrapping_sub(70) & 0x7fff,
        };
        let sig = match range(r, 0, 6) {
            0 => INT_BIT | (r.next_u64() >> range(r, 1, 64)),
            1 => INT_BIT | (u64::MAX << range(r, 0, 64)),
            2 => INT_BIT,
            3 => r.next_u64(),
            _ => INT_BIT | r.next_u64() & (u64::MAX << range(r, 0, 50)),
        };
        F80 {
            se: (r.next_u64() as u16 & 0x8000) | e,
            sig,
        }
    }

    #[test]
    fn agrees_with_the_general_path_wherever_it_answers() {
        let mut r = ChaCha8Rng::seed_from_u64(87);
        let ops = [Op::Add, Op::Sub, Op::Mul, Op::Div];
        let (mut answered, mut total) = (0u32, 0u32);
        for _ in 0..400_000 {
            let near = range(&mut r, 0, 0x8000) as u16;
            let a = operand(&mut r, near);
            let b = operand(&mut r, a.se & 0x7fff);
            let op = ops[range(&mut r, 0, 4) as usize];
            let prec = [24, 53, 64][range(&mut r, 0, 3) as usize];
            let mode = range(&mut r, 0, 4) as u8;
            total += 1;
            if let Some(got) = arith(op, a, b, prec, mode) {
                answered += 1;
                let want = general(op, a, b, prec, mode);
                assert_eq!(
                    (got.0, got.1),
                    want,
                    "{op:?} {a:?} {b:?} prec {prec} mode {mode}"
                );
            }
        }
        // It must answer the common case (else the test compares nothing).
        assert!(answered > total / 3, "answered {answered} of {total}");
    }

    #[test]
    fn declines_what_the_general_path_must_decide() {
        let one = F80::ONE;
        let max = F80 {
            se: 0x7ffe,
            sig: u64::MAX,
        };
        let min = F80 {
            se: 1,
            sig: INT_BIT,
        };
        let denormal = F80 { se: 0, sig: 1 };
        // x - x (the zero's sign), overflow, underflow, a denormal operand, a zero.
        assert_eq!(arith(Op::Sub, one, one, 64, rc::NEAREST), None);
        assert_eq!(arith(Op::Add, max, max, 64, rc::NEAREST), None);
        assert_eq!(arith(Op::Mul, max, max, 64, rc::ZERO), None);
        assert_eq!(arith(Op::Div, min, max, 64, rc::NEAREST), None);
        assert_eq!(arith(Op::Add, one, denormal, 64, rc::NEAREST), None);
        assert_eq!(arith(Op::Mul, one, F80::ZERO, 64, rc::NEAREST), None);
        // Rounding up to the largest exponent's carry is an overflow too.
        assert_eq!(arith(Op::Add, max, one, 64, rc::UP), None);
        // And answers the plain case: 1 + 1 = 2, exact; 1 / 3 inexact, rounded up at 64 bits.
        let two = F80 {
            se: 0x4000,
            sig: INT_BIT,
        };
        assert_eq!(arith(Op::Add, one, one, 64, rc::NEAREST), Some((two, 0)));
        let three = F80 {
            se: 0x4000,
            sig: 3 << 62,
        };
        let third = arith(Op::Div, one, three, 64, rc::NEAREST).unwrap();
        assert_eq!(third.1, sw::PE | sw::C1);
        assert_eq!({ third.0.sig }, 0xaaaa_aaaa_aaaa_aaab);
    }
}
