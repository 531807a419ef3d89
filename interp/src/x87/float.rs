//! The 80-bit extended-precision value, its encodings (incl. the pseudo-denormals, unnormals,
//! pseudo-NaNs and pseudo-infinities that only the x87 has), and the one rounding routine
//! every result goes through (precision control, rounding control, tininess, the masked and
//! unmasked underflow/overflow responses, the C1 round-up indicator).

/// Status-word bits, used as the exception/condition result of every operation.
pub mod sw {
    pub const IE: u16 = 1 << 0;
    pub const DE: u16 = 1 << 1;
    pub const ZE: u16 = 1 << 2;
    pub const OE: u16 = 1 << 3;
    pub const UE: u16 = 1 << 4;
    pub const PE: u16 = 1 << 5;
    pub const SF: u16 = 1 << 6;
    pub const ES: u16 = 1 << 7;
    pub const C0: u16 = 1 << 8;
    pub const C1: u16 = 1 << 9;
    pub const C2: u16 = 1 << 10;
    pub const TOP: u16 = 7 << 11;
    pub const C3: u16 = 1 << 14;
    pub const B: u16 = 1 << 15;
    /// The six maskable exception flags.
    pub const EXC: u16 = IE | DE | ZE | OE | UE | PE;
    pub const CC: u16 = C0 | C1 | C2 | C3;
}

/// An 80-bit value as stored: sign and 15-bit biased exponent, and the 64-bit significand
/// with its explicit integer bit. Packed to its 10 bytes so that a result and its status
/// flags (`(F80, u16)`, 12 bytes) come back in registers: as a 24-byte value it went through
/// memory, and the caller's 32-bit reload of the 16-bit flags stalled store forwarding (a
/// third of the JIT's x87 helper time). Read fields by value (`{ x.sig }` in format strings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C, packed(2))]
pub struct F80 {
    pub se: u16,
    pub sig: u64,
}

/// The x87's view of an encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Zero,
    /// Exponent 0, integer bit 0, significand non-zero.
    Denormal,
    /// Exponent 0, integer bit 1: read as exponent 1 (a denormal operand).
    PseudoDenormal,
    Normal,
    Infinity,
    QNaN,
    SNaN,
    /// Unnormals, pseudo-NaNs and pseudo-infinities: invalid operands since the 387.
    Unsupported,
}

pub const EXP_BIAS: i32 = 16383;
pub const INT_BIT: u64 = 1 << 63;
pub const QUIET_BIT: u64 = 1 << 62;

impl F80 {
    /// The QNaN floating-point indefinite.
    pub const INDEFINITE: F80 = F80 {
        se: 0xffff,
        sig: 0xc000_0000_0000_0000,
    };
    pub const ZERO: F80 = F80 { se: 0, sig: 0 };
    pub const ONE: F80 = F80 {
        se: 0x3fff,
        sig: INT_BIT,
    };

