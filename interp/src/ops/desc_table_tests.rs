//! Tests of LGDT/SGDT/LIDT/SIDT, LLDT/LTR/SLDT/STR, LAR/LSL/VERR/VERW, ARPL, SWAPGS and the
//! FS/GS base instructions.

use crate::cpu::{ExitReason, Interpreter};
use crate::fault::Fault;
use crate::ops::segment::tests::{asm, pm_fault, pm_machine, run32, CODE, GDT};
use crate::state::{ctl, flags::ZF, reg, sreg};
use crate::testkit::TestMachine;
use crate::testkit_sys::{SysMachine, SysStop};
use iced_x86::code_asm::*;

#[test]
fn lgdt_sgdt_lidt_sidt() {
    let mut m = pm_machine();
    // Operand at 0x5000: limit 0x1234, base 0xaabb_ccdd.
    m.load(0x5000, &[0x34, 0x12, 0xdd, 0xcc, 0xbb, 0xaa]);
    let stop = run32(&mut m, |a| {
        a.sgdt(ptr(0x5100))?;
        a.lidt(ptr(0x5000))?;
        a.sidt(ptr(0x5200))?;
        // 66h: 16-bit operand size keeps 24 bits of the base.
        a.db(&[0x66, 0x0f, 0x01, 0x1d, 0x00, 0x50, 0x00, 0x00])?; // lidt [0x5000]
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let b = m.ram.bytes();
    assert_eq!(&b[0x5100..0x5106], &[0x77, 0, 0x00, 0x10, 0, 0]);
    assert_eq!(&b[0x5200..0x5206], &[0x34, 0x12, 0xdd, 0xcc, 0xbb, 0xaa]);
    assert_eq!(m.cpu.state.idtr.base, 0xbb_ccdd);
    assert_eq!(m.cpu.state.idtr.limit, 0x1234);
    // LGDT above CPL 0 is #GP(0).
    let mut m = pm_machine();
    let code = asm(32, CODE, |a| a.lgdt(ptr(0x5000)));
    m.load(CODE, &code);
    m.cpu.state.seg[sreg::CS].selector = 0x43;
    assert_eq!(
        m.run_until_stop(&mut Interpreter, 10),
        SysStop::Exception(Fault::GP0)
    );
}

#[test]
fn ltr_marks_busy_and_str_reads_it() {
    let mut m = pm_machine();
    m.cpu.state.tr = Default::default();
    let stop = run32(&mut m, |a| {
        a.mov(ax, 0x58)?;
        a.ltr(ax)?;
        a.mov(ebx, u32::MAX)?;
        a.str(ebx)?;
        a.ltr(ax)
    });
    // The second LTR finds the TSS busy.
    assert_eq!(stop, SysStop::Exception(Fault::GeneralProtection(0x58)));
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x58);
    assert_eq!(st.tr.selector, 0x58);
    assert_eq!(st.tr.attr & 0xff, 0x8b);
    assert_eq!(st.tr.base, 0x3000);
    assert_eq!(m.ram.bytes()[(GDT + 0x58 + 5) as usize], 0x8b);
    // LTR of a data segment, of a null selector, LLDT of a TSS.
    pm_fault(
        |a| {
            a.mov(ax, 0x18)?;
            a.ltr(ax)
        },
        Fault::GeneralProtection(0x18),
    );
    pm_fault(
        |a| {
            a.xor(eax, eax)?;
            a.ltr(ax)
        },
        Fault::GP0,
    );
    pm_fault(
        |a| {
            a.mov(ax, 0x58)?;
            a.lldt(ax)
        },
        Fault::GeneralProtection(0x58),
    );
    // LLDT of a null selector is fine; SLDT reads it back.
    let mut m = pm_machine();
    let stop = run32(&mut m, |a| {
        a.xor(eax, eax)?;
        a.lldt(ax)?;
        a.mov(ecx, u32::MAX)?;
        a.sldt(ecx)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RCX], 0);
}

#[test]
fn lar_lsl_verr_verw() {
    let mut m = pm_machine();
    let stop = run32(&mut m, |a| {
        a.mov(ecx, 0x20)?; // read-only data, limit 0xfff
        a.mov(eax, u32::MAX)?;
        a.lar(eax, ecx)?;
        a.lsl(edx, ecx)?;
        a.verr(cx)?;
        a.setz(bl)?;
        a.verw(cx)?;
        a.setz(bh)?;
        a.mov(esi, 0x1111)?;
        a.xor(ecx, ecx)?;
        a.lar(esi, ecx)?; // null: ZF = 0, ESI unchanged
        a.setz(ch)?;
        a.mov(edi, 0x58)?;
        a.lsl(edi, edi)?; // TSS: limit 0x67
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RAX], 0x0040_9100);
    assert_eq!(st.gpr[reg::RDX], 0xfff);
    assert_eq!(st.gpr[reg::RBX] & 0xffff, 0x0001, "VERR yes, VERW no");
    assert_eq!(st.gpr[reg::RSI], 0x1111);
    assert_eq!(st.gpr[reg::RCX] & 0xff00, 0);
    assert_eq!(st.gpr[reg::RDI], 0x67);
    assert_ne!(st.rflags & ZF, 0);
}

#[test]
fn arpl_raises_rpl() {
    let mut m = pm_machine();
    let stop = run32(&mut m, |a| {
        a.mov(eax, 0xffff_0018u32)?;
        a.mov(ebx, 3)?;
        a.arpl(ax, bx)?;
        a.setz(cl)?;
        a.arpl(ax, bx)?;
        a.setz(ch)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RAX], 0xffff_001b);
    assert_eq!(st.gpr[reg::RCX] & 0xffff, 0x0001);
}

#[test]
fn protected_only_instructions_are_ud_in_real_mode() {
    let mut m = SysMachine::new(1);
    m.deliver_exceptions = false;
    m.load(0x10000, &[0x0f, 0x00, 0xd0]); // lldt ax
    m.start_real(0x1000, 0);
    assert_eq!(
        m.run_until_stop(&mut Interpreter, 10),
        SysStop::Exception(Fault::ud("LLDT in real or virtual-8086 mode"))
    );
}

#[test]
fn swapgs_and_fs_gs_base_instructions() {
    // CPL 3: SWAPGS is #GP(0).
    let mut m = TestMachine::new();
    let e = m.run_code(&TestMachine::assemble(|a| a.swapgs()), 10);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    // CPL 0 (CS RPL 0 on the same flat user mapping): exchanged.
    let mut m = TestMachine::new();
    m.cpu.state.seg[sreg::CS].selector = 0x08;
    m.cpu.state.seg[sreg::GS].base = 0x1111;
    m.cpu.state.kernel_gs_base = 0x2222;
    let code = TestMachine::assemble(|a| {
        a.swapgs()?;
        a.mov(rax, 0x7777_0000_1234u64)?;
        a.wrfsbase(rax)?;
        a.rdgsbase(rbx)?;
        a.mov(ecx, 0x5555)?;
        a.wrgsbase(ecx)?;
        a.rdfsbase(edx)?;
        a.ud2()
    });
    let e = m.run_code(&code, 20);
    assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
    let st = &m.cpu.state;
    assert_eq!(st.kernel_gs_base, 0x1111);
    assert_eq!(st.gpr[reg::RBX], 0x2222);
    assert_eq!(st.seg[sreg::FS].base, 0x7777_0000_1234);
    assert_eq!(st.seg[sreg::GS].base, 0x5555);
    assert_eq!(st.gpr[reg::RDX], 0x1234);
    // Non-canonical base: #GP(0). CR4.FSGSBASE clear: #UD.
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 0x8000_0000_0000_0000;
    let e = m.run_code(&TestMachine::assemble(|a| a.wrfsbase(rax)), 10);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    let mut m = TestMachine::new();
    m.cpu.state.cr4 &= !ctl::CR4_FSGSBASE;
    let e = m.run_code(&TestMachine::assemble(|a| a.rdfsbase(rax)), 10);
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
    // MOV FS, null in 64-bit mode clears the base (Intel).
    let mut m = TestMachine::new();
    m.cpu.state.seg[sreg::FS].base = 0x1234;
    let code = TestMachine::assemble(|a| {
        a.xor(eax, eax)?;
        a.mov(fs, ax)?;
        a.ud2()
    });
    m.run_code(&code, 10);
    assert_eq!(m.cpu.state.seg[sreg::FS].base, 0);
}
