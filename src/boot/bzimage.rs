//! Linux bzImage loader through the 64-bit boot protocol (Documentation/arch/x86/boot.rst): setup header, boot_params, e820, command line, initrd, identity page tables, GDT.

use super::e820::{memory_map, E820Entry};
use super::{BootError, BootInfo, LowMem};
use lockstep_interp::state::{ctl, flags, sreg, CpuState, Segment, TableReg};
use lockstep_interp::GuestRam;

/// Offsets in the setup header / boot_params.
mod off {
    pub const SETUP_SECTS: usize = 0x1f1;
    pub const BOOT_FLAG: usize = 0x1fe;
    pub const HEADER: usize = 0x202;
    pub const VERSION: usize = 0x206;
    pub const TYPE_OF_LOADER: usize = 0x210;
    pub const LOADFLAGS: usize = 0x211;
    pub const RAMDISK_IMAGE: usize = 0x218;
    pub const RAMDISK_SIZE: usize = 0x21c;
    pub const HEAP_END_PTR: usize = 0x224;
    pub const CMD_LINE_PTR: usize = 0x228;
    pub const INITRD_ADDR_MAX: usize = 0x22c;
    pub const KERNEL_ALIGNMENT: usize = 0x230;
    pub const RELOCATABLE: usize = 0x234;
    pub const XLOADFLAGS: usize = 0x236;
    pub const CMDLINE_SIZE: usize = 0x238;
    pub const PREF_ADDRESS: usize = 0x258;
    pub const INIT_SIZE: usize = 0x260;
    /// boot_params fields outside the header.
    pub const ACPI_RSDP_ADDR: usize = 0x070;
    pub const E820_ENTRIES: usize = 0x1e8;
    pub const E820_TABLE: usize = 0x2d0;
}

/// "HdrS".
const HDRS: u32 = 0x5372_6448;
const XLF_KERNEL_64: u16 = 1 << 0;
const XLF_CAN_BE_LOADED_ABOVE_4G: u16 = 1 << 1;
const LOADED_HIGH: u8 = 1 << 0;
const CAN_USE_HEAP: u8 = 1 << 7;
/// Boot protocol 2.12 introduced xloadflags (the 64-bit entry point flag).
const MIN_VERSION: u16 = 0x020c;
const E820_MAX: usize = 128;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
}

/// What the setup header says about a bzImage.
#[derive(Clone, Debug)]
pub struct Header {
    pub version: u16,
    pub setup_size: usize,
    pub kernel_alignment: u64,
    pub relocatable: bool,
    pub xloadflags: u16,
    pub cmdline_size: u32,
    pub initrd_addr_max: u64,
    pub pref_address: u64,
    pub init_size: u64,
    /// Bytes of the setup header to copy into boot_params (0x1f1 .. end).
    pub header_end: usize,
}

