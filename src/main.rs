//! The `lockstep` command line.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "lockstep", version, about = "A deterministic x86-64 machine")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a static x86-64 Linux program in user mode on the interpreter.
    #[command(trailing_var_arg = true)]
    User(lockstep::user::UserArgs),
    /// Differential test of the interpreter against this host's CPU.
    Difftest(lockstep::difftest::DiffArgs),
    /// Benchmark programs: Lockstep vs native vs qemu-x86_64.
    Bench(lockstep::bench::BenchArgs),
    /// Build a reproducible busybox initramfs whose /init runs a script and powers off.
    Mkinitramfs(lockstep::initramfs::MkInitramfsArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::User(a) => lockstep::user::main(a),
        Cmd::Difftest(a) => lockstep::difftest::main(a),
        Cmd::Bench(a) => lockstep::bench::main(a),
        Cmd::Mkinitramfs(a) => lockstep::initramfs::main(a),
    };
    std::process::exit(code);
}
