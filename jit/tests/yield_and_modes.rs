//! System-level code through the JIT: instructions that talk to devices (port I/O, MMIO loads
//! and stores, natively lowered or trampolined) stop the engine right after them with
//! `ExitReason::Yield`, exactly where the interpreter stops; 16- and 32-bit code (interpreted
//! for good by the JIT) gives the interpreter's results.

use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit_sys::SysMachine;
use lockstep_interp::{Engine, Exit, ExitReason, Interpreter};
use lockstep_jit::{Jit, JitConfig};

const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
const PD: u64 = 0x3000;
const CODE: u64 = 0x10_0000;
const DATA: u64 = 0x20_0000;
/// Above the 64 MiB of RAM: MMIO.
const MMIO: u64 = 0x3000_0000;

fn eager() -> JitConfig {
    JitConfig {
        threshold: 1,
        batch: 1,
        ..JitConfig::default()
    }
}

/// A long-mode machine (CPL 0, first GiB identity-mapped with 2 MiB pages) running `code`.
fn long_machine(code: &[u8]) -> SysMachine {
    let mut m = SysMachine::new(64);
    m.ram.write_u64(PML4, PDPT | 3).unwrap();
    m.ram.write_u64(PDPT, PD | 3).unwrap();
    for i in 0..512u64 {
        m.ram.write_u64(PD + i * 8, (i << 21) | 0x83).unwrap();
    }
    m.load(CODE, code);
    m.start_long(PML4, CODE);
    m.cpu.state.gpr[reg::RSP] = DATA + 0x10000;
    m
}

fn assemble(
    bits: u32,
    base: u64,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Vec<u8> {
    let mut a = CodeAssembler::new(bits).unwrap();
    f(&mut a).unwrap();
    a.assemble(base).unwrap()
}

/// Run both engines on copies of `m` with the same budget slices until `HLT`/a fault or the
/// slices end; every exit, the state, the retired count, RAM and the bus logs must match.
/// Returns the exits and the JIT.
fn compare(m: impl Fn() -> SysMachine, slices: &[u64], cfg: JitConfig) -> (Vec<Exit>, Jit) {
    let mut a = m();
    let mut b = m();
    let mut jit = Jit::new(cfg);
    let mut exits = Vec::new();
    for (n, &s) in slices.iter().enumerate() {
        let ea = Interpreter.run(&mut a.cpu, &mut a.ram, &mut a.bus, s);
        let eb = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, s);
        assert_eq!(ea, eb, "exit of slice {n} (budget {s})");
        assert_eq!(a.cpu.state, b.cpu.state, "state after slice {n}");
        assert_eq!(a.cpu.retired, b.cpu.retired, "retired after slice {n}");
        assert_eq!(
            a.cpu.yield_requested, b.cpu.yield_requested,
            "yield flag after slice {n}"
        );
        assert_eq!(a.bus.serial, b.bus.serial, "serial after slice {n}");
        assert_eq!(a.bus.outs, b.bus.outs, "port log after slice {n}");
        assert_eq!(
            a.bus.mmio_writes, b.bus.mmio_writes,
            "MMIO log after slice {n}"
        );
        assert!(a.ram.bytes() == b.ram.bytes(), "RAM after slice {n}");
        exits.push(ea);
        if matches!(ea.reason, ExitReason::Halt | ExitReason::Exception(_)) {
            break;
        }
    }
    (exits, jit)
}

