//! Differential test of the legacy SSE/SSE2 families against the host CPU: every covered
//! instruction form (register and memory operands, every imm8 for the shuffles and shifts) runs
//! natively and in the interpreter over deterministic pseudo-random inputs (xorshift, fixed
//! seed), and registers and memory must agree bit for bit.
//!
//! The instruction's bytes are encoded once with iced and used by both sides: natively inside
//! a small generated function (load registers from a frame, run, store them back, return),
//! in the interpreter as a one-instruction run on a [`TestMachine`].

use crate::cpu::ExitReason;
use crate::ops::sse_common::get_xmm;
use crate::state::reg;
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;
use iced_x86::{Code, Encoder, Instruction, MemoryOperand, Register};
use memmap2::{Mmap, MmapMut};

/// Register and memory image exchanged with the native code. Offsets are fixed: xmm0..3 at
/// 0..64, rax at 64, rcx at 72. The memory operand lives in a separate 16-aligned buffer.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    xmm: [u128; 4],
    rax: u64,
    rcx: u64,
}

#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mem([u8; MEM_LEN]);

const MEM_LEN: usize = 64;

/// How the operands of a form are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `op xmm0, xmm1` and `op xmm0, [rsi]`; the bool says whether m128 must be aligned.
    XmmRm(bool),
    /// `op xmm0, xmm1, imm8` and `op xmm0, [rsi], imm8` (aligned m128) for every imm8.
    XmmRmImm,
    /// `op xmm0, imm8` for every imm8.
    XmmImm,
    /// `op xmm0, gpr(rcx)` and `op xmm0, [rsi]`.
    XmmGpr,
    /// `op gpr(rax), xmm1` and `op [rsi], xmm1`.
    GprXmm,
    /// `op gpr(rax), xmm1` only.
    GprXmmReg,
    /// `op gpr(rax), xmm1, imm8` for every imm8.
    GprXmmImm,
    /// `op xmm0, gpr(rcx), imm8` and `op xmm0, [rsi], imm8` for every imm8.
    XmmGprImm,
    /// `op xmm0, [rsi]` only.
    XmmMem,
    /// `op [rsi], xmm1` only; the bool says whether it must be aligned.
    MemXmm(bool),
    /// `op xmm0, xmm1` or `op [rsi], xmm1` (store forms with a register-or-memory destination).
    XmmmXmm(bool),
    /// `op xmm0, xmm1` only.
    XmmXmm,
    /// `op [rsi], gpr(rcx)`.
    MemGpr,
}

use Shape::*;

