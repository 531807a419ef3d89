//! One interpreted instruction with the engine contract of `lockstep_interp::Interpreter`
//! (RIP first, handler, retire, faults, SYSCALL/HLT, partial REP, self-modifying code), used by
//! the dispatcher's interpreted blocks and by the trampoline that compiled code calls.
//! Like the interpreter, a completed instruction that set `Cpu::yield_requested` stops the
//! engine with `ExitReason::Yield` (a fault leaves the request set, as there).

use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::{Ctx, ExitReason, Trap};

/// Outcome of one instruction.
pub enum Step {
    /// Completed; the next instruction of the block follows.
    Next,
    /// Completed (or stopped part-way, REP) in a way that ends the block: a store hit decoded
    /// code, or a REP string must be re-executed. RIP and `retired` are exact.
    /// (An instruction that set `Cpu::yield_requested` gives `Stop(Yield)` instead.)
    Leave,
    /// The engine stops.
    Stop(ExitReason),
}

/// Execute one decoded instruction exactly as the interpreter's run loop does.
#[inline]
pub fn step(ctx: &mut Ctx, d: &DecodedInsn) -> Step {
    ctx.cpu.state.rip = d.ins.next_ip();
    ctx.ss_operand = false;
    match (d.handler)(ctx, &d.ins) {
        Ok(()) => {
            ctx.cpu.retired += 1;
            if ctx.cpu.smc | ctx.cpu.yield_requested {
                // A store hit decoded code (the rest of this block may be stale), or the
                // instruction talked to a device / changed interrupt state: stop right after
                // it with `Yield`, as the interpreter's run loop does.
                ctx.cpu.smc = false;
                if ctx.cpu.yield_requested {
                    ctx.cpu.yield_requested = false;
                    Step::Stop(ExitReason::Yield)
                } else {
                    Step::Leave
                }
            } else {
                Step::Next
            }
        }
        Err(Trap::Fault(f)) => {
            if f.is_trap() {
                ctx.cpu.retired += 1;
            } else {
                ctx.cpu.state.rip = d.ins.ip();
            }
            Step::Stop(ExitReason::Exception(f))
        }
        Err(Trap::Syscall) => {
            ctx.cpu.retired += 1;
            Step::Stop(ExitReason::Syscall)
        }
        Err(Trap::Halt) => {
            ctx.cpu.retired += 1;
            Step::Stop(ExitReason::Halt)
        }
        Err(Trap::Partial) => {
            // The handler counted the iterations it did; re-execute later.
            ctx.cpu.state.rip = d.ins.ip();
            Step::Leave
        }
    }
}

/// Interpret a block's instructions `insns`, checking the budget before each instruction.
/// `None`: the block ended (or was left); keep dispatching.
pub fn interp_block(ctx: &mut Ctx, insns: &[DecodedInsn]) -> Option<ExitReason> {
    for d in insns {
        if ctx.cpu.retired >= ctx.cpu.budget_end {
            return Some(ExitReason::Budget);
        }
        match step(ctx, d) {
            Step::Next => {}
            Step::Leave => return None,
            Step::Stop(r) => return Some(r),
        }
    }
    None
}
