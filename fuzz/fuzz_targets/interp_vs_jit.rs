//! Fuzz target: arbitrary bytes as JIT settings, budget schedule, initial state and code, run on
//! the interpreter and on the JIT (`lockstep_jit::fuzzing`); any difference is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = lockstep_jit::fuzzing::interp_vs_jit(data) {
        panic!("interp_vs_jit: {e}");
    }
});
