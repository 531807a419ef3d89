//! The hop stub: the chain-table lookup that every chained block exit ends in, made once
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
//! The module's stub is [`hop_code`], assembled machine code; [`emit_hop`] is the same stub
//! as Cranelift IR (`LOCKSTEP_JIT_HOP=ir`).
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

/// The stub as machine code, assembled here rather than compiled: Cranelift's version has to
/// set up and tear down a frame (frame pointers are required with tail calls) and jumps
/// through a register, 16 instructions on the hop path; this one has 11 and jumps through the
/// entry. Same contract as [`emit_hop`]: the `tail` convention passes `state, frame,
/// entered, target, set, retired` in RDI, RSI, RDX, RCX, R8, R9 (no stack arguments, so its
/// `ret` is the one the exit would have made); it touches only RAX, R9, R10 and flags
/// (caller-saved in that convention), not RBP or RSP, and leaves RDI, RSI and RDX — the
/// target's arguments — as they came.
pub fn hop_code() -> Result<Vec<u8>, iced_x86::IcedError> {
    use iced_x86::code_asm::*;
    let mut a = CodeAssembler::new(64)?;
    let mut back = a.create_label();
    let (rip, len, func) = (chain::OFF_RIP, chain::OFF_LEN, chain::OFF_FUNC);
    // The way that holds the target: the first if its RIP matches, else the second.
    a.mov(r10, qword_ptr(r8 + rip))?;
    a.lea(rax, qword_ptr(r8 + chain::ENTRY_BYTES as i32))?;
    a.cmp(r10, rcx)?;
    a.cmove(rax, r8)?;
    a.cmp(qword_ptr(rax + rip), rcx)?;
    a.jne(back)?;
    // The target block must fit in the budget: retired + len <= chain_end.
    a.add(r9, qword_ptr(rax + len))?;
    a.cmp(r9, qword_ptr(rsi + Frame::OFF_CHAIN_END))?;
    a.ja(back)?;
    a.add(qword_ptr(rsi + Frame::OFF_CHAINS), 1)?;
    a.jmp(qword_ptr(rax + func))?;
    // No entry: RIP is the target, back to the dispatcher.
    a.set_label(&mut back)?;
    a.mov(qword_ptr(rdi + OFF_RIP), rcx)?;
    a.mov(eax, ret::DISPATCH as u32)?;
    a.ret()?;
    a.assemble(0)
}

#[cfg(test)]
mod tests {
    use super::hop_code;
    use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, OpAccess, Register};

    /// The machine-code stub writes only the scratch registers it claims (never RBP, RSP
    /// before its RET, or the target's arguments RDI, RSI, RDX), and ends in a jump and a
    /// RET.
    #[test]
    fn the_machine_code_stub_writes_only_scratch_registers() {
        let code = hop_code().expect("assembles");
        let mut dec = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE);
        let mut fac = InstructionInfoFactory::new();
        let mut last = Vec::new();
        for ins in &mut dec {
            assert!(!ins.is_invalid());
            // (RET's own RSP update is the return the exit would have made.)
            let ret = ins.mnemonic() == iced_x86::Mnemonic::Ret;
            for u in fac.info(&ins).used_registers().iter().filter(|_| !ret) {
                if matches!(
                    u.access(),
                    OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite
                ) {
                    let r = u.register().full_register();
                    assert!(
                        [Register::RAX, Register::R9, Register::R10].contains(&r),
                        "{ins} writes {r:?}"
                    );
                }
            }
            last.push(ins.mnemonic());
        }
        assert_eq!(last.last(), Some(&iced_x86::Mnemonic::Ret));
        assert!(last.contains(&iced_x86::Mnemonic::Jmp));
    }
}
