//! More specialised handlers for hot 64-bit shapes (see `fast.rs` for the rules they follow):
//! shifts and rotates, SHLD/SHRD, NOT/NEG, two- and three-operand IMUL, CMOVcc, SETcc, BT*,
//! one-operand MUL/IMUL/DIV/IDIV, indirect JMP/CALL through a register or memory, CBW..CQO
//! and the NOP forms. Each computes
//! what the family handler computes, with the family's semantic function.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags;
use crate::mmu::is_canonical;
use crate::operand::{mask, sext};
use crate::ops::alu;
use crate::ops::bit::{bit_op, BitOp, BT_FLAGS};
use crate::ops::fast::{by_size, cc_from, cond_lookup, ea_x, get, imm, r0, r1, set, shape, Shape};
use crate::ops::muldiv::{div, idiv, imul, mul, MUL_FLAGS};
use crate::ops::shift::{self, op as sh};
use crate::ops::shift_double::{shld, shrd};
use crate::state::flags::STATUS;
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// Handlers for the shapes covered here (the caller has checked 64-bit code and no LOCK).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    match ins.mnemonic() {
        Mnemonic::Shl | Mnemonic::Sal => shift_lookup::<{ sh::SHL }>(ins),
        Mnemonic::Shr => shift_lookup::<{ sh::SHR }>(ins),
        Mnemonic::Sar => shift_lookup::<{ sh::SAR }>(ins),
        Mnemonic::Rol => shift_lookup::<{ sh::ROL }>(ins),
        Mnemonic::Ror => shift_lookup::<{ sh::ROR }>(ins),
        Mnemonic::Shld => shd_lookup::<true>(ins),
        Mnemonic::Shrd => shd_lookup::<false>(ins),
        Mnemonic::Not => unary_lookup::<{ alu::op::NOT }>(ins),
        Mnemonic::Neg => unary_lookup::<{ alu::op::NEG }>(ins),
        Mnemonic::Imul if ins.op_count() == 1 => acc_lookup::<true, false>(ins),
        Mnemonic::Mul => acc_lookup::<false, false>(ins),
        Mnemonic::Idiv => acc_lookup::<true, true>(ins),
        Mnemonic::Div => acc_lookup::<false, true>(ins),
        Mnemonic::Imul => imul_lookup(ins),
        Mnemonic::Bt => bt_lookup::<BT>(ins),
        Mnemonic::Bts => bt_lookup::<BTS>(ins),
        Mnemonic::Btr => bt_lookup::<BTR>(ins),
        Mnemonic::Btc => bt_lookup::<BTC>(ins),
        Mnemonic::Jmp if ins.code() == Code::Jmp_rm64 => indirect_lookup::<false>(ins),
        Mnemonic::Call if ins.code() == Code::Call_rm64 => indirect_lookup::<true>(ins),
        Mnemonic::Cdqe => Some(cbw::<8>),
        Mnemonic::Cwde => Some(cbw::<4>),
        Mnemonic::Cqo => Some(cwd::<8>),
        Mnemonic::Cdq => Some(cwd::<4>),
        Mnemonic::Nop | Mnemonic::Endbr64 => Some(nop),
        _ => cmov_setcc_lookup(ins),
    }
}

// ----- shifts -----

/// `op r, imm8|1` (count from the immediate) and `op r, CL`.
fn shift_lookup<const OP: u8>(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), ins.op1_kind()) {
        (Shape::Reg(s), OpKind::Immediate8) => by_size!(s, shift_r, [OP, false]),
        (Shape::Reg(s), OpKind::Register) if ins.op1_register() == iced_x86::Register::CL => {
            by_size!(s, shift_r, [OP, true])
        }
        _ => None,
    }
}

/// Shift count operand: CL or the 8-bit immediate, as the family's `read_op` gives it.
#[inline(always)]
fn count<const CL: bool>(x: &Ctx, ins: &Instruction) -> u64 {
    if CL {
        x.cpu.state.gpr[reg::RCX] & 0xff
    } else {
        ins.immediate8() as u64
    }
}

fn shift_r<const OP: u8, const CL: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let c = count::<CL>(x, ins);
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let (res, f) = shift::shift(OP, get::<S>(st, d), c, S, st.rflags);
    let f = shift::rotate_reg_imm_of(OP, !CL, c, S, st.rflags, f);
    set::<S>(st, d, res);
    flags::set_status(st, STATUS, f);
    Ok(())
}

/// `SHLD/SHRD r, r, imm8|CL`.
fn shd_lookup<const LEFT: bool>(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), shape(ins, 1), ins.op2_kind()) {
        (Shape::Reg(s), Shape::Reg(t), OpKind::Immediate8) if s == t => {
            by_size!(s, shd_r, [LEFT, false])
        }
        (Shape::Reg(s), Shape::Reg(t), OpKind::Register)
            if s == t && ins.op2_register() == iced_x86::Register::CL =>
        {
            by_size!(s, shd_r, [LEFT, true])
        }
        _ => None,
    }
}

