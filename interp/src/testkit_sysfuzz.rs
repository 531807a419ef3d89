//! Fuzz body for random system state (the `sys_exec` cargo-fuzz target and the stable no-panic
//! test): a [`SysMachine`] in a random mode with random CR0/CR4/EFER (valid combinations and
//! invalid ones), random GDT/IDT/LDT/TSS contents, random segment caches and selectors, random
//! (mostly identity) page tables with random corruption, then random code run with exception
//! delivery and random external interrupts. Any architectural outcome is fine (faults, triple
//! faults, shutdowns); a host panic or unbounded host memory is the bug.

use crate::cpu::{Engine, ExitReason, Interpreter};
use crate::interrupt::Event;
use crate::state::{ctl, flags, sreg, Segment};
use crate::testkit_sys::SysMachine;

/// Instructions per fuzz case.
pub const SYS_FUZZ_BUDGET: u64 = 2_000;
/// Engine calls per case (exception delivery retires nothing, so a handler that faults at
/// once could otherwise loop for ever).
const MAX_CALLS: u32 = 400;
const RAM_MB: u64 = 4;
const GDT: u64 = 0x1000;
const LDT: u64 = 0x2000;
const TSS: u64 = 0x3000;
const IDT: u64 = 0x4000;
/// Interrupt handlers: random bytes then IRET.
const HANDLER: u64 = 0x6000;
/// Paging structures (identity maps of the first 4 MiB, then corrupted).
const PT: u64 = 0x8000;
/// The fuzzed code (physical; CS.base + RIP points here in every generated mode).
const CODE: u64 = 0x10000;

/// What one case did.
#[derive(Debug, Clone)]
pub struct SysFuzzOutcome {
    pub retired: u64,
    pub calls: u32,
    /// The shutdown report, if the processor shut down.
    pub shutdown: Option<String>,
    /// Host bytes the machine's bus buffered (serial output, logged OUTs and MMIO writes).
    pub buffered: usize,
}

/// Setup bytes, read in order; zeros once exhausted.
struct Reader<'a> {
    d: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        let v = self.d.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        (self.u16() as u32) | (self.u16() as u32) << 16
    }
    fn u64(&mut self) -> u64 {
        (self.u32() as u64) | (self.u32() as u64) << 32
    }
    /// True with probability 1/`n`.
    fn one_in(&mut self, n: u8) -> bool {
        self.u8().is_multiple_of(n.max(1))
    }
}

/// An 8-byte code/data/system descriptor (`flags` = G/D/L/AVL).
fn desc(base: u32, limit: u32, access: u8, flags: u8) -> u64 {
    let (base, limit) = (base as u64, limit as u64);
    (limit & 0xffff)
        | ((base & 0xff_ffff) << 16)
        | ((access as u64) << 40)
        | (((limit >> 16) & 0xf) << 48)
        | (((flags & 0xf) as u64) << 52)
        | ((base >> 24) << 56)
}

/// A gate's low 8 bytes (legacy gate, or the low half of a 64-bit one).
fn gate(sel: u16, off: u64, access: u8, ist_or_params: u8) -> u64 {
    (off & 0xffff)
        | ((sel as u64) << 16)
        | ((ist_or_params as u64) << 32)
        | ((access as u64) << 40)
        | (((off >> 16) & 0xffff) << 48)
}

/// Useful GDT entries: null, flat code32/data32 DPL0, code16, code64, DPL3 code/data, TSS.
fn template_gdt() -> [u64; 10] {
    [
        0,
        desc(0, 0xfffff, 0x9b, 0xc), // 0x08 code32
        desc(0, 0xfffff, 0x93, 0xc), // 0x10 data32
        desc(0, 0xffff, 0x9b, 0x0),  // 0x18 code16
        desc(0, 0xfffff, 0x9b, 0xa), // 0x20 code64
        desc(0, 0xfffff, 0xfb, 0xc), // 0x28 code32 DPL3
        desc(0, 0xfffff, 0xf3, 0xc), // 0x30 data DPL3
        desc(0, 0xfffff, 0xfb, 0xa), // 0x38 code64 DPL3
        desc(TSS as u32, 0x67, 0x89, 0),
        0, // high half of a 64-bit TSS descriptor
    ]
}

