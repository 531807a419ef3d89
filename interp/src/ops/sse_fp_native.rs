//! Differential test of the SSE floating-point families (sse_fp, sse_cmp, sse_cvt, sse_blend)
//! against the host CPU: every form (register and memory operands, every imm8 for the
//! immediate forms) runs natively with a chosen MXCSR (loaded with LDMXCSR, the host's MXCSR
//! saved before and restored after) and in the interpreter, over deterministic pseudo-random
//! inputs biased to special values. Registers, memory, MXCSR (result and sticky flags) and the
//! status flags must agree bit for bit. Every case cycles through the 4 rounding modes x DAZ x
//! FTZ; exceptions stay masked natively (unmasked behaviour is tested in `sse_fp_tests`).

use crate::cpu::ExitReason;
use crate::ops::sse_common::get_xmm;
use crate::state::{flags, reg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;
use iced_x86::{Code, Encoder, Instruction, MemoryOperand, Register};
use memmap2::{Mmap, MmapMut};

/// Register image exchanged with the native code (offsets are fixed, see [`Native::new`]).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    xmm: [u128; 4],
    rax: u64,
    rcx: u64,
    /// MXCSR in (loaded before the instruction) and out (stored after it).
    mxcsr: u32,
    /// Scratch: the host's MXCSR while the instruction runs.
    host_mxcsr: u32,
    /// RFLAGS in and out (status flags only are compared).
    rflags: u64,
}

#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mem([u8; MEM_LEN]);

const MEM_LEN: usize = 64;

/// Operand shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `op xmm0, xmm1`, `op xmm0, xmm0`, `op xmm0, [rsi]`; bool: m128 must be aligned.
    XmmRm(bool),
    /// As `XmmRm`, with every imm8.
    XmmRmImm(bool),
    /// `op xmm0, ecx|rcx` and `op xmm0, [rsi]` (bool: 64-bit).
    XmmGpr(bool),
    /// `op eax|rax, xmm1` and `op eax|rax, [rsi]` (bool: 64-bit).
    GprXmm(bool),
    /// `op xmm0, [rsi]` (unaligned).
    XmmMem,
    /// `op eax|rax, xmm1, imm8` and `op [rsi], xmm1, imm8` (bool: 64-bit register).
    RmXmmImm(bool),
    /// `op xmm2, xmm1|[rsi]` with the implicit mask XMM0.
    Blendv,
}

use super::sse_fp_inputs::{Kind, Rng};
use Kind::*;
use Shape::*;

