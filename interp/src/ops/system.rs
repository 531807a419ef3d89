//! System and miscellaneous instructions (to be filled in).

use crate::decode::Handler;
use iced_x86::Instruction;

/// Handlers of this family.
pub fn lookup(_ins: &Instruction) -> Option<Handler> {
    None
}

/// Instructions of this family that end a block.
pub fn ends_block(_ins: &Instruction) -> bool {
    false
}
