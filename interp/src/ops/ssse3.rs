//! SSSE3 integer instructions, legacy XMM and MMX forms: PSHUFB, PALIGNR, PHADDW/PHADDD/
//! PHADDSW, PHSUBW/PHSUBD/PHSUBSW, PMADDUBSW, PMULHRSW, PSIGNB/W/D, PABSB/W/D.
//!
//! XMM forms are `dst = f(dst, src)` with a 16-byte-aligned m128 source (#GP(0) otherwise);
//! MMX forms take mm/m64 (no alignment rule) and have the MMX checks and x87 side effects
//! (see `mmx`). The MMX semantics reuse the 128-bit functions through `mmx::lane` (lane-wise)
//! and `mmx::pack` (horizontal), except PSHUFB and PALIGNR whose index ranges differ.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::mmx::{lane, mm_binary_imm, mmx_binary_family, pack};
use crate::ops::sse_common::{
    binary_imm, bytes, dwords, from_bytes, from_dwords, from_words, sse_binary_family, words,
};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if let Some(h) = binary_lookup(ins).or_else(|| mmx_binary_lookup(ins)) {
        return Some(h);
    }
    Some(match ins.code() {
        Code::Palignr_xmm_xmmm128_imm8 => h_palignr,
        Code::Palignr_mm_mmm64_imm8 => h_palignr_mm,
        _ => return None,
    })
}

sse_binary_family! {
    pshufb: Pshufb_xmm_xmmm128;
    phaddw: Phaddw_xmm_xmmm128;
    phaddd: Phaddd_xmm_xmmm128;
    phaddsw: Phaddsw_xmm_xmmm128;
    phsubw: Phsubw_xmm_xmmm128;
    phsubd: Phsubd_xmm_xmmm128;
    phsubsw: Phsubsw_xmm_xmmm128;
    pmaddubsw: Pmaddubsw_xmm_xmmm128;
    pmulhrsw: Pmulhrsw_xmm_xmmm128;
    psignb: Psignb_xmm_xmmm128;
    psignw: Psignw_xmm_xmmm128;
    psignd: Psignd_xmm_xmmm128;
    pabsb: Pabsb_xmm_xmmm128;
    pabsw: Pabsw_xmm_xmmm128;
    pabsd: Pabsd_xmm_xmmm128;
}

mmx_binary_family! {
    pshufb_mm(a, b): Pshufb_mm_mmm64 => pshufb_64(a, b);
    phaddw_mm(a, b): Phaddw_mm_mmm64 => pack(phaddw, a, b);
    phaddd_mm(a, b): Phaddd_mm_mmm64 => pack(phaddd, a, b);
    phaddsw_mm(a, b): Phaddsw_mm_mmm64 => pack(phaddsw, a, b);
    phsubw_mm(a, b): Phsubw_mm_mmm64 => pack(phsubw, a, b);
    phsubd_mm(a, b): Phsubd_mm_mmm64 => pack(phsubd, a, b);
    phsubsw_mm(a, b): Phsubsw_mm_mmm64 => pack(phsubsw, a, b);
    pmaddubsw_mm(a, b): Pmaddubsw_mm_mmm64 => lane(pmaddubsw, a, b);
    pmulhrsw_mm(a, b): Pmulhrsw_mm_mmm64 => lane(pmulhrsw, a, b);
    psignb_mm(a, b): Psignb_mm_mmm64 => lane(psignb, a, b);
    psignw_mm(a, b): Psignw_mm_mmm64 => lane(psignw, a, b);
    psignd_mm(a, b): Psignd_mm_mmm64 => lane(psignd, a, b);
    pabsb_mm(a, b): Pabsb_mm_mmm64 => lane(pabsb, a, b);
    pabsw_mm(a, b): Pabsw_mm_mmm64 => lane(pabsw, a, b);
    pabsd_mm(a, b): Pabsd_mm_mmm64 => lane(pabsd, a, b);
}

// ----- byte shuffles -----

