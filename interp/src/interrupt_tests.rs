//! Tests of exception and interrupt delivery (`interrupt.rs`) and the interrupt instructions
//! (`ops/interrupt.rs`), on the system test machine with hand-built GDT, TSS and IDT.

use super::*;
use crate::desc::Descriptor;
use crate::state::TableReg;
use crate::testkit_sys::{SysMachine, SysStop};
use crate::Interpreter;
use iced_x86::code_asm::*;

pub(crate) fn asm(
    bits: u32,
    base: u64,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Vec<u8> {
    let mut a = CodeAssembler::new(bits).unwrap();
    f(&mut a).unwrap();
    a.assemble(base).unwrap()
}

/// An 8-byte code/data/system descriptor.
fn seg_desc(base: u32, limit: u32, access: u8, flags: u8) -> u64 {
    let (b, l) = (base as u64, limit as u64);
    (l & 0xffff)
        | ((b & 0xff_ffff) << 16)
        | ((access as u64) << 40)
        | (((l >> 16) & 0xf) << 48)
        | (((flags & 0xf) as u64) << 52)
        | ((b >> 24) << 56)
}

/// An 8-byte protected-mode gate.
fn gate32(sel: u16, off: u32, access: u8) -> u64 {
    (off as u64 & 0xffff)
        | ((sel as u64) << 16)
        | ((access as u64) << 40)
        | ((off as u64 >> 16) << 48)
}

pub(crate) fn seg_of(m: &SysMachine, gdt: u64, sel: u16) -> Segment {
    let lo = m.ram.read_u64(gdt + (sel & !7) as u64).unwrap();
    Descriptor { lo, hi: 0 }.to_segment(sel)
}

pub(crate) fn rd32(m: &SysMachine, a: u64) -> u64 {
    m.ram.read_u64(a).unwrap() & 0xffff_ffff
}

pub(crate) fn rd16(m: &SysMachine, a: u64) -> u64 {
    m.ram.read_u64(a).unwrap() & 0xffff
}

pub(crate) fn rd64(m: &SysMachine, a: u64) -> u64 {
    m.ram.read_u64(a).unwrap()
}

// ----- real mode -----

/// INT 0x10 through the IVT and IRET back; a #DE through the IVT whose handler skips the DIV.
#[test]
fn real_mode_int_and_exception_through_ivt() {
    let mut m = SysMachine::new(2);
    // IVT: vector 0x10 -> 2000:0010, vector 0 -> 2000:0100.
    m.load(0x10 * 4, &[0x10, 0x00, 0x00, 0x20]);
    m.load(0, &[0x00, 0x01, 0x00, 0x20]);
    let int10 = asm(16, 0x10, |a| {
        a.pushf()?;
        a.pop(word_ptr(0x500))?;
        a.mov(word_ptr(0x502), sp)?;
        a.mov(bp, sp)?;
        a.mov(ax, word_ptr(bp))?;
        a.mov(word_ptr(0x504), ax)?;
        a.mov(ax, 0x2222)?;
        a.iret()
    });
    m.load(0x20010, &int10);
    let de = asm(16, 0x100, |a| {
        a.mov(bp, sp)?;
        a.add(word_ptr(bp), 2)?; // skip the 2-byte DIV
        a.iret()
    });
    m.load(0x20100, &de);
    let code = asm(16, 0, |a| {
        a.mov(ax, 0x1111)?; // 3 bytes
        a.int(0x10)?; // 2 bytes: return IP 5
        a.mov(bx, ax)?;
        a.mov(cx, sp)?;
        a.pushf()?;
        a.pop(dx)?;
        a.xor(si, si)?;
        a.div(si)?;
        a.mov(di, 0x4444)?;
        a.hlt()
    });
    m.load(0x10000, &code);
    m.start_real(0x1000, 0);
    m.cpu.state.gpr[reg::RSP] = 0x7000;
    m.cpu.state.rflags |= flags::IF;
    let stop = m.run_until_stop(&mut Interpreter, 100);
    assert_eq!(stop, SysStop::Halt);
    let g = |r: usize| m.cpu.state.gpr[r] & 0xffff;
    assert_eq!(g(reg::RBX), 0x2222, "handler result");
    assert_eq!(g(reg::RCX), 0x7000, "IRET restored SP");
    assert_ne!(g(reg::RDX) & flags::IF, 0, "IRET restored IF");
    assert_eq!(rd16(&m, 0x500) & flags::IF, 0, "IF clear in the handler");
    assert_eq!(rd16(&m, 0x502), 0x7000 - 6);
    assert_eq!(rd16(&m, 0x504), 5, "INT 0x10 pushed the IP after it");
    // The #DE frame (same place): IP at the DIV (+2 by the handler), CS, FLAGS with IF.
    assert_eq!(rd16(&m, 0x7000 - 6), 13 + 2);
    assert_eq!(rd16(&m, 0x7000 - 4), 0x1000);
    assert_ne!(rd16(&m, 0x7000 - 2) & flags::IF, 0);
    assert_eq!(g(reg::RDI), 0x4444, "resumed after the skipped DIV");
    assert_eq!(m.cpu.state.seg[sreg::CS].selector, 0x1000);
    assert_eq!(m.cpu.state.seg[sreg::CS].base, 0x10000);
}

/// An empty IVT (limit 0): INT 0x40 raises #GP, delivering #GP raises #GP (#DF), delivering
/// #DF fails too: shutdown, with RIP back at the INT that never completed.
#[test]
fn real_mode_ivt_limit_escalates_to_shutdown() {
    let mut m = SysMachine::new(1);
    m.load(0x10004, &[0xcd, 0x40]); // int 0x40 at 1000:0004
    m.start_real(0x1000, 4);
    m.cpu.state.idtr.limit = 0;
    let stop = m.run_until_stop(&mut Interpreter, 10);
    let SysStop::Shutdown(s) = stop else {
        panic!("{stop:?}")
    };
    assert_eq!(s.cause, ShutdownCause::TripleFault);
    assert_eq!(
        s.events,
        vec![
            Event::Software {
                vector: 0x40,
                kind: SoftKind::IntN
            },
            Event::Exception(Fault::GP0),
            Event::Exception(Fault::DoubleFault),
        ]
    );
    assert_eq!(s.raised, vec![Fault::GP0, Fault::GP0, Fault::GP0]);
    assert_eq!((s.cs, s.rip), (0x1000, 4));
    assert_eq!(m.cpu.retired, 0, "the INT did not retire");
    let text = s.to_string();
    assert!(text.starts_with("triple fault"), "{text}");
    assert!(
        text.contains("delivering INT 0x40 raised #GP(0x0)"),
        "{text}"
    );
    assert!(
        text.contains("delivering #DF(0x0) raised #GP(0x0)"),
        "{text}"
    );
    assert!(
        text.contains("real mode") && text.contains("CR0="),
        "{text}"
    );
}

// ----- protected mode -----

const PGDT: u64 = 0x1000;
const PIDT: u64 = 0x2000;
const PTSS: u64 = 0x3000;
pub(crate) const PUSER: u64 = 0x10000;
const PDE_H: u64 = 0x20000;
const PUD_H: u64 = 0x41000;

/// Flat 32-bit GDT (kernel code 0x08, kernel data 0x10, user code 0x1b, user data 0x23, TSS
/// 0x28), a TSS with SS0:ESP0 = 0x10:0x9000, and the CPU at CPL 3 in user code.
pub(crate) fn protected_env() -> SysMachine {
    let mut m = SysMachine::new(2);
    let gdt = [
        0,
        seg_desc(0, 0xfffff, 0x9b, 0xc),
        seg_desc(0, 0xfffff, 0x93, 0xc),
        seg_desc(0, 0xfffff, 0xfb, 0xc),
        seg_desc(0, 0xfffff, 0xf3, 0xc),
        seg_desc(PTSS as u32, 0x67, 0x89, 0),
    ];
    for (i, d) in gdt.iter().enumerate() {
        m.ram.write_u64(PGDT + 8 * i as u64, *d).unwrap();
    }
    m.load(PTSS + 4, &0x9000u32.to_le_bytes());
    m.load(PTSS + 8, &0x10u16.to_le_bytes());
    m.start_protected_flat(PUSER as u32);
    let st = &mut m.cpu.state;
    st.gdtr = TableReg {
        base: PGDT,
        limit: 8 * gdt.len() as u16 - 1,
    };
    st.idtr = TableReg {
        base: PIDT,
        limit: 0x7ff,
    };
    st.tr = Descriptor {
        lo: gdt[5] | (2 << 40), // busy
        hi: 0,
    }
    .to_segment(0x28);
    let ucode = seg_of(&m, PGDT, 0x1b);
    let udata = seg_of(&m, PGDT, 0x23);
    let st = &mut m.cpu.state;
    st.seg = [udata; 6];
    st.seg[sreg::CS] = ucode;
    st.gpr[reg::RSP] = 0x8000;
    st.rflags = flags::FIXED1 | flags::IF;
    m
}

fn set_gate32(m: &mut SysMachine, v: u8, sel: u16, off: u32, access: u8) {
    m.ram
        .write_u64(PIDT + 8 * v as u64, gate32(sel, off, access))
        .unwrap();
}

/// #DE at CPL 3 through a 32-bit interrupt gate into CPL 0: SS:ESP from the TSS, the full
/// frame (SS, ESP, EFLAGS with RF, CS, EIP at the DIV), IF cleared; IRETD back to CPL 3 nulls
/// a DPL-0 data segment register; then #UD goes the same way.
#[test]
fn protected_mode_de_with_privilege_change_and_iret() {
    let mut m = protected_env();
    set_gate32(&mut m, 0, 0x08, PDE_H as u32, 0x8e);
    set_gate32(&mut m, 6, 0x08, PUD_H as u32, 0x8e);
    let de = asm(32, PDE_H, |a| {
        a.mov(dword_ptr(0x5000), esp)?;
        for i in 0..5u32 {
            a.mov(eax, dword_ptr(esp + 4 * i))?;
            a.mov(dword_ptr(0x5004 + 4 * i), eax)?;
        }
        a.mov(ax, cs)?;
        a.mov(word_ptr(0x5018), ax)?;
        a.mov(ax, ss)?;
        a.mov(word_ptr(0x501a), ax)?;
        a.pushfd()?;
        a.pop(dword_ptr(0x501c))?;
        a.add(dword_ptr(esp), 2)?; // skip DIV ECX
        a.iretd()
    });
    m.load(PDE_H, &de);
    let ud = asm(32, PUD_H, |a| {
        a.mov(dword_ptr(0x5020), esp)?;
        a.mov(eax, dword_ptr(esp))?;
        a.mov(dword_ptr(0x5024), eax)?;
        a.hlt()
    });
    m.load(PUD_H, &ud);
    let code = asm(32, PUSER, |a| {
        a.mov(eax, 100)?;
        a.xor(edx, edx)?;
        a.xor(ecx, ecx)?;
        a.div(ecx)?; // at +9
        a.mov(ebx, 0x55)?;
        a.mov(ax, es)?;
        a.mov(esi, eax)?;
        a.ud2() // at +21
    });
    assert_eq!(&code[21..23], &[0x0f, 0x0b]);
    assert_eq!(&code[9..11], &[0xf7, 0xf1]);
    m.load(PUSER, &code);
    m.cpu.state.seg[sreg::ES] = seg_of(&m, PGDT, 0x10);
    let stop = m.run_until_stop(&mut Interpreter, 200);
    assert_eq!(stop, SysStop::Halt);
    // The #DE frame as the handler saw it.
    assert_eq!(rd32(&m, 0x5000), 0x9000 - 20, "ESP0 from the TSS, 5 dwords");
    assert_eq!(rd32(&m, 0x5004), PUSER + 9, "EIP at the DIV (a fault)");
    assert_eq!(rd32(&m, 0x5008), 0x1b);
    let fl = rd32(&m, 0x500c);
    assert_eq!(
        fl & (flags::IF | flags::RF),
        flags::IF | flags::RF,
        "{fl:#x}"
    );
    assert_eq!(rd32(&m, 0x5010), 0x8000);
    assert_eq!(rd32(&m, 0x5014), 0x23);
    assert_eq!(rd16(&m, 0x5018), 0x08, "handler CS");
    assert_eq!(rd16(&m, 0x501a), 0x10, "handler SS from the TSS");
    assert_eq!(rd32(&m, 0x501c) & flags::IF, 0, "interrupt gate clears IF");
    // Back at CPL 3: the handler's result, ES nulled by the outward IRET.
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x55);
    assert_eq!(st.gpr[reg::RSI] & 0xffff, 0, "ES was nulled");
    // #UD: the same stack again, EIP at UD2, no error code.
    assert_eq!(rd32(&m, 0x5020), 0x9000 - 20);
    assert_eq!(rd32(&m, 0x5024), PUSER + 21);
    assert_eq!(st.seg[sreg::CS].selector, 0x08);
    assert_eq!(st.seg[sreg::SS].selector, 0x10);
    assert!(st.halted);
}

