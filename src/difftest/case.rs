//! One self-contained test case (code bytes, registers, flags, data seed, masked flags, and for
//! SIMD cases the YMM/MXCSR/x87 state), its hex encoding for `--replay`, the data-area contents
//! it implies, and its disassembly.

use super::layout::CODE_ADDR;
use super::simd::SimdState;
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
use std::fmt::Write;

/// Register names in encoding order.
pub const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// A case exactly as it runs: everything needed to re-run it on both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// Instruction bytes placed at `CODE_ADDR`, ending with INT3 (0xCC).
    pub code: Vec<u8>,
    pub gpr: [u64; 16],
    /// Initial status flags and DF (other RFLAGS bits are fixed: bit 1 and IF).
    pub flags: u64,
    /// Seed of the initial data-area contents ([`fill_data`]).
    pub mem_seed: u64,
    /// Flags not compared (undefined flags on a host other than the policy host).
    pub ignore_flags: u64,
    /// SIMD cases: the initial YMM/MXCSR/x87 state, set on both sides and compared after the
    /// run. `None` for general-purpose cases (no vector state is set or compared).
    pub simd: Option<Box<SimdState>>,
    /// x87 status-word bits not compared (condition codes the SDM leaves undefined).
    pub ignore_fsw: u16,
}

/// Version 1: general-purpose cases only; version 2 adds the optional SIMD block.
const MAGIC_V1: [u8; 3] = *b"LD1";
const MAGIC: [u8; 3] = *b"LD2";

