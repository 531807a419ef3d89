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

/// Per iced register number: `0x80 | high << 6 | log2(size) << 4 | index` for a
/// general-purpose register, 0 for anything else.
static GPR_TABLE: [u8; 256] = gpr_table();

const fn gpr_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let (al, ax, eax, rax) = (
        Register::AL as usize,
        Register::AX as usize,
        Register::EAX as usize,
        Register::RAX as usize,
    );
    let mut i = 0;
    while i < 16 {
        t[ax + i] = 0x80 | (1 << 4) | i as u8;
        t[eax + i] = 0x80 | (2 << 4) | i as u8;
        t[rax + i] = 0x80 | (3 << 4) | i as u8;
        i += 1;
    }
    // AL, CL, DL, BL, AH, CH, DH, BH, SPL, BPL, SIL, DIL, R8L..R15L.
    let mut j = 0;
    while j < 20 {
        t[al + j] = 0x80
            | match j {
                0..=3 => j as u8,
                4..=7 => 0x40 | (j as u8 - 4),
                _ => j as u8 - 4,
            };
        j += 1;
    }
    t
}

/// Map an iced general-purpose register to its slot, width and high-byte flag.
#[inline(always)]
pub fn gpr_ref(r: Register) -> Option<GprRef> {
    let e = GPR_TABLE[r as usize];
    if e & 0x80 == 0 {
        return None;
    }
    Some(GprRef {
        index: (e & 15) as usize,
        size: 1 << ((e >> 4) & 3),
        high: e & 0x40 != 0,
    })
}

/// Slot in `gpr` of a general-purpose register (meaningless for anything else); a table lookup.
#[inline(always)]
pub fn gpr_index(r: Register) -> usize {
    (GPR_TABLE[r as usize] & 15) as usize
}

/// Slot in `gpr` of an address base/index register, or 16 for none, RIP/EIP or a non-GPR.
#[inline(always)]
pub fn addr_reg(r: Register) -> usize {
    ADDR_REG[r as usize] as usize
}

/// Width in bytes of a general-purpose register (0 for anything else); a table lookup.
#[inline(always)]
pub fn gpr_size(r: Register) -> u8 {
    let e = GPR_TABLE[r as usize];
    if e & 0x80 == 0 {
        0
    } else {
        1 << ((e >> 4) & 3)
    }
}

/// Per iced register number, for address computation: the GPR slot (the whole 64-bit register
/// is read; the sum is truncated to the address size afterwards) or 16 for none/RIP/EIP and
/// anything that is not a GPR.
static ADDR_REG: [u8; 256] = addr_reg_table();

/// Per iced register number: the address size a base or index register implies (8 for RIP and
/// 64-bit GPRs, 4 for EIP and 32-bit GPRs, 0 for none, 2 for anything else).
static ADDR_SIZE: [u8; 256] = addr_size_table();

const fn addr_reg_table() -> [u8; 256] {
    let mut t = [16u8; 256];
    let mut i = 0;
    while i < 16 {
        t[Register::AX as usize + i] = i as u8;
        t[Register::EAX as usize + i] = i as u8;
        t[Register::RAX as usize + i] = i as u8;
        i += 1;
    }
    t
}

