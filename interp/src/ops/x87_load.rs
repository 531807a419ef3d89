//! x87 data transfer: FLD/FILD/FBLD and the constants, FST/FSTP/FIST/FISTP/FISTTP/FBSTP,
//! FXCH, FCMOVcc, FFREE/FFREEP, FINCSTP/FDECSTP, FNOP, FCHS/FABS.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::Trap;
use crate::state::flags::{CF, PF, ZF};
use crate::state::X87State;
use crate::x87::float::rc;
use crate::x87::{convert, misc, sw, F80};
use crate::Ctx;
use iced_x86::{Instruction, MemorySize, Mnemonic};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Fld | Mnemonic::Fild | Mnemonic::Fbld => fld,
        Mnemonic::Fld1
        | Mnemonic::Fldz
        | Mnemonic::Fldpi
        | Mnemonic::Fldl2e
        | Mnemonic::Fldl2t
        | Mnemonic::Fldlg2
        | Mnemonic::Fldln2 => fld_const,
        Mnemonic::Fst | Mnemonic::Fstp | Mnemonic::Fstpnce => fst,
        Mnemonic::Fist | Mnemonic::Fistp | Mnemonic::Fisttp | Mnemonic::Fbstp => fist,
        Mnemonic::Fxch => fxch,
        Mnemonic::Fcmovb
        | Mnemonic::Fcmove
        | Mnemonic::Fcmovbe
        | Mnemonic::Fcmovu
        | Mnemonic::Fcmovnb
        | Mnemonic::Fcmovne
        | Mnemonic::Fcmovnbe
        | Mnemonic::Fcmovnu => fcmov,
        Mnemonic::Ffree | Mnemonic::Ffreep => ffree,
        Mnemonic::Fincstp | Mnemonic::Fdecstp => fincdec,
        Mnemonic::Fnop => fnop,
        Mnemonic::Fchs | Mnemonic::Fabs => fchs_fabs,
        _ => return None,
    })
}

/// Push a loaded value (`None`: the source register is empty), with the stack-overflow check.
/// The value and flags of a load whose source is `src` (`None`: an empty register); the
/// state is not changed.
pub fn load_compute(f: &X87State, src: Option<(F80, u16)>) -> (F80, u16) {
    // An empty source (underflow) takes priority over a full stack (overflow).
    match src {
        None => (F80::INDEFINITE, UNDERFLOW),
        Some(_) if !is_empty(f, 7) => (F80::INDEFINITE, OVERFLOW),
        Some(v) => v,
    }
}

/// Deliver a [`load_compute`] outcome: the push unless an unmasked IE suppresses it, and the
/// status word. True if an unmasked exception was raised.
pub fn load_commit(f: &mut X87State, v: F80, flags: u16) -> bool {
    // Only an unmasked IE suppresses a load: a denormal m32/m64 is loaded even when #D is
    // unmasked (this host).
    if unmasked(f, flags) & sw::IE == 0 {
        push(f, v);
    }
    set_status(f, flags, sw::C1)
}

/// The loaded value and its flags of FLD/FILD from memory bits (`hi`: bits 79:64 of an m80).
#[inline(always)]
pub fn load_mem_value(size: MemorySize, lo: u64, hi: u16) -> (F80, u16) {
    match size {
        MemorySize::Float32 => convert::load_widened(convert::from_f32(lo as u32)),
        MemorySize::Float64 => convert::load_widened(convert::from_f64(lo)),
        MemorySize::Float80 => (F80 { se: hi, sig: lo }, 0),
        MemorySize::Int16 => (convert::from_i64(lo as i16 as i64), 0),
        MemorySize::Int32 => (convert::from_i64(lo as i32 as i64), 0),
        _ => (convert::from_i64(lo as i64), 0),
    }
}

fn push_value(x: &mut Ctx, ins: &Instruction, src: Option<(F80, u16)>, mem: Option<u64>) {
    let (v, flags) = load_compute(&x.cpu.state.x87, src);
    let exc = load_commit(&mut x.cpu.state.x87, v, flags);
    record(x, ins, exc, mem);
}

