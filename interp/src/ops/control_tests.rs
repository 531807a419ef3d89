//! Tests of the control-transfer family (`control.rs`).

use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::flags;
use crate::ops::mov::tests::{
    expect_fault, expect_fault_bytes, pf_not_present, run_bytes_to_ud2, run_one, run_to_ud2, Rng,
    UNMAPPED,
};
use crate::state::flags::{CF, FIXED1, IF, OF, STATUS, ZF};
use crate::state::reg;
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE, STACK_TOP};
use iced_x86::code_asm::*;
use iced_x86::ConditionCode;

const S: u64 = STACK_TOP;
const D: u64 = DATA_BASE;
/// The last page of the lower canonical half, mapped by [`map_top_page`].
const TOP_PAGE: u64 = 0x7fff_ffff_f000;
const TOP_PAGE_PHYS: u64 = 0x0030_0000;

/// Map the last canonical page (0x7fff_ffff_f000) to physical TOP_PAGE_PHYS, user RWX.
fn map_top_page(m: &mut TestMachine) {
    m.ram.write_u64(0x1000 + 255 * 8, 0x4000 | 7).unwrap();
    m.ram.write_u64(0x4000 + 511 * 8, 0x5000 | 7).unwrap();
    m.ram.write_u64(0x5000 + 511 * 8, 0x6000 | 7).unwrap();
    m.ram
        .write_u64(0x6000 + 511 * 8, TOP_PAGE_PHYS | 7)
        .unwrap();
    m.cpu.flush_tlb();
}

/// Run one instruction placed at `rip` in the top page; expect #GP(0) with nothing changed.
fn expect_gp_at_top(bytes: &[u8], rip: u64, setup: impl FnOnce(&mut TestMachine)) {
    let mut m = TestMachine::new();
    map_top_page(&mut m);
    setup(&mut m);
    m.load(TOP_PAGE_PHYS + (rip - TOP_PAGE), bytes);
    m.cpu.state.rip = rip;
    let before = m.cpu.state.clone();
    let stack_before = m.read_u64(S - 8);
    let e = m.run(1);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0), "{bytes:02x?}");
    assert_eq!(e.retired, 0);
    assert_eq!(m.cpu.state, before);
    assert_eq!(m.read_u64(S - 8), stack_before);
}

#[test]
fn jcc_all_conditions_rel8_and_rel32() {
    let ccs = [
        ConditionCode::o,
        ConditionCode::no,
        ConditionCode::b,
        ConditionCode::ae,
        ConditionCode::e,
        ConditionCode::ne,
        ConditionCode::be,
        ConditionCode::a,
        ConditionCode::s,
        ConditionCode::ns,
        ConditionCode::p,
        ConditionCode::np,
        ConditionCode::l,
        ConditionCode::ge,
        ConditionCode::le,
        ConditionCode::g,
    ];
    let mut rng = Rng(0x1cc);
    for (i, &cc) in ccs.iter().enumerate() {
        for _ in 0..8 {
            let fl = (rng.next() & STATUS) | FIXED1 | IF;
            let taken = flags::cond(fl, cc);
            // jcc +2 over `mov al, 1`.
            let short = [0x70 + i as u8, 0x02, 0xb0, 0x01];
            let m = run_bytes_to_ud2(&short, |m| m.cpu.state.rflags = fl);
            assert_eq!(
                m.gpr(reg::RAX) & 0xff == 0,
                taken,
                "cc {cc:?} flags {fl:#x}"
            );
            let near = [0x0f, 0x80 + i as u8, 0x02, 0, 0, 0, 0xb0, 0x01];
            let m = run_bytes_to_ud2(&near, |m| m.cpu.state.rflags = fl);
            assert_eq!(
                m.gpr(reg::RAX) & 0xff == 0,
                taken,
                "cc {cc:?} flags {fl:#x}"
            );
            assert_eq!(m.cpu.state.rflags, fl);
        }
    }
    // A backward branch.
    let (m, _) = run_one(&[0x74, 0xfe], |m| m.cpu.state.rflags = FIXED1 | ZF);
    assert_eq!(m.cpu.state.rip, CODE_BASE);
}