const fn addr_size_table() -> [u8; 256] {
    let mut t = [2u8; 256];
    t[Register::None as usize] = 0;
    t[Register::RIP as usize] = 8;
    t[Register::EIP as usize] = 4;
    let mut i = 0;
    while i < 16 {
        t[Register::EAX as usize + i] = 4;
        t[Register::RAX as usize + i] = 8;
        i += 1;
    }
    t
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
#[inline(always)]
pub fn read_reg(st: &CpuState, r: Register) -> u64 {
    let e = GPR_TABLE[r as usize];
    if e & 0x80 == 0 {
        return 0;
    }
    let v = st.gpr[(e & 15) as usize];
    if e & 0x40 != 0 {
        (v >> 8) & 0xff
    } else {
        v & mask(1 << ((e >> 4) & 3))
    }
}

/// Write any general-purpose register by its iced name (no-op for non-GPRs; callers check).
#[inline(always)]
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
    #[inline(always)]
    pub fn effective_offset(&self, ins: &Instruction) -> u64 {
        self.effective_offset_plus(ins, 0)
    }

    /// Offset of the instruction's memory operand plus `extra` bytes, wrapped at the address
    /// size (the second part of an m16:32 far pointer, the base field of LGDT's operand...).
    #[inline(always)]
    pub fn effective_offset_plus(&self, ins: &Instruction, extra: u64) -> u64 {
        let st = &self.cpu.state;
        let base = ins.memory_base();
        let index = ins.memory_index();
        let mut ea = ins.memory_displacement64().wrapping_add(extra);
        let b = ADDR_REG[base as usize] as usize;
        if b < 16 {
            ea = ea.wrapping_add(st.gpr[b]);
        }
        let i = ADDR_REG[index as usize] as usize;
        if i < 16 {
            ea = ea.wrapping_add(st.gpr[i].wrapping_mul(ins.memory_index_scale() as u64));
        }
        let mut asz = ADDR_SIZE[base as usize];
        if asz == 0 {
            asz = ADDR_SIZE[index as usize];
            if asz == 0 {
                // Displacement-only (incl. moffs): iced gives the displacement sign-extended for
                // 64-bit addressing and zero-extended for 32-bit addressing, so only 16-bit
                // addressing needs a mask.
                asz = match ins.memory_displ_size() {
                    2 => 2,
                    _ if st.in_64bit_mode() => 8,
                    _ => 4,
                };
            }
        }
        match asz {
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

    /// Linear address of the instruction's memory operand plus `extra` bytes (offset wrapped at
    /// the address size, then the segment base applied).
    #[inline]
    pub fn effective_addr_plus(&mut self, ins: &Instruction, extra: u64) -> u64 {
        let off = self.effective_offset_plus(ins, extra);
        self.seg_linear(ins.memory_segment(), off)
    }

    /// Apply a segment's base to an offset. In 64-bit mode only FS and GS have a base.
    /// Also records whether the access is SS-relative: a non-canonical SS-relative address
    /// (RSP/RBP base, stack operations) faults #SS(0) instead of #GP(0).
    #[inline]
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

    /// Linear address of an access of `len` bytes at offset `off` in segment `seg`, with the
    /// legacy-mode segment checks: usable segment, type (no writes to code or read-only data,
    /// no reads of execute-only code) and limit (expand-up or expand-down with the B bit);
    /// #GP(0), or #SS(0) for SS. In 64-bit mode there are no checks (only FS/GS add a base):
    /// that test comes first and the checks are out of line, so 64-bit code pays nothing more
    /// than [`Ctx::seg_linear`].
    #[inline(always)]
    pub fn seg_linear_checked(
        &mut self,
        seg: Register,
        off: u64,
        len: u64,
        write: bool,
    ) -> Result<u64, Fault> {
        self.ss_operand = seg == Register::SS;
        let st = &self.cpu.state;
        if st.in_64bit_mode() {
            Ok(match seg {
                Register::FS => off.wrapping_add(st.seg[sreg::FS].base),
                Register::GS => off.wrapping_add(st.seg[sreg::GS].base),
                _ => off,
            })
        } else {
            legacy_linear(st, sreg_index(seg).unwrap_or(sreg::DS), off, len, write)
        }
    }

    /// Checked linear address of the instruction's memory operand for an access of `len`
    /// bytes (see [`Ctx::seg_linear_checked`]).
    #[inline(always)]
    pub fn mem_addr(&mut self, ins: &Instruction, len: u64, write: bool) -> Result<u64, Fault> {
        let off = self.effective_offset(ins);
        self.seg_linear_checked(ins.memory_segment(), off, len, write)
    }

    /// [`Ctx::mem_addr`] for the operand plus `extra` bytes (far pointers, LGDT operands).
    #[inline]
    pub fn mem_addr_plus(
        &mut self,
        ins: &Instruction,
        extra: u64,
        len: u64,
        write: bool,
    ) -> Result<u64, Fault> {
        let off = self.effective_offset_plus(ins, extra);
        self.seg_linear_checked(ins.memory_segment(), off, len, write)
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
                let a = self.mem_addr(ins, size as u64, false)?;
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
            let a = self.mem_addr(ins, size as u64, true)?;
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
                let a = self.mem_addr(ins, size as u64, true)?;
                self.write(a, size, val)
            }
            _ => Err(Fault::ud("unsupported destination operand kind")),
        }
    }
}

