//! A baseline trace that starts at the return site of a CALL it makes and ends with the
//! callee's RET (`Emit::ret_to_top`): a loop whose body calls a function, entered at the
//! return site. When the RET returns to the start, the function goes back to its top without
//! an exit; when the callee changes its return address, the RET leaves for it.

mod common;

use common::*;
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::TestMachine;
use lockstep_jit::JitConfig;

/// 300 rounds of `rax += f(rcx)`, entered at the CALL's return site (`jmp back` first, so
/// that block runs first and the trace starts there: the return site, the CALL, `f`); in
/// round `odd` (none when 0), `f` returns to `other` instead, which adds 1000 and goes on at
/// the return site.
fn program(odd: u32) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut call = a.create_label();
        let mut back = a.create_label();
        let mut f = a.create_label();
        let mut other = a.create_label();
        a.mov(ecx, 300)?;
        a.xor(eax, eax)?;
        a.mov(edx, odd)?;
        a.jmp(back)?;
        a.set_label(&mut call)?;
        a.call(f)?;
        a.set_label(&mut back)?;
        a.dec(ecx)?;
        a.jnz(call)?;
        a.hlt()?;
        // f: rax += rcx * 3; in round `odd`, return to `other` (without a branch: the
        // trace's own RET sees the other address).
        a.set_label(&mut f)?;
        a.lea(rsi, qword_ptr(rcx + rcx * 2))?;
        a.add(rax, rsi)?;
        a.mov(rsi, qword_ptr(rsp))?;
        a.lea(rdi, qword_ptr(other))?;
        a.cmp(ecx, edx)?;
        a.cmove(rsi, rdi)?;
        a.mov(qword_ptr(rsp), rsi)?;
        a.ret()?;
        a.set_label(&mut other)?;
        a.add(rax, 1000)?;
        a.jmp(back)
    })
}

fn config() -> JitConfig {
    JitConfig {
        threshold: 8,
        count_chains: true,
        ..baseline_config()
    }
}

/// The interpreter's RAX at the end, and the JIT's at every budget slice. With the RET going
/// back to the top, the 300 rounds make a few chained jumps (before the trace is compiled,
/// and the round whose RET goes elsewhere); each round was one before. Checked: with
/// `ret_to_top` never set, 300+ chained jumps; with the RET's compare skipped, round `odd`
/// misses its 1000.
#[test]
fn a_ret_to_the_start_goes_round_and_another_leaves() {
    for odd in [0, 100] {
        let mut m = machine(&program(odd), &|_| {});
        let e = m.run(1 << 20);
        assert!(ran_to_hlt(&e), "{e:?}");
        let want = m.gpr(reg::RAX);
        assert_eq!(
            want,
            (1..300).map(|c| 3 * c).sum::<u64>() + if odd > 0 { 1000 } else { 0 }
        );
        let (m, jit, exit) = compare(&program(odd), &short_slices(), config(), &|_| {});
        assert!(ran_to_hlt(&exit), "{exit:?}");
        assert_eq!(m.gpr(reg::RAX), want, "round {odd}");
        assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
        let (_, jit, _) = compare(&program(odd), &[1 << 20], config(), &|_| {});
        assert!(
            jit.stats.chained_runs < 40,
            "round {odd}: {}",
            jit.stats.summary()
        );
    }
}

/// `Verify` finds nothing to report either way.
#[test]
fn ret_to_top_verifies_clean() {
    for odd in [0, 100] {
        let v = verified_to_hlt(&program(odd), config(), 1 << 20);
        assert!(v.jit.stats.baseline >= 1, "{}", v.jit.stats.summary());
    }
}
