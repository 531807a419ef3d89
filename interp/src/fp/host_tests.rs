//! Exactness of the host fast path (`fp/host.rs`): every kernel against the soft-float
//! functions (the reference) on pseudo-random inputs biased to specials, under every rounding
//! mode with DAZ and FTZ off and on (all exceptions masked; random sticky flags, which neither
//! path may look at). Results and detected flags must be bit-equal.

use super::cvt::{
    f32_to_f64_soft, f64_to_f32_soft, float_to_int_soft, int_to_float_soft, round_to_integral_soft,
};
use super::fma::fma_soft;
use super::host::{self, Cvt, Op};
use super::sse::{arith_soft, comi_soft, compare_soft, minmax_soft, sqrt_soft, Arith};
use super::{is_nan, Format, Mx, F32, F64};
use crate::ops::avx_fp::compare32_soft;
use rustc_apfloat::Round;

/// Iterations per MXCSR value and kernel (16 MXCSR values; `LOCKSTEP_HOST_FP_SCALE` multiplies).
fn iterations() -> usize {
    let scale: usize = std::env::var("LOCKSTEP_HOST_FP_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    1500 * scale
}

/// The 16 all-masked MXCSR values: RC x DAZ x FTZ, plus random sticky flags.
fn mxcsrs(rng: &mut Rng) -> Vec<Mx> {
    let mut v = Vec::new();
    for rc in 0..4u32 {
        for daz in [0, 0x40] {
            for ftz in [0, 0x8000] {
                v.push(Mx(0x1f80
                    | rc << 13
                    | daz
                    | ftz
                    | (rng.next() as u32 & 0x3f)));
            }
        }
    }
    v
}

/// xorshift64* with generators biased to floating-point special values.
struct Rng(u64);

const F32_EDGES: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x7f80_0001,
    0xffbf_ffff,
    0x7fa0_0000,
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
    0x0040_0000,
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
    0x4b00_0000,
    0x4b80_0000,
    0x4b7f_ffff,
    0x3f7f_ffff,
    0x3380_0000,
    0x1f80_0000,
    0x5f80_0000,
];

