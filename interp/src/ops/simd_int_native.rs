//! Differential test of the SSSE3, SSE4.1 (integer), SSE4.2 and MMX families against the host
//! CPU: every covered form (register and memory operands, every imm8 of the imm forms, all
//! 256 imm8 values of PCMPxSTRx) runs natively and in the interpreter over deterministic
//! pseudo-random inputs, and XMM0-3, RAX/RCX/RDX, the status flags, memory and the x87 state
//! the MMX instructions touch (FCW, FSW incl. TOP, the abridged tag word, all eight 80-bit
//! registers) must agree bit for bit.
//!
//! The native side loads the x87/MMX state with FXRSTOR64 from a prepared image (random TOP,
//! tags, condition codes and register contents) and reads it back with FXSAVE64, so the MMX
//! aliasing rules are checked against the hardware too. Forms whose CPUID feature the host
//! lacks are skipped.

use crate::cpu::ExitReason;
use crate::ops::sse_common::get_xmm;
use crate::state::flags::{CF, FIXED1, IF, OF, SF, STATUS, ZF};
use crate::state::reg;
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;
use iced_x86::{Code, CpuidFeature, Encoder, Instruction, MemoryOperand, Register};
use memmap2::{Mmap, MmapMut};

/// Register image exchanged with the native code (offsets are fixed, see [`Native::new`]).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// FXSAVE64 image.
    fx: [u8; 512],
    xmm: [u128; 4],
    rax: u64,
    rcx: u64,
    rdx: u64,
    rflags: u64,
}

const MEM_LEN: usize = 64;

#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mem([u8; MEM_LEN]);

/// What is compared after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Out {
    xmm: [u128; 4],
    rax: u64,
    rcx: u64,
    rdx: u64,
    flags: u64,
    fcw: u16,
    fsw: u16,
    ftw: u8,
    /// ST(0)..ST(7) as FXSAVE orders them (slot j = physical register (TOP + j) mod 8).
    st: [[u8; 10]; 8],
    mem: [u8; MEM_LEN],
}

fn out_of(f: &Frame, m: &Mem) -> Out {
    Out {
        xmm: f.xmm,
        rax: f.rax,
        rcx: f.rcx,
        rdx: f.rdx,
        flags: f.rflags & STATUS,
        fcw: u16::from_le_bytes([f.fx[0], f.fx[1]]),
        fsw: u16::from_le_bytes([f.fx[2], f.fx[3]]),
        ftw: f.fx[4],
        st: core::array::from_fn(|j| core::array::from_fn(|k| f.fx[32 + 16 * j + k])),
        mem: m.0,
    }
}

/// How the operands of a form are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `op x0, x1`, `op x0, x0`, `op x2, x3`, `op x0, [rsi]`; bool: m128 must be aligned.
    XmmRm(bool),
    /// `op x0, x1, imm8` and `op x0, [rsi], imm8` for every imm8 (aligned m128).
    XmmRmImm,
    /// `op x0, [rsi]` (aligned).
    XmmMem,
    /// `op gpr(rax)/[rsi], x1, imm8` for every imm8.
    GprmXmmImm,
    /// `op x0, gpr(rcx)/[rsi], imm8` for every imm8.
    XmmGprmImm,
    /// PCMPxSTRx: `op x1, x2, imm8`, `op x0, x1, imm8`, `op x1, [rsi], imm8` (unaligned).
    Str,
    /// CRC32 with every register/memory source width.
    Crc,
    /// `op mm0, mm1`, `op mm0, mm0`, `op mm2, mm3`, `op mm0, [rsi]` (unaligned).
    MmRm,
    /// `op mm0, mm1, imm8` and `op mm0, [rsi], imm8` for every imm8.
    MmRmImm,
    /// `op mm0, imm8` for every imm8.
    MmImm,
    /// `op mm0, gpr(rcx)` and `op mm0, [rsi]`.
    MmGprm,
    /// `op gpr(rax), mm1` and `op [rsi], mm1`.
    GprmMm,
    /// `op mm0, mm1` and `op [rsi], mm1`.
    MmmMm,
    /// `op [rsi], mm1`.
    MemMm,
    /// `op gpr(rax), mm1, imm8` for every imm8.
    GprMmImm,
    /// `op mm0, gpr(rcx)/[rsi], imm8` for every imm8.
    MmGprmImm,
    /// `op gpr(rax), mm1`.
    GprMm,
    /// MASKMOVQ mm0, mm1 / MASKMOVDQU xmm0, xmm1 to [rdi].
    Mask,
    /// `op x0, mm1`.
    XmmMm,
    /// `op mm0, x1`.
    MmXmm,
    /// No operands (EMMS).
    NoOps,
}

use Shape::*;

