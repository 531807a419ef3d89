//! Architectural CPU state: plain data, `#[repr(C)]`, comparable, hashable into the state hash.

/// Index of each general-purpose register in [`CpuState::gpr`], in x86 encoding order.
pub mod reg {
    pub const RAX: usize = 0;
    pub const RCX: usize = 1;
    pub const RDX: usize = 2;
    pub const RBX: usize = 3;
    pub const RSP: usize = 4;
    pub const RBP: usize = 5;
    pub const RSI: usize = 6;
    pub const RDI: usize = 7;
    pub const R8: usize = 8;
    pub const R9: usize = 9;
    pub const R10: usize = 10;
    pub const R11: usize = 11;
    pub const R12: usize = 12;
    pub const R13: usize = 13;
    pub const R14: usize = 14;
    pub const R15: usize = 15;
}

/// RFLAGS bits.
pub mod flags {
    pub const CF: u64 = 1 << 0;
    pub const FIXED1: u64 = 1 << 1;
    pub const PF: u64 = 1 << 2;
    pub const AF: u64 = 1 << 4;
    pub const ZF: u64 = 1 << 6;
    pub const SF: u64 = 1 << 7;
    pub const TF: u64 = 1 << 8;
    pub const IF: u64 = 1 << 9;
    pub const DF: u64 = 1 << 10;
    pub const OF: u64 = 1 << 11;
    pub const IOPL: u64 = 3 << 12;
    pub const NT: u64 = 1 << 14;
    pub const RF: u64 = 1 << 16;
    pub const VM: u64 = 1 << 17;
    pub const AC: u64 = 1 << 18;
    pub const VIF: u64 = 1 << 19;
    pub const VIP: u64 = 1 << 20;
    pub const ID: u64 = 1 << 21;
    /// The six arithmetic status flags.
    pub const STATUS: u64 = CF | PF | AF | ZF | SF | OF;
}

/// Segment register indices in [`CpuState::seg`] (x86 encoding order).
pub mod sreg {
    pub const ES: usize = 0;
    pub const CS: usize = 1;
    pub const SS: usize = 2;
    pub const DS: usize = 3;
    pub const FS: usize = 4;
    pub const GS: usize = 5;
}

/// A segment register: the visible selector and the hidden descriptor cache.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Segment {
    pub selector: u16,
    /// Descriptor attribute bits as in the descriptor's bytes 5..6 (type, S, DPL, P, AVL, L, D/B, G).
    pub attr: u16,
    pub limit: u32,
    pub base: u64,
}

impl Segment {
    /// Long-mode (L) bit of a code segment.
    pub fn long(&self) -> bool {
        self.attr & (1 << 13) != 0
    }
    /// Default-size (D/B) bit.
    pub fn default_big(&self) -> bool {
        self.attr & (1 << 14) != 0
    }
    /// Descriptor privilege level.
    pub fn dpl(&self) -> u8 {
        ((self.attr >> 5) & 3) as u8
    }
}

/// A descriptor-table register (GDTR/IDTR).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TableReg {
    pub base: u64,
    pub limit: u16,
}

/// x87 FPU state: the register file as raw 80-bit values, control/status words (TOP is FSW
/// bits 13:11), the abridged tag word, and the last-instruction pointers as FXSAVE stores them
/// (FCS/FDS are always zero on the reference host). Semantics live in `ops::x87_*`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct X87State {
    /// ST registers in physical order, 80-bit little-endian in the low 10 bytes of each slot.
    pub regs: [[u8; 16]; 8],
    pub fcw: u16,
    pub fsw: u16,
    /// Abridged tag word as FXSAVE stores it (1 bit per register, 1 = valid).
    pub ftw: u8,
    pub fop: u16,
    pub fip: u64,
    pub fdp: u64,
}

impl Default for X87State {
    fn default() -> Self {
        X87State {
            regs: [[0; 16]; 8],
            fcw: 0x037f,
            fsw: 0,
            ftw: 0,
            fop: 0,
            fip: 0,
            fdp: 0,
        }
    }
}

