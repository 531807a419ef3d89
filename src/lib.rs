//! Lockstep: a deterministic x86-64 machine. This crate holds the machine-level parts and the
//! CLI's commands; the CPU lives in `lockstep-interp`.

pub mod bench;
pub mod boot;
pub mod bootbench;
pub mod devices;
pub mod difftest;
pub mod host_heap;
pub mod initramfs;
pub mod machine;
pub mod seed;
pub mod user;

pub use lockstep_interp as interp;
