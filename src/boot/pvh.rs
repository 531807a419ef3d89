//! PVH loader: an uncompressed ELF64 `vmlinux` started at its `XEN_ELFNOTE_PHYS32_ENTRY` in 32-bit protected mode with EBX = `struct hvm_start_info` (Xen's `public/arch-x86/hvm/start_info.h`, the entry Linux builds with CONFIG_PVH).
//!
//! Start state, per the PVH ABI: paging off, CR0 = PE (+ ET, which is fixed to 1 on this CPU),
//! CR4 = 0, CS a flat 32-bit code segment, DS/ES/SS (and FS/GS) flat 32-bit data, TR a busy
//! 32-bit TSS with base 0 and limit 0x67, EFLAGS = 0x2 (IF, TF, VM clear), EBX = the physical
//! address of `hvm_start_info`. The descriptors are also written to a small GDT so that a
//! kernel reloading a selector before its own LGDT finds the same values.

use super::e820::{memory_map, BIOS_END};
use super::{BootError, BootInfo, LowMem};
use lockstep_interp::state::{ctl, flags, reg, sreg, CpuState, Segment, TableReg};
use lockstep_interp::GuestRam;

/// `e_ident[EI_CLASS]` of a 64-bit ELF file.
pub const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const EM_X86_64: u16 = 62;
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const PHDR_SIZE: usize = 56;
/// More program headers than any kernel has: anything above is a corrupt header.
const MAX_PHDRS: usize = 128;
/// More notes than any kernel has in one PT_NOTE segment.
const MAX_NOTES: usize = 4096;
/// Note type of the 32-bit physical entry point (Xen's `elfnote.h`), owner "Xen".
pub const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;
/// `hvm_start_info.magic`: "xEn3" with the 0x80 bit of the "E" set.
pub const START_MAGIC: u32 = 0x336e_c578;
/// Longest command line: Linux's COMMAND_LINE_SIZE on x86 is 2048 bytes with the NUL.
pub const CMDLINE_MAX: usize = 2047;

/// Where the PVH structures go, inside the page at [`LowMem::PVH_INFO`].
mod at {
    use super::LowMem;
    /// `struct hvm_start_info` (56 bytes).
    pub const START_INFO: u64 = LowMem::PVH_INFO;
    /// One `struct hvm_modlist_entry` (32 bytes) for the initrd.
    pub const MODLIST: u64 = LowMem::PVH_INFO + 0x40;
    /// GDT: null, 0x08 flat 32-bit code, 0x10 flat data, 0x18 busy 32-bit TSS.
    pub const GDT: u64 = LowMem::PVH_INFO + 0x60;
    /// `struct hvm_memmap_table_entry` array (24 bytes each) up to the end of the page.
    pub const MEMMAP: u64 = LowMem::PVH_INFO + 0x100;
    pub const MEMMAP_MAX: usize = (0x1000 - 0x100) / 24;
}

const CODE_SEL: u16 = 0x08;
const DATA_SEL: u16 = 0x10;
const TSS_SEL: u16 = 0x18;
const GDT: [u64; 4] = [
    0,
    0x00cf_9b00_0000_ffff, // base 0, limit 4 GiB, 32-bit, execute/read, accessed
    0x00cf_9300_0000_ffff, // base 0, limit 4 GiB, 32-bit, read/write, accessed
    0x0000_8b00_0000_0067, // base 0, limit 0x67, busy 32-bit TSS
];