const F64_EDGES: &[u64] = &[
    0,
    1 << 63,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0xfff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0xfff7_ffff_ffff_ffff,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x0010_0000_0000_0000,
    0x8010_0000_0000_0000,
    0x7fef_ffff_ffff_ffff,
    0xffef_ffff_ffff_ffff,
    1,
    0x8000_0000_0000_0001,
    0x000f_ffff_ffff_ffff,
    0x41e0_0000_0000_0000,
    0xc1e0_0000_0000_0000,
    0xc1e0_0000_0010_0000,
    0x41df_ffff_ffe0_0000,
    0x43e0_0000_0000_0000,
    0xc3e0_0000_0000_0000,
    0x43df_ffff_ffff_ffff,
    0x3fe0_0000_0000_0000,
    0x3ff8_0000_0000_0000,
    0xbff8_0000_0000_0000,
    0x4330_0000_0000_0000,
    0x3ca0_0000_0000_0000,
    0x47ef_ffff_e000_0000,
    0x47ef_ffff_f000_0000,
    0x36a0_0000_0000_0000,
    0x3690_0000_0000_0000,
    0x380f_ffff_f000_0000,
];

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A value of format `P` (bits in the low `P::WIDTH` bits).
    fn float<P: Format>(&mut self) -> u64 {
        let sign = if self.next() & 1 != 0 { P::SIGN } else { 0 };
        let frac = self.next() & P::FRAC_MASK;
        let max_exp = P::EXP_MASK >> P::FRAC;
        match self.below(10) {
            0 | 1 => {
                if P::WIDTH == 32 {
                    F32_EDGES[self.below(F32_EDGES.len() as u64) as usize] as u64
                } else {
                    F64_EDGES[self.below(F64_EDGES.len() as u64) as usize]
                }
            }
            // Denormals.
            2 => sign | frac,
            // NaNs with payloads (quiet or signalling).
            3 => sign | P::EXP_MASK | frac.max(1),
            // Near the extremes of the exponent range.
            4 => {
                let e = if self.next() & 1 != 0 {
                    self.below(4) + 1
                } else {
                    max_exp - 1 - self.below(4)
                };
                sign | e << P::FRAC | frac
            }
            // Short significands (exact products, ties), around 1.
            5 | 6 => {
                let keep = self.below(P::FRAC as u64 + 1);
                let e = (P::BIAS as u64)
                    .wrapping_add(self.below(64))
                    .wrapping_sub(32);
                sign | (e << P::FRAC) | (frac & !(P::FRAC_MASK >> keep))
            }
            // Small integers and halves (conversions, ROUND*).
            7 => {
                let v = self.below(1 << 12) as f64 / if self.next() & 1 != 0 { 2.0 } else { 1.0 };
                let bits = if P::WIDTH == 32 {
                    (v as f32).to_bits() as u64
                } else {
                    v.to_bits()
                };
                bits | sign
            }
            // Anything.
            _ => self.next() & (P::SIGN | (P::SIGN - 1)),
        }
    }

    /// A second operand related to `a`: close in magnitude (cancellation, rounding ties),
    /// or scaled by a power of two near the precision, or independent.
    fn related<P: Format>(&mut self, a: u64) -> u64 {
        match self.below(4) {
            0 => {
                let delta = self.below(8);
                let v = if self.next() & 1 != 0 {
                    a.wrapping_add(delta)
                } else {
                    a.wrapping_sub(delta)
                };
                (v ^ if self.next() & 1 != 0 { P::SIGN } else { 0 }) & (P::SIGN | (P::SIGN - 1))
            }
            1 => {
                // a * 2^-(PREC +- 2): the sum lands on or next to a rounding tie.
                let shift = (P::PREC as u64 + self.below(5)).wrapping_sub(2) << P::FRAC;
                let e = a & P::EXP_MASK;
                if e > shift && e != P::EXP_MASK {
                    ((a - shift) & !(P::FRAC_MASK >> 2)) ^ ((self.next() & 1) * P::SIGN)
                } else {
                    self.float::<P>()
                }
            }
            _ => self.float::<P>(),
        }
    }

    fn pair<P: Format>(&mut self) -> (u64, u64) {
        let a = self.float::<P>();
        let b = self.related::<P>(a);
        if self.next() & 1 != 0 {
            (a, b)
        } else {
            (b, a)
        }
    }

    /// A whole register of lanes of `P` (each pair of lanes built by `pair`).
    fn reg_pair<P: Format>(&mut self) -> (u128, u128) {
        let (mut a, mut b) = (0u128, 0u128);
        for i in 0..128 / P::WIDTH {
            let (x, y) = self.pair::<P>();
            a |= (x as u128) << (i * P::WIDTH);
            b |= (y as u128) << (i * P::WIDTH);
        }
        (a, b)
    }

    /// A signed integer biased to conversion edges (2^24 / 2^53 neighbourhoods, extremes).
    fn int(&mut self) -> i64 {
        match self.below(5) {
            0 => [
                0,
                1,
                -1,
                i32::MIN as i64,
                i32::MAX as i64,
                i64::MIN,
                i64::MAX,
            ][self.below(7) as usize],
            1 => {
                let base = [1i64 << 24, 1 << 25, 1 << 53, 1 << 54, 1 << 62][self.below(5) as usize];
                let v = base + self.below(16) as i64 - 8;
                if self.next() & 1 != 0 {
                    -v
                } else {
                    v
                }
            }
            2 => self.next() as i32 as i64,
            _ => (self.next() as i64) >> self.below(64),
        }
    }
}

fn lane<P: Format>(v: u128, i: u32) -> u64 {
    (v >> (i * P::WIDTH)) as u64 & (u64::MAX >> (64 - P::WIDTH))
}

/// Soft-float over every lane of a register.
fn soft_lanes<P: Format>(a: u128, b: u128, f: impl Fn(u64, u64) -> (u64, u32)) -> (u128, u32) {
    let mut r = 0u128;
    let mut fl = 0;
    for i in 0..128 / P::WIDTH {
        let (v, f1) = f(lane::<P>(a, i), lane::<P>(b, i));
        r |= (v as u128 & (u64::MAX >> (64 - P::WIDTH)) as u128) << (i * P::WIDTH);
        fl |= f1;
    }
    (r, fl)
}

/// The dispatching kernel (quick path first) and the MXCSR kernel must agree.
#[track_caller]
fn both<T: PartialEq + std::fmt::Debug>(
    d: Option<(T, u32)>,
    m: Option<(T, u32)>,
) -> Option<(T, u32)> {
    assert_eq!(d, m, "quick path and MXCSR kernel differ");
    d
}

