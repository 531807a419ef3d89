//! Exits from the middle of a loop region find every register the region changed in memory:
//! a register the region carries in an SSA value and writes is stored only at exits (not at
//! each edge or before each memory access), so a fault, a budget stop or a chain exit in any
//! of its blocks must store it, whichever block last wrote it. A loop block whose first
//! instruction might leave the flags alone (a shift by CL = 0) still gets them from the edge.
//! And a switch's indirect jump stays inside the region when its target is a member, all
//! sixteen cases of a bytecode interpreter's switch (more blocks than a region without a
//! switch takes) included, a rarely run one too; the jump compares its target with the case
//! it went to most often while interpreted first.

mod common;

use common::{compare, region_config};
use iced_x86::code_asm::*;
use iced_x86::IcedError;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

/// A loop of four blocks. The first writes RBX and R8 (carried: read before written) and R9
/// (not carried); the second loads through RSI, which turns non-canonical at iteration
/// `stop` (#GP at the load, after the first block changed RBX, R8 and R9 in this iteration);
/// the third and fourth change R11 and RAX on alternate iterations. With `stop` beyond the
/// loop count, the loop ends through a chain exit to
/// the HLT block (not part of the region).
fn program(stop: u32) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut load = a.create_label();
        let mut odd = a.create_label();
        let mut done = a.create_label();
        a.xor(ebx, ebx)?;
        a.xor(r8d, r8d)?;
        a.xor(r11d, r11d)?;
        a.mov(rsi, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.add(rbx, 1i32)?;
        a.lea(r9, qword_ptr(rbx + rbx * 2))?;
        a.add(r8, r9)?;
        a.cmp(rbx, stop as i32)?;
        a.jne(load)?;
        a.mov(rsi, 0x8000_0000_0000_0000u64)?;
        a.set_label(&mut load)?;
        a.mov(rax, qword_ptr(rsi))?;
        a.add(rax, r8)?;
        a.mov(qword_ptr(rsi + 8), rax)?;
        a.test(bl, 1i32)?;
        a.jnz(odd)?;
        a.add(r11, rax)?;
        a.cmp(rbx, 900i32)?;
        a.jne(top)?;
        a.jmp(done)?;
        a.set_label(&mut odd)?;
        a.sub(r11, 3i32)?;
        a.xor(rax, r11)?;
        a.jmp(top)?;
        a.set_label(&mut done)?;
        a.hlt()
    })
}

/// Run `code` on both engines (compared at the end) until it raises an exception.
fn until_exception(
    code: &[u8],
    config: lockstep_jit::JitConfig,
    setup: &dyn Fn(&mut TestMachine),
) -> (TestMachine, lockstep_jit::Jit) {
    let (m, jit, exit) = compare(code, &[1 << 20], config, setup);
    assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
    (m, jit)
}

#[test]
fn a_fault_in_a_later_block_stores_what_earlier_blocks_wrote() {
    let (m, jit) = until_exception(&program(700), region_config(), &|_| {});
    assert_eq!(m.gpr(reg::RBX), 700);
    assert_eq!(m.gpr(reg::R9), 2100);
    assert_eq!(m.gpr(reg::R8), 3 * 700 * 701 / 2);
    // The loop ran as one compiled region (iterations are jumps inside it).
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    assert!(
        jit.stats.compiled_runs + jit.stats.interp_runs < 20,
        "{}",
        jit.stats.summary()
    );
}

#[test]
fn budget_stops_inside_the_loop_store_the_carried_registers() {
    let code = program(700);
    let slices: Vec<u64> = (0..600).map(|i| 1 + (i * 7919) % 37).collect();
    let (_, jit, _) = compare(&code, &slices, region_config(), &|_| {});
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
}

#[test]
fn the_loop_exit_stores_the_carried_registers() {
    // (The test machine runs at CPL 3: the HLT raises #GP(0).)
    let (m, _) = until_exception(&program(u32::MAX >> 1), region_config(), &|_| {});
    assert_eq!(m.gpr(reg::RBX), 900);
    assert_eq!(m.gpr(reg::R8), 3 * 900 * 901 / 2);
}

/// A loop whose first instruction is `shl rdx, cl` with CL cycling through 0..3: with a count
/// of 0 it changes no flag, so SETC reads the carry the back edge brought (IMUL's, kept
/// through DEC).
#[test]
fn a_loop_head_that_may_keep_the_flags_gets_them_from_the_edge() {
    let code = TestMachine::assemble(|a| {
        let mut head = a.create_label();
        a.xor(r8d, r8d)?;
        a.xor(ecx, ecx)?;
        a.mov(ebx, 1000)?;
        a.mov(edx, 1)?;
        a.set_label(&mut head)?;
        a.shl(rdx, cl)?;
        a.setc(al)?;
        a.movzx(eax, al)?;
        a.add(r8, rax)?;
        a.mov(ecx, ebx)?;
        a.and(ecx, 3)?;
        a.mov(edx, ebx)?;
        a.imul_3(edx, edx, 0x7e37_79b1)?;
        a.dec(rbx)?;
        a.jnz(head)?;
        a.hlt()
    });
    let (m, jit, _) = compare(&code, &[1 << 20], region_config(), &|_| {});
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    // Some carries came from IMUL (count 0), some from the shift.
    assert!(
        m.gpr(reg::R8) > 0 && m.gpr(reg::R8) < 1000,
        "{}",
        m.gpr(reg::R8)
    );
}