/// MSRs added by the system-instruction work (ops/msr.rs; docs/system-cpu.md "MSRs").
/// EFER, STAR/LSTAR/CSTAR/SFMASK, KERNEL_GS_BASE, TSC_AUX and PAT stay top-level fields of
/// [`CpuState`]; FS_BASE/GS_BASE are the FS/GS segment bases.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MsrState {
    /// IA32_TSC write offset: TSC = retired instructions + `tsc_offset` (wrapping).
    pub tsc_offset: u64,
    /// IA32_TSC_DEADLINE (read by the LAPIC timer device).
    pub tsc_deadline: u64,
    /// IA32_APIC_BASE: base address, BSP (bit 8) and global enable (bit 11).
    pub apic_base: u64,
    /// IA32_MTRR_DEF_TYPE.
    pub mtrr_def_type: u64,
    /// IA32_MTRR_PHYSBASE0/PHYSMASK0 .. 7, interleaved as the MSR numbers are (0x200..0x20F).
    pub mtrr_var: [u64; 16],
    /// Fixed-range MTRRs in MSR order: 64K_00000, 16K_80000, 16K_A0000, 4K_C0000 .. 4K_F8000.
    pub mtrr_fixed: [u64; 11],
    /// IA32_MISC_ENABLE.
    pub misc_enable: u64,
    pub sysenter_cs: u64,
    pub sysenter_esp: u64,
    pub sysenter_eip: u64,
}

impl MsrState {
    /// Values after power-on/reset.
    pub fn power_on() -> Self {
        MsrState {
            tsc_offset: 0,
            tsc_deadline: 0,
            apic_base: msr_reset::APIC_BASE,
            mtrr_def_type: 0,
            mtrr_var: [0; 16],
            mtrr_fixed: [0; 11],
            misc_enable: msr_reset::MISC_ENABLE,
            sysenter_cs: 0,
            sysenter_esp: 0,
            sysenter_eip: 0,
        }
    }

    fn hash_into(&self, h: &mut StateHasher) {
        for v in [
            self.tsc_offset,
            self.tsc_deadline,
            self.apic_base,
            self.mtrr_def_type,
        ] {
            h.u64(v);
        }
        for v in self.mtrr_var.iter().chain(&self.mtrr_fixed) {
            h.u64(*v);
        }
        for v in [
            self.misc_enable,
            self.sysenter_cs,
            self.sysenter_esp,
            self.sysenter_eip,
        ] {
            h.u64(v);
        }
    }
}

/// Reset values of MSRs held in [`MsrState`].
pub mod msr_reset {
    /// 0xFEE00000, BSP (bit 8), xAPIC global enable (bit 11).
    pub const APIC_BASE: u64 = 0xfee0_0900;
    /// Fast strings (bit 0), BTS unavailable (bit 11), PEBS unavailable (bit 12).
    pub const MISC_ENABLE: u64 = (1 << 0) | (1 << 11) | (1 << 12);
}

/// The complete architectural state of one vCPU.
///
/// Everything the guest can observe lives here and nothing else does: caches (TLB, decoded
/// blocks) sit beside it in [`crate::Cpu`] and are never saved.
#[repr(C)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CpuState {
    pub gpr: [u64; 16],
    pub rip: u64,
    pub rflags: u64,
    pub seg: [Segment; 6],
    pub cr0: u64,
    pub cr2: u64,
    pub cr3: u64,
    pub cr4: u64,
    pub cr8: u64,
    pub efer: u64,
    pub gdtr: TableReg,
    pub idtr: TableReg,
    pub ldtr: Segment,
    pub tr: Segment,
    pub dr: [u64; 8],
    /// MSRs modelled by the CPU itself (the system issue widens this set).
    pub star: u64,
    pub lstar: u64,
    pub cstar: u64,
    pub sfmask: u64,
    pub kernel_gs_base: u64,
    pub tsc_aux: u64,
    pub pat: u64,
    /// The other modelled MSRs.
    pub msr: MsrState,
    /// YMM0..15 as four little-endian 64-bit lanes each (XMM is the low two).
    pub ymm: [[u64; 4]; 16],
    pub mxcsr: u32,
    pub xcr0: u64,
    pub x87: X87State,
    /// Interrupt shadow (after STI / MOV SS) still in force for the next instruction.
    pub interrupt_shadow: bool,
    /// The CPU executed HLT and waits for an interrupt.
    pub halted: bool,
}

