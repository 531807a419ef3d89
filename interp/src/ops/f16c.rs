//! F16C: VCVTPH2PS (128 and 256 bit) and VCVTPS2PH (imm8 rounding control, to an XMM
//! register or memory).

use crate::decode::Handler;
use crate::fault::Trap;
use crate::fp::f16::{f16_to_f32, f32_to_f16};
use crate::fp::Mx;
use crate::ops::avx_common::{check_avx, get_ymm, is_ymm, read_vec, vec_index};
use crate::ops::avx_fp::finish;
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::VEX_Vcvtph2ps_xmm_xmmm64 | Code::VEX_Vcvtph2ps_ymm_xmmm128 => h_cvtph2ps,
        Code::VEX_Vcvtps2ph_xmmm64_xmm_imm8 | Code::VEX_Vcvtps2ph_xmmm128_ymm_imm8 => h_cvtps2ph,
        _ => return None,
    })
}

/// `n` halves of `src` (from bit 0) to singles: (result, flags).
pub fn ph2ps(src: u128, n: usize) -> (V2, u32) {
    let mut r = [0u128; 2];
    let mut flags = 0;
    for i in 0..n {
        let (v, f) = f16_to_f32((src >> (16 * i)) as u16);
        r[i / 4] |= (v as u128) << (32 * (i % 4));
        flags |= f;
    }
    (r, flags)
}

type V2 = [u128; 2];

/// `n` singles of `src` to halves (packed from bit 0).
pub fn ps2ph(src: V2, n: usize, imm: u8, mx: Mx) -> (u128, u32) {
    let mut r = 0u128;
    let mut flags = 0;
    for i in 0..n {
        let s = (src[i / 4] >> (32 * (i % 4))) as u32;
        let (v, f) = f32_to_f16(s, imm, mx);
        r |= (v as u128) << (16 * i);
        flags |= f;
    }
    (r, flags)
}

fn h_cvtph2ps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = if is_ymm(ins.op_register(0)) { 32 } else { 16 };
    let s = read_vec(x, ins, 1, false)?[0];
    let (r, flags) = ph2ps(s, len as usize / 4);
    finish(x, ins, r, len, flags)
}

/// VCVTPS2PH xmm/m64, xmm, imm8 and xmm/m128, ymm, imm8: a register destination gets its
/// upper bits zeroed; memory receives exactly 8 or 16 bytes.
fn h_cvtps2ph(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let r1 = ins.op_register(1);
    let n = if is_ymm(r1) { 8 } else { 4 };
    let s = get_ymm(&x.cpu.state, vec_index(r1));
    let (r, flags) = ps2ph(s, n, ins.immediate8(), Mx(x.cpu.state.mxcsr));
    finish(x, ins, [r, 0], 16, flags)
}
