//! Flags handed from one compiled function to the next: an exit whose pending flags are one
//! record leaves that record in the frame, the chained target takes it over, and the
//! dispatcher folds it when compiled code returns (`lift/flags.rs`, `handover_record`). Each
//! program puts the flag writer and the flag reader in blocks on different code pages (so
//! they are different functions, joined by chained jumps) and checks the JIT against the
//! interpreter, whole runs and budget slices.

mod common;

use common::{compare, eager_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE, TEST_RAM};
use lockstep_interp::{ExitReason, Fault};

/// `writer` runs in a loop on the first page and jumps to `reader` on the next page, which
/// jumps back; RCX counts down from 300. R8 accumulates what the reader saw.
fn two_pages(
    writer: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>,
    reader: impl Fn(&mut CodeAssembler, CodeLabel) -> Result<(), IcedError>,
) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut far = a.create_label();
        let mut back = a.create_label();
        let mut done = a.create_label();
        a.mov(ecx, 300u32)?;
        a.mov(rbx, 0x7fff_ffff_ffff_fff0u64)?;
        a.mov(rsi, 0x8000_0000_0000_0001u64)?;
        a.xor(r8d, r8d)?;
        a.set_label(&mut top)?;
        writer(a)?;
        a.jmp(far)?;
        a.set_label(&mut back)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.jmp(done)?;
        // Pad so that the reader starts on the next 4 KiB page (never executed).
        a.db(&[0xcc; 4096])?;
        a.set_label(&mut far)?;
        reader(a, far)?;
        a.jmp(back)?;
        a.set_label(&mut done)?;
        a.hlt()
    })
}

fn check(code: &[u8]) -> u64 {
    let (m, jit, exit) = compare(code, &[1_000_000], eager_config(), &|_| {});
    // HLT at CPL 3 is #GP(0): the program ran to its end.
    assert_eq!(exit.reason, ExitReason::Exception(Fault::GP0), "{exit:?}");
    assert!(jit.stats.chained_runs > 100, "{:?}", jit.stats);
    assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    let slices: Vec<u64> = (0..500).map(|i| 1 + (i * 7919) % 37).collect();
    compare(code, &slices, eager_config(), &|_| {});
    m.gpr(reg::R8)
}

#[test]
fn conditions_read_the_handed_over_record() {
    // The writer's last flag writer is an ADD/SUB/CMP whose operands vary with RCX; the
    // reader's first instructions are conditions on those flags.
    for op in 0..3 {
        let code = two_pages(
            |a| {
                a.mov(rdx, rcx)?;
                a.imul_3(rdx, rdx, 0x9e37_79b9u32 as i32)?;
                match op {
                    0 => a.add(rdx, rbx)?,
                    1 => a.sub(rdx, rsi)?,
                    _ => a.cmp(edx, 0x4000_0000)?,
                }
                Ok(())
            },
            |a, _| {
                a.setl(al)?;
                a.setb(dl)?;
                a.seto(r9b)?;
                a.setp(r10b)?;
                a.movzx(eax, al)?;
                a.movzx(edx, dl)?;
                a.movzx(r9d, r9b)?;
                a.movzx(r10d, r10b)?;
                a.lea(r8, qword_ptr(r8 + rax * 2))?;
                a.add(r8, rdx)?;
                a.lea(r8, qword_ptr(r8 + r9 * 4))?;
                a.lea(r8, qword_ptr(r8 + r10 * 8))
            },
        );
        let seen = check(&code);
        assert_ne!(seen, 0, "op {op}: some condition held");
    }
}