const FORMS: &[(Code, Shape)] = &[
    // SSSE3, XMM
    (Code::Pshufb_xmm_xmmm128, XmmRm(true)),
    (Code::Phaddw_xmm_xmmm128, XmmRm(true)),
    (Code::Phaddd_xmm_xmmm128, XmmRm(true)),
    (Code::Phaddsw_xmm_xmmm128, XmmRm(true)),
    (Code::Phsubw_xmm_xmmm128, XmmRm(true)),
    (Code::Phsubd_xmm_xmmm128, XmmRm(true)),
    (Code::Phsubsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaddubsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmulhrsw_xmm_xmmm128, XmmRm(true)),
    (Code::Psignb_xmm_xmmm128, XmmRm(true)),
    (Code::Psignw_xmm_xmmm128, XmmRm(true)),
    (Code::Psignd_xmm_xmmm128, XmmRm(true)),
    (Code::Pabsb_xmm_xmmm128, XmmRm(true)),
    (Code::Pabsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pabsd_xmm_xmmm128, XmmRm(true)),
    (Code::Palignr_xmm_xmmm128_imm8, XmmRmImm),
    // SSSE3, MMX
    (Code::Pshufb_mm_mmm64, MmRm),
    (Code::Phaddw_mm_mmm64, MmRm),
    (Code::Phaddd_mm_mmm64, MmRm),
    (Code::Phaddsw_mm_mmm64, MmRm),
    (Code::Phsubw_mm_mmm64, MmRm),
    (Code::Phsubd_mm_mmm64, MmRm),
    (Code::Phsubsw_mm_mmm64, MmRm),
    (Code::Pmaddubsw_mm_mmm64, MmRm),
    (Code::Pmulhrsw_mm_mmm64, MmRm),
    (Code::Psignb_mm_mmm64, MmRm),
    (Code::Psignw_mm_mmm64, MmRm),
    (Code::Psignd_mm_mmm64, MmRm),
    (Code::Pabsb_mm_mmm64, MmRm),
    (Code::Pabsw_mm_mmm64, MmRm),
    (Code::Pabsd_mm_mmm64, MmRm),
    (Code::Palignr_mm_mmm64_imm8, MmRmImm),
    // SSE4.1
    (Code::Pminsb_xmm_xmmm128, XmmRm(true)),
    (Code::Pminsd_xmm_xmmm128, XmmRm(true)),
    (Code::Pminuw_xmm_xmmm128, XmmRm(true)),
    (Code::Pminud_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxsb_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxsd_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxuw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxud_xmm_xmmm128, XmmRm(true)),
    (Code::Pmulld_xmm_xmmm128, XmmRm(true)),
    (Code::Pmuldq_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpeqq_xmm_xmmm128, XmmRm(true)),
    (Code::Packusdw_xmm_xmmm128, XmmRm(true)),
    (Code::Ptest_xmm_xmmm128, XmmRm(true)),
    (Code::Pblendvb_xmm_xmmm128, XmmRm(true)),
    (Code::Phminposuw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmovsxbw_xmm_xmmm64, XmmRm(false)),
    (Code::Pmovsxbd_xmm_xmmm32, XmmRm(false)),
    (Code::Pmovsxbq_xmm_xmmm16, XmmRm(false)),
    (Code::Pmovsxwd_xmm_xmmm64, XmmRm(false)),
    (Code::Pmovsxwq_xmm_xmmm32, XmmRm(false)),
    (Code::Pmovsxdq_xmm_xmmm64, XmmRm(false)),
    (Code::Pmovzxbw_xmm_xmmm64, XmmRm(false)),
    (Code::Pmovzxbd_xmm_xmmm32, XmmRm(false)),
    (Code::Pmovzxbq_xmm_xmmm16, XmmRm(false)),
    (Code::Pmovzxwd_xmm_xmmm64, XmmRm(false)),
    (Code::Pmovzxwq_xmm_xmmm32, XmmRm(false)),
    (Code::Pmovzxdq_xmm_xmmm64, XmmRm(false)),
    (Code::Pblendw_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Mpsadbw_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Pextrb_r32m8_xmm_imm8, GprmXmmImm),
    (Code::Pextrb_r64m8_xmm_imm8, GprmXmmImm),
    (Code::Pextrw_r32m16_xmm_imm8, GprmXmmImm),
    (Code::Pextrw_r64m16_xmm_imm8, GprmXmmImm),
    (Code::Pextrd_rm32_xmm_imm8, GprmXmmImm),
    (Code::Pextrq_rm64_xmm_imm8, GprmXmmImm),
    (Code::Pinsrb_xmm_r32m8_imm8, XmmGprmImm),
    (Code::Pinsrb_xmm_r64m8_imm8, XmmGprmImm),
    (Code::Pinsrd_xmm_rm32_imm8, XmmGprmImm),
    (Code::Pinsrq_xmm_rm64_imm8, XmmGprmImm),
    (Code::Movntdqa_xmm_m128, XmmMem),
    // SSE4.2
    (Code::Pcmpgtq_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpestri_xmm_xmmm128_imm8, Str),
    (Code::Pcmpestri64_xmm_xmmm128_imm8, Str),
    (Code::Pcmpestrm_xmm_xmmm128_imm8, Str),
    (Code::Pcmpestrm64_xmm_xmmm128_imm8, Str),
    (Code::Pcmpistri_xmm_xmmm128_imm8, Str),
    (Code::Pcmpistrm_xmm_xmmm128_imm8, Str),
    (Code::Crc32_r32_rm8, Crc),
    (Code::Crc32_r64_rm8, Crc),
    (Code::Crc32_r32_rm16, Crc),
    (Code::Crc32_r32_rm32, Crc),
    (Code::Crc32_r64_rm64, Crc),
    // MMX
    (Code::Paddb_mm_mmm64, MmRm),
    (Code::Paddw_mm_mmm64, MmRm),
    (Code::Paddd_mm_mmm64, MmRm),
    (Code::Paddq_mm_mmm64, MmRm),
    (Code::Psubb_mm_mmm64, MmRm),
    (Code::Psubw_mm_mmm64, MmRm),
    (Code::Psubd_mm_mmm64, MmRm),
    (Code::Psubq_mm_mmm64, MmRm),
    (Code::Paddusb_mm_mmm64, MmRm),
    (Code::Paddusw_mm_mmm64, MmRm),
    (Code::Psubusb_mm_mmm64, MmRm),
    (Code::Psubusw_mm_mmm64, MmRm),
    (Code::Paddsb_mm_mmm64, MmRm),
    (Code::Paddsw_mm_mmm64, MmRm),
    (Code::Psubsb_mm_mmm64, MmRm),
    (Code::Psubsw_mm_mmm64, MmRm),
    (Code::Pcmpeqb_mm_mmm64, MmRm),
    (Code::Pcmpeqw_mm_mmm64, MmRm),
    (Code::Pcmpeqd_mm_mmm64, MmRm),
    (Code::Pcmpgtb_mm_mmm64, MmRm),
    (Code::Pcmpgtw_mm_mmm64, MmRm),
    (Code::Pcmpgtd_mm_mmm64, MmRm),
    (Code::Pminub_mm_mmm64, MmRm),
    (Code::Pmaxub_mm_mmm64, MmRm),
    (Code::Pminsw_mm_mmm64, MmRm),
    (Code::Pmaxsw_mm_mmm64, MmRm),
    (Code::Pavgb_mm_mmm64, MmRm),
    (Code::Pavgw_mm_mmm64, MmRm),
    (Code::Pmullw_mm_mmm64, MmRm),
    (Code::Pmulhw_mm_mmm64, MmRm),
    (Code::Pmulhuw_mm_mmm64, MmRm),
    (Code::Pmuludq_mm_mmm64, MmRm),
    (Code::Pmaddwd_mm_mmm64, MmRm),
    (Code::Psadbw_mm_mmm64, MmRm),
    (Code::Pand_mm_mmm64, MmRm),
    (Code::Pandn_mm_mmm64, MmRm),
    (Code::Por_mm_mmm64, MmRm),
    (Code::Pxor_mm_mmm64, MmRm),
    (Code::Punpcklbw_mm_mmm32, MmRm),
    (Code::Punpcklwd_mm_mmm32, MmRm),
    (Code::Punpckldq_mm_mmm32, MmRm),
    (Code::Punpckhbw_mm_mmm64, MmRm),
    (Code::Punpckhwd_mm_mmm64, MmRm),
    (Code::Punpckhdq_mm_mmm64, MmRm),
    (Code::Packsswb_mm_mmm64, MmRm),
    (Code::Packssdw_mm_mmm64, MmRm),
    (Code::Packuswb_mm_mmm64, MmRm),
    (Code::Psllw_mm_mmm64, MmRm),
    (Code::Pslld_mm_mmm64, MmRm),
    (Code::Psllq_mm_mmm64, MmRm),
    (Code::Psrlw_mm_mmm64, MmRm),
    (Code::Psrld_mm_mmm64, MmRm),
    (Code::Psrlq_mm_mmm64, MmRm),
    (Code::Psraw_mm_mmm64, MmRm),
    (Code::Psrad_mm_mmm64, MmRm),
    (Code::Psllw_mm_imm8, MmImm),
    (Code::Pslld_mm_imm8, MmImm),
    (Code::Psllq_mm_imm8, MmImm),
    (Code::Psrlw_mm_imm8, MmImm),
    (Code::Psrld_mm_imm8, MmImm),
    (Code::Psrlq_mm_imm8, MmImm),
    (Code::Psraw_mm_imm8, MmImm),
    (Code::Psrad_mm_imm8, MmImm),
    (Code::Movd_mm_rm32, MmGprm),
    (Code::Movq_mm_rm64, MmGprm),
    (Code::Movq_mm_mmm64, MmRm),
    (Code::Movd_rm32_mm, GprmMm),
    (Code::Movq_rm64_mm, GprmMm),
    (Code::Movq_mmm64_mm, MmmMm),
    (Code::Movntq_m64_mm, MemMm),
    (Code::Pshufw_mm_mmm64_imm8, MmRmImm),
    (Code::Pextrw_r32_mm_imm8, GprMmImm),
    (Code::Pextrw_r64_mm_imm8, GprMmImm),
    (Code::Pinsrw_mm_r32m16_imm8, MmGprmImm),
    (Code::Pinsrw_mm_r64m16_imm8, MmGprmImm),
    (Code::Pmovmskb_r32_mm, GprMm),
    (Code::Pmovmskb_r64_mm, GprMm),
    (Code::Maskmovq_rDI_mm_mm, Mask),
    (Code::Maskmovdqu_rDI_xmm_xmm, Mask),
    (Code::Movq2dq_xmm_mm, XmmMm),
    (Code::Movdq2q_mm_xmm, MmXmm),
    (Code::Emms, NoOps),
];

