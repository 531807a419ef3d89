//! Differential test of the VEX floating-point families (avx_fp, avx_cvt, fma, f16c) against
//! the host CPU: every claimed VEX form (register and memory operands, 128 and 256 bit, every
//! imm8 for the immediate forms) runs natively and in the interpreter with the same YMM
//! registers, memory and MXCSR, cycling through the 4 rounding modes x DAZ x FTZ over inputs
//! biased to special values. All 256 bits of the registers, memory, MXCSR and the status flags
//! must agree. Exceptions stay masked natively (unmasked behaviour: the unit tests).

use super::sse_fp_inputs::{Kind, Rng};
use crate::cpu::ExitReason;
use crate::ops::avx_common::{get_ymm, set_ymm};
use crate::state::{flags, reg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;
use iced_x86::{Code, Encoder, EncodingKind, Instruction, Register};
use memmap2::{Mmap, MmapMut};

#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    ymm: [[u128; 2]; 4],
    rax: u64,
    rcx: u64,
    mxcsr: u32,
    host_mxcsr: u32,
    rflags: u64,
}

const MEM_LEN: usize = 96;

#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mem([u8; MEM_LEN]);

/// Input flavour of a form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum In {
    F(Kind),
    /// Halves (VCVTPH2PS sources).
    Half,
    /// Singles near the half-precision range (VCVTPS2PH sources).
    NearHalf,
}

struct Native {
    _map: Mmap,
    f: extern "sysv64" fn(*mut Frame, *mut u8),
}

impl Native {
    fn new(insn: &[u8]) -> Native {
        let mut a = CodeAssembler::new(64).unwrap();
        let ys = [ymm0, ymm1, ymm2, ymm3];
        for (i, y) in ys.into_iter().enumerate() {
            a.vmovdqu(y, ymmword_ptr(rdi + 32 * i as i32)).unwrap();
        }
        a.mov(rax, qword_ptr(rdi + 128)).unwrap();
        a.mov(rcx, qword_ptr(rdi + 136)).unwrap();
        a.stmxcsr(dword_ptr(rdi + 148)).unwrap();
        a.push(qword_ptr(rdi + 152)).unwrap();
        a.popfq().unwrap();
        a.ldmxcsr(dword_ptr(rdi + 144)).unwrap();
        a.db(insn).unwrap();
        a.stmxcsr(dword_ptr(rdi + 144)).unwrap();
        a.pushfq().unwrap();
        a.pop(qword_ptr(rdi + 152)).unwrap();
        a.ldmxcsr(dword_ptr(rdi + 148)).unwrap();
        for (i, y) in ys.into_iter().enumerate() {
            a.vmovdqu(ymmword_ptr(rdi + 32 * i as i32), y).unwrap();
        }
        a.mov(qword_ptr(rdi + 128), rax).unwrap();
        a.mov(qword_ptr(rdi + 136), rcx).unwrap();
        a.vzeroupper().unwrap();
        a.ret().unwrap();
        let code = a.assemble(0).unwrap();
        let mut map = MmapMut::map_anon(4096).unwrap();
        map[..code.len()].copy_from_slice(&code);
        let map = map.make_exec().unwrap();
        // SAFETY: the mapping holds a complete System V function built just above: it reads
        // and writes only the frame (rdi) and the memory buffer (rsi, at most 32 bytes past
        // the offset the caller checked), clobbers only caller-saved registers (ymm0-3, rax,
        // rcx, status flags), clears the upper YMM state before returning, leaves DF/TF clear,
        // restores the host's MXCSR (exceptions stay masked: the frame's MXCSR always has all
        // mask bits set), and balances the stack. The mapping lives as long as `Native`.
        let f = unsafe {
            core::mem::transmute::<*const u8, extern "sysv64" fn(*mut Frame, *mut u8)>(map.as_ptr())
        };
        Native { _map: map, f }
    }

    fn run(&self, frame: &mut Frame, mem: &mut Mem, off: usize) {
        assert!(off + 32 <= MEM_LEN);
        assert_eq!(
            frame.mxcsr & 0xffff_1f80,
            0x1f80,
            "natively all exceptions stay masked"
        );
        assert_eq!(frame.rflags & !(flags::STATUS | flags::FIXED1), 0);
        (self.f)(frame, mem.0[off..].as_mut_ptr());
    }
}

