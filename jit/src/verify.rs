//! `--verify`: run the JIT and the interpreter over the same blocks and compare.
//!
//! For each block: snapshot the CPU (state, retired count, RDRAND stream, TLB), run one JIT
//! dispatch with RAM's write log on, read what it wrote, undo those writes, restore the CPU,
//! run the interpreter for exactly as many instructions (one more when the JIT stopped on a
//! fault, so that the interpreter reaches it too), and compare exits, the full `CpuState`,
//! the retired count, the RDRAND stream and the memory of every page either wrote. The
//! interpreter's result is kept. Stores that hit a cached write translation — the JIT's
//! inline fast path among them, with the code the JIT emits without `--verify` — are not
//! logged one by one, so while verifying (`Tlb::set_step_local_writes`) the whole page is
//! logged instead: when a write translation is cached, and, for the few (up to
//! `KEPT_WRITE_ENTRIES`) kept from one block to the next, at the start of each run; both runs
//! start with the same write translations. Each block is decoded before the snapshot, so
//! decoding's side effects (accessed bits set by the fetch walk) are outside the
//! comparison.
//!
//! Device accesses happen once: the JIT's run goes to the real bus through a recorder, the
//! interpreter's run is served from that recording (reads return the recorded values) and its
//! accesses must equal the JIT's, in order — a difference in device traffic is a divergence.

use crate::engine::{Jit, JitConfig};
use iced_x86::{Formatter, IntelFormatter};
use lockstep_interp::decode::Block;
use lockstep_interp::mem::PAGE_SIZE as PAGE;
use lockstep_interp::mmu::Tlb;
use lockstep_interp::state::CpuState;
use lockstep_interp::{Bus, Cpu, Ctx, Engine, Exit, ExitReason, Fault, GuestRam, Interpreter};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The first difference found, as a printable report.
#[derive(Debug, Clone)]
pub struct Divergence {
    pub report: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.report)
    }
}

/// The verifying engine.
pub struct Verify {
    pub jit: Jit,
    /// Blocks compared so far.
    pub blocks_checked: u64,
    /// Of those, blocks that ran as compiled code.
    pub compiled_checked: u64,
    /// When set, [`Engine::run`] prints the report to stderr and ends the process with this
    /// code at the first divergence; otherwise the divergence is kept in `divergence` and the
    /// run stops with a #UD exit.
    pub exit_code: Option<i32>,
    /// Extra text for reports (e.g. the command that reproduces the run).
    pub context: String,
    pub divergence: Option<Divergence>,
    /// A copy of the CPU's TLB as it was at the start of a block, to put back after the JIT's
    /// run (kept across blocks: it is refreshed only when the TLB has changed since, so a
    /// block that neither run fills or flushes costs no copy).
    tlb_copy: Option<Tlb>,
}

impl Verify {
    pub fn new(mut config: JitConfig) -> Self {
        config.keep_ir = true;
        Verify {
            jit: Jit::new(config),
            blocks_checked: 0,
            compiled_checked: 0,
            exit_code: None,
            context: String::new(),
            divergence: None,
            tlb_copy: None,
        }
    }

    /// Run at most `budget` instructions, block by block, comparing after each block.
    pub fn run_checked(
        &mut self,
        cpu: &mut Cpu,
        ram: &mut GuestRam,
        bus: &mut dyn Bus,
        budget: u64,
    ) -> Result<Exit, Divergence> {
        let start = cpu.retired;
        let end = start.saturating_add(budget);
        cpu.tlb.set_step_local_writes(true);
        let result = loop {
            if cpu.retired >= end {
                break Ok(ExitReason::Budget);
            }
            match self.one_block(cpu, ram, bus, end - cpu.retired) {
                Err(d) => break Err(d),
                Ok(ExitReason::Budget) => {}
                Ok(r) => break Ok(r),
            }
        };
        cpu.tlb.set_step_local_writes(false);
        ram.write_log = None;
        result.map(|reason| Exit {
            retired: cpu.retired - start,
            reason,
        })
    }

