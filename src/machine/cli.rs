//! `lockstep --boot <kernel> [--initrd …] …`: boot a kernel on the machine, serial console on stdout, a summary and stats on stderr.

use super::{EngineKind, Machine, MachineConfig, Stop};
use crate::seed::Seed;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Default wall clock at power-on: 2000-01-01T00:00:00Z.
pub const DEFAULT_EPOCH: i64 = 946_684_800;

/// Exit code for bad input (missing files, bad images, bad options).
pub const EXIT_USAGE: i32 = 2;

#[derive(Args, Debug, Clone)]
pub struct BootArgs {
    /// Kernel image: a Linux bzImage, an ELF vmlinux with a PVH entry note, or a multiboot v1
    /// kernel (detected from the contents).
    #[arg(long, value_name = "KERNEL")]
    pub boot: Option<PathBuf>,
    /// Initial ramdisk (Linux) or multiboot module.
    #[arg(long)]
    pub initrd: Option<PathBuf>,
    /// Kernel command line.
    #[arg(long, default_value = "console=ttyS0")]
    pub append: String,
    /// Guest RAM in MiB.
    #[arg(long, default_value_t = 256)]
    pub ram_mb: u64,
    /// Run seed (1 to 64 hex digits): RDRAND and every seeded domain draw from it.
    #[arg(long, default_value = "0")]
    pub seed: Seed,
    /// Wall-clock time at power-on (RFC 3339, UTC, e.g. 2024-05-01T12:00:00Z).
    #[arg(long)]
    pub epoch: Option<String>,
    /// Virtual nanoseconds per retired instruction.
    #[arg(long, default_value_t = 1)]
    pub ns_per_insn: u64,
    /// Execution engine.
    #[arg(long, value_enum, default_value_t = EngineKind::Jit)]
    pub engine: EngineKind,
    /// Run the JIT and the interpreter in lockstep and stop at the first divergence.
    #[arg(long)]
    pub verify: bool,
    /// Executions of a block before the JIT compiles it.
    #[arg(long, default_value_t = lockstep_jit::JitConfig::default().threshold)]
    pub jit_threshold: u32,
    /// Stop after this many retired instructions.
    #[arg(long)]
    pub max_insns: Option<u64>,
    /// Print retired instructions, state hash and machine statistics at the end.
    #[arg(long)]
    pub stats: bool,
    /// Trace events to stderr: `exceptions`, `interrupts` (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub trace: Vec<TraceWhat>,
    /// Console input: the bytes of FILE, offered to the guest's COM1 from virtual time 0, each
    /// as soon as the UART accepts it (room in the FIFO, RTS up): none is lost.
    #[arg(long, value_name = "FILE")]
    pub input_file: Option<PathBuf>,
    /// Console input: STRING (escapes \n \r \t \e \0 \\ \xHH), offered like --input-file.
    #[arg(long, value_name = "STRING")]
    pub input: Option<String>,
    /// Console input from host stdin (raw mode on a terminal; Ctrl-A x quits). Depends on when
    /// you type: record it with --record-input to replay it.
    #[arg(long)]
    pub interactive: bool,
    /// Write every console-input event (virtual time, bytes) to FILE as it reaches the guest.
    #[arg(long, value_name = "FILE")]
    pub record_input: Option<PathBuf>,
    /// Offer the timed input of FILE (a --record-input recording or a hand-written script).
    #[arg(long, value_name = "FILE")]
    pub replay_input: Option<PathBuf>,
}

/// `--trace` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceWhat {
    Exceptions,
    Interrupts,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Live input is polled every this much virtual time (1 ms).
const POLL_NS: u64 = 1_000_000;

/// Console input from the options: the replayed script first, then --input-file, then --input
/// (all at virtual time 0 unless the script says otherwise).
fn input_feeder(args: &BootArgs) -> Result<super::input::InputFeeder, String> {
    use super::input::{unescape, InputFeeder, InputScript};
    let mut f = match &args.replay_input {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read the input recording {}: {e}", p.display()))?;
            InputFeeder::new(
                InputScript::parse(&text).map_err(|e| format!("{}: {e}", p.display()))?,
            )
        }
        None => InputFeeder::default(),
    };
    if let Some(p) = &args.input_file {
        f.offer(0, read(p, "input file")?);
    }
    if let Some(s) = &args.input {
        f.offer(0, unescape(s).map_err(|e| format!("--input: {e}"))?);
    }
    Ok(f)
}

/// `--record-input`: the recording file, written as events arrive.
struct Recorder {
    file: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
}

