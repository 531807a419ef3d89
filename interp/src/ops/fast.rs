//! Specialised handlers for the hottest instruction shapes in 64-bit code: ALU, MOV, MOVZX/MOVSX,
//! LEA, Jcc/JMP/CALL/RET and PUSH/POP with general-purpose register, immediate and 64-bit-
//! addressed memory operands. They are chosen at decode time (consulted before the families)
//! and compute exactly what the family handlers compute, with the same pure semantic functions
//! (`alu::binop`, `flags::cond`, ...) and the same order of checks, accesses and writeback; they
//! only skip the run-time dispatch on operand kinds, sizes and CPU mode.
//!
//! Preconditions fixed at decode time (anything else goes to the family handlers):
//! - decoded as 64-bit code (a block is only run in the mode it was decoded for, and mode
//!   changes end blocks), no LOCK prefix (which would be #UD or need the family's rules);
//! - register operands are GPRs other than AH/CH/DH/BH;
//! - memory operands use 64-bit addressing (RIP, a 64-bit base and/or index, or a plain
//!   displacement) and no FS/GS segment, so the linear address is the offset;
//! - branch targets fixed in the instruction are canonical.
//!
//! Every handler here (and in `fast_misc.rs`) retires exactly one instruction, returns only `Ok`
//! or `Trap::Fault`, and never reads or changes `cpu.retired`/`cpu.budget_end`: the engine runs
//! blocks made only of these without per-instruction budget checks and counts them in bulk.
//! `fast_tests.rs` checks each claimed form against its family handler on random states.
//! (See `docs/interpreter-speed.md`.)

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags;
use crate::mmu::is_canonical;
use crate::operand::{gpr_index, gpr_ref, mask, sext};
use crate::ops::alu::{self, op};
use crate::state::flags::STATUS;
use crate::state::{reg, CpuState};
use crate::Ctx;
use iced_x86::{Code, CodeSize, ConditionCode, Instruction, Mnemonic, OpKind, Register};

/// Operand shape, as far as the fast handlers care.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Shape {
    /// A GPR (not AH..BH) of this many bytes.
    Reg(u8),
    /// A memory operand with 64-bit addressing and no FS/GS base.
    Mem,
    /// An immediate stored as 8 bits (sign-extended to the operand size).
    Imm8,
    /// An immediate stored as 16 or 32 bits (sign-extended to the operand size).
    Imm32,
    Other,
}

pub(crate) fn shape(ins: &Instruction, n: u32) -> Shape {
    if n >= ins.op_count() {
        return Shape::Other;
    }
    match ins.op_kind(n) {
        OpKind::Register => match gpr_ref(ins.op_register(n)) {
            Some(g) if !g.high => Shape::Reg(g.size),
            _ => Shape::Other,
        },
        OpKind::Memory if mem64(ins) => Shape::Mem,
        OpKind::Immediate8
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64 => Shape::Imm8,
        OpKind::Immediate16 | OpKind::Immediate32 | OpKind::Immediate32to64 => Shape::Imm32,
        _ => Shape::Other,
    }
}

/// Does the memory operand use 64-bit addressing without an FS/GS base?
fn mem64(ins: &Instruction) -> bool {
    let base = ins.memory_base();
    let index = ins.memory_index();
    let base_ok = base == Register::None || base == Register::RIP || base.is_gpr64();
    let index_ok = index == Register::None || index.is_gpr64();
    let displ_ok =
        !(base == Register::None && index == Register::None) || ins.memory_displ_size() != 2;
    let seg = ins.segment_prefix();
    base_ok && index_ok && displ_ok && seg != Register::FS && seg != Register::GS
}