/// A same-privilege 16-bit trap gate: 3 words pushed on the current stack, IF kept; the
/// handler IRETs (16-bit) back.
#[test]
fn protected_mode_16bit_trap_gate_same_privilege() {
    let mut m = protected_env();
    let kcode = seg_of(&m, PGDT, 0x08);
    let kdata = seg_of(&m, PGDT, 0x10);
    let st = &mut m.cpu.state;
    st.seg = [kdata; 6];
    st.seg[sreg::CS] = kcode;
    set_gate32(&mut m, 0x30, 0x08, 0x4100, 0x87); // 286 trap gate, handler at 0x4100 (16-bit offset)
    let h = asm(32, 0x4100, |a| {
        a.mov(dword_ptr(0x5000), esp)?;
        a.pushfd()?;
        a.pop(dword_ptr(0x5004))?;
        a.iret() // 16-bit IRET (66 CF)
    });
    m.load(0x4100, &h);
    // A 16-bit gate pushes IP only: the code must lie below 64 KiB.
    let code = asm(32, 0x4800, |a| {
        a.int(0x30)?;
        a.mov(ebx, 7)?;
        a.hlt()
    });
    m.load(0x4800, &code);
    m.cpu.state.rip = 0x4800;
    let stop = m.run_until_stop(&mut Interpreter, 50);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(rd32(&m, 0x5000), 0x8000 - 6);
    assert_ne!(rd32(&m, 0x5004) & flags::IF, 0, "trap gate keeps IF");
    assert_eq!(rd16(&m, 0x8000 - 6), 0x4802, "IP after INT");
    assert_eq!(m.cpu.state.gpr[reg::RBX], 7);
    assert_eq!(m.cpu.state.gpr[reg::RSP], 0x8000);
}

