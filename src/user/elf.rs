//! A small, fully bounds-checked ELF64 reader for static x86-64 Linux executables.
//!
//! Only what loading needs: the file header, the program headers, and the checks that turn a
//! file we cannot run into a one-line reason (see [`ElfError`]).

use std::fmt;

/// `e_type` of a fixed-address executable.
pub const ET_EXEC: u16 = 2;
/// `e_type` of a position-independent object (shared library or PIE).
pub const ET_DYN: u16 = 3;
/// `e_machine` of x86-64.
pub const EM_X86_64: u16 = 62;

pub const PT_LOAD: u32 = 1;
pub const PT_INTERP: u32 = 3;
pub const PT_PHDR: u32 = 6;
pub const PT_TLS: u32 = 7;

/// Segment permission bits (`p_flags`).
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;
pub const PF_R: u32 = 4;

/// Size of an ELF64 file header.
pub const EHDR_SIZE: usize = 64;
/// Size of an ELF64 program header.
pub const PHDR_SIZE: usize = 56;
/// The most program headers we accept (Linux caps the table at 64 KiB).
const MAX_PHNUM: usize = 65536 / PHDR_SIZE;

/// Why a file cannot be run. `Display` gives the `<problem>` part of
/// `lockstep: <path>: <problem>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfError {
    NotElf,
    Truncated(&'static str),
    Class32,
    BadClass(u8),
    BigEndian,
    BadVersion,
    WrongMachine(u16),
    NotExecutable(u16),
    Dynamic(String),
    Invalid(String),
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElfError::NotElf => f.write_str("not an ELF file"),
            ElfError::Truncated(what) => write!(f, "truncated ELF file ({what} past end of file)"),
            ElfError::Class32 => f.write_str("32-bit ELF is not supported (need a 64-bit x86-64 executable)"),
            ElfError::BadClass(c) => write!(f, "bad ELF class {c}"),
            ElfError::BigEndian => f.write_str("big-endian ELF is not supported"),
            ElfError::BadVersion => f.write_str("bad ELF version"),
            ElfError::WrongMachine(m) => {
                write!(f, "wrong machine (e_machine {m}, need x86-64 = 62)")
            }
            ElfError::NotExecutable(t) => write!(f, "not an executable (e_type {t})"),
            ElfError::Dynamic(interp) => write!(
                f,
                "dynamically linked (needs interpreter {interp}); only static executables are supported"
            ),
            ElfError::Invalid(why) => write!(f, "invalid ELF: {why}"),
        }
    }
}

/// One program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phdr {
    pub p_type: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
    pub align: u64,
}

/// A parsed, validated executable.
#[derive(Clone, Debug)]
pub struct Elf {
    pub e_type: u16,
    pub entry: u64,
    pub phoff: u64,
    pub phnum: u16,
    pub phdrs: Vec<Phdr>,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

impl Elf {
    /// Parse and validate `file`. Every offset and size is checked against the file length.
    pub fn parse(file: &[u8]) -> Result<Elf, ElfError> {
        if file.len() < 4 || file[..4] != *b"\x7fELF" {
            return Err(ElfError::NotElf);
        }
        if file.len() < 5 {
            return Err(ElfError::Truncated("ELF header"));
        }
        match file[4] {
            2 => {}
            1 => return Err(ElfError::Class32),
            c => return Err(ElfError::BadClass(c)),
        }
        if file.len() < EHDR_SIZE {
            return Err(ElfError::Truncated("ELF header"));
        }
        match file[5] {
            1 => {}
            2 => return Err(ElfError::BigEndian),
            _ => return Err(ElfError::Invalid(format!("bad data encoding {}", file[5]))),
        }
        if file[6] != 1 {
            return Err(ElfError::BadVersion);
        }
        let hdr = |off| u16_at(file, off).ok_or(ElfError::Truncated("ELF header"));
        let e_type = hdr(16)?;
        let e_machine = hdr(18)?;
        if e_machine != EM_X86_64 {
            return Err(ElfError::WrongMachine(e_machine));
        }
        if e_type != ET_EXEC && e_type != ET_DYN {
            return Err(ElfError::NotExecutable(e_type));
        }
        let entry = u64_at(file, 24).ok_or(ElfError::Truncated("ELF header"))?;
        let phoff = u64_at(file, 32).ok_or(ElfError::Truncated("ELF header"))?;
        let phentsize = hdr(54)?;
        let phnum = hdr(56)?;
        if phnum == 0 {
            return Err(ElfError::Invalid("no program headers".into()));
        }
        if phentsize as usize != PHDR_SIZE {
            return Err(ElfError::Invalid(format!(
                "program header size {phentsize}, expected {PHDR_SIZE}"
            )));
        }
        if phnum as usize > MAX_PHNUM {
            return Err(ElfError::Invalid(format!("{phnum} program headers")));
        }
        let table_len = phnum as u64 * PHDR_SIZE as u64;
        let table_end = phoff
            .checked_add(table_len)
            .ok_or(ElfError::Truncated("program headers"))?;
        if table_end > file.len() as u64 {
            return Err(ElfError::Truncated("program headers"));
        }
        let mut phdrs = Vec::with_capacity(phnum as usize);
        for i in 0..phnum as usize {
            let b = phoff as usize + i * PHDR_SIZE;
            let get64 = |o| u64_at(file, b + o).ok_or(ElfError::Truncated("program headers"));
            let get32 = |o| u32_at(file, b + o).ok_or(ElfError::Truncated("program headers"));
            phdrs.push(Phdr {
                p_type: get32(0)?,
                flags: get32(4)?,
                offset: get64(8)?,
                vaddr: get64(16)?,
                filesz: get64(32)?,
                memsz: get64(40)?,
                align: get64(48)?,
            });
        }
        let elf = Elf {
            e_type,
            entry,
            phoff,
            phnum,
            phdrs,
        };
        elf.validate(file)?;
        Ok(elf)
    }

