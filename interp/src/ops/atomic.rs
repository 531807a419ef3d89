//! Exchange family: XCHG, CMPXCHG, CMPXCHG8B/CMPXCHG16B and XADD (the instructions that are
//! atomic with LOCK, or implicitly for XCHG with memory). One vCPU runs at a time, so a locked
//! operation is just the operation; memory operands are read for write first (`read_op_rmw`).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags;
use crate::operand::{mask, op_size, write_gpr, GprRef};
use crate::ops::check_lock_mem_dest;
use crate::state::flags::{STATUS, ZF};
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Xchg => xchg,
        Mnemonic::Cmpxchg => cmpxchg,
        Mnemonic::Cmpxchg8b => cmpxchg8b,
        Mnemonic::Cmpxchg16b => cmpxchg16b,
        Mnemonic::Xadd => xadd,
        _ => return None,
    })
}

/// XCHG r/m, r and XCHG r, rAX (90 without REX.B is NOP and never gets here). Both writes
/// follow the register rules, so `xchg eax, eax` (87 C0) zero-extends RAX.
fn xchg(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    let a = x.read_op_rmw(ins, 0)?;
    let b = x.read_op(ins, 1)?;
    x.write_op(ins, 0, b)?;
    x.write_op(ins, 1, a)?;
    Ok(())
}

/// Outcome of CMPXCHG on values: the status flags (those of CMP acc, dest) and whether the
/// exchange happened.
pub fn cmpxchg_flags(acc: u64, dest: u64, size: u8) -> (bool, u64) {
    let (_, f) = flags::sub(acc, dest, 0, size);
    (acc & mask(size) == dest & mask(size), f)
}

/// CMPXCHG r/m, r. On success the destination gets the source; on failure the accumulator gets
/// the destination and a memory destination is written back with its old value. Measured on
/// the host for 32-bit register forms: success writes (zero-extends) the destination and
/// leaves RAX untouched; failure writes (zero-extends) RAX and leaves the destination register
/// untouched, bits 32..63 included.
fn cmpxchg(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    let size = op_size(ins, 0);
    let dest = x.read_op_rmw(ins, 0)?;
    let src = x.read_op(ins, 1)?;
    let acc_reg = accumulator(size);
    let acc = x.cpu.state.gpr[reg::RAX] & mask(size);
    let (equal, f) = cmpxchg_flags(acc, dest, size);
    if equal {
        x.write_op(ins, 0, src)?;
    } else {
        if ins.op0_kind() == OpKind::Memory {
            x.write_op(ins, 0, dest)?;
        }
        write_gpr(&mut x.cpu.state, acc_reg, dest);
    }
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

fn accumulator(size: u8) -> GprRef {
    GprRef {
        index: reg::RAX,
        size,
        high: false,
    }
}

/// CMPXCHG8B m64: EDX:EAX against m64; ZF only. On success m64 = ECX:EBX and RAX/RDX are not
/// written; on failure m64 is written back and EAX/EDX get its halves (zero-extended, as
/// measured on the host). The register form is an invalid encoding (iced decodes it as such).
fn cmpxchg8b(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    if ins.op0_kind() != OpKind::Memory {
        return Err(Fault::ud("CMPXCHG8B with a register operand").into());
    }
    let a = x.mem_addr(ins, 8, true)?;
    let old = x.read_rmw(a, 8)?;
    let st = &x.cpu.state;
    let expected = (st.gpr[reg::RDX] << 32) | (st.gpr[reg::RAX] & 0xffff_ffff);
    if old == expected {
        let new = (st.gpr[reg::RCX] << 32) | (st.gpr[reg::RBX] & 0xffff_ffff);
        x.write(a, 8, new)?;
        flags::set_status(&mut x.cpu.state, ZF, ZF);
    } else {
        x.write(a, 8, old)?;
        let st = &mut x.cpu.state;
        st.gpr[reg::RAX] = old & 0xffff_ffff;
        st.gpr[reg::RDX] = old >> 32;
        flags::set_status(st, ZF, 0);
    }
    Ok(())
}

/// CMPXCHG16B m128: RDX:RAX against m128; ZF only. The operand must be 16-byte aligned
/// (#GP(0) before any access); otherwise as CMPXCHG8B with 64-bit halves.
fn cmpxchg16b(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    if ins.op0_kind() != OpKind::Memory {
        return Err(Fault::ud("CMPXCHG16B with a register operand").into());
    }
    let a = x.mem_addr(ins, 16, true)?;
    if a & 15 != 0 {
        return Err(Fault::GP0.into());
    }
    x.probe_write(a, 16)?;
    let old = x.read_u128(a)?;
    let st = &x.cpu.state;
    let expected = ((st.gpr[reg::RDX] as u128) << 64) | st.gpr[reg::RAX] as u128;
    if old == expected {
        let new = ((st.gpr[reg::RCX] as u128) << 64) | st.gpr[reg::RBX] as u128;
        x.write_u128(a, new)?;
        flags::set_status(&mut x.cpu.state, ZF, ZF);
    } else {
        x.write_u128(a, old)?;
        let st = &mut x.cpu.state;
        st.gpr[reg::RAX] = old as u64;
        st.gpr[reg::RDX] = (old >> 64) as u64;
        flags::set_status(st, ZF, 0);
    }
    Ok(())
}

/// XADD r/m, r: TEMP = SRC + DEST; SRC = DEST; DEST = TEMP (so `xadd eax, eax` leaves the sum).
/// Flags are those of the addition.
fn xadd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    let size = op_size(ins, 0);
    let dest = x.read_op_rmw(ins, 0)?;
    let src = x.read_op(ins, 1)?;
    let (sum, f) = flags::add(dest, src, 0, size);
    if ins.op0_kind() == OpKind::Memory {
        x.write_op(ins, 0, sum)?;
        x.write_op(ins, 1, dest)?;
    } else {
        x.write_op(ins, 1, dest)?;
        x.write_op(ins, 0, sum)?;
    }
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

#[cfg(test)]
#[path = "atomic_tests.rs"]
mod tests;
