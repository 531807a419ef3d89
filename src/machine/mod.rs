//! The machine: RAM, one vCPU, the PC platform, and the deterministic run loop that stops the engine exactly at every device deadline, delivers interrupts at instruction boundaries and skips idle time.
//!
//! Virtual time is the retired-instruction count plus the instructions' worth of time skipped
//! while the CPU was halted; `--ns-per-insn` maps it to nanoseconds for the devices. Nothing
//! on this path reads a host clock. Console input arrives on the same clock (input.rs): each
//! input event is one more deadline.

pub mod cli;
pub mod input;
pub mod platform;
pub mod tty;

use crate::boot::{self, BootError, KernelKind};
use crate::seed::Seed;
use input::InputFeeder;
use lockstep_interp::interrupt::{self, Event};
use lockstep_interp::{Cpu, CpuConfig, CpuState, Engine, ExitReason, GuestRam, Interpreter};
use lockstep_jit::{Jit, JitConfig, Verify};
use platform::{Platform, Request};
use thiserror::Error;

/// Longest single engine run (instructions): bounds the latency of Ctrl-C and of progress
/// output; never changes guest-visible behaviour.
const SLICE: u64 = 10_000_000;

/// Which engine runs guest code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineKind {
    Interp,
    Jit,
}

/// Everything a run depends on besides the images.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    pub ram_mb: u64,
    pub seed: Seed,
    /// Wall clock at power-on, seconds since 1970 (the RTC starts here).
    pub epoch: i64,
    pub ns_per_insn: u64,
    pub engine: EngineKind,
    pub verify: bool,
    pub jit_threshold: u32,
    pub max_insns: Option<u64>,
    pub trace: Trace,
}

/// What `--trace` prints to stderr as it happens.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trace {
    /// Every exception the machine delivers (with CS:RIP and the retired count).
    pub exceptions: bool,
    /// Every external interrupt delivered.
    pub interrupts: bool,
}

#[derive(Debug, Error)]
pub enum MachineError {
    #[error("{0}")]
    Boot(#[from] BootError),
    #[error("cannot create {mb} MiB of guest RAM: {source}")]
    Ram {
        mb: u64,
        source: lockstep_interp::mem::MemError,
    },
    #[error("RAM size {0} MiB is out of range (16 .. 65536 MiB)")]
    RamSize(u64),
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// ACPI S5 (the guest powered off).
    PowerOff,
    /// The isa-debug-exit port was written: host exit code.
    ExitDevice(u32),
    /// The guest asked for a reset (i8042 pulse, 0xCF9, ACPI reset register).
    Reset,
    /// Triple fault: the CPU shut down.
    TripleFault(String),
    /// `--max-insns` reached.
    MaxInsns,
    /// The CPU halted with nothing left that could wake it.
    Deadlock(String),
    /// Stopped from outside (Ctrl-C, SIGTERM, the interactive quit key).
    Interrupted,
    /// A replayed input recording reached its `end` (where the recorded run was interrupted).
    ReplayEnd,
    /// `--verify` found the JIT and the interpreter disagreeing (the report).
    Divergence(String),
}

impl Stop {
    /// The host exit code for this stop (docs/boot.md lists them).
    pub fn exit_code(&self) -> i32 {
        match self {
            Stop::PowerOff => 0,
            Stop::ExitDevice(c) => *c as i32,
            Stop::Reset => 0,
            Stop::TripleFault(_) => 3,
            Stop::MaxInsns => 4,
            Stop::Deadlock(_) => 5,
            Stop::Interrupted => 130,
            Stop::ReplayEnd => 0,
            Stop::Divergence(_) => 6,
        }
    }
}

/// A machine with one vCPU.
pub struct Machine {
    pub cpu: Cpu,
    pub ram: GuestRam,
    pub plat: Platform,
    engine: Box<dyn Engine>,
    /// The verifying engine when `--verify` is on (then `engine` is unused).
    verify: Option<Verify>,
    pub config: MachineConfig,
    /// Interrupts delivered from devices, exceptions delivered, engine runs.
    pub stats: MachineStats,
    /// Console input offered to the UART (scripted, replayed or live).
    pub input: InputFeeder,
    /// Pause `run_until` every this many instructions of virtual time (live input polling).
    pub poll_every: Option<u64>,
    next_poll: u64,
    /// Virtual time of the last loop-top visit that checked for a stop (see `run_inner`).
    last_stop_check: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct MachineStats {
    pub interrupts: u64,
    pub exceptions: u64,
    pub engine_runs: u64,
    pub halts: u64,
}

impl Machine {
    /// A powered-on machine with empty RAM.
    pub fn new(config: MachineConfig) -> Result<Self, MachineError> {
        if !(16..=65536).contains(&config.ram_mb) {
            return Err(MachineError::RamSize(config.ram_mb));
        }
        let ram = GuestRam::new(config.ram_mb << 20).map_err(|source| MachineError::Ram {
            mb: config.ram_mb,
            source,
        })?;
        let cpu = Cpu::new(
            CpuState::power_on(),
            CpuConfig::default(),
            config.seed.derive("rng"),
        );
        let plat = Platform::new(config.ram_mb << 20, config.epoch, config.ns_per_insn);
        let jc = JitConfig {
            threshold: config.jit_threshold,
            count_chains: lockstep_jit::engine::stats_requested(),
            ..JitConfig::default()
        };
        let engine: Box<dyn Engine> = match config.engine {
            EngineKind::Jit => Box::new(Jit::new(jc.clone())),
            EngineKind::Interp => Box::new(Interpreter),
        };
        let verify = config.verify.then(|| {
            let mut v = Verify::new(jc);
            v.context = format!(
                "reproduce: lockstep --boot <kernel> --seed {} --verify (same images and options)",
                config.seed
            );
            v
        });
        Ok(Machine {
            cpu,
            ram,
            plat,
            engine,
            verify,
            config,
            stats: MachineStats::default(),
            input: InputFeeder::default(),
            poll_every: None,
            next_poll: 0,
            last_stop_check: None,
        })
    }

