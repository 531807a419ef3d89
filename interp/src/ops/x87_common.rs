//! Shared machinery of the x87 families: availability (#NM) and pending-exception (#MF)
//! checks, the register stack (TOP, tags, ST(i)), status-word updates with the masked and
//! unmasked responses, the last-instruction/operand pointers, and memory operand access.
//!
//! Host rules (this Intel host, checked natively): every non-control x87 instruction
//! (incl. FNOP, FXCH, FFREE, FINCSTP) records its RIP in FIP; FOP and FDP are only updated by
//! an instruction that raises an unmasked exception (CPUID.7.EBX[6] FDP_EXCPTN_ONLY, and FOP
//! likewise); FCS/FDS are stored as zero (CPUID.7.EBX[13]).

use crate::fault::Fault;
use crate::ops::check_no_lock;
use crate::state::{ctl, X87State};
use crate::x87::{sw, Env, F80};
use crate::Ctx;
use iced_x86::{Instruction, OpKind, Register};

/// #UD for LOCK, #NM when CR0.EM or CR0.TS is set (x87 instructions).
#[inline]
pub fn check_fpu(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_no_lock(ins)?;
    if x.cpu.state.cr0 & (ctl::CR0_EM | ctl::CR0_TS) != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    Ok(())
}

/// A waiting instruction first delivers a pending unmasked exception (FSW.ES) as #MF
/// (CR0.NE = 1 semantics: the fault is raised on this instruction, RIP at it).
#[inline]
pub fn check_pending(x: &Ctx) -> Result<(), Fault> {
    if x.cpu.state.x87.fsw & sw::ES != 0 {
        return Err(Fault::X87Error);
    }
    Ok(())
}

/// Both checks of an ordinary (waiting) x87 instruction.
#[inline]
pub fn check_waiting(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_fpu(x, ins)?;
    check_pending(x)
}

#[inline]
pub fn top(f: &X87State) -> usize {
    ((f.fsw >> 11) & 7) as usize
}

#[inline]
pub fn set_top(f: &mut X87State, t: usize) {
    f.fsw = (f.fsw & !sw::TOP) | (((t & 7) as u16) << 11);
}

/// Physical register of ST(i).
#[inline]
pub fn phys(f: &X87State, i: usize) -> usize {
    (top(f) + i) & 7
}

#[inline]
pub fn is_empty(f: &X87State, i: usize) -> bool {
    f.ftw & (1 << phys(f, i)) == 0
}

/// The contents of ST(i) (whatever the tag says).
#[inline]
pub fn read_st(f: &X87State, i: usize) -> F80 {
    F80::from_bytes(&f.regs[phys(f, i)][..10])
}

/// ST(i), or `None` if the register is empty.
#[inline]
pub fn get_st(f: &X87State, i: usize) -> Option<F80> {
    if is_empty(f, i) {
        None
    } else {
        Some(read_st(f, i))
    }
}

/// Write ST(i) and tag it valid.
#[inline]
pub fn set_st(f: &mut X87State, i: usize, v: F80) {
    let p = phys(f, i);
    f.regs[p][..10].copy_from_slice(&v.to_bytes());
    f.ftw |= 1 << p;
}

/// Push: TOP - 1, then ST(0) = v.
pub fn push(f: &mut X87State, v: F80) {
    let t = top(f).wrapping_sub(1) & 7;
    set_top(f, t);
    set_st(f, 0, v);
}

/// Pop: tag ST(0) empty, TOP + 1.
pub fn pop(f: &mut X87State) {
    let p = phys(f, 0);
    f.ftw &= !(1 << p);
    set_top(f, p + 1);
}

/// Rounding environment from the control word.
#[inline]
pub fn env(f: &X87State) -> Env {
    Env::from_fcw(f.fcw)
}

/// Exceptions in `flags` that the control word leaves unmasked.
#[inline]
pub fn unmasked(f: &X87State, flags: u16) -> u16 {
    flags & sw::EXC & !f.fcw
}

