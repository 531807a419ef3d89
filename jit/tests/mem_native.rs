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
