//! Tests of the legacy-only instructions and of 16/32-bit code in general-purpose families
//! (real-mode and 32-bit protected-mode programs on the system test machine).

use super::{ascii_adjust, decimal_adjust};
use crate::cpu::Interpreter;
use crate::fault::Fault;
use crate::ops::segment::tests::{asm, pm_machine, run32};
use crate::state::{flags, reg};
use crate::testkit_sys::{SysMachine, SysStop};
use iced_x86::code_asm::*;

/// Run 16-bit code at 0x1000:0000 with SP = 0x800 until it stops.
fn run16(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> (SysMachine, SysStop) {
    let mut m = SysMachine::new(2);
    m.deliver_exceptions = false;
    let code = asm(16, 0, f);
    m.load(0x10000, &code);
    m.start_real(0x1000, 0);
    m.cpu.state.gpr[reg::RSP] = 0x800;
    let stop = m.run_until_stop(&mut Interpreter, 10_000);
    (m, stop)
}

#[test]
fn bcd_semantics() {
    // 0x19 + 0x28 = 0x41 in binary, 47 in BCD.
    assert_eq!(
        decimal_adjust(0x41, true, false, false),
        (0x47, true, false)
    );
    // 0x99 + 0x01 = 0x9a -> 0x00 with carry.
    assert_eq!(
        decimal_adjust(0x9a, false, false, false),
        (0x00, true, true)
    );
    // DAS: 0x47 - 0x28 = 0x1f -> 0x19.
    assert_eq!(decimal_adjust(0x1f, true, false, true), (0x19, true, false));
    // AAA: AL = 0x0b -> AX + 0x106, AL & 0xf.
    assert_eq!(ascii_adjust(0x000b, false, false), (0x0101, true));
    // AAS with a borrow from AL into AH: AX = 0x0102, AF -> 0x00 0x0c.
    assert_eq!(ascii_adjust(0x0102, true, true), (0xff0c, true));
    assert_eq!(ascii_adjust(0x0305, false, true), (0x0305, false));
}

#[test]
fn real_mode_general_purpose_program() {
    let (m, stop) = run16(|a| {
        let mut l = a.create_label();
        let mut sub = a.create_label();
        let mut done = a.create_label();
        a.mov(ax, 0x1000)?;
        a.mov(ds, ax)?;
        a.mov(es, ax)?;
        // PUSHA/POPA round trip with changed registers in between.
        a.mov(ax, 1)?;
        a.mov(cx, 2)?;
        a.mov(bp, 3)?;
        a.pusha()?;
        a.xor(ax, ax)?;
        a.xor(cx, cx)?;
        a.xor(bp, bp)?;
        a.popa()?;
        // LOOP with CX: 5 iterations adding to DX.
        a.xor(dx, dx)?;
        a.mov(cx, 5)?;
        a.set_label(&mut l)?;
        a.add(dx, 3)?;
        a.loop_(l)?;
        // Near CALL/RET with 16-bit return addresses.
        a.call(sub)?;
        // REP MOVSB with SI/DI/CX inside the segment.
        a.mov(si, 0x400)?;
        a.mov(di, 0x500)?;
        a.mov(cx, 4)?;
        a.cld()?;
        a.rep().movsb()?;
        // DAA: 0x19 + 0x28.
        a.mov(al, 0x19)?;
        a.add(al, 0x28)?;
        a.daa()?;
        a.mov(byte_ptr(0x600), al)?;
        // AAM: AL = 47 -> AH 4, AL 7.
        a.mov(al, 47)?;
        a.aam(10)?;
        a.mov(word_ptr(0x602), ax)?;
        a.jmp(done)?;
        a.set_label(&mut sub)?;
        a.mov(bx, sp)?;
        a.ret()?;
        a.set_label(&mut done)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    let b = m.ram.bytes();
    assert_eq!(st.gpr[reg::RCX] & 0xffff, 0);
    assert_eq!(st.gpr[reg::RDX] & 0xffff, 15);
    assert_eq!(st.gpr[reg::RBP] & 0xffff, 3, "POPA restored BP");
    assert_eq!(
        st.gpr[reg::RBX] & 0xffff,
        0x7fe,
        "one 16-bit return address pushed"
    );
    assert_eq!(st.gpr[reg::RSP], 0x800);
    assert_eq!(st.gpr[reg::RSI] & 0xffff, 0x404);
    assert_eq!(&b[0x10500..0x10504], &b[0x10400..0x10404]);
    assert_eq!(b[0x10600], 0x47);
    assert_eq!(&b[0x10602..0x10604], &[7, 4]);
}

#[test]
fn sixteen_bit_branch_beyond_cs_limit_faults() {
    // A near jump in 16-bit code wraps at 64 KiB; a 32-bit operand-size target beyond
    // the 0xffff limit is #GP(0) at the jump.
    let (m, stop) = run16(|a| {
        a.db(&[0x66, 0xe9, 0x00, 0x00, 0x01, 0x00]) // jmp near rel32 0x10000 + ...
    });
    assert_eq!(stop, SysStop::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.rip, 0);
}

#[test]
fn bound_raises_br() {
    let mut m = pm_machine();
    m.load(0x5000, &[10, 0, 0, 0, 20, 0, 0, 0]);
    let stop = run32(&mut m, |a| {
        a.mov(eax, 15)?;
        a.bound(eax, ptr(0x5000))?;
        a.mov(eax, 21)?;
        a.bound(eax, ptr(0x5000))
    });
    assert_eq!(stop, SysStop::Exception(Fault::BoundRange));
    assert_eq!(m.cpu.state.gpr[reg::RAX], 21);
}

#[test]
fn thirty_two_bit_string_and_flags() {
    let mut m = pm_machine();
    let stop = run32(&mut m, |a| {
        a.mov(edi, 0x6000)?;
        a.mov(ecx, 0x10)?;
        a.mov(al, 0xaa)?;
        a.rep().stosb()?;
        a.mov(al, 0x09)?;
        a.add(al, 0x01)?;
        a.aaa()?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RDI], 0x6010);
    assert!(m.ram.bytes()[0x6000..0x6010].iter().all(|&b| b == 0xaa));
    // AL = 0x0a: adjusted to AH+1, AL 0; CF = AF = 1.
    assert_eq!(st.gpr[reg::RAX] & 0xffff, 0x0100);
    assert_eq!(st.rflags & (flags::CF | flags::AF), flags::CF | flags::AF);
}