    /// Load a kernel (bzImage, PVH vmlinux or multiboot) with an optional initrd and command line, write
    /// the ACPI tables, and point the CPU at the entry. Returns the loader's summary line.
    pub fn boot(
        &mut self,
        kernel: &[u8],
        initrd: Option<&[u8]>,
        cmdline: &str,
    ) -> Result<String, MachineError> {
        let rsdp = boot::write_acpi(&mut self.ram, 1)?;
        let info = match boot::detect(kernel)? {
            KernelKind::BzImage => {
                boot::bzimage::load(&mut self.ram, kernel, initrd, cmdline, rsdp)?
            }
            KernelKind::Pvh => boot::pvh::load(&mut self.ram, kernel, initrd, cmdline, rsdp)?,
            KernelKind::Multiboot => boot::multiboot::load(&mut self.ram, kernel, initrd, cmdline)?,
        };
        self.cpu.state = info.state;
        self.cpu.flush_caches();
        Ok(info.summary)
    }

    /// Virtual time in instructions (retired + idle skips).
    pub fn vtime(&self) -> u64 {
        self.cpu.retired + self.plat.idle_insns
    }

    /// Instructions until the next deadline (at least 1), if any: a device event, the next
    /// input arrival, the replay end, the next live-input poll.
    fn insns_to_next_event(&self) -> Option<u64> {
        let device = self.plat.next_event().map(|next| {
            let now = self.plat.ns_at(self.cpu.retired);
            let d = next.saturating_sub(now);
            d.div_ceil(self.plat.ns_per_insn)
        });
        let vt = self.vtime();
        let poll = self.poll_every.map(|_| self.next_poll);
        [self.input.next_arrival(), self.input.end, poll]
            .into_iter()
            .flatten()
            .map(|t| t.saturating_sub(vt))
            .chain(device)
            .min()
            .map(|n| n.max(1))
    }

    /// Run to the end (see [`Machine::run_until`]).
    pub fn run(&mut self) -> Stop {
        loop {
            if let Some(s) = self.run_until(u64::MAX, &|| false) {
                return s;
            }
        }
    }

    /// Run until the guest powers off, exits, resets or faults fatally, `--max-insns`, a
    /// replayed input recording ends, or `interrupt` says so (checked between engine runs, at
    /// the first visit of each virtual time). Returns `None` when `pause_at` instructions have
    /// retired or a live-input poll is due ([`Machine::poll_every`]); the caller drains output,
    /// may offer input at [`Machine::vtime`], and calls again (pausing changes nothing the guest
    /// can see).
    pub fn run_until(&mut self, pause_at: u64, interrupt: &dyn Fn() -> bool) -> Option<Stop> {
        let stop = self.run_inner(pause_at, interrupt);
        if stop == Some(Stop::Interrupted) && !interrupt() {
            return None;
        }
        stop
    }

