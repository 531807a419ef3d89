//! Floating-point data movement of SSE3/SSE4.1 (no arithmetic, no MXCSR): MOVSLDUP/MOVSHDUP/
//! MOVDDUP, LDDQU, BLENDPS/BLENDPD, BLENDVPS/BLENDVPD, INSERTPS, EXTRACTPS.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::sse_common::{
    check_sse, dwords, from_dwords, from_qwords, get_xmm, qwords, read_xmm_m128, read_xmm_m32,
    read_xmm_m64, set_xmm, xmm_op,
};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family (legacy encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Movsldup_xmm_xmmm128 => h_movsldup,
        Code::Movshdup_xmm_xmmm128 => h_movshdup,
        Code::Movddup_xmm_xmmm64 => h_movddup,
        Code::Lddqu_xmm_m128 => h_lddqu,
        Code::Blendps_xmm_xmmm128_imm8 => h_blendps,
        Code::Blendpd_xmm_xmmm128_imm8 => h_blendpd,
        Code::Blendvps_xmm_xmmm128 => h_blendvps,
        Code::Blendvpd_xmm_xmmm128 => h_blendvpd,
        Code::Insertps_xmm_xmmm32_imm8 => h_insertps,
        Code::Extractps_rm32_xmm_imm8 | Code::Extractps_r64m32_xmm_imm8 => h_extractps,
        _ => return None,
    })
}

// ----- semantic functions -----

/// MOVSLDUP: dwords [s0, s0, s2, s2].
pub fn movsldup(s: u128) -> u128 {
    let d = dwords(s);
    from_dwords([d[0], d[0], d[2], d[2]])
}

/// MOVSHDUP: dwords [s1, s1, s3, s3].
pub fn movshdup(s: u128) -> u128 {
    let d = dwords(s);
    from_dwords([d[1], d[1], d[3], d[3]])
}

/// MOVDDUP: the low qword twice.
pub fn movddup(s: u64) -> u128 {
    from_qwords([s, s])
}

/// BLENDPS: dword i from `src` where imm[i] is set, else from `dst`.
pub fn blendps(dst: u128, src: u128, imm: u8) -> u128 {
    let (a, b) = (dwords(dst), dwords(src));
    from_dwords(core::array::from_fn(|i| {
        if imm & (1 << i) != 0 {
            b[i]
        } else {
            a[i]
        }
    }))
}

/// BLENDPD: qword i from `src` where imm[i] is set (imm[1:0]).
pub fn blendpd(dst: u128, src: u128, imm: u8) -> u128 {
    let (a, b) = (qwords(dst), qwords(src));
    from_qwords(core::array::from_fn(|i| {
        if imm & (1 << i) != 0 {
            b[i]
        } else {
            a[i]
        }
    }))
}

/// BLENDVPS: dword i from `src` where the sign bit of dword i of `mask` (XMM0) is set.
pub fn blendvps(dst: u128, src: u128, mask: u128) -> u128 {
    let m = dwords(mask);
    let sel = (0..4).fold(0u8, |acc, i| acc | (((m[i] >> 31) as u8) << i));
    blendps(dst, src, sel)
}

/// BLENDVPD: qword i from `src` where the sign bit of qword i of `mask` (XMM0) is set.
pub fn blendvpd(dst: u128, src: u128, mask: u128) -> u128 {
    let m = qwords(mask);
    let sel = (m[0] >> 63) as u8 | ((m[1] >> 63) as u8) << 1;
    blendpd(dst, src, sel)
}

/// INSERTPS with the selected source dword `s`: dword imm[5:4] of `dst` becomes `s`, then the
/// dwords selected by imm[3:0] are zeroed.
pub fn insertps(dst: u128, s: u32, imm: u8) -> u128 {
    let mut d = dwords(dst);
    d[((imm >> 4) & 3) as usize] = s;
    for (i, x) in d.iter_mut().enumerate() {
        if imm & (1 << i) != 0 {
            *x = 0;
        }
    }
    from_dwords(d)
}

// ----- handlers -----

fn h_movsldup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m128(x, ins, 1, true)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), movsldup(s));
    Ok(())
}

fn h_movshdup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m128(x, ins, 1, true)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), movshdup(s));
    Ok(())
}

/// MOVDDUP xmm, xmm/m64 (no alignment).
fn h_movddup(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m64(x, ins, 1)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), movddup(s));
    Ok(())
}

/// LDDQU xmm, m128 (no alignment).
fn h_lddqu(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m128(x, ins, 1, false)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), s);
    Ok(())
}

fn blend_imm(x: &mut Ctx, ins: &Instruction, f: fn(u128, u128, u8) -> u128) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let r = f(get_xmm(&x.cpu.state, d), s, ins.immediate8());
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

fn h_blendps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blend_imm(x, ins, blendps)
}

fn h_blendpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blend_imm(x, ins, blendpd)
}

/// BLENDVPS/BLENDVPD xmm, xmm/m128, <XMM0>.
fn blendv(x: &mut Ctx, ins: &Instruction, f: fn(u128, u128, u128) -> u128) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let s = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let st = &x.cpu.state;
    let r = f(get_xmm(st, d), s, get_xmm(st, 0));
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

fn h_blendvps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blendv(x, ins, blendvps)
}

fn h_blendvpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    blendv(x, ins, blendvpd)
}

/// INSERTPS xmm, xmm/m32, imm8: a register source supplies dword imm[7:6]; a memory source
/// supplies its m32 (imm[7:6] ignored).
fn h_insertps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let imm = ins.immediate8();
    let s = if ins.op1_kind() == OpKind::Memory {
        read_xmm_m32(x, ins, 1)?
    } else {
        dwords(get_xmm(&x.cpu.state, xmm_op(ins, 1)))[(imm >> 6) as usize]
    };
    let d = xmm_op(ins, 0);
    let r = insertps(get_xmm(&x.cpu.state, d), s, imm);
    set_xmm(&mut x.cpu.state, d, r);
    Ok(())
}

/// EXTRACTPS r/m32, xmm, imm8 (and r64/m32 with REX.W): dword imm[1:0], zero-extended into a
/// 64-bit register.
fn h_extractps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = dwords(get_xmm(&x.cpu.state, xmm_op(ins, 1)))[(ins.immediate8() & 3) as usize];
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantics() {
        let s = from_dwords([1, 2, 3, 4]);
        assert_eq!(movsldup(s), from_dwords([1, 1, 3, 3]));
        assert_eq!(movshdup(s), from_dwords([2, 2, 4, 4]));
        assert_eq!(movddup(7), from_qwords([7, 7]));
        let d = from_dwords([10, 20, 30, 40]);
        assert_eq!(blendps(d, s, 0b0101), from_dwords([1, 20, 3, 40]));
        assert_eq!(
            blendpd(d, s, 0b10),
            from_qwords([qwords(d)[0], qwords(s)[1]])
        );
        let m = from_dwords([0x8000_0000, 0, 0xffff_ffff, 0x7fff_ffff]);
        assert_eq!(blendvps(d, s, m), from_dwords([1, 20, 3, 40]));
        assert_eq!(insertps(d, 9, 0b0010_0001), from_dwords([0, 20, 9, 40]));
    }
}