    pub fn from_bytes(b: &[u8]) -> F80 {
        let mut s = [0u8; 8];
        s.copy_from_slice(&b[..8]);
        F80 {
            sig: u64::from_le_bytes(s),
            se: u16::from_le_bytes([b[8], b[9]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 10] {
        let mut b = [0u8; 10];
        b[..8].copy_from_slice(&self.sig.to_le_bytes());
        b[8..].copy_from_slice(&self.se.to_le_bytes());
        b
    }

    pub fn from_bits(v: u128) -> F80 {
        F80 {
            se: (v >> 64) as u16,
            sig: v as u64,
        }
    }

    pub fn to_bits(self) -> u128 {
        ((self.se as u128) << 64) | self.sig as u128
    }

    #[inline]
    pub fn sign(self) -> bool {
        self.se & 0x8000 != 0
    }

    #[inline]
    pub fn exp(self) -> u16 {
        self.se & 0x7fff
    }

    pub fn negated(self) -> F80 {
        F80 {
            se: self.se ^ 0x8000,
            sig: self.sig,
        }
    }

    pub fn abs(self) -> F80 {
        F80 {
            se: self.se & 0x7fff,
            sig: self.sig,
        }
    }

    pub fn with_sign(self, s: bool) -> F80 {
        F80 {
            se: (self.se & 0x7fff) | if s { 0x8000 } else { 0 },
            sig: self.sig,
        }
    }

    pub fn zero(sign: bool) -> F80 {
        F80::ZERO.with_sign(sign)
    }

    pub fn inf(sign: bool) -> F80 {
        F80 {
            se: 0x7fff,
            sig: INT_BIT,
        }
        .with_sign(sign)
    }

    /// A normal number (biased exponent 1..=0x7ffe, integer bit set): the common case that
    /// the arithmetic checks first.
    #[inline]
    pub fn is_normal(self) -> bool {
        self.exp().wrapping_sub(1) < 0x7ffe && self.sig & INT_BIT != 0
    }

    #[inline]
    pub fn class(self) -> Class {
        let e = self.exp();
        let int = self.sig & INT_BIT != 0;
        match e {
            0 if self.sig == 0 => Class::Zero,
            0 if int => Class::PseudoDenormal,
            0 => Class::Denormal,
            0x7fff if !int => Class::Unsupported,
            0x7fff if self.sig << 1 == 0 => Class::Infinity,
            0x7fff if self.sig & QUIET_BIT != 0 => Class::QNaN,
            0x7fff => Class::SNaN,
            _ if int => Class::Normal,
            _ => Class::Unsupported,
        }
    }

    pub fn is_nan(self) -> bool {
        matches!(self.class(), Class::QNaN | Class::SNaN)
    }

    /// Denormal or pseudo-denormal: the operand raises #D.
    pub fn is_denormal(self) -> bool {
        matches!(self.class(), Class::Denormal | Class::PseudoDenormal)
    }

    /// The quiet version of a NaN.
    pub fn quiet(self) -> F80 {
        F80 {
            se: self.se,
            sig: self.sig | QUIET_BIT,
        }
    }

    /// Finite non-zero operand as (sign, unbiased exponent of bit 63, normalised significand).
    /// Denormals and pseudo-denormals use exponent 1 - bias before normalising.
    pub fn unpack(self) -> Unp {
        let e = (self.exp().max(1)) as i32 - EXP_BIAS;
        let lz = self.sig.leading_zeros();
        Unp {
            sign: self.sign(),
            exp: e - lz as i32,
            sig: self.sig << (lz & 63),
        }
    }
}

/// A finite non-zero value `(-1)^sign * sig * 2^(exp - 63)` with `sig` normalised (bit 63 set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unp {
    pub sign: bool,
    pub exp: i32,
    pub sig: u64,
}

/// A destination format for rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Significand bits including the integer bit.
    pub prec: u32,
    /// Unbiased exponent of the smallest normal number.
    pub emin: i32,
    /// Unbiased exponent of the largest finite number.
    pub emax: i32,
}

pub const EXT: Format = Format {
    prec: 64,
    emin: -16382,
    emax: 16383,
};
pub const DOUBLE: Format = Format {
    prec: 53,
    emin: -1022,
    emax: 1023,
};
pub const SINGLE: Format = Format {
    prec: 24,
    emin: -126,
    emax: 127,
};

/// Rounding control (FCW bits 11:10).
pub mod rc {
    pub const NEAREST: u8 = 0;
    pub const DOWN: u8 = 1;
    pub const UP: u8 = 2;
    pub const ZERO: u8 = 3;
}

/// Rounding environment from the control word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env {
    pub rc: u8,
    /// Significand precision for the PC-controlled operations (24, 53 or 64).
    pub prec: u32,
    /// The exception mask bits of the control word (bit set = masked).
    pub masks: u16,
}

impl Env {
    pub fn from_fcw(fcw: u16) -> Env {
        Env {
            rc: ((fcw >> 10) & 3) as u8,
            // PC = 01 is reserved; this host rounds it like 64 bits (see docs/x87.md). (A
            // table: the JIT's x87 helper takes the environment for every operation, and the
            // match compiled to a chain of compares.)
            prec: [24, 64, 53, 64][((fcw >> 8) & 3) as usize],
            masks: fcw & 0x3f,
        }
    }

    /// The extended format with PC's precision (full exponent range).
    pub fn ext_pc(&self) -> Format {
        Format {
            prec: self.prec,
            ..EXT
        }
    }

