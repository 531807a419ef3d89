//! One vCPU (architectural state plus its non-architectural caches) and the engine contract.

use crate::ctx::Ctx;
use crate::decode::{BlockCache, DecodedInsn};
use crate::fault::{Fault, Trap};
use crate::mem::{Bus, GuestRam};
use crate::mmu::Tlb;
use crate::state::{CpuState, StateHasher};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// Per-vCPU configuration fixed when the machine is built.
#[derive(Clone, Debug, Default)]
pub struct CpuConfig {
    /// SYSCALL stops the engine with [`ExitReason::Syscall`] instead of entering a guest kernel
    /// (the user-mode harness serves system calls on the host).
    pub syscall_to_host: bool,
}

/// A virtual CPU.
pub struct Cpu {
    pub state: CpuState,
    pub config: CpuConfig,
    /// Instructions retired since power-on: this vCPU's virtual time.
    pub retired: u64,
    /// `retired` value at which the current `run` call must stop (REP strings read it).
    pub budget_end: u64,
    /// RDRAND/RDSEED stream (its own seed domain, set by the machine).
    pub rng: ChaCha20Rng,
    pub tlb: Tlb,
    pub blocks: BlockCache,
    /// Set by a store that hit a page holding decoded code; the engine re-fetches.
    pub smc: bool,
}

impl Cpu {
    /// A CPU in `state`, with its entropy stream seeded by `rng_seed`.
    pub fn new(state: CpuState, config: CpuConfig, rng_seed: [u8; 32]) -> Self {
        Cpu {
            state,
            config,
            retired: 0,
            budget_end: 0,
            rng: ChaCha20Rng::from_seed(rng_seed),
            tlb: Tlb::default(),
            blocks: BlockCache::default(),
            smc: false,
        }
    }

    /// Drop every cache that depends on paging or privilege (after CR/EFER/CPL changes).
    pub fn flush_tlb(&mut self) {
        self.tlb.flush();
    }

    /// Drop all non-architectural state (after restore or an external state change).
    pub fn flush_caches(&mut self) {
        self.tlb.flush();
        self.blocks.clear();
    }

    /// Hash of the architectural state (and virtual time).
    pub fn state_hash(&self) -> u64 {
        let mut h = StateHasher::default();
        self.state.hash_into(&mut h);
        h.u64(self.retired);
        h.finish()
    }
}

/// Why an engine stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// The budget was used up; RIP is at the next instruction to run.
    Budget,
    /// An exception was raised. For faults RIP is at the faulting instruction, for traps
    /// (INT3, INTO) after it. The machine (or harness) decides how to deliver it.
    Exception(Fault),
    /// SYSCALL with `syscall_to_host` set; RIP is after the instruction.
    Syscall,
    /// HLT; RIP is after the instruction.
    Halt,
}

/// Result of one engine run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// Instructions retired during this run (≤ budget).
    pub retired: u64,
    pub reason: ExitReason,
}

/// The contract every engine (interpreter, JIT) fulfils: run `cpu` for at most `budget`
/// instructions and say why it stopped. Never retires more than `budget`.
pub trait Engine {
    fn run(&mut self, cpu: &mut Cpu, ram: &mut GuestRam, bus: &mut dyn Bus, budget: u64) -> Exit;
}

/// The reference interpreter.
#[derive(Default, Debug, Clone, Copy)]
pub struct Interpreter;

impl Engine for Interpreter {
    fn run(&mut self, cpu: &mut Cpu, ram: &mut GuestRam, bus: &mut dyn Bus, budget: u64) -> Exit {
        let start = cpu.retired;
        cpu.budget_end = start.saturating_add(budget);
        let mut ctx = Ctx::new(cpu, ram, bus);
        let reason = run_blocks(&mut ctx);
        Exit {
            retired: ctx.cpu.retired - start,
            reason,
        }
    }
}

fn run_blocks(ctx: &mut Ctx) -> ExitReason {
    while ctx.cpu.retired < ctx.cpu.budget_end {
        let idx = match ctx.block_at_rip() {
            Ok(b) => b,
            Err(f) => return ExitReason::Exception(f),
        };
        // A code write noticed before this block (e.g. by an instruction that then faulted or
        // stopped part-way) is already reflected in the lookup above.
        ctx.cpu.smc = false;
        let (insns, generation) = ctx.cpu.blocks.take_insns(idx);
        let stop = run_insns(ctx, &insns);
        ctx.cpu.blocks.put_insns(idx, insns, generation);
        if let Some(reason) = stop {
            return reason;
        }
    }
    ExitReason::Budget
}

/// Run a block's instructions until its end, a stop (returned) or a reason to look up the next
/// block early (budget, partial REP, self-modifying code).
#[inline(always)]
fn run_insns(ctx: &mut Ctx, insns: &[DecodedInsn]) -> Option<ExitReason> {
    for d in insns {
        if ctx.cpu.retired >= ctx.cpu.budget_end {
            return Some(ExitReason::Budget);
        }
        ctx.cpu.state.rip = d.ins.next_ip();
        match (d.handler)(ctx, &d.ins) {
            Ok(()) => ctx.cpu.retired += 1,
            Err(t) => match t {
                Trap::Fault(f) => {
                    if f.is_trap() {
                        ctx.cpu.retired += 1;
                    } else {
                        ctx.cpu.state.rip = d.ins.ip();
                    }
                    return Some(ExitReason::Exception(f));
                }
                Trap::Syscall => {
                    ctx.cpu.retired += 1;
                    return Some(ExitReason::Syscall);
                }
                Trap::Halt => {
                    ctx.cpu.retired += 1;
                    return Some(ExitReason::Halt);
                }
                Trap::Partial => {
                    // The handler counted the iterations it did; re-execute later.
                    ctx.cpu.state.rip = d.ins.ip();
                    return None;
                }
            },
        }
        if ctx.cpu.smc {
            // A store hit decoded code: the rest of this block may be stale.
            ctx.cpu.smc = false;
            return None;
        }
    }
    None
}
