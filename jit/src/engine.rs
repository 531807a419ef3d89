//! The JIT engine: the dispatcher (block lookup, tiering, budget check at block entry), the
//! translation cache (keyed like the interpreter's block cache, invalidated through the
//! pages' code versions, bounded) and statistics.

use crate::chain::{ChainEntry, ChainTable};
use crate::compiler::{BaseRequest, BlockFn, Compiler};
use crate::frame::{ret, Frame};
use crate::page_gen::{Epochs, Gens, PageCert};
use crate::step::interp_block;
use cranelift_module::FuncId;
use lockstep_interp::decode::{Block, BlockKey, FixedMap};
use lockstep_interp::mmu::{Access, Tlb};
use lockstep_interp::{Bus, Cpu, Ctx, Engine, Exit, ExitReason, GuestRam};
use std::sync::Arc;
use std::time::Instant;

/// Under `Verify`, the most instructions one dispatch may run through the jumps of a region.
const VERIFY_REGION_SPAN: u64 = 2000;

/// Most instructions in a baseline trace (`Jit::base_trace`): well inside a packed exit
/// word's count (`ret::pack`).
const BASE_TRACE_INSNS: usize = 64;

/// JIT settings.
#[derive(Clone, Debug)]
pub struct JitConfig {
    /// A block is interpreted this many times before it is compiled (0 and 1: compile on first
    /// execution).
    pub threshold: u32,
    /// Most compiled blocks kept; when reached, the whole cache and module are flushed.
    pub max_compiled: usize,
    /// Most cache entries (compiled or not) before a flush.
    pub max_entries: usize,
    /// Compiled blocks are finalised (made callable) in batches of this many, or as soon as
    /// a waiting block has run `FINALIZE_WAIT` (64) more times.
    pub batch: usize,
    /// Keep each block's Cranelift IR text (for `--verify` reports). Changes no code.
    pub keep_ir: bool,
    /// Lower the core subset natively; `false` sends every instruction through the trampoline.
    pub native: bool,
    /// Cranelift optimisation level: "none", "speed" or "speed_and_size", for regions
    /// without a loop, and for regions with one. Host-side tuning only (the emitted code's
    /// guest-visible behaviour is the same).
    pub opt_level: &'static str,
    pub loop_opt_level: &'static str,
    /// Let compiled blocks jump to their compiled successors directly (`crate::chain`);
    /// `false` returns to the dispatcher after every block (same results, for comparison).
    pub chain: bool,
    /// Most guest blocks the region search collects (the hot block and the blocks of its code
    /// page its branches reach, that have run before; the function keeps those on loops
    /// through the hot block, see `region_shape`); 1 compiles single blocks.
    pub region_blocks: usize,
    /// Most guest instructions in one region.
    pub region_insns: usize,
    /// Regions keep every warm block of the entry's page its branches reach (`true`), or
    /// only the loops through the entry (`false`).
    pub dag_regions: bool,
    /// Compile single blocks outside loops whose every instruction the baseline tier covers
    /// with it (`crate::base`: machine code without Cranelift) instead of Cranelift.
    pub baseline: bool,
    /// Runs (entries into its code) after which a baseline function is compiled again by
    /// Cranelift, whose code is faster for hot blocks; 0: never (see `ret::PROMOTE`).
    pub promote: u32,
    /// Baseline functions of fewer instructions are never promoted (loops and functions that
    /// call themselves are, whatever their length). Default `usize::MAX`: only those —
    /// a block outside loops runs about as fast in the baseline tier as lifted, without
    /// its counter at every entry or the Cranelift compile (docs/jit.md, "Promotion").
    pub promote_min_insns: usize,
    /// Guest instructions from which a region's deferring exits share write-back tails
    /// (`lift::SHARED_TAILS_MIN`, the default; tests lower it to run the tails in small
    /// regions).
    pub shared_exit_tails_min: usize,
    /// Most blocks in a baseline trace (`crate::base::compile`): a block the baseline tier
    /// takes is compiled together with up to this many minus one blocks of its page that
    /// it goes on to, one after the other (1: single blocks).
    pub base_trace: usize,
    /// A loop whose blocks do SSE/AVX floating-point arithmetic and whose entry block the
    /// baseline tier covers is compiled there (the entry block and its trace), and never
    /// promoted, instead of as a Cranelift loop region: the baseline code runs the guest's
    /// floating-point instructions on the host with the host's MXCSR collecting their flags,
    /// where the lifted code checks every operand and result (`lift::sse_fp`); measured in
    /// docs/jit.md ("Floating-point loops").
    pub fp_loops_base: bool,
    /// A loop that makes a near call (a region block ends in one: `region::return_sites`),
    /// with an entry block the baseline tier covers, is compiled there (as
    /// `fp_loops_base`): every round that calls would leave a Cranelift region and enter it
    /// again on return, through the region's prologue and epilogue.
    pub call_loops_base: bool,
    /// Any other loop with an entry block the baseline tier covers goes there first (its
    /// entry block and trace), its rounds and entries counted down from `promote`; the
    /// Cranelift loop region (the one the search found at the threshold) comes with the
    /// promotion. A loop that runs only some thousand rounds does not pay for a region
    /// (~1–4 ms of Cranelift each); measured in docs/jit.md ("Loops to the baseline tier
    /// first", session 40).
    pub loops_base_first: bool,
    /// A member of such a loop that becomes due for a compile from the dispatcher (a way the
    /// head's trace does not take) is compiled by the baseline tier alone — no trace, no
    /// loop, no run counter — and goes on to the head's function through a chained exit,
    /// instead of promoting the head's region at once: the loop's rounds keep counting at
    /// the head, and a loop that runs only some thousand rounds never pays for a region.
    pub members_alone: bool,
    /// A baseline trace or a loop region may take in the function an indirect near CALL of
    /// it went to while the calling block was interpreted (the same target on
    /// [`INLINE_CALL_RUNS`] runs in a row), even in another code page: the call then goes on
    /// into it without leaving when its run-time target is that function and that page
    /// still holds the same code under the same translation (checked on the way in), and
    /// its RET comes back to the return site. (glibc's `qsort` calls its comparator so on
    /// every comparison; its loops stay `call_loops_base` loops, whose traces take it in.)
    pub inline_calls: bool,
    /// A block in a function that calls itself (`region::self_recursive`) is compiled with
    /// every block of its page around it that has run (see `Jit::region_of`): the recursive
    /// calls and their returns stay jumps inside one Cranelift function instead of leaving
    /// and entering nested loop regions on every call. With the baseline tier, the block
    /// goes there first and the region comes with its promotion (`promote` runs later).
    pub recursive_regions: bool,
    /// Chained jumps count themselves (`JitStats::chained_runs`, `chain-rate` in the
    /// statistics): a read-modify-write of one frame field per jump, ~5% of heap's run time
    /// (session 35). On by default; the command line turns it on only when the statistics
    /// are printed ([`stats_requested`]).
    pub count_chains: bool,
    /// A baseline function's direct exit jumps straight to its target's fast entry once its
    /// link holds a baseline function (`crate::patch`). On by default;
    /// `LOCKSTEP_JIT_PATCH=0` turns it off (for measurements).
    pub patch_exits: bool,
    /// A block the baseline tier takes on its own — no loop through it, every instruction
    /// covered (`base::covers`) — is compiled when it has run this percentage of the
    /// threshold, not the whole (100: at the threshold). Loops wait for the threshold: their
    /// region search and shape want their blocks' counts.
    pub base_early_percent: u32,
    /// Test-only: flip bit 0 of RAX after every compiled block, so that `Verify` has a
    /// divergence to find. Never set outside tests.
    pub test_corrupt_rax: bool,
    /// Test-only: flip bit 0 of the RAM byte at this physical address after every compiled
    /// block (as a wrong store would), for `Verify` to find. Never set outside tests.
    pub test_corrupt_byte: Option<u64>,
}

impl Default for JitConfig {
    fn default() -> Self {
        JitConfig {
            // Measured (docs/jit.md, "Threshold"; session 11): callgrind's host instructions
            // and its cache-simulated cycle estimate both favour 2000 over 3000 for a boot
            // and for user programs.
            threshold: 2000,
            max_compiled: 1 << 16,
            max_entries: 1 << 18,
            batch: 16,
            keep_ir: false,
            native: true,
            // Measured (docs/jit.md, "Compilation"): "speed" costs compile time that
            // only loops earn back.
            opt_level: "none",
            loop_opt_level: "speed",
            chain: true,
            region_blocks: 12,
            region_insns: 512,
            dag_regions: false,
            // The tier and its promotion settings: measured (docs/jit.md, "Baseline tier"),
            // callgrind, whole bench runs.
            baseline: true,
            promote: 50_000,
            promote_min_insns: usize::MAX,
            shared_exit_tails_min: crate::lift::SHARED_TAILS_MIN,
            base_trace: 4,
            fp_loops_base: true,
            call_loops_base: true,
            loops_base_first: true,
            members_alone: true,
            inline_calls: true,
            recursive_regions: true,
            count_chains: true,
            patch_exits: true,
            // Measured (docs/jit.md, "Early compiles", sessions 36 and 43).
            base_early_percent: 15,
            test_corrupt_rax: false,
            test_corrupt_byte: None,
        }
    }
}