/// The legacy-mode (real, virtual-8086, protected, compatibility) checks of an access of
/// `len` bytes at offset `off` through segment register `i`, and its linear address.
/// Real and virtual-8086 mode check only the cached limit (normally 0xffff); protected and
/// compatibility mode also the usability and type.
#[inline(never)]
pub fn legacy_linear(
    st: &CpuState,
    i: usize,
    off: u64,
    len: u64,
    write: bool,
) -> Result<u64, Fault> {
    let s = &st.seg[i];
    let fault = if i == sreg::SS {
        Fault::StackFault(0)
    } else {
        Fault::GP0
    };
    let typ = s.attr & 0xf;
    let code = s.attr & 0x8 != 0;
    if !st.in_real_mode() && !st.in_v86_mode() {
        if s.attr & 0x80 == 0 {
            // Null/unusable segment.
            return Err(fault);
        }
        // Only code/data segments are ever loaded into the segment registers.
        let bad = if write {
            code || typ & 2 == 0
        } else {
            code && typ & 2 == 0
        };
        if bad {
            return Err(fault);
        }
    }
    let last = off.wrapping_add(len.max(1) - 1);
    let limit = s.limit as u64;
    let outside = if !code && typ & 4 != 0 {
        // Expand-down: valid offsets are limit+1 ..= 0xffff (B = 0) or 0xffff_ffff (B = 1).
        let upper = if s.default_big() { 0xffff_ffff } else { 0xffff };
        off <= limit || last > upper || last < off
    } else {
        last > limit || last < off
    };
    if outside {
        return Err(fault);
    }
    Ok(off.wrapping_add(s.base) & 0xffff_ffff)
}

/// Size in bytes of operand `n`.
#[inline(always)]
pub fn op_size(ins: &Instruction, n: u32) -> u8 {
    match ins.op_kind(n) {
        OpKind::Register => {
            let r = ins.op_register(n);
            match gpr_size(r) {
                0 => r.size() as u8,
                s => s,
            }
        }
        OpKind::Memory => ins.memory_size().size() as u8,
        OpKind::Immediate8 | OpKind::Immediate8_2nd => 1,
        OpKind::Immediate16 | OpKind::Immediate8to16 => 2,
        OpKind::Immediate32 | OpKind::Immediate8to32 => 4,
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The register tables agree with iced's own register information for all 256 registers.
    #[test]
    fn register_tables_match_iced() {
        for r in Register::values() {
            let high = matches!(r, Register::AH | Register::CH | Register::DH | Register::BH);
            match gpr_ref(r) {
                Some(g) => {
                    assert!(r.is_gpr(), "{r:?}");
                    assert_eq!(g.size as usize, r.size(), "{r:?}");
                    assert_eq!(g.high, high, "{r:?}");
                    assert_eq!(g.index, r.full_register().number(), "{r:?}");
                    assert_eq!(gpr_size(r) as usize, r.size(), "{r:?}");
                }
                None => {
                    assert!(!r.is_gpr(), "{r:?}");
                    assert_eq!(gpr_size(r), 0, "{r:?}");
                }
            }
            let want_size = if r == Register::None {
                0
            } else if r == Register::RIP || r.is_gpr64() {
                8
            } else if r == Register::EIP || r.is_gpr32() {
                4
            } else {
                2
            };
            assert_eq!(ADDR_SIZE[r as usize], want_size, "{r:?}");
            let want_reg = if r.is_gpr16() || r.is_gpr32() || r.is_gpr64() {
                r.full_register().number() as u8
            } else {
                16
            };
            assert_eq!(ADDR_REG[r as usize], want_reg, "{r:?}");
        }
    }

    #[test]
    fn high_byte_registers_read_and_merge() {
        let mut st = CpuState::default();
        st.gpr[3] = 0x1122_3344_5566_7788;
        assert_eq!(read_reg(&st, Register::BH), 0x77);
        assert_eq!(read_reg(&st, Register::BL), 0x88);
        assert_eq!(read_reg(&st, Register::BX), 0x7788);
        write_reg(&mut st, Register::BH, 0xaa);
        assert_eq!(st.gpr[3], 0x1122_3344_5566_aa88);
        write_reg(&mut st, Register::EBX, 0x1_0000_0001);
        assert_eq!(st.gpr[3], 1);
        write_reg(&mut st, Register::R11W, 0xffff_1234);
        assert_eq!(st.gpr[11], 0x1234);
    }
}
