//! Legacy SSE/SSE2 data movement: MOVD/MOVQ, MOVDQA/MOVDQU, MOVAPS/MOVUPS/MOVAPD/MOVUPD,
//! MOVSS/MOVSD (move forms), MOVHPS/MOVHPD/MOVLPS/MOVLPD, MOVHLPS/MOVLHPS, MOVNTDQ/MOVNTPS/
//! MOVNTPD/MOVNTI.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::check_no_lock;
use crate::ops::sse_common::{
    check_sse, get_xmm, m128_addr, read_xmm_m128, read_xmm_m32, read_xmm_m64, set_xmm, xmm_op,
};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family (legacy encodings only; MMX and VEX forms are not claimed).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Movd_xmm_rm32 | Code::Movq_xmm_rm64 => movd_load,
        Code::Movd_rm32_xmm | Code::Movq_rm64_xmm => movd_store,
        Code::Movq_xmm_xmmm64 => movq_load,
        Code::Movq_xmmm64_xmm => movq_store,
        Code::Movdqa_xmm_xmmm128 | Code::Movaps_xmm_xmmm128 | Code::Movapd_xmm_xmmm128 => {
            mov128_load_aligned
        }
        Code::Movdqu_xmm_xmmm128 | Code::Movups_xmm_xmmm128 | Code::Movupd_xmm_xmmm128 => {
            mov128_load_unaligned
        }
        Code::Movdqa_xmmm128_xmm
        | Code::Movaps_xmmm128_xmm
        | Code::Movapd_xmmm128_xmm
        | Code::Movntdq_m128_xmm
        | Code::Movntps_m128_xmm
        | Code::Movntpd_m128_xmm => mov128_store_aligned,
        Code::Movdqu_xmmm128_xmm | Code::Movups_xmmm128_xmm | Code::Movupd_xmmm128_xmm => {
            mov128_store_unaligned
        }
        Code::Movnti_m32_r32 | Code::Movnti_m64_r64 => movnti,
        Code::Movss_xmm_xmmm32 => movss_load,
        Code::Movss_xmmm32_xmm => movss_store,
        Code::Movsd_xmm_xmmm64 => movsd_load,
        Code::Movsd_xmmm64_xmm => movsd_store,
        Code::Movhps_xmm_m64 | Code::Movhpd_xmm_m64 => movhp_load,
        Code::Movhps_m64_xmm | Code::Movhpd_m64_xmm => movhp_store,
        Code::Movlps_xmm_m64 | Code::Movlpd_xmm_m64 => movlp_load,
        Code::Movlps_m64_xmm | Code::Movlpd_m64_xmm => movlp_store,
        Code::Movhlps_xmm_xmm => movhlps,
        Code::Movlhps_xmm_xmm => movlhps,
        _ => return None,
    })
}

// ----- semantic functions -----

/// Replace bits 31:0 of `dst` with `v`, keep bits 127:32 (MOVSS register form).
#[inline]
pub fn merge_low32(dst: u128, v: u32) -> u128 {
    (dst & !(u32::MAX as u128)) | v as u128
}

/// Replace bits 63:0 of `dst` with `v`, keep bits 127:64 (MOVSD register form, MOVLPS load).
#[inline]
pub fn merge_low64(dst: u128, v: u64) -> u128 {
    (dst & !(u64::MAX as u128)) | v as u128
}

/// Replace bits 127:64 of `dst` with `v`, keep bits 63:0 (MOVHPS load, MOVLHPS).
#[inline]
pub fn merge_high64(dst: u128, v: u64) -> u128 {
    (dst & u64::MAX as u128) | (v as u128) << 64
}

/// Bits 127:64.
#[inline]
pub fn high64(v: u128) -> u64 {
    (v >> 64) as u64
}

// ----- handlers -----

/// MOVD/MOVQ xmm, r/m32|r/m64: zero-extend into the register.
fn movd_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = x.read_op(ins, 1)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v as u128);
    Ok(())
}

/// MOVD/MOVQ r/m32|r/m64, xmm: the low 32/64 bits (a 32-bit GPR write zero-extends).
fn movd_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1)) as u64;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// MOVQ xmm, xmm/m64 (F3 0F 7E): low 64 bits, upper 64 zeroed.
fn movq_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m64(x, ins, 1)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v as u128);
    Ok(())
}

