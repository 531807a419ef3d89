//! The hop stubs: the chain-table lookup that chained block exits end in, made once per
//! module and tail-called by the exits (see `Lower::emit_chain_exit`), instead of being
//! repeated inline at each exit; and the link stubs, which first try the function the exit's
//! own link (`chain::Link`) holds.
//!
//! An exit has written everything back; it passes the target RIP, the target's chain-table set
//! (or its link), `cpu.retired` as just stored, and the `entered` word the target gets (see
//! `Lower::skip_target_check`). The plain stub takes the set's first way if its RIP is the
//! target, else the second; if that entry holds the target and the budget covers the target
//! block's length, it counts the hop (with `JitConfig::count_chains`) and tail-calls the
//! entry's function; otherwise it stores RIP and returns [`ret::DISPATCH`] to the dispatcher
//! (the exit was tail-called, so its return goes straight there).
//!
//! The stubs are machine code assembled at start-up: compiled by Cranelift the plain one
//! needed a frame (frame pointers are required with tail calls) and 16 instructions on the
//! hop path instead of 11.
//!
//! Inline, the lookup was ~20 IR instructions and three IR blocks at every chained exit —
//! about a sixth of a boot's IR, which Cranelift compiles at ~0.8 µs per instruction — for an
//! extra direct jump per hop.

use super::block_signature;
use crate::chain;
use crate::frame::{ret, Frame, OFF_RIP};
use cranelift_codegen::ir::{types, AbiParam, Signature};
use cranelift_codegen::isa::CallConv;
use iced_x86::code_asm::*;
use iced_x86::IcedError;

/// `hop(state, frame, entered, target, set, retired) -> exit word`, `tail` convention (so that
/// exits tail-call it and it tail-calls the target): a block's parameters (`target` is the
/// `rip` the target is entered at) and two more.
pub fn hop_signature() -> Signature {
    let mut s = block_signature(CallConv::Tail);
    s.params.push(AbiParam::new(types::I64));
    s.params.push(AbiParam::new(types::I64));
    s
}

/// The stub as machine code (11 instructions on the hop path; it jumps through the entry's
/// `func` field). The `tail` convention passes `state, frame, entered, target, set,
/// retired` ([`hop_signature`]) in RDI, RSI, RDX, RCX, R8, R9 (no stack arguments, so its
/// `ret` is the one the exit would have made); it touches only RAX, R9, R10 and flags
/// (caller-saved in that convention), not RBP or RSP, and leaves RDI, RSI, RDX and RCX —
/// the target's arguments `state, frame, entered, rip` — as they came.
pub fn hop_code(count: bool) -> Result<Vec<u8>, iced_x86::IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut back = a.create_label();
    table_jump(&mut a, back, None, count)?;
    back_to_dispatcher(&mut a, &mut back)?;
    a.assemble(0)
}

/// The stub for direct exits, `hop_link`: the same signature as [`hop_code`]'s, with the exit's
/// link (`chain::Link`) in place of the set. The stub checks the budget against the link's
/// length and jumps to the link's function: one load before the jump, no table probe. An
/// empty link holds the fill stub ([`hop_fill_code`]) with length 0, so the jump needs no
/// test for it. It touches only RAX, R9 and flags.
pub fn hop_link_code(count: bool) -> Result<Vec<u8>, iced_x86::IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut back = a.create_label();
    jump_through_link(&mut a, back, count)?;
    back_to_dispatcher(&mut a, &mut back)?;
    a.assemble(0)
}

/// The fill stub, `hop_fill`: what an empty link (`chain::LinkTable::set_fill`) holds as its
/// function, reached with the link's registers (the link in R8, `retired` in R9 — the link's
/// length being 0 — the target in RCX). It takes back the hop the jump to it counted, then
/// makes an indirect exit's lookup and refill ([`dyn_refill`]: the target's set hashed in
/// the chain table the link names, the link filled with the target, its function and its
/// length, the budget check and the jump); on a miss, back to the dispatcher. It touches
/// only RAX, R8–R11 and flags.
pub fn hop_fill_code(count: bool) -> Result<Vec<u8>, iced_x86::IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut back = a.create_label();
    if count {
        a.sub(qword_ptr(rsi + Frame::OFF_CHAINS), 1)?;
    }
    dyn_refill(&mut a, back, count)?;
    back_to_dispatcher(&mut a, &mut back)?;
    a.assemble(0)
}