/// INT n at CPL 3 through a DPL-0 gate: #GP(vector * 8 + 2), EXT clear, EIP at the INT.
/// Then an exception through a gate with a bad type: #GP(vector * 8 + 2 + EXT).
#[test]
fn protected_mode_gate_checks() {
    let mut m = protected_env();
    set_gate32(&mut m, 13, 0x08, 0x4200, 0x8e);
    let h = asm(32, 0x4200, |a| {
        a.mov(eax, dword_ptr(esp))?; // error code
        a.mov(dword_ptr(0x5000), eax)?;
        a.mov(eax, dword_ptr(esp + 4))?;
        a.mov(dword_ptr(0x5004), eax)?;
        a.hlt()
    });
    m.load(0x4200, &h);
    set_gate32(&mut m, 0x40, 0x08, 0x4300, 0x8e); // DPL 0
    m.load(PUSER, &[0x90, 0xcd, 0x40]); // nop; int 0x40
    let stop = m.run_until_stop(&mut Interpreter, 50);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(rd32(&m, 0x5000), 0x40 * 8 + 2);
    assert_eq!(rd32(&m, 0x5004), PUSER + 1);

    let mut m = protected_env();
    set_gate32(&mut m, 13, 0x08, 0x4200, 0x8e);
    m.load(0x4200, &h);
    set_gate32(&mut m, 6, 0x08, 0x4300, 0x8c); // a call gate in the IDT
    m.load(PUSER, &[0x0f, 0x0b]); // ud2
    let stop = m.run_until_stop(&mut Interpreter, 50);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(rd32(&m, 0x5000), 6 * 8 + 2 + 1);
    assert_eq!(rd32(&m, 0x5004), PUSER);
}