/// The handlers for `ins`, if it has one of the shapes handled here.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if ins.code_size() != CodeSize::Code64 || ins.has_lock_prefix() {
        return None;
    }
    match ins.mnemonic() {
        Mnemonic::Add => alu_lookup::<{ op::ADD }, true>(ins),
        Mnemonic::Adc => alu_lookup::<{ op::ADC }, true>(ins),
        Mnemonic::Sub => alu_lookup::<{ op::SUB }, true>(ins),
        Mnemonic::Sbb => alu_lookup::<{ op::SBB }, true>(ins),
        Mnemonic::And => alu_lookup::<{ op::AND }, true>(ins),
        Mnemonic::Or => alu_lookup::<{ op::OR }, true>(ins),
        Mnemonic::Xor => alu_lookup::<{ op::XOR }, true>(ins),
        Mnemonic::Cmp => alu_lookup::<{ op::SUB }, false>(ins),
        Mnemonic::Test => alu_lookup::<{ op::AND }, false>(ins),
        Mnemonic::Inc => incdec_lookup::<{ op::INC }>(ins),
        Mnemonic::Dec => incdec_lookup::<{ op::DEC }>(ins),
        Mnemonic::Mov => mov_lookup(ins),
        Mnemonic::Movzx => ext_lookup::<false>(ins),
        Mnemonic::Movsx | Mnemonic::Movsxd => ext_lookup::<true>(ins),
        Mnemonic::Lea => lea_lookup(ins),
        Mnemonic::Jmp if ins.code() == Code::Jmp_rel8_64 || ins.code() == Code::Jmp_rel32_64 => {
            is_canonical(ins.near_branch64()).then_some(jmp_rel as Handler)
        }
        Mnemonic::Call if ins.code() == Code::Call_rel32_64 => {
            is_canonical(ins.near_branch64()).then_some(call_rel as Handler)
        }
        Mnemonic::Ret if ins.code() == Code::Retnq => Some(ret),
        Mnemonic::Push if ins.code() == Code::Push_r64 => Some(push_r64),
        Mnemonic::Pop if ins.code() == Code::Pop_r64 => Some(pop_r64),
        _ => jcc_lookup(ins).or_else(|| crate::ops::fast_misc::lookup(ins)),
    }
}

/// Pick `$h::<S>` (plus leading const arguments) by a run-time operand size.
macro_rules! by_size {
    ($size:expr, $h:ident, [$($c:expr),*]) => {
        match $size {
            1 => Some($h::<$($c,)* 1> as Handler),
            2 => Some($h::<$($c,)* 2> as Handler),
            4 => Some($h::<$($c,)* 4> as Handler),
            8 => Some($h::<$($c,)* 8> as Handler),
            _ => None,
        }
    };
}
pub(crate) use by_size;

/// Pick `$h::<CC, ...>` by the instruction's condition code (None for no condition).
macro_rules! cond_lookup {
    ($ins:expr, $h:ident, [$($c:expr),*]) => {{
        use iced_x86::ConditionCode as C;
        Some(match $ins.condition_code() {
            C::o => $h::<{ C::o as u8 }, $($c),*> as Handler,
            C::no => $h::<{ C::no as u8 }, $($c),*>,
            C::b => $h::<{ C::b as u8 }, $($c),*>,
            C::ae => $h::<{ C::ae as u8 }, $($c),*>,
            C::e => $h::<{ C::e as u8 }, $($c),*>,
            C::ne => $h::<{ C::ne as u8 }, $($c),*>,
            C::be => $h::<{ C::be as u8 }, $($c),*>,
            C::a => $h::<{ C::a as u8 }, $($c),*>,
            C::s => $h::<{ C::s as u8 }, $($c),*>,
            C::ns => $h::<{ C::ns as u8 }, $($c),*>,
            C::p => $h::<{ C::p as u8 }, $($c),*>,
            C::np => $h::<{ C::np as u8 }, $($c),*>,
            C::l => $h::<{ C::l as u8 }, $($c),*>,
            C::ge => $h::<{ C::ge as u8 }, $($c),*>,
            C::le => $h::<{ C::le as u8 }, $($c),*>,
            C::g => $h::<{ C::g as u8 }, $($c),*>,
            C::None => return None,
        })
    }};
}
pub(crate) use cond_lookup;

// ----- operand helpers -----

/// Slot of a GPR operand (the shape check at decode time guarantees a GPR that is not AH..BH).
#[inline(always)]
pub(crate) fn r0(ins: &Instruction) -> usize {
    gpr_index(ins.op0_register())
}

#[inline(always)]
pub(crate) fn r1(ins: &Instruction) -> usize {
    gpr_index(ins.op1_register())
}

/// Value of an `S`-byte register.
#[inline(always)]
pub(crate) fn get<const S: u8>(st: &CpuState, i: usize) -> u64 {
    st.gpr[i] & mask(S)
}