/// The stub for indirect exits, `hop_dyn`: as [`hop_link_code`], but the link caches the last
/// target: when the target is the link's RIP and the link holds a function, the budget check
/// and the jump; otherwise the table lookup in the target's set (hashed here; the link's
/// `set` is the table) and, on a hit, the link refilled with the target and its function.
pub fn hop_dyn_code(count: bool) -> Result<Vec<u8>, iced_x86::IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut back = a.create_label();
    let mut miss = a.create_label();
    // The same code a baseline indirect exit makes inline.
    own_linked_jump(&mut a, Some(miss), back, count)?;
    own_linked_jump_ends(&mut a, Some(&mut miss), &mut back, count)?;
    a.assemble(0)
}

/// An indirect exit's link at R8 holds another target (or nothing): the lookup of the target
/// in RCX in its set (`table + (hash(rip) >> shift) * 64`, the table being the link's `set`)
/// and, on a hit, the link refilled with the target and its function and the jump (else to
/// `back`). Touches RAX, R8–R11 and flags.
fn dyn_refill(a: &mut CodeAssembler, back: CodeLabel, count: bool) -> Result<(), IcedError> {
    a.mov(r11, r8)?;
    a.mov(r10, chain::HASH_MUL)?;
    a.imul_2(r10, rcx)?;
    a.shr(r10, chain::HASH_SHIFT)?;
    a.shl(r10, chain::SET_BYTES.trailing_zeros())?;
    a.add(r10, qword_ptr(r11 + chain::LINK_SET))?;
    a.mov(r8, r10)?;
    table_jump(a, back, Some(true), count)
}

/// The jump through the link at R8 as a baseline exit makes it inline (`base::emit`), with its
/// own indirect jump, which the host predicts for that exit alone, where the one jump of
/// [`hop_link_code`] is shared by every exit (heap: 0.91 → 0.68 s CPU, session 31). For an
/// indirect exit (`slow` given), to `slow` unless the link's RIP is the target in RCX (R9 is
/// still `retired` there); the budget check against the link's length (to `back` if the
/// target does not fit: see [`back_to_dispatcher`]); the hop counted; the jump (to the fill
/// stub when the link is empty). Touches RAX, R9 and flags.
pub fn own_linked_jump(
    a: &mut CodeAssembler,
    slow: Option<CodeLabel>,
    back: CodeLabel,
    count: bool,
) -> Result<(), IcedError> {
    if let Some(slow) = slow {
        a.cmp(rcx, qword_ptr(r8 + chain::LINK_RIP))?;
        a.jne(slow)?;
    }
    jump_through_link(a, back, count)
}

/// The cold ends of [`own_linked_jump`]: for an indirect exit, `slow` makes `hop_dyn`'s
/// table lookup and refill here, so that the jump to a target the link did not hold is this
/// exit's own too (a RET of a function called from many places); `back` returns to the
/// dispatcher at the target.
pub fn own_linked_jump_ends(
    a: &mut CodeAssembler,
    slow: Option<&mut CodeLabel>,
    back: &mut CodeLabel,
    count: bool,
) -> Result<(), IcedError> {
    if let Some(slow) = slow {
        a.set_label(slow)?;
        dyn_refill(a, *back, count)?;
    }
    back_to_dispatcher(a, back)
}

/// The jump through the link at R8: the budget check against the link's length (to `back` if
/// the block does not fit), the hop counted, the jump to the function (in RAX). An empty link
/// holds the fill stub and length 0 (`chain::LinkTable::fill`).
fn jump_through_link(a: &mut CodeAssembler, back: CodeLabel, count: bool) -> Result<(), IcedError> {
    a.mov(rax, qword_ptr(r8 + chain::LINK_FUNC))?;
    a.add(r9, qword_ptr(r8 + chain::LINK_LEN))?;
    a.cmp(r9, qword_ptr(rsi + Frame::OFF_CHAIN_END))?;
    a.ja(back)?;
    count_hop(a, count)?;
    a.jmp(rax)
}