/// A task gate in the IDT is not modelled: the run stops with a clear report.
#[test]
fn protected_mode_task_gate_is_reported() {
    let mut m = protected_env();
    set_gate32(&mut m, 6, 0x28, 0, 0x85);
    m.load(PUSER, &[0x0f, 0x0b]);
    let SysStop::Shutdown(s) = m.run_until_stop(&mut Interpreter, 10) else {
        panic!()
    };
    assert!(matches!(s.cause, ShutdownCause::NotModelled(_)));
    assert!(s.to_string().contains("task gate"), "{s}");
}

// ----- long mode -----

const LPML4: u64 = 0x1000;
pub(crate) const LGDT: u64 = 0x10000;
const LTSS: u64 = 0x11000;
const LIDT: u64 = 0x12000;
/// User code (2 MiB page 1); handlers at page 2; page 3 (0x60_0000) is not mapped.
pub(crate) const LUSER: u64 = 0x20_0000;
pub(crate) const LH: u64 = 0x40_0000;
pub(crate) const RSP0: u64 = 0x70000;
const UNMAPPED: u64 = 0x60_0123;

/// 4-level paging over the first 6 MiB (user pages), a GDT with 64-bit kernel code 0x08,
/// data 0x10, user code 0x2b, data 0x33, a 64-bit TSS at 0x40 (RSP0 = 0x70000, IST2 =
/// 0x80008, IST1 = 0x88000), an empty IDT, and the CPU at CPL 3 with IF set.
pub(crate) fn long_env() -> SysMachine {
    let mut m = SysMachine::new(8);
    let w = |m: &mut SysMachine, a: u64, v: u64| m.ram.write_u64(a, v).unwrap();
    w(&mut m, LPML4, 0x2000 | 7);
    w(&mut m, 0x2000, 0x3000 | 7);
    for i in 0..3u64 {
        w(&mut m, 0x3000 + 8 * i, (i << 21) | 0x87);
    }
    let gdt = [
        0,
        0x00af_9b00_0000_ffff,
        0x00cf_9300_0000_ffff,
        0,
        0,
        0x00af_fb00_0000_ffff,
        0x00cf_f300_0000_ffff,
        0,
        seg_desc(LTSS as u32, 0x67, 0x8b, 0),
        0,
    ];
    for (i, d) in gdt.iter().enumerate() {
        w(&mut m, LGDT + 8 * i as u64, *d);
    }
    m.load(LTSS + 4, &RSP0.to_le_bytes());
    m.load(LTSS + 0x24, &0x88000u64.to_le_bytes());
    m.load(LTSS + 0x2c, &0x80008u64.to_le_bytes());
    m.start_long(LPML4, LUSER);
    let mut st = CpuState::long_mode_flat(LPML4, 3);
    st.gdtr = TableReg {
        base: LGDT,
        limit: 8 * gdt.len() as u16 - 1,
    };
    st.idtr = TableReg {
        base: LIDT,
        limit: 0xfff,
    };
    st.tr = Descriptor { lo: gdt[8], hi: 0 }.to_system_segment(0x40, true);
    st.gpr[reg::RSP] = 0x90000;
    st.rip = LUSER;
    m.cpu.state = st;
    m.cpu.flush_caches();
    m
}