#[test]
fn every_condition_of_a_handed_over_cmp_or_test_record() {
    // The reader's first instructions are the twelve conditions of CF, ZF and SF (which the
    // target evaluates from a SUB or logic record's operands at the record's size, see
    // `lift/flags_dyn.rs`), on records of every size; ADD takes the fold helper. Operands
    // vary with RCX, with equal, sign-bit and carry cases among them. R8 collects each
    // iteration's twelve bits, rotated, so any one wrong condition changes it.
    for op in 0..10 {
        let code = two_pages(
            |a| {
                a.mov(rdx, rcx)?;
                a.imul_3(rdx, rdx, 0x9e37_79b9u32 as i32)?;
                a.mov(rax, rcx)?;
                a.and(eax, 3)?;
                // Every fourth iteration the operands are equal.
                a.mov(rdi, rdx)?;
                a.cmp(eax, 0)?;
                a.cmove(rdx, rdi)?;
                a.mov(rdi, rdx)?;
                a.ror(rdi, 29)?;
                a.cmove(rdi, rdx)?;
                match op {
                    0 => a.cmp(rdx, rdi)?,
                    1 => a.cmp(edx, edi)?,
                    2 => a.cmp(dx, di)?,
                    3 => a.cmp(dl, dil)?,
                    4 => a.test(edx, edi)?,
                    5 => a.and(dl, dil)?,
                    6 => a.sub(dx, di)?,
                    7 => a.xor(rdx, rdi)?,
                    8 => a.or(dx, di)?,
                    _ => a.add(edx, edi)?,
                }
                Ok(())
            },
            |a, _| {
                a.setb(al)?;
                a.setae(bl)?;
                a.sete(dl)?;
                a.setne(dil)?;
                a.setbe(r9b)?;
                a.seta(r10b)?;
                a.setl(r11b)?;
                a.setge(r12b)?;
                a.setle(r13b)?;
                a.setg(r14b)?;
                a.sets(r15b)?;
                a.setns(bpl)?;
                a.rol(r8, 12)?;
                for (i, r) in [
                    al, bl, dl, dil, r9b, r10b, r11b, r12b, r13b, r14b, r15b, bpl,
                ]
                .into_iter()
                .enumerate()
                {
                    a.movzx(esi, r)?;
                    a.shl(esi, i as u32)?;
                    a.xor(r8, rsi)?;
                }
                Ok(())
            },
        );
        let seen = check(&code);
        assert_ne!(seen, 0, "op {op}: some condition held");
    }
}

#[test]
fn a_branch_first_reader_takes_the_record() {
    // The reader starts with a Jcc: a one-instruction block reading the record.
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut far = a.create_label();
        let mut less = a.create_label();
        let mut join = a.create_label();
        let mut back = a.create_label();
        a.mov(ecx, 300u32)?;
        a.xor(r8d, r8d)?;
        a.set_label(&mut top)?;
        a.mov(edx, ecx)?;
        a.and(edx, 7)?;
        a.cmp(edx, 3)?;
        a.jmp(far)?;
        a.set_label(&mut back)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()?;
        a.db(&[0xcc; 4096])?;
        a.set_label(&mut far)?;
        a.jl(less)?;
        a.add(r8, 1000)?;
        a.jmp(join)?;
        a.set_label(&mut less)?;
        a.add(r8, 1)?;
        a.set_label(&mut join)?;
        a.jmp(back)
    });
    let seen = check(&code);
    // 300 iterations, edx = rcx & 7 < 3 for rcx mod 8 in {0, 1, 2}.
    let lt = (1..=300u64).filter(|c| c % 8 < 3).count() as u64;
    assert_eq!(seen, lt + (300 - lt) * 1000);
}

#[test]
fn a_fault_before_any_flag_writer_leaves_the_record_folded() {
    // The reader loads through RDI first; on the last iteration RDI points past RAM, so the
    // load faults with the writer's flags still a record: RFLAGS at the fault must be whole.
    let code = two_pages(
        |a| {
            a.mov(rdx, rcx)?;
            a.sub(rdx, rsi)?;
            a.mov(rdi, DATA_BASE)?;
            a.cmp(ecx, 1)?;
            a.mov(rax, TEST_RAM + 0x1000)?;
            a.cmove(rdi, rax)?;
            a.add(rdx, rbx)
        },
        |a, _| {
            a.mov(rax, qword_ptr(rdi))?;
            a.add(r8, rax)
        },
    );
    let (m, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|_| {});
    assert!(
        matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
        "{exit:?}"
    );
    assert!(jit.stats.chained_runs > 100, "{:?}", jit.stats);
    // The flags of the ADD are in RFLAGS (CF of 1 + 0x7fff_ffff_ffff_fff0 - …: compare with
    // the interpreter, which `compare` did; here only that some status flag is set).
    assert_ne!(m.cpu.state.rflags & 0x8d5, 0);
}

#[test]
fn a_region_entry_that_reads_carry_first_folds_the_record() {
    // The reader is a loop (a region, entered by the writer's chained jump) whose entry block
    // starts with ADC: it reads the CF the writer's ADD left as a record.
    let code = two_pages(
        |a| {
            a.mov(r11d, 3u32)?;
            a.mov(rdx, rcx)?;
            a.shl(rdx, 62)?;
            a.add(rdx, rsi)
        },
        |a, start| {
            a.adc(r8, 0x10)?;
            a.dec(r11d)?;
            a.jnz(start)
        },
    );
    // 300 iterations of three ADCs of 0x10, plus one carry for each iteration whose ADD
    // carried (rcx << 62 has bit 63 set for rcx = 2, 3 mod 4).
    let carries = (1..=300u64).filter(|c| c % 4 >= 2).count() as u64;
    assert_eq!(check(&code), 300 * 3 * 0x10 + carries);
}