/// Does an unmasked IE, DE or ZE suppress the result (and any pop)?
#[inline]
pub fn suppressed(f: &X87State, flags: u16) -> bool {
    unmasked(f, flags) & (sw::IE | sw::DE | sw::ZE) != 0
}

/// Stack fault flags: IE + SF, C1 = 1 for overflow, 0 for underflow.
pub const UNDERFLOW: u16 = sw::IE | sw::SF;
pub const OVERFLOW: u16 = sw::IE | sw::SF | sw::C1;

/// Record the outcome of an instruction in the status word: exception flags (and SF) are
/// sticky, the condition-code bits in `cc_mask` are replaced by those in `flags`, and an
/// unmasked exception sets ES and B (the #MF is taken by the next waiting instruction).
/// Returns true if an unmasked exception was raised.
pub fn set_status(f: &mut X87State, flags: u16, cc_mask: u16) -> bool {
    f.fsw = (f.fsw & !cc_mask) | (flags & cc_mask) | (flags & (sw::EXC | sw::SF));
    if unmasked(f, flags) != 0 {
        f.fsw |= sw::ES | sw::B;
        true
    } else {
        false
    }
}

/// The last-instruction pointer: every non-control instruction records its address; an
/// unmasked exception also records FOP and (for memory operands) FDP.
#[inline]
pub fn record(x: &mut Ctx, ins: &Instruction, exception: bool, mem: Option<u64>) {
    x.cpu.state.x87.fip = ins.ip();
    if exception {
        x.cpu.state.x87.fop = fop(x, ins);
        if let Some(a) = mem {
            x.cpu.state.x87.fdp = a;
        }
    }
}

/// FOP: the low 3 bits of the D8..DF opcode byte and the ModR/M byte, read back from the
/// instruction bytes (only needed when an unmasked exception is recorded).
#[cold]
#[inline(never)]
fn fop(x: &mut Ctx, ins: &Instruction) -> u16 {
    let mut b = [0u8; 15];
    let len = ins.len().min(15);
    let lin = x.code_linear(ins.ip());
    if x.fetch_bytes(lin, &mut b[..len]).is_err() {
        return 0;
    }
    let mut i = 0;
    while i + 1 < len {
        let c = b[i];
        if (0xd8..=0xdf).contains(&c) {
            return (((c & 7) as u16) << 8) | b[i + 1] as u16;
        }
        i += 1;
    }
    0
}

/// Offset of the memory operand as FDP records it.
#[inline]
pub fn mem_offset(x: &Ctx, ins: &Instruction) -> u64 {
    x.effective_offset(ins)
}

/// ST(i) index of register operand `n` (ST0..ST7).
#[inline]
pub fn st_index(ins: &Instruction, n: u32) -> usize {
    (ins.op_register(n) as usize).wrapping_sub(Register::ST0 as usize) & 7
}

#[inline]
pub fn is_mem(ins: &Instruction, n: u32) -> bool {
    ins.op_kind(n) == OpKind::Memory
}

/// Read a 10-byte memory operand.
pub fn read_m80(x: &mut Ctx, addr: u64) -> Result<[u8; 10], Fault> {
    let mut b = [0u8; 10];
    x.read_bytes(addr, &mut b)?;
    Ok(b)
}

/// Full 16-bit tag word computed from the contents (FSTENV/FSAVE): 00 valid, 01 zero,
/// 10 special (NaN, infinity, denormal, unsupported), 11 empty.
pub fn full_tag_word(f: &X87State) -> u16 {
    let mut t = 0u16;
    for p in 0..8 {
        let tag = if f.ftw & (1 << p) == 0 {
            3
        } else {
            let v = F80::from_bytes(&f.regs[p][..10]);
            match v.class() {
                crate::x87::Class::Zero => 1,
                crate::x87::Class::Normal => 0,
                _ => 2,
            }
        };
        t |= tag << (2 * p);
    }
    t
}

/// Abridged tag from a full tag word: only "empty" (11) matters.
pub fn abridge_tag_word(t: u16) -> u8 {
    let mut a = 0u8;
    for p in 0..8 {
        if (t >> (2 * p)) & 3 != 3 {
            a |= 1 << p;
        }
    }
    a
}