/// A 64-bit gate: `access` 0x8e interrupt, 0x8f trap (add 0x60 for DPL 3).
pub(crate) fn set_gate64(m: &mut SysMachine, v: u8, off: u64, ist: u8, access: u8) {
    let lo = (off & 0xffff)
        | (0x08 << 16)
        | ((ist as u64) << 32)
        | ((access as u64) << 40)
        | (((off >> 16) & 0xffff) << 48);
    m.ram.write_u64(LIDT + 16 * v as u64, lo).unwrap();
    m.ram
        .write_u64(LIDT + 16 * v as u64 + 8, off >> 32)
        .unwrap();
}

/// A handler at `at` that records RSP at `rec`, the six frame qwords at `rec + 8..`, CS at
/// `rec + 0x38` and RFLAGS at `rec + 0x40`, then either halts or skips `skip` bytes of the
/// interrupted instruction (if `skip > 0`; the frame has an error code iff `err`) and IRETQs.
pub(crate) fn record_handler(m: &mut SysMachine, at: u64, rec: u64, skip: i32, err: bool) {
    let h = asm(64, at, |a| {
        a.mov(qword_ptr(rec), rsp)?;
        for i in 0..6u64 {
            a.mov(rax, qword_ptr(rsp + 8 * i as i32))?;
            a.mov(qword_ptr(rec + 8 + 8 * i), rax)?;
        }
        a.mov(ax, cs)?;
        a.mov(word_ptr(rec + 0x38), ax)?;
        a.pushfq()?;
        a.pop(qword_ptr(rec + 0x40))?;
        if skip > 0 {
            if err {
                a.add(rsp, 8)?;
            }
            a.add(qword_ptr(rsp), skip)?;
            a.iretq()
        } else {
            a.hlt()
        }
    });
    m.load(at, &h);
}

