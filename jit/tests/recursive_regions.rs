//! Recursive regions (`JitConfig::recursive_regions`): a function that calls itself is
//! compiled as one region (after its blocks' baseline functions are promoted, or at once
//! without the baseline tier), its calls and returns jumps inside the function. Both engines
//! must agree at every budget stop, with the setting on and off, under `Verify`, when a
//! return goes somewhere other than a return site, and when flags cross a call or a return.

mod common;

use common::{compare, ran_to_hlt};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_jit::JitConfig;

/// Threshold 8; a block of a recursive function goes to the baseline tier first and is
/// promoted (its recursive region compiled) after 100 runs — or at once without the tier.
fn config(recursive_regions: bool, baseline: bool) -> JitConfig {
    JitConfig {
        threshold: 8,
        recursive_regions,
        baseline,
        promote: 100,
        ..common::eager_config()
    }
}

/// Budget slices of 1..=17 instructions, then one run to the end.
fn slices() -> Vec<u64> {
    let mut v: Vec<u64> = (0..400).map(|i| 1 + (i * 7) % 17).collect();
    v.push(1 << 22);
    v
}

/// Fibonacci by naive recursion, called from a loop with n = 6..=13. The leaf's ADC reads
/// the carry of its CMP; the caller's ADC after the second call reads the carry the callee's
/// last flag write left across the return (set by a leaf's last CMP for fib(0)); the
/// counter in memory changes on every non-leaf call. `indirect`: the recursive calls go
/// through a register instead (then the function is no recursive region).
fn fib_program(indirect: bool) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut outer = a.create_label();
        let mut fib = a.create_label();
        let mut leaf = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.lea(r15, qword_ptr(fib))?;
        a.mov(ecx, 16)?;
        a.xor(r12d, r12d)?;
        a.xor(r14d, r14d)?;
        a.set_label(&mut outer)?;
        a.mov(edi, ecx)?;
        a.and(edi, 7)?;
        a.add(edi, 6)?;
        a.call(fib)?;
        a.add(r12, rax)?;
        a.mov(qword_ptr(rbx + 8), r12)?;
        a.dec(ecx)?;
        a.jnz(outer)?;
        a.mov(r13, qword_ptr(rbx))?;
        a.hlt()?;

        let fib_at = fib;
        let call_fib = |a: &mut CodeAssembler| {
            if indirect {
                a.call(r15)
            } else {
                a.call(fib_at)
            }
        };
        a.set_label(&mut fib)?;
        a.cmp(edi, 2)?;
        a.jb(leaf)?;
        a.push(rbp)?;
        a.push(r13)?;
        a.mov(ebp, edi)?;
        a.lea(edi, dword_ptr(rbp - 1))?;
        call_fib(a)?;
        a.mov(r13, rax)?;
        a.lea(edi, dword_ptr(rbp - 2))?;
        call_fib(a)?;
        a.adc(r14, 0)?;
        a.add(rax, r13)?;
        a.add(dword_ptr(rbx), eax)?;
        a.pop(r13)?;
        a.pop(rbp)?;
        a.ret()?;
        a.set_label(&mut leaf)?;
        a.mov(eax, edi)?;
        a.adc(dword_ptr(rbx + 16), 0)?;
        a.cmp(edi, 1)?; // CF for the caller: fib(0)
        a.ret()
    })
}

#[test]
fn recursion_matches_the_interpreter() {
    let code = fib_program(false);
    for (recursive, baseline) in [(false, true), (true, true), (true, false)] {
        let (m, jit, exit) = compare(&code, &slices(), config(recursive, baseline), &|_| {});
        assert!(ran_to_hlt(&exit), "{exit:?}");
        assert_eq!(
            jit.stats.recursive > 0,
            recursive,
            "{}",
            jit.stats.summary()
        );
        // fib(6..=13) twice each: 2 * (8 + 13 + 21 + 34 + 55 + 89 + 144 + 233).
        assert_eq!(m.gpr(reg::R12), 2 * 597);
        assert!(m.gpr(reg::R14) != 0);
    }
    let v = common::verified_to_hlt(&code, config(true, true), 1 << 22);
    assert!(v.jit.stats.recursive > 0, "{}", v.jit.stats.summary());
}