/// RDI = the jump table at `DATA_BASE + 0x8000`, filled with the addresses of `cases`.
fn jump_table(a: &mut CodeAssembler, cases: &[CodeLabel]) -> Result<(), IcedError> {
    a.mov(rdi, DATA_BASE + 0x8000)?;
    for (i, c) in cases.iter().enumerate() {
        a.lea(rax, ptr(*c))?;
        a.mov(qword_ptr(rdi + 8 * i as i32), rax)?;
    }
    Ok(())
}

/// A bytecode loop: fetch a byte, jump through a table of four cases (an indirect JMP), each
/// case jumps back to the loop's step; at step 3000 the fourth case's load faults.
fn switch_loop() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut next = a.create_label();
        let mut cases = [
            a.create_label(),
            a.create_label(),
            a.create_label(),
            a.create_label(),
        ];
        let mut same = a.create_label();
        jump_table(a, &cases)?;
        a.mov(rsi, DATA_BASE)?;
        a.mov(r9, DATA_BASE + 0x100)?;
        a.xor(ebx, ebx)?;
        a.xor(r8d, r8d)?;
        a.set_label(&mut top)?;
        a.movzx(eax, byte_ptr(rsi + rbx))?;
        a.and(eax, 3)?;
        a.jmp(qword_ptr(rdi + rax * 8))?;
        a.set_label(&mut cases[0])?;
        a.add(r8, 1)?;
        a.jmp(next)?;
        a.set_label(&mut cases[1])?;
        a.imul_3(r8, r8, 3)?;
        a.jmp(next)?;
        a.set_label(&mut cases[2])?;
        a.xor(r8, rbx)?;
        a.jmp(next)?;
        a.set_label(&mut cases[3])?;
        a.add(r8, qword_ptr(r9))?;
        a.jmp(next)?;
        a.set_label(&mut next)?;
        a.add(ebx, 1)?;
        a.cmp(ebx, 3000)?;
        a.jne(same)?;
        a.mov(r9, 0x8000_0000_0000_0000u64)?;
        a.set_label(&mut same)?;
        a.and(ebx, 0xfff)?;
        a.jmp(top)
    })
}

fn bytecode(m: &mut TestMachine) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let bytes: Vec<u8> = (0..0x1000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    m.load(DATA_BASE, &bytes);
}

/// Compile after 40 runs: by then every case of the switch has run and is a candidate.
fn warm_config() -> lockstep_jit::JitConfig {
    lockstep_jit::JitConfig {
        threshold: 40,
        batch: 1,
        loops_base_first: false,
        ..lockstep_jit::JitConfig::default()
    }
}

#[test]
fn a_switch_jump_stays_in_the_region() {
    let (m, jit) = until_exception(&switch_loop(), warm_config(), &bytecode);
    // (The first fourth case after step 3000 faults.)
    assert!(
        (3000..3100).contains(&m.gpr(reg::RBX)),
        "{}",
        m.gpr(reg::RBX)
    );
    // Most of the ~3000 jumps through the table land on a member: the loop leaves its
    // function (a chained jump, or the dispatcher) only a little.
    let s = &jit.stats;
    assert!(s.region_edges > 0, "{}", s.summary());
    assert!(s.chained_runs + s.lookups < 1000, "{}", s.summary());
}

#[test]
fn budget_stops_around_a_switch_jump_match_the_interpreter() {
    let slices: Vec<u64> = (0..2000).map(|i| 1 + (i * 7919) % 41).collect();
    compare(&switch_loop(), &slices, warm_config(), &bytecode);
}

/// A bytecode interpreter: sixteen cases behind one indirect JMP (19 blocks with the fetch
/// and the step, more than `JitConfig::region_blocks`), the sixteenth taken only at every
/// 512th step; the loop stops (#GP at the HLT, CPL 3) after 20,000 steps.
fn sixteen_cases() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut next = a.create_label();
        let mut done = a.create_label();
        let mut cases: Vec<CodeLabel> = (0..16).map(|_| a.create_label()).collect();
        jump_table(a, &cases)?;
        a.mov(rsi, DATA_BASE)?;
        a.xor(ebx, ebx)?;
        a.xor(r8d, r8d)?;
        a.set_label(&mut top)?;
        a.mov(eax, ebx)?;
        a.and(eax, 0xfff)?;
        a.movzx(eax, byte_ptr(rsi + rax))?;
        a.jmp(qword_ptr(rdi + rax * 8))?;
        for (i, c) in cases.iter_mut().enumerate() {
            a.set_label(c)?;
            a.lea(r8, qword_ptr(r8 + r8 * 2 + i as i32))?;
            a.jmp(next)?;
        }
        a.set_label(&mut next)?;
        a.add(ebx, 1)?;
        a.cmp(ebx, 20_000)?;
        a.jne(top)?;
        a.set_label(&mut done)?;
        a.hlt()
    })
}

