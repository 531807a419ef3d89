//! Self-modifying code under the JIT, and `Verify` catching injected divergences (a register,
//! and a byte of a page that compiled code stores to through its inline fast path).

mod common;

use common::{compare, eager_config, machine};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, CODE_BASE};
use lockstep_interp::{Engine, ExitReason};
use lockstep_jit::{JitConfig, Verify};

/// Each iteration rewrites the imm32 of its own `add eax, imm32` (in the same block, ahead of
/// the store) with the loop counter, so every iteration runs freshly written code.
fn self_modifying_loop() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut patched = a.create_label();
        a.mov(ecx, 200u32)?;
        a.xor(eax, eax)?;
        a.mov(rdx, CODE_BASE)?;
        a.set_label(&mut top)?;
        // rbx = address of the add's immediate (patched + 1), computed with LEA of a label.
        a.lea(rbx, ptr(patched))?;
        a.mov(dword_ptr(rbx + 1), ecx)?;
        a.set_label(&mut patched)?;
        a.add(eax, 0x7777_7777u32 as i32)?; // 05 imm32: opcode + imm32
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn code_written_every_iteration_runs_fresh() {
    let code = self_modifying_loop();
    for threshold in [1, 2, 7] {
        let cfg = JitConfig {
            threshold,
            batch: 1,
            ..JitConfig::default()
        };
        let (m, jit, exit) = compare(&code, &[3, 50, 1, 100_000], cfg, &|_| {});
        // HLT at CPL 3 raises #GP(0) once the loop is done.
        assert!(matches!(exit.reason, ExitReason::Exception(_)), "{exit:?}");
        // Sum of 200..=1: each add used the value the store just wrote.
        assert_eq!(m.gpr(reg::RAX), 200 * 201 / 2, "threshold {threshold}");
        assert_eq!(jit.stats.compile_errors, 0);
    }
}

#[test]
fn self_modifying_code_verifies_clean() {
    let code = self_modifying_loop();
    let mut m = machine(&code, &|_| {});
    let mut v = Verify::new(eager_config());
    let e = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 100_000)
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(matches!(e.reason, ExitReason::Exception(_)), "{e:?}");
    assert_eq!(m.gpr(reg::RAX), 200 * 201 / 2);
    assert!(v.blocks_checked > 200, "{}", v.blocks_checked);
}

fn counting_loop() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(ecx, 100u32)?;
        a.set_label(&mut top)?;
        a.add(rax, rcx)?;
        a.mov(qword_ptr(0x400000u64), rax)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn verify_passes_a_correct_run() {
    let mut m = machine(&counting_loop(), &|_| {});
    let mut v = Verify::new(eager_config());
    let e = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 10_000)
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(matches!(e.reason, ExitReason::Exception(_)));
    assert_eq!(m.gpr(reg::RAX), 5050);
    // The loop is a region: one compared dispatch runs up to 2000 instructions of it.
    assert!(v.compiled_checked >= 2, "{}", v.compiled_checked);
    assert!(v.blocks_checked >= 2, "{}", v.blocks_checked);
}

#[test]
fn verify_reports_an_injected_divergence() {
    let mut m = machine(&counting_loop(), &|_| {});
    let mut v = Verify::new(JitConfig {
        test_corrupt_rax: true,
        ..eager_config()
    });
    let d = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 10_000)
        .expect_err("the corrupted RAX must be found");
    let r = &d.report;
    assert!(r.contains("rax: jit"), "{r}");
    assert!(r.contains("compiled"), "{r}");
    assert!(r.contains("add rax,rcx"), "disassembly missing:\n{r}");
    assert!(
        r.contains("Cranelift IR:") && r.contains("function"),
        "IR missing:\n{r}"
    );
    // Through the Engine trait (no exit code set): the run stops with #UD and keeps the report.
    let mut m = machine(&counting_loop(), &|_| {});
    let mut v = Verify::new(JitConfig {
        test_corrupt_rax: true,
        ..eager_config()
    });
    let e = v.run(&mut m.cpu, &mut m.ram, &mut m.bus, 10_000);
    assert!(matches!(e.reason, ExitReason::Exception(_)));
    assert!(v.divergence.is_some());
}

/// A wrong byte in a page that compiled code stores to inline (its write translation cached
/// in an earlier block, so those stores are not logged one by one) is found: `Verify` logs
/// such pages whole.
#[test]
fn verify_reports_a_wrong_byte_in_a_page_stored_to_inline() {
    let target = 0x400000u64 + 0x123;
    let mut m = machine(&counting_loop(), &|_| {});
    let mut v = Verify::new(JitConfig {
        test_corrupt_byte: Some(target),
        ..eager_config()
    });
    let d = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, 10_000)
        .expect_err("the corrupted byte must be found");
    let r = &d.report;
    assert!(r.contains(&format!("memory [phys {target:#x}]")), "{r}");
    assert!(r.contains("compiled"), "{r}");
}