/// CR0/CR4/EFER bits used by the interpreter.
pub mod ctl {
    pub const CR0_PE: u64 = 1 << 0;
    pub const CR0_NW: u64 = 1 << 29;
    pub const CR0_CD: u64 = 1 << 30;
    pub const CR0_MP: u64 = 1 << 1;
    pub const CR0_EM: u64 = 1 << 2;
    pub const CR0_TS: u64 = 1 << 3;
    pub const CR0_ET: u64 = 1 << 4;
    pub const CR0_NE: u64 = 1 << 5;
    pub const CR0_WP: u64 = 1 << 16;
    pub const CR0_AM: u64 = 1 << 18;
    pub const CR0_PG: u64 = 1 << 31;
    pub const CR4_VME: u64 = 1 << 0;
    pub const CR4_PVI: u64 = 1 << 1;
    pub const CR4_TSD: u64 = 1 << 2;
    pub const CR4_DE: u64 = 1 << 3;
    pub const CR4_PSE: u64 = 1 << 4;
    pub const CR4_PAE: u64 = 1 << 5;
    pub const CR4_MCE: u64 = 1 << 6;
    pub const CR4_PGE: u64 = 1 << 7;
    pub const CR4_PCE: u64 = 1 << 8;
    pub const CR4_OSFXSR: u64 = 1 << 9;
    pub const CR4_OSXMMEXCPT: u64 = 1 << 10;
    pub const CR4_UMIP: u64 = 1 << 11;
    pub const CR4_LA57: u64 = 1 << 12;
    pub const CR4_VMXE: u64 = 1 << 13;
    pub const CR4_SMXE: u64 = 1 << 14;
    pub const CR4_FSGSBASE: u64 = 1 << 16;
    pub const CR4_PCIDE: u64 = 1 << 17;
    pub const CR4_OSXSAVE: u64 = 1 << 18;
    pub const CR4_SMEP: u64 = 1 << 20;
    pub const CR4_SMAP: u64 = 1 << 21;
    pub const CR4_PKE: u64 = 1 << 22;
    pub const CR4_CET: u64 = 1 << 23;
    pub const EFER_SCE: u64 = 1 << 0;
    pub const EFER_LME: u64 = 1 << 8;
    pub const EFER_LMA: u64 = 1 << 10;
    pub const EFER_NXE: u64 = 1 << 11;
}

impl Default for CpuState {
    fn default() -> Self {
        Self::power_on()
    }
}

impl CpuState {
    /// The architectural power-on/reset state: real mode at the reset vector.
    pub fn power_on() -> Self {
        let data = Segment {
            selector: 0,
            attr: 0x0093,
            limit: 0xffff,
            base: 0,
        };
        let mut seg = [data; 6];
        seg[sreg::CS] = Segment {
            selector: 0xf000,
            attr: 0x009b,
            limit: 0xffff,
            base: 0xffff_0000,
        };
        CpuState {
            gpr: [0; 16],
            rip: 0xfff0,
            rflags: flags::FIXED1,
            seg,
            cr0: ctl::CR0_ET | 0x6000_0000,
            cr2: 0,
            cr3: 0,
            cr4: 0,
            cr8: 0,
            efer: 0,
            gdtr: TableReg {
                base: 0,
                limit: 0xffff,
            },
            idtr: TableReg {
                base: 0,
                limit: 0xffff,
            },
            ldtr: Segment {
                selector: 0,
                attr: 0x0082,
                limit: 0xffff,
                base: 0,
            },
            tr: Segment {
                selector: 0,
                attr: 0x008b,
                limit: 0xffff,
                base: 0,
            },
            dr: [0, 0, 0, 0, 0xffff0ff0, 0x400, 0xffff0ff0, 0x400],
            star: 0,
            lstar: 0,
            cstar: 0,
            sfmask: 0,
            kernel_gs_base: 0,
            tsc_aux: 0,
            pat: 0x0007_0406_0007_0406,
            msr: MsrState::power_on(),
            ymm: [[0; 4]; 16],
            mxcsr: 0x1f80,
            xcr0: 1,
            x87: X87State::default(),
            interrupt_shadow: false,
            halted: false,
        }
    }

