//! The `lockstep` command line.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "lockstep",
    version,
    about = "A deterministic x86-64 machine",
    long_about = "A deterministic x86-64 machine.\n\nWithout a subcommand, boots a kernel: \
                  lockstep --boot <bzImage|PVH vmlinux|multiboot kernel> [--initrd FILE] [--append CMDLINE] \
                  [--seed HEX] [--ram-mb MiB] [--epoch RFC3339] [--engine interp|jit] [--verify] \
                  [--stats] [--max-insns N]. Serial output goes to stdout. Exit codes: 0 guest \
                  powered off; the exit device's code; 2 bad input; 3 triple fault; 4 --max-insns \
                  reached; 5 halted forever; 6 --verify divergence; 130 interrupted (docs/boot.md).",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    boot: lockstep::machine::cli::BootArgs,
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
    /// Time a Linux boot to the userspace marker: Lockstep vs qemu-system-x86_64 (TCG, icount).
    BenchBoot(lockstep::bootbench::BenchBootArgs),
    /// Decompress the ELF vmlinux out of a bzImage (LZ4 or XZ), for booting through PVH.
    ExtractVmlinux(lockstep::machine::cli::ExtractArgs),
}

fn main() {
    lockstep::host_heap::prefer_huge_pages();
    let cli = Cli::parse();
    let code = match cli.cmd {
        None => lockstep::machine::cli::main(cli.boot),
        Some(Cmd::User(a)) => lockstep::user::main(a),
        Some(Cmd::Difftest(a)) => lockstep::difftest::main(a),
        Some(Cmd::Bench(a)) => lockstep::bench::main(a),
        Some(Cmd::Mkinitramfs(a)) => lockstep::initramfs::main(a),
        Some(Cmd::BenchBoot(a)) => lockstep::bootbench::main(a),
        Some(Cmd::ExtractVmlinux(a)) => lockstep::machine::cli::extract_main(a),
    };
    std::process::exit(code);
}
