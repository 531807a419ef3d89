//! Tests of the string-instruction family, part 2: faults, budgets and comparisons with the
//! host CPU (included from string.rs; helpers live in string_tests.rs).

use super::tests::*;
use super::MAX_ITERS_PER_CALL;
use crate::cpu::{Exit, ExitReason};
use crate::fault::Fault;
use crate::state::{flags, reg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};

// ----- faults -----

const EDGE: u64 = 0x4000_0000; // first unmapped byte of the test machine

#[test]
fn fault_mid_rep_stos_commits_completed_iterations() {
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 0x77;
    set(&mut m, 0, EDGE - 16, 0x20);
    let code = with_ud2(&enc(STOS, 1, &[REP]));
    let e = m.run_code(&code, BIG);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: EDGE,
            code: 6
        })
    );
    assert_eq!(e.retired, 16);
    assert_eq!(m.cpu.state.rip, CODE_BASE);
    assert_eq!(m.gpr(reg::RCX), 0x10);
    assert_eq!(m.gpr(reg::RDI), EDGE);
    assert_eq!(mem(&m, EDGE - 16, 16), vec![0x77; 16]);
}

#[test]
fn fault_mid_rep_movs_on_the_source() {
    let mut m = TestMachine::new();
    m.load(EDGE - 16, &pattern(16, 8));
    set(&mut m, EDGE - 16, DATA_BASE, 4);
    let e = m.run_code(&with_ud2(&enc(MOVS, 8, &[REP])), BIG);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: EDGE,
            code: 4
        })
    );
    assert_eq!(e.retired, 2);
    assert_eq!(m.gpr(reg::RCX), 2);
    assert_eq!(m.gpr(reg::RSI), EDGE);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 16);
    assert_eq!(mem(&m, DATA_BASE, 16), pattern(16, 8));
}

#[test]
fn straddling_first_element_faults_without_progress() {
    let mut m = TestMachine::new();
    set(&mut m, EDGE - 4, DATA_BASE, 4);
    let e = m.run_code(&with_ud2(&enc(MOVS, 8, &[REP])), BIG);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: EDGE,
            code: 4
        })
    );
    assert_eq!(e.retired, 0);
    assert_eq!((m.gpr(reg::RSI), m.gpr(reg::RCX)), (EDGE - 4, 4));
    assert_eq!(mem(&m, DATA_BASE, 8), vec![0; 8]);

    // Destination side: the write faults, nothing moves.
    let mut m = TestMachine::new();
    set(&mut m, DATA_BASE, EDGE, 4);
    let e = m.run_code(&with_ud2(&enc(MOVS, 1, &[REP])), BIG);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: EDGE,
            code: 6
        })
    );
    assert_eq!((m.gpr(reg::RSI), m.gpr(reg::RDI)), (DATA_BASE, EDGE));
}

#[test]
fn fault_mid_repe_cmps_keeps_flags_of_the_last_iteration() {
    let mut m = TestMachine::new();
    m.load(EDGE - 8, &[1; 8]);
    m.load(DATA_BASE, &[1; 8]);
    m.cpu.state.rflags &= !flags::STATUS;
    set(&mut m, DATA_BASE, EDGE - 8, 100);
    let e = m.run_code(&with_ud2(&enc(CMPS, 1, &[REP])), BIG);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: EDGE,
            code: 4
        })
    );
    assert_eq!(e.retired, 8);
    assert_eq!(m.gpr(reg::RCX), 92);
    assert_eq!(m.cpu.state.rflags & flags::STATUS, flags::ZF | flags::PF);
}

#[test]
fn rep_stos_into_code_is_seen_by_the_next_instruction() {
    // rep stosb overwrites the imm32 of the following `mov eax, imm32` in the same block.
    let mut code = vec![REP, STOS];
    let imm_at = CODE_BASE + code.len() as u64 + 1;
    code.extend_from_slice(&[0xb8, 1, 0, 0, 0]);
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 0x42;
    set(&mut m, 0, imm_at, 4);
    let e = exec(&mut m, &code);
    assert_eq!(e.retired, 5);
    assert_eq!(m.gpr(reg::RAX), 0x4242_4242);
}

// ----- budgets -----

/// Run the program at CODE_BASE in slices of `slice` instructions until it reaches UD2.
fn run_sliced(m: &mut TestMachine, code: &[u8], slice: u64) -> u64 {
    m.load(CODE_BASE, code);
    m.cpu.state.rip = CODE_BASE;
    let mut total = 0;
    loop {
        let e = m.run(slice);
        total += e.retired;
        match e.reason {
            ExitReason::Budget => assert_eq!(e.retired, slice, "a slice must be used exactly"),
            ExitReason::Exception(Fault::InvalidOpcode { what: "UD2" }) => return total,
            other => panic!("unexpected exit {other:?}"),
        }
    }
}