    /// A flat 64-bit long-mode state at CPL `cpl` with paging on (`cr3` = PML4 physical address).
    /// Used by the user-mode harness and by tests.
    pub fn long_mode_flat(cr3: u64, cpl: u8) -> Self {
        let mut s = Self::power_on();
        let dpl = (cpl as u16) << 5;
        // Present, S=1, type: code execute/read accessed, L=1.
        let code = Segment {
            selector: 0x08 | cpl as u16 | if cpl == 3 { 0x20 } else { 0 },
            attr: 0xa09b | dpl,
            limit: 0xffff_ffff,
            base: 0,
        };
        let data = Segment {
            selector: 0x10 | cpl as u16 | if cpl == 3 { 0x20 } else { 0 },
            attr: 0xc093 | dpl,
            limit: 0xffff_ffff,
            base: 0,
        };
        s.seg = [data; 6];
        s.seg[sreg::CS] = code;
        s.cr0 = ctl::CR0_PE | ctl::CR0_MP | ctl::CR0_ET | ctl::CR0_NE | ctl::CR0_WP | ctl::CR0_PG;
        s.cr3 = cr3;
        s.cr4 = ctl::CR4_PAE
            | ctl::CR4_OSFXSR
            | ctl::CR4_OSXMMEXCPT
            | ctl::CR4_FSGSBASE
            | ctl::CR4_OSXSAVE;
        // x87, SSE and AVX state enabled, as Linux does on an AVX machine.
        s.xcr0 = 0b111;
        s.efer = ctl::EFER_SCE | ctl::EFER_LME | ctl::EFER_LMA | ctl::EFER_NXE;
        s.rflags = flags::FIXED1 | flags::IF;
        s.rip = 0;
        s
    }

    /// Current privilege level: 0 in real mode, 3 in virtual-8086 mode, else CS.RPL.
    ///
    /// Every CS load in protected/long mode (far transfers, gates, SYSCALL/SYSRET, interrupt
    /// delivery, IRET) sets CS.RPL to the new CPL (a conforming target keeps the caller's CPL
    /// and gets RPL = CPL), so CS.RPL is the CPL. The one gap: right after MOV CR0 sets PE,
    /// CS still holds its real-mode selector, whose low two bits become the CPL until the first
    /// far jump (boot code uses selectors with RPL 0 there, e.g. 0x0000, 0x07c0, 0xf000).
    /// See docs/system-cpu.md.
    #[inline]
    pub fn cpl(&self) -> u8 {
        if self.cr0 & ctl::CR0_PE == 0 {
            0
        } else if self.rflags & flags::VM != 0 && self.efer & ctl::EFER_LMA == 0 {
            3
        } else {
            (self.seg[sreg::CS].selector & 3) as u8
        }
    }

    /// RFLAGS.IOPL.
    #[inline]
    pub fn iopl(&self) -> u8 {
        ((self.rflags & flags::IOPL) >> 12) as u8
    }

    /// Real mode (CR0.PE clear).
    #[inline]
    pub fn in_real_mode(&self) -> bool {
        self.cr0 & ctl::CR0_PE == 0
    }

    /// Virtual-8086 mode (protected mode with RFLAGS.VM; impossible in long mode).
    #[inline]
    pub fn in_v86_mode(&self) -> bool {
        self.cr0 & ctl::CR0_PE != 0
            && self.rflags & flags::VM != 0
            && self.efer & ctl::EFER_LMA == 0
    }

    /// Long mode active (64-bit or compatibility mode).
    #[inline]
    pub fn in_long_mode(&self) -> bool {
        self.efer & ctl::EFER_LMA != 0
    }

    /// True in 64-bit mode (long mode active and CS.L set).
    #[inline]
    pub fn in_64bit_mode(&self) -> bool {
        self.efer & ctl::EFER_LMA != 0 && self.seg[sreg::CS].long()
    }

    /// Code size in bits for decoding: 16, 32 or 64.
    pub fn code_bitness(&self) -> u32 {
        if self.in_64bit_mode() {
            64
        } else if self.cr0 & ctl::CR0_PE != 0
            && self.rflags & flags::VM == 0
            && self.seg[sreg::CS].default_big()
        {
            32
        } else {
            16
        }
    }

