//! Page groups (`lift/group.rs`): accesses of one block through the same base register reuse
//! the first access's TLB hit. Checked against the interpreter, instruction for instruction:
//! members that leave the page (above or below) fault like the interpreter, and a group is
//! not trusted after another access's slow path may have evicted its TLB entry (here: an
//! eviction, then a remapped PTE the interpreter's new walk sees).

mod common;

use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit_sys::SysMachine;
use lockstep_interp::{Engine, ExitReason, Fault};

/// Page tables (`common::paging`: PDPT, PD and the 4 KiB page table for the first 2 MiB
/// follow); the page table's address.
const PML4: u64 = 0x1000;
const PT: u64 = PML4 + 0x3000;
const CODE: u64 = 0x10_0000;
const STACK: u64 = 0x30_0000;
/// A data page whose neighbours below and above are not mapped.
const D: u64 = 0x15_0000;
/// A data page, the page its PTE is switched to, and a page in the same TLB slot
/// (`TLB_ENTRIES` pages higher, in a 2 MiB page).
const P: u64 = 0x16_0000;
const ALT: u64 = 0x17_0000;
const Q: u64 = P + ((lockstep_interp::mmu::TLB_ENTRIES as u64) << 12);

fn assemble(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    f(&mut a).unwrap();
    a.assemble(CODE).unwrap()
}

fn machine(code: &[u8], setup: &dyn Fn(&mut SysMachine)) -> SysMachine {
    let mut m = SysMachine::new(64);
    // D's neighbours are not mapped.
    common::paging(&mut m, PML4, &|page| {
        if page == D - 0x1000 || page == D + 0x1000 {
            0
        } else {
            page | 3
        }
    });
    m.load(CODE, code);
    m.start_long(PML4, CODE);
    m.cpu.state.gpr[reg::RSP] = STACK;
    setup(&mut m);
    m
}

/// Run `code` in both engines in slices of `slice` instructions, comparing exits, state and
/// all of RAM after each; returns the first exit that is not a budget or yield exit, and
/// checks that the JIT compiled something.
fn run(code: &[u8], setup: &dyn Fn(&mut SysMachine), slice: u64) -> ExitReason {
    let (a, b) = (&mut machine(code, setup), &mut machine(code, setup));
    let (jit, stop) = common::run_sys(a, b, slice);
    assert!(jit.stats.compiled > 0, "{}", jit.stats.summary());
    stop
}

fn page_fault_at(e: ExitReason) -> u64 {
    match e {
        ExitReason::Exception(Fault::PageFault { addr, .. }) => addr,
        other => panic!("expected #PF: {other:?}"),
    }
}

#[test]
fn members_leaving_the_page_upwards_fault_like_the_interpreter() {
    // RBX walks up through the top of D: a group's first access stays in the page while a
    // member (a load, then a store) crosses into the unmapped page above.
    let loads = assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(rax, qword_ptr(rbx))?;
        a.mov(qword_ptr(rbx), rdx)?;
        a.mov(rcx, qword_ptr(rbx + 16))?;
        a.mov(esi, dword_ptr(rbx + 4))?;
        a.add(rdx, rcx)?;
        a.inc(rbx)?;
        a.jmp(top)
    });
    let stores = assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(qword_ptr(rbx), rdx)?;
        a.mov(rax, qword_ptr(rbx))?;
        a.mov(dword_ptr(rbx + 12), edx)?;
        a.mov(word_ptr(rbx + 2), dx)?;
        a.add(rdx, rax)?;
        a.inc(rbx)?;
        a.jmp(top)
    });
    for code in [loads, stores] {
        for slice in [1000, 7] {
            let e = run(
                &code,
                &|m| {
                    m.cpu.state.gpr[reg::RBX] = D + 0xfc0;
                    m.cpu.state.gpr[reg::RDX] = 0x1122_3344_5566_7788;
                },
                slice,
            );
            assert_eq!(page_fault_at(e), D + 0x1000);
        }
    }
}

