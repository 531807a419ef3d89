//! Native path for the common x87 instructions: FLD/FILD (memory and ST(i)) and
//! FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR in all their forms. The form is decoded once at compile
//! time (`lockstep_interp::ops::x87_decoded::form_of`) and the compiled code calls
//! [`x87_op`] with it, the instruction's address and the memory operand's bits read through
//! the inline TLB probe; the helper computes with the interpreter's own compute and commit
//! functions. It touches only the x87 state, so the guest registers stay in SSA values
//! around it (the trampoline would store and reload them). Anything else — a TLB miss, an
//! operand across a page, the FPU unavailable, a pending or an unmasked exception — runs the
//! whole instruction through the interpreter's handler in a cold path (the helper declines
//! before changing anything), so every fault and corner case is the interpreter's.

use super::muldiv::{handler_exit_if, read_host_or_handler};
use super::{guest_mem, Lower};
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature};
use iced_x86::{Instruction, OpKind};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::ops::x87_decoded::{self, form_of, mem_bytes};
use lockstep_interp::state::CpuState;

/// Covered: a form [`x87_decoded::run`] handles, in 64-bit code, with an addressable memory
/// operand if it has one.
pub fn covers(ins: &Instruction) -> bool {
    ins.code_size() == iced_x86::CodeSize::Code64
        && form_of(ins).is_some()
        && (ins.op_count() == 0 || ins.op_kind(0) != OpKind::Memory || super::mem::addressable(ins))
}

/// Run a packed x87 form on the guest state: 0 done, 1 declined (state unchanged; the
/// interpreter's handler runs the instruction).
///
/// # Safety
/// `state` is the `CpuState` of the current run, not otherwise borrowed while compiled code
/// runs.
pub unsafe extern "C" fn x87_op(state: *mut CpuState, form: u64, ip: u64, lo: u64, hi: u64) -> u64 {
    // SAFETY: see the function contract.
    let s = unsafe { &mut *state };
    !x87_decoded::run(s, form, ip, lo, hi) as u64
}

/// Lower `d` if it is covered: `Some(Continue)`.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<super::insn::Outcome> {
    let ins = &d.ins;
    if !covers(ins) {
        return None;
    }
    let form = form_of(ins)?;
    let bytes = mem_bytes(form);
    let (lo, hi) = if bytes > 0 {
        let h = read_host_or_handler(l, d, bytes);
        let lo = match bytes {
            2 => {
                let v = l.b.ins().load(types::I16, guest_mem(), h, 0);
                l.b.ins().uextend(types::I64, v)
            }
            4 => {
                let v = l.b.ins().load(types::I32, guest_mem(), h, 0);
                l.b.ins().uextend(types::I64, v)
            }
            _ => l.b.ins().load(types::I64, guest_mem(), h, 0),
        };
        let hi = if bytes == 10 {
            let v = l.b.ins().load(types::I16, guest_mem(), h, 8);
            l.b.ins().uextend(types::I64, v)
        } else {
            l.b.ins().iconst(types::I64, 0)
        };
        (lo, hi)
    } else {
        let z = l.b.ins().iconst(types::I64, 0);
        (z, z)
    };
    let cc = l.b.func.dfg.signatures[l.sigs.fold].call_conv;
    let mut sig = Signature::new(cc);
    sig.params = (0..5).map(|_| AbiParam::new(types::I64)).collect();
    sig.returns.push(AbiParam::new(types::I64));
    let sref = l.b.import_signature(sig);
    let f = l.iconst(x87_op as *const () as u64);
    let form = l.iconst(form);
    let ip = l.iconst(ins.ip());
    let st = l.state;
    let call = l.b.ins().call_indirect(sref, f, &[st, form, ip, lo, hi]);
    let declined = l.b.inst_results(call)[0];
    handler_exit_if(l, declined, d);
    l.retire();
    Some(super::insn::Outcome::Continue)
}
