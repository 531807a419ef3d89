//! VEX-encoded data movement (AVX 128/256-bit): VMOVD/VMOVQ, VMOVDQA/U, VMOVAPS/UPS/APD/UPD,
//! VMOVNTDQ/NTPS/NTPD/NTDQA, VLDDQU, VMOVSS/VMOVSD, VMOVHPS/HPD/LPS/LPD, VMOVHLPS/VMOVLHPS,
//! VMOVSLDUP/VMOVSHDUP/VMOVDDUP, VZEROUPPER/VZEROALL, VPMOVMSKB, VMOVMSKPS/PD.
//!
//! Register destinations follow the VEX zeroing rule (a 128-bit write clears bits 255:128);
//! the aligned forms (VMOVDQA, VMOVAPS/PD, VMOVNT*) raise #GP(0) on a memory operand that is
//! not aligned to its size.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::avx_common::{
    check_avx, get_ymm, per_lane, read_vec, set_vec, set_ymm, vec_index, vlen, write_vec,
};
use crate::ops::{sse_blend, sse_shuf};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code::*;
    Some(match ins.code() {
        VEX_Vmovd_xmm_rm32 | VEX_Vmovq_xmm_rm64 => h_gpr_to_vec,
        VEX_Vmovd_rm32_xmm | VEX_Vmovq_rm64_xmm => h_vec_to_gpr,
        VEX_Vmovq_xmm_xmmm64 => h_movq_load,
        VEX_Vmovq_xmmm64_xmm => h_movq_store,
        VEX_Vmovdqa_xmm_xmmm128
        | VEX_Vmovdqa_xmmm128_xmm
        | VEX_Vmovdqa_ymm_ymmm256
        | VEX_Vmovdqa_ymmm256_ymm
        | VEX_Vmovaps_xmm_xmmm128
        | VEX_Vmovaps_xmmm128_xmm
        | VEX_Vmovaps_ymm_ymmm256
        | VEX_Vmovaps_ymmm256_ymm
        | VEX_Vmovapd_xmm_xmmm128
        | VEX_Vmovapd_xmmm128_xmm
        | VEX_Vmovapd_ymm_ymmm256
        | VEX_Vmovapd_ymmm256_ymm
        | VEX_Vmovntdq_m128_xmm
        | VEX_Vmovntdq_m256_ymm
        | VEX_Vmovntps_m128_xmm
        | VEX_Vmovntps_m256_ymm
        | VEX_Vmovntpd_m128_xmm
        | VEX_Vmovntpd_m256_ymm
        | VEX_Vmovntdqa_xmm_m128
        | VEX_Vmovntdqa_ymm_m256 => h_mov_aligned,
        VEX_Vmovdqu_xmm_xmmm128
        | VEX_Vmovdqu_xmmm128_xmm
        | VEX_Vmovdqu_ymm_ymmm256
        | VEX_Vmovdqu_ymmm256_ymm
        | VEX_Vmovups_xmm_xmmm128
        | VEX_Vmovups_xmmm128_xmm
        | VEX_Vmovups_ymm_ymmm256
        | VEX_Vmovups_ymmm256_ymm
        | VEX_Vmovupd_xmm_xmmm128
        | VEX_Vmovupd_xmmm128_xmm
        | VEX_Vmovupd_ymm_ymmm256
        | VEX_Vmovupd_ymmm256_ymm
        | VEX_Vlddqu_xmm_m128
        | VEX_Vlddqu_ymm_m256 => h_mov_unaligned,
        VEX_Vmovss_xmm_xmm_xmm | VEX_Vmovss_xmm_xmm_xmm_0F11 => h_movss_merge,
        VEX_Vmovsd_xmm_xmm_xmm | VEX_Vmovsd_xmm_xmm_xmm_0F11 => h_movsd_merge,
        VEX_Vmovss_xmm_m32 | VEX_Vmovsd_xmm_m64 => h_scalar_load,
        VEX_Vmovss_m32_xmm | VEX_Vmovsd_m64_xmm | VEX_Vmovlps_m64_xmm | VEX_Vmovlpd_m64_xmm => {
            h_low_store
        }
        VEX_Vmovhps_m64_xmm | VEX_Vmovhpd_m64_xmm => h_high_store,
        VEX_Vmovhps_xmm_xmm_m64 | VEX_Vmovhpd_xmm_xmm_m64 | VEX_Vmovlhps_xmm_xmm_xmm => {
            h_movhps_load
        }
        VEX_Vmovlps_xmm_xmm_m64 | VEX_Vmovlpd_xmm_xmm_m64 => h_movlps_load,
        VEX_Vmovhlps_xmm_xmm_xmm => h_movhlps,
        VEX_Vmovsldup_xmm_xmmm128 | VEX_Vmovsldup_ymm_ymmm256 => h_movsldup,
        VEX_Vmovshdup_xmm_xmmm128 | VEX_Vmovshdup_ymm_ymmm256 => h_movshdup,
        VEX_Vmovddup_xmm_xmmm64 | VEX_Vmovddup_ymm_ymmm256 => h_movddup,
        VEX_Vzeroupper => h_vzeroupper,
        VEX_Vzeroall => h_vzeroall,
        VEX_Vpmovmskb_r32_xmm
        | VEX_Vpmovmskb_r64_xmm
        | VEX_Vpmovmskb_r32_ymm
        | VEX_Vpmovmskb_r64_ymm => h_vpmovmskb,
        VEX_Vmovmskps_r32_xmm
        | VEX_Vmovmskps_r64_xmm
        | VEX_Vmovmskps_r32_ymm
        | VEX_Vmovmskps_r64_ymm => h_vmovmskps,
        VEX_Vmovmskpd_r32_xmm
        | VEX_Vmovmskpd_r64_xmm
        | VEX_Vmovmskpd_r32_ymm
        | VEX_Vmovmskpd_r64_ymm => h_vmovmskpd,
        _ => return None,
    })
}