/// Fixed-seed xorshift64 with value shapes that reach the edge cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A 128-bit value, often built from lanes at the edges of the integer ranges.
    fn v128(&mut self) -> u128 {
        const EDGE8: [u8; 8] = [0, 1, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x40];
        const EDGE16: [u16; 8] = [0, 1, 0x7fff, 0x8000, 0xffff, 0x00ff, 0xff80, 0x0100];
        const EDGE32: [u32; 6] = [0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX, 0xffff];
        match self.below(6) {
            0 => u128::from_le_bytes(core::array::from_fn(|_| EDGE8[self.below(8) as usize])),
            1 => (0..8).fold(0, |v, i| {
                v | (EDGE16[self.below(8) as usize] as u128) << (16 * i)
            }),
            2 => (0..4).fold(0, |v, i| {
                v | (EDGE32[self.below(6) as usize] as u128) << (32 * i)
            }),
            3 => (self.next() as u128 & 0x0f0f_0f0f_0f0f_0f0f) * 0x1_0000_0000_0000_0001,
            _ => (self.next() as u128) << 64 | self.next() as u128,
        }
    }

    /// A second operand: often equal to `a` in some lanes.
    fn related(&mut self, a: u128) -> u128 {
        let b = self.v128();
        match self.below(4) {
            0 => {
                let m = self.v128();
                (a & m) | (b & !m)
            }
            1 => a,
            _ => b,
        }
    }

    /// A shift count (bits 63:0; upper bits random and ignored).
    fn count(&mut self) -> u128 {
        let lo = match self.below(4) {
            0 => self.next(),
            1 => self.below(8) + (1 << 32),
            _ => self.below(70),
        };
        (self.next() as u128) << 64 | lo as u128
    }

    /// A string operand: a few characters from a small alphabet (so that the compares hit),
    /// often terminated early by a zero element, sometimes followed by garbage.
    fn string(&mut self) -> u128 {
        const ALPHA8: [u8; 8] = [b'a', b'b', b'c', b'z', 0x80, 0xff, 0x7f, 0x01];
        const ALPHA16: [u16; 8] = [0x61, 0x62, 0x6162, 0x8000, 0x7fff, 0xffff, 0x0100, 0x7a];
        let words = self.below(2) == 0;
        let n = if words { 8 } else { 16 };
        let len = match self.below(4) {
            0 => n,
            _ => self.below(n + 1),
        } as usize;
        let alpha = 1 + self.below(8) as usize;
        let mut v = 0u128;
        for i in 0..n as usize {
            let e = if i < len {
                self.below(alpha as u64) as usize
            } else if i == len || self.below(2) == 0 {
                usize::MAX
            } else {
                self.below(8) as usize
            };
            if words {
                let w = ALPHA16.get(e).copied().unwrap_or(0);
                v |= (w as u128) << (16 * i);
            } else {
                let b = ALPHA8.get(e).copied().unwrap_or(0);
                v |= (b as u128) << (8 * i);
            }
        }
        match self.below(8) {
            0 => self.v128(),
            _ => v,
        }
    }

    /// A second string: often a shifted copy of the first, to make ordered matches.
    fn related_string(&mut self, a: u128) -> u128 {
        match self.below(4) {
            0 => {
                let sh = 8 * self.below(8) as u32;
                (a << sh) | (self.string() & ((1u128 << sh) - 1))
            }
            1 => a >> (8 * self.below(4) as u32),
            _ => self.string(),
        }
    }

    /// An explicit length: mostly small, sometimes negative or huge.
    fn length(&mut self) -> u64 {
        match self.below(8) {
            0 => self.next(),
            1 => [
                0x8000_0000,
                1 << 63,
                0xffff_ffff_0000_0004,
                0x1_0000_0003,
                u64::MAX,
            ][self.below(5) as usize],
            2 => (-(self.below(20) as i64)) as u64,
            _ => self.below(20),
        }
    }
}

