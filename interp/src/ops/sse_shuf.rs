//! Legacy SSE/SSE2 rearrangement: PSHUFD/PSHUFLW/PSHUFHW, SHUFPS/SHUFPD, PUNPCK*/UNPCK*,
//! PACKSSWB/PACKSSDW/PACKUSWB, the shifts PSLL*/PSRL*/PSRA* (imm8 and xmm/m128 counts),
//! PSLLDQ/PSRLDQ, PEXTRW/PINSRW, PMOVMSKB/MOVMSKPS/MOVMSKPD.
//!
//! Every m128 operand must be 16-byte aligned (#GP(0) otherwise), including the shift-count
//! operand of which only bits 63:0 are used.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::sse_common::{
    bytes, check_sse, dwords, from_bytes, from_dwords, from_qwords, from_words, get_xmm, qwords,
    read_xmm_m128, set_xmm, sse_binary_family, words, xmm_op,
};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family (legacy XMM encodings only; MMX and VEX forms are not claimed).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if let Some(h) = binary_lookup(ins) {
        return Some(h);
    }
    Some(match ins.code() {
        Code::Pshufd_xmm_xmmm128_imm8 => h_pshufd,
        Code::Pshuflw_xmm_xmmm128_imm8 => h_pshuflw,
        Code::Pshufhw_xmm_xmmm128_imm8 => h_pshufhw,
        Code::Shufps_xmm_xmmm128_imm8 => h_shufps,
        Code::Shufpd_xmm_xmmm128_imm8 => h_shufpd,
        Code::Psllw_xmm_imm8 => h_psllw_imm,
        Code::Pslld_xmm_imm8 => h_pslld_imm,
        Code::Psllq_xmm_imm8 => h_psllq_imm,
        Code::Psrlw_xmm_imm8 => h_psrlw_imm,
        Code::Psrld_xmm_imm8 => h_psrld_imm,
        Code::Psrlq_xmm_imm8 => h_psrlq_imm,
        Code::Psraw_xmm_imm8 => h_psraw_imm,
        Code::Psrad_xmm_imm8 => h_psrad_imm,
        Code::Psllw_xmm_xmmm128 => h_psllw_xmm,
        Code::Pslld_xmm_xmmm128 => h_pslld_xmm,
        Code::Psllq_xmm_xmmm128 => h_psllq_xmm,
        Code::Psrlw_xmm_xmmm128 => h_psrlw_xmm,
        Code::Psrld_xmm_xmmm128 => h_psrld_xmm,
        Code::Psrlq_xmm_xmmm128 => h_psrlq_xmm,
        Code::Psraw_xmm_xmmm128 => h_psraw_xmm,
        Code::Psrad_xmm_xmmm128 => h_psrad_xmm,
        Code::Pslldq_xmm_imm8 => h_pslldq,
        Code::Psrldq_xmm_imm8 => h_psrldq,
        Code::Pextrw_r32_xmm_imm8 | Code::Pextrw_r64_xmm_imm8 => h_pextrw,
        Code::Pinsrw_xmm_r32m16_imm8 | Code::Pinsrw_xmm_r64m16_imm8 => h_pinsrw,
        Code::Pmovmskb_r32_xmm | Code::Pmovmskb_r64_xmm => h_pmovmskb,
        Code::Movmskps_r32_xmm | Code::Movmskps_r64_xmm => h_movmskps,
        Code::Movmskpd_r32_xmm | Code::Movmskpd_r64_xmm => h_movmskpd,
        _ => return None,
    })
}

sse_binary_family! {
    punpcklbw: Punpcklbw_xmm_xmmm128;
    punpcklwd: Punpcklwd_xmm_xmmm128;
    punpckldq: Punpckldq_xmm_xmmm128 | Unpcklps_xmm_xmmm128;
    punpcklqdq: Punpcklqdq_xmm_xmmm128 | Unpcklpd_xmm_xmmm128;
    punpckhbw: Punpckhbw_xmm_xmmm128;
    punpckhwd: Punpckhwd_xmm_xmmm128;
    punpckhdq: Punpckhdq_xmm_xmmm128 | Unpckhps_xmm_xmmm128;
    punpckhqdq: Punpckhqdq_xmm_xmmm128 | Unpckhpd_xmm_xmmm128;
    packsswb: Packsswb_xmm_xmmm128;
    packssdw: Packssdw_xmm_xmmm128;
    packuswb: Packuswb_xmm_xmmm128;
}

// ----- shuffles -----

