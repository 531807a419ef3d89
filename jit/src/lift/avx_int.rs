//! Which VEX-encoded (AVX/AVX2) instructions `sse_int.rs` lowers natively, as glibc's AVX2
//! string and memory functions use them (`lockstep_interp::ops::{avx_mov, avx_int}`):
//! VMOVDQA/VMOVDQU/VMOVAPS/VMOVUPS/VMOVAPD/VMOVUPD/VLDDQU/VMOVNT* of 128 and 256 bits,
//! VMOVD/VMOVQ, VPMOVMSKB, VZEROUPPER, VPBROADCASTB/W/D/Q and VBROADCASTSS/SD, and the three-operand integer arithmetic, logic,
//! compares, min/max, unpacks and VPSHUFB (each 128-bit lane separately, like the
//! interpreter's `per_lane`). A 128-bit form zeroes bits 255:128 of its register destination.

use super::sse_int::{Bin, Op, Spec};
use cranelift_codegen::ir::types;
use iced_x86::{Code, EncodingKind, Instruction, Mnemonic, OpKind};
use lockstep_interp::ops::avx_common::vlen;

/// The VEX instruction `ins` is, if covered.
pub(super) fn classify(ins: &Instruction) -> Option<Spec> {
    use Code as C;
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    let len = vlen(ins);
    let spec = |op, align| {
        Some(Spec {
            op,
            vex: Some(len),
            align,
        })
    };
    match ins.code() {
        C::VEX_Vmovdqa_xmm_xmmm128
        | C::VEX_Vmovdqa_xmmm128_xmm
        | C::VEX_Vmovdqa_ymm_ymmm256
        | C::VEX_Vmovdqa_ymmm256_ymm
        | C::VEX_Vmovaps_xmm_xmmm128
        | C::VEX_Vmovaps_xmmm128_xmm
        | C::VEX_Vmovaps_ymm_ymmm256
        | C::VEX_Vmovaps_ymmm256_ymm
        | C::VEX_Vmovapd_xmm_xmmm128
        | C::VEX_Vmovapd_xmmm128_xmm
        | C::VEX_Vmovapd_ymm_ymmm256
        | C::VEX_Vmovapd_ymmm256_ymm
        | C::VEX_Vmovntdq_m128_xmm
        | C::VEX_Vmovntdq_m256_ymm
        | C::VEX_Vmovntps_m128_xmm
        | C::VEX_Vmovntps_m256_ymm
        | C::VEX_Vmovntpd_m128_xmm
        | C::VEX_Vmovntpd_m256_ymm
        | C::VEX_Vmovntdqa_xmm_m128
        | C::VEX_Vmovntdqa_ymm_m256 => return spec(Op::Mov, len),
        C::VEX_Vmovdqu_xmm_xmmm128
        | C::VEX_Vmovdqu_xmmm128_xmm
        | C::VEX_Vmovdqu_ymm_ymmm256
        | C::VEX_Vmovdqu_ymmm256_ymm
        | C::VEX_Vmovups_xmm_xmmm128
        | C::VEX_Vmovups_xmmm128_xmm
        | C::VEX_Vmovups_ymm_ymmm256
        | C::VEX_Vmovups_ymmm256_ymm
        | C::VEX_Vmovupd_xmm_xmmm128
        | C::VEX_Vmovupd_xmmm128_xmm
        | C::VEX_Vmovupd_ymm_ymmm256
        | C::VEX_Vmovupd_ymmm256_ymm
        | C::VEX_Vlddqu_xmm_m128
        | C::VEX_Vlddqu_ymm_m256 => return spec(Op::Mov, 1),
        C::VEX_Vmovd_xmm_rm32 | C::VEX_Vmovq_xmm_rm64 | C::VEX_Vmovq_xmm_xmmm64 => {
            return spec(Op::MovToVec, 1)
        }
        C::VEX_Vmovd_rm32_xmm | C::VEX_Vmovq_rm64_xmm | C::VEX_Vmovq_xmmm64_xmm => {
            return spec(Op::MovFromVec, 1)
        }
        // VMOVSS/VMOVSD (`avx_mov::h_scalar_load`, `h_low_store`, `h_movsd_merge`): a load
        // zero-extends the scalar to 256 bits, a store writes it, the register form merges.
        C::VEX_Vmovss_xmm_m32 | C::VEX_Vmovsd_xmm_m64 => return spec(Op::MovToVec, 1),
        C::VEX_Vmovss_m32_xmm | C::VEX_Vmovsd_m64_xmm => return spec(Op::MovFromVec, 1),
        C::VEX_Vmovss_xmm_xmm_xmm | C::VEX_Vmovss_xmm_xmm_xmm_0F11 => {
            return spec(Op::MergeLow(4), 1)
        }
        C::VEX_Vmovsd_xmm_xmm_xmm | C::VEX_Vmovsd_xmm_xmm_xmm_0F11 => {
            return spec(Op::MergeLow(8), 1)
        }
        C::VEX_Vpmovmskb_r32_xmm
        | C::VEX_Vpmovmskb_r64_xmm
        | C::VEX_Vpmovmskb_r32_ymm
        | C::VEX_Vpmovmskb_r64_ymm => return spec(Op::Movmsk, 1),
        C::VEX_Vzeroupper => return spec(Op::Vzeroupper, 1),
        _ => {}
    }
    let bty = match ins.mnemonic() {
        Mnemonic::Vpbroadcastb => Some(types::I8X16),
        Mnemonic::Vpbroadcastw => Some(types::I16X8),
        Mnemonic::Vpbroadcastd | Mnemonic::Vbroadcastss => Some(types::I32X4),
        Mnemonic::Vpbroadcastq | Mnemonic::Vbroadcastsd => Some(types::I64X2),
        _ => None,
    };
    if let Some(ty) = bty {
        let src_ok = match ins.op1_kind() {
            OpKind::Register => ins.op1_register().is_xmm(),
            OpKind::Memory => ins.memory_size().size() == ty.lane_bits() as usize / 8,
            _ => false,
        };
        return (ins.op_count() == 2 && src_ok).then_some(Spec {
            op: Op::Broadcast(ty),
            vex: Some(len),
            align: 1,
        });
    }
    // Three-operand `dst = f(src1, src2/m)` (the interpreter's `avx_int` binary table).
    let regs = ins.op_count() == 3
        && ins.op0_kind() == OpKind::Register
        && ins.op1_kind() == OpKind::Register
        && matches!(ins.op2_kind(), OpKind::Register | OpKind::Memory);
    if !regs {
        return None;
    }
    use types::{I16X8, I32X4, I64X2, I8X16};
    use Mnemonic as M;
    let b = match ins.mnemonic() {
        M::Vpaddb => Bin::Add(I8X16),
        M::Vpaddw => Bin::Add(I16X8),
        M::Vpaddd => Bin::Add(I32X4),
        M::Vpaddq => Bin::Add(I64X2),
        M::Vpsubb => Bin::Sub(I8X16),
        M::Vpsubw => Bin::Sub(I16X8),
        M::Vpsubd => Bin::Sub(I32X4),
        M::Vpsubq => Bin::Sub(I64X2),
        M::Vpaddusb => Bin::AddSatU(I8X16),
        M::Vpaddusw => Bin::AddSatU(I16X8),
        M::Vpsubusb => Bin::SubSatU(I8X16),
        M::Vpsubusw => Bin::SubSatU(I16X8),
        M::Vpcmpeqb => Bin::CmpEq(I8X16),
        M::Vpcmpeqw => Bin::CmpEq(I16X8),
        M::Vpcmpeqd => Bin::CmpEq(I32X4),
        M::Vpcmpgtb => Bin::CmpGt(I8X16),
        M::Vpcmpgtw => Bin::CmpGt(I16X8),
        M::Vpcmpgtd => Bin::CmpGt(I32X4),
        M::Vpminub => Bin::MinU(I8X16),
        M::Vpmaxub => Bin::MaxU(I8X16),
        M::Vpminsw => Bin::MinS(I16X8),
        M::Vpmaxsw => Bin::MaxS(I16X8),
        M::Vpminsb => Bin::MinS(I8X16),
        M::Vpmaxsb => Bin::MaxS(I8X16),
        M::Vpminuw => Bin::MinU(I16X8),
        M::Vpmaxuw => Bin::MaxU(I16X8),
        M::Vpminsd => Bin::MinS(I32X4),
        M::Vpmaxsd => Bin::MaxS(I32X4),
        M::Vpminud => Bin::MinU(I32X4),
        M::Vpmaxud => Bin::MaxU(I32X4),
        M::Vpand | M::Vandps | M::Vandpd => Bin::And,
        M::Vpandn | M::Vandnps | M::Vandnpd => Bin::AndNot,
        M::Vpor | M::Vorps | M::Vorpd => Bin::Or,
        M::Vpxor | M::Vxorps | M::Vxorpd => Bin::Xor,
        M::Vpshufb => Bin::Pshufb,
        M::Vpacksswb => Bin::Pack(I16X8, false),
        M::Vpackssdw => Bin::Pack(I32X4, false),
        M::Vpackuswb => Bin::Pack(I16X8, true),
        M::Vpackusdw => Bin::Pack(I32X4, true),
        M::Vpcmpeqq => Bin::CmpEq(I64X2),
        M::Vpmullw => Bin::Mul(I16X8),
        M::Vpmulld => Bin::Mul(I32X4),
        M::Vpavgb => Bin::Avg(I8X16),
        M::Vpavgw => Bin::Avg(I16X8),
        M::Vpunpcklbw => Bin::Unpack(1, false),
        M::Vpunpcklwd => Bin::Unpack(2, false),
        M::Vpunpckldq | M::Vunpcklps => Bin::Unpack(4, false),
        M::Vpunpcklqdq | M::Vunpcklpd => Bin::Unpack(8, false),
        M::Vpunpckhbw => Bin::Unpack(1, true),
        M::Vpunpckhwd => Bin::Unpack(2, true),
        M::Vpunpckhdq | M::Vunpckhps => Bin::Unpack(4, true),
        M::Vpunpckhqdq | M::Vunpckhpd => Bin::Unpack(8, true),
        _ => return None,
    };
    spec(Op::Bin(b), 1)
}
