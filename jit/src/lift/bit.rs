//! Native lowering of BT/BTS/BTR/BTC with a register destination (register or imm8 bit
//! offset) and with a memory destination and an imm8 offset, as
//! `lockstep_interp::ops::bit::bit_op` defines them: the offset is taken modulo the operand
//! width, CF = the selected bit, the other status flags unchanged (`BT_FLAGS`). A memory
//! destination with a register offset (a bit string reaching outside the operand) stays on
//! the trampoline. Also BSF/BSR/TZCNT/LZCNT/POPCNT (register or memory source) and BSWAP.

use super::flags::FlagOp;
use super::insn::{mem_op, reg_op, rm_op, Outcome};
use super::Lower;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, Value};
use iced_x86::{Instruction, Mnemonic, OpKind};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::{gpr_ref, op_size};
use lockstep_interp::state::flags::{CF, STATUS};

/// Is `ins` one of the forms lowered here?
pub fn covers(ins: &Instruction) -> bool {
    if ins.has_lock_prefix() || ins.code_size() != iced_x86::CodeSize::Code64 {
        return false;
    }
    let reg0 = reg_op(ins, 0);
    match ins.mnemonic() {
        Mnemonic::Bsf | Mnemonic::Bsr | Mnemonic::Tzcnt | Mnemonic::Lzcnt | Mnemonic::Popcnt => {
            return ins.op_count() == 2 && reg0 && rm_op(ins, 1);
        }
        Mnemonic::Bswap => return ins.op_count() == 1 && reg0,
        _ => {}
    }
    if !matches!(
        ins.mnemonic(),
        Mnemonic::Bt | Mnemonic::Bts | Mnemonic::Btr | Mnemonic::Btc
    ) || ins.op_count() != 2
    {
        return false;
    }
    let imm = ins.op1_kind() == OpKind::Immediate8;
    (reg0 && (reg_op(ins, 1) || imm)) || (mem_op(ins, 0) && imm)
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
    match m {
        Mnemonic::Bsf | Mnemonic::Bsr => scan(l, ins, size),
        Mnemonic::Tzcnt | Mnemonic::Lzcnt | Mnemonic::Popcnt => count(l, ins, size),
        Mnemonic::Bswap => {
            let dst = ins.op0_register();
            let v = match size {
                8 => {
                    let a = l.read_reg(dst);
                    l.b.ins().bswap(a)
                }
                4 => {
                    let a = l.read_reg(dst);
                    let n = l.b.ins().ireduce(types::I32, a);
                    let r = l.b.ins().bswap(n);
                    l.b.ins().uextend(types::I64, r)
                }
                // The 16-bit form clears the low 16 bits (host rule, `ops::mov::bswap_value`).
                _ => l.iconst(0),
            };
            l.write_reg(dst, v);
        }
        _ => {
            bit_test(l, ins, size, w);
            return Some(Outcome::Continue);
        }
    }
    l.retire();
    Some(Outcome::Continue)
}

/// Source operand 1 (register or memory), zero-extended.
fn src(l: &mut Lower, ins: &Instruction, size: u8) -> Value {
    if ins.op1_kind() == OpKind::Memory {
        let a = l.mem_addr(ins);
        l.load(a, size)
    } else {
        l.read_reg(ins.op1_register())
    }
}