/// Case numbers 0..14 in turn, 15 instead at every 512th byte (the first too): every case
/// has run by the time the loop is compiled (`warm_config`), the sixteenth once.
fn sixteen_case_bytecode(m: &mut TestMachine) {
    let bytes: Vec<u8> = (0..0x1000)
        .map(|i| if i % 512 == 0 { 15 } else { (i % 15) as u8 })
        .collect();
    m.load(DATA_BASE, &bytes);
}

#[test]
fn every_case_of_a_sixteen_case_switch_is_in_one_region() {
    let (m, jit) = until_exception(&sixteen_cases(), warm_config(), &sixteen_case_bytecode);
    assert_eq!(m.gpr(reg::RBX), 20_000);
    // The jumps through the table land on members, the rare case's too: the loop leaves its
    // function only a little (a case left out would leave it on every run of that case:
    // ~1,300 times for one of the fifteen common ones, 39 for the rare one) ...
    let s = &jit.stats;
    assert!(s.region_edges > 0, "{}", s.summary());
    assert!(s.chained_runs + s.compiled_runs < 30, "{}", s.summary());
    // ... and is compiled once, not again from each case left out.
    assert!(s.compiled - s.baseline <= 2, "{}", s.summary());
}

/// Case 1 seven bytes in eight, cases 0, 2 and 3 in turn at the others.
fn mostly_case_one(m: &mut TestMachine) {
    let bytes: Vec<u8> = (0..0x1000)
        .map(|i| if i % 8 == 0 { [0, 2, 3][i / 8 % 3] } else { 1 })
        .collect();
    m.load(DATA_BASE, &bytes);
}

/// The constants a region's IR compares run-time jump targets with for equality, in order
/// (`vX = icmp.i64 eq vY, vZ  ; vZ = C`), leaving out the function entry's dispatch on its
/// `rip` parameter (the fourth of `block0`).
fn compared_targets(ir: &str) -> Vec<u64> {
    let rip_param = ir
        .lines()
        .find(|l| l.starts_with("block0("))
        .and_then(|l| l.split(", ").nth(3))
        .and_then(|p| p.split(':').next())
        .expect("the entry block's parameters")
        .to_owned();
    ir.lines()
        .filter(|l| l.contains(" = icmp.i64 eq "))
        .filter(|l| {
            let operand = l.split(" eq ").nth(1).and_then(|r| r.split(',').next());
            operand != Some(rip_param.as_str())
        })
        .filter_map(|l| {
            let c = l.rsplit(" = ").next()?.trim().replace('_', "");
            match c.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => c.parse().ok(),
            }
        })
        .collect()
}

#[test]
fn a_switch_jump_compares_its_most_frequent_target_first() {
    let config = lockstep_jit::JitConfig {
        keep_ir: true,
        ..warm_config()
    };
    let (m, jit) = until_exception(&switch_loop(), config, &mostly_case_one);
    assert!((3000..3100).contains(&m.gpr(reg::RBX)));
    let cases: Vec<u64> = (0..4)
        .map(|i| m.read_u64(DATA_BASE + 0x8000 + 8 * i))
        .collect();
    // The loop's region: the function whose IR compares a run-time target with the cases.
    let irs = common::code_irs(&jit);
    let order = irs
        .iter()
        .map(|ir| compared_targets(ir))
        .find(|o| cases.iter().all(|c| o.contains(c)))
        .expect("a region comparing the switch's target with every case");
    // Case 1, seven runs in eight, first — before the other cases and before the members
    // that are no case (the loop's top and step, first in region order).
    assert_eq!(
        order[0], cases[1],
        "compared in the order {order:x?}, cases {cases:x?}"
    );
}

/// Deferring exits share write-back tails by the registers they hold dirty (in regions of
/// at least `lift::SHARED_TAILS_MIN` instructions; here in every region): each must still
/// store exactly its own registers' values. The loop above faults at its load (a deferring
/// exit) after the first block changed RBX, R8 and R9, and runs to its end in budget slices
/// that stop inside it.
#[test]
fn deferring_exits_through_shared_tails_store_their_own_registers() {
    let config = || lockstep_jit::JitConfig {
        shared_exit_tails_min: 0,
        ..region_config()
    };
    let (m, jit) = until_exception(&program(700), config(), &|_| {});
    assert_eq!(m.gpr(reg::RBX), 700);
    assert_eq!(m.gpr(reg::R9), 2100);
    assert_eq!(m.gpr(reg::R8), 3 * 700 * 701 / 2);
    assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    for slices in [&[97u64; 200][..], &[331; 80][..]] {
        let (_, jit, _) = compare(&program(2000), slices, config(), &|_| {});
        assert!(jit.stats.region_edges > 0, "{}", jit.stats.summary());
    }
}
