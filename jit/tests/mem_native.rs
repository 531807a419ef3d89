//! The inline TLB fast path of natively lowered general-purpose loads, stores and
//! read-modify-writes (`lift/mem.rs`) against the interpreter: every operand size walking
//! byte by byte across the end of RAM, so each access runs in-page, page-crossing (slow
//! path, which must fault on the unmapped second page) and fully outside.

mod common;

use common::{compare, eager_config};
use iced_x86::code_asm::*;
use lockstep_interp::testkit::TestMachine;
use lockstep_interp::{ExitReason, Fault};

type Emit = dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>;

#[test]
fn accesses_walking_off_the_end_of_ram_fault_like_the_interpreter() {
    let top_of_ram: u64 = 0x4000_0000;
    let cases: Vec<Box<Emit>> = vec![
        Box::new(|a| a.mov(rax, qword_ptr(rbx))),
        Box::new(|a| a.mov(eax, dword_ptr(rbx))),
        Box::new(|a| a.mov(ax, word_ptr(rbx))),
        Box::new(|a| a.movzx(eax, word_ptr(rbx))),
        Box::new(|a| a.mov(qword_ptr(rbx), rdx)),
        Box::new(|a| a.mov(dword_ptr(rbx), edx)),
        Box::new(|a| a.mov(word_ptr(rbx), dx)),
        Box::new(|a| a.add(qword_ptr(rbx), rdx)),
        Box::new(|a| a.xor(dword_ptr(rbx), edx)),
        Box::new(|a| a.add(rax, qword_ptr(rbx))),
    ];
    for (i, case) in cases.iter().enumerate() {
        // RBX walks up by 1 from 12 bytes below the end of RAM: each size runs in-page, then
        // crosses the end (#PF at the instruction, nothing written).
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            a.mov(rcx, 20u64)?;
            a.mov(rbx, top_of_ram - 12)?;
            a.mov(rdx, 0x1122_3344_5566_7788u64)?;
            a.set_label(&mut top)?;
            a.inc(rbx)?;
            case(a)?;
            a.add(rdx, rax)?;
            a.dec(rcx)?;
            a.jnz(top)?;
            a.hlt()
        });
        let (m, _, exit) = compare(&code, &[100_000], eager_config(), &|_| {});
        match exit.reason {
            ExitReason::Exception(Fault::PageFault { addr, .. }) => {
                // The first access that does not fit: it starts in RAM and crosses out, and the
                // fault is on the first byte past RAM.
                assert_eq!(addr, top_of_ram, "case {i}: {exit:?}");
                assert!(m.cpu.state.gpr[3] < top_of_ram, "case {i}");
            }
            _ => panic!("case {i}: expected #PF: {exit:?}"),
        }
    }
}

/// Stores of a value a zero extension made (MOVZX, a 32-bit MOV) store the extension's
/// zeros, not the source's upper bytes: a store takes its bytes from the value before the
/// extension only when the extension keeps at least the bytes stored (`lift/mem.rs`
/// `low_bytes_source`; an 8-byte store of a 32-bit MOV's result fails without that).
#[test]
fn a_store_of_a_zero_extended_value_stores_its_zeros() {
    use lockstep_interp::testkit::DATA_BASE;
    let code = TestMachine::assemble(|a| {
        a.mov(rsi, DATA_BASE)?;
        a.mov(rbx, 0x1122_3344_5566_7788u64)?;
        a.mov(ecx, 50u32)?;
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.movzx(eax, bx)?;
        a.mov(dword_ptr(rsi), eax)?;
        a.movzx(edx, bl)?;
        a.mov(dword_ptr(rsi + 4), edx)?;
        a.mov(word_ptr(rsi + 8), dx)?;
        a.mov(r8d, ebx)?;
        a.mov(dword_ptr(rsi + 12), r8d)?;
        a.mov(r9d, ebx)?;
        a.mov(qword_ptr(rsi + 16), r9)?;
        a.add(rbx, 0x0101_0101i32)?;
        a.dec(ecx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (m, _, exit) = compare(&code, &[1 << 20], common::region_config(), &|_| {});
    assert_eq!(exit.reason, ExitReason::Exception(Fault::GP0), "{exit:?}");
    // RBX as the last run stored it.
    let last = m
        .gpr(lockstep_interp::state::reg::RBX)
        .wrapping_sub(0x0101_0101);
    assert_eq!(m.read_u64(DATA_BASE) & 0xffff_ffff, last & 0xffff);
    assert_eq!(m.read_u64(DATA_BASE + 4) & 0xffff_ffff, last & 0xff);
    assert_eq!(m.read_u64(DATA_BASE + 16), last & 0xffff_ffff);
}
