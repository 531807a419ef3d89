//! The baseline tier's SSE and AVX instructions (`lockstep_jit::base::simd`), run on the host
//! with renamed registers: state, memory, MXCSR flags and retired count must be the
//! interpreter's at every budget slice, and whatever the host must not run that way (another
//! MXCSR environment, a misaligned operand, SSE or AVX unusable) must leave for the
//! interpreter, which raises the fault or computes the result.

mod common;

use common::{compare, eager_config, ran_to_hlt};
use iced_x86::code_asm::*;
use lockstep_interp::state::{ctl, reg};
use lockstep_interp::testkit::{TestMachine, DATA_BASE, TEST_RAM};
use lockstep_interp::{ExitReason, Fault};
use lockstep_jit::JitConfig;

/// Single-block functions, each compiled at its first run, never promoted.
fn config() -> JitConfig {
    JitConfig {
        baseline: true,
        region_blocks: 1,
        promote: 0,
        ..eager_config()
    }
}

fn slices() -> Vec<u64> {
    let mut v: Vec<u64> = (0..400).map(|i| 1 + (i * 5) % 17).collect();
    v.push(1 << 20);
    v
}

fn host_has_fma_avx2() -> bool {
    std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
}

/// The programs' variants to run: legacy SSE only, and with the VEX forms where the host has
/// them.
fn vex_forms() -> Vec<bool> {
    let mut forms = vec![false];
    if host_has_fma_avx2() {
        forms.push(true);
    }
    forms
}

/// A loop calling `f(i)`, whose blocks mix SSE/AVX arithmetic, compares read by branches in
/// the same and the next block, conversions to and from GPRs, vector loads and stores
/// through RBX, and integer instructions. `vex`: also AVX/FMA forms.
fn program(vex: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut f = a.create_label();
        let mut skip = a.create_label();
        let mut done = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        // [rbx]: 1/3 as a double, [rbx+16]: 2.5, [rbx+32..64]: bytes 0..32.
        a.mov(rax, (1.0f64 / 3.0).to_bits())?;
        a.mov(qword_ptr(rbx), rax)?;
        a.mov(rax, 2.5f64.to_bits())?;
        a.mov(qword_ptr(rbx + 16), rax)?;
        a.mov(rax, 0x0706_0504_0302_0100u64)?;
        a.mov(qword_ptr(rbx + 32), rax)?;
        a.mov(rax, 0x8f0e_0d0c_8b0a_0908u64)?;
        a.mov(qword_ptr(rbx + 40), rax)?;
        a.mov(ecx, 30)?;
        a.xor(r12d, r12d)?;
        a.set_label(&mut top)?;
        a.mov(edi, ecx)?;
        a.call(f)?;
        a.add(r12, rax)?;
        a.dec(ecx)?;
        a.jne(top)?;
        a.jmp(done)?;

        a.set_label(&mut f)?;
        a.cvtsi2sd(xmm0, edi)?;
        a.mulsd(xmm0, qword_ptr(rbx))?;
        a.addsd(xmm1, xmm0)?;
        a.movsd_2(qword_ptr(rbx + 8), xmm1)?;
        a.movapd(xmm2, xmm1)?;
        a.sqrtsd(xmm2, xmm2)?;
        a.divsd(xmm2, qword_ptr(rbx + 16))?;
        a.ucomisd(xmm2, qword_ptr(rbx + 16))?;
        a.seta(dl)?;
        a.movzx(esi, dl)?;
        a.comisd(xmm1, xmm0)?;
        a.jbe(skip)?;
        a.cvttsd2si(rax, xmm1)?;
        a.movq(rdx, xmm2)?;
        a.xor(rax, rdx)?;
        a.movdqa(xmm3, xmmword_ptr(rbx + 32))?;
        a.pxor(xmm3, xmm1)?;
        a.pcmpeqb(xmm3, xmm4)?;
        a.pmovmskb(edx, xmm3)?;
        a.add(eax, edx)?;
        a.movups(xmmword_ptr(rbx + 72), xmm3)?;
        a.andpd(xmm4, xmm2)?;
        // Zero and all-ones idioms (iced: the destination only written, but the renamed
        // form reads it), then a destination only written.
        a.pxor(xmm6, xmm6)?;
        a.pcmpeqd(xmm7, xmm7)?;
        a.psubd(xmm6, xmm7)?;
        a.movdqu(xmmword_ptr(rbx + 128), xmm6)?;
        a.movaps(xmm7, xmm2)?;
        a.cvtsd2ss(xmm5, xmm2)?;
        a.movd(r8d, xmm5)?;
        if vex {
            a.vfmadd231sd(xmm6, xmm0, qword_ptr(rbx + 16))?;
            a.vmulsd(xmm7, xmm6, xmm1)?;
            a.vmovdqu(ymm8, ymmword_ptr(rbx + 32))?;
            a.vpaddd(ymm8, ymm8, ymm9)?;
            a.vmovdqu(ymmword_ptr(rbx + 96), ymm8)?;
            a.vpcmpeqb(ymm9, ymm8, ymmword_ptr(rbx + 96))?;
            a.vpmovmskb(r9d, ymm9)?;
            a.vucomisd(xmm7, xmm6)?;
            a.vcvttsd2si(r10, xmm7)?;
            a.vzeroupper()?;
            a.setb(r11b)?;
        }
        a.set_label(&mut skip)?;
        a.add(rax, rsi)?;
        a.ret()?;
        a.set_label(&mut done)?;
        a.movq(r13, xmm1)?;
        a.hlt()
    })
}