    fn one_block(
        &mut self,
        cpu: &mut Cpu,
        ram: &mut GuestRam,
        bus: &mut dyn Bus,
        remaining: u64,
    ) -> Result<ExitReason, Divergence> {
        // Decode the block first, outside the comparison: decoding has side effects (the page
        // walk of a straddling instruction's second page sets accessed bits) that only the
        // first of the two runs would otherwise have. A fault here is met again by both runs.
        // The write translations cached as the block starts: kept when there are only a few
        // (their pages are logged for each run), else dropped (see the module comment).
        let writes0 = cpu
            .tlb
            .write_entries(KEPT_WRITE_ENTRIES)
            .unwrap_or_else(|| {
                cpu.tlb.drop_write_entries();
                Vec::new()
            });
        let _ = Ctx::new(cpu, ram, bus).block_at_rip();
        let s0 = cpu.state.clone();
        let r0 = cpu.retired;
        let rng0 = cpu.rng.clone();
        let tlb0 = cpu.tlb.version();
        match &mut self.tlb_copy {
            Some(c) if c.version() == tlb0 => {}
            Some(c) => c.copy_from(&cpu.tlb),
            None => self.tlb_copy = Some(cpu.tlb.clone()),
        }
        let smc0 = cpu.smc;

        start_write_log(cpu, ram, &writes0);
        let mut rec = RecordBus {
            inner: bus,
            log: Vec::new(),
        };
        let (ej, d) = self.jit.run_block(cpu, ram, &mut rec, remaining);
        let bus_log = rec.log;
        let log_j = ram.write_log.take().unwrap_or_default();
        let s1 = cpu.state.clone();
        let r1 = cpu.retired;
        let rng1 = cpu.rng.clone();
        // The JIT's final content of every page it wrote, before its writes are undone.
        let mut pages_j: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (a, old) in &log_j {
            for p in pages_of(*a, old.len()) {
                pages_j
                    .entry(p)
                    .or_insert_with(|| ram.bytes()[p as usize..(p + PAGE) as usize].to_vec());
            }
        }
        for (a, old) in log_j.iter().rev() {
            let a = *a as usize;
            ram.bytes_mut()[a..a + old.len()].copy_from_slice(old);
        }
        cpu.state = s0.clone();
        cpu.retired = r0;
        cpu.rng = rng0;
        if cpu.tlb.version() != tlb0 {
            if let Some(c) = &self.tlb_copy {
                cpu.tlb.copy_from(c);
            }
        }
        // The write entries as the block started (those the JIT's run cached do not move
        // the version; a copy may hold others).
        cpu.tlb.set_write_entries(&writes0);
        cpu.smc = smc0;

        let ibudget = match ej.reason {
            ExitReason::Exception(f) if !f.is_trap() => ej.retired + 1,
            _ => ej.retired,
        };
        start_write_log(cpu, ram, &writes0);
        let mut replay = ReplayBus {
            log: &bus_log,
            next: 0,
            mismatch: None,
        };
        let ei = Interpreter.run(cpu, ram, &mut replay, ibudget.min(remaining));
        let log_i = ram.write_log.take().unwrap_or_default();
        self.blocks_checked += 1;
        self.compiled_checked += d.compiled as u64;

        let mut diffs = Vec::new();
        if ej != ei {
            diffs.push(format!("exit: jit {ej:?}, interpreter {ei:?}"));
        }
        if ej.retired == 0 && ej.reason == ExitReason::Budget {
            diffs.push("the JIT made no progress".to_string());
        }
        if r1 != cpu.retired {
            diffs.push(format!("retired: jit {r1}, interpreter {}", cpu.retired));
        }
        diff_state(&s1, &cpu.state, &mut diffs);
        if rng1 != cpu.rng {
            diffs.push("RDRAND stream position differs".to_string());
        }
        diff_memory(&pages_j, &log_i, ram, &mut diffs);
        if let Some(m) = replay.mismatch {
            diffs.push(m);
        } else if replay.next != bus_log.len() {
            diffs.push(format!(
                "device accesses: jit made {}, interpreter {} (first missing: {:?})",
                bus_log.len(),
                replay.next,
                bus_log[replay.next]
            ));
        }
        if !diffs.is_empty() {
            diffs.push(format!("(exits: jit {ej:?}, interpreter {ei:?})"));
            if std::env::var_os("LOCKSTEP_VERIFY_DEBUG").is_some() {
                let ranges = |l: &[(u64, Vec<u8>)]| {
                    l.iter()
                        .map(|(a, o)| format!("{a:#x}+{} old={o:02x?}", o.len()))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                diffs.push(format!("jit writes: {}", ranges(&log_j)));
                diffs.push(format!("interpreter writes: {}", ranges(&log_i)));
            }
            return Err(self.report(&s0, r0, &d, &diffs));
        }
        Ok(ei.reason)
    }

    fn report(
        &self,
        s0: &CpuState,
        r0: u64,
        d: &crate::engine::Dispatched,
        diffs: &[String],
    ) -> Divergence {
        let mut r = String::new();
        let _ = writeln!(
            r,
            "lockstep --verify: the JIT and the interpreter diverged (block at rip={:#x}, retired={r0}, {})",
            s0.rip,
            if d.compiled {
                "compiled"
            } else {
                "interpreted by the JIT's dispatcher"
            }
        );
        if !self.context.is_empty() {
            let _ = writeln!(r, "{}", self.context);
        }
        let _ = writeln!(r, "differences:");
        for x in diffs.iter().take(64) {
            let _ = writeln!(r, "  {x}");
        }
        if diffs.len() > 64 {
            let _ = writeln!(r, "  … {} more", diffs.len() - 64);
        }
        let info = d.key.as_ref().and_then(|k| self.jit.block_info(k));
        match info {
            Some((block, ir)) => {
                let _ = writeln!(r, "guest block ({} instructions):", block.insns.len());
                guest_listing(&mut r, &block, "  ");
                match ir {
                    Some(ir) if d.compiled => {
                        let _ = writeln!(r, "Cranelift IR:");
                        for line in ir.lines() {
                            let _ = writeln!(r, "  {line}");
                        }
                    }
                    _ => {
                        let _ = writeln!(r, "(no Cranelift IR: the block ran in the interpreter)");
                    }
                }
            }
            None => {
                let _ = writeln!(r, "(no block: the fetch itself stopped)");
            }
        }
        Divergence { report: r }
    }
}

const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// Name the fields of two states that differ.
pub fn diff_state(j: &CpuState, i: &CpuState, out: &mut Vec<String>) {
    for (n, (a, b)) in j.gpr.iter().zip(&i.gpr).enumerate() {
        if a != b {
            out.push(format!("{}: jit {a:#x}, interpreter {b:#x}", GPR_NAMES[n]));
        }
    }
    if j.rip != i.rip {
        out.push(format!("rip: jit {:#x}, interpreter {:#x}", j.rip, i.rip));
    }
    if j.rflags != i.rflags {
        let x = j.rflags ^ i.rflags;
        let names = [
            (0, "CF"),
            (2, "PF"),
            (4, "AF"),
            (6, "ZF"),
            (7, "SF"),
            (8, "TF"),
            (9, "IF"),
            (10, "DF"),
            (11, "OF"),
        ];
        let bits: Vec<&str> = names
            .iter()
            .filter(|(b, _)| x & (1 << b) != 0)
            .map(|(_, n)| *n)
            .collect();
        out.push(format!(
            "rflags: jit {:#x}, interpreter {:#x} (differ in {})",
            j.rflags,
            i.rflags,
            if bits.is_empty() {
                "other bits".to_string()
            } else {
                bits.join(" ")
            }
        ));
    }
    for (n, (a, b)) in j.ymm.iter().zip(&i.ymm).enumerate() {
        if a != b {
            out.push(format!("ymm{n}: jit {a:x?}, interpreter {b:x?}"));
        }
    }
    // Everything else, field by field through Debug (rarely differs).
    let mut jr = j.clone();
    let ir = i.clone();
    jr.gpr = ir.gpr;
    jr.rip = ir.rip;
    jr.rflags = ir.rflags;
    jr.ymm = ir.ymm;
    if jr != ir {
        macro_rules! fields {
            ($($f:ident),*) => {$(
                if jr.$f != ir.$f {
                    out.push(format!(concat!(stringify!($f), ": jit {:x?}, interpreter {:x?}"), jr.$f, ir.$f));
                }
            )*};
        }
        fields!(
            seg,
            cr0,
            cr2,
            cr3,
            cr4,
            cr8,
            efer,
            gdtr,
            idtr,
            ldtr,
            tr,
            dr,
            star,
            lstar,
            cstar,
            sfmask,
            kernel_gs_base,
            tsc_aux,
            pat,
            msr,
            mxcsr,
            xcr0,
            x87,
            interrupt_shadow,
            halted
        );
    }
}

/// Write translations kept from one verified block to the next (the pages of the stack and a
/// few data pages); with more cached, all are dropped. Each kept one costs a 4 KiB page log
/// per run.
const KEPT_WRITE_ENTRIES: usize = 4;

/// Turn RAM's write log on for one run, with the pages of the write translations `writes`
/// (those cached as the block started) logged whole first: stores that hit them are not
/// logged one by one.
fn start_write_log(cpu: &Cpu, ram: &mut GuestRam, writes: &[lockstep_interp::mmu::WriteEntry]) {
    ram.write_log = Some(Vec::new());
    for e in writes {
        ram.log_page(cpu.tlb.write_entry_page(e));
    }
}

/// The 4 KiB pages (their addresses) that `[a, a + len)` touches.
fn pages_of(a: u64, len: usize) -> impl Iterator<Item = u64> {
    let first = a / PAGE;
    let last = (a + (len.max(1) as u64) - 1) / PAGE;
    (first..=last).map(|p| p * PAGE)
}

/// Compare, page by page, the memory the two runs left over every page either wrote:
/// `pages_j` holds the JIT's final content of the pages it wrote; a page only the interpreter
/// wrote was, after the JIT's run, as before the block — the interpreter's final content
/// with its log undone. (Whole pages: with a write translation cached, stores are not logged
/// one by one, only the page's old content when the translation was cached.)
fn diff_memory(
    pages_j: &BTreeMap<u64, Vec<u8>>,
    log_i: &[(u64, Vec<u8>)],
    ram: &GuestRam,
    out: &mut Vec<String>,
) {
    let mut pages: Vec<u64> = pages_j.keys().copied().collect();
    for (a, old) in log_i {
        pages.extend(pages_of(*a, old.len()));
    }
    pages.sort_unstable();
    pages.dedup();
    let mut n = 0;
    for p in pages {
        let now = &ram.bytes()[p as usize..(p + PAGE) as usize];
        let jit: std::borrow::Cow<[u8]> = match pages_j.get(&p) {
            Some(j) => j.into(),
            None => {
                let mut img = now.to_vec();
                for (a, old) in log_i.iter().rev() {
                    // The part of `[a, a + len)` inside this page.
                    let (lo, hi) = ((*a).max(p), (a + old.len() as u64).min(p + PAGE));
                    if lo < hi {
                        img[(lo - p) as usize..(hi - p) as usize]
                            .copy_from_slice(&old[(lo - a) as usize..(hi - a) as usize]);
                    }
                }
                img.into()
            }
        };
        if jit[..] == *now {
            continue;
        }
        for (k, (&jv, &iv)) in jit.iter().zip(now).enumerate() {
            if jv != iv {
                n += 1;
                if n <= 16 {
                    out.push(format!(
                        "memory [phys {:#x}]: jit {jv:#04x}, interpreter {iv:#04x}",
                        p + k as u64
                    ));
                }
            }
        }
    }
    if n > 16 {
        out.push(format!("… {} more differing bytes", n - 16));
    }
}

impl Engine for Verify {
    fn run(&mut self, cpu: &mut Cpu, ram: &mut GuestRam, bus: &mut dyn Bus, budget: u64) -> Exit {
        let start = cpu.retired;
        match self.run_checked(cpu, ram, bus, budget) {
            Ok(e) => e,
            Err(d) => {
                eprint!("{d}");
                if let Some(code) = self.exit_code {
                    use std::io::Write as _;
                    let _ = std::io::stdout().flush();
                    std::process::exit(code);
                }
                self.divergence = Some(d);
                Exit {
                    retired: cpu.retired - start,
                    reason: ExitReason::Exception(Fault::ud("lockstep --verify: engines diverged")),
                }
            }
        }
    }
}

/// One device access as the JIT made it, with the value a read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
enum BusOp {
    Now(u64),
    MmioRead { addr: u64, size: u8, value: u64 },
    MmioWrite { addr: u64, size: u8, value: u64 },
    PioIn { port: u16, size: u8, value: u32 },
    PioOut { port: u16, size: u8, value: u32 },
    MsrRead { msr: u32, value: Option<u64> },
    MsrWrite { msr: u32, value: u64, claimed: bool },
}

/// Passes accesses to the machine's bus and records them.
struct RecordBus<'a> {
    inner: &'a mut dyn Bus,
    log: Vec<BusOp>,
}