/// Counters for `--stats` and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct JitStats {
    /// Blocks compiled (defined in the module), i.e. region entries.
    pub compiled: u64,
    /// Guest blocks lowered into them (a block may be part of several regions), and the
    /// branches between them that became jumps inside a function.
    pub region_blocks: u64,
    pub region_edges: u64,
    /// ... of which check no budget (`region::budget_checks`: they close no cycle).
    pub region_free_edges: u64,
    /// Cache entries that run a region's function from one of its other members
    /// (`Compiled::member_entries`) instead of compiling their own.
    pub member_entries: u64,
    /// Accesses lowered as members of a page group carried from their block's previous run
    /// (a one-block loop; `lift::group::Carry`).
    pub carried_accesses: u64,
    /// Page groups handed to region members by their edges (`lift::LowerStats::inherited`).
    pub inherited_groups: u64,
    /// `fold_flags` helper calls emitted (cold and rare paths).
    pub dyn_folds: u64,
    /// Blocks compiled by the baseline tier (`crate::base`), of `compiled`.
    pub baseline: u64,
    /// Blocks compiled into baseline functions after their first block (traces, see
    /// `crate::base::compile`).
    pub traced: u64,
    /// Baseline functions compiled again by Cranelift after `JitConfig::promote` runs (also
    /// counted in `compiled`).
    pub promoted: u64,
    /// Floating-point loops compiled by the baseline tier (`JitConfig::fp_loops_base`), of
    /// `baseline`.
    pub fp_loops: u64,
    /// Loops that make a call compiled by the baseline tier (`JitConfig::call_loops_base`),
    /// of `baseline`.
    pub call_loops: u64,
    /// Functions compiled (baseline traces and regions) that took in the function an
    /// indirect CALL of theirs goes to (`JitConfig::inline_calls`).
    pub inlined_calls: u64,
    /// Recursive regions compiled (`JitConfig::recursive_regions`).
    pub recursive: u64,
    /// Recursive regions not compiled at their function's promotion: its runs were long
    /// (`Jit::tier_up`).
    pub recursion_declined: u64,
    /// Host time spent compiling and finalising, in nanoseconds.
    pub compile_ns: u64,
    /// Machine-code bytes compiled.
    pub code_bytes: u64,
    /// Guest instructions in compiled blocks lowered natively / through the trampoline.
    pub native_insns: u64,
    pub helper_insns: u64,
    /// Block executions in compiled code entered from the dispatcher / in the interpreter.
    pub compiled_runs: u64,
    /// Block executions entered by a chained jump from another compiled block.
    pub chained_runs: u64,
    pub interp_runs: u64,
    /// Translation-cache lookups by the dispatcher, and those that found a valid entry.
    pub lookups: u64,
    pub lookup_hits: u64,
    /// Lookups answered by the direct-mapped front table (no map probe).
    pub front_hits: u64,
    /// Of those, the ones answered without the walk, key comparison and validity check (the
    /// execute TLB still hits with the slot's address and the code epoch is unchanged; see
    /// `Front`).
    pub front_fast: u64,
    /// Entries in the translation cache (compiled or not) when the statistics were taken.
    pub cache_entries: u64,
    /// Whole-cache flushes (size limit).
    pub flushes: u64,
    /// Compiled blocks left before an instruction whose memory access missed its inline fast
    /// path (a TLB miss, a page crossing, a device, a store into decoded code, a fault); the
    /// interpreter then ran from it (see `lift::mem`).
    pub accesses_deferred: u64,
    /// Blocks left to the interpreter for good because they are not 64-bit code.
    pub interp_only_blocks: u64,
    /// Blocks left to the interpreter because their page was compiled too often (code
    /// rewritten again and again; see `MAX_PAGE_COMPILES`).
    pub smc_pages_interpreted: u64,
    /// Blocks Cranelift refused (they stay interpreted) and the last error.
    pub compile_errors: u64,
    pub last_error: Option<String>,
    /// Baseline exit jumps pointed at a fast entry (`crate::patch`), counting re-points.
    pub patched_exits: u64,
}

impl JitStats {
    /// Of the compiled block executions, the share entered by a chained jump.
    pub fn chain_rate(&self) -> f64 {
        let n = self.compiled_runs + self.chained_runs;
        if n > 0 {
            self.chained_runs as f64 / n as f64
        } else {
            0.0
        }
    }

    /// Of all block executions, the share run as compiled code.
    pub fn compiled_rate(&self) -> f64 {
        let n = self.compiled_runs + self.chained_runs + self.interp_runs;
        if n > 0 {
            (self.compiled_runs + self.chained_runs) as f64 / n as f64
        } else {
            0.0
        }
    }

    /// Of the dispatcher's translation-cache lookups, the share that found a valid entry.
    pub fn hit_rate(&self) -> f64 {
        if self.lookups > 0 {
            self.lookup_hits as f64 / self.lookups as f64
        } else {
            0.0
        }
    }

    /// Mean compile time per block, in microseconds.
    pub fn us_per_block(&self) -> f64 {
        if self.compiled > 0 {
            self.compile_ns as f64 / self.compiled as f64 / 1000.0
        } else {
            0.0
        }
    }

    /// One-line summary.
    pub fn summary(&self) -> String {
        let us = if self.compiled > 0 {
            self.compile_ns as f64 / self.compiled as f64 / 1000.0
        } else {
            0.0
        };
        let runs = self.compiled_runs + self.chained_runs + self.interp_runs;
        let pct = if runs > 0 {
            100.0 * (self.compiled_runs + self.chained_runs) as f64 / runs as f64
        } else {
            0.0
        };
        let ins = self.native_insns + self.helper_insns;
        let native = if ins > 0 {
            100.0 * self.native_insns as f64 / ins as f64
        } else {
            0.0
        };
        format!(
            "jit: compiled={} baseline={} traced={} promoted={} fp-loops={} call-loops={} inlined-calls={} recursive={} recursion-declined={} region-blocks={} region-edges={} free-edges={} member-entries={} carried={} inherited-groups={} us/block={us:.1} compile-ms={} code={}KiB entries={} hit-rate={:.1}% front-hits={:.1}% front-fast={:.1}% native={native:.1}% compiled-runs={pct:.1}% chain-rate={:.1}% chained={} flushes={} errors={} dispatches={} interp-runs={} deferred={} patched={}",
            self.compiled,
            self.baseline,
            self.traced,
            self.promoted,
            self.fp_loops,
            self.call_loops,
            self.inlined_calls,
            self.recursive,
            self.recursion_declined,
            self.region_blocks,
            self.region_edges,
            self.region_free_edges,
            self.member_entries,
            self.carried_accesses,
            self.inherited_groups,
            self.compile_ns / 1_000_000,
            self.code_bytes / 1024,
            self.cache_entries,
            100.0 * self.hit_rate(),
            100.0 * self.front_hits as f64 / self.lookups.max(1) as f64,
            100.0 * self.front_fast as f64 / self.lookups.max(1) as f64,
            100.0 * self.chain_rate(),
            self.chained_runs,
            self.flushes,
            self.compile_errors,
            self.lookups,
            self.interp_runs,
            self.accesses_deferred,
            self.patched_exits
        )
    }
}

enum Tier {
    /// Interpreted, counting executions.
    Cold,
    /// Defined in the module, waiting for the batch to be finalised.
    Pending(FuncId),
    Ready(BlockFn),
    /// Cranelift refused it: interpreted for good.
    Failed,
}

/// What [`Jit::compile_entry`] did.
enum Compile {
    /// Defined and queued for finalisation (the entry is `Tier::Pending`).
    Done,
    /// The module was full: the cache was flushed (the entry is gone).
    Flushed,
    /// The entry's code page was compiled too often ([`MAX_PAGE_COMPILES`]).
    PageFull,
    /// The compiler refused the region (the error is in the statistics).
    Refused,
    /// Asked early (`JitConfig::base_early_percent`) for a block that is not one the
    /// baseline tier takes alone: nothing done, the entry waits for the threshold.
    NotYet,
}

const FRONT_ENTRIES: usize = 1 << 14;

/// Runs in a row with one target after which an indirect call's target may be taken into a
/// region or trace (`JitConfig::inline_calls`), at most: a quarter of the threshold when that
/// is less (a loop's blocks are interpreted until the threshold).
const INLINE_CALL_RUNS: u32 = 16;

/// The front slot of `rip` (the chain table's hash, at the front table's own width: the chain
/// table's index masked to the front's size would leave part of a larger front unused).
#[inline]
fn front_slot(rip: u64) -> usize {
    crate::chain::rip_hash(rip, FRONT_ENTRIES.trailing_zeros())
}

/// [`Front::next`] when no dispatch has followed yet.
const NO_SLOT: u32 = u32::MAX;

/// A front-table slot: the entry last found at `rip` in 64-bit mode, the physical address the
/// execute TLB gave for RIP then (`exec_phys`), and the code epoch. While the execute TLB still
/// hits with that address (a lookup, no walk) and the code epoch stays the same (no code word
/// has moved), the entry is still the valid one for RIP: the dispatcher skips the walk, the
/// key comparison and the validity check. (`u64::MAX` code epoch: not known; the epoch never
/// takes it.) The TLB lookup is redone rather than the TLB's execute epoch compared, which CR3
/// writes and evictions of other pages move: a boot took the slow path for 27% of its
/// dispatches that way, 5% this way.
///
/// `hints` are the addresses of the entry's decoded `Block` and of its instructions (zero
/// for a compiled block), only ever prefetched, never dereferenced (after a flush they may
/// point at freed memory): a block that runs in the interpreter would otherwise take three
/// cache misses one after the other (entry, block, instructions) in a boot's large working
/// set; prefetched together they overlap.
///
/// `next` is the slot of the dispatch that followed the last one through this slot
/// ([`NO_SLOT`]: none yet): while this block runs, the dispatcher prefetches what the next
/// one will need (that slot's entry and hints), so those misses overlap with this block's
/// work instead of following it. A prediction only: a wrong one costs a few prefetches.
#[derive(Clone, Copy)]
struct Front {
    idx: u32,
    next: u32,
    rip: u64,
    exec_phys: u64,
    code_epoch: u64,
    hints: [usize; 2],
}

impl Front {
    const EMPTY: Front = Front {
        idx: u32::MAX,
        next: NO_SLOT,
        rip: 0,
        exec_phys: 0,
        code_epoch: u64::MAX,
        hints: [0; 2],
    };
}

/// Ask the CPU to bring the cache line at `addr` closer (a hint: any address is fine, nothing
/// is read and nothing can fault).
#[inline(always)]
fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and has no architectural effect, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Most runs a compiled block waits (interpreted) for its batch to be finalised: a batch
/// saves `finalize_definitions` calls, but at threshold 3000 waiting another `threshold` runs
/// (as before) cost a boot 1.5 M extra interpreted block runs.
const FINALIZE_WAIT: u32 = 64;

/// Most compiles of blocks from one physical page between flushes. Real code compiles each
/// hot block of a page once (a page holds at most a few hundred blocks, most never hot); a
/// guest that rewrites its code on every iteration would otherwise be recompiled each time
/// (a host-time sink: 3000 one-instruction rewrites took 7 s in the fuzzer). Past the limit
/// the page's blocks run in the interpreter — same results, bounded compile time.
const MAX_PAGE_COMPILES: u32 = 256;

/// Functions that call themselves remembered for their promotion (`Jit::recursion_starts`).
const RECURSION_STARTS: usize = 64;

