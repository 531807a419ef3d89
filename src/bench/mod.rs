//! Benchmarks (skeleton).

/// `lockstep bench` arguments.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {}

/// Entry point; returns the process exit code.
pub fn main(_args: BenchArgs) -> i32 {
    eprintln!("lockstep: bench not built yet");
    2
}