/// Dword `i` of the result is dword `imm[2i+1:2i]` of `src`.
pub fn pshufd(src: u128, imm: u8) -> u128 {
    let s = dwords(src);
    from_dwords(core::array::from_fn(|i| s[(imm >> (2 * i)) as usize & 3]))
}

/// Words 3..0 shuffled from words 3..0 by `imm`; bits 127:64 copied.
pub fn pshuflw(src: u128, imm: u8) -> u128 {
    let s = words(src);
    from_words(core::array::from_fn(|i| {
        if i < 4 {
            s[(imm >> (2 * i)) as usize & 3]
        } else {
            s[i]
        }
    }))
}

/// Words 7..4 shuffled from words 7..4 by `imm`; bits 63:0 copied.
pub fn pshufhw(src: u128, imm: u8) -> u128 {
    let s = words(src);
    from_words(core::array::from_fn(|i| {
        if i < 4 {
            s[i]
        } else {
            s[4 + ((imm >> (2 * (i - 4))) as usize & 3)]
        }
    }))
}

/// Dwords 0,1 chosen from `dst`, dwords 2,3 from `src`.
pub fn shufps(dst: u128, src: u128, imm: u8) -> u128 {
    let (d, s) = (dwords(dst), dwords(src));
    let sel = |i: u32| (imm >> (2 * i)) as usize & 3;
    from_dwords([d[sel(0)], d[sel(1)], s[sel(2)], s[sel(3)]])
}

/// Qword 0 chosen from `dst` by imm bit 0, qword 1 from `src` by imm bit 1.
pub fn shufpd(dst: u128, src: u128, imm: u8) -> u128 {
    let (d, s) = (qwords(dst), qwords(src));
    from_qwords([d[imm as usize & 1], s[(imm >> 1) as usize & 1]])
}

// ----- unpacks -----

/// Interleave the `lane`-byte lanes of the low (or high) halves of `a` and `b`, `a` first.
fn interleave(a: u128, b: u128, lane: usize, high: bool) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    let base = if high { 8 } else { 0 };
    from_bytes(core::array::from_fn(|i| {
        let pair = i / (2 * lane); // which source lane
        let from_b = (i / lane) % 2 == 1;
        let k = base + pair * lane + i % lane;
        if from_b {
            b[k]
        } else {
            a[k]
        }
    }))
}

pub fn punpcklbw(a: u128, b: u128) -> u128 {
    interleave(a, b, 1, false)
}
pub fn punpcklwd(a: u128, b: u128) -> u128 {
    interleave(a, b, 2, false)
}
pub fn punpckldq(a: u128, b: u128) -> u128 {
    interleave(a, b, 4, false)
}
pub fn punpcklqdq(a: u128, b: u128) -> u128 {
    interleave(a, b, 8, false)
}
pub fn punpckhbw(a: u128, b: u128) -> u128 {
    interleave(a, b, 1, true)
}
pub fn punpckhwd(a: u128, b: u128) -> u128 {
    interleave(a, b, 2, true)
}
pub fn punpckhdq(a: u128, b: u128) -> u128 {
    interleave(a, b, 4, true)
}
pub fn punpckhqdq(a: u128, b: u128) -> u128 {
    interleave(a, b, 8, true)
}

// ----- packs (dst lanes fill the low half, src lanes the high half) -----

/// Signed words saturated to signed bytes.
pub fn packsswb(a: u128, b: u128) -> u128 {
    let (a, b) = (words(a), words(b));
    from_bytes(core::array::from_fn(|i| {
        let w = if i < 8 { a[i] } else { b[i - 8] } as i16;
        w.clamp(i8::MIN as i16, i8::MAX as i16) as u8
    }))
}

/// Signed dwords saturated to signed words.
pub fn packssdw(a: u128, b: u128) -> u128 {
    let (a, b) = (dwords(a), dwords(b));
    from_words(core::array::from_fn(|i| {
        let d = if i < 4 { a[i] } else { b[i - 4] } as i32;
        d.clamp(i16::MIN as i32, i16::MAX as i32) as u16
    }))
}

/// Signed words saturated to unsigned bytes.
pub fn packuswb(a: u128, b: u128) -> u128 {
    let (a, b) = (words(a), words(b));
    from_bytes(core::array::from_fn(|i| {
        let w = if i < 8 { a[i] } else { b[i - 8] } as i16;
        w.clamp(0, 255) as u8
    }))
}

// ----- bit shifts: a count above the lane width - 1 gives 0 (logical) or sign fill -----