/// The blocks run in the baseline tier with the interpreter's results at every stopping
/// point, and the inexact results raise MXCSR.PE there as in the interpreter.
#[test]
fn sse_and_avx_blocks_match_the_interpreter() {
    for vex in vex_forms() {
        let (m, jit, exit) = compare(&program(vex), &slices(), config(), &|_| {});
        assert!(ran_to_hlt(&exit), "vex {vex}: {exit:?}");
        assert!(jit.stats.baseline >= 3, "{}", jit.stats.summary());
        assert!(
            m.cpu.state.mxcsr & 0x20 != 0,
            "PE: {:#x}",
            m.cpu.state.mxcsr
        );
        assert!(m.gpr(reg::R13) != 0);
    }
}

/// A loop calling `f(i)`, one block of lane inserts and extracts (PINSRx/PEXTRx with register
/// and memory operands, INSERTPS/EXTRACTPS), PTEST read by SETcc and, with `vex`, the VEX
/// forms with VBLENDVPS/PD, VPBLENDVB (four operands, one in memory), VPERMILPS/PD and
/// VPTEST.
fn lanes_program(vex: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut f = a.create_label();
        let mut done = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.mov(rax, 0x0706_0504_0302_0100u64)?;
        a.mov(qword_ptr(rbx), rax)?;
        a.mov(rax, 0x8f0e_0d0c_8b0a_0908u64)?;
        a.mov(qword_ptr(rbx + 8), rax)?;
        a.mov(rax, 0xc0de_8000_0000_7fffu64)?;
        a.mov(qword_ptr(rbx + 24), rax)?;
        a.movdqu(xmm1, xmmword_ptr(rbx))?;
        a.mov(ecx, 20)?;
        a.xor(r12d, r12d)?;
        a.set_label(&mut top)?;
        a.mov(edi, ecx)?;
        a.imul_3(edi, edi, 0x0037_79b9)?;
        a.call(f)?;
        a.add(r12, rax)?;
        a.dec(ecx)?;
        a.jne(top)?;
        a.jmp(done)?;

        a.set_label(&mut f)?;
        a.pinsrd(xmm1, edi, 2)?;
        a.pinsrb(xmm1, byte_ptr(rbx + 3), 5)?;
        a.pinsrw(xmm1, edi, 6)?;
        a.pinsrq(xmm2, rdi, 1)?;
        a.pextrb(eax, xmm1, 5)?;
        a.pextrw(edx, xmm1, 6)?;
        a.add(eax, edx)?;
        a.pextrd(dword_ptr(rbx + 16), xmm1, 2)?;
        a.pextrw(word_ptr(rbx + 20), xmm2, 5)?;
        a.pextrq(rdx, xmm2, 1)?;
        a.add(rax, rdx)?;
        a.extractps(esi, xmm1, 3)?;
        a.insertps(xmm3, xmm1, 0x9c)?;
        a.ptest(xmm3, xmm1)?;
        a.setb(dl)?;
        a.sete(r8b)?;
        a.movzx(edx, dl)?;
        a.add(eax, edx)?;
        if vex {
            a.vpermilpd(xmm4, xmm1, 1)?;
            a.vpermilps(ymm5, ymm1, 0x1b)?;
            a.vblendvpd(xmm6, xmm4, xmm1, xmm2)?;
            a.vblendvps(ymm7, ymm5, ymmword_ptr(rbx), ymm1)?;
            a.vpblendvb(xmm8, xmm6, xmm7, xmm1)?;
            a.vextractps(dword_ptr(rbx + 36), xmm8, 1)?;
            a.vinsertps(xmm9, xmm8, dword_ptr(rbx + 4), 0x10)?;
            a.vpextrd(r9d, xmm9, 1)?;
            a.vpinsrq(xmm10, xmm9, r9, 1)?;
            a.vpextrq(r10, xmm10, 1)?;
            a.vpextrw(r11d, xmm10, 3)?;
            a.add(r10, r11)?;
            a.vptest(ymm7, ymm5)?;
            a.seta(r11b)?;
            a.vzeroupper()?;
            a.movq(rdx, xmm8)?;
            a.add(rax, rdx)?;
        }
        a.add(rax, rsi)?;
        a.ret()?;
        a.set_label(&mut done)?;
        a.movq(r13, xmm1)?;
        a.hlt()
    })
}

