//! Flags that nothing observes: when a later register-only instruction of the block
//! overwrites every status flag first (`flags::dead_after`), a shift by CL skips keeping the
//! old flags for a masked count of 0 (a cold path), and TZCNT/LZCNT/POPCNT skip folding
//! theirs into RFLAGS. Counts of 0 followed by an overwrite, by a faulting load, and by a
//! flag read must all give the interpreter's state.

mod common;

use common::{compare, eager_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, TEST_RAM};
use lockstep_interp::ExitReason;

/// The bit-reversal loop of the `bits` benchmark: two shifts by CL per iteration, each
/// followed (after register moves) by an instruction that overwrites all status flags; the
/// first iteration shifts by 0. The carry of the last SHL is then read by `setc` after the
/// loop, where the flags are live.
#[test]
fn dead_shift_flags_in_a_loop_match_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(r15, 0x8000_0000_dead_beefu64)?;
        a.xor(esi, esi)?;
        a.xor(edx, edx)?;
        a.mov(ebx, 63)?;
        a.set_label(&mut top)?;
        a.mov(ecx, edx)?;
        a.mov(rax, r15)?;
        a.shr(rax, cl)?;
        a.mov(ecx, ebx)?;
        a.sub(ecx, edx)?;
        a.and(eax, 1)?;
        a.add(edx, 1)?;
        a.shl(rax, cl)?;
        a.or(rsi, rax)?;
        a.cmp(edx, 64)?;
        a.jne(top)?;
        // A shift by 0 whose flags are read (SETC, SETE): they must be the CMP's.
        a.mov(ecx, 0)?;
        a.cmp(rsi, r15)?;
        a.shl(rsi, cl)?;
        a.setc(r8b)?;
        a.sete(r9b)?;
        a.hlt()
    });
    let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 7919) % 17).collect();
    compare(&code, &slices, eager_config(), &|_| {});
    let (m, _, _) = compare(&code, &[1 << 20], eager_config(), &|_| {});
    // RSI is R15 reversed; the CMP before the shift by 0 decides CF and ZF.
    assert_eq!(m.gpr(reg::RSI), 0x8000_0000_dead_beefu64.reverse_bits());
    let (cf, zf) = (m.gpr(reg::R8) & 0xff, m.gpr(reg::R9) & 0xff);
    let want_cf = (0x8000_0000_dead_beefu64.reverse_bits() < 0x8000_0000_dead_beefu64) as u64;
    assert_eq!((cf, zf), (want_cf, 0));
}

/// A shift by 0 followed by a load that faults before the overwriting ADD: the fault must see
/// the flags of the CMP before the shift (the flags are not dead across a memory access).
#[test]
fn a_fault_after_a_shift_by_zero_sees_the_old_flags() {
    let code = TestMachine::assemble(|a| {
        a.mov(rbx, TEST_RAM + 0x1000)?;
        a.xor(ecx, ecx)?;
        a.mov(eax, 5)?;
        a.cmp(eax, 7)?;
        a.sar(rax, cl)?;
        a.mov(rdx, qword_ptr(rbx))?;
        a.add(rdx, rax)?;
        a.hlt()
    });
    let (m, _, exit) = compare(&code, &[1 << 20], eager_config(), &|_| {});
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    // CMP 5, 7: borrow (CF) and negative (SF), not zero.
    let f = m.cpu.state.rflags;
    assert_eq!(f & 0xc1, 0x81, "CF and SF set, ZF clear: {f:#x}");
}

/// Shifts by every count 0..=64 of every form, each followed by an overwrite or by a flag
/// read, under random budget slices.
#[test]
fn every_count_and_form_matches_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(r12, 0x0123_4567_89ab_cdefu64)?;
        a.mov(r13, 0xfedc_ba98_7654_3210u64)?;
        a.xor(r14d, r14d)?;
        a.xor(ecx, ecx)?;
        a.set_label(&mut top)?;
        a.mov(rax, r12)?;
        a.cmp(rcx, 31)?;
        a.rol(rax, cl)?;
        a.setc(dl)?;
        a.add(r14, rdx)?;
        a.mov(rax, r13)?;
        a.shrd(rax, r12, cl)?;
        a.xor(r14, rax)?;
        a.mov(eax, r12d)?;
        a.sar(eax, cl)?;
        a.lea(r8, qword_ptr(rax + 3))?;
        a.test(r8, r14)?;
        a.seto(dl)?;
        a.add(r14, rdx)?;
        a.mov(rax, r13)?;
        a.shl(ax, cl)?;
        a.adc(r14, rax)?;
        a.add(ecx, 1)?;
        a.cmp(ecx, 65)?;
        a.jne(top)?;
        a.hlt()
    });
    let slices: Vec<u64> = (0..600).map(|i| 1 + (i * 104_729) % 23).collect();
    compare(&code, &slices, eager_config(), &|_| {});
}

/// TZCNT/LZCNT/POPCNT followed by TEST (dead), and by a faulting load before the overwrite
/// (live: the fault sees TZCNT's CF and ZF).
#[test]
fn counts_with_dead_and_live_flags_match_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rsi, 0x0000_0100_0000_0000u64)?;
        a.xor(r14d, r14d)?;
        a.set_label(&mut top)?;
        a.tzcnt(rdx, rsi)?;
        a.test(sil, 1)?;
        a.setz(al)?;
        a.add(r14, rdx)?;
        a.lzcnt(rdx, rsi)?;
        a.xor(r14, rdx)?;
        a.popcnt(rdx, r14)?;
        a.sub(r14, rdx)?;
        a.shr(rsi, 1)?;
        a.jnz(top)?;
        // TZCNT of 0: CF set, ZF clear; then a load that faults.
        a.mov(rbx, TEST_RAM + 0x1000)?;
        a.tzcnt(rdx, rsi)?;
        a.mov(rcx, qword_ptr(rbx))?;
        a.add(rcx, rdx)?;
        a.hlt()
    });
    let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 7919) % 11).collect();
    compare(&code, &slices, eager_config(), &|_| {});
    let (m, _, exit) = compare(&code, &[1 << 20], eager_config(), &|_| {});
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    assert_eq!(m.gpr(reg::RDX), 64);
    let f = m.cpu.state.rflags;
    assert_eq!(f & 0x41, 0x01, "CF set, ZF clear: {f:#x}");
}