impl Case {
    /// Hex encoding for `lockstep difftest --replay`.
    pub fn to_hex(&self) -> String {
        let mut b = Vec::with_capacity(160 + self.code.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&self.flags.to_le_bytes());
        b.extend_from_slice(&self.ignore_flags.to_le_bytes());
        b.extend_from_slice(&self.mem_seed.to_le_bytes());
        for g in self.gpr {
            b.extend_from_slice(&g.to_le_bytes());
        }
        b.extend_from_slice(&(self.code.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.code);
        match &self.simd {
            None => b.push(0),
            Some(st) => {
                b.push(1);
                b.extend_from_slice(&self.ignore_fsw.to_le_bytes());
                for y in &st.ymm {
                    for v in y {
                        b.extend_from_slice(&v.to_le_bytes());
                    }
                }
                b.extend_from_slice(&st.mxcsr.to_le_bytes());
                b.extend_from_slice(&st.fcw.to_le_bytes());
                b.extend_from_slice(&st.fsw.to_le_bytes());
                b.push(st.ftw);
                for r in &st.st {
                    b.extend_from_slice(r);
                }
                b.extend_from_slice(&st.fop.to_le_bytes());
                b.extend_from_slice(&st.fip.to_le_bytes());
                b.extend_from_slice(&st.fdp.to_le_bytes());
            }
        }
        let mut s = String::with_capacity(b.len() * 2);
        for x in b {
            let _ = write!(s, "{x:02x}");
        }
        s
    }

    /// Parse [`Case::to_hex`] output.
    pub fn from_hex(s: &str) -> Result<Case, String> {
        let s = s.trim();
        if s.len() & 1 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err("replay case must be an even number of hex digits".into());
        }
        let b: Vec<u8> = (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect();
        let mut r = Reader { b: &b, pos: 0 };
        let version = r.take(3)?;
        let v2 = version == MAGIC;
        if !v2 && version != MAGIC_V1 {
            return Err("not a difftest case (bad magic/version)".into());
        }
        let flags = r.u64()?;
        let ignore_flags = r.u64()?;
        let mem_seed = r.u64()?;
        let mut gpr = [0u64; 16];
        for g in gpr.iter_mut() {
            *g = r.u64()?;
        }
        let n = u16::from_le_bytes(r.take(2)?.try_into().unwrap_or([0; 2])) as usize;
        let code = r.take(n)?.to_vec();
        let (mut simd, mut ignore_fsw) = (None, 0);
        if v2 && r.take(1)?[0] == 1 {
            ignore_fsw = r.u16()?;
            let mut st = SimdState::default();
            for y in st.ymm.iter_mut() {
                for v in y.iter_mut() {
                    *v = r.u64()?;
                }
            }
            st.mxcsr = r.u32()?;
            st.fcw = r.u16()?;
            st.fsw = r.u16()?;
            st.ftw = r.take(1)?[0];
            for x in st.st.iter_mut() {
                x.copy_from_slice(r.take(10)?);
            }
            st.fop = r.u16()?;
            st.fip = r.u64()?;
            st.fdp = r.u64()?;
            simd = Some(Box::new(st));
        }
        if r.pos != b.len() {
            return Err("trailing bytes after the case".into());
        }
        if code.is_empty() || code.len() > super::layout::MAX_CODE {
            return Err(format!("code length {} out of range", code.len()));
        }
        Ok(Case {
            code,
            gpr,
            flags,
            mem_seed,
            ignore_flags,
            simd,
            ignore_fsw,
        })
    }

    /// One line per instruction: address, bytes, Intel syntax (the trailing INT3 included).
    pub fn disassembly(&self) -> Vec<String> {
        disassemble(&self.code)
    }
}

/// Disassemble code placed at `CODE_ADDR`.
pub fn disassemble(code: &[u8]) -> Vec<String> {
    let mut dec = Decoder::with_ip(64, code, CODE_ADDR, DecoderOptions::NONE);
    let mut fmt = IntelFormatter::new();
    fmt.options_mut().set_space_after_operand_separator(true);
    let mut out = Vec::new();
    let mut text = String::new();
    while dec.can_decode() {
        let pos = dec.position();
        let ins = dec.decode();
        text.clear();
        fmt.format(&ins, &mut text);
        let bytes: String = code[pos..pos + ins.len()]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        out.push(format!("{:#010x}: {bytes:<30} {text}", ins.ip()));
    }
    out
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        match end {
            Some(e) => {
                let s = &self.b[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err("replay case is truncated".into()),
        }
    }
    fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u16(&mut self) -> Result<u16, String> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
}

/// SplitMix64: tiny, fixed, fast; fills the data area from a case's `mem_seed`.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Edge values that memory words take one time in eight.
const MEM_EDGES: [u64; 8] = [
    0,
    1,
    u64::MAX,
    0x8000_0000_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x0000_0000_8000_0000,
    0x0000_0000_ffff_ffff,
    0x0000_0000_0000_0080,
];

/// Floating-point words that SIMD cases' memory takes one time in four: pairs of singles
/// (zeros, infinities, quiet/signalling NaNs, denormals, 1.0, 2^31) and doubles alike.
const MEM_FP_EDGES: [u64; 16] = [
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0x000f_ffff_ffff_ffff,
    0x3ff0_0000_0000_0000,
    0xc1e0_0000_0000_0000,
    0x0010_0000_0000_0000,
    0x7f80_0000_ff80_0000,
    0x7fc0_0000_7f80_0001,
    0x0000_0001_807f_ffff,
    0x3f80_0000_bf80_0000,
    0x4f00_0000_cf00_0000,
    0x0080_0000_3f00_0000,
    0x7f7f_ffff_0000_0000,
    0xffc0_0000_3fc0_0000,
];

/// The initial contents of the data area for `seed` (random words, some edge values; with
/// `fp`, for SIMD cases, also floating-point special values).
pub fn fill_data(seed: u64, fp: bool, out: &mut [u8]) {
    let mut st = seed;
    let mut chunks = out.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let r = splitmix(&mut st);
        let edge = MEM_EDGES[((r >> 3) & 7) as usize];
        let v = if r & 7 == 0 {
            edge
        } else if fp && r & 7 < 3 {
            MEM_FP_EDGES[((r >> 6) & 15) as usize]
        } else {
            r
        };
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let last = splitmix(&mut st).to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Case {
        let mut gpr = [0u64; 16];
        for (i, g) in gpr.iter_mut().enumerate() {
            *g = (i as u64).wrapping_mul(0x0123_4567_89ab_cdef) ^ 0xdead;
        }
        Case {
            code: vec![0x48, 0x01, 0xd8, 0xcc],
            gpr,
            flags: 0x8d5,
            mem_seed: 0x1234_5678,
            ignore_flags: 0x10,
            simd: None,
            ignore_fsw: 0,
        }
    }

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        let c = sample();
        let h = c.to_hex();
        assert_eq!(Case::from_hex(&h).unwrap(), c);
        assert!(Case::from_hex(&h[..h.len() - 2]).is_err());
        assert!(Case::from_hex(&format!("{h}00")).is_err());
        assert!(Case::from_hex("zz").is_err());
        assert!(Case::from_hex(&h.replacen("4c44", "4c45", 1)).is_err());
        // With a SIMD block.
        let mut c2 = c.clone();
        let mut rng = crate::difftest::gen::Rng::new([4; 32]);
        c2.simd = Some(Box::new(rng.simd_state()));
        c2.ignore_fsw = 0x4500;
        let h2 = c2.to_hex();
        assert_eq!(Case::from_hex(&h2).unwrap(), c2);
        assert!(Case::from_hex(&h2[..h2.len() - 2]).is_err());
    }

    #[test]
    fn version_1_cases_still_parse() {
        let c = sample();
        let h = c.to_hex();
        // v1 = "LD1" and no SIMD marker byte at the end.
        let v1 = format!("{}{}", "4c4431", &h[6..h.len() - 2]);
        assert_eq!(Case::from_hex(&v1).unwrap(), c);
    }

    #[test]
    fn disassembly_names_the_instructions() {
        let d = sample().disassembly();
        assert_eq!(d.len(), 2);
        assert!(d[0].contains("add rax, rbx"), "{}", d[0]);
        assert!(d[1].contains("int3"), "{}", d[1]);
    }

    #[test]
    fn data_fill_is_a_function_of_the_seed() {
        let (mut a, mut b, mut c) = ([0u8; 64], [0u8; 64], [0u8; 64]);
        fill_data(7, false, &mut a);
        fill_data(7, false, &mut b);
        fill_data(8, false, &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        fill_data(7, true, &mut c);
        assert_ne!(a, c);
    }
}