fn emulate(m: &mut TestMachine, frame: &mut Frame, mem: &mut Mem, off: usize) {
    let st = &mut m.cpu.state;
    for i in 0..4 {
        set_ymm(st, i, frame.ymm[i]);
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
        frame.ymm[i] = get_ymm(st, i);
    }
    frame.rax = st.gpr[reg::RAX];
    frame.rcx = st.gpr[reg::RCX];
    frame.mxcsr = st.mxcsr;
    frame.rflags = st.rflags & flags::STATUS;
    m.ram.read_phys(DATA_BASE, &mut mem.0).unwrap();
}

fn claimed(ins: &Instruction) -> bool {
    crate::ops::avx_fp::lookup(ins)
        .or_else(|| crate::ops::avx_cvt::lookup(ins))
        .or_else(|| crate::ops::fma::lookup(ins))
        .or_else(|| crate::ops::f16c::lookup(ins))
        .is_some()
}

/// Operand tokens of a code's name (`VEX_Vaddps_ymm_ymm_ymmm256` -> `[ymm, ymm, ymmm256]`).
fn tokens(code: Code) -> Vec<String> {
    format!("{code:?}")
        .split('_')
        .skip(2)
        .map(str::to_owned)
        .collect()
}

/// Build the instruction of `code` with operand n a register of index n (XMM/YMM, or
/// eax/rax as a GPR destination and ecx/rcx as a GPR source) or, for the r/m operand of the
/// memory variant, [rsi]; and immediate `imm`.
fn build(code: Code, mem: bool, imm: u32) -> Option<Instruction> {
    use iced_x86::OpKind;
    let mut ins = Instruction::default();
    ins.set_code(code);
    let toks = tokens(code);
    if toks.len() as u32 != ins.op_count() {
        return None;
    }
    let mut has_mem = false;
    for (n, t) in toks.iter().enumerate() {
        let n = n as u32;
        let is_rm = t.starts_with("xmmm")
            || t.starts_with("ymmm")
            || t.starts_with("rm")
            || t.contains("m32") && t.starts_with('r');
        if t == "imm8" {
            ins.set_op_kind(n, OpKind::Immediate8);
            ins.set_immediate8(imm as u8);
            continue;
        }
        if is_rm && mem {
            ins.set_op_kind(n, OpKind::Memory);
            ins.set_memory_base(Register::RSI);
            has_mem = true;
            continue;
        }
        let r = if t.starts_with("xmm") {
            Register::try_from(Register::XMM0 as usize + n as usize).ok()?
        } else if t.starts_with("ymm") {
            Register::try_from(Register::YMM0 as usize + n as usize).ok()?
        } else if t == "rm32" {
            Register::ECX
        } else if t == "rm64" {
            Register::RCX
        } else if t.starts_with("r32") {
            Register::EAX
        } else if t.starts_with("r64") {
            Register::RAX
        } else {
            return None;
        };
        ins.set_op_kind(n, OpKind::Register);
        ins.set_op_register(n, r);
    }
    (has_mem == mem).then_some(ins)
}

/// Every VEX form of the four families, with its input flavour.
fn forms() -> Vec<(Code, In)> {
    let mut v = Vec::new();
    for code in Code::values() {
        if code.encoding() != EncodingKind::VEX {
            continue;
        }
        let Some(ins) = build(code, false, 0).or_else(|| build(code, true, 0)) else {
            continue;
        };
        if !claimed(&ins) {
            continue;
        }
        let name = format!("{:?}", code.mnemonic()).to_ascii_lowercase();
        let kind = if name.contains("dq2") {
            In::F(Kind::I)
        } else if name.contains("ph2ps") {
            In::Half
        } else if name.contains("ps2ph") {
            In::NearHalf
        } else if name.ends_with("pd")
            || name.ends_with("sd")
            || name.contains("sd2")
            || name.contains("pd2")
        {
            In::F(Kind::D)
        } else {
            In::F(Kind::S)
        };
        v.push((code, kind));
    }
    v
}