fn bad(msg: impl Into<String>) -> BootError {
    BootError::Kernel(msg.into())
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(o..o.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// One ELF64 program header (the fields the loader uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phdr {
    pub kind: u32,
    pub offset: u64,
    pub paddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

/// A validated ELF64 x86-64 header and its program headers.
#[derive(Debug)]
pub struct Elf64<'a> {
    image: &'a [u8],
    pub phdrs: Vec<Phdr>,
}

impl<'a> Elf64<'a> {
    /// Check the ELF header (64-bit, little-endian, x86-64) and read the program headers; every
    /// offset and count is bounds-checked against the file.
    pub fn parse(image: &'a [u8]) -> Result<Self, BootError> {
        if image.len() < 64 {
            return Err(bad(format!(
                "truncated ELF64 header: {} bytes, the header is 64",
                image.len()
            )));
        }
        if !image.starts_with(b"\x7fELF") || image[4] != ELFCLASS64 {
            return Err(bad("not an ELF64 file"));
        }
        if image[5] != ELFDATA2LSB {
            return Err(bad("ELF64 kernel is not little-endian"));
        }
        let machine = u16_at(image, 18).unwrap_or(0);
        if machine != EM_X86_64 {
            return Err(bad(format!(
                "ELF64 kernel is for machine {machine}, not x86-64 ({EM_X86_64})"
            )));
        }
        let phoff = u64_at(image, 32).unwrap_or(0);
        let phentsize = u16_at(image, 54).unwrap_or(0) as usize;
        let phnum = u16_at(image, 56).unwrap_or(0) as usize;
        if phnum == 0 {
            return Err(bad("ELF64 kernel has no program headers"));
        }
        if phnum > MAX_PHDRS || !(PHDR_SIZE..=1024).contains(&phentsize) {
            return Err(bad(format!(
                "ELF64 program header table is implausible: {phnum} entries of {phentsize} bytes \
                 (expected at most {MAX_PHDRS} of at least {PHDR_SIZE})"
            )));
        }
        let table_end = usize::try_from(phoff)
            .ok()
            .and_then(|o| o.checked_add(phnum * phentsize))
            .filter(|&e| e <= image.len())
            .ok_or_else(|| {
                bad(format!(
                    "truncated ELF64: program headers at {phoff:#x} ({phnum} x {phentsize} bytes) \
                     run past the end of the {}-byte file",
                    image.len()
                ))
            })?;
        let phoff = table_end - phnum * phentsize;
        let mut phdrs = Vec::with_capacity(phnum);
        for i in 0..phnum {
            let o = phoff + i * phentsize;
            let f = |k: usize| u64_at(image, o + k).unwrap_or(0);
            phdrs.push(Phdr {
                kind: u32_at(image, o).unwrap_or(0),
                offset: f(8),
                paddr: f(24),
                filesz: f(32),
                memsz: f(40),
            });
        }
        Ok(Elf64 { image, phdrs })
    }

    /// The file bytes of a segment, or an error if they lie outside the file.
    fn data(&self, p: &Phdr) -> Result<&'a [u8], BootError> {
        let range = usize::try_from(p.offset).ok().and_then(|s| {
            let e = s.checked_add(usize::try_from(p.filesz).ok()?)?;
            Some(s..e)
        });
        range.and_then(|r| self.image.get(r)).ok_or_else(|| {
            bad(format!(
                "truncated ELF64: segment data at file offset {:#x} + {:#x} runs past the end \
                     of the {}-byte file",
                p.offset,
                p.filesz,
                self.image.len()
            ))
        })
    }

    /// The `XEN_ELFNOTE_PHYS32_ENTRY` address from the PT_NOTE segments (4- or 8-byte
    /// descriptor), if there is one.
    pub fn pvh_entry(&self) -> Result<Option<u64>, BootError> {
        for p in self.phdrs.iter().filter(|p| p.kind == PT_NOTE) {
            let notes = self.data(p)?;
            let mut o = 0usize;
            for _ in 0..MAX_NOTES {
                if o + 12 > notes.len() {
                    break;
                }
                let (Some(namesz), Some(descsz), Some(kind)) =
                    (u32_at(notes, o), u32_at(notes, o + 4), u32_at(notes, o + 8))
                else {
                    break;
                };
                let name_at = o + 12;
                let desc_at = name_at.saturating_add(align4(namesz));
                let next = desc_at.saturating_add(align4(descsz));
                let name = notes.get(name_at..name_at.saturating_add(namesz as usize));
                let desc = notes.get(desc_at..desc_at.saturating_add(descsz as usize));
                let (Some(name), Some(desc)) = (name, desc) else {
                    return Err(bad(format!(
                        "malformed ELF note at offset {o:#x} of a PT_NOTE segment: name/descriptor \
                         sizes {namesz}/{descsz} run past the segment"
                    )));
                };
                if kind == XEN_ELFNOTE_PHYS32_ENTRY && name == b"Xen\0" {
                    let entry = match desc.len() {
                        4 => u32_at(desc, 0).map(u64::from),
                        8 => u64_at(desc, 0),
                        n => {
                            return Err(bad(format!(
                                "XEN_ELFNOTE_PHYS32_ENTRY note has a {n}-byte descriptor (expected 4 or 8)"
                            )))
                        }
                    };
                    return Ok(entry);
                }
                o = next;
            }
        }
        Ok(None)
    }
}

