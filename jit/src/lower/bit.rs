//! Native lowering of BT/BTS/BTR/BTC with a register destination (register or imm8 bit
//! offset) and with a memory destination and an imm8 offset, as
//! `lockstep_interp::ops::bit::bit_op` defines them: the offset is taken modulo the operand
//! width, CF = the selected bit, the other status flags unchanged (`BT_FLAGS`). A memory
//! destination with a register offset (a bit string reaching outside the operand) stays on
//! the trampoline.

use super::flags::FlagOp;
use super::insn::Outcome;
use super::Lower;
use cranelift_codegen::ir::{InstBuilder, Value};
use iced_x86::{Instruction, Mnemonic, OpKind};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::{gpr_ref, op_size};
use lockstep_interp::state::flags::CF;

/// Is `ins` one of the forms lowered here?
pub fn covers(ins: &Instruction) -> bool {
    if ins.has_lock_prefix() || ins.code_size() != iced_x86::CodeSize::Code64 {
        return false;
    }
    if !matches!(
        ins.mnemonic(),
        Mnemonic::Bt | Mnemonic::Bts | Mnemonic::Btr | Mnemonic::Btc
    ) || ins.op_count() != 2
    {
        return false;
    }
    let reg = |n: u32| ins.op_kind(n) == OpKind::Register && gpr_ref(ins.op_register(n)).is_some();
    let imm = ins.op1_kind() == OpKind::Immediate8;
    match ins.op0_kind() {
        OpKind::Register => reg(0) && (reg(1) || imm),
        OpKind::Memory => super::mem::addressable(ins) && imm,
        _ => false,
    }
}

/// Lower `d` if it is covered.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<Outcome> {
    let ins = &d.ins;
    if !covers(ins) {
        return None;
    }
    let size = op_size(ins, 0);
    let w = size as i64 * 8;
    let m = ins.mnemonic();
    let n: Value = if ins.op1_kind() == OpKind::Immediate8 {
        l.iconst((ins.immediate8() as i64 & (w - 1)) as u64)
    } else {
        let r = l.read_reg(ins.op1_register());
        l.b.ins().band_imm_s(r, w - 1)
    };
    let mem = ins.op0_kind() == OpKind::Memory;
    let addr = mem.then(|| l.mem_addr(ins));
    let a = match addr {
        Some(addr) if m == Mnemonic::Bt => l.load(addr, size),
        Some(addr) => l.load_rmw(addr, size),
        None => l.read_reg(ins.op0_register()),
    };
    let t = l.b.ins().ushr(a, n);
    let cf = l.b.ins().band_imm_s(t, 1);
    let one = l.iconst(1);
    let sel = l.b.ins().ishl(one, n);
    let new = match m {
        Mnemonic::Bts => Some(l.b.ins().bor(a, sel)),
        Mnemonic::Btr => Some(l.b.ins().band_not(a, sel)),
        Mnemonic::Btc => Some(l.b.ins().bxor(a, sel)),
        _ => None,
    };
    let st = match (new, addr) {
        (Some(v), Some(addr)) => Some(l.store(addr, size, v)),
        (Some(v), None) => {
            l.write_reg(ins.op0_register(), v);
            None
        }
        _ => None,
    };
    // (Only CF: `res` is unused.)
    l.set_flags_masked(FlagOp::Bits, a, cf, a, size, CF, None);
    l.retire();
    if let Some(st) = st {
        l.smc_exit_if(st);
    }
    Some(Outcome::Continue)
}