    pub fn masked(&self, bit: u16) -> bool {
        self.masks & bit != 0
    }
}

/// Exponent bias adjustment of the unmasked overflow/underflow responses.
pub const BIAS_ADJUST: i32 = 24576;

/// Does rounding `(kept, rest)` in mode `rc` increment the magnitude?
#[inline]
fn round_up(sign: bool, kept_odd: bool, rest: u128, half: u128, mode: u8) -> bool {
    match mode {
        rc::NEAREST => rest > half || (rest == half && kept_odd),
        rc::DOWN => sign && rest != 0,
        rc::UP => !sign && rest != 0,
        _ => false,
    }
}

/// Shift right keeping a sticky bit for everything shifted out.
#[inline]
pub fn shr_jam(v: u128, n: u32) -> u128 {
    if n == 0 {
        v
    } else if n >= 128 {
        (v != 0) as u128
    } else {
        (v >> n) | ((v << (128 - n)) != 0) as u128
    }
}

/// A rounded result: value `(-1)^sign * sig * 2^(exp - 63)`, `sig` aligned at bit 63 (integer
/// bit clear for a denormal or zero result, where `exp` is `fmt.emin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounded {
    pub sign: bool,
    pub exp: i32,
    pub sig: u64,
    /// Infinity (masked overflow).
    pub inf: bool,
    /// IE..PE and C1 (round-up) in status-word positions.
    pub flags: u16,
}

/// Whether `kept` bits of a value of `sign`, with the first dropped bit `guard` and any other
/// dropped bit `sticky`, are inexact and round up in magnitude under `mode`. Branch-free
/// (`&`/`|` on bools, see [`round`]).
#[inline(always)]
pub fn round_bits(sign: bool, kept: u64, guard: bool, sticky: bool, mode: u8) -> (bool, bool) {
    let inexact = guard | sticky;
    let up = match mode {
        rc::NEAREST => guard & (sticky | (kept & 1 != 0)),
        rc::DOWN => sign & inexact,
        rc::UP => !sign & inexact,
        _ => false,
    };
    (inexact, up)
}

