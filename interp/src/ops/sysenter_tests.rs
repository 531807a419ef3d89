//! Tests of SYSCALL/SYSRET and SYSENTER/SYSEXIT.

use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::ops::msr::num::*;
use crate::ops::systest::{asm, long_machine, prot_machine, run};
use crate::state::flags::{DF, IF};
use crate::state::{ctl, reg, sreg};
use crate::testkit::{TestMachine, CODE_BASE};
use crate::testkit_sys::SysMachine;
use iced_x86::code_asm::*;

const USER: u64 = 0x20000;
const ENTRY: u64 = 0x30000;

fn gp() -> ExitReason {
    ExitReason::Exception(Fault::GP0)
}

fn is_ud(r: ExitReason) -> bool {
    matches!(r, ExitReason::Exception(Fault::InvalidOpcode { .. }))
}

/// Kernel prologue: STAR (kernel CS 0x10, user base 0x23), LSTAR = ENTRY, SFMASK = TF|IF|DF|AC.
fn set_star(a: &mut CodeAssembler) -> Result<(), iced_x86::IcedError> {
    a.mov(ecx, STAR)?;
    a.xor(eax, eax)?;
    a.mov(edx, 0x0023_0010u32)?;
    a.wrmsr()?;
    a.mov(ecx, LSTAR)?;
    a.mov(eax, ENTRY as u32)?;
    a.xor(edx, edx)?;
    a.wrmsr()?;
    a.mov(ecx, SFMASK)?;
    a.mov(eax, 0x4_0700u32)?;
    a.wrmsr()
}

#[test]
fn syscall_sysret_round_trip() {
    let mut m = long_machine(|a| {
        set_star(a)?;
        a.mov(ecx, USER as u32)?;
        a.mov(r11d, 0x602u32)?; // IF | DF
        a.sysretq()
    });
    let user = asm(64, USER, |a| {
        a.mov(ebx, cs)?;
        a.mov(esi, ss)?;
        a.pushfq()?;
        a.pop(rdi)?;
        a.syscall()?;
        a.ud2()
    });
    let syscall_end = USER + user.len() as u64 - 2;
    m.load(USER, &user);
    m.load(ENTRY, &[0xf4]); // hlt
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x33, "user CS = STAR[63:48] + 16, RPL 3");
    assert_eq!(st.gpr[reg::RSI], 0x2b, "user SS = STAR[63:48] + 8, RPL 3");
    assert_eq!(st.gpr[reg::RDI], 0x602, "RFLAGS from R11");
    assert_eq!(st.gpr[reg::RCX], syscall_end);
    assert_eq!(st.gpr[reg::R11], 0x602);
    assert_eq!(st.rflags, 0x2, "RFLAGS &= ~SFMASK");
    assert_eq!(st.seg[sreg::CS].selector, 0x10);
    assert!(st.seg[sreg::CS].long());
    assert_eq!(st.seg[sreg::SS].selector, 0x18);
    assert_eq!(st.cpl(), 0);
    assert_eq!(st.rip, ENTRY + 1);
}

#[test]
fn sysret_to_compatibility_mode() {
    let mut m = long_machine(|a| {
        set_star(a)?;
        a.mov(rcx, 0xffff_ffff_0002_0000u64)?; // ECX is used
        a.mov(r11d, 0x2u32)?;
        a.sysret()
    });
    m.load(USER, &[0xf4]); // hlt: #GP at CPL 3
    assert_eq!(run(&mut m, 100).reason, gp());
    let st = &m.cpu.state;
    assert_eq!(st.rip, USER);
    assert_eq!(st.seg[sreg::CS].selector, 0x23);
    assert!(!st.seg[sreg::CS].long());
    assert!(st.seg[sreg::CS].default_big());
    assert_eq!(st.seg[sreg::SS].selector, 0x2b);
    assert_eq!(st.code_bitness(), 32);
}

