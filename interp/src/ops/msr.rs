//! RDMSR/WRMSR for the documented MSR set (docs/system-cpu.md, "MSRs") and RDPMC (#GP: the
//! model has no performance counters).
//!
//! Both MSR instructions are CPL 0 only (#GP(0) otherwise, also in virtual-8086 mode). An MSR
//! outside the set, a write to a read-only MSR, a reserved bit set, a non-canonical address
//! where the SDM asks for one, or an invalid memory type raises #GP(0) before anything
//! changes. WRMSR ends its block: EFER changes paging and mode state, APIC_BASE/TSC/
//! TSC_DEADLINE writes are seen by devices (those set `yield_requested`).

use crate::cpuid::{self, bits};
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::{is_canonical, MAX_PHYS_BITS};
use crate::ops::check_no_lock;
use crate::state::{ctl, reg, sreg};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// MSR numbers of the modelled set.
pub mod num {
    pub const TSC: u32 = 0x10;
    pub const APIC_BASE: u32 = 0x1b;
    pub const FEATURE_CONTROL: u32 = 0x3a;
    pub const BIOS_SIGN_ID: u32 = 0x8b;
    pub const PLATFORM_INFO: u32 = 0xce;
    pub const MTRRCAP: u32 = 0xfe;
    pub const SYSENTER_CS: u32 = 0x174;
    pub const SYSENTER_ESP: u32 = 0x175;
    pub const SYSENTER_EIP: u32 = 0x176;
    pub const MCG_CAP: u32 = 0x179;
    pub const MCG_STATUS: u32 = 0x17a;
    pub const MISC_ENABLE: u32 = 0x1a0;
    /// IA32_MTRR_PHYSBASE0; PHYSMASKn = 0x201 + 2n, PHYSBASEn = 0x200 + 2n.
    pub const MTRR_PHYSBASE0: u32 = 0x200;
    pub const MTRR_FIX64K_00000: u32 = 0x250;
    pub const MTRR_FIX16K_80000: u32 = 0x258;
    pub const MTRR_FIX16K_A0000: u32 = 0x259;
    pub const MTRR_FIX4K_C0000: u32 = 0x268;
    pub const PAT: u32 = 0x277;
    pub const MTRR_DEF_TYPE: u32 = 0x2ff;
    pub const TSC_DEADLINE: u32 = 0x6e0;
    pub const EFER: u32 = 0xc000_0080;
    pub const STAR: u32 = 0xc000_0081;
    pub const LSTAR: u32 = 0xc000_0082;
    pub const CSTAR: u32 = 0xc000_0083;
    pub const SFMASK: u32 = 0xc000_0084;
    pub const FS_BASE: u32 = 0xc000_0100;
    pub const GS_BASE: u32 = 0xc000_0101;
    pub const KERNEL_GS_BASE: u32 = 0xc000_0102;
    pub const TSC_AUX: u32 = 0xc000_0103;
    pub const ARCH_CAPABILITIES: u32 = 0x10a;
}

/// IA32_MTRRCAP: 8 variable ranges, fixed ranges supported (bit 8), write-combining (bit 10),
/// no SMRR.
pub const MTRRCAP_VALUE: u64 = 8 | (1 << 8) | (1 << 10);
/// IA32_FEATURE_CONTROL: locked (bit 0), VMX disabled.
pub const FEATURE_CONTROL_VALUE: u64 = 1;
/// MSR_PLATFORM_INFO: maximum non-turbo ratio (15:8) and maximum efficiency ratio (47:40) of
/// 10 × 100 MHz bus = 1000 MHz, the TSC frequency (CPUID 0x15/0x16). No programmable ratio
/// or TDP limits, no CPUID faulting (bit 31).
pub const PLATFORM_INFO_VALUE: u64 = (10 << 8) | (10 << 40);
/// IA32_ARCH_CAPABILITIES (read-only; CPUID.7.0:EDX[29]): Lockstep executes nothing
/// speculatively, so it reports itself not affected by every weakness the MSR has a bit for:
/// RDCL_NO (0, Meltdown), SSB_NO (4), MDS_NO (5), PSCHANGE_MC_NO (6), TAA_NO (8), SBDR_SSDP_NO
/// (13), FBSDP_NO (14), PSDP_NO (15), BHI_NO (20), PBRSB_NO (24), GDS_NO (26), RFDS_NO (27)
/// and ITS_NO (62). No control bits (IBRS_ALL, TSX_CTRL, FB_CLEAR, …): their MSRs are not
/// modelled. A Linux guest then skips page-table isolation and the CPU-buffer clearing on
/// every return to user mode (Spectre v2 has no such bit; Linux still uses retpolines, as in
/// QEMU's default CPU model).
pub const ARCH_CAPABILITIES_VALUE: u64 = (1 << 0)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 8)
    | (1 << 13)
    | (1 << 14)
    | (1 << 15)
    | (1 << 20)
    | (1 << 24)
    | (1 << 26)
    | (1 << 27)
    | (1 << 62);