impl Bus for RecordBus<'_> {
    fn mmio_read(&mut self, addr: u64, size: u8) -> u64 {
        let value = self.inner.mmio_read(addr, size);
        self.log.push(BusOp::MmioRead { addr, size, value });
        value
    }
    fn mmio_write(&mut self, addr: u64, size: u8, value: u64) {
        self.inner.mmio_write(addr, size, value);
        self.log.push(BusOp::MmioWrite { addr, size, value });
    }
    fn pio_in(&mut self, port: u16, size: u8) -> u32 {
        let value = self.inner.pio_in(port, size);
        self.log.push(BusOp::PioIn { port, size, value });
        value
    }
    fn pio_out(&mut self, port: u16, size: u8, value: u32) {
        self.inner.pio_out(port, size, value);
        self.log.push(BusOp::PioOut { port, size, value });
    }
    fn set_now(&mut self, retired: u64) {
        self.inner.set_now(retired);
        self.log.push(BusOp::Now(retired));
    }
    fn msr_read(&mut self, msr: u32) -> Option<u64> {
        let value = self.inner.msr_read(msr);
        self.log.push(BusOp::MsrRead { msr, value });
        value
    }
    fn msr_write(&mut self, msr: u32, value: u64) -> bool {
        let claimed = self.inner.msr_write(msr, value);
        self.log.push(BusOp::MsrWrite {
            msr,
            value,
            claimed,
        });
        claimed
    }
}

