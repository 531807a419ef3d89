//! Which SSE floating-point instructions `sse_fp.rs` lowers: the operation, format, lane
//! count and encoding of each covered form, and the operand and host-feature rules.

use iced_x86::{Code, EncodingKind, Instruction, Mnemonic, OpKind};
use lockstep_interp::operand::gpr_ref;

/// The rounded operations.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Ar {
    Add,
    Sub,
    Mul,
    Div,
    /// Square root of the source (operand 1).
    Sqrt,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Arith(Ar),
    /// MIN (false) / MAX (true).
    MinMax(bool),
    /// COMIS/UCOMIS (they differ only for NaNs, which take the slow path).
    Comi,
    /// CVTSI2SS/SD xmm, r/m32|r/m64.
    IntToFloat,
    /// CVTTSS2SI/CVTTSD2SI r32|r64, xmm/m32|m64.
    FloatToInt,
    /// CVTSS2SD.
    Widen,
    /// CVTSD2SS.
    Narrow,
    /// VFMADD/VFMSUB/VFNMADD/VFNMSUB{132,213,231}{SS,SD}: `(-)(a*b) (+/-) c` with the
    /// operand order (132, 213, 231), rounded once. Lowered only with MXCSR.PE already set
    /// (so its exactness need not be decided).
    Fma {
        order: u16,
        neg_prod: bool,
        neg_c: bool,
    },
}

#[derive(Clone, Copy)]
pub(super) struct Spec {
    pub op: Op,
    /// The (source) floating-point format is double.
    pub f64: bool,
    /// Lanes computed: 1 (scalar) or 2/4 (packed, the whole XMM register).
    pub lanes: u8,
    /// VEX encoding: the first source is operand 1 (bits 127:lane of the result come from
    /// it, bits 255:128 are zeroed) and the second operand 2 — except for the two-operand
    /// COMIS and CVTT*2SI, whose operands are those of the legacy forms.
    pub vex: bool,
}

impl Spec {
    /// The fast path needs the default MXCSR environment.
    pub(super) fn needs_env(self) -> bool {
        !matches!(self.op, Op::MinMax(_) | Op::Comi)
    }

    /// Three-operand VEX form (`dst, src1, src2`; FMA: `dst, src2, src3`).
    pub(super) fn three(self) -> bool {
        self.vex && !matches!(self.op, Op::Comi | Op::FloatToInt)
    }

    /// Operand numbers of the first and second source.
    pub(super) fn sources(self) -> (u32, u32) {
        if self.three() {
            (1, 2)
        } else {
            (0, 1)
        }
    }
}

