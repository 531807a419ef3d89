//! Tests of the stack family (`stack.rs`), with a native comparison of POPF at CPL 3.

use super::{popf_value, pushf_value};
use crate::fault::Fault;
use crate::ops::mov::tests::{
    expect_fault, expect_fault_bytes, make_read_only, pf_not_present, run_bytes_to_ud2, run_to_ud2,
    Rng, UNMAPPED,
};
use crate::state::flags::{AC, CF, DF, FIXED1, ID, IF, IOPL, NT, RF, STATUS, TF, VIF, VIP, VM, ZF};
use crate::state::{reg, sreg};
use crate::testkit::{TestMachine, DATA_BASE, STACK_TOP};
use iced_x86::code_asm::*;

const S: u64 = STACK_TOP;
const D: u64 = DATA_BASE;

#[test]
fn push_pop_registers_memory_immediates() {
    let m = run_to_ud2(
        |a| {
            a.push(rax)?; // S-8
            a.push(-128i32)?; // imm8 sign-extended to 64: S-16
            a.push(0x7fff_ffffi32)?; // imm32: S-24
            a.push(qword_ptr(D))?; // S-32
            a.pop(rbx)?; // rbx = [D], rsp = S-24
            a.pop(qword_ptr(D + 8))?; // [D+8] = 0x7fffffff, rsp = S-16
            a.pop(rcx)?; // rcx = -128, rsp = S-8
            a.pop(r12)
        },
        |m| {
            m.cpu.state.gpr[reg::RAX] = 0x1122_3344_5566_7788;
            m.ram.write_u64(D, 0xfeed_face_dead_beef).unwrap();
        },
    );
    assert_eq!(m.gpr(reg::RBX), 0xfeed_face_dead_beef);
    assert_eq!(m.read_u64(D + 8), 0x7fff_ffff);
    assert_eq!(m.gpr(reg::RCX), (-128i64) as u64);
    assert_eq!(m.gpr(reg::R12), 0x1122_3344_5566_7788);
    assert_eq!(m.gpr(reg::RSP), S);
}

#[test]
fn push_pop_16bit_operand_size() {
    let m = run_bytes_to_ud2(
        &[
            0x66, 0x50, // push ax
            0x66, 0x6a, 0x80, // push word -128 (0xff80)
            0x66, 0x68, 0x34, 0x12, // push word 0x1234
            0x66, 0xff, 0x36, // push word [rsi]
            0x66, 0x5b, // pop bx
            0x66, 0x8f, 0x47, 0x08, // pop word [rdi+8]
        ],
        |m| {
            m.cpu.state.gpr[reg::RAX] = 0xaaaa_bbbb_cccc_dddd;
            m.cpu.state.gpr[reg::RBX] = u64::MAX;
            m.cpu.state.gpr[reg::RSI] = D;
            m.cpu.state.gpr[reg::RDI] = D;
            m.ram.write_u64(D, 0x9876).unwrap();
            m.ram.write_u64(D + 8, u64::MAX).unwrap();
        },
    );
    assert_eq!(m.gpr(reg::RSP), S - 4);
    assert_eq!(m.gpr(reg::RBX), 0xffff_ffff_ffff_9876);
    assert_eq!(m.read_u64(D + 8), 0xffff_ffff_ffff_1234);
    assert_eq!(m.read_u64(S - 8) >> 32, 0xdddd_ff80);
}