/// #PF at CPL 3 through an IST gate: error code (user, not present, read), CR2, the frame on
/// the 16-byte-aligned IST stack; the handler skips the load and IRETQs to CPL 3; #UD then
/// goes through a gate without IST onto RSP0, loading a null SS.
#[test]
fn long_mode_page_fault_through_ist_and_iretq() {
    let mut m = long_env();
    let code = asm(64, LUSER, |a| {
        a.mov(rcx, qword_ptr(UNMAPPED))?;
        a.mov(rbx, 0x77u64)?;
        a.ud2()
    });
    let load_len = asm(64, LUSER, |a| a.mov(rcx, qword_ptr(UNMAPPED))).len();
    m.load(LUSER, &code);
    set_gate64(&mut m, 14, LH, 2, 0x8e);
    record_handler(&mut m, LH, 0x5000, load_len as i32, true);
    set_gate64(&mut m, 6, LH + 0x1000, 0, 0x8e);
    record_handler(&mut m, LH + 0x1000, 0x5100, 0, false);
    let stop = m.run_until_stop(&mut Interpreter, 200);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(m.cpu.state.cr2, UNMAPPED);
    assert_eq!(rd64(&m, 0x5000), 0x80000 - 48, "IST2, aligned down to 16");
    assert_eq!(
        rd64(&m, 0x5008),
        crate::fault::pf::USER as u64,
        "error code"
    );
    assert_eq!(rd64(&m, 0x5010), LUSER, "RIP at the load");
    assert_eq!(rd64(&m, 0x5018), 0x2b);
    let fl = rd64(&m, 0x5020);
    assert_eq!(
        fl & (flags::IF | flags::RF),
        flags::IF | flags::RF,
        "{fl:#x}"
    );
    assert_eq!(rd64(&m, 0x5028), 0x90000, "user RSP");
    assert_eq!(rd64(&m, 0x5030), 0x33, "user SS");
    assert_eq!(rd16(&m, 0x5038), 0x08);
    assert_eq!(rd64(&m, 0x5040) & flags::IF, 0);
    // Back in user mode after IRETQ, then #UD on RSP0 (5 qwords, no error code).
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x77);
    assert_eq!(rd64(&m, 0x5100), RSP0 - 40);
    assert_eq!(rd64(&m, 0x5108), LUSER + load_len as u64 + 10, "RIP at UD2");
    assert_eq!(rd64(&m, 0x5110), 0x2b);
    assert_eq!(rd64(&m, 0x5128), 0x33);
    assert_eq!(st.seg[sreg::SS].selector, 0, "null SS with RPL 0");
    assert_eq!(st.seg[sreg::CS].selector, 0x08);
}

