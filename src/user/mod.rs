//! User-mode harness: runs a static x86-64 Linux ELF on the interpreter, serving its system
//! calls with a small deterministic Linux layer. See `docs/user-mode.md`.
//!
//! Exit codes of `lockstep user`: the guest's exit status; 128 + signal when the guest dies of
//! a fault or a signal it sent itself (SIGSEGV 139, SIGFPE 136, SIGILL 132, SIGTRAP 133,
//! SIGBUS 135, SIGABRT 134, …); 124 when `--max-insns` ran out; 137 when guest memory ran out;
//! 2 when the program cannot be loaded; 70 when `--verify` found the engines diverging.

pub mod elf;
pub mod guest;
pub mod loader;
pub mod memory;
pub mod sys_io;
pub mod sys_mm;
pub mod syscall;
pub mod sysnames;
#[cfg(test)]
mod tests;

use crate::seed::Seed;
use guest::Guest;
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
use lockstep_interp::{Engine, ExitReason, Fault, Interpreter, NullBus};
use lockstep_jit::{Jit, JitConfig, Verify};
use rand_core::RngCore;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use syscall::{Kernel, Stop};

/// Exit code when `--max-insns` is reached (as timeout(1)).
pub const EXIT_MAX_INSNS: i32 = 124;
/// Exit code when the guest runs out of memory (as a process killed by SIGKILL).
pub const EXIT_OOM: i32 = 128 + 9;
/// Exit code when the program cannot be loaded or the options are wrong.
pub const EXIT_LOAD: i32 = 2;
/// Exit code when `--verify` finds the JIT and the interpreter diverging (EX_SOFTWARE).
pub const EXIT_DIVERGED: i32 = 70;

/// Instructions per engine call (the loop checks limits between calls).
const SLICE: u64 = 1 << 24;

/// Execution engine.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// The reference interpreter.
    Interp,
    /// The Cranelift JIT (lockstep-jit).
    #[default]
    Jit,
}

/// `lockstep user` arguments.
#[derive(clap::Args, Debug)]
pub struct UserArgs {
    /// Execution engine.
    #[arg(long, value_enum, default_value_t = EngineKind::Jit)]
    pub engine: EngineKind,
    /// Run the JIT and the interpreter in lockstep, block by block, comparing state and
    /// memory writes; stop with exit code 70 at the first difference (implies the JIT).
    #[arg(long)]
    pub verify: bool,
    /// JIT: compile a block after it ran this many times in the interpreter [default: 500].
    #[arg(long, value_name = "N")]
    pub jit_threshold: Option<u32>,
    /// Run seed (1 to 64 hex digits): AT_RANDOM, getrandom and RDRAND draw from it.
    #[arg(long, default_value = "0")]
    pub seed: Seed,
    /// Print `retired=… hash=… wall=… mips=…` to stderr at the end.
    #[arg(long)]
    pub stats: bool,
    /// Print every system call (name, arguments, result) to stderr.
    #[arg(long)]
    pub trace: bool,
    /// Stop after this many retired instructions (exit code 124).
    #[arg(long, value_name = "N")]
    pub max_insns: Option<u64>,
    /// Guest physical memory in MiB (lazily backed by the host).
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    pub ram_mb: u64,
    /// The static x86-64 Linux executable to run, then its arguments. Everything after PROGRAM
    /// goes to the guest, including arguments that start with '-' (even `--stats` or `--`).
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

impl UserArgs {
    /// The program to run (the first word of the command).
    pub fn program(&self) -> PathBuf {
        PathBuf::from(self.command.first().cloned().unwrap_or_default())
    }

    /// The guest's arguments after argv[0].
    pub fn guest_args(&self) -> &[OsString] {
        self.command.get(1..).unwrap_or(&[])
    }
}

/// Entry point; returns the process exit code.
pub fn main(args: UserArgs) -> i32 {
    let program = args.program();
    let path = program.display().to_string();
    let file = match std::fs::read(&program) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("lockstep: {path}: {}", io_problem(&e));
            return EXIT_LOAD;
        }
    };
    let ram_bytes = match args.ram_mb.checked_mul(1 << 20) {
        Some(b) if b > 0 => b,
        _ => {
            eprintln!(
                "lockstep: --ram-mb must be between 1 and {}",
                u64::MAX >> 20
            );
            return EXIT_LOAD;
        }
    };
    let prog = program.as_os_str().as_bytes().to_vec();
    let mut argv = vec![prog.clone()];
    argv.extend(args.guest_args().iter().map(|a| a.as_bytes().to_vec()));
    let mut random = [0u8; 16];
    args.seed.stream("auxv").fill_bytes(&mut random);
    let setup = loader::Setup {
        file: &file,
        argv,
        execfn: prog,
        ram_bytes,
        random,
        rng_seed: args.seed.derive("rng"),
    };
    let (mut guest, _image) = match loader::load(&setup) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("lockstep: {path}: {e}");
            return EXIT_LOAD;
        }
    };
    drop(file);
    let mut kernel = Kernel::new(args.trace, args.seed.stream("getrandom"));
    let start = std::time::Instant::now();
    let mut engine = build_engine(&args);
    let code = run_with(&mut guest, &mut kernel, engine.as_mut(), args.max_insns);
    let _ = std::io::stdout().flush();
    if args.stats {
        let wall = start.elapsed().as_secs_f64();
        let retired = guest.cpu.retired;
        let mips = if wall > 0.0 {
            retired as f64 / wall / 1e6
        } else {
            0.0
        };
        eprintln!(
            "retired={retired} hash={:016x} wall={wall:.3} mips={mips:.1}",
            guest.state_hash()
        );
    }
    code
}