pub fn psllw(v: u128, count: u64) -> u128 {
    let w = words(v);
    from_words(w.map(|x| if count > 15 { 0 } else { x << count }))
}
pub fn pslld(v: u128, count: u64) -> u128 {
    let d = dwords(v);
    from_dwords(d.map(|x| if count > 31 { 0 } else { x << count }))
}
pub fn psllq(v: u128, count: u64) -> u128 {
    let q = qwords(v);
    from_qwords(q.map(|x| if count > 63 { 0 } else { x << count }))
}
pub fn psrlw(v: u128, count: u64) -> u128 {
    let w = words(v);
    from_words(w.map(|x| if count > 15 { 0 } else { x >> count }))
}
pub fn psrld(v: u128, count: u64) -> u128 {
    let d = dwords(v);
    from_dwords(d.map(|x| if count > 31 { 0 } else { x >> count }))
}
pub fn psrlq(v: u128, count: u64) -> u128 {
    let q = qwords(v);
    from_qwords(q.map(|x| if count > 63 { 0 } else { x >> count }))
}
pub fn psraw(v: u128, count: u64) -> u128 {
    let w = words(v);
    let c = count.min(15);
    from_words(w.map(|x| ((x as i16) >> c) as u16))
}
pub fn psrad(v: u128, count: u64) -> u128 {
    let d = dwords(v);
    let c = count.min(31);
    from_dwords(d.map(|x| ((x as i32) >> c) as u32))
}

/// Byte shift left by `imm` bytes; above 15 the result is 0.
pub fn pslldq(v: u128, imm: u8) -> u128 {
    if imm > 15 {
        0
    } else {
        v << (8 * imm as u32)
    }
}

/// Byte shift right by `imm` bytes; above 15 the result is 0.
pub fn psrldq(v: u128, imm: u8) -> u128 {
    if imm > 15 {
        0
    } else {
        v >> (8 * imm as u32)
    }
}

// ----- word insert/extract, sign masks -----

/// Word `imm[2:0]`, zero-extended.
pub fn pextrw(v: u128, imm: u8) -> u64 {
    words(v)[imm as usize & 7] as u64
}

/// Replace word `imm[2:0]` with `w`.
pub fn pinsrw(v: u128, w: u16, imm: u8) -> u128 {
    let mut x = words(v);
    x[imm as usize & 7] = w;
    from_words(x)
}

/// Bit i = sign bit of byte i.
pub fn pmovmskb(v: u128) -> u64 {
    bytes(v)
        .iter()
        .enumerate()
        .fold(0, |m, (i, &b)| m | ((b >> 7) as u64) << i)
}

/// Bit i = sign bit of dword i.
pub fn movmskps(v: u128) -> u64 {
    dwords(v)
        .iter()
        .enumerate()
        .fold(0, |m, (i, &d)| m | ((d >> 31) as u64) << i)
}

/// Bit i = sign bit of qword i.
pub fn movmskpd(v: u128) -> u64 {
    ((v >> 63) as u64 & 1) | ((v >> 126) as u64 & 2)
}

// ----- handlers -----

type ShufImm = fn(u128, u8) -> u128;
type ShufImm2 = fn(u128, u128, u8) -> u128;
type Shift = fn(u128, u64) -> u128;

/// `dst = f(src, imm)`, src = xmm or aligned m128 (PSHUFD/PSHUFLW/PSHUFHW).
#[inline(always)]
fn shuffle_imm(x: &mut Ctx, ins: &Instruction, f: ShufImm) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), f(src, ins.immediate8()));
    Ok(())
}

/// `dst = f(dst, src, imm)` (SHUFPS/SHUFPD).
#[inline(always)]
fn shuffle2_imm(x: &mut Ctx, ins: &Instruction, f: ShufImm2) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_xmm(st, d), src, ins.immediate8());
    set_xmm(st, d, r);
    Ok(())
}

/// `dst = f(dst, imm8)` (shift by immediate, byte shifts).
#[inline(always)]
fn shift_imm(x: &mut Ctx, ins: &Instruction, f: Shift) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_xmm(st, d), ins.immediate8() as u64);
    set_xmm(st, d, r);
    Ok(())
}

/// `dst = f(dst, count)` with the count in bits 63:0 of xmm/m128 (aligned).
#[inline(always)]
fn shift_xmm(x: &mut Ctx, ins: &Instruction, f: Shift) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let count = read_xmm_m128(x, ins, 1, true)? as u64;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_xmm(st, d), count);
    set_xmm(st, d, r);
    Ok(())
}

macro_rules! handlers {
    ($($h:ident = $helper:ident($f:expr);)*) => {
        $(
            fn $h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                $helper(x, ins, $f)
            }
        )*
    };
}

