//! Data movement: MOV and friends.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::check_no_lock;
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Mov => mov,
        Mnemonic::Nop => nop,
        _ => return None,
    })
}

fn mov(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 1)?;
    x.write_op(ins, 0, v)?;
    Ok(())
}

fn nop(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Ok(())
}
