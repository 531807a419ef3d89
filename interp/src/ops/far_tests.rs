//! Tests of far JMP/CALL/RETF: protected mode (direct targets, 16-bit code, call gates with a
//! stack switch, RETF to an outer level) and long mode (64-bit <-> compatibility mode).

use crate::cpu::Interpreter;
use crate::fault::Fault;
use crate::ops::segment::tests::{asm, pm_fault, pm_machine, run32, seg_desc, CODE, GATE_TARGET};
use crate::state::{reg, sreg, Segment};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use crate::testkit_sys::SysStop;
use iced_x86::code_asm::*;

/// `jmp far sel:off` (ptr16:32) in 32-bit code.
fn jmp_far32(a: &mut CodeAssembler, sel: u16, off: u32) -> Result<(), IcedError> {
    let mut b = vec![0xea];
    b.extend_from_slice(&off.to_le_bytes());
    b.extend_from_slice(&sel.to_le_bytes());
    a.db(&b)
}

/// `call far sel:off` (ptr16:32) in 32-bit code.
fn call_far32(a: &mut CodeAssembler, sel: u16, off: u32) -> Result<(), IcedError> {
    let mut b = vec![0x9a];
    b.extend_from_slice(&off.to_le_bytes());
    b.extend_from_slice(&sel.to_le_bytes());
    a.db(&b)
}

#[test]
fn far_jump_into_16bit_code_and_back() {
    let mut m = pm_machine();
    // 16-bit code at 0x8000: mov ax, 0x1234 ; jmp far dword 0x10:0x10100 (66 EA).
    let code16 = asm(16, 0x8000, |a| {
        a.mov(ax, 0x1234)?;
        a.db(&[0x66, 0xea, 0x00, 0x01, 0x01, 0x00, 0x10, 0x00])
    });
    m.load(0x8000, &code16);
    m.load(CODE + 0x100, &[0xf4]); // hlt
    let stop = run32(&mut m, |a| jmp_far32(a, 0x28, 0x8000));
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RAX] & 0xffff, 0x1234);
    assert_eq!(st.seg[sreg::CS].selector, 0x10);
    assert_eq!(st.code_bitness(), 32);
    assert_eq!(st.rip, CODE + 0x101);
}

#[test]
fn far_call_and_return_same_level() {
    let mut m = pm_machine();
    // Target: mov ecx, 5 ; retf
    m.load(0x12000, &[0xb9, 5, 0, 0, 0, 0xcb]);
    let stop = run32(&mut m, |a| {
        call_far32(a, 0x08, 0x12000)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RCX], 5);
    assert_eq!(st.seg[sreg::CS].selector, 0x10, "back in the caller");
    assert_eq!(st.gpr[reg::RSP], 0x8000);
    // The return address and CS were pushed as dwords.
    assert_eq!(m.ram.bytes()[0x8000 - 4], 0x10);
    assert_eq!(
        u32::from_le_bytes(m.ram.bytes()[0x8000 - 8..0x8000 - 4].try_into().unwrap()),
        CODE as u32 + 7
    );
    // RETF imm16 releases the parameters.
    let mut m = pm_machine();
    m.load(0x12000, &[0xca, 8, 0]); // retf 8
    let stop = run32(&mut m, |a| {
        a.push(1)?;
        a.push(2)?;
        call_far32(a, 0x10, 0x12000)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RSP], 0x8000);
}

#[test]
fn far_jump_faults() {
    // Non-conforming DPL 3 code from CPL 0.
    pm_fault(|a| jmp_far32(a, 0x40, 0), Fault::GeneralProtection(0x40));
    // A data segment.
    pm_fault(|a| jmp_far32(a, 0x18, 0), Fault::GeneralProtection(0x18));
    // Null selector.
    pm_fault(|a| jmp_far32(a, 0x00, 0), Fault::GP0);
    // Not present (the descriptor at 0x30 is data, so first its type).
    pm_fault(|a| jmp_far32(a, 0x30, 0), Fault::GeneralProtection(0x30));
    // Beyond the 16-bit segment's limit.
    pm_fault(|a| jmp_far32(a, 0x28, 0x1_0000), Fault::GP0);
    // A TSS: a task switch, not modelled.
    pm_fault(
        |a| jmp_far32(a, 0x58, 0),
        Fault::ud("hardware task switch not modelled"),
    );
    // JMP through a call gate to a more privileged segment is not allowed (CPL 3 caller).
    let mut m = pm_machine();
    let code = asm(32, CODE, |a| jmp_far32(a, 0x53, 0));
    m.load(CODE, &code);
    to_cpl3(&mut m);
    let stop = m.run_until_stop(&mut Interpreter, 10);
    assert_eq!(stop, SysStop::Exception(Fault::GeneralProtection(0x08)));
}