/// Every form the four families claim.
const FORMS: &[(Code, Shape, Kind)] = &[
    (Code::Addps_xmm_xmmm128, XmmRm(true), S),
    (Code::Addpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Addss_xmm_xmmm32, XmmRm(false), S),
    (Code::Addsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Subps_xmm_xmmm128, XmmRm(true), S),
    (Code::Subpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Subss_xmm_xmmm32, XmmRm(false), S),
    (Code::Subsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Mulps_xmm_xmmm128, XmmRm(true), S),
    (Code::Mulpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Mulss_xmm_xmmm32, XmmRm(false), S),
    (Code::Mulsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Divps_xmm_xmmm128, XmmRm(true), S),
    (Code::Divpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Divss_xmm_xmmm32, XmmRm(false), S),
    (Code::Divsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Minps_xmm_xmmm128, XmmRm(true), S),
    (Code::Minpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Minss_xmm_xmmm32, XmmRm(false), S),
    (Code::Minsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Maxps_xmm_xmmm128, XmmRm(true), S),
    (Code::Maxpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Maxss_xmm_xmmm32, XmmRm(false), S),
    (Code::Maxsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Sqrtps_xmm_xmmm128, XmmRm(true), S),
    (Code::Sqrtpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Sqrtss_xmm_xmmm32, XmmRm(false), S),
    (Code::Sqrtsd_xmm_xmmm64, XmmRm(false), D),
    (Code::Rcpps_xmm_xmmm128, XmmRm(true), S),
    (Code::Rcpss_xmm_xmmm32, XmmRm(false), S),
    (Code::Rsqrtps_xmm_xmmm128, XmmRm(true), S),
    (Code::Rsqrtss_xmm_xmmm32, XmmRm(false), S),
    (Code::Addsubps_xmm_xmmm128, XmmRm(true), S),
    (Code::Addsubpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Haddps_xmm_xmmm128, XmmRm(true), S),
    (Code::Haddpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Hsubps_xmm_xmmm128, XmmRm(true), S),
    (Code::Hsubpd_xmm_xmmm128, XmmRm(true), D),
    (Code::Roundps_xmm_xmmm128_imm8, XmmRmImm(true), S),
    (Code::Roundpd_xmm_xmmm128_imm8, XmmRmImm(true), D),
    (Code::Roundss_xmm_xmmm32_imm8, XmmRmImm(false), S),
    (Code::Roundsd_xmm_xmmm64_imm8, XmmRmImm(false), D),
    (Code::Dpps_xmm_xmmm128_imm8, XmmRmImm(true), S),
    (Code::Dppd_xmm_xmmm128_imm8, XmmRmImm(true), D),
    // sse_cmp
    (Code::Cmpps_xmm_xmmm128_imm8, XmmRmImm(true), S),
    (Code::Cmppd_xmm_xmmm128_imm8, XmmRmImm(true), D),
    (Code::Cmpss_xmm_xmmm32_imm8, XmmRmImm(false), S),
    (Code::Cmpsd_xmm_xmmm64_imm8, XmmRmImm(false), D),
    (Code::Comiss_xmm_xmmm32, XmmRm(false), S),
    (Code::Comisd_xmm_xmmm64, XmmRm(false), D),
    (Code::Ucomiss_xmm_xmmm32, XmmRm(false), S),
    (Code::Ucomisd_xmm_xmmm64, XmmRm(false), D),
    // sse_cvt
    (Code::Cvtsi2ss_xmm_rm32, XmmGpr(false), S),
    (Code::Cvtsi2ss_xmm_rm64, XmmGpr(true), S),
    (Code::Cvtsi2sd_xmm_rm32, XmmGpr(false), D),
    (Code::Cvtsi2sd_xmm_rm64, XmmGpr(true), D),
    (Code::Cvtss2si_r32_xmmm32, GprXmm(false), S),
    (Code::Cvtss2si_r64_xmmm32, GprXmm(true), S),
    (Code::Cvttss2si_r32_xmmm32, GprXmm(false), S),
    (Code::Cvttss2si_r64_xmmm32, GprXmm(true), S),
    (Code::Cvtsd2si_r32_xmmm64, GprXmm(false), D),
    (Code::Cvtsd2si_r64_xmmm64, GprXmm(true), D),
    (Code::Cvttsd2si_r32_xmmm64, GprXmm(false), D),
    (Code::Cvttsd2si_r64_xmmm64, GprXmm(true), D),
    (Code::Cvtss2sd_xmm_xmmm32, XmmRm(false), S),
    (Code::Cvtsd2ss_xmm_xmmm64, XmmRm(false), D),
    (Code::Cvtps2pd_xmm_xmmm64, XmmRm(false), S),
    (Code::Cvtpd2ps_xmm_xmmm128, XmmRm(true), D),
    (Code::Cvtdq2ps_xmm_xmmm128, XmmRm(true), I),
    (Code::Cvtps2dq_xmm_xmmm128, XmmRm(true), S),
    (Code::Cvttps2dq_xmm_xmmm128, XmmRm(true), S),
    (Code::Cvtdq2pd_xmm_xmmm64, XmmRm(false), I),
    (Code::Cvtpd2dq_xmm_xmmm128, XmmRm(true), D),
    (Code::Cvttpd2dq_xmm_xmmm128, XmmRm(true), D),
    // sse_blend
    (Code::Movsldup_xmm_xmmm128, XmmRm(true), S),
    (Code::Movshdup_xmm_xmmm128, XmmRm(true), S),
    (Code::Movddup_xmm_xmmm64, XmmRm(false), D),
    (Code::Lddqu_xmm_m128, XmmMem, S),
    (Code::Blendps_xmm_xmmm128_imm8, XmmRmImm(true), S),
    (Code::Blendpd_xmm_xmmm128_imm8, XmmRmImm(true), D),
    (Code::Blendvps_xmm_xmmm128, Blendv, S),
    (Code::Blendvpd_xmm_xmmm128, Blendv, D),
    (Code::Insertps_xmm_xmmm32_imm8, XmmRmImm(false), S),
    (Code::Extractps_rm32_xmm_imm8, RmXmmImm(false), S),
    (Code::Extractps_r64m32_xmm_imm8, RmXmmImm(true), S),
];