impl Recorder {
    fn create(p: &PathBuf) -> Result<Recorder, String> {
        let file = std::fs::File::create(p)
            .map_err(|e| format!("cannot create the input recording {}: {e}", p.display()))?;
        let mut r = Recorder {
            file: std::io::BufWriter::new(file),
            path: p.clone(),
        };
        r.write(super::input::HEADER);
        Ok(r)
    }
    fn write(&mut self, s: &str) {
        if let Err(e) = self
            .file
            .write_all(s.as_bytes())
            .and_then(|_| self.file.flush())
        {
            eprintln!("lockstep: writing {}: {e}", self.path.display());
        }
    }
    fn events(&mut self, m: &mut Machine) {
        for e in m.input.take_log() {
            self.write(&super::input::format_event(&e));
        }
    }
}

/// Parse `YYYY-MM-DDTHH:MM:SS[Z]` (UTC) into seconds since 1970.
pub fn parse_epoch(s: &str) -> Result<i64, String> {
    let bad = || format!("--epoch {s:?}: expected RFC 3339 UTC like 2000-01-01T00:00:00Z");
    let s2 = s
        .strip_suffix('Z')
        .or_else(|| s.strip_suffix("+00:00"))
        .unwrap_or(s);
    let (date, time) = s2.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3 || t.len() != 3 {
        return Err(bad());
    }
    let (y, m, day) = (d[0], d[1], d[2]);
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
        || !(0..24).contains(&t[0])
        || !(0..60).contains(&t[1])
        || !(0..61).contains(&t[2])
    {
        return Err(bad());
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

fn read(p: &PathBuf, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("cannot read the {what} {}: {e}", p.display()))
}

/// `lockstep --boot …`; returns the process exit code.
pub fn main(args: BootArgs) -> i32 {
    match run(&args) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("lockstep: {msg}");
            EXIT_USAGE
        }
    }
}

fn run(args: &BootArgs) -> Result<i32, String> {
    // Ctrl-C and SIGTERM only set a flag; the run loop stops at the next instruction boundary
    // it checks (exit code 130, stats still printed, the terminal restored).
    // SAFETY: installing a signal handler that only stores to an atomic is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as *const () as libc::sighandler_t);
    }
    let kernel_path = args
        .boot
        .as_ref()
        .ok_or("nothing to do: give --boot <kernel> or a subcommand (see --help)")?;
    let kernel = read(kernel_path, "kernel")?;
    let initrd = match &args.initrd {
        Some(p) => Some(read(p, "initrd")?),
        None => None,
    };
    let epoch = match &args.epoch {
        Some(e) => parse_epoch(e)?,
        None => DEFAULT_EPOCH,
    };
    if args.ns_per_insn == 0 || args.ns_per_insn > 1_000_000 {
        return Err("--ns-per-insn must be between 1 and 1000000".into());
    }
    let config = MachineConfig {
        ram_mb: args.ram_mb,
        seed: args.seed,
        epoch,
        ns_per_insn: args.ns_per_insn,
        engine: args.engine,
        verify: args.verify,
        jit_threshold: args.jit_threshold,
        max_insns: args.max_insns,
        trace: super::Trace {
            exceptions: args.trace.contains(&TraceWhat::Exceptions),
            interrupts: args.trace.contains(&TraceWhat::Interrupts),
        },
    };
    let mut m = Machine::new(config).map_err(|e| e.to_string())?;
    let summary = m
        .boot(&kernel, initrd.as_deref(), &args.append)
        .map_err(|e| e.to_string())?;
    if args.stats {
        eprintln!("lockstep: {summary}");
    }
    m.input = input_feeder(args)?;
    m.input.recording = args.record_input.is_some();
    let mut recorder = match &args.record_input {
        Some(p) => Some(Recorder::create(p)?),
        None => None,
    };
    if args.interactive {
        m.poll_every = Some((POLL_NS / args.ns_per_insn).max(1));
    }
    // Raw mode from here; dropping `live` (any return, or unwinding) restores the terminal.
    let mut live = args.interactive.then(super::tty::Live::start);
    if live.as_ref().is_some_and(|l| l.raw) {
        eprint!("lockstep: interactive console (Ctrl-A x quits)\r\n");
    }
    let mut out = std::io::stdout();
    let stop = loop {
        // Run in bounded pieces so serial output streams while the guest runs; with
        // --interactive the machine also pauses every POLL_NS of virtual time.
        let pause_at = m.cpu.retired.saturating_add(20_000_000);
        let s = m.run_until(pause_at, &|| STOP.load(Ordering::Relaxed));
        let bytes = m.plat.uart.drain_output();
        let _ = out.write_all(&bytes);
        let _ = out.flush();
        if let Some(r) = &mut recorder {
            r.events(&mut m);
        }
        if let Some(s) = s {
            break s;
        }
        if let Some(l) = &mut live {
            // A halted guest waits for the host a little (paces idle time to wall time).
            let p = l.poll(if m.cpu.state.halted { 1 } else { 0 });
            if p.quit {
                STOP.store(true, Ordering::Relaxed);
            }
            let vt = m.vtime();
            m.input.offer(vt, p.bytes);
        }
    };
    drop(live);
    if let Some(r) = &mut recorder {
        r.events(&mut m);
        if matches!(stop, Stop::Interrupted | Stop::ReplayEnd) {
            r.write(&format!("end {}\n", m.vtime()));
        }
    }
    let msg = match &stop {
        Stop::PowerOff => "guest powered off".to_string(),
        Stop::ExitDevice(c) => format!("guest wrote the exit device: exit code {c}"),
        Stop::Reset => "guest requested a reset".to_string(),
        Stop::TripleFault(r) => format!("triple fault: {r}"),
        Stop::MaxInsns => format!("--max-insns reached at rip={:#x}", m.cpu.state.rip),
        Stop::Deadlock(r) => r.clone(),
        Stop::Interrupted => format!(
            "interrupted at virtual time {} (instructions), rip={:#x}",
            m.vtime(),
            m.cpu.state.rip
        ),
        Stop::ReplayEnd => format!(
            "the input recording ended at virtual time {} (where the recorded run was interrupted)",
            m.vtime()
        ),
        Stop::Divergence(r) => r.clone(),
    };
    if args.stats || !matches!(stop, Stop::PowerOff | Stop::ExitDevice(_)) {
        eprintln!("lockstep: {msg}");
    }
    if args.stats {
        eprintln!(
            "lockstep: retired {} instructions, virtual time {} ns, state hash {:016x}",
            m.cpu.retired,
            m.plat.ns_at(m.cpu.retired),
            m.state_hash()
        );
        eprintln!(
            "lockstep: {} interrupts, {} exceptions delivered, {} halts, {} engine runs",
            m.stats.interrupts, m.stats.exceptions, m.stats.halts, m.stats.engine_runs
        );
    }
    Ok(stop.exit_code())
}