/// The lane-insert/extract, blend, permute and PTEST forms run in the baseline tier (`f`'s
/// block among the baseline compiles) with the interpreter's results at every stopping point.
#[test]
fn lane_blend_and_test_forms_match_the_interpreter() {
    for vex in vex_forms() {
        let (m, jit, exit) = compare(&lanes_program(vex), &slices(), config(), &|_| {});
        assert!(ran_to_hlt(&exit), "vex {vex}: {exit:?}");
        // Every compiled block (budget slices start blocks anywhere) but the last one's
        // (HLT) in the tier.
        let s = &jit.stats;
        assert!(s.compiled - s.baseline <= 1, "vex {vex}: {}", s.summary());
        assert!(m.gpr(reg::R12) != 0);
    }
}

/// Another MXCSR environment (round down; and ZE unmasked, where 1/0 raises #XM): the
/// floating-point instructions leave for the interpreter. Without the check the host would
/// round to nearest (the sum of the thirds differs in its last bit) and divide to infinity.
#[test]
fn another_mxcsr_environment_leaves_for_the_interpreter() {
    for mxcsr in [0x3f80u32, 0x1d80] {
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            let mut f = a.create_label();
            a.mov(rbx, DATA_BASE)?;
            a.mov(rax, 3.0f64.to_bits())?;
            a.mov(qword_ptr(rbx), rax)?;
            a.mov(ecx, 20)?;
            a.set_label(&mut top)?;
            a.mov(edi, ecx)?;
            a.call(f)?;
            a.dec(ecx)?;
            a.jne(top)?;
            a.cvtsi2sd(xmm3, ecx)?;
            a.call(f)?;
            a.hlt()?;
            a.set_label(&mut f)?;
            a.mov(eax, 1)?;
            a.cvtsi2sd(xmm0, eax)?;
            a.divsd(xmm0, qword_ptr(rbx))?;
            a.addsd(xmm1, xmm0)?;
            a.movsd_2(xmm2, xmm0)?;
            a.divsd(xmm2, xmm3)?;
            a.ret()
        });
        let setup = move |m: &mut TestMachine| {
            m.cpu.state.mxcsr = mxcsr;
            // xmm3 = 1.0: no division by zero until the last call.
            m.cpu.state.ymm[3][0] = 1.0f64.to_bits();
        };
        let (m, _, exit) = compare(&code, &slices(), config(), &setup);
        if mxcsr & 0x200 == 0 {
            assert!(
                matches!(exit.reason, ExitReason::Exception(_)) && !ran_to_hlt(&exit),
                "1/0 with ZE unmasked: {exit:?}"
            );
        } else {
            assert!(ran_to_hlt(&exit), "{exit:?}");
            assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x20 | 0x4, "PE and ZE");
        }
    }
}

