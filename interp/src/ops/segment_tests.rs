//! Tests of segment register loads and the legacy-mode segment checks, on the system test
//! machine (real mode and 32-bit protected mode with a GDT built here). Shared helpers are
//! used by `far_tests.rs` and `desc_table_tests.rs`.

use crate::cpu::Interpreter;
use crate::fault::Fault;
use crate::state::{reg, sreg, Segment};
use crate::testkit_sys::{SysMachine, SysStop};
use iced_x86::code_asm::*;

/// Physical address of the test GDT.
pub(crate) const GDT: u64 = 0x1000;
/// The test TSS (32-bit: ESP0 = 0x9000, SS0 = 0x18).
pub(crate) const TSS: u64 = 0x3000;
/// Where protected-mode test code starts.
pub(crate) const CODE: u64 = 0x10000;
/// Target of the call gate at 0x50 (CPL 0 code, selector 0x08).
pub(crate) const GATE_TARGET: u64 = 0x11000;

/// An 8-byte code/data descriptor. `flags` is the G/D/L/AVL nibble.
pub(crate) fn seg_desc(base: u32, limit: u32, access: u8, flags: u8) -> u64 {
    let (base, limit) = (base as u64, limit as u64);
    (limit & 0xffff)
        | ((base & 0xff_ffff) << 16)
        | ((access as u64) << 40)
        | (((limit >> 16) & 0xf) << 48)
        | (((flags & 0xf) as u64) << 52)
        | ((base >> 24) << 56)
}

/// A legacy call gate (`typ` 4 or 12).
pub(crate) fn gate_desc(sel: u16, off: u32, access: u8, params: u8) -> u64 {
    let off = off as u64;
    (off & 0xffff)
        | ((sel as u64) << 16)
        | ((params as u64 & 0x1f) << 32)
        | ((access as u64) << 40)
        | ((off >> 16) << 48)
}

/// The test GDT (see the constants in each entry's comment).
pub(crate) fn gdt() -> Vec<u64> {
    vec![
        0,                                            // 0x00 null
        seg_desc(0, 0xfffff, 0x9b, 0xc),              // 0x08 code32 DPL0
        seg_desc(0, 0xfffff, 0x9b, 0xc),              // 0x10 code32 DPL0 (multiboot CS)
        seg_desc(0, 0xfffff, 0x93, 0xc),              // 0x18 data32 DPL0
        seg_desc(0x20000, 0xfff, 0x91, 0x4),          // 0x20 read-only data, 4 KiB at 0x20000
        seg_desc(0, 0xffff, 0x9b, 0x0),               // 0x28 code16 DPL0
        seg_desc(0, 0xfffff, 0x13, 0xc),              // 0x30 data, not present
        seg_desc(0x30000, 0xfff, 0x97, 0x4),          // 0x38 expand-down RW data, B = 1
        seg_desc(0, 0xfffff, 0xfb, 0xc),              // 0x40 code32 DPL3
        seg_desc(0, 0xfffff, 0xf3, 0xc),              // 0x48 data32 DPL3
        gate_desc(0x08, GATE_TARGET as u32, 0xec, 0), // 0x50 32-bit call gate DPL3
        seg_desc(TSS as u32, 0x67, 0x89, 0x0),        // 0x58 32-bit TSS, available
        seg_desc(0, 0xfffff, 0x99, 0xc),              // 0x60 execute-only code32
        seg_desc(0x40000, 0xfff, 0x93, 0x4),          // 0x68 small RW stack, 4 KiB at 0x40000
        seg_desc(0, 0xfffff, 0x9b, 0xa),              // 0x70 code64 DPL0
    ]
}

