//! Member entries: a region's function entered at one of its other members (a jump into the
//! middle of a compiled loop from outside it) starts at that member, with the flags and
//! registers the jump left, instead of that member compiling a function of its own.

mod common;

use common::{compare, machine};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::DATA_BASE;
use lockstep_interp::ExitReason;
use lockstep_jit::{JitConfig, Verify};

/// An inner loop of four blocks (`top`, `mid`, the XOR, `tail`) run ten times per outer
/// iteration;
/// the outer loop sits on the next code page, so it is never part of the inner loop's region.
/// Outer iterations enter the inner loop at `top`, at `mid` (whose ADC reads the carry the
/// last flag write left: a SUB's, handed over as a pending record, on the way in from outside;
/// `top`'s ADD inside) or at `tail` (whose first instruction overwrites every status flag), by
/// the outer counter modulo 3.
fn program() -> Vec<u8> {
    lockstep_interp::testkit::TestMachine::assemble(|a| {
        let mut outer = a.create_label();
        let mut back = a.create_label();
        let mut top = a.create_label();
        let mut mid = a.create_label();
        let mut tail = a.create_label();
        let mut not_mid = a.create_label();
        a.xor(ebx, ebx)?;
        a.xor(r8d, r8d)?;
        a.xor(ecx, ecx)?;
        a.mov(rsi, DATA_BASE)?;
        a.jmp(outer)?;
        // The inner loop.
        a.set_label(&mut top)?;
        a.add(rbx, rdx)?;
        a.add(rbx, -5i32)?;
        a.jz(tail)?;
        a.set_label(&mut mid)?;
        a.adc(r8, rbx)?;
        a.mov(qword_ptr(rsi + 8), r8)?;
        a.test(dl, 1i32)?;
        a.jz(tail)?;
        a.xor(r8, 0x55i32)?;
        a.set_label(&mut tail)?;
        a.add(edx, 1i32)?;
        a.mov(rax, qword_ptr(rsi + 8))?;
        a.add(r9, rax)?;
        a.cmp(edx, 10i32)?;
        a.jne(top)?;
        a.jmp(back)?;
        a.db(&[0xcc; 4096])?;
        // The outer loop, a page further.
        a.set_label(&mut outer)?;
        a.xor(edx, edx)?;
        a.mov(eax, ecx)?;
        a.mov(edi, 3u32)?;
        a.div(edi)?;
        a.mov(eax, edx)?;
        a.xor(edx, edx)?;
        a.cmp(eax, 1i32)?;
        a.jne(not_mid)?;
        // CF for `mid`'s ADC, left as a pending flag record (set while ECX < 100).
        a.mov(r10d, ecx)?;
        a.sub(r10d, 100i32)?;
        a.jmp(mid)?;
        a.set_label(&mut not_mid)?;
        a.cmp(eax, 2i32)?;
        a.je(tail)?;
        a.jmp(top)?;
        a.set_label(&mut back)?;
        a.add(ecx, 1i32)?;
        a.cmp(ecx, 300i32)?;
        a.jne(outer)?;
        a.hlt()
    })
}

/// The inner loop goes to the baseline tier first, and `mid` or `tail` reaching the
/// threshold from outside promotes it to a region (`members_alone` off: with it on, each
/// would get a baseline function of its own, see `loops_first.rs`), whose other members
/// then become member entries.
fn config() -> JitConfig {
    JitConfig {
        threshold: 40,
        batch: 1,
        members_alone: false,
        ..JitConfig::default()
    }
}

#[test]
fn a_jump_into_a_compiled_loop_runs_the_loop_function_from_that_member() {
    let (m, jit, exit) = compare(&program(), &[1 << 20], config(), &|_| {});
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    assert_eq!(m.gpr(reg::RCX), 300);
    // `mid` and `tail` ran the loop's function (entered from outside) instead of compiling
    // regions of their own.
    let s = &jit.stats;
    assert!(s.member_entries >= 2, "{}", s.summary());
    assert!(s.region_edges > 0, "{}", s.summary());
    assert!(
        s.compiled_runs + s.interp_runs < 1200,
        "the loop ran through the dispatcher: {}",
        s.summary()
    );
}

/// Budgets that end at every few instructions: entries at members stop exactly where the
/// interpreter stops (the budget check covers the member's own block).
#[test]
fn member_entries_stop_exactly_at_any_budget() {
    for step in [7u64, 13, 29, 61] {
        let slices = vec![step; 3000];
        let (_, jit, _) = compare(&program(), &slices, config(), &|_| {});
        assert!(jit.stats.member_entries >= 1, "{}", jit.stats.summary());
    }
}

#[test]
fn verify_passes_member_entries() {
    let mut m = machine(&program(), &|_| {});
    let mut v = Verify::new(config());
    let e = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 1 << 20)
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(matches!(e.reason, ExitReason::Exception(_)));
    assert_eq!(m.gpr(reg::RCX), 300);
}
