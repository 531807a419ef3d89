//! Which legacy-SSE data moves `sse_int.rs` lowers natively (`lockstep_interp::ops::sse_mov`):
//! MOVDQA/MOVDQU/MOVAPS/MOVUPS/MOVAPD/MOVUPD loads, stores and register moves, MOVNTDQ/
//! MOVNTPS/MOVNTPD stores, MOVD/MOVQ between XMM and r/m32|r/m64, MOVQ xmm, xmm/m64 and
//! MOVQ xmm/m64, xmm, MOVSS/MOVSD (loads zero the rest of the low 128 bits, register forms
//! merge the low element, stores write it), MOVHPS/MOVHPD/MOVLPS/MOVLPD loads and stores.

use super::sse_int::{Op, Spec};
use iced_x86::{Code, Instruction, OpKind};

/// The move `ins` is, if covered (legacy encodings only).
pub(super) fn classify(ins: &Instruction) -> Option<Spec> {
    use Code as C;
    Some(match ins.code() {
        C::Movdqa_xmm_xmmm128
        | C::Movaps_xmm_xmmm128
        | C::Movapd_xmm_xmmm128
        | C::Movdqa_xmmm128_xmm
        | C::Movaps_xmmm128_xmm
        | C::Movapd_xmmm128_xmm
        | C::Movntdq_m128_xmm
        | C::Movntps_m128_xmm
        | C::Movntpd_m128_xmm => Spec::legacy(Op::Mov, 16),
        C::Movdqu_xmm_xmmm128
        | C::Movups_xmm_xmmm128
        | C::Movupd_xmm_xmmm128
        | C::Movdqu_xmmm128_xmm
        | C::Movups_xmmm128_xmm
        | C::Movupd_xmmm128_xmm => Spec::legacy(Op::Mov, 1),
        // (No alignment rule: MOVD/MOVQ access 4 or 8 bytes with `read_op`/`write_op`.)
        C::Movd_xmm_rm32 | C::Movq_xmm_rm64 | C::Movq_xmm_xmmm64 => Spec::legacy(Op::MovToVec, 1),
        C::Movd_rm32_xmm | C::Movq_rm64_xmm | C::Movq_xmmm64_xmm => Spec::legacy(Op::MovFromVec, 1),
        // MOVSS/MOVSD (`sse_mov::movss_load` …): a memory source zeroes bits 127:32|64 as
        // MOVD/MOVQ do; a memory destination gets the low element; register forms merge it.
        C::Movss_xmm_xmmm32 | C::Movsd_xmm_xmmm64 if ins.op1_kind() == OpKind::Memory => {
            Spec::legacy(Op::MovToVec, 1)
        }
        C::Movss_xmmm32_xmm | C::Movsd_xmmm64_xmm if ins.op0_kind() == OpKind::Memory => {
            Spec::legacy(Op::MovFromVec, 1)
        }
        C::Movss_xmm_xmmm32 | C::Movss_xmmm32_xmm => Spec::legacy(Op::MovLow(4), 1),
        C::Movsd_xmm_xmmm64 | C::Movsd_xmmm64_xmm => Spec::legacy(Op::MovLow(8), 1),
        // MOVHPS/MOVHPD, MOVLPS/MOVLPD (`sse_mov::movhp_load` …): one qword of the register.
        C::Movhps_xmm_m64 | C::Movhpd_xmm_m64 => Spec::legacy(Op::LoadHalf(true), 1),
        C::Movlps_xmm_m64 | C::Movlpd_xmm_m64 => Spec::legacy(Op::LoadHalf(false), 1),
        C::Movhps_m64_xmm | C::Movhpd_m64_xmm => Spec::legacy(Op::StoreHigh, 1),
        C::Movlps_m64_xmm | C::Movlpd_m64_xmm => Spec::legacy(Op::MovFromVec, 1),
        _ => return None,
    })
}
