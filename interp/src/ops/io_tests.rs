//! Tests of IN/OUT/INS/OUTS and the I/O permission checks.

use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::ops::systest::{long_machine, prot_machine, run};
use crate::state::flags::{DF, IOPL};
use crate::state::reg;
use crate::testkit::TestMachine;
use crate::testkit_sys::SysMachine;
use iced_x86::code_asm::*;

#[test]
fn in_out_reach_the_port_bus_and_yield() {
    let mut m = prot_machine(|a| {
        a.mov(eax, 0x1234_5678u32)?;
        a.out(0x80, al)?;
        a.mov(dx, 0x1f0u32)?;
        a.out(dx, ax)?;
        a.out(dx, eax)?;
        a.mov(ebx, -1i32)?;
        a.mov(ecx, -1i32)?;
        a.in_(al, 0x61)?;
        a.mov(bl, al)?;
        a.in_(ax, dx)?;
        a.mov(cx, ax)?;
        a.in_(eax, dx)?;
        a.hlt()
    });
    m.bus.in_value = Some(0xabcd_ef12);
    // The first OUT stops the engine right after it.
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Yield);
    assert_eq!(e.retired, 2);
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(
        m.bus.outs,
        vec![(0x80, 1, 0x78), (0x1f0, 2, 0x5678), (0x1f0, 4, 0x1234_5678)]
    );
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0xffff_ff12);
    assert_eq!(st.gpr[reg::RCX], 0xffff_ef12);
    assert_eq!(st.gpr[reg::RAX], 0xabcd_ef12);
}

#[test]
fn real_mode_io_is_always_allowed() {
    let mut m = SysMachine::new(2);
    // mov al, 'A' ; mov dx, 0x3f8 ; out dx, al ; hlt
    m.load(0x7c00, &[0xb0, 0x41, 0xba, 0xf8, 0x03, 0xee, 0xf4]);
    m.start_real(0, 0x7c00);
    m.cpu.state.rflags &= !IOPL;
    assert_eq!(run(&mut m, 10).reason, ExitReason::Halt);
    assert_eq!(m.serial_text(), "A");
}

/// A TestMachine (CPL 3, IOPL 0) with a 32/64-bit TSS at 0x100000: limit `limit`, I/O map at
/// offset 0x68; ports 0x60..0x67 and 0x3f8 denied, everything else in the map allowed.
fn tss_machine(limit: u32) -> TestMachine {
    let mut m = TestMachine::new();
    let tss = 0x10_0000u64;
    m.load(tss + 102, &0x68u16.to_le_bytes());
    let mut map = vec![0u8; 0x2000 + 1];
    map[0x60 / 8] = 0xff;
    map[0x3f8 / 8] |= 1;
    map[0x2000] = 0xff;
    m.load(tss + 0x68, &map);
    m.cpu.state.tr.base = tss;
    m.cpu.state.tr.limit = limit;
    m.cpu.state.tr.attr = 0x8b;
    m.cpu.state.tr.selector = 0x40;
    m.cpu.state.rflags &= !IOPL;
    m
}

