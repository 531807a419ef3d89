//! Hand-written programs through the JIT: loops, calls, memory, flags, faults, budgets.

mod common;

use common::{compare, eager_config, region_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

fn sum_loop() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut done = a.create_label();
        a.mov(rcx, 1000u64)?;
        a.xor(eax, eax)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.add(rax, rcx)?;
        a.mov(qword_ptr(rbx), rax)?;
        a.add(rbx, 8i32)?;
        a.and(rbx, 0x40ffffi32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.set_label(&mut done)?;
        a.hlt()
    })
}

#[test]
fn loop_matches_interpreter() {
    let code = sum_loop();
    let (m, jit, _) = compare(&code, &[100_000], region_config(), &|_| {});
    assert_eq!(m.gpr(reg::RAX), 500_500);
    // The loop is one block that branches to itself: a region, whose iterations are jumps
    // inside the compiled function.
    assert!(jit.stats.compiled_runs >= 1, "{:?}", jit.stats);
    assert!(jit.stats.region_edges >= 1, "region: {:?}", jit.stats);
    assert!(jit.stats.interp_runs < 5, "{:?}", jit.stats);
    assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
}

#[test]
fn budget_slices_stop_exactly() {
    let code = sum_loop();
    let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 7919) % 23).collect();
    let (_, jit, _) = compare(&code, &slices, eager_config(), &|_| {});
    assert!(jit.stats.compiled_runs > 0);
}

#[test]
fn trampoline_only_matches_interpreter() {
    let code = sum_loop();
    let cfg = lockstep_jit::JitConfig {
        native: false,
        ..eager_config()
    };
    let (m, jit, _) = compare(&code, &[100_000], cfg, &|_| {});
    assert_eq!(m.gpr(reg::RAX), 500_500);
    assert_eq!(jit.stats.native_insns, 0);
}

#[test]
fn calls_push_pop_and_faults() {
    let code = TestMachine::assemble(|a| {
        let mut f = a.create_label();
        let mut top = a.create_label();
        a.mov(rcx, 50u64)?;
        a.set_label(&mut top)?;
        a.push(rcx)?;
        a.call(f)?;
        a.pop(rcx)?;
        a.cmp(rcx, 1i32)?;
        a.lea(rcx, qword_ptr(rcx - 1))?;
        a.jg(top)?;
        // Fault: read unmapped memory.
        a.mov(rax, qword_ptr(0x1_0000_0000u64))?;
        a.hlt()?;
        a.set_label(&mut f)?;
        a.movzx(edx, cl)?;
        a.add(rdx, qword_ptr(DATA_BASE))?;
        a.mov(qword_ptr(DATA_BASE), rdx)?;
        a.test(dl, 3i32)?;
        a.setz(al)?;
        a.ret()
    });
    let (m, _, _) = compare(&code, &[1_000], eager_config(), &|_| {});
    assert!(matches!(
        m.cpu.state.rip,
        _ if m.cpu.state.rip > lockstep_interp::testkit::CODE_BASE
    ));
    let mut m2 = common::machine(&code, &|_| {});
    let e = m2.run(1000);
    assert!(matches!(e.reason, ExitReason::Exception(_)), "{e:?}");
}

/// Chained jumps never reach a stale translation: the loop calls `g` (a direct, chained call,
/// on another page) after `f` has, every 16th iteration, rewritten the immediate inside `g` (a
/// store into another compiled block's code, in a block that then returns by a chained RET).
/// Every iteration must see the current immediate, in any budget slicing, with and without
/// chaining; between patches the loop runs through chained jumps.
#[test]
fn chained_jumps_follow_code_writes() {
    let code = TestMachine::assemble(|a| {
        let mut f = a.create_label();
        let mut g = a.create_label();
        let mut g_imm = a.create_label();
        let mut top = a.create_label();
        a.mov(rcx, 300u64)?;
        a.xor(ebx, ebx)?;
        a.set_label(&mut top)?;
        a.call(f)?;
        a.call(g)?;
        a.add(rbx, rax)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()?;
        a.set_label(&mut f)?;
        let mut skip = a.create_label();
        a.test(cl, 15)?;
        a.jnz(skip)?;
        a.lea(rdx, qword_ptr(g_imm))?;
        a.mov(byte_ptr(rdx + 1), cl)?; // patch the imm32 of `mov eax, imm32` in g
        a.set_label(&mut skip)?;
        a.ret()?;
        a.db(&[0xcc; 4096])?;
        a.set_label(&mut g)?;
        a.nop()?;
        a.set_label(&mut g_imm)?;
        a.mov(eax, 0x1234_5600u32)?;
        a.ret()
    });
    let mut imm = 0x1234_5600u64;
    let mut expect = 0u64;
    for c in (1..=300u64).rev() {
        if c % 16 == 0 {
            imm = 0x1234_5600 | (c & 0xff);
        }
        expect += imm;
    }
    for chain in [true, false] {
        let cfg = lockstep_jit::JitConfig {
            chain,
            ..eager_config()
        };
        let (m, jit, _) = compare(&code, &[1_000_000], cfg.clone(), &|_| {});
        assert_eq!(m.gpr(reg::RBX), expect, "chain {chain}");
        if chain {
            assert!(jit.stats.chained_runs > 0, "{:?}", jit.stats);
        }
        let slices: Vec<u64> = (0..2000).map(|i| 1 + (i * 37) % 11).collect();
        let (m, _, _) = compare(&code, &slices, cfg, &|_| {});
        assert_eq!(m.gpr(reg::RBX), expect, "chain {chain}, slices");
    }
}