/// A loop whose body mixes natively lowered MMIO loads/stores (MOV, ALU with a memory source)
/// and a trampolined read-modify-write of MMIO with ordinary work. (Port I/O is not in the
/// interpreter yet; it sets the same flag through the same trampoline path.)
fn io_loop() -> Vec<u8> {
    assemble(64, CODE, |a| {
        let mut top = a.create_label();
        a.mov(rcx, 40u64)?;
        a.mov(rsi, MMIO)?;
        a.mov(rdi, DATA)?;
        a.set_label(&mut top)?;
        a.add(rax, rcx)?;
        a.mov(qword_ptr(rdi), rax)?;
        a.mov(rbx, qword_ptr(rsi))?; // MMIO load (native, slow path) -> Yield
        a.add(rdx, 3i32)?;
        a.mov(dword_ptr(rsi + 8), eax)?; // MMIO store -> Yield
        a.xor(rbx, rax)?;
        a.add(rbx, qword_ptr(rsi + 16))?; // ALU with an MMIO source -> Yield
        a.add(qword_ptr(rdi), rbx)?; // memory-destination ALU (trampoline), RAM
        a.or(qword_ptr(rsi + 24), rcx)?; // trampolined read-modify-write of MMIO -> Yield
        a.mov(edx, ecx)?;
        a.add(rdi, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn mmio_and_port_io_yield_where_the_interpreter_does() {
    let code = io_loop();
    // One big budget: the engine must come back after every device access.
    let (exits, jit) = compare(|| long_machine(&code), &[100_000; 400], eager());
    let yields = exits
        .iter()
        .filter(|e| e.reason == ExitReason::Yield)
        .count();
    assert_eq!(yields, 40 * 4, "{exits:?}");
    assert_eq!(exits.last().unwrap().reason, ExitReason::Halt);
    assert!(
        jit.stats.compiled_runs + jit.stats.chained_runs > 100,
        "{:?}",
        jit.stats
    );
    assert!(jit.stats.native_insns > 0);
    // The native MMIO loads and stores left their blocks for the interpreter, which did the
    // device accesses.
    assert!(jit.stats.accesses_deferred >= 3 * 40, "{:?}", jit.stats);
}

/// `Verify` over the same loop: the accesses the compiled blocks leave to the interpreter are
/// done in the same dispatch, so the comparison never sees the translation (accessed bits)
/// without the access.
#[test]
fn device_accesses_verify_clean() {
    let code = io_loop();
    let mut m = long_machine(&code);
    let mut v = lockstep_jit::Verify::new(eager());
    let mut halted = false;
    for _ in 0..400 {
        let e = v
            .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 100_000)
            .unwrap_or_else(|d| panic!("{d}"));
        if e.reason == ExitReason::Halt {
            halted = true;
            break;
        }
    }
    assert!(halted);
    assert!(v.compiled_checked > 40, "{}", v.compiled_checked);
    assert!(v.jit.stats.accesses_deferred >= 3 * 40, "{:?}", v.jit.stats);
}

#[test]
fn yields_with_small_budget_slices_and_tiering() {
    let code = io_loop();
    let slices: Vec<u64> = (0..3000).map(|i| 1 + (i * 7919) % 13).collect();
    for threshold in [0, 1, 3] {
        let cfg = JitConfig {
            threshold,
            batch: 2,
            ..JitConfig::default()
        };
        let (exits, _) = compare(|| long_machine(&code), &slices, cfg);
        assert_eq!(exits.last().unwrap().reason, ExitReason::Halt);
    }
}

#[test]
fn trampoline_only_blocks_yield_too() {
    let code = io_loop();
    let cfg = JitConfig {
        native: false,
        ..eager()
    };
    let (exits, jit) = compare(|| long_machine(&code), &[100_000; 400], cfg);
    assert_eq!(exits.last().unwrap().reason, ExitReason::Halt);
    assert_eq!(jit.stats.native_insns, 0);
}

/// 32-bit flat protected mode: the JIT interprets these blocks (never compiles them); MMIO
/// still yields after the instruction.
#[test]
fn protected_mode_32bit_code_is_interpreted_exactly() {
    let code = assemble(32, CODE, |a| {
        let mut top = a.create_label();
        a.mov(ecx, 200u32)?;
        a.mov(esi, DATA as u32)?;
        a.set_label(&mut top)?;
        a.add(eax, ecx)?;
        a.mov(dword_ptr(esi), eax)?;
        a.add(esi, 4)?;
        a.mov(dword_ptr(MMIO as u32), eax)?; // MMIO store -> Yield
        a.add(ebx, dword_ptr(MMIO as u32 + 4))?; // MMIO load -> Yield
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let mk = || {
        let mut m = SysMachine::new(64);
        m.load(CODE, &code);
        m.start_protected_flat(CODE as u32);
        m
    };
    let slices: Vec<u64> = (0..2000).map(|i| 1 + (i * 31) % 17).collect();
    let (exits, jit) = compare(mk, &slices, eager());
    assert_eq!(exits.last().unwrap().reason, ExitReason::Halt);
    assert_eq!(jit.stats.compiled, 0, "{:?}", jit.stats);
    assert!(jit.stats.interp_only_blocks > 0);
}

/// Real mode (16-bit) through the JIT.
#[test]
fn real_mode_code_is_interpreted_exactly() {
    let code = assemble(16, 0x7c00, |a| {
        let mut top = a.create_label();
        a.mov(cx, 100u32)?;
        a.set_label(&mut top)?;
        a.add(ax, cx)?;
        a.mov(word_ptr(0x600), ax)?;
        a.add(bx, word_ptr(0x600))?;
        a.loop_(top)?;
        a.hlt()
    });
    let mk = || {
        let mut m = SysMachine::new(1);
        m.load(0x7c00, &code);
        m.start_real(0, 0x7c00);
        m
    };
    let (exits, jit) = compare(mk, &[1000; 300], eager());
    assert_eq!(exits.last().unwrap().reason, ExitReason::Halt);
    assert_eq!(jit.stats.compiled, 0);
}