#[track_caller]
fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    host: Option<(T, u32)>,
    soft: (T, u32),
    mx: Mx,
) {
    let host = host.unwrap_or_else(|| panic!("{what}: host path not taken (MXCSR {:#x})", mx.0));
    assert!(
        host.0 == soft.0 && host.1 == soft.1,
        "{what} MXCSR {:#x}: host ({:#x?}, flags {:#x}) soft ({:#x?}, flags {:#x})",
        mx.0,
        host.0,
        host.1,
        soft.0,
        soft.1
    );
}

fn soft_op<P: Format>(op: Op, a: u64, b: u64, mx: Mx) -> (u64, u32) {
    match op {
        Op::Add => arith_soft::<P>(Arith::Add, a, b, mx),
        Op::Sub => arith_soft::<P>(Arith::Sub, a, b, mx),
        Op::Mul => arith_soft::<P>(Arith::Mul, a, b, mx),
        Op::Div => arith_soft::<P>(Arith::Div, a, b, mx),
        Op::Min => minmax_soft::<P>(a, b, false, mx),
        Op::Max => minmax_soft::<P>(a, b, true, mx),
        Op::Sqrt => sqrt_soft::<P>(b, mx),
    }
}

const OPS: [Op; 7] = [
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Min,
    Op::Max,
    Op::Sqrt,
];

fn arithmetic<P: Format>(rng: &mut Rng) {
    for mx in mxcsrs(rng) {
        for _ in 0..iterations() {
            for op in OPS {
                let (a, b) = rng.pair::<P>();
                let what = format!("{op:?} w{} {a:#x} {b:#x}", P::WIDTH);
                same(
                    &what,
                    both(
                        host::scalar::<P>(op, a, b, mx),
                        host::scalar_mxcsr::<P>(op, a, b, mx),
                    ),
                    soft_op::<P>(op, a, b, mx),
                    mx,
                );
                let (a, b) = rng.reg_pair::<P>();
                let what = format!("packed {op:?} w{} {a:#x} {b:#x}", P::WIDTH);
                let soft = soft_lanes::<P>(a, b, |x, y| soft_op::<P>(op, x, y, mx));
                same(
                    &what,
                    both(
                        host::packed::<P>(op, a, b, mx),
                        host::packed_mxcsr::<P>(op, a, b, mx),
                    ),
                    soft,
                    mx,
                );
            }
        }
    }
}

#[test]
fn arithmetic_matches_soft_float() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    arithmetic::<F32>(&mut rng);
    arithmetic::<F64>(&mut rng);
}

fn compares<P: Format>(rng: &mut Rng) {
    let avx = host::host_features().2;
    for mx in mxcsrs(rng) {
        for _ in 0..iterations() {
            let (a, b) = rng.pair::<P>();
            let pred = rng.below(256) as u8;
            let w = P::WIDTH;
            if pred & 31 < 8 {
                let what = format!("cmp{} w{w} {a:#x} {b:#x}", pred & 7);
                same(
                    &what,
                    both(
                        host::compare::<P>(a, b, pred & 7, mx),
                        host::compare_mxcsr::<P>(a, b, pred & 7, mx),
                    ),
                    compare_soft::<P>(a, b, pred & 7, mx),
                    mx,
                );
            }
            if avx || pred & 31 < 8 {
                let what = format!("vcmp{} w{w} {a:#x} {b:#x}", pred & 31);
                let soft = compare32_soft::<P>(a, b, pred, mx);
                same(
                    &what,
                    both(
                        host::compare::<P>(a, b, pred, mx),
                        host::compare_mxcsr::<P>(a, b, pred, mx),
                    ),
                    soft,
                    mx,
                );
                let (a, b) = rng.reg_pair::<P>();
                let what = format!("vcmpp{} w{w} {a:#x} {b:#x}", pred & 31);
                let soft = soft_lanes::<P>(a, b, |x, y| {
                    let (t, f) = compare32_soft::<P>(x, y, pred, mx);
                    (if t { u64::MAX } else { 0 }, f)
                });
                same(
                    &what,
                    both(
                        host::compare_packed::<P>(a, b, pred, mx),
                        host::compare_packed_mxcsr::<P>(a, b, pred, mx),
                    ),
                    soft,
                    mx,
                );
            }
            for signal in [false, true] {
                let what = format!("comi{signal} w{w} {a:#x} {b:#x}");
                same(
                    &what,
                    both(
                        host::comi::<P>(a, b, signal, mx),
                        host::comi_mxcsr::<P>(a, b, signal, mx),
                    ),
                    comi_soft::<P>(a, b, signal, mx),
                    mx,
                );
            }
        }
    }
}