// ----- semantic functions -----

/// VMOVSS xmm1, xmm2, xmm3: dword 0 from `low`, dwords 3:1 from `high`.
pub fn movss_merge(high: u128, low: u128) -> u128 {
    (high & !0xffff_ffffu128) | (low & 0xffff_ffff)
}

/// VMOVSD xmm1, xmm2, xmm3: qword 0 from `low`, qword 1 from `high`.
pub fn movsd_merge(high: u128, low: u128) -> u128 {
    (high & !(u64::MAX as u128)) | (low & u64::MAX as u128)
}

/// VMOVDDUP: each lane's even qword twice.
pub fn movddup_lane(_: u128, s: u128) -> u128 {
    sse_blend::movddup(s as u64)
}

/// VPMOVMSKB over `len` bytes: bit i = sign bit of byte i.
pub fn vpmovmskb(v: [u128; 2], len: u8) -> u64 {
    let hi = if len == 32 {
        sse_shuf::pmovmskb(v[1])
    } else {
        0
    };
    sse_shuf::pmovmskb(v[0]) | hi << 16
}

// ----- handlers -----

/// VMOVD/VMOVQ xmm, r/m32 or r/m64: zero-extended to 256 bits.
fn h_gpr_to_vec(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = x.read_op(ins, 1)?;
    set_vec(
        &mut x.cpu.state,
        vec_index(ins.op_register(0)),
        [v as u128, 0],
        16,
    );
    Ok(())
}

/// VMOVD/VMOVQ r/m32 or r/m64, xmm.
fn h_vec_to_gpr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0] as u64;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// VMOVQ xmm1, xmm2/m64: the low qword, zero-extended.
fn h_movq_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = read_vec(x, ins, 1, false)?[0] as u64;
    write_vec(x, ins, 0, [v as u128, 0], 16, false)?;
    Ok(())
}

/// VMOVQ xmm1/m64, xmm2: a register destination is zero-extended, memory gets 8 bytes.
fn h_movq_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0] as u64;
    write_vec(x, ins, 0, [v as u128, 0], 16, false)?;
    Ok(())
}

#[inline(always)]
fn mov_full(x: &mut Ctx, ins: &Instruction, aligned: bool) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let v = read_vec(x, ins, 1, aligned)?;
    write_vec(x, ins, 0, v, len, aligned)?;
    Ok(())
}

fn h_mov_aligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov_full(x, ins, true)
}
fn h_mov_unaligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov_full(x, ins, false)
}

