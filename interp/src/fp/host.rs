//! Host fast path of the SIMD floating-point layer: on an x86-64 host, the exactly specified
//! operations (ADD/SUB/MUL/DIV/MIN/MAX/SQRT, compares, COMIS/UCOMIS, conversions, ROUND*, FMA)
//! run on the host's own SSE unit under the guest's MXCSR control bits.
//!
//! Each kernel is one `asm!` block: save the host MXCSR, load the guest's RC/DAZ/FTZ with all
//! six exception masks set and the flags clear, run the instruction, read MXCSR back (the
//! detected flags), restore the host MXCSR. So no compiled Rust code ever runs under the
//! guest's MXCSR, the instruction cannot trap, and the result and flags are what the soft-float
//! functions return (`fp/host_tests.rs` checks that bit for bit on every kernel).
//!
//! The scalar and packed entry points first try [`quick`] (`fp/host_quick.rs`), which needs no
//! MXCSR access at all for ordinary operands in the default environment; LDMXCSR costs about
//! as much as the rest of an interpreted instruction.
//!
//! A kernel answers `None` (the caller then uses the soft-float path, which stays the
//! reference) when:
//! - any guest exception is unmasked: the soft-float path decides the #XM flag rules;
//! - the guest has DAZ set and the host's MXCSR_MASK lacks it;
//! - the host lacks the instruction's extension (SSE4.1 for ROUND*, AVX for the VEX compare
//!   predicates 8..31, FMA);
//! - an FMA input is a NaN (which NaN an FMA returns is measured, not architectural; the
//!   soft-float rule decides).
//!
//! RCP*/RSQRT* never come here: their approximations differ between x86 vendors. On other host
//! architectures every function returns `None`.

/// The two-operand (and square root) arithmetic kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    /// Square root of the second operand (the first only supplies the untouched lanes).
    Sqrt,
}

/// Packed float conversions of a whole XMM register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cvt {
    /// CVTPS2PD (the low two singles).
    Ps2pd,
    /// CVTPD2PS (result in bits 63:0, 127:64 zero).
    Pd2ps,
    /// CVTDQ2PS.
    Dq2ps,
    /// CVTPS2DQ.
    Ps2dq,
    /// CVTTPS2DQ.
    Tps2dq,
    /// CVTDQ2PD (the low two dwords).
    Dq2pd,
    /// CVTPD2DQ (result in bits 63:0, 127:64 zero).
    Pd2dq,
    /// CVTTPD2DQ.
    Tpd2dq,
}

#[cfg(target_arch = "x86_64")]
pub use imp::*;