/// BSF/BSR (`ops::bit::bsf`): the index of the lowest/highest set bit; a zero source writes
/// no register (not even a 32-bit zero-extension). Flags (host rule): CF = OF = SF = AF = 0,
/// ZF = (source == 0), PF = parity of the index (1 for a zero source) — a `Logic` record of
/// `index | 0x100` (0 for a zero source) gives exactly these.
fn scan(l: &mut Lower, ins: &Instruction, size: u8) {
    let s = src(l, ins, size);
    let idx = if ins.mnemonic() == Mnemonic::Bsf {
        l.b.ins().ctz(s)
    } else {
        let z = l.b.ins().clz(s);
        let k = l.iconst(63);
        l.b.ins().isub(k, z)
    };
    let zero = l.b.ins().icmp_imm_s(IntCC::Equal, s, 0);
    let g = gpr_ref(ins.op0_register()).expect("GPR destination");
    let old = l.gpr(g.index);
    let new = if size == 2 {
        let keep = l.b.ins().band_imm_s(old, !0xffff);
        l.b.ins().bor(keep, idx)
    } else {
        idx
    };
    let v = l.b.ins().select(zero, old, new);
    l.set_gpr(g.index, v);
    let tagged = l.b.ins().bor_imm_s(idx, 0x100);
    let z = l.iconst(0);
    let res = l.b.ins().select(zero, z, tagged);
    l.set_flags(FlagOp::Logic, res, res, res, size);
}

/// TZCNT/LZCNT/POPCNT (`ops::bit::{tzcnt, lzcnt, popcnt}`): all six status flags, computed
/// here (CF = source zero for TZCNT/LZCNT, ZF = result zero (POPCNT: source zero, the same),
/// the others 0).
fn count(l: &mut Lower, ins: &Instruction, size: u8) {
    let s = src(l, ins, size);
    let w = size as i64 * 8;
    let res = match ins.mnemonic() {
        Mnemonic::Tzcnt => {
            // (A zero source: 64 from `ctz`, the operand width wanted.)
            let t = l.b.ins().ctz(s);
            let m = l.iconst(w as u64);
            l.b.ins().umin(t, m)
        }
        Mnemonic::Lzcnt => {
            let t = l.b.ins().clz(s);
            l.b.ins().iadd_imm_s(t, w - 64)
        }
        _ => l.b.ins().popcnt(s),
    };
    l.write_reg(ins.op0_register(), res);
    if l.flags_dead {
        // A later instruction of the block overwrites the flags unobserved
        // (`flags::dead_after`): no need to fold these into RFLAGS.
        return;
    }
    let zf = l.b.ins().icmp_imm_s(IntCC::Equal, res, 0);
    let zf = l.b.ins().uextend(types::I64, zf);
    let zf = l.b.ins().ishl_imm_s(zf, 6);
    let bits = if ins.mnemonic() == Mnemonic::Popcnt {
        zf
    } else {
        let cf = l.b.ins().icmp_imm_s(IntCC::Equal, s, 0);
        let cf = l.b.ins().uextend(types::I64, cf);
        l.b.ins().bor(zf, cf)
    };
    // Every status flag is overwritten: the pending records are dead.
    l.pending.clear();
    let rf = l.gpr(super::RFLAGS);
    let rf = l.b.ins().band_imm_s(rf, !(STATUS as i64));
    let rf = l.b.ins().bor(rf, bits);
    l.set_gpr(super::RFLAGS, rf);
}

/// BT/BTS/BTR/BTC.
fn bit_test(l: &mut Lower, ins: &Instruction, size: u8, w: i64) {
    let m = ins.mnemonic();
    let n: Value = if ins.op1_kind() == OpKind::Immediate8 {
        l.iconst((ins.immediate8() as i64 & (w - 1)) as u64)
    } else {
        let r = l.read_reg(ins.op1_register());
        l.b.ins().band_imm_s(r, w - 1)
    };
    let mem = ins.op0_kind() == OpKind::Memory;
    let addr = mem.then(|| l.mem_addr(ins));
    let (a, host) = match addr {
        Some(addr) if m == Mnemonic::Bt => (l.load(addr, size), None),
        Some(addr) => {
            let (a, host) = l.load_rmw(addr, size);
            (a, Some(host))
        }
        None => (l.read_reg(ins.op0_register()), None),
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
    match (new, host) {
        (Some(v), Some(host)) => l.store_host(host, size, v),
        (Some(v), None) => l.write_reg(ins.op0_register(), v),
        _ => {}
    }
    // (Only CF: `res` is unused.)
    l.set_flags_masked(FlagOp::Bits, a, cf, a, size, CF, None);
    l.retire();
}
