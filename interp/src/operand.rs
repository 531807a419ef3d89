//! Operand access for decoded instructions: registers (all widths, AH..BH), effective addresses,
//! memory and immediate operands. Semantic functions never see iced types; handlers use these.

use crate::ctx::Ctx;
use crate::fault::Fault;
use crate::state::{sreg, CpuState};
use iced_x86::{Instruction, OpKind, Register};

/// Mask of the low `size` bytes.
#[inline(always)]
pub const fn mask(size: u8) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size as u32 * 8)) - 1
    }
}

/// Sign bit of a `size`-byte value.
#[inline(always)]
pub const fn sign_bit(size: u8) -> u64 {
    1u64 << (size as u32 * 8 - 1)
}

/// Sign-extend the low `size` bytes of `v` to 64 bits.
#[inline(always)]
pub const fn sext(v: u64, size: u8) -> u64 {
    let sh = 64 - size as u32 * 8;
    (((v << sh) as i64) >> sh) as u64
}

/// Where a general-purpose register operand lives.
#[derive(Clone, Copy, Debug)]
pub struct GprRef {
    /// Index into `gpr`.
    pub index: usize,
    /// Width in bytes.
    pub size: u8,
    /// AH/CH/DH/BH: bits 8..15 of the register.
    pub high: bool,
}

/// Map an iced general-purpose register to its slot, width and high-byte flag.
#[inline]
pub fn gpr_ref(r: Register) -> Option<GprRef> {
    let n = r as u32;
    let al = Register::AL as u32;
    let ax = Register::AX as u32;
    let eax = Register::EAX as u32;
    let rax = Register::RAX as u32;
    if (al..al + 20).contains(&n) {
        let i = n - al;
        return Some(match i {
            0..=3 => GprRef {
                index: i as usize,
                size: 1,
                high: false,
            },
            4..=7 => GprRef {
                index: (i - 4) as usize,
                size: 1,
                high: true,
            },
            _ => GprRef {
                index: (i - 4) as usize,
                size: 1,
                high: false,
            },
        });
    }
    if (ax..ax + 16).contains(&n) {
        return Some(GprRef {
            index: (n - ax) as usize,
            size: 2,
            high: false,
        });
    }
    if (eax..eax + 16).contains(&n) {
        return Some(GprRef {
            index: (n - eax) as usize,
            size: 4,
            high: false,
        });
    }
    if (rax..rax + 16).contains(&n) {
        return Some(GprRef {
            index: (n - rax) as usize,
            size: 8,
            high: false,
        });
    }
    None
}

#[inline]
pub fn read_gpr(st: &CpuState, g: GprRef) -> u64 {
    let v = st.gpr[g.index];
    if g.high {
        (v >> 8) & 0xff
    } else {
        v & mask(g.size)
    }
}

/// Write a register with x86 rules: 32-bit writes zero the upper half, 8/16-bit writes merge.
#[inline]
pub fn write_gpr(st: &mut CpuState, g: GprRef, val: u64) {
    let r = &mut st.gpr[g.index];
    *r = match (g.size, g.high) {
        (1, true) => (*r & !0xff00) | ((val & 0xff) << 8),
        (1, false) => (*r & !0xff) | (val & 0xff),
        (2, _) => (*r & !0xffff) | (val & 0xffff),
        (4, _) => val & 0xffff_ffff,
        _ => val,
    };
}

/// Read any general-purpose register by its iced name.
#[inline]
pub fn read_reg(st: &CpuState, r: Register) -> u64 {
    match gpr_ref(r) {
        Some(g) => read_gpr(st, g),
        None => 0,
    }
}

/// Write any general-purpose register by its iced name (no-op for non-GPRs; callers check).
#[inline]
pub fn write_reg(st: &mut CpuState, r: Register, val: u64) {
    if let Some(g) = gpr_ref(r) {
        write_gpr(st, g, val)
    }
}

/// Index of a segment register in [`CpuState::seg`].
#[inline]
pub fn sreg_index(r: Register) -> Option<usize> {
    Some(match r {
        Register::ES => sreg::ES,
        Register::CS => sreg::CS,
        Register::SS => sreg::SS,
        Register::DS => sreg::DS,
        Register::FS => sreg::FS,
        Register::GS => sreg::GS,
        _ => return None,
    })
}