#[cfg(not(target_arch = "x86_64"))]
pub use none::*;

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{Cvt, Op};
    use crate::fp::{is_nan, mxcsr, Format, Mx};
    use crate::state::flags::{CF, PF, ZF};
    use core::arch::asm;
    use core::arch::x86_64::__m128i;
    use std::sync::OnceLock;

    pub use crate::fp::host_quick as quick;

    /// The six exception masks.
    const ALL_MASKS: u32 = mxcsr::FLAGS << mxcsr::MASK_SHIFT;
    /// The MXCSR control bits taken from the guest.
    const CONTROL: u32 = (3 << mxcsr::RC_SHIFT) | mxcsr::FTZ | mxcsr::DAZ;

    /// Host capabilities, detected once (the only global state of the fast path).
    struct Features {
        daz: bool,
        sse41: bool,
        avx: bool,
        fma: bool,
    }

    fn features() -> &'static Features {
        static F: OnceLock<Features> = OnceLock::new();
        F.get_or_init(|| Features {
            daz: host_has_daz(),
            sse41: std::is_x86_feature_detected!("sse4.1"),
            avx: std::is_x86_feature_detected!("avx"),
            fma: std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx"),
        })
    }

    /// Does the host have FMA (and AVX)?
    #[inline]
    pub(crate) fn has_fma() -> bool {
        features().fma
    }

    /// MXCSR_MASK (FXSAVE bytes 28..32; zero means the default 0xFFBF) has DAZ?
    fn host_has_daz() -> bool {
        #[repr(C, align(16))]
        struct Area([u8; 512]);
        let mut area = Area([0; 512]);
        // SAFETY: FXSAVE stores 512 bytes at a 16-byte aligned address; `area` is exactly that
        // (repr align 16) and is not otherwise borrowed. It reads state only (no register or
        // flag changes).
        unsafe {
            asm!(
                "fxsave [{p}]",
                p = in(reg) area.0.as_mut_ptr(),
                options(nostack, preserves_flags),
            );
        }
        let a = &area.0;
        let mask = u32::from_le_bytes([a[28], a[29], a[30], a[31]]);
        let mask = if mask == 0 { 0xffbf } else { mask };
        mask & mxcsr::DAZ != 0
    }

    /// May the host run under `mx`? Returns the MXCSR to load: the guest's RC, DAZ and FTZ,
    /// all exceptions masked, no flags.
    #[inline]
    pub fn control(mx: Mx) -> Option<u32> {
        if mx.0 & ALL_MASKS != ALL_MASKS || (mx.daz() && !features().daz) {
            return None;
        }
        Some(ALL_MASKS | (mx.0 & CONTROL))
    }

    /// Run the asm template lines `$insn` under the MXCSR value `$ctl` (from [`control`]) and
    /// evaluate to the exception flags they raised. Extra operands follow the template.
    macro_rules! under {
        ($ctl:expr, [$($insn:literal),+], $($ops:tt)*) => {{
            // [MXCSR to load, saved host MXCSR, MXCSR after the instruction]
            let mut words: [u32; 3] = [$ctl, 0, 0];
            // SAFETY: the block first saves the host MXCSR (words[1]) and reloads it as its
            // last step, so no compiled code runs under the guest value. The value loaded comes
            // from `control`: every exception masked (the instruction cannot fault) and only
            // control bits the host supports (RC, FTZ; DAZ only if MXCSR_MASK has it). Memory
            // touched: the three words behind `w` (a live local array). The instruction writes
            // only its declared output registers (and RFLAGS, not declared preserved); the
            // caller checked the host has its extension.
            unsafe {
                asm!(
                    "stmxcsr [{w} + 4]",
                    "ldmxcsr [{w}]",
                    $($insn,)+
                    "stmxcsr [{w} + 8]",
                    "ldmxcsr [{w} + 4]",
                    w = in(reg) words.as_mut_ptr(),
                    $($ops)*
                    options(nostack),
                );
            }
            words[2] & mxcsr::FLAGS
        }};
    }

    #[inline]
    fn m(v: u128) -> __m128i {
        // SAFETY: both are 16-byte plain-old-data types with every bit pattern valid; lane 0
        // is the low bits on this little-endian target.
        unsafe { core::mem::transmute::<u128, __m128i>(v) }
    }

    #[inline]
    fn u(v: __m128i) -> u128 {
        // SAFETY: as in `m`.
        unsafe { core::mem::transmute::<__m128i, u128>(v) }
    }

    /// The low `P::WIDTH` bits.
    #[inline]
    fn low<P: Format>(v: u64) -> u64 {
        if P::WIDTH == 32 {
            v & 0xffff_ffff
        } else {
            v
        }
    }

    /// `$insn {x}, {y}` on XMM registers holding `$a` (destination) and `$b` (`$t`: `i64` for
    /// a scalar lane, `__m128i` for a whole register).
    macro_rules! xy {
        ($ctl:expr, $insn:literal, $a:expr, $b:expr) => {{
            let mut x = $a;
            let fl = under!($ctl, [$insn], x = inout(xmm_reg) x, y = in(xmm_reg) $b,);
            (x, fl)
        }};
    }

    // ----- arithmetic -----

    /// ADDSS/ADDSD/... on the low lane: `a op b` (`Sqrt`: the root of `b`).
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn scalar<P: Format>(op: Op, a: u64, b: u64, mx: Mx) -> Option<(u64, u32)> {
        quick::scalar::<P>(op, a, b, mx).or_else(|| scalar_mxcsr::<P>(op, a, b, mx))
    }

    /// The MXCSR kernel of [`scalar`].
    pub fn scalar_mxcsr<P: Format>(op: Op, a: u64, b: u64, mx: Mx) -> Option<(u64, u32)> {
        let c = control(mx)?;
        let (a, b) = (a as i64, b as i64);
        let (r, f) = if P::WIDTH == 32 {
            match op {
                Op::Add => xy!(c, "addss {x}, {y}", a, b),
                Op::Sub => xy!(c, "subss {x}, {y}", a, b),
                Op::Mul => xy!(c, "mulss {x}, {y}", a, b),
                Op::Div => xy!(c, "divss {x}, {y}", a, b),
                Op::Min => xy!(c, "minss {x}, {y}", a, b),
                Op::Max => xy!(c, "maxss {x}, {y}", a, b),
                Op::Sqrt => xy!(c, "sqrtss {x}, {y}", a, b),
            }
        } else {
            match op {
                Op::Add => xy!(c, "addsd {x}, {y}", a, b),
                Op::Sub => xy!(c, "subsd {x}, {y}", a, b),
                Op::Mul => xy!(c, "mulsd {x}, {y}", a, b),
                Op::Div => xy!(c, "divsd {x}, {y}", a, b),
                Op::Min => xy!(c, "minsd {x}, {y}", a, b),
                Op::Max => xy!(c, "maxsd {x}, {y}", a, b),
                Op::Sqrt => xy!(c, "sqrtsd {x}, {y}", a, b),
            }
        };
        Some((low::<P>(r as u64), f))
    }

    /// The quick path lane by lane; `None` when it does not apply to every lane.
    #[inline]
    fn quick_lanes<P: Format>(
        a: u128,
        b: u128,
        f: impl Fn(u64, u64) -> Option<(u64, u32)>,
    ) -> Option<(u128, u32)> {
        let mask = u64::MAX >> (64 - P::WIDTH);
        let mut r = 0u128;
        let mut flags = 0;
        for i in 0..128 / P::WIDTH {
            let sh = i * P::WIDTH;
            let (v, f1) = f((a >> sh) as u64 & mask, (b >> sh) as u64 & mask)?;
            r |= ((v & mask) as u128) << sh;
            flags |= f1;
        }
        Some((r, flags))
    }

    /// ADDPS/ADDPD/... on a whole 128-bit register: [`quick`] on every lane when it applies,
    /// else the MXCSR kernel.
    #[inline]
    pub fn packed<P: Format>(op: Op, a: u128, b: u128, mx: Mx) -> Option<(u128, u32)> {
        quick_lanes::<P>(a, b, |x, y| quick::scalar::<P>(op, x, y, mx))
            .or_else(|| packed_mxcsr::<P>(op, a, b, mx))
    }

    /// The MXCSR kernel of [`packed`].
    pub fn packed_mxcsr<P: Format>(op: Op, a: u128, b: u128, mx: Mx) -> Option<(u128, u32)> {
        let c = control(mx)?;
        let (a, b) = (m(a), m(b));
        let (r, f) = if P::WIDTH == 32 {
            match op {
                Op::Add => xy!(c, "addps {x}, {y}", a, b),
                Op::Sub => xy!(c, "subps {x}, {y}", a, b),
                Op::Mul => xy!(c, "mulps {x}, {y}", a, b),
                Op::Div => xy!(c, "divps {x}, {y}", a, b),
                Op::Min => xy!(c, "minps {x}, {y}", a, b),
                Op::Max => xy!(c, "maxps {x}, {y}", a, b),
                Op::Sqrt => xy!(c, "sqrtps {x}, {y}", a, b),
            }
        } else {
            match op {
                Op::Add => xy!(c, "addpd {x}, {y}", a, b),
                Op::Sub => xy!(c, "subpd {x}, {y}", a, b),
                Op::Mul => xy!(c, "mulpd {x}, {y}", a, b),
                Op::Div => xy!(c, "divpd {x}, {y}", a, b),
                Op::Min => xy!(c, "minpd {x}, {y}", a, b),
                Op::Max => xy!(c, "maxpd {x}, {y}", a, b),
                Op::Sqrt => xy!(c, "sqrtpd {x}, {y}", a, b),
            }
        };
        Some((u(r), f))
    }

    // ----- compares -----

    /// One compare with the predicate as an immediate: the 8 legacy ones with CMPxx, the 32
    /// VEX ones (needs AVX) with VCMPxx. `W` 0..3: ss, sd, ps, pd.
    fn cmp_imm<const W: u8, const PRED: u8>(a: __m128i, b: __m128i, c: u32) -> (__m128i, u32) {
        let mut x = a;
        let f = if PRED < 8 {
            match W {
                0 => {
                    under!(c, ["cmpss {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                1 => {
                    under!(c, ["cmpsd {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                2 => {
                    under!(c, ["cmpps {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                _ => {
                    under!(c, ["cmppd {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
            }
        } else {
            match W {
                0 => {
                    under!(c, ["vcmpss {x}, {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                1 => {
                    under!(c, ["vcmpsd {x}, {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                2 => {
                    under!(c, ["vcmpps {x}, {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
                _ => {
                    under!(c, ["vcmppd {x}, {x}, {y}, {p}"], x = inout(xmm_reg) x, y = in(xmm_reg) b, p = const PRED,)
                }
            }
        };
        (x, f)
    }

    /// Dispatch a run-time predicate (0..31) to its immediate form.
    fn cmp_any<const W: u8>(a: __m128i, b: __m128i, pred: u8, c: u32) -> (__m128i, u32) {
        macro_rules! arms {
            ($($p:literal)*) => {
                match pred & 31 {
                    $($p => cmp_imm::<W, $p>(a, b, c),)*
                    _ => cmp_imm::<W, 31>(a, b, c),
                }
            };
        }
        arms!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30)
    }

    /// Control word for a compare with predicate `pred` (8..31 need the host's AVX).
    #[inline]
    fn cmp_control(pred: u8, mx: Mx) -> Option<u32> {
        if pred & 31 >= 8 && !features().avx {
            return None;
        }
        control(mx)
    }

    /// CMPSS/CMPSD (predicates 0..7) and VCMPSS/VCMPSD (0..31): (holds, flags).
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn compare<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> Option<(bool, u32)> {
        quick::compare::<P>(a, b, pred).or_else(|| compare_mxcsr::<P>(a, b, pred, mx))
    }

    /// The MXCSR kernel of [`compare`].
    pub fn compare_mxcsr<P: Format>(a: u64, b: u64, pred: u8, mx: Mx) -> Option<(bool, u32)> {
        let c = cmp_control(pred, mx)?;
        let (a, b) = (m(a as u128), m(b as u128));
        let (r, f) = if P::WIDTH == 32 {
            cmp_any::<0>(a, b, pred, c)
        } else {
            cmp_any::<1>(a, b, pred, c)
        };
        Some((u(r) & 1 != 0, f))
    }

    /// CMPPS/CMPPD (predicates 0..7) and VCMPPS/VCMPPD (0..31) on a 128-bit register:
    /// [`quick`] on every lane when it applies, else the MXCSR kernel.
    #[inline]
    pub fn compare_packed<P: Format>(a: u128, b: u128, pred: u8, mx: Mx) -> Option<(u128, u32)> {
        quick_lanes::<P>(a, b, |x, y| {
            quick::compare::<P>(x, y, pred).map(|(t, f)| (if t { u64::MAX } else { 0 }, f))
        })
        .or_else(|| compare_packed_mxcsr::<P>(a, b, pred, mx))
    }

    /// The MXCSR kernel of [`compare_packed`].
    pub fn compare_packed_mxcsr<P: Format>(
        a: u128,
        b: u128,
        pred: u8,
        mx: Mx,
    ) -> Option<(u128, u32)> {
        let c = cmp_control(pred, mx)?;
        let (r, f) = if P::WIDTH == 32 {
            cmp_any::<2>(m(a), m(b), pred, c)
        } else {
            cmp_any::<3>(m(a), m(b), pred, c)
        };
        Some((u(r), f))
    }

    /// COMISS/COMISD (`signal_qnan`) and UCOMISS/UCOMISD: (ZF|PF|CF, flags).
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn comi<P: Format>(a: u64, b: u64, signal_qnan: bool, mx: Mx) -> Option<(u64, u32)> {
        quick::comi::<P>(a, b).or_else(|| comi_mxcsr::<P>(a, b, signal_qnan, mx))
    }

    /// The MXCSR kernel of [`comi`].
    pub fn comi_mxcsr<P: Format>(a: u64, b: u64, signal_qnan: bool, mx: Mx) -> Option<(u64, u32)> {
        let c = control(mx)?;
        let (a, b) = (a as i64, b as i64);
        let (mut z, mut p, mut cf) = (0u8, 0u8, 0u8);
        macro_rules! run {
            ($insn:literal) => {
                under!(c, [$insn, "setz {z}", "setp {p}", "setc {c}"],
                    x = in(xmm_reg) a, y = in(xmm_reg) b,
                    z = out(reg_byte) z, p = out(reg_byte) p, c = out(reg_byte) cf,)
            };
        }
        let f = match (P::WIDTH == 32, signal_qnan) {
            (true, true) => run!("comiss {x}, {y}"),
            (true, false) => run!("ucomiss {x}, {y}"),
            (false, true) => run!("comisd {x}, {y}"),
            (false, false) => run!("ucomisd {x}, {y}"),
        };
        let rf = if z != 0 { ZF } else { 0 }
            | if p != 0 { PF } else { 0 }
            | if cf != 0 { CF } else { 0 };
        Some((rf, f))
    }

    // ----- conversions -----

    /// CVTSS2SD.
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn f32_to_f64(a: u32, mx: Mx) -> Option<(u64, u32)> {
        quick::f32_to_f64(a, mx).or_else(|| f32_to_f64_mxcsr(a, mx))
    }

    /// The MXCSR kernel of [`f32_to_f64`].
    pub fn f32_to_f64_mxcsr(a: u32, mx: Mx) -> Option<(u64, u32)> {
        let c = control(mx)?;
        let (r, f) = xy!(c, "cvtss2sd {x}, {y}", 0i64, a as i64);
        Some((r as u64, f))
    }

    /// CVTSD2SS.
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn f64_to_f32(a: u64, mx: Mx) -> Option<(u32, u32)> {
        quick::f64_to_f32(a, mx).or_else(|| f64_to_f32_mxcsr(a, mx))
    }

    /// The MXCSR kernel of [`f64_to_f32`].
    pub fn f64_to_f32_mxcsr(a: u64, mx: Mx) -> Option<(u32, u32)> {
        let c = control(mx)?;
        let (r, f) = xy!(c, "cvtsd2ss {x}, {y}", 0i64, a as i64);
        Some((r as u32, f))
    }

    /// CVTSI2SS/CVTSI2SD (the 64-bit source form: exact for a sign-extended 32-bit value too).
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn int_to_float<P: Format>(v: i64, mx: Mx) -> Option<(u64, u32)> {
        quick::int_to_float::<P>(v, mx).or_else(|| int_to_float_mxcsr::<P>(v, mx))
    }

    /// The MXCSR kernel of [`int_to_float`].
    pub fn int_to_float_mxcsr<P: Format>(v: i64, mx: Mx) -> Option<(u64, u32)> {
        let c = control(mx)?;
        let mut x = 0i64;
        let f = if P::WIDTH == 32 {
            under!(c, ["cvtsi2ss {x}, {r}"], x = inout(xmm_reg) x, r = in(reg) v,)
        } else {
            under!(c, ["cvtsi2sd {x}, {r}"], x = inout(xmm_reg) x, r = in(reg) v,)
        };
        Some((low::<P>(x as u64), f))
    }

    /// CVT(T)SS2SI/CVT(T)SD2SI to a `bits` (32/64) integer, sign-extended into the `i64`.
    /// [`quick`] when it applies, else the MXCSR kernel.
    #[inline]
    pub fn float_to_int<P: Format>(
        a: u64,
        bits: u32,
        truncate: bool,
        mx: Mx,
    ) -> Option<(i64, u32)> {
        quick::float_to_int::<P>(a, bits, truncate, mx)
            .or_else(|| float_to_int_mxcsr::<P>(a, bits, truncate, mx))
    }

    /// The MXCSR kernel of [`float_to_int`].
    pub fn float_to_int_mxcsr<P: Format>(
        a: u64,
        bits: u32,
        truncate: bool,
        mx: Mx,
    ) -> Option<(i64, u32)> {
        let c = control(mx)?;
        let x = a as i64;
        let mut r = 0i64;
        macro_rules! run {
            ($insn:literal) => {
                under!(c, [$insn], r = out(reg) r, x = in(xmm_reg) x,)
            };
        }
        let f = match (P::WIDTH == 32, bits, truncate) {
            (true, 32, false) => run!("cvtss2si {r:e}, {x}"),
            (true, 32, true) => run!("cvttss2si {r:e}, {x}"),
            (true, 64, false) => run!("cvtss2si {r}, {x}"),
            (true, 64, true) => run!("cvttss2si {r}, {x}"),
            (false, 32, false) => run!("cvtsd2si {r:e}, {x}"),
            (false, 32, true) => run!("cvttsd2si {r:e}, {x}"),
            (false, 64, false) => run!("cvtsd2si {r}, {x}"),
            (false, 64, true) => run!("cvttsd2si {r}, {x}"),
            _ => return None,
        };
        let v = if bits == 32 {
            r as u32 as i32 as i64
        } else {
            r
        };
        Some((v, f))
    }

    /// The packed conversions on a whole register (narrowing forms zero bits 127:64).
    pub fn cvt_packed(kind: Cvt, a: u128, mx: Mx) -> Option<(u128, u32)> {
        let c = control(mx)?;
        let a = m(a);
        let (r, f) = match kind {
            Cvt::Ps2pd => xy!(c, "cvtps2pd {x}, {y}", a, a),
            Cvt::Pd2ps => xy!(c, "cvtpd2ps {x}, {y}", a, a),
            Cvt::Dq2ps => xy!(c, "cvtdq2ps {x}, {y}", a, a),
            Cvt::Ps2dq => xy!(c, "cvtps2dq {x}, {y}", a, a),
            Cvt::Tps2dq => xy!(c, "cvttps2dq {x}, {y}", a, a),
            Cvt::Dq2pd => xy!(c, "cvtdq2pd {x}, {y}", a, a),
            Cvt::Pd2dq => xy!(c, "cvtpd2dq {x}, {y}", a, a),
            Cvt::Tpd2dq => xy!(c, "cvttpd2dq {x}, {y}", a, a),
        };
        Some((u(r), f))
    }

    /// ROUND* control: imm[2] clear takes the rounding from imm[1:0], which is the same as
    /// loading that RC into MXCSR and using imm[2] set; so only imm 4 and 12 (PE suppressed)
    /// are needed.
    #[inline]
    fn round_control(imm: u8, mx: Mx) -> Option<u32> {
        if !features().sse41 {
            return None;
        }
        let mx = if imm & 4 != 0 {
            mx
        } else {
            mx.with_rc(imm as u32 & 3)
        };
        control(mx)
    }

    /// ROUNDSS/ROUNDSD.
    pub fn round_to_integral<P: Format>(a: u64, imm: u8, mx: Mx) -> Option<(u64, u32)> {
        let c = round_control(imm, mx)?;
        let a = a as i64;
        let (r, f) = match (P::WIDTH == 32, imm & 8 != 0) {
            (true, false) => xy!(c, "roundss {x}, {y}, 4", a, a),
            (true, true) => xy!(c, "roundss {x}, {y}, 12", a, a),
            (false, false) => xy!(c, "roundsd {x}, {y}, 4", a, a),
            (false, true) => xy!(c, "roundsd {x}, {y}, 12", a, a),
        };
        Some((low::<P>(r as u64), f))
    }

    /// ROUNDPS/ROUNDPD.
    pub fn round_packed<P: Format>(a: u128, imm: u8, mx: Mx) -> Option<(u128, u32)> {
        let c = round_control(imm, mx)?;
        let a = m(a);
        let (r, f) = match (P::WIDTH == 32, imm & 8 != 0) {
            (true, false) => xy!(c, "roundps {x}, {y}, 4", a, a),
            (true, true) => xy!(c, "roundps {x}, {y}, 12", a, a),
            (false, false) => xy!(c, "roundpd {x}, {y}, 4", a, a),
            (false, true) => xy!(c, "roundpd {x}, {y}, 12", a, a),
        };
        Some((u(r), f))
    }

    // ----- FMA -----

    /// Any NaN among the lanes of `P` in `v` (`n` lanes)?
    fn has_nan<P: Format>(v: u128, n: u32) -> bool {
        (0..n).any(|i| {
            let lane = (v >> (i * P::WIDTH)) as u64;
            is_nan::<P>(low::<P>(lane))
        })
    }

    /// `(neg_prod ? -(a*b) : a*b) + (neg_c ? -c : c)` with VFMADD/VFMSUB/VFNMADD/VFNMSUB231.
    pub fn fma<P: Format>(
        a: u64,
        b: u64,
        c: u64,
        neg_prod: bool,
        neg_c: bool,
        mx: Mx,
    ) -> Option<(u64, u32)> {
        if !features().fma || [a, b, c].iter().any(|&v| is_nan::<P>(low::<P>(v))) {
            return None;
        }
        let ctl = control(mx)?;
        let (a, b) = (a as i64, b as i64);
        let mut z = c as i64;
        macro_rules! run {
            ($insn:literal) => {
                under!(ctl, [$insn], z = inout(xmm_reg) z, x = in(xmm_reg) a, y = in(xmm_reg) b,)
            };
        }
        let f = match (P::WIDTH == 32, neg_prod, neg_c) {
            (true, false, false) => run!("vfmadd231ss {z}, {x}, {y}"),
            (true, false, true) => run!("vfmsub231ss {z}, {x}, {y}"),
            (true, true, false) => run!("vfnmadd231ss {z}, {x}, {y}"),
            (true, true, true) => run!("vfnmsub231ss {z}, {x}, {y}"),
            (false, false, false) => run!("vfmadd231sd {z}, {x}, {y}"),
            (false, false, true) => run!("vfmsub231sd {z}, {x}, {y}"),
            (false, true, false) => run!("vfnmadd231sd {z}, {x}, {y}"),
            (false, true, true) => run!("vfnmsub231sd {z}, {x}, {y}"),
        };
        Some((low::<P>(z as u64), f))
    }

    /// A packed FMA of kind 0 madd, 1 msub, 2 nmadd, 3 nmsub, 4 maddsub (even lanes
    /// subtract), 5 msubadd (even lanes add) on a 128-bit register: `a*b ± c` per lane.
    pub fn fma_packed<P: Format>(
        kind: u8,
        a: u128,
        b: u128,
        c: u128,
        mx: Mx,
    ) -> Option<(u128, u32)> {
        let n = 128 / P::WIDTH;
        if !features().fma || has_nan::<P>(a, n) || has_nan::<P>(b, n) || has_nan::<P>(c, n) {
            return None;
        }
        let ctl = control(mx)?;
        let (a, b) = (m(a), m(b));
        let mut z = m(c);
        macro_rules! run {
            ($insn:literal) => {
                under!(ctl, [$insn], z = inout(xmm_reg) z, x = in(xmm_reg) a, y = in(xmm_reg) b,)
            };
        }
        let f = match (P::WIDTH == 32, kind) {
            (true, 0) => run!("vfmadd231ps {z}, {x}, {y}"),
            (true, 1) => run!("vfmsub231ps {z}, {x}, {y}"),
            (true, 2) => run!("vfnmadd231ps {z}, {x}, {y}"),
            (true, 3) => run!("vfnmsub231ps {z}, {x}, {y}"),
            (true, 4) => run!("vfmaddsub231ps {z}, {x}, {y}"),
            (true, 5) => run!("vfmsubadd231ps {z}, {x}, {y}"),
            (false, 0) => run!("vfmadd231pd {z}, {x}, {y}"),
            (false, 1) => run!("vfmsub231pd {z}, {x}, {y}"),
            (false, 2) => run!("vfnmadd231pd {z}, {x}, {y}"),
            (false, 3) => run!("vfnmsub231pd {z}, {x}, {y}"),
            (false, 4) => run!("vfmaddsub231pd {z}, {x}, {y}"),
            (false, 5) => run!("vfmsubadd231pd {z}, {x}, {y}"),
            _ => return None,
        };
        Some((u(z), f))
    }

    /// Is the fast path used for this MXCSR (tests)?
    #[cfg(test)]
    pub fn usable(mx: Mx) -> bool {
        control(mx).is_some()
    }

    /// Host extensions (tests): (DAZ, SSE4.1, AVX, FMA).
    #[cfg(test)]
    pub fn host_features() -> (bool, bool, bool, bool) {
        let f = features();
        (f.daz, f.sse41, f.avx, f.fma)
    }
}

/// Other host architectures: no fast path.
#[cfg(not(target_arch = "x86_64"))]
mod none {
    use super::{Cvt, Op};
    use crate::fp::{Format, Mx};

    pub fn scalar<P: Format>(_: Op, _: u64, _: u64, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn packed<P: Format>(_: Op, _: u128, _: u128, _: Mx) -> Option<(u128, u32)> {
        None
    }
    pub fn compare<P: Format>(_: u64, _: u64, _: u8, _: Mx) -> Option<(bool, u32)> {
        None
    }
    pub fn compare_packed<P: Format>(_: u128, _: u128, _: u8, _: Mx) -> Option<(u128, u32)> {
        None
    }
    pub fn comi<P: Format>(_: u64, _: u64, _: bool, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn f32_to_f64(_: u32, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn f64_to_f32(_: u64, _: Mx) -> Option<(u32, u32)> {
        None
    }
    pub fn int_to_float<P: Format>(_: i64, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn float_to_int<P: Format>(_: u64, _: u32, _: bool, _: Mx) -> Option<(i64, u32)> {
        None
    }
    pub fn cvt_packed(_: Cvt, _: u128, _: Mx) -> Option<(u128, u32)> {
        None
    }
    pub fn round_to_integral<P: Format>(_: u64, _: u8, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn round_packed<P: Format>(_: u128, _: u8, _: Mx) -> Option<(u128, u32)> {
        None
    }
    pub fn fma<P: Format>(_: u64, _: u64, _: u64, _: bool, _: bool, _: Mx) -> Option<(u64, u32)> {
        None
    }
    pub fn fma_packed<P: Format>(_: u8, _: u128, _: u128, _: u128, _: Mx) -> Option<(u128, u32)> {
        None
    }
}