/// Is the host the reference machine the model-specific behaviour was measured on (GenuineIntel
/// family 6 model 0xA7, as in `docs/undefined-flags.md`)?
fn policy_host() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID is available on every x86-64 CPU and has no side effects (the intrinsic
    // is safe on newer compilers, unsafe on older ones).
    #[allow(unused_unsafe)]
    let l1 = unsafe { __cpuid(1) };
    let vendor = super::native::host_vendor();
    let family = (l1.eax >> 8) & 0xf;
    let model = ((l1.eax >> 4) & 0xf) | ((l1.eax >> 12) & 0xf0);
    &vendor == b"GenuineIntel" && family == 6 && model == 0xa7
}

/// Forms whose results are model-specific (the RCP/RSQRT approximations, the NaN order of
/// DPPS/DPPD): compared with the host only on the policy host.
fn model_specific(code: Code) -> bool {
    matches!(
        code,
        Code::Rcpps_xmm_xmmm128
            | Code::Rcpss_xmm_xmmm32
            | Code::Rsqrtps_xmm_xmmm128
            | Code::Rsqrtss_xmm_xmmm32
            | Code::Dpps_xmm_xmmm128_imm8
            | Code::Dppd_xmm_xmmm128_imm8
    )
}

/// Does the host implement the form's instruction set?
fn host_has(code: Code) -> bool {
    let sse41 = matches!(
        code,
        Code::Roundps_xmm_xmmm128_imm8
            | Code::Roundpd_xmm_xmmm128_imm8
            | Code::Roundss_xmm_xmmm32_imm8
            | Code::Roundsd_xmm_xmmm64_imm8
            | Code::Dpps_xmm_xmmm128_imm8
            | Code::Dppd_xmm_xmmm128_imm8
            | Code::Blendps_xmm_xmmm128_imm8
            | Code::Blendpd_xmm_xmmm128_imm8
            | Code::Blendvps_xmm_xmmm128
            | Code::Blendvpd_xmm_xmmm128
            | Code::Insertps_xmm_xmmm32_imm8
            | Code::Extractps_rm32_xmm_imm8
            | Code::Extractps_r64m32_xmm_imm8
    );
    let sse3 = matches!(
        code,
        Code::Addsubps_xmm_xmmm128
            | Code::Addsubpd_xmm_xmmm128
            | Code::Haddps_xmm_xmmm128
            | Code::Haddpd_xmm_xmmm128
            | Code::Hsubps_xmm_xmmm128
            | Code::Hsubpd_xmm_xmmm128
            | Code::Movsldup_xmm_xmmm128
            | Code::Movshdup_xmm_xmmm128
            | Code::Movddup_xmm_xmmm64
            | Code::Lddqu_xmm_m128
    );
    (!sse41 || std::is_x86_feature_detected!("sse4.1"))
        && (!sse3 || std::is_x86_feature_detected!("sse3"))
}

/// Executable copy of native code built around one instruction.
struct Native {
    _map: Mmap,
    f: extern "sysv64" fn(*mut Frame, *mut u8),
}

