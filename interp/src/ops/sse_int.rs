//! Legacy SSE2 packed-integer arithmetic, compares and logic on xmm, xmm/m128: PADD*/PSUB*
//! (wrapping and saturating), PCMPEQ*/PCMPGT*, PMINUB/PMAXUB/PMINSW/PMAXSW, PAVGB/PAVGW,
//! PMULLW/PMULHW/PMULHUW/PMULUDQ/PMADDWD, PSADBW, PAND/PANDN/POR/PXOR and the bitwise
//! ANDPS/ANDNPS/ORPS/XORPS/ANDPD/ANDNPD/ORPD/XORPD (no floating point involved: pure bit ops).
//!
//! All are `dst = f(dst, src)` with a 16-byte-aligned m128 source (#GP(0) otherwise).

use crate::decode::Handler;
use crate::ops::sse_common::{bytes, from_dwords, from_qwords, sse_binary_family, words};
use crate::ops::sse_common::{map_b, map_d, map_q, map_w};
use iced_x86::Instruction;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    binary_lookup(ins)
}

sse_binary_family! {
    paddb: Paddb_xmm_xmmm128;
    paddw: Paddw_xmm_xmmm128;
    paddd: Paddd_xmm_xmmm128;
    paddq: Paddq_xmm_xmmm128;
    psubb: Psubb_xmm_xmmm128;
    psubw: Psubw_xmm_xmmm128;
    psubd: Psubd_xmm_xmmm128;
    psubq: Psubq_xmm_xmmm128;
    paddusb: Paddusb_xmm_xmmm128;
    paddusw: Paddusw_xmm_xmmm128;
    psubusb: Psubusb_xmm_xmmm128;
    psubusw: Psubusw_xmm_xmmm128;
    paddsb: Paddsb_xmm_xmmm128;
    paddsw: Paddsw_xmm_xmmm128;
    psubsb: Psubsb_xmm_xmmm128;
    psubsw: Psubsw_xmm_xmmm128;
    pcmpeqb: Pcmpeqb_xmm_xmmm128;
    pcmpeqw: Pcmpeqw_xmm_xmmm128;
    pcmpeqd: Pcmpeqd_xmm_xmmm128;
    pcmpgtb: Pcmpgtb_xmm_xmmm128;
    pcmpgtw: Pcmpgtw_xmm_xmmm128;
    pcmpgtd: Pcmpgtd_xmm_xmmm128;
    pminub: Pminub_xmm_xmmm128;
    pmaxub: Pmaxub_xmm_xmmm128;
    pminsw: Pminsw_xmm_xmmm128;
    pmaxsw: Pmaxsw_xmm_xmmm128;
    pavgb: Pavgb_xmm_xmmm128;
    pavgw: Pavgw_xmm_xmmm128;
    pmullw: Pmullw_xmm_xmmm128;
    pmulhw: Pmulhw_xmm_xmmm128;
    pmulhuw: Pmulhuw_xmm_xmmm128;
    pmuludq: Pmuludq_xmm_xmmm128;
    pmaddwd: Pmaddwd_xmm_xmmm128;
    psadbw: Psadbw_xmm_xmmm128;
    pand: Pand_xmm_xmmm128 | Andps_xmm_xmmm128 | Andpd_xmm_xmmm128;
    pandn: Pandn_xmm_xmmm128 | Andnps_xmm_xmmm128 | Andnpd_xmm_xmmm128;
    por: Por_xmm_xmmm128 | Orps_xmm_xmmm128 | Orpd_xmm_xmmm128;
    pxor: Pxor_xmm_xmmm128 | Xorps_xmm_xmmm128 | Xorpd_xmm_xmmm128;
}

// ----- lane-wise helpers -----

/// All ones when `c`, else zero (compare results).
#[inline(always)]
fn mask<T: From<u8> + core::ops::Not<Output = T>>(c: bool) -> T {
    if c {
        !T::from(0)
    } else {
        T::from(0)
    }
}

// ----- wrapping add/sub -----

pub fn paddb(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::wrapping_add)
}
pub fn paddw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::wrapping_add)
}
pub fn paddd(a: u128, b: u128) -> u128 {
    map_d(a, b, u32::wrapping_add)
}
pub fn paddq(a: u128, b: u128) -> u128 {
    map_q(a, b, u64::wrapping_add)
}
pub fn psubb(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::wrapping_sub)
}
pub fn psubw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::wrapping_sub)
}
pub fn psubd(a: u128, b: u128) -> u128 {
    map_d(a, b, u32::wrapping_sub)
}
pub fn psubq(a: u128, b: u128) -> u128 {
    map_q(a, b, u64::wrapping_sub)
}

// ----- saturating add/sub -----