#[test]
fn compares_match_soft_float() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    compares::<F32>(&mut rng);
    compares::<F64>(&mut rng);
}

#[test]
fn conversions_match_soft_float() {
    let mut rng = Rng(0x0bad_cafe_f00d_0001);
    for mx in mxcsrs(&mut rng) {
        for _ in 0..iterations() {
            let s = rng.float::<F32>();
            let d = rng.float::<F64>();
            same(
                &format!("ss2sd {s:#x}"),
                both(
                    host::f32_to_f64(s as u32, mx),
                    host::f32_to_f64_mxcsr(s as u32, mx),
                ),
                f32_to_f64_soft(s as u32, mx),
                mx,
            );
            same(
                &format!("sd2ss {d:#x}"),
                both(host::f64_to_f32(d, mx), host::f64_to_f32_mxcsr(d, mx)),
                f64_to_f32_soft(d, mx),
                mx,
            );
            let v = rng.int();
            same(
                &format!("si2ss {v}"),
                both(
                    host::int_to_float::<F32>(v, mx),
                    host::int_to_float_mxcsr::<F32>(v, mx),
                ),
                int_to_float_soft::<F32>(v, mx),
                mx,
            );
            same(
                &format!("si2sd {v}"),
                both(
                    host::int_to_float::<F64>(v, mx),
                    host::int_to_float_mxcsr::<F64>(v, mx),
                ),
                int_to_float_soft::<F64>(v, mx),
                mx,
            );
            for bits in [32, 64] {
                for truncate in [false, true] {
                    let round = if truncate {
                        Round::TowardZero
                    } else {
                        mx.round()
                    };
                    let what = format!("ss2si{bits} t{truncate} {s:#x}");
                    let soft = float_to_int_soft::<F32>(s, bits, round, mx);
                    same(
                        &what,
                        both(
                            host::float_to_int::<F32>(s, bits, truncate, mx),
                            host::float_to_int_mxcsr::<F32>(s, bits, truncate, mx),
                        ),
                        soft,
                        mx,
                    );
                    let what = format!("sd2si{bits} t{truncate} {d:#x}");
                    let soft = float_to_int_soft::<F64>(d, bits, round, mx);
                    same(
                        &what,
                        both(
                            host::float_to_int::<F64>(d, bits, truncate, mx),
                            host::float_to_int_mxcsr::<F64>(d, bits, truncate, mx),
                        ),
                        soft,
                        mx,
                    );
                }
            }
            packed_conversions(&mut rng, mx);
        }
    }
}

/// The packed conversions against the soft-float lane functions.
fn packed_conversions(rng: &mut Rng, mx: Mx) {
    let (ps, _) = rng.reg_pair::<F32>();
    let (pd, _) = rng.reg_pair::<F64>();
    let dq =
        (rng.int() as u32 as u128) | (rng.int() as u32 as u128) << 32 | (rng.next() as u128) << 64;
    let i32_lane = |v: u128, i: u32| (v >> (32 * i)) as u32 as i32 as i64;
    let f2i32 = |v: u64, p32: bool, t: bool| {
        let round = if t { Round::TowardZero } else { mx.round() };
        let (r, f) = if p32 {
            float_to_int_soft::<F32>(v, 32, round, mx)
        } else {
            float_to_int_soft::<F64>(v, 32, round, mx)
        };
        (r as u32 as u64, f)
    };
    let join = |parts: &[(u64, u32)], width: u32| {
        let mut r = 0u128;
        let mut fl = 0;
        for (i, &(v, f)) in parts.iter().enumerate() {
            r |= (v as u128) << (i as u32 * width);
            fl |= f;
        }
        (r, fl)
    };
    for kind in [
        Cvt::Ps2pd,
        Cvt::Pd2ps,
        Cvt::Dq2ps,
        Cvt::Ps2dq,
        Cvt::Tps2dq,
        Cvt::Dq2pd,
        Cvt::Pd2dq,
        Cvt::Tpd2dq,
    ] {
        let (src, soft) = match kind {
            Cvt::Ps2pd => (
                ps,
                join(
                    &[0, 1].map(|i| f32_to_f64_soft(lane::<F32>(ps, i) as u32, mx)),
                    64,
                ),
            ),
            Cvt::Pd2ps => (
                pd,
                join(
                    &[0, 1].map(|i| {
                        let (r, f) = f64_to_f32_soft(lane::<F64>(pd, i), mx);
                        (r as u64, f)
                    }),
                    32,
                ),
            ),
            Cvt::Dq2ps => (
                dq,
                join(
                    &[0, 1, 2, 3].map(|i| int_to_float_soft::<F32>(i32_lane(dq, i), mx)),
                    32,
                ),
            ),
            Cvt::Ps2dq | Cvt::Tps2dq => {
                let t = kind == Cvt::Tps2dq;
                (
                    ps,
                    join(
                        &[0, 1, 2, 3].map(|i| f2i32(lane::<F32>(ps, i), true, t)),
                        32,
                    ),
                )
            }
            Cvt::Dq2pd => (
                dq,
                join(
                    &[0, 1].map(|i| int_to_float_soft::<F64>(i32_lane(dq, i), mx)),
                    64,
                ),
            ),
            Cvt::Pd2dq | Cvt::Tpd2dq => {
                let t = kind == Cvt::Tpd2dq;
                (
                    pd,
                    join(&[0, 1].map(|i| f2i32(lane::<F64>(pd, i), false, t)), 32),
                )
            }
        };
        same(
            &format!("{kind:?} {src:#x}"),
            host::cvt_packed(kind, src, mx),
            soft,
            mx,
        );
    }
}

