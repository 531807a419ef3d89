//! SSE4.1 integer instructions (legacy encodings): PMINSB/PMINSD/PMINUW/PMINUD/PMAXSB/PMAXSD/
//! PMAXUW/PMAXUD, PMULLD, PMULDQ, PCMPEQQ, PACKUSDW, PMOVSX*/PMOVZX*, PTEST, PBLENDW,
//! PBLENDVB, PEXTRB/W/D/Q, PINSRB/D/Q, PHMINPOSUW, MPSADBW, MOVNTDQA.
//!
//! Every m128 operand must be 16-byte aligned (#GP(0) otherwise); the narrower sources of
//! PMOVSX/PMOVZX (m64/m32/m16) and the element operands of PEXTR*/PINSR* have no alignment
//! rule. The floating-point SSE4.1 instructions live elsewhere.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags;
use crate::ops::sse_common::{
    binary_imm, bytes, check_sse, dwords, from_bytes, from_qwords, from_words, get_xmm, qwords,
    read_xmm_m128, set_xmm, sse_binary_family, words, xmm_op,
};
use crate::ops::sse_common::{map_b, map_d, map_w};
use crate::state::flags::{CF, STATUS, ZF};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if let Some(h) = binary_lookup(ins) {
        return Some(h);
    }
    Some(match ins.code() {
        Code::Pmovsxbw_xmm_xmmm64 => h_pmovsxbw,
        Code::Pmovsxbd_xmm_xmmm32 => h_pmovsxbd,
        Code::Pmovsxbq_xmm_xmmm16 => h_pmovsxbq,
        Code::Pmovsxwd_xmm_xmmm64 => h_pmovsxwd,
        Code::Pmovsxwq_xmm_xmmm32 => h_pmovsxwq,
        Code::Pmovsxdq_xmm_xmmm64 => h_pmovsxdq,
        Code::Pmovzxbw_xmm_xmmm64 => h_pmovzxbw,
        Code::Pmovzxbd_xmm_xmmm32 => h_pmovzxbd,
        Code::Pmovzxbq_xmm_xmmm16 => h_pmovzxbq,
        Code::Pmovzxwd_xmm_xmmm64 => h_pmovzxwd,
        Code::Pmovzxwq_xmm_xmmm32 => h_pmovzxwq,
        Code::Pmovzxdq_xmm_xmmm64 => h_pmovzxdq,
        Code::Ptest_xmm_xmmm128 => h_ptest,
        Code::Pblendw_xmm_xmmm128_imm8 => h_pblendw,
        Code::Mpsadbw_xmm_xmmm128_imm8 => h_mpsadbw,
        Code::Pblendvb_xmm_xmmm128 => h_pblendvb,
        Code::Pextrb_r32m8_xmm_imm8 | Code::Pextrb_r64m8_xmm_imm8 => h_pextrb,
        Code::Pextrw_r32m16_xmm_imm8 | Code::Pextrw_r64m16_xmm_imm8 => h_pextrw,
        Code::Pextrd_rm32_xmm_imm8 => h_pextrd,
        Code::Pextrq_rm64_xmm_imm8 => h_pextrq,
        Code::Pinsrb_xmm_r32m8_imm8 | Code::Pinsrb_xmm_r64m8_imm8 => h_pinsrb,
        Code::Pinsrd_xmm_rm32_imm8 => h_pinsrd,
        Code::Pinsrq_xmm_rm64_imm8 => h_pinsrq,
        Code::Phminposuw_xmm_xmmm128 => h_phminposuw,
        Code::Movntdqa_xmm_m128 => h_movntdqa,
        _ => return None,
    })
}

sse_binary_family! {
    pminsb: Pminsb_xmm_xmmm128;
    pminsd: Pminsd_xmm_xmmm128;
    pminuw: Pminuw_xmm_xmmm128;
    pminud: Pminud_xmm_xmmm128;
    pmaxsb: Pmaxsb_xmm_xmmm128;
    pmaxsd: Pmaxsd_xmm_xmmm128;
    pmaxuw: Pmaxuw_xmm_xmmm128;
    pmaxud: Pmaxud_xmm_xmmm128;
    pmulld: Pmulld_xmm_xmmm128;
    pmuldq: Pmuldq_xmm_xmmm128;
    pcmpeqq: Pcmpeqq_xmm_xmmm128;
    packusdw: Packusdw_xmm_xmmm128;
}