/// MISC_ENABLE bits a write may change: fast strings (0), automatic thermal control (3), xTPR
/// message disable (23). They are stored; none changes behaviour.
const MISC_ENABLE_WRITABLE: u64 = (1 << 0) | (1 << 3) | (1 << 23);
/// MISC_ENABLE bits that always read 1 (BTS and PEBS unavailable); writes to them are ignored.
const MISC_ENABLE_FIXED: u64 = (1 << 11) | (1 << 12);
/// IA32_APIC_BASE bits: BSP (read-only), x2APIC enable, global enable.
const APIC_BSP: u64 = 1 << 8;
const APIC_X2APIC_EN: u64 = 1 << 10;
const APIC_EN: u64 = 1 << 11;

/// Bits above the physical address width.
const PHYS_RESERVED: u64 = !((1u64 << MAX_PHYS_BITS) - 1);

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Rdmsr => rdmsr,
        Mnemonic::Wrmsr => wrmsr,
        Mnemonic::Rdpmc => rdpmc,
        _ => return None,
    })
}

/// WRMSR ends its block (EFER changes mode/paging state; some MSRs are device-visible).
pub fn ends_block(ins: &Instruction) -> bool {
    ins.mnemonic() == Mnemonic::Wrmsr
}

fn check_cpl0(x: &Ctx) -> Result<(), Fault> {
    if x.cpu.state.cpl() != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// Microcode revision reported in IA32_BIOS_SIGN_ID[63:32]: the last one Intel shipped for
/// the advertised Skylake signature (06-5e-03), so kernels apply no errata workarounds that
/// depend on old microcode (Linux disables the TSC-deadline timer below 0xb2).
pub const MICROCODE_REVISION: u64 = 0xf0;

/// RDMSR: EDX:EAX = MSR[ECX] (upper halves of RAX/RDX cleared).
fn rdmsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    let index = x.cpu.state.gpr[reg::RCX] as u32;
    let mut v = read_msr(x, index)?;
    if index == num::TSC_DEADLINE {
        // The local APIC clears the deadline when it fires: ask the device, which keeps it
        // in retired-instruction units (see `wrmsr`).
        x.bus.set_now(x.cpu.retired);
        if let Some(d) = x.bus.msr_read(index) {
            v = if d == 0 {
                0
            } else {
                d.wrapping_add(x.cpu.state.msr.tsc_offset)
            };
        }
    }
    let st = &mut x.cpu.state;
    st.gpr[reg::RAX] = v & 0xffff_ffff;
    st.gpr[reg::RDX] = v >> 32;
    Ok(())
}

/// WRMSR: MSR[ECX] = EDX:EAX.
fn wrmsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_cpl0(x)?;
    let st = &x.cpu.state;
    let index = st.gpr[reg::RCX] as u32;
    let v = (st.gpr[reg::RDX] << 32) | (st.gpr[reg::RAX] & 0xffff_ffff);
    write_msr(x, index, v)?;
    // MSRs the local APIC acts on are also handed to the machine's device. The TSC deadline
    // goes in retired-instruction units (TSC minus its offset), so the device needs no TSC.
    match index {
        num::TSC_DEADLINE => {
            let d = if v == 0 {
                0
            } else {
                v.saturating_sub(x.cpu.state.msr.tsc_offset).max(1)
            };
            x.bus.set_now(x.cpu.retired);
            x.bus.msr_write(index, d);
        }
        num::APIC_BASE => {
            x.bus.set_now(x.cpu.retired);
            x.bus.msr_write(index, x.cpu.state.msr.apic_base);
        }
        _ => {}
    }
    Ok(())
}

/// RDPMC: CPUID advertises no performance counters (leaf 0xA is zero), so every ECX names an
/// invalid counter: #GP(0) at any CPL and any CR4.PCE.
fn rdpmc(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Err(Fault::GP0.into())
}

/// Index into `MsrState::mtrr_fixed` of a fixed-range MTRR number.
fn fixed_mtrr_slot(index: u32) -> Option<usize> {
    match index {
        num::MTRR_FIX64K_00000 => Some(0),
        num::MTRR_FIX16K_80000 => Some(1),
        num::MTRR_FIX16K_A0000 => Some(2),
        0x268..=0x26f => Some(3 + (index - num::MTRR_FIX4K_C0000) as usize),
        _ => None,
    }
}

