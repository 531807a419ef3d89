//! AVX2 gathers (placeholder).
use crate::decode::Handler;
use iced_x86::Instruction;
pub fn lookup(_ins: &Instruction) -> Option<Handler> {
    None
}