/// FLD m32/m64/m80/ST(i), FILD m16/m32/m64, FBLD m80.
fn fld(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    if !is_mem(ins, 0) {
        let i = st_index(ins, 0);
        let v = get_st(&x.cpu.state.x87, i).map(|v| (v, 0));
        push_value(x, ins, v, None);
        return Ok(());
    }
    let a = x.mem_addr(ins, ins.memory_size().size() as u64, false)?;
    let off = mem_offset(x, ins);
    let size = ins.memory_size();
    let v = match size {
        MemorySize::Float80 => (F80::from_bytes(&read_m80(x, a)?), 0),
        MemorySize::Float32
        | MemorySize::Float64
        | MemorySize::Int16
        | MemorySize::Int32
        | MemorySize::Int64 => load_mem_value(size, x.read(a, size.size() as u8)?, 0),
        _ => (convert::from_bcd(&read_m80(x, a)?), 0),
    };
    push_value(x, ins, Some(v), Some(off));
    Ok(())
}

fn fld_const(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let mode = env(&x.cpu.state.x87).rc;
    let v = match ins.mnemonic() {
        Mnemonic::Fld1 => F80::ONE,
        Mnemonic::Fldz => F80::ZERO,
        Mnemonic::Fldpi => misc::const_pi(mode),
        Mnemonic::Fldl2e => misc::const_l2e(mode),
        Mnemonic::Fldl2t => misc::const_l2t(mode),
        Mnemonic::Fldlg2 => misc::const_lg2(mode),
        _ => misc::const_ln2(mode),
    };
    push_value(x, ins, Some((v, 0)), None);
    Ok(())
}

/// FST/FSTP m32/m64/m80/ST(i).
fn fst(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let pop_after = ins.mnemonic() != Mnemonic::Fst;
    let f = &x.cpu.state.x87;
    let src = get_st(f, 0);
    let e = env(f);
    let mut mem = None;
    let flags;
    if is_mem(ins, 0) {
        let a = x.mem_addr(ins, ins.memory_size().size() as u64, true)?;
        mem = Some(mem_offset(x, ins));
        let (bytes, n, fl): ([u8; 10], usize, u16) = match (ins.memory_size(), src) {
            (MemorySize::Float32, Some(v)) => {
                let (b, fl) = convert::to_f32(v, &e);
                (widen_bytes(&b.to_le_bytes()), 4, fl)
            }
            (MemorySize::Float32, None) => {
                (widen_bytes(&0xffc0_0000u32.to_le_bytes()), 4, UNDERFLOW)
            }
            (MemorySize::Float64, Some(v)) => {
                let (b, fl) = convert::to_f64(v, &e);
                (widen_bytes(&b.to_le_bytes()), 8, fl)
            }
            (MemorySize::Float64, None) => (
                widen_bytes(&0xfff8_0000_0000_0000u64.to_le_bytes()),
                8,
                UNDERFLOW,
            ),
            (_, Some(v)) => (v.to_bytes(), 10, 0),
            (_, None) => (F80::INDEFINITE.to_bytes(), 10, UNDERFLOW),
        };
        let f = &x.cpu.state.x87;
        let store = unmasked(f, fl) & (sw::IE | sw::DE | sw::OE | sw::UE) == 0;
        if store {
            x.write_bytes(a, &bytes[..n])?;
        }
        flags = fl;
    } else {
        let i = st_index(ins, 0);
        if src.is_none() && ins.mnemonic() == Mnemonic::Fstpnce {
            // FSTPNCE (D9 D8+i) with an empty ST(0), this host: no stack fault and ST(i) is
            // left alone (value and tag); only the pop, with C1 cleared.
            let _ = i;
            finish_store(x, ins, 0, true, None);
            return Ok(());
        }
        let (v, fl) = match src {
            Some(v) => (v, 0),
            None => (F80::INDEFINITE, UNDERFLOW),
        };
        let f = &mut x.cpu.state.x87;
        if !suppressed(f, fl) {
            set_st(f, i, v);
        }
        flags = fl;
    }
    finish_store(x, ins, flags, pop_after, mem);
    Ok(())
}

fn widen_bytes(b: &[u8]) -> [u8; 10] {
    let mut o = [0u8; 10];
    o[..b.len()].copy_from_slice(b);
    o
}

/// Status update and pop of the store forms: no pop when an unmasked invalid-operation or
/// denormal exception suppressed the store.
fn finish_store(x: &mut Ctx, ins: &Instruction, flags: u16, pop_after: bool, mem: Option<u64>) {
    let f = &mut x.cpu.state.x87;
    let keep = unmasked(f, flags) & (sw::IE | sw::DE | sw::OE | sw::UE) != 0;
    if pop_after && !keep {
        pop(f);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, mem);
}

