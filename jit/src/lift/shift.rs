//! Native lowering of SHL/SAL/SHR/SAR/ROL/ROR of a register by CL (all sizes) and of
//! SHLD/SHRD of 32/64-bit registers by an immediate or CL, as `lockstep_interp::ops::shift`
//! and `shift_double` define them (OF for every non-zero count as for a count of 1, AF = 0).
//! A run-time masked count of 0 changes no flag: the flags are then folded in a cold block
//! and the record (`FlagOp::BitsOrKeep`) selects them at run time — unless a later
//! instruction of the block overwrites them unobserved (`flags::dead_after`).

use super::flags::FlagOp;
use super::insn::{reg_op, Outcome};
use super::{host_mem, Lower};
use crate::frame::OFF_RFLAGS;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, Value};
use iced_x86::{Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::op_size;
use lockstep_interp::state::flags::{CF, OF, STATUS};
use lockstep_interp::state::reg;

fn cl(ins: &Instruction, n: u32) -> bool {
    ins.op_kind(n) == OpKind::Register && ins.op_register(n) == Register::CL
}

/// Is `ins` one of the forms lowered here?
pub fn covers(ins: &Instruction) -> bool {
    if ins.has_lock_prefix() || ins.code_size() != iced_x86::CodeSize::Code64 {
        return false;
    }
    match ins.mnemonic() {
        Mnemonic::Shl
        | Mnemonic::Sal
        | Mnemonic::Shr
        | Mnemonic::Sar
        | Mnemonic::Rol
        | Mnemonic::Ror => ins.op_count() == 2 && reg_op(ins, 0) && cl(ins, 1),
        Mnemonic::Shld | Mnemonic::Shrd => {
            ins.op_count() == 3
                && reg_op(ins, 0)
                && reg_op(ins, 1)
                && matches!(op_size(ins, 0), 4 | 8)
                && (cl(ins, 2) || ins.op2_kind() == OpKind::Immediate8)
        }
        _ => false,
    }
}

/// Bit `n` (constant) of `v`, as 0/1.
fn bit(l: &mut Lower, v: Value, n: u32) -> Value {
    let t = l.b.ins().ushr_imm_s(v, n as i64);
    l.b.ins().band_imm_s(t, 1)
}

/// `cf | of << 11` (both 0/1): the `b` of a [`FlagOp::Bits`] record.
fn cf_of(l: &mut Lower, cf: Value, of: Value) -> Value {
    let o = l.b.ins().ishl_imm_s(of, 11);
    l.b.ins().bor(cf, o)
}

/// The current RFLAGS when `zero` is true (folded in a cold block), else 0.
fn old_flags_if(l: &mut Lower, zero: Value) -> Value {
    let fold = l.b.create_block();
    let join = l.b.create_block();
    l.b.append_block_param(join, types::I64);
    l.b.set_cold_block(fold);
    let z = l.iconst(0);
    l.b.ins().brif(zero, fold, &[], join, &[z.into()]);
    l.b.seal_block(fold);
    l.b.switch_to_block(fold);
    // (Inline formulas, not the helper: loops over counts 0..width take this once a round.)
    let rf = match l.flags_value() {
        Some(v) => v,
        None => l.b.ins().load(types::I64, host_mem(), l.state, OFF_RFLAGS),
    };
    l.b.ins().jump(join, &[rf.into()]);
    l.b.seal_block(join);
    l.b.switch_to_block(join);
    l.b.block_params(join)[0]
}

/// Lower `d` if it is covered.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<Outcome> {
    let ins = &d.ins;
    if !covers(ins) {
        return None;
    }
    let size = op_size(ins, 0);
    let w = size as u32 * 8;
    let cmask: i64 = if size == 8 { 63 } else { 31 };
    // The masked count: a constant (SHLD/SHRD imm8) or CL's.
    let count_n = if ins.op_count() == 3 { 2 } else { 1 };
    // For CL: whether the count is 0, and (unless the flags are dead: then nothing can see
    // that a count of 0 kept them) the old RFLAGS on that path, else 0.
    let mut zero: Option<Value> = None;
    let mut keep: Option<(Value, Value)> = None;
    let c = if cl(ins, count_n) {
        let rcx = l.gpr(reg::RCX);
        let c = l.b.ins().band_imm_s(rcx, cmask);
        let z = l.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
        zero = Some(z);
        if !l.flags_dead {
            keep = Some((z, old_flags_if(l, z)));
        }
        c
    } else {
        let c = ins.immediate8() as i64 & cmask;
        if c == 0 {
            // A count of 0 changes no flag; the register is still written (zero-extension).
            let dst = ins.op0_register();
            let v = l.read_reg(dst);
            l.write_reg(dst, v);
            l.retire();
            return Some(Outcome::Continue);
        }
        l.iconst(c as u64)
    };
    // From here on the count is 1..=cmask (or, for CL, 0 with `keep`: every value below
    // is then replaced).
    let dst = ins.op0_register();
    let a = l.read_reg(dst);
    let one = l.iconst(1);
    let c1 = l.b.ins().isub(c, one);
    let msb = bit(l, a, w - 1);
    let m = ins.mnemonic();
    let (res, b, mask) = match m {
        Mnemonic::Shl | Mnemonic::Sal => {
            let r = l.b.ins().ishl(a, c);
            let r = l.zext(r, size);
            // CF: bit w-c of a (0 once c exceeds the width), = bit w-1 of a << (c-1).
            let t = l.b.ins().ishl(a, c1);
            let cf = bit(l, t, w - 1);
            let m2 = bit(l, a, w - 2);
            let of = l.b.ins().bxor(msb, m2);
            (r, cf_of(l, cf, of), STATUS)
        }
        Mnemonic::Shr => {
            let r = l.b.ins().ushr(a, c);
            let t = l.b.ins().ushr(a, c1);
            let cf = l.b.ins().band_imm_s(t, 1);
            (r, cf_of(l, cf, msb), STATUS)
        }
        Mnemonic::Sar => {
            let sa = l.sext(a, size);
            let r = l.b.ins().sshr(sa, c);
            let r = l.zext(r, size);
            let t = l.b.ins().sshr(sa, c1);
            let cf = l.b.ins().band_imm_s(t, 1);
            (r, cf, STATUS)
        }
        Mnemonic::Rol | Mnemonic::Ror => {
            let e = l.b.ins().band_imm_s(c, w as i64 - 1);
            let n = l.narrow(a, size);
            let e = if size == 8 {
                e
            } else {
                let ty = l.b.func.dfg.value_type(n);
                l.b.ins().ireduce(ty, e)
            };
            let r = if m == Mnemonic::Rol {
                l.b.ins().rotl(n, e)
            } else {
                l.b.ins().rotr(n, e)
            };
            let r = if size == 8 {
                r
            } else {
                l.b.ins().uextend(cranelift_codegen::ir::types::I64, r)
            };
            let (cf, of) = if m == Mnemonic::Rol {
                let cf = l.b.ins().band_imm_s(r, 1);
                let m2 = bit(l, a, w - 2);
                (cf, l.b.ins().bxor(msb, m2))
            } else {
                let cf = bit(l, r, w - 1);
                let lsb = l.b.ins().band_imm_s(a, 1);
                (cf, l.b.ins().bxor(msb, lsb))
            };
            (r, cf_of(l, cf, of), CF | OF)
        }
        _ => {
            // SHLD/SHRD, 32/64-bit: the count is below the width.
            let s = l.read_reg(ins.op1_register());
            let wv = l.iconst(w as u64);
            let wc = l.b.ins().isub(wv, c);
            let (r, cf, of) = if m == Mnemonic::Shld {
                let x = l.b.ins().ishl(a, c);
                let y = l.b.ins().ushr(s, wc);
                let r = l.b.ins().bor(x, y);
                let t = l.b.ins().ushr(a, wc);
                let cf = l.b.ins().band_imm_s(t, 1);
                let m2 = bit(l, a, w - 2);
                (r, cf, l.b.ins().bxor(msb, m2))
            } else {
                let x = l.b.ins().ushr(a, c);
                let y = l.b.ins().ishl(s, wc);
                let r = l.b.ins().bor(x, y);
                let t = l.b.ins().ushr(a, c1);
                let cf = l.b.ins().band_imm_s(t, 1);
                let lsb = l.b.ins().band_imm_s(s, 1);
                (r, cf, l.b.ins().bxor(msb, lsb))
            };
            let r = l.zext(r, size);
            // (A count of 0 would fill from all of `s`: keep `a`.)
            let r = match zero {
                Some(z) => l.b.ins().select(z, a, r),
                None => r,
            };
            (r, cf_of(l, cf, of), STATUS)
        }
    };
    // (SHL/SHR/SAR/ROL/ROR by 0 give `a` already.)
    l.write_reg(dst, res);
    match keep {
        Some((zero, old)) => {
            let b = l.b.ins().select(zero, old, b);
            let z = l.b.ins().uextend(types::I64, zero);
            l.set_flags_masked(FlagOp::BitsOrKeep, a, b, res, size, mask, Some(z));
        }
        None => l.set_flags_masked(FlagOp::Bits, a, b, res, size, mask, None),
    }
    l.retire();
    Some(Outcome::Continue)
}
