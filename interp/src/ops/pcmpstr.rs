//! SSE4.2 packed string compares: PCMPESTRI, PCMPESTRM, PCMPISTRI, PCMPISTRM.
//!
//! imm8 selects the element format (bits 1:0: unsigned/signed bytes/words), the aggregation
//! (bits 3:2: equal any, ranges, equal each, equal ordered), the polarity (bits 5:4) and the
//! output form (bit 6: most significant index / expanded mask); bit 7 is ignored. Element
//! counts come from EAX/EDX (RAX/RDX with REX.W) as absolute values saturated to the element
//! count (explicit forms) or from the first zero element (implicit forms). The index goes to
//! ECX (RCX zero-extended), the mask to XMM0 (bits 127:0). Flags: CF = result non-zero,
//! ZF = the second operand is shorter than a full register, SF = likewise for the first,
//! OF = result bit 0, AF = PF = 0. The m128 operand needs no alignment.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags;
use crate::ops::sse_common::{check_sse, get_xmm, read_xmm_m128, set_xmm, xmm_op};
use crate::state::flags::{CF, OF, SF, STATUS, ZF};
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Pcmpestri_xmm_xmmm128_imm8 => h_pcmpestri,
        Code::Pcmpestri64_xmm_xmmm128_imm8 => h_pcmpestri64,
        Code::Pcmpestrm_xmm_xmmm128_imm8 => h_pcmpestrm,
        Code::Pcmpestrm64_xmm_xmmm128_imm8 => h_pcmpestrm64,
        Code::Pcmpistri_xmm_xmmm128_imm8 => h_pcmpistri,
        Code::Pcmpistrm_xmm_xmmm128_imm8 => h_pcmpistrm,
        _ => return None,
    })
}

/// Number of elements for the format in imm8: 8 words or 16 bytes.
#[inline]
pub fn element_count(imm: u8) -> usize {
    if imm & 1 != 0 {
        8
    } else {
        16
    }
}

/// The elements of `v` for the format in imm8, sign- or zero-extended.
fn elements(v: u128, imm: u8) -> [i32; 16] {
    let words = imm & 1 != 0;
    let signed = imm & 2 != 0;
    core::array::from_fn(|i| match (words, signed) {
        (false, false) => (v >> (8 * i)) as u8 as i32,
        (false, true) => (v >> (8 * i)) as u8 as i8 as i32,
        (true, false) => (v >> (16 * (i % 8))) as u16 as i32,
        (true, true) => (v >> (16 * (i % 8))) as u16 as i16 as i32,
    })
}

/// Implicit length: index of the first zero element, or the element count.
pub fn implicit_len(v: u128, imm: u8) -> usize {
    let n = element_count(imm);
    let e = elements(v, imm);
    e[..n].iter().position(|&x| x == 0).unwrap_or(n)
}

/// Explicit length: |EAX| (|RAX| when `wide`) saturated to the element count.
pub fn explicit_len(r: u64, wide: bool, imm: u8) -> usize {
    let abs = if wide {
        (r as i64).unsigned_abs()
    } else {
        (r as u32 as i32).unsigned_abs() as u64
    };
    abs.min(element_count(imm) as u64) as usize
}

/// Result of a string compare: IntRes2 (one bit per element) and the status flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrCmp {
    pub res: u16,
    pub flags: u64,
}

/// The compare of `a` (first operand, `la` valid elements) with `b` (second operand,
/// `lb` valid elements). `la`, `lb` must not exceed the element count (saturated by the
/// callers; clamped here as well).
pub fn pcmpstr(a: u128, la: usize, b: u128, lb: usize, imm: u8) -> StrCmp {
    let n = element_count(imm);
    let (la, lb) = (la.min(n), lb.min(n));
    let (ea, eb) = (elements(a, imm), elements(b, imm));
    let mut res1 = 0u16;
    for j in 0..n {
        let hit = match (imm >> 2) & 3 {
            // Equal any: element j of b is one of the valid elements of a.
            0 => j < lb && ea[..la].contains(&eb[j]),
            // Ranges: a holds (low, high) pairs, both ends valid; bounds inclusive.
            1 => j < lb && (0..la / 2).any(|p| ea[2 * p] <= eb[j] && eb[j] <= ea[2 * p + 1]),
            // Equal each: both valid and equal, or both invalid.
            2 => match (j < la, j < lb) {
                (true, true) => ea[j] == eb[j],
                (false, false) => true,
                _ => false,
            },
            // Equal ordered: a occurs in b at j; an invalid element of a matches anything,
            // a valid one never matches past the end of b.
            _ => (0..n - j).all(|k| match (k < la, j + k < lb) {
                (true, true) => ea[k] == eb[j + k],
                (false, _) => true,
                (true, false) => false,
            }),
        };
        res1 |= (hit as u16) << j;
    }
    let all = ((1u32 << n) - 1) as u16;
    let res = match (imm >> 4) & 3 {
        1 => !res1 & all,
        3 => res1 ^ ((1u32 << lb) - 1) as u16,
        _ => res1,
    };
    let mut f = 0;
    if res != 0 {
        f |= CF;
    }
    if lb < n {
        f |= ZF;
    }
    if la < n {
        f |= SF;
    }
    if res & 1 != 0 {
        f |= OF;
    }
    StrCmp { res, flags: f }
}

