//! Native lowering of the one-operand MUL/IMUL and DIV/IDIV (register or memory source, all
//! sizes), as `lockstep_interp::ops::muldiv` defines them. Divisions take a native fast path
//! when they cannot fault (divisor non-zero, quotient fits; 128-by-64-bit unsigned divisions
//! through a small pure helper); anything else — #DE, a signed 128-bit dividend, a memory
//! source that misses the TLB — runs the interpreter's handler in a cold exit that leaves
//! the block, so every fault and corner case is the interpreter's.

use super::flags::FlagOp;
use super::insn::{rm_op, Outcome};
use super::{host_mem, Lower, Rip, GPRS};
use crate::frame::OFF_RFLAGS;
use cranelift_codegen::ir::{condcodes::IntCC, types, AbiParam, InstBuilder, Signature, Value};
use iced_x86::{Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::op_size;

/// Is `ins` a one-operand MUL/IMUL/DIV/IDIV lowered here?
pub fn covers(ins: &Instruction) -> bool {
    if ins.has_lock_prefix() || ins.code_size() != iced_x86::CodeSize::Code64 {
        return false;
    }
    let m = ins.mnemonic();
    let one = matches!(m, Mnemonic::Mul | Mnemonic::Div | Mnemonic::Idiv)
        || (m == Mnemonic::Imul && ins.op_count() == 1);
    one && ins.op_count() == 1 && rm_op(ins, 0)
}

/// Host address of `d`'s memory operand (`size` bytes) on a read-TLB hit; a miss takes
/// [`handler_exit_if`]'s cold path (only a RAM access that hits is read natively, so the
/// handler may read the operand again).
pub(super) fn read_host_or_handler(l: &mut Lower, d: &DecodedInsn, size: u8) -> Value {
    let a = l.mem_addr(&d.ins);
    let tr = l.tlb_read();
    let (hit, entry) = l.tlb_probe(tr, a.lin, size);
    let miss = l.b.ins().icmp_imm_s(IntCC::Equal, hit, 0);
    handler_exit_if(l, miss, d);
    l.host_addr(entry, a.lin)
}

/// When `cond` is true, take a cold path that runs the current instruction through the
/// interpreter's handler and leaves the block (or jumps to the next region block) after it;
/// continue on the main path otherwise. The compile-time state is left alone.
pub(super) fn handler_exit_if(l: &mut Lower, cond: Value, d: &DecodedInsn) {
    let exit = l.b.create_block();
    let cont = l.b.create_block();
    l.b.set_cold_block(exit);
    l.b.ins().brif(cond, exit, &[], cont, &[]);
    l.b.seal_block(exit);
    l.b.seal_block(cont);
    l.b.switch_to_block(exit);
    l.cold = true;
    l.store_regs(l.dirty & GPRS);
    if let Some(f) = l.flags_value() {
        l.b.ins().store(host_mem(), f, l.state, OFF_RFLAGS);
    }
    let _ = l.store_retired();
    // Everything is in memory now, as for a trampoline call: leave with the handler's status
    // unless it is NEXT, else continue at the next instruction through a chain exit (or a
    // jump inside the region); the main path's compile-time state is restored after.
    let saved = (
        l.loaded,
        l.dirty,
        core::mem::take(&mut l.pending),
        l.k,
        l.ret_stale,
        l.rip_in_memory,
        l.sse_ok,
        l.avx_ok,
        l.mx_env,
    );
    l.loaded = 0;
    l.dirty = 0;
    l.exec_call(d);
    let next = l.next_ip;
    l.emit_chain_exit(Rip::Const(next));
    (
        l.loaded,
        l.dirty,
        l.pending,
        l.k,
        l.ret_stale,
        l.rip_in_memory,
        l.sse_ok,
        l.avx_ok,
        l.mx_env,
    ) = saved;
    l.cold = false;
    l.b.switch_to_block(cont);
}

/// `(hi:lo) / d` for `hi < d` (the quotient fits in 64 bits): the quotient. Pure (the
/// interpreter's `div_128_by_64`: the host's DIV, exact for these operands).
extern "C" fn udiv128(hi: u64, lo: u64, d: u64) -> u64 {
    if hi < d {
        return lockstep_interp::ops::muldiv::div_128_by_64(hi, lo, d).0;
    }
    let n = ((hi as u128) << 64) | lo as u128;
    // (`d` > `hi` >= 0 on the only path that calls this; `max(1)` keeps it total.)
    (n / d.max(1) as u128) as u64
}

/// The accumulator registers of a `size`-byte operation: (rAX part, rDX part).
fn acc_regs(size: u8) -> (Register, Register) {
    match size {
        1 => (Register::AL, Register::AH),
        2 => (Register::AX, Register::DX),
        4 => (Register::EAX, Register::EDX),
        _ => (Register::RAX, Register::RDX),
    }
}

/// Lower `d` if it is covered.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<Outcome> {
    let ins = &d.ins;
    if !covers(ins) {
        return None;
    }
    let size = op_size(ins, 0);
    match ins.mnemonic() {
        Mnemonic::Mul | Mnemonic::Imul => {
            let src = if ins.op0_kind() == OpKind::Memory {
                let a = l.mem_addr(ins);
                l.load(a, size)
            } else {
                l.read_reg(ins.op0_register())
            };
            mul(l, ins.mnemonic() == Mnemonic::Imul, src, size);
        }
        _ => {
            let src = if ins.op0_kind() == OpKind::Memory {
                // Only a RAM access that hits the TLB is read here: a cold path may run the
                // handler, which reads the operand again (harmless for RAM only).
                let host = read_host_or_handler(l, d, size);
                let mf = super::guest_mem();
                match size {
                    1 => l.b.ins().uload8(types::I64, mf, host, 0),
                    2 => l.b.ins().uload16(types::I64, mf, host, 0),
                    4 => l.b.ins().uload32(mf, host, 0),
                    _ => l.b.ins().load(types::I64, mf, host, 0),
                }
            } else {
                l.read_reg(ins.op0_register())
            };
            div(l, d, ins.mnemonic() == Mnemonic::Idiv, src, size);
        }
    }
    l.retire();
    Some(Outcome::Continue)
}

