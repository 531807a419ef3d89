//! Fuzz target: random system state (mode, CR0/CR4/EFER, GDT/IDT/LDT/TSS, selectors, page
//! tables) and random code through the interpreter with exception delivery; any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lockstep_interp::testkit_sysfuzz::fuzz_sys_exec(data);
});
