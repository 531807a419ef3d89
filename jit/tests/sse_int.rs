//! The natively lowered SSE/AVX integer instructions (`lift/{sse_int,sse_mov,avx_int}.rs`)
//! against the interpreter: random XMM/YMM and memory contents, register and memory operands
//! (aligned, misaligned, page-crossing, faulting), CR0.TS set (#NM), AVX disabled in XCR0
//! (#UD) and loops that run compiled.

mod common;

use common::{compare, eager_config, region_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::ctl;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;
use lockstep_interp::Fault;

/// Fill XMM0-15 and the first 8 KiB of data with a deterministic pattern.
fn fill(m: &mut TestMachine, seed: u64) {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for y in m.cpu.state.ymm.iter_mut() {
        for q in y.iter_mut() {
            *q = next();
        }
    }
    let data: Vec<u8> = (0..0x2000).map(|_| next() as u8).collect();
    m.load(DATA_BASE, &data);
}

/// Every covered instruction, register and memory forms, in a loop of 50 iterations that
/// walks RBX through the data (so memory operands are aligned on even iterations only for
/// the unaligned forms, and always aligned for the others).
fn program() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 50u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movdqa(xmm1, xmmword_ptr(rbx))?;
        a.movdqu(xmm2, xmmword_ptr(rbx + 3))?;
        a.movups(xmm3, xmmword_ptr(rbx + 17))?;
        a.movaps(xmm4, xmm1)?;
        a.paddd(xmm1, xmm2)?;
        a.paddq(xmm3, xmmword_ptr(rbx + 0x40))?;
        a.paddb(xmm4, xmm5)?;
        a.paddw(xmm5, xmm6)?;
        a.psubd(xmm6, xmm1)?;
        a.psubq(xmm7, xmm2)?;
        a.psubb(xmm8, xmm3)?;
        a.psubw(xmm9, xmm4)?;
        a.pxor(xmm10, xmm1)?;
        a.por(xmm11, xmmword_ptr(rbx + 0x50))?;
        a.pand(xmm12, xmm2)?;
        a.pandn(xmm13, xmm3)?;
        a.xorps(xmm14, xmm4)?;
        a.andnps(xmm15, xmm5)?;
        a.orpd(xmm0, xmm6)?;
        a.pslld(xmm1, 7)?;
        a.psrld(xmm2, 9)?;
        a.psllq(xmm3, 40)?;
        a.psrlq(xmm4, 63)?;
        a.psrad(xmm5, 3)?;
        a.psraw(xmm6, 20)?;
        a.psllw(xmm7, 16)?;
        a.psrlw(xmm8, 1)?;
        a.pshufd(xmm9, xmm1, 0x1b)?;
        a.pshufd(xmm10, xmmword_ptr(rbx + 0x60), 0xe4)?;
        a.punpckldq(xmm11, xmm2)?;
        a.punpckhdq(xmm12, xmm3)?;
        a.punpcklqdq(xmm13, xmm4)?;
        a.punpckhqdq(xmm14, xmmword_ptr(rbx + 0x70))?;
        a.movdqa(xmmword_ptr(rbx + 0x1000), xmm9)?;
        a.movdqu(xmmword_ptr(rbx + 0x1009), xmm10)?;
        a.movaps(xmmword_ptr(rbx + 0x1020), xmm11)?;
        a.movups(xmmword_ptr(rbx + 0x1033), xmm12)?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn sse_int_matches_interpreter() {
    let code = program();
    for seed in [1u64, 7, 99] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        // 2 + 50 iterations of 40 instructions, then HLT at CPL 3 (#GP).
        assert_eq!(exit.retired, 2002, "{exit:?}");
        assert!(jit.stats.native_insns > 30, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        // Budget slices that stop inside the loop body.
        let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 31) % 47).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// A misaligned MOVDQA source: #GP(0) at the instruction, in both engines.
#[test]
fn misaligned_movdqa_faults_like_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 10u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movdqa(xmm1, xmmword_ptr(rbx))?;
        a.add(rbx, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| fill(m, 3));
    assert!(
        matches!(exit.reason, ExitReason::Exception(_)),
        "expected #GP: {exit:?}"
    );
}

