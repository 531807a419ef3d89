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
    /// Set by an instruction that talked to a device (port I/O, MMIO) or may have made an
    /// interrupt deliverable (STI, POPF, IRET …): the engine stops right after it with
    /// [`ExitReason::Yield`] so the machine sees device effects at that exact boundary.
    pub yield_requested: bool,
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
            yield_requested: false,
        }
    }

    /// Drop every cached translation (after CR/EFER changes that alter paging or its checks;
    /// a CPL change only selects the TLB's other set, see `Ctx::sync_tlb_privilege`).
    pub fn flush_tlb(&mut self) {
        self.tlb.flush();
    }

    /// Drop all non-architectural state (after restore or an external state change).
    pub fn flush_caches(&mut self) {
        self.tlb.flush();
        // PAE PDPTE registers are not in `CpuState`: reload them from CR3 at the next walk.
        self.tlb.set_pdptes(None);
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
    /// The last instruction retired talked to a device or changed interrupt state
    /// ([`Cpu::yield_requested`]); RIP is at the next instruction. The machine looks at its
    /// devices and pending interrupts, then runs the engine again.
    Yield,
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
        let (insns, all_fast, generation) = ctx.cpu.blocks.take_insns(idx);
        let room = ctx.cpu.budget_end - ctx.cpu.retired;
        let stop = if all_fast && room >= insns.len() as u64 {
            run_fast_insns(ctx, &insns)
        } else {
            run_insns(ctx, &insns)
        };
        ctx.cpu.blocks.put_insns(idx, insns, generation);
        if let Some(reason) = stop {
            return reason;
        }
    }
    ExitReason::Budget
}

/// Run a block made only of specialised handlers that fits in the remaining budget: no budget
/// check per instruction. `cpu.retired` is exact before every instruction, so a device access
/// (MMIO) sees the exact virtual time.
#[inline(always)]
fn run_fast_insns(ctx: &mut Ctx, insns: &[DecodedInsn]) -> Option<ExitReason> {
    for d in insns {
        ctx.cpu.state.rip = d.ins.next_ip();
        ctx.ss_operand = false;
        if let Err(t) = (d.handler)(ctx, &d.ins) {
            return stop_on_trap(ctx, d, t);
        }
        ctx.cpu.retired += 1;
        if ctx.cpu.smc | ctx.cpu.yield_requested {
            // A store hit decoded code (the rest of this block may be stale), or the
            // instruction touched a device.
            ctx.cpu.smc = false;
            return take_yield(ctx);
        }
    }
    None
}

/// What a trap from `d`'s handler means for the engine (RIP and `retired` as for a normal
/// stop; `retired` counts the instructions before `d`). `None`: look up the next block.
#[inline(always)]
fn stop_on_trap(ctx: &mut Ctx, d: &DecodedInsn, t: Trap) -> Option<ExitReason> {
    match t {
        Trap::Fault(f) => {
            if f.is_trap() {
                ctx.cpu.retired += 1;
            } else {
                ctx.cpu.state.rip = d.ins.ip();
            }
            Some(ExitReason::Exception(f))
        }
        Trap::Syscall => {
            ctx.cpu.retired += 1;
            Some(ExitReason::Syscall)
        }
        Trap::Halt => {
            ctx.cpu.retired += 1;
            Some(ExitReason::Halt)
        }
        Trap::Partial => {
            // The handler counted the iterations it did; re-execute later.
            ctx.cpu.state.rip = d.ins.ip();
            None
        }
    }
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
        ctx.ss_operand = false;
        match (d.handler)(ctx, &d.ins) {
            Ok(()) => ctx.cpu.retired += 1,
            Err(t) => return stop_on_trap(ctx, d, t),
        }
        if ctx.cpu.smc | ctx.cpu.yield_requested {
            // A store hit decoded code (the rest of this block may be stale), or the
            // instruction touched a device.
            ctx.cpu.smc = false;
            return take_yield(ctx);
        }
    }
    None
}