/// Parse and validate the setup header.
pub fn parse_header(image: &[u8]) -> Result<Header, BootError> {
    if image.len() < 0x270 {
        return Err(BootError::Kernel(format!(
            "{} bytes is too short for a bzImage (setup header ends at 0x270)",
            image.len()
        )));
    }
    if u16_at(image, off::BOOT_FLAG) != 0xaa55 || u32_at(image, off::HEADER) != HDRS {
        return Err(BootError::Kernel(
            "not a Linux bzImage: no 0xAA55 boot flag / \"HdrS\" setup header".into(),
        ));
    }
    let version = u16_at(image, off::VERSION);
    if version < MIN_VERSION {
        return Err(BootError::Kernel(format!(
            "boot protocol {}.{:02} is older than 2.12, which the 64-bit entry needs",
            version >> 8,
            version & 0xff
        )));
    }
    let xloadflags = u16_at(image, off::XLOADFLAGS);
    if xloadflags & XLF_KERNEL_64 == 0 {
        return Err(BootError::Kernel(
            "the kernel has no 64-bit entry point (XLF_KERNEL_64 clear)".into(),
        ));
    }
    let mut sects = image[off::SETUP_SECTS] as usize;
    if sects == 0 {
        sects = 4;
    }
    let setup_size = (sects + 1) * 512;
    if setup_size >= image.len() {
        return Err(BootError::Kernel(format!(
            "truncated bzImage: setup is {setup_size} bytes, the file {} bytes",
            image.len()
        )));
    }
    let header_end = (0x202 + image[0x201] as usize).min(0x1f1 + 0x7f + 0x200);
    Ok(Header {
        version,
        setup_size,
        kernel_alignment: u32_at(image, off::KERNEL_ALIGNMENT) as u64,
        relocatable: image[off::RELOCATABLE] != 0,
        xloadflags,
        cmdline_size: u32_at(image, off::CMDLINE_SIZE),
        initrd_addr_max: u32_at(image, off::INITRD_ADDR_MAX) as u64,
        pref_address: u64_at(image, off::PREF_ADDRESS),
        init_size: u32_at(image, off::INIT_SIZE) as u64,
        header_end,
    })
}

/// Load a bzImage (and an optional initrd) into `ram` and return the CPU state at the 64-bit
/// entry point.
pub fn load(
    ram: &mut GuestRam,
    image: &[u8],
    initrd: Option<&[u8]>,
    cmdline: &str,
    rsdp: u64,
) -> Result<BootInfo, BootError> {
    let h = parse_header(image)?;
    let ram_size = ram.size();
    let payload = &image[h.setup_size..];

    // Load address: the preferred address (aligned) for relocatable kernels.
    let align = h.kernel_alignment.max(0x20_0000);
    let load_addr = if h.pref_address != 0 {
        h.pref_address
    } else {
        0x100_0000
    };
    if load_addr % align != 0 && !h.relocatable {
        return Err(BootError::Kernel(format!(
            "kernel wants {load_addr:#x}, not aligned to {align:#x}, and is not relocatable"
        )));
    }
    let kernel_end = load_addr + (payload.len() as u64).max(h.init_size);
    if kernel_end > ram_size {
        return Err(BootError::RamTooSmall {
            need: kernel_end,
            have: ram_size,
            what: "the kernel's decompression area (init_size)",
        });
    }
    ram.write_phys(load_addr, payload)
        .map_err(|e| BootError::Kernel(e.to_string()))?;

    // Command line and initrd (as high as the kernel allows, below 4 GiB).
    let max_cmd = if h.cmdline_size == 0 {
        255
    } else {
        h.cmdline_size as usize
    };
    super::write_cmdline(ram, cmdline, max_cmd)?;
    let mut top = 1u64 << 32;
    if h.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G == 0 {
        top = top.min(h.initrd_addr_max.saturating_add(1));
    }
    let (rd_addr, rd_size) = super::place_initrd(ram, initrd, top, kernel_end)?;

    // boot_params: zero page with the setup header copied in.
    let mut bp = vec![0u8; 4096];
    bp[0x1f1..h.header_end].copy_from_slice(&image[0x1f1..h.header_end]);
    bp[off::TYPE_OF_LOADER] = 0xff;
    bp[off::LOADFLAGS] |= LOADED_HIGH | CAN_USE_HEAP;
    bp[off::HEAP_END_PTR..off::HEAP_END_PTR + 2].copy_from_slice(&0xfe00u16.to_le_bytes());
    bp[off::CMD_LINE_PTR..off::CMD_LINE_PTR + 4]
        .copy_from_slice(&(LowMem::CMDLINE as u32).to_le_bytes());
    bp[off::RAMDISK_IMAGE..off::RAMDISK_IMAGE + 4].copy_from_slice(&(rd_addr as u32).to_le_bytes());
    bp[off::RAMDISK_SIZE..off::RAMDISK_SIZE + 4].copy_from_slice(&(rd_size as u32).to_le_bytes());
    bp[off::ACPI_RSDP_ADDR..off::ACPI_RSDP_ADDR + 8].copy_from_slice(&rsdp.to_le_bytes());
    let map = memory_map(ram_size);
    write_e820(&mut bp, &map);
    write(ram, LowMem::BOOT_PARAMS, &bp)?;

    super::write_low_memory(ram)?;
    let mut st = long_mode_entry_state();
    st.rip = load_addr + 0x200;
    st.gpr[lockstep_interp::state::reg::RSI] = LowMem::BOOT_PARAMS;
    Ok(BootInfo {
        state: st,
        summary: format!(
            "bzImage protocol {}.{:02}: kernel at {load_addr:#x} ({} KiB, init_size {} KiB), initrd {} at {rd_addr:#x}, cmdline {:?}",
            h.version >> 8,
            h.version & 0xff,
            payload.len() / 1024,
            h.init_size / 1024,
            rd_size,
            cmdline
        ),
    })
}

