//! Flag replay at region edges: a loop block entered only from blocks that end with the same
//! CMP/TEST of registers recomputes the status flags from the registers instead of being
//! handed the record (and its first run, from the function entry, goes through a copy that
//! takes the frame's record). A fault before the block overwrites the flags, a block that
//! reads the flags first, budget stops anywhere, and sources that do not qualify must all
//! give the interpreter's state.

mod common;

use common::{compare, region_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, TEST_RAM};
use lockstep_interp::ExitReason;

/// The sieve's inner loop: a byte store, a step, `cmp rbp, rax; jae top`. The stores walk
/// up to the end of RAM, so the store of iteration 67 page-faults, with the flags of the
/// previous iteration's CMP (replayed on entry to the loop block) still current.
fn sieve_loop() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rbx, TEST_RAM - 200)?;
        a.xor(eax, eax)?;
        a.mov(edx, 3)?;
        a.mov(rbp, 1u64 << 40)?;
        a.set_label(&mut top)?;
        a.mov(byte_ptr(rbx + rax), 1)?;
        a.add(rax, rdx)?;
        a.cmp(rbp, rax)?;
        a.jae(top)?;
        a.hlt()
    })
}

#[test]
fn a_fault_before_the_flags_are_overwritten_sees_the_replayed_compare() {
    let (m, jit, exit) = compare(&sieve_loop(), &[1 << 20], region_config(), &|_| {});
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    assert_eq!(m.gpr(reg::RAX), 201);
    // CMP RBP, RAX with RBP far above: no carry, not zero, positive.
    let f = m.cpu.state.rflags;
    assert_eq!(f & 0xc1, 0, "CF, ZF and SF clear: {f:#x}");
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
}

#[test]
fn budget_stops_in_the_replaying_loop_match_the_interpreter() {
    let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 7919) % 13).collect();
    compare(&sieve_loop(), &slices, region_config(), &|_| {});
}

/// A loop whose first instruction reads the carry of the CMP at the end of the previous
/// iteration (`adc`): the replayed record feeds it directly.
#[test]
fn a_block_that_reads_the_flags_first_gets_the_replayed_carry() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.xor(r8d, r8d)?;
        a.xor(ebx, ebx)?;
        a.mov(ecx, 500)?;
        a.set_label(&mut top)?;
        a.adc(r8, 0)?;
        a.imul_3(edx, ebx, 0x9e37_79b1u32 as i32)?;
        a.add(ebx, 1)?;
        a.cmp(edx, 0x8000_0000u32 as i32)?;
        a.cmp(ebx, ecx)?;
        a.jne(top)?;
        a.mov(r9, rbx)?;
        a.cmp(r9, 100)?;
        a.hlt()
    });
    let (m, jit, _) = compare(&code, &[1 << 20], region_config(), &|_| {});
    // `cmp ebx, ecx` with EBX < ECX sets CF on each of the 499 back edges.
    assert_eq!(m.gpr(reg::R8), 499);
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
}

/// A loop with a block that reads CF first (`setb`), entered from two blocks: ending with
/// `cmp ebx, esi` and `cmp esi, ebx` (different compares: no replay), or (`clobber`) both
/// with `cmp ebx, esi` but one changing ESI after it (not replayable). The flags then travel
/// as records, and exits anywhere still match.
fn two_sources(clobber: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut even = a.create_label();
        let mut tgt = a.create_label();
        a.xor(r8d, r8d)?;
        a.xor(ebx, ebx)?;
        a.mov(esi, 300)?;
        a.set_label(&mut top)?;
        a.add(ebx, 1)?;
        a.test(bl, 1)?;
        a.jz(even)?;
        a.cmp(ebx, esi)?;
        a.jmp(tgt)?;
        a.set_label(&mut even)?;
        if clobber {
            a.cmp(ebx, esi)?;
            a.lea(esi, dword_ptr(rsi + 1))?;
        } else {
            a.cmp(esi, ebx)?;
        }
        a.jmp(tgt)?;
        a.set_label(&mut tgt)?;
        a.setb(al)?;
        a.movzx(eax, al)?;
        a.add(r8, rax)?;
        a.cmp(ebx, 700)?;
        a.jb(top)?;
        a.hlt()
    })
}

#[test]
fn sources_that_do_not_qualify_still_hand_over_their_flags() {
    for clobber in [false, true] {
        let code = two_sources(clobber);
        let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 7919) % 29).collect();
        compare(&code, &slices, region_config(), &|_| {});
        let (m, jit, _) = compare(&code, &[1 << 20], region_config(), &|_| {});
        assert!(m.gpr(reg::R8) > 0, "clobber {clobber}");
        assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    }
}

/// Loops whose back edge leaves the flags of `sub ecx, 1` (or `add ebx, imm`): the loop block
/// recomputes them from the result and the source. The head reads CF first (`adc`), and a
/// store walks off the end of RAM, faulting with the replayed flags current.
fn alu_tail_loop(add: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.xor(r8d, r8d)?;
        a.mov(ebx, 7)?;
        a.mov(ecx, 100_000)?;
        a.mov(rsi, TEST_RAM - 600)?;
        a.xor(edi, edi)?;
        a.set_label(&mut top)?;
        a.adc(r8, 0)?;
        a.mov(byte_ptr(rsi + rdi), 1)?;
        a.add(rdi, 5)?;
        if add {
            a.add(ebx, 0x9e37_79b9u32 as i32)?;
            a.jnz(top)?;
        } else {
            a.add(ebx, 0x9e37_79b9u32 as i32)?;
            a.sub(ecx, 1)?;
            a.jnz(top)?;
        }
        a.hlt()
    })
}

#[test]
fn alu_tails_are_replayed_from_the_result() {
    for add in [false, true] {
        let code = alu_tail_loop(add);
        let (m, jit, exit) = compare(&code, &[1 << 20], region_config(), &|_| {});
        assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
        // The 121st store (RDI = 600) faults.
        assert_eq!(m.gpr(reg::RDI), 600, "add {add}");
        // ADC adds the carry of the tail: EBX's wrap-arounds, or SUB ECX's borrow (never).
        assert_eq!(m.gpr(reg::R8) > 0, add, "add {add}");
        assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
        let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 7919) % 17).collect();
        compare(&code, &slices, region_config(), &|_| {});
    }
}
