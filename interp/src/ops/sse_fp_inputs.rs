//! Input generators of the SSE floating-point differential test (`sse_fp_native`): a fixed-seed
//! xorshift with values biased to the special cases of IEEE arithmetic and x86 conversions.

use Kind::*;

/// Lane type of a form's inputs (how random operands are built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Four singles.
    S,
    /// Two doubles.
    D,
    /// Four signed dwords.
    I,
}

/// Fixed-seed xorshift64 with generators biased to floating-point special values.
pub(super) struct Rng(pub(super) u64);

const F32_EDGES: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x0080_0000,
    0x8080_0000,
    0x7f7f_ffff,
    0xff7f_ffff,
    0x0000_0001,
    0x8000_0001,
    0x007f_ffff,
    0x807f_ffff,
    0x4f00_0000,
    0xcf00_0000,
    0x4eff_ffff,
    0xcf00_0001,
    0x5f00_0000,
    0xdf00_0000,
    0x5eff_ffff,
    0xdf00_0001,
    0x3f00_0000,
    0xbf00_0000,
    0x3fc0_0000,
    0xbfc0_0000,
    0x4020_0000,
    0xc020_0000,
    0x4b00_0000,
    0x4b80_0000,
    0x4b7f_ffff,
    0x3eff_ffff,
    0x3f7f_ffff,
    0x7f80_0001,
    0xff80_0001,
    0x7fbf_ffff,
    0x7fff_ffff,
    0x0040_0000,
    0x4f80_0000,
    0x5f80_0000,
];

