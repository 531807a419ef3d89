//! Control transfer: jumps, calls, returns, loops, traps.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Jmp => jmp,
        Mnemonic::Ud2 => ud2,
        Mnemonic::Syscall => syscall,
        _ => return None,
    })
}

fn jmp(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    crate::ops::check_no_lock(ins)?;
    let target = match ins.op0_kind() {
        iced_x86::OpKind::NearBranch64
        | iced_x86::OpKind::NearBranch32
        | iced_x86::OpKind::NearBranch16 => ins.near_branch_target(),
        _ => x.read_op(ins, 0)?,
    };
    x.cpu.state.rip = target;
    Ok(())
}

fn ud2(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("UD2").into())
}

fn syscall(x: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    if x.cpu.config.syscall_to_host {
        return Err(Trap::Syscall);
    }
    Err(Fault::ud("SYSCALL into a guest kernel is not implemented").into())
}