#[test]
fn members_leaving_the_page_downwards_fault_like_the_interpreter() {
    // The group starts at +24; members at +16, +8, +0 (negative deltas) and pushes below
    // RSP (a stack group) cross into the unmapped page below D as RBX and RSP walk down.
    let code = assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(qword_ptr(rbx + 24), rdx)?;
        a.mov(qword_ptr(rbx + 16), rdx)?;
        a.mov(rax, qword_ptr(rbx + 8))?;
        a.mov(rcx, qword_ptr(rbx))?;
        a.add(rdx, rcx)?;
        a.lea(rsp, qword_ptr(rbx + 48))?;
        a.push(rax)?;
        a.push(rcx)?;
        a.pop(rsi)?;
        a.dec(rbx)?;
        a.jmp(top)
    });
    for slice in [1000, 7] {
        let e = run(
            &code,
            &|m| {
                m.cpu.state.gpr[reg::RBX] = D + 0x40;
                m.cpu.state.gpr[reg::RDX] = 0x0102_0304_0506_0708;
            },
            slice,
        );
        assert_eq!(page_fault_at(e), D - 1);
    }
}

#[test]
fn far_members_outside_the_page_probe_the_tlb_or_fault_like_the_interpreter() {
    // A group's first access at +0x60 and members 0x828 and 0xfa0 bytes on (far: see
    // `group::PROBE_DELTA`), through a base near the end of a page, so the members land in
    // the next page: mapped (they probe the TLB and stay in compiled code), then, as RBX
    // walks up through D, unmapped (a fault, like the interpreter's).
    let code = assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(rax, qword_ptr(rbx + 0x60))?;
        a.mov(rcx, qword_ptr(rbx + 0x888))?;
        a.mov(qword_ptr(rbx + 0x1000), rdx)?;
        a.add(rdx, rcx)?;
        a.add(rdx, rax)?;
        a.add(rbx, 8)?;
        a.jmp(top)
    });
    for slice in [1000, 7] {
        let e = run(
            &code,
            &|m| {
                m.cpu.state.gpr[reg::RBX] = D - 0x3000 + 0x900;
                m.cpu.state.gpr[reg::RDX] = 0x0102_0304_0506_0708;
            },
            slice,
        );
        // The first to leave mapped memory: the store at +0x1000 into the page below D.
        assert_eq!(page_fault_at(e), D - 0x1000);
    }
    // In mapped memory, the members in the next page probe the TLB in compiled code: only a
    // TLB miss leaves the block (the store at +0x1000 is the first to touch each new page,
    // one per 512 iterations), not every iteration's far member (2,800 of them).
    let mut m = machine(&code, &|m| {
        m.cpu.state.gpr[reg::RBX] = 0x20_0900;
    });
    let mut jit = lockstep_jit::Jit::new(lockstep_jit::JitConfig {
        threshold: 2,
        batch: 1,
        ..Default::default()
    });
    let exit = jit.run(&mut m.cpu, &mut m.ram, &mut m.bus, 20_000);
    assert_eq!(exit.reason, ExitReason::Budget);
    assert!(jit.stats.compiled > 0, "{}", jit.stats.summary());
    assert!(jit.stats.accesses_deferred < 20, "{}", jit.stats.summary());
}

/// The remapping tests' start: P+8 holds 1, ALT+8 holds 1 << 32; RBX = P, RDX = Q, R8 = P's
/// PTE, R9 = that PTE pointing at ALT, R10 = the PTE pointing back at P, EDI = 50 iterations.
fn remap_setup(m: &mut SysMachine) {
    m.ram.write_u64(P + 8, 1).unwrap();
    m.ram.write_u64(ALT + 8, 1 << 32).unwrap();
    let g = &mut m.cpu.state.gpr;
    g[reg::RBX] = P;
    g[reg::RDX] = Q;
    g[8] = PT + (P >> 12) * 8;
    g[9] = ALT | 3;
    g[10] = P | 3;
    g[reg::RDI] = 50;
}

