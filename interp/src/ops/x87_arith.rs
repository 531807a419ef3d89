//! x87 arithmetic: FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR in all forms (m32, m64, ST(0)/ST(i) both
//! directions, the popping forms, FIADD and friends with m16/m32 integers), FSQRT, FRNDINT,
//! FSCALE, FXTRACT, FPREM and FPREM1.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::state::X87State;
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

/// The operation of an arithmetic form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// A decoded FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR form (and the popping and integer forms): `dst
/// = dst op src` (reversed: `src op dst`), then a pop for the P forms. `src` is `None` for a
/// memory source (`dst` is then ST(0)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinaryForm {
    pub op: Op,
    pub reverse: bool,
    pub pop: bool,
    pub dst: usize,
    pub src: Option<usize>,
}

/// The form of a `binary` instruction (one of [`lookup`]'s `binary` mnemonics).
pub fn binary_form(ins: &Instruction) -> BinaryForm {
    use Mnemonic::*;
    let m = ins.mnemonic();
    let (op, reverse) = match m {
        Fadd | Faddp | Fiadd => (Op::Add, false),
        Fsub | Fsubp | Fisub => (Op::Sub, false),
        Fsubr | Fsubrp | Fisubr => (Op::Sub, true),
        Fmul | Fmulp | Fimul => (Op::Mul, false),
        Fdiv | Fdivp | Fidiv => (Op::Div, false),
        _ => (Op::Div, true),
    };
    let pop = matches!(m, Faddp | Fsubp | Fsubrp | Fmulp | Fdivp | Fdivrp);
    let (dst, src) = if is_mem(ins, 0) {
        (0, None)
    } else if ins.op_count() >= 2 {
        (st_index(ins, 0), Some(st_index(ins, 1)))
    } else {
        (1, Some(0))
    };
    BinaryForm {
        op,
        reverse,
        pop,
        dst,
        src,
    }
}

/// A memory source operand's bits as an 80-bit value and its DE flag (m32/m64 floats, m16/m32
/// integers).
pub fn mem_value(size: MemorySize, bits: u64) -> (F80, u16) {
    match size {
        MemorySize::Float32 => convert::from_f32(bits as u32),
        MemorySize::Float64 => convert::from_f64(bits),
        MemorySize::Int16 => (convert::from_i64(bits as i16 as i64), 0),
        _ => (convert::from_i64(bits as i32 as i64), 0),
    }
}

/// Read a memory source operand as an 80-bit value and its DE flag.
fn mem_operand(x: &mut Ctx, ins: &Instruction) -> Result<(F80, u16), Fault> {
    let size = ins.memory_size();
    let a = x.mem_addr(ins, size.size() as u64, false)?;
    Ok(mem_value(size, x.read(a, size.size() as u8)?))
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

/// The result and status flags of `form` with the memory source `mem` (its value and DE flag)
/// already read; the state is not changed. Always inlined: the JIT's x87 helper calls it
/// for every arithmetic instruction.
#[inline(always)]
pub fn binary_compute(f: &X87State, form: BinaryForm, mem: Option<(F80, u16)>) -> (F80, u16) {
    let e = env(f);
    let (s, conv_de) = match (form.src, mem) {
        (Some(i), _) => (get_st(f, i), 0),
        (None, Some((v, de))) => (Some(v), de),
        (None, None) => (None, 0),
    };
    match (get_st(f, form.dst), s) {
        (Some(d), Some(s)) => {
            let (a, b) = if form.reverse { (s, d) } else { (d, s) };
            let r = compute(form.op, a, b, &e);
            if conv_de != 0 && !a.is_nan() && !b.is_nan() && r.1 & (sw::IE | sw::ZE) == 0 {
                with_de(r, conv_de, &e)
            } else {
                r
            }
        }
        _ => (F80::INDEFINITE, UNDERFLOW),
    }
}

/// Deliver a [`binary_compute`] outcome: the destination and the pop unless an unmasked
/// exception suppresses them, and the status word. True if an unmasked exception was raised.
pub fn binary_commit(f: &mut X87State, form: BinaryForm, v: F80, flags: u16) -> bool {
    if !suppressed(f, flags) {
        set_st(f, form.dst, v);
        if form.pop {
            pop(f);
        }
    }
    set_status(f, flags, sw::C1)
}

fn binary(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let form = binary_form(ins);
    let (src, mem) = if form.src.is_none() {
        let v = mem_operand(x, ins)?;
        (Some(v), Some(mem_offset(x, ins)))
    } else {
        (None, None)
    };
    let (v, flags) = binary_compute(&x.cpu.state.x87, form, src);
    let exc = binary_commit(&mut x.cpu.state.x87, form, v, flags);
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