/// Byte i = 0 if bit 7 of `b[i]` is set, else `a[b[i] & 15]`.
pub fn pshufb(a: u128, b: u128) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    from_bytes(core::array::from_fn(|i| {
        if b[i] & 0x80 != 0 {
            0
        } else {
            a[(b[i] & 15) as usize]
        }
    }))
}

/// The MMX form: byte i = 0 if bit 7 of `b[i]` is set, else `a[b[i] & 7]`.
pub fn pshufb_64(a: u64, b: u64) -> u64 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    u64::from_le_bytes(core::array::from_fn(|i| {
        if b[i] & 0x80 != 0 {
            0
        } else {
            a[(b[i] & 7) as usize]
        }
    }))
}

/// `dst:src` (dst in the high half) shifted right by `imm` bytes, low 16 bytes kept; a shift
/// of 32 or more bytes gives 0.
pub fn palignr(dst: u128, src: u128, imm: u8) -> u128 {
    let cat: [u8; 32] = core::array::from_fn(|i| {
        if i < 16 {
            bytes(src)[i]
        } else {
            bytes(dst)[i - 16]
        }
    });
    from_bytes(core::array::from_fn(|i| {
        cat.get(imm as usize + i).copied().unwrap_or(0)
    }))
}

/// The MMX form: `dst:src` shifted right by `imm` bytes, low 8 bytes kept (0 from 16 up).
pub fn palignr_64(dst: u64, src: u64, imm: u8) -> u64 {
    let cat = ((dst as u128) << 64) | src as u128;
    if imm >= 16 {
        0
    } else {
        (cat >> (8 * imm as u32)) as u64
    }
}

// ----- horizontal add/subtract: pairs of dst make the low half, pairs of src the high half -----

#[inline(always)]
fn horiz_w(a: u128, b: u128, f: impl Fn(i16, i16) -> i16) -> u128 {
    let (a, b) = (words(a), words(b));
    from_words(core::array::from_fn(|i| {
        let s = if i < 4 { &a } else { &b };
        let k = 2 * (i % 4);
        f(s[k] as i16, s[k + 1] as i16) as u16
    }))
}

#[inline(always)]
fn horiz_d(a: u128, b: u128, f: impl Fn(u32, u32) -> u32) -> u128 {
    let (a, b) = (dwords(a), dwords(b));
    from_dwords(core::array::from_fn(|i| {
        let s = if i < 2 { &a } else { &b };
        let k = 2 * (i % 2);
        f(s[k], s[k + 1])
    }))
}

pub fn phaddw(a: u128, b: u128) -> u128 {
    horiz_w(a, b, i16::wrapping_add)
}
pub fn phaddd(a: u128, b: u128) -> u128 {
    horiz_d(a, b, u32::wrapping_add)
}
pub fn phaddsw(a: u128, b: u128) -> u128 {
    horiz_w(a, b, i16::saturating_add)
}
/// Even element minus odd element.
pub fn phsubw(a: u128, b: u128) -> u128 {
    horiz_w(a, b, i16::wrapping_sub)
}
pub fn phsubd(a: u128, b: u128) -> u128 {
    horiz_d(a, b, u32::wrapping_sub)
}
pub fn phsubsw(a: u128, b: u128) -> u128 {
    horiz_w(a, b, i16::saturating_sub)
}

// ----- multiplies -----

/// Unsigned bytes of `a` times signed bytes of `b`, adjacent products summed with signed
/// saturation into words.
pub fn pmaddubsw(a: u128, b: u128) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    from_words(core::array::from_fn(|i| {
        let p = |k: usize| a[k] as i32 * b[k] as i8 as i32;
        (p(2 * i) + p(2 * i + 1)).clamp(i16::MIN as i32, i16::MAX as i32) as u16
    }))
}

/// Signed word products scaled by 2^-15 with rounding: ((a*b >> 14) + 1) >> 1, low 16 bits.
pub fn pmulhrsw(a: u128, b: u128) -> u128 {
    let (a, b) = (words(a), words(b));
    from_words(core::array::from_fn(|i| {
        let p = a[i] as i16 as i32 * b[i] as i16 as i32;
        (((p >> 14) + 1) >> 1) as u16
    }))
}