pub fn paddusb(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::saturating_add)
}
pub fn paddusw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::saturating_add)
}
pub fn psubusb(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::saturating_sub)
}
pub fn psubusw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::saturating_sub)
}
pub fn paddsb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| (x as i8).saturating_add(y as i8) as u8)
}
pub fn paddsw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| (x as i16).saturating_add(y as i16) as u16)
}
pub fn psubsb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| (x as i8).saturating_sub(y as i8) as u8)
}
pub fn psubsw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| (x as i16).saturating_sub(y as i16) as u16)
}

// ----- compares (all-ones lane when true); PCMPGT compares signed -----

pub fn pcmpeqb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| mask(x == y))
}
pub fn pcmpeqw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| mask(x == y))
}
pub fn pcmpeqd(a: u128, b: u128) -> u128 {
    map_d(a, b, |x, y| mask(x == y))
}
pub fn pcmpgtb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| mask(x as i8 > y as i8))
}
pub fn pcmpgtw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| mask(x as i16 > y as i16))
}
pub fn pcmpgtd(a: u128, b: u128) -> u128 {
    map_d(a, b, |x, y| mask(x as i32 > y as i32))
}

// ----- min/max/average -----

pub fn pminub(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::min)
}
pub fn pmaxub(a: u128, b: u128) -> u128 {
    map_b(a, b, u8::max)
}
pub fn pminsw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| (x as i16).min(y as i16) as u16)
}
pub fn pmaxsw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| (x as i16).max(y as i16) as u16)
}
/// Unsigned average rounded up: (a + b + 1) >> 1 without overflow.
pub fn pavgb(a: u128, b: u128) -> u128 {
    map_b(a, b, |x, y| ((x as u16 + y as u16 + 1) >> 1) as u8)
}
pub fn pavgw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| ((x as u32 + y as u32 + 1) >> 1) as u16)
}

// ----- multiplies -----

/// Low 16 bits of each signed (= unsigned) 16x16 product.
pub fn pmullw(a: u128, b: u128) -> u128 {
    map_w(a, b, u16::wrapping_mul)
}
/// High 16 bits of each signed 16x16 product.
pub fn pmulhw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| {
        ((x as i16 as i32 * y as i16 as i32) >> 16) as u16
    })
}
/// High 16 bits of each unsigned 16x16 product.
pub fn pmulhuw(a: u128, b: u128) -> u128 {
    map_w(a, b, |x, y| ((x as u32 * y as u32) >> 16) as u16)
}
/// Unsigned 32x32 -> 64 products of dwords 0 and 2.
pub fn pmuludq(a: u128, b: u128) -> u128 {
    map_q(a, b, |x, y| (x as u32 as u64) * (y as u32 as u64))
}
/// Signed word products summed pairwise into dwords; the one overflowing case
/// (all four words 0x8000) wraps to 0x8000_0000.
pub fn pmaddwd(a: u128, b: u128) -> u128 {
    let (a, b) = (words(a), words(b));
    from_dwords(core::array::from_fn(|i| {
        let p0 = a[2 * i] as i16 as i32 * b[2 * i] as i16 as i32;
        let p1 = a[2 * i + 1] as i16 as i32 * b[2 * i + 1] as i16 as i32;
        p0.wrapping_add(p1) as u32
    }))
}
/// Sum of absolute byte differences of each 8-byte half into bits 15:0 of each quadword;
/// bits 63:16 are zero.
pub fn psadbw(a: u128, b: u128) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    let half = |h: usize| -> u64 {
        (0..8)
            .map(|i| a[8 * h + i].abs_diff(b[8 * h + i]) as u64)
            .sum()
    };
    from_qwords([half(0), half(1)])
}

// ----- logic -----