fn align4(n: u32) -> usize {
    (n as usize).saturating_add(3) & !3
}

/// Load a PVH-capable ELF64 kernel and an optional initrd, write `hvm_start_info` and return
/// the CPU state at the 32-bit entry.
pub fn load(
    ram: &mut GuestRam,
    image: &[u8],
    initrd: Option<&[u8]>,
    cmdline: &str,
    rsdp: u64,
) -> Result<BootInfo, BootError> {
    let elf = Elf64::parse(image)?;
    let entry = elf.pvh_entry()?.ok_or_else(|| {
        bad("ELF64 kernel without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): build Linux with CONFIG_PVH=y")
    })?;
    super::write_low_memory(ram)?;
    // The kernel starts with paging off, so everything it is given must be below 4 GiB.
    let limit = ram.size().min(1 << 32);

    // PT_LOAD segments at their physical addresses, between 1 MiB and the end of RAM.
    let mut kernel_end = 0u64;
    let mut kernel_bytes = 0u64;
    let mut entry_ok = false;
    for p in elf
        .phdrs
        .iter()
        .filter(|p| p.kind == PT_LOAD && p.memsz > 0)
    {
        if p.filesz > p.memsz {
            return Err(bad(format!(
                "ELF64 segment at {:#x}: file size {:#x} exceeds memory size {:#x}",
                p.paddr, p.filesz, p.memsz
            )));
        }
        let end = p.paddr.checked_add(p.memsz).filter(|&e| e <= limit);
        let Some(end) = end.filter(|_| p.paddr >= BIOS_END) else {
            return Err(segment_outside(p, limit));
        };
        let data = elf.data(p)?;
        ram.write_phys(p.paddr, data)
            .map_err(|e| bad(e.to_string()))?;
        let bss = vec![0u8; (p.memsz - p.filesz) as usize];
        ram.write_phys(p.paddr + p.filesz, &bss)
            .map_err(|e| bad(e.to_string()))?;
        entry_ok |= (p.paddr..end).contains(&entry);
        kernel_end = kernel_end.max(end);
        kernel_bytes += p.memsz;
    }
    if kernel_end == 0 {
        return Err(bad("ELF64 kernel has no PT_LOAD segment"));
    }
    if !entry_ok {
        return Err(bad(format!(
            "PVH entry {entry:#x} is not inside any loaded ELF64 segment"
        )));
    }

    let cmd_addr = super::write_cmdline(ram, cmdline, CMDLINE_MAX)?;
    let (rd_addr, rd_size) = super::place_initrd(ram, initrd, limit, kernel_end)?;
    write_start_info(ram, cmd_addr, rsdp, (rd_addr, rd_size))?;

    Ok(BootInfo {
        state: entry_state(entry),
        summary: format!(
            "PVH vmlinux: entry {entry:#x}, kernel {} KiB up to {kernel_end:#x}, initrd {rd_size} at {rd_addr:#x}, cmdline {cmdline:?}",
            kernel_bytes / 1024
        ),
    })
}

/// The error for a segment outside 1 MiB .. min(end of RAM, 4 GiB).
fn segment_outside(p: &Phdr, limit: u64) -> BootError {
    if p.paddr < BIOS_END {
        return bad(format!(
            "ELF64 segment at {:#x} is below 1 MiB, where the machine keeps its boot structures \
             and ACPI tables",
            p.paddr
        ));
    }
    bad(format!(
        "ELF64 segment {:#x}+{:#x} does not fit in RAM below {limit:#x}; give more RAM with --ram-mb",
        p.paddr, p.memsz
    ))
}

