//! The flags of the instruction before a Jcc that ends a block of a baseline trace
//! (`Emit::defer_capture`): captured on the Jcc's exit path, and on the way on unless the
//! next block's first instruction replaces every status flag before anything reads them. A
//! memory operand there does not: its access may leave for the interpreter (here, a page
//! fault) before the instruction, with the flags of the compare before the Jcc.

mod common;

use common::*;
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::{ExitReason, Fault};
use lockstep_jit::JitConfig;

/// Twelve rounds through `cmp ecx, 100; jb on` (always taken) and, at `on`, `first` (the
/// next block's first instruction, through RBX), then `adc edx, 0` and `dec ecx; jnz`. In the
/// last round RBX is 0x1_0000 (supervisor-only), so a memory operand through it faults.
fn program(first: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut blk = a.create_label();
        let mut on = a.create_label();
        let mut out = a.create_label();
        a.mov(r15, DATA_BASE + 0x100)?;
        a.mov(r14, 0x1_0000u64)?;
        a.xor(edx, edx)?;
        a.mov(ecx, 12)?;
        a.set_label(&mut top)?;
        // (No branch: the last round runs the same trace.)
        a.mov(rbx, r15)?;
        a.cmp(ecx, 1)?;
        a.cmove(rbx, r14)?;
        a.jmp(blk)?;
        a.set_label(&mut blk)?;
        a.cmp(ecx, 100)?;
        a.jb(on)?;
        a.jmp(out)?;
        a.set_label(&mut on)?;
        first(a)?;
        a.adc(edx, 0)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.set_label(&mut out)?;
        a.hlt()
    })
}

fn config() -> JitConfig {
    JitConfig {
        threshold: 4,
        ..baseline_config()
    }
}

/// `add eax, [rbx]` first, or `mov esi, [rbx]; add eax, esi`: the last round faults at the
/// load, RFLAGS those of `cmp ecx, 100` (CF set). Checked: with a memory operand taken as
/// replacing the flags, or a MOV from memory as leaving them alone (no capture on the way
/// on), the JIT's RFLAGS at the fault are older ones.
#[test]
fn a_memory_operand_after_a_trace_jcc_sees_the_compare_s_flags() {
    type First = fn(&mut CodeAssembler) -> Result<(), IcedError>;
    let firsts: [First; 2] = [
        |a| a.add(eax, dword_ptr(rbx)),
        |a| {
            a.mov(esi, dword_ptr(rbx))?;
            a.add(eax, esi)
        },
    ];
    let setup = |m: &mut TestMachine| m.load(DATA_BASE + 0x100, &7u32.to_le_bytes());
    // (In one slice, so that the last round runs in the trace; then at every slice.)
    for (first, slices) in firsts
        .into_iter()
        .flat_map(|f| [(f, vec![1 << 20]), (f, short_slices())])
    {
        let code = program(first);
        let (m, jit, exit) = compare(&code, &slices, config(), &setup);
        assert!(
            matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
            "{exit:?}"
        );
        assert_eq!(m.gpr(reg::RCX), 1);
        assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
    }
}

/// `add eax, ebx` / `cmp ebx, 5` first, or after MOVs of registers and immediates (they
/// replace the flags; nothing captured on the way on), SETcc of the compare's flags, and
/// `adc eax, ebx` (reads CF: captured), also after a MOV: every round to the end, at every
/// budget slice, and under `Verify`.
#[test]
fn register_operands_after_a_trace_jcc_match_the_interpreter() {
    type First = fn(&mut CodeAssembler) -> Result<(), IcedError>;
    let firsts: [First; 6] = [
        |a| a.add(eax, ebx),
        // Conditions read straight from the host's flags, which the Jcc's way on leaves as
        // the compare's (`Emit::next_part`).
        |a| {
            a.seto(sil)?;
            a.setbe(dil)?;
            a.sets(r9b)?;
            a.add(esi, edi)?;
            a.add(eax, r9d)?;
            a.add(eax, esi)
        },
        |a| a.cmp(ebx, 5),
        |a| a.adc(eax, ebx),
        |a| {
            a.mov(esi, ebx)?;
            a.movzx(edi, si)?;
            a.mov(r9d, 3)?;
            a.sub(eax, esi)
        },
        |a| {
            a.mov(rsi, rbx)?;
            a.adc(eax, esi)
        },
    ];
    for first in firsts {
        let code = program(first);
        for slices in [vec![1 << 20], short_slices()] {
            let (m, jit, exit) = compare(&code, &slices, config(), &|_| {});
            assert!(
                matches!(exit.reason, ExitReason::Exception(Fault::GP0)),
                "{exit:?}"
            );
            assert_eq!(m.gpr(reg::RCX), 0);
            assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
        }
        verified_to_hlt(&code, config(), 1 << 20);
    }
}