/// CR0.TS set: the first SSE instruction raises #NM in both engines.
#[test]
fn cr0_ts_gives_device_not_available() {
    let code = program();
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| {
        fill(m, 5);
        m.cpu.state.cr0 |= ctl::CR0_TS;
    });
    assert!(
        matches!(exit.reason, ExitReason::Exception(_)),
        "expected #NM: {exit:?}"
    );
}

/// The legacy forms added in session 4: MOVD/MOVQ, unpacks of bytes/words, compares, min/max,
/// saturating add/sub, packs, byte shifts, PSHUFB, PMOVMSKB. GPRs are dirty (written in the
/// same block) when used as addresses and sources.
fn program_legacy2() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 60u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.punpcklbw(xmm1, xmm2)?;
        a.punpckhbw(xmm2, xmmword_ptr(rbx + 0x80))?;
        a.punpcklwd(xmm3, xmm4)?;
        a.punpckhwd(xmm4, xmm5)?;
        a.unpcklps(xmm5, xmm6)?;
        a.unpckhpd(xmm6, xmm7)?;
        a.movq(xmm7, qword_ptr(rbx + 5))?;
        a.movq(xmm8, xmm1)?;
        a.movq(qword_ptr(rbx + 0x1103), xmm2)?;
        a.movd(xmm9, dword_ptr(rbx + 7))?;
        a.movd(dword_ptr(rbx + 0x1201), xmm3)?;
        a.lea(rax, qword_ptr(rcx * 8 + 0x1234))?;
        a.movq(xmm10, rax)?;
        a.movd(xmm11, eax)?;
        a.movq(rdx, xmm4)?;
        a.movd(esi, xmm5)?;
        a.add(rsi, rdx)?;
        a.pcmpeqb(xmm12, xmm1)?;
        a.pcmpeqw(xmm13, xmm13)?;
        a.pcmpeqd(xmm14, xmmword_ptr(rbx + 0x90))?;
        a.pcmpgtb(xmm15, xmm2)?;
        a.pcmpgtw(xmm0, xmm3)?;
        a.pcmpgtd(xmm1, xmm4)?;
        a.pminub(xmm2, xmm5)?;
        a.pmaxub(xmm3, xmmword_ptr(rbx + 0xa0))?;
        a.pminsw(xmm4, xmm6)?;
        a.pmaxsw(xmm5, xmm7)?;
        a.psubusb(xmm6, xmm8)?;
        a.paddusb(xmm7, xmm9)?;
        a.psubusw(xmm8, xmm10)?;
        a.paddusw(xmm9, xmm11)?;
        a.packuswb(xmm10, xmm12)?;
        a.packsswb(xmm11, xmm13)?;
        a.packssdw(xmm12, xmmword_ptr(rbx + 0xb0))?;
        a.pslldq(xmm13, 3)?;
        a.psrldq(xmm14, 15)?;
        a.pslldq(xmm15, 16)?;
        a.psrldq(xmm0, 200)?;
        a.pshufb(xmm1, xmm2)?;
        a.pshufb(xmm3, xmmword_ptr(rbx + 0xc0))?;
        a.pmovmskb(eax, xmm1)?;
        a.pmovmskb(r9, xmm3)?;
        a.add(r9, rax)?;
        // A page-crossing MOVDQU and MOVQ through a just-written (dirty) address register.
        a.lea(rdi, qword_ptr(rbx + 0xff9))?;
        a.movdqu(xmm4, xmmword_ptr(rdi))?;
        a.movq(xmm5, qword_ptr(rdi + 3))?;
        a.movq(qword_ptr(rdi + 0x1002), xmm6)?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn legacy_forms_match_interpreter() {
    let code = program_legacy2();
    for seed in [2u64, 11, 123] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        // 2 + 60 iterations of 50 instructions, then HLT at CPL 3 (#GP).
        assert_eq!(exit.retired, 2 + 60 * 50, "{exit:?}");
        assert!(jit.stats.native_insns > 40, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 37) % 61).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// The VEX forms glibc's AVX2 string and memory functions use, 128 and 256 bits (RBX steps