fn shd_r<const LEFT: bool, const CL: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let c = count::<CL>(x, ins);
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let src = get::<S>(st, r1(ins));
    let dst = get::<S>(st, d);
    let (res, f) = if LEFT {
        shld(dst, src, c, S, st.rflags)
    } else {
        shrd(dst, src, c, S, st.rflags)
    };
    set::<S>(st, d, res);
    flags::set_status(st, STATUS, f);
    Ok(())
}

// ----- NOT, NEG, IMUL -----

fn unary_lookup<const OP: u8>(ins: &Instruction) -> Option<Handler> {
    match shape(ins, 0) {
        Shape::Reg(s) => by_size!(s, unary_r, [OP]),
        _ => None,
    }
}

fn unary_r<const OP: u8, const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let a = get::<S>(st, d);
    let (res, f) = if OP == alu::op::NEG {
        alu::neg(a, S)
    } else {
        (alu::not(a, S), st.rflags)
    };
    set::<S>(st, d, res);
    flags::set_status(st, STATUS, f);
    Ok(())
}

/// `IMUL r, r|m` and `IMUL r, r|m, imm`.
fn imul_lookup(ins: &Instruction) -> Option<Handler> {
    let three = ins.op_count() == 3;
    match (shape(ins, 0), shape(ins, 1), three.then(|| shape(ins, 2))) {
        (Shape::Reg(s), Shape::Reg(t), None) if s == t => by_size!(s, imul_rr, []),
        (Shape::Reg(s), Shape::Mem, None) => by_size!(s, imul_rm, []),
        (Shape::Reg(s), Shape::Reg(t), Some(Shape::Imm8)) if s == t => {
            by_size!(s, imul_rri, [true])
        }
        (Shape::Reg(s), Shape::Reg(t), Some(Shape::Imm32)) if s == t => {
            by_size!(s, imul_rri, [false])
        }
        _ => None,
    }
}

#[inline(always)]
fn imul_to<const S: u8>(st: &mut crate::state::CpuState, d: usize, a: u64, b: u64) {
    let (lo, _, fl) = imul(a, b, S);
    set::<S>(st, d, lo);
    flags::set_status(st, MUL_FLAGS, fl);
}

fn imul_rr<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let (a, b) = (get::<S>(st, d), get::<S>(st, r1(ins)));
    imul_to::<S>(st, d, a, b);
    Ok(())
}

fn imul_rm<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    let b = x.read_n::<S>(lin)?;
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let a = get::<S>(st, d);
    imul_to::<S>(st, d, a, b);
    Ok(())
}

fn imul_rri<const IMM8: bool, const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let a = get::<S>(st, r1(ins));
    let b = imm::<IMM8>(ins) & mask(S);
    imul_to::<S>(st, r0(ins), a, b);
    Ok(())
}

/// One-operand MUL/IMUL (`DIV` false) and DIV/IDIV (`DIV` true) on rDX:rAX, 32/64-bit.
fn acc_lookup<const SIGNED: bool, const DIV: bool>(ins: &Instruction) -> Option<Handler> {
    match shape(ins, 0) {
        Shape::Reg(4) => Some(acc_h::<SIGNED, DIV, false, 4>),
        Shape::Reg(8) => Some(acc_h::<SIGNED, DIV, false, 8>),
        Shape::Mem => match ins.memory_size().size() {
            4 => Some(acc_h::<SIGNED, DIV, true, 4>),
            8 => Some(acc_h::<SIGNED, DIV, true, 8>),
            _ => None,
        },
        _ => None,
    }
}

/// MUL/IMUL: rDX:rAX = rAX * r/m, all status flags. DIV/IDIV: rAX, rDX = rDX:rAX / r/m
/// (quotient, remainder), flags unchanged, #DE before anything changes.
fn acc_h<const SIGNED: bool, const DIV: bool, const MEM: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let src = if MEM {
        let lin = ea_x(x, ins);
        x.read_n::<S>(lin)?
    } else {
        get::<S>(&x.cpu.state, r0(ins))
    };
    let st = &mut x.cpu.state;
    let (a, d) = (get::<S>(st, reg::RAX), get::<S>(st, reg::RDX));
    if DIV {
        let (q, r) = if SIGNED {
            idiv(a, d, src, S)?
        } else {
            div(a, d, src, S)?
        };
        set::<S>(st, reg::RAX, q);
        set::<S>(st, reg::RDX, r);
    } else {
        let (lo, hi, fl) = if SIGNED {
            imul(a, src, S)
        } else {
            mul(a, src, S)
        };
        set::<S>(st, reg::RAX, lo);
        set::<S>(st, reg::RDX, hi);
        flags::set_status(st, MUL_FLAGS, fl);
    }
    Ok(())
}

// ----- BT* -----

const BT: u8 = 0;
const BTS: u8 = 1;
const BTR: u8 = 2;
const BTC: u8 = 3;