/// Executable copy of native code built around one instruction.
struct Native {
    _map: Mmap,
    f: extern "sysv64" fn(*mut Frame, *mut u8),
}

impl Native {
    fn new(insn: &[u8]) -> Native {
        let mut a = CodeAssembler::new(64).unwrap();
        let xmms = [xmm0, xmm1, xmm2, xmm3];
        a.mov(r8, rdi).unwrap();
        a.mov(rdi, rsi).unwrap(); // MASKMOVQ/MASKMOVDQU store to [rdi]
        a.fxrstor64(ptr(r8)).unwrap();
        for (i, x) in xmms.into_iter().enumerate() {
            a.movdqu(x, xmmword_ptr(r8 + 512 + 16 * i as i32)).unwrap();
        }
        a.mov(rax, qword_ptr(r8 + 576)).unwrap();
        a.mov(rcx, qword_ptr(r8 + 584)).unwrap();
        a.mov(rdx, qword_ptr(r8 + 592)).unwrap();
        a.push(qword_ptr(r8 + 600)).unwrap();
        a.popfq().unwrap();
        a.db(insn).unwrap();
        a.pushfq().unwrap();
        a.pop(qword_ptr(r8 + 600)).unwrap();
        a.mov(qword_ptr(r8 + 576), rax).unwrap();
        a.mov(qword_ptr(r8 + 584), rcx).unwrap();
        a.mov(qword_ptr(r8 + 592), rdx).unwrap();
        for (i, x) in xmms.into_iter().enumerate() {
            a.movdqu(xmmword_ptr(r8 + 512 + 16 * i as i32), x).unwrap();
        }
        a.fxsave64(ptr(r8)).unwrap();
        a.fninit().unwrap(); // leave the host's x87 clean (empty, TOP = 0)
        a.ret().unwrap();
        let code = a.assemble(0).unwrap();
        let mut map = MmapMut::map_anon(4096).unwrap();
        map[..code.len()].copy_from_slice(&code);
        let map = map.make_exec().unwrap();
        // SAFETY: the mapping holds a complete System V function built just above: it reads
        // and writes only the frame (rdi, kept in r8) and the memory buffer (rsi, also in rdi)
        // where the instruction's operand lives, clobbers only caller-saved state (r8, rax,
        // rcx, rdx, rdi, xmm0-15, status flags, x87 state which it reinitialises) and
        // returns. The mapping lives as long as `Native`.
        let f = unsafe {
            core::mem::transmute::<*const u8, extern "sysv64" fn(*mut Frame, *mut u8)>(map.as_ptr())
        };
        Native { _map: map, f }
    }