#[test]
fn jmp_relative_and_indirect() {
    let (m, _) = run_one(&[0xeb, 0x10], |_| {});
    assert_eq!(m.cpu.state.rip, CODE_BASE + 0x12);
    let (m, _) = run_one(&[0xe9, 0x00, 0x01, 0x00, 0x00], |_| {});
    assert_eq!(m.cpu.state.rip, CODE_BASE + 5 + 0x100);
    // 66h is ignored on a 64-bit near JMP (Intel): still rel32, 64-bit RIP.
    let (m, _) = run_one(&[0x66, 0xe9, 0x00, 0x01, 0x00, 0x00], |_| {});
    assert_eq!(m.cpu.state.rip, CODE_BASE + 6 + 0x100);
    let (m, _) = run_one(&[0xff, 0xe0], |m| m.cpu.state.gpr[reg::RAX] = D + 0x40); // jmp rax
    assert_eq!(m.cpu.state.rip, D + 0x40);
    let (m, _) = run_one(&[0x66, 0xff, 0xe0], |m| {
        m.cpu.state.gpr[reg::RAX] = D + 0x40
    });
    assert_eq!(m.cpu.state.rip, D + 0x40);
    let (m, _) = run_one(&[0xff, 0x26], |m| {
        m.cpu.state.gpr[reg::RSI] = D; // jmp [rsi]
        m.ram.write_u64(D, D + 0x80).unwrap();
    });
    assert_eq!(m.cpu.state.rip, D + 0x80);
    // Non-canonical indirect target: #GP(0) at the JMP.
    expect_fault(
        |a| a.jmp(rax),
        |m| m.cpu.state.gpr[reg::RAX] = 0x8000_0000_0000_0000,
        Fault::GP0,
    );
    expect_fault(
        |a| a.jmp(qword_ptr(UNMAPPED)),
        |_| {},
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn relative_branches_to_non_canonical_targets_fault_at_the_branch() {
    let rip = 0x7fff_ffff_ffe0;
    expect_gp_at_top(&[0xe9, 0x00, 0x01, 0x00, 0x00], rip, |_| {}); // jmp rel32
    expect_gp_at_top(&[0xeb, 0x7f], rip + 0x10, |_| {}); // jmp rel8
    expect_gp_at_top(&[0xe8, 0x00, 0x01, 0x00, 0x00], rip, |_| {}); // call: nothing pushed
    expect_gp_at_top(&[0x74, 0x7f], rip + 0x10, |m| m.cpu.state.rflags |= ZF); // je taken
    expect_gp_at_top(&[0xe2, 0x7f], rip + 0x10, |m| m.cpu.state.gpr[reg::RCX] = 5); // loop
    expect_gp_at_top(&[0xe3, 0x7f], rip + 0x10, |_| {}); // jrcxz (rcx = 0)
                                                         // Not taken: no fault, falls through.
    let mut m = TestMachine::new();
    map_top_page(&mut m);
    m.load(TOP_PAGE_PHYS + 0xff0, &[0x74, 0x7f]);
    m.cpu.state.rip = rip + 0x10;
    let e = m.run(1);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(m.cpu.state.rip, rip + 0x12);
}

#[test]
fn call_and_ret() {
    let m = run_to_ud2(
        |a| {
            let mut f = a.create_label();
            let mut done = a.create_label();
            a.call(f)?; // 5 bytes at CODE_BASE
            a.jmp(done)?;
            a.set_label(&mut f)?;
            a.mov(rbx, qword_ptr(rsp))?;
            a.ret()?;
            a.set_label(&mut done)?;
            a.nop()
        },
        |_| {},
    );
    assert_eq!(m.gpr(reg::RBX), CODE_BASE + 5);
    assert_eq!(m.gpr(reg::RSP), S);
    // call rax / call [rsp] (the target is read before the push).
    let (m, _) = run_one(&[0xff, 0xd0], |m| m.cpu.state.gpr[reg::RAX] = D);
    assert_eq!(
        (m.cpu.state.rip, m.read_u64(S - 8), m.gpr(reg::RSP)),
        (D, CODE_BASE + 2, S - 8)
    );
    let (m, _) = run_one(&[0xff, 0x14, 0x24], |m| {
        m.ram.write_u64(S, D + 0x10).unwrap()
    });
    assert_eq!(
        (m.cpu.state.rip, m.read_u64(S - 8)),
        (D + 0x10, CODE_BASE + 3)
    );
    // 66h on CALL rel32 is ignored in 64-bit mode.
    let (m, _) = run_one(&[0x66, 0xe8, 0x10, 0, 0, 0], |_| {});
    assert_eq!(
        (m.cpu.state.rip, m.read_u64(S - 8)),
        (CODE_BASE + 0x16, CODE_BASE + 6)
    );
    // ret imm16 releases extra bytes.
    let (m, _) = run_one(&[0xc2, 0x10, 0x00], |m| m.ram.write_u64(S, D).unwrap());
    assert_eq!((m.cpu.state.rip, m.gpr(reg::RSP)), (D, S + 8 + 0x10));
}

#[test]
fn call_ret_faults_are_precise() {
    // Non-canonical indirect target: nothing pushed.
    let m = expect_fault(
        |a| a.call(rax),
        |m| {
            m.cpu.state.gpr[reg::RAX] = 0x0000_8000_0000_0000;
            m.ram.write_u64(S - 8, 0x5a5a).unwrap();
        },
        Fault::GP0,
    );
    assert_eq!(m.read_u64(S - 8), 0x5a5a);
    // Push faults: RSP and RIP unchanged.
    expect_fault(
        |a| a.call(rax),
        |m| {
            m.cpu.state.gpr[reg::RAX] = D;
            m.cpu.state.gpr[reg::RSP] = UNMAPPED + 8;
        },
        pf_not_present(UNMAPPED, true),
    );
    // RET to a non-canonical address: #GP(0), RSP unchanged.
    expect_fault_bytes(
        &[0xc3],
        |m| m.ram.write_u64(S, 0xffff_7fff_0000_0000).unwrap(),
        Fault::GP0,
    );
    expect_fault_bytes(
        &[0xc3],
        |m| m.cpu.state.gpr[reg::RSP] = UNMAPPED,
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn loop_family() {
    // Count iterations with LEA (no flags touched); ZF comes from the setup.
    let body = |kind: u8| {
        move |a: &mut CodeAssembler| {
            let mut top = a.create_label();
            a.mov(ecx, 5u32)?;
            a.set_label(&mut top)?;
            a.lea(eax, dword_ptr(rax + 1))?;
            match kind {
                0 => a.loop_(top),
                1 => a.loope(top),
                _ => a.loopne(top),
            }
        }
    };
    let counts = |kind: u8, fl: u64| {
        let m = run_to_ud2(body(kind), |m| m.cpu.state.rflags = fl);
        (m.gpr(reg::RAX), m.gpr(reg::RCX))
    };
    assert_eq!(counts(0, FIXED1), (5, 0));
    assert_eq!(counts(1, FIXED1 | ZF), (5, 0));
    assert_eq!(counts(1, FIXED1), (1, 4));
    assert_eq!(counts(2, FIXED1), (5, 0));
    assert_eq!(counts(2, FIXED1 | ZF), (1, 4));
    // RCX = 0 wraps and branches; flags are untouched.
    let (m, _) = run_one(&[0xe2, 0x10], |m| m.cpu.state.rflags = FIXED1 | CF | OF);
    assert_eq!(m.gpr(reg::RCX), u64::MAX);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 0x12);
    assert_eq!(m.cpu.state.rflags, FIXED1 | CF | OF);
    // 67h: ECX is the counter and RCX is zero-extended (as on the host).
    let (m, _) = run_one(&[0x67, 0xe2, 0x10], |m| {
        m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_0000_0001
    });
    assert_eq!(m.gpr(reg::RCX), 0);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 3);
    let (m, _) = run_one(&[0x67, 0xe2, 0x10], |m| {
        m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_0000_0000
    });
    assert_eq!(m.gpr(reg::RCX), 0xffff_ffff);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 3 + 0x10);
}

#[test]
fn loop_native_addr32() {
    for start in [
        0xffff_ffff_0000_0001u64,
        0xffff_ffff_0000_0000,
        0x1_0000_0002,
    ] {
        let mut host = start;
        // SAFETY: one LOOP (addr32) whose target is the next instruction; touches RCX only.
        unsafe { core::arch::asm!(".byte 0x67, 0xe2, 0x00", inout("rcx") host) };
        let (m, _) = run_one(&[0x67, 0xe2, 0x00], |m| m.cpu.state.gpr[reg::RCX] = start);
        assert_eq!(m.gpr(reg::RCX), host, "rcx {start:#x}");
    }
}

#[test]
fn jrcxz_jecxz() {
    let big = |m: &mut TestMachine| m.cpu.state.gpr[reg::RCX] = 0x1_0000_0000;
    let (m, _) = run_one(&[0xe3, 0x10], big); // jrcxz: not taken
    assert_eq!(m.cpu.state.rip, CODE_BASE + 2);
    let (m, _) = run_one(&[0x67, 0xe3, 0x10], big); // jecxz: taken
    assert_eq!(m.cpu.state.rip, CODE_BASE + 3 + 0x10);
    let (m, _) = run_one(&[0xe3, 0x10], |_| {});
    assert_eq!(m.cpu.state.rip, CODE_BASE + 0x12);
    assert_eq!(m.gpr(reg::RCX), 0);
}

#[test]
fn traps_and_invalid_instructions() {
    // INT3 is a trap: RIP after it, one instruction retired.
    let (m, e) = run_one(&[0xcc], |_| {});
    assert_eq!(e.reason, ExitReason::Exception(Fault::Breakpoint));
    assert_eq!((e.retired, m.cpu.state.rip), (1, CODE_BASE + 1));
    // INTO does not exist in 64-bit mode.
    expect_fault_bytes(&[0xce], |_| {}, Fault::ud("invalid encoding"));
    // INT n is a trap returning the vector to the machine (RIP after it).
    let (m, e) = run_one(&[0xcd, 0x80], |_| {});
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::SoftwareInterrupt(0x80))
    );
    assert_eq!((e.retired, m.cpu.state.rip), (1, CODE_BASE + 2));
    let (m, e) = run_one(&[0xf1], |_| {});
    assert_eq!(e.reason, ExitReason::Exception(Fault::Int1));
    assert_eq!((e.retired, m.cpu.state.rip), (1, CODE_BASE + 1));
    expect_fault_bytes(&[0x0f, 0x0b], |_| {}, Fault::ud("UD2"));
    expect_fault_bytes(&[0x0f, 0xb9, 0xc0], |_| {}, Fault::ud("UD1"));
    expect_fault_bytes(&[0x0f, 0xff, 0x00], |_| {}, Fault::ud("UD0"));
    // HLT: #GP(0) at CPL 3; at CPL 0 the CPU halts with RIP after the instruction.
    expect_fault_bytes(&[0xf4], |_| {}, Fault::GP0);
    let (m, e) = run_one(&[0xf4], |m| {
        m.cpu.state.seg[crate::state::sreg::CS].selector = 0x08
    });
    assert_eq!(e.reason, ExitReason::Halt);
    assert_eq!((e.retired, m.cpu.state.rip), (1, CODE_BASE + 1));
    assert!(m.cpu.state.halted);
    // SYSCALL goes to the host in the test machine.
    let (m, e) = run_one(&[0x0f, 0x05], |_| {});
    assert_eq!(e.reason, ExitReason::Syscall);
    assert_eq!(m.cpu.state.rip, CODE_BASE + 2);
}