/// Switch the machine to CPL 3 (CS 0x43, SS 0x4b; DS stays the DPL 0 segment 0x18).
fn to_cpl3(m: &mut crate::testkit_sys::SysMachine) {
    let st = &mut m.cpu.state;
    st.seg[sreg::CS] = Segment {
        selector: 0x43,
        attr: 0xc0fb,
        limit: 0xffff_ffff,
        base: 0,
    };
    let user = Segment {
        selector: 0x4b,
        attr: 0xc0f3,
        limit: 0xffff_ffff,
        base: 0,
    };
    st.seg[sreg::SS] = user;
    st.seg[sreg::ES] = user;
}

#[test]
fn call_gate_switches_stack_and_retf_returns_outward() {
    let mut m = pm_machine();
    // Gate target (CPL 0): record SS and ESP, read the pushed words, return.
    let target = asm(32, GATE_TARGET, |a| {
        a.mov(edx, ss)?;
        a.mov(esi, esp)?;
        a.retf()
    });
    m.load(GATE_TARGET, &target);
    let code = asm(32, CODE, |a| {
        call_far32(a, 0x53, 0)?;
        a.mov(edi, esp)?;
        a.ud2()
    });
    m.load(CODE, &code);
    to_cpl3(&mut m);
    m.cpu.state.gpr[reg::RSP] = 0x7000;
    let stop = m.run_until_stop(&mut Interpreter, 100);
    assert_eq!(stop, SysStop::Exception(Fault::ud("UD2")));
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RDX], 0x18, "SS0 from the TSS");
    assert_eq!(st.gpr[reg::RSI], 0x9000 - 16, "ESP0 minus SS, ESP, CS, EIP");
    let rd = |a: usize| u32::from_le_bytes(m.ram.bytes()[a..a + 4].try_into().unwrap());
    assert_eq!(rd(0x9000 - 4), 0x4b);
    assert_eq!(rd(0x9000 - 8), 0x7000);
    assert_eq!(rd(0x9000 - 12), 0x43);
    assert_eq!(rd(0x9000 - 16), CODE as u32 + 7);
    // Back at CPL 3 on the old stack; DS (DPL 0) became null, ES (DPL 3) stays.
    assert_eq!(st.cpl(), 3);
    assert_eq!(st.seg[sreg::SS].selector, 0x4b);
    assert_eq!(st.gpr[reg::RDI], 0x7000);
    assert_eq!(st.seg[sreg::DS].selector, 0);
    assert_eq!(st.seg[sreg::DS].attr & 0x80, 0);
    assert_eq!(st.seg[sreg::ES].selector, 0x4b);
}

#[test]
fn call_gate_privilege_checks() {
    // Gate DPL 3 but RPL > DPL is fine at CPL 0 (RPL 3 <= DPL 3); a DPL 0 gate from CPL 3
    // is not.
    let mut m = pm_machine();
    // Make the gate DPL 0 (access 0x8c).
    let lo = crate::ops::segment::tests::gate_desc(0x08, GATE_TARGET as u32, 0x8c, 0);
    m.load(crate::ops::segment::tests::GDT + 0x50, &lo.to_le_bytes());
    let code = asm(32, CODE, |a| call_far32(a, 0x53, 0));
    m.load(CODE, &code);
    to_cpl3(&mut m);
    let stop = m.run_until_stop(&mut Interpreter, 10);
    assert_eq!(stop, SysStop::Exception(Fault::GeneralProtection(0x50)));
    // A bad SS0 in the TSS: #TS(SS0).
    let mut m = pm_machine();
    m.load(crate::ops::segment::tests::TSS + 8, &0x20u16.to_le_bytes());
    let code = asm(32, CODE, |a| call_far32(a, 0x53, 0));
    m.load(CODE, &code);
    to_cpl3(&mut m);
    let stop = m.run_until_stop(&mut Interpreter, 10);
    assert_eq!(stop, SysStop::Exception(Fault::InvalidTss(0x20)));
    assert_eq!(m.cpu.state.cpl(), 3);
}

/// A GDT for the 64-bit TestMachine at DATA_BASE: 0x08 code64 DPL3... the machine runs at CPL
/// 3 with user pages, so the segments here are DPL 3.
fn long_mode_gdt(m: &mut TestMachine) {
    let g = [
        0,
        seg_desc(0, 0xfffff, 0xfb, 0xa), // 0x08 code64 DPL3
        seg_desc(0, 0xfffff, 0xfb, 0xc), // 0x10 code32 DPL3 (compatibility mode)
        seg_desc(0, 0xfffff, 0xf3, 0xc), // 0x18 data DPL3
        seg_desc(0, 0xfffff, 0xfb, 0xe), // 0x20 L = 1 and D = 1: invalid
    ];
    for (i, d) in g.iter().enumerate() {
        m.load(DATA_BASE + 8 * i as u64, &d.to_le_bytes());
    }
    m.cpu.state.gdtr.base = DATA_BASE;
    m.cpu.state.gdtr.limit = (g.len() * 8 - 1) as u16;
}

