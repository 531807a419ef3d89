//! Chained jumps between compiled blocks follow the guest's page tables and code writes: a
//! chain link is only taken while the execute TLB maps the target to the page it was made
//! for and the target's code is unchanged. These tests remap a called page (with INVLPG, a
//! CR3 reload, or no flush at all: the stale translation stays in use, as in the
//! interpreter) and rewrite it, after both loops are compiled and chained, and compare the
//! JIT with the interpreter instruction for instruction.

mod common;

use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit_sys::SysMachine;
use lockstep_interp::ExitReason;
use lockstep_jit::JitConfig;

/// Page tables (`common::paging`: PDPT, PD and the 4 KiB page table for the first 2 MiB
/// follow); the page table's address.
const PML4: u64 = 0x1000;
const PT: u64 = PML4 + 0x3000;
const CODE: u64 = 0x10_0000;
/// The called page (linear), first mapped to itself, later to `ALT`.
const TARGET: u64 = 0x18_0000;
const ALT: u64 = 0x19_0000;
const STACK: u64 = 0x30_0000;
const LOOPS: u32 = 3000;

#[derive(Clone, Copy, Debug)]
enum Remap {
    /// Point the PTE at `ALT`, then INVLPG.
    Invlpg,
    /// Point the PTE at `ALT`, then reload CR3.
    Cr3,
    /// Point the PTE at `ALT` and flush nothing: the cached translation stays in use.
    NoFlush,
    /// Keep the mapping; overwrite the called code in place.
    Rewrite,
}

fn assemble(base: u64, f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    f(&mut a).unwrap();
    a.assemble(base).unwrap()
}

/// `add rax, imm; ret`.
fn callee(imm: i32) -> Vec<u8> {
    assemble(TARGET, |a| {
        a.add(rax, imm)?;
        a.ret()
    })
}

fn machine(how: Remap) -> SysMachine {
    let mut m = SysMachine::new(64);
    common::paging(&mut m, PML4, &|page| page | 3);
    m.load(TARGET, &callee(1));
    m.load(ALT, &callee(100));
    let new_code = callee(10_000);
    let pte = PT + (TARGET >> 12) * 8;
    // One loop calls TARGET 2*LOOPS times; halfway, it changes what TARGET is. The compiled
    // caller keeps its chain link across the change: only the link's checks stop it.
    let main = assemble(CODE, |a| {
        let mut top = a.create_label();
        let mut skip = a.create_label();
        a.xor(eax, eax)?;
        a.mov(ecx, 2 * LOOPS)?;
        a.set_label(&mut top)?;
        a.call(TARGET)?;
        a.dec(ecx)?;
        a.cmp(ecx, LOOPS)?;
        a.jne(skip)?;
        match how {
            Remap::Rewrite => {
                // Store the new code's first 8 bytes over the old code.
                let mut w = [0u8; 8];
                let n = new_code.len().min(8);
                w[..n].copy_from_slice(&new_code[..n]);
                a.mov(rdx, u64::from_le_bytes(w))?;
                a.mov(rbx, TARGET)?;
                a.mov(qword_ptr(rbx), rdx)?;
            }
            _ => {
                a.mov(rdx, ALT | 3)?;
                a.mov(rbx, pte)?;
                a.mov(qword_ptr(rbx), rdx)?;
                match how {
                    Remap::Invlpg => {
                        a.mov(rbx, TARGET)?;
                        a.invlpg(byte_ptr(rbx))?;
                    }
                    Remap::Cr3 => {
                        a.mov(rbx, cr3)?;
                        a.mov(cr3, rbx)?;
                    }
                    _ => {}
                }
            }
        }
        a.set_label(&mut skip)?;
        a.test(ecx, ecx)?;
        a.jnz(top)?;
        a.hlt()
    });
    m.load(CODE, &main);
    m.start_long(PML4, CODE);
    m.cpu.state.gpr[reg::RSP] = STACK;
    m
}

/// Run `how` in both engines in slices of `slice` instructions, the JIT with and without
/// the baseline tier (whose checks and Cranelift's are emitted apart, each with its compare
/// of the page generation first: `lockstep_jit::page_gen`); both engines must agree at every
/// stop, and the JIT must have compiled and chained. Returns the final RAX (the same in
/// both runs).
fn run(how: Remap, slice: u64) -> u64 {
    let configs = [true, false].map(|baseline| JitConfig {
        threshold: 2,
        batch: 1,
        baseline,
        ..JitConfig::default()
    });
    let finals = configs.map(|config| {
        let mut b = machine(how);
        let (jit, stop) = common::run_sys_with(&mut machine(how), &mut b, slice, config);
        assert_eq!(stop, ExitReason::Halt, "{how:?}");
        let s = &jit.stats;
        assert!(
            s.compiled > 0 && s.chained_runs > 0,
            "{how:?}: {}",
            s.summary()
        );
        b.cpu.state.gpr[reg::RAX]
    });
    assert_eq!(finals[0], finals[1], "{how:?}");
    finals[0]
}

/// The other side of the checks: while nothing changes, they pass. The loop calls TARGET
/// 2 * LOOPS times through chained jumps, each checked at the callee's entry (a different
/// page); a check that failed would send every call back to the dispatcher.
#[test]
fn unchanged_targets_pass_the_entry_check() {
    let mut a = machine(Remap::NoFlush);
    let mut b = machine(Remap::NoFlush);
    let (jit, stop) = common::run_sys(&mut a, &mut b, 1 << 30);
    assert_eq!(stop, ExitReason::Halt);
    let s = &jit.stats;
    assert!(s.chained_runs > LOOPS as u64, "{}", s.summary());
    assert!(s.lookups < 100, "{}", s.summary());
}

