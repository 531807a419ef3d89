//! Segment and gate descriptors: decoding the 8- and 16-byte formats, and reading them from the GDT, LDT and IDT.
//!
//! This module only reads and decodes; the checks each instruction applies (MOV Sreg, far
//! transfers, interrupt delivery, LTR …) live with those instructions, because the fault they
//! raise for the same defect differs (#GP, #TS, #NP, #SS).

use crate::ctx::Ctx;
use crate::fault::Fault;
use crate::state::{ctl, Segment};

/// Descriptor type values for system descriptors (S = 0), as the `type` field encodes them.
pub mod sys_type {
    pub const TSS16_AVAIL: u8 = 1;
    pub const LDT: u8 = 2;
    pub const TSS16_BUSY: u8 = 3;
    pub const CALL_GATE16: u8 = 4;
    pub const TASK_GATE: u8 = 5;
    pub const INT_GATE16: u8 = 6;
    pub const TRAP_GATE16: u8 = 7;
    pub const TSS_AVAIL: u8 = 9;
    pub const TSS_BUSY: u8 = 11;
    pub const CALL_GATE: u8 = 12;
    pub const INT_GATE: u8 = 14;
    pub const TRAP_GATE: u8 = 15;
}

/// A raw descriptor. `lo` is the first 8 bytes; `hi` the second 8 bytes of a 16-byte system
/// descriptor or gate in long mode (zero otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    pub lo: u64,
    pub hi: u64,
}

impl Descriptor {
    /// Access byte (byte 5): type, S, DPL, P.
    #[inline]
    pub fn access(&self) -> u8 {
        (self.lo >> 40) as u8
    }
    /// The 4-bit type field.
    #[inline]
    pub fn typ(&self) -> u8 {
        self.access() & 0xf
    }
    /// S bit: code/data segment (true) or system descriptor/gate (false).
    #[inline]
    pub fn is_code_or_data(&self) -> bool {
        self.access() & 0x10 != 0
    }
    #[inline]
    pub fn dpl(&self) -> u8 {
        (self.access() >> 5) & 3
    }
    #[inline]
    pub fn present(&self) -> bool {
        self.access() & 0x80 != 0
    }
    /// Code segment (S = 1, type bit 3).
    #[inline]
    pub fn is_code(&self) -> bool {
        self.is_code_or_data() && self.typ() & 8 != 0
    }
    /// Data segment (S = 1, type bit 3 clear).
    #[inline]
    pub fn is_data(&self) -> bool {
        self.is_code_or_data() && self.typ() & 8 == 0
    }
    /// Conforming code segment.
    #[inline]
    pub fn is_conforming(&self) -> bool {
        self.is_code() && self.typ() & 4 != 0
    }
    /// Readable: data always, code when type bit 1 is set.
    #[inline]
    pub fn readable(&self) -> bool {
        self.is_data() || (self.is_code() && self.typ() & 2 != 0)
    }
    /// Writable data segment.
    #[inline]
    pub fn writable(&self) -> bool {
        self.is_data() && self.typ() & 2 != 0
    }
    /// Expand-down data segment.
    #[inline]
    pub fn expand_down(&self) -> bool {
        self.is_data() && self.typ() & 4 != 0
    }
    /// Accessed bit (type bit 0) of a code/data segment.
    #[inline]
    pub fn accessed(&self) -> bool {
        self.typ() & 1 != 0
    }
    /// L bit (64-bit code segment).
    #[inline]
    pub fn long(&self) -> bool {
        self.lo & (1 << 53) != 0
    }
    /// D/B bit.
    #[inline]
    pub fn default_big(&self) -> bool {
        self.lo & (1 << 54) != 0
    }
    /// G bit (limit in 4 KiB units).
    #[inline]
    pub fn granular(&self) -> bool {
        self.lo & (1 << 55) != 0
    }
    /// The 32-bit base of a segment descriptor.
    #[inline]
    pub fn base32(&self) -> u64 {
        ((self.lo >> 16) & 0xff_ffff) | (((self.lo >> 56) & 0xff) << 24)
    }
    /// Base of a 16-byte system descriptor (LDT/TSS in long mode): bits 63:32 from `hi`.
    #[inline]
    pub fn base64(&self) -> u64 {
        self.base32() | ((self.hi & 0xffff_ffff) << 32)
    }
    /// The limit as stored (20 bits).
    #[inline]
    pub fn raw_limit(&self) -> u32 {
        ((self.lo & 0xffff) | ((self.lo >> 32) & 0xf_0000)) as u32
    }
    /// The effective byte-granular limit (G scales by 4 KiB and fills the low 12 bits).
    #[inline]
    pub fn limit(&self) -> u32 {
        let l = self.raw_limit();
        if self.granular() {
            (l << 12) | 0xfff
        } else {
            l
        }
    }
    /// Attribute bits in the layout of [`Segment::attr`]: access byte in bits 7:0, the flag
    /// nibble (AVL, L, D/B, G) in bits 15:12.
    #[inline]
    pub fn attr(&self) -> u16 {
        self.access() as u16 | (((self.lo >> 52) & 0xf) as u16) << 12
    }
    /// The hidden-cache contents a segment register takes from this descriptor.
    pub fn to_segment(&self, selector: u16) -> Segment {
        Segment {
            selector,
            attr: self.attr(),
            limit: self.limit(),
            base: self.base32(),
        }
    }
    /// The same for a 16-byte system descriptor in long mode (LDTR, TR).
    pub fn to_system_segment(&self, selector: u16, long_mode: bool) -> Segment {
        Segment {
            selector,
            attr: self.attr(),
            limit: self.limit(),
            base: if long_mode {
                self.base64()
            } else {
                self.base32()
            },
        }
    }