#[test]
fn budget_stop_inside_rep_movs() {
    let setup = |m: &mut TestMachine| {
        m.load(DATA_BASE, &pattern(0x3000, 6));
        set(m, DATA_BASE + 0x7, DATA_BASE + 0x5003, 1000);
    };
    let code = with_ud2(&enc(MOVS, 1, &[REP]));
    let mut m = TestMachine::new();
    setup(&mut m);
    m.load(CODE_BASE, &code);
    m.cpu.state.rip = CODE_BASE;
    let e = m.run(300);
    assert_eq!(
        e,
        Exit {
            retired: 300,
            reason: ExitReason::Budget
        }
    );
    assert_eq!(
        m.cpu.state.rip, CODE_BASE,
        "RIP stays on the REP instruction"
    );
    assert_eq!(m.gpr(reg::RCX), 700);
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 0x7 + 300);
    assert_eq!(mem(&m, DATA_BASE + 0x5003 + 300, 1), vec![0]);
    let e = m.run(BIG);
    assert_eq!(e.retired, 700);
    assert_eq!(m.cpu.retired, 1000);

    let mut whole = TestMachine::new();
    setup(&mut whole);
    exec(&mut whole, &enc(MOVS, 1, &[REP]));
    assert_eq!(whole.cpu.retired, 1000);
    assert_eq!(m.cpu.state, whole.cpu.state);
    assert_eq!(mem(&m, DATA_BASE, 0x6000), mem(&whole, DATA_BASE, 0x6000));
}

#[test]
fn budget_equal_to_the_count_completes_the_instruction() {
    let mut m = TestMachine::new();
    set(&mut m, 0, DATA_BASE, 5);
    m.load(CODE_BASE, &with_ud2(&enc(STOS, 1, &[REP])));
    m.cpu.state.rip = CODE_BASE;
    let e = m.run(5);
    assert_eq!(e.retired, 5);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 2);
    assert_eq!(m.gpr(reg::RCX), 0);
    // Zero count with a budget of one: one retired instruction, RIP moves on.
    let mut m = TestMachine::new();
    set(&mut m, 0, DATA_BASE, 0);
    m.load(CODE_BASE, &with_ud2(&enc(STOS, 1, &[REP])));
    m.cpu.state.rip = CODE_BASE;
    assert_eq!(m.run(1).retired, 1);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 2);
}

#[test]
fn sliced_runs_equal_uninterrupted_runs() {
    type Setup = fn(&mut TestMachine);
    let scenarios: [(Vec<u8>, Setup); 7] = [
        (enc(MOVS, 1, &[REP]), |m| {
            m.load(DATA_BASE, &pattern(0x4000, 1));
            set(m, DATA_BASE + 0xffd, DATA_BASE + 0x2001, 5000);
        }),
        (enc(MOVS, 4, &[REP]), |m| {
            m.load(DATA_BASE, &pattern(0x4000, 2));
            m.cpu.state.rflags |= flags::DF;
            set(m, DATA_BASE + 0x1ffe, DATA_BASE + 0x3ff0, 900);
        }),
        (enc(MOVS, 2, &[REP]), |m| {
            // Overlapping, destination ahead by 3 bytes.
            m.load(DATA_BASE, &pattern(0x4000, 3));
            set(m, DATA_BASE + 0xff0, DATA_BASE + 0xff3, 2500);
        }),
        (enc(STOS, 8, &[REP]), |m| {
            m.cpu.state.gpr[reg::RAX] = 0x0123_4567_89ab_cdef;
            set(m, 0, DATA_BASE + 0x5, 1000);
        }),
        (enc(CMPS, 1, &[REP]), |m| {
            let a = pattern(4000, 4);
            let mut b = a.clone();
            b[3000] ^= 1;
            m.load(DATA_BASE, &a);
            m.load(DATA_BASE + 0x8000, &b);
            set(m, DATA_BASE, DATA_BASE + 0x8000, 4000);
        }),
        (enc(SCAS, 1, &[REPNE]), |m| {
            let mut a = vec![1u8; 3000];
            a[2500] = 0;
            m.load(DATA_BASE, &a);
            m.cpu.state.gpr[reg::RAX] = 0;
            set(m, 0, DATA_BASE, u64::MAX);
        }),
        (enc(LODS, 2, &[REP]), |m| {
            m.load(DATA_BASE, &pattern(0x1000, 5));
            set(m, DATA_BASE, 0, 1500);
        }),
    ];
    for (i, (insn, setup)) in scenarios.iter().enumerate() {
        let code = with_ud2(insn);
        let mut whole = TestMachine::new();
        setup(&mut whole);
        let total = run_sliced(&mut whole, &code, BIG);
        for slice in [1u64, 2, 7, 300, 1023] {
            let mut m = TestMachine::new();
            setup(&mut m);
            let t = run_sliced(&mut m, &code, slice);
            assert_eq!(t, total, "scenario {i} slice {slice}");
            assert_eq!(m.cpu.state, whole.cpu.state, "scenario {i} slice {slice}");
            assert!(
                mem(&m, DATA_BASE, 0x9000) == mem(&whole, DATA_BASE, 0x9000),
                "scenario {i} slice {slice}"
            );
        }
    }
}