// ----- min/max, multiplies, compare, pack -----

pub fn pminsb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| (x as i8).min(y as i8) as u8)
}
pub fn pmaxsb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| (x as i8).max(y as i8) as u8)
}
pub fn pminuw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::min)
}
pub fn pmaxuw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::max)
}
pub fn pminsd(a: u128, b: u128) -> u128 {
    map_d(a, b, |x, y| (x as i32).min(y as i32) as u32)
}
pub fn pmaxsd(a: u128, b: u128) -> u128 {
    map_d(a, b, |x, y| (x as i32).max(y as i32) as u32)
}
pub fn pminud(a: u128, b: u128) -> u128 {
    map_d(a, b, u32::min)
}
pub fn pmaxud(a: u128, b: u128) -> u128 {
    map_d(a, b, u32::max)
}
/// Low 32 bits of each signed (= unsigned) 32x32 product.
pub fn pmulld(a: u128, b: u128) -> u128 {
    map_d(a, b, u32::wrapping_mul)
}
/// Signed 32x32 -> 64 products of dwords 0 and 2.
pub fn pmuldq(a: u128, b: u128) -> u128 {
    let (a, b) = (qwords(a), qwords(b));
    from_qwords(core::array::from_fn(|i| {
        (a[i] as i32 as i64).wrapping_mul(b[i] as i32 as i64) as u64
    }))
}
pub fn pcmpeqq(a: u128, b: u128) -> u128 {
    let (a, b) = (qwords(a), qwords(b));
    from_qwords(core::array::from_fn(|i| {
        if a[i] == b[i] {
            u64::MAX
        } else {
            0
        }
    }))
}
/// Signed dwords saturated to unsigned words; dst dwords fill the low half.
pub fn packusdw(a: u128, b: u128) -> u128 {
    let (a, b) = (dwords(a), dwords(b));
    from_words(core::array::from_fn(|i| {
        let d = if i < 4 { a[i] } else { b[i - 4] } as i32;
        d.clamp(0, u16::MAX as i32) as u16
    }))
}

// ----- sign/zero extension: `src` holds the packed narrow elements in its low bits -----

/// Extend the low elements of `src` (`from` bytes each) to `to`-byte lanes (`from` < `to`
/// <= 8), signed or not.
pub fn pmov_extend(src: u128, from: u32, to: u32, signed: bool) -> u128 {
    let n = 16 / to;
    let fbits = 8 * from;
    let tbits = 8 * to;
    (0..n).fold(0u128, |acc, i| {
        let e = (src >> (fbits * i)) & ((1u128 << fbits) - 1);
        let e = if signed && e >> (fbits - 1) != 0 {
            e | (!0u128 << fbits)
        } else {
            e
        };
        acc | (e & ((1u128 << tbits) - 1)) << (tbits * i)
    })
}

// ----- test, blends, sums -----

/// PTEST: ZF = (dst AND src) == 0, CF = (NOT dst AND src) == 0; AF, OF, PF, SF cleared.
pub fn ptest(dst: u128, src: u128) -> u64 {
    let mut f = 0;
    if dst & src == 0 {
        f |= ZF;
    }
    if !dst & src == 0 {
        f |= CF;
    }
    f
}

/// Word i from `src` if imm bit i is set, else from `dst`.
pub fn pblendw(dst: u128, src: u128, imm: u8) -> u128 {
    let (d, s) = (words(dst), words(src));
    from_words(core::array::from_fn(|i| {
        if imm >> i & 1 != 0 {
            s[i]
        } else {
            d[i]
        }
    }))
}

/// Byte i from `src` if bit 7 of `mask` byte i is set, else from `dst`.
pub fn pblendvb(dst: u128, src: u128, mask: u128) -> u128 {
    let (d, s, m) = (bytes(dst), bytes(src), bytes(mask));
    from_bytes(core::array::from_fn(|i| {
        if m[i] & 0x80 != 0 {
            s[i]
        } else {
            d[i]
        }
    }))
}

/// Eight sums of absolute differences: word i = sum over k < 4 of
/// |dst[d + i + k] - src[s + k]|, with d = 4 * imm[2] and s = 4 * imm[1:0] (bytes).
pub fn mpsadbw(dst: u128, src: u128, imm: u8) -> u128 {
    let (d, s) = (bytes(dst), bytes(src));
    let doff = 4 * (imm as usize >> 2 & 1);
    let soff = 4 * (imm as usize & 3);
    from_words(core::array::from_fn(|i| {
        (0..4)
            .map(|k| d[doff + i + k].abs_diff(s[soff + k]) as u16)
            .sum()
    }))
}