#[inline(always)]
fn merge(x: &mut Ctx, ins: &Instruction, f: fn(u128, u128) -> u128) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let st = &mut x.cpu.state;
    let high = get_ymm(st, vec_index(ins.op_register(1)))[0];
    let low = get_ymm(st, vec_index(ins.op_register(2)))[0];
    set_vec(st, vec_index(ins.op_register(0)), [f(high, low), 0], 16);
    Ok(())
}

fn h_movss_merge(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    merge(x, ins, movss_merge)
}
fn h_movsd_merge(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    merge(x, ins, movsd_merge)
}

/// VMOVSS xmm, m32 / VMOVSD xmm, m64: the scalar zero-extended to 256 bits.
fn h_scalar_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, v, 16, false)?;
    Ok(())
}

/// VMOVSS m32, xmm / VMOVSD, VMOVLPS, VMOVLPD m64, xmm: the low element.
fn h_low_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)));
    write_vec(x, ins, 0, v, 16, false)?;
    Ok(())
}

/// VMOVHPS/VMOVHPD m64, xmm: the high qword.
fn h_high_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0] >> 64;
    write_vec(x, ins, 0, [v, 0], 16, false)?;
    Ok(())
}

/// VMOVHPS/VMOVHPD xmm1, xmm2, m64 and VMOVLHPS xmm1, xmm2, xmm3: qword 0 from xmm2, qword 1
/// from the low qword of the third operand.
fn h_movhps_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_vec(x, ins, 2, false)?[0] as u64;
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0] as u64;
    let r = (b as u128) << 64 | a as u128;
    write_vec(x, ins, 0, [r, 0], 16, false)?;
    Ok(())
}

/// VMOVLPS/VMOVLPD xmm1, xmm2, m64: qword 0 from memory, qword 1 from xmm2.
fn h_movlps_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_vec(x, ins, 2, false)?[0] as u64;
    let a = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    write_vec(x, ins, 0, [movsd_merge(a, b as u128), 0], 16, false)?;
    Ok(())
}

/// VMOVHLPS xmm1, xmm2, xmm3: qword 0 = high qword of xmm3, qword 1 = high qword of xmm2.
fn h_movhlps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let st = &mut x.cpu.state;
    let a = get_ymm(st, vec_index(ins.op_register(1)))[0];
    let b = get_ymm(st, vec_index(ins.op_register(2)))[0];
    let r = movsd_merge(a, b >> 64);
    set_vec(st, vec_index(ins.op_register(0)), [r, 0], 16);
    Ok(())
}

#[inline(always)]
fn unary(x: &mut Ctx, ins: &Instruction, f: fn(u128, u128) -> u128) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let s = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, per_lane(s, s, len, f), len, false)?;
    Ok(())
}

fn h_movsldup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary(x, ins, |_, s| sse_blend::movsldup(s))
}
fn h_movshdup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary(x, ins, |_, s| sse_blend::movshdup(s))
}
fn h_movddup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary(x, ins, movddup_lane)
}

/// VZEROUPPER: bits 255:128 of every YMM register become zero.
fn h_vzeroupper(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let st = &mut x.cpu.state;
    for i in 0..16 {
        let lo = get_ymm(st, i)[0];
        set_ymm(st, i, [lo, 0]);
    }
    Ok(())
}

/// VZEROALL: every YMM register becomes zero.
fn h_vzeroall(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    for i in 0..16 {
        set_ymm(&mut x.cpu.state, i, [0, 0]);
    }
    Ok(())
}

#[inline(always)]
fn mask_to_gpr(x: &mut Ctx, ins: &Instruction, f: fn([u128; 2], u8) -> u64) -> Result<(), Trap> {
    check_avx(x, ins)?;
    debug_assert_eq!(ins.op_kind(1), OpKind::Register);
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)));
    let m = f(v, vlen(ins));
    x.write_op(ins, 0, m)?;
    Ok(())
}