#[test]
fn long_rep_is_split_into_bounded_calls_within_one_run() {
    let count = 2 * MAX_ITERS_PER_CALL + 5;
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 0xc3;
    set(&mut m, 0, DATA_BASE, count);
    let e = exec(&mut m, &enc(STOS, 1, &[REP]));
    assert_eq!(e.retired, count);
    assert_eq!(m.gpr(reg::RCX), 0);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + count);
    let b = m.ram.bytes();
    let base = DATA_BASE as usize;
    assert!(b[base..base + count as usize].iter().all(|&x| x == 0xc3));
    assert_eq!(b[base + count as usize], 0);
}

/// Decode `bytes` at CODE_BASE and call the family's handler once, as the engine would.
fn call_handler(m: &mut TestMachine, bytes: &[u8], budget: u64) -> Result<(), crate::fault::Trap> {
    let mut dec = iced_x86::Decoder::with_ip(64, bytes, CODE_BASE, iced_x86::DecoderOptions::NONE);
    let ins = dec.decode();
    let handler = super::lookup(&ins).expect("a string instruction");
    m.cpu.budget_end = m.cpu.retired + budget;
    m.cpu.state.rip = ins.next_ip();
    let mut x = crate::Ctx::new(&mut m.cpu, &mut m.ram, &mut m.bus);
    handler(&mut x, &ins)
}

#[test]
fn handler_contract_partial_and_completion() {
    use crate::fault::Trap;
    // Capped at MAX_ITERS_PER_CALL per call even with a larger budget.
    let mut m = TestMachine::new();
    set(&mut m, 0, DATA_BASE, MAX_ITERS_PER_CALL + 10);
    let r = call_handler(&mut m, &enc(STOS, 1, &[REP]), BIG);
    assert_eq!(r, Err(Trap::Partial));
    assert_eq!(m.cpu.retired, MAX_ITERS_PER_CALL);
    assert_eq!(m.gpr(reg::RCX), 10);
    // The rest completes: the handler adds n - 1, the engine the last one.
    let r = call_handler(&mut m, &enc(STOS, 1, &[REP]), BIG);
    assert_eq!(r, Ok(()));
    assert_eq!(m.cpu.retired, MAX_ITERS_PER_CALL + 9);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + MAX_ITERS_PER_CALL + 10);
    // Budget of 3 on a REPE CMPS with more to do: exactly 3 iterations, Partial.
    let mut m = TestMachine::new();
    set(&mut m, DATA_BASE, DATA_BASE + 0x100, 50);
    let r = call_handler(&mut m, &enc(CMPS, 4, &[REP]), 3);
    assert_eq!(r, Err(Trap::Partial));
    assert_eq!((m.cpu.retired, m.gpr(reg::RCX)), (3, 47));
    // A REPE CMPS that stops on a difference within the budget completes.
    m.load(DATA_BASE + 12, &[1]);
    let r = call_handler(&mut m, &enc(CMPS, 4, &[REP]), 100);
    assert_eq!(r, Ok(()));
    assert_eq!((m.cpu.retired, m.gpr(reg::RCX)), (3, 46));
}

// ----- against the host CPU -----