/// PCMPxSTRI output: the least (imm bit 6 clear) or most significant set bit of the
/// result, or the element count when there is none.
pub fn index_output(res: u16, imm: u8) -> u32 {
    if res == 0 {
        element_count(imm) as u32
    } else if imm & 0x40 != 0 {
        15 - res.leading_zeros()
    } else {
        res.trailing_zeros()
    }
}

/// PCMPxSTRM output: the result bits zero-extended (imm bit 6 clear) or expanded to an
/// all-ones/all-zeros element mask.
pub fn mask_output(res: u16, imm: u8) -> u128 {
    if imm & 0x40 == 0 {
        return res as u128;
    }
    let n = element_count(imm);
    let width = 128 / n;
    let lane = if width == 8 { 0xffu128 } else { 0xffff };
    (0..n)
        .filter(|&i| res >> i & 1 != 0)
        .fold(0, |m, i| m | lane << (width * i))
}

/// Lengths source of a form.
#[derive(Clone, Copy)]
enum Len {
    Implicit,
    /// EAX/EDX, or RAX/RDX when `true`.
    Explicit(bool),
}

#[inline(always)]
fn run(x: &mut Ctx, ins: &Instruction, len: Len, mask: bool) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let b = read_xmm_m128(x, ins, 1, false)?;
    let imm = ins.immediate8();
    let st = &mut x.cpu.state;
    let a = get_xmm(st, xmm_op(ins, 0));
    let (la, lb) = match len {
        Len::Implicit => (implicit_len(a, imm), implicit_len(b, imm)),
        Len::Explicit(wide) => (
            explicit_len(st.gpr[reg::RAX], wide, imm),
            explicit_len(st.gpr[reg::RDX], wide, imm),
        ),
    };
    let r = pcmpstr(a, la, b, lb, imm);
    if mask {
        set_xmm(st, 0, mask_output(r.res, imm));
    } else {
        st.gpr[reg::RCX] = index_output(r.res, imm) as u64;
    }
    flags::set_status(st, STATUS, r.flags);
    Ok(())
}