/// by 32 so the aligned forms stay aligned).
fn program_vex() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 60u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.vmovdqu(ymm0, ymmword_ptr(rbx + 1))?;
        a.vmovdqa(ymm1, ymmword_ptr(rbx + 0x40))?;
        a.vmovups(xmm2, xmmword_ptr(rbx + 9))?;
        a.vmovaps(xmm3, xmmword_ptr(rbx + 0x60))?;
        a.vmovdqu(ymm4, ymm0)?;
        a.vmovdqa(xmm5, xmm1)?;
        a.vpcmpeqb(ymm6, ymm0, ymm4)?;
        a.vpcmpeqb(ymm7, ymm1, ymmword_ptr(rbx + 0x23))?;
        a.vpcmpeqb(xmm8, xmm2, xmm3)?;
        a.vpminub(ymm9, ymm0, ymm1)?;
        a.vpminub(xmm10, xmm2, xmmword_ptr(rbx + 0x31))?;
        a.vpor(ymm11, ymm6, ymm7)?;
        a.vpand(ymm12, ymm9, ymmword_ptr(rbx + 0x45))?;
        a.vpxor(xmm13, xmm9, xmm0)?;
        a.vpandn(ymm14, ymm1, ymm0)?;
        a.vpcmpgtb(ymm15, ymm0, ymm1)?;
        a.vpsubb(ymm6, ymm0, ymm12)?;
        a.vpmaxub(ymm7, ymm14, ymm15)?;
        a.vpshufb(ymm8, ymm0, ymm1)?;
        a.vpunpcklbw(ymm9, ymm2, ymm3)?;
        a.vpackuswb(ymm10, ymm0, ymm1)?;
        a.vpmovmskb(eax, ymm6)?;
        a.vpmovmskb(edx, xmm7)?;
        a.vpmovmskb(r8, ymm11)?;
        a.add(r8, rax)?;
        a.vmovd(xmm4, eax)?;
        a.vmovq(xmm5, r8)?;
        a.vmovq(xmm6, qword_ptr(rbx + 3))?;
        a.vmovq(xmm7, xmm0)?;
        a.vmovd(esi, xmm1)?;
        a.vmovq(rdi, xmm2)?;
        a.vmovq(qword_ptr(rbx + 0x1301), xmm12)?;
        a.vmovd(dword_ptr(rbx + 0x1405), xmm13)?;
        a.vmovdqu(ymmword_ptr(rbx + 0x1007), ymm14)?;
        a.vmovdqa(ymmword_ptr(rbx + 0x1020), ymm15)?;
        a.vmovups(xmmword_ptr(rbx + 0x1503), xmm9)?;
        a.vmovntdq(ymmword_ptr(rbx + 0x1600), ymm10)?;
        // Page-crossing 32-byte load and store through a dirty address register.
        a.lea(rdi, qword_ptr(rbx + 0xff0))?;
        a.vmovdqu(ymm3, ymmword_ptr(rdi))?;
        a.vmovdqu(ymmword_ptr(rdi + 0x1008), ymm3)?;
        a.vpbroadcastb(ymm5, xmm0)?;
        a.vpbroadcastb(xmm6, byte_ptr(rbx + 0x77))?;
        a.vpbroadcastw(ymm7, word_ptr(rbx + 0x79))?;
        a.vpbroadcastd(xmm8, xmm1)?;
        a.vpbroadcastq(ymm9, qword_ptr(rbx + 0x7b))?;
        a.vbroadcastss(ymm10, dword_ptr(rbx + 0x7f))?;
        a.vbroadcastsd(ymm11, xmm2)?;
        a.vzeroupper()?;
        a.add(rbx, 32i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn vex_forms_match_interpreter() {
    let code = program_vex();
    for seed in [3u64, 17, 1234] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        assert_eq!(exit.retired, 2 + 60 * 51, "{exit:?}");
        assert!(jit.stats.native_insns > 40, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 29) % 53).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// XCR0 without AVX state: the first VEX instruction raises #UD in both engines.
#[test]
fn vex_with_avx_disabled_is_ud() {
    let code = program_vex();
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| {
        fill(m, 5);
        m.cpu.state.xcr0 = 0b11;
    });
    assert!(
        matches!(
            exit.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ),
        "expected #UD: {exit:?}"
    );
    assert_eq!(exit.retired, 2, "{exit:?}");
}

