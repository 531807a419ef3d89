//! Indirect calls whose target the JIT takes into the caller's baseline trace or loop region
//! (`JitConfig::inline_calls`): a loop calls a function on the next code page through a
//! register, so the call goes into that function without leaving the caller's code — after a
//! check of the run-time target and of the callee's page, whose code the program rewrites
//! halfway, and whose target it changes in the last rounds.

mod common;

use common::*;
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_jit::JitConfig;

/// What the program varies after its first rounds through the call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Change {
    /// Nothing: the callee stays the one the JIT took in.
    None,
    /// At round 200 the loop rewrites the callee's `imul eax, eax, 7` to multiply by 9.
    Rewrite,
    /// From round 150 the loop calls `g` instead (the target compare fails).
    Target,
}

/// 400 rounds of `r12 ^= f(3 * ecx)` through `call r14`, `f` on the next code page (past
/// 4 KiB of padding); `f` reads the flags of its own compare with SETcc (a 1-byte register
/// write) and returns through RET to the caller's next block, which reads the carry of its
/// own ADD. R13 gets the sum of the results, RBP the count of carries.
fn program(change: Change) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut f = a.create_label();
        let mut g = a.create_label();
        let mut same = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.lea(r14, qword_ptr(f))?;
        a.lea(r15, qword_ptr(g))?;
        a.xor(ebp, ebp)?;
        a.mov(ecx, 400)?;
        a.set_label(&mut top)?;
        a.lea(edi, qword_ptr(rcx + rcx * 2))?;
        a.call(r14)?;
        a.xor(r12, rax)?;
        a.add(dword_ptr(rbx + 8), eax)?;
        a.adc(ebp, 0)?;
        match change {
            Change::None => {}
            Change::Rewrite => {
                a.cmp(ecx, 200)?;
                a.jne(same)?;
                // `imul eax, eax, 7` is 6B C0 07 at f + 2: its immediate becomes 9.
                a.mov(byte_ptr(r14 + 4), 9)?;
            }
            Change::Target => {
                a.cmp(ecx, 150)?;
                a.jne(same)?;
                a.mov(r14, r15)?;
            }
        }
        a.set_label(&mut same)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.mov(r13d, dword_ptr(rbx + 8))?;
        a.hlt()?;
        a.db(&[0xcc; 4200])?;
        // f(edi) = edi * 7 + (edi > 100)
        a.set_label(&mut f)?;
        a.mov(eax, edi)?;
        a.imul_3(eax, eax, 7)?;
        a.cmp(edi, 100)?;
        a.setg(dl)?;
        a.movzx(edx, dl)?;
        a.add(eax, edx)?;
        a.ret()?;
        // g(edi) = edi + 5
        a.set_label(&mut g)?;
        a.lea(eax, qword_ptr(rdi + 5))?;
        a.ret()
    })
}

/// The configurations the call goes inline in: the baseline tier's trace (a loop that calls
/// stays there, `call_loops_base`), and a Cranelift loop region (the tier off).
fn configs() -> [(&'static str, JitConfig); 2] {
    let base = JitConfig {
        threshold: 8,
        ..baseline_config()
    };
    let region = JitConfig {
        threshold: 8,
        baseline: false,
        ..region_config()
    };
    [("baseline trace", base), ("loop region", region)]
}

/// The interpreter's results for `change` (every engine must reach them).
fn expected(change: Change) -> (u64, u64, u64) {
    let mut m = machine(&program(change), &|_| {});
    let e = m.run(1 << 20);
    assert!(ran_to_hlt(&e), "{e:?}");
    (m.gpr(reg::R12), m.gpr(reg::R13), m.gpr(reg::RBP))
}

/// `change`'s program in both configurations against the interpreter at every budget slice:
/// the callee was taken in, and the results are the interpreter's.
fn matches_the_interpreter(change: Change) {
    let want = expected(change);
    for (name, config) in configs() {
        let (m, jit, exit) = compare(&program(change), &short_slices(), config, &|_| {});
        assert!(ran_to_hlt(&exit), "{name}: {exit:?}");
        assert!(
            jit.stats.inlined_calls > 0,
            "{name}: {}",
            jit.stats.summary()
        );
        let got = (m.gpr(reg::R12), m.gpr(reg::R13), m.gpr(reg::RBP));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn an_indirect_call_goes_into_the_callee_inside_the_caller() {
    matches_the_interpreter(Change::None);
    // Off: the same results, nothing taken in.
    let config = JitConfig {
        inline_calls: false,
        ..configs()[0].1.clone()
    };
    let (_, jit, exit) = compare(&program(Change::None), &short_slices(), config, &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert_eq!(jit.stats.inlined_calls, 0, "{}", jit.stats.summary());
}

/// The callee's page rewritten after the caller took it in: the page check on the way in
/// fails from then on, and the new code runs (a stale copy would keep multiplying by 7).
#[test]
fn a_rewritten_callee_is_not_run_from_the_callers_copy() {
    assert_ne!(expected(Change::Rewrite), expected(Change::None));
    matches_the_interpreter(Change::Rewrite);
}

/// Another run-time target than the one taken in: the call leaves for it.
#[test]
fn another_target_leaves_for_it() {
    assert_ne!(expected(Change::Target), expected(Change::None));
    matches_the_interpreter(Change::Target);
}

/// `Verify` compares the inlined code block by block with the interpreter.
#[test]
fn inlined_calls_verify_clean() {
    for change in [Change::None, Change::Rewrite, Change::Target] {
        for (name, config) in configs() {
            let v = verified_to_hlt(&program(change), config, 1 << 20);
            assert!(
                v.jit.stats.inlined_calls > 0,
                "{name} {change:?}: {}",
                v.jit.stats.summary()
            );
        }
    }
}