#[test]
fn sysret_faults() {
    // Non-canonical RCX: #GP at CPL 0, nothing changed.
    let mut m = long_machine(|a| {
        a.mov(rcx, 0x0000_8000_0000_0000u64)?;
        a.sysretq()
    });
    m.cpu.state.star = 0x0023_0010_0000_0000;
    assert_eq!(run(&mut m, 10).reason, gp());
    assert_eq!(m.cpu.state.cpl(), 0);
    assert_eq!(m.cpu.state.seg[sreg::CS].selector, 0x08);
    // CPL 3.
    let mut m = TestMachine::new();
    let e = m.run_code(&TestMachine::assemble(|a| a.sysretq()), 1);
    assert_eq!(e.reason, gp());
    // EFER.SCE clear: SYSCALL and SYSRET are #UD.
    for code in [&[0x0f, 0x05][..], &[0x48, 0x0f, 0x07]] {
        let mut m = long_machine(|a| a.hlt());
        m.load(crate::ops::systest::CODE, code);
        m.cpu.state.efer &= !ctl::EFER_SCE;
        assert!(is_ud(run(&mut m, 10).reason), "{code:x?}");
    }
}

#[test]
fn syscall_in_compatibility_mode_is_ud_on_intel() {
    let mut m = long_machine(|a| a.hlt());
    m.load(crate::ops::systest::CODE, &[0x0f, 0x05]);
    let code_seg = &mut m.cpu.state.seg[sreg::CS];
    code_seg.attr = (code_seg.attr & !(1 << 13)) | (1 << 14);
    assert!(is_ud(run(&mut m, 10).reason));
}

#[test]
fn syscall_to_host_keeps_its_path() {
    let mut m = TestMachine::new();
    m.cpu.state.sfmask = 0x200;
    let e = m.run_code(&TestMachine::assemble(|a| a.syscall()), 10);
    assert_eq!(e.reason, ExitReason::Syscall);
    assert_eq!(m.gpr(reg::RCX), CODE_BASE + 2);
    assert_ne!(
        m.cpu.state.rflags & IF,
        0,
        "no kernel entry on the host path"
    );
    assert_eq!(m.cpu.state.cpl(), 3);
}

#[test]
fn sysenter_sysexit_round_trip_in_protected_mode() {
    let mut m = prot_machine(|a| {
        a.mov(ecx, SYSENTER_CS)?;
        a.mov(eax, 0x60u32)?;
        a.xor(edx, edx)?;
        a.wrmsr()?;
        a.mov(ecx, SYSENTER_ESP)?;
        a.mov(eax, 0x70000u32)?;
        a.wrmsr()?;
        a.mov(ecx, SYSENTER_EIP)?;
        a.mov(eax, ENTRY as u32)?;
        a.wrmsr()?;
        a.mov(ecx, 0x50000u32)?;
        a.mov(edx, USER as u32)?;
        a.sysexit()
    });
    m.load(
        USER,
        &asm(32, USER, |a| {
            a.mov(ebx, cs)?;
            a.mov(esi, ss)?;
            a.mov(edi, esp)?;
            a.sysenter()
        }),
    );
    m.load(ENTRY, &[0xf4]);
    m.cpu.state.rflags |= IF | DF;
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x73);
    assert_eq!(st.gpr[reg::RSI], 0x7b);
    assert_eq!(st.gpr[reg::RDI], 0x50000);
    assert_eq!(st.gpr[reg::RSP], 0x70000);
    assert_eq!(st.seg[sreg::CS].selector, 0x60);
    assert_eq!(st.seg[sreg::SS].selector, 0x68);
    assert_eq!(st.rflags & IF, 0);
    assert_ne!(st.rflags & DF, 0);
    assert_eq!(st.code_bitness(), 32);
}

#[test]
fn sysenter_and_sysexit_in_long_mode() {
    // SYSENTER from CPL 3 in 64-bit mode lands in 64-bit mode at CPL 0.
    let mut m = TestMachine::new();
    m.cpu.state.msr.sysenter_cs = 0x08;
    m.cpu.state.msr.sysenter_eip = CODE_BASE + 0x100;
    m.cpu.state.msr.sysenter_esp = 0x7000;
    m.load(CODE_BASE + 0x100, &[0xf4]);
    let e = m.run_code(&TestMachine::assemble(|a| a.sysenter()), 10);
    assert_eq!(e.reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.cpl(), 0);
    assert!(m.cpu.state.in_64bit_mode());
    assert_eq!(m.gpr(reg::RSP), 0x7000);
    // SYSEXIT64: CS = SYSENTER_CS + 32, SS = + 40, RPL 3.
    let mut m = long_machine(|a| {
        a.mov(rcx, 0x5_0000u64)?;
        a.mov(rdx, USER)?;
        a.sysexitq()
    });
    m.cpu.state.msr.sysenter_cs = 0x10;
    m.load(USER, &[0xf4]);
    assert_eq!(run(&mut m, 10).reason, gp());
    let st = &m.cpu.state;
    assert_eq!(st.rip, USER);
    assert_eq!(st.seg[sreg::CS].selector, 0x33);
    assert_eq!(st.seg[sreg::SS].selector, 0x3b);
    assert!(st.in_64bit_mode());
    assert_eq!(st.gpr[reg::RSP], 0x5_0000);
    // Non-canonical RDX: #GP at CPL 0.
    let mut m = long_machine(|a| {
        a.mov(rdx, 0x0000_8000_0000_0000u64)?;
        a.sysexitq()
    });
    m.cpu.state.msr.sysenter_cs = 0x10;
    assert_eq!(run(&mut m, 10).reason, gp());
    assert_eq!(m.cpu.state.cpl(), 0);
}