fn h_pcmpestri(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(false), false)
}
fn h_pcmpestri64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(true), false)
}
fn h_pcmpestrm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(false), true)
}
fn h_pcmpestrm64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Explicit(true), true)
}
fn h_pcmpistri(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Implicit, false)
}
fn h_pcmpistrm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    run(x, ins, Len::Implicit, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::ops::sse_common::get_xmm;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    fn s(t: &[u8]) -> u128 {
        let mut b = [0u8; 16];
        b[..t.len()].copy_from_slice(t);
        u128::from_le_bytes(b)
    }

    #[test]
    fn lengths() {
        assert_eq!(implicit_len(s(b"abc"), 0), 3);
        assert_eq!(implicit_len(s(b"abc"), 1), 2); // words 0x6261, 0x0063, 0
        assert_eq!(implicit_len(s(b"a\0b"), 0), 1);
        assert_eq!(implicit_len(s(b"abcd"), 1), 2);
        assert_eq!(implicit_len(u128::MAX, 0), 16);
        assert_eq!(explicit_len(5, false, 0), 5);
        assert_eq!(explicit_len(u64::MAX, false, 0), 1);
        assert_eq!(explicit_len(0xffff_ffff_0000_0003, false, 1), 3);
        assert_eq!(explicit_len(0xffff_ffff_0000_0003, true, 1), 8);
        assert_eq!(explicit_len(0x8000_0000, false, 0), 16);
        assert_eq!(explicit_len(1 << 63, true, 0), 16);
        assert_eq!(explicit_len((-7i64) as u64, true, 0), 7);
    }

    #[test]
    fn aggregations() {
        // Equal any: which chars of "hello" are vowels.
        let r = pcmpstr(s(b"aeiou"), 5, s(b"hello"), 5, 0b00_00_00);
        assert_eq!(r.res, 0b10010);
        assert_eq!(r.flags, CF | ZF | SF);
        // Ranges: 'a'..'z' over "Hi z!".
        let r = pcmpstr(s(b"az"), 2, s(b"Hi z!"), 5, 0b00_01_00);
        assert_eq!(r.res, 0b01010);
        // An odd length leaves the last range incomplete: no match from it.
        assert_eq!(pcmpstr(s(b"azAZ0"), 5, s(b"0"), 1, 0b0100).res, 0);
        // Equal each: trailing invalid elements compare equal.
        let r = pcmpstr(s(b"abcd"), 4, s(b"abxd"), 4, 0b00_10_00);
        assert_eq!(r.res, 0xfffb);
        assert_eq!(r.flags, CF | ZF | SF | OF);
        // Equal ordered: "lo" in "hello lo".
        let r = pcmpstr(s(b"lo"), 2, s(b"hello lo"), 8, 0b00_11_00);
        assert_eq!(r.res, 1 << 3 | 1 << 6);
        // An empty needle matches everywhere.
        assert_eq!(pcmpstr(0, 0, s(b"ab"), 2, 0b1100).res, 0xffff);
        // Negative polarity, and masked negative (only valid elements of b flip).
        assert_eq!(
            pcmpstr(s(b"aeiou"), 5, s(b"hello"), 5, 0b01_00_00).res,
            !0b10010
        );
        assert_eq!(
            pcmpstr(s(b"aeiou"), 5, s(b"hello"), 5, 0b11_00_00).res,
            0b01101
        );
        // Signed words: ranges compare signed.
        let w = |v: &[i16]| {
            v.iter()
                .enumerate()
                .fold(0u128, |m, (i, &x)| m | (x as u16 as u128) << (16 * i))
        };
        assert_eq!(
            pcmpstr(w(&[-5, 5]), 2, w(&[-6, -5, 0, 6]), 4, 0b0111).res,
            0b0110
        );
        assert_eq!(
            pcmpstr(w(&[-5, 5]), 2, w(&[-6, -5, 0, 6]), 4, 0b0101).res,
            0b0000
        );
    }

    #[test]
    fn outputs() {
        assert_eq!(index_output(0, 0), 16);
        assert_eq!(index_output(0, 1), 8);
        assert_eq!(index_output(0b0110, 0), 1);
        assert_eq!(index_output(0b0110, 0x40), 2);
        assert_eq!(mask_output(0b101, 0), 0b101);
        assert_eq!(mask_output(0b101, 0x40), 0xff00ff);
        assert_eq!(mask_output(0b10, 0x41), 0xffff_0000);
    }

    #[test]
    fn handlers_write_ecx_xmm0_and_flags() {
        let code = TestMachine::assemble(|a| {
            a.pcmpistri(xmm1, xmmword_ptr(DATA_BASE + 3), 0x0c)?;
            a.pcmpestrm(xmm1, xmm2, 0x40)
        });
        let mut m = TestMachine::new();
        let st = &mut m.cpu.state;
        st.gpr[reg::RCX] = u64::MAX;
        st.gpr[reg::RAX] = 0xffff_ffff_0000_0002;
        st.gpr[reg::RDX] = (-16i64) as u64;
        st.ymm[0] = [1, 2, 3, 4];
        st.ymm[1] = [s(b"lo") as u64, 0, 9, 9];
        let hay = s(b"hello lo");
        st.ymm[2] = [hay as u64, (hay >> 64) as u64, 0, 0];
        m.load(DATA_BASE + 3, &hay.to_le_bytes());
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(st.gpr[reg::RCX], 3);
        // Equal any of {'l','o'} in all 16 bytes of the haystack (lb = 16: ZF clear).
        assert_eq!(get_xmm(st, 0), mask_output(0b1101_1100, 0x40));
        assert_eq!(st.ymm[0][2..], [3, 4]);
        assert_eq!(st.rflags & STATUS, CF | SF);
    }
}
