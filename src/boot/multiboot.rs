//! Multiboot v1 loader, as QEMU's `-kernel` starts such kernels: a.out-kludge or ELF32 images, 32-bit protected mode with paging off, EAX = 0x2BADB002, EBX = the information structure.

use super::e820::memory_map;
use super::{BootError, BootInfo, LowMem};
use lockstep_interp::state::{ctl, flags, reg, sreg, CpuState, Segment};
use lockstep_interp::GuestRam;

pub const HEADER_MAGIC: u32 = 0x1bad_b002;
pub const BOOT_MAGIC: u32 = 0x2bad_b002;
/// Header flag: the address fields (a.out kludge) are valid.
const FLAG_AOUT_KLUDGE: u32 = 1 << 16;
/// Requirement bits a loader must honour: page-aligned modules, memory info, video mode.
const KNOWN_REQUIREMENTS: u32 = 0b111;

/// The multiboot header found in an image.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// File offset of the header.
    pub offset: usize,
    pub flags: u32,
    pub header_addr: u32,
    pub load_addr: u32,
    pub load_end_addr: u32,
    pub bss_end_addr: u32,
    pub entry_addr: u32,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

/// Find a valid header (magic, flags, checksum summing to zero) 4-byte aligned in the first
/// 8 KiB.
pub fn find_header(image: &[u8]) -> Option<Header> {
    let end = image.len().min(8192);
    let mut o = 0;
    while o + 12 <= end {
        if u32_at(image, o)? == HEADER_MAGIC {
            let flags = u32_at(image, o + 4)?;
            let sum = u32_at(image, o + 8)?;
            if HEADER_MAGIC.wrapping_add(flags).wrapping_add(sum) == 0 {
                let f = |i: usize| u32_at(image, o + 12 + 4 * i).unwrap_or(0);
                return Some(Header {
                    offset: o,
                    flags,
                    header_addr: f(0),
                    load_addr: f(1),
                    load_end_addr: f(2),
                    bss_end_addr: f(3),
                    entry_addr: f(4),
                });
            }
        }
        o += 4;
    }
    None
}