/// BT*/r, r and r, imm8 (register destinations only: memory bit strings stay in `bit.rs`).
fn bt_lookup<const OP: u8>(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), shape(ins, 1)) {
        (Shape::Reg(s), Shape::Reg(t)) if s == t => by_size!(s, bt_r, [OP, false]),
        (Shape::Reg(s), _) if ins.op1_kind() == OpKind::Immediate8 => {
            by_size!(s, bt_r, [OP, true])
        }
        _ => None,
    }
}

fn bt_r<const OP: u8, const IMM: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let bit = if IMM {
        ins.immediate8() as u64
    } else {
        get::<S>(st, r1(ins))
    };
    let op = match OP {
        BT => BitOp::Test,
        BTS => BitOp::Set,
        BTR => BitOp::Reset,
        _ => BitOp::Complement,
    };
    let (new, f) = bit_op(op, get::<S>(st, d), bit, S);
    if OP != BT {
        set::<S>(st, d, new);
    }
    flags::set_status(st, BT_FLAGS, f);
    Ok(())
}

// ----- indirect JMP/CALL -----

fn indirect_lookup<const CALL: bool>(ins: &Instruction) -> Option<Handler> {
    match shape(ins, 0) {
        Shape::Reg(8) => Some(indirect::<CALL, false>),
        Shape::Mem => Some(indirect::<CALL, true>),
        _ => None,
    }
}

/// `JMP/CALL r/m64`: read the target (before pushing), check it, push the return address
/// (CALL; RSP moves only if the store succeeds), branch.
fn indirect<const CALL: bool, const MEM: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let target = if MEM {
        let lin = ea_x(x, ins);
        x.read_n::<8>(lin)?
    } else {
        x.cpu.state.gpr[r0(ins)]
    };
    if !is_canonical(target) {
        return Err(Fault::GP0.into());
    }
    if CALL {
        let new = x.cpu.state.gpr[reg::RSP].wrapping_sub(8);
        x.ss_operand = true; // stack access: non-canonical RSP faults #SS(0)
        x.write_n::<8>(new, x.cpu.state.rip)?;
        x.cpu.state.gpr[reg::RSP] = new;
    }
    x.cpu.state.rip = target;
    Ok(())
}

// ----- CMOVcc, SETcc -----

fn cmov_setcc_lookup(ins: &Instruction) -> Option<Handler> {
    let cmov = crate::ops::mov::is_cmovcc(ins.mnemonic());
    let setcc = crate::ops::mov::is_setcc(ins.mnemonic());
    if cmov {
        match (shape(ins, 0), shape(ins, 1)) {
            (Shape::Reg(4), Shape::Reg(4)) => cond_lookup!(ins, cmov_h, [4, false]),
            (Shape::Reg(8), Shape::Reg(8)) => cond_lookup!(ins, cmov_h, [8, false]),
            (Shape::Reg(4), Shape::Mem) => cond_lookup!(ins, cmov_h, [4, true]),
            (Shape::Reg(8), Shape::Mem) => cond_lookup!(ins, cmov_h, [8, true]),
            _ => None,
        }
    } else if setcc {
        match shape(ins, 0) {
            Shape::Reg(1) => cond_lookup!(ins, setcc_h, [false]),
            Shape::Mem => cond_lookup!(ins, setcc_h, [true]),
            _ => None,
        }
    } else {
        None
    }
}

/// CMOVcc r32/64, r/m: the source is always read; a 32-bit destination is zero-extended even
/// when nothing moves.
fn cmov_h<const CC: u8, const S: u8, const MEM: bool>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let src = if MEM {
        let lin = ea_x(x, ins);
        x.read_n::<S>(lin)?
    } else {
        get::<S>(&x.cpu.state, r1(ins))
    };
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let v = if flags::cond(st.rflags, cc_from(CC)) {
        src
    } else {
        get::<S>(st, d)
    };
    set::<S>(st, d, v);
    Ok(())
}

fn setcc_h<const CC: u8, const MEM: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let v = flags::cond(x.cpu.state.rflags, cc_from(CC)) as u64;
    if MEM {
        let lin = ea_x(x, ins);
        x.write_n::<1>(lin, v)?;
    } else {
        set::<1>(&mut x.cpu.state, r0(ins), v);
    }
    Ok(())
}

// ----- CBW family, NOP -----

/// CWDE/CDQE: sign-extend the low half of the accumulator into the whole of it.
fn cbw<const S: u8>(x: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let v = sext(st.gpr[reg::RAX], S / 2);
    set::<S>(st, reg::RAX, v);
    Ok(())
}

/// CDQ/CQO: fill the data register with the accumulator's sign.
fn cwd<const S: u8>(x: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let a = sext(st.gpr[reg::RAX], S);
    set::<S>(st, reg::RDX, if (a as i64) < 0 { u64::MAX } else { 0 });
    Ok(())
}

/// NOP (incl. the r/m forms, never touching memory) and ENDBR64.
fn nop(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Ok(())
}
