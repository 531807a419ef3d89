//! Generated code as data: groups of instructions (one group per form), their encoding at
//! `CODE_ADDR` with branch and RIP-relative targets resolved to the end of their group, and
//! the register tables the generator uses.

use super::case::Case;
use super::layout::{CODE_ADDR, MAX_CODE};
use super::simd::SimdState;
use iced_x86::{Encoder, Instruction, Register};

/// One instruction of a group; branch and RIP-relative targets may point at the group's end.
#[derive(Clone, Debug)]
pub enum Item {
    Fixed(Instruction),
    /// A near branch whose target is the end of its group.
    BranchToEnd(Instruction),
    /// A RIP-relative memory operand (LEA) whose target is the end of its group.
    RipToEnd(Instruction),
}

impl Item {
    fn at(&self, target: u64) -> Instruction {
        match self {
            Item::Fixed(i) => *i,
            Item::BranchToEnd(i) => {
                let mut i = *i;
                i.set_near_branch64(target);
                i
            }
            Item::RipToEnd(i) => {
                let mut i = *i;
                i.set_memory_displacement64(target);
                i
            }
        }
    }
}

/// The instructions one form contributed to a case.
#[derive(Clone, Debug)]
pub struct Group {
    /// Index of the form in the table.
    pub form: usize,
    pub items: Vec<Item>,
}

/// A generated case before encoding (kept for minimisation: groups can be dropped).
#[derive(Clone, Debug)]
pub struct GenCase {
    pub groups: Vec<Group>,
    pub gpr: [u64; 16],
    pub flags: u64,
    pub mem_seed: u64,
    pub ignore_flags: u64,
    /// The initial SIMD/x87 state of a SIMD case.
    pub simd: Option<Box<SimdState>>,
    pub ignore_fsw: u16,
}

/// Where each group landed in the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub end: u64,
    pub form: usize,
}

impl GenCase {
    /// Encode at `CODE_ADDR` (groups in order, then INT3).
    pub fn to_case(&self) -> Result<(Case, Vec<Span>), String> {
        let (code, spans) = encode_groups(&self.groups)?;
        if code.len() > MAX_CODE {
            return Err(format!("code too long ({} bytes)", code.len()));
        }
        Ok((
            Case {
                code,
                gpr: self.gpr,
                flags: self.flags,
                mem_seed: self.mem_seed,
                ignore_flags: self.ignore_flags,
                simd: self.simd.clone(),
                ignore_fsw: self.ignore_fsw,
            },
            spans,
        ))
    }

    /// The same case with only the groups selected by `keep`.
    pub fn subset(&self, keep: &[usize]) -> GenCase {
        GenCase {
            groups: keep.iter().map(|&i| self.groups[i].clone()).collect(),
            ..self.clone()
        }
    }
}

/// Encode groups one after the other at `CODE_ADDR`, resolving group-end targets, and append INT3.
pub fn encode_groups(groups: &[Group]) -> Result<(Vec<u8>, Vec<Span>), String> {
    let mut enc = Encoder::new(64);
    let mut out = Vec::new();
    let mut spans = Vec::with_capacity(groups.len());
    let mut ip = CODE_ADDR;
    for g in groups {
        // Lengths do not depend on the target (fixed rel8/rel32/disp32 forms): measure first.
        let mut len = 0u64;
        for it in &g.items {
            let here = ip + len;
            len += enc.encode(&it.at(here), here).map_err(|e| e.to_string())? as u64;
            let _ = enc.take_buffer();
        }
        let start = ip;
        let end = ip + len;
        for it in &g.items {
            ip += enc.encode(&it.at(end), ip).map_err(|e| e.to_string())? as u64;
            out.extend_from_slice(&enc.take_buffer());
        }
        if ip != end {
            return Err("instruction length changed with its target".into());
        }
        spans.push(Span {
            start,
            end,
            form: g.form,
        });
    }
    out.push(0xcc);
    Ok((out, spans))
}

const GPR8: [Register; 16] = [
    Register::AL,
    Register::CL,
    Register::DL,
    Register::BL,
    Register::SPL,
    Register::BPL,
    Register::SIL,
    Register::DIL,
    Register::R8L,
    Register::R9L,
    Register::R10L,
    Register::R11L,
    Register::R12L,
    Register::R13L,
    Register::R14L,
    Register::R15L,
];
pub(super) const HIGH8: [Register; 4] = [Register::AH, Register::CH, Register::DH, Register::BH];

const GPR16: [Register; 16] = [
    Register::AX,
    Register::CX,
    Register::DX,
    Register::BX,
    Register::SP,
    Register::BP,
    Register::SI,
    Register::DI,
    Register::R8W,
    Register::R9W,
    Register::R10W,
    Register::R11W,
    Register::R12W,
    Register::R13W,
    Register::R14W,
    Register::R15W,
];
const GPR32: [Register; 16] = [
    Register::EAX,
    Register::ECX,
    Register::EDX,
    Register::EBX,
    Register::ESP,
    Register::EBP,
    Register::ESI,
    Register::EDI,
    Register::R8D,
    Register::R9D,
    Register::R10D,
    Register::R11D,
    Register::R12D,
    Register::R13D,
    Register::R14D,
    Register::R15D,
];
const GPR64: [Register; 16] = [
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RBX,
    Register::RSP,
    Register::RBP,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// The register `idx` (0..16) at `size` bytes (1 = the low byte, never AH..BH).
pub fn sized(idx: usize, size: u8) -> Register {
    match size {
        1 => GPR8[idx & 15],
        2 => GPR16[idx & 15],
        4 => GPR32[idx & 15],
        _ => GPR64[idx & 15],
    }
}