/// Serves the interpreter's accesses from the JIT's recording; the first access that differs
/// from the recording is kept as a divergence (and answered as an empty bus would).
struct ReplayBus<'a> {
    log: &'a [BusOp],
    next: usize,
    mismatch: Option<String>,
}

impl ReplayBus<'_> {
    fn take(&mut self, want: &BusOp) -> Option<BusOp> {
        if self.mismatch.is_some() {
            return None;
        }
        let got = self.log.get(self.next).cloned();
        let same_kind = match (&got, want) {
            (
                Some(BusOp::MmioRead { addr, size, .. }),
                BusOp::MmioRead {
                    addr: a, size: s, ..
                },
            ) => addr == a && size == s,
            (
                Some(BusOp::PioIn { port, size, .. }),
                BusOp::PioIn {
                    port: p, size: s, ..
                },
            ) => port == p && size == s,
            (Some(BusOp::MsrRead { msr, .. }), BusOp::MsrRead { msr: m, .. }) => msr == m,
            (
                Some(BusOp::MsrWrite { msr, value, .. }),
                BusOp::MsrWrite {
                    msr: m, value: v, ..
                },
            ) => msr == m && value == v,
            (Some(g), w) => g == w,
            (None, _) => false,
        };
        if same_kind {
            self.next += 1;
            got
        } else {
            self.mismatch = Some(format!(
                "device access #{}: jit {:?}, interpreter {want:?}",
                self.next, got
            ));
            None
        }
    }
}