/// INT n from CPL 3: through a DPL-3 trap gate (IRETQ returns to CPL 3), and through a DPL-0
/// gate: #GP(vector * 8 + 2) with RIP at the INT.
#[test]
fn long_mode_int_n_and_gate_dpl() {
    let mut m = long_env();
    set_gate64(&mut m, 0x80, LH, 0, 0xef);
    let h = asm(64, LH, |a| {
        a.mov(qword_ptr(0x5000), rsp)?;
        a.pushfq()?;
        a.pop(qword_ptr(0x5008))?;
        a.mov(rax, qword_ptr(rsp))?;
        a.mov(qword_ptr(0x5010), rax)?;
        a.iretq()
    });
    m.load(LH, &h);
    set_gate64(&mut m, 0x81, LH + 0x800, 0, 0x8e);
    set_gate64(&mut m, 13, LH + 0x1000, 0, 0x8e);
    record_handler(&mut m, LH + 0x1000, 0x5100, 0, true);
    m.load(
        LUSER,
        &[0xcd, 0x80, 0x48, 0xc7, 0xc3, 0x01, 0, 0, 0, 0xcd, 0x81],
    ); // int 0x80; mov rbx, 1; int 0x81
    let stop = m.run_until_stop(&mut Interpreter, 100);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(rd64(&m, 0x5000), RSP0 - 40);
    assert_ne!(rd64(&m, 0x5008) & flags::IF, 0, "trap gate keeps IF");
    assert_eq!(rd64(&m, 0x5010), LUSER + 2, "RIP after INT 0x80");
    assert_eq!(m.cpu.state.gpr[reg::RBX], 1);
    assert_eq!(rd64(&m, 0x5108), 0x81 * 8 + 2, "#GP error code, EXT clear");
    assert_eq!(rd64(&m, 0x5110), LUSER + 9, "RIP at INT 0x81");
    assert_eq!(rd64(&m, 0x5118), 0x2b);
}

/// #GP while delivering INT n (DPL), then #NP delivering #GP (gate not present): #DF with
/// error code 0 through IST1. Without a #DF gate: triple fault, reported.
#[test]
fn long_mode_double_and_triple_fault() {
    let mut m = long_env();
    set_gate64(&mut m, 0x81, LH + 0x800, 0, 0x8e);
    set_gate64(&mut m, 13, LH + 0x1000, 0, 0x0e); // not present
    set_gate64(&mut m, 8, LH, 1, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, true);
    m.load(LUSER, &[0x90, 0xcd, 0x81]);
    let stop = m.run_until_stop(&mut Interpreter, 100);
    assert_eq!(stop, SysStop::Halt);
    assert_eq!(rd64(&m, 0x5000), 0x88000 - 48, "IST1");
    assert_eq!(rd64(&m, 0x5008), 0, "#DF error code");
    assert_eq!(rd64(&m, 0x5010), LUSER + 1, "RIP at the INT");
    assert_eq!(rd64(&m, 0x5018), 0x2b);

    let mut m = long_env();
    set_gate64(&mut m, 0x81, LH + 0x800, 0, 0x8e);
    set_gate64(&mut m, 13, LH + 0x1000, 0, 0x0e);
    m.load(LUSER, &[0x90, 0xcd, 0x81]);
    let before = m.cpu.retired;
    let SysStop::Shutdown(s) = m.run_until_stop(&mut Interpreter, 100) else {
        panic!()
    };
    assert_eq!(s.cause, ShutdownCause::TripleFault);
    assert_eq!(
        s.events,
        vec![
            Event::Software {
                vector: 0x81,
                kind: SoftKind::IntN
            },
            Event::Exception(Fault::GeneralProtection(0x81 * 8 + 2)),
            Event::Exception(Fault::DoubleFault),
        ]
    );
    assert_eq!(
        s.raised,
        vec![
            Fault::GeneralProtection(0x81 * 8 + 2),
            Fault::SegmentNotPresent(13 * 8 + 3),
            Fault::GeneralProtection(8 * 8 + 3),
        ]
    );
    assert_eq!(s.last_fault(), Some(Fault::GeneralProtection(8 * 8 + 3)));
    assert_eq!((s.rip, s.cs, s.cpl), (LUSER + 1, 0x2b, 3));
    assert_eq!(m.cpu.retired - before, 1, "only the NOP retired");
    let text = s.to_string();
    assert!(text.contains("triple fault"), "{text}");
    assert!(text.contains("EFER=0xd01"), "{text}");
    assert!(text.contains("long mode"), "{text}");
}

