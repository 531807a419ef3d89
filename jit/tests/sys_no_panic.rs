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
