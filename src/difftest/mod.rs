//! Differential testing against the host CPU (skeleton).

/// `lockstep difftest` arguments.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {}

/// Entry point; returns the process exit code.
pub fn main(_args: DiffArgs) -> i32 {
    eprintln!("lockstep: difftest not built yet");
    2
}