/// The host has FMA (and AVX), as Cranelift's `has_fma` (set by `cranelift_native` from the
/// same detection) and the interpreter's `fp::host::has_fma` require.
fn host_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn classify(ins: &Instruction) -> Option<Spec> {
    use Code as C;
    let s = |op, f64, lanes| {
        Some(Spec {
            op,
            f64,
            lanes,
            vex: false,
        })
    };
    let a = |x| Op::Arith(x);
    if let Some(spec) = classify_vex(ins) {
        return Some(spec);
    }
    match ins.code() {
        C::Addss_xmm_xmmm32 => s(a(Ar::Add), false, 1),
        C::Addsd_xmm_xmmm64 => s(a(Ar::Add), true, 1),
        C::Subss_xmm_xmmm32 => s(a(Ar::Sub), false, 1),
        C::Subsd_xmm_xmmm64 => s(a(Ar::Sub), true, 1),
        C::Mulss_xmm_xmmm32 => s(a(Ar::Mul), false, 1),
        C::Mulsd_xmm_xmmm64 => s(a(Ar::Mul), true, 1),
        C::Divss_xmm_xmmm32 => s(a(Ar::Div), false, 1),
        C::Divsd_xmm_xmmm64 => s(a(Ar::Div), true, 1),
        C::Sqrtss_xmm_xmmm32 => s(a(Ar::Sqrt), false, 1),
        C::Sqrtsd_xmm_xmmm64 => s(a(Ar::Sqrt), true, 1),
        C::Addps_xmm_xmmm128 => s(a(Ar::Add), false, 4),
        C::Addpd_xmm_xmmm128 => s(a(Ar::Add), true, 2),
        C::Subps_xmm_xmmm128 => s(a(Ar::Sub), false, 4),
        C::Subpd_xmm_xmmm128 => s(a(Ar::Sub), true, 2),
        C::Mulps_xmm_xmmm128 => s(a(Ar::Mul), false, 4),
        C::Mulpd_xmm_xmmm128 => s(a(Ar::Mul), true, 2),
        C::Divps_xmm_xmmm128 => s(a(Ar::Div), false, 4),
        C::Divpd_xmm_xmmm128 => s(a(Ar::Div), true, 2),
        C::Sqrtps_xmm_xmmm128 => s(a(Ar::Sqrt), false, 4),
        C::Sqrtpd_xmm_xmmm128 => s(a(Ar::Sqrt), true, 2),
        C::Minss_xmm_xmmm32 => s(Op::MinMax(false), false, 1),
        C::Minsd_xmm_xmmm64 => s(Op::MinMax(false), true, 1),
        C::Maxss_xmm_xmmm32 => s(Op::MinMax(true), false, 1),
        C::Maxsd_xmm_xmmm64 => s(Op::MinMax(true), true, 1),
        C::Comiss_xmm_xmmm32 | C::Ucomiss_xmm_xmmm32 => s(Op::Comi, false, 1),
        C::Comisd_xmm_xmmm64 | C::Ucomisd_xmm_xmmm64 => s(Op::Comi, true, 1),
        C::Cvtsi2ss_xmm_rm32 | C::Cvtsi2ss_xmm_rm64 => s(Op::IntToFloat, false, 1),
        C::Cvtsi2sd_xmm_rm32 | C::Cvtsi2sd_xmm_rm64 => s(Op::IntToFloat, true, 1),
        C::Cvttss2si_r32_xmmm32 | C::Cvttss2si_r64_xmmm32 => s(Op::FloatToInt, false, 1),
        C::Cvttsd2si_r32_xmmm64 | C::Cvttsd2si_r64_xmmm64 => s(Op::FloatToInt, true, 1),
        C::Cvtss2sd_xmm_xmmm32 => s(Op::Widen, false, 1),
        C::Cvtsd2ss_xmm_xmmm64 => s(Op::Narrow, true, 1),
        _ => None,
    }
}

/// The VEX scalar forms.
fn classify_vex(ins: &Instruction) -> Option<Spec> {
    use Code as C;
    let s = |op, f64| {
        Some(Spec {
            op,
            f64,
            lanes: 1,
            vex: true,
        })
    };
    let a = |x| Op::Arith(x);
    if let Some(op) = fma_op(ins) {
        return s(op, format_is_f64(ins));
    }
    match ins.code() {
        C::VEX_Vaddss_xmm_xmm_xmmm32 => s(a(Ar::Add), false),
        C::VEX_Vaddsd_xmm_xmm_xmmm64 => s(a(Ar::Add), true),
        C::VEX_Vsubss_xmm_xmm_xmmm32 => s(a(Ar::Sub), false),
        C::VEX_Vsubsd_xmm_xmm_xmmm64 => s(a(Ar::Sub), true),
        C::VEX_Vmulss_xmm_xmm_xmmm32 => s(a(Ar::Mul), false),
        C::VEX_Vmulsd_xmm_xmm_xmmm64 => s(a(Ar::Mul), true),
        C::VEX_Vdivss_xmm_xmm_xmmm32 => s(a(Ar::Div), false),
        C::VEX_Vdivsd_xmm_xmm_xmmm64 => s(a(Ar::Div), true),
        C::VEX_Vsqrtss_xmm_xmm_xmmm32 => s(a(Ar::Sqrt), false),
        C::VEX_Vsqrtsd_xmm_xmm_xmmm64 => s(a(Ar::Sqrt), true),
        C::VEX_Vminss_xmm_xmm_xmmm32 => s(Op::MinMax(false), false),
        C::VEX_Vminsd_xmm_xmm_xmmm64 => s(Op::MinMax(false), true),
        C::VEX_Vmaxss_xmm_xmm_xmmm32 => s(Op::MinMax(true), false),
        C::VEX_Vmaxsd_xmm_xmm_xmmm64 => s(Op::MinMax(true), true),
        C::VEX_Vcomiss_xmm_xmmm32 | C::VEX_Vucomiss_xmm_xmmm32 => s(Op::Comi, false),
        C::VEX_Vcomisd_xmm_xmmm64 | C::VEX_Vucomisd_xmm_xmmm64 => s(Op::Comi, true),
        C::VEX_Vcvtsi2ss_xmm_xmm_rm32 | C::VEX_Vcvtsi2ss_xmm_xmm_rm64 => s(Op::IntToFloat, false),
        C::VEX_Vcvtsi2sd_xmm_xmm_rm32 | C::VEX_Vcvtsi2sd_xmm_xmm_rm64 => s(Op::IntToFloat, true),
        C::VEX_Vcvttss2si_r32_xmmm32 | C::VEX_Vcvttss2si_r64_xmmm32 => s(Op::FloatToInt, false),
        C::VEX_Vcvttsd2si_r32_xmmm64 | C::VEX_Vcvttsd2si_r64_xmmm64 => s(Op::FloatToInt, true),
        C::VEX_Vcvtss2sd_xmm_xmm_xmmm32 => s(Op::Widen, false),
        C::VEX_Vcvtsd2ss_xmm_xmm_xmmm64 => s(Op::Narrow, true),
        _ => None,
    }
}