/// `hvm_start_info` (version 1) with the command line, ACPI RSDP, the initrd as the one module
/// and the e820 map; plus the GDT its descriptors come from.
fn write_start_info(
    ram: &mut GuestRam,
    cmdline: u64,
    rsdp: u64,
    (rd_addr, rd_size): (u64, u64),
) -> Result<(), BootError> {
    let map = memory_map(ram.size());
    let n = map.len().min(at::MEMMAP_MAX);
    let nr_modules = u32::from(rd_size != 0);
    let mut si = Vec::with_capacity(56);
    si.extend_from_slice(&START_MAGIC.to_le_bytes()); // magic
    si.extend_from_slice(&1u32.to_le_bytes()); // version
    si.extend_from_slice(&0u32.to_le_bytes()); // flags
    si.extend_from_slice(&nr_modules.to_le_bytes());
    let modlist = if nr_modules != 0 { at::MODLIST } else { 0 };
    si.extend_from_slice(&modlist.to_le_bytes()); // modlist_paddr
    si.extend_from_slice(&cmdline.to_le_bytes()); // cmdline_paddr
    si.extend_from_slice(&rsdp.to_le_bytes()); // rsdp_paddr
    si.extend_from_slice(&at::MEMMAP.to_le_bytes()); // memmap_paddr
    si.extend_from_slice(&(n as u32).to_le_bytes()); // memmap_entries
    si.extend_from_slice(&0u32.to_le_bytes()); // reserved
    let mut m = Vec::with_capacity(32);
    for v in [rd_addr, rd_size, 0, 0] {
        m.extend_from_slice(&v.to_le_bytes()); // paddr, size, cmdline_paddr, reserved
    }
    let mut mm = Vec::with_capacity(n * 24);
    for e in map.iter().take(n) {
        mm.extend_from_slice(&e.addr.to_le_bytes());
        mm.extend_from_slice(&e.size.to_le_bytes());
        mm.extend_from_slice(&e.kind.to_le_bytes());
        mm.extend_from_slice(&0u32.to_le_bytes());
    }
    let gdt: Vec<u8> = GDT.iter().flat_map(|d| d.to_le_bytes()).collect();
    for (addr, bytes) in [
        (at::START_INFO, &si),
        (at::MODLIST, &m),
        (at::GDT, &gdt),
        (at::MEMMAP, &mm),
    ] {
        ram.write_phys(addr, bytes)
            .map_err(|_| BootError::RamTooSmall {
                need: addr + bytes.len() as u64,
                have: ram.size(),
                what: "hvm_start_info",
            })?;
    }
    Ok(())
}