/// `lockstep extract-vmlinux <bzImage> -o <vmlinux>`.
#[derive(Args, Debug, Clone)]
pub struct ExtractArgs {
    /// The bzImage (e.g. /boot/vmlinuz-*).
    pub bzimage: PathBuf,
    /// Where to write the ELF vmlinux.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `lockstep extract-vmlinux`: write the bzImage's decompressed vmlinux; returns the exit code
/// (0, or [`EXIT_USAGE`] for bad input).
pub fn extract_main(args: ExtractArgs) -> i32 {
    let run = || -> Result<String, String> {
        let image = read(&args.bzimage, "bzImage")?;
        let x = crate::boot::extract::extract(&image).map_err(|e| match e {
            crate::boot::BootError::Kernel(m) => format!("cannot extract a vmlinux: {m}"),
            e => e.to_string(),
        })?;
        let pvh = match crate::boot::pvh::Elf64::parse(&x.vmlinux).and_then(|e| e.pvh_entry()) {
            Ok(Some(entry)) => format!("PVH entry {entry:#x}"),
            Ok(None) => "no PVH entry note (cannot be booted with --boot)".into(),
            Err(e) => format!("not bootable: {e}"),
        };
        std::fs::write(&args.output, &x.vmlinux)
            .map_err(|e| format!("cannot write {}: {e}", args.output.display()))?;
        Ok(format!(
            "{}: {} payload of {} bytes -> {} bytes of ELF vmlinux in {}; {pvh}",
            args.bzimage.display(),
            x.compression.name(),
            x.payload_len,
            x.vmlinux.len(),
            args.output.display()
        ))
    };
    match run() {
        Ok(msg) => {
            eprintln!("lockstep: {msg}");
            0
        }
        Err(msg) => {
            eprintln!("lockstep: {msg}");
            EXIT_USAGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_parsing() {
        assert_eq!(parse_epoch("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_epoch("2000-01-01T00:00:00Z"), Ok(DEFAULT_EPOCH));
        assert_eq!(parse_epoch("2024-02-29T12:34:56Z"), Ok(1_709_210_096));
        assert!(parse_epoch("2024-13-01T00:00:00Z").is_err());
        assert!(parse_epoch("yesterday").is_err());
    }
}
