//! `extern "C"` functions that compiled blocks call: the instruction trampoline (any
//! instruction through the interpreter's handler) and the memory slow paths.

use crate::frame::{ret, Frame};
use crate::step::{step, Step};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::{Ctx, ExitReason, Fault};

/// `info` bits of the memory helpers: the access size in bytes is the low byte.
pub const INFO_SS: u64 = 1 << 8;
/// `info` bit of `load`: the destination of a read-modify-write (checked for writability first).
pub const INFO_RMW: u64 = 1 << 9;

/// # Safety
/// `frame` is the live frame of the current run and `insn` points into a block that the
/// translation cache keeps alive; compiled code has written every cached register back.
pub unsafe extern "C" fn exec_insn(frame: *mut Frame, insn: *const DecodedInsn) -> u32 {
    // SAFETY: see the function contract; no other reference to the frame or context is live
    // while compiled code runs (the dispatcher only holds raw pointers across the call).
    let (f, d) = unsafe { (&mut *frame, &*insn) };
    let ctx = unsafe { &mut *f.ctx.cast::<Ctx<'_>>() };
    let s = step(ctx, d);
    f.sync_tlb(ctx);
    match s {
        Step::Next => ret::NEXT,
        Step::Leave => ret::DISPATCH,
        Step::Stop(r) => {
            f.exit = Some(r);
            ret::STOP
        }
    }
}

/// Load `info & 0xff` bytes at linear `lin` (the slow path of an inline load). On a fault
/// sets `frame.mem_fault = 1` and the exit reason; the value is then meaningless.
///
/// # Safety
/// `frame` is the live frame of the current run.
pub unsafe extern "C" fn load(frame: *mut Frame, lin: u64, info: u64) -> u64 {
    // SAFETY: as for `exec_insn`.
    let f = unsafe { &mut *frame };
    let ctx = unsafe { &mut *f.ctx.cast::<Ctx<'_>>() };
    ctx.ss_operand = info & INFO_SS != 0;
    let r = if info & INFO_RMW != 0 {
        ctx.read_rmw(lin, info as u8)
    } else {
        ctx.read(lin, info as u8)
    };
    f.sync_tlb(ctx);
    match r {
        Ok(v) => {
            f.mem_fault = 0;
            // MMIO: the instruction must be the last one before a `Yield` exit.
            f.request_yield(ctx.cpu.yield_requested);
            v
        }
        Err(e) => {
            f.mem_fault = 1;
            f.exit = Some(ExitReason::Exception(e));
            0
        }
    }
}

/// Store the low `info & 0xff` bytes of `val` at linear `lin`. Returns 0, or [`ret::STOP`] on a
/// fault (exit reason set), or [`ret::DISPATCH`] when the store hit decoded code or a device
/// (MMIO sets `Cpu::yield_requested`): the block must end after this instruction, and the
/// dispatcher turns a pending yield request into `ExitReason::Yield`.
///
/// # Safety
/// `frame` is the live frame of the current run.
pub unsafe extern "C" fn store(frame: *mut Frame, lin: u64, info: u64, val: u64) -> u32 {
    // SAFETY: as for `exec_insn`.
    let f = unsafe { &mut *frame };
    let ctx = unsafe { &mut *f.ctx.cast::<Ctx<'_>>() };
    ctx.ss_operand = info & INFO_SS != 0;
    let r = ctx.write(lin, info as u8, val);
    f.sync_tlb(ctx);
    match r {
        Ok(()) => {
            if ctx.cpu.smc | ctx.cpu.yield_requested {
                ctx.cpu.smc = false;
                f.request_yield(ctx.cpu.yield_requested);
                ret::DISPATCH
            } else {
                0
            }
        }
        Err(e) => {
            f.exit = Some(ExitReason::Exception(e));
            ret::STOP
        }
    }
}

/// Raise a fault decided by compiled code. `kind` 0 is #GP(0) (a non-canonical branch
/// target), the only kind so far.
///
/// # Safety
/// `frame` is the live frame of the current run.
pub unsafe extern "C" fn raise(frame: *mut Frame, kind: u64) {
    // SAFETY: as for `exec_insn`.
    let f = unsafe { &mut *frame };
    debug_assert_eq!(kind, 0, "unknown fault kind from compiled code");
    f.exit = Some(ExitReason::Exception(Fault::GP0));
}

/// Fold a run-time flag record (see `lift::flags::encode`) into `base`: the flags the record
/// defines are replaced by the ones its operation computes. Pure function of its arguments.
pub extern "C" fn fold_flags(base: u64, code: u64, a: u64, b: u64, res: u64, cin: u64) -> u64 {
    use crate::lift::flags::{bits_of, decode};
    match decode(code) {
        None => base,
        Some((op, size, mask)) => (base & !mask) | bits_of(op, size, mask, a, b, res, cin),
    }
}