/// Every form the SSE families claim, with its operand shape.
const FORMS: &[(Code, Shape)] = &[
    // sse_int
    (Code::Paddb_xmm_xmmm128, XmmRm(true)),
    (Code::Paddw_xmm_xmmm128, XmmRm(true)),
    (Code::Paddd_xmm_xmmm128, XmmRm(true)),
    (Code::Paddq_xmm_xmmm128, XmmRm(true)),
    (Code::Psubb_xmm_xmmm128, XmmRm(true)),
    (Code::Psubw_xmm_xmmm128, XmmRm(true)),
    (Code::Psubd_xmm_xmmm128, XmmRm(true)),
    (Code::Psubq_xmm_xmmm128, XmmRm(true)),
    (Code::Paddusb_xmm_xmmm128, XmmRm(true)),
    (Code::Paddusw_xmm_xmmm128, XmmRm(true)),
    (Code::Psubusb_xmm_xmmm128, XmmRm(true)),
    (Code::Psubusw_xmm_xmmm128, XmmRm(true)),
    (Code::Paddsb_xmm_xmmm128, XmmRm(true)),
    (Code::Paddsw_xmm_xmmm128, XmmRm(true)),
    (Code::Psubsb_xmm_xmmm128, XmmRm(true)),
    (Code::Psubsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpeqb_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpeqw_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpeqd_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpgtb_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpgtw_xmm_xmmm128, XmmRm(true)),
    (Code::Pcmpgtd_xmm_xmmm128, XmmRm(true)),
    (Code::Pminub_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxub_xmm_xmmm128, XmmRm(true)),
    (Code::Pminsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaxsw_xmm_xmmm128, XmmRm(true)),
    (Code::Pavgb_xmm_xmmm128, XmmRm(true)),
    (Code::Pavgw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmullw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmulhw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmulhuw_xmm_xmmm128, XmmRm(true)),
    (Code::Pmuludq_xmm_xmmm128, XmmRm(true)),
    (Code::Pmaddwd_xmm_xmmm128, XmmRm(true)),
    (Code::Psadbw_xmm_xmmm128, XmmRm(true)),
    (Code::Pand_xmm_xmmm128, XmmRm(true)),
    (Code::Pandn_xmm_xmmm128, XmmRm(true)),
    (Code::Por_xmm_xmmm128, XmmRm(true)),
    (Code::Pxor_xmm_xmmm128, XmmRm(true)),
    (Code::Andps_xmm_xmmm128, XmmRm(true)),
    (Code::Andnps_xmm_xmmm128, XmmRm(true)),
    (Code::Orps_xmm_xmmm128, XmmRm(true)),
    (Code::Xorps_xmm_xmmm128, XmmRm(true)),
    (Code::Andpd_xmm_xmmm128, XmmRm(true)),
    (Code::Andnpd_xmm_xmmm128, XmmRm(true)),
    (Code::Orpd_xmm_xmmm128, XmmRm(true)),
    (Code::Xorpd_xmm_xmmm128, XmmRm(true)),
    // sse_shuf
    (Code::Punpcklbw_xmm_xmmm128, XmmRm(true)),
    (Code::Punpcklwd_xmm_xmmm128, XmmRm(true)),
    (Code::Punpckldq_xmm_xmmm128, XmmRm(true)),
    (Code::Punpcklqdq_xmm_xmmm128, XmmRm(true)),
    (Code::Punpckhbw_xmm_xmmm128, XmmRm(true)),
    (Code::Punpckhwd_xmm_xmmm128, XmmRm(true)),
    (Code::Punpckhdq_xmm_xmmm128, XmmRm(true)),
    (Code::Punpckhqdq_xmm_xmmm128, XmmRm(true)),
    (Code::Unpcklps_xmm_xmmm128, XmmRm(true)),
    (Code::Unpckhps_xmm_xmmm128, XmmRm(true)),
    (Code::Unpcklpd_xmm_xmmm128, XmmRm(true)),
    (Code::Unpckhpd_xmm_xmmm128, XmmRm(true)),
    (Code::Packsswb_xmm_xmmm128, XmmRm(true)),
    (Code::Packssdw_xmm_xmmm128, XmmRm(true)),
    (Code::Packuswb_xmm_xmmm128, XmmRm(true)),
    (Code::Psllw_xmm_xmmm128, XmmRm(true)),
    (Code::Pslld_xmm_xmmm128, XmmRm(true)),
    (Code::Psllq_xmm_xmmm128, XmmRm(true)),
    (Code::Psrlw_xmm_xmmm128, XmmRm(true)),
    (Code::Psrld_xmm_xmmm128, XmmRm(true)),
    (Code::Psrlq_xmm_xmmm128, XmmRm(true)),
    (Code::Psraw_xmm_xmmm128, XmmRm(true)),
    (Code::Psrad_xmm_xmmm128, XmmRm(true)),
    (Code::Pshufd_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Pshuflw_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Pshufhw_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Shufps_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Shufpd_xmm_xmmm128_imm8, XmmRmImm),
    (Code::Psllw_xmm_imm8, XmmImm),
    (Code::Pslld_xmm_imm8, XmmImm),
    (Code::Psllq_xmm_imm8, XmmImm),
    (Code::Psrlw_xmm_imm8, XmmImm),
    (Code::Psrld_xmm_imm8, XmmImm),
    (Code::Psrlq_xmm_imm8, XmmImm),
    (Code::Psraw_xmm_imm8, XmmImm),
    (Code::Psrad_xmm_imm8, XmmImm),
    (Code::Pslldq_xmm_imm8, XmmImm),
    (Code::Psrldq_xmm_imm8, XmmImm),
    (Code::Pextrw_r32_xmm_imm8, GprXmmImm),
    (Code::Pextrw_r64_xmm_imm8, GprXmmImm),
    (Code::Pinsrw_xmm_r32m16_imm8, XmmGprImm),
    (Code::Pinsrw_xmm_r64m16_imm8, XmmGprImm),
    (Code::Pmovmskb_r32_xmm, GprXmmReg),
    (Code::Pmovmskb_r64_xmm, GprXmmReg),
    (Code::Movmskps_r32_xmm, GprXmmReg),
    (Code::Movmskps_r64_xmm, GprXmmReg),
    (Code::Movmskpd_r32_xmm, GprXmmReg),
    (Code::Movmskpd_r64_xmm, GprXmmReg),
    // sse_mov
    (Code::Movd_xmm_rm32, XmmGpr),
    (Code::Movq_xmm_rm64, XmmGpr),
    (Code::Movd_rm32_xmm, GprXmm),
    (Code::Movq_rm64_xmm, GprXmm),
    (Code::Movq_xmm_xmmm64, XmmRm(false)),
    (Code::Movq_xmmm64_xmm, XmmmXmm(false)),
    (Code::Movdqa_xmm_xmmm128, XmmRm(true)),
    (Code::Movaps_xmm_xmmm128, XmmRm(true)),
    (Code::Movapd_xmm_xmmm128, XmmRm(true)),
    (Code::Movdqu_xmm_xmmm128, XmmRm(false)),
    (Code::Movups_xmm_xmmm128, XmmRm(false)),
    (Code::Movupd_xmm_xmmm128, XmmRm(false)),
    (Code::Movdqa_xmmm128_xmm, XmmmXmm(true)),
    (Code::Movaps_xmmm128_xmm, XmmmXmm(true)),
    (Code::Movapd_xmmm128_xmm, XmmmXmm(true)),
    (Code::Movdqu_xmmm128_xmm, XmmmXmm(false)),
    (Code::Movups_xmmm128_xmm, XmmmXmm(false)),
    (Code::Movupd_xmmm128_xmm, XmmmXmm(false)),
    (Code::Movntdq_m128_xmm, MemXmm(true)),
    (Code::Movntps_m128_xmm, MemXmm(true)),
    (Code::Movntpd_m128_xmm, MemXmm(true)),
    (Code::Movnti_m32_r32, MemGpr),
    (Code::Movnti_m64_r64, MemGpr),
    (Code::Movss_xmm_xmmm32, XmmRm(false)),
    (Code::Movss_xmmm32_xmm, XmmmXmm(false)),
    (Code::Movsd_xmm_xmmm64, XmmRm(false)),
    (Code::Movsd_xmmm64_xmm, XmmmXmm(false)),
    (Code::Movhps_xmm_m64, XmmMem),
    (Code::Movhpd_xmm_m64, XmmMem),
    (Code::Movlps_xmm_m64, XmmMem),
    (Code::Movlpd_xmm_m64, XmmMem),
    (Code::Movhps_m64_xmm, MemXmm(false)),
    (Code::Movhpd_m64_xmm, MemXmm(false)),
    (Code::Movlps_m64_xmm, MemXmm(false)),
    (Code::Movlpd_m64_xmm, MemXmm(false)),
    (Code::Movhlps_xmm_xmm, XmmXmm),
    (Code::Movlhps_xmm_xmm, XmmXmm),
];

