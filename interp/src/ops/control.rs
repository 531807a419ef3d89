//! Control transfer: Jcc, near JMP/CALL/RET, LOOP/LOOPE/LOOPNE, JCXZ/JECXZ/JRCXZ and
//! UD0/UD1/UD2. INT n/INT3/INTO/INT1/IRET/HLT live in `ops::interrupt`, SYSCALL/SYSRET and
//! SYSENTER/SYSEXIT in `ops::sysenter`; far transfers belong to the segment family.
//!
//! Branch targets come from iced (`near_branch_target`), already wrapped to the operand size;
//! the default (Intel) decoder ignores 66h on near branches in 64-bit mode. A non-canonical
//! target raises #GP(0) at the branch itself (RIP stays at the branch, nothing changes).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags;
use crate::mmu::is_canonical;
use crate::operand::{mask, read_gpr, write_gpr, GprRef};
use crate::ops::check_no_lock;
use crate::state::flags::ZF;
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code as C;
    Some(match ins.code() {
        C::Jmp_rel8_16 | C::Jmp_rel8_32 | C::Jmp_rel8_64 => jmp_rel,
        C::Jmp_rel16 | C::Jmp_rel32_32 | C::Jmp_rel32_64 => jmp_rel,
        C::Jmp_rm16 | C::Jmp_rm32 | C::Jmp_rm64 => jmp_indirect,
        C::Call_rel16 | C::Call_rm16 => call::<2>,
        C::Call_rel32_32 | C::Call_rm32 => call::<4>,
        C::Call_rel32_64 | C::Call_rm64 => call::<8>,
        C::Retnw | C::Retnw_imm16 => ret::<2>,
        C::Retnd | C::Retnd_imm16 => ret::<4>,
        C::Retnq | C::Retnq_imm16 => ret::<8>,
        C::Loop_rel8_16_CX | C::Loop_rel8_32_CX => loop_::<2, LOOP>,
        C::Loop_rel8_16_ECX | C::Loop_rel8_32_ECX | C::Loop_rel8_64_ECX => loop_::<4, LOOP>,
        C::Loop_rel8_16_RCX | C::Loop_rel8_64_RCX => loop_::<8, LOOP>,
        C::Loope_rel8_16_CX | C::Loope_rel8_32_CX => loop_::<2, LOOPE>,
        C::Loope_rel8_16_ECX | C::Loope_rel8_32_ECX | C::Loope_rel8_64_ECX => loop_::<4, LOOPE>,
        C::Loope_rel8_16_RCX | C::Loope_rel8_64_RCX => loop_::<8, LOOPE>,
        C::Loopne_rel8_16_CX | C::Loopne_rel8_32_CX => loop_::<2, LOOPNE>,
        C::Loopne_rel8_16_ECX | C::Loopne_rel8_32_ECX | C::Loopne_rel8_64_ECX => loop_::<4, LOOPNE>,
        C::Loopne_rel8_16_RCX | C::Loopne_rel8_64_RCX => loop_::<8, LOOPNE>,
        C::Jcxz_rel8_16 | C::Jcxz_rel8_32 => jcxz::<2>,
        C::Jecxz_rel8_16 | C::Jecxz_rel8_32 | C::Jecxz_rel8_64 => jcxz::<4>,
        C::Jrcxz_rel8_16 | C::Jrcxz_rel8_64 => jcxz::<8>,
        _ => match ins.mnemonic() {
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
            | Mnemonic::Jg => jcc,
            Mnemonic::Ud0 => ud0,
            Mnemonic::Ud1 => ud1,
            Mnemonic::Ud2 => ud2,
            _ => return None,
        },
    })
}

/// Check a branch target: in 64-bit mode it must be canonical, elsewhere within the CS limit
/// (iced already truncated it to the operand size); else #GP(0) at the branch.
#[inline]
fn check_target(x: &Ctx, target: u64) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.in_64bit_mode() {
        if !is_canonical(target) {
            return Err(Fault::GP0);
        }
    } else if target > st.seg[crate::state::sreg::CS].limit as u64 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// Transfer control to `target` after checking it.
#[inline]
fn branch_to(x: &mut Ctx, target: u64) -> Result<(), Trap> {
    check_target(x, target)?;
    x.cpu.state.rip = target;
    Ok(())
}

fn jcc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if flags::cond(x.cpu.state.rflags, ins.condition_code()) {
        branch_to(x, ins.near_branch_target())?;
    }
    Ok(())
}

fn jmp_rel(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    branch_to(x, ins.near_branch_target())
}

/// JMP r/m: the target is read at the operand size (a 16-bit target is zero-extended).
fn jmp_indirect(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let target = x.read_op(ins, 0)?;
    branch_to(x, target)
}

/// Target of a near CALL/JMP: relative (from iced) or read from the r/m operand.
#[inline]
fn near_target(x: &mut Ctx, ins: &Instruction) -> Result<u64, Fault> {
    match ins.op0_kind() {
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
            Ok(ins.near_branch_target())
        }
        _ => x.read_op(ins, 0),
    }
}

/// Near CALL with an `S`-byte return address: read the target (an indirect call through memory
/// reads it before pushing), check it, push the return address, branch.
fn call<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let target = near_target(x, ins)?;
    check_target(x, target)?;
    let ret = x.cpu.state.rip & mask(S);
    x.push(ret, S)?;
    x.cpu.state.rip = target;
    Ok(())
}

/// Near RET (optionally releasing imm16 more bytes). The target is checked before RSP moves.
fn ret<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let extra = if ins.op_count() > 0 {
        ins.immediate16() as u64
    } else {
        0
    };
    let target = x.peek_stack(0, S)?;
    check_target(x, target)?;
    x.add_rsp(S as u64 + extra);
    x.cpu.state.rip = target;
    Ok(())
}

const LOOP: u8 = 0;
const LOOPE: u8 = 1;
const LOOPNE: u8 = 2;

/// LOOP/LOOPE/LOOPNE with a `C`-byte counter (CX/ECX/RCX by address size). The counter is
/// written at its width: with 67h in 64-bit mode ECX is written and RCX zero-extended (as
/// measured on the host). No flags change.
fn loop_<const C: u8, const K: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = GprRef {
        index: reg::RCX,
        size: C,
        high: false,
    };
    let count = read_gpr(&x.cpu.state, g).wrapping_sub(1) & mask(C);
    let zf = x.cpu.state.rflags & ZF != 0;
    let take = count != 0
        && match K {
            LOOPE => zf,
            LOOPNE => !zf,
            _ => true,
        };
    let target = ins.near_branch_target();
    if take {
        check_target(x, target)?;
    }
    write_gpr(&mut x.cpu.state, g, count);
    if take {
        x.cpu.state.rip = target;
    }
    Ok(())
}

/// JCXZ/JECXZ/JRCXZ: branch if the `C`-byte counter is zero.
fn jcxz<const C: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = GprRef {
        index: reg::RCX,
        size: C,
        high: false,
    };
    if read_gpr(&x.cpu.state, g) == 0 {
        branch_to(x, ins.near_branch_target())?;
    }
    Ok(())
}

fn ud0(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("UD0").into())
}

fn ud1(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("UD1").into())
}

fn ud2(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("UD2").into())
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
