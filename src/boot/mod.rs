//! Boot loaders: Linux bzImage (64-bit boot protocol), ELF vmlinux through the PVH entry, multiboot v1 kernels, and the fixed low-memory layout, command line, initrd placement and ACPI/e820 data they share.
//!
//! Physical layout below 1 MiB (see [`LowMem`]):
//! ```text
//! 0x0000_0000  real-mode IVT and BIOS data area (BDA: base memory 639 KiB, EBDA at 0x9fc00)
//! 0x0000_4000  multiboot information structure, mmap, module list, loader name;
//!              or (PVH) hvm_start_info, module list, PVH GDT, memory map
//! 0x0000_5000  boot GDT (null, null, 0x10 64-bit code, 0x18 data)    ← boot stack below it
//! 0x0000_7000  Linux boot_params ("zero page")
//! 0x0000_9000  identity page tables: PML4, PDPT, 4 PDs of 2 MiB pages (first 4 GiB)
//! 0x0002_0000  kernel command line
//! 0x0009_fc00  EBDA (reserved)
//! 0x000e_0000  ACPI tables (RSDP first, so a scan of the BIOS area finds it)
//! 0x0010_0000  multiboot a.out/ELF kernels; bzImage at its preferred address (16 MiB);
//!              vmlinux (PVH) at its PT_LOAD physical addresses (16 MiB for Linux)
//! top of RAM   initrd (bzImage, PVH) / modules (multiboot) below it
//! ```

pub mod acpi;
pub mod bzimage;
pub mod e820;
pub mod extract;
pub mod multiboot;
pub mod pvh;

use lockstep_interp::{CpuState, GuestRam};
use thiserror::Error;

/// Fixed low-memory addresses.
pub struct LowMem;

impl LowMem {
    pub const MBI: u64 = 0x4000;
    /// PVH: `hvm_start_info` (the multiboot page, unused on that path).
    pub const PVH_INFO: u64 = 0x4000;
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

/// Copy the command line, NUL-terminated, to [`LowMem::CMDLINE`] and return its address.
/// `max` is the longest line the kernel accepts (it is also capped so the line cannot reach
/// the EBDA).
pub fn write_cmdline(ram: &mut GuestRam, cmdline: &str, max: usize) -> Result<u64, BootError> {
    let room = (e820::EBDA_START - LowMem::CMDLINE - 1) as usize;
    let max = max.min(room);
    let cmd = cmdline.as_bytes();
    if cmd.len() > max {
        return Err(BootError::CmdlineTooLong {
            len: cmd.len(),
            max,
        });
    }
    let mut buf = Vec::with_capacity(cmd.len() + 1);
    buf.extend_from_slice(cmd);
    buf.push(0);
    ram.write_phys(LowMem::CMDLINE, &buf)
        .map_err(|_| BootError::RamTooSmall {
            need: LowMem::CMDLINE + buf.len() as u64,
            have: ram.size(),
            what: "the kernel command line",
        })?;
    Ok(LowMem::CMDLINE)
}

/// Place an initrd page aligned as high as possible below `top` (capped at the end of RAM)
/// and at or above `kernel_end`; returns (address, size), (0, 0) without an initrd.
pub fn place_initrd(
    ram: &mut GuestRam,
    initrd: Option<&[u8]>,
    top: u64,
    kernel_end: u64,
) -> Result<(u64, u64), BootError> {
    let rd = match initrd {
        Some(rd) if !rd.is_empty() => rd,
        _ => return Ok((0, 0)),
    };
    let top = top.min(ram.size());
    let size = rd.len() as u64;
    let addr = top.saturating_sub(size) & !0xfff;
    if size > top || addr < kernel_end {
        return Err(BootError::InitrdTooLarge {
            size,
            room: top.saturating_sub(kernel_end),
        });
    }
    ram.write_phys(addr, rd)
        .map_err(|e| BootError::Initrd(e.to_string()))?;
    Ok((addr, size))
}

/// Which loader an image needs, from its contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    BzImage,
    /// ELF64 `vmlinux` with a `XEN_ELFNOTE_PHYS32_ENTRY` note.
    Pvh,
    Multiboot,
}