    fn run(&self, frame: &mut Frame, mem: &mut Mem, off: usize) {
        assert!(off + 16 <= MEM_LEN);
        (self.f)(frame, mem.0[off..].as_mut_ptr());
    }
}

/// Run the instruction in the interpreter with the same inputs. Upper YMM halves are seeded
/// with `upper` and must come back unchanged.
fn emulate(m: &mut TestMachine, frame: &mut Frame, mem: &mut Mem, off: usize, upper: u64) {
    let st = &mut m.cpu.state;
    for i in 0..4 {
        let v = frame.xmm[i];
        st.ymm[i] = [v as u64, (v >> 64) as u64, upper, !upper];
    }
    st.gpr[reg::RAX] = frame.rax;
    st.gpr[reg::RCX] = frame.rcx;
    st.gpr[reg::RDX] = frame.rdx;
    st.gpr[reg::RSI] = DATA_BASE + off as u64;
    st.gpr[reg::RDI] = DATA_BASE + off as u64;
    st.rflags = (st.rflags & !STATUS) | (frame.rflags & STATUS);
    let fx = &frame.fx;
    st.x87.fcw = u16::from_le_bytes([fx[0], fx[1]]);
    st.x87.fsw = u16::from_le_bytes([fx[2], fx[3]]);
    st.x87.ftw = fx[4];
    let top = (st.x87.fsw >> 11) as usize & 7;
    for j in 0..8 {
        let r = &mut st.x87.regs[(top + j) & 7];
        *r = [0; 16];
        r[..10].copy_from_slice(&fx[32 + 16 * j..42 + 16 * j]);
    }
    st.rip = CODE_BASE;
    m.load(DATA_BASE, &mem.0);
    let e = m.run(1);
    assert_eq!(e.reason, ExitReason::Budget, "interpreter stopped: {e:?}");
    let st = &m.cpu.state;
    for i in 0..4 {
        frame.xmm[i] = get_xmm(st, i);
        assert_eq!(
            st.ymm[i][2..],
            [upper, !upper],
            "upper YMM half of xmm{i} changed"
        );
    }
    frame.rax = st.gpr[reg::RAX];
    frame.rcx = st.gpr[reg::RCX];
    frame.rdx = st.gpr[reg::RDX];
    frame.rflags = st.rflags;
    let fx = &mut frame.fx;
    fx[0..2].copy_from_slice(&st.x87.fcw.to_le_bytes());
    fx[2..4].copy_from_slice(&st.x87.fsw.to_le_bytes());
    fx[4] = st.x87.ftw;
    let top = (st.x87.fsw >> 11) as usize & 7;
    for j in 0..8 {
        fx[32 + 16 * j..42 + 16 * j].copy_from_slice(&st.x87.regs[(top + j) & 7][..10]);
    }
    m.ram.read_phys(DATA_BASE, &mut mem.0).unwrap();
}