/// Write an `S`-byte register: 32-bit writes zero-extend, 8/16-bit writes merge.
#[inline(always)]
pub(crate) fn set<const S: u8>(st: &mut CpuState, i: usize, v: u64) {
    let r = &mut st.gpr[i];
    *r = match S {
        1 => (*r & !0xff) | (v & 0xff),
        2 => (*r & !0xffff) | (v & 0xffff),
        4 => v & 0xffff_ffff,
        _ => v,
    };
}

/// Immediate operand (operand 1), sign-extended from its stored width.
#[inline(always)]
pub(crate) fn imm<const IMM8: bool>(ins: &Instruction) -> u64 {
    if IMM8 {
        ins.immediate8to64() as u64
    } else {
        ins.immediate32to64() as u64
    }
}

/// [`ea`] for an access: also records whether the operand is SS-relative (RSP/RBP base), so a
/// non-canonical address faults #SS(0) as in the family handlers (`Ctx::seg_linear`).
#[inline(always)]
pub(crate) fn ea_x(x: &mut Ctx, ins: &Instruction) -> u64 {
    x.ss_operand = ins.memory_segment() == Register::SS;
    ea(&x.cpu.state, ins)
}

/// Linear address of a 64-bit-addressed memory operand without an FS/GS base.
#[inline(always)]
pub(crate) fn ea(st: &CpuState, ins: &Instruction) -> u64 {
    let mut ea = ins.memory_displacement64();
    let b = crate::operand::addr_reg(ins.memory_base());
    if b < 16 {
        ea = ea.wrapping_add(st.gpr[b]);
    }
    let i = crate::operand::addr_reg(ins.memory_index());
    if i < 16 {
        ea = ea.wrapping_add(st.gpr[i].wrapping_mul(ins.memory_index_scale() as u64));
    }
    ea
}

// ----- ALU -----

fn alu_lookup<const OP: u8, const W: bool>(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), shape(ins, 1)) {
        (Shape::Reg(s), Shape::Reg(t)) if s == t => by_size!(s, alu_rr, [OP, W]),
        (Shape::Reg(s), Shape::Imm8) => by_size!(s, alu_ri, [OP, W, true]),
        (Shape::Reg(s), Shape::Imm32) => by_size!(s, alu_ri, [OP, W, false]),
        (Shape::Reg(s), Shape::Mem) => by_size!(s, alu_rm, [OP, W]),
        (Shape::Mem, Shape::Reg(s)) => by_size!(s, alu_mr, [OP, W]),
        (Shape::Mem, Shape::Imm8) => by_size!(ins.memory_size().size(), alu_mi, [OP, W, true]),
        (Shape::Mem, Shape::Imm32) => by_size!(ins.memory_size().size(), alu_mi, [OP, W, false]),
        _ => None,
    }
}

/// Result and flags of `a OP b`, written back to the register when `W`.
#[inline(always)]
fn alu_reg_dest<const OP: u8, const W: bool, const S: u8>(
    st: &mut CpuState,
    d: usize,
    a: u64,
    b: u64,
) {
    let (res, f) = alu::binop(OP, a, b, S, st.rflags);
    if W {
        set::<S>(st, d, res);
    }
    flags::set_status(st, STATUS, f);
}

fn alu_rr<const OP: u8, const W: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let (d, s) = (r0(ins), r1(ins));
    let (a, b) = (get::<S>(st, d), get::<S>(st, s));
    alu_reg_dest::<OP, W, S>(st, d, a, b);
    Ok(())
}

fn alu_ri<const OP: u8, const W: bool, const IMM8: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let (a, b) = (get::<S>(st, d), imm::<IMM8>(ins) & mask(S));
    alu_reg_dest::<OP, W, S>(st, d, a, b);
    Ok(())
}

fn alu_rm<const OP: u8, const W: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    let b = x.read_n::<S>(lin)?;
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let a = get::<S>(st, d);
    alu_reg_dest::<OP, W, S>(st, d, a, b);
    Ok(())
}

/// `OP [m], b`: read (for writing when `W`), compute, write back, flags.
#[inline(always)]
fn alu_mem_dest<const OP: u8, const W: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
    b: u64,
) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    let a = if W {
        x.read_rmw_n::<S>(lin)?
    } else {
        x.read_n::<S>(lin)?
    };
    let (res, f) = alu::binop(OP, a, b, S, x.cpu.state.rflags);
    if W {
        x.write_n::<S>(lin, res)?;
    }
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