/// Emits one instruction.
type Emit = dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// Memory operands that run into unmapped memory (#PF at the instruction) and a misaligned
/// VMOVDQA ymm (#GP), in a loop so the faulting instruction is compiled.
#[test]
fn faulting_memory_operands_match_interpreter() {
    let top_of_ram: u64 = 0x4000_0000;
    let cases: Vec<Box<Emit>> = vec![
        Box::new(|a| a.vmovdqu(ymm0, ymmword_ptr(rbx))),
        Box::new(|a| a.vmovdqu(ymmword_ptr(rbx), ymm1)),
        Box::new(|a| a.vpcmpeqb(ymm2, ymm1, ymmword_ptr(rbx))),
        Box::new(|a| a.movq(xmm3, qword_ptr(rbx + 8))),
        Box::new(|a| a.movq(qword_ptr(rbx + 8), xmm3)),
        Box::new(|a| a.movd(xmm4, dword_ptr(rbx + 12))),
        Box::new(|a| a.movdqu(xmm5, xmmword_ptr(rbx))),
        Box::new(|a| a.movd(dword_ptr(rbx + 12), xmm5)),
    ];
    for (i, case) in cases.iter().enumerate() {
        // RBX walks up by 4 from 40 bytes below the end of RAM: the access faults once it
        // crosses the end (at a different iteration for each operand size).
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            a.mov(rcx, 20u64)?;
            a.mov(rbx, top_of_ram - 40)?;
            a.set_label(&mut top)?;
            a.add(rbx, 4i32)?;
            case(a)?;
            a.dec(rcx)?;
            a.jnz(top)?;
            a.hlt()
        });
        let (_, _, exit) = compare(&code, &[100_000], eager_config(), &|m| fill(m, 9));
        assert!(
            matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
            "case {i}: expected #PF: {exit:?}"
        );
    }
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 10u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.vmovdqa(ymm1, ymmword_ptr(rbx))?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| fill(m, 3));
    assert!(
        matches!(
            exit.reason,
            ExitReason::Exception(Fault::GeneralProtection(0))
        ),
        "expected #GP: {exit:?}"
    );
    assert_eq!(exit.retired, 2 + 4, "{exit:?}");
}