/// rDX:rAX (AX for bytes) = rAX * `src`; flags as `muldiv::mul_flags` (the `Mul` record).
fn mul(l: &mut Lower, signed: bool, src: Value, size: u8) {
    let (ra, rd) = acc_regs(size);
    let a = l.read_reg(ra);
    let (lo, hi, ovf) = if size == 8 {
        let lo = l.b.ins().imul(a, src);
        let hi = if signed {
            l.b.ins().smulhi(a, src)
        } else {
            l.b.ins().umulhi(a, src)
        };
        let o = if signed {
            let sign = l.b.ins().sshr_imm_s(lo, 63);
            l.b.ins().icmp(IntCC::NotEqual, hi, sign)
        } else {
            l.b.ins().icmp_imm_s(IntCC::NotEqual, hi, 0)
        };
        (lo, hi, o)
    } else {
        // The full product fits in 64 bits.
        let p = if signed {
            let x = l.sext(a, size);
            let y = l.sext(src, size);
            l.b.ins().imul(x, y)
        } else {
            l.b.ins().imul(a, src)
        };
        let lo = l.zext(p, size);
        let h = l.b.ins().ushr_imm_s(p, size as i64 * 8);
        let hi = l.zext(h, size);
        let o = if signed {
            let s = l.sext(p, size);
            l.b.ins().icmp(IntCC::NotEqual, p, s)
        } else {
            l.b.ins().icmp_imm_s(IntCC::NotEqual, hi, 0)
        };
        (lo, hi, o)
    };
    if size == 1 {
        // AX = AH:AL.
        let h = l.b.ins().ishl_imm_s(hi, 8);
        let ax = l.b.ins().bor(h, lo);
        l.write_reg(Register::AX, ax);
    } else {
        l.write_reg(ra, lo);
        l.write_reg(rd, hi);
    }
    let ovf = l.b.ins().uextend(types::I64, ovf);
    l.set_flags(FlagOp::Mul, a, ovf, lo, size);
}