/// Load a multiboot kernel (and optional module, e.g. an initrd) and return the entry state.
pub fn load(
    ram: &mut GuestRam,
    image: &[u8],
    module: Option<&[u8]>,
    cmdline: &str,
) -> Result<BootInfo, BootError> {
    let h = find_header(image)
        .ok_or_else(|| BootError::Kernel("no multiboot header in the first 8 KiB".into()))?;
    if h.flags & 0xffff & !KNOWN_REQUIREMENTS != 0 {
        return Err(BootError::Kernel(format!(
            "multiboot header requires features this loader lacks (flags {:#x})",
            h.flags
        )));
    }
    let ram_size = ram.size().min(1 << 32);
    let (entry, end) = if h.flags & FLAG_AOUT_KLUDGE != 0 {
        load_aout(ram, image, &h, ram_size)?
    } else {
        load_elf32(ram, image, ram_size)?
    };
    super::write_low_memory(ram)?;

    // Module (initrd) page-aligned at the top of RAM.
    let mut mods = Vec::new();
    if let Some(m) = module {
        let size = m.len() as u64;
        let addr = ram_size.saturating_sub(size) & !0xfff;
        if size > ram_size || addr < end {
            return Err(BootError::InitrdTooLarge {
                size,
                room: ram_size.saturating_sub(end),
            });
        }
        ram.write_phys(addr, m)
            .map_err(|e| BootError::Initrd(e.to_string()))?;
        mods.push((addr, addr + size));
    }
    write_mbi(ram, cmdline, &mods)?;

    let mut st = CpuState::power_on();
    let code = Segment {
        selector: 0x10,
        attr: 0xc09b,
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
    st.cr0 = ctl::CR0_PE | ctl::CR0_ET;
    st.rflags = flags::FIXED1;
    st.rip = entry as u64;
    st.gpr[reg::RAX] = BOOT_MAGIC as u64;
    st.gpr[reg::RBX] = LowMem::MBI;
    Ok(BootInfo {
        state: st,
        summary: format!(
            "multiboot kernel: entry {entry:#x}, image end {end:#x}, {} module(s), cmdline {cmdline:?}",
            mods.len()
        ),
    })
}

fn bad(msg: String) -> BootError {
    BootError::Kernel(msg)
}

/// a.out kludge: the header's address fields say where the file goes.
fn load_aout(
    ram: &mut GuestRam,
    image: &[u8],
    h: &Header,
    ram_size: u64,
) -> Result<(u32, u64), BootError> {
    if h.header_addr < h.load_addr || (h.header_addr - h.load_addr) as usize > h.offset {
        return Err(bad(format!(
            "multiboot header_addr {:#x} / load_addr {:#x} inconsistent with the header at file offset {:#x}",
            h.header_addr, h.load_addr, h.offset
        )));
    }
    let file_start = h.offset - (h.header_addr - h.load_addr) as usize;
    let load_len = if h.load_end_addr == 0 {
        image.len() - file_start
    } else {
        (h.load_end_addr.checked_sub(h.load_addr))
            .ok_or_else(|| bad("multiboot load_end_addr is below load_addr".into()))?
            as usize
    };
    let data = image
        .get(file_start..file_start + load_len)
        .ok_or_else(|| {
            bad(format!(
                "truncated multiboot image: needs {load_len} bytes from offset {file_start:#x}"
            ))
        })?;
    let load = h.load_addr as u64;
    let bss_end = if h.bss_end_addr == 0 {
        load + load_len as u64
    } else {
        h.bss_end_addr as u64
    };
    if bss_end < load + load_len as u64
        || bss_end > ram_size
        || load < 0x10_0000 && bss_end > 0xa_0000
    {
        return Err(bad(format!(
            "multiboot image {load:#x}..{bss_end:#x} does not fit in RAM ({ram_size:#x}) above 1 MiB"
        )));
    }
    ram.write_phys(load, data).map_err(|e| bad(e.to_string()))?;
    let zeros = vec![0u8; (bss_end - load - load_len as u64) as usize];
    ram.write_phys(load + load_len as u64, &zeros)
        .map_err(|e| bad(e.to_string()))?;
    Ok((h.entry_addr, bss_end))
}

/// ELF32 executable: PT_LOAD segments at their physical addresses.
fn load_elf32(ram: &mut GuestRam, image: &[u8], ram_size: u64) -> Result<(u32, u64), BootError> {
    if image.len() < 52 || &image[..4] != b"\x7fELF" {
        return Err(bad(
            "multiboot kernel without the a.out kludge must be an ELF file".into(),
        ));
    }
    if image[4] != 1 || image[5] != 1 {
        return Err(bad(
            "multiboot ELF kernels must be 32-bit little-endian (as QEMU requires)".into(),
        ));
    }
    let u16_at = |o: usize| -> u16 { u16::from_le_bytes([image[o], image[o + 1]]) };
    let entry = u32_at(image, 24).unwrap_or(0);
    let phoff = u32_at(image, 28).unwrap_or(0) as usize;
    let phentsize = u16_at(42) as usize;
    let phnum = u16_at(44) as usize;
    if phentsize < 32 || phnum == 0 || phnum > 64 {
        return Err(bad("ELF kernel has no usable program headers".into()));
    }
    let mut end = 0u64;
    for i in 0..phnum {
        let o = phoff.saturating_add(i * phentsize);
        let ph = image
            .get(o..o + 32)
            .ok_or_else(|| bad("truncated ELF program headers".into()))?;
        let f = |k: usize| u32::from_le_bytes(ph[k..k + 4].try_into().unwrap_or([0; 4]));
        if f(0) != 1 {
            continue; // not PT_LOAD
        }
        let (off, paddr, filesz, memsz) =
            (f(4) as usize, f(12) as u64, f(16) as usize, f(20) as u64);
        if (filesz as u64) > memsz || paddr + memsz > ram_size {
            return Err(bad(format!(
                "ELF segment {paddr:#x}+{memsz:#x} does not fit in RAM ({ram_size:#x})"
            )));
        }
        let data = image
            .get(off..off.saturating_add(filesz))
            .ok_or_else(|| bad("truncated ELF segment".into()))?;
        ram.write_phys(paddr, data)
            .map_err(|e| bad(e.to_string()))?;
        let zeros = vec![0u8; (memsz - filesz as u64) as usize];
        ram.write_phys(paddr + filesz as u64, &zeros)
            .map_err(|e| bad(e.to_string()))?;
        end = end.max(paddr + memsz);
    }
    if end == 0 {
        return Err(bad("ELF kernel has no PT_LOAD segment".into()));
    }
    Ok((entry, end))
}

/// The multiboot information structure with memory sizes, command line, modules, the e820
/// map and the loader name.
fn write_mbi(ram: &mut GuestRam, cmdline: &str, mods: &[(u64, u64)]) -> Result<(), BootError> {
    let base = LowMem::MBI;
    let mut mbi = vec![0u8; 0x1000];
    let put = |b: &mut Vec<u8>, o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    let map = memory_map(ram.size());
    let upper = map
        .iter()
        .find(|e| e.addr == 0x10_0000)
        .map(|e| (e.size >> 10).min(u32::MAX as u64) as u32)
        .unwrap_or(0);
    // Layout inside the page: header 0..0x80, mmap 0x80.., modules 0x200.., name 0x280,
    // command line 0x300.. (up to the end of the page).
    let mut flag = 1 | (1 << 2) | (1 << 6) | (1 << 9);
    put(&mut mbi, 4, 639);
    put(&mut mbi, 8, upper);
    let mut o = 0x80;
    for e in &map {
        put(&mut mbi, o, 20);
        mbi[o + 4..o + 12].copy_from_slice(&e.addr.to_le_bytes());
        mbi[o + 12..o + 20].copy_from_slice(&e.size.to_le_bytes());
        put(&mut mbi, o + 20, e.kind);
        o += 24;
    }
    put(&mut mbi, 44, (o - 0x80) as u32);
    put(&mut mbi, 48, (base + 0x80) as u32);
    if !mods.is_empty() {
        flag |= 1 << 3;
        put(&mut mbi, 20, mods.len() as u32);
        put(&mut mbi, 24, (base + 0x200) as u32);
        for (i, &(s, e)) in mods.iter().take(4).enumerate() {
            let m = 0x200 + i * 16;
            put(&mut mbi, m, s as u32);
            put(&mut mbi, m + 4, e as u32);
        }
    }
    mbi[0x280..0x289].copy_from_slice(b"lockstep\0");
    put(&mut mbi, 64, (base + 0x280) as u32);
    let c = cmdline.as_bytes();
    if c.len() > 0x1000 - 0x300 - 1 {
        return Err(BootError::CmdlineTooLong {
            len: c.len(),
            max: 0x1000 - 0x300 - 1,
        });
    }
    mbi[0x300..0x300 + c.len()].copy_from_slice(c);
    put(&mut mbi, 16, (base + 0x300) as u32);
    put(&mut mbi, 0, flag);
    ram.write_phys(base, &mbi).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An a.out-kludge image: header at offset 0 of a file loaded at 1 MiB, entry after it.
    pub fn aout_image(code: &[u8], bss: u32) -> Vec<u8> {
        let flags = FLAG_AOUT_KLUDGE | 0b10;
        let mut img = Vec::new();
        let load = 0x10_0000u32;
        let len = 32 + code.len() as u32;
        for v in [
            HEADER_MAGIC,
            flags,
            0u32.wrapping_sub(HEADER_MAGIC.wrapping_add(flags)),
            load,
            load,
            load + len,
            load + len + bss,
            load + 32,
        ] {
            img.extend_from_slice(&v.to_le_bytes());
        }
        img.extend_from_slice(code);
        img
    }

    #[test]
    fn loads_aout_kludge_image() {
        let img = aout_image(&[0xf4], 64);
        let mut ram = GuestRam::new(16 << 20).unwrap();
        let info = load(&mut ram, &img, Some(b"module!"), "quiet").unwrap();
        assert_eq!(info.state.rip, 0x10_0020);
        assert_eq!(info.state.gpr[reg::RAX], BOOT_MAGIC as u64);
        assert_eq!(info.state.gpr[reg::RBX], LowMem::MBI);
        let mut b = [0u8; 1];
        ram.read_phys(0x10_0020, &mut b).unwrap();
        assert_eq!(b[0], 0xf4);
        let mut mbi = vec![0u8; 0x400];
        ram.read_phys(LowMem::MBI, &mut mbi).unwrap();
        let flags = u32_at(&mbi, 0).unwrap();
        assert_eq!(flags & 0b1001101, 0b1001101);
        assert_eq!(u32_at(&mbi, 4), Some(639));
        assert_eq!(u32_at(&mbi, 20), Some(1));
        let cmd = u32_at(&mbi, 16).unwrap() as u64;
        let mut c = [0u8; 6];
        ram.read_phys(cmd, &mut c).unwrap();
        assert_eq!(&c, b"quiet\0");
    }

    #[test]
    fn rejects_bad_headers() {
        let mut ram = GuestRam::new(16 << 20).unwrap();
        assert!(load(&mut ram, b"nothing here", None, "").is_err());
        let mut img = aout_image(&[0xf4], 0);
        img[8] ^= 1; // checksum
        assert!(find_header(&img).is_none());
        let img = aout_image(&[0xf4], 0x7fff_0000);
        let e = load(&mut ram, &img, None, "").unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
        let full = aout_image(&[0x90; 300], 16);
        for n in 0..full.len() {
            let _ = load(&mut ram, &full[..n], None, "");
        }
    }
}