pub fn pand(a: u128, b: u128) -> u128 {
    a & b
}
/// `!dst & src`.
pub fn pandn(a: u128, b: u128) -> u128 {
    !a & b
}
pub fn por(a: u128, b: u128) -> u128 {
    a | b
}
pub fn pxor(a: u128, b: u128) -> u128 {
    a ^ b
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
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;
    use iced_x86::Code;

    #[test]
    fn lane_semantics_spot_checks() {
        let a = from_bytes([
            0xff, 0x7f, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ]);
        let b = from_bytes([
            0x01, 0x01, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20,
        ]);
        assert_eq!(bytes(paddb(a, b))[..4], [0x00, 0x80, 0x7f, 0x03]);
        assert_eq!(bytes(paddusb(a, b))[..4], [0xff, 0x80, 0xff, 0x03]);
        assert_eq!(bytes(paddsb(a, b))[..4], [0x00, 0x7f, 0x80, 0x03]);
        assert_eq!(bytes(psubusb(a, b))[..4], [0xfe, 0x7e, 0x00, 0x00]);
        assert_eq!(bytes(psubsb(a, b))[..4], [0xfe, 0x7e, 0x81, 0xff]);
        assert_eq!(bytes(pcmpgtb(a, b))[..4], [0x00, 0xff, 0x00, 0x00]);
        assert_eq!(bytes(pcmpeqb(a, b))[4..6], [0xff, 0xff]);
        assert_eq!(bytes(pavgb(a, b))[..4], [0x80, 0x40, 0xc0, 0x02]);
        assert_eq!(bytes(pminub(a, b))[..4], [0x01, 0x01, 0x80, 0x01]);
        assert_eq!(psadbw(a, b), (0xfe + 0x7e + 0x7f + 1) | (0x10u128 << 64));
        let w = from_words([0x8000, 0x8000, 0x7fff, 2, 0xffff, 3, 0, 0]);
        assert_eq!(dwords(pmaddwd(w, w))[0], 0x8000_0000);
        assert_eq!(dwords(pmaddwd(w, w))[1], 0x3fff_0001 + 4);
        assert_eq!(words(pmulhw(w, w))[0], 0x4000);
        assert_eq!(words(pmulhuw(w, w))[4], 0xfffe);
        assert_eq!(words(pmullw(w, w))[4], 1);
        assert_eq!(
            pmuludq(
                from_dwords([u32::MAX, 5, 2, 6]),
                from_dwords([u32::MAX, 7, 3, 8])
            ),
            from_qwords([0xffff_fffe_0000_0001, 6])
        );
        assert_eq!(pandn(0b1100, 0b1010), !0b1100 & 0b1010);
    }

    #[test]
    fn register_and_memory_forms() {
        let code = TestMachine::assemble(|a| {
            a.paddd(xmm1, xmm2)?;
            a.pcmpeqb(xmm3, xmmword_ptr(DATA_BASE))?;
            a.xorps(xmm4, xmm4)?;
            a.pandn(xmm5, xmmword_ptr(DATA_BASE + 0x10))
        });
        let mut m = TestMachine::new();
        let a = 0x0000_0001_ffff_ffff_0000_0005_8000_0000u128;
        let b = 0x0000_0001_0000_0001_0000_0007_8000_0000u128;
        m.cpu.state.ymm[1] = [a as u64, (a >> 64) as u64, 9, 9];
        m.cpu.state.ymm[2] = [b as u64, (b >> 64) as u64, 9, 9];
        m.cpu.state.ymm[3] = [b as u64, (b >> 64) as u64, 9, 9];
        m.cpu.state.ymm[4] = [1, 2, 3, 4];
        m.cpu.state.ymm[5] = [0xff, 0, 0, 0];
        m.load(DATA_BASE, &a.to_le_bytes());
        m.load(DATA_BASE + 0x10, &[0xaa; 16]);
        let e = m.run_code(&code, 4);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(get_xmm(st, 1), paddd(a, b));
        assert_eq!(get_xmm(st, 1), 0x0000_0002_0000_0000_0000_000c_0000_0000);
        assert_eq!(st.ymm[1][2..], [9, 9]);
        assert_eq!(get_xmm(st, 3), pcmpeqb(b, a));
        assert_eq!(st.ymm[4], [0, 0, 3, 4]);
        assert_eq!(
            get_xmm(st, 5),
            0xaaaa_aaaa_aaaa_aaaa_aaaa_aaaa_aaaa_aa00u128
        );
    }

    #[test]
    fn high_registers_xmm8_to_xmm15() {
        let code = TestMachine::assemble(|a| {
            a.paddb(xmm15, xmm8)?;
            a.psubq(xmm9, xmmword_ptr(r12 + 0x10))
        });
        let mut m = TestMachine::new();
        for i in 0..16 {
            m.cpu.state.ymm[i] = [i as u64 * 0x0101, i as u64, 0x77, 0x77];
        }
        m.cpu.state.gpr[crate::state::reg::R12] = DATA_BASE;
        m.load(DATA_BASE + 0x10, &3u128.to_le_bytes());
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        let st = &m.cpu.state;
        assert_eq!(st.ymm[15], [15 * 0x0101 + 8 * 0x0101, 15 + 8, 0x77, 0x77]);
        assert_eq!(st.ymm[9], [9 * 0x0101 - 3, 9, 0x77, 0x77]);
        assert_eq!(st.ymm[8], [8 * 0x0101, 8, 0x77, 0x77]);
    }

    #[test]
    fn misaligned_m128_source_raises_gp() {
        let code = TestMachine::assemble(|a| a.pxor(xmm1, xmmword_ptr(DATA_BASE + 4)));
        let mut m = TestMachine::new();
        m.cpu.state.ymm[1] = [5, 6, 7, 8];
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
        assert_eq!(m.cpu.state.ymm[1], [5, 6, 7, 8]);
        assert_eq!(m.cpu.state.rip, crate::testkit::CODE_BASE);
    }

    #[test]
    fn mmx_forms_are_not_claimed() {
        let code = TestMachine::assemble(|a| a.pxor(mm0, mm1));
        let mut d = iced_x86::Decoder::new(64, &code, 0);
        let ins = d.decode();
        assert_eq!(ins.code(), Code::Pxor_mm_mmm64);
        assert!(lookup(&ins).is_none());
    }
}
