//! Native lowering of the first core subset (64-bit mode): MOV, MOVZX/MOVSX/MOVSXD, LEA,
//! ADD/SUB/AND/OR/XOR/CMP/TEST with register, immediate or memory source, INC/DEC on
//! registers, PUSH/POP r64, Jcc/JMP/CALL direct and RET. Everything else (and any form these
//! do not cover: LOCK, segment registers, memory destinations of ALU ops, …) goes through the
//! interpreter's handler.
//!
//! Each lowering keeps the handler's order: operands are read (memory may fault, leaving the
//! block with RIP at the instruction and nothing changed), then results are written.

use super::flags::FlagOp;
use super::{Lower, Rip};
use crate::frame::ret;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, Value};
use iced_x86::{Code, FlowControl, Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::mmu::is_canonical;
use lockstep_interp::operand::{gpr_ref, mask, op_size};
use lockstep_interp::ops::mov::{is_cmovcc, is_setcc, runs_as_nop};
use lockstep_interp::state::flags::{CF, OF, STATUS};
use lockstep_interp::state::reg;

/// What lowering did with an instruction.
pub enum Outcome {
    /// Lowered; the block continues after it.
    Continue,
    /// Lowered, and the block ended with it (branch): the exits are emitted.
    Ended,
    /// No native lowering: call the interpreter's handler.
    NotNative,
}

fn is_gpr(r: Register) -> bool {
    gpr_ref(r).is_some()
}

/// Operand `n` is a general-purpose register.
pub(super) fn reg_op(ins: &Instruction, n: u32) -> bool {
    ins.op_kind(n) == OpKind::Register && is_gpr(ins.op_register(n))
}

/// Operand `n` is a memory operand the lowering can address.
pub(super) fn mem_op(ins: &Instruction, n: u32) -> bool {
    ins.op_kind(n) == OpKind::Memory && super::mem::addressable(ins)
}

/// Operand `n` is a general-purpose register or an addressable memory operand (r/m).
pub(super) fn rm_op(ins: &Instruction, n: u32) -> bool {
    reg_op(ins, n) || mem_op(ins, n)
}

/// An immediate operand as `read_op` gives it (already masked/sign-extended as iced says).
fn imm(ins: &Instruction, n: u32) -> Option<u64> {
    Some(match ins.op_kind(n) {
        OpKind::Immediate8 => ins.immediate8() as u64,
        OpKind::Immediate16 => ins.immediate16() as u64,
        OpKind::Immediate32 => ins.immediate32() as u64,
        OpKind::Immediate64 => ins.immediate64(),
        OpKind::Immediate8to16 => ins.immediate8to16() as u16 as u64,
        OpKind::Immediate8to32 => ins.immediate8to32() as u32 as u64,
        OpKind::Immediate8to64 => ins.immediate8to64() as u64,
        OpKind::Immediate32to64 => ins.immediate32to64() as u64,
        _ => return None,
    })
}

/// An instruction family lowered in its own file: which instructions it covers, and their
/// lowering (`None` for anything it does not cover).
struct Family {
    covers: fn(&Instruction) -> bool,
    lower: fn(&mut Lower, &DecodedInsn) -> Option<Outcome>,
}

/// The families tried before the core subset of this file, in order.
const FAMILIES: [Family; 6] = [
    Family {
        covers: super::sse_int::covers,
        lower: super::sse_int::lower,
    },
    Family {
        covers: super::sse_fp_forms::covers,
        lower: super::sse_fp::lower,
    },
    Family {
        covers: super::muldiv::covers,
        lower: super::muldiv::lower,
    },
    Family {
        covers: super::shift::covers,
        lower: super::shift::lower,
    },
    Family {
        covers: super::bit::covers,
        lower: super::bit::lower,
    },
    Family {
        covers: super::x87::covers,
        lower: super::x87::lower,
    },
];

/// Does the native lowering cover this instruction (same decision as [`lower`])?
pub fn is_native(d: &DecodedInsn) -> bool {
    FAMILIES.iter().any(|f| (f.covers)(&d.ins)) || classify(&d.ins).is_some()
}

#[derive(Clone, Copy)]
enum Kind {
    Mov,
    MovExt {
        signed: bool,
    },
    Lea,
    Alu(FlagOp, bool /* writes dest */),
    IncDec(FlagOp),
    Push,
    Pop,
    Jcc,
    Jmp,
    Call,
    Ret,
    /// JMP/CALL r/m64.
    Indirect {
        call: bool,
    },
    /// ALU op with a memory destination and a register/immediate source.
    AluMem(FlagOp, bool /* writes dest */),
    /// INC/DEC/NEG/NOT of a register or memory.
    Unary(Mnemonic),
    /// SHL/SHR/SAR/ROL/ROR of a register by an immediate.
    ShiftImm,
    /// IMUL r, r/m [, imm].
    Imul,
    Setcc,
    Cmovcc,
    Xchg,
    Nop,
    /// CWDE/CDQE (sign-extend the accumulator's low half), CDQ/CQO (sign into rDX).
    Cbw(u8),
    Cwd(u8),
}

/// Which lowering applies, if any.
fn classify(ins: &Instruction) -> Option<Kind> {
    if ins.has_lock_prefix() || ins.code_size() != iced_x86::CodeSize::Code64 {
        return None;
    }
    // Operand 1 is a register, an immediate or an addressable memory operand.
    let src_ok = |ins: &Instruction| reg_op(ins, 1) || imm(ins, 1).is_some() || mem_op(ins, 1);
    Some(match ins.mnemonic() {
        Mnemonic::Mov => {
            if ins.op_count() != 2 {
                return None;
            }
            let ok = (reg_op(ins, 0) && src_ok(ins))
                || (mem_op(ins, 0) && (reg_op(ins, 1) || imm(ins, 1).is_some()));
            if !ok {
                return None;
            }
            Kind::Mov
        }
        Mnemonic::Movzx | Mnemonic::Movsx | Mnemonic::Movsxd => {
            if !(reg_op(ins, 0) && (reg_op(ins, 1) || mem_op(ins, 1))) {
                return None;
            }
            Kind::MovExt {
                signed: ins.mnemonic() != Mnemonic::Movzx,
            }
        }
        Mnemonic::Lea => {
            if !(reg_op(ins, 0) && mem_op(ins, 1)) {
                return None;
            }
            Kind::Lea
        }
        Mnemonic::Add
        | Mnemonic::Sub
        | Mnemonic::And
        | Mnemonic::Or
        | Mnemonic::Xor
        | Mnemonic::Adc
        | Mnemonic::Sbb
        | Mnemonic::Cmp
        | Mnemonic::Test => {
            if ins.op_count() != 2 {
                return None;
            }
            let op = match ins.mnemonic() {
                Mnemonic::Add => FlagOp::Add,
                Mnemonic::Sub | Mnemonic::Cmp => FlagOp::Sub,
                Mnemonic::Adc => FlagOp::Adc,
                Mnemonic::Sbb => FlagOp::Sbb,
                _ => FlagOp::Logic,
            };
            let writes = !matches!(ins.mnemonic(), Mnemonic::Cmp | Mnemonic::Test);
            if reg_op(ins, 0) && src_ok(ins) {
                Kind::Alu(op, writes)
            } else if mem_op(ins, 0) && (reg_op(ins, 1) || imm(ins, 1).is_some()) {
                Kind::AluMem(op, writes)
            } else {
                return None;
            }
        }
        Mnemonic::Inc | Mnemonic::Dec if reg_op(ins, 0) => {
            Kind::IncDec(if ins.mnemonic() == Mnemonic::Inc {
                FlagOp::Inc
            } else {
                FlagOp::Dec
            })
        }
        Mnemonic::Inc | Mnemonic::Dec | Mnemonic::Neg | Mnemonic::Not => {
            if !(reg_op(ins, 0) || mem_op(ins, 0)) {
                return None;
            }
            Kind::Unary(ins.mnemonic())
        }
        Mnemonic::Shl
        | Mnemonic::Sal
        | Mnemonic::Shr
        | Mnemonic::Sar
        | Mnemonic::Rol
        | Mnemonic::Ror => {
            if !(reg_op(ins, 0) && ins.op1_kind() == OpKind::Immediate8) {
                return None;
            }
            let size = op_size(ins, 0) as u32;
            let c = ins.immediate8() as u32 & if size == 8 { 63 } else { 31 };
            // Shifts by the width or more (8/16-bit forms) stay with the interpreter.
            if c >= size * 8 && !matches!(ins.mnemonic(), Mnemonic::Rol | Mnemonic::Ror) {
                return None;
            }
            Kind::ShiftImm
        }
        Mnemonic::Imul if ins.op_count() >= 2 => {
            if !(reg_op(ins, 0) && (reg_op(ins, 1) || mem_op(ins, 1))) {
                return None;
            }
            if ins.op_count() == 3 && imm(ins, 2).is_none() {
                return None;
            }
            Kind::Imul
        }
        m if is_setcc(m) => {
            if !(reg_op(ins, 0) || mem_op(ins, 0)) {
                return None;
            }
            Kind::Setcc
        }
        m if is_cmovcc(m) => {
            if !(reg_op(ins, 0) && (reg_op(ins, 1) || mem_op(ins, 1))) {
                return None;
            }
            Kind::Cmovcc
        }
        Mnemonic::Xchg if reg_op(ins, 0) && reg_op(ins, 1) => Kind::Xchg,
        // The interpreter's `nop` handler: NOPs, PAUSE and the prefetch hints (never fault,
        // touch no memory; a boot runs ~270 K PAUSEs and ~100 K PREFETCHT0s); a LOCK prefix
        // was refused above (#UD from the interpreter).
        m if runs_as_nop(m) => Kind::Nop,
        Mnemonic::Cwde => Kind::Cbw(4),
        Mnemonic::Cdqe => Kind::Cbw(8),
        Mnemonic::Cdq => Kind::Cwd(4),
        Mnemonic::Cqo => Kind::Cwd(8),
        Mnemonic::Push if ins.code() == Code::Push_r64 => Kind::Push,
        Mnemonic::Pop if ins.code() == Code::Pop_r64 => Kind::Pop,
        _ => match ins.code() {
            Code::Jmp_rel8_64 | Code::Jmp_rel32_64 if is_canonical(ins.near_branch_target()) => {
                Kind::Jmp
            }
            Code::Call_rel32_64 if is_canonical(ins.near_branch_target()) => Kind::Call,
            Code::Retnq | Code::Retnq_imm16 => Kind::Ret,
            Code::Jmp_rm64 | Code::Call_rm64
                if (ins.op0_kind() == OpKind::Register && reg_op(ins, 0)) || mem_op(ins, 0) =>
            {
                Kind::Indirect {
                    call: ins.code() == Code::Call_rm64,
                }
            }
            _ if ins.flow_control() == FlowControl::ConditionalBranch
                && ins.op0_kind() == OpKind::NearBranch64
                && ins.is_jcc_short_or_near()
                && is_canonical(ins.near_branch_target()) =>
            {
                Kind::Jcc
            }
            _ => return None,
        },
    })
}

/// An instruction whose status flags a region block entered after it can recompute from the
/// registers ([`replay_flags`]) instead of being handed them, lowered natively, with a
/// register or immediate source (not memory: it may have changed since):
/// - CMP or TEST of a register: sets only the flags;
/// - ADD, SUB, AND, OR, XOR of a register with a different register or an immediate: the
///   destination holds the result, from which the first operand follows (the result minus or
///   plus the source; a logic operation's flags depend on the result alone).
///
/// Each defines every status flag. (INC and DEC do not: they keep CF, which came from an
/// earlier instruction.)
pub(super) fn is_replayable(ins: &Instruction) -> bool {
    let src_ok = reg_op(ins, 1) || imm(ins, 1).is_some();
    match classify(ins) {
        Some(Kind::Alu(_, false)) => {
            matches!(ins.mnemonic(), Mnemonic::Cmp | Mnemonic::Test) && src_ok
        }
        Some(Kind::Alu(_, true)) => {
            matches!(
                ins.mnemonic(),
                Mnemonic::Add | Mnemonic::Sub | Mnemonic::And | Mnemonic::Or | Mnemonic::Xor
            ) && src_ok
                && !(ins.op1_kind() == OpKind::Register
                    && ins.op1_register().full_register() == ins.op0_register().full_register())
        }
        _ => false,
    }
}

/// Do the replayable `a` and `b` compute the same flags from the same registers?
pub(super) fn same_replay(a: &Instruction, b: &Instruction) -> bool {
    a.code() == b.code()
        && a.op0_register() == b.op0_register()
        && a.op1_kind() == b.op1_kind()
        && a.op1_register() == b.op1_register()
        && imm(a, 1) == imm(b, 1)
}

/// Record the flags the replayable `ins` left when it ran, from the registers' current values
/// (its operands, or its result and source, unchanged since): it writes nothing, and nothing
/// is retired.
pub(super) fn replay_flags(l: &mut Lower, ins: &Instruction) {
    let size = op_size(ins, 0);
    match classify(ins) {
        Some(Kind::Alu(op, false)) => {
            let b = read_src(l, ins, 1, size);
            let a = l.read_reg(ins.op0_register());
            alu(l, ins.mnemonic(), op, a, b, size);
        }
        Some(Kind::Alu(op, true)) => {
            let b = read_src(l, ins, 1, size);
            let res = l.read_reg(ins.op0_register());
            let a = match op {
                FlagOp::Add => l.b.ins().isub(res, b),
                FlagOp::Sub => l.b.ins().iadd(res, b),
                _ => res,
            };
            let a = l.zext(a, size);
            l.set_flags(op, a, b, res, size);
        }
        _ => unreachable!("only replayable instructions are replayed"),
    }
}

/// Read source operand `n` (register, immediate or memory) zero-extended, masked to `size`.
fn read_src(l: &mut Lower, ins: &Instruction, n: u32, size: u8) -> Value {
    if let Some(v) = imm(ins, n) {
        return l.iconst(v & mask(size));
    }
    match ins.op_kind(n) {
        OpKind::Register => l.read_reg(ins.op_register(n)),
        _ => {
            let a = l.mem_addr(ins);
            l.load(a, ins.memory_size().size() as u8)
        }
    }
}

/// The result of ALU operation `m` (`op` says how it sets the flags) on the size-masked `a`
/// and `b`, zero-extended; records the flags.
fn alu(l: &mut Lower, m: Mnemonic, op: FlagOp, a: Value, b: Value, size: u8) -> Value {
    let (r, cin) = alu_value(l, m, op, a, b, size);
    l.set_flags_masked(op, a, b, r, size, super::flags::written(op), cin);
    r
}

/// [`alu`] without recording the flags: (result, carry in of ADC/SBB). A memory destination
/// records them only after its store succeeded (a faulting store changes no flag).
fn alu_value(
    l: &mut Lower,
    m: Mnemonic,
    op: FlagOp,
    a: Value,
    b: Value,
    size: u8,
) -> (Value, Option<Value>) {
    let mut cin = None;
    // 32-bit operations other than ADC/SBB are computed at 32 bits.
    let at32 = size == 4 && !matches!(op, FlagOp::Adc | FlagOp::Sbb);
    let (a, b) = at32_operands(l, at32, a, b);
    let r = match (m, op) {
        (_, FlagOp::Add) => l.b.ins().iadd(a, b),
        (_, FlagOp::Sub) => l.b.ins().isub(a, b),
        (_, FlagOp::Adc | FlagOp::Sbb) => {
            let c = l.cond(iced_x86::ConditionCode::b);
            let c = l.b.ins().uextend(types::I64, c);
            cin = Some(c);
            if op == FlagOp::Adc {
                let t = l.b.ins().iadd(a, b);
                l.b.ins().iadd(t, c)
            } else {
                let t = l.b.ins().isub(a, b);
                l.b.ins().isub(t, c)
            }
        }
        (Mnemonic::Or, _) => l.b.ins().bor(a, b),
        (Mnemonic::Xor, _) => l.b.ins().bxor(a, b),
        _ => l.b.ins().band(a, b),
    };
    (at32_result(l, at32, r, size), cin)
}

/// The operands of an operation computed at 32 bits when `at32` (whose result the host
/// zero-extends for free: x86 32-bit operations clear the upper half), else as they are.
fn at32_operands(l: &mut Lower, at32: bool, a: Value, b: Value) -> (Value, Value) {
    if at32 {
        (l.narrow(a, 4), l.narrow(b, 4))
    } else {
        (a, b)
    }
}

/// The result `r` of an operation on [`at32_operands`], zero-extended from `size` bytes.
fn at32_result(l: &mut Lower, at32: bool, r: Value, size: u8) -> Value {
    if at32 {
        l.b.ins().uextend(types::I64, r)
    } else {
        l.zext(r, size)
    }
}

/// #GP(0) at the current instruction (nothing of it done) when `target` is not canonical.
fn gp_if_noncanonical(l: &mut Lower, target: Value) {
    let t = l.b.ins().ishl_imm_s(target, 16);
    let t = l.b.ins().sshr_imm_s(t, 16);
    let bad = l.b.ins().icmp(IntCC::NotEqual, t, target);
    let gp = l.b.create_block();
    let ok = l.b.create_block();
    l.b.set_cold_block(gp);
    l.b.ins().brif(bad, gp, &[], ok, &[]);
    l.b.seal_block(gp);
    l.b.seal_block(ok);
    l.b.switch_to_block(gp);
    let f = l.iconst(l.sigs.addrs.raise);
    let kind = l.iconst(0);
    let frame = l.frame;
    l.b.ins().call_indirect(l.sigs.raise, f, &[frame, kind]);
    let ip = l.ins_ip;
    l.emit_exit(Some(Rip::Const(ip)), ret::STOP);
    l.b.switch_to_block(ok);
}

/// Lower `d` natively if the subset covers it.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Outcome {
    let ins = &d.ins;
    if let Some(o) = FAMILIES.iter().find_map(|f| (f.lower)(l, d)) {
        return o;
    }
    let Some(kind) = classify(ins) else {
        return Outcome::NotNative;
    };
    match kind {
        Kind::Mov => {
            let size = op_size(ins, 0);
            if ins.op0_kind() == OpKind::Register {
                let v = read_src(l, ins, 1, size);
                l.write_reg(ins.op0_register(), v);
                l.retire();
            } else {
                let v = read_src(l, ins, 1, size);
                let a = l.mem_addr(ins);
                l.store(a, size, v);
                l.retire();
            }
        }
        Kind::MovExt { signed } => {
            let ssize = op_size(ins, 1);
            let v = read_src(l, ins, 1, ssize);
            let v = if signed { l.sext(v, ssize) } else { v };
            l.write_reg(ins.op0_register(), v);
            l.retire();
        }
        Kind::Lea => {
            let off = l.lea_value(ins, op_size(ins, 0));
            l.write_reg(ins.op0_register(), off);
            l.retire();
        }
        Kind::Alu(op, writes) => {
            let size = op_size(ins, 0);
            // The zeroing idioms `xor r, r` and `sub r, r` (32/64-bit): the result and the
            // flags do not depend on the register, so it is not read (nor loaded).
            let zeroing = matches!(ins.mnemonic(), Mnemonic::Xor | Mnemonic::Sub)
                && size >= 4
                && ins.op1_kind() == OpKind::Register
                && ins.op1_register() == ins.op0_register();
            let (a, b) = if zeroing {
                let z = l.iconst(0);
                (z, z)
            } else {
                let b = read_src(l, ins, 1, size);
                (l.read_reg(ins.op0_register()), b)
            };
            let dst = gpr_ref(ins.op0_register()).expect("GPR destination").index;
            let ver = l.gpr_version(dst);
            let r = alu(l, ins.mnemonic(), op, a, b, size);
            if writes {
                l.write_reg(ins.op0_register(), r);
                // `add/sub reg64, imm`: addresses based on the result share page groups with
                // those based on the operand.
                if let (8, Some(k)) = (size, imm(ins, 1)) {
                    match ins.mnemonic() {
                        Mnemonic::Add => l.derive(dst, ver, k as i64),
                        Mnemonic::Sub => l.derive(dst, ver, (k as i64).wrapping_neg()),
                        _ => {}
                    }
                }
            }
            l.retire();
        }
        Kind::AluMem(op, writes) => {
            let size = op_size(ins, 0);
            let b = read_src(l, ins, 1, size);
            let addr = l.mem_addr(ins);
            let (a, host) = if writes {
                let (a, host) = l.load_rmw(addr, size);
                (a, Some(host))
            } else {
                (l.load(addr, size), None)
            };
            let (r, cin) = alu_value(l, ins.mnemonic(), op, a, b, size);
            if let Some(host) = host {
                l.store_host(host, size, r);
            }
            // Flags change only once the store has succeeded.
            l.set_flags_masked(op, a, b, r, size, super::flags::written(op), cin);
            l.retire();
        }
        Kind::Unary(m) => {
            let size = op_size(ins, 0);
            let mem = ins.op0_kind() == OpKind::Memory;
            let addr = mem.then(|| l.mem_addr(ins));
            let (a, host) = match addr {
                Some(addr) => {
                    let (a, host) = l.load_rmw(addr, size);
                    (a, Some(host))
                }
                None => (l.read_reg(ins.op0_register()), None),
            };
            // (result, flag record: op, a, b) — recorded after the store (precise faults).
            let (r, rec) = match m {
                Mnemonic::Inc | Mnemonic::Dec => {
                    let one = l.iconst(1);
                    let (op, r) = if m == Mnemonic::Inc {
                        (FlagOp::Inc, l.b.ins().iadd(a, one))
                    } else {
                        (FlagOp::Dec, l.b.ins().isub(a, one))
                    };
                    (l.zext(r, size), Some((op, a, one)))
                }
                Mnemonic::Neg => {
                    let zero = l.iconst(0);
                    let r = l.b.ins().isub(zero, a);
                    (l.zext(r, size), Some((FlagOp::Sub, zero, a)))
                }
                _ => {
                    let r = l.b.ins().bnot(a);
                    (l.zext(r, size), None)
                }
            };
            match host {
                Some(host) => l.store_host(host, size, r),
                None => l.write_reg(ins.op0_register(), r),
            }
            if let Some((op, x, y)) = rec {
                l.set_flags(op, x, y, r, size);
            }
            l.retire();
        }
        Kind::ShiftImm => {
            let size = op_size(ins, 0);
            let w = size as u32 * 8;
            let c = ins.immediate8() as u32 & if size == 8 { 63 } else { 31 };
            let a = l.read_reg(ins.op0_register());
            let r = if c == 0 {
                // A masked count of 0 changes no flag; the register is still written.
                a
            } else {
                let m = ins.mnemonic();
                let (op, r, written) = match m {
                    Mnemonic::Shl | Mnemonic::Sal => {
                        let r = l.b.ins().ishl_imm_s(a, c as i64);
                        (FlagOp::Shl(c as u8), l.zext(r, size), STATUS)
                    }
                    Mnemonic::Shr => (
                        FlagOp::Shr(c as u8),
                        l.b.ins().ushr_imm_s(a, c as i64),
                        STATUS,
                    ),
                    Mnemonic::Sar => {
                        let sa = l.sext(a, size);
                        let r = l.b.ins().sshr_imm_s(sa, c as i64);
                        (FlagOp::Sar(c as u8), l.zext(r, size), STATUS)
                    }
                    _ => {
                        // Rotate by c mod width; OF only for a count of 1 (host: a register
                        // rotate by an imm8 > 1 leaves OF alone).
                        let e = c % w;
                        let n = l.narrow(a, size);
                        let r = if m == Mnemonic::Rol {
                            l.b.ins().rotl_imm_s(n, e as i64)
                        } else {
                            l.b.ins().rotr_imm_s(n, e as i64)
                        };
                        let r = if size == 8 {
                            r
                        } else {
                            l.b.ins().uextend(types::I64, r)
                        };
                        let fl = if c == 1 { CF | OF } else { CF };
                        let op = if m == Mnemonic::Rol {
                            FlagOp::Rol
                        } else {
                            FlagOp::Ror
                        };
                        (op, r, fl)
                    }
                };
                l.set_flags_masked(op, a, a, r, size, written, None);
                r
            };
            l.write_reg(ins.op0_register(), r);
            l.retire();
        }
        Kind::Imul => {
            let size = op_size(ins, 0);
            let (a, b) = if ins.op_count() == 3 {
                let a = read_src(l, ins, 1, size);
                (a, l.iconst(imm(ins, 2).unwrap_or(0) & mask(size)))
            } else {
                let b = read_src(l, ins, 1, size);
                (l.read_reg(ins.op0_register()), b)
            };
            // Overflow: the full signed product differs from the sign-extended low half.
            let (lo, ovf) = if size == 8 {
                let lo = l.b.ins().imul(a, b);
                let hi = l.b.ins().smulhi(a, b);
                let sign = l.b.ins().sshr_imm_s(lo, 63);
                let o = l.b.ins().icmp(IntCC::NotEqual, hi, sign);
                (lo, o)
            } else {
                let sa = l.sext(a, size);
                let sb = l.sext(b, size);
                let p = l.b.ins().imul(sa, sb);
                let lo = l.zext(p, size);
                let slo = l.sext(p, size);
                let o = l.b.ins().icmp(IntCC::NotEqual, p, slo);
                (lo, o)
            };
            let ovf = l.b.ins().uextend(types::I64, ovf);
            l.set_flags(FlagOp::Mul, a, ovf, lo, size);
            l.write_reg(ins.op0_register(), lo);
            l.retire();
        }
        Kind::Setcc => {
            let c = l.cond(ins.condition_code());
            let v = l.b.ins().uextend(types::I64, c);
            if ins.op0_kind() == OpKind::Memory {
                let addr = l.mem_addr(ins);
                l.store(addr, 1, v);
                l.retire();
            } else {
                l.write_reg(ins.op0_register(), v);
                l.retire();
            }
        }
        Kind::Cmovcc => {
            let size = op_size(ins, 0);
            let src = read_src(l, ins, 1, size);
            let old = l.read_reg(ins.op0_register());
            let c = l.cond(ins.condition_code());
            let v = l.b.ins().select(c, src, old);
            l.write_reg(ins.op0_register(), v);
            l.retire();
        }
        Kind::Xchg => {
            let a = l.read_reg(ins.op0_register());
            let b = l.read_reg(ins.op1_register());
            l.write_reg(ins.op0_register(), b);
            l.write_reg(ins.op1_register(), a);
            l.retire();
        }
        Kind::Nop => l.retire(),
        Kind::Cbw(size) => {
            let half = size / 2;
            let a = l.gpr(reg::RAX);
            let v = l.sext(a, half);
            let v = l.zext(v, size);
            l.write_reg(
                if size == 8 {
                    Register::RAX
                } else {
                    Register::EAX
                },
                v,
            );
            l.retire();
        }
        Kind::Cwd(size) => {
            let a = l.gpr(reg::RAX);
            let sa = l.sext(a, size);
            let v = l.b.ins().sshr_imm_s(sa, 63);
            let v = l.zext(v, size);
            l.write_reg(
                if size == 8 {
                    Register::RDX
                } else {
                    Register::EDX
                },
                v,
            );
            l.retire();
        }
        Kind::IncDec(op) => {
            let size = op_size(ins, 0);
            let a = l.read_reg(ins.op0_register());
            let one = l.iconst(1);
            let (x, d) = at32_operands(l, size == 4, a, one);
            let r = if op == FlagOp::Inc {
                l.b.ins().iadd(x, d)
            } else {
                l.b.ins().isub(x, d)
            };
            let r = at32_result(l, size == 4, r, size);
            l.write_reg(ins.op0_register(), r);
            l.set_flags(op, a, one, r, size);
            l.retire();
        }
        Kind::Push => {
            let v = l.read_reg(ins.op0_register());
            let rsp = l.gpr(reg::RSP);
            let ver = l.gpr_version(reg::RSP);
            let a = l.stack_addr(rsp, -8);
            l.store(a, 8, v);
            l.set_gpr(reg::RSP, a.lin);
            l.derive(reg::RSP, ver, -8);
            l.retire();
        }
        Kind::Pop => {
            let rsp = l.gpr(reg::RSP);
            let ver = l.gpr_version(reg::RSP);
            let a = l.stack_addr(rsp, 0);
            let v = l.load(a, 8);
            let new = l.b.ins().iadd_imm_s(rsp, 8);
            l.set_gpr(reg::RSP, new);
            l.derive(reg::RSP, ver, 8);
            l.write_reg(ins.op0_register(), v);
            l.retire();
        }
        Kind::Jmp => {
            l.retire();
            l.end_block(Rip::Const(ins.near_branch_target()));
            return Outcome::Ended;
        }
        Kind::Call => {
            let rsp = l.gpr(reg::RSP);
            let a = l.stack_addr(rsp, -8);
            let ret_addr = l.iconst(ins.next_ip());
            l.store(a, 8, ret_addr);
            l.set_gpr(reg::RSP, a.lin);
            l.retire();
            l.end_block(Rip::Const(ins.near_branch_target()));
            return Outcome::Ended;
        }
        Kind::Ret => {
            let rsp = l.gpr(reg::RSP);
            let a = l.stack_addr(rsp, 0);
            let target = l.load(a, 8);
            // Non-canonical target: #GP(0) at the RET, before RSP moves.
            gp_if_noncanonical(l, target);
            let extra = if ins.op_count() > 0 {
                ins.immediate16() as i64
            } else {
                0
            };
            let new = l.b.ins().iadd_imm_s(rsp, 8 + extra);
            l.set_gpr(reg::RSP, new);
            l.retire();
            l.end_block(Rip::Dyn(target));
            return Outcome::Ended;
        }
        Kind::Indirect { call } => {
            let target = if ins.op0_kind() == OpKind::Memory {
                let a = l.mem_addr(ins);
                l.load(a, 8)
            } else {
                l.read_reg(ins.op0_register())
            };
            gp_if_noncanonical(l, target);
            if call {
                let rsp = l.gpr(reg::RSP);
                let a = l.stack_addr(rsp, -8);
                let ret_addr = l.iconst(ins.next_ip());
                l.store(a, 8, ret_addr);
                l.set_gpr(reg::RSP, a.lin);
            }
            l.retire();
            if crate::region::is_switch_jump(ins) {
                l.end_block_indirect(target);
                return Outcome::Ended;
            }
            if call {
                l.end_block_call(target);
            } else {
                l.end_block(Rip::Dyn(target));
            }
            return Outcome::Ended;
        }
        Kind::Jcc => {
            let c = l.cond(ins.condition_code());
            l.retire();
            // The flags stay lazy: the exit hands a single record on (or folds the flags), a
            // jump inside the region hands them over.
            let (t, f) = (ins.near_branch_target(), ins.next_ip());
            if l.member_at(t).is_none() && l.member_at(f).is_none() {
                // Both ways leave: one exit, its target chosen by the condition.
                l.end_block_either(c, t, f);
                return Outcome::Ended;
            }
            let taken = l.b.create_block();
            let fall = l.b.create_block();
            l.b.ins().brif(c, taken, &[], fall, &[]);
            l.b.seal_block(taken);
            l.b.seal_block(fall);
            l.b.switch_to_block(taken);
            l.end_block(Rip::Const(ins.near_branch_target()));
            l.b.switch_to_block(fall);
            l.end_block(Rip::Const(ins.next_ip()));
            return Outcome::Ended;
        }
    }
    Outcome::Continue
}