// ----- sign and absolute value -----

pub fn psignb(a: u128, b: u128) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    from_bytes(core::array::from_fn(|i| match (b[i] as i8).signum() {
        -1 => a[i].wrapping_neg(),
        0 => 0,
        _ => a[i],
    }))
}
pub fn psignw(a: u128, b: u128) -> u128 {
    let (a, b) = (words(a), words(b));
    from_words(core::array::from_fn(|i| match (b[i] as i16).signum() {
        -1 => a[i].wrapping_neg(),
        0 => 0,
        _ => a[i],
    }))
}
pub fn psignd(a: u128, b: u128) -> u128 {
    let (a, b) = (dwords(a), dwords(b));
    from_dwords(core::array::from_fn(|i| match (b[i] as i32).signum() {
        -1 => a[i].wrapping_neg(),
        0 => 0,
        _ => a[i],
    }))
}
/// Unsigned absolute value of each signed byte of the source (0x80 stays 0x80).
pub fn pabsb(_dst: u128, b: u128) -> u128 {
    from_bytes(bytes(b).map(|x| (x as i8).unsigned_abs()))
}
pub fn pabsw(_dst: u128, b: u128) -> u128 {
    from_words(words(b).map(|x| (x as i16).unsigned_abs()))
}
pub fn pabsd(_dst: u128, b: u128) -> u128 {
    from_dwords(dwords(b).map(|x| (x as i32).unsigned_abs()))
}

// ----- handlers -----

fn h_palignr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, palignr)
}