/// The smallest unsigned word in bits 15:0, its (lowest) index in bits 18:16, the rest zero.
pub fn phminposuw(src: u128) -> u128 {
    let w = words(src);
    let (idx, min) = w.iter().enumerate().fold(
        (0, w[0]),
        |(bi, bm), (i, &x)| if x < bm { (i, x) } else { (bi, bm) },
    );
    (min as u128) | (idx as u128) << 16
}

// ----- element extract/insert -----

/// Element `imm` (modulo the lane count) of `v`, `size` bytes wide, zero-extended.
pub fn extract(v: u128, size: u32, imm: u8) -> u64 {
    let n = 16 / size;
    let i = imm as u32 % n;
    let bits = 8 * size;
    ((v >> (bits * i)) & ((1u128 << bits) - 1)) as u64
}

/// Replace element `imm` (modulo the lane count), `size` bytes wide, with the low bits of `e`.
pub fn insert(v: u128, e: u64, size: u32, imm: u8) -> u128 {
    let n = 16 / size;
    let i = imm as u32 % n;
    let bits = 8 * size;
    let m = ((1u128 << bits) - 1) << (bits * i);
    (v & !m) | ((e as u128) << (bits * i) & m)
}

// ----- handlers -----

/// Read operand `n`: the low `size` bytes of an XMM register or a `size`-byte memory operand
/// (no alignment rule), zero-extended.
fn read_xmm_narrow(x: &mut Ctx, ins: &Instruction, n: u32, size: u8) -> Result<u128, Trap> {
    if ins.op_kind(n) == OpKind::Memory {
        let a = x.mem_addr(ins, size as u64, false)?;
        Ok(x.read(a, size)? as u128)
    } else {
        let v = get_xmm(&x.cpu.state, xmm_op(ins, n));
        Ok(v & ((1u128 << (8 * size as u32)) - 1))
    }
}

#[inline(always)]
fn pmov(x: &mut Ctx, ins: &Instruction, from: u32, to: u32, signed: bool) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_narrow(x, ins, 1, (16 / to * from) as u8)?;
    set_xmm(
        &mut x.cpu.state,
        xmm_op(ins, 0),
        pmov_extend(src, from, to, signed),
    );
    Ok(())
}

macro_rules! pmov_handlers {
    ($($h:ident = ($from:expr, $to:expr, $signed:expr);)*) => {
        $(
            fn $h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                pmov(x, ins, $from, $to, $signed)
            }
        )*
    };
}

pmov_handlers! {
    h_pmovsxbw = (1, 2, true);
    h_pmovsxbd = (1, 4, true);
    h_pmovsxbq = (1, 8, true);
    h_pmovsxwd = (2, 4, true);
    h_pmovsxwq = (2, 8, true);
    h_pmovsxdq = (4, 8, true);
    h_pmovzxbw = (1, 2, false);
    h_pmovzxbd = (1, 4, false);
    h_pmovzxbq = (1, 8, false);
    h_pmovzxwd = (2, 4, false);
    h_pmovzxwq = (2, 8, false);
    h_pmovzxdq = (4, 8, false);
}

fn h_ptest(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    let st = &mut x.cpu.state;
    let f = ptest(get_xmm(st, xmm_op(ins, 0)), src);
    flags::set_status(st, STATUS, f);
    Ok(())
}

fn h_pblendw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, pblendw)
}

fn h_mpsadbw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, mpsadbw)
}

/// PBLENDVB xmm1, xmm2/m128, <XMM0>: the mask is always XMM0.
fn h_pblendvb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = pblendvb(get_xmm(st, d), src, get_xmm(st, 0));
    set_xmm(st, d, r);
    Ok(())
}

/// PEXTRB/PEXTRW/PEXTRD/PEXTRQ reg/mem, xmm, imm8: a register destination is zero-extended
/// (32-bit writes clear bits 63:32), a memory destination gets `size` bytes.
#[inline(always)]
fn pextr(x: &mut Ctx, ins: &Instruction, size: u32) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = extract(
        get_xmm(&x.cpu.state, xmm_op(ins, 1)),
        size,
        ins.immediate8(),
    );
    x.write_op(ins, 0, v)?;
    Ok(())
}

