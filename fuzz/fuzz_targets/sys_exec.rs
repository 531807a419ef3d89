//! Fuzz target: random system state (mode, CR0/CR4/EFER, GDT/IDT/LDT/TSS, selectors, page
//! tables) and random code with exception delivery, on the interpreter and on the JIT (the
//! first byte also picks the JIT settings); any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_interp::testkit_sysfuzz::{fuzz_sys_exec, fuzz_sys_exec_with};

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_sys_exec(data);
    let cfg = data.first().copied().unwrap_or(0);
    let mut jit = lockstep_jit::Jit::new(lockstep_jit::fuzzing::jit_config(cfg));
    let _ = fuzz_sys_exec_with(data, &mut jit);
});