/// Run one string instruction natively with RSI/RDI/RCX/RAX and the status flags given;
/// returns (status flags, rsi, rdi, rcx, rax). DF stays 0 (Rust requires it at asm! edges).
macro_rules! native {
    ($insn:literal, $rsi:expr, $rdi:expr, $rcx:expr, $rax:expr, $status:expr) => {{
        let (mut rsi, mut rdi, mut rcx, mut rax): (u64, u64, u64, u64) = ($rsi, $rdi, $rcx, $rax);
        let fin: u64 = 0x202 | ($status & flags::STATUS);
        let fout: u64;
        // SAFETY: the instruction only reads memory at RSI/RDI for at most RCX elements, which
        // callers point at live buffers of sufficient length (or RCX = 0); the flags pushed and
        // popped are confined to the asm block's own stack use, and DF stays clear.
        unsafe {
            core::arch::asm!(
                "push {fin}",
                "popfq",
                $insn,
                "pushfq",
                "pop {fout}",
                fin = in(reg) fin,
                fout = lateout(reg) fout,
                inout("rsi") rsi,
                inout("rdi") rdi,
                inout("rcx") rcx,
                inout("rax") rax,
            );
        }
        (fout & flags::STATUS, rsi, rdi, rcx, rax)
    }};
}

/// Interesting operands for a size, plus pseudo-random ones.
fn operands(size: u8) -> Vec<u64> {
    let m = crate::operand::mask(size);
    let sb = crate::operand::sign_bit(size);
    let mut v = vec![
        0,
        1,
        2,
        0xf,
        0x10,
        0x7f,
        0x80,
        0xff,
        sb - 1,
        sb,
        sb + 1,
        m - 1,
        m,
    ];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..12 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.push(s >> 7);
    }
    v.into_iter().map(|x| x & m).collect()
}

fn interp_cmps(m: &mut TestMachine, size: u8, a: u64, b: u64, status: u64) -> u64 {
    m.load(DATA_BASE, &a.to_le_bytes());
    m.load(DATA_BASE + 0x100, &b.to_le_bytes());
    set(m, DATA_BASE, DATA_BASE + 0x100, 0);
    m.cpu.state.rflags = (m.cpu.state.rflags & !flags::STATUS) | status;
    exec(m, &enc(CMPS, size, &[]));
    m.cpu.state.rflags & flags::STATUS
}

fn interp_scas(m: &mut TestMachine, size: u8, a: u64, b: u64, status: u64) -> u64 {
    m.load(DATA_BASE + 0x100, &b.to_le_bytes());
    m.cpu.state.gpr[reg::RAX] = a;
    set(m, 0, DATA_BASE + 0x100, 0);
    m.cpu.state.rflags = (m.cpu.state.rflags & !flags::STATUS) | status;
    exec(m, &enc(SCAS, size, &[]));
    m.cpu.state.rflags & flags::STATUS
}

#[test]
fn cmps_and_scas_flags_match_host() {
    let mut m = TestMachine::new();
    for status in [0, flags::STATUS] {
        for a in operands(1) {
            for b in operands(1) {
                let (x, y) = ([a as u8], [b as u8]);
                let n = native!("cmpsb", x.as_ptr() as u64, y.as_ptr() as u64, 0, 0, status);
                assert_eq!(
                    interp_cmps(&mut m, 1, a, b, status),
                    n.0,
                    "cmpsb {a:#x} {b:#x}"
                );
                let n = native!("scasb", 0, y.as_ptr() as u64, 0, a, status);
                assert_eq!(
                    interp_scas(&mut m, 1, a, b, status),
                    n.0,
                    "scasb {a:#x} {b:#x}"
                );
            }
        }
        for a in operands(2) {
            for b in operands(2) {
                let (x, y) = ([a as u16], [b as u16]);
                let n = native!("cmpsw", x.as_ptr() as u64, y.as_ptr() as u64, 0, 0, status);
                assert_eq!(
                    interp_cmps(&mut m, 2, a, b, status),
                    n.0,
                    "cmpsw {a:#x} {b:#x}"
                );
                let n = native!("scasw", 0, y.as_ptr() as u64, 0, a, status);
                assert_eq!(
                    interp_scas(&mut m, 2, a, b, status),
                    n.0,
                    "scasw {a:#x} {b:#x}"
                );
            }
        }
        for a in operands(4) {
            for b in operands(4) {
                let (x, y) = ([a as u32], [b as u32]);
                let n = native!("cmpsd", x.as_ptr() as u64, y.as_ptr() as u64, 0, 0, status);
                assert_eq!(
                    interp_cmps(&mut m, 4, a, b, status),
                    n.0,
                    "cmpsd {a:#x} {b:#x}"
                );
                let n = native!("scasd", 0, y.as_ptr() as u64, 0, a, status);
                assert_eq!(
                    interp_scas(&mut m, 4, a, b, status),
                    n.0,
                    "scasd {a:#x} {b:#x}"
                );
            }
        }
        for a in operands(8) {
            for b in operands(8) {
                let (x, y) = ([a], [b]);
                let n = native!("cmpsq", x.as_ptr() as u64, y.as_ptr() as u64, 0, 0, status);
                assert_eq!(
                    interp_cmps(&mut m, 8, a, b, status),
                    n.0,
                    "cmpsq {a:#x} {b:#x}"
                );
                let n = native!("scasq", 0, y.as_ptr() as u64, 0, a, status);
                assert_eq!(
                    interp_scas(&mut m, 8, a, b, status),
                    n.0,
                    "scasq {a:#x} {b:#x}"
                );
            }
        }
    }
}

