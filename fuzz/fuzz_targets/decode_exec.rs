//! Fuzz target: arbitrary bytes as code and initial state through the interpreter; any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lockstep_interp::testkit::fuzz_decode_exec(data);
});