/// A misaligned 16-byte operand of a legacy SSE instruction (#GP), and SSE with CR0.TS set
/// (#NM): the block leaves before the instruction and the interpreter raises the fault.
/// MOVUPS with the same address runs.
#[test]
fn misaligned_operands_and_unusable_sse_fault_in_the_interpreter() {
    let code = |op: u8| {
        TestMachine::assemble(|a| {
            let mut top = a.create_label();
            let mut f = a.create_label();
            a.mov(rbx, DATA_BASE + 8)?;
            a.mov(ecx, 12)?;
            a.set_label(&mut top)?;
            a.cmp(ecx, 1)?;
            a.call(f)?;
            a.dec(ecx)?;
            a.jne(top)?;
            a.hlt()?;
            a.set_label(&mut f)?;
            a.mov(eax, ecx)?;
            a.movq(xmm1, rax)?;
            match op {
                0 => a.movaps(xmm0, xmmword_ptr(rbx))?,
                1 => a.addpd(xmm1, xmmword_ptr(rbx))?,
                _ => a.movups(xmm0, xmmword_ptr(rbx))?,
            }
            a.ret()
        })
    };
    for op in 0..3u8 {
        let (m, _, exit) = compare(&code(op), &slices(), config(), &|_| {});
        if op < 2 {
            assert_eq!(exit.reason, ExitReason::Exception(Fault::GP0), "op {op}");
            assert_eq!(m.cpu.retired, 6, "op {op}: faults in the first call");
        } else {
            assert!(ran_to_hlt(&exit), "{exit:?}");
        }
    }
    // CR0.TS: #NM at the first SSE instruction.
    let (m, _, exit) = compare(&code(2), &slices(), config(), &|m| {
        m.cpu.state.cr0 |= ctl::CR0_TS;
    });
    assert_eq!(
        exit.reason,
        ExitReason::Exception(Fault::DeviceNotAvailable)
    );
    assert_eq!(m.cpu.retired, 5, "#NM at the MOVQ");
}

/// The flags a baseline block's floating-point instruction raises reach the guest's MXCSR
/// through the block's chained exit, and through a deferring exit after it (a load that
/// faults): only the last call divides inexactly, in compiled code, after earlier calls
/// (some interpreted) left MXCSR clean. Checked: without the merges MXCSR ends without PE.
#[test]
fn flags_raised_in_baseline_code_reach_mxcsr() {
    for fault in [false, true] {
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            let mut f = a.create_label();
            a.mov(rbx, DATA_BASE)?;
            a.mov(r14, DATA_BASE + 64)?;
            a.mov(rax, 1.0f64.to_bits())?;
            a.mov(qword_ptr(rbx), rax)?;
            a.mov(ecx, 20)?;
            a.set_label(&mut top)?;
            a.mov(edi, ecx)?;
            a.call(f)?;
            a.dec(ecx)?;
            a.jne(top)?;
            a.mov(rax, 3.0f64.to_bits())?;
            a.mov(qword_ptr(rbx), rax)?;
            if fault {
                a.mov(r14, TEST_RAM + 0x1000)?;
            }
            a.call(f)?;
            a.hlt()?;
            a.set_label(&mut f)?;
            a.mov(eax, 1)?;
            a.cvtsi2sd(xmm0, eax)?;
            a.divsd(xmm0, qword_ptr(rbx))?;
            a.mov(rdx, qword_ptr(r14))?;
            a.ret()
        });
        let (m, jit, exit) = compare(&code, &[1 << 20], config(), &|_| {});
        if fault {
            assert!(
                matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
                "{exit:?}"
            );
        } else {
            assert!(ran_to_hlt(&exit), "{exit:?}");
        }
        assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
        assert_eq!(m.cpu.state.mxcsr, 0x1f80 | 0x20, "PE only");
    }
}