fn h_vpmovmskb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mask_to_gpr(x, ins, vpmovmskb)
}
fn h_vmovmskps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mask_to_gpr(x, ins, |v, len| {
        let hi = if len == 32 {
            sse_shuf::movmskps(v[1])
        } else {
            0
        };
        sse_shuf::movmskps(v[0]) | hi << 4
    })
}
fn h_vmovmskpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mask_to_gpr(x, ins, |v, len| {
        let hi = if len == 32 {
            sse_shuf::movmskpd(v[1])
        } else {
            0
        };
        sse_shuf::movmskpd(v[0]) | hi << 2
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn vex128_load_zeroes_upper_half_and_256_moves_all() {
        let code = TestMachine::assemble(|a| {
            a.vmovdqu(xmm1, xmmword_ptr(DATA_BASE))?;
            a.vmovdqa(ymm2, ymmword_ptr(DATA_BASE))?;
            a.vmovups(ymmword_ptr(DATA_BASE + 64), ymm2)
        });
        let mut m = TestMachine::new();
        let data: Vec<u8> = (0..32).collect();
        m.load(DATA_BASE, &data);
        m.cpu.state.ymm[1] = [9, 9, 9, 9];
        let e = m.run_code(&code, 3);
        assert_eq!(e.reason, ExitReason::Budget);
        let lo = u128::from_le_bytes(data[..16].try_into().unwrap());
        let hi = u128::from_le_bytes(data[16..].try_into().unwrap());
        assert_eq!(super::get_ymm(&m.cpu.state, 1), [lo, 0]);
        assert_eq!(super::get_ymm(&m.cpu.state, 2), [lo, hi]);
        assert_eq!(m.read_u64(DATA_BASE + 64 + 24), m.read_u64(DATA_BASE + 24));
    }

    #[test]
    fn aligned_forms_fault_on_misaligned_memory() {
        for (code, ok) in [
            (
                TestMachine::assemble(|a| a.vmovdqa(ymm0, ymmword_ptr(DATA_BASE + 16))),
                false,
            ),
            (
                TestMachine::assemble(|a| a.vmovaps(xmm0, xmmword_ptr(DATA_BASE + 8))),
                false,
            ),
            (
                TestMachine::assemble(|a| a.vmovntdq(ymmword_ptr(DATA_BASE + 16), ymm0)),
                false,
            ),
            (
                TestMachine::assemble(|a| a.vmovdqu(ymm0, ymmword_ptr(DATA_BASE + 1))),
                true,
            ),
            (
                TestMachine::assemble(|a| a.vmovdqa(ymm0, ymmword_ptr(DATA_BASE + 32))),
                true,
            ),
        ] {
            let mut m = TestMachine::new();
            m.cpu.state.ymm[0] = [1, 2, 3, 4];
            let e = m.run_code(&code, 1);
            if ok {
                assert_eq!(e.reason, ExitReason::Budget);
            } else {
                assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
                assert_eq!(m.cpu.state.ymm[0], [1, 2, 3, 4]);
                assert_eq!(m.read_u64(DATA_BASE + 16), 0);
            }
        }
    }

    #[test]
    fn movss_merge_and_vzero() {
        assert_eq!(movss_merge(u128::MAX, 5), (u128::MAX << 32) | 5);
        assert_eq!(movsd_merge(u128::MAX, 5), (u128::MAX << 64) | 5);
        let code = TestMachine::assemble(|a| {
            a.add_instruction(Instruction::with3(
                Code::VEX_Vmovss_xmm_xmm_xmm,
                iced_x86::Register::XMM0,
                iced_x86::Register::XMM1,
                iced_x86::Register::XMM2,
            )?)?;
            a.vzeroupper()
        });
        let mut m = TestMachine::new();
        m.cpu.state.ymm[0] = [7; 4];
        m.cpu.state.ymm[1] = [0x1111_1111_2222_2222, 0x3333, 4, 4];
        m.cpu.state.ymm[2] = [0xaaaa_aaaa_bbbb_bbbb, 5, 6, 6];
        m.cpu.state.ymm[5] = [1, 2, 3, 4];
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.cpu.state.ymm[0], [0x1111_1111_bbbb_bbbb, 0x3333, 0, 0]);
        assert_eq!(m.cpu.state.ymm[5], [1, 2, 0, 0]);
        let code = TestMachine::assemble(|a| a.vzeroall());
        m.run_code(&code, 1);
        assert!(m.cpu.state.ymm.iter().all(|y| *y == [0; 4]));
    }

    #[test]
    fn ud_when_xcr0_lacks_avx() {
        let code = TestMachine::assemble(|a| a.vmovdqu(ymm0, ymm1));
        let mut m = TestMachine::new();
        m.cpu.state.xcr0 = 0b11;
        m.cpu.state.ymm[1] = [1, 2, 3, 4];
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        assert_eq!(m.cpu.state.ymm[0], [0; 4]);
    }
}