/// `No such file or directory` rather than `… (os error 2)`.
fn io_problem(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The JIT's tiering threshold for user programs. A boot runs a large body of code a few
/// thousand times each, where the machine-wide default (2000) pays; a user program spends
/// its time in fewer, hotter blocks, which should be compiled sooner. Measured with callgrind
/// (host instructions, bench arguments, session 16), 500 against 2000: heap -4.5%, libm
/// -4.2%, bignum -6.2%, hash -3.1%, recursion -2.5%, sort -1.8%, bits -1.7%, primes +0.1%.
const USER_JIT_THRESHOLD: u32 = 500;

/// The engine `--engine`, `--verify` and `--jit-threshold` ask for.
fn build_engine(args: &UserArgs) -> Box<dyn Engine> {
    let mut config = JitConfig {
        threshold: USER_JIT_THRESHOLD,
        count_chains: lockstep_jit::engine::stats_requested(),
        ..JitConfig::default()
    };
    if let Some(t) = args.jit_threshold {
        config.threshold = t;
    }
    if args.verify {
        let mut v = Verify::new(config);
        v.exit_code = Some(EXIT_DIVERGED);
        v.context = format!(
            "reproduce: lockstep user --verify --seed {} {}",
            args.seed,
            args.command
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        return Box::new(v);
    }
    match args.engine {
        EngineKind::Interp => Box::new(Interpreter),
        EngineKind::Jit => Box::new(Jit::new(config)),
    }
}

/// Run the guest to its end on a fresh engine of kind `engine`; returns the exit code.
pub fn run(g: &mut Guest, k: &mut Kernel, engine: EngineKind, max_insns: Option<u64>) -> i32 {
    let mut eng: Box<dyn Engine> = match engine {
        EngineKind::Interp => Box::new(Interpreter),
        EngineKind::Jit => Box::new(Jit::default()),
    };
    run_with(g, k, eng.as_mut(), max_insns)
}

/// Run the guest to its end on `eng`; returns the exit code.
pub fn run_with(
    g: &mut Guest,
    k: &mut Kernel,
    eng: &mut dyn Engine,
    max_insns: Option<u64>,
) -> i32 {
    let mut bus = NullBus;
    loop {
        let budget = match max_insns {
            Some(m) if g.cpu.retired >= m => {
                eprintln!(
                    "lockstep: instruction limit {m} reached at rip={:#x}",
                    g.cpu.state.rip
                );
                return EXIT_MAX_INSNS;
            }
            Some(m) => SLICE.min(m - g.cpu.retired),
            None => SLICE,
        };
        let exit = eng.run(&mut g.cpu, &mut g.ram, &mut bus, budget);
        match exit.reason {
            // A user process has no devices; a yield only ends the slice.
            ExitReason::Budget | ExitReason::Yield => {}
            ExitReason::Syscall => match k.syscall(g) {
                Ok(()) => {}
                Err(Stop::Exit(code)) => return code,
                Err(Stop::Signal(sig)) => {
                    let _ = std::io::stdout().flush();
                    eprintln!(
                        "lockstep: guest killed by signal {sig} ({})",
                        syscall::signal_name(sig)
                    );
                    return 128 + sig as i32;
                }
                Err(Stop::Oom) => return out_of_memory(),
            },
            ExitReason::Exception(Fault::PageFault { addr, code }) => {
                match g.mm.fault_in(&mut g.ram, addr, code) {
                    Ok(true) => {}
                    Ok(false) => return fault(g, Fault::PageFault { addr, code }),
                    Err(_) => return out_of_memory(),
                }
            }
            ExitReason::Exception(f) => return fault(g, f),
            // HLT is privileged at CPL 3 (#GP), so this means an engine bug; treat as SIGSEGV.
            ExitReason::Halt => return fault(g, Fault::GP0),
        }
    }
}

fn out_of_memory() -> i32 {
    eprintln!("lockstep: guest out of memory (see --ram-mb); killed");
    EXIT_OOM
}

/// The signal Linux would deliver for an exception taken in user mode.
pub fn signal_for(f: &Fault) -> u32 {
    match f {
        Fault::DivideError | Fault::X87Error | Fault::SimdError => 8, // SIGFPE
        Fault::InvalidOpcode { .. } | Fault::DeviceNotAvailable => 4, // SIGILL
        Fault::Breakpoint | Fault::Debug => 5,                        // SIGTRAP
        Fault::AlignmentCheck => 7,                                   // SIGBUS
        _ => 11,                                                      // SIGSEGV
    }
}

/// Report a fatal guest exception and return 128 + signal.
fn fault(g: &mut Guest, f: Fault) -> i32 {
    let _ = std::io::stdout().flush();
    let rip = g.cpu.state.rip;
    let sig = signal_for(&f);
    eprintln!(
        "lockstep: guest fault {} at rip={rip:#x}: {} [{f}] -> {}",
        f.mnemonic(),
        disassemble(g, rip),
        syscall::signal_name(sig)
    );
    128 + sig as i32
}

/// The instruction at `rip` in Intel syntax, or a note if its bytes cannot be read.
fn disassemble(g: &mut Guest, rip: u64) -> String {
    // Read as many of the 15 possible bytes as are mapped.
    let mut bytes = Vec::with_capacity(15);
    for i in 0..15u64 {
        match g.read_mem(rip.wrapping_add(i), 1) {
            Ok(b) => bytes.push(b[0]),
            Err(_) => break,
        }
    }
    if bytes.is_empty() {
        return "<instruction bytes not readable>".into();
    }
    let mut dec = Decoder::with_ip(64, &bytes, rip, DecoderOptions::NONE);
    let ins = dec.decode();
    if ins.is_invalid() {
        let hex: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return format!("<invalid encoding {}>", hex.join(" "));
    }
    let mut out = String::new();
    IntelFormatter::new().format(&ins, &mut out);
    out
}