/// FIST/FISTP/FISTTP m16/m32/m64 and FBSTP m80.
fn fist(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let m = ins.mnemonic();
    let f = &x.cpu.state.x87;
    let e = env(f);
    let src = get_st(f, 0);
    let a = x.mem_addr(ins, ins.memory_size().size() as u64, true)?;
    let off = mem_offset(x, ins);
    let (bytes, n, flags): ([u8; 10], usize, u16) = if m == Mnemonic::Fbstp {
        match src {
            Some(v) => {
                let (b, fl) = convert::to_bcd(v, &e);
                (b, 10, fl)
            }
            None => (convert::BCD_INDEFINITE, 10, UNDERFLOW),
        }
    } else {
        let size = ins.memory_size().size();
        let mode = if m == Mnemonic::Fisttp {
            rc::ZERO
        } else {
            e.rc
        };
        let (v, fl) = match src {
            Some(v) => convert::to_int(v, size as u32 * 8, mode, &e),
            None => (1u64 << (size * 8 - 1), UNDERFLOW),
        };
        (widen_bytes(&v.to_le_bytes()[..size]), size, fl)
    };
    let store = unmasked(&x.cpu.state.x87, flags) & (sw::IE | sw::DE) == 0;
    if store {
        x.write_bytes(a, &bytes[..n])?;
    }
    let f = &mut x.cpu.state.x87;
    if m != Mnemonic::Fist && store {
        pop(f);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, Some(off));
    Ok(())
}

/// FXCH ST(i): an empty operand is replaced by the indefinite (masked) before the exchange.
fn fxch(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let i = if ins.op_count() > 1 {
        st_index(ins, 1)
    } else {
        1
    };
    let f = &mut x.cpu.state.x87;
    let (a, b) = (get_st(f, 0), get_st(f, i));
    let flags = if a.is_none() || b.is_none() {
        UNDERFLOW
    } else {
        0
    };
    if !suppressed(f, flags) {
        let a = a.unwrap_or(F80::INDEFINITE);
        let b = b.unwrap_or(F80::INDEFINITE);
        set_st(f, 0, b);
        set_st(f, i, a);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}

/// FCMOVcc ST(0), ST(i).
fn fcmov(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let fl = x.cpu.state.rflags;
    let (cf, zf, pf) = (fl & CF != 0, fl & ZF != 0, fl & PF != 0);
    let cond = match ins.mnemonic() {
        Mnemonic::Fcmovb => cf,
        Mnemonic::Fcmove => zf,
        Mnemonic::Fcmovbe => cf || zf,
        Mnemonic::Fcmovu => pf,
        Mnemonic::Fcmovnb => !cf,
        Mnemonic::Fcmovne => !zf,
        Mnemonic::Fcmovnbe => !cf && !zf,
        _ => !pf,
    };
    let i = st_index(ins, 1);
    let f = &mut x.cpu.state.x87;
    let (a, b) = (get_st(f, 0), get_st(f, i));
    let flags = if a.is_none() || b.is_none() {
        UNDERFLOW
    } else {
        0
    };
    if flags != 0 {
        if !suppressed(f, flags) {
            set_st(f, 0, F80::INDEFINITE);
        }
    } else if cond {
        set_st(f, 0, b.unwrap_or(F80::INDEFINITE));
    }
    // C1 is left alone unless the stack underflowed (this host).
    let c1 = if flags != 0 { sw::C1 } else { 0 };
    let exc = set_status(f, flags, c1);
    record(x, ins, exc, None);
    Ok(())
}

fn ffree(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let i = st_index(ins, 0);
    let f = &mut x.cpu.state.x87;
    let p = phys(f, i);
    f.ftw &= !(1 << p);
    f.fsw &= !sw::C1;
    if ins.mnemonic() == Mnemonic::Ffreep {
        pop(f);
    }
    record(x, ins, false, None);
    Ok(())
}

fn fincdec(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let t = top(f);
    let t = if ins.mnemonic() == Mnemonic::Fincstp {
        t + 1
    } else {
        t + 7
    };
    set_top(f, t);
    f.fsw &= !sw::C1;
    record(x, ins, false, None);
    Ok(())
}

fn fnop(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    record(x, ins, false, None);
    Ok(())
}

/// FCHS/FABS: sign operations, no exception but stack underflow.
fn fchs_fabs(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let (v, flags) = match get_st(f, 0) {
        Some(v) => (
            if ins.mnemonic() == Mnemonic::Fchs {
                v.negated()
            } else {
                v.abs()
            },
            0,
        ),
        None => (F80::INDEFINITE, UNDERFLOW),
    };
    if !suppressed(f, flags) {
        set_st(f, 0, v);
    }
    let exc = set_status(f, flags, sw::C1);
    record(x, ins, exc, None);
    Ok(())
}