/// The most guest instructions retired (by the whole guest) per run of a function that
/// calls itself, from its first compile to its promotion, for the promotion to compile its
/// recursive region (`Jit::tier_up`): how much else runs between two of its calls.
/// Measured (callgrind, session 56): `fib` (recursion) 100 — its region saves 57% of the
/// program's time; `merge_sort` (sort) 259 and 307 — its region, 2,113 IR instructions
/// compiled in 6–15 ms, cost sort 3.2% host instructions.
const RECURSION_MAX_RUN: u64 = 200;

/// Most blocks, and instructions, of a recursive region (`JitConfig::recursive_regions`).
const RECURSIVE_BLOCKS: usize = 64;
const RECURSIVE_INSNS: usize = 1024;

/// Most blocks of a region whose search meets a `switch` jump (`region::is_switch_jump`):
/// more than `JitConfig::region_blocks`, so that an interpreter loop takes all its cases.
const SWITCH_REGION_BLOCKS: usize = 24;

/// Targets counted per switch jump (`Jit::switch_targets`).
const SWITCH_TARGETS: usize = 32;

/// One cache line: what the dispatcher reads on every lookup (the compiled function's extras
/// are in `Jit::extras`, at the same index). A compiled block runs without the dispatcher
/// touching its `Block` (another cache line, often a miss in a boot's large working set):
/// `check` and `len` answer validity and the budget check.
#[repr(align(64))]
struct Entry {
    key: BlockKey,
    block: Arc<Block>,
    /// [`crate::chain::block_check`]: for a block in one page (its key's), the page number and
    /// the code word ([`GuestRam::code_word`]) the page must have for the block to be valid —
    /// also what a chain entry for it carries; `u64::MAX` otherwise: ask [`Block::valid`].
    check: u64,
    count: u32,
    /// Instructions in the block.
    len: u32,
    tier: Tier,
}

// One cache line.
const _: () = assert!(core::mem::size_of::<Entry>() == 64);

impl Entry {
    fn new(key: BlockKey, block: Arc<Block>) -> Entry {
        debug_assert_eq!(key, block.key());
        Entry {
            key,
            len: block.insns.len() as u32,
            check: crate::chain::block_check(&block),
            block,
            count: 0,
            tier: Tier::Cold,
        }
    }

    /// [`Block::valid`], from the entry's own line when the block lies in one page.
    #[inline]
    fn valid(&self, ram: &GuestRam) -> bool {
        if self.check != u64::MAX {
            ram.code_word(self.check >> 32) == self.check as u32
        } else {
            self.block.valid(ram)
        }
    }
}

/// What a compiled entry keeps besides its function.
struct CompiledExtra {
    /// The other blocks compiled into this entry's function, held (never read) so that they
    /// stay alive: compiled code points at their decoded instructions.
    _region: Vec<Arc<Block>>,
    /// The function's Cranelift IR, when kept (`JitConfig::keep_ir`).
    ir: Option<String>,
    /// Bytes of machine code.
    code_len: usize,
}

/// The JIT engine. Implements the same [`Engine`] contract as the interpreter.
pub struct Jit {
    pub config: JitConfig,
    /// [`early_count`] of the configuration, taken at construction (as the compiler's
    /// baseline settings are): the dispatcher compares every cold entry's count with it.
    early: u32,
    /// The translation cache: entries by index, and their keys. Entries are only replaced
    /// (same key) or all dropped at once (flush), so an index stays valid until a flush.
    entries: Vec<Entry>,
    /// Per entry (same index): what a compiled entry keeps besides its function.
    extras: Vec<Option<Box<CompiledExtra>>>,
    /// `LOCKSTEP_JIT_DUMP_CODE` (read once): where to write finalised functions' code.
    dump_code: Option<std::ffi::OsString>,
    index: FixedMap<BlockKey, u32>,
    /// Direct-mapped by RIP, in front of the map: the entry last found at that RIP (used when
    /// its key is the one looked up; saves the map probe), and when nothing it depends on has
    /// changed since, without translating RIP again (see [`Front`]).
    front: Box<[Front]>,
    /// The front slot of the last dispatch (whose `next` the following dispatch sets).
    prev_slot: usize,
    /// Compiles per physical code page since the last flush: a page past
    /// [`MAX_PAGE_COMPILES`] (code rewritten again and again) stays interpreted.
    page_compiles: FixedMap<u64, u32>,
    /// RIPs a function has been made callable for since the last flush: only links to these
    /// can hold a function that a new one replaces (see `Jit::maybe_finalize`).
    made_rips: FixedMap<u64, ()>,
    /// Blocks compiled into a recursive region since the last flush
    /// (`JitConfig::recursive_regions`): one reaching the threshold later is compiled alone.
    recursive_members: FixedMap<BlockKey, ()>,
    /// Functions that call themselves, compiled to the baseline tier first for a recursive
    /// region at their promotion, with the retired count then (see `Jit::tier_up`); at most
    /// [`RECURSION_STARTS`].
    recursion_starts: Vec<(BlockKey, u64)>,
    /// The retired count when the dispatcher last ran an entry (for `recursion_starts`).
    retired_now: u64,
    /// [`RECURSION_MAX_RUN`], or `LOCKSTEP_JIT_REC_MAX` (for measurements).
    recursion_max_run: u64,
    /// The loop regions found at the threshold for loops that went to the baseline tier
    /// first (`JitConfig::loops_base_first`), by entry: their promotion compiles that region
    /// (its blocks as the cache then holds them), not one searched again, which would take
    /// every block that has run since (nbody: 2,776 IR instructions instead of 165).
    base_first_regions: FixedMap<BlockKey, Vec<BlockKey>>,
    /// The other members of those regions, each with its region's entry: a member reaching
    /// the threshold while the entry still runs its baseline code promotes the entry (the
    /// loop is entered at its head, not mid-body where that member starts).
    base_first_members: FixedMap<BlockKey, BlockKey>,
    /// Blocks that end in an indirect near CALL (`JitConfig::inline_calls`): the block the
    /// call went to the last time the block was interpreted, and on how many runs in a row.
    call_targets: FixedMap<BlockKey, (BlockKey, u32)>,
    /// The page generations handed out (`crate::page_gen`): the frame's current one, and
    /// what compiles certify their page checks under. Boxed: frames point at it.
    gens: Box<Gens>,
    /// Blocks that end in a `switch` jump (`region::is_switch_jump`): where the jump went
    /// while the block was interpreted, each target with how many times (at most
    /// [`SWITCH_TARGETS`] targets; later new ones are not counted). A region compiled with
    /// the block compares the jump's run-time target with the frequent ones first.
    switch_targets: FixedMap<BlockKey, Vec<(u64, u32)>>,
    /// The last interpreted block, when it ended in an indirect near CALL that retired, and
    /// the call's target: the next dispatch, when it is at that target, records its block.
    last_call: Option<(BlockKey, u64)>,
    compiler: Compiler,
    chain: ChainTable,
    /// `run_block` (Verify): one block per dispatch, no chained jumps.
    single_block: bool,
    /// What the last dispatch did, kept only while `single_block` (for `Verify`).
    last: Dispatched,
    pending: Vec<BlockKey>,
    pub stats: JitStats,
}

impl Default for Jit {
    fn default() -> Self {
        Self::new(JitConfig::default())
    }
}

/// What one dispatch did (for `Verify`).
pub struct Dispatched {
    pub key: Option<BlockKey>,
    /// The block ran as compiled code.
    pub compiled: bool,
    /// `Some`: the engine must stop.
    pub stop: Option<ExitReason>,
}

impl Dispatched {
    const NONE: Dispatched = Dispatched {
        key: None,
        compiled: false,
        stop: None,
    };
}