/// Forms whose general-purpose register operand is 64-bit (REX.W).
fn wide_gpr(code: Code) -> bool {
    matches!(
        code,
        Code::Pextrb_r64m8_xmm_imm8
            | Code::Pextrw_r64m16_xmm_imm8
            | Code::Pextrq_rm64_xmm_imm8
            | Code::Pinsrb_xmm_r64m8_imm8
            | Code::Pinsrq_xmm_rm64_imm8
            | Code::Movq_mm_rm64
            | Code::Movq_rm64_mm
            | Code::Pextrw_r64_mm_imm8
            | Code::Pinsrw_mm_r64m16_imm8
            | Code::Pmovmskb_r64_mm
            | Code::Crc32_r64_rm8
            | Code::Crc32_r64_rm64
    )
}

/// The instruction variants of a form: (instruction, has a memory operand).
fn variants(code: Code, shape: Shape) -> Vec<(Instruction, bool)> {
    use Register::*;
    let mem = MemoryOperand::with_base(RSI);
    let (ga, gc) = if wide_gpr(code) {
        (RAX, RCX)
    } else {
        (EAX, ECX)
    };
    let r2 = |a: Register, b: Register| (Instruction::with2(code, a, b).unwrap(), false);
    let m2 = |a: Register| (Instruction::with2(code, a, mem).unwrap(), true);
    let s2 = |b: Register| (Instruction::with2(code, mem, b).unwrap(), true);
    let r3 = |a: Register, b: Register, i: u32| (Instruction::with3(code, a, b, i).unwrap(), false);
    let m3 = |a: Register, i: u32| (Instruction::with3(code, a, mem, i).unwrap(), true);
    let s3 = |b: Register, i: u32| (Instruction::with3(code, mem, b, i).unwrap(), true);
    let mut v = Vec::new();
    match shape {
        XmmRm(_) => v.extend([r2(XMM0, XMM1), r2(XMM0, XMM0), r2(XMM2, XMM3), m2(XMM0)]),
        XmmRmImm => (0..=255).for_each(|i| v.extend([r3(XMM0, XMM1, i), m3(XMM0, i)])),
        XmmMem => v.push(m2(XMM0)),
        GprmXmmImm => (0..=255).for_each(|i| v.extend([r3(ga, XMM1, i), s3(XMM1, i)])),
        XmmGprmImm => (0..=255).for_each(|i| v.extend([r3(XMM0, gc, i), m3(XMM0, i)])),
        Str => {
            (0..=255).for_each(|i| v.extend([r3(XMM1, XMM2, i), r3(XMM0, XMM1, i), m3(XMM1, i)]))
        }
        Crc => {
            let (d, srcs): (Register, &[Register]) = match code {
                Code::Crc32_r32_rm8 => (EAX, &[CL, CH, AL]),
                Code::Crc32_r64_rm8 => (RAX, &[CL, DL]),
                Code::Crc32_r32_rm16 => (EAX, &[CX]),
                Code::Crc32_r32_rm32 => (EAX, &[ECX, EAX]),
                _ => (RAX, &[RCX, RAX]),
            };
            v.extend(srcs.iter().map(|&s| r2(d, s)));
            v.push(m2(d));
        }
        MmRm => v.extend([r2(MM0, MM1), r2(MM0, MM0), r2(MM2, MM3), m2(MM0)]),
        MmRmImm => (0..=255).for_each(|i| v.extend([r3(MM0, MM1, i), m3(MM0, i)])),
        MmImm => (0..=255).for_each(|i| v.push((Instruction::with2(code, MM0, i).unwrap(), false))),
        MmGprm => v.extend([r2(MM0, gc), m2(MM0)]),
        GprmMm => v.extend([r2(ga, MM1), s2(MM1)]),
        MmmMm => v.extend([r2(MM0, MM1), s2(MM1)]),
        MemMm => v.push(s2(MM1)),
        GprMmImm => (0..=255).for_each(|i| v.push(r3(ga, MM1, i))),
        MmGprmImm => (0..=255).for_each(|i| v.extend([r3(MM0, gc, i), m3(MM0, i)])),
        GprMm => v.push(r2(ga, MM1)),
        Mask => {
            let ins = if code == Code::Maskmovq_rDI_mm_mm {
                Instruction::with_maskmovq(64, MM0, MM1, Register::None)
            } else {
                Instruction::with_maskmovdqu(64, XMM0, XMM1, Register::None)
            };
            v.push((ins.unwrap(), true));
        }
        XmmMm => v.push(r2(XMM0, MM1)),
        MmXmm => v.push(r2(MM0, XMM1)),
        NoOps => v.push((Instruction::with(code), false)),
    }
    v
}