/// Run `code` from [`remap_setup`] in both engines (compared, to HLT), then in the interpreter
/// alone; that machine.
fn remap_run(code: &[u8]) -> SysMachine {
    assert_eq!(run(code, &remap_setup, 1000), ExitReason::Halt);
    let mut m = machine(code, &remap_setup);
    m.run(1_000_000);
    m
}

#[test]
fn a_group_is_not_trusted_after_an_eviction() {
    // In one block: a load from P (hits: the previous block filled it) starts a group; P's
    // PTE is switched to ALT without a flush; a load from Q, same TLB slot, evicts P (a
    // natively lowered load, or x87 and SSE loads that run in the interpreter); the next load
    // from P misses in the interpreter, which walks and reads ALT. The JIT must do the same
    // (a group whose entry may be gone is not used). Also with the first load at the second
    // one's address (same size: a member the first access's probe covers, which is used
    // without a check only while nothing ran through the interpreter since).
    type Evict = dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;
    let evictors: [Box<Evict>; 3] = [
        Box::new(|a| a.mov(rcx, qword_ptr(rdx))),
        Box::new(|a| {
            a.fld(qword_ptr(rdx))?;
            a.fstp(st0)
        }),
        Box::new(|a| a.movhps(xmm0, qword_ptr(rdx))),
    ];
    for (evict, first) in evictors.iter().flat_map(|e| [(e, 0i32), (e, 8)]) {
        let code = assemble(|a| {
            let mut top = a.create_label();
            let mut next = a.create_label();
            a.set_label(&mut top)?;
            a.mov(r12, qword_ptr(rbx + 32))?;
            a.jmp(next)?;
            a.set_label(&mut next)?;
            a.mov(rax, qword_ptr(rbx + first))?;
            a.mov(qword_ptr(r8), r9)?;
            evict(a)?;
            a.mov(rsi, qword_ptr(rbx + 8))?;
            a.mov(qword_ptr(r8), r10)?;
            a.invlpg(byte_ptr(rbx))?;
            a.add(r11, rsi)?;
            a.dec(edi)?;
            a.jnz(top)?;
            a.hlt()
        });
        let m = remap_run(&code);
        // Every iteration read ALT's value.
        assert_eq!(m.cpu.state.gpr[11], 50 << 32);
    }
}