fn alu_mr<const OP: u8, const W: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let b = get::<S>(&x.cpu.state, r1(ins));
    alu_mem_dest::<OP, W, S>(x, ins, b)
}

fn alu_mi<const OP: u8, const W: bool, const IMM8: bool, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    alu_mem_dest::<OP, W, S>(x, ins, imm::<IMM8>(ins) & mask(S))
}

fn incdec_lookup<const OP: u8>(ins: &Instruction) -> Option<Handler> {
    match shape(ins, 0) {
        Shape::Reg(s) => by_size!(s, incdec_r, [OP]),
        _ => None,
    }
}

fn incdec_r<const OP: u8, const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let d = r0(ins);
    let a = get::<S>(st, d);
    let (res, f) = if OP == op::INC {
        alu::inc(a, S, st.rflags)
    } else {
        alu::dec(a, S, st.rflags)
    };
    set::<S>(st, d, res);
    flags::set_status(st, STATUS, f);
    Ok(())
}

// ----- MOV, MOVZX/MOVSX, LEA -----

fn mov_lookup(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), shape(ins, 1)) {
        (Shape::Reg(s), Shape::Reg(t)) if s == t => by_size!(s, mov_rr, []),
        (Shape::Reg(s), Shape::Mem) => by_size!(s, mov_rm, []),
        (Shape::Mem, Shape::Reg(s)) => by_size!(s, mov_mr, []),
        (Shape::Reg(s), Shape::Imm8) => by_size!(s, mov_ri, [true]),
        (Shape::Reg(s), Shape::Imm32) => by_size!(s, mov_ri, [false]),
        (Shape::Mem, Shape::Imm8) => by_size!(ins.memory_size().size(), mov_mi, [true]),
        (Shape::Mem, Shape::Imm32) => by_size!(ins.memory_size().size(), mov_mi, [false]),
        (Shape::Reg(8), _) if ins.op1_kind() == OpKind::Immediate64 => Some(mov_r_imm64),
        _ => None,
    }
}

fn mov_rr<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let v = get::<S>(st, r1(ins));
    set::<S>(st, r0(ins), v);
    Ok(())
}

fn mov_rm<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    let v = x.read_n::<S>(lin)?;
    set::<S>(&mut x.cpu.state, r0(ins), v);
    Ok(())
}

fn mov_mr<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let v = get::<S>(&x.cpu.state, r1(ins));
    let lin = ea_x(x, ins);
    x.write_n::<S>(lin, v)?;
    Ok(())
}

fn mov_ri<const IMM8: bool, const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    set::<S>(&mut x.cpu.state, r0(ins), imm::<IMM8>(ins));
    Ok(())
}

fn mov_mi<const IMM8: bool, const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    x.write_n::<S>(lin, imm::<IMM8>(ins) & mask(S))?;
    Ok(())
}

fn mov_r_imm64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    x.cpu.state.gpr[r0(ins)] = ins.immediate64();
    Ok(())
}

/// MOVZX/MOVSX/MOVSXD: destination size `D`, source size `S`.
fn ext_lookup<const SIGN: bool>(ins: &Instruction) -> Option<Handler> {
    let (d, s) = match (shape(ins, 0), shape(ins, 1)) {
        (Shape::Reg(d), Shape::Reg(s)) => (d, s),
        (Shape::Reg(d), Shape::Mem) => (d, ins.memory_size().size() as u8),
        _ => return None,
    };
    let mem = ins.op1_kind() == OpKind::Memory;
    macro_rules! pick {
        ($($d:literal, $s:literal);*) => {
            match (d, s) {
                $(($d, $s) => Some(if mem {
                    ext_m::<SIGN, $d, $s> as Handler
                } else {
                    ext_r::<SIGN, $d, $s> as Handler
                }),)*
                _ => None,
            }
        };
    }
    pick!(4, 1; 8, 1; 4, 2; 8, 2; 8, 4; 2, 1; 4, 4)
}

#[inline(always)]
fn extend<const SIGN: bool, const S: u8>(v: u64) -> u64 {
    if SIGN {
        sext(v, S)
    } else {
        v
    }
}

fn ext_r<const SIGN: bool, const D: u8, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let v = get::<S>(st, r1(ins));
    set::<D>(st, r0(ins), extend::<SIGN, S>(v));
    Ok(())
}