#[test]
fn sysenter_sysexit_faults() {
    // Null SYSENTER_CS.
    let mut m = prot_machine(|a| a.sysenter());
    assert_eq!(run(&mut m, 10).reason, gp());
    let mut m = prot_machine(|a| a.sysexit());
    assert_eq!(run(&mut m, 10).reason, gp());
    // Real mode.
    let mut m = SysMachine::new(2);
    m.load(0x7c00, &[0x0f, 0x34]);
    m.start_real(0, 0x7c00);
    m.cpu.state.msr.sysenter_cs = 0x08;
    assert_eq!(m.run(10).reason, gp());
    // SYSEXIT at CPL 3.
    let mut m = TestMachine::new();
    m.cpu.state.msr.sysenter_cs = 0x08;
    let e = m.run_code(&TestMachine::assemble(|a| a.sysexitq()), 1);
    assert_eq!(e.reason, gp());
}

#[test]
fn all_four_end_blocks() {
    for code in [
        &[0x0f, 0x05][..],
        &[0x48, 0x0f, 0x07],
        &[0x0f, 0x34],
        &[0x0f, 0x35],
    ] {
        let ins = iced_x86::Decoder::with_ip(64, code, 0, 0).decode();
        assert!(crate::ops::ends_block(&ins), "{code:x?}");
    }
}

/// Long mode at CPL 0: read the supervisor-only 2 MiB page at `KPAGE` (so its translation is
/// in the supervisor set), then SYSRET to `user` at [`USER`].
const KPAGE: u64 = 0x40_0000;
fn kernel_reads_then_sysrets(user: &[u8]) -> SysMachine {
    let mut m = long_machine(|a| {
        set_star(a)?;
        a.mov(rax, qword_ptr(KPAGE))?;
        a.mov(ecx, USER as u32)?;
        a.mov(r11d, 0x2u32)?;
        a.sysretq()
    });
    // The 2 MiB page at KPAGE: present, writable, supervisor only.
    m.ram
        .write_u64(crate::ops::systest::PD + 2 * 8, KPAGE | 0x83)
        .unwrap();
    m.ram.write_u64(KPAGE, 0x1234).unwrap();
    m.load(USER, user);
    m
}

/// A CPL change selects the TLB's set for the new privilege instead of flushing the TLB: a
/// supervisor-only translation survives SYSRET and SYSCALL, and user code right after SYSRET
/// still faults on it.
#[test]
fn sysret_and_syscall_switch_tlb_sets() {
    // User code SYSCALLs straight back to ENTRY: HLT.
    let mut m = kernel_reads_then_sysrets(&asm(64, USER, |a| {
        a.syscall()?;
        a.ud2()
    }));
    m.load(ENTRY, &asm(64, ENTRY, |a| a.hlt()));
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RAX], 0x1234);
    assert!(!m.cpu.tlb.is_user(), "back at CPL 0: the supervisor set");
    assert_eq!(
        m.cpu.tlb.lookup(KPAGE, crate::mmu::Access::Read),
        Some(KPAGE),
        "the kernel's translation survived the two privilege changes"
    );
    // User code reads the supervisor-only page right after SYSRET.
    let mut m = kernel_reads_then_sysrets(&asm(64, USER, |a| {
        a.mov(rbx, qword_ptr(KPAGE))?;
        a.hlt()
    }));
    assert_eq!(
        run(&mut m, 100).reason,
        ExitReason::Exception(Fault::PageFault {
            addr: KPAGE,
            code: crate::fault::pf::PRESENT | crate::fault::pf::USER,
        })
    );
}
