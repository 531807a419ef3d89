//! x87 transcendental instructions: FSIN, FCOS, FSINCOS, FPTAN (operand range |x| < 2^63,
//! else C2 = 1 and nothing changes), FPATAN, F2XM1, FYL2X, FYL2XP1.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::Trap;
use crate::x87::trans::{self, Trig, TrigOp};
use crate::x87::{sw, F80};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Fsin | Fcos | Fsincos | Fptan => trig,
        F2xm1 => f2xm1,
        Fpatan | Fyl2x | Fyl2xp1 => two_operand,
        _ => return None,
    })
}

fn trig(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let op = match ins.mnemonic() {
        Mnemonic::Fsin => TrigOp::Sin,
        Mnemonic::Fcos => TrigOp::Cos,
        Mnemonic::Fsincos => TrigOp::SinCos,
        _ => TrigOp::Tan,
    };
    let pushes = matches!(op, TrigOp::SinCos | TrigOp::Tan);
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let a = get_st(f, 0);
    let out = match a {
        None => Trig::Done((F80::INDEFINITE, UNDERFLOW), None),
        Some(_) if pushes && !is_empty(f, 7) => Trig::Done((F80::INDEFINITE, OVERFLOW), None),
        Some(a) => trans::trig(a, op, &e),
    };
    let (flags, c2) = match out {
        Trig::OutOfRange => (0, sw::C2),
        Trig::Done((v, fl), second) => {
            // FSINCOS: exception flags of both results, C1 from the cosine (pushed last).
            let fl = match second {
                Some((_, f2)) => (fl & !sw::C1) | f2,
                None => fl,
            };
            if !suppressed(f, fl) {
                if fl & sw::SF != 0 {
                    set_st(f, 0, F80::INDEFINITE);
                    if pushes {
                        push(f, F80::INDEFINITE);
                    }
                } else {
                    match op {
                        TrigOp::SinCos => {
                            set_st(f, 0, v);
                            push(f, second.map(|s| s.0).unwrap_or(F80::INDEFINITE));
                        }
                        TrigOp::Tan => {
                            // A NaN result is pushed again in place of the 1.0.
                            set_st(f, 0, v);
                            push(f, if v.is_nan() { v } else { F80::ONE });
                        }
                        _ => set_st(f, 0, v),
                    }
                }
            }
            (fl, 0)
        }
    };
    let exc = set_status(f, flags | c2, sw::C1 | sw::C2);
    record(x, ins, exc, None);
    Ok(())
}

fn f2xm1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let (v, flags) = match get_st(f, 0) {
        Some(a) => trans::f2xm1(a, &e),
        None => (F80::INDEFINITE, UNDERFLOW),
    };
    if !suppressed(f, flags) {
        set_st(f, 0, v);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}

/// FPATAN, FYL2X, FYL2XP1: ST(1) = f(ST(0), ST(1)), then pop.
fn two_operand(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let (v, flags) = match (get_st(f, 0), get_st(f, 1)) {
        (Some(a), Some(b)) => match ins.mnemonic() {
            Mnemonic::Fpatan => trans::fpatan(a, b, &e),
            Mnemonic::Fyl2x => trans::fyl2x(a, b, &e),
            _ => trans::fyl2xp1(a, b, &e),
        },
        _ => (F80::INDEFINITE, UNDERFLOW),
    };
    if !suppressed(f, flags) {
        set_st(f, 1, v);
        pop(f);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}
