//! Loops of one block (a region of one member that jumps to itself): the registers such a
//! loop only writes are carried in SSA values and stored at its exits, and its retired count
//! is kept relative to `Frame::region_end` (`lift::Lower::count_from_end`). Checked against the
//! interpreter, slice after slice: budget stops at every instruction of the loop, a page
//! fault in its middle and at its first instruction, and calls of the instruction trampoline
//! inside it. (Each test fails with the budget check one instruction too generous.)

mod common;

use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit_sys::SysMachine;
use lockstep_interp::{Engine, ExitReason, Fault, Interpreter};
use lockstep_jit::{Jit, JitConfig};

const PML4: u64 = 0x1000;
const CODE: u64 = 0x10_0000;
const STACK: u64 = 0x30_0000;
/// A data page whose neighbour above is not mapped.
const D: u64 = 0x15_0000;

fn assemble(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    f(&mut a).unwrap();
    a.assemble(CODE).unwrap()
}

fn machine(code: &[u8], runs: u64, start: u64) -> SysMachine {
    let mut m = SysMachine::new(64);
    common::paging(&mut m, PML4, &|page| {
        if page == D + 0x1000 {
            0
        } else {
            page | 3
        }
    });
    m.load(CODE, code);
    for i in 0..0x200u64 {
        m.ram.write_u64(D + 8 * i, i * 0x0101_0101 + 3).unwrap();
    }
    m.start_long(PML4, CODE);
    m.cpu.state.gpr[reg::RSP] = STACK;
    m.cpu.state.gpr[reg::RBX] = start;
    m.cpu.state.gpr[reg::RSI] = runs;
    m
}

/// A one-block loop over D: RAX, RCX and RDX are only written (never read before), each
/// run loads at RBX and stores RDX at RBX + `store`. From RBX = D with `store` 0x800, the
/// store into the unmapped page above D faults once RBX reaches D + 0x800, after the run's
/// RAX, RCX and RDX were written; from RBX = D + 0x800 with `store` -0x800 the load faults
/// at the loop's first instruction, where they still hold the previous run's values (in
/// SSA values only, until the exit stores them). `extra` adds instructions to the body.
fn writer_loop(store: i32, extra: &dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(eax, dword_ptr(rbx))?;
        a.imul_3(rcx, rax, 7)?;
        a.lea(rdx, qword_ptr(rcx + rax))?;
        extra(a)?;
        a.mov(qword_ptr(rbx + store), rdx)?;
        a.add(rbx, 8)?;
        a.dec(rsi)?;
        a.jne(top)?;
        a.mov(r8, rdx)?;
        a.hlt()
    })
}

/// The loop compiled early, as a Cranelift region (the baseline tier, which would take a
/// loop of these instructions, off).
fn config() -> JitConfig {
    JitConfig {
        threshold: 2,
        batch: 1,
        baseline: false,
        ..JitConfig::default()
    }
}

/// Run `code` (`runs` loop runs) in both engines in slices of `slice` instructions, comparing
/// exits, state and RAM after each; the first exit that is not a budget or yield exit.
fn run(code: &[u8], runs: u64, start: u64, slice: u64) -> (Jit, ExitReason) {
    let (a, b) = (
        &mut machine(code, runs, start),
        &mut machine(code, runs, start),
    );
    let (jit, stop) = common::run_sys_with(a, b, slice, config());
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    (jit, stop)
}

#[test]
fn written_registers_reach_budget_stops_and_a_fault_in_the_loop() {
    // The store faults in the middle of a run, or the load at its start.
    for (store, start) in [(0x800, D), (-0x800, D + 0x800)] {
        let code = writer_loop(store, &|_| Ok(()));
        // Slices that stop the loop at each of its seven instructions, and long ones.
        for slice in [1, 2, 3, 5, 6, 7, 8, 9, 11, 13, 50, 97, 1000, 100_000] {
            // 300 runs: run 256 (RBX = D + 0x800 or D + 0x1000) faults.
            let (_, stop) = run(&code, 300, start, slice);
            match stop {
                ExitReason::Exception(Fault::PageFault { addr, .. }) => {
                    assert_eq!(addr, D + 0x1000, "store {store}, slice {slice}")
                }
                other => panic!("store {store}, slice {slice}: expected #PF, got {other:?}"),
            }
        }
        // 100 runs: the loop ends and HLT follows.
        for slice in [4, 7, 10, 1000] {
            let (_, stop) = run(&code, 100, start, slice);
            assert_eq!(stop, ExitReason::Halt, "store {store}, slice {slice}");
        }
    }
}

#[test]
fn trampoline_calls_inside_the_loop_keep_the_count() {
    // XADD goes through the interpreter's handler: a helper call, before which the count
    // and the dirty registers (RCX, RDX and RDI here, written this run) are stored, and
    // after which the count is reloaded; XADD writes RDX, which only the loop writes.
    let code = writer_loop(0x800, &|a| {
        a.mov(rdi, rcx)?;
        a.xadd(rdi, rdx)?;
        a.xor(rdx, rdi)
    });
    for slice in [1, 3, 7, 10, 11, 12, 23, 1000, 100_000] {
        let (_, stop) = run(&code, 300, D, slice);
        assert!(
            matches!(stop, ExitReason::Exception(Fault::PageFault { .. })),
            "slice {slice}: {stop:?}"
        );
    }
}

#[test]
fn a_budget_ending_inside_a_long_loop_stops_exactly() {
    // One long run of the JIT against the interpreter, stopped by budgets that end in the
    // middle of the loop's runs long after it was compiled: the count relative to
    // `region_end` must give the same stopping point.
    let code = writer_loop(0x800, &|_| Ok(()));
    for budget in [700u64, 701, 1203, 1500, 1749] {
        let (a, b) = (&mut machine(&code, 250, D), &mut machine(&code, 250, D));
        let mut jit = Jit::new(config());
        let ea = Interpreter.run(&mut a.cpu, &mut a.ram, &mut a.bus, budget);
        let eb = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, budget);
        assert_eq!(ea, eb, "budget {budget}");
        assert_eq!(a.cpu.retired, budget, "budget {budget}");
        assert_eq!(a.cpu.retired, b.cpu.retired, "budget {budget}");
        assert_eq!(a.cpu.state, b.cpu.state, "budget {budget}");
        assert!(a.ram.bytes() == b.ram.bytes(), "budget {budget}");
        assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    }
}