/// The PVH ABI's start state at `entry` (see the module comment).
pub fn entry_state(entry: u64) -> CpuState {
    let mut st = CpuState::power_on();
    let data = Segment {
        selector: DATA_SEL,
        attr: 0xc093,
        limit: 0xffff_ffff,
        base: 0,
    };
    st.seg = [data; 6];
    st.seg[sreg::CS] = Segment {
        selector: CODE_SEL,
        attr: 0xc09b,
        limit: 0xffff_ffff,
        base: 0,
    };
    st.tr = Segment {
        selector: TSS_SEL,
        attr: 0x008b,
        limit: 0x67,
        base: 0,
    };
    st.gdtr = TableReg {
        base: at::GDT,
        limit: (GDT.len() * 8 - 1) as u16,
    };
    st.idtr = TableReg { base: 0, limit: 0 };
    st.cr0 = ctl::CR0_PE | ctl::CR0_ET;
    st.cr4 = 0;
    st.efer = 0;
    st.rflags = flags::FIXED1;
    st.rip = entry;
    st.gpr[reg::RBX] = at::START_INFO;
    st
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal ELF64 x86-64 file: one PT_LOAD of `code` at `paddr`, and a PT_NOTE with a
    /// Xen PHYS32_ENTRY note (8-byte descriptor) when `entry` is given.
    pub fn elf64(code: &[u8], paddr: u64, entry: Option<u64>) -> Vec<u8> {
        let phnum: u16 = if entry.is_some() { 2 } else { 1 };
        let data_off = 64 + PHDR_SIZE * phnum as usize;
        let mut note = Vec::new();
        if let Some(e) = entry {
            note.extend_from_slice(&4u32.to_le_bytes());
            note.extend_from_slice(&8u32.to_le_bytes());
            note.extend_from_slice(&XEN_ELFNOTE_PHYS32_ENTRY.to_le_bytes());
            note.extend_from_slice(b"Xen\0");
            note.extend_from_slice(&e.to_le_bytes());
        }
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = ELFCLASS64;
        f[5] = ELFDATA2LSB;
        f[6] = 1;
        f[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        f[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[52..54].copy_from_slice(&64u16.to_le_bytes());
        f[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        f[56..58].copy_from_slice(&phnum.to_le_bytes());
        let ph = |kind: u32, off: u64, paddr: u64, filesz: u64, memsz: u64| {
            let mut p = vec![0u8; PHDR_SIZE];
            p[..4].copy_from_slice(&kind.to_le_bytes());
            p[8..16].copy_from_slice(&off.to_le_bytes());
            p[16..24].copy_from_slice(&paddr.wrapping_add(0xffff_ffff_8000_0000).to_le_bytes());
            p[24..32].copy_from_slice(&paddr.to_le_bytes());
            p[32..40].copy_from_slice(&filesz.to_le_bytes());
            p[40..48].copy_from_slice(&memsz.to_le_bytes());
            p
        };
        let code_off = data_off + note.len();
        f.extend(ph(
            PT_LOAD,
            code_off as u64,
            paddr,
            code.len() as u64,
            code.len() as u64 + 0x1000,
        ));
        if entry.is_some() {
            f.extend(ph(PT_NOTE, data_off as u64, 0, note.len() as u64, 0));
        }
        f.extend(note);
        f.extend_from_slice(code);
        f
    }

    fn ram() -> GuestRam {
        GuestRam::new(64 << 20).unwrap()
    }

    #[test]
    fn loads_segments_start_info_and_entry_state() {
        let code: Vec<u8> = (0..200u8).collect();
        let img = elf64(&code, 0x100_0000, Some(0x100_0010));
        let mut ram = ram();
        let rd = vec![0xa5u8; 12345];
        let info = load(&mut ram, &img, Some(&rd), "console=ttyS0", 0xe0000).unwrap();
        let st = &info.state;
        assert_eq!(st.rip, 0x100_0010);
        assert_eq!(st.gpr[reg::RBX], LowMem::PVH_INFO);
        assert_eq!(st.cr0, ctl::CR0_PE | ctl::CR0_ET);
        assert_eq!((st.cr4, st.efer, st.rflags), (0, 0, 0x2));
        assert!(!st.seg[sreg::CS].long() && st.seg[sreg::CS].attr & 0x4000 != 0);
        assert_eq!(st.tr.limit, 0x67);
        assert_eq!(st.tr.attr & 0xf, 0xb, "busy 32-bit TSS");

        let mut b = vec![0u8; 200];
        ram.read_phys(0x100_0000, &mut b).unwrap();
        assert_eq!(b, code);
        let mut si = [0u8; 56];
        ram.read_phys(LowMem::PVH_INFO, &mut si).unwrap();
        let r32 = |o| u32_at(&si, o).unwrap();
        let r64 = |o| u64_at(&si, o).unwrap();
        assert_eq!((r32(0), r32(4), r32(8), r32(12)), (START_MAGIC, 1, 0, 1));
        assert_eq!(r64(24), LowMem::CMDLINE);
        assert_eq!(r64(32), 0xe0000);
        assert_eq!(r32(48), 5);
        let mut c = [0u8; 14];
        ram.read_phys(r64(24), &mut c).unwrap();
        assert_eq!(&c, b"console=ttyS0\0");
        let mut m = [0u8; 32];
        ram.read_phys(r64(16), &mut m).unwrap();
        let (rd_at, rd_len) = (u64_at(&m, 0).unwrap(), u64_at(&m, 8).unwrap());
        assert_eq!(rd_len, 12345);
        assert_eq!(rd_at % 4096, 0);
        assert!(rd_at >= 0x100_0000 + 200 + 0x1000 && rd_at + rd_len <= 64 << 20);
        ram.read_phys(rd_at, &mut b[..4]).unwrap();
        assert_eq!(b[..4], [0xa5; 4]);
        // The memory map: last entry is RAM from 1 MiB to the end.
        let mut e = [0u8; 24];
        ram.read_phys(r64(40) + 4 * 24, &mut e).unwrap();
        assert_eq!(u64_at(&e, 0), Some(0x10_0000));
        assert_eq!(u64_at(&e, 8), Some((64 << 20) - 0x10_0000));
        assert_eq!(u32_at(&e, 16), Some(1));
        // The GDT holds what the segment registers were loaded with.
        let mut g = [0u8; 32];
        ram.read_phys(st.gdtr.base, &mut g).unwrap();
        assert_eq!(u64_at(&g, 8), Some(GDT[1]));
        assert_eq!(u64_at(&g, 24), Some(GDT[3]));
    }

    #[test]
    fn no_initrd_means_no_modules_and_4_byte_notes_work() {
        let mut img = elf64(&[0xf4; 8], 0x20_0000, Some(0x20_0000));
        // Rewrite the note as a 4-byte descriptor (the note starts after 2 program headers).
        let n = 64 + 2 * PHDR_SIZE;
        img[n + 4..n + 8].copy_from_slice(&4u32.to_le_bytes());
        let mut ram = ram();
        let info = load(&mut ram, &img, None, "", 0).unwrap();
        assert_eq!(info.state.rip, 0x20_0000);
        let mut si = [0u8; 24];
        ram.read_phys(LowMem::PVH_INFO, &mut si).unwrap();
        assert_eq!(u32_at(&si, 12), Some(0));
        assert_eq!(u64_at(&si, 16), Some(0));
    }

    fn err(img: &[u8], rd: Option<&[u8]>) -> String {
        load(&mut ram(), img, rd, "", 0).unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_images_clearly() {
        let good = elf64(&[0x90; 64], 0x100_0000, Some(0x100_0000));
        // Truncated anywhere: an error, never a panic.
        for n in 0..good.len() {
            assert!(load(&mut ram(), &good[..n], None, "", 0).is_err(), "{n}");
        }
        assert!(err(&good[..63], None).contains("truncated ELF64 header"));
        assert!(err(&good[..100], None).contains("program headers"));
        // No note.
        let e = err(&elf64(&[0x90; 4], 0x100_0000, None), None);
        assert!(e.contains("PVH entry note"), "{e}");
        // Segment outside RAM, below 1 MiB, and with an overflowing end.
        let e = err(&elf64(&[0x90; 4], 0x4000_0000, Some(0x4000_0000)), None);
        assert!(e.contains("does not fit in RAM"), "{e}");
        let e = err(&elf64(&[0x90; 4], 0x8000, Some(0x8000)), None);
        assert!(e.contains("below 1 MiB"), "{e}");
        let mut img = good.clone();
        img[64 + 40..64 + 48].copy_from_slice(&u64::MAX.to_le_bytes()); // memsz
        assert!(err(&img, None).contains("does not fit in RAM"));
        img[64 + 32..64 + 40].copy_from_slice(&u64::MAX.to_le_bytes()); // filesz
        let e = err(&img, None);
        assert!(e.contains("does not fit in RAM"), "{e}");
        // filesz > memsz.
        let mut img = good.clone();
        img[64 + 40..64 + 48].copy_from_slice(&8u64.to_le_bytes());
        assert!(err(&img, None).contains("exceeds memory size"));
        // Segment data beyond the file.
        let mut img = good.clone();
        img[64 + 8..64 + 16].copy_from_slice(&0xffff_fff0u64.to_le_bytes());
        assert!(err(&img, None).contains("runs past the end"));
        // Absurd program header count / entry size / offset.
        let mut img = good.clone();
        img[56..58].copy_from_slice(&60000u16.to_le_bytes());
        assert!(err(&img, None).contains("implausible"));
        let mut img = good.clone();
        img[54..56].copy_from_slice(&8u16.to_le_bytes());
        assert!(err(&img, None).contains("implausible"));
        let mut img = good.clone();
        img[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&img, None).contains("truncated ELF64"));
        // Malformed note sizes.
        let mut img = good.clone();
        let n = 64 + 2 * PHDR_SIZE;
        img[n..n + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&img, None).contains("malformed ELF note"));
        // Entry outside the loaded segments.
        let e = err(&elf64(&[0x90; 4], 0x100_0000, Some(0x200_0000)), None);
        assert!(e.contains("not inside"), "{e}");
        // Wrong machine.
        let mut img = good.clone();
        img[18] = 3;
        assert!(err(&img, None).contains("not x86-64"));
        // Initrd that would overlap the kernel.
        let e = err(&good, Some(&vec![1u8; 63 << 20]));
        assert!(e.contains("initrd"), "{e}");
        // Command line too long.
        let e = load(&mut ram(), &good, None, &"x".repeat(3000), 0).unwrap_err();
        assert!(e.to_string().contains("command line"), "{e}");
    }
}
