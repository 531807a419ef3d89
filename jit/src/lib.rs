//! Lockstep's JIT engine: guest basic blocks (found by the interpreter's decoder, so block
//! boundaries are the interpreter's) lifted to Cranelift IR in one long-lived `JITModule`,
//! with a translation cache keyed like the interpreter's block cache, tiering (a block is
//! interpreted until it ran `threshold` times), exact budgets, and `Verify`, which runs the JIT
//! and the interpreter over the same blocks and compares state and memory writes.
//!
//! Every instruction without a native lowering calls the interpreter's handler through a
//! trampoline, so the JIT runs everything the interpreter runs. See `docs/jit.md`.

pub mod base;
pub mod chain;
pub mod code_memory;
pub mod compiler;
pub mod engine;
pub mod frame;
pub mod fuzzing;
pub mod helpers;
pub mod lift;
pub mod page_gen;
pub mod patch;
pub mod region;
pub mod step;
pub mod verify;

pub use engine::{Jit, JitConfig, JitStats};
pub use verify::{Divergence, Verify};