#[test]
fn push_rsp_pop_rsp_and_pop_rsp_relative() {
    let m = run_to_ud2(|a| a.push(rsp), |_| {});
    assert_eq!(m.read_u64(S - 8), S);
    assert_eq!(m.gpr(reg::RSP), S - 8);
    let m = run_to_ud2(|a| a.pop(rsp), |m| m.ram.write_u64(S, 0x1234_5678).unwrap());
    assert_eq!(m.gpr(reg::RSP), 0x1234_5678);
    // POP [RSP+8]: the address is computed after RSP is incremented (Intel).
    let m = run_to_ud2(
        |a| a.pop(qword_ptr(rsp + 8)),
        |m| {
            m.ram.write_u64(S, 0xaaaa).unwrap();
            m.ram.write_u64(S + 8, 0xbbbb).unwrap();
            m.ram.write_u64(S + 16, 0xcccc).unwrap();
        },
    );
    assert_eq!(m.gpr(reg::RSP), S + 8);
    assert_eq!(m.read_u64(S + 8), 0xbbbb);
    assert_eq!(m.read_u64(S + 16), 0xaaaa);
    // PUSH [RSP]: addressed with the old RSP.
    let m = run_to_ud2(
        |a| a.push(qword_ptr(rsp)),
        |m| m.ram.write_u64(S, 0x77).unwrap(),
    );
    assert_eq!(m.read_u64(S - 8), 0x77);
}

#[test]
fn push_pop_segment_registers() {
    let m = run_bytes_to_ud2(
        &[
            0x0f, 0xa0, // push fs (8 bytes, zero-extended)
            0x66, 0x0f, 0xa8, // push gs (2 bytes)
        ],
        |m| {
            m.cpu.state.seg[sreg::FS].selector = 0x1234;
            m.cpu.state.seg[sreg::GS].selector = 0xabcd;
            m.ram.write_u64(S - 8, u64::MAX).unwrap();
            m.ram.write_u64(S - 16, u64::MAX).unwrap();
        },
    );
    assert_eq!(m.read_u64(S - 8), 0x1234);
    assert_eq!(m.read_u64(S - 16), 0xabcd_ffff_ffff_ffff);
    assert_eq!(m.gpr(reg::RSP), S - 10);
    // POP FS/GS load with the segment checks (here: beyond the GDT limit, #GP(selector)).
    for code in [[0x0f, 0xa1], [0x0f, 0xa9]] {
        expect_fault_bytes(
            &code,
            |m| {
                let top = m.cpu.state.gpr[reg::RSP];
                m.ram.write_u64(top, 0x13).unwrap();
                m.cpu.state.gdtr.limit = 7;
            },
            Fault::GeneralProtection(0x10),
        );
    }
}

