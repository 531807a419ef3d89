//! Lockstep's reference x86-64 interpreter: CPU state, decode, semantics, flags, MMU, exceptions.
//!
//! The crate knows nothing of devices or the JIT. Machines hand it a [`Cpu`], the guest RAM
//! and a [`Bus`] and call [`Engine::run`] with an instruction budget.

pub mod cpu;
pub mod cpuid;
pub mod ctx;
pub mod decode;
pub mod desc;
pub mod fault;
pub mod flags;
pub mod fp;
pub mod interrupt;
pub mod mem;
pub mod mmu;
pub mod operand;
pub mod ops;
pub mod state;
pub mod testkit;
pub mod testkit_sys;
pub mod testkit_sysfuzz;
pub mod x87;

pub use cpu::{Cpu, CpuConfig, Engine, Exit, ExitReason, Interpreter};
pub use ctx::Ctx;
pub use fault::{Fault, Trap};
pub use mem::{Bus, GuestRam, NullBus};
pub use state::CpuState;