const F64_EDGES: &[u64] = &[
    0,
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0xfff8_0000_0000_0000,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x0010_0000_0000_0000,
    0x7fef_ffff_ffff_ffff,
    0xffef_ffff_ffff_ffff,
    1,
    0x8000_0000_0000_0001,
    0x000f_ffff_ffff_ffff,
    0x41e0_0000_0000_0000, // 2^31
    0xc1e0_0000_0000_0000, // -2^31
    0xc1e0_0000_0010_0000, // -2^31 - 0.5
    0xc1e0_0000_0020_0000, // -2^31 - 1
    0x41df_ffff_ffe0_0000, // 2^31 - 1
    0x41df_ffff_fff0_0000, // 2^31 - 0.5
    0x43e0_0000_0000_0000, // 2^63
    0xc3e0_0000_0000_0000, // -2^63
    0x43df_ffff_ffff_ffff,
    0xc3e0_0000_0000_0001,
    0x3fe0_0000_0000_0000,
    0xbfe0_0000_0000_0000,
    0x3ff8_0000_0000_0000,
    0x4004_0000_0000_0000,
    0x4330_0000_0000_0000,
    0x4340_0000_0000_0000,
    0x47ef_ffff_e000_0000, // largest single
    0x47ef_ffff_f000_0000, // largest single + half ulp
    0x3810_0000_0000_0000, // smallest normal single
    0x380f_ffff_f000_0000,
    0x36a0_0000_0000_0000, // smallest denormal single
    0x3690_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x7ff7_ffff_ffff_ffff,
    0x7fff_ffff_ffff_ffff,
];

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(super) fn sign(&mut self) -> u64 {
        self.next() & 1
    }

    /// A single biased to specials: zeros, infinities, NaNs with payloads, denormals,
    /// extreme normals, integer edges, values near 1 and uniformly random bits.
    pub(super) fn f32(&mut self) -> u32 {
        let s = (self.sign() as u32) << 31;
        let m = self.next() as u32 & 0x7f_ffff;
        match self.below(14) {
            0 | 1 => F32_EDGES[self.below(F32_EDGES.len() as u64) as usize],
            2 => s | 0x7fc0_0000 | (m & 0x3f_ffff),
            3 => s | 0x7f80_0000 | (m & 0x3f_ffff).max(1),
            4 => s | m,
            5 => s | (1 + self.below(3) as u32) << 23 | m,
            6 => s | (251 + self.below(4) as u32) << 23 | m,
            7 => {
                // Integers and half-integers.
                let v = (self.next() >> self.below(64)) as i64 as f32
                    / [1.0, 2.0][self.below(2) as usize];
                v.to_bits() ^ s
            }
            8..=10 => s | (120 + self.below(15) as u32) << 23 | m,
            _ => self.next() as u32,
        }
    }

    /// A double biased the same way.
    pub(super) fn f64(&mut self) -> u64 {
        let s = self.sign() << 63;
        let m = self.next() & ((1 << 52) - 1);
        match self.below(14) {
            0 | 1 => F64_EDGES[self.below(F64_EDGES.len() as u64) as usize],
            2 => s | 0x7ff8 << 48 | (m & ((1 << 51) - 1)),
            3 => s | 0x7ff << 52 | (m & ((1 << 51) - 1)).max(1),
            4 => s | m,
            5 => s | (1 + self.below(3)) << 52 | m,
            6 => s | (2043 + self.below(4)) << 52 | m,
            7 => {
                let v = (self.next() >> self.below(64)) as i64 as f64
                    / [1.0, 2.0][self.below(2) as usize];
                v.to_bits() ^ s
            }
            8 => (self.f32() as f32 as f64).to_bits(),
            9..=10 => s | (1016 + self.below(15)) << 52 | m,
            _ => self.next(),
        }
    }

    /// A second operand for `a`: often equal, negated, close (cancellation), or with an
    /// exponent that puts a product or quotient near the underflow or overflow threshold.
    pub(super) fn f32_rel(&mut self, a: u32) -> u32 {
        let ea = (a >> 23 & 0xff) as i64;
        let with_exp = |e: i64, r: &mut Rng| {
            let e = e.clamp(0, 254) as u32;
            (r.next() as u32 & 0x807f_ffff) | e << 23
        };
        let fa = f32::from_bits(a) as f64;
        // A value whose product (or quotient) with `a` lies within a few ulps of `target`.
        let near = |target: f64, div: bool, r: &mut Rng| {
            let t = target * (1.0 + (r.below(64) as f64 - 32.0) * 2f64.powi(-26));
            let v = if div { fa / t } else { t / fa };
            (v as f32).to_bits() ^ (r.sign() as u32) << 31
        };
        match self.below(16) {
            0 => a,
            1 => a ^ 0x8000_0000,
            2 => a ^ (self.next() as u32 & 0xff),
            3 => a ^ 0x8000_0000 ^ (self.next() as u32 & 0xff),
            4 => with_exp(128 - ea + self.below(7) as i64 - 3, self),
            5 => with_exp(381 - ea + self.below(5) as i64 - 2, self),
            6 => with_exp(ea - 126 + self.below(7) as i64 - 3, self),
            7 => with_exp(ea - self.below(30) as i64, self),
            8 => near(f32::MIN_POSITIVE as f64, self.sign() == 1, self),
            9 => near(f32::MAX as f64, self.sign() == 1, self),
            _ => self.f32(),
        }
    }

    pub(super) fn f64_rel(&mut self, a: u64) -> u64 {
        let ea = (a >> 52 & 0x7ff) as i64;
        let with_exp = |e: i64, r: &mut Rng| {
            let e = e.clamp(0, 2046) as u64;
            (r.next() & 0x800f_ffff_ffff_ffff) | e << 52
        };
        let fa = f64::from_bits(a);
        // A value whose product (or quotient) with `a` lies within a few ulps of `target`
        // (computed on the host in double: the inputs only need to be near the threshold).
        let near = |target: f64, div: bool, r: &mut Rng| {
            let t = target * (1.0 + (r.below(64) as f64 - 32.0) * 2f64.powi(-50));
            let v = if div { fa / t } else { t / fa };
            v.to_bits() ^ r.next() & 0x7 ^ r.sign() << 63
        };
        match self.below(16) {
            0 => a,
            1 => a ^ 1 << 63,
            2 => a ^ (self.next() & 0xff),
            3 => a ^ 1 << 63 ^ (self.next() & 0xff),
            4 => with_exp(1024 - ea + self.below(7) as i64 - 3, self),
            5 => with_exp(3069 - ea + self.below(5) as i64 - 2, self),
            6 => with_exp(ea - 1022 + self.below(7) as i64 - 3, self),
            7 => with_exp(ea - self.below(60) as i64, self),
            8 => near(f64::MIN_POSITIVE, self.sign() == 1, self),
            9 => near(f64::MAX, self.sign() == 1, self),
            _ => self.f64(),
        }
    }

    /// A signed integer biased to conversion edges.
    pub(super) fn int(&mut self) -> u64 {
        const EDGES: [u64; 10] = [
            0,
            1,
            u64::MAX,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff_8000_0000,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
            0x0100_0001,
            0x0020_0000_0000_0001,
        ];
        match self.below(4) {
            0 => EDGES[self.below(10) as usize],
            1 => self.next() >> self.below(64),
            2 => (self.next() >> self.below(64)).wrapping_neg(),
            _ => self.next(),
        }
    }

    /// A 128-bit operand of `kind`.
    pub(super) fn v128(&mut self, kind: Kind) -> u128 {
        match kind {
            S => (0..4).fold(0, |v, i| v | (self.f32() as u128) << (32 * i)),
            D => (self.f64() as u128) << 64 | self.f64() as u128,
            I => (0..4).fold(0, |v, i| v | (self.int() as u32 as u128) << (32 * i)),
        }
    }

    /// A second 128-bit operand, lane by lane related to `a`.
    pub(super) fn related(&mut self, a: u128, kind: Kind) -> u128 {
        match kind {
            S => (0..4).fold(0, |v, i| {
                v | (self.f32_rel((a >> (32 * i)) as u32) as u128) << (32 * i)
            }),
            D => {
                let lo = self.f64_rel(a as u64);
                let hi = self.f64_rel((a >> 64) as u64);
                (hi as u128) << 64 | lo as u128
            }
            I => self.v128(I),
        }
    }
}