impl Ctx<'_> {
    /// Offset (effective address before segmentation) of the instruction's memory operand.
    #[inline]
    pub fn effective_offset(&self, ins: &Instruction) -> u64 {
        let st = &self.cpu.state;
        let base = ins.memory_base();
        let mut ea = ins.memory_displacement64();
        if base != Register::None && base != Register::RIP && base != Register::EIP {
            ea = ea.wrapping_add(read_reg(st, base));
        }
        let index = ins.memory_index();
        if index != Register::None {
            ea = ea.wrapping_add(read_reg(st, index).wrapping_mul(ins.memory_index_scale() as u64));
        }
        match addr_size_fast(ins, st) {
            8 => ea,
            4 => ea & 0xffff_ffff,
            _ => ea & 0xffff,
        }
    }

    /// Linear address of the instruction's memory operand (segment base applied).
    #[inline]
    pub fn effective_addr(&mut self, ins: &Instruction) -> u64 {
        let seg = ins.memory_segment();
        let off = self.effective_offset(ins);
        self.seg_linear(seg, off)
    }

    /// Apply a segment's base to an offset. In 64-bit mode only FS and GS have a base.
    #[inline]
    /// Also records whether the access is SS-relative: a non-canonical SS-relative address
    /// (RSP/RBP base, stack operations) faults #SS(0) instead of #GP(0).
    pub fn seg_linear(&mut self, seg: Register, off: u64) -> u64 {
        self.ss_operand = seg == Register::SS;
        let st = &self.cpu.state;
        if st.in_64bit_mode() {
            match seg {
                Register::FS => off.wrapping_add(st.seg[sreg::FS].base),
                Register::GS => off.wrapping_add(st.seg[sreg::GS].base),
                _ => off,
            }
        } else {
            let i = sreg_index(seg).unwrap_or(sreg::DS);
            off.wrapping_add(st.seg[i].base) & 0xffff_ffff
        }
    }

    /// Size in bytes of operand `n`.
    #[inline]
    pub fn op_size(&self, ins: &Instruction, n: u32) -> u8 {
        op_size(ins, n)
    }

    /// Read operand `n` (register, memory or immediate), zero-extended to 64 bits.
    #[inline]
    pub fn read_op(&mut self, ins: &Instruction, n: u32) -> Result<u64, Fault> {
        match ins.op_kind(n) {
            OpKind::Register => Ok(read_reg(&self.cpu.state, ins.op_register(n))),
            OpKind::Memory => {
                let size = ins.memory_size().size() as u8;
                let a = self.effective_addr(ins);
                self.read(a, size)
            }
            OpKind::Immediate8 => Ok(ins.immediate8() as u64),
            OpKind::Immediate16 => Ok(ins.immediate16() as u64),
            OpKind::Immediate32 => Ok(ins.immediate32() as u64),
            OpKind::Immediate64 => Ok(ins.immediate64()),
            OpKind::Immediate8to16 => Ok(ins.immediate8to16() as u16 as u64),
            OpKind::Immediate8to32 => Ok(ins.immediate8to32() as u32 as u64),
            OpKind::Immediate8to64 => Ok(ins.immediate8to64() as u64),
            OpKind::Immediate32to64 => Ok(ins.immediate32to64() as u64),
            OpKind::Immediate8_2nd => Ok(ins.immediate8_2nd() as u64),
            _ => Err(Fault::ud("unsupported operand kind")),
        }
    }

    /// Read operand `n` for a read-modify-write: a memory operand is checked for writability first.
    #[inline]
    pub fn read_op_rmw(&mut self, ins: &Instruction, n: u32) -> Result<u64, Fault> {
        if ins.op_kind(n) == OpKind::Memory {
            let size = ins.memory_size().size() as u8;
            let a = self.effective_addr(ins);
            self.read_rmw(a, size)
        } else {
            self.read_op(ins, n)
        }
    }

    /// Write operand `n` (register or memory) with the register-width rules.
    #[inline]
    pub fn write_op(&mut self, ins: &Instruction, n: u32, val: u64) -> Result<(), Fault> {
        match ins.op_kind(n) {
            OpKind::Register => {
                write_reg(&mut self.cpu.state, ins.op_register(n), val);
                Ok(())
            }
            OpKind::Memory => {
                let size = ins.memory_size().size() as u8;
                let a = self.effective_addr(ins);
                self.write(a, size, val)
            }
            _ => Err(Fault::ud("unsupported destination operand kind")),
        }
    }
}

/// Address size taking the CPU mode into account (67h prefix handled by iced's register choice).
#[inline]
fn addr_size_fast(ins: &Instruction, st: &CpuState) -> u8 {
    let b = ins.memory_base();
    if b == Register::RIP || (b as u32 >= Register::RAX as u32 && b as u32 <= Register::R15 as u32)
    {
        return 8;
    }
    if b == Register::EIP || (b as u32 >= Register::EAX as u32 && b as u32 <= Register::R15D as u32)
    {
        return 4;
    }
    if b != Register::None {
        return 2;
    }
    let i = ins.memory_index();
    if i != Register::None {
        return i.size() as u8;
    }
    // Displacement-only (incl. moffs): iced gives the displacement sign-extended for 64-bit
    // addressing and zero-extended for 32-bit addressing, so only 16-bit addressing needs a mask.
    match ins.memory_displ_size() {
        2 => 2,
        _ if st.in_64bit_mode() => 8,
        _ => 4,
    }
}

/// Size in bytes of operand `n`.
#[inline]
pub fn op_size(ins: &Instruction, n: u32) -> u8 {
    match ins.op_kind(n) {
        OpKind::Register => ins.op_register(n).size() as u8,
        OpKind::Memory => ins.memory_size().size() as u8,
        OpKind::Immediate8 | OpKind::Immediate8_2nd => 1,
        OpKind::Immediate16 | OpKind::Immediate8to16 => 2,
        OpKind::Immediate32 | OpKind::Immediate8to32 => 4,
        _ => 8,
    }
}
