//! x87 comparisons and classification: FCOM/FCOMP/FCOMPP, FUCOM/FUCOMP/FUCOMPP, FICOM/FICOMP,
//! FCOMI/FCOMIP/FUCOMI/FUCOMIP (to RFLAGS), FTST, FXAM.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::Trap;
use crate::state::flags::{AF, CF, OF, PF, SF, ZF};
use crate::x87::misc::{self, Ordering};
use crate::x87::{convert, sw, F80};
use crate::Ctx;
use iced_x86::{Instruction, MemorySize, Mnemonic};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Fcom | Fcomp | Fcompp | Fucom | Fucomp | Fucompp | Ficom | Ficomp | Ftst => fcom,
        Fcomi | Fcomip | Fucomi | Fucomip => fcomi,
        Fxam => fxam,
        _ => return None,
    })
}

/// FCOM family: C3/C2/C0 from the comparison of ST(0) with the source, C1 = 0.
fn fcom(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    use Mnemonic::*;
    check_waiting(x, ins)?;
    let m = ins.mnemonic();
    let quiet = matches!(m, Fucom | Fucomp | Fucompp);
    let pops = match m {
        Fcompp | Fucompp => 2,
        Fcomp | Fucomp | Ficomp => 1,
        _ => 0,
    };
    let mut mem = None;
    let mut conv_de = 0;
    let src = if m == Ftst {
        Some(F80::ZERO)
    } else if is_mem(ins, 0) {
        let a = x.mem_addr(ins, ins.memory_size().size() as u64, false)?;
        mem = Some(mem_offset(x, ins));
        let (v, de) = match ins.memory_size() {
            MemorySize::Float32 => convert::from_f32(x.read(a, 4)? as u32),
            MemorySize::Float64 => convert::from_f64(x.read(a, 8)?),
            MemorySize::Int16 => (convert::from_i64(x.read(a, 2)? as i16 as i64), 0),
            _ => (convert::from_i64(x.read(a, 4)? as i32 as i64), 0),
        };
        conv_de = de;
        Some(v)
    } else {
        let i = if ins.op_count() >= 2 {
            st_index(ins, 1)
        } else if ins.op_count() == 1 {
            st_index(ins, 0)
        } else {
            1
        };
        get_st(&x.cpu.state.x87, i)
    };
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let (ord, flags) = match (get_st(f, 0), src) {
        (Some(a), Some(b)) => {
            let (o, fl) = misc::compare(a, b, quiet, &e);
            let fl = if conv_de != 0 && fl & sw::IE == 0 && o != Ordering::Unordered {
                crate::x87::arith::with_de((F80::ZERO, fl), conv_de, &e).1
            } else {
                fl
            };
            (o, fl)
        }
        _ => (Ordering::Unordered, UNDERFLOW),
    };
    let sup = suppressed(f, flags);
    if !sup {
        for _ in 0..pops {
            pop(f);
        }
    }
    // The condition codes are written even when an unmasked exception suppresses the pop
    // (unordered for an invalid operand, the real order with an unmasked #D).
    let exc = set_status(f, ord.cc() | (flags & !sw::C1), sw::CC);
    record(x, ins, exc, mem);
    Ok(())
}

/// FCOMI family: ZF/PF/CF from the comparison, OF/SF/AF cleared, C1 = 0.
fn fcomi(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    use Mnemonic::*;
    check_waiting(x, ins)?;
    let m = ins.mnemonic();
    let quiet = matches!(m, Fucomi | Fucomip);
    let i = st_index(ins, 1);
    let f = &mut x.cpu.state.x87;
    let e = env(f);
    let (ord, flags) = match (get_st(f, 0), get_st(f, i)) {
        (Some(a), Some(b)) => misc::compare(a, b, quiet, &e),
        _ => (Ordering::Unordered, UNDERFLOW),
    };
    // RFLAGS are written even when an unmasked exception suppresses the pop; C1 is left
    // alone unless the stack underflowed (this host).
    if !suppressed(f, flags) && matches!(m, Fcomip | Fucomip) {
        pop(f);
    }
    let c1 = if flags & sw::SF != 0 { sw::C1 } else { 0 };
    let exc = set_status(f, flags & !sw::C1, c1);
    let r = &mut x.cpu.state.rflags;
    *r = (*r & !(ZF | PF | CF | OF | SF | AF)) | ord.eflags();
    record(x, ins, exc, None);
    Ok(())
}

/// FXAM: classify ST(0) (C1 = its sign, also for an empty register).
fn fxam(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_waiting(x, ins)?;
    let f = &mut x.cpu.state.x87;
    let v = read_st(f, 0);
    let cc = if is_empty(f, 0) {
        misc::EXAMINE_EMPTY | if v.sign() { sw::C1 } else { 0 }
    } else {
        misc::examine(v)
    };
    set_status(f, cc, sw::CC);
    record(x, ins, false, None);
    Ok(())
}