#[test]
fn long_mode_far_jump_to_compatibility_mode_and_back() {
    let mut m = TestMachine::new();
    long_mode_gdt(&mut m);
    let compat_at = CODE_BASE + 0x100;
    // m16:32 pointer at DATA_BASE + 0x100.
    m.load(DATA_BASE + 0x100, &(compat_at as u32).to_le_bytes());
    m.load(DATA_BASE + 0x104, &0x13u16.to_le_bytes());
    let code = TestMachine::assemble(|a| a.jmp(fword_ptr(DATA_BASE + 0x100)));
    // Compatibility mode: mov eax, 7 ; push 0x0b ; push back ; retf (32-bit).
    let back = CODE_BASE + 0x200;
    let compat = asm(32, compat_at, |a| {
        a.mov(eax, 7)?;
        a.push(0x0b)?;
        a.push(back as u32)?;
        a.retf()
    });
    m.load(CODE_BASE + 0x100, &compat);
    m.load(back, &[0x0f, 0x0b]); // ud2 in 64-bit mode
    m.load(CODE_BASE, &code);
    m.cpu.state.rip = CODE_BASE;
    let old_sp = m.cpu.state.gpr[reg::RSP];
    let e = m.run(100);
    assert_eq!(
        e.reason,
        crate::cpu::ExitReason::Exception(Fault::ud("UD2")),
        "{e:?}"
    );
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RAX], 7);
    assert_eq!(st.seg[sreg::CS].selector, 0x0b);
    assert!(st.in_64bit_mode());
    assert_eq!(st.gpr[reg::RSP], old_sp);
    // L = 1 with D = 1 is #GP(selector).
    let mut m = TestMachine::new();
    long_mode_gdt(&mut m);
    m.load(DATA_BASE + 0x100, &0u32.to_le_bytes());
    m.load(DATA_BASE + 0x104, &0x23u16.to_le_bytes());
    let code = TestMachine::assemble(|a| a.jmp(fword_ptr(DATA_BASE + 0x100)));
    let e = m.run_code(&code, 10);
    assert_eq!(
        e.reason,
        crate::cpu::ExitReason::Exception(Fault::GeneralProtection(0x20))
    );
}

#[test]
fn long_mode_call_gate_to_cpl0_and_retfq_back() {
    let mut m = TestMachine::new();
    let target = CODE_BASE + 0x300;
    let gate_lo =
        (target & 0xffff) | (0x08 << 16) | (0xec << 40) | (((target >> 16) & 0xffff) << 48);
    let g = [
        0,
        seg_desc(0, 0xfffff, 0x9b, 0xa), // 0x08 code64 DPL0
        gate_lo,                         // 0x10 64-bit call gate DPL3 (16 bytes)
        target >> 32,
        0,
        seg_desc(0, 0xfffff, 0xfb, 0xa), // 0x28 code64 DPL3
        seg_desc(0, 0xfffff, 0xf3, 0xc), // 0x30 data DPL3
    ];
    for (i, d) in g.iter().enumerate() {
        m.load(DATA_BASE + 8 * i as u64, &d.to_le_bytes());
    }
    m.cpu.state.gdtr.base = DATA_BASE;
    m.cpu.state.gdtr.limit = (g.len() * 8 - 1) as u16;
    // 64-bit TSS at DATA_BASE + 0x800 with RSP0 = DATA_BASE + 0x8000.
    let tss = DATA_BASE + 0x800;
    m.load(tss + 4, &(DATA_BASE + 0x8000).to_le_bytes());
    m.cpu.state.tr = Segment {
        selector: 0x40,
        attr: 0x008b,
        limit: 0x67,
        base: tss,
    };
    // Far pointer m16:32 (the offset is ignored through a gate).
    m.load(DATA_BASE + 0x100, &0u32.to_le_bytes());
    m.load(DATA_BASE + 0x104, &0x13u16.to_le_bytes());
    let body = asm(64, target, |a| {
        a.mov(rbx, rsp)?;
        a.mov(ecx, ss)?;
        a.db(&[0x48, 0xcb]) // retfq
    });
    m.load(target, &body);
    let code = TestMachine::assemble(|a| {
        a.call(fword_ptr(DATA_BASE + 0x100))?;
        a.ud2()
    });
    let old_sp = m.cpu.state.gpr[reg::RSP];
    let e = m.run_code(&code, 100);
    assert_eq!(
        e.reason,
        crate::cpu::ExitReason::Exception(Fault::ud("UD2")),
        "{e:?}"
    );
    let st = &m.cpu.state;
    let top = DATA_BASE + 0x8000;
    assert_eq!(st.gpr[reg::RBX], top - 32);
    assert_eq!(st.gpr[reg::RCX], 0, "SS is the null selector with RPL 0");
    assert_eq!(m.read_u64(top - 8), 0x33);
    assert_eq!(m.read_u64(top - 16), old_sp);
    assert_eq!(m.read_u64(top - 24), 0x2b);
    assert_eq!(m.read_u64(top - 32), CODE_BASE + 7);
    assert_eq!(st.cpl(), 3);
    assert_eq!(st.seg[sreg::CS].selector, 0x2b);
    assert_eq!(st.seg[sreg::SS].selector, 0x33);
    assert_eq!(st.gpr[reg::RSP], old_sp);
}
