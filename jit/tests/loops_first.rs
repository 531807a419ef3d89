//! Loops to the baseline tier first (`JitConfig::loops_base_first`): a loop goes to the
//! baseline tier at the threshold and its Cranelift region comes with the promotion — when
//! its run counter runs out. Another block of the loop that reaches the threshold from the
//! dispatcher is compiled alone, without a loop or a counter (`JitConfig::members_alone`),
//! or, with that off, promotes the loop's head; either way no loop entered mid-body.

mod common;

use common::{baseline_config, compare, ran_to_hlt, short_slices};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_jit::JitConfig;

/// A loop of three blocks: the head, which branches on the counter's low bits, a side
/// block taken every fourth round (the baseline trace follows the way run more often, so
/// the side block is reached from the dispatcher, counting towards the threshold), and the
/// tail, which jumps back to the head. A flag-reading ADC in the tail and a store every
/// round.
fn program(rounds: u32) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut head = a.create_label();
        let mut side = a.create_label();
        let mut tail = a.create_label();
        a.mov(ecx, rounds)?;
        a.xor(eax, eax)?;
        a.xor(r8d, r8d)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut head)?;
        a.add(rax, rcx)?;
        a.test(cl, 3)?;
        a.jz(side)?;
        a.imul_3(edx, ecx, 13)?;
        a.jmp(tail)?;
        a.set_label(&mut side)?;
        a.lea(edx, dword_ptr(rcx + rcx * 2))?;
        a.xor(rax, 0x5a5ai32)?;
        a.set_label(&mut tail)?;
        a.add(r8d, edx)?;
        a.adc(r8d, 0)?;
        a.mov(qword_ptr(rbx + 8), r8)?;
        a.dec(ecx)?;
        a.jnz(head)?;
        a.hlt()
    })
}

/// A loop of two blocks joined by a JMP, which the head's baseline trace runs whole (the
/// tail's jump back goes round inside the function): only the run counter, counted down
/// by the rounds, promotes it.
fn straight_program(rounds: u32) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut head = a.create_label();
        let mut tail = a.create_label();
        a.mov(ecx, rounds)?;
        a.xor(eax, eax)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut head)?;
        a.add(rax, rcx)?;
        a.mov(qword_ptr(rbx + 8), rax)?;
        a.jmp(tail)?;
        a.db(&[0xcc; 16])?;
        a.set_label(&mut tail)?;
        a.imul_3(edx, ecx, 7)?;
        a.add(r8d, edx)?;
        a.dec(ecx)?;
        a.jnz(head)?;
        a.hlt()
    })
}

/// The Cranelift functions compiled (every compile but the baseline tier's).
fn cranelift_compiles(jit: &lockstep_jit::Jit) -> u64 {
    jit.stats.compiled - jit.stats.baseline
}

/// A baseline-first loop whose run counter runs out (counted down by its rounds: it is
/// entered once) is promoted once, to one Cranelift loop region; results, stops and state
/// match the interpreter's at every budget slice.
#[test]
fn a_loop_runs_baseline_first_then_its_region() {
    let code = straight_program(3000);
    let config = JitConfig {
        threshold: 8,
        promote: 1000,
        ..baseline_config()
    };
    // One slice: the loop is entered once, so only its rounds count the counter down.
    let (m, jit, exit) = compare(&code, &[1 << 20], config.clone(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
    assert_eq!(jit.stats.promoted, 1, "{}", jit.stats.summary());
    assert_eq!(cranelift_compiles(&jit), 1, "{}", jit.stats.summary());
    assert!(jit.stats.region_blocks >= 2, "{}", jit.stats.summary());
    // Every stopping point of short budget slices.
    let (m1, _, _) = compare(&code, &short_slices(), config.clone(), &|_| {});
    assert_eq!(m1.gpr(reg::R8), m.gpr(reg::R8));
    // Off: the region at the threshold, nothing promoted.
    let off = JitConfig {
        loops_base_first: false,
        ..config
    };
    let (m2, jit2, _) = compare(&code, &[1 << 20], off, &|_| {});
    assert_eq!(m2.gpr(reg::R8), m.gpr(reg::R8));
    assert_eq!(jit2.stats.promoted, 0, "{}", jit2.stats.summary());
}

/// With a run counter that never runs out here and `members_alone` off, the side block
/// reaching the threshold from the dispatcher promotes the loop: one Cranelift region (the
/// head's), not a second baseline-first loop entered at the side block.
#[test]
fn a_member_reaching_the_threshold_promotes_the_head() {
    let code = program(3000);
    let config = JitConfig {
        threshold: 8,
        promote: 1 << 30,
        members_alone: false,
        ..baseline_config()
    };
    let (_, jit, exit) = compare(&code, &[1 << 20], config.clone(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert_eq!(jit.stats.promoted, 1, "{}", jit.stats.summary());
    assert_eq!(cranelift_compiles(&jit), 1, "{}", jit.stats.summary());
    let v = common::verified_to_hlt(&code, config, 1 << 20);
    assert!(v.jit.stats.promoted >= 1, "{}", v.jit.stats.summary());
}

/// With `members_alone` (the default), the side block reaching the threshold gets a baseline
/// function of its own — no loop, no counter, no Cranelift — and the loop goes round
/// through chained jumps between it and the head's; the head's counter, counted down by
/// every entry, still promotes the loop to one Cranelift region (the head's). Results and
/// every stopping point match the interpreter's; `Verify` finds nothing.
#[test]
fn a_member_reaching_the_threshold_is_compiled_alone() {
    let code = program(3000);
    let config = JitConfig {
        threshold: 8,
        promote: 1 << 30,
        ..baseline_config()
    };
    assert!(config.members_alone);
    let (m, jit, exit) = compare(&code, &[1 << 20], config.clone(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    assert_eq!(jit.stats.promoted, 0, "{}", jit.stats.summary());
    assert_eq!(cranelift_compiles(&jit), 0, "{}", jit.stats.summary());
    // The head's function and the side block's, at least.
    assert!(jit.stats.baseline >= 2, "{}", jit.stats.summary());
    assert!(jit.stats.chained_runs >= 1000, "{}", jit.stats.summary());
    let (m1, _, _) = compare(&code, &short_slices(), config.clone(), &|_| {});
    assert_eq!(m1.gpr(reg::R8), m.gpr(reg::R8));
    let v = common::verified_to_hlt(&code, config, 1 << 20);
    assert_eq!(v.jit.stats.promoted, 0, "{}", v.jit.stats.summary());
    // A counter that runs out: the head is promoted, to one region.
    let config = JitConfig {
        threshold: 8,
        promote: 500,
        ..baseline_config()
    };
    let (m2, jit2, _) = compare(&code, &[1 << 20], config, &|_| {});
    assert_eq!(m2.gpr(reg::R8), m.gpr(reg::R8));
    assert_eq!(jit2.stats.promoted, 1, "{}", jit2.stats.summary());
    assert_eq!(cranelift_compiles(&jit2), 1, "{}", jit2.stats.summary());
}

/// `Verify` over the whole run with promotions from the run counter (every dispatch makes
/// progress, every block and region matches the interpreter).
#[test]
fn loops_first_verify_clean() {
    let config = JitConfig {
        threshold: 8,
        promote: 100,
        ..baseline_config()
    };
    let v = common::verified_to_hlt(&program(2000), config, 1 << 20);
    assert!(v.jit.stats.promoted >= 1, "{}", v.jit.stats.summary());
}