/// MOVQ xmm/m64, xmm (66 0F D6): to a register the upper 64 bits are zeroed.
fn movq_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1)) as u64;
    if ins.op0_kind() == OpKind::Memory {
        let a = x.mem_addr(ins, 8, true)?;
        x.write(a, 8, v)?;
    } else {
        set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v as u128);
    }
    Ok(())
}

fn mov128_load(x: &mut Ctx, ins: &Instruction, aligned: bool) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m128(x, ins, 1, aligned)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v);
    Ok(())
}

/// MOVDQA/MOVAPS/MOVAPD xmm, xmm/m128: #GP(0) on a misaligned memory operand.
fn mov128_load_aligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov128_load(x, ins, true)
}

/// MOVDQU/MOVUPS/MOVUPD xmm, xmm/m128.
fn mov128_load_unaligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov128_load(x, ins, false)
}

fn mov128_store(x: &mut Ctx, ins: &Instruction, aligned: bool) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1));
    if ins.op0_kind() == OpKind::Memory {
        let a = m128_addr(x, ins, aligned, true)?;
        x.write_u128(a, v)?;
    } else {
        set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v);
    }
    Ok(())
}

/// MOVDQA/MOVAPS/MOVAPD xmm/m128, xmm and MOVNTDQ/MOVNTPS/MOVNTPD m128, xmm (aligned).
/// The non-temporal hint has no architectural effect on a single in-order vCPU.
fn mov128_store_aligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov128_store(x, ins, true)
}

/// MOVDQU/MOVUPS/MOVUPD xmm/m128, xmm.
fn mov128_store_unaligned(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mov128_store(x, ins, false)
}

/// MOVNTI m32/m64, r32/r64. A general-purpose-register instruction: the SDM lists only #UD for
/// LOCK (and missing SSE2), no CR0.EM/CR0.TS/CR4.OSFXSR checks.
fn movnti(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 1)?;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// MOVSS xmm, xmm/m32: a register source merges bits 31:0; a memory source zeroes 127:32.
fn movss_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m32(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let new = if ins.op1_kind() == OpKind::Memory {
        v as u128
    } else {
        merge_low32(get_xmm(&x.cpu.state, d), v)
    };
    set_xmm(&mut x.cpu.state, d, new);
    Ok(())
}

/// MOVSS xmm/m32, xmm: to a register merges bits 31:0.
fn movss_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1)) as u32;
    if ins.op0_kind() == OpKind::Memory {
        let a = x.mem_addr(ins, 4, true)?;
        x.write(a, 4, v as u64)?;
    } else {
        let d = xmm_op(ins, 0);
        let new = merge_low32(get_xmm(&x.cpu.state, d), v);
        set_xmm(&mut x.cpu.state, d, new);
    }
    Ok(())
}

/// MOVSD xmm, xmm/m64: a register source merges bits 63:0; a memory source zeroes 127:64.
fn movsd_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m64(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let new = if ins.op1_kind() == OpKind::Memory {
        v as u128
    } else {
        merge_low64(get_xmm(&x.cpu.state, d), v)
    };
    set_xmm(&mut x.cpu.state, d, new);
    Ok(())
}

/// MOVSD xmm/m64, xmm: to a register merges bits 63:0.
fn movsd_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1)) as u64;
    if ins.op0_kind() == OpKind::Memory {
        let a = x.mem_addr(ins, 8, true)?;
        x.write(a, 8, v)?;
    } else {
        let d = xmm_op(ins, 0);
        let new = merge_low64(get_xmm(&x.cpu.state, d), v);
        set_xmm(&mut x.cpu.state, d, new);
    }
    Ok(())
}

/// MOVHPS/MOVHPD xmm, m64.
fn movhp_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m64(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let new = merge_high64(get_xmm(&x.cpu.state, d), v);
    set_xmm(&mut x.cpu.state, d, new);
    Ok(())
}

/// MOVHPS/MOVHPD m64, xmm.
fn movhp_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = high64(get_xmm(&x.cpu.state, xmm_op(ins, 1)));
    let a = x.mem_addr(ins, 8, true)?;
    x.write(a, 8, v)?;
    Ok(())
}

