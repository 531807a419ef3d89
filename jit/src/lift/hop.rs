//! The hop stub: the chain-table lookup that every chained block exit ends in, compiled once
//! per module and tail-called by the exits (see `Lower::emit_chain_exit`), instead of being
//! repeated inline at each exit.
//!
//! An exit has written everything back; it passes the target RIP, the target's chain-table set
//! (a constant for direct exits), `cpu.retired` as just stored, and the `entered` word the
//! target gets (see `Lower::skip_target_check`). The stub takes the set's first way if its RIP
//! is the target, else the second; if that entry holds the target and the budget covers the
//! target block's length, it counts the hop and tail-calls the entry's function; otherwise it
//! stores RIP and returns [`ret::DISPATCH`] to the dispatcher (the exit was tail-called, so its
//! return goes straight there).
//!
//! Inline, the lookup was ~20 IR instructions and three IR blocks at every chained exit —
//! about a sixth of a boot's IR, which Cranelift compiles at ~0.8 µs per instruction — for an
//! extra direct jump per hop.

use super::{block_signature, host_mem};
use crate::chain;
use crate::frame::{ret, Frame, OFF_RIP};
use cranelift_codegen::ir::{condcodes::IntCC, types, AbiParam, InstBuilder, Signature, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;

/// `hop(state, frame, entered, target, set, retired) -> exit word`, `tail` convention (so that
/// exits tail-call it and it tail-calls the target).
pub fn hop_signature() -> Signature {
    let mut s = block_signature(CallConv::Tail);
    s.params.push(AbiParam::new(types::I64));
    s.params.push(AbiParam::new(types::I64));
    s.params.push(AbiParam::new(types::I64));
    s
}

/// Emit the stub's body in `b`, positioned in its entry block, given its parameters (see
/// [`hop_signature`]).
pub fn emit_hop(b: &mut FunctionBuilder<'_>, p: &[Value]) {
    let [state, frame, entered, target, set, r] = p else {
        panic!("hop stub: {} parameters, want 6", p.len())
    };
    let (state, frame, entered, target, set, r) = (*state, *frame, *entered, *target, *set, *r);
    let ld = |b: &mut FunctionBuilder<'_>, base: Value, off: i32| {
        b.ins().load(types::I64, host_mem(), base, off)
    };
    let w0 = ld(b, set, chain::OFF_RIP);
    let in_w0 = b.ins().icmp(IntCC::Equal, w0, target);
    let w1 = b.ins().iadd_imm_s(set, chain::ENTRY_BYTES);
    let e = b.ins().select(in_w0, set, w1);
    let e_rip = ld(b, e, chain::OFF_RIP);
    let ok = b.ins().icmp(IntCC::Equal, e_rip, target);
    let fits = b.create_block();
    let hop = b.create_block();
    let back = b.create_block();
    b.set_cold_block(back);
    b.ins().brif(ok, fits, &[], back, &[]);
    b.seal_block(fits);
    b.switch_to_block(fits);
    let len = ld(b, e, chain::OFF_LEN);
    let end = b.ins().iadd(r, len);
    let lim = ld(b, frame, Frame::OFF_CHAIN_END);
    let c = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, lim);
    b.ins().brif(c, hop, &[], back, &[]);
    b.seal_block(hop);
    b.seal_block(back);
    b.switch_to_block(hop);
    let n = ld(b, frame, Frame::OFF_CHAINS);
    let n = b.ins().iadd_imm_s(n, 1);
    b.ins().store(host_mem(), n, frame, Frame::OFF_CHAINS);
    let func = ld(b, e, chain::OFF_FUNC);
    let sig = b.import_signature(block_signature(CallConv::Tail));
    b.ins()
        .return_call_indirect(sig, func, &[state, frame, entered]);
    b.switch_to_block(back);
    b.ins().store(host_mem(), target, state, OFF_RIP);
    let code = b.ins().iconst(types::I64, ret::DISPATCH as i64);
    b.ins().return_(&[code]);
}