    fn run_inner(&mut self, pause_at: u64, stop: &dyn Fn() -> bool) -> Option<Stop> {
        loop {
            // Input lands here, at an instruction boundary: at its arrival time (a deadline
            // below) or right after the guest's port access that made room (those end the run).
            let vt = self.vtime();
            self.input.feed(vt, &mut self.plat.uart);
            self.plat.advance(self.cpu.retired);
            if let Some(r) = self.plat.take_request() {
                return Some(match r {
                    Request::PowerOff => Stop::PowerOff,
                    Request::Reset => Stop::Reset,
                    Request::Exit(c) => Stop::ExitDevice(c),
                });
            }
            // Stops from outside are taken only at the first visit of each virtual time (not
            // after an interrupt delivery at the same time), so that a replay's `end T`, a
            // deadline, stops in exactly the state in which the recorded run was interrupted.
            if self.last_stop_check != Some(vt) {
                self.last_stop_check = Some(vt);
                if self.input.end.is_some_and(|e| vt >= e) {
                    return Some(Stop::ReplayEnd);
                }
                if stop() {
                    return Some(Stop::Interrupted);
                }
            }
            if let Some(p) = self.poll_every {
                if vt >= self.next_poll {
                    self.next_poll = (vt / p + 1).saturating_mul(p);
                    return None;
                }
            }
            let st = &self.cpu.state;
            let if_set = st.rflags & lockstep_interp::state::flags::IF != 0;
            if if_set && !st.interrupt_shadow && self.plat.pending_interrupt().is_some() {
                if let Some(v) = self.plat.acknowledge_interrupt() {
                    self.stats.interrupts += 1;
                    if self.config.trace.interrupts {
                        eprintln!(
                            "lockstep: trace: interrupt vector {v:#x} at {:#x} (retired {}, virtual {} ns)",
                            self.cpu.state.rip,
                            self.cpu.retired,
                            self.plat.ns_at(self.cpu.retired)
                        );
                    }
                    self.cpu.state.halted = false;
                    let (cpu, ram, plat) = (&mut self.cpu, &mut self.ram, &mut self.plat);
                    if let Err(s) = interrupt::deliver(cpu, ram, plat, Event::External(v)) {
                        return Some(Stop::TripleFault(s.to_string()));
                    }
                    continue;
                }
            }
            if self.cpu.state.halted {
                // Idle: jump virtual time to the next device deadline.
                match self.insns_to_next_event() {
                    Some(n) if if_set => {
                        // The TSC keeps counting while the CPU is halted.
                        self.plat.idle_insns += n;
                        let m = &mut self.cpu.state.msr;
                        m.tsc_offset = m.tsc_offset.wrapping_add(n);
                        continue;
                    }
                    _ => {
                        return Some(Stop::Deadlock(format!(
                            "the CPU halted at rip={:#x} with {} and no device event pending",
                            self.cpu.state.rip,
                            if if_set {
                                "interrupts enabled"
                            } else {
                                "interrupts disabled"
                            }
                        )))
                    }
                }
            }
            if self.cpu.retired >= pause_at {
                return None;
            }
            let mut budget = SLICE.min(pause_at - self.cpu.retired);
            if let Some(n) = self.insns_to_next_event() {
                budget = budget.min(n);
            }
            if let Some(m) = self.config.max_insns {
                if self.cpu.retired >= m {
                    return Some(Stop::MaxInsns);
                }
                budget = budget.min(m - self.cpu.retired);
            }
            // The interrupt shadow covers exactly the next instruction: run only it when an
            // interrupt is waiting, and it expires once that instruction runs.
            if self.cpu.state.interrupt_shadow {
                if if_set && self.plat.pending_interrupt().is_some() {
                    budget = 1;
                }
                self.cpu.state.interrupt_shadow = false;
            }
            self.stats.engine_runs += 1;
            let exit = match &mut self.verify {
                Some(v) => {
                    let e = v.run(&mut self.cpu, &mut self.ram, &mut self.plat, budget);
                    if let Some(d) = v.divergence.take() {
                        return Some(Stop::Divergence(d.report));
                    }
                    e
                }
                None => self
                    .engine
                    .run(&mut self.cpu, &mut self.ram, &mut self.plat, budget),
            };
            match exit.reason {
                ExitReason::Budget | ExitReason::Yield => {}
                ExitReason::Halt => {
                    self.stats.halts += 1;
                    self.cpu.state.halted = true;
                }
                ExitReason::Exception(f) => {
                    self.stats.exceptions += 1;
                    if self.config.trace.exceptions {
                        eprintln!(
                            "lockstep: trace: {f} at {:#x}:{:#x} (retired {})",
                            self.cpu.state.seg[lockstep_interp::state::sreg::CS].selector,
                            self.cpu.state.rip,
                            self.cpu.retired
                        );
                    }
                    let (cpu, ram, plat) = (&mut self.cpu, &mut self.ram, &mut self.plat);
                    if let Err(s) = interrupt::deliver(cpu, ram, plat, Event::from_fault(f)) {
                        return Some(Stop::TripleFault(s.to_string()));
                    }
                }
                ExitReason::Syscall => {
                    return Some(Stop::TripleFault(
                        "internal error: SYSCALL handed to the host in system mode".into(),
                    ))
                }
            }
        }
    }

    /// The state hash (architectural state and virtual time) reported by `--stats`.
    pub fn state_hash(&self) -> u64 {
        let mut h = lockstep_interp::state::StateHasher::default();
        self.cpu.state.hash_into(&mut h);
        h.u64(self.cpu.retired);
        h.u64(self.plat.idle_insns);
        h.finish()
    }
}