/// MOVLPS/MOVLPD xmm, m64.
fn movlp_load(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m64(x, ins, 1)?;
    let d = xmm_op(ins, 0);
    let new = merge_low64(get_xmm(&x.cpu.state, d), v);
    set_xmm(&mut x.cpu.state, d, new);
    Ok(())
}

/// MOVLPS/MOVLPD m64, xmm.
fn movlp_store(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = get_xmm(&x.cpu.state, xmm_op(ins, 1)) as u64;
    let a = x.mem_addr(ins, 8, true)?;
    x.write(a, 8, v)?;
    Ok(())
}

/// MOVHLPS xmm1, xmm2: xmm1[63:0] = xmm2[127:64].
fn movhlps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let st = &mut x.cpu.state;
    let (d, s) = (xmm_op(ins, 0), xmm_op(ins, 1));
    let new = merge_low64(get_xmm(st, d), high64(get_xmm(st, s)));
    set_xmm(st, d, new);
    Ok(())
}

/// MOVLHPS xmm1, xmm2: xmm1[127:64] = xmm2[63:0].
fn movlhps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let st = &mut x.cpu.state;
    let (d, s) = (xmm_op(ins, 0), xmm_op(ins, 1));
    let new = merge_high64(get_xmm(st, d), get_xmm(st, s) as u64);
    set_xmm(st, d, new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::ops::sse_common::get_xmm;
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    const A: u128 = 0x0011_2233_4455_6677_8899_aabb_ccdd_eeff;
    const B: u128 = 0xf0e1_d2c3_b4a5_9687_7869_5a4b_3c2d_1e0f;

    fn machine() -> TestMachine {
        let mut m = TestMachine::new();
        for i in 0..16 {
            m.cpu.state.ymm[i] = [0x1111 * i as u64, 0x2222 * i as u64, 0xdead, 0xbeef];
        }
        m.cpu.state.ymm[1] = [A as u64, (A >> 64) as u64, 0xdead, 0xbeef];
        m.cpu.state.ymm[2] = [B as u64, (B >> 64) as u64, 0xdead, 0xbeef];
        m.load(DATA_BASE, &B.to_le_bytes());
        m.load(DATA_BASE + 16, &A.to_le_bytes());
        m
    }

    fn xmm(m: &TestMachine, i: usize) -> u128 {
        get_xmm(&m.cpu.state, i)
    }

    fn read128(m: &TestMachine, a: u64) -> u128 {
        (m.read_u64(a + 8) as u128) << 64 | m.read_u64(a) as u128
    }

    #[test]
    fn semantic_helpers() {
        assert_eq!(merge_low32(A, 0x1234_5678), A & !0xffff_ffff | 0x1234_5678);
        assert_eq!(merge_low64(A, 1), A & !(u64::MAX as u128) | 1);
        assert_eq!(merge_high64(A, 1), (1u128 << 64) | (A as u64) as u128);
        assert_eq!(high64(A), 0x0011_2233_4455_6677);
    }

    #[test]
    fn movd_movq_gpr_and_memory_forms() {
        let code = TestMachine::assemble(|a| {
            a.movd(xmm3, eax)?; // zero-extends
            a.movq(xmm4, rbx)?;
            a.movd(ecx, xmm1)?; // zero-extends into RCX
            a.movq(rdx, xmm2)?;
            a.movd(xmm5, dword_ptr(DATA_BASE))?;
            a.movq(xmm6, qword_ptr(DATA_BASE + 3))?; // F3 0F 7E, unaligned is fine
            a.movq(qword_ptr(DATA_BASE + 0x40), xmm1)?; // 66 0F D6
            a.movd(dword_ptr(DATA_BASE + 0x50), xmm2)?;
            a.movq(xmm7, xmm1) // zeroes bits 127:64
        });
        let mut m = machine();
        m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_8765_4321;
        m.cpu.state.gpr[reg::RBX] = 0x0123_4567_89ab_cdef;
        m.cpu.state.gpr[reg::RCX] = u64::MAX;
        let e = m.run_code(&code, 9);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(xmm(&m, 3), 0x8765_4321);
        assert_eq!(m.cpu.state.ymm[3][2..], [0xdead, 0xbeef]);
        assert_eq!(xmm(&m, 4), 0x0123_4567_89ab_cdef);
        assert_eq!(m.gpr(reg::RCX), A as u32 as u64);
        assert_eq!(m.gpr(reg::RDX), B as u64);
        assert_eq!(xmm(&m, 5), B as u32 as u128);
        assert_eq!(xmm(&m, 6), (B >> 24) as u64 as u128);
        assert_eq!(m.read_u64(DATA_BASE + 0x40), A as u64);
        assert_eq!(m.read_u64(DATA_BASE + 0x50), B as u32 as u64);
        assert_eq!(xmm(&m, 7), A as u64 as u128);
    }

    #[test]
    fn movq_store_form_to_register_zeroes_high() {
        // 66 0F D6 /r with a register destination: movq xmm3, xmm1.
        let mut m = machine();
        let e = m.run_code(&[0x66, 0x0f, 0xd6, 0xcb], 1);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(xmm(&m, 3), A as u64 as u128);
    }

    #[test]
    fn aligned_and_unaligned_128_bit_moves() {
        let code = TestMachine::assemble(|a| {
            a.movdqa(xmm3, xmmword_ptr(DATA_BASE))?;
            a.movups(xmm4, xmmword_ptr(DATA_BASE + 1))?;
            a.movapd(xmmword_ptr(DATA_BASE + 0x20), xmm1)?;
            a.movdqu(xmmword_ptr(DATA_BASE + 0x33), xmm2)?;
            a.movntdq(xmmword_ptr(DATA_BASE + 0x60), xmm2)?;
            a.movaps(xmm5, xmm2)
        });
        let mut m = machine();
        let e = m.run_code(&code, 6);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(xmm(&m, 3), B);
        assert_eq!(xmm(&m, 4), (B >> 8) | ((A & 0xff) << 120));
        assert_eq!(read128(&m, DATA_BASE + 0x20), A);
        assert_eq!(read128(&m, DATA_BASE + 0x33), B);
        assert_eq!(read128(&m, DATA_BASE + 0x60), B);
        assert_eq!(xmm(&m, 5), B);
        assert_eq!(m.cpu.state.ymm[5][2..], [0xdead, 0xbeef]);
    }

    #[test]
    fn misaligned_aligned_forms_raise_gp() {
        type Form = fn(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>;
        let forms: [Form; 7] = [
            |a| a.movdqa(xmm3, xmmword_ptr(DATA_BASE + 8)),
            |a| a.movaps(xmm3, xmmword_ptr(DATA_BASE + 1)),
            |a| a.movapd(xmmword_ptr(DATA_BASE + 4), xmm3),
            |a| a.movdqa(xmmword_ptr(DATA_BASE + 2), xmm3),
            |a| a.movntdq(xmmword_ptr(DATA_BASE + 8), xmm3),
            |a| a.movntps(xmmword_ptr(DATA_BASE + 8), xmm3),
            |a| a.movntpd(xmmword_ptr(DATA_BASE + 8), xmm3),
        ];
        for f in forms {
            let code = TestMachine::assemble(f);
            let mut m = machine();
            let before = m.cpu.state.clone();
            let e = m.run_code(&code, 1);
            assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
            assert_eq!(m.cpu.state, before);
            assert_eq!(read128(&m, DATA_BASE), B);
        }
        // The alignment #GP comes before the page fault of an unmapped operand.
        let code = TestMachine::assemble(|a| a.movdqa(xmm0, xmmword_ptr(0x1008u64)));
        let mut m = machine();
        assert_eq!(
            m.run_code(&code, 1).reason,
            ExitReason::Exception(Fault::GP0)
        );
    }

    #[test]
    fn movss_movsd_merge_and_zero() {
        let code = TestMachine::assemble(|a| {
            a.movss(xmm3, xmm1)?; // merge 31:0
            a.movss(xmm4, dword_ptr(DATA_BASE))?; // zero 127:32
            a.movsd_2(xmm5, xmm2)?; // merge 63:0
            a.movsd_2(xmm6, qword_ptr(DATA_BASE + 16))?; // zero 127:64
            a.movss(dword_ptr(DATA_BASE + 0x40), xmm1)?;
            a.movsd_2(qword_ptr(DATA_BASE + 0x48), xmm2)
        });
        let mut m = machine();
        let x3 = xmm(&m, 3);
        let x5 = xmm(&m, 5);
        m.cpu.state.ymm[4] = [u64::MAX; 4];
        let e = m.run_code(&code, 6);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(xmm(&m, 3), merge_low32(x3, A as u32));
        assert_eq!(xmm(&m, 4), B as u32 as u128);
        assert_eq!(m.cpu.state.ymm[4][2..], [u64::MAX; 2]);
        assert_eq!(xmm(&m, 5), merge_low64(x5, B as u64));
        assert_eq!(xmm(&m, 6), A as u64 as u128);
        assert_eq!(m.read_u64(DATA_BASE + 0x40) as u32, A as u32);
        assert_eq!(m.read_u64(DATA_BASE + 0x48), B as u64);
        // MOVSS xmm/m32, xmm with a register destination (F3 0F 11 /r): movss xmm7, xmm1.
        let mut m = machine();
        let x7 = xmm(&m, 7);
        m.run_code(&[0xf3, 0x0f, 0x11, 0xcf], 1);
        assert_eq!(xmm(&m, 7), merge_low32(x7, A as u32));
        // MOVSD xmm/m64, xmm with a register destination (F2 0F 11 /r): movsd xmm7, xmm2.
        let mut m = machine();
        m.run_code(&[0xf2, 0x0f, 0x11, 0xd7], 1);
        assert_eq!(xmm(&m, 7), merge_low64(x7, B as u64));
    }

    #[test]
    fn movhps_movlps_movhlps_movlhps() {
        let code = TestMachine::assemble(|a| {
            a.movhps(xmm3, qword_ptr(DATA_BASE))?;
            a.movlpd(xmm4, qword_ptr(DATA_BASE + 8))?;
            a.movhpd(qword_ptr(DATA_BASE + 0x40), xmm1)?;
            a.movlps(qword_ptr(DATA_BASE + 0x48), xmm1)?;
            a.movhlps(xmm5, xmm1)?;
            a.movlhps(xmm6, xmm2)
        });
        let mut m = machine();
        let (x3, x4, x5, x6) = (xmm(&m, 3), xmm(&m, 4), xmm(&m, 5), xmm(&m, 6));
        let e = m.run_code(&code, 6);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(xmm(&m, 3), merge_high64(x3, B as u64));
        assert_eq!(xmm(&m, 4), merge_low64(x4, high64(B)));
        assert_eq!(m.read_u64(DATA_BASE + 0x40), high64(A));
        assert_eq!(m.read_u64(DATA_BASE + 0x48), A as u64);
        assert_eq!(xmm(&m, 5), merge_low64(x5, high64(A)));
        assert_eq!(xmm(&m, 6), merge_high64(x6, B as u64));
    }

    #[test]
    fn movnti_stores_and_ignores_sse_state() {
        let code = TestMachine::assemble(|a| {
            a.movnti(dword_ptr(DATA_BASE + 0x40), eax)?;
            a.movnti(qword_ptr(DATA_BASE + 0x48), rax)
        });
        let mut m = machine();
        m.cpu.state.gpr[reg::RAX] = 0x0102_0304_0506_0708;
        m.cpu.state.cr0 |= crate::state::ctl::CR0_TS;
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.read_u64(DATA_BASE + 0x40) as u32, 0x0506_0708);
        assert_eq!(m.read_u64(DATA_BASE + 0x48), 0x0102_0304_0506_0708);
    }

    #[test]
    fn store_faults_leave_memory_and_registers_untouched() {
        // A 16-byte store whose second half lies past the end of mapped memory faults before
        // writing its first half.
        let end = crate::testkit::TEST_RAM;
        let code = TestMachine::assemble(|a| a.movdqu(xmmword_ptr(end - 8), xmm1));
        let mut m = machine();
        m.load(end - 8, &[0x5a; 8]);
        let e = m.run_code(&code, 1);
        assert_eq!(
            e.reason,
            ExitReason::Exception(Fault::PageFault {
                addr: end,
                code: 0x6
            })
        );
        assert_eq!(m.read_u64(end - 8), 0x5a5a_5a5a_5a5a_5a5a);
        // A load into a register via a faulting address leaves the register alone.
        let code = TestMachine::assemble(|a| a.movdqu(xmm1, xmmword_ptr(0x1000u64)));
        let mut m = machine();
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { .. })
        ));
        assert_eq!(xmm(&m, 1), A);
    }
}