fn h_pextrb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pextr(x, ins, 1)
}
fn h_pextrw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pextr(x, ins, 2)
}
fn h_pextrd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pextr(x, ins, 4)
}
fn h_pextrq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pextr(x, ins, 8)
}

/// PINSRB/PINSRD/PINSRQ xmm, reg/mem, imm8: the low `size` bytes of the source.
#[inline(always)]
fn pinsr(x: &mut Ctx, ins: &Instruction, size: u32) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let e = x.read_op(ins, 1)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = insert(get_xmm(st, d), e, size, ins.immediate8());
    set_xmm(st, d, r);
    Ok(())
}

fn h_pinsrb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pinsr(x, ins, 1)
}
fn h_pinsrd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pinsr(x, ins, 4)
}
fn h_pinsrq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    pinsr(x, ins, 8)
}

fn h_phminposuw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), phminposuw(src));
    Ok(())
}

/// MOVNTDQA xmm, m128: an aligned load (the non-temporal hint has no architectural effect).
fn h_movntdqa(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = read_xmm_m128(x, ins, 1, true)?;
    set_xmm(&mut x.cpu.state, xmm_op(ins, 0), v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::ops::sse_common::get_xmm;
    #[allow(unused_imports)]
    use crate::ops::sse_common::{
        bytes, dwords, from_bytes, from_dwords, from_qwords, from_words, qwords, words,
    };
    use crate::state::flags::{AF, OF, PF, SF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn arithmetic_spot_checks() {
        let a = from_dwords([0x8000_0000, 5, u32::MAX, 0x7fff_ffff]);
        let b = from_dwords([1, 5, 0, 0x8000_0000]);
        assert_eq!(
            dwords(pminsd(a, b)),
            [0x8000_0000, 5, u32::MAX, 0x8000_0000]
        );
        assert_eq!(
            dwords(pmaxud(a, b)),
            [0x8000_0000, 5, u32::MAX, 0x8000_0000]
        );
        assert_eq!(dwords(pminud(a, b)), [1, 5, 0, 0x7fff_ffff]);
        assert_eq!(bytes(pminsb(0x80, 0x7f))[0], 0x80);
        assert_eq!(bytes(pmaxsb(0x80, 0x7f))[0], 0x7f);
        assert_eq!(words(pminuw(0x8000, 0x7fff))[0], 0x7fff);
        assert_eq!(dwords(pmulld(a, b)), [0x8000_0000, 25, 0, 0x8000_0000]);
        assert_eq!(qwords(pmuldq(a, b)), [0xffff_ffff_8000_0000, 0]);
        assert_eq!(qwords(pcmpeqq(a, a ^ 1 << 64)), [u64::MAX, 0]);
        assert_eq!(
            words(packusdw(a, from_dwords([0xffff, 0x10000, 0xffff_ffff, 7]))),
            [0, 5, 0, 0xffff, 0xffff, 0xffff, 0, 7]
        );
    }

    #[test]
    fn extension_blend_sum_spot_checks() {
        let src = 0x8001_7f80u128;
        assert_eq!(
            words(pmov_extend(src, 1, 2, true))[..4],
            [0xff80, 0x7f, 1, 0xff80]
        );
        assert_eq!(
            words(pmov_extend(src, 1, 2, false))[..4],
            [0x80, 0x7f, 1, 0x80]
        );
        assert_eq!(
            qwords(pmov_extend(src, 2, 8, true)),
            [0x7f80, 0xffff_ffff_ffff_8001]
        );
        assert_eq!(qwords(pmov_extend(0xffff_ffff, 4, 8, true)), [u64::MAX, 0]);
        assert_eq!(ptest(0b1100, 0b0011), ZF);
        assert_eq!(ptest(0b1111, 0b0011), CF);
        assert_eq!(ptest(0, 0), ZF | CF);
        assert_eq!(ptest(1, 3), 0);
        assert_eq!(
            pblendw(0, u128::MAX, 0b1000_0001),
            from_words([0xffff, 0, 0, 0, 0, 0, 0, 0xffff])
        );
        assert_eq!(pblendvb(0, u128::MAX, 0x80_7f), 0xff_00);
        let d = from_bytes(core::array::from_fn(|i| i as u8));
        let s = from_bytes([0; 16]);
        assert_eq!(
            words(mpsadbw(d, s, 0)),
            core::array::from_fn(|i| (4 * i + 6) as u16)
        );
        assert_eq!(words(mpsadbw(d, s, 4))[0], 4 + 5 + 6 + 7);
        let s = from_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(words(mpsadbw(d, s, 3))[0], 1 + 1 + 2); // |0-1| + |1-1| + |2-1| + |3-1|
        assert_eq!(
            phminposuw(from_words([9, 3, 7, 3, 0xffff, 4, 5, 6])),
            3 | 1 << 16
        );
        assert_eq!(phminposuw(from_words([0; 8])), 0);
        assert_eq!(extract(0x1122_3344, 1, 17), 0x33);
        assert_eq!(extract(u128::MAX, 8, 3), u64::MAX);
        assert_eq!(insert(0, 0x1234, 1, 15), 0x34 << 120);
        assert_eq!(insert(u128::MAX, 0, 4, 5), !(0xffff_ffffu128 << 32));
    }

    #[test]
    fn handlers_register_memory_and_flags() {
        let code = TestMachine::assemble(|a| {
            a.pmovsxbd(xmm1, dword_ptr(DATA_BASE + 3))?;
            a.ptest(xmm2, xmmword_ptr(DATA_BASE + 0x10))?;
            a.pextrb(eax, xmm2, 0x11)?;
            a.pextrw(word_ptr(DATA_BASE + 0x21), xmm2, 1)?;
            a.pinsrq(xmm3, qword_ptr(DATA_BASE + 0x10), 1)?;
            a.pblendvb(xmm4, xmm2)?;
            a.movntdqa(xmm5, xmmword_ptr(DATA_BASE + 0x10))
        });
        let mut m = TestMachine::new();
        let st = &mut m.cpu.state;
        st.rflags |= SF | OF | AF | PF;
        st.gpr[reg::RAX] = u64::MAX;
        st.ymm[0] = [0x8000_0000_0000_0080, 0, 0, 0];
        st.ymm[2] = [0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00, 6, 6];
        st.ymm[3] = [1, 2, 3, 4];
        st.ymm[4] = [0, 0, 5, 5];
        m.load(DATA_BASE, &[0, 0, 0, 0xff, 0x01, 0x80, 0x7f, 0]);
        m.load(DATA_BASE + 0x10, &0xffu128.to_le_bytes());
        let e = m.run_code(&code, 7);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(dwords(get_xmm(st, 1)), [u32::MAX, 1, 0xffff_ff80, 0x7f]);
        // 0x...88 & 0xff != 0 -> ZF = 0; !x & 0xff = 0x77 != 0 -> CF = 0; the rest cleared.
        assert_eq!(st.rflags & STATUS, 0);
        assert_eq!(m.gpr(reg::RAX), 0x77);
        assert_eq!(m.read_u64(DATA_BASE + 0x20) >> 8 & 0xffff, 0x5566);
        assert_eq!(st.ymm[3], [1, 0xff, 3, 4]);
        assert_eq!(st.ymm[4], [0x1100_0000_0000_0088, 0, 5, 5]);
        assert_eq!(st.ymm[5][..2], [0xff, 0]);
    }

    #[test]
    fn alignment_rules() {
        type Form = fn(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>;
        let faulting: [Form; 4] = [
            |a| a.ptest(xmm1, xmmword_ptr(DATA_BASE + 8)),
            |a| a.mpsadbw(xmm1, xmmword_ptr(DATA_BASE + 4), 0),
            |a| a.movntdqa(xmm1, xmmword_ptr(DATA_BASE + 1)),
            |a| a.pminud(xmm1, xmmword_ptr(DATA_BASE + 12)),
        ];
        for f in faulting {
            let mut m = TestMachine::new();
            let e = m.run_code(&TestMachine::assemble(f), 1);
            assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
        }
        let fine: [Form; 3] = [
            |a| a.pmovzxbw(xmm1, qword_ptr(DATA_BASE + 1)),
            |a| a.pinsrd(xmm1, dword_ptr(DATA_BASE + 1), 2),
            |a| a.pextrq(qword_ptr(DATA_BASE + 3), xmm1, 1),
        ];
        for f in fine {
            let mut m = TestMachine::new();
            let e = m.run_code(&TestMachine::assemble(f), 1);
            assert_eq!(e.reason, ExitReason::Budget);
        }
    }
}