#[test]
fn remapped_page_with_invlpg_runs_the_new_code() {
    for slice in [1 << 30, 997] {
        assert_eq!(run(Remap::Invlpg, slice), LOOPS as u64 * 101);
    }
}

#[test]
fn remapped_page_with_cr3_reload_runs_the_new_code() {
    for slice in [1 << 30, 997] {
        assert_eq!(run(Remap::Cr3, slice), LOOPS as u64 * 101);
    }
}

#[test]
fn remapped_page_without_flush_keeps_the_cached_translation() {
    // Both engines keep using the TLB entry of the old mapping (nothing evicts it here).
    for slice in [1 << 30, 997] {
        assert_eq!(run(Remap::NoFlush, slice), LOOPS as u64 * 2);
    }
}

#[test]
fn rewritten_callee_runs_the_new_code() {
    for slice in [1 << 30, 997] {
        assert_eq!(run(Remap::Rewrite, slice), LOOPS as u64 * 10_001);
    }
}

/// A direct exit's link (`lockstep_jit::chain::Link`) to the rewritten callee's old function
/// is emptied when the new code is compiled, so the calls after the rewrite chain again:
/// a link left pointing at the stale function would send each of them back to the
/// dispatcher (its entry check fails), about `LOOPS` lookups more.
#[test]
fn rewritten_callee_is_linked_again() {
    let mut a = machine(Remap::Rewrite);
    let mut b = machine(Remap::Rewrite);
    let (jit, stop) = common::run_sys(&mut a, &mut b, 1 << 30);
    assert_eq!(stop, ExitReason::Halt);
    assert_eq!(b.cpu.state.gpr[reg::RAX], LOOPS as u64 * 10_001);
    let s = &jit.stats;
    assert!(s.chained_runs > 3 * LOOPS as u64, "{}", s.summary());
    assert!(s.lookups < 100, "{}", s.summary());
}

/// A virtual code page mapped to different physical pages (with different code) in two
/// address spaces: a chained jump between blocks of one page may skip the target's entry
/// check only when the target was compiled from the same physical page and code as the
/// jumping function. Here the second address space's caller finds the first one's callee in
/// the chain table (same RIP): it must not run it.
#[test]
fn same_page_links_follow_the_address_space() {
    const V: u64 = 0x18_0000;
    const CODE_A: u64 = 0x1a_0000;
    const CODE_B: u64 = 0x1b_0000;
    const SWITCH: u64 = 0x10_0000;
    const HALT: u64 = 0x11_0000;
    const PML4_B: u64 = 0x5000;
    let space = |m: &mut SysMachine, pml4: u64, code: u64| {
        common::paging(m, pml4, &|page| if page == V { code | 3 } else { page | 3 });
    };
    // The loop calls a `ret` at V+0x900 for its first half and the callee at V+0x800 for
    // its second: in the second address space, the (by then compiled) caller's first jump
    // to V+0x800 finds the first address space's callee in the chain table.
    let main = |last_space: bool| {
        assemble(V, |a| {
            let mut top = a.create_label();
            let mut same = a.create_label();
            a.xor(eax, eax)?;
            a.mov(ecx, LOOPS)?;
            a.mov(rsi, V + 0x900)?;
            a.set_label(&mut top)?;
            // Indirect: a chain exit (a direct call into the page would be a jump inside
            // the caller's region); the RET back is one too.
            a.call(rsi)?;
            a.dec(ecx)?;
            a.cmp(ecx, LOOPS / 2)?;
            a.jne(same)?;
            a.mov(rsi, V + 0x800)?;
            a.set_label(&mut same)?;
            a.test(ecx, ecx)?;
            a.jnz(top)?;
            // (HLT on another page: an interpreter call here would turn off the skips.)
            a.jmp(if last_space { HALT } else { SWITCH })
        })
    };
    let callee = |imm: i32| {
        assemble(V + 0x800, |a| {
            a.add(rax, imm)?;
            a.ret()
        })
    };
    let build = || {
        let mut m = SysMachine::new(64);
        space(&mut m, PML4, CODE_A);
        space(&mut m, PML4_B, CODE_B);
        m.load(CODE_A, &main(false));
        m.load(CODE_A + 0x800, &callee(1));
        m.load(CODE_A + 0x900, &[0xc3]);
        m.load(CODE_B + 0x900, &[0xc3]);
        m.load(CODE_B, &main(true));
        m.load(CODE_B + 0x800, &callee(100));
        let switch = assemble(SWITCH, |a| {
            a.mov(rbx, PML4_B)?;
            a.mov(cr3, rbx)?;
            a.jmp(V)
        });
        m.load(SWITCH, &switch);
        m.load(HALT, &assemble(HALT, |a| a.hlt()));
        m.start_long(PML4, V);
        m.cpu.state.gpr[reg::RSP] = STACK;
        m
    };
    for slice in [1 << 30, 997] {
        let mut b = build();
        let (jit, stop) = common::run_sys(&mut build(), &mut b, slice);
        assert_eq!(stop, ExitReason::Halt);
        assert!(jit.stats.chained_runs > 0, "{}", jit.stats.summary());
        assert_eq!(b.cpu.state.gpr[reg::RAX], LOOPS as u64 / 2 * 100);
    }
}