impl Jit {
    /// A JIT with `config`. The environment variables `LOCKSTEP_JIT_OPT` (none, speed,
    /// speed_and_size: one level for all regions; `<level>,<level>`: without and with a loop)
    /// and `LOCKSTEP_JIT_REGION` (most blocks per region; 1: single blocks) override
    /// `config.opt_level`/`loop_opt_level` and `config.region_blocks`, and `LOCKSTEP_JIT_DAG`
    /// and `LOCKSTEP_JIT_BASE` (0/1) `config.dag_regions` and `config.baseline`, and
    /// `LOCKSTEP_JIT_PROMOTE` (runs), `LOCKSTEP_JIT_PROMOTE_MIN` (instructions) and
    /// `LOCKSTEP_JIT_BASE_TRACE` (blocks) `config.promote`, `config.promote_min_insns` and
    /// `config.base_trace`, `LOCKSTEP_JIT_BASE_EARLY` (percent) `config.base_early_percent`,
    /// and `LOCKSTEP_JIT_FP_LOOP_BASE` and `LOCKSTEP_JIT_CALL_LOOP_BASE`
    /// (0/1) `config.fp_loops_base` and `config.call_loops_base`, and likewise
    /// `LOCKSTEP_JIT_LOOPS_BASE_FIRST`, `LOCKSTEP_JIT_MEMBERS_ALONE`,
    /// `LOCKSTEP_JIT_INLINE_CALLS` and `LOCKSTEP_JIT_RECURSIVE` (host-side tuning for
    /// measurements; the guest-visible results are the same), and `LOCKSTEP_JIT_REC_MAX`
    /// (instructions per run, [`RECURSION_MAX_RUN`]).
    pub fn new(mut config: JitConfig) -> Self {
        if std::env::var("LOCKSTEP_JIT_PATCH").is_ok_and(|v| v == "0") {
            config.patch_exits = false;
        }
        if let Ok(o) = std::env::var("LOCKSTEP_JIT_OPT") {
            let level = |s: &str| match s {
                "none" => "none",
                "speed_and_size" => "speed_and_size",
                _ => "speed",
            };
            let (plain, looped) = o.split_once(',').unwrap_or((&o, &o));
            config.opt_level = level(plain);
            config.loop_opt_level = level(looped);
        }
        if let Some(n) = std::env::var("LOCKSTEP_JIT_REGION")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            config.region_blocks = n.max(1);
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_DAG") {
            config.dag_regions = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_BASE") {
            config.baseline = v == "1";
        }
        if let Some(n) = std::env::var("LOCKSTEP_JIT_PROMOTE")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
        {
            config.promote = n;
        }
        if let Some(n) = std::env::var("LOCKSTEP_JIT_BASE_TRACE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            config.base_trace = n;
        }
        if let Some(n) = std::env::var("LOCKSTEP_JIT_BASE_EARLY")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
        {
            config.base_early_percent = n;
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_FP_LOOP_BASE") {
            config.fp_loops_base = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_CALL_LOOP_BASE") {
            config.call_loops_base = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_LOOPS_BASE_FIRST") {
            config.loops_base_first = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_MEMBERS_ALONE") {
            config.members_alone = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_INLINE_CALLS") {
            config.inline_calls = v == "1";
        }
        if let Ok(v) = std::env::var("LOCKSTEP_JIT_RECURSIVE") {
            config.recursive_regions = v == "1";
        }
        if let Some(n) = std::env::var("LOCKSTEP_JIT_PROMOTE_MIN")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            config.promote_min_insns = n;
        }
        let (opt_level, loop_opt_level) = (config.opt_level, config.loop_opt_level);
        let chain = ChainTable::default();
        let mut compiler =
            Compiler::with_opt_levels(opt_level, loop_opt_level, chain.addr(), config.count_chains);
        compiler.set_baseline(config.baseline, config.promote, config.promote_min_insns);
        compiler.set_patch_exits(config.patch_exits);
        compiler.shared_tails_min = config.shared_exit_tails_min;
        Jit {
            early: early_count(&config),
            config,
            entries: Vec::new(),
            extras: Vec::new(),
            dump_code: std::env::var_os("LOCKSTEP_JIT_DUMP_CODE"),
            index: FixedMap::default(),
            front: vec![Front::EMPTY; FRONT_ENTRIES].into_boxed_slice(),
            prev_slot: 0,
            page_compiles: FixedMap::default(),
            made_rips: FixedMap::default(),
            recursive_members: FixedMap::default(),
            recursion_starts: Vec::new(),
            retired_now: 0,
            recursion_max_run: std::env::var("LOCKSTEP_JIT_REC_MAX")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(RECURSION_MAX_RUN),
            base_first_regions: FixedMap::default(),
            base_first_members: FixedMap::default(),
            call_targets: FixedMap::default(),
            gens: Box::new(Gens::new()),
            switch_targets: FixedMap::default(),
            last_call: None,
            compiler,
            chain,
            single_block: false,
            last: Dispatched::NONE,
            pending: Vec::new(),
            stats: JitStats::default(),
        }
    }

    /// Drop every translation (compiled or not).
    pub fn flush(&mut self) {
        self.entries.clear();
        self.extras.clear();
        self.index.clear();
        self.front.fill(Front::EMPTY);
        self.page_compiles.clear();
        self.made_rips.clear();
        self.recursive_members.clear();
        self.recursion_starts.clear();
        self.base_first_regions.clear();
        self.base_first_members.clear();
        self.call_targets.clear();
        self.switch_targets.clear();
        self.last_call = None;
        self.pending.clear();
        // No chained jump may reach a function of the module about to be freed.
        self.chain.clear();
        self.compiler.reset();
        self.stats.flushes += 1;
    }

    fn entry(&self, key: &BlockKey) -> Option<&Entry> {
        self.index.get(key).map(|&i| &self.entries[i as usize])
    }

    fn entry_mut(&mut self, key: &BlockKey) -> Option<&mut Entry> {
        self.index.get(key).map(|&i| &mut self.entries[i as usize])
    }

    /// Store `e` under its key (replacing an entry with the same key); its index.
    fn insert_entry(&mut self, e: Entry) -> usize {
        match self.index.get(&e.key) {
            Some(&i) => {
                self.entries[i as usize] = e;
                self.extras[i as usize] = None;
                i as usize
            }
            None => {
                let i = self.entries.len();
                self.index.insert(e.key, i as u32);
                self.entries.push(e);
                self.extras.push(None);
                i
            }
        }
    }

    /// The decoded block and IR text (if kept) cached under `key`.
    pub fn block_info(&self, key: &BlockKey) -> Option<(Arc<Block>, Option<&str>)> {
        let i = *self.index.get(key)? as usize;
        let ir = self.extras[i].as_ref().and_then(|x| x.ir.as_deref());
        Some((self.entries[i].block.clone(), ir))
    }

    /// Run exactly one block (compiled or interpreted) within the budget; used by `Verify`.
    pub fn run_block(
        &mut self,
        cpu: &mut Cpu,
        ram: &mut GuestRam,
        bus: &mut dyn Bus,
        budget: u64,
    ) -> (Exit, Dispatched) {
        let start = cpu.retired;
        cpu.budget_end = start.saturating_add(budget);
        let mut ctx = Ctx::new(cpu, ram, bus);
        let d = if budget == 0 {
            Dispatched {
                stop: Some(ExitReason::Budget),
                ..Dispatched::NONE
            }
        } else {
            self.single_block = true;
            self.last = Dispatched::NONE;
            let stop = self.dispatch(&mut ctx);
            self.single_block = false;
            Dispatched {
                stop,
                ..std::mem::replace(&mut self.last, Dispatched::NONE)
            }
        };
        let exit = Exit {
            retired: ctx.cpu.retired - start,
            reason: d.stop.unwrap_or(ExitReason::Budget),
        };
        (exit, d)
    }

    /// Look up (or decode) the block at RIP, promote it through the tiers, and run it.
    /// The end of a dispatch: what it did is kept for `Verify` (only while `single_block`);
    /// the engine sees whether to stop.
    #[inline(always)]
    fn done(
        &mut self,
        key: Option<BlockKey>,
        compiled: bool,
        stop: Option<ExitReason>,
    ) -> Option<ExitReason> {
        if self.single_block {
            self.last = Dispatched {
                key,
                compiled,
                stop: None,
            };
        }
        stop
    }

    /// Prefetch what the dispatch through front slot `next` (predicted to follow this one)
    /// will read: its slot, entry and hints (see [`Front::next`]).
    #[inline(always)]
    fn prefetch_next(&self, next: u32) {
        if let Some(n) = self.front.get(next as usize) {
            prefetch(self.entries.as_ptr().wrapping_add(n.idx as usize) as usize);
            if n.hints[0] != 0 {
                prefetch(n.hints[0]);
                prefetch(n.hints[1]);
            }
        }
    }

    fn dispatch(&mut self, ctx: &mut Ctx) -> Option<ExitReason> {
        match self.compiler.scan_exits_if_due() {
            Ok(false) => {}
            Ok(true) => self.stats.patched_exits = self.compiler.patched_exits(),
            Err(msg) => {
                self.stats.compile_errors += 1;
                self.stats.last_error = Some(msg);
                self.flush();
            }
        }
        let rip = ctx.cpu.state.rip;
        self.stats.lookups += 1;
        let slot = front_slot(rip);
        self.front[self.prev_slot].next = slot as u32;
        self.prev_slot = slot;
        let front = self.front[slot];
        let long_mode = ctx.cpu.state.in_64bit_mode();
        if front.rip == rip && long_mode {
            prefetch(self.entries.as_ptr().wrapping_add(front.idx as usize) as usize);
            if front.hints[0] != 0 {
                prefetch(front.hints[0]);
                prefetch(front.hints[1]);
            }
            self.prefetch_next(front.next);
            // The privilege set first: swapping it moves the execute epoch.
            ctx.sync_tlb_privilege();
            if front.code_epoch == ctx.ram.code_epoch()
                && ctx.cpu.tlb.lookup(rip, Access::Exec) == Some(front.exec_phys)
            {
                if let Some(key) = self.entries.get(front.idx as usize).map(|e| e.key) {
                    self.stats.front_hits += 1;
                    self.stats.front_fast += 1;
                    return self.run_entry(ctx, key, front.idx as usize, true);
                }
            }
        }
        // Translation, and in legacy modes the CS-limit window (part of the key).
        let key = match ctx.block_key() {
            Ok((k, _)) => k,
            Err(f) => return self.done(None, false, Some(ExitReason::Exception(f))),
        };
        let f = front.idx as usize;
        let found = if self.entries.get(f).is_some_and(|e| e.key == key) {
            self.stats.front_hits += 1;
            Some(f)
        } else {
            self.index.get(&key).map(|&i| i as usize)
        };
        let (idx, valid) = match found {
            Some(i) if self.entries[i].valid(ctx.ram) => (i, true),
            _ => {
                let block = match ctx.block_at_rip() {
                    // The JIT keeps its own copy of the decoded block (the interpreter's cache
                    // may reuse the arena slot later).
                    Ok(i) => Arc::new(ctx.cpu.blocks.block(i).clone()),
                    Err(f) => return self.done(Some(key), false, Some(ExitReason::Exception(f))),
                };
                if self.entries.len() >= self.config.max_entries {
                    self.flush();
                }
                let i = self.insert_entry(Entry::new(key, block));
                (i, false)
            }
        };
        // In 64-bit mode RIP is the linear address; legacy modes are always looked up in full
        // (as the interpreter's block cache does: `Ctx::code_lookup_epochs`).
        let (exec_phys, code_epoch) = match ctx.cpu.tlb.lookup(rip, Access::Exec) {
            Some(phys) if long_mode => (phys, ctx.ram.code_epoch()),
            _ => (0, u64::MAX),
        };
        // A compiled block runs without its `Block` (reading the instructions' address here
        // would be a miss of its own): hints only for a block that may still be interpreted.
        let e = &self.entries[idx];
        let hints = if matches!(e.tier, Tier::Ready(_)) {
            [0; 2]
        } else {
            [
                Arc::as_ptr(&e.block) as usize,
                e.block.insns.as_ptr() as usize,
            ]
        };
        self.front[slot] = Front {
            idx: idx as u32,
            next: NO_SLOT,
            rip,
            exec_phys,
            code_epoch,
            hints,
        };
        self.run_entry(ctx, key, idx, valid)
    }

    /// Promote the entry `idx` (found under `key`; `valid`: found valid, not decoded now)
    /// through the tiers, and run it.
    #[inline(always)]
    fn run_entry(
        &mut self,
        ctx: &mut Ctx,
        key: BlockKey,
        idx: usize,
        valid: bool,
    ) -> Option<ExitReason> {
        if self.last_call.is_some() {
            self.note_call_target(&key);
        }
        let threshold = self.config.threshold;
        let early = self.early;
        let rip = ctx.cpu.state.rip;
        // The common case (a valid entry that needs no tier change) touches only the entry.
        let mut due = true;
        if valid {
            self.stats.lookup_hits += 1;
            let e = &mut self.entries[idx];
            let next = e.count.saturating_add(1);
            if matches!(e.tier, Tier::Ready(_) | Tier::Failed)
                || (matches!(e.tier, Tier::Cold) && next < threshold && next != early)
            {
                e.count = e.count.saturating_add(1);
                due = false;
            }
        }
        // A code write noticed before this block is already reflected in the lookup above.
        ctx.cpu.smc = false;
        if due {
            self.retired_now = ctx.cpu.retired;
            // The baseline tier runs floating point only under the default MXCSR environment
            // (every exception masked, round to nearest, no DAZ/FTZ): see `compile_entry`.
            let mxcsr_default = ctx.cpu.state.mxcsr & !0x3f == 0x1f80;
            self.promote(&key, ctx.ram, &ctx.cpu.tlb, mxcsr_default);
        }
        // Promotion may have flushed the cache (or moved nothing): look the entry up again then.
        let idx = if due {
            match self.index.get(&key) {
                Some(&i) => i as usize,
                None => {
                    // A flush while promoting: run the block next time.
                    return self.done(Some(key), false, None);
                }
            }
        } else {
            idx
        };
        let e = &self.entries[idx];
        let remaining = ctx.cpu.budget_end - ctx.cpu.retired;
        // A yield request left pending by a faulting instruction (as in the interpreter, it
        // stops the engine after the next retired instruction): interpret this block, whose
        // step() honours it exactly.
        let pending_yield = ctx.cpu.yield_requested;
        if let Tier::Ready(f) = e.tier {
            if remaining >= e.len as u64 && !pending_yield {
                let mut frame = Frame::new(ctx, &mut *self.gens);
                let len = e.len as u64;
                // Other blocks may jump to it (the function checks on such an entry that it
                // is still the right code for `rip`: see `crate::chain`).
                self.chain.set(ChainEntry {
                    rip,
                    func: f as u64,
                    len,
                });
                if self.single_block || !self.config.chain {
                    frame.chain_end = 0;
                }
                if self.single_block {
                    // `Verify` compares after each dispatch: jumps inside a region are still
                    // taken (so they are checked too), for a bounded stretch.
                    frame.region_end = frame
                        .region_end
                        .min(ctx.cpu.retired.saturating_add(VERIFY_REGION_SPAN));
                }
                let retired_in = ctx.cpu.retired;
                let enter = self.compiler.enter();
                // SAFETY: `f` was compiled from `e.block`, which the entry keeps alive (blocks
                // reached by chained jumps likewise: a chain entry is only followed while the
                // epochs say its block is the valid cache entry for its RIP, and the table is
                // cleared with the module); the frame's pointers come from `ctx`, which
                // outlives the call and is not touched by Rust code while the block runs (only
                // through the frame, by the helpers).
                let word = unsafe { enter(frame.state, &mut frame, f, e.check, rip) };
                ret::apply(word, &mut ctx.cpu.state.rip, &mut ctx.cpu.retired);
                // Compiled code may leave the status flags as a record (see
                // `lift::flags::Lower::handover_record`): RFLAGS is whole from here on.
                if frame.fl_code != 0 {
                    let st = &mut ctx.cpu.state;
                    st.rflags = crate::helpers::fold_flags(
                        st.rflags,
                        frame.fl_code,
                        frame.fl_a,
                        frame.fl_b,
                        frame.fl_res,
                        frame.fl_cin,
                    );
                }
                self.stats.compiled_runs += 1;
                self.stats.chained_runs += frame.chains;
                if self.config.test_corrupt_rax {
                    ctx.cpu.state.gpr[0] ^= 1;
                }
                if let Some(b) = self.config.test_corrupt_byte {
                    if let Some(x) = ctx.ram.bytes_mut().get_mut(b as usize) {
                        *x ^= 1;
                    }
                }
                let status = word & ret::STATUS;
                let stop = if status == ret::STOP && word & ret::DEFER != 0 {
                    self.stats.accesses_deferred += 1;
                    interp_deferred(ctx)
                } else if status == ret::STOP {
                    Some(frame.exit.take().unwrap_or(ExitReason::Budget))
                } else if status == ret::PROMOTE {
                    // The entered function itself left before its first instruction when no
                    // instruction retired (a chained function's promotion comes after a whole
                    // block; chained jumps are not always counted): the block runs in the
                    // interpreter now, so that every dispatch makes progress (`Verify`
                    // compares after each one).
                    let entered_left = ctx.cpu.retired == retired_in;
                    let block = entered_left.then(|| self.entries[idx].block.clone());
                    self.tier_up(ctx);
                    if let Some(block) = block {
                        self.stats.interp_runs += 1;
                        let stop = interp_block(ctx, &block.insns);
                        return self.done(Some(key), false, stop);
                    }
                    None
                } else {
                    None
                };
                return self.done(Some(key), true, stop);
            }
        }
        self.stats.interp_runs += 1;
        // Borrowed, not cloned: an atomic count update per interpreted block is measurable.
        let block = &self.entries[idx].block;
        let calls = self.config.inline_calls && crate::region::ends_in_indirect_call(block);
        let switch = crate::region::ends_in_switch_jump(block);
        let (len, retired_in) = (block.insns.len() as u64, ctx.cpu.retired);
        let stop = interp_block(ctx, &block.insns);
        // The whole block retired, its CALL (or switch jump) too: RIP is where it went.
        if ctx.cpu.retired - retired_in == len {
            if calls {
                self.last_call = Some((key, ctx.cpu.state.rip));
            } else if switch {
                self.note_switch_target(key, ctx.cpu.state.rip);
            }
        }
        self.done(Some(key), false, stop)
    }

    /// Count `target` as a target of the switch jump ending the block `site`.
    fn note_switch_target(&mut self, site: BlockKey, target: u64) {
        let seen = self.switch_targets.entry(site).or_default();
        if let Some(t) = seen.iter_mut().find(|t| t.0 == target) {
            t.1 = t.1.saturating_add(1);
        } else if seen.len() < SWITCH_TARGETS {
            seen.push((target, 1));
        }
    }

    /// The targets of the switch jumps ending `blocks`, most frequent first (ties by
    /// address): [`crate::lift::LowerTarget::switch_order`].
    fn switch_order(&self, blocks: &[&Block]) -> Vec<u64> {
        let mut hits: Vec<(u64, u32)> = Vec::new();
        for b in blocks
            .iter()
            .filter(|b| crate::region::ends_in_switch_jump(b))
        {
            for &(rip, n) in self.switch_targets.get(&b.key()).into_iter().flatten() {
                match hits.iter_mut().find(|h| h.0 == rip) {
                    Some(h) => h.1 = h.1.saturating_add(n),
                    None => hits.push((rip, n)),
                }
            }
        }
        hits.sort_by_key(|&(rip, n)| (std::cmp::Reverse(n), rip));
        hits.into_iter().map(|(rip, _)| rip).collect()
    }

    /// The dispatch after an interpreted indirect CALL (`Jit::last_call`): when it is at the
    /// call's target, the target's block `key` is the one the call site went to (counted in a
    /// row while it stays the same).
    fn note_call_target(&mut self, key: &BlockKey) {
        let Some((site, target)) = self.last_call.take() else {
            return;
        };
        if key.rip != target {
            return;
        }
        let seen = self.call_targets.entry(site).or_insert((*key, 0));
        if seen.0 == *key {
            seen.1 = seen.1.saturating_add(1);
        } else {
            *seen = (*key, 1);
        }
    }

    /// The blocks to compile with the entry `key` (entry first): the loops through the entry
    /// among the blocks of the entry's code page that branches of the region reach and that have run at least a quarter of the
    /// threshold times, still valid, 64-bit, and ending inside the page — so the entry's validity
    /// (its page version, its translation) covers them all. With `config.recursive_regions`,
    /// when the entry's page holds a function that calls itself through the blocks around
    /// the entry (`region::self_recursive`), every block of the page they reach that has run
    /// at all, up to [`RECURSIVE_BLOCKS`] blocks and [`RECURSIVE_INSNS`] instructions: its
    /// calls and returns become jumps inside one function. The flag says which.
    fn region_of(&self, key: &BlockKey, ram: &GuestRam) -> (Vec<Arc<Block>>, bool) {
        self.region_of_warm(key, ram, self.warm_count())
    }

    /// [`Jit::region_of`] taking blocks that have run `min_count` times as warm.
    fn region_of_warm(
        &self,
        key: &BlockKey,
        ram: &GuestRam,
        min_count: u32,
    ) -> (Vec<Arc<Block>>, bool) {
        if self.recursive_members.contains_key(key) {
            // Already in a recursive region: entered from outside it (a member entry, when
            // it may be one, runs that function instead), alone.
            let alone = self.entry(key).map(|e| vec![e.block.clone()]);
            return (alone.unwrap_or_default(), false);
        }
        if self.config.recursive_regions {
            let all = self.region_search(key, ram, RECURSIVE_BLOCKS, RECURSIVE_INSNS, 1);
            if crate::region::self_recursive(&all.iter().map(|b| &**b).collect::<Vec<_>>()) {
                return (all, true);
            }
        }
        let out = self.region_search(
            key,
            ram,
            self.config.region_blocks,
            self.config.region_insns,
            min_count,
        );
        (self.region_shape(out), false)
    }

    /// The region kept for `key` when it went to the baseline tier first (see
    /// `Jit::base_first_regions`), with each block as the cache holds it now: `None` when
    /// none was kept, or the entry or any member is gone or no longer valid (a fresh search
    /// then). Taken out of the map.
    fn base_first_region(&mut self, key: &BlockKey, ram: &GuestRam) -> Option<Vec<Arc<Block>>> {
        let keys = self.base_first_regions.remove(key)?;
        keys.iter()
            .map(|k| {
                self.entry(k)
                    .filter(|e| e.valid(ram))
                    .map(|e| e.block.clone())
            })
            .collect()
    }

    /// The entry's block and the blocks of its page its branches, calls and fall-throughs
    /// reach, breadth first ([`Jit::neighbour`] with `min_count`; a switch jump's candidates
    /// with 1), at most `max_blocks` blocks ([`SWITCH_REGION_BLOCKS`] once a switch jump is
    /// met) and `max_insns` instructions (entry first).
    fn region_search(
        &self,
        key: &BlockKey,
        ram: &GuestRam,
        max_blocks: usize,
        max_insns: usize,
        min_count: u32,
    ) -> Vec<Arc<Block>> {
        let Some(entry) = self.entry(key) else {
            return Vec::new();
        };
        let mut out = vec![entry.block.clone()];
        if key.bitness != 64 || max_blocks <= 1 {
            return out;
        }
        let mut rips = vec![key.rip];
        // Each block's home: the entry's key, or for the blocks of a function taken in for an
        // indirect call (`JitConfig::inline_calls`), that function's first block's key —
        // whose code page its branches stay in.
        let mut homes = vec![*key];
        let mut insns = entry.block.insns.len();
        let mut i = 0;
        let mut max_blocks = max_blocks;
        while i < out.len() {
            let (b, home) = (out[i].clone(), homes[i]);
            i += 1;
            let mut targets = crate::region::successors(&b);
            // Its own branches' targets must be warm; the cases of a switch jump need only
            // have run (a case left out is a function exit on every run of it).
            let direct = targets.len();
            if crate::region::ends_in_switch_jump(&b) {
                targets.extend(self.jump_candidates(&home));
                max_blocks = max_blocks.max(SWITCH_REGION_BLOCKS);
            }
            let called = self.inline_target(&b, ram, min_count).map(|e| e.key);
            let homes_of = targets
                .into_iter()
                .enumerate()
                .map(|(j, t)| (t, home, if j < direct { min_count } else { 1 }))
                .chain(called.map(|k| (k.rip, k, min_count)));
            for (t, home, min) in homes_of {
                if out.len() >= max_blocks {
                    return out;
                }
                if rips.contains(&t) {
                    continue;
                }
                let Some(e) = self.neighbour(&home, t, ram, min) else {
                    continue;
                };
                let n = e.block.insns.len();
                if insns + n <= max_insns {
                    insns += n;
                    out.push(e.block.clone());
                    rips.push(t);
                    homes.push(home);
                }
            }
        }
        out
    }

    /// For a block that ends in an indirect near CALL (`JitConfig::inline_calls`): the cache
    /// entry of the block the call went to on the last [`INLINE_CALL_RUNS`] (or a quarter of
    /// the threshold, if less; or more) runs in a row that the interpreter made of it, when
    /// a region or trace may take it ([`Jit::neighbour`] in its own page, run at least
    /// `min_count` times).
    fn inline_target(&self, b: &Block, ram: &GuestRam, min_count: u32) -> Option<&Entry> {
        if !self.config.inline_calls || !crate::region::ends_in_indirect_call(b) {
            return None;
        }
        let (target, runs) = self.call_targets.get(&b.key())?;
        if *runs < INLINE_CALL_RUNS.min(self.config.threshold / 4).max(1) {
            return None;
        }
        self.neighbour(target, target.rip, ram, min_count)
    }

    /// The blocks a baseline function for the entry `key` (whose block is `first`) goes on
    /// to, in order (see `crate::base::compile`): from each block, the one its last
    /// instruction leads to without leaving — a JMP or CALL target, the target an indirect
    /// CALL went to ([`Jit::inline_target`]; the trace then follows that function's page
    /// until its RET), the way of a Jcc whose block has run more often, the fall-through of
    /// a block cut by its length, the return site of a CALL earlier in the trace after a
    /// RET — while that block is in the cache, of the same page, valid, warm (as for
    /// regions), covered by the tier and not yet in the trace; at most `config.base_trace`
    /// blocks in all, together at most [`BASE_TRACE_INSNS`] instructions.
    fn base_trace(&self, key: &BlockKey, first: &Arc<Block>, ram: &GuestRam) -> Vec<Arc<Block>> {
        let mut out: Vec<Arc<Block>> = Vec::new();
        if key.bitness != 64 || self.config.base_trace <= 1 || !crate::base::covers(first) {
            return out;
        }
        let mut rips = vec![key.rip];
        let mut insns = first.insns.len();
        let mut cur = first.clone();
        // The return sites of the trace's CALLs not yet matched by a RET, each with the key
        // whose page the trace was in at the CALL.
        let mut calls: Vec<(u64, BlockKey)> = Vec::new();
        // Whose page the trace is in: the entry's, or a function's taken in for an indirect
        // CALL (`JitConfig::inline_calls`; the code checks the page on the way in).
        let mut home = *key;
        let warm = self.warm_beside(key);
        while out.len() + 1 < self.config.base_trace {
            let Some(d) = cur.insns.last() else {
                break;
            };
            let ins = &d.ins;
            let ways = match ins.code() {
                iced_x86::Code::Call_rel32_64 => {
                    calls.push((ins.next_ip(), home));
                    vec![ins.near_branch_target()]
                }
                // Into the function the call went to while the interpreter ran it (the
                // code compares the run-time target).
                iced_x86::Code::Call_rm64 => {
                    let Some(callee) = self.inline_target(&cur, ram, warm) else {
                        break;
                    };
                    calls.push((ins.next_ip(), home));
                    home = callee.key;
                    vec![callee.key.rip]
                }
                // Back to the return site of the CALL the trace made (checked at run time).
                iced_x86::Code::Retnq => match calls.pop() {
                    Some((site, at)) => {
                        home = at;
                        vec![site]
                    }
                    None => break,
                },
                iced_x86::Code::Jmp_rel8_64 | iced_x86::Code::Jmp_rel32_64 => {
                    vec![ins.near_branch_target()]
                }
                _ if ins.is_jcc_short_or_near() => vec![ins.near_branch_target(), ins.next_ip()],
                _ if ins.flow_control() == iced_x86::FlowControl::Next => vec![ins.next_ip()],
                _ => break,
            };
            let mut best: Option<(u32, Arc<Block>)> = None;
            for t in ways {
                if rips.contains(&t) {
                    continue;
                }
                let Some(e) = self.neighbour(&home, t, ram, warm) else {
                    continue;
                };
                if insns + e.block.insns.len() <= BASE_TRACE_INSNS
                    && best.as_ref().is_none_or(|(c, _)| e.count > *c)
                    && crate::base::covers(&e.block)
                {
                    best = Some((e.count, e.block.clone()));
                }
            }
            let Some((_, b)) = best else {
                break;
            };
            insns += b.insns.len();
            rips.push(b.key().rip);
            out.push(b.clone());
            cur = b;
        }
        out
    }

    /// The runs that make a block warm for regions and traces: a quarter of the threshold.
    fn warm_count(&self) -> u32 {
        warm_count(&self.config)
    }

    /// The runs that make a block warm beside the entry `key` for its trace and for an early
    /// compile's loop search: the warm count, or half the entry's own runs if less (a block
    /// compiled early finds the blocks after it just short of its own count).
    fn warm_beside(&self, key: &BlockKey) -> u32 {
        let own = self.entry(key).map_or(0, |e| e.count);
        self.warm_count().min((own / 2).max(1))
    }

    /// The cache entry of the block at `t` when a region or trace around the entry `key` may
    /// take it: in the same code page (same physical page), 64-bit, not empty, ending inside
    /// the page, still valid, and warm — run at least `min_count` times (not a cold error
    /// path).
    fn neighbour(&self, key: &BlockKey, t: u64, ram: &GuestRam, min_count: u32) -> Option<&Entry> {
        let page = key.rip & !0xfff;
        if t & !0xfff != page {
            return None;
        }
        let e = self.entry(&BlockKey {
            phys: (key.phys & !0xfff) | (t & 0xfff),
            rip: t,
            bitness: 64,
            cut: 0,
        })?;
        let in_page = e
            .block
            .insns
            .last()
            .is_some_and(|d| d.ins.next_ip() <= page + 0x1000 && d.ins.ip() >= page);
        let warm = e.count >= min_count;
        (e.key.bitness == 64 && warm && !e.block.insns.is_empty() && in_page && e.valid(ram))
            .then_some(e)
    }

    /// Where an indirect JMP in the code page of `key` may go, for a region: the blocks of
    /// that page (same physical page, same linear page) in the cache that have run, most
    /// often run first (then by address, so the order is deterministic). The region keeps
    /// those that pass its usual tests; the jump compares its target with each of them at
    /// run time.
    fn jump_candidates(&self, key: &BlockKey) -> Vec<u64> {
        let (page, phys) = (key.rip & !0xfff, key.phys & !0xfff);
        let mut found: Vec<(u32, u64)> = self
            .entries
            .iter()
            .filter(|e| {
                e.key.rip & !0xfff == page
                    && e.key.phys & !0xfff == phys
                    && e.key.bitness == 64
                    && e.count > 0
            })
            .map(|e| (e.count, e.key.rip))
            .collect();
        found.sort_by_key(|&(count, rip)| (core::cmp::Reverse(count), rip));
        found.into_iter().map(|(_, rip)| rip).collect()
    }

    /// The region's final block set: with `config.dag_regions` every block found (entry
    /// first); otherwise only the loops through the entry (just the entry if none).
    fn region_shape(&self, out: Vec<Arc<Block>>) -> Vec<Arc<Block>> {
        if self.config.dag_regions {
            out
        } else {
            crate::region::loop_of(out)
        }
    }

    /// Count one execution of the entry and move it up the tiers when due (`mxcsr_default`:
    /// the guest's MXCSR is the default environment, see [`Jit::compile_entry`]).
    fn promote(&mut self, key: &BlockKey, ram: &GuestRam, tlb: &Tlb, mxcsr_default: bool) {
        let threshold = self.config.threshold;
        let count = {
            let e = self.entry_mut(key).expect("entry present");
            e.count = e.count.saturating_add(1);
            e.count
        };
        let e = self.entry(key).expect("entry present");
        match e.tier {
            Tier::Cold if count >= threshold && e.key.bitness != 64 => {
                // 16/32-bit code is interpreted for good (the native lowering and its
                // addressing assume 64-bit mode; see docs/jit.md).
                self.entry_mut(key).expect("entry present").tier = Tier::Failed;
                self.stats.interp_only_blocks += 1;
            }
            Tier::Cold if count >= threshold || count == self.early => {
                // Before the threshold (early), only a block the baseline tier takes alone
                // is compiled; anything else waits for the threshold.
                let early = count < threshold;
                match self.compile_entry(key, ram, tlb, true, mxcsr_default, early) {
                    Compile::Done | Compile::Flushed | Compile::NotYet => {}
                    Compile::PageFull => {
                        self.entry_mut(key).expect("entry present").tier = Tier::Failed;
                        self.stats.smc_pages_interpreted += 1;
                    }
                    Compile::Refused => {
                        self.entry_mut(key).expect("entry present").tier = Tier::Failed;
                    }
                }
            }
            Tier::Pending(_) => self.maybe_finalize(key),
            _ => {}
        }
    }

    /// Compile the entry `key` with the region around it (the baseline tier only when
    /// `allow_base`) and queue it for the next finalised batch. A floating-point loop goes to
    /// the baseline tier only when `mxcsr_default`: under another MXCSR environment (DAZ/FTZ,
    /// a rounding mode) the tier's floating point leaves for the interpreter every round,
    /// where the lifted code handles each such instruction in a cold path and runs the rest.
    fn compile_entry(
        &mut self,
        key: &BlockKey,
        ram: &GuestRam,
        tlb: &Tlb,
        allow_base: bool,
        mxcsr_default: bool,
        early: bool,
    ) -> Compile {
        if self.compiler.in_module >= self.config.max_compiled {
            self.flush();
            return Compile::Flushed; // The entry is gone; it is decoded again next time.
        }
        let page = key.phys >> 12;
        if self
            .page_compiles
            .get(&page)
            .is_some_and(|&n| n >= MAX_PAGE_COMPILES)
        {
            return Compile::PageFull;
        }
        let mut member_alone = false;
        if allow_base {
            if let Some(head) = self.base_first_members.get(key).copied() {
                if self.config.members_alone && self.base_first_regions.contains_key(&head) {
                    // Compiled alone below, and no longer the loop's member.
                    self.base_first_members.remove(key);
                    member_alone = true;
                } else if let Some(out) = self.promote_head(key, &head, ram, tlb) {
                    return out;
                }
            }
        }
        let kept = if member_alone {
            self.entry(key).map(|e| vec![e.block.clone()])
        } else if allow_base {
            None
        } else {
            self.base_first_region(key, ram)
        };
        let (mut region, mut recursive) = match kept {
            Some(r) => (r, false),
            // An early compile (before the loop's other blocks can have run a quarter of the
            // threshold) finds its loops among blocks that have run half as often as it.
            None if early => self.region_of_warm(key, ram, self.warm_beside(key)),
            None => self.region_of(key, ram),
        };
        let mut looped =
            recursive || crate::region::is_loop(&region.iter().map(|b| &**b).collect::<Vec<_>>());
        // A member compiled alone gets no run counter — unless it is a loop itself (one
        // block that jumps to itself), which goes to the tier first as any other loop.
        let member_plain = member_alone && !looped;
        if early {
            let alone = region.len() == 1
                && !looped
                && allow_base
                && self.config.baseline
                && self.config.native
                && crate::base::covers(&region[0]);
            if !alone {
                return Compile::NotYet;
            }
        }
        *self.page_compiles.entry(page).or_insert(0) += 1;
        // A loop whose entry block the baseline tier covers goes there (the entry block and
        // its trace) when it is a floating-point loop or one that calls, for good (see
        // `JitConfig::fp_loops_base`, `JitConfig::call_loops_base`), and when it is a
        // function that calls itself, counted for a promotion whatever its length: the
        // recursive region is compiled when that comes (`tier_up`), so that a function
        // which recurses only a few thousand times does not pay for a large region.
        let may_base = looped
            && allow_base
            && self.config.baseline
            && self.config.native
            && crate::base::covers(&region[0]);
        let recursion_first = may_base && recursive && self.config.promote > 0;
        if recursion_first {
            self.recursion_starts.retain(|(k, _)| k != key);
            if self.recursion_starts.len() >= RECURSION_STARTS {
                self.recursion_starts.remove(0);
            }
            self.recursion_starts.push((*key, self.retired_now));
        }
        let fp_loop = may_base
            && !recursive
            && mxcsr_default
            && self.config.fp_loops_base
            && fp_loop(&region);
        let call_loop = may_base
            && !recursive
            && !fp_loop
            && self.config.call_loops_base
            && !crate::region::return_sites(region.iter().map(|b| &**b)).is_empty();
        let base_loop = fp_loop || call_loop;
        let loop_first = may_base
            && !recursive
            && !base_loop
            && self.config.loops_base_first
            && self.config.promote > 0;
        // The blocks of a function taken in for an indirect call are no members of the loop:
        // that function earns its own compile as before.
        let callee =
            crate::region::in_inlined_callee(&region.iter().map(|b| &**b).collect::<Vec<_>>());
        if loop_first {
            let keys: Vec<BlockKey> = region.iter().map(|b| b.key()).collect();
            for (k, _) in keys.iter().zip(&callee).skip(1).filter(|(_, &c)| !c) {
                self.base_first_members.insert(*k, *key);
                // As a region's members: three quarters of the threshold more from the
                // dispatcher before one of them promotes the loop.
                self.cool_member(k);
            }
            self.base_first_regions.insert(*key, keys);
        }
        let recursion_first = recursion_first || loop_first;
        if base_loop || recursion_first {
            region.truncate(1);
            looped = false;
            recursive = false;
        }
        let blocks: Vec<&Block> = region.iter().map(|b| &**b).collect();
        let trace = if allow_base
            && self.config.baseline
            && blocks.len() == 1
            && !looped
            && !member_plain
        {
            self.base_trace(key, &region[0], ram)
        } else {
            Vec::new()
        };
        let trace: Vec<&Block> = trace.iter().map(|b| &**b).collect();
        let switch_order = self.switch_order(&blocks);
        let ram_base = ram.bytes().as_ptr() as u64;
        let gen = self.gens.sync(Epochs::of(tlb, ram));
        let cert = PageCert::new(
            gen,
            tlb,
            ram,
            ram_base,
            blocks.iter().chain(&trace).copied(),
        );
        let t0 = Instant::now();
        let compiled = self.compiler.compile(
            &blocks,
            self.config.keep_ir,
            self.config.native,
            looped,
            allow_base.then_some(BaseRequest {
                trace: &trace,
                promote: !base_loop && !member_plain,
                promote_short: recursion_first,
            }),
            ram_base,
            switch_order,
            &cert,
        );
        self.stats.compile_ns += t0.elapsed().as_nanos() as u64;
        let i = *self.index.get(key).expect("entry present") as usize;
        let e = &mut self.entries[i];
        let outcome = match compiled {
            Ok(c) => {
                self.stats.compiled += 1;
                self.stats.code_bytes += c.code_bytes as u64;
                self.stats.native_insns += c.stats.native as u64;
                self.stats.helper_insns += c.stats.helper as u64;
                self.stats.region_blocks += c.stats.blocks as u64;
                self.stats.region_edges += c.stats.edges as u64;
                self.stats.region_free_edges += c.stats.free_edges as u64;
                self.stats.dyn_folds += c.stats.dyn_folds as u64;
                self.stats.carried_accesses += c.stats.carried as u64;
                self.stats.inherited_groups += c.stats.inherited as u64;
                self.stats.baseline += c.baseline as u64;
                let parts = blocks.iter().chain(&trace);
                let into_call = if c.baseline {
                    parts
                        .rev()
                        .skip(1)
                        .any(|b| crate::region::ends_in_indirect_call(b))
                } else {
                    looped && !crate::region::indirect_call_targets(&blocks).is_empty()
                };
                self.stats.inlined_calls += into_call as u64;
                if c.baseline {
                    self.stats.traced += c.stats.blocks.saturating_sub(1) as u64;
                    self.stats.fp_loops += fp_loop as u64;
                    self.stats.call_loops += call_loop as u64;
                }
                e.tier = Tier::Pending(c.id);
                // What an entry must find in the budget: a region or a baseline trace runs
                // on past its first block before it checks again (`Compiled::entry_len`).
                let len = c.entry_len.unwrap_or(e.block.insns.len() as u64);
                e.len = len.min(u32::MAX as u64) as u32;
                if recursive {
                    self.stats.recursive += 1;
                    for b in &region {
                        self.recursive_members.insert(b.key(), ());
                    }
                }
                let extra = CompiledExtra {
                    _region: region.iter().skip(1).cloned().collect(),
                    ir: c.ir,
                    code_len: c.code_bytes,
                };
                self.pending.push(*key);
                // The other members run inside this function from now on (once its
                // batch is finalised). A member entry (`Compiled::member_entries`)
                // still interpreted runs it too when entered from elsewhere: its
                // cache entry takes the function, which starts at that member. Any
                // other member still entered from elsewhere earns its own function
                // with another three quarters of the threshold, so the blocks of one
                // loop, all hot at the same moment, do not each compile the whole
                // loop again. (A quarter keeps it warm for regions.)
                for (m, blk) in region.iter().enumerate().skip(1) {
                    if callee[m] {
                        continue;
                    }
                    let mk = blk.key();
                    let Some(mi) = self.cool_member(&mk) else {
                        continue;
                    };
                    let me = &mut self.entries[mi];
                    let entry = c.member_entries.iter().position(|&x| x == m);
                    if let (Some(k), true) = (entry, Arc::ptr_eq(&me.block, blk)) {
                        me.tier = Tier::Pending(c.id);
                        me.len = c.member_entry_lens[k].min(u32::MAX as u64) as u32;
                        self.pending.push(mk);
                        self.stats.member_entries += 1;
                        // It keeps the function's blocks alive as the first does.
                        self.extras[mi] = Some(Box::new(CompiledExtra {
                            _region: region.clone(),
                            ir: extra.ir.clone(),
                            code_len: 0,
                        }));
                    }
                }
                self.extras[i] = Some(Box::new(extra));
                Compile::Done
            }
            Err(msg) => {
                self.stats.compile_errors += 1;
                self.stats.last_error = Some(msg);
                Compile::Refused
            }
        };
        self.maybe_finalize(key);
        outcome
    }

    /// The member `key` of a loop that went to the baseline tier first (whose head is
    /// `head`) is due for a compile (its early count or the threshold, see `Jit::promote`):
    /// promote the head's kept region now (`key` becomes one of its member entries when it
    /// may be one) rather than compile a loop entered at `key`. `None`: the head's region is
    /// gone (promoted already, or the head left the cache), and `key` is compiled as any
    /// other block.
    fn promote_head(
        &mut self,
        key: &BlockKey,
        head: &BlockKey,
        ram: &GuestRam,
        tlb: &Tlb,
    ) -> Option<Compile> {
        if !self.base_first_regions.contains_key(head) {
            self.base_first_members.remove(key);
            return None;
        }
        match self.entry(head).map(|e| &e.tier) {
            // Its baseline function is not callable yet: wait for the batch.
            Some(Tier::Pending(_)) => return Some(Compile::NotYet),
            Some(Tier::Ready(_)) => {}
            // The head was compiled another way or left the cache.
            _ => {
                self.base_first_regions.remove(head);
                self.base_first_members.remove(key);
                return None;
            }
        }
        self.base_first_members.remove(key);
        self.promote_now(head, ram, tlb);
        // `key` runs the new function if it became one of its member entries; otherwise
        // its count was lowered with the region's other members and it waits.
        Some(Compile::NotYet)
    }

    /// A baseline function at `ctx`'s RIP ran out of its run counter ([`ret::PROMOTE`]): its
    /// block is compiled again by Cranelift (the baseline function keeps running until the
    /// new one is finalised, and stays if Cranelift refuses the block).
    fn tier_up(&mut self, ctx: &mut Ctx) {
        let Ok((key, _)) = ctx.block_key() else {
            return;
        };
        let Some(&i) = self.index.get(&key) else {
            return;
        };
        if !matches!(self.entries[i as usize].tier, Tier::Ready(_)) {
            return;
        }
        if let Some(at) = self.recursion_starts.iter().position(|(k, _)| *k == key) {
            // A function that calls itself, in the baseline tier since it was first due:
            // its recursive region pays when its runs are short (`fib`: the calls and
            // returns are most of the work), not when each run is mostly a loop that has
            // its own region (`merge_sort`: the merge), where compiling the large region
            // costs more than it saves. It then stays in the baseline tier.
            let (_, start) = self.recursion_starts.remove(at);
            let runs = u64::from(self.config.promote.max(1));
            let per_run = ctx.cpu.retired.saturating_sub(start) / runs;
            if per_run > self.recursion_max_run {
                self.stats.recursion_declined += 1;
                return;
            }
        }
        self.promote_now(&key, ctx.ram, &ctx.cpu.tlb);
    }

    /// Compile the baseline function `key` again by Cranelift (its kept region, if it went
    /// to the baseline tier first) and finalise it at once: the baseline function runs
    /// chained, so no dispatch would count the wait (`maybe_finalize`) up for it.
    fn promote_now(&mut self, key: &BlockKey, ram: &GuestRam, tlb: &Tlb) {
        if let Compile::Done = self.compile_entry(key, ram, tlb, false, false, false) {
            self.stats.promoted += 1;
            if !self.pending.is_empty() {
                self.finalize_batch();
            }
        }
    }

    /// A region member's cache entry `k` when it is still interpreted (`Tier::Cold`), with
    /// its count lowered to a quarter of the threshold (kept warm for region searches): the
    /// blocks of one loop, all hot at once, do not each compile the whole loop again from
    /// their own threshold. (Member entries too: the region search takes switch targets
    /// most-run first, and counts kept high crowded out other blocks: bf's chained jumps
    /// 0.1 M → 5.1 M.)
    fn cool_member(&mut self, k: &BlockKey) -> Option<usize> {
        let threshold = self.config.threshold;
        let i = *self.index.get(k)? as usize;
        let e = &mut self.entries[i];
        if !matches!(e.tier, Tier::Cold) {
            return None;
        }
        e.count = e.count.min(threshold / 4);
        Some(i)
    }

    /// Finalise the waiting batch when it is full or `key` has waited `threshold` runs.
    fn maybe_finalize(&mut self, key: &BlockKey) {
        let waited = self
            .entry(key)
            .is_some_and(|e| e.count >= self.config.threshold.saturating_add(FINALIZE_WAIT));
        if self.pending.len() < self.config.batch.max(1) && !waited {
            return;
        }
        self.finalize_batch();
    }

    /// Finalise the waiting batch and make its functions callable.
    fn finalize_batch(&mut self) {
        let t0 = Instant::now();
        if let Err(msg) = self.compiler.finalize() {
            // Nothing of this module can be trusted: start over.
            self.stats.compile_errors += 1;
            self.stats.last_error = Some(msg);
            self.flush();
            return;
        }
        self.stats.compile_ns += t0.elapsed().as_nanos() as u64;
        let mut made = Vec::new();
        for k in std::mem::take(&mut self.pending) {
            if let Some(&i) = self.index.get(&k) {
                let e = &mut self.entries[i as usize];
                if let Tier::Pending(id) = e.tier {
                    let f = self.compiler.get(id);
                    e.tier = Tier::Ready(f);
                    if self.made_rips.insert(k.rip, ()).is_some() {
                        made.push(k.rip);
                    }
                    // In the table at once (the function checks itself on a chained entry):
                    // an emptied link refills from the table, which must not hand it the
                    // function this one replaces until the dispatcher first runs this one.
                    self.chain.set(ChainEntry {
                        rip: k.rip,
                        func: f as u64,
                        len: e.len as u64,
                    });
                    let len = self.extras[i as usize].as_ref().map_or(0, |x| x.code_len);
                    if let (Some(dir), true) = (&self.dump_code, len > 0) {
                        dump_code(dir, f, len, k.rip);
                    }
                }
            }
        }
        // A link to a RIP that had a function before may hold one whose code went stale:
        // empty them, and the next jump through each finds the new function in the table. (A
        // link only ever holds a function from the table, so RIPs made callable for the first
        // time have none: most batches skip the pass over the links.)
        if !made.is_empty() {
            made.sort_unstable();
            if let Err(msg) = self.compiler.unlink(&made) {
                self.stats.compile_errors += 1;
                self.stats.last_error = Some(msg);
                self.flush();
            }
        }
        self.stats.patched_exits = self.compiler.patched_exits();
    }
}