/// Forms whose source operand is a shift count (inputs then favour small counts).
fn count_source(code: Code) -> bool {
    matches!(
        code,
        Code::Psllw_mm_mmm64
            | Code::Pslld_mm_mmm64
            | Code::Psllq_mm_mmm64
            | Code::Psrlw_mm_mmm64
            | Code::Psrld_mm_mmm64
            | Code::Psrlq_mm_mmm64
            | Code::Psraw_mm_mmm64
            | Code::Psrad_mm_mmm64
    )
}

fn aligned(shape: Shape) -> bool {
    matches!(shape, XmmRm(true) | XmmRmImm | XmmMem)
}

/// Input sets per encoded variant (imm8 forms have 256 variants each).
fn cases(shape: Shape) -> usize {
    match shape {
        Str => 64,
        XmmRmImm | GprmXmmImm | XmmGprmImm | MmRmImm | MmImm | GprMmImm | MmGprmImm => 32,
        _ => 1000,
    }
}

/// Does the host implement the form's CPUID features?
fn host_has(ins: &Instruction) -> bool {
    ins.cpuid_features().iter().all(|f| match f {
        CpuidFeature::SSSE3 => std::arch::is_x86_feature_detected!("ssse3"),
        CpuidFeature::SSE4_1 => std::arch::is_x86_feature_detected!("sse4.1"),
        CpuidFeature::SSE4_2 => std::arch::is_x86_feature_detected!("sse4.2"),
        CpuidFeature::MMX | CpuidFeature::SSE | CpuidFeature::SSE2 => true,
        _ => false,
    })
}

