//! Tests of IRET and HLT (`ops/interrupt.rs`) on the system test machine; the environments
//! (GDT, TSS, IDT, page tables) come from the delivery tests in `interrupt_tests.rs`.

use crate::fault::Fault;
use crate::interrupt::tests::{
    asm, long_env, protected_env, rd64, record_handler, seg_of, set_gate64, LGDT, LH, LUSER, PUSER,
    RSP0,
};
use crate::state::{flags, reg, sreg};
use crate::testkit_sys::{SysMachine, SysStop};
use crate::Interpreter;
use iced_x86::code_asm::*;

/// Put the CPU at CPL 0 in 64-bit kernel code with a kernel stack.
fn to_kernel(m: &mut SysMachine) {
    let kcode = seg_of(m, LGDT, 0x08);
    let kdata = seg_of(m, LGDT, 0x10);
    let st = &mut m.cpu.state;
    st.seg = [kdata; 6];
    st.seg[sreg::CS] = kcode;
    st.gpr[reg::RSP] = RSP0;
    m.cpu.flush_caches();
}

/// Code that pushes an IRETQ frame (SS, RSP, RFLAGS, CS, RIP) and executes IRETQ.
fn iretq_code(at: u64, ss_: i32, rsp_: i32, rflags: i32, cs_: i32, rip: i32) -> Vec<u8> {
    asm(64, at, |a| {
        a.push(ss_)?;
        a.push(rsp_)?;
        a.push(rflags)?;
        a.push(cs_)?;
        a.push(rip)?;
        a.iretq()
    })
}

/// IRETQ from CPL 0 to 32-bit compatibility-mode code at CPL 3; an exception there goes
/// through the 64-bit IDT with the compat CS in the frame.
#[test]
fn iretq_to_compatibility_mode() {
    let mut m = long_env();
    m.ram.write_u64(LGDT + 0x18, 0x00cf_fb00_0000_ffff).unwrap(); // 32-bit user code 0x1b
    to_kernel(&mut m);
    let target = LUSER + 0x100;
    m.load(
        LUSER,
        &iretq_code(LUSER, 0x33, 0x9000, 0x202, 0x1b, target as i32),
    );
    let compat = asm(32, target, |a| {
        a.mov(ebx, 5)?;
        a.ud2()
    });
    m.load(target, &compat);
    set_gate64(&mut m, 6, LH, 0, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, false);
    assert_eq!(m.run_until_stop(&mut Interpreter, 50), SysStop::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RBX], 5);
    assert_eq!(rd64(&m, 0x5008), target + 5, "RIP at UD2");
    assert_eq!(rd64(&m, 0x5010), 0x1b, "compat CS");
    assert_eq!(rd64(&m, 0x5020), 0x9000, "compat ESP");
    assert_eq!(rd64(&m, 0x5028), 0x33);
}

/// IRETQ at CPL 3 to a CPL-0 selector: #GP(selector) with RIP at the IRETQ. At CPL 0, IRETQ
/// to CPL 0 pops a null SS (allowed in 64-bit mode).
#[test]
fn iretq_privilege_checks_and_null_ss() {
    let mut m = long_env();
    set_gate64(&mut m, 13, LH, 0, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, true);
    let code = iretq_code(LUSER, 0x10, 0x9000, 0x202, 0x08, 0x1234);
    m.load(LUSER, &code);
    assert_eq!(m.run_until_stop(&mut Interpreter, 50), SysStop::Halt);
    assert_eq!(rd64(&m, 0x5008), 0x08, "#GP(CS selector)");
    assert_eq!(
        rd64(&m, 0x5010),
        LUSER + code.len() as u64 - 2,
        "RIP at IRETQ"
    );

    let mut m = long_env();
    to_kernel(&mut m);
    let target = LUSER + 0x100;
    m.load(
        LUSER,
        &iretq_code(LUSER, 0, 0x9000, 0x2, 0x08, target as i32),
    );
    m.load(target, &[0xf4]);
    assert_eq!(m.run_until_stop(&mut Interpreter, 50), SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.rip, target + 1);
    assert_eq!(st.gpr[reg::RSP], 0x9000);
    assert_eq!(st.seg[sreg::SS].selector, 0);
    assert_eq!(st.rflags & flags::IF, 0);
}

/// IRETQ at CPL 3 (IOPL 0) changes neither IF nor IOPL, but does change the status flags;
/// at CPL 0 it changes both.
#[test]
fn iret_flag_rules() {
    let fl = (flags::IOPL | flags::CF | flags::FIXED1) as i32; // IF clear, IOPL 3
    let mut m = long_env();
    let code = iretq_code(LUSER, 0x33, 0x9000, fl, 0x2b, (LUSER + 0x100) as i32);
    m.load(LUSER, &code);
    let e = m.run(100);
    assert_eq!(
        (e.retired, e.reason),
        (6, crate::ExitReason::Yield),
        "IRET yields"
    );
    let st = &m.cpu.state;
    assert_eq!(st.rip, LUSER + 0x100);
    assert_eq!(
        st.rflags & (flags::IF | flags::IOPL | flags::CF),
        flags::IF | flags::CF
    );

    let mut m = long_env();
    to_kernel(&mut m);
    m.cpu.state.rflags |= flags::IF;
    m.load(
        LUSER,
        &iretq_code(LUSER, 0x10, 0x9000, fl, 0x08, (LUSER + 0x100) as i32),
    );
    m.run(6);
    let st = &m.cpu.state;
    assert_eq!(st.rip, LUSER + 0x100);
    assert_eq!(
        st.rflags & (flags::IF | flags::IOPL | flags::CF),
        flags::IOPL | flags::CF
    );
}

/// IRET with NT = 1 outside IA-32e mode (a task return) is not modelled: a named #UD. In IA-32e
/// mode it is #GP(0).
#[test]
fn iret_with_nt() {
    let mut m = protected_env();
    m.deliver_exceptions = false;
    m.cpu.state.rflags |= flags::NT;
    m.load(PUSER, &[0xcf]);
    let SysStop::Exception(f) = m.run_until_stop(&mut Interpreter, 5) else {
        panic!()
    };
    assert!(matches!(f, Fault::InvalidOpcode { what } if what.contains("task return")));
    let mut m = long_env();
    m.deliver_exceptions = false;
    m.cpu.state.rflags |= flags::NT;
    m.load(LUSER, &[0x48, 0xcf]);
    assert_eq!(
        m.run_until_stop(&mut Interpreter, 5),
        SysStop::Exception(Fault::GP0)
    );
}

/// HLT in real mode is allowed whatever CS's low bits (CPL is 0 there); in protected mode at
/// CPL 3 it raises #GP(0).
#[test]
fn hlt_privilege() {
    let mut m = SysMachine::new(1);
    m.load(0x10030, &[0xf4]);
    m.start_real(0x1003, 0);
    let e = m.run(5);
    assert_eq!(e.reason, crate::ExitReason::Halt);
    let mut m = protected_env();
    m.load(PUSER, &[0xf4]);
    assert_eq!(m.run(5).reason, crate::ExitReason::Exception(Fault::GP0));
}