/// The scalar FMA3 forms (VEX only).
fn fma_op(ins: &Instruction) -> Option<Op> {
    use Mnemonic as M;
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    let (kind, order) = match ins.mnemonic() {
        M::Vfmadd132sd | M::Vfmadd132ss => (0, 132),
        M::Vfmadd213sd | M::Vfmadd213ss => (0, 213),
        M::Vfmadd231sd | M::Vfmadd231ss => (0, 231),
        M::Vfmsub132sd | M::Vfmsub132ss => (1, 132),
        M::Vfmsub213sd | M::Vfmsub213ss => (1, 213),
        M::Vfmsub231sd | M::Vfmsub231ss => (1, 231),
        M::Vfnmadd132sd | M::Vfnmadd132ss => (2, 132),
        M::Vfnmadd213sd | M::Vfnmadd213ss => (2, 213),
        M::Vfnmadd231sd | M::Vfnmadd231ss => (2, 231),
        M::Vfnmsub132sd | M::Vfnmsub132ss => (3, 132),
        M::Vfnmsub213sd | M::Vfnmsub213ss => (3, 213),
        M::Vfnmsub231sd | M::Vfnmsub231ss => (3, 231),
        _ => return None,
    };
    Some(Op::Fma {
        order,
        neg_prod: kind >= 2,
        neg_c: kind & 1 == 1,
    })
}

/// An FMA mnemonic of the SD (double) form?
fn format_is_f64(ins: &Instruction) -> bool {
    use Mnemonic as M;
    matches!(
        ins.mnemonic(),
        M::Vfmadd132sd
            | M::Vfmadd213sd
            | M::Vfmadd231sd
            | M::Vfmsub132sd
            | M::Vfmsub213sd
            | M::Vfmsub231sd
            | M::Vfnmadd132sd
            | M::Vfnmadd213sd
            | M::Vfnmadd231sd
            | M::Vfnmsub132sd
            | M::Vfnmsub213sd
            | M::Vfnmsub231sd
    )
}

/// What `ins` does, if it is lowered here.
pub(super) fn covered(ins: &Instruction) -> Option<Spec> {
    if ins.has_lock_prefix() {
        return None;
    }
    let spec = classify(ins)?;
    // The f64 remainders need the host FMA.
    let fma = matches!(spec.op, Op::Arith(Ar::Mul | Ar::Div | Ar::Sqrt)) && spec.f64
        || matches!(spec.op, Op::Fma { .. });
    if fma && !host_fma() {
        return None;
    }
    (0..ins.op_count())
        .all(|n| operand_ok(ins, n))
        .then_some(spec)
}

/// Is `ins` one of the instructions lowered here?
pub fn covers(ins: &Instruction) -> bool {
    covered(ins).is_some()
}

fn operand_ok(ins: &Instruction, n: u32) -> bool {
    match ins.op_kind(n) {
        OpKind::Register => {
            let r = ins.op_register(n);
            r.is_xmm() || ((r.is_gpr32() || r.is_gpr64()) && gpr_ref(r).is_some_and(|g| !g.high))
        }
        OpKind::Memory => super::mem::addressable(ins),
        _ => false,
    }
}