#[test]
fn recursion_through_a_pointer_is_no_recursive_region() {
    let code = fib_program(true);
    let (m, jit, exit) = compare(&code, &slices(), config(true, true), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert_eq!(jit.stats.recursive, 0, "{}", jit.stats.summary());
    assert_eq!(m.gpr(reg::R12), 2 * 597);
}

/// A recursive function whose deepest call returns, on odd rounds, two bytes past its return
/// site (over a short JMP): the RET's target is no return site of the region, so the
/// function leaves there, and the rest agrees.
#[test]
fn a_return_past_its_site_leaves_the_region() {
    let code = TestMachine::assemble(|a| {
        let mut outer = a.create_label();
        let mut down = a.create_label();
        let mut bottom = a.create_label();
        let mut after = a.create_label();
        let mut bad = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.mov(ecx, 200)?;
        a.set_label(&mut outer)?;
        a.mov(edi, ecx)?;
        a.and(edi, 7)?;
        a.call(down)?;
        a.dec(ecx)?;
        a.jnz(outer)?;
        a.hlt()?;

        // down(edi): recurse to 0; the call at depth 0 returns past the JMP after it.
        a.set_label(&mut down)?;
        a.add(qword_ptr(rbx), 1)?;
        a.test(edi, edi)?;
        a.jz(bottom)?;
        a.dec(edi)?;
        a.call(down)?;
        a.jmp(after)?;
        a.set_label(&mut bottom)?;
        a.call(bad)?;
        a.jmp(after)?; // skipped when `bad` returns past it.
        a.add(qword_ptr(rbx + 8), 1)?;
        a.set_label(&mut after)?;
        a.ret()?;
        // On odd rounds only, so that the return site runs too (and is a region member).
        a.set_label(&mut bad)?;
        let mut plain = a.create_label();
        a.test(cl, 1)?;
        a.jz(plain)?;
        a.add(qword_ptr(rsp), 2)?;
        a.set_label(&mut plain)?;
        a.ret()
    });
    for baseline in [true, false] {
        let (m, jit, exit) = compare(&code, &slices(), config(true, baseline), &|_| {});
        assert!(ran_to_hlt(&exit), "{exit:?}");
        assert!(jit.stats.recursive > 0, "{}", jit.stats.summary());
        assert_eq!(m.gpr(reg::RCX), 0);
    }
}

/// A function that calls itself, each run mostly a loop of its own (300 instructions or so
/// per run, against fib's few): at its promotion its recursive region is not compiled
/// (`Jit::tier_up`: its runs are too long for the region to pay), and it stays in the
/// baseline tier, its loop a region of its own; the results agree all the same.
#[test]
fn a_recursion_whose_runs_are_long_keeps_its_baseline_code() {
    let code = TestMachine::assemble(|a| {
        let mut outer = a.create_label();
        let mut walk = a.create_label();
        let mut sum = a.create_label();
        let mut done = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.mov(ecx, 40)?;
        a.set_label(&mut outer)?;
        a.mov(edi, 6)?;
        a.call(walk)?;
        a.dec(ecx)?;
        a.jnz(outer)?;
        a.mov(r13d, dword_ptr(rbx))?;
        a.hlt()?;
        a.set_label(&mut walk)?;
        a.test(edi, edi)?;
        a.jz(done)?;
        a.push(rbp)?;
        a.mov(ebp, edi)?;
        a.mov(eax, 100)?;
        a.set_label(&mut sum)?;
        a.add(dword_ptr(rbx), eax)?;
        a.dec(eax)?;
        a.jnz(sum)?;
        a.lea(edi, dword_ptr(rbp - 1))?;
        a.call(walk)?;
        a.pop(rbp)?;
        a.set_label(&mut done)?;
        a.ret()
    });
    let (m, jit, exit) = compare(&code, &slices(), config(true, true), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert_eq!(jit.stats.recursive, 0, "{}", jit.stats.summary());
    assert!(jit.stats.recursion_declined > 0, "{}", jit.stats.summary());
    // 40 rounds of six runs that each add 100 + 99 + ... + 1.
    assert_eq!(m.gpr(reg::R13), 40 * 6 * 5050);
}