/// Recognise a kernel image: bzImage ("HdrS" setup header), ELF64 with a PVH entry note, or
/// multiboot v1 (header magic in the first 8 KiB). An ELF file with neither a PVH note nor a
/// multiboot header, or a malformed ELF64, is an error that says what is missing.
pub fn detect(image: &[u8]) -> Result<KernelKind, BootError> {
    if image.len() >= 0x206 && &image[0x202..0x206] == b"HdrS" {
        return Ok(KernelKind::BzImage);
    }
    let is_elf = image.starts_with(b"\x7fELF");
    if is_elf && image.get(4) == Some(&pvh::ELFCLASS64) {
        let elf = pvh::Elf64::parse(image)?;
        if elf.pvh_entry()?.is_some() {
            return Ok(KernelKind::Pvh);
        }
        if multiboot::find_header(image).is_none() {
            return Err(BootError::Kernel(
                "ELF64 kernel without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY, type 18, \
                 owner \"Xen\") and without a multiboot header: build Linux with CONFIG_PVH=y, \
                 or boot its bzImage"
                    .into(),
            ));
        }
    }
    if multiboot::find_header(image).is_some() {
        return Ok(KernelKind::Multiboot);
    }
    if is_elf {
        return Err(BootError::Kernel(
            "ELF kernel without a multiboot header (ELF32) or a PVH entry note (ELF64)".into(),
        ));
    }
    Err(BootError::Kernel(format!(
        "unrecognised kernel image ({} bytes): neither a bzImage, an ELF vmlinux with a PVH note, \
         nor a multiboot v1 kernel",
        image.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_and_initrd_helpers() {
        let mut ram = GuestRam::new(32 << 20).unwrap();
        assert_eq!(write_cmdline(&mut ram, "a=b", 10).unwrap(), LowMem::CMDLINE);
        let mut b = [0u8; 4];
        ram.read_phys(LowMem::CMDLINE, &mut b).unwrap();
        assert_eq!(&b, b"a=b\0");
        let e = write_cmdline(&mut ram, "abcdef", 5).unwrap_err();
        assert!(
            matches!(e, BootError::CmdlineTooLong { len: 6, max: 5 }),
            "{e}"
        );
        // A kernel claiming a huge limit still cannot make the line reach the EBDA.
        let long = "x".repeat(0x90000);
        assert!(write_cmdline(&mut ram, &long, usize::MAX).is_err());

        assert_eq!(place_initrd(&mut ram, None, u64::MAX, 0).unwrap(), (0, 0));
        let rd = vec![7u8; 5000];
        let (a, s) = place_initrd(&mut ram, Some(&rd), u64::MAX, 1 << 20).unwrap();
        assert_eq!((a, s), ((32 << 20) - 8192, 5000));
        let (a, _) = place_initrd(&mut ram, Some(&rd), 16 << 20, 1 << 20).unwrap();
        assert_eq!(a, (16 << 20) - 8192);
        let e = place_initrd(&mut ram, Some(&rd), u64::MAX, (32 << 20) - 4096).unwrap_err();
        assert!(matches!(e, BootError::InitrdTooLarge { .. }), "{e}");
    }

    #[test]
    fn detection() {
        let e = detect(&[0u8; 100]).unwrap_err().to_string();
        assert!(e.contains("unrecognised"), "{e}");
        // ELF64 without notes: names the missing PVH note.
        let elf = pvh::tests::elf64(&[0x90; 16], 0x100_0000, None);
        let e = detect(&elf).unwrap_err().to_string();
        assert!(e.contains("PVH entry note"), "{e}");
        let elf = pvh::tests::elf64(&[0x90; 16], 0x100_0000, Some(0x100_0000));
        assert_eq!(detect(&elf).unwrap(), KernelKind::Pvh);
        // ELF32 without a multiboot header.
        let mut e32 = vec![0u8; 64];
        e32[..4].copy_from_slice(b"\x7fELF");
        e32[4] = 1;
        let e = detect(&e32).unwrap_err().to_string();
        assert!(e.contains("multiboot"), "{e}");
        // Truncated ELF64: a clear error, no panic.
        for n in 0..elf.len() {
            let _ = detect(&elf[..n]);
        }
        let e = detect(&elf[..40]).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }
}