/// A read-modify-write whose load succeeds and whose store faults (read-only page) leaves
/// flags, registers and memory untouched, with RIP at the instruction.
#[test]
fn rmw_store_fault_is_precise() {
    use iced_x86::code_asm::*;
    type Op = fn(&mut CodeAssembler) -> Result<(), IcedError>;
    let ops: [Op; 5] = [
        |a| a.add(qword_ptr(rbx), rax),
        |a| a.adc(dword_ptr(rbx), 7),
        |a| a.inc(qword_ptr(rbx)),
        |a| a.neg(word_ptr(rbx)),
        |a| a.xor(byte_ptr(rbx + 3), cl),
    ];
    for op in ops {
        let code = TestMachine::assemble(|a| {
            a.mov(rbx, 0xa0_0000u64)?;
            a.mov(rax, -1i64)?;
            a.mov(rcx, 0x55u64)?;
            // Fills the read TLB: the RMW's load then hits inline and its store faults.
            a.mov(rsi, qword_ptr(rbx))?;
            a.cmp(rax, 3)?;
            op(a)?;
            a.mov(rdx, 1u64)?;
            a.hlt()
        });
        let (m, _, exit) = compare(&code, &[1000], eager_config(), &|m| {
            // The 2 MiB page at 0xa00000: present, user, read-only.
            m.ram.write_u64(0x3000 + 5 * 8, (5 << 21) | 0x85).unwrap();
        });
        assert!(
            matches!(exit.reason, lockstep_interp::ExitReason::Exception(_)),
            "{exit:?}"
        );
        assert_eq!(m.gpr(reg::RDX), 0);
    }
}

/// A loop that calls a function through a register (an indirect CALL and a RET: links of
/// both kinds, filled on first use) and takes a rarely taken branch now and then.
fn calls_through_links() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut func = a.create_label();
        let mut rare = a.create_label();
        let mut next = a.create_label();
        a.mov(ecx, 700u32)?;
        a.xor(eax, eax)?;
        a.lea(rbx, ptr(func))?;
        a.set_label(&mut top)?;
        a.call(rbx)?;
        a.test(ecx, 63)?;
        a.jz(rare)?;
        a.set_label(&mut next)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()?;
        a.set_label(&mut rare)?;
        a.add(rax, 1000)?;
        a.jmp(next)?;
        a.set_label(&mut func)?;
        a.add(rax, rcx)?;
        a.ret()
    })
}

/// Every compiled block run is counted once, whether the dispatcher or a chained jump entered
/// it: with chaining on, the compiled and the chained runs add up to the compiled runs with
/// chaining off (an empty link's jump to the fill stub, which then makes the jump, counts no
/// hop of its own).
#[test]
fn each_compiled_block_run_is_counted_once() {
    let code = calls_through_links();
    let stats = |chain: bool| {
        let config = lockstep_jit::JitConfig {
            chain,
            count_chains: true,
            ..eager_config()
        };
        let (m, jit, _) = compare(&code, &[1 << 20], config, &|_| {});
        assert_eq!(m.gpr(reg::RAX), (1..=700).sum::<u64>() + 1000 * 10);
        jit.stats.clone()
    };
    let (plain, chained) = (stats(false), stats(true));
    assert!(chained.chained_runs > 1000, "{}", chained.summary());
    assert_eq!(
        chained.compiled_runs + chained.chained_runs,
        plain.compiled_runs,
        "chained: {}\nplain: {}",
        chained.summary(),
        plain.summary()
    );
}