/// Round the exact value `(-1)^sign * sig * 2^(exp - 127)` (bit 0 of `sig` may be a sticky
/// bit) to `fmt` under `rc`. With `unmasked_ou` the result of an overflow or underflow is
/// not clamped/denormalised but rounded to full precision, and `exp` leaves the format's range
/// (the caller applies the bias adjustment or discards the result).
pub fn round(sign: bool, exp: i32, sig: u128, fmt: Format, mode: u8, masks: u16) -> Rounded {
    if sig == 0 {
        return Rounded {
            sign,
            exp: fmt.emin,
            sig: 0,
            inf: false,
            flags: 0,
        };
    }
    let lz = sig.leading_zeros();
    let sig = sig << lz;
    let exp = exp - lz as i32;
    // The kept bits are the top `prec` (<= 64) of the high half: the rounding is done on two
    // u64 halves (guard bit, sticky bit) rather than with 128-bit variable shifts.
    let (hi, lo) = ((sig >> 64) as u64, sig as u64);
    let sh = 64 - fmt.prec; // 0..=40
    let mut kept = hi >> sh;
    // Branch-free from here to the range checks (`&`/`|` on bools, selects): the guard and
    // sticky bits and the rounding direction are data, and a branch on them mispredicts
    // about every other time (x87 arithmetic in the JIT's helper: round was 12% of a run).
    let (guard, sticky) = if sh == 0 {
        (lo >> 63 != 0, lo << 1 != 0)
    } else {
        let below = hi & ((1u64 << sh) - 1);
        (
            below >> (sh - 1) != 0,
            (below & ((1u64 << (sh - 1)) - 1) != 0) | (lo != 0),
        )
    };
    let (inexact, up) = round_bits(sign, kept, guard, sticky, mode);
    // `kept` is all ones in `prec` bits when the increment carries out of them.
    let carry = up & (kept == u64::MAX >> sh);
    kept = if carry {
        1u64 << (fmt.prec - 1)
    } else {
        kept + up as u64
    };
    let e = exp + carry as i32;
    let flags = (sw::PE * inexact as u16) | (sw::C1 * up as u16);
    let normal = Rounded {
        sign,
        exp: e,
        sig: kept << sh,
        inf: false,
        flags,
    };

    if exp < fmt.emin {
        // Tininess is detected after rounding (to the destination precision, with an
        // unbounded exponent), as on this host.
        let tiny = e < fmt.emin;
        if masks & sw::UE == 0 {
            let mut r = normal;
            if tiny {
                r.flags |= sw::UE;
            }
            if fmt == EXT && r.exp + EXP_BIAS + BIAS_ADJUST <= 0 {
                // Beyond the reach of the bias adjustment (FSCALE): a zero, UE and PE.
                return Rounded {
                    sig: 0,
                    exp: fmt.emin,
                    flags: sw::UE | sw::PE,
                    ..normal
                };
            }
            return r;
        }
        let drop = 128 - fmt.prec;
        let half = 1u128 << (drop - 1);
        let mask = (1u128 << drop) - 1;
        let d = shr_jam(sig, (fmt.emin - exp) as u32);
        let mut kept = d >> drop;
        let rest = d & mask;
        let up = round_up(sign, kept & 1 != 0, rest, half, mode);
        if up {
            kept += 1;
        }
        let mut flags = 0;
        if rest != 0 {
            flags |= sw::PE;
            if tiny {
                flags |= sw::UE;
            }
        }
        if up {
            flags |= sw::C1;
        }
        return Rounded {
            sign,
            exp: fmt.emin,
            sig: (kept << (64 - fmt.prec)) as u64,
            inf: false,
            flags,
        };
    }
    if e > fmt.emax {
        if masks & sw::OE == 0 {
            let mut r = normal;
            r.flags |= sw::OE;
            if fmt == EXT && r.exp + EXP_BIAS - BIAS_ADJUST >= 0x7fff {
                // Beyond the reach of the bias adjustment (FSCALE): an infinity, OE, PE, C1.
                return Rounded {
                    inf: true,
                    flags: sw::OE | sw::PE | sw::C1,
                    ..normal
                };
            }
            return r;
        }
        let to_inf = match mode {
            rc::NEAREST => true,
            rc::DOWN => sign,
            rc::UP => !sign,
            _ => false,
        };
        return Rounded {
            sign,
            exp: fmt.emax,
            sig: if to_inf {
                0
            } else {
                (u64::MAX >> (64 - fmt.prec)) << (64 - fmt.prec)
            },
            inf: to_inf,
            flags: sw::OE | sw::PE | if to_inf { sw::C1 } else { 0 },
        };
    }
    normal
}

impl Rounded {
    /// Encode as an 80-bit value. Out-of-range exponents (unmasked overflow/underflow) get the
    /// bias adjustment of 24576.
    pub fn to_f80(self) -> F80 {
        let s = if self.sign { 0x8000 } else { 0 };
        if self.inf {
            return F80::inf(self.sign);
        }
        if self.sig & INT_BIT == 0 {
            return F80 {
                se: s,
                sig: self.sig,
            };
        }
        let mut be = self.exp + EXP_BIAS;
        if be >= 0x7fff {
            be -= BIAS_ADJUST;
        } else if be <= 0 {
            be += BIAS_ADJUST;
        }
        F80 {
            se: s | (be as u16 & 0x7fff),
            sig: self.sig,
        }
    }

    /// Encode as binary64 bits (the value must be in range: masked responses only).
    pub fn to_f64(self) -> u64 {
        let s = (self.sign as u64) << 63;
        if self.inf {
            return s | 0x7ff0_0000_0000_0000;
        }
        let frac = (self.sig >> 11) & ((1 << 52) - 1);
        if self.sig & INT_BIT == 0 {
            return s | (self.sig >> 11);
        }
        s | (((self.exp + 1023) as u64 & 0x7ff) << 52) | frac
    }

    /// Encode as binary32 bits (masked responses only).
    pub fn to_f32(self) -> u32 {
        let s = (self.sign as u32) << 31;
        if self.inf {
            return s | 0x7f80_0000;
        }
        let frac = ((self.sig >> 40) as u32) & ((1 << 23) - 1);
        if self.sig & INT_BIT == 0 {
            return s | (self.sig >> 40) as u32;
        }
        s | (((self.exp + 127) as u32 & 0xff) << 23) | frac
    }
}