impl Native {
    fn new(insn: &[u8]) -> Native {
        let mut a = CodeAssembler::new(64).unwrap();
        let xs = [xmm0, xmm1, xmm2, xmm3];
        for (i, x) in xs.into_iter().enumerate() {
            a.movdqu(x, xmmword_ptr(rdi + 16 * i as i32)).unwrap();
        }
        a.mov(rax, qword_ptr(rdi + 64)).unwrap();
        a.mov(rcx, qword_ptr(rdi + 72)).unwrap();
        a.stmxcsr(dword_ptr(rdi + 84)).unwrap();
        a.push(qword_ptr(rdi + 88)).unwrap();
        a.popfq().unwrap();
        a.ldmxcsr(dword_ptr(rdi + 80)).unwrap();
        a.db(insn).unwrap();
        a.stmxcsr(dword_ptr(rdi + 80)).unwrap();
        a.pushfq().unwrap();
        a.pop(qword_ptr(rdi + 88)).unwrap();
        a.ldmxcsr(dword_ptr(rdi + 84)).unwrap();
        for (i, x) in xs.into_iter().enumerate() {
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
        // and writes only the frame (rdi) and the memory buffer (rsi), clobbers only
        // caller-saved registers (xmm0-3, rax, rcx, status flags), leaves DF/TF clear (the
        // frame's RFLAGS image holds only status bits and bit 1), restores the host's MXCSR
        // before returning (exceptions stay masked: the frame's MXCSR always has all mask
        // bits set), and balances the stack. The mapping lives as long as `Native`.
        let f = unsafe {
            core::mem::transmute::<*const u8, extern "sysv64" fn(*mut Frame, *mut u8)>(map.as_ptr())
        };
        Native { _map: map, f }
    }

    fn run(&self, frame: &mut Frame, mem: &mut Mem, off: usize) {
        assert!(off + 16 <= MEM_LEN);
        assert_eq!(frame.mxcsr & 0xffff_0000, 0);
        assert_eq!(
            frame.mxcsr & 0x1f80,
            0x1f80,
            "natively all exceptions stay masked"
        );
        assert_eq!(frame.rflags & !(flags::STATUS | flags::FIXED1), 0);
        (self.f)(frame, mem.0[off..].as_mut_ptr());
    }
}

/// Run the instruction in the interpreter with the same inputs; the upper YMM halves are
/// seeded with `upper` and must come back unchanged.
fn emulate(m: &mut TestMachine, frame: &mut Frame, mem: &mut Mem, off: usize, upper: u64) {
    let st = &mut m.cpu.state;
    for i in 0..4 {
        let v = frame.xmm[i];
        st.ymm[i] = [v as u64, (v >> 64) as u64, upper, !upper];
    }
    st.gpr[reg::RAX] = frame.rax;
    st.gpr[reg::RCX] = frame.rcx;
    st.gpr[reg::RSI] = DATA_BASE + off as u64;
    st.mxcsr = frame.mxcsr;
    st.rflags = flags::FIXED1 | flags::IF | frame.rflags;
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
            "upper half of ymm{i} changed"
        );
    }
    frame.rax = st.gpr[reg::RAX];
    frame.rcx = st.gpr[reg::RCX];
    frame.mxcsr = st.mxcsr;
    frame.rflags = st.rflags & flags::STATUS;
    m.ram.read_phys(DATA_BASE, &mut mem.0).unwrap();
}

