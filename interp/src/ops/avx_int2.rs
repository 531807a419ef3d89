//! VEX-encoded integer instructions with irregular operands: VPEXTRB/W/D/Q, VPINSRB/W/D/Q,
//! VPHMINPOSUW, VMPSADBW (128/256) and VPCMPESTRI/M, VPCMPISTRI/M (128-bit only), reusing the
//! legacy semantic functions. Every XMM destination gets the VEX zeroing of bits 255:128.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags;
use crate::ops::avx_common::{check_avx, get_ymm, read_vec, set_vec, vec_index, vlen, write_vec};
use crate::ops::pcmpstr::{explicit_len, implicit_len, index_output, mask_output, pcmpstr};
use crate::ops::sse41;
use crate::state::{flags::STATUS, reg};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this file.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::VEX_Vpextrb_r32m8_xmm_imm8 | Code::VEX_Vpextrb_r64m8_xmm_imm8 => h_vpextrb,
        Code::VEX_Vpextrw_r32_xmm_imm8
        | Code::VEX_Vpextrw_r64_xmm_imm8
        | Code::VEX_Vpextrw_r32m16_xmm_imm8
        | Code::VEX_Vpextrw_r64m16_xmm_imm8 => h_vpextrw,
        Code::VEX_Vpextrd_rm32_xmm_imm8 => h_vpextrd,
        Code::VEX_Vpextrq_rm64_xmm_imm8 => h_vpextrq,
        Code::VEX_Vpinsrb_xmm_xmm_r32m8_imm8 | Code::VEX_Vpinsrb_xmm_xmm_r64m8_imm8 => h_vpinsrb,
        Code::VEX_Vpinsrw_xmm_xmm_r32m16_imm8 | Code::VEX_Vpinsrw_xmm_xmm_r64m16_imm8 => h_vpinsrw,
        Code::VEX_Vpinsrd_xmm_xmm_rm32_imm8 => h_vpinsrd,
        Code::VEX_Vpinsrq_xmm_xmm_rm64_imm8 => h_vpinsrq,
        Code::VEX_Vphminposuw_xmm_xmmm128 => h_vphminposuw,
        Code::VEX_Vmpsadbw_xmm_xmm_xmmm128_imm8 | Code::VEX_Vmpsadbw_ymm_ymm_ymmm256_imm8 => {
            h_vmpsadbw
        }
        Code::VEX_Vpcmpestri_xmm_xmmm128_imm8 => h_vpcmpestri,
        Code::VEX_Vpcmpestri64_xmm_xmmm128_imm8 => h_vpcmpestri64,
        Code::VEX_Vpcmpestrm_xmm_xmmm128_imm8 => h_vpcmpestrm,
        Code::VEX_Vpcmpestrm64_xmm_xmmm128_imm8 => h_vpcmpestrm64,
        Code::VEX_Vpcmpistri_xmm_xmmm128_imm8 => h_vpcmpistri,
        Code::VEX_Vpcmpistrm_xmm_xmmm128_imm8 => h_vpcmpistrm,
        _ => return None,
    })
}

// ----- extract / insert -----

/// VPEXTRx reg/mem, xmm, imm8: a register destination is zero-extended, memory gets `size`
/// bytes.
#[inline(always)]
fn vpextr(x: &mut Ctx, ins: &Instruction, size: u32) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let v = get_ymm(&x.cpu.state, vec_index(ins.op_register(1)))[0];
    x.write_op(ins, 0, sse41::extract(v, size, ins.immediate8()))?;
    Ok(())
}

fn h_vpextrb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpextr(x, ins, 1)
}
fn h_vpextrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpextr(x, ins, 2)
}
fn h_vpextrd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpextr(x, ins, 4)
}
fn h_vpextrq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpextr(x, ins, 8)
}

/// VPINSRx xmm1, xmm2, reg/mem, imm8: xmm2 with element imm8 replaced.
#[inline(always)]
fn vpinsr(x: &mut Ctx, ins: &Instruction, size: u32) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let e = x.read_op(ins, 2)?;
    let st = &mut x.cpu.state;
    let a = get_ymm(st, vec_index(ins.op_register(1)))[0];
    let r = sse41::insert(a, e, size, ins.immediate8());
    set_vec(st, vec_index(ins.op_register(0)), [r, 0], 16);
    Ok(())
}

fn h_vpinsrb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpinsr(x, ins, 1)
}
fn h_vpinsrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpinsr(x, ins, 2)
}
fn h_vpinsrd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpinsr(x, ins, 4)
}
fn h_vpinsrq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    vpinsr(x, ins, 8)
}

fn h_vphminposuw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let s = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, [sse41::phminposuw(s[0]), 0], 16, false)?;
    Ok(())
}

/// VMPSADBW: the 256-bit form's upper lane takes its offsets from imm8[5:3].
fn h_vmpsadbw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let b = read_vec(x, ins, 2, false)?;
    let a = read_vec(x, ins, 1, false)?;
    let imm = ins.immediate8();
    let r = [
        sse41::mpsadbw(a[0], b[0], imm),
        sse41::mpsadbw(a[1], b[1], imm >> 3),
    ];
    write_vec(x, ins, 0, r, len, false)?;
    Ok(())
}

// ----- string compares -----

#[derive(Clone, Copy)]
enum Len {
    Implicit,
    /// EAX/EDX, or RAX/RDX when `true`.
    Explicit(bool),
}

/// VPCMPxSTRx xmm1, xmm2/m128, imm8 (no alignment rule); the mask forms write XMM0 with
/// bits 255:128 zeroed.
#[inline(always)]
fn run(x: &mut Ctx, ins: &Instruction, len: Len, mask: bool) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_vec(x, ins, 1, false)?[0];
    let imm = ins.immediate8();
    let st = &mut x.cpu.state;
    let a = get_ymm(st, vec_index(ins.op_register(0)))[0];
    let (la, lb) = match len {
        Len::Implicit => (implicit_len(a, imm), implicit_len(b, imm)),
        Len::Explicit(wide) => (
            explicit_len(st.gpr[reg::RAX], wide, imm),
            explicit_len(st.gpr[reg::RDX], wide, imm),
        ),
    };
    let r = pcmpstr(a, la, b, lb, imm);
    if mask {
        set_vec(st, 0, [mask_output(r.res, imm), 0], 16);
    } else {
        st.gpr[reg::RCX] = index_output(r.res, imm) as u64;
    }
    flags::set_status(st, STATUS, r.flags);
    Ok(())
}

fn h_vpcmpestri(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(false), false)
}
fn h_vpcmpestri64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(true), false)
}
fn h_vpcmpestrm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(false), true)
}
fn h_vpcmpestrm64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(true), true)
}
fn h_vpcmpistri(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Implicit, false)
}
fn h_vpcmpistrm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Implicit, true)
}