    fn validate(&self, file: &[u8]) -> Result<(), ElfError> {
        if let Some(p) = self.phdrs.iter().find(|p| p.p_type == PT_INTERP) {
            let interp = p
                .offset
                .checked_add(p.filesz)
                .filter(|&end| end <= file.len() as u64)
                .map(|end| &file[p.offset as usize..end as usize])
                .map(|b| {
                    let b = b.split(|&c| c == 0).next().unwrap_or(b);
                    String::from_utf8_lossy(b).into_owned()
                })
                .unwrap_or_else(|| "?".into());
            return Err(ElfError::Dynamic(interp));
        }
        let mut prev_end = 0u64;
        let mut any = false;
        for p in self.loads() {
            any = true;
            let file_end = p
                .offset
                .checked_add(p.filesz)
                .ok_or(ElfError::Truncated("segment"))?;
            if file_end > file.len() as u64 {
                return Err(ElfError::Truncated("segment data"));
            }
            if p.filesz > p.memsz {
                return Err(ElfError::Invalid(
                    "segment file size exceeds memory size".into(),
                ));
            }
            let end = p
                .vaddr
                .checked_add(p.memsz)
                .ok_or_else(|| ElfError::Invalid("segment address overflows".into()))?;
            if p.vaddr < prev_end {
                return Err(ElfError::Invalid(
                    "loadable segments overlap or are not in ascending order".into(),
                ));
            }
            prev_end = end;
        }
        if !any {
            return Err(ElfError::Invalid("no loadable segments".into()));
        }
        Ok(())
    }

    /// The PT_LOAD segments in file order (ascending addresses, checked by `parse`).
    pub fn loads(&self) -> impl Iterator<Item = &Phdr> {
        self.phdrs.iter().filter(|p| p.p_type == PT_LOAD)
    }

    /// Lowest and end (exclusive) virtual address of the loadable segments, before any bias.
    pub fn span(&self) -> (u64, u64) {
        let lo = self.loads().map(|p| p.vaddr).min().unwrap_or(0);
        let hi = self.loads().map(|p| p.vaddr + p.memsz).max().unwrap_or(0);
        (lo, hi)
    }

