//! muldiv instruction family (to be filled in).

use crate::decode::Handler;
use iced_x86::Instruction;

/// Handlers of this family.
pub fn lookup(_ins: &Instruction) -> Option<Handler> {
    None
}