/// A random x87 image: TOP, condition codes, tags and register contents (sometimes with the
/// exponent already all ones), all exceptions masked and none pending.
fn x87_image(rng: &mut Rng, fx: &mut [u8; 512], mm: [u64; 4]) {
    fx.fill(0);
    let top = rng.below(8) as usize;
    let fsw = (top as u16) << 11 | (rng.next() as u16 & 0x4700);
    fx[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    fx[2..4].copy_from_slice(&fsw.to_le_bytes());
    fx[4] = rng.next() as u8;
    fx[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    for phys in 0..8 {
        let j = (phys + 8 - top) & 7;
        let sig = mm.get(phys).copied().unwrap_or_else(|| rng.next());
        let exp = if rng.below(3) == 0 {
            0xffff
        } else {
            rng.next() as u16
        };
        fx[32 + 16 * j..40 + 16 * j].copy_from_slice(&sig.to_le_bytes());
        fx[40 + 16 * j..42 + 16 * j].copy_from_slice(&exp.to_le_bytes());
    }
}

#[test]
fn ssse3_sse4_mmx_forms_match_the_host_cpu() {
    if !crate::ops::native::host_is_intel() {
        eprintln!("not an Intel host: native comparison skipped");
        return;
    }
    let mut rng = Rng(0x5eed_55e4_0c0d_e001);
    let mut m = TestMachine::new();
    let mut mismatches = Vec::new();
    let mut runs = 0u64;
    let mut skipped = 0;
    // PCMPxSTRx outcomes on the host: cases, then how often CF, ZF, SF, OF were set.
    let mut str_cases = 0u64;
    let mut str_flags = [0u64; 4];
    for &(code, shape) in FORMS {
        for (ins, uses_mem) in variants(code, shape) {
            if !host_has(&ins) {
                skipped += 1;
                continue;
            }
            let mut enc = Encoder::new(64);
            enc.encode(&ins, CODE_BASE).unwrap();
            let bytes = enc.take_buffer();
            let mut dec = iced_x86::Decoder::with_ip(64, &bytes, CODE_BASE, 0);
            assert_eq!(dec.decode().code(), code);
            let native = Native::new(&bytes);
            m.load(CODE_BASE, &bytes);
            for _ in 0..cases(shape) {
                let (x, len_a, len_b) = if shape == Str {
                    let a = rng.string();
                    let b = rng.related_string(a);
                    ([rng.string(), a, b, rng.v128()], rng.length(), rng.length())
                } else {
                    let a = rng.v128();
                    let b = if count_source(code) {
                        rng.count()
                    } else {
                        rng.related(a)
                    };
                    let c = rng.related(a);
                    ([a, b, c, rng.related(c)], rng.next(), rng.next())
                };
                let mut frame = Frame {
                    fx: [0; 512],
                    xmm: x,
                    rax: len_a,
                    rcx: rng.next(),
                    rdx: len_b,
                    rflags: (rng.next() & STATUS) | FIXED1 | IF,
                };
                let mm = [x[0] as u64, x[1] as u64, x[2] as u64, x[3] as u64];
                x87_image(&mut rng, &mut frame.fx, mm);
                let mut mem = Mem([0; MEM_LEN]);
                for c in mem.0.chunks_mut(16) {
                    c.copy_from_slice(&rng.v128().to_le_bytes());
                }
                let off = if aligned(shape) {
                    16 * rng.below(3) as usize
                } else {
                    rng.below(33) as usize
                };
                if uses_mem {
                    // The memory operand gets the same kind of value as the register source.
                    let src = if shape == Str { x[2] } else { x[1] };
                    mem.0[off..off + 16].copy_from_slice(&src.to_le_bytes());
                }
                let (mut nf, mut nm) = (frame, mem);
                native.run(&mut nf, &mut nm, off);
                let (mut ef, mut em) = (frame, mem);
                emulate(&mut m, &mut ef, &mut em, off, rng.next());
                runs += 1;
                if shape == Str {
                    str_cases += 1;
                    for (n, f) in str_flags.iter_mut().zip([CF, ZF, SF, OF]) {
                        *n += (nf.rflags & f != 0) as u64;
                    }
                }
                let (no, eo) = (out_of(&nf, &nm), out_of(&ef, &em));
                if no != eo && mismatches.len() < 10 {
                    mismatches.push(format!(
                        "{ins} (off {off}): input xmm {:x?} rax {:#x} rcx {:#x} rdx {:#x} \
                         flags {:#x}\n input {:x?}\n native {no:x?}\n interp {eo:x?}",
                        frame.xmm,
                        frame.rax,
                        frame.rcx,
                        frame.rdx,
                        frame.rflags,
                        out_of(&frame, &mem)
                    ));
                }
            }
        }
    }
    eprintln!("{runs} cases compared with the host CPU ({skipped} variants skipped)");
    eprintln!("PCMPxSTRx: {str_cases} cases, CF/ZF/SF/OF set in {str_flags:?}");
    // The string inputs must reach every flag outcome often (neither always nor never).
    for n in str_flags {
        assert!(
            n > str_cases / 8 && n < str_cases * 7 / 8,
            "{str_flags:?} of {str_cases}"
        );
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(runs > 1_000_000, "only {runs} cases ran");
}

#[test]
fn every_listed_form_is_claimed_by_this_slice() {
    use crate::ops::{mmx, pcmpstr, sse41, sse42, ssse3, x87_ctl};
    for &(code, shape) in FORMS {
        for (ins, _) in variants(code, shape) {
            assert!(
                ssse3::lookup(&ins)
                    .or_else(|| sse41::lookup(&ins))
                    .or_else(|| sse42::lookup(&ins))
                    .or_else(|| pcmpstr::lookup(&ins))
                    .or_else(|| mmx::lookup(&ins))
                    .or_else(|| x87_ctl::lookup(&ins)) // EMMS belongs to the x87 family
                    .is_some(),
                "{code:?} not claimed"
            );
        }
    }
    // VEX forms, the float SSE4.1 forms and the SSE2 PEXTRW/PINSRW belong to other families.
    for code in [
        Code::VEX_Vpshufb_xmm_xmm_xmmm128,
        Code::VEX_Vpcmpestri_xmm_xmmm128_imm8,
        Code::VEX_Vptest_xmm_xmmm128,
        Code::VEX_Vpabsb_xmm_xmmm128,
        Code::Roundps_xmm_xmmm128_imm8,
        Code::Dpps_xmm_xmmm128_imm8,
        Code::Blendps_xmm_xmmm128_imm8,
        Code::Blendvps_xmm_xmmm128,
        Code::Insertps_xmm_xmmm32_imm8,
        Code::Extractps_rm32_xmm_imm8,
        Code::Pextrw_r32_xmm_imm8,
        Code::Pinsrw_xmm_r32m16_imm8,
        Code::Paddb_xmm_xmmm128,
    ] {
        let mut ins = Instruction::default();
        ins.set_code(code);
        assert!(ssse3::lookup(&ins).is_none(), "{code:?}");
        assert!(sse41::lookup(&ins).is_none(), "{code:?}");
        assert!(sse42::lookup(&ins).is_none(), "{code:?}");
        assert!(pcmpstr::lookup(&ins).is_none(), "{code:?}");
        assert!(mmx::lookup(&ins).is_none(), "{code:?}");
    }
}