/// Every binary form in the lowered tables by name: legacy `op xmm, xmm/m128` and VEX
/// `op xmm, xmm, xmm/m128` and `op ymm, ymm, ymm/m256`, register and memory sources.
fn program_all_binary() -> Vec<u8> {
    use iced_x86::{Instruction, MemoryOperand, Register};
    let legacy = [
        "Pand",
        "Andps",
        "Andpd",
        "Pandn",
        "Andnps",
        "Andnpd",
        "Por",
        "Orps",
        "Orpd",
        "Pxor",
        "Xorps",
        "Xorpd",
        "Paddb",
        "Paddw",
        "Paddd",
        "Paddq",
        "Psubb",
        "Psubw",
        "Psubd",
        "Psubq",
        "Paddusb",
        "Paddusw",
        "Psubusb",
        "Psubusw",
        "Pcmpeqb",
        "Pcmpeqw",
        "Pcmpeqd",
        "Pcmpgtb",
        "Pcmpgtw",
        "Pcmpgtd",
        "Pminub",
        "Pmaxub",
        "Pminsw",
        "Pmaxsw",
        "Punpcklbw",
        "Punpckhbw",
        "Punpcklwd",
        "Punpckhwd",
        "Punpckldq",
        "Punpckhdq",
        "Punpcklqdq",
        "Punpckhqdq",
        "Unpcklps",
        "Unpckhps",
        "Unpcklpd",
        "Unpckhpd",
        "Pshufb",
        "Packsswb",
        "Packssdw",
        "Packuswb",
        "Packusdw",
        "Pminsb",
        "Pmaxsb",
        "Pminuw",
        "Pmaxuw",
        "Pminsd",
        "Pmaxsd",
        "Pminud",
        "Pmaxud",
        "Pcmpeqq",
        "Pmullw",
        "Pmulld",
        "Pavgb",
        "Pavgw",
    ];
    let vex: Vec<String> = legacy
        .iter()
        .map(|m| format!("V{}", m.to_lowercase()))
        .collect();
    let code = common::code;
    let x = |i: u32| {
        Register::values()
            .nth((Register::XMM0 as u32 + i % 16) as usize)
            .unwrap()
    };
    let y = |i: u32| {
        Register::values()
            .nth((Register::YMM0 as u32 + i % 16) as usize)
            .unwrap()
    };
    let mem = |d: i64| MemoryOperand::with_base_displ(Register::RBX, d);
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 8u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        let mut k = 0u32;
        for m in legacy {
            let c = code(&format!("{m}_xmm_xmmm128"));
            a.add_instruction(Instruction::with2(c, x(k), x(k * 7 + 3)).unwrap())?;
            a.add_instruction(Instruction::with2(c, x(k + 5), mem(16 * (k % 64) as i64)).unwrap())?;
            k += 1;
        }
        for m in &vex {
            let c = code(&format!("VEX_{m}_xmm_xmm_xmmm128"));
            a.add_instruction(Instruction::with3(c, x(k), x(k * 3 + 1), x(k * 5 + 2)).unwrap())?;
            a.add_instruction(Instruction::with3(c, x(k + 1), x(k), mem(k as i64 % 61)).unwrap())?;
            let c = code(&format!("VEX_{m}_ymm_ymm_ymmm256"));
            a.add_instruction(Instruction::with3(c, y(k + 2), y(k * 5), y(k * 3 + 7)).unwrap())?;
            a.add_instruction(Instruction::with3(c, y(k + 3), y(k), mem(k as i64 % 57)).unwrap())?;
            k += 1;
        }
        a.add(rbx, 0x40i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn every_binary_form_matches_interpreter() {
    let code = program_all_binary();
    for seed in [4u64, 44] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        assert!(
            matches!(
                exit.reason,
                ExitReason::Exception(Fault::GeneralProtection(0))
            ),
            "expected the final HLT: {exit:?}"
        );
        // 2 + 8 iterations of (128 legacy + 256 VEX + 3) instructions, then HLT (#GP).
        assert_eq!(exit.retired, 2 + 8 * 387, "{exit:?}");
        assert!(jit.stats.native_insns > 300, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    }
}

/// MOVSS/MOVSD in every form: loads zero the rest of the low 128 bits (the upper YMM half is
/// kept), register forms merge the low element, stores write it — including a page-crossing
/// load and store.
fn program_movs() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 60u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movsd_2(xmm1, qword_ptr(rbx + 0x40))?;
        a.movss(xmm2, dword_ptr(rbx + 0x49))?;
        a.movsd_2(xmm3, xmm4)?;
        a.movss(xmm5, xmm6)?;
        a.movsd_2(qword_ptr(rbx + 0x1100), xmm7)?;
        a.movss(dword_ptr(rbx + 0x1203), xmm8)?;
        a.movsd_2(xmm9, qword_ptr(rbx + 0xffd))?;
        a.movss(dword_ptr(rbx + 0xffe), xmm10)?;
        a.addsd(xmm1, xmm3)?;
        a.movsd_2(xmm11, xmm1)?;
        a.add(rbx, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn scalar_moves_match_interpreter() {
    let code = program_movs();
    for seed in [5u64, 99] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        assert_eq!(exit.retired, 2 + 60 * 13, "{exit:?}");
        assert!(jit.stats.native_insns > 20, "{:?}", jit.stats);
        let slices: Vec<u64> = (0..200).map(|i| 1 + (i * 31) % 41).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// MOVHPS/MOVHPD/MOVLPS/MOVLPD loads and stores (one qword of the register; the rest, the
/// upper YMM half included, kept) and VMOVSS/VMOVSD loads (zero-extended to 256 bits),
/// stores and register merges (the destination aliasing either source) — with page-crossing
/// accesses.
fn program_half_moves() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 40u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movhps(xmm1, qword_ptr(rbx + 0x40))?;
        a.movhpd(xmm2, qword_ptr(rbx + 0x4b))?;
        a.movlps(xmm3, qword_ptr(rbx + 0x51))?;
        a.movlpd(xmm4, qword_ptr(rbx + 0xffc))?;
        a.movhps(qword_ptr(rbx + 0x1100), xmm5)?;
        a.movhpd(qword_ptr(rbx + 0xffb), xmm6)?;
        a.movlps(qword_ptr(rbx + 0x1208), xmm7)?;
        a.movlpd(qword_ptr(rbx + 0x1301), xmm8)?;
        a.vmovsd(xmm9, qword_ptr(rbx + 0x60))?;
        a.vmovss(xmm10, dword_ptr(rbx + 0xffe))?;
        a.vmovsd(qword_ptr(rbx + 0x1400), xmm11)?;
        a.vmovss(dword_ptr(rbx + 0xffd), xmm12)?;
        a.vmovsd_3(xmm13, xmm14, xmm15)?;
        a.vmovss_3(xmm1, xmm1, xmm2)?;
        a.vmovsd_3(xmm3, xmm4, xmm3)?;
        a.vmovss_3(xmm5, xmm6, xmm5)?;
        a.addpd(xmm1, xmm2)?;
        a.add(rbx, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn half_and_vex_scalar_moves_match_interpreter() {
    let code = program_half_moves();
    for seed in [7u64, 1234] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        assert_eq!(exit.retired, 2 + 40 * 20, "{exit:?}");
        assert!(jit.stats.native_insns > 20, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        let slices: Vec<u64> = (0..200).map(|i| 1 + (i * 29) % 37).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// An SSE memory operand whose page misses the TLB in a single-block function (regions off):
/// its slow path syncs `cpu.retired`, runs the instruction in the interpreter and rejoins the
/// main path, where a single block's exits add their count to `cpu.retired` in memory. The
/// retired count (and so the budget stops) must stay the interpreter's: without taking the
/// synced count off again on the rejoin, every later exit of the block counts it twice.
#[test]
fn sse_slow_path_in_a_single_block_keeps_the_retired_count() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut tail = a.create_label();
        a.mov(rcx, 15u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        // Block A: a few native instructions, the SSE access to a page not touched yet,
        // a few more, then a jump to block B.
        a.add(rdx, 1)?;
        a.lea(rsi, ptr(rdx + 3))?;
        a.paddd(xmm0, ptr(rbx))?;
        a.add(rdx, rsi)?;
        a.xor(rdi, rdx)?;
        a.jmp(tail)?;
        // Block B: the next page, and back.
        a.set_label(&mut tail)?;
        a.add(rbx, 0x1000)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let config = lockstep_jit::JitConfig {
        region_blocks: 1,
        ..eager_config()
    };
    let (_, jit, exit) = compare(&code, &[1_000_000], config.clone(), &|m| fill(m, 5));
    // 2 + 15 iterations of 9 instructions, then HLT at CPL 3 (#GP).
    assert_eq!(exit.retired, 137, "{exit:?}");
    assert!(jit.stats.native_insns > 5, "{:?}", jit.stats);
    // Budget slices that stop inside block A, before and after its slow path.
    let slices: Vec<u64> = (0..60).map(|i| 1 + (i * 7) % 11).collect();
    compare(&code, &slices, config, &|m| fill(m, 5));
}

/// The same in a region (a loop compiled as one function), after a trampolined instruction
/// (CPUID) has made `cpu.retired` in memory the region's count: the SSE slow path leaves its
/// synced count in memory, and a later exit of the block that leaves the count to the
/// dispatcher (a deferred load: a packed exit word adds its instructions to what memory holds)
/// must find the region's count there again, or the retired count drifts from the
/// interpreter's.
#[test]
fn sse_slow_path_in_a_region_keeps_the_retired_count_for_packed_exits() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut tail = a.create_label();
        a.mov(r8, 7u64)?;
        a.mov(r9, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.add(rdx, 1)?;
        a.cpuid()?;
        a.lea(rsi, ptr(rdx + 3))?;
        // A page not touched yet: the slow path.
        a.paddd(xmm0, ptr(r9))?;
        a.add(rsi, rdx)?;
        // The next page, not touched yet either: a deferred load.
        a.mov(rdi, qword_ptr(r9 + 0x1000))?;
        a.xor(rdi, rsi)?;
        a.jmp(tail)?;
        a.set_label(&mut tail)?;
        a.add(r9, 0x2000)?;
        a.dec(r8)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, 9));
    // 2 + 7 iterations of 11 instructions, then HLT at CPL 3 (#GP).
    assert_eq!(exit.retired, 79, "{exit:?}");
    assert!(jit.stats.region_blocks > 1, "{}", jit.stats.summary());
    assert!(jit.stats.accesses_deferred >= 6, "{}", jit.stats.summary());
    let slices: Vec<u64> = (0..60).map(|i| 1 + (i * 7) % 13).collect();
    compare(&code, &slices, eager_config(), &|m| fill(m, 9));
}

/// One block that writes each XMM register through one way of storing it in `CpuState` and
/// reads it back through another, with stores to other registers in between and no memory
/// access (whose fast and slow paths would merge): whole vectors (MOVAPS, PXOR, PADDQ,
/// PSHUFD), the low lanes of scalar moves and arithmetic (MOVQ/MOVD to and from an XMM
/// register, ADDSD, VADDSD with its zeroed upper half) and YMM upper halves (VMOVDQU). Each
/// register is one alias region of Cranelift's alias analysis (`lift::state_mem`): an access
/// under another region would let a load take a value stored before the last write.
fn register_paths() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 40u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.lea(rax, qword_ptr(rcx * 8 + 0x77))?;
        a.movaps(xmm1, xmm3)?;
        a.movq(xmm1, rax)?;
        a.paddq(xmm1, xmm1)?;
        a.movaps(xmm2, xmm4)?;
        a.addsd(xmm2, xmm3)?;
        a.movdqa(xmm12, xmm2)?;
        a.pxor(xmm4, xmm5)?;
        a.movq(rdx, xmm4)?;
        a.movd(xmm5, eax)?;
        a.pshufd(xmm6, xmm5, 0x1b)?;
        a.vmovdqu(ymm7, ymm11)?;
        a.vaddsd(xmm7, xmm8, xmm9)?;
        a.vmovdqu(ymm10, ymm7)?;
        a.movdqu(xmmword_ptr(rbx + 0x1000), xmm1)?;
        a.movdqu(xmmword_ptr(rbx + 0x1010), xmm12)?;
        a.mov(qword_ptr(rbx + 0x1020), rdx)?;
        a.movdqu(xmmword_ptr(rbx + 0x1030), xmm6)?;
        a.vmovdqu(ymmword_ptr(rbx + 0x1040), ymm10)?;
        a.vpxor(ymm11, ymm11, ymm10)?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn each_way_to_store_an_xmm_register_is_seen_by_the_others() {
    let code = register_paths();
    for seed in [2u64, 11] {
        // The loop as a Cranelift region (compiled at the loop optimisation level, where the
        // alias analysis runs; not a floating-point loop for the baseline tier), and budget
        // slices stopping inside it.
        let config = || lockstep_jit::JitConfig {
            baseline: false,
            ..region_config()
        };
        let (_, jit, exit) = compare(&code, &[1_000_000], config(), &|m| fill(m, seed));
        assert_eq!(exit.retired, 2 + 40 * 23, "{exit:?}");
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
        let slices: Vec<u64> = (0..200).map(|i| 1 + (i * 37) % 53).collect();
        compare(&code, &slices, config(), &|m| fill(m, seed));
    }
}