/// Does the loop `region` (the region search's blocks) do SSE/AVX floating-point arithmetic?
fn fp_loop(region: &[Arc<Block>]) -> bool {
    region.iter().any(|b| {
        b.insns
            .iter()
            .any(|d| crate::base::simd::fp(d.ins.mnemonic()))
    })
}

/// Host-side diagnostics (`LOCKSTEP_JIT_DUMP_CODE=<dir>`): write a finalised function's
/// machine code to `<dir>/<host address>-<guest RIP>.bin` (both in hex), for disassembly next
/// to a perf or callgrind profile.
fn dump_code(dir: &std::ffi::OsStr, f: BlockFn, len: usize, rip: u64) {
    let addr = f as usize;
    // SAFETY: `f` is the entry of a finalised function of `len` bytes of machine code; the
    // module maps its code readable and keeps it until a flush, which cannot happen here.
    let bytes = unsafe { core::slice::from_raw_parts(addr as *const u8, len) };
    let _ = std::fs::write(
        std::path::Path::new(dir).join(format!("{addr:x}-{rip:x}.bin")),
        bytes,
    );
}

impl Engine for Jit {
    fn run(&mut self, cpu: &mut Cpu, ram: &mut GuestRam, bus: &mut dyn Bus, budget: u64) -> Exit {
        let start = cpu.retired;
        cpu.budget_end = start.saturating_add(budget);
        let mut ctx = Ctx::new(cpu, ram, bus);
        let reason = loop {
            if ctx.cpu.retired >= ctx.cpu.budget_end {
                break ExitReason::Budget;
            }
            if let Some(r) = self.dispatch(&mut ctx) {
                break r;
            }
        };
        Exit {
            retired: ctx.cpu.retired - start,
            reason,
        }
    }
}