    // ----- gates (call, interrupt, trap, task) -----

    /// Target code-segment selector of a gate (TSS selector of a task gate).
    #[inline]
    pub fn gate_selector(&self) -> u16 {
        (self.lo >> 16) as u16
    }
    /// Target offset of a gate: 16 bits for 286 gates, 32 for 386 gates, 64 in long mode.
    pub fn gate_offset(&self, long_mode: bool) -> u64 {
        let low = self.lo & 0xffff;
        let mid = (self.lo >> 48) & 0xffff;
        if long_mode {
            low | (mid << 16) | ((self.hi & 0xffff_ffff) << 32)
        } else if matches!(
            self.typ(),
            sys_type::CALL_GATE16 | sys_type::INT_GATE16 | sys_type::TRAP_GATE16
        ) {
            low
        } else {
            low | (mid << 16)
        }
    }
    /// Interrupt-stack-table index of a long-mode interrupt/trap gate (0 = none).
    #[inline]
    pub fn gate_ist(&self) -> u8 {
        ((self.lo >> 32) & 7) as u8
    }
    /// Parameter count of a legacy call gate.
    #[inline]
    pub fn gate_param_count(&self) -> u8 {
        ((self.lo >> 32) & 0x1f) as u8
    }
    /// Type field of the upper half of a 16-byte descriptor: must be 0 in long mode.
    #[inline]
    pub fn upper_type_is_zero(&self) -> bool {
        (self.hi >> 40) & 0x1f == 0
    }
}

/// A selector's index-and-table part as error codes carry it (RPL cleared).
#[inline]
pub fn sel_error(selector: u16) -> u16 {
    selector & 0xfffc
}

/// True for a null selector (index 0 in the GDT, any RPL).
#[inline]
pub fn is_null(selector: u16) -> bool {
    selector & 0xfffc == 0
}

/// Linear address of the `size`-byte descriptor `selector` names, or `None` when it lies
/// beyond its table's limit (or names the LDT while LDTR is null/unusable). Callers raise
/// their own fault (#GP, #TS or #NP with [`sel_error`]).
pub fn descriptor_addr(ctx: &Ctx, selector: u16, size: u64) -> Option<u64> {
    let st = &ctx.cpu.state;
    let index = (selector & 0xfff8) as u64;
    let (base, limit) = if selector & 4 != 0 {
        // LDT: unusable while LDTR holds a null selector.
        if is_null(st.ldtr.selector) || st.ldtr.attr & 0x80 == 0 {
            return None;
        }
        (st.ldtr.base, st.ldtr.limit as u64)
    } else {
        (st.gdtr.base, st.gdtr.limit as u64)
    };
    if index + size - 1 > limit {
        return None;
    }
    Some(mask_linear(ctx, base.wrapping_add(index)))
}

/// Outside long mode, linear addresses are 32 bits.
#[inline]
fn mask_linear(ctx: &Ctx, lin: u64) -> u64 {
    if ctx.cpu.state.efer & ctl::EFER_LMA != 0 {
        lin
    } else {
        lin & 0xffff_ffff
    }
}

/// Read the 8-byte descriptor at a linear address (an implicit supervisor access).
pub fn read_at(ctx: &mut Ctx, lin: u64) -> Result<Descriptor, Fault> {
    let mut b = [0u8; 8];
    ctx.read_bytes_supervisor(lin, &mut b)?;
    Ok(Descriptor {
        lo: u64::from_le_bytes(b),
        hi: 0,
    })
}

/// Read a 16-byte descriptor (long-mode system descriptor or gate) at a linear address.
pub fn read16_at(ctx: &mut Ctx, lin: u64) -> Result<Descriptor, Fault> {
    let mut b = [0u8; 16];
    ctx.read_bytes_supervisor(lin, &mut b)?;
    let v = u128::from_le_bytes(b);
    Ok(Descriptor {
        lo: v as u64,
        hi: (v >> 64) as u64,
    })
}

/// Read the code/data descriptor `selector` names. `Ok(None)` when it is beyond the table
/// limit (the caller raises #GP/#TS(selector)); `Err` for a page fault while reading it.
pub fn read_segment_descriptor(ctx: &mut Ctx, selector: u16) -> Result<Option<Descriptor>, Fault> {
    match descriptor_addr(ctx, selector, 8) {
        Some(lin) => read_at(ctx, lin).map(Some),
        None => Ok(None),
    }
}