fn ext_m<const SIGN: bool, const D: u8, const S: u8>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    let lin = ea_x(x, ins);
    let v = x.read_n::<S>(lin)?;
    set::<D>(&mut x.cpu.state, r0(ins), extend::<SIGN, S>(v));
    Ok(())
}

fn lea_lookup(ins: &Instruction) -> Option<Handler> {
    match (shape(ins, 0), shape(ins, 1)) {
        (Shape::Reg(s), Shape::Mem) if ins.segment_prefix() == Register::None => {
            by_size!(s, lea, [])
        }
        _ => None,
    }
}

fn lea<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let st = &mut x.cpu.state;
    let off = ea(st, ins);
    set::<S>(st, r0(ins), off);
    Ok(())
}

// ----- control transfer and stack -----

fn jcc_lookup(ins: &Instruction) -> Option<Handler> {
    if !matches!(ins.op0_kind(), OpKind::NearBranch64) || !is_canonical(ins.near_branch64()) {
        return None;
    }
    if !matches!(
        ins.mnemonic(),
        Mnemonic::Jo
            | Mnemonic::Jno
            | Mnemonic::Jb
            | Mnemonic::Jae
            | Mnemonic::Je
            | Mnemonic::Jne
            | Mnemonic::Jbe
            | Mnemonic::Ja
            | Mnemonic::Js
            | Mnemonic::Jns
            | Mnemonic::Jp
            | Mnemonic::Jnp
            | Mnemonic::Jl
            | Mnemonic::Jge
            | Mnemonic::Jle
            | Mnemonic::Jg
    ) {
        return None;
    }
    cond_lookup!(ins, jcc, [])
}

/// The condition code with number `n` (as fixed by iced's enum order).
#[inline(always)]
pub(crate) fn cc_from(n: u8) -> ConditionCode {
    use ConditionCode as C;
    const ALL: [ConditionCode; 17] = [
        C::None,
        C::o,
        C::no,
        C::b,
        C::ae,
        C::e,
        C::ne,
        C::be,
        C::a,
        C::s,
        C::ns,
        C::p,
        C::np,
        C::l,
        C::ge,
        C::le,
        C::g,
    ];
    ALL[n as usize]
}

/// Jcc rel with a canonical target (checked at decode time).
fn jcc<const CC: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    if flags::cond(x.cpu.state.rflags, cc_from(CC)) {
        x.cpu.state.rip = ins.near_branch64();
    }
    Ok(())
}

/// JMP rel with a canonical target.
fn jmp_rel(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    x.cpu.state.rip = ins.near_branch64();
    Ok(())
}

/// CALL rel32 with a canonical target: push the return address (RSP moves only if the store
/// succeeds), branch.
fn call_rel(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let new = x.cpu.state.gpr[reg::RSP].wrapping_sub(8);
    x.ss_operand = true; // stack access: non-canonical RSP faults #SS(0)
    x.write_n::<8>(new, x.cpu.state.rip)?;
    x.cpu.state.gpr[reg::RSP] = new;
    x.cpu.state.rip = ins.near_branch64();
    Ok(())
}

/// RET: the target is read and checked before RSP moves.
fn ret(x: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    let rsp = x.cpu.state.gpr[reg::RSP];
    x.ss_operand = true; // stack access: non-canonical RSP faults #SS(0)
    let target = x.read_n::<8>(rsp)?;
    if !is_canonical(target) {
        return Err(Fault::GP0.into());
    }
    x.cpu.state.gpr[reg::RSP] = rsp.wrapping_add(8);
    x.cpu.state.rip = target;
    Ok(())
}

/// PUSH r64 (PUSH RSP pushes the old value).
fn push_r64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let v = x.cpu.state.gpr[r0(ins)];
    let new = x.cpu.state.gpr[reg::RSP].wrapping_sub(8);
    x.ss_operand = true; // stack access: non-canonical RSP faults #SS(0)
    x.write_n::<8>(new, v)?;
    x.cpu.state.gpr[reg::RSP] = new;
    Ok(())
}

/// POP r64: RSP moves, then the register is written (POP RSP loads the popped value).
fn pop_r64(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let rsp = x.cpu.state.gpr[reg::RSP];
    x.ss_operand = true; // stack access: non-canonical RSP faults #SS(0)
    let v = x.read_n::<8>(rsp)?;
    x.cpu.state.gpr[reg::RSP] = rsp.wrapping_add(8);
    x.cpu.state.gpr[r0(ins)] = v;
    Ok(())
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