/// Index into `MsrState::mtrr_var` of a variable-range MTRR number (0x200..0x20F).
fn var_mtrr_slot(index: u32) -> Option<usize> {
    (num::MTRR_PHYSBASE0..num::MTRR_PHYSBASE0 + 16)
        .contains(&index)
        .then(|| (index - num::MTRR_PHYSBASE0) as usize)
}

/// Value of MSR `index`, or #GP(0) if it is not modelled.
pub fn read_msr(x: &Ctx, index: u32) -> Result<u64, Fault> {
    let st = &x.cpu.state;
    let m = &st.msr;
    if let Some(i) = var_mtrr_slot(index) {
        return Ok(m.mtrr_var[i]);
    }
    if let Some(i) = fixed_mtrr_slot(index) {
        return Ok(m.mtrr_fixed[i]);
    }
    Ok(match index {
        num::TSC => crate::ops::system::tsc(x),
        num::APIC_BASE => m.apic_base,
        num::FEATURE_CONTROL => FEATURE_CONTROL_VALUE,
        num::ARCH_CAPABILITIES => ARCH_CAPABILITIES_VALUE,
        // Microcode revision (bits 63:32) 0: no microcode.
        num::BIOS_SIGN_ID => MICROCODE_REVISION << 32,
        num::PLATFORM_INFO => PLATFORM_INFO_VALUE,
        num::MTRRCAP => MTRRCAP_VALUE,
        num::SYSENTER_CS => m.sysenter_cs,
        num::SYSENTER_ESP => m.sysenter_esp,
        num::SYSENTER_EIP => m.sysenter_eip,
        num::MCG_CAP | num::MCG_STATUS => 0,
        num::MISC_ENABLE => m.misc_enable,
        num::PAT => st.pat,
        num::MTRR_DEF_TYPE => m.mtrr_def_type,
        num::TSC_DEADLINE => m.tsc_deadline,
        num::EFER => st.efer,
        num::STAR => st.star,
        num::LSTAR => st.lstar,
        num::CSTAR => st.cstar,
        num::SFMASK => st.sfmask,
        num::FS_BASE => st.seg[sreg::FS].base,
        num::GS_BASE => st.seg[sreg::GS].base,
        num::KERNEL_GS_BASE => st.kernel_gs_base,
        num::TSC_AUX => st.tsc_aux,
        _ => return Err(Fault::GP0),
    })
}

/// A memory type an MTRR may hold: UC, WC, WT, WP, WB.
fn mtrr_type_ok(t: u64) -> bool {
    matches!(t, 0 | 1 | 4 | 5 | 6)
}

/// Every byte of a PAT value is UC, WC, WT, WP, WB or UC- (2, 3 and anything above 7 are
/// reserved).
pub fn pat_ok(v: u64) -> bool {
    v.to_le_bytes().iter().all(|&b| matches!(b, 0 | 1 | 4..=7))
}

/// Every byte of a fixed-range MTRR is a valid MTRR memory type.
fn fixed_mtrr_ok(v: u64) -> bool {
    v.to_le_bytes().iter().all(|&b| mtrr_type_ok(b as u64))
}

fn ok_if(cond: bool) -> Result<(), Fault> {
    if cond {
        Ok(())
    } else {
        Err(Fault::GP0)
    }
}

/// New EFER value for a WRMSR of `v` with the current EFER `old` and CR0, or #GP(0).
/// Writable: SCE, LME, NXE (NX is advertised). LMA is read-only: the written bit is ignored.
/// LME cannot change while paging is on.
pub fn efer_write(old: u64, v: u64, cr0: u64) -> Result<u64, Fault> {
    let mut writable = ctl::EFER_SCE | ctl::EFER_LME;
    if cpuid::EXT1_EDX & bits::NX != 0 {
        writable |= ctl::EFER_NXE;
    }
    ok_if(v & !(writable | ctl::EFER_LMA) == 0)?;
    ok_if((v ^ old) & ctl::EFER_LME == 0 || cr0 & ctl::CR0_PG == 0)?;
    Ok((v & writable) | (old & ctl::EFER_LMA))
}