/// The instruction variants of a form: (instruction, has a memory operand).
fn variants(code: Code, shape: Shape) -> Vec<(Instruction, bool)> {
    let mem = MemoryOperand::with_base(Register::RSI);
    let (x0, x1, x2) = (Register::XMM0, Register::XMM1, Register::XMM2);
    let gprs = |wide: bool| {
        if wide {
            (Register::RAX, Register::RCX)
        } else {
            (Register::EAX, Register::ECX)
        }
    };
    let i2 = |a: Register, b: Register| Instruction::with2(code, a, b).unwrap();
    let mut v = Vec::new();
    match shape {
        XmmRm(_) => {
            v.push((i2(x0, x1), false));
            v.push((i2(x0, x0), false));
            v.push((Instruction::with2(code, x0, mem).unwrap(), true));
        }
        XmmRmImm(_) => {
            for i in 0..=255u32 {
                v.push((Instruction::with3(code, x0, x1, i).unwrap(), false));
                v.push((Instruction::with3(code, x0, mem, i).unwrap(), true));
            }
        }
        XmmGpr(w) => {
            v.push((i2(x0, gprs(w).1), false));
            v.push((Instruction::with2(code, x0, mem).unwrap(), true));
        }
        GprXmm(w) => {
            v.push((i2(gprs(w).0, x1), false));
            v.push((Instruction::with2(code, gprs(w).0, mem).unwrap(), true));
        }
        XmmMem => v.push((Instruction::with2(code, x0, mem).unwrap(), true)),
        RmXmmImm(w) => {
            for i in 0..=255u32 {
                v.push((Instruction::with3(code, gprs(w).0, x1, i).unwrap(), false));
                if !w {
                    v.push((Instruction::with3(code, mem, x1, i).unwrap(), true));
                }
            }
        }
        Blendv => {
            v.push((i2(x2, x1), false));
            v.push((Instruction::with2(code, x2, mem).unwrap(), true));
        }
    }
    v
}

fn aligned(shape: Shape) -> bool {
    matches!(shape, XmmRm(true) | XmmRmImm(true) | Blendv)
}

fn cases(shape: Shape, scale: usize) -> usize {
    scale
        * match shape {
            XmmRmImm(_) | RmXmmImm(_) => 32,
            _ => 3000,
        }
}

/// MXCSR for case `n`: the 16 combinations of RC, DAZ and FTZ in turn, all exceptions
/// masked, and now and then some sticky flags already set.
fn mxcsr_for(n: usize, rng: &mut Rng) -> u32 {
    let combo = (n % 16) as u32;
    let rc = combo & 3;
    let daz = (combo >> 2) & 1;
    let ftz = (combo >> 3) & 1;
    let sticky = if rng.below(8) == 0 {
        rng.next() as u32 & 0x3f
    } else {
        0
    };
    0x1f80 | rc << 13 | daz << 6 | ftz << 15 | sticky
}

#[test]
fn sse_fp_forms_match_the_host_cpu() {
    let runs = differential(0x5eed_f10a_7e57_0001, 1);
    assert!(runs > 600_000, "only {runs} cases ran");
}

/// The long run: `LOCKSTEP_FP_SCALE` (default 20) times the cases of the default run, with
/// another seed (`LOCKSTEP_FP_SEED`). `cargo test -p lockstep-interp sse_fp_long -- --ignored`.
#[test]
#[ignore]
fn sse_fp_long() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    differential(
        env("LOCKSTEP_FP_SEED", 0x1234_5678_9abc_def1),
        env("LOCKSTEP_FP_SCALE", 20) as usize,
    );
}