/// Run one case from arbitrary bytes: the first two bytes give the setup length (at most
/// 1023), then the setup bytes, then the code (at most 4 KiB).
pub fn fuzz_sys_exec(data: &[u8]) -> SysFuzzOutcome {
    fuzz_sys_exec_with(data, &mut Interpreter)
}

/// [`fuzz_sys_exec`] on any engine (the cargo-fuzz target also runs the JIT).
pub fn fuzz_sys_exec_with(data: &[u8], engine: &mut dyn Engine) -> SysFuzzOutcome {
    let head = data.len().min(2);
    let setup_len = (u16::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]) & 0x3ff) as usize;
    let rest = &data[head..];
    let (setup, code) = rest.split_at(setup_len.min(rest.len()));
    let code = &code[..code.len().min(4096)];
    let mut r = Reader { d: setup, pos: 0 };
    let mut m = SysMachine::new(RAM_MB);
    build(&mut m, &mut r, code);
    run(&mut m, &mut r, engine)
}

/// Build the random system state.
fn build(m: &mut SysMachine, r: &mut Reader, code: &[u8]) {
    let mode = r.u8() % 8;
    let long = matches!(mode, 5 | 6);
    // Descriptor tables.
    let mut gdt = template_gdt().to_vec();
    let extra = r.u8() % 24;
    for _ in 0..extra {
        gdt.push(match r.u8() % 4 {
            0 => r.u64(),
            1 => gate(0x08, HANDLER, 0x8c | (r.u8() & 0x60), r.u8() & 0x1f),
            2 => desc(r.u32() & 0x3f_ffff, r.u32(), r.u8(), r.u8()),
            _ => gdt[(r.u8() % 10) as usize] ^ (1u64 << (r.u8() % 64)),
        });
    }
    for _ in 0..r.u8() % 4 {
        let i = (r.u8() as usize) % gdt.len();
        gdt[i] = r.u64();
    }
    for (i, d) in gdt.iter().enumerate() {
        m.load(GDT + 8 * i as u64, &d.to_le_bytes());
    }
    // The LDT and TSS: random bytes, with sensible stack fields half the time.
    let mut ldt = [0u8; 64];
    ldt.iter_mut().for_each(|b| *b = r.u8());
    m.load(LDT, &ldt);
    let mut tss = [0u8; 0x68 + 32];
    if r.one_in(2) {
        tss.iter_mut().for_each(|b| *b = r.u8());
    } else {
        tss[4..8].copy_from_slice(&0x9000u32.to_le_bytes()); // ESP0 / RSP0 low
        tss[8..10].copy_from_slice(&0x10u16.to_le_bytes()); // SS0
        tss[0x24..0x28].copy_from_slice(&0xa000u32.to_le_bytes()); // IST1 low (64-bit TSS)
        tss[0x66..0x68].copy_from_slice(&0xffffu16.to_le_bytes()); // no I/O bitmap
    }
    m.load(TSS, &tss);
    // Handlers: a few random bytes, then IRET (IRETQ in long mode).
    let mut h = vec![0u8; (r.u8() % 6) as usize];
    h.iter_mut().for_each(|b| *b = r.u8());
    if long {
        h.push(0x48);
    }
    h.push(0xcf);
    m.load(HANDLER, &h);
    m.load(CODE, code);

    // Mode, control registers and code segment.
    match mode {
        0 => {
            m.start_real((CODE >> 4) as u16, 0);
        }
        1 => {
            m.start_protected_flat(CODE as u32);
            m.cpu.state.seg[sreg::CS] = Segment {
                selector: 0x18,
                attr: 0x009b,
                limit: 0xffff,
                base: CODE,
            };
            m.cpu.state.rip = 0;
        }
        2..=4 => {
            m.start_protected_flat(CODE as u32);
            let st = &mut m.cpu.state;
            st.seg[sreg::CS].selector = 0x08;
            st.seg[sreg::SS].selector = 0x10;
            if mode == 3 {
                // 32-bit paging, one 4 MiB page.
                st.cr4 |= ctl::CR4_PSE;
                st.cr0 |= ctl::CR0_PG;
                st.cr3 = PT;
                m.load(PT, &0x87u32.to_le_bytes());
            } else if mode == 4 {
                // PAE: PDPT -> PD with two 2 MiB pages.
                st.cr4 |= ctl::CR4_PAE;
                st.cr0 |= ctl::CR0_PG;
                st.cr3 = PT;
                m.load(PT, &((PT + 0x1000) | 1).to_le_bytes());
                m.load(PT + 0x1000, &0x87u64.to_le_bytes());
                m.load(PT + 0x1008, &0x20_0087u64.to_le_bytes());
            }
        }
        5 | 6 => {
            // 4-level paging: PML4 -> PDPT -> PD with two 2 MiB pages.
            m.load(PT, &((PT + 0x1000) | 7).to_le_bytes());
            m.load(PT + 0x1000, &((PT + 0x2000) | 7).to_le_bytes());
            m.load(PT + 0x2000, &0x87u64.to_le_bytes());
            m.load(PT + 0x2008, &0x20_0087u64.to_le_bytes());
            m.start_long(PT, CODE);
            let st = &mut m.cpu.state;
            st.seg[sreg::CS].selector = 0x20;
            if mode == 6 {
                // Compatibility mode, 32-bit code.
                st.seg[sreg::CS] = Segment {
                    selector: 0x08,
                    attr: 0xc09b,
                    limit: 0xffff_ffff,
                    base: 0,
                };
            }
        }
        _ => {
            // Raw control registers: any combination, valid or not.
            m.start_protected_flat(CODE as u32);
            let st = &mut m.cpu.state;
            st.cr0 = r.u32() as u64 | ctl::CR0_ET;
            st.cr4 = r.u32() as u64 & 0x7f_ffff;
            st.efer = r.u16() as u64 & 0xd01;
            st.cr3 = PT + (r.u16() as u64 & 0x1fe0);
            st.seg[sreg::CS].attr = r.u16() | 0x80;
        }
    }
    let st = &mut m.cpu.state;
    // Table registers.
    st.gdtr.base = if r.one_in(8) { r.u32() as u64 } else { GDT };
    st.gdtr.limit = if r.one_in(4) {
        r.u16()
    } else {
        (gdt.len() * 8 - 1) as u16
    };
    if mode != 0 || r.one_in(4) {
        st.idtr.base = if r.one_in(8) { r.u32() as u64 } else { IDT };
        st.idtr.limit = if r.one_in(4) { r.u16() } else { 0xfff };
    }
    st.ldtr = Segment {
        selector: 0x50,
        attr: if r.one_in(2) { 0x82 } else { r.u16() },
        limit: r.u8() as u32 * 8 + 7,
        base: LDT,
    };
    st.tr = Segment {
        selector: 0x40,
        attr: [0x8b, 0x89, 0x83, r.u16()][(r.u8() % 4) as usize],
        limit: if r.one_in(2) { 0x67 } else { r.u16() as u32 },
        base: TSS,
    };
    // Optional CR/EFER extras (some illegal in the mode).
    for (bit, reg) in [
        (ctl::CR0_WP, 0),
        (ctl::CR0_TS, 0),
        (ctl::CR0_EM, 0),
        (ctl::CR4_PGE, 4),
        (ctl::CR4_SMEP, 4),
        (ctl::CR4_SMAP, 4),
        (ctl::CR4_OSFXSR, 4),
        (ctl::CR4_OSXSAVE, 4),
        (ctl::CR4_FSGSBASE, 4),
        (ctl::CR4_DE, 4),
        (ctl::CR4_TSD, 4),
        (ctl::EFER_NXE, 8),
        (ctl::EFER_SCE, 8),
    ] {
        if r.one_in(3) {
            match reg {
                0 => st.cr0 |= bit,
                4 => st.cr4 |= bit,
                _ => st.efer |= bit,
            }
        }
    }
    if st.cr4 & ctl::CR4_OSXSAVE != 0 {
        st.xcr0 = [1, 3, 7][(r.u8() % 3) as usize];
    }
    // Data segment caches: mode defaults, or random.
    for s in [sreg::DS, sreg::ES, sreg::FS, sreg::GS, sreg::SS] {
        if r.one_in(4) {
            st.seg[s] = Segment {
                selector: r.u16(),
                attr: r.u16(),
                limit: r.u32(),
                base: r.u32() as u64 & 0x3f_ffff,
            };
        }
    }
    // CPL: the RPL of CS (and SS) set to a random ring a quarter of the time.
    if r.one_in(4) {
        let cpl = r.u8() & 3;
        st.seg[sreg::CS].selector = (st.seg[sreg::CS].selector & !3) | cpl as u16;
        st.seg[sreg::CS].attr = (st.seg[sreg::CS].attr & !0x60) | (cpl as u16) << 5;
        st.seg[sreg::SS].selector = (st.seg[sreg::SS].selector & !3) | cpl as u16;
        st.seg[sreg::SS].attr = (st.seg[sreg::SS].attr & !0x60) | (cpl as u16) << 5;
    }
    // General-purpose registers, flags and a few MSRs.
    for g in st.gpr.iter_mut() {
        *g = match r.u8() % 4 {
            0 => r.u64(),
            1 => r.u16() as u64,
            2 => 0x9000 + (r.u8() as u64) * 8,
            _ => 0,
        };
    }
    st.gpr[crate::state::reg::RSP] = 0x8000 - 8 * (r.u8() as u64 & 7);
    let rf = flags::IF | flags::DF | flags::AC | flags::TF | flags::NT | flags::VM | 0x3000;
    st.rflags = flags::FIXED1 | (r.u32() as u64 & rf & if r.one_in(2) { !0 } else { flags::IF });
    if r.one_in(4) {
        st.star = r.u64();
        st.lstar = r.u64();
        st.sfmask = r.u32() as u64;
        st.msr.sysenter_cs = r.u16() as u64;
        st.msr.sysenter_eip = r.u32() as u64;
        st.msr.sysenter_esp = r.u32() as u64;
    }
    st.cr8 = (r.u8() & 15) as u64;
    // The IDT/IVT: a template gate for every vector, some mutated or random.
    let (cs, access) = if long {
        (0x20u16, 0x8e)
    } else {
        (0x08u16, 0x8e)
    };
    let ist = if long && r.one_in(4) { 1 } else { 0 };
    let gate_access = [access, 0x8f, 0xee, 0x85][(r.u8() % 4) as usize];
    for v in 0..256u64 {
        let mut lo = gate(cs, HANDLER, gate_access, ist);
        if r.one_in(16) {
            lo = r.u64();
        }
        if long {
            m.load(IDT + 16 * v, &lo.to_le_bytes());
            m.load(IDT + 16 * v + 8, &0u64.to_le_bytes());
        } else {
            m.load(IDT + 8 * v, &lo.to_le_bytes());
        }
        // Real-mode IVT at 0: HANDLER as 0x0600:0000.
        m.load(4 * v, &(0x0600u32 << 16).to_le_bytes());
    }
    // Corrupt the paging structures a little.
    for _ in 0..r.u8() % 4 {
        let at = PT + ((r.u16() as u64 % 0x3000) & !7);
        let v = if r.one_in(2) {
            r.u64()
        } else {
            (r.u32() as u64 & 0x3f_f000) | (r.u8() as u64)
        };
        m.load(at, &v.to_le_bytes());
    }
    m.cpu.flush_caches();
}