fn half(rng: &mut Rng) -> u16 {
    const E: &[u16] = &[
        0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55, 1, 0x83ff, 0x0400, 0x3c00, 0x7bff,
    ];
    match rng.below(4) {
        0 => E[rng.below(E.len() as u64) as usize],
        1 => (rng.next() as u16) & 0x83ff,
        _ => rng.next() as u16,
    }
}

fn near_half(rng: &mut Rng) -> u32 {
    match rng.below(3) {
        0 => rng.f32(),
        _ => {
            let s = (rng.sign() as u32) << 31;
            let e = 100 + rng.below(46) as u32;
            let m = match rng.below(4) {
                0 => (rng.next() as u32 & 0x7f) << 12 | 0xfff,
                1 => (rng.next() as u32 & 0x3ff) << 13 | 0x1000,
                _ => rng.next() as u32 & 0x7f_ffff,
            };
            s | e << 23 | m
        }
    }
}

fn v128(rng: &mut Rng, k: In) -> u128 {
    match k {
        In::F(k) => rng.v128(k),
        In::Half => (0..8).fold(0, |v, i| v | (half(rng) as u128) << (16 * i)),
        In::NearHalf => (0..4).fold(0, |v, i| v | (near_half(rng) as u128) << (32 * i)),
    }
}

fn related(rng: &mut Rng, a: u128, k: In) -> u128 {
    match k {
        In::F(k) => rng.related(a, k),
        _ => v128(rng, k),
    }
}

fn mxcsr_for(n: usize, rng: &mut Rng) -> u32 {
    let combo = (n % 16) as u32;
    let sticky = if rng.below(8) == 0 {
        rng.next() as u32 & 0x3f
    } else {
        0
    };
    0x1f80 | (combo & 3) << 13 | ((combo >> 2) & 1) << 6 | ((combo >> 3) & 1) << 15 | sticky
}

fn host_ok() -> bool {
    std::is_x86_feature_detected!("avx")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c")
}

/// Model-specific results (RCP/RSQRT approximations, DPPS/DPPD NaN order): compared only on
/// the reference host (family 6 model 0xA7) the tables were measured on.
fn model_specific(code: Code) -> bool {
    matches!(
        code.mnemonic(),
        iced_x86::Mnemonic::Vrcpps
            | iced_x86::Mnemonic::Vrcpss
            | iced_x86::Mnemonic::Vrsqrtps
            | iced_x86::Mnemonic::Vrsqrtss
            | iced_x86::Mnemonic::Vdpps
            | iced_x86::Mnemonic::Vdppd
    )
}

fn policy_host() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID is available on every x86-64 CPU and has no side effects.
    #[allow(unused_unsafe)]
    let l1 = unsafe { __cpuid(1) };
    let family = (l1.eax >> 8) & 0xf;
    let model = ((l1.eax >> 4) & 0xf) | ((l1.eax >> 12) & 0xf0);
    family == 6 && model == 0xa7
}

#[test]
fn avx_fp_forms_match_the_host_cpu() {
    if !host_ok() {
        eprintln!("host lacks AVX/FMA/F16C: not compared");
        return;
    }
    let runs = differential(0xa5f0_0001, 1);
    assert!(runs > 100_000, "only {runs} cases ran");
}

