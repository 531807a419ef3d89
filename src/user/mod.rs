//! User-mode harness: runs a static x86-64 Linux ELF on the interpreter (skeleton).

/// `lockstep user` arguments.
#[derive(clap::Args, Debug)]
pub struct UserArgs {
    pub program: std::path::PathBuf,
}

/// Entry point; returns the process exit code.
pub fn main(_args: UserArgs) -> i32 {
    eprintln!("lockstep: user-mode harness not built yet");
    2
}