/// Write MSR `index`. Every check happens before any state changes.
pub fn write_msr(x: &mut Ctx, index: u32, v: u64) -> Result<(), Fault> {
    if let Some(i) = var_mtrr_slot(index) {
        if i % 2 == 0 {
            // PHYSBASE: type (7:0), reserved 11:8, base up to MAXPHYADDR.
            ok_if(mtrr_type_ok(v & 0xff) && v & 0xf00 == 0 && v & PHYS_RESERVED == 0)?;
        } else {
            // PHYSMASK: reserved 10:0, valid (11), mask up to MAXPHYADDR.
            ok_if(v & 0x7ff == 0 && v & PHYS_RESERVED == 0)?;
        }
        x.cpu.state.msr.mtrr_var[i] = v;
        return Ok(());
    }
    if let Some(i) = fixed_mtrr_slot(index) {
        ok_if(fixed_mtrr_ok(v))?;
        x.cpu.state.msr.mtrr_fixed[i] = v;
        return Ok(());
    }
    let canonical = || ok_if(is_canonical(v));
    let st = &mut x.cpu.state;
    match index {
        num::TSC => {
            // The TSC reads v at this instruction (RDTSC reads the count of instructions
            // retired before it), so an RDTSC right after the WRMSR reads v + 1.
            let retired = x.cpu.retired;
            x.cpu.state.msr.tsc_offset = v.wrapping_sub(retired);
            x.cpu.yield_requested = true;
        }
        num::APIC_BASE => {
            // x2APIC is not advertised: bit 10 is reserved, as are 7:0, 9 and the bits above
            // MAXPHYADDR. The BSP bit is read-only.
            let x2apic = cpuid::LEAF1_ECX & bits::X2APIC != 0;
            let mut allowed = APIC_BSP | APIC_EN | (!PHYS_RESERVED & !0xfff);
            if x2apic {
                allowed |= APIC_X2APIC_EN;
            }
            ok_if(v & !allowed == 0)?;
            st.msr.apic_base = (v & !APIC_BSP) | (st.msr.apic_base & APIC_BSP);
            x.cpu.yield_requested = true;
        }
        num::BIOS_SIGN_ID => {
            // Linux writes 0 before CPUID(1) to read the revision; the write has no effect.
        }
        num::SYSENTER_CS => st.msr.sysenter_cs = v & 0xffff_ffff,
        num::SYSENTER_ESP => {
            canonical()?;
            st.msr.sysenter_esp = v;
        }
        num::SYSENTER_EIP => {
            canonical()?;
            st.msr.sysenter_eip = v;
        }
        // Only 0 may be written (no machine-check banks, nothing to clear).
        num::MCG_STATUS => ok_if(v == 0)?,
        num::MISC_ENABLE => {
            ok_if(v & !(MISC_ENABLE_WRITABLE | MISC_ENABLE_FIXED) == 0)?;
            st.msr.misc_enable = (v & MISC_ENABLE_WRITABLE) | MISC_ENABLE_FIXED;
        }
        num::PAT => {
            ok_if(pat_ok(v))?;
            st.pat = v;
        }
        num::MTRR_DEF_TYPE => {
            // Type (7:0), fixed enable (10), enable (11); the rest is reserved.
            ok_if(mtrr_type_ok(v & 0xff) && v & !0xcff == 0)?;
            st.msr.mtrr_def_type = v;
        }
        num::TSC_DEADLINE => {
            st.msr.tsc_deadline = v;
            x.cpu.yield_requested = true;
        }
        num::EFER => {
            let new = efer_write(st.efer, v, st.cr0)?;
            let changed = new ^ st.efer;
            st.efer = new;
            if changed & ctl::EFER_NXE != 0 {
                x.cpu.flush_tlb();
            }
        }
        num::STAR => st.star = v,
        num::LSTAR => {
            canonical()?;
            st.lstar = v;
        }
        num::CSTAR => {
            canonical()?;
            st.cstar = v;
        }
        num::SFMASK => {
            ok_if(v >> 32 == 0)?;
            st.sfmask = v;
        }
        num::FS_BASE => {
            canonical()?;
            st.seg[sreg::FS].base = v;
        }
        num::GS_BASE => {
            canonical()?;
            st.seg[sreg::GS].base = v;
        }
        num::KERNEL_GS_BASE => {
            canonical()?;
            st.kernel_gs_base = v;
        }
        num::TSC_AUX => {
            ok_if(v >> 32 == 0)?;
            st.tsc_aux = v;
        }
        // Read-only (FEATURE_CONTROL is locked; ARCH_CAPABILITIES), or not modelled (incl.
        // the x2APIC range 0x800..0x8FF, TSC_ADJUST, SPEC_CTRL, PRED_CMD).
        _ => return Err(Fault::GP0),
    }
    Ok(())
}

#[cfg(test)]
#[path = "msr_tests.rs"]
mod tests;
