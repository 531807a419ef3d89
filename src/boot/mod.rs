//! Boot loaders: Linux bzImage (64-bit boot protocol), multiboot v1 kernels, and the fixed low-memory layout and ACPI/e820 data they share.
//!
//! Physical layout below 1 MiB (see [`LowMem`]):
//! ```text
//! 0x0000_0000  real-mode IVT and BIOS data area (BDA: base memory 639 KiB, EBDA at 0x9fc00)
//! 0x0000_4000  multiboot information structure, mmap, module list, loader name
//! 0x0000_5000  boot GDT (null, null, 0x10 64-bit code, 0x18 data)    ← boot stack below it
//! 0x0000_7000  Linux boot_params ("zero page")
//! 0x0000_9000  identity page tables: PML4, PDPT, 4 PDs of 2 MiB pages (first 4 GiB)
//! 0x0002_0000  kernel command line
//! 0x0009_fc00  EBDA (reserved)
//! 0x000e_0000  ACPI tables (RSDP first, so a scan of the BIOS area finds it)
//! 0x0010_0000  multiboot a.out/ELF kernels; bzImage at its preferred address (16 MiB)
//! top of RAM   initrd (bzImage) / modules (multiboot) below it
//! ```

pub mod acpi;
pub mod bzimage;
pub mod e820;
pub mod multiboot;

use lockstep_interp::{CpuState, GuestRam};
use thiserror::Error;

/// Fixed low-memory addresses.
pub struct LowMem;

impl LowMem {
    pub const MBI: u64 = 0x4000;
    pub const GDT: u64 = 0x5000;
    pub const BOOT_STACK: u64 = 0x5000;
    pub const BOOT_PARAMS: u64 = 0x7000;
    pub const PML4: u64 = 0x9000;
    pub const PDPT: u64 = 0xa000;
    pub const PD: u64 = 0xb000;
    pub const CMDLINE: u64 = 0x2_0000;
}

/// Why a kernel, initrd or configuration cannot be booted.
#[derive(Debug, Error)]
pub enum BootError {
    #[error("cannot boot this kernel: {0}")]
    Kernel(String),
    #[error("cannot load the initrd: {0}")]
    Initrd(String),
    #[error("the initrd ({size} bytes) does not fit in RAM above the kernel ({room} bytes free); give more RAM with --ram-mb")]
    InitrdTooLarge { size: u64, room: u64 },
    #[error("RAM too small: {what} needs {need:#x} bytes of RAM, the machine has {have:#x}; give more with --ram-mb")]
    RamTooSmall {
        need: u64,
        have: u64,
        what: &'static str,
    },
    #[error("kernel command line is {len} bytes, the kernel accepts at most {max}")]
    CmdlineTooLong { len: usize, max: usize },
}

/// The result of loading: the CPU state at the kernel's entry and a one-line summary.
#[derive(Debug)]
pub struct BootInfo {
    pub state: CpuState,
    pub summary: String,
}

/// Write the pieces every loader relies on: BDA values, boot GDT, identity page tables for the
/// first 4 GiB (2 MiB pages, supervisor read/write).
pub fn write_low_memory(ram: &mut GuestRam) -> Result<(), BootError> {
    let need = LowMem::CMDLINE + 0x1000;
    if ram.size() < need {
        return Err(BootError::RamTooSmall {
            need,
            have: ram.size(),
            what: "the low-memory boot structures",
        });
    }
    let w = |ram: &mut GuestRam, a: u64, b: &[u8]| {
        ram.write_phys(a, b).map_err(|_| BootError::RamTooSmall {
            need: a + b.len() as u64,
            have: 0,
            what: "the low-memory boot structures",
        })
    };
    // BDA: EBDA segment at 0x40e, base memory size in KiB at 0x413.
    w(ram, 0x40e, &((e820::EBDA_START >> 4) as u16).to_le_bytes())?;
    w(ram, 0x413, &((e820::EBDA_START >> 10) as u16).to_le_bytes())?;
    // GDT: null, null, __BOOT_CS (64-bit code), __BOOT_DS (flat data).
    let gdt: [u64; 4] = [0, 0, 0x00af_9b00_0000_ffff, 0x00cf_9300_0000_ffff];
    for (i, d) in gdt.iter().enumerate() {
        w(ram, LowMem::GDT + i as u64 * 8, &d.to_le_bytes())?;
    }
    // Identity map of the first 4 GiB with 2 MiB pages.
    w(ram, LowMem::PML4, &(LowMem::PDPT | 0x3).to_le_bytes())?;
    for i in 0..4u64 {
        let pd = LowMem::PD + i * 0x1000;
        w(ram, LowMem::PDPT + i * 8, &(pd | 0x3).to_le_bytes())?;
        let mut table = vec![0u8; 4096];
        for j in 0..512u64 {
            let phys = (i << 30) | (j << 21);
            let e = phys | 0x83; // present, writable, 2 MiB
            table[j as usize * 8..j as usize * 8 + 8].copy_from_slice(&e.to_le_bytes());
        }
        w(ram, pd, &table)?;
    }
    Ok(())
}

/// Copy the ACPI tables for `cpus` vCPUs into RAM; returns the RSDP address.
pub fn write_acpi(ram: &mut GuestRam, cpus: u8) -> Result<u64, BootError> {
    let t = acpi::build(cpus);
    ram.write_phys(t.base, &t.bytes)
        .map_err(|_| BootError::RamTooSmall {
            need: t.base + t.bytes.len() as u64,
            have: ram.size(),
            what: "the ACPI tables",
        })?;
    Ok(t.rsdp)
}

/// Which loader an image needs, from its contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    BzImage,
    Multiboot,
}

/// Recognise a kernel image: bzImage ("HdrS" setup header) or multiboot v1 (header magic in
/// the first 8 KiB).
pub fn detect(image: &[u8]) -> Result<KernelKind, BootError> {
    if image.len() >= 0x206 && &image[0x202..0x206] == b"HdrS" {
        return Ok(KernelKind::BzImage);
    }
    if multiboot::find_header(image).is_some() {
        return Ok(KernelKind::Multiboot);
    }
    Err(BootError::Kernel(format!(
        "unrecognised kernel image ({} bytes): neither a bzImage nor a multiboot v1 kernel",
        image.len()
    )))
}