    /// Address of the program headers in memory (before bias), for AT_PHDR: PT_PHDR if present,
    /// else the load segment holding the table, else (like older kernels) the first segment's
    /// address plus `e_phoff`.
    pub fn phdr_vaddr(&self) -> u64 {
        if let Some(p) = self.phdrs.iter().find(|p| p.p_type == PT_PHDR) {
            return p.vaddr;
        }
        let table_len = self.phnum as u64 * PHDR_SIZE as u64;
        for p in self.loads() {
            if self.phoff >= p.offset && self.phoff + table_len <= p.offset + p.filesz {
                return p.vaddr + (self.phoff - p.offset);
            }
        }
        self.loads()
            .next()
            .map(|p| p.vaddr.wrapping_sub(p.offset).wrapping_add(self.phoff))
            .unwrap_or(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal valid ELF64 executable image: header, `segs` program headers, then data.
    pub fn build(e_type: u16, entry: u64, segs: &[Phdr], tail: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; EHDR_SIZE];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[6] = 1;
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[24..32].copy_from_slice(&entry.to_le_bytes());
        f[32..40].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        f[52..54].copy_from_slice(&(EHDR_SIZE as u16).to_le_bytes());
        f[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        f[56..58].copy_from_slice(&(segs.len() as u16).to_le_bytes());
        for p in segs {
            let mut h = [0u8; PHDR_SIZE];
            h[0..4].copy_from_slice(&p.p_type.to_le_bytes());
            h[4..8].copy_from_slice(&p.flags.to_le_bytes());
            h[8..16].copy_from_slice(&p.offset.to_le_bytes());
            h[16..24].copy_from_slice(&p.vaddr.to_le_bytes());
            h[24..32].copy_from_slice(&p.vaddr.to_le_bytes());
            h[32..40].copy_from_slice(&p.filesz.to_le_bytes());
            h[40..48].copy_from_slice(&p.memsz.to_le_bytes());
            h[48..56].copy_from_slice(&p.align.to_le_bytes());
            f.extend_from_slice(&h);
        }
        f.extend_from_slice(tail);
        f
    }

    pub fn load_seg(offset: u64, vaddr: u64, filesz: u64, memsz: u64, flags: u32) -> Phdr {
        Phdr {
            p_type: PT_LOAD,
            flags,
            offset,
            vaddr,
            filesz,
            memsz,
            align: 4096,
        }
    }

    fn sample() -> Vec<u8> {
        let mut tail = vec![0u8; 64];
        tail[0] = 0x90;
        build(
            ET_EXEC,
            0x40_1000,
            &[load_seg(
                0,
                0x40_0000,
                64 + 56 + 64,
                64 + 56 + 64,
                PF_R | PF_X,
            )],
            &tail,
        )
    }

    #[test]
    fn parses_a_valid_file() {
        let e = Elf::parse(&sample()).unwrap();
        assert_eq!(e.entry, 0x40_1000);
        assert_eq!(e.loads().count(), 1);
        assert_eq!(e.phdr_vaddr(), 0x40_0040);
        assert_eq!(e.span(), (0x40_0000, 0x40_0000 + 184));
    }

    #[test]
    fn rejects_bad_files_with_reasons() {
        assert_eq!(Elf::parse(b"hello world\n").unwrap_err(), ElfError::NotElf);
        assert_eq!(Elf::parse(b"").unwrap_err(), ElfError::NotElf);
        let f = sample();
        assert_eq!(
            Elf::parse(&f[..40]).unwrap_err(),
            ElfError::Truncated("ELF header")
        );
        assert_eq!(
            Elf::parse(&f[..80]).unwrap_err(),
            ElfError::Truncated("program headers")
        );
        assert_eq!(
            Elf::parse(&f[..150]).unwrap_err(),
            ElfError::Truncated("segment data")
        );
        let mut g = f.clone();
        g[4] = 1;
        assert_eq!(Elf::parse(&g).unwrap_err(), ElfError::Class32);
        let mut g = f.clone();
        g[18] = 3; // EM_386
        assert_eq!(Elf::parse(&g).unwrap_err(), ElfError::WrongMachine(3));
        let mut g = f.clone();
        g[16] = 1; // ET_REL
        assert_eq!(Elf::parse(&g).unwrap_err(), ElfError::NotExecutable(1));
        let mut g = f.clone();
        g[54] = 32;
        assert!(matches!(Elf::parse(&g).unwrap_err(), ElfError::Invalid(_)));
    }

    #[test]
    fn rejects_interpreter_and_overflow() {
        let interp = b"/lib64/ld-linux-x86-64.so.2\0";
        let off = (EHDR_SIZE + 2 * PHDR_SIZE) as u64;
        let f = build(
            ET_DYN,
            0x1000,
            &[
                Phdr {
                    p_type: PT_INTERP,
                    flags: PF_R,
                    offset: off,
                    vaddr: off,
                    filesz: interp.len() as u64,
                    memsz: interp.len() as u64,
                    align: 1,
                },
                load_seg(0, 0, 200, 200, PF_R),
            ],
            interp,
        );
        let e = Elf::parse(&f).unwrap_err();
        assert_eq!(e, ElfError::Dynamic("/lib64/ld-linux-x86-64.so.2".into()));
        assert!(e.to_string().starts_with("dynamically linked"));

        let f = build(
            ET_EXEC,
            0,
            &[load_seg(0, u64::MAX - 10, 100, 100, PF_R)],
            &[0; 100],
        );
        assert!(matches!(Elf::parse(&f).unwrap_err(), ElfError::Invalid(_)));
        let f = build(
            ET_EXEC,
            0,
            &[load_seg(u64::MAX - 10, 0x40_0000, 100, 100, PF_R)],
            &[0; 100],
        );
        assert!(matches!(
            Elf::parse(&f).unwrap_err(),
            ElfError::Truncated(_)
        ));
    }
}