/// `cargo test -p lockstep-interp avx_fp_long -- --ignored` (LOCKSTEP_FP_SCALE, default 20).
#[test]
#[ignore]
fn avx_fp_long() {
    let scale = std::env::var("LOCKSTEP_FP_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    differential(0x1234_5678_9abc_def3, scale);
}

fn differential(seed: u64, scale: usize) -> u64 {
    let mut rng = Rng(seed);
    let mut m = TestMachine::new();
    let mut report = Vec::new();
    let (mut runs, mut bad) = (0u64, 0u64);
    // How often the host raised each flag (IE DE ZE OE UE PE): the inputs must reach them all.
    let mut raised = [0u64; 6];
    let policy = policy_host();
    let forms = forms();
    assert!(forms.len() >= 220, "only {} forms found", forms.len());
    for &(code, kind) in &forms {
        if !policy && model_specific(code) {
            continue;
        }
        let has_imm = tokens(code).iter().any(|t| t == "imm8");
        let imms: Vec<u32> = if has_imm { (0..256).collect() } else { vec![0] };
        let per = scale * if has_imm { 12 } else { 1500 };
        let mut form_bad = 0;
        for mem in [false, true] {
            for &imm in &imms {
                let Some(ins) = build(code, mem, imm) else {
                    continue;
                };
                let mut enc = Encoder::new(64);
                enc.encode(&ins, CODE_BASE).unwrap();
                let bytes = enc.take_buffer();
                let native = Native::new(&bytes);
                m.load(CODE_BASE, &bytes);
                for n in 0..per {
                    let a = [v128(&mut rng, kind), v128(&mut rng, kind)];
                    let rel = |rng: &mut Rng, a: [u128; 2]| {
                        [related(rng, a[0], kind), related(rng, a[1], kind)]
                    };
                    let b = rel(&mut rng, a);
                    let c = rel(&mut rng, a);
                    let d = [v128(&mut rng, kind), rng.next() as u128];
                    let frame = Frame {
                        ymm: [a, b, c, d],
                        rax: rng.int(),
                        rcx: rng.int(),
                        mxcsr: mxcsr_for(n, &mut rng),
                        host_mxcsr: 0,
                        rflags: rng.next() & flags::STATUS,
                    };
                    let mut memv = Mem([0; MEM_LEN]);
                    for chunk in memv.0.chunks_mut(16) {
                        chunk.copy_from_slice(&v128(&mut rng, kind).to_le_bytes());
                    }
                    let off = if mem { rng.below(33) as usize } else { 0 };
                    if mem {
                        let src = rel(&mut rng, a);
                        memv.0[off..off + 16].copy_from_slice(&src[0].to_le_bytes());
                        memv.0[off + 16..off + 32].copy_from_slice(&src[1].to_le_bytes());
                    }
                    let (mut nf, mut nm) = (frame, memv);
                    native.run(&mut nf, &mut nm, off);
                    nf.host_mxcsr = 0;
                    nf.rflags &= flags::STATUS;
                    let (mut ef, mut em) = (frame, memv);
                    emulate(&mut m, &mut ef, &mut em, off);
                    runs += 1;
                    for (k, r) in raised.iter_mut().enumerate() {
                        *r += (nf.mxcsr & !frame.mxcsr) as u64 >> k & 1;
                    }
                    if (nf, nm) != (ef, em) {
                        bad += 1;
                        form_bad += 1;
                        if form_bad <= 3 && report.len() < 60 {
                            report.push(format!(
                                "{ins} (off {off}) mxcsr {:#06x}\n  in     {:x?} rcx {:#x}\n  mem    {:x?}\n  native {:x?} rax {:#x} mxcsr {:#06x} rflags {:#x}\n  interp {:x?} rax {:#x} mxcsr {:#06x} rflags {:#x}{}",
                                frame.mxcsr, frame.ymm, frame.rcx, &memv.0[off..off + 32],
                                nf.ymm, nf.rax, nf.mxcsr, nf.rflags,
                                ef.ymm, ef.rax, ef.mxcsr, ef.rflags,
                                if nm != em { "\n  memory differs" } else { "" }
                            ));
                        }
                    }
                }
            }
        }
        if form_bad > 0 {
            report.push(format!("{code:?}: {form_bad} mismatches"));
        }
    }
    eprintln!(
        "{} VEX forms, {runs} cases compared with the host CPU, {bad} mismatches; newly raised IE DE ZE OE UE PE: {raised:?}",
        forms.len()
    );
    for (k, &r) in raised.iter().enumerate() {
        assert!(r > runs / 1000, "flag {k} raised only {r} times");
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    runs
}

/// Hand-picked edges, each run natively and in the interpreter: (form, imm8, lane 0 of ymm0,
/// ymm1, ymm2, MXCSR).
#[test]
fn boundary_cases_match_the_host_cpu() {
    if !host_ok() {
        return;
    }
    use Code::*;
    const C: &[(Code, u32, u64, u64, u64, u32)] = &[
        // inf * 0 + QNaN: the QNaN wins, no IE; inf * 0 + 1: IE.
        (
            VEX_Vfmadd231ss_xmm_xmm_xmmm32,
            0,
            0x7fc0_0001,
            0x7f80_0000,
            0,
            0x1f80,
        ),
        (
            VEX_Vfmadd231ss_xmm_xmm_xmmm32,
            0,
            0x3f80_0000,
            0x7f80_0000,
            0,
            0x1f80,
        ),
        (
            VEX_Vfmadd132sd_xmm_xmm_xmmm64,
            0,
            0,
            0x7ff4_0000_0000_0000,
            0x7ff8_0000_0000_0001,
            0x1f80,
        ),
        // Tiny fused result under FTZ and DAZ, every rounding mode.
        (
            VEX_Vfmadd213ss_xmm_xmm_xmmm32,
            0,
            0x0080_0001,
            0x3f00_0000,
            0x8000_0001,
            0x9f80,
        ),
        (
            VEX_Vfmadd213ss_xmm_xmm_xmmm32,
            0,
            0x0080_0001,
            0x3f00_0000,
            0x8000_0001,
            0x1fc0,
        ),
        (
            VEX_Vfnmsub213ss_xmm_xmm_xmmm32,
            0,
            0x0080_0001,
            0x3f00_0000,
            0x8000_0001,
            0x3f80,
        ),
        (
            VEX_Vfmsub231sd_xmm_xmm_xmmm64,
            0,
            0x3ff0_0000_0000_0000,
            0x3ff0_0000_0000_0000,
            0x3ff0_0000_0000_0000,
            0x3f80,
        ),
        // VCVTPS2PH: FTZ ignored, MXCSR.RC through imm[2], overflow per rounding.
        (VEX_Vcvtps2ph_xmmm64_xmm_imm8, 0, 0, 0x3300_0001, 0, 0x9f80),
        (VEX_Vcvtps2ph_xmmm64_xmm_imm8, 4, 0, 0x3300_0001, 0, 0x5f80),
        (VEX_Vcvtps2ph_xmmm64_xmm_imm8, 3, 0, 0x4780_0000, 0, 0x1f80),
        (VEX_Vcvtps2ph_xmmm64_xmm_imm8, 0, 0, 0x0000_0001, 0, 0x1f80),
        (VEX_Vcvtps2ph_xmmm64_xmm_imm8, 0, 0, 0x0000_0001, 0, 0x1fc0),
        // VCVTPH2PS: denormal halves under DAZ, SNaN.
        (VEX_Vcvtph2ps_xmm_xmmm64, 0, 0, 0x0001, 0, 0x1fc0),
        (VEX_Vcvtph2ps_xmm_xmmm64, 0, 0, 0x7c01, 0, 0x1f80),
        // VEX compare predicates on denormals (DE) and QNaN.
        (VEX_Vcmpss_xmm_xmm_xmmm32_imm8, 11, 0, 1, 0, 0x1f80),
        (
            VEX_Vcmpss_xmm_xmm_xmmm32_imm8,
            15,
            0,
            1,
            0x7fc0_0000,
            0x1f80,
        ),
        (
            VEX_Vcmpss_xmm_xmm_xmmm32_imm8,
            31,
            0,
            1,
            0x7fc0_0000,
            0x1f80,
        ),
    ];
    let mut m = TestMachine::new();
    let mut report = Vec::new();
    for &(code, imm, a, b, c, mxcsr) in C {
        let ins = build(code, false, imm).unwrap();
        let mut enc = Encoder::new(64);
        enc.encode(&ins, CODE_BASE).unwrap();
        let bytes = enc.take_buffer();
        let native = Native::new(&bytes);
        m.load(CODE_BASE, &bytes);
        let frame = Frame {
            ymm: [[a as u128, 0], [b as u128, 0], [c as u128, 0], [0, 0]],
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
        emulate(&mut m, &mut ef, &mut em, 0);
        if nf != ef {
            report.push(format!(
                "{ins} imm {imm} mxcsr {mxcsr:#x}: native {:x?} mxcsr {:#x}, interp {:x?} mxcsr {:#x}",
                nf.ymm[0], nf.mxcsr, ef.ymm[0], ef.mxcsr
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