/// Fixed-seed xorshift64.
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

    /// A 128-bit value, often built from lanes at the edges of the integer ranges.
    fn v128(&mut self) -> u128 {
        const EDGE8: [u8; 8] = [0, 1, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x40];
        const EDGE16: [u16; 8] = [0, 1, 0x7fff, 0x8000, 0xffff, 0x00ff, 0xff80, 0x0100];
        match self.next() % 5 {
            0 => {
                let mut b = [0u8; 16];
                for x in &mut b {
                    *x = EDGE8[(self.next() % 8) as usize];
                }
                u128::from_le_bytes(b)
            }
            1 => {
                let mut v = 0u128;
                for i in 0..8 {
                    v |= (EDGE16[(self.next() % 8) as usize] as u128) << (16 * i);
                }
                v
            }
            2 => (self.next() as u128 & 0x0f0f_0f0f_0f0f_0f0f) * 0x1_0000_0000_0000_0001,
            _ => (self.next() as u128) << 64 | self.next() as u128,
        }
    }

    /// A second operand: often equal to `a` in some lanes.
    fn related(&mut self, a: u128) -> u128 {
        let b = self.v128();
        match self.next() % 4 {
            0 => {
                let m = self.v128();
                (a & m) | (b & !m)
            }
            1 => a,
            _ => b,
        }
    }

    /// A shift count in bits 63:0 (upper bits random, they are ignored).
    fn count(&mut self) -> u128 {
        let lo = match self.next() % 4 {
            0 => self.next(),
            1 => self.next() % 8 + (1 << 32),
            _ => self.next() % 70,
        };
        (self.next() as u128) << 64 | lo as u128
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
        for (i, x) in [xmm0, xmm1, xmm2, xmm3].into_iter().enumerate() {
            a.movdqu(x, xmmword_ptr(rdi + 16 * i as i32)).unwrap();
        }
        a.mov(rax, qword_ptr(rdi + 64)).unwrap();
        a.mov(rcx, qword_ptr(rdi + 72)).unwrap();
        a.db(insn).unwrap();
        for (i, x) in [xmm0, xmm1, xmm2, xmm3].into_iter().enumerate() {
            a.movdqu(xmmword_ptr(rdi + 16 * i as i32), x).unwrap();
        }
        a.mov(qword_ptr(rdi + 64), rax).unwrap();
        a.mov(qword_ptr(rdi + 72), rcx).unwrap();
        a.ret().unwrap();
        let code = a.assemble(0).unwrap();
        let mut map = MmapMut::map_anon(4096).unwrap();
        map[..code.len()].copy_from_slice(&code);
        let map = map.make_exec().unwrap();
        // SAFETY: the mapping holds a complete System V function built just above: it reads
        // and writes only the frame (rdi) and the memory buffer (rsi) with the instruction's
        // operand, clobbers only caller-saved registers (xmm0-3, rax, rcx) and returns. The
        // mapping lives as long as `Native`.
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

/// Run the instruction in the interpreter with the same inputs; upper YMM halves are seeded
/// with `upper` and must come back unchanged.
fn emulate(m: &mut TestMachine, frame: &mut Frame, mem: &mut Mem, off: usize, upper: u64) {
    let st = &mut m.cpu.state;
    for i in 0..4 {
        let v = frame.xmm[i];
        st.ymm[i] = [v as u64, (v >> 64) as u64, upper, !upper];
    }
    st.gpr[reg::RAX] = frame.rax;
    st.gpr[reg::RCX] = frame.rcx;
    st.gpr[reg::RSI] = DATA_BASE + off as u64;
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
    m.ram.read_phys(DATA_BASE, &mut mem.0).unwrap();
}

/// The instruction variants of a form: (instruction, has a memory operand).
fn variants(code: Code, shape: Shape) -> Vec<(Instruction, bool)> {
    let mem = MemoryOperand::with_base(Register::RSI);
    let x0 = Register::XMM0;
    let x1 = Register::XMM1;
    let (ga, gc) = if wide_gpr(code) {
        (Register::RAX, Register::RCX)
    } else {
        (Register::EAX, Register::ECX)
    };
    let w2r = |a, b| Instruction::with2(code, a, b).unwrap();
    let imms = 0..=255u32;
    let mut v = Vec::new();
    match shape {
        XmmRm(_) => {
            v.push((w2r(x0, x1), false));
            v.push((w2r(x0, x0), false));
            v.push((Instruction::with2(code, x0, mem).unwrap(), true));
        }
        XmmRmImm => {
            for i in imms {
                v.push((Instruction::with3(code, x0, x1, i).unwrap(), false));
                v.push((Instruction::with3(code, x0, mem, i).unwrap(), true));
            }
        }
        XmmImm => {
            for i in imms {
                v.push((Instruction::with2(code, x0, i).unwrap(), false));
            }
        }
        XmmGpr => {
            v.push((w2r(x0, gc), false));
            v.push((Instruction::with2(code, x0, mem).unwrap(), true));
        }
        GprXmm => {
            v.push((w2r(ga, x1), false));
            v.push((Instruction::with2(code, mem, x1).unwrap(), true));
        }
        GprXmmReg => v.push((w2r(ga, x1), false)),
        GprXmmImm => {
            for i in imms {
                v.push((Instruction::with3(code, ga, x1, i).unwrap(), false));
            }
        }
        XmmGprImm => {
            for i in imms {
                v.push((Instruction::with3(code, x0, gc, i).unwrap(), false));
                v.push((Instruction::with3(code, x0, mem, i).unwrap(), true));
            }
        }
        XmmMem => v.push((Instruction::with2(code, x0, mem).unwrap(), true)),
        MemXmm(_) => v.push((Instruction::with2(code, mem, x1).unwrap(), true)),
        XmmmXmm(_) => {
            v.push((w2r(x0, x1), false));
            v.push((Instruction::with2(code, mem, x1).unwrap(), true));
        }
        XmmXmm => {
            v.push((w2r(x0, x1), false));
            v.push((w2r(x0, x0), false));
        }
        MemGpr => v.push((Instruction::with2(code, mem, gc).unwrap(), true)),
    }
    v
}

/// Forms whose general-purpose register operand is 64-bit (REX.W).
fn wide_gpr(code: Code) -> bool {
    matches!(
        code,
        Code::Movq_xmm_rm64
            | Code::Movq_rm64_xmm
            | Code::Movnti_m64_r64
            | Code::Pextrw_r64_xmm_imm8
            | Code::Pinsrw_xmm_r64m16_imm8
            | Code::Pmovmskb_r64_xmm
            | Code::Movmskps_r64_xmm
            | Code::Movmskpd_r64_xmm
    )
}

/// Shifts whose count comes from xmm/m128 (inputs then favour small counts).
fn count_source(code: Code) -> bool {
    matches!(
        code,
        Code::Psllw_xmm_xmmm128
            | Code::Pslld_xmm_xmmm128
            | Code::Psllq_xmm_xmmm128
            | Code::Psrlw_xmm_xmmm128
            | Code::Psrld_xmm_xmmm128
            | Code::Psrlq_xmm_xmmm128
            | Code::Psraw_xmm_xmmm128
            | Code::Psrad_xmm_xmmm128
    )
}

fn aligned(shape: Shape) -> bool {
    matches!(shape, XmmRm(true) | XmmRmImm | MemXmm(true) | XmmmXmm(true))
}

/// Number of input sets per encoded variant (imm8 forms have 256 variants each).
fn cases(shape: Shape) -> usize {
    match shape {
        XmmRmImm | XmmImm | GprXmmImm | XmmGprImm => 24,
        _ => 400,
    }
}

#[test]
fn sse_forms_match_the_host_cpu() {
    let mut rng = Rng(0x5eed_0f55_e2d1_ff01);
    let mut m = TestMachine::new();
    let mut mismatches = Vec::new();
    let mut runs = 0u64;
    for &(code, shape) in FORMS {
        for (ins, uses_mem) in variants(code, shape) {
            let mut enc = Encoder::new(64);
            enc.encode(&ins, CODE_BASE).unwrap();
            let bytes = enc.take_buffer();
            // The interpreter must decode the same form and claim it.
            let mut dec = iced_x86::Decoder::with_ip(64, &bytes, CODE_BASE, 0);
            assert_eq!(dec.decode().code(), code);
            let native = Native::new(&bytes);
            m.load(CODE_BASE, &bytes);
            let count_src = count_source(code);
            for _ in 0..cases(shape) {
                let a = rng.v128();
                let b = if count_src {
                    rng.count()
                } else {
                    rng.related(a)
                };
                let frame = Frame {
                    xmm: [a, b, rng.v128(), rng.v128()],
                    rax: rng.next(),
                    rcx: rng.next(),
                };
                let mut mem = Mem([0; MEM_LEN]);
                for c in mem.0.chunks_mut(16) {
                    c.copy_from_slice(&rng.v128().to_le_bytes());
                }
                let off = if !uses_mem {
                    0
                } else if aligned(shape) {
                    16 * (rng.next() % 3) as usize
                } else {
                    (rng.next() % 33) as usize
                };
                if uses_mem {
                    // Give the memory operand the same kind of value as the register source.
                    mem.0[off..off + 16].copy_from_slice(&b.to_le_bytes());
                }
                let (mut nf, mut nm) = (frame, mem);
                native.run(&mut nf, &mut nm, off);
                let (mut ef, mut em) = (frame, mem);
                emulate(&mut m, &mut ef, &mut em, off, rng.next());
                runs += 1;
                if (nf, nm) != (ef, em) && mismatches.len() < 10 {
                    mismatches.push(format!(
                        "{ins} (off {off}): input {frame:x?}\n mem {:x?}\n native {nf:x?}\n \
                         interp {ef:x?}\n native mem {:x?}\n interp mem {:x?}",
                        mem.0, nm.0, em.0
                    ));
                }
            }
        }
    }
    eprintln!("{runs} cases compared with the host CPU");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(runs > 100_000, "only {runs} cases ran");
}

#[test]
fn every_listed_form_is_claimed_and_mmx_vex_forms_are_not() {
    for &(code, shape) in FORMS {
        for (ins, _) in variants(code, shape) {
            assert!(
                crate::ops::sse_mov::lookup(&ins)
                    .or_else(|| crate::ops::sse_int::lookup(&ins))
                    .or_else(|| crate::ops::sse_shuf::lookup(&ins))
                    .is_some(),
                "{code:?} not claimed"
            );
        }
    }
    for code in [
        Code::Pxor_mm_mmm64,
        Code::Movq_mm_mmm64,
        Code::Movd_mm_rm32,
        Code::Paddb_mm_mmm64,
        Code::VEX_Vpxor_xmm_xmm_xmmm128,
        Code::VEX_Vmovdqu_xmm_xmmm128,
        Code::Movsd_m32_m32,
        Code::Pextrw_r32m16_xmm_imm8,
        Code::Movntdqa_xmm_m128,
    ] {
        let mut ins = Instruction::default();
        ins.set_code(code);
        assert!(crate::ops::sse_mov::lookup(&ins).is_none(), "{code:?}");
        assert!(crate::ops::sse_int::lookup(&ins).is_none(), "{code:?}");
        assert!(crate::ops::sse_shuf::lookup(&ins).is_none(), "{code:?}");
        assert!(crate::ops::sse_common::lookup(&ins).is_none(), "{code:?}");
    }
}
