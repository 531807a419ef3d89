//! Patched exits (`lockstep_jit::patch`): a baseline function's direct exit, once its link
//! holds a baseline function, jumps straight to that function's fast entry — the trusted one
//! (no entry check) from a function with the same check word, the checked one otherwise —
//! which makes the budget check the link jump made. The results must be the interpreter's at
//! every budget, and rewritten code must never run stale through a patched jump.

mod common;

use common::{baseline_config, compare};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::TestMachine;
use lockstep_interp::ExitReason;
use lockstep_jit::JitConfig;

/// Single-block baseline functions (no traces, no regions), chained jumps counted.
fn config() -> JitConfig {
    JitConfig {
        region_blocks: 1,
        base_trace: 1,
        count_chains: true,
        promote: 0,
        ..baseline_config()
    }
}

/// A loop of `rounds` through three blocks: A and B in the first code page, C in the next
/// one (so A → B is a same-page exit, B → C and C → A cross pages). When ECX reaches
/// `rewrite_at`, C rewrites the immediate of B's `add ebx, imm32` with 7 (a store into the
/// page of A and B while neither runs).
fn three_block_loop(rounds: u32, rewrite_at: u32) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut blk_a = a.create_label();
        let mut blk_b = a.create_label();
        let mut blk_c = a.create_label();
        let mut keep = a.create_label();
        a.mov(ecx, rounds)?;
        a.xor(eax, eax)?;
        a.xor(ebx, ebx)?;
        a.lea(rdx, ptr(blk_b))?;
        a.jmp(blk_a)?;
        a.set_label(&mut blk_a)?;
        a.add(eax, 3)?;
        a.jmp(blk_b)?;
        a.set_label(&mut blk_b)?;
        a.add(ebx, 0x1234_5678)?; // 81 C3 imm32: the immediate at B + 2
        a.add(ebx, eax)?;
        a.jmp(blk_c)?;
        // C starts in the next page.
        a.db(&[0xcc; 4096])?;
        a.set_label(&mut blk_c)?;
        a.dec(ecx)?;
        a.cmp(ecx, rewrite_at)?;
        a.jne(keep)?;
        a.mov(dword_ptr(rdx + 2), 7)?;
        a.set_label(&mut keep)?;
        a.test(ecx, ecx)?;
        a.jne(blk_a)?;
        a.hlt()
    })
}

/// The loop matches the interpreter at every stopping point of short budget slices (the fast
/// entries' budget checks fail and leave for the dispatcher) and run whole, the exits get
/// patched, and the chained jumps are counted as through the links. Checked to fail with the
/// fast entries' budget check off (the budget overrun) and with every patched jump sent to the
/// trusted entry (the rewritten immediate does not take effect).
#[test]
fn patched_exits_match_the_interpreter_at_every_budget() {
    let code = three_block_loop(3000, 1000);
    let mut slices = common::short_slices();
    slices.extend([50_000, 1 << 20]);
    let (m, jit, exit) = compare(&code, &slices, config(), &|_| {});
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    assert_eq!(m.gpr(reg::RAX), 3 * 3000);
    // B added 0x1234_5678 in rounds 3000..=1001 (2000 of them), 7 in the last 1000.
    let b_imm = (2000u64 * 0x1234_5678 + 1000 * 7) as u32;
    let eax_sum = (1..=3000u64).map(|k| 3 * k).sum::<u64>() as u32;
    assert_eq!(m.gpr(reg::RBX) as u32, b_imm.wrapping_add(eax_sum));
    assert!(
        jit.stats.patched_exits >= 3,
        "{:?}",
        jit.stats.patched_exits
    );
    assert!(jit.stats.chained_runs > 3000, "{}", jit.stats.chained_runs);
    assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
}

/// With patching off (`JitConfig::patch_exits`) the same run retires the same instructions,
/// ends in the same state and counts the same chained jumps: the fast entries count and
/// check as the links do. (Budget slices of 40 instructions: the dispatcher, which scans for
/// filled links every 64 dispatches here, runs between them.)
#[test]
fn patched_and_linked_runs_agree() {
    let code = three_block_loop(500, 200);
    let slices = vec![40; 200];
    let (m, jit, _) = compare(&code, &slices, config(), &|_| {});
    let linked = JitConfig {
        patch_exits: false,
        ..config()
    };
    let (m2, jit2, _) = compare(&code, &slices, linked, &|_| {});
    assert_eq!(m.cpu.state, m2.cpu.state);
    assert_eq!(m.cpu.retired, m2.cpu.retired);
    assert_eq!(jit.stats.chained_runs, jit2.stats.chained_runs);
    assert!(jit.stats.patched_exits >= 3);
    assert_eq!(jit2.stats.patched_exits, 0);
}