/// After an instruction that set [`Cpu::yield_requested`]: stop with [`ExitReason::Yield`].
#[inline(always)]
fn take_yield(ctx: &mut Ctx) -> Option<ExitReason> {
    if ctx.cpu.yield_requested {
        ctx.cpu.yield_requested = false;
        Some(ExitReason::Yield)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::reg;
    use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
    use iced_x86::code_asm::*;

    /// A loop of specialised-handler blocks: running it with any budget, in one call or in
    /// many small ones, retires exactly that many instructions and ends in the same state as
    /// stepping one instruction at a time.
    #[test]
    fn budgets_are_exact_for_fast_blocks() {
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            a.mov(rbx, DATA_BASE)?;
            a.set_label(&mut top)?;
            a.add(rax, 3)?;
            a.mov(qword_ptr(rbx), rax)?;
            a.xor(rcx, rax)?;
            a.add(rbx, 8)?;
            a.cmp(rax, 300)?;
            a.jb(top)?;
            a.ud2()
        });
        let mut stepped = TestMachine::new();
        stepped.load(CODE_BASE, &code);
        let mut states = vec![stepped.cpu.state.clone()];
        for _ in 0..200 {
            let e = stepped.run(1);
            assert_eq!(e.retired, 1);
            states.push(stepped.cpu.state.clone());
        }
        for budget in [1u64, 2, 5, 6, 7, 13, 100, 200] {
            for chunk in [1u64, 3, 7, 1000] {
                let mut m = TestMachine::new();
                m.load(CODE_BASE, &code);
                let mut done = 0;
                while done < budget {
                    let e = m.run(chunk.min(budget - done));
                    assert_eq!(e.reason, ExitReason::Budget);
                    assert_eq!(e.retired, chunk.min(budget - done));
                    done += e.retired;
                }
                assert_eq!(m.cpu.retired, budget);
                assert_eq!(
                    m.cpu.state, states[budget as usize],
                    "budget {budget} chunk {chunk}"
                );
            }
        }
    }

    /// A fault in the middle of a block of specialised handlers: the instructions before it
    /// are retired, RIP is at the faulting one, nothing after it ran.
    #[test]
    fn fault_inside_a_fast_block_is_precise() {
        let code = TestMachine::assemble(|a| {
            a.mov(rax, 1u64)?;
            a.add(rax, 2)?;
            a.mov(rdx, qword_ptr(rbx))?; // rbx = 0x1000: supervisor page, #PF
            a.mov(rcx, 5u64)?;
            // End the block with a specialised handler too (UD2 would end it with a family one).
            let mut out = a.create_label();
            a.jmp(out)?;
            a.set_label(&mut out)?;
            a.ud2()
        });
        let mut m = TestMachine::new();
        m.load(CODE_BASE, &code);
        m.cpu.state.rip = CODE_BASE;
        m.cpu.smc = false;
        let idx = Ctx::new(&mut m.cpu, &mut m.ram, &mut m.bus)
            .block_at_rip()
            .unwrap();
        assert!(
            m.cpu.blocks.block(idx).all_fast,
            "the test needs an all-fast block"
        );
        m.cpu.state.gpr[reg::RBX] = 0x1000;
        let e = m.run_code(&code, 100);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { addr: 0x1000, .. })
        ));
        assert_eq!(e.retired, 2);
        assert_eq!(m.cpu.retired, 2);
        assert_eq!(m.gpr(reg::RAX), 3);
        assert_eq!(m.gpr(reg::RCX), 0);
        let lens: u64 = TestMachine::assemble(|a| {
            a.mov(rax, 1u64)?;
            a.add(rax, 2)
        })
        .len() as u64;
        assert_eq!(m.cpu.state.rip, CODE_BASE + lens);
    }

    /// A store into a later instruction of the same all-fast block: the patched instruction
    /// runs with its new bytes, and the count stays exact.
    #[test]
    fn self_modifying_code_inside_a_fast_block() {
        let code = TestMachine::assemble(|a| {
            a.mov(dword_ptr(CODE_BASE + 11 + 1), 0x1234u32)?; // 11 bytes; patches the imm32 below
            a.mov(eax, 1u32)?; // B8 imm32 at CODE_BASE + 11
            let mut out = a.create_label();
            a.jmp(out)?;
            a.set_label(&mut out)?;
            a.ud2()
        });
        assert_eq!(code[11], 0xb8);
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 100);
        assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
        assert_eq!(m.gpr(reg::RAX), 0x1234);
        assert_eq!(e.retired, 3);
    }
}