/// Round a finite exact value to the x87 register format with `env`'s precision control.
pub fn round_ext(sign: bool, exp: i32, sig: u128, env: &Env, pc: bool) -> (F80, u16) {
    let fmt = if pc { env.ext_pc() } else { EXT };
    let r = round(sign, exp, sig, fmt, env.rc, env.masks);
    (r.to_f80(), r.flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounding decisions that do not depend on a host: ties to even both ways, a guard bit
    /// with a sticky bit, the carry out of the kept bits (exponent up), the directed modes by
    /// sign, truncation, PE and C1, at 64 and 53 bits. (The comparisons with the host's x87,
    /// `native_tests`, run on Intel hosts only.)
    #[test]
    fn round_to_nearest_even_directed_and_carry() {
        const ONE: u128 = 1 << 127;
        // (sign, significand, format, mode) → (significand bits 63.., exponent, flags)
        let ulp64 = 1u128 << 64; // one unit in the last place at 64 bits
        let ulp53 = 1u128 << 75;
        let (half64, half53) = (ulp64 / 2, ulp53 / 2);
        let cases: [(bool, u128, Format, u8, u64, i32, u16); 14] = [
            (false, ONE, EXT, rc::NEAREST, 1 << 63, 0, 0),
            // Exactly half an ulp above 1: to even (down), inexact.
            (false, ONE | half64, EXT, rc::NEAREST, 1 << 63, 0, sw::PE),
            // Half an ulp above 1 + ulp (odd): to even (up), C1.
            (
                false,
                ONE | ulp64 | half64,
                EXT,
                rc::NEAREST,
                (1 << 63) + 2,
                0,
                sw::PE | sw::C1,
            ),
            // A guard bit and a sticky bit: up.
            (
                false,
                ONE | half64 | 1,
                EXT,
                rc::NEAREST,
                (1 << 63) + 1,
                0,
                sw::PE | sw::C1,
            ),
            // Below half: down.
            (
                false,
                ONE | (half64 - 1),
                EXT,
                rc::NEAREST,
                1 << 63,
                0,
                sw::PE,
            ),
            // All ones: the increment carries out, the exponent goes up.
            (
                false,
                u128::MAX,
                EXT,
                rc::NEAREST,
                1 << 63,
                1,
                sw::PE | sw::C1,
            ),
            // Directed: toward -inf raises a negative magnitude, not a positive one.
            (
                true,
                ONE | 1,
                EXT,
                rc::DOWN,
                (1 << 63) + 1,
                0,
                sw::PE | sw::C1,
            ),
            (false, ONE | 1, EXT, rc::DOWN, 1 << 63, 0, sw::PE),
            (
                false,
                ONE | 1,
                EXT,
                rc::UP,
                (1 << 63) + 1,
                0,
                sw::PE | sw::C1,
            ),
            (true, ONE | 1, EXT, rc::UP, 1 << 63, 0, sw::PE),
            (false, u128::MAX, EXT, rc::ZERO, u64::MAX, 0, sw::PE),
            // 53 bits: half an ulp to even (down), and with the kept LSB odd (up).
            (false, ONE | half53, DOUBLE, rc::NEAREST, 1 << 63, 0, sw::PE),
            (
                false,
                ONE | ulp53 | half53,
                DOUBLE,
                rc::NEAREST,
                (1 << 63) + (2 << 11),
                0,
                sw::PE | sw::C1,
            ),
            // Exact at 53 bits: no flag.
            (
                false,
                ONE | ulp53,
                DOUBLE,
                rc::NEAREST,
                (1 << 63) + (1 << 11),
                0,
                0,
            ),
        ];
        for (i, &(sign, sig, fmt, mode, want_sig, want_exp, want_flags)) in cases.iter().enumerate()
        {
            let r = round(sign, 0, sig, fmt, mode, 0x3f);
            assert_eq!(
                (r.sig, r.exp, r.flags, r.sign, r.inf),
                (want_sig, want_exp, want_flags, sign, false),
                "case {i}"
            );
        }
    }
}