/// A loop (from [`remap_setup`]'s registers) whose runs store through P (filling its
/// entries), jump to a new block, point P's PTE at ALT without a flush, replace P's read
/// entry by an x87 load from Q (same slot; run through the interpreter, then compiled code
/// goes on), run `body`, and put the PTE back with INVLPG.
fn evicted_remap_loop(body: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    assemble(|a| {
        let mut top = a.create_label();
        let mut next = a.create_label();
        a.set_label(&mut top)?;
        a.mov(qword_ptr(rbx + 16), rax)?;
        a.jmp(next)?;
        a.set_label(&mut next)?;
        a.mov(qword_ptr(r8), r9)?;
        a.fld(qword_ptr(rdx))?;
        a.fstp(st0)?;
        body(a)?;
        a.mov(qword_ptr(r8), r10)?;
        a.invlpg(byte_ptr(rbx))?;
        a.dec(edi)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn a_read_modify_write_reads_through_the_translation_a_read_would_use() {
    // One translation per read-modify-write: the compiled code probes only the write TLB and
    // reads and writes through that entry, and the interpreter reads through it too when it
    // hits. A write entry is always a copy of the read entry in its slot, so that is the
    // translation a read would use. Here a store filled P's entries (P to P); P's PTE then
    // points at ALT without a flush, and a load from Q (same slot, by an x87 load, which
    // compiled code runs through the interpreter and then goes on) replaces P's read entry
    // and so drops its write entry: `add [rbx+8], 1` must walk the tables to ALT in both
    // engines, as a read would.
    let code = evicted_remap_loop(|a| a.add(qword_ptr(rbx + 8), 1));
    let m = remap_run(&code);
    // Every iteration read and wrote ALT; P was never touched.
    assert_eq!(m.ram.read_u64(P + 8).unwrap(), 1);
    assert_eq!(m.ram.read_u64(ALT + 8).unwrap(), (1 << 32) + 50);
}

#[test]
fn a_load_stored_back_reads_what_the_interpreter_reads() {
    // `mov rcx, [rbx+8]; add rcx, 1; mov [rbx+8], rcx`: the compiled load goes through the
    // write TLB (one probe for the load and the store), the interpreter's through the read
    // TLB. As above, P's PTE points at ALT without a flush and Q's load replaced P's read
    // entry: the write entry went with it, so both engines walk to ALT for the load, and
    // the store follows it there. (Were P's stale write entry kept, the compiled load would
    // read P while the interpreter reads ALT.) Also with the store reaching the same address
    // through `add rbx, 8` (a member at the load's address).
    for step in [false, true] {
        let code = evicted_remap_loop(|a| {
            a.mov(rcx, qword_ptr(rbx + 8))?;
            a.add(rcx, 1)?;
            if step {
                a.add(rbx, 8)?;
                a.mov(qword_ptr(rbx), rcx)?;
                a.sub(rbx, 8)
            } else {
                a.mov(qword_ptr(rbx + 8), rcx)
            }
        });
        let m = remap_run(&code);
        assert_eq!(m.ram.read_u64(P + 8).unwrap(), 1);
        assert_eq!(m.ram.read_u64(ALT + 8).unwrap(), (1 << 32) + 50);
    }
}

/// Run `code` in both engines as [`run`] does, with every block compiled by Cranelift (loops
/// become regions at once); the JIT's statistics and the stop.
fn run_regions(
    code: &[u8],
    setup: &dyn Fn(&mut SysMachine),
    slice: u64,
) -> (lockstep_jit::JitStats, ExitReason) {
    let (a, b) = (&mut machine(code, setup), &mut machine(code, setup));
    let config = lockstep_jit::JitConfig {
        threshold: 2,
        batch: 1,
        baseline: false,
        ..Default::default()
    };
    let (jit, stop) = common::run_sys_with(a, b, slice, config);
    (jit.stats.clone(), stop)
}

#[test]
fn a_loop_carries_its_group_across_pages_and_into_the_next_entry() {
    // `add dword [rsi], 1; add rsi, 4` over 3 pages and a bit, 6 times, with RSI reset to
    // another place each time: the one-block loop's group carries its record from one run to
    // the next (the next element is 4 bytes on), probes again at each page boundary, and
    // must not use the record of the previous pass when the outer block re-enters the loop
    // with RSI somewhere else (there, in the same page 8 bytes before the last record).
    // Then the same loop over the unmapped page below D: the first access there faults
    // exactly where the interpreter's does.
    let code = assemble(|a| {
        let mut outer = a.create_label();
        let mut inner = a.create_label();
        a.set_label(&mut outer)?;
        a.mov(rsi, rbx)?;
        a.mov(ecx, 3100)?;
        a.set_label(&mut inner)?;
        a.mov(eax, dword_ptr(rsi))?;
        a.add(eax, 1)?;
        a.mov(dword_ptr(rsi), eax)?;
        a.add(rsi, 4)?;
        a.dec(ecx)?;
        a.jnz(inner)?;
        a.add(r11, rsi)?;
        a.sub(rbx, 8)?;
        a.dec(edi)?;
        a.jnz(outer)?;
        a.hlt()
    });
    let (stats, stop) = run_regions(
        &code,
        &|m| {
            m.cpu.state.gpr[reg::RBX] = P + 0x40;
            m.cpu.state.gpr[reg::RDI] = 6;
        },
        1000,
    );
    assert_eq!(stop, ExitReason::Halt);
    assert!(stats.carried_accesses > 0, "{}", stats.summary());
    let m = {
        let mut m = machine(&code, &|m| {
            m.cpu.state.gpr[reg::RBX] = P + 0x40;
            m.cpu.state.gpr[reg::RDI] = 6;
        });
        m.run(10_000_000);
        m
    };
    // Element k of the last pass (RBX = P + 0x40 - 40) was incremented by every pass that
    // covered it.
    let at = |x: u64| m.ram.read_u64(x).unwrap() as u32;
    assert_eq!(at(P + 0x40 - 40), 1);
    assert_eq!(at(P + 0x40), 6);
    assert_eq!(at(P + 0x40 + 3 * 4096), 6);
    // Into an unmapped page: the fault of the interpreter, in both engines.
    let e = run_regions(
        &code,
        &|m| {
            m.cpu.state.gpr[reg::RBX] = D - 0x2000 - 0x40;
            m.cpu.state.gpr[reg::RDI] = 1;
        },
        1000,
    );
    assert_eq!(page_fault_at(e.1), D - 0x1000);
}

#[test]
fn indexed_accesses_carry_their_groups_across_pages() {
    // `_IO_default_xsputn`'s byte copy: `movzx edx, byte [r12 + rax]; mov [rdi + rax], dl;
    // add rax, 1; cmp rax, rcx; jne` over three pages and a bit, four times, the source and
    // the destination bases (which the loop does not write) moved each time: both indexed
    // groups carry their records from one run to the next (the next byte one on), probe again
    // at each page boundary, and are not trusted when the outer block re-enters the loop with
    // other bases. Then a copy whose source runs into the unmapped page above D: the fault of
    // the interpreter, at the same byte.
    let code = assemble(|a| {
        let mut outer = a.create_label();
        let mut inner = a.create_label();
        a.set_label(&mut outer)?;
        a.xor(eax, eax)?;
        a.set_label(&mut inner)?;
        a.movzx(edx, byte_ptr(r12 + rax))?;
        a.add(edx, r8d)?;
        a.mov(byte_ptr(rdi + rax), dl)?;
        a.add(rax, 1)?;
        a.cmp(rax, rcx)?;
        a.jne(inner)?;
        a.add(r12, 0x81)?;
        a.sub(rdi, 0x13)?;
        a.add(r8d, 1)?;
        a.dec(esi)?;
        a.jnz(outer)?;
        a.hlt()
    });
    let setup = |src: u64, dst: u64, len: u64, passes: u64| {
        move |m: &mut SysMachine| {
            let bytes: Vec<u8> = (0..len + 0x200).map(|k| (k * 7 + 3) as u8).collect();
            m.ram.write_phys(src, &bytes).unwrap();
            let st = &mut m.cpu.state;
            st.gpr[reg::R12] = src;
            st.gpr[reg::RDI] = dst;
            st.gpr[reg::RCX] = len;
            st.gpr[reg::RSI] = passes;
            st.gpr[reg::R8] = 0;
        }
    };
    let (stats, stop) = run_regions(
        &code,
        &setup(P + 0x30, P + 0x6000 + 0x50, 3 * 4096 + 77, 4),
        997,
    );
    assert_eq!(stop, ExitReason::Halt);
    assert!(stats.carried_accesses > 0, "{}", stats.summary());
    let m = {
        let mut m = machine(&code, &setup(P + 0x30, P + 0x6000 + 0x50, 3 * 4096 + 77, 4));
        m.run(10_000_000);
        m
    };
    // The last pass (source 3 * 0x81 on, destination 3 * 0x13 back, 3 added) wrote each byte.
    let (src, dst) = (P + 0x30 + 3 * 0x81, P + 0x6000 + 0x50 - 3 * 0x13);
    let byte = |a: u64| {
        let mut b = [0u8];
        m.ram.read_phys(a, &mut b).unwrap();
        b[0]
    };
    for k in [0, 1, 4095, 4096, 2 * 4096 + 5, 3 * 4096 + 76] {
        assert_eq!(byte(dst + k), byte(src + k).wrapping_add(3), "byte {k}");
    }
    // From D's last bytes into the unmapped page above it.
    let e = run_regions(&code, &setup(D + 0xff0, P + 0x50, 0x40, 1), 997);
    assert_eq!(page_fault_at(e.1), D + 0x1000);
    // A loop that swaps its source base with R9's every run carries no group through it (the
    // next run's source is the other buffer, its record the wrong page).
    let swapping = assemble(|a| {
        let mut inner = a.create_label();
        a.xor(eax, eax)?;
        a.set_label(&mut inner)?;
        a.movzx(edx, byte_ptr(r12 + rax))?;
        a.mov(byte_ptr(rdi + rax), dl)?;
        a.xchg(r12, r9)?;
        a.add(rax, 1)?;
        a.cmp(rax, rcx)?;
        a.jne(inner)?;
        a.hlt()
    });
    let two = |m: &mut SysMachine| {
        setup(P + 0x30, P + 0x6000, 5000, 1)(m);
        m.ram.write_phys(ALT + 0x100, &[0x5a; 6000]).unwrap();
        m.cpu.state.gpr[reg::R9] = ALT + 0x100;
    };
    let (_, stop) = run_regions(&swapping, &two, 997);
    assert_eq!(stop, ExitReason::Halt);
}

#[test]
fn a_carried_group_is_not_trusted_after_a_remap() {
    // A one-block loop reading [rbx+8] (a carried group: RBX never changes) that switches
    // P's PTE between ALT and P every run, without a flush, evicts P's read entry with an
    // SSE load from Q (same slot) and fills it again with an SSE load from P (now the other
    // page), both through the interpreter on their slow paths, which rejoin: they mark the
    // record not valid, so every run reads the page the interpreter's TLB holds.
    let code = assemble(|a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.mov(rax, qword_ptr(rbx + 8))?;
        a.add(r11, rax)?;
        a.mov(qword_ptr(r8), r9)?;
        a.movhps(xmm0, qword_ptr(rdx))?;
        a.mov(rcx, rbx)?;
        a.movhps(xmm0, qword_ptr(rcx))?;
        a.xchg(r9, r10)?;
        a.dec(edi)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (stats, stop) = run_regions(&code, &remap_setup, 1000);
    assert_eq!(stop, ExitReason::Halt);
    assert!(stats.carried_accesses > 0, "{}", stats.summary());
    let m = remap_run(&code);
    // 25 runs read ALT (1 << 32), 25 read P (1).
    assert_eq!(m.cpu.state.gpr[11], 25 * (1 << 32) + 25);
}

/// A region of three blocks: `top` reads `[rbx]`, then goes on to `b` directly or through
/// `c`; `c` reads `[rbx + 16]`; `b` reads `[rbx + 8]`, stores `[rbx]`, steps RBX by 8 and
/// jumps back to `top` until RBX reaches R12 (then HLT). `top` starts with the groups `b`
/// hands it (`group::Inherited`), keyed by RBX after the step: its load is a member of the
/// read group 8 bytes below the record `b` made (`[rbx + 8]` before the step, `[rbx]`
/// after), and of the write group just above it.
fn inherited_groups_code() -> Vec<u8> {
    assemble(|a| {
        let mut top = a.create_label();
        let mut c = a.create_label();
        let mut b = a.create_label();
        handing_top(a, &mut top)?;
        a.jnz(c)?;
        a.set_label(&mut b)?;
        handing_body(a, top)?;
        a.set_label(&mut c)?;
        a.mov(rsi, qword_ptr(rbx + 16))?;
        a.xor(rdx, rsi)?;
        a.inc(rdx)?;
        a.jmp(b)
    })
}

/// `top` reads `[rbx]` and goes on to `b` directly or through `c`, which steps RBX by 8;
/// `b` reads `[rbx + 8]`, stores `[rbx]`, and jumps back to `top` until RBX reaches R12.
/// The two edges into `b` hand over the group of `top`'s load under different keys (RBX
/// moved on one of them): `b` must take it from neither.
fn diverging_groups_code() -> Vec<u8> {
    assemble(|a| {
        let mut top = a.create_label();
        let mut b = a.create_label();
        handing_top(a, &mut top)?;
        a.jz(b)?;
        a.mov(rsi, qword_ptr(rbx + 16))?;
        a.xor(rdx, rsi)?;
        a.add(rbx, 8)?;
        a.jmp(b)?;
        a.set_label(&mut b)?;
        handing_body(a, top)
    })
}

/// The loops' top, at `top`, up to its branch: reads `[rbx]` into RDX and tests its low bit.
fn handing_top(a: &mut CodeAssembler, top: &mut CodeLabel) -> Result<(), IcedError> {
    a.set_label(top)?;
    a.mov(rax, qword_ptr(rbx))?;
    a.add(rdx, rax)?;
    a.test(dl, 1)
}

/// The loops' body: reads `[rbx + 8]`, stores `[rbx]`, steps RBX by 8 and jumps back to
/// `top` until RBX reaches R12, then HLT.
fn handing_body(a: &mut CodeAssembler, top: CodeLabel) -> Result<(), IcedError> {
    a.mov(rcx, qword_ptr(rbx + 8))?;
    a.add(rdx, rcx)?;
    a.mov(qword_ptr(rbx), rdx)?;
    a.add(rbx, 8)?;
    a.cmp(rbx, r12)?;
    a.jb(top)?;
    a.hlt()
}

#[test]
fn groups_handed_across_region_edges_read_what_the_interpreter_reads() {
    for code in [inherited_groups_code(), diverging_groups_code()] {
        groups_handed_over(&code);
    }
}

fn groups_handed_over(code: &[u8]) {
    let fill = |m: &mut SysMachine, base: u64| {
        for i in 0..0x400u64 {
            m.ram
                .write_u64(base + i * 8, i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
                .unwrap();
        }
    };
    // Through mapped pages (the members land in the next page every 512 runs: they probe
    // the TLB there), and up to the unmapped page above D, where the interpreter faults.
    for slice in [1000, 13, 5] {
        let (stats, stop) = run_regions(
            code,
            &|m| {
                fill(m, 0x20_0000);
                m.cpu.state.gpr[reg::RBX] = 0x20_0e00;
                m.cpu.state.gpr[12] = 0x20_2100;
            },
            slice,
        );
        assert_eq!(stop, ExitReason::Halt);
        assert!(stats.inherited_groups > 0, "{}", stats.summary());
        let (_, stop) = run_regions(
            code,
            &|m| {
                fill(m, D);
                m.cpu.state.gpr[reg::RBX] = D + 0xe00;
                m.cpu.state.gpr[12] = u64::MAX;
            },
            slice,
        );
        assert_eq!(page_fault_at(stop), D + 0x1000);
    }
}

#[test]
fn absolute_addresses_two_to_the_63_apart_are_not_one_group() {
    // `mov al, [abs]` twice: a mapped address, then the same address plus 2^63 (`moffs64`,
    // not canonical: #GP). Their signed distance is i64::MIN, which has no absolute value;
    // the group search took its wrapped `abs` for a near member (a panic in checked builds;
    // in release builds a member at the group's host address minus 2^63). Found by
    // `interp_vs_jit`. The first block warms the TLB, so that the second one's first access
    // hits and the member is reached in compiled code.
    let a_addr = D + 0x10;
    let b_addr = a_addr ^ (1 << 63);
    let code = assemble(|a| {
        let mut next = a.create_label();
        a.mov(al, byte_ptr(a_addr))?;
        a.jmp(next)?;
        a.set_label(&mut next)?;
        a.mov(al, byte_ptr(a_addr))?;
        a.mov(al, byte_ptr(b_addr))?;
        a.hlt()
    });
    // The member: `mov al, moffs8` (A0) with the 8-byte address.
    let member = code
        .windows(9)
        .position(|w| w[0] == 0xa0 && w[1..] == b_addr.to_le_bytes())
        .expect("the moffs64 form") as u64;
    let config = lockstep_jit::JitConfig {
        threshold: 1,
        batch: 1,
        baseline: false,
        ..Default::default()
    };
    for slice in [1000, 2] {
        let (a, b) = (&mut machine(&code, &|_| {}), &mut machine(&code, &|_| {}));
        let (jit, stop) = common::run_sys_with(a, b, slice, config.clone());
        assert!(jit.stats.compiled > 0, "{}", jit.stats.summary());
        assert_eq!(stop, ExitReason::Exception(Fault::GP0));
        assert_eq!(b.cpu.state.rip, CODE + member, "at the member");
    }
}