#[test]
fn stack_faults_leave_rsp_unchanged() {
    expect_fault(
        |a| a.push(rax),
        |m| m.cpu.state.gpr[reg::RSP] = UNMAPPED + 8,
        pf_not_present(UNMAPPED, true),
    );
    expect_fault(
        |a| a.pop(rax),
        |m| m.cpu.state.gpr[reg::RSP] = UNMAPPED,
        pf_not_present(UNMAPPED, false),
    );
    // POP to an unwritable memory operand: RSP is restored.
    expect_fault(
        |a| a.pop(qword_ptr(UNMAPPED)),
        |_| {},
        pf_not_present(UNMAPPED, true),
    );
    // PUSH from an unreadable memory operand.
    expect_fault(
        |a| a.push(qword_ptr(UNMAPPED)),
        |_| {},
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn pushf_clears_rf_and_vm() {
    assert_eq!(
        pushf_value(FIXED1 | RF | IF | CF | AC, 8),
        FIXED1 | IF | CF | AC
    );
    assert_eq!(pushf_value(FIXED1 | RF | IF | CF | AC, 2), FIXED1 | IF | CF);
    let m = run_bytes_to_ud2(&[0x9c, 0x66, 0x9c], |m| {
        m.cpu.state.rflags = FIXED1 | IF | RF | ID | ZF | DF;
    });
    assert_eq!(m.read_u64(S - 8), FIXED1 | IF | ID | ZF | DF);
    assert_eq!(m.read_u64(S - 16) >> 48, FIXED1 | IF | ZF | DF);
    assert_eq!(m.gpr(reg::RSP), S - 10);
}

#[test]
fn popf_privilege_rules() {
    let all = u64::MAX;
    let base = FIXED1 | IF;
    // CPL 3, IOPL 0: IF and IOPL stay; RF/VM cleared; VIP/VIF kept; AC, ID, NT, DF, TF load.
    let want = FIXED1 | IF | STATUS | TF | DF | NT | AC | ID;
    assert_eq!(popf_value(base, all, 3, 0, 8), want);
    assert_eq!(popf_value(base, 0, 3, 0, 8), FIXED1 | IF);
    assert_eq!(
        popf_value(base | VIP | VIF, 0, 3, 0, 8),
        FIXED1 | IF | VIP | VIF
    );
    // CPL 3 with IOPL 3: IF loads, IOPL does not.
    assert_eq!(popf_value(base | IOPL, 0, 3, 3, 8), FIXED1 | IOPL);
    // CPL 0: IOPL and IF load.
    assert_eq!(popf_value(base, IOPL, 0, 0, 8), FIXED1 | IOPL);
    assert_eq!(popf_value(FIXED1, all, 0, 0, 8), want | IOPL);
    // 16-bit: bits 16 and up untouched (AC, ID stay), RF cleared.
    assert_eq!(popf_value(base | AC | RF, 0, 0, 0, 2), FIXED1 | AC);
    assert_eq!(popf_value(base | AC, 0xffff, 3, 0, 2), want & 0xffff | AC);
    // 32-bit: reserved high bits never load.
    assert_eq!(popf_value(FIXED1, all, 0, 0, 4), want | IOPL);
    // RF never survives; VM is never loaded (a V86 POPF keeps it, nothing else sets it).
    assert_eq!(popf_value(base | RF, RF | VM, 0, 0, 8), base & !IF);
    assert_eq!(popf_value(base | VM | RF, RF, 3, 3, 8), (base & !IF) | VM);
}

#[test]
fn popf_executes_with_privilege_and_end_of_block() {
    // At CPL 0 (CS.RPL = 0) POPFQ can change IF and IOPL.
    let m = run_to_ud2(
        |a| {
            a.push(0x3000i32 | 0x2 | 0x1)?; // IOPL=3, CF
            a.popfq()
        },
        |m| {
            m.cpu.state.seg[sreg::CS].selector = 0x08;
        },
    );
    assert_eq!(m.cpu.state.rflags, FIXED1 | IOPL | CF);
    // At CPL 3 they stay, and RSP moves.
    let m = run_to_ud2(
        |a| {
            a.push(0x3000i32 | 0x2 | 0x1)?;
            a.popfq()
        },
        |_| {},
    );
    assert_eq!(m.cpu.state.rflags, FIXED1 | IF | CF);
    assert_eq!(m.gpr(reg::RSP), S);
    // POPF from an unmapped stack: nothing changes.
    expect_fault_bytes(
        &[0x9d],
        |m| m.cpu.state.gpr[reg::RSP] = UNMAPPED,
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn popf_native_cpl3() {
    let mut rng = Rng(0x9d9d);
    for i in 0..64 {
        // Never TF (it would trap on the host); everything else is fair.
        let v = rng.next() & !TF;
        let v = if i % 4 == 0 { v & 0xffff_ffff } else { v };
        let wide = i % 2 == 0;
        let (before, after): (u64, u64);
        // SAFETY: loads RFLAGS from a value without TF, reads it back, and restores the
        // original RFLAGS before leaving the block. Stack use is balanced.
        unsafe {
            if wide {
                core::arch::asm!("pushfq", "pop {b}", "push {v}", "popfq", "pushfq", "pop {r}",
                    "push {b}", "popfq", v = in(reg) v, b = out(reg) before, r = out(reg) after);
            } else {
                core::arch::asm!("pushfq", "pop {b}", "push {v:x}", ".byte 0x66, 0x9d", "pushfq",
                    "pop {r}", "push {b}", "popfq", v = in(reg) v, b = out(reg) before,
                    r = out(reg) after);
            }
        }
        let code: &[u8] = if wide { &[0x9d] } else { &[0x66, 0x9d] };
        let size = if wide { 8 } else { 2 };
        let m = run_bytes_to_ud2(code, |m| {
            m.cpu.state.rflags = before;
            m.ram.write_u64(S, v).unwrap();
        });
        assert_eq!(
            m.cpu.state.rflags, after,
            "popf{size} {v:#x} over {before:#x}"
        );
        assert_eq!(m.gpr(reg::RSP), S + size);
    }
}

#[test]
fn enter_level_0_1_3_and_masking() {
    let b = 0x0060_0000u64; // caller's frame pointer, with saved frame pointers below it
    let setup = |m: &mut TestMachine| {
        m.cpu.state.gpr[reg::RBP] = b;
        m.ram.write_u64(b - 8, 0x1111).unwrap();
        m.ram.write_u64(b - 16, 0x2222).unwrap();
    };
    let m = run_to_ud2(|a| a.enter(0x20u32, 0u32), setup);
    assert_eq!(m.read_u64(S - 8), b);
    assert_eq!(m.gpr(reg::RBP), S - 8);
    assert_eq!(m.gpr(reg::RSP), S - 8 - 0x20);
    let m = run_to_ud2(|a| a.enter(0x10u32, 1u32), setup);
    assert_eq!(m.read_u64(S - 16), S - 8);
    assert_eq!(m.gpr(reg::RBP), S - 8);
    assert_eq!(m.gpr(reg::RSP), S - 16 - 0x10);
    let m = run_to_ud2(|a| a.enter(0u32, 3u32), setup);
    assert_eq!(m.read_u64(S - 8), b);
    assert_eq!(m.read_u64(S - 16), 0x1111);
    assert_eq!(m.read_u64(S - 24), 0x2222);
    assert_eq!(m.read_u64(S - 32), S - 8);
    assert_eq!(m.gpr(reg::RBP), S - 8);
    assert_eq!(m.gpr(reg::RSP), S - 32);
    // The level is taken mod 32: 33 acts as 1.
    let m = run_bytes_to_ud2(&[0xc8, 0x10, 0x00, 33], setup);
    assert_eq!(m.read_u64(S - 16), S - 8);
    assert_eq!(m.gpr(reg::RSP), S - 16 - 0x10);
    // Level 31 copies 30 frame pointers.
    let m = run_bytes_to_ud2(&[0xc8, 0x00, 0x00, 31], setup);
    assert_eq!(m.gpr(reg::RSP), S - 32 * 8);
    assert_eq!(m.read_u64(S - 32 * 8), S - 8);
}

#[test]
fn enter_16bit_keeps_rbp_upper_bits() {
    // As on the host: frame pointers are read at the full RBP minus 2*i, BP gets FrameTemp's
    // low 16 bits and RBP's upper bits stay, RSP moves with 64-bit arithmetic.
    let b = 0x0060_0001u64;
    let m = run_bytes_to_ud2(&[0x66, 0xc8, 0x10, 0x00, 0x02], |m| {
        m.cpu.state.gpr[reg::RBP] = b;
        m.ram.write_u64(b - 2 - 6, 0xbeef_0000_0000_0000).unwrap(); // word at b-2 = 0xbeef
    });
    let w = |a: u64| m.read_u64(a) & 0xffff;
    assert_eq!(w(S - 2), b & 0xffff);
    assert_eq!(w(S - 4), 0xbeef);
    assert_eq!(w(S - 6), (S - 2) & 0xffff);
    assert_eq!(m.gpr(reg::RBP), (b & !0xffff) | ((S - 2) & 0xffff));
    assert_eq!(m.gpr(reg::RSP), S - 6 - 0x10);
}

#[test]
fn enter_faults_are_precise() {
    // A write at the final RSP is checked: the frame would end in a read-only page.
    let top = 0x0060_0010u64;
    let m = expect_fault(
        |a| a.enter(0x20u32, 0u32),
        |m| {
            make_read_only(m, 0x0040_0000);
            m.cpu.state.gpr[reg::RSP] = top;
            m.ram.write_u64(top - 8, 0x5555).unwrap();
            m.cpu.state.gpr[reg::RBP] = 0x1234;
        },
        Fault::PageFault {
            addr: top - 8 - 0x20,
            code: 7,
        },
    );
    // As on the reference host, the push of RBP is already in memory when the final check
    // faults; registers are unchanged.
    assert_eq!(m.read_u64(top - 8), 0x1234);
    assert_eq!(m.gpr(reg::RSP), top);
    // Exactly at the page boundary it is fine.
    let m = run_to_ud2(
        |a| a.enter(0x8u32, 0u32),
        |m| {
            make_read_only(m, 0x0040_0000);
            m.cpu.state.gpr[reg::RSP] = top;
        },
    );
    assert_eq!(m.gpr(reg::RSP), 0x0060_0000);
    // A nested frame pointer that cannot be read.
    expect_fault(
        |a| a.enter(0u32, 2u32),
        |m| m.cpu.state.gpr[reg::RBP] = UNMAPPED + 8,
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn leave_64_and_16() {
    let m = run_to_ud2(
        |a| a.leave(),
        |m| {
            m.cpu.state.gpr[reg::RBP] = S + 0x40;
            m.ram.write_u64(S + 0x40, 0xfeed).unwrap();
        },
    );
    assert_eq!(m.gpr(reg::RSP), S + 0x48);
    assert_eq!(m.gpr(reg::RBP), 0xfeed);
    let m = run_bytes_to_ud2(&[0x66, 0xc9], |m| {
        m.cpu.state.gpr[reg::RBP] = S + 0x40;
        m.ram.write_u64(S + 0x40, 0x1234_5678).unwrap();
    });
    assert_eq!(m.gpr(reg::RSP), S + 0x42);
    assert_eq!(m.gpr(reg::RBP), ((S + 0x40) & !0xffff) | 0x5678);
    expect_fault(
        |a| a.leave(),
        |m| m.cpu.state.gpr[reg::RBP] = UNMAPPED,
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn popf_ends_block() {
    let ins = iced_x86::Decoder::new(64, &[0x9d], iced_x86::DecoderOptions::NONE).decode();
    assert!(super::ends_block(&ins));
    let ins = iced_x86::Decoder::new(64, &[0x9c], iced_x86::DecoderOptions::NONE).decode();
    assert!(!super::ends_block(&ins));
}

#[test]
fn popf_setting_if_yields_and_v86_needs_iopl3() {
    use crate::cpu::ExitReason;
    use crate::ops::systest::{long_machine, run};
    // CPL 0: POPF that sets IF stops the engine right after it; one that keeps IF clear
    // does not.
    let mut m = long_machine(|a| {
        a.push(0x2i32)?;
        a.popfq()?;
        a.push(0x202i32)?;
        a.popfq()?;
        a.hlt()
    });
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Yield);
    assert_eq!(e.retired, 4);
    assert_ne!(m.cpu.state.rflags & IF, 0);
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    // Virtual-8086 mode with IOPL < 3: PUSHF and POPF are #GP(0) (no VME).
    for code in [0x9cu8, 0x9d] {
        let mut m = crate::ops::systest::prot_machine(|a| a.hlt());
        m.load(crate::ops::systest::CODE, &[code]);
        m.cpu.state.rflags |= VM;
        m.cpu.state.seg[sreg::CS].attr &= !(1 << 14);
        let e = m.run(1);
        assert_eq!(e.reason, ExitReason::Exception(Fault::GP0), "{code:#x}");
    }
}