/// Run every form `scale` times the default number of cases; returns the number of cases.
fn differential(seed: u64, scale: usize) -> u64 {
    let mut rng = Rng(seed);
    let mut m = TestMachine::new();
    // How often the host raised each flag (IE DE ZE OE UE PE): the inputs must reach them all.
    let mut raised = [0u64; 6];
    let mut report = Vec::new();
    let mut bad = 0u64;
    let mut runs = 0u64;
    let policy = policy_host();
    let mut skipped = Vec::new();
    for &(code, shape, kind) in FORMS {
        if !host_has(code) || (!policy && model_specific(code)) {
            skipped.push(code);
            continue;
        }
        let mut form_bad = 0u64;
        for (ins, uses_mem) in variants(code, shape) {
            let mut enc = Encoder::new(64);
            enc.encode(&ins, CODE_BASE).unwrap();
            let bytes = enc.take_buffer();
            let mut dec = iced_x86::Decoder::with_ip(64, &bytes, CODE_BASE, 0);
            assert_eq!(dec.decode().code(), code);
            let native = Native::new(&bytes);
            m.load(CODE_BASE, &bytes);
            for n in 0..cases(shape, scale) {
                let a = rng.v128(kind);
                let b = rng.related(a, kind);
                let frame = Frame {
                    xmm: [a, b, rng.v128(kind), rng.v128(kind)],
                    rax: rng.int(),
                    rcx: rng.int(),
                    mxcsr: mxcsr_for(n, &mut rng),
                    host_mxcsr: 0,
                    rflags: rng.next() & flags::STATUS,
                };
                let mut mem = Mem([0; MEM_LEN]);
                for c in mem.0.chunks_mut(16) {
                    c.copy_from_slice(&rng.v128(kind).to_le_bytes());
                }
                let off = if !uses_mem {
                    0
                } else if aligned(shape) {
                    16 * rng.below(3) as usize
                } else {
                    rng.below(33) as usize
                };
                if uses_mem {
                    let src = if matches!(shape, XmmGpr(_)) {
                        rng.int() as u128
                    } else {
                        b
                    };
                    mem.0[off..off + 16].copy_from_slice(&src.to_le_bytes());
                }
                let (mut nf, mut nm) = (frame, mem);
                native.run(&mut nf, &mut nm, off);
                nf.host_mxcsr = 0;
                nf.rflags &= flags::STATUS;
                let (mut ef, mut em) = (frame, mem);
                emulate(&mut m, &mut ef, &mut em, off, rng.next());
                runs += 1;
                for (k, r) in raised.iter_mut().enumerate() {
                    *r += (nf.mxcsr & !frame.mxcsr) as u64 >> k & 1;
                }
                if (nf, nm) != (ef, em) {
                    bad += 1;
                    form_bad += 1;
                    if form_bad <= 3 && report.len() < 60 {
                        report.push(format!(
                            "{ins} (off {off}) mxcsr {:#06x}\n  in     {:x?} rax {:#x} rcx {:#x} rflags {:#x}\n  mem    {:x?}\n  native {:x?} rax {:#x} rcx {:#x} mxcsr {:#06x} rflags {:#x}\n  interp {:x?} rax {:#x} rcx {:#x} mxcsr {:#06x} rflags {:#x}{}",
                            frame.mxcsr, frame.xmm, frame.rax, frame.rcx, frame.rflags,
                            &mem.0[off..off + 16],
                            nf.xmm, nf.rax, nf.rcx, nf.mxcsr, nf.rflags,
                            ef.xmm, ef.rax, ef.rcx, ef.mxcsr, ef.rflags,
                            if nm != em { "\n  memory differs" } else { "" }
                        ));
                    }
                }
            }
        }
        if form_bad > 0 {
            report.push(format!("{code:?}: {form_bad} mismatches"));
        }
    }
    eprintln!(
        "{runs} cases compared with the host CPU, {bad} mismatches; newly raised IE DE ZE OE UE PE: {raised:?}"
    );
    if !skipped.is_empty() {
        eprintln!("skipped (not the policy host, or not on this host): {skipped:?}");
    }
    for (k, &r) in raised.iter().enumerate() {
        assert!(r > runs / 1000, "flag {k} raised only {r} times");
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    runs
}

/// Hand-picked cases at the edges of the rules, each run natively and in the interpreter:
/// (form, dst lane 0, src lane 0, MXCSR).
#[test]
fn boundary_cases_match_the_host_cpu() {
    const C: &[(Code, u64, u64, u32)] = &[
        // (2 - 2^-23) * 2^-127 exactly: tiny with unbounded exponent, rounds to the smallest
        // normal on the denormal grid: UE|PE, and FTZ flushes it.
        (Code::Mulss_xmm_xmmm32, 0x197f_ffff, 0x2680_0000, 0x1f80),
        (Code::Mulss_xmm_xmmm32, 0x197f_ffff, 0x2680_0000, 0x9f80),
        (Code::Mulss_xmm_xmmm32, 0x197f_ffff, 0x2680_0000, 0x5f80),
        (Code::Mulss_xmm_xmmm32, 0x197f_ffff, 0x2680_0000, 0x7f80),
        // Exact denormal result: no flags, but FTZ flushes it with UE|PE.
        (Code::Mulss_xmm_xmmm32, 3, 0x3f80_0000, 0x1f80),
        (Code::Mulss_xmm_xmmm32, 3, 0x3f80_0000, 0x9f80),
        (Code::Addsd_xmm_xmmm64, 1, 1, 0x9f80),
        // Overflow from beyond 2^128 under every rounding mode.
        (Code::Mulss_xmm_xmmm32, 0x7f7f_ffff, 0x4000_0000, 0x1f80),
        (Code::Mulss_xmm_xmmm32, 0x7f7f_ffff, 0xc000_0000, 0x3f80),
        (Code::Mulss_xmm_xmmm32, 0x7f7f_ffff, 0x4000_0000, 0x5f80),
        (Code::Mulss_xmm_xmmm32, 0x7f7f_ffff, 0x4000_0000, 0x7f80),
        // Just above the largest finite: rounds down to it (no OE) except upward.
        (Code::Addss_xmm_xmmm32, 0x7f7f_ffff, 0x7300_0000, 0x1f80),
        (Code::Addss_xmm_xmmm32, 0x7f7f_ffff, 0x7300_0000, 0x5f80),
        (Code::Addss_xmm_xmmm32, 0x7f7f_ffff, 0x7300_0000, 0x7f80),
        (Code::Addss_xmm_xmmm32, 0x7f7f_ffff, 0x7380_0000, 0x1f80),
        // x - x: +0, or -0 rounding down.
        (
            Code::Subsd_xmm_xmmm64,
            0x4000_0000_0000_0000,
            0x4000_0000_0000_0000,
            0x3f80,
        ),
        // Integer conversion edges.
        (Code::Cvttsd2si_r32_xmmm64, 0, 0xc1e0_0000_0010_0000, 0x1f80),
        (Code::Cvtsd2si_r32_xmmm64, 0, 0xc1e0_0000_0010_0000, 0x1f80),
        (Code::Cvtsd2si_r32_xmmm64, 0, 0xc1e0_0000_0010_0000, 0x3f80),
        (Code::Cvttss2si_r64_xmmm32, 0, 0xdf00_0000, 0x1f80),
        (Code::Cvttss2si_r64_xmmm32, 0, 0x5f00_0000, 0x1f80),
        (Code::Cvtss2si_r32_xmmm32, 0, 0x7fc0_0000, 0x1f80),
        // Square roots: of a negative denormal (IE; with DAZ a -0), of the largest double.
        (Code::Sqrtss_xmm_xmmm32, 0, 0x8000_0001, 0x1f80),
        (Code::Sqrtss_xmm_xmmm32, 0, 0x8000_0001, 0x1fc0),
        (Code::Sqrtsd_xmm_xmmm64, 0, 0x7fef_ffff_ffff_ffff, 0x5f80),
        // Double to single at the underflow threshold.
        (Code::Cvtsd2ss_xmm_xmmm64, 0, 0x380f_ffff_f000_0000, 0x1f80),
        (Code::Cvtsd2ss_xmm_xmmm64, 0, 0x380f_ffff_f000_0000, 0x9f80),
        (Code::Cvtsd2ss_xmm_xmmm64, 0, 0x380f_ffff_e000_0000, 0x1f80),
    ];
    let mut m = TestMachine::new();
    let mut report = Vec::new();
    for &(code, a, b, mxcsr) in C {
        let x0 = Register::XMM0;
        let ins = match code {
            Code::Cvttsd2si_r32_xmmm64 | Code::Cvtsd2si_r32_xmmm64 | Code::Cvtss2si_r32_xmmm32 => {
                Instruction::with2(code, Register::EAX, Register::XMM1).unwrap()
            }
            Code::Cvttss2si_r64_xmmm32 => {
                Instruction::with2(code, Register::RAX, Register::XMM1).unwrap()
            }
            _ => Instruction::with2(code, x0, Register::XMM1).unwrap(),
        };
        let mut enc = Encoder::new(64);
        enc.encode(&ins, CODE_BASE).unwrap();
        let bytes = enc.take_buffer();
        let native = Native::new(&bytes);
        m.load(CODE_BASE, &bytes);
        let frame = Frame {
            xmm: [a as u128, b as u128, 0, 0],
            rax: 0,
            rcx: 0,
            mxcsr,
            host_mxcsr: 0,
            rflags: 0,
        };
        let mem = Mem([0; MEM_LEN]);
        let (mut nf, mut nm) = (frame, mem);
        native.run(&mut nf, &mut nm, 0);
        nf.host_mxcsr = 0;
        nf.rflags &= flags::STATUS;
        let (mut ef, mut em) = (frame, mem);
        emulate(&mut m, &mut ef, &mut em, 0, 0);
        if nf != ef {
            report.push(format!(
                "{ins} a {a:#x} b {b:#x} mxcsr {mxcsr:#x}: native {:x} rax {:#x} mxcsr {:#x}, interp {:x} rax {:#x} mxcsr {:#x}",
                nf.xmm[0], nf.rax, nf.mxcsr, ef.xmm[0], ef.rax, ef.mxcsr
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn every_listed_form_is_claimed() {
    for &(code, shape, _) in FORMS {
        for (ins, _) in variants(code, shape) {
            assert!(
                crate::ops::sse_fp::lookup(&ins)
                    .or_else(|| crate::ops::sse_cmp::lookup(&ins))
                    .or_else(|| crate::ops::sse_cvt::lookup(&ins))
                    .or_else(|| crate::ops::sse_blend::lookup(&ins))
                    .is_some(),
                "{code:?} not claimed"
            );
        }
    }
}

/// The host's RCPSS and RSQRTSS of one value.
fn host_rcp_rsqrt(x: u32) -> (u32, u32) {
    use core::arch::x86_64::{_mm_cvtss_f32, _mm_rcp_ss, _mm_rsqrt_ss, _mm_set_ss};
    // SAFETY: SSE is part of the x86-64 baseline; the intrinsics only compute on registers
    // (they are safe on newer compilers, unsafe on older ones).
    #[allow(unused_unsafe)]
    unsafe {
        let v = _mm_set_ss(f32::from_bits(x));
        (
            _mm_cvtss_f32(_mm_rcp_ss(v)).to_bits(),
            _mm_cvtss_f32(_mm_rsqrt_ss(v)).to_bits(),
        )
    }
}

fn check_rcp_rsqrt(inputs: impl Iterator<Item = u32>) -> u64 {
    let mut n = 0;
    for x in inputs {
        let host = host_rcp_rsqrt(x);
        let model = (crate::fp::approx::rcp(x), crate::fp::approx::rsqrt(x));
        assert_eq!(model, host, "rcp/rsqrt of {x:#010x}");
        n += 1;
    }
    n
}

/// Every sign, exponent and table index, with pseudo-random low fraction bits (policy host
/// only: the approximations are model-specific).
#[test]
fn rcp_rsqrt_tables_match_the_host() {
    if !policy_host() {
        eprintln!("not the policy host: RCP/RSQRT approximations not compared");
        return;
    }
    let mut rng = Rng(0xacc0_5eed);
    let n = check_rcp_rsqrt((0..1u32 << 20).map(|i| i << 12 | (rng.next() as u32 & 0xfff)));
    assert_eq!(n, 1 << 20);
}

/// All 2^32 inputs (about a minute): `cargo test -p lockstep-interp rcp_rsqrt_exhaustive --
/// --ignored`.
#[test]
#[ignore]
fn rcp_rsqrt_exhaustive() {
    assert!(policy_host(), "the tables describe the policy host only");
    assert_eq!(check_rcp_rsqrt(0..=u32::MAX), 1 << 32);
}