handlers! {
    h_pshufd = shuffle_imm(pshufd);
    h_pshuflw = shuffle_imm(pshuflw);
    h_pshufhw = shuffle_imm(pshufhw);
    h_shufps = shuffle2_imm(shufps);
    h_shufpd = shuffle2_imm(shufpd);
    h_psllw_imm = shift_imm(psllw);
    h_pslld_imm = shift_imm(pslld);
    h_psllq_imm = shift_imm(psllq);
    h_psrlw_imm = shift_imm(psrlw);
    h_psrld_imm = shift_imm(psrld);
    h_psrlq_imm = shift_imm(psrlq);
    h_psraw_imm = shift_imm(psraw);
    h_psrad_imm = shift_imm(psrad);
    h_psllw_xmm = shift_xmm(psllw);
    h_pslld_xmm = shift_xmm(pslld);
    h_psllq_xmm = shift_xmm(psllq);
    h_psrlw_xmm = shift_xmm(psrlw);
    h_psrld_xmm = shift_xmm(psrld);
    h_psrlq_xmm = shift_xmm(psrlq);
    h_psraw_xmm = shift_xmm(psraw);
    h_psrad_xmm = shift_xmm(psrad);
    h_pslldq = shift_imm(|v, c| pslldq(v, c as u8));
    h_psrldq = shift_imm(|v, c| psrldq(v, c as u8));
    h_pmovmskb = mask_to_gpr(pmovmskb);
    h_movmskps = mask_to_gpr(movmskps);
    h_movmskpd = mask_to_gpr(movmskpd);
}