#[test]
fn io_bitmap_decides_at_cpl3_with_iopl0() {
    let gp = ExitReason::Exception(Fault::GP0);
    let cases: &[(&[u8], u16, bool)] = &[
        (&[0xe6, 0x80], 0, true),      // out 0x80, al
        (&[0xe6, 0x61], 0, false),     // out 0x61, al (denied)
        (&[0xe4, 0x5f], 0, true),      // in al, 0x5f
        (&[0xe5, 0x5e], 0, false),     // in eax, 0x5e: 0x5e..0x61 -> 0x60 denied
        (&[0xee], 0x3f8, false),       // out dx, al
        (&[0xee], 0x3f9, true),        // out dx, al
        (&[0x66, 0xef], 0x3f7, false), // out dx, ax: 0x3f7..0x3f8
        (&[0xee], 0xfff8, true),       // last byte of the map
    ];
    for &(code, port, ok) in cases {
        let mut m = tss_machine(0x68 + 0x2000);
        m.cpu.state.gpr[reg::RDX] = port as u64;
        let e = m.run_code(code, 1);
        if ok {
            assert_eq!(e.retired, 1, "{code:x?} dx {port:#x}");
            assert_eq!(e.reason, ExitReason::Yield, "{code:x?}");
        } else {
            assert_eq!(e.reason, gp, "{code:x?} dx {port:#x}");
            assert_eq!(e.retired, 0);
        }
    }
    // Map bytes beyond the TSS limit: #GP even where the map would allow.
    let mut m = tss_machine(0x68 + 0x10);
    let e = m.run_code(&[0xe6, 0x80], 1);
    assert_eq!(e.reason, gp);
    // IOPL 3: no bitmap check at all.
    let mut m = tss_machine(0x68);
    m.cpu.state.rflags |= IOPL;
    assert_eq!(m.run_code(&[0xe6, 0x61], 1).retired, 1);
    // A TSS shorter than 104 bytes, or not a 32/64-bit TSS.
    let mut m = tss_machine(0x60);
    assert_eq!(m.run_code(&[0xe6, 0x80], 1).reason, gp);
    let mut m = tss_machine(0x68 + 0x2000);
    m.cpu.state.tr.attr = 0x83;
    assert_eq!(m.run_code(&[0xe6, 0x80], 1).reason, gp);
}

#[test]
fn rep_outsb_and_rep_insb() {
    let mut m = long_machine(|a| {
        a.mov(esi, 0x9000u32)?;
        a.mov(ecx, 5u32)?;
        a.mov(dx, 0x3f8u32)?;
        a.rep().outsb()?;
        a.mov(edi, 0xa000u32)?;
        a.mov(ecx, 3u32)?;
        a.mov(dx, 0x300u32)?;
        a.rep().insw()?;
        a.std()?;
        a.mov(esi, 0x9004u32)?;
        a.mov(dx, 0x3f8u32)?;
        a.outsb()?;
        a.hlt()
    });
    m.load(0x9000, b"hello");
    m.bus.in_value = Some(0x4242);
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(m.serial_text(), "helloo");
    let mut b = [0u8; 8];
    m.ram.read_phys(0xa000, &mut b).unwrap();
    assert_eq!(b, [0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0, 0]);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RDI], 0xa006);
    assert_eq!(st.gpr[reg::RSI], 0x9003);
    assert_eq!(st.gpr[reg::RCX], 0);
    assert_ne!(st.rflags & DF, 0);
    // 5 + 3 iterations retire one instruction each.
    assert_eq!(m.cpu.retired, 3 + 5 + 3 + 3 + 1 + 2 + 1 + 1);
}

#[test]
fn rep_outs_stops_at_the_budget() {
    let mut m = long_machine(|a| {
        a.mov(esi, 0x9000u32)?;
        a.mov(ecx, 6u32)?;
        a.mov(dx, 0xe9u32)?;
        a.rep().outsb()?;
        a.hlt()
    });
    m.load(0x9000, b"abcdef");
    let e = m.run(5);
    assert_eq!(e.retired, 5);
    assert_eq!(m.serial_text(), "ab");
    assert_eq!(m.cpu.state.gpr[reg::RCX], 4);
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(m.serial_text(), "abcdef");
}

#[test]
fn ins_checks_the_destination_before_reading_the_port() {
    let mut m = TestMachine::new();
    m.cpu.state.rflags |= IOPL;
    m.cpu.state.gpr[reg::RDI] = 0x1000; // supervisor page: #PF on the user write
    let e = m.run_code(&[0x6c], 1); // insb
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::PageFault { .. })
    ));
    assert_eq!(m.cpu.state.gpr[reg::RDI], 0x1000);
}

#[test]
fn io_instructions_end_blocks() {
    for code in [&[0xe6, 0x80][..], &[0xec], &[0x6c], &[0xf3, 0x6f]] {
        let ins = iced_x86::Decoder::with_ip(64, code, 0, 0).decode();
        assert!(crate::ops::ends_block(&ins), "{code:x?}");
    }
}