fn rounding<P: Format>(rng: &mut Rng) {
    for mx in mxcsrs(rng) {
        for _ in 0..iterations() {
            let imm = rng.next() as u8;
            let a = rng.float::<P>();
            let what = format!("round{imm:#x} w{} {a:#x}", P::WIDTH);
            let soft = round_to_integral_soft::<P>(a, imm, mx);
            same(&what, host::round_to_integral::<P>(a, imm, mx), soft, mx);
            let (v, _) = rng.reg_pair::<P>();
            let soft = soft_lanes::<P>(0, v, |_, x| round_to_integral_soft::<P>(x, imm, mx));
            let what = format!("roundp{imm:#x} w{} {v:#x}", P::WIDTH);
            same(&what, host::round_packed::<P>(v, imm, mx), soft, mx);
        }
    }
}

#[test]
fn rounding_matches_soft_float() {
    if !host::host_features().1 {
        eprintln!("host has no SSE4.1: ROUND* fast path not tested");
        return;
    }
    let mut rng = Rng(0x5555_aaaa_1234_4321);
    rounding::<F32>(&mut rng);
    rounding::<F64>(&mut rng);
}

fn fused<P: Format>(rng: &mut Rng) {
    for mx in mxcsrs(rng) {
        for _ in 0..iterations() {
            let (a, b) = rng.pair::<P>();
            // The addend near the product (cancellation) or independent.
            let c = if rng.next() & 1 != 0 {
                rng.related::<P>(a)
            } else {
                rng.float::<P>()
            };
            let (np, nc) = (rng.next() & 1 != 0, rng.next() & 1 != 0);
            let what = format!("fma{np}{nc} w{} {a:#x} {b:#x} {c:#x}", P::WIDTH);
            let soft = fma_soft::<P>(a, b, c, np, nc, mx);
            let host = host::fma::<P>(a, b, c, np, nc, mx);
            if [a, b, c].iter().any(|&v| is_nan::<P>(v)) {
                assert!(host.is_none(), "{what}: NaN inputs must take the soft path");
            } else {
                same(&what, host, soft, mx);
            }
            let (a, b) = rng.reg_pair::<P>();
            let (c, _) = rng.reg_pair::<P>();
            let kind = rng.below(6) as u8;
            let soft = {
                let mut r = 0u128;
                let mut fl = 0;
                for i in 0..128 / P::WIDTH {
                    let nc = match kind {
                        0 | 2 => false,
                        1 | 3 => true,
                        4 => i % 2 == 0,
                        _ => i % 2 == 1,
                    };
                    let np = kind == 2 || kind == 3;
                    let (x, y, z) = (lane::<P>(a, i), lane::<P>(b, i), lane::<P>(c, i));
                    let (v, f) = fma_soft::<P>(x, y, z, np, nc, mx);
                    r |= (v as u128) << (i * P::WIDTH);
                    fl |= f;
                }
                (r, fl)
            };
            let host = host::fma_packed::<P>(kind, a, b, c, mx);
            if let Some(h) = host {
                same(
                    &format!("fmap{kind} w{} {a:#x} {b:#x} {c:#x}", P::WIDTH),
                    Some(h),
                    soft,
                    mx,
                );
            }
        }
    }
}