/// `r32/r64 = f(xmm)` (a 32-bit destination zero-extends).
#[inline(always)]
fn mask_to_gpr(x: &mut Ctx, ins: &Instruction, f: fn(u128) -> u64) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = f(get_xmm(&x.cpu.state, xmm_op(ins, 1)));
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// PEXTRW r32/r64, xmm, imm8.
fn h_pextrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = pextrw(get_xmm(&x.cpu.state, xmm_op(ins, 1)), ins.immediate8());
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// PINSRW xmm, r32/r64/m16, imm8 (bits 15:0 of a register source).
fn h_pinsrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let w = x.read_op(ins, 1)? as u16;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = pinsrw(get_xmm(st, d), w, ins.immediate8());
    set_xmm(st, d, r);
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

    const A: u128 = 0x8f0e_0d0c_0b0a_0908_f706_0504_0302_0100;
    const B: u128 = 0x1f1e_1d1c_1b1a_1918_1716_1514_1312_1110;

    #[test]
    fn shuffle_and_unpack_spot_checks() {
        assert_eq!(
            pshufd(A, 0x1b),
            from_dwords([dwords(A)[3], dwords(A)[2], dwords(A)[1], dwords(A)[0]])
        );
        assert_eq!(words(pshuflw(A, 0))[..4], [0x0100; 4]);
        assert_eq!(words(pshuflw(A, 0))[4..], words(A)[4..]);
        assert_eq!(words(pshufhw(A, 0xff))[4..], [0x8f0e; 4]);
        assert_eq!(
            shufps(A, B, 0b11_10_01_00),
            from_dwords([dwords(A)[0], dwords(A)[1], dwords(B)[2], dwords(B)[3]])
        );
        assert_eq!(shufpd(A, B, 1), from_qwords([qwords(A)[1], qwords(B)[0]]));
        assert_eq!(bytes(punpcklbw(A, B))[..4], [0x00, 0x10, 0x01, 0x11]);
        assert_eq!(bytes(punpckhbw(A, B))[..4], [0x08, 0x18, 0x09, 0x19]);
        assert_eq!(
            words(punpcklwd(A, B))[..4],
            [0x0100, 0x1110, 0x0302, 0x1312]
        );
        assert_eq!(punpcklqdq(A, B), from_qwords([qwords(A)[0], qwords(B)[0]]));
        assert_eq!(punpckhqdq(A, B), from_qwords([qwords(A)[1], qwords(B)[1]]));
        assert_eq!(
            dwords(punpckhdq(A, B)),
            [dwords(A)[2], dwords(B)[2], dwords(A)[3], dwords(B)[3]]
        );
    }

    #[test]
    fn pack_shift_mask_spot_checks() {
        let w = from_words([
            0x7fff, 0x8000, 0x0080, 0xff7f, 0x0005, 0xfffb, 0x0100, 0x00ff,
        ]);
        assert_eq!(
            bytes(packsswb(w, 0))[..8],
            [0x7f, 0x80, 0x7f, 0x80, 0x05, 0xfb, 0x7f, 0x7f]
        );
        assert_eq!(
            bytes(packuswb(w, 0))[..8],
            [0xff, 0x00, 0x80, 0x00, 0x05, 0x00, 0xff, 0xff]
        );
        assert_eq!(
            words(packssdw(
                0,
                from_dwords([0x8000, 0xffff_7fff, 5, 0xffff_ffff])
            ))[4..],
            [0x7fff, 0x8000, 5, 0xffff]
        );
        assert_eq!(psllw(w, 16), 0);
        assert_eq!(words(psllw(w, 15))[0], 0x8000);
        assert_eq!(words(psraw(w, 200))[1], 0xffff);
        assert_eq!(words(psraw(w, u64::MAX))[0], 0);
        assert_eq!(psrlq(A, 64), 0);
        assert_eq!(qwords(psrlq(A, 63)), [1, 1]);
        assert_eq!(qwords(psrlq(B, 63)), [0, 0]);
        assert_eq!(pslldq(A, 16), 0);
        assert_eq!(pslldq(A, 15), 0);
        assert_eq!(psrldq(A, 15), 0x8f);
        assert_eq!(pmovmskb(A), 0x8080);
        assert_eq!(movmskps(A), 0b1010);
        assert_eq!(movmskpd(A), 0b11);
        assert_eq!(movmskpd(B), 0);
        assert_eq!(movmskpd(1 << 127), 0b10);
        assert_eq!(pextrw(A, 15), 0x8f0e);
        assert_eq!(words(pinsrw(A, 0xabcd, 9))[1], 0xabcd);
    }

    #[test]
    fn handlers_register_memory_and_gpr_forms() {
        let code = TestMachine::assemble(|a| {
            a.pshufd(xmm3, xmmword_ptr(DATA_BASE), 0x1b)?;
            a.psrlw(xmm1, 3)?;
            a.psllq(xmm2, xmmword_ptr(DATA_BASE + 0x10))?;
            a.pextrw(eax, xmm3, 6)?;
            a.pinsrw(xmm4, word_ptr(DATA_BASE + 2), 7)?;
            a.pinsrw(xmm4, ecx, 0)?;
            a.pmovmskb(edx, xmm3)?;
            a.punpcklbw(xmm5, xmmword_ptr(DATA_BASE))?;
            a.pslldq(xmm6, 3)
        });
        let mut m = TestMachine::new();
        m.cpu.state.ymm[1] = [A as u64, (A >> 64) as u64, 7, 7];
        m.cpu.state.ymm[2] = [B as u64, (B >> 64) as u64, 7, 7];
        m.cpu.state.ymm[5] = [B as u64, (B >> 64) as u64, 7, 7];
        m.cpu.state.ymm[6] = [A as u64, (A >> 64) as u64, 7, 7];
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RCX] = 0x1234_5678;
        m.cpu.state.gpr[reg::RDX] = u64::MAX;
        m.load(DATA_BASE, &A.to_le_bytes());
        m.load(
            DATA_BASE + 0x10,
            &[
                4, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        );
        let e = m.run_code(&code, 9);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        let x3 = pshufd(A, 0x1b);
        assert_eq!(get_xmm(st, 3), x3);
        assert_eq!(get_xmm(st, 1), psrlw(A, 3));
        assert_eq!(get_xmm(st, 2), psllq(B, 4));
        assert_eq!(m.gpr(reg::RAX), words(x3)[6] as u64);
        assert_eq!(get_xmm(st, 4), pinsrw(pinsrw(0x0, 0x0302, 7), 0x5678, 0));
        assert_eq!(m.gpr(reg::RDX), pmovmskb(x3));
        assert_eq!(get_xmm(st, 5), punpcklbw(B, A));
        assert_eq!(get_xmm(st, 6), A << 24);
        for i in [1, 2, 5, 6] {
            assert_eq!(st.ymm[i][2..], [7, 7]);
        }
    }

    #[test]
    fn misaligned_m128_operands_raise_gp() {
        type Form = fn(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>;
        let forms: [Form; 4] = [
            |a| a.pshufd(xmm1, xmmword_ptr(DATA_BASE + 8), 0),
            |a| a.psllw(xmm1, xmmword_ptr(DATA_BASE + 8)),
            |a| a.punpckhqdq(xmm1, xmmword_ptr(DATA_BASE + 1)),
            |a| a.shufps(xmm1, xmmword_ptr(DATA_BASE + 4), 0),
        ];
        for f in forms {
            let mut m = TestMachine::new();
            m.cpu.state.ymm[1] = [1, 2, 3, 4];
            let e = m.run_code(&TestMachine::assemble(f), 1);
            assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
            assert_eq!(m.cpu.state.ymm[1], [1, 2, 3, 4]);
        }
    }
}