/// The runs that make a block warm for regions and traces: a quarter of the threshold.
fn warm_count(config: &JitConfig) -> u32 {
    config.threshold.div_ceil(4)
}

/// The run at which a block the baseline tier takes alone is compiled
/// (`JitConfig::base_early_percent` of the threshold; its trace, and its search for a loop
/// through it, take blocks that have run half as often, see `Jit::base_trace`), but not
/// before [`EARLY_MIN_RUNS`] runs (or the threshold, if lower): after a run or two the blocks
/// around it have hardly run, and a loop through it would go unseen.
fn early_count(config: &JitConfig) -> u32 {
    let pct = config.base_early_percent.min(100) as u64;
    let floor = EARLY_MIN_RUNS.min(config.threshold);
    ((config.threshold as u64 * pct / 100) as u32).max(floor)
}

/// The fewest runs before an early compile ([`early_count`]).
const EARLY_MIN_RUNS: u32 = 16;

/// Whether `LOCKSTEP_JIT_STATS` asks for the statistics (printed when a [`Jit`] ends); the
/// command line counts chained jumps only then (`JitConfig::count_chains`).
pub fn stats_requested() -> bool {
    std::env::var_os("LOCKSTEP_JIT_STATS").is_some()
}

impl Drop for Jit {
    /// `LOCKSTEP_JIT_STATS=1` prints the JIT's statistics to stderr when the engine ends
    /// (host-side diagnostics only; nothing guest-visible depends on it).
    fn drop(&mut self) {
        if stats_requested() {
            self.stats.cache_entries = self.entries.len() as u64;
            eprintln!("{}", self.stats.summary());
        }
        if std::env::var_os("LOCKSTEP_JIT_PASS_TIMES").is_some() {
            eprintln!("{}", cranelift_codegen::timing::take_current());
        }
    }
}

/// A compiled block left before an instruction whose memory access missed its inline fast
/// path (see `lift::mem`), with RIP at that instruction: interpret from there to the end of
/// its block, in the same dispatch — the interpreter fills the TLB, or does the device
/// access and yields, or leaves after a store into code, or raises the fault, as it would
/// have alone. (The budget covers the instruction: the compiled block it is in was
/// entered only with its whole length covered.) In the same dispatch so that `Verify`, which
/// compares after each dispatch, never sees the translation the access made before it was
/// left (a dirty bit, say) without the access.
fn interp_deferred(ctx: &mut Ctx) -> Option<ExitReason> {
    match ctx.block_at_rip() {
        Ok(i) => {
            // Borrowed out of the interpreter's cache for the run (as its own engine does),
            // not cloned: a boot defers some 120 K accesses.
            let (insns, _, generation) = ctx.cpu.blocks.take_insns(i);
            let stop = interp_block(ctx, &insns);
            ctx.cpu.blocks.put_insns(i, insns, generation);
            stop
        }
        Err(f) => Some(ExitReason::Exception(f)),
    }
}