/// Read a system descriptor (LDT, TSS, call gate): 16 bytes in long mode, 8 otherwise.
/// `Ok(None)` when beyond the table limit.
pub fn read_system_descriptor(ctx: &mut Ctx, selector: u16) -> Result<Option<Descriptor>, Fault> {
    if ctx.cpu.state.efer & ctl::EFER_LMA != 0 {
        match descriptor_addr(ctx, selector, 16) {
            Some(lin) => read16_at(ctx, lin).map(Some),
            None => Ok(None),
        }
    } else {
        read_segment_descriptor(ctx, selector)
    }
}

/// Read the IDT gate for `vector`: 16 bytes in long mode, 8 in protected mode. `Ok(None)` when
/// the entry lies beyond IDTR.limit (the caller raises #GP(vector * 8 + 2 | EXT)).
pub fn read_idt_gate(ctx: &mut Ctx, vector: u8) -> Result<Option<Descriptor>, Fault> {
    let long = ctx.cpu.state.efer & ctl::EFER_LMA != 0;
    let size: u64 = if long { 16 } else { 8 };
    let off = vector as u64 * size;
    let idtr = ctx.cpu.state.idtr;
    if off + size - 1 > idtr.limit as u64 {
        return Ok(None);
    }
    let lin = mask_linear(ctx, idtr.base.wrapping_add(off));
    if long {
        read16_at(ctx, lin).map(Some)
    } else {
        read_at(ctx, lin).map(Some)
    }
}

/// Set the accessed bit of the code/data descriptor `selector` names, if it is clear (the
/// processor writes byte 5 back when it loads a segment register).
pub fn set_accessed(ctx: &mut Ctx, selector: u16, d: &Descriptor) -> Result<(), Fault> {
    if d.accessed() {
        return Ok(());
    }
    if let Some(lin) = descriptor_addr(ctx, selector, 8) {
        ctx.write_bytes_supervisor(lin.wrapping_add(5), &[d.access() | 1])?;
    }
    Ok(())
}

/// Set the busy bit of the TSS descriptor `selector` names (LTR, task switches).
pub fn set_tss_busy(ctx: &mut Ctx, selector: u16, d: &Descriptor) -> Result<(), Fault> {
    if let Some(lin) = descriptor_addr(ctx, selector, 8) {
        ctx.write_bytes_supervisor(lin.wrapping_add(5), &[d.access() | 2])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flat 64-bit kernel code: base 0, limit 0xfffff (G), access 0x9b, flags L|G.
    const KCODE64: u64 = 0x00af_9b00_0000_ffff;
    /// Flat 32-bit data: base 0, limit 4 GiB, access 0x93, flags D|G.
    const KDATA32: u64 = 0x00cf_9300_0000_ffff;

    #[test]
    fn decodes_flat_segments() {
        let c = Descriptor { lo: KCODE64, hi: 0 };
        assert!(c.is_code() && c.long() && !c.default_big() && c.present());
        assert_eq!(c.dpl(), 0);
        assert_eq!(c.limit(), 0xffff_ffff);
        assert_eq!(c.base32(), 0);
        assert_eq!(c.attr(), 0xa09b);
        let d = Descriptor { lo: KDATA32, hi: 0 };
        assert!(d.is_data() && d.writable() && d.default_big() && !d.expand_down());
        assert_eq!(d.attr(), 0xc093);
    }

    #[test]
    fn decodes_base_and_limit_bytes() {
        // base 0x12345678, limit 0x5_4321 (byte granular), access 0x92.
        let lo =
            0x4321u64 | (0x5678 << 16) | (0x34 << 32) | (0x92 << 40) | (0x5 << 48) | (0x12 << 56);
        let d = Descriptor { lo, hi: 0 };
        assert_eq!(d.base32(), 0x1234_5678);
        assert_eq!(d.limit(), 0x5_4321);
        let s = Descriptor {
            lo,
            hi: 0xdead_beef,
        };
        assert_eq!(s.base64(), 0xdead_beef_1234_5678);
    }

    #[test]
    fn decodes_gates() {
        // 64-bit interrupt gate: offset 0xffff_ffff_8123_4567, selector 0x10, IST 3, DPL 0, P.
        let lo = 0x4567u64 | (0x10 << 16) | (3 << 32) | (0x8e << 40) | (0x8123 << 48);
        let g = Descriptor {
            lo,
            hi: 0xffff_ffff,
        };
        assert_eq!(g.typ(), sys_type::INT_GATE);
        assert_eq!(g.gate_selector(), 0x10);
        assert_eq!(g.gate_ist(), 3);
        assert_eq!(g.gate_offset(true), 0xffff_ffff_8123_4567);
        assert_eq!(g.gate_offset(false), 0x8123_4567);
        // A 286 interrupt gate keeps only 16 bits of offset.
        let g16 = Descriptor {
            lo: (lo & !(0xf << 40)) | ((sys_type::INT_GATE16 as u64) << 40),
            hi: 0,
        };
        assert_eq!(g16.gate_offset(false), 0x4567);
    }
}