/// #PF while delivering #PF (the IST stack is not mapped) is a double fault; contributory
/// after a benign exception is not.
#[test]
fn long_mode_pf_during_pf_is_double_fault() {
    let mut m = long_env();
    m.load(LTSS + 0x2c, &(UNMAPPED + 0x100).to_le_bytes());
    set_gate64(&mut m, 14, LH + 0x800, 2, 0x8e);
    set_gate64(&mut m, 8, LH, 0, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, true);
    m.load(LUSER, &[0x48, 0x8b, 0x0c, 0x25, 0x23, 0x01, 0x60, 0x00]); // mov rcx, [0x600123]
    assert_eq!(m.run_until_stop(&mut Interpreter, 100), SysStop::Halt);
    assert_eq!(rd64(&m, 0x5008), 0);
    assert_eq!(rd64(&m, 0x5010), LUSER);
    // CR2 holds the address of the second #PF (the frame write on the IST stack).
    assert_eq!(m.cpu.state.cr2 & !0xfff, UNMAPPED & !0xfff);
    assert_ne!(m.cpu.state.cr2, UNMAPPED);

    // #UD (benign) whose gate is bad: plain #GP, not #DF.
    let mut m = long_env();
    set_gate64(&mut m, 6, LH + 0x800, 0, 0x8c);
    set_gate64(&mut m, 13, LH, 0, 0x8e);
    set_gate64(&mut m, 8, LH + 0x800, 0, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, true);
    m.load(LUSER, &[0x0f, 0x0b]);
    assert_eq!(m.run_until_stop(&mut Interpreter, 100), SysStop::Halt);
    assert_eq!(rd64(&m, 0x5008), 6 * 8 + 2 + 1, "#GP(IDT entry 6, EXT)");
}

/// External interrupts: refused with IF = 0 or under an interrupt shadow, delivered otherwise
/// (no error code, EXT events, interrupt gate clears IF); a halted CPU wakes with RIP after HLT.
#[test]
fn external_interrupts_respect_if_and_shadow() {
    let mut m = long_env();
    set_gate64(&mut m, 0x20, LH, 0, 0x8e);
    record_handler(&mut m, LH, 0x5000, 0, false);
    let spin = asm(64, LUSER, |a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.inc(rcx)?;
        a.jmp(top)
    });
    m.load(LUSER, &spin);
    assert_eq!(m.run(7).retired, 7);
    let rip = m.cpu.state.rip;
    m.cpu.state.rflags &= !flags::IF;
    assert_eq!(m.inject_external(0x20), Ok(false));
    m.cpu.state.rflags |= flags::IF;
    m.cpu.state.interrupt_shadow = true;
    assert_eq!(m.inject_external(0x20), Ok(false));
    assert_eq!(m.cpu.state.rip, rip, "nothing changed");
    // The shadow covers one instruction: a run that retires one ends it.
    assert_eq!(m.run(1).retired, 1);
    assert!(!m.cpu.state.interrupt_shadow);
    let rip = m.cpu.state.rip;
    assert_eq!(m.inject_external(0x20), Ok(true));
    assert_eq!(m.cpu.state.rip, LH);
    assert_eq!(m.run_until_stop(&mut Interpreter, 100), SysStop::Halt);
    assert_eq!(rd64(&m, 0x5008), rip, "no error code: RIP first");
    assert_eq!(rd64(&m, 0x5010), 0x2b);
    assert_eq!(rd64(&m, 0x5040) & flags::IF, 0);
    // Halted at CPL 0 with IF = 0 (interrupt gate): refused. With IF = 1: wakes after HLT.
    let hlt_next = m.cpu.state.rip;
    assert!(m.cpu.state.halted);
    assert_eq!(m.inject_external(0x20), Ok(false));
    m.cpu.state.rflags |= flags::IF;
    assert_eq!(m.inject_external(0x20), Ok(true));
    assert!(!m.cpu.state.halted);
    let top = m.cpu.state.gpr[reg::RSP];
    assert_eq!(rd64(&m, top), hlt_next);
    assert_eq!(rd64(&m, top + 8), 0x08);
}

/// The shadow rule on its own: a shadow set by the last instruction of a run survives it.
#[test]
fn shadow_rule() {
    let mut st = CpuState::power_on();
    st.interrupt_shadow = true;
    end_shadow_after_run(&mut st, false, 5);
    assert!(st.interrupt_shadow);
    end_shadow_after_run(&mut st, true, 0);
    assert!(st.interrupt_shadow);
    end_shadow_after_run(&mut st, true, 1);
    assert!(!st.interrupt_shadow);
}
