//! x87 arithmetic: FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR in all forms (m32, m64, ST(0)/ST(i) both
//! directions, the popping forms, FIADD and friends with m16/m32 integers), FSQRT, FRNDINT,
//! FSCALE, FXTRACT, FPREM and FPREM1.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::x87::arith::{self, with_de};
use crate::x87::{convert, misc, sw, Env, F80};
use crate::Ctx;
use iced_x86::{Instruction, MemorySize, Mnemonic};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Fadd | Faddp | Fiadd | Fsub | Fsubp | Fisub | Fsubr | Fsubrp | Fisubr | Fmul | Fmulp
        | Fimul | Fdiv | Fdivp | Fidiv | Fdivr | Fdivrp | Fidivr => binary,
        Fsqrt | Frndint => unary,
        Fscale | Fprem | Fprem1 => st0_st1,
        Fxtract => fxtract,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// Read a memory source operand as an 80-bit value and its DE flag (m32/m64 floats, m16/m32
/// integers).
fn mem_operand(x: &mut Ctx, ins: &Instruction) -> Result<(F80, u16), Fault> {
    let a = x.mem_addr(ins, ins.memory_size().size() as u64, false)?;
    Ok(match ins.memory_size() {
        MemorySize::Float32 => convert::from_f32(x.read(a, 4)? as u32),
        MemorySize::Float64 => convert::from_f64(x.read(a, 8)?),
        MemorySize::Int16 => (convert::from_i64(x.read(a, 2)? as i16 as i64), 0),
        _ => (convert::from_i64(x.read(a, 4)? as i32 as i64), 0),
    })
}

/// The arithmetic of `a op b`.
fn compute(op: Op, a: F80, b: F80, env: &Env) -> (F80, u16) {
    match op {
        Op::Add => arith::add(a, b, false, env),
        Op::Sub => arith::add(a, b, true, env),
        Op::Mul => arith::mul(a, b, env),
        Op::Div => arith::div(a, b, env),
    }
}

fn binary(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    use Mnemonic::*;
    check_waiting(x, ins)?;
    let m = ins.mnemonic();
    let (op, reverse) = match m {
        Fadd | Faddp | Fiadd => (Op::Add, false),
        Fsub | Fsubp | Fisub => (Op::Sub, false),
        Fsubr | Fsubrp | Fisubr => (Op::Sub, true),
        Fmul | Fmulp | Fimul => (Op::Mul, false),
        Fdiv | Fdivp | Fidiv => (Op::Div, false),
        _ => (Op::Div, true),
    };
    let pop_after = matches!(m, Faddp | Fsubp | Fsubrp | Fmulp | Fdivp | Fdivrp);
    // dst = op0 (ST0 for the memory forms); the operation is dst op src (reversed: src op dst).
    let (dst, src, conv_de, mem) = if is_mem(ins, 0) {
        let (v, de) = mem_operand(x, ins)?;
        let off = mem_offset(x, ins);
        (0usize, Ok(v), de, Some(off))
    } else if ins.op_count() >= 2 {
        (st_index(ins, 0), Err(st_index(ins, 1)), 0, None)
    } else {
        (1, Err(0), 0, None)
    };
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let d = get_st(f, dst);
    let s = match src {
        Ok(v) => Some(v),
        Err(i) => get_st(f, i),
    };
    let (v, flags) = match (d, s) {
        (Some(d), Some(s)) => {
            let (a, b) = if reverse { (s, d) } else { (d, s) };
            let r = compute(op, a, b, &e);
            if conv_de != 0 && !a.is_nan() && !b.is_nan() && r.1 & (sw::IE | sw::ZE) == 0 {
                with_de(r, conv_de, &e)
            } else {
                r
            }
        }
        _ => (F80::INDEFINITE, UNDERFLOW),
    };
    let sup = suppressed(f, flags);
    if !sup {
        set_st(f, dst, v);
        if pop_after {
            pop(f);
        }
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, mem);
    Ok(())
}

/// FSQRT, FRNDINT on ST(0).
fn unary(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let (v, flags) = match get_st(f, 0) {
        Some(a) => match ins.mnemonic() {
            Mnemonic::Fsqrt => arith::sqrt(a, &e),
            _ => convert::round_to_int(a, &e),
        },
        None => (F80::INDEFINITE, UNDERFLOW),
    };
    if !suppressed(f, flags) {
        set_st(f, 0, v);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}

/// FSCALE, FPREM, FPREM1: ST(0) = f(ST(0), ST(1)).
fn st0_st1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let m = ins.mnemonic();
    let (v, flags) = match (get_st(f, 0), get_st(f, 1)) {
        (Some(a), Some(b)) => match m {
            Mnemonic::Fscale => misc::scale(a, b, &e),
            Mnemonic::Fprem => misc::prem(a, b, false, &e),
            _ => misc::prem(a, b, true, &e),
        },
        _ => (F80::INDEFINITE, UNDERFLOW),
    };
    // FPREM/FPREM1 replace C0..C3 when they compute a remainder; after an invalid operand,
    // a NaN, a stack underflow or an unmasked #D only C1 and C2 are cleared (this host).
    let computed = flags & (sw::IE | sw::SF) == 0
        && !suppressed(f, flags)
        && !read_st(f, 0).is_nan()
        && !read_st(f, 1).is_nan();
    let cc = if m == Mnemonic::Fscale {
        sw::C1
    } else if computed {
        sw::CC
    } else {
        sw::C1 | sw::C2
    };
    if !suppressed(f, flags) {
        set_st(f, 0, v);
    }
    let exc = set_status(f, flags, cc);
    record(x, ins, exc, None);
    Ok(())
}

/// FXTRACT: ST(0) = exponent, then push the significand.
fn fxtract(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    // An empty ST(0) (underflow) takes priority over a full stack (overflow).
    let (ex, sg, flags) = match get_st(f, 0) {
        None => (F80::INDEFINITE, F80::INDEFINITE, UNDERFLOW),
        Some(_) if !is_empty(f, 7) => (F80::INDEFINITE, F80::INDEFINITE, OVERFLOW),
        Some(a) => misc::extract(a, &e),
    };
    if !suppressed(f, flags) {
        set_st(f, 0, ex);
        push(f, sg);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}
