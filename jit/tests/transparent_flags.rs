//! Region members that leave the status flags alone (`ret`, register moves, loads and stores,
//! `jmp`) pass the flag records they are entered with on to their successors instead of
//! folding them into RFLAGS on the way in (`lift::lazy_members`), and their exits that leave
//! the region hand the record over to the frame when the carry slot is empty at run time, or
//! fold both records otherwise (`Lower::store_flags_for_exit`). Both engines must agree at
//! every budget stop, at a fault inside such a member (with and without a carry record
//! pending), and in a recursive region whose leaf returns through a lone `ret`.

mod common;

use common::{compare, region_config, short_slices};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::{ExitReason, Fault};

/// A loop of four blocks: `top` writes flags (an ADD that carries, then INC, which leaves
/// the ADD's carry record pending beside its own, or CMP, one record), `mid` only moves memory and registers (a load
/// through RSI and a store), `tail` and `step` start with flag writers. At iteration `stop`
/// RSI turns non-canonical, so `mid`'s load raises #GP with the flags of `top` pending.
fn loop_program(stop: u32, inc: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut mid = a.create_label();
        let mut tail = a.create_label();
        let mut step = a.create_label();
        a.xor(ebx, ebx)?;
        a.mov(rax, 0xffff_ffff_ffff_fff0u64)?;
        a.mov(ecx, 0x7fff_fff0u32)?;
        a.mov(rsi, DATA_BASE)?;
        a.set_label(&mut top)?;
        // CF set from the second run on (RFLAGS in memory, from the XOR, has it clear).
        a.mov(r10, -1i64)?;
        a.add(r10, rbx)?;
        if inc {
            a.inc(ecx)?;
        } else {
            a.cmp(ecx, eax)?;
        }
        a.jmp(mid)?;
        a.set_label(&mut mid)?;
        a.mov(rdx, qword_ptr(rsi))?;
        a.lea(rdx, qword_ptr(rdx + rbx * 2))?;
        a.mov(qword_ptr(rsi + 8), rdx)?;
        a.mov(r9, rax)?;
        a.jmp(tail)?;
        a.set_label(&mut tail)?;
        a.add(rbx, 1i32)?;
        a.cmp(rbx, stop as i32)?;
        a.jne(step)?;
        a.mov(rsi, 0x8000_0000_0000_0000u64)?;
        a.set_label(&mut step)?;
        a.cmp(rbx, 700i32)?;
        a.jne(top)?;
        a.hlt()
    })
}

/// Some function compiled from the code is a region (it jumps on through a link), and no
/// function folds flags into RFLAGS inline (computing PF by a popcount): the records went
/// through the members that leave the flags alone.
fn assert_records_handed_on(jit: &lockstep_jit::Jit) {
    let irs = common::code_irs(jit);
    assert!(irs.iter().any(|ir| ir.contains("return_call")));
    assert!(
        irs.iter().all(|ir| !ir.contains("popcnt")),
        "inline flag fold"
    );
}

fn keep_ir() -> lockstep_jit::JitConfig {
    lockstep_jit::JitConfig {
        keep_ir: true,
        ..region_config()
    }
}

#[test]
fn a_fault_in_a_member_that_keeps_the_flags_finds_them_folded() {
    for inc in [false, true] {
        let (m, jit, exit) = compare(&loop_program(300, inc), &[1 << 20], keep_ir(), &|_| {});
        assert_eq!(exit.reason, ExitReason::Exception(Fault::GP0), "{exit:?}");
        assert_eq!(m.gpr(reg::RBX), 300);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        // The loop ran as one region whose edges hand the records through `mid`.
        assert_records_handed_on(&jit);
    }
}

#[test]
fn budget_stops_in_and_after_a_member_that_keeps_the_flags_match() {
    for inc in [false, true] {
        compare(
            &loop_program(10_000, inc),
            &short_slices(),
            region_config(),
            &|_| {},
        );
    }
}

/// Fibonacci the way GCC compiles its leaf test: `cmp edi,1; jbe` to a block that is only
/// `ret`, which returns to sites starting with register moves and an AND (so the CMP's
/// flags are dead there), or to the loop that calls it, whose site reads the carry with ADC
/// (there the record must be folded: a CMP of 1 with n < 2 leaves CF set for n = 0).
fn fib_program() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut outer = a.create_label();
        let mut fib = a.create_label();
        let mut leaf = a.create_label();
        a.mov(ecx, 24)?;
        a.xor(r12d, r12d)?;
        a.xor(r13d, r13d)?;
        a.set_label(&mut outer)?;
        a.mov(edi, ecx)?;
        a.and(edi, 7)?;
        a.call(fib)?;
        a.adc(r13, 0i32)?;
        a.add(r12, rax)?;
        a.dec(ecx)?;
        a.jnz(outer)?;
        a.mov(rbx, DATA_BASE)?;
        a.mov(qword_ptr(rbx), r12)?;
        a.hlt()?;
        a.set_label(&mut fib)?;
        a.mov(eax, edi)?;
        a.cmp(eax, 1i32)?;
        a.jbe(leaf)?;
        a.push(rbx)?;
        a.push(rbp)?;
        a.mov(ebx, edi)?;
        a.lea(edi, dword_ptr(rbx - 1))?;
        a.call(fib)?;
        a.mov(rbp, rax)?;
        a.lea(edi, dword_ptr(rbx - 2))?;
        a.and(edi, 0x7fff_ffffi32)?;
        a.call(fib)?;
        a.mov(rdx, rax)?;
        a.lea(rax, qword_ptr(rax + rbp))?;
        a.xor(edx, edx)?;
        a.pop(rbp)?;
        a.pop(rbx)?;
        a.ret()?;
        a.set_label(&mut leaf)?;
        a.ret()
    })
}

#[test]
fn a_lone_ret_hands_the_leaf_compare_on_to_its_return_sites() {
    let config = lockstep_jit::JitConfig {
        threshold: 8,
        promote: 100,
        ..keep_ir()
    };
    let (m, jit, exit) = compare(&fib_program(), &[1 << 22], config.clone(), &|_| {});
    assert!(common::ran_to_hlt(&exit), "{exit:?}");
    // fib(0..7) three times over (n = 24..1 masked to 0..7), and one carry per n = 0 site.
    let fib = [0u64, 1, 1, 2, 3, 5, 8, 13];
    let sum: u64 = (1..=24u64).map(|n| fib[(n & 7) as usize]).sum();
    assert_eq!(m.read_u64(DATA_BASE), sum);
    assert_eq!(m.gpr(reg::R13), 3);
    assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    // The recursive region hands the leaf's CMP on through the `ret`.
    assert_records_handed_on(&jit);
    let slices: Vec<u64> = (0..600).map(|i| 1 + (i * 7) % 19).collect();
    compare(&fib_program(), &slices, config, &|_| {});
}