/// Write the GDT and TSS, enter 32-bit protected mode at [`CODE`] with CPL 0, SS = 0x18,
/// ESP = 0x8000, TR = 0x58 (its descriptor left available, as before an LTR... TR's cache is
/// set directly for the gate tests).
pub(crate) fn pm_machine() -> SysMachine {
    let mut m = SysMachine::new(4);
    m.deliver_exceptions = false;
    let g = gdt();
    for (i, d) in g.iter().enumerate() {
        m.load(GDT + 8 * i as u64, &d.to_le_bytes());
    }
    m.load(TSS + 4, &0x9000u32.to_le_bytes());
    m.load(TSS + 8, &0x18u16.to_le_bytes());
    m.start_protected_flat(CODE as u32);
    let st = &mut m.cpu.state;
    st.gdtr.base = GDT;
    st.gdtr.limit = (g.len() * 8 - 1) as u16;
    st.gpr[reg::RSP] = 0x8000;
    st.tr = Segment {
        selector: 0x58,
        attr: 0x008b,
        limit: 0x67,
        base: TSS,
    };
    m
}

/// Assemble `f` for `bitness`-bit code at `ip`.
pub(crate) fn asm(
    bitness: u32,
    ip: u64,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Vec<u8> {
    let mut a = CodeAssembler::new(bitness).unwrap();
    f(&mut a).unwrap();
    a.assemble(ip).unwrap()
}

/// Load 32-bit code at [`CODE`] and run until it stops.
pub(crate) fn run32(
    m: &mut SysMachine,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> SysStop {
    let code = asm(32, CODE, f);
    m.load(CODE, &code);
    m.run_until_stop(&mut Interpreter, 1000)
}

/// Run 32-bit protected-mode code expected to fault with `f`; returns the machine.
pub(crate) fn pm_fault(
    prog: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
    f: Fault,
) -> SysMachine {
    let mut m = pm_machine();
    let stop = run32(&mut m, prog);
    assert_eq!(stop, SysStop::Exception(f));
    m
}

#[test]
fn protected_mode_data_load_sets_cache_and_accessed_bit() {
    let mut m = pm_machine();
    m.load(0x20010, &0xdead_beefu32.to_le_bytes());
    let stop = run32(&mut m, |a| {
        a.mov(ax, 0x20)?;
        a.mov(es, ax)?;
        a.mov(ebx, dword_ptr(0x10).es())?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0xdead_beef);
    assert_eq!(
        st.seg[sreg::ES],
        Segment {
            selector: 0x20,
            attr: 0x4091,
            limit: 0xfff,
            base: 0x20000
        }
    );
    // The descriptor in memory got its accessed bit.
    assert_eq!(m.ram.bytes()[(GDT + 0x20 + 5) as usize], 0x91);
}

#[test]
fn protected_mode_load_faults() {
    let load = |sel: u16, to_ss: bool| {
        move |a: &mut CodeAssembler| {
            a.mov(ax, sel as u32)?;
            if to_ss {
                a.mov(ss, ax)
            } else {
                a.mov(ds, ax)
            }
        }
    };
    pm_fault(load(0x30, false), Fault::SegmentNotPresent(0x30));
    pm_fault(load(0x58, false), Fault::GeneralProtection(0x58));
    pm_fault(load(0x78, false), Fault::GeneralProtection(0x78));
    pm_fault(load(0x60, false), Fault::GeneralProtection(0x60));
    pm_fault(load(0x1b, false), Fault::GeneralProtection(0x18));
    pm_fault(load(0x0, true), Fault::GP0);
    pm_fault(load(0x20, true), Fault::GeneralProtection(0x20));
    pm_fault(load(0x48, true), Fault::GeneralProtection(0x48));
    // A faulting load leaves the register alone.
    let m = pm_fault(load(0x30, false), Fault::SegmentNotPresent(0x30));
    assert_eq!(m.cpu.state.seg[sreg::DS].selector, 0x18);
    // The LDT is unusable while LDTR is null: #GP(selector with TI).
    pm_fault(load(0x0c, false), Fault::GeneralProtection(0x0c));
}

#[test]
fn protected_mode_type_limit_and_null_checks() {
    // Writes to read-only data.
    pm_fault(
        |a| {
            a.mov(ax, 0x20)?;
            a.mov(es, ax)?;
            a.mov(dword_ptr(0).es(), eax)
        },
        Fault::GP0,
    );
    // A dword read crossing the limit (0xfff).
    pm_fault(
        |a| {
            a.mov(ax, 0x20)?;
            a.mov(es, ax)?;
            a.mov(eax, dword_ptr(0xffd).es())
        },
        Fault::GP0,
    );
    // Null DS: the load succeeds, any use faults.
    let m = pm_fault(
        |a| {
            a.xor(eax, eax)?;
            a.mov(ds, ax)?;
            a.mov(eax, dword_ptr(0x100))
        },
        Fault::GP0,
    );
    assert_eq!(m.cpu.state.seg[sreg::DS].attr & 0x80, 0);
    // Readable code may be read, never written.
    pm_fault(
        |a| {
            a.mov(ax, 0x08)?;
            a.mov(ds, ax)?;
            a.mov(eax, dword_ptr(0x100))?;
            a.mov(dword_ptr(0x100), eax)
        },
        Fault::GP0,
    );
    // Expand-down (limit 0xfff, B = 1): offsets up to the limit fault, above are valid.
    let mut m = pm_machine();
    m.load(0x32000, &0x1234_5678u32.to_le_bytes());
    let stop = run32(&mut m, |a| {
        a.mov(ax, 0x38)?;
        a.mov(ds, ax)?;
        a.mov(ebx, dword_ptr(0x2000))?;
        a.mov(ecx, dword_ptr(0xffe))?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.gpr[reg::RBX], 0x1234_5678);
    // The stack: a push across SS's limit is #SS(0), and ESP is unchanged.
    let m = pm_fault(
        |a| {
            a.mov(ax, 0x68)?;
            a.mov(ss, ax)?;
            a.mov(esp, 0x1002)?;
            a.push(eax)
        },
        Fault::StackFault(0),
    );
    assert_eq!(m.cpu.state.gpr[reg::RSP], 0x1002);
    // An explicit SS-relative operand beyond the limit is #SS(0) too.
    pm_fault(
        |a| {
            a.mov(ax, 0x68)?;
            a.mov(ss, ax)?;
            a.mov(ebp, 0x1000)?;
            a.mov(eax, dword_ptr(ebp))
        },
        Fault::StackFault(0),
    );
}

#[test]
fn mov_ss_sets_the_interrupt_shadow_and_yields() {
    let mut m = pm_machine();
    let code = asm(32, CODE, |a| {
        a.mov(ax, 0x18)?;
        a.mov(ss, ax)?;
        a.nop()?;
        a.hlt()
    });
    m.load(CODE, &code);
    let e = m.run(100);
    assert_eq!(e.reason, crate::cpu::ExitReason::Yield);
    assert_eq!(e.retired, 2);
    assert!(m.cpu.state.interrupt_shadow);
}

#[test]
fn pop_and_push_segment_registers_in_protected_mode() {
    let mut m = pm_machine();
    let stop = run32(&mut m, |a| {
        a.push(0x48)?;
        a.pop(fs)?;
        a.push(gs)?;
        a.mov(ax, 0x20)?;
        a.mov(gs, ax)?;
        a.pop(gs)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.seg[sreg::FS].selector, 0x48);
    assert_eq!(st.seg[sreg::FS].attr, 0xc0f3);
    assert_eq!(st.seg[sreg::GS].selector, 0x18);
    assert_eq!(st.gpr[reg::RSP], 0x8000);
    // POP DS of a bad selector: #GP(sel), ESP unchanged.
    let m = pm_fault(
        |a| {
            a.push(0x30)?;
            a.pop(ds)
        },
        Fault::SegmentNotPresent(0x30),
    );
    assert_eq!(m.cpu.state.gpr[reg::RSP], 0x8000 - 4);
}

#[test]
fn lss_and_lfs_load_pointer_pairs() {
    let mut m = pm_machine();
    // m16:32 at 0x5000: offset 0x0abc, selector 0x68.
    m.load(0x5000, &0x0abcu32.to_le_bytes());
    m.load(0x5004, &0x68u16.to_le_bytes());
    let stop = run32(&mut m, |a| {
        a.lfs(ebx, ptr(0x5000))?;
        a.lss(esp, ptr(0x5000))?;
        a.push(0x77)?;
        a.hlt()
    });
    assert_eq!(stop, SysStop::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0x0abc);
    assert_eq!(st.seg[sreg::FS].base, 0x40000);
    assert_eq!(st.seg[sreg::SS].selector, 0x68);
    assert_eq!(st.gpr[reg::RSP], 0x0ab8);
    assert_eq!(m.ram.bytes()[0x40ab8], 0x77);
}

#[test]
fn real_mode_loads_far_transfers_and_limits() {
    let mut m = SysMachine::new(2);
    m.deliver_exceptions = false;
    // 0x1000:0000: 16-bit code.
    let code = asm(16, 0, |a| {
        a.mov(ax, 0x2000)?;
        a.mov(ds, ax)?;
        a.mov(word_ptr(0x10), 0x1234)?;
        a.push(ds)?;
        a.pop(es)?;
        a.lds(si, ptr(0x20))?;
        // call far 0x1000:sub ; jmp far 0x1000:next
        a.db(&[0x9a, 0x40, 0x00, 0x00, 0x10])?;
        a.db(&[0xea, 0x50, 0x00, 0x00, 0x10])
    });
    m.load(0x10000, &code);
    // sub at 0x40: mov bx, es:[0x10] ; retf
    m.load(0x10040, &[0x26, 0x8b, 0x1e, 0x10, 0x00, 0xcb]);
    // next at 0x50: mov cx, [0xffff] (a word at the limit) -> #GP(0)
    m.load(0x10050, &[0x8b, 0x0e, 0xff, 0xff]);
    // Far pointer at 0x2000:0x20 = 0x3000:0x0044.
    m.load(0x20020, &[0x44, 0x00, 0x00, 0x30]);
    m.start_real(0x1000, 0);
    m.cpu.state.gpr[reg::RSP] = 0x800;
    let stop = m.run_until_stop(&mut Interpreter, 100);
    assert_eq!(stop, SysStop::Exception(Fault::GP0));
    let st = &m.cpu.state;
    assert_eq!(st.rip, 0x50);
    assert_eq!(st.seg[sreg::CS].base, 0x10000);
    assert_eq!(st.seg[sreg::ES].base, 0x20000);
    assert_eq!(st.seg[sreg::DS].selector, 0x3000);
    assert_eq!(st.seg[sreg::DS].base, 0x30000);
    assert_eq!(st.seg[sreg::DS].attr, 0x93);
    assert_eq!(st.gpr[reg::RSI], 0x44);
    assert_eq!(st.gpr[reg::RBX], 0x1234);
    assert_eq!(st.gpr[reg::RSP], 0x800);
    assert_eq!(m.ram.bytes()[0x20010], 0x34);
    assert_eq!(st.cpl(), 0);

    // A push with SP = 1 writes a word at 0xffff: #SS(0).
    let mut m = SysMachine::new(2);
    m.deliver_exceptions = false;
    m.load(0x10000, &[0x50]); // push ax
    m.start_real(0x1000, 0);
    m.cpu.state.gpr[reg::RSP] = 1;
    let stop = m.run_until_stop(&mut Interpreter, 10);
    assert_eq!(stop, SysStop::Exception(Fault::StackFault(0)));
    assert_eq!(m.cpu.state.gpr[reg::RSP], 1);
}

#[test]
fn cpl_and_code_bitness_per_mode() {
    let mut m = SysMachine::new(1);
    m.deliver_exceptions = false;
    m.start_real(0xf003, 0);
    assert_eq!(m.cpu.state.cpl(), 0);
    assert_eq!(m.cpu.state.code_bitness(), 16);
    let mut m = pm_machine();
    assert_eq!(m.cpu.state.code_bitness(), 32);
    m.cpu.state.seg[sreg::CS].selector = 0x43;
    assert_eq!(m.cpu.state.cpl(), 3);
    m.cpu.state.rflags |= crate::state::flags::VM;
    assert_eq!(m.cpu.state.code_bitness(), 16);
    m.cpu.state.seg[sreg::CS].selector = 0x40;
    assert_eq!(m.cpu.state.cpl(), 3);
}
