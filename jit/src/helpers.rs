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

/// Load `info & 0xff` bytes at linear `lin` (the slow path of an inline load) when they are
/// all RAM. Otherwise the instruction is left to the interpreter: a fault sets
/// `frame.mem_fault` to [`MEM_FAULT`] and the exit reason; an access that would reach a device
/// (MMIO) reads nothing and sets it to [`MEM_DEFER`] — the block leaves before the instruction
/// like for a fault, and the dispatcher interprets from there (the interpreter then does the
/// device read and the yield after it). So compiled code never waits on a device read and
/// needs no yield test after a load. The value is meaningless unless `mem_fault` is 0.
///
/// # Safety
/// `frame` is the live frame of the current run.
pub unsafe extern "C" fn load(frame: *mut Frame, lin: u64, info: u64) -> u64 {
    // SAFETY: as for `exec_insn`.
    let f = unsafe { &mut *frame };
    let ctx = unsafe { &mut *f.ctx.cast::<Ctx<'_>>() };
    ctx.ss_operand = info & INFO_SS != 0;
    let r = ctx.read_ram(lin, info as u8, info & INFO_RMW != 0);
    f.sync_tlb(ctx);
    match r {
        Ok(Some(v)) => {
            f.mem_fault = 0;
            v
        }
        Ok(None) => {
            f.mem_fault = MEM_DEFER;
            f.exit = None;
            0
        }
        Err(e) => {
            f.mem_fault = MEM_FAULT;
            f.exit = Some(ExitReason::Exception(e));
            0
        }
    }
}

/// `Frame::mem_fault` after an access that faulted (the reason is in `Frame::exit`).
pub const MEM_FAULT: u64 = 1;
/// `Frame::mem_fault` after an access that would have reached a device (or, for a store,
/// decoded code): not done; the dispatcher interprets from the instruction.
pub const MEM_DEFER: u64 = 2;

/// Store the low `info & 0xff` bytes of `val` at linear `lin` (the slow path of an inline
/// store) when they all go to RAM in pages holding no decoded code. Returns 0, or
/// [`ret::STOP`] with `frame.mem_fault` set as by [`load`]: [`MEM_FAULT`] on a fault (exit
/// reason set), [`MEM_DEFER`] for a store that would reach a device or decoded code — not
/// done; the block leaves before the instruction and the dispatcher interprets from there
/// (the interpreter does the store, then yields after a device access or leaves the block
/// after a store into code). So compiled code never continues after either and tests no
/// status after a store.
///
/// # Safety
/// `frame` is the live frame of the current run.
pub unsafe extern "C" fn store(frame: *mut Frame, lin: u64, info: u64, val: u64) -> u32 {
    // SAFETY: as for `exec_insn`.
    let f = unsafe { &mut *frame };
    let ctx = unsafe { &mut *f.ctx.cast::<Ctx<'_>>() };
    ctx.ss_operand = info & INFO_SS != 0;
    let r = ctx.write_ram(lin, info as u8, val);
    f.sync_tlb(ctx);
    match r {
        Ok(true) => {
            f.mem_fault = 0;
            0
        }
        Ok(false) => {
            f.mem_fault = MEM_DEFER;
            f.exit = None;
            ret::STOP
        }
        Err(e) => {
            f.mem_fault = MEM_FAULT;
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