/// The chain-table lookup in the set at R8 and the jump: the way that holds the target (the
/// first if its RIP matches, else the second), the budget check (`retired + len <=
/// chain_end`), the hop counted, the jump through the entry's `func`. With `fill`, the link
/// at R11 gets the entry's function and length first (and, if `fill` is `Some(true)`, the
/// target as its RIP).
fn table_jump(
    a: &mut CodeAssembler,
    back: CodeLabel,
    fill: Option<bool>,
    count: bool,
) -> Result<(), IcedError> {
    let (rip, len, func) = (chain::OFF_RIP, chain::OFF_LEN, chain::OFF_FUNC);
    a.mov(r10, qword_ptr(r8 + rip))?;
    a.lea(rax, qword_ptr(r8 + chain::ENTRY_BYTES as i32))?;
    a.cmp(r10, rcx)?;
    a.cmove(rax, r8)?;
    a.cmp(qword_ptr(rax + rip), rcx)?;
    a.jne(back)?;
    match fill {
        Some(set_rip) => {
            if set_rip {
                a.mov(qword_ptr(r11 + chain::LINK_RIP), rcx)?;
            }
            a.mov(r10, qword_ptr(rax + func))?;
            a.mov(qword_ptr(r11 + chain::LINK_FUNC), r10)?;
            a.mov(r10, qword_ptr(rax + len))?;
            a.mov(qword_ptr(r11 + chain::LINK_LEN), r10)?;
            a.add(r9, r10)?;
        }
        None => a.add(r9, qword_ptr(rax + len))?,
    }
    a.cmp(r9, qword_ptr(rsi + Frame::OFF_CHAIN_END))?;
    a.ja(back)?;
    count_hop(a, count)?;
    a.jmp(qword_ptr(rax + func))
}

/// With `count`, the hop counted in `Frame::chains` (`JitConfig::count_chains`: a
/// read-modify-write of one frame field per chained jump, ~5% of heap's run time, made only
/// when the statistics are asked for).
fn count_hop(a: &mut CodeAssembler, count: bool) -> Result<(), IcedError> {
    if count {
        a.add(qword_ptr(rsi + Frame::OFF_CHAINS), 1)?;
    }
    Ok(())
}

/// No jump: RIP is the target, back to the dispatcher.
fn back_to_dispatcher(a: &mut CodeAssembler, back: &mut CodeLabel) -> Result<(), IcedError> {
    a.set_label(back)?;
    a.mov(qword_ptr(rdi + OFF_RIP), rcx)?;
    a.mov(eax, ret::DISPATCH as u32)?;
    a.ret()
}

#[cfg(test)]
mod tests {
    use super::{hop_code, hop_dyn_code, hop_fill_code, hop_link_code};
    use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, OpAccess, Register};

    /// The machine-code stub writes only the scratch registers it claims (never RBP, RSP
    /// before its RET, or the target's arguments RDI, RSI, RDX), and ends in a jump and a
    /// RET.
    #[test]
    fn the_machine_code_stub_writes_only_scratch_registers() {
        scratch_only(
            &hop_code(true).expect("assembles"),
            &[Register::RAX, Register::R9, Register::R10],
        );
    }

    #[test]
    fn the_link_stub_writes_only_scratch_registers() {
        let scratch = [
            Register::RAX,
            Register::R8,
            Register::R9,
            Register::R10,
            Register::R11,
        ];
        for count in [false, true] {
            scratch_only(&hop_link_code(count).expect("assembles"), &scratch);
            scratch_only(&hop_dyn_code(count).expect("assembles"), &scratch);
            scratch_only(&hop_fill_code(count).expect("assembles"), &scratch);
        }
    }

    fn scratch_only(code: &[u8], scratch: &[Register]) {
        let mut dec = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
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
                    assert!(scratch.contains(&r), "{ins} writes {r:?}");
                }
            }
            last.push(ins.mnemonic());
        }
        assert_eq!(last.last(), Some(&iced_x86::Mnemonic::Ret));
        assert!(last.contains(&iced_x86::Mnemonic::Jmp));
    }
}
