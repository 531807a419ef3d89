//! The dispatcher's front table skips RIP's translation only while nothing it depends on has
//! changed (docs/jit.md, "Dispatcher and translation cache"). Here the privilege level
//! changes between engine runs, as an IRET or an interrupt delivery leaves it, with the TLB
//! untouched: code on a supervisor-only page that ran (and was compiled) at CPL 0 must fault
//! on its fetch at CPL 3, in the JIT exactly as in the interpreter. And a code translation
//! the TLB never caches is walked again at every lookup, in both engines.

mod common;

use iced_x86::code_asm::*;
use lockstep_interp::fault::Fault;
use lockstep_interp::state::{reg, CpuState};
use lockstep_interp::testkit_sys::SysMachine;
use lockstep_interp::{Engine, ExitReason, Interpreter};
use lockstep_jit::{Jit, JitConfig};

const PML4: u64 = 0x1000;
const CODE: u64 = 0x10_0000;

/// Every page supervisor-only (present, writable, U/S clear); `add rax, 1; hlt` at CODE.
fn machine() -> SysMachine {
    let mut m = SysMachine::new(64);
    common::paging(&mut m, PML4, &|page| page | 3);
    let mut a = CodeAssembler::new(64).unwrap();
    a.add(rax, 1).unwrap();
    a.hlt().unwrap();
    m.load(CODE, &a.assemble(CODE).unwrap());
    m.start_long(PML4, CODE);
    m
}

fn run_both(a: &mut SysMachine, b: &mut SysMachine, jit: &mut Jit, what: &str) -> ExitReason {
    let ea = Interpreter.run(&mut a.cpu, &mut a.ram, &mut a.bus, 100);
    let eb = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, 100);
    assert_eq!(ea, eb, "exit: {what}");
    assert_eq!(a.cpu.state, b.cpu.state, "state: {what}");
    assert_eq!(a.cpu.retired, b.cpu.retired, "retired: {what}");
    ea.reason
}

#[test]
fn a_privilege_change_between_runs_is_seen_by_the_front_table() {
    let (mut a, mut b) = (machine(), machine());
    let mut jit = Jit::new(JitConfig {
        threshold: 2,
        batch: 1,
        ..JitConfig::default()
    });
    // At CPL 0 the block runs, is found through the front table, and gets compiled.
    for i in 0..6 {
        for m in [&mut a, &mut b] {
            m.cpu.state.rip = CODE;
        }
        let r = run_both(&mut a, &mut b, &mut jit, &format!("CPL 0 run {i}"));
        assert_eq!(r, ExitReason::Halt);
    }
    assert!(jit.stats.compiled > 0, "{}", jit.stats.summary());
    assert_eq!(b.cpu.state.gpr[reg::RAX], 6);
    // Now CPL 3 at the same RIP, nothing flushed: the fetch is a user access to a
    // supervisor page.
    let user = CpuState::long_mode_flat(PML4, 3);
    for m in [&mut a, &mut b] {
        m.cpu.state.seg = user.seg;
        m.cpu.state.rip = CODE;
    }
    let r = run_both(&mut a, &mut b, &mut jit, "CPL 3");
    // Present, user, instruction fetch.
    assert_eq!(
        r,
        ExitReason::Exception(Fault::PageFault {
            addr: CODE,
            code: 0x15
        })
    );
    assert_eq!(b.cpu.state.gpr[reg::RAX], 6);
}

#[test]
fn an_uncached_code_translation_is_walked_again_in_both_engines() {
    // Supervisor code calls into a user page with SMAP on and SMEP off: that execute
    // translation is never cached, so each lookup walks the page tables again. The callee's
    // page is remapped between two calls without INVLPG; both engines must run the new code.
    const CALLEE: u64 = 0x8000;
    let pt = PML4 + 0x3000;
    let machine = || {
        let mut m = SysMachine::new(64);
        common::paging(&mut m, PML4, &|page| {
            page | if page == CALLEE { 7 } else { 3 }
        });
        for table in [PML4, PML4 + 0x1000, PML4 + 0x2000] {
            let e = m.ram.read_u64(table).unwrap();
            m.ram.write_u64(table, e | 4).unwrap();
        }
        let mut a = CodeAssembler::new(64).unwrap();
        a.mov(rbx, CALLEE).unwrap();
        a.call(rbx).unwrap();
        a.mov(r10, rax).unwrap();
        a.mov(qword_ptr(pt + (CALLEE >> 12) * 8), r9).unwrap();
        a.call(rbx).unwrap();
        a.mov(r11, rax).unwrap();
        a.hlt().unwrap();
        m.load(CODE, &a.assemble(CODE).unwrap());
        m.load(CALLEE, &[0xb8, 1, 0, 0, 0, 0xc3]); // mov eax, 1 ; ret
        m.load(CALLEE + 0x1000, &[0xb8, 2, 0, 0, 0, 0xc3]); // mov eax, 2 ; ret
        m.start_long(PML4, CODE);
        let st = &mut m.cpu.state;
        st.gpr[reg::RSP] = 0x8_0000;
        st.gpr[reg::R9] = (CALLEE + 0x1000) | 7;
        st.cr4 |= lockstep_interp::state::ctl::CR4_SMAP;
        m
    };
    let (mut a, mut b) = (machine(), machine());
    let mut jit = Jit::new(JitConfig {
        threshold: 1,
        batch: 1,
        ..JitConfig::default()
    });
    assert_eq!(
        run_both(&mut a, &mut b, &mut jit, "calls"),
        ExitReason::Halt
    );
    assert_eq!(b.cpu.state.gpr[reg::R10], 1);
    assert_eq!(b.cpu.state.gpr[reg::R11], 2, "the old mapping's code ran");
}