#[test]
fn fma_matches_soft_float() {
    if !host::host_features().3 {
        eprintln!("host has no FMA: FMA fast path not tested");
        return;
    }
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    fused::<F32>(&mut rng);
    fused::<F64>(&mut rng);
}

#[test]
fn fast_path_applies_only_with_every_exception_masked() {
    assert!(host::usable(Mx(0x1f80)));
    assert_eq!(
        host::usable(Mx(0x1fc0 | 0x8000 | 0x6000)),
        host::host_features().0
    );
    for bit in 7..13 {
        let mx = Mx(0x1f80 & !(1 << bit));
        assert!(!host::usable(mx), "mask bit {bit} clear");
        assert!(both(
            host::scalar::<F32>(Op::Add, 0, 0, mx),
            host::scalar_mxcsr::<F32>(Op::Add, 0, 0, mx)
        )
        .is_none());
    }
    // The host MXCSR is restored: a kernel under round-up and FTZ leaves Rust's own rounding
    // (nearest) alone.
    let up = Mx(0x1f80 | 2 << 13 | 0x8000);
    let third = host::scalar::<F64>(Op::Div, 1f64.to_bits(), 3f64.to_bits(), up).unwrap();
    assert_eq!(third.0, 0x3fd5_5555_5555_5556);
    let x = std::hint::black_box(1f64) / std::hint::black_box(3f64);
    assert_eq!(x.to_bits(), 0x3fd5_5555_5555_5555);
}

/// The quick path (no MXCSR access) on its own, in the default environment where it applies
/// most: every answer it gives equals soft-float, and it answers often.
#[test]
fn quick_path_matches_soft_float() {
    use super::host::quick;
    let mut rng = Rng(0x7777_1111_2222_3333);
    let mx = Mx(0x1f80);
    let mut hits = 0usize;
    let n = 20 * iterations();
    for _ in 0..n {
        for op in OPS {
            let (a, b) = rng.pair::<F32>();
            if let Some(r) = quick::scalar::<F32>(op, a, b, mx) {
                same(
                    &format!("quick {op:?} w32 {a:#x} {b:#x}"),
                    Some(r),
                    soft_op::<F32>(op, a, b, mx),
                    mx,
                );
                hits += 1;
            }
            let (a, b) = rng.pair::<F64>();
            if let Some(r) = quick::scalar::<F64>(op, a, b, mx) {
                same(
                    &format!("quick {op:?} w64 {a:#x} {b:#x}"),
                    Some(r),
                    soft_op::<F64>(op, a, b, mx),
                    mx,
                );
                hits += 1;
            }
        }
        let d = rng.float::<F64>();
        if let Some(r) = quick::f64_to_f32(d, mx) {
            same(
                &format!("quick sd2ss {d:#x}"),
                Some(r),
                f64_to_f32_soft(d, mx),
                mx,
            );
            hits += 1;
        }
        let v = rng.int();
        let r = quick::int_to_float::<F32>(v, mx);
        same(
            &format!("quick si2ss {v}"),
            r,
            int_to_float_soft::<F32>(v, mx),
            mx,
        );
        for truncate in [false, true] {
            let round = if truncate {
                Round::TowardZero
            } else {
                Round::NearestTiesToEven
            };
            if let Some(r) = quick::float_to_int::<F64>(d, 32, truncate, mx) {
                same(
                    &format!("quick sd2si {d:#x}"),
                    Some(r),
                    float_to_int_soft::<F64>(d, 32, round, mx),
                    mx,
                );
                hits += 1;
            }
        }
    }
    // Ordinary operands take the quick path: well over a third of these biased cases.
    assert!(hits > n * 16 * 2 / 5, "quick path taken {hits} times");
    // Not in another rounding mode, with DAZ/FTZ, or an unmasked exception.
    for mx in [Mx(0x3f80), Mx(0x1fc0), Mx(0x9f80), Mx(0x1f00)] {
        assert!(quick::scalar::<F64>(Op::Add, 1f64.to_bits(), 3f64.to_bits(), mx).is_none());
    }
}