/// rAX = rDX:rAX / `src`, rDX = remainder (AL, AH from AX for bytes); flags unchanged
/// (`muldiv::DIV_FLAGS`). Divisions that may fault go through the handler.
fn div(l: &mut Lower, d: &DecodedInsn, signed: bool, src: Value, size: u8) {
    let (ra, rd) = acc_regs(size);
    let (q, r) = if size == 8 {
        let lo = l.read_reg(ra);
        let hi = l.read_reg(rd);
        if signed {
            // Fast: rDX is rAX's sign extension, divisor non-zero, not INT64_MIN / -1.
            let z = l.b.ins().icmp_imm_s(IntCC::Equal, src, 0);
            let m1 = l.b.ins().icmp_imm_s(IntCC::Equal, src, -1);
            let min = l.b.ins().icmp_imm_s(IntCC::Equal, lo, i64::MIN);
            let ovf = l.b.ins().band(m1, min);
            let bad = l.b.ins().bor(z, ovf);
            let sign = l.b.ins().sshr_imm_s(lo, 63);
            let wide = l.b.ins().icmp(IntCC::NotEqual, hi, sign);
            let slow = l.b.ins().bor(bad, wide);
            handler_exit_if(l, slow, d);
            let q = l.b.ins().sdiv(lo, src);
            (q, rem_of(l, lo, q, src))
        } else {
            // Fast: rDX < divisor (so the divisor is non-zero and the quotient fits).
            let slow = l.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, hi, src);
            handler_exit_if(l, slow, d);
            let narrow = l.b.create_block();
            let wide = l.b.create_block();
            let join = l.b.create_block();
            l.b.append_block_param(join, types::I64);
            l.b.append_block_param(join, types::I64);
            l.b.ins().brif(hi, wide, &[], narrow, &[]);
            l.b.seal_block(narrow);
            l.b.seal_block(wide);
            l.b.switch_to_block(narrow);
            let q = l.b.ins().udiv(lo, src);
            let r = rem_of(l, lo, q, src);
            l.b.ins().jump(join, &[q.into(), r.into()]);
            l.b.switch_to_block(wide);
            let q = call_udiv128(l, hi, lo, src);
            // The remainder fits in 64 bits: the low half of hi:lo - q * src.
            let r = rem_of(l, lo, q, src);
            l.b.ins().jump(join, &[q.into(), r.into()]);
            l.b.seal_block(join);
            l.b.switch_to_block(join);
            let p = l.b.block_params(join);
            (p[0], p[1])
        }
    } else {
        // The dividend (2 * size bytes) and the quotient fit in 64-bit arithmetic.
        let bits = size as i64 * 8;
        let n = if size == 1 {
            l.read_reg(Register::AX)
        } else {
            let lo = l.read_reg(ra);
            let hi = l.read_reg(rd);
            let h = l.b.ins().ishl_imm_s(hi, bits);
            l.b.ins().bor(h, lo)
        };
        let (n, dv) = if signed {
            (l.sext(n, size * 2), l.sext(src, size))
        } else {
            (n, src)
        };
        // Divide by 1 instead of 0 or of -1 with INT64_MIN (which would trap here); those
        // take the slow path below.
        let z = l.b.ins().icmp_imm_s(IntCC::Equal, dv, 0);
        let bad = if signed {
            let m1 = l.b.ins().icmp_imm_s(IntCC::Equal, dv, -1);
            let min = l.b.ins().icmp_imm_s(IntCC::Equal, n, i64::MIN);
            let o = l.b.ins().band(m1, min);
            l.b.ins().bor(z, o)
        } else {
            z
        };
        let one = l.iconst(1);
        let sd = l.b.ins().select(bad, one, dv);
        let q = if signed {
            l.b.ins().sdiv(n, sd)
        } else {
            l.b.ins().udiv(n, sd)
        };
        let r = rem_of(l, n, q, sd);
        // The quotient must fit in `size` bytes (signed or unsigned).
        let fits = if signed {
            let s = l.sext(q, size);
            l.b.ins().icmp(IntCC::Equal, s, q)
        } else {
            let z = l.zext(q, size);
            l.b.ins().icmp(IntCC::Equal, z, q)
        };
        let nf = l.b.ins().icmp_imm_s(IntCC::Equal, fits, 0);
        let slow = l.b.ins().bor(bad, nf);
        handler_exit_if(l, slow, d);
        (l.zext(q, size), l.zext(r, size))
    };
    if size == 1 {
        let h = l.b.ins().ishl_imm_s(r, 8);
        let ax = l.b.ins().bor(h, q);
        l.write_reg(Register::AX, ax);
    } else {
        l.write_reg(ra, q);
        l.write_reg(rd, r);
    }
}

/// The remainder of `n / dv` whose quotient is `q`: `n - q * dv` (exact in wrapping 64-bit
/// arithmetic, as `n = q * dv + r`). Cranelift has no combined division, and its `srem` /
/// `urem` are a second host division each (arith's loop of four guest divisions ran eight,
/// each tens of cycles); a multiply and a subtract cost a few.
fn rem_of(l: &mut Lower, n: Value, q: Value, dv: Value) -> Value {
    let p = l.b.ins().imul(q, dv);
    l.b.ins().isub(n, p)
}

/// Call [`udiv128`].
fn call_udiv128(l: &mut Lower, hi: Value, lo: Value, dv: Value) -> Value {
    let cc = l.b.func.dfg.signatures[l.sigs.fold].call_conv;
    let mut sig = Signature::new(cc);
    sig.params = (0..3).map(|_| AbiParam::new(types::I64)).collect();
    sig.returns.push(AbiParam::new(types::I64));
    let sref = l.b.import_signature(sig);
    let f = l.iconst(udiv128 as *const () as u64);
    let call = l.b.ins().call_indirect(sref, f, &[hi, lo, dv]);
    l.b.inst_results(call)[0]
}

#[cfg(test)]
mod tests {
    use super::udiv128;

    #[test]
    fn udiv128_matches_u128_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..10_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = (x >> (i % 64)).max(1);
            let hi = x.wrapping_mul(i) % d;
            let lo = x.rotate_left(i as u32);
            let n = ((hi as u128) << 64) | lo as u128;
            assert_eq!(
                udiv128(hi, lo, d) as u128,
                n / d as u128,
                "{hi:#x}:{lo:#x} / {d:#x}"
            );
        }
        assert_eq!(udiv128(u64::MAX - 1, u64::MAX, u64::MAX), u64::MAX);
    }
}