/// Run the case: exceptions delivered, random external interrupts offered at yields and HLT.
fn run(m: &mut SysMachine, r: &mut Reader, engine: &mut dyn Engine) -> SysFuzzOutcome {
    let mut calls = 0;
    let mut shutdown = None;
    let end = m.cpu.retired + SYS_FUZZ_BUDGET;
    while m.cpu.retired < end && calls < MAX_CALLS && m.bus.exit_code.is_none() {
        calls += 1;
        let e = m.run_with(engine, end - m.cpu.retired);
        let ev = match e.reason {
            ExitReason::Exception(f) => Some(Event::from_fault(f)),
            ExitReason::Halt | ExitReason::Yield => {
                let v = r.u8();
                match m.inject_external(v | 0x20) {
                    Ok(true) => None,
                    Ok(false) if e.reason == ExitReason::Halt => break,
                    Ok(false) => None,
                    Err(s) => {
                        shutdown = Some(s.to_string());
                        break;
                    }
                }
            }
            ExitReason::Budget => break,
            _ => break,
        };
        if let Some(ev) = ev {
            if let Err(s) = m.deliver(ev) {
                shutdown = Some(s.to_string());
                break;
            }
        }
    }
    SysFuzzOutcome {
        retired: m.cpu.retired,
        calls,
        shutdown,
        buffered: m.bus.serial.len() + 16 * m.bus.outs.len() + 24 * m.bus.mmio_writes.len(),
    }
}
