//! The system-state fuzz body (`lockstep_interp::testkit_sysfuzz`) on the JIT: random modes,
//! control registers, descriptor tables and page tables must never panic the JIT engine, and
//! every case stays within its budget.

use lockstep_interp::testkit_sysfuzz::{fuzz_sys_exec_with, SYS_FUZZ_BUDGET};
use lockstep_jit::{fuzzing::jit_config, Jit};

#[test]
fn random_system_state_never_panics_the_jit() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let cases: u64 = std::env::var("LOCKSTEP_SYS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    for case in 0..cases {
        let setup_len = 200 + (next() % 600) as usize;
        let mut data = (setup_len as u16).to_le_bytes().to_vec();
        let total = 2 + setup_len + 16 + (next() % 200) as usize;
        while data.len() < total {
            data.push((next() >> 24) as u8);
        }
        let mut jit = Jit::new(jit_config(data[2]));
        let out = fuzz_sys_exec_with(&data, &mut jit);
        assert!(out.retired <= SYS_FUZZ_BUDGET, "case {case}");
    }
}

/// The CS limit on instruction fetch, on the JIT: the instruction crossing the limit raises
/// #GP(0) with the instructions before it retired, and a later larger limit runs the same
/// code to its end (the JIT's block cache is keyed by the limit window too).
#[test]
fn jit_stops_at_the_cs_limit() {
    use lockstep_interp::state::sreg;
    use lockstep_interp::testkit_sys::SysMachine;
    use lockstep_interp::{ExitReason, Fault};
    const CODE: u64 = 0x10000;
    // nop; nop; nop; mov eax, 0x12345678; hlt (32-bit code)
    let code = [0x90, 0x90, 0x90, 0xb8, 0x78, 0x56, 0x34, 0x12, 0xf4];
    let mut m = SysMachine::new(4);
    m.load(CODE, &code);
    m.start_protected_flat(CODE as u32);
    let mut jit = Jit::new(jit_config(0));
    for round in 0..6 {
        let short = round % 2 == 1;
        m.cpu.state.seg[sreg::CS].limit = (CODE + if short { 5 } else { 8 }) as u32;
        m.cpu.state.rip = CODE;
        m.cpu.state.gpr[0] = 0;
        m.cpu.state.halted = false;
        let e = m.run_with(&mut jit, 100);
        if short {
            assert_eq!(e.reason, ExitReason::Exception(Fault::GP0), "round {round}");
            assert_eq!(e.retired, 3);
            assert_eq!(m.cpu.state.rip, CODE + 3);
            assert_eq!(m.cpu.state.gpr[0], 0);
        } else {
            assert_eq!(e.reason, ExitReason::Halt, "round {round}");
            assert_eq!(m.cpu.state.gpr[0], 0x1234_5678);
        }
    }
}