fn write(ram: &mut GuestRam, addr: u64, b: &[u8]) -> Result<(), BootError> {
    ram.write_phys(addr, b).map_err(|_| BootError::RamTooSmall {
        need: addr + b.len() as u64,
        have: ram.size(),
        what: "boot structures",
    })
}

fn write_e820(bp: &mut [u8], map: &[E820Entry]) {
    let n = map.len().min(E820_MAX);
    bp[off::E820_ENTRIES] = n as u8;
    for (i, e) in map.iter().take(n).enumerate() {
        let o = off::E820_TABLE + i * 20;
        bp[o..o + 8].copy_from_slice(&e.addr.to_le_bytes());
        bp[o + 8..o + 16].copy_from_slice(&e.size.to_le_bytes());
        bp[o + 16..o + 20].copy_from_slice(&e.kind.to_le_bytes());
    }
}

/// 64-bit mode at CPL 0 with the identity map and boot GDT from [`super::write_low_memory`]:
/// CS = __BOOT_CS (0x10), data segments = __BOOT_DS (0x18), interrupts off.
pub fn long_mode_entry_state() -> CpuState {
    let mut st = CpuState::power_on();
    let code = Segment {
        selector: 0x10,
        attr: 0xa09b,
        limit: 0xffff_ffff,
        base: 0,
    };
    let data = Segment {
        selector: 0x18,
        attr: 0xc093,
        limit: 0xffff_ffff,
        base: 0,
    };
    st.seg = [data; 6];
    st.seg[sreg::CS] = code;
    st.gdtr = TableReg {
        base: LowMem::GDT,
        limit: 0x1f,
    };
    st.idtr = TableReg { base: 0, limit: 0 };
    st.cr0 = ctl::CR0_PE | ctl::CR0_ET | ctl::CR0_NE | ctl::CR0_PG;
    st.cr3 = LowMem::PML4;
    st.cr4 = ctl::CR4_PAE;
    st.efer = ctl::EFER_LME | ctl::EFER_LMA;
    st.rflags = flags::FIXED1;
    st.gpr[lockstep_interp::state::reg::RSP] = LowMem::BOOT_STACK;
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal synthetic bzImage: one setup sector + boot sector, header fields set.
    fn fake_image(payload: usize) -> Vec<u8> {
        let mut img = vec![0u8; 1024 + payload];
        img[off::SETUP_SECTS] = 1;
        img[off::BOOT_FLAG..off::BOOT_FLAG + 2].copy_from_slice(&0xaa55u16.to_le_bytes());
        img[0x201] = 0x6a;
        img[off::HEADER..off::HEADER + 4].copy_from_slice(&HDRS.to_le_bytes());
        img[off::VERSION..off::VERSION + 2].copy_from_slice(&0x020fu16.to_le_bytes());
        img[off::KERNEL_ALIGNMENT..off::KERNEL_ALIGNMENT + 4]
            .copy_from_slice(&0x20_0000u32.to_le_bytes());
        img[off::RELOCATABLE] = 1;
        img[off::XLOADFLAGS..off::XLOADFLAGS + 2].copy_from_slice(&0x3u16.to_le_bytes());
        img[off::CMDLINE_SIZE..off::CMDLINE_SIZE + 4].copy_from_slice(&2047u32.to_le_bytes());
        img[off::INITRD_ADDR_MAX..off::INITRD_ADDR_MAX + 4]
            .copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        img[off::PREF_ADDRESS..off::PREF_ADDRESS + 8].copy_from_slice(&0x100_0000u64.to_le_bytes());
        img[off::INIT_SIZE..off::INIT_SIZE + 4].copy_from_slice(&0x40_0000u32.to_le_bytes());
        for (i, b) in img[1024..].iter_mut().enumerate() {
            *b = i as u8;
        }
        img
    }

    #[test]
    fn loads_kernel_initrd_and_boot_params() {
        let img = fake_image(8192);
        let mut ram = GuestRam::new(64 << 20).unwrap();
        let rd = vec![0x5a; 10000];
        let info = load(&mut ram, &img, Some(&rd), "console=ttyS0", 0xe0000).unwrap();
        assert_eq!(info.state.rip, 0x100_0200);
        assert_eq!(info.state.gpr[6], LowMem::BOOT_PARAMS);
        let mut b = [0u8; 4];
        ram.read_phys(0x100_0000 + 5, &mut b[..1]).unwrap();
        assert_eq!(b[0], 5);
        let mut bp = vec![0u8; 4096];
        ram.read_phys(LowMem::BOOT_PARAMS, &mut bp).unwrap();
        assert_eq!(u32_at(&bp, off::HEADER), HDRS);
        assert_eq!(bp[off::TYPE_OF_LOADER], 0xff);
        let rd_addr = u32_at(&bp, off::RAMDISK_IMAGE) as u64;
        assert_eq!(u32_at(&bp, off::RAMDISK_SIZE), 10000);
        assert_eq!(rd_addr % 4096, 0);
        assert!(rd_addr + 10000 <= 64 << 20);
        ram.read_phys(rd_addr, &mut b).unwrap();
        assert_eq!(b, [0x5a; 4]);
        assert_eq!(bp[off::E820_ENTRIES], 5);
        assert_eq!(u64_at(&bp, off::ACPI_RSDP_ADDR), 0xe0000);
        let mut c = [0u8; 14];
        ram.read_phys(u32_at(&bp, off::CMD_LINE_PTR) as u64, &mut c)
            .unwrap();
        assert_eq!(&c, b"console=ttyS0\0");
    }

    #[test]
    fn rejects_bad_images_clearly() {
        let mut ram = GuestRam::new(64 << 20).unwrap();
        let e = load(&mut ram, &[0u8; 100], None, "", 0).unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
        let mut img = fake_image(100);
        img[off::HEADER] = b'X';
        let e = load(&mut ram, &img, None, "", 0).unwrap_err();
        assert!(e.to_string().contains("not a Linux bzImage"), "{e}");
        let img = fake_image(100);
        let e = load(&mut ram, &img, Some(&vec![1u8; 70 << 20]), "", 0).unwrap_err();
        assert!(e.to_string().contains("initrd"), "{e}");
        let mut small = GuestRam::new(8 << 20).unwrap();
        let e = load(&mut small, &img, None, "", 0).unwrap_err();
        assert!(e.to_string().contains("RAM"), "{e}");
        let e = load(&mut ram, &img, None, &"x".repeat(3000), 0).unwrap_err();
        assert!(e.to_string().contains("command line"), "{e}");
        // Truncated anywhere: never a panic.
        let full = fake_image(4096);
        for n in (0..full.len()).step_by(97) {
            let _ = load(&mut ram, &full[..n], None, "", 0);
        }
    }
}