    /// FNV-1a hash (64-bit) over every architectural field, in a fixed order and encoding.
    /// Identical on every host; used for the `--stats` state hash.
    pub fn hash_into(&self, h: &mut StateHasher) {
        for v in self.gpr {
            h.u64(v);
        }
        h.u64(self.rip);
        h.u64(self.rflags);
        for s in &self.seg {
            h.seg(s);
        }
        for v in [self.cr0, self.cr2, self.cr3, self.cr4, self.cr8, self.efer] {
            h.u64(v);
        }
        h.u64(self.gdtr.base);
        h.u64(self.gdtr.limit as u64);
        h.u64(self.idtr.base);
        h.u64(self.idtr.limit as u64);
        h.seg(&self.ldtr);
        h.seg(&self.tr);
        for v in self.dr {
            h.u64(v);
        }
        for v in [
            self.star,
            self.lstar,
            self.cstar,
            self.sfmask,
            self.kernel_gs_base,
            self.tsc_aux,
            self.pat,
        ] {
            h.u64(v);
        }
        self.msr.hash_into(h);
        for y in self.ymm {
            for v in y {
                h.u64(v);
            }
        }
        h.u64(self.mxcsr as u64);
        h.u64(self.xcr0);
        for r in self.x87.regs {
            h.bytes(&r[..10]);
        }
        h.u64(self.x87.fcw as u64);
        h.u64(self.x87.fsw as u64);
        h.u64(self.x87.ftw as u64);
        h.u64(self.interrupt_shadow as u64);
        h.u64(self.halted as u64);
    }
}

/// 64-bit FNV-1a: tiny, fixed, host-independent.
#[derive(Clone, Debug)]
pub struct StateHasher(u64);

impl Default for StateHasher {
    fn default() -> Self {
        StateHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl StateHasher {
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn seg(&mut self, s: &Segment) {
        self.u64(s.selector as u64);
        self.u64(s.attr as u64);
        self.u64(s.limit as u64);
        self.u64(s.base);
    }
    pub fn finish(&self) -> u64 {
        self.0
    }

    /// A block of bytes (a guest page) in one step: its [`block_digest`] fed as four `u64`s.
    /// Byte-at-a-time FNV-1a runs at one multiplication's latency per byte; on the `heap`
    /// benchmark, hashing its populated pages at the end of `lockstep user --stats` was ~3%
    /// of the run.
    pub fn block(&mut self, b: &[u8]) {
        for lane in block_digest(b) {
            self.u64(lane);
        }
    }
}

/// The digest of `b` that [`StateHasher::block`] feeds in: four lanes over its little-endian
/// 64-bit words (word `i` to lane `i % 4`), each step `x = (lane ^ word) * K`,
/// `lane = x ^ (x >> 32)` — a bijection of the lane for each word and injective in the word
/// for each lane, so a block that differs from another in one word always has another
/// digest. The lanes run side by side (no step waits for another lane). A tail shorter than
/// 32 bytes is padded with zeros, and the length goes into the last lane.
pub fn block_digest(b: &[u8]) -> [u64; 4] {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes: [u64; 4] = [
        0x243f_6a88_85a3_08d3,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    ];
    let mut step = |c: &[u8]| {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&c[i * 8..i * 8 + 8]);
            let x = (*lane ^ u64::from_le_bytes(w)).wrapping_mul(K);
            *lane = x ^ (x >> 32);
        }
    };
    let mut chunks = b.chunks_exact(32);
    for c in &mut chunks {
        step(c);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut last = [0u8; 32];
        last[..tail.len()].copy_from_slice(tail);
        step(&last);
    }
    lanes[3] ^= b.len() as u64;
    lanes
}

#[cfg(test)]
mod digest_tests {
    use super::block_digest;

    /// Every one-bit change of a page changes its digest, whatever word and bit; a tail of
    /// zeros is not the same as no tail (the length counts); the lanes are not all alike.
    #[test]
    fn one_bit_changes_the_digest() {
        let mut page = vec![0u8; 4096];
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 7 % 251) as u8;
        }
        let d = block_digest(&page);
        for byte in (0..4096).step_by(61).chain([0, 7, 8, 31, 32, 4095]) {
            for bit in 0..8 {
                page[byte] ^= 1 << bit;
                assert_ne!(block_digest(&page), d, "byte {byte} bit {bit}");
                page[byte] ^= 1 << bit;
            }
        }
        assert_eq!(block_digest(&page), d);
        assert_ne!(block_digest(&[1, 2, 3]), block_digest(&[1, 2, 3, 0]));
        assert_ne!(block_digest(&[]), block_digest(&[0]));
        let z = block_digest(&[0u8; 4096]);
        assert!(z[0] != z[1] && z[1] != z[2] && z[2] != z[3]);
    }
}