fn h_palignr_mm(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mm_binary_imm(x, ins, palignr_64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::ops::mmx::get_mm;
    use crate::ops::sse_common::get_xmm;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    const A: u128 = 0x0f0e_0d0c_0b0a_0908_0706_0504_0302_0100;

    #[test]
    fn shuffle_and_align_spot_checks() {
        let idx = from_bytes([15, 0x80, 3, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff]);
        assert_eq!(bytes(pshufb(A, idx))[..4], [15, 0, 3, 3]);
        assert_eq!(bytes(pshufb(A, idx))[15], 0);
        assert_eq!(pshufb_64(0x0706_0504_0302_0100, 0x0f_80_09), 0x0007_0001);
        let b = 0x1f1e_1d1c_1b1a_1918_1716_1514_1312_1110u128;
        assert_eq!(palignr(A, b, 0), b);
        assert_eq!(palignr(A, b, 16), A);
        assert_eq!(palignr(A, b, 4), (b >> 32) | (A << 96));
        assert_eq!(palignr(A, b, 31), 0x0f);
        assert_eq!(palignr(A, b, 32), 0);
        assert_eq!(palignr(A, b, 255), 0);
        assert_eq!(palignr_64(0x1111, 0x2222, 8), 0x1111);
        assert_eq!(palignr_64(0x1111, 0x2222, 1), 0x1100_0000_0000_0022);
        assert_eq!(palignr_64(0x1111, 0x2222, 16), 0);
    }

    #[test]
    fn horizontal_and_multiply_spot_checks() {
        let a = from_words([1, 2, 0x7fff, 1, 0x8000, 0xffff, 5, 3]);
        let b = from_words([10, 20, 0, 0, 0, 0, 0, 7]);
        assert_eq!(words(phaddw(a, b)), [3, 0x8000, 0x7fff, 8, 30, 0, 0, 7]);
        assert_eq!(words(phaddsw(a, b)), [3, 0x7fff, 0x8000, 8, 30, 0, 0, 7]);
        assert_eq!(words(phsubw(a, b))[..4], [0xffff, 0x7ffe, 0x8001, 2]);
        assert_eq!(words(phsubsw(a, b))[2], 0x8001);
        assert_eq!(
            dwords(phaddd(from_dwords([1, 2, 3, 4]), from_dwords([5, 6, 7, 8]))),
            [3, 7, 11, 15]
        );
        assert_eq!(
            dwords(phsubd(from_dwords([1, 2, 3, 4]), from_dwords([5, 6, 7, 8]))),
            [u32::MAX; 4]
        );
        // 255*127 + 255*127 saturates; 255*-128 + 255*-128 saturates low.
        let u = from_bytes([255, 255, 255, 255, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let s = from_bytes([127, 127, 0x80, 0x80, 0xff, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(words(pmaddubsw(u, s))[..3], [0x7fff, 0x8000, 10]);
        let w = from_words([0x8000, 0x4000, 0x7fff, 0xffff, 0, 0, 0, 0]);
        assert_eq!(words(pmulhrsw(w, w))[..4], [0x8000, 0x2000, 0x7ffe, 0]);
        assert_eq!(
            bytes(psignb(
                A | 0x80,
                from_bytes([0xff, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            ))[..4],
            [0x80, 0, 2, 0xfd]
        );
        assert_eq!(
            bytes(pabsb(
                0,
                from_bytes([0x80, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            ))[..4],
            [0x80, 1, 0x7f, 0]
        );
        assert_eq!(
            dwords(pabsd(0, from_dwords([0x8000_0000, u32::MAX, 5, 0]))),
            [0x8000_0000, 1, 5, 0]
        );
        // MMX forms: horizontal ops on dst:src.
        assert_eq!(
            phaddw_mm(0x0004_0003_0002_0001, 0x0040_0030_0020_0010),
            0x0070_0030_0007_0003
        );
        assert_eq!(
            phsubd_mm(0x0000_0001_0000_0003, 0x0000_0005_0000_0002),
            0xffff_fffd_0000_0002
        );
    }

    #[test]
    fn register_memory_and_mmx_forms() {
        let code = TestMachine::assemble(|a| {
            a.pshufb(xmm1, xmmword_ptr(DATA_BASE))?;
            a.palignr(xmm2, xmm3, 5)?;
            a.phaddd(mm1, qword_ptr(DATA_BASE + 0x13))?;
            a.palignr(mm2, mm1, 3)
        });
        let mut m = TestMachine::new();
        let st = &mut m.cpu.state;
        st.ymm[1] = [A as u64, (A >> 64) as u64, 7, 7];
        st.ymm[2] = [0x1111, 0x2222, 7, 7];
        st.ymm[3] = [0x3333, 0x4444, 7, 7];
        crate::ops::mmx::set_mm(st, 1, 0x0000_0002_0000_0001);
        crate::ops::mmx::set_mm(st, 2, 0xaabb_ccdd_eeff_0011);
        let idx = from_bytes([3, 3, 3, 3, 0x80, 0x80, 0x80, 0x80, 1, 1, 1, 1, 0, 0, 0, 0]);
        m.load(DATA_BASE, &idx.to_le_bytes());
        m.load(DATA_BASE + 0x13, &0x0000_0010_0000_0020u64.to_le_bytes());
        let e = m.run_code(&code, 4);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(get_xmm(st, 1), pshufb(A, idx));
        assert_eq!(st.ymm[1][2..], [7, 7]);
        assert_eq!(
            get_xmm(st, 2),
            palignr(0x2222 << 64 | 0x1111, 0x4444 << 64 | 0x3333, 5)
        );
        assert_eq!(get_mm(st, 1), 0x0000_0030_0000_0003);
        assert_eq!(
            get_mm(st, 2),
            palignr_64(0xaabb_ccdd_eeff_0011, 0x0000_0030_0000_0003, 3)
        );
        assert_eq!(st.x87.ftw, 0xff);
    }

    #[test]
    fn misaligned_xmm_form_faults_but_mmx_form_does_not() {
        let code = TestMachine::assemble(|a| a.pabsw(xmm1, xmmword_ptr(DATA_BASE + 8)));
        let mut m = TestMachine::new();
        assert_eq!(
            m.run_code(&code, 1).reason,
            ExitReason::Exception(Fault::GP0)
        );
        let code = TestMachine::assemble(|a| a.pabsw(mm1, qword_ptr(DATA_BASE + 3)));
        assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
    }
}