impl Bus for ReplayBus<'_> {
    fn mmio_read(&mut self, addr: u64, size: u8) -> u64 {
        match self.take(&BusOp::MmioRead {
            addr,
            size,
            value: 0,
        }) {
            Some(BusOp::MmioRead { value, .. }) => value,
            _ => u64::MAX,
        }
    }
    fn mmio_write(&mut self, addr: u64, size: u8, value: u64) {
        self.take(&BusOp::MmioWrite { addr, size, value });
    }
    fn pio_in(&mut self, port: u16, size: u8) -> u32 {
        match self.take(&BusOp::PioIn {
            port,
            size,
            value: 0,
        }) {
            Some(BusOp::PioIn { value, .. }) => value,
            _ => u32::MAX,
        }
    }
    fn pio_out(&mut self, port: u16, size: u8, value: u32) {
        self.take(&BusOp::PioOut { port, size, value });
    }
    fn set_now(&mut self, retired: u64) {
        self.take(&BusOp::Now(retired));
    }
    fn msr_read(&mut self, msr: u32) -> Option<u64> {
        match self.take(&BusOp::MsrRead { msr, value: None }) {
            Some(BusOp::MsrRead { value, .. }) => value,
            _ => None,
        }
    }
    fn msr_write(&mut self, msr: u32, value: u64) -> bool {
        match self.take(&BusOp::MsrWrite {
            msr,
            value,
            claimed: false,
        }) {
            Some(BusOp::MsrWrite { claimed, .. }) => claimed,
            _ => false,
        }
    }
}

/// Append `block`'s instructions to `out`, one per line after `prefix`: address and Intel
/// syntax (the divergence report; the JIT's IR dump).
pub(crate) fn guest_listing(out: &mut String, block: &Block, prefix: &str) {
    let mut fmt = IntelFormatter::new();
    for di in &block.insns {
        let mut s = String::new();
        fmt.format(&di.ins, &mut s);
        let _ = writeln!(out, "{prefix}{:016x}  {s}", di.ins.ip());
    }
}