#[test]
fn repe_cmpsb_and_repne_scasb_match_host() {
    let a = pattern(500, 3);
    for diff_at in [0usize, 1, 77, 499] {
        let mut b = a.clone();
        b[diff_at] = b[diff_at].wrapping_add(0x81);
        for count in [1u64, 50, 500] {
            let n = native!(
                "repe cmpsb",
                a.as_ptr() as u64,
                b.as_ptr() as u64,
                count,
                0,
                0
            );
            let mut m = TestMachine::new();
            m.load(DATA_BASE, &a);
            m.load(DATA_BASE + 0x1000, &b);
            set(&mut m, DATA_BASE, DATA_BASE + 0x1000, count);
            m.cpu.state.rflags &= !flags::STATUS;
            exec(&mut m, &enc(CMPS, 1, &[REP]));
            assert_eq!(m.cpu.state.rflags & flags::STATUS, n.0);
            assert_eq!(m.gpr(reg::RCX), n.3);
            assert_eq!(m.gpr(reg::RSI) - DATA_BASE, n.1 - a.as_ptr() as u64);
            assert_eq!(
                m.gpr(reg::RDI) - DATA_BASE - 0x1000,
                n.2 - b.as_ptr() as u64
            );
        }
        // REPNE SCASB for the byte at diff_at in b.
        let target = b[diff_at] as u64;
        let n = native!("repne scasb", 0, b.as_ptr() as u64, 500, target, 0);
        let mut m = TestMachine::new();
        m.load(DATA_BASE, &b);
        m.cpu.state.gpr[reg::RAX] = target;
        set(&mut m, 0, DATA_BASE, 500);
        m.cpu.state.rflags &= !flags::STATUS;
        exec(&mut m, &enc(SCAS, 1, &[REPNE]));
        assert_eq!(m.cpu.state.rflags & flags::STATUS, n.0);
        assert_eq!(m.gpr(reg::RCX), n.3);
        assert_eq!(m.gpr(reg::RDI) - DATA_BASE, n.2 - b.as_ptr() as u64);
    }
}

#[test]
fn addr32_zero_count_matches_host() {
    // Intel's rule (the model): a 32-bit-address REP with ECX = 0 still writes RSI/RDI/RCX
    // zero-extended. AMD's CPUs leave the three registers untouched: compared on Intel only.
    if !crate::ops::native::host_is_intel() {
        eprintln!("addr32_zero_count_matches_host: not an Intel host, skipped");
        return;
    }
    let (rsi, rdi, rcx, rax) = (
        0x1111_1111_0000_1000u64,
        0x2222_2222_0000_2000u64,
        0xdead_beef_0000_0000u64,
        0x3333_3333_4444_4444u64,
    );
    let natives = [
        (
            MOVS,
            native!(".byte 0x67, 0xf3, 0xa4", rsi, rdi, rcx, rax, 0),
        ),
        (
            STOS,
            native!(".byte 0x67, 0xf3, 0xaa", rsi, rdi, rcx, rax, 0),
        ),
        (
            LODS,
            native!(".byte 0x67, 0xf3, 0xac", rsi, rdi, rcx, rax, 0),
        ),
        (
            CMPS,
            native!(".byte 0x67, 0xf3, 0xa6", rsi, rdi, rcx, rax, 0),
        ),
        (
            SCAS,
            native!(".byte 0x67, 0xf2, 0xae", rsi, rdi, rcx, rax, 0),
        ),
    ];
    for (op, n) in natives {
        let mut m = TestMachine::new();
        set(&mut m, rsi, rdi, rcx);
        m.cpu.state.gpr[reg::RAX] = rax;
        let prefix = if op == SCAS { REPNE } else { REP };
        exec(&mut m, &enc(op, 1, &[A32, prefix]));
        assert_eq!(
            (
                m.gpr(reg::RSI),
                m.gpr(reg::RDI),
                m.gpr(reg::RCX),
                m.gpr(reg::RAX)
            ),
            (n.1, n.2, n.3, n.4),
            "op {op:#x}"
        );
    }
}
