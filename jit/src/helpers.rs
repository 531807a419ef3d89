//! `extern "C"` functions that compiled blocks call: the instruction trampoline (any
//! instruction through the interpreter's handler), the fault raiser and the flag fold.

use crate::frame::{ret, Frame};
use crate::step::{step, Step};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::{Ctx, ExitReason, Fault};

/// # Safety
/// `frame` is the live frame of the current run and `insn` points into a block that the
/// translation cache keeps alive; compiled code has written every cached register back.
pub unsafe extern "C" fn exec_insn(frame: *mut Frame, insn: *const DecodedInsn) -> u64 {
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

/// Fold a run-time flag record (see `lift::flags::encode`, and `lift::flags::RAW_CODE` for a
/// baseline function's raw host flags) into `base`: the flags the record defines are
/// replaced by the ones its operation computes. Pure function of its arguments.
pub extern "C" fn fold_flags(base: u64, code: u64, a: u64, b: u64, res: u64, cin: u64) -> u64 {
    use crate::lift::flags::{bits_of, decode, raw_status, MASK_SHIFT, OP_FIELD, RAW_OP};
    if code & OP_FIELD == RAW_OP {
        let mask = code >> MASK_SHIFT;
        return (base & !mask) | (raw_status(res) & mask);
    }
    match decode(code) {
        None => base,
        Some((op, size, mask)) => (base & !mask) | bits_of(op, size, mask, a, b, res, cin),
    }
}
