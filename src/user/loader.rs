//! Loading a static ELF into a fresh guest and building the initial stack (SysV x86-64 ABI).
//!
//! Layout (all fixed, nothing randomised): non-PIE segments at their link addresses, static-PIE
//! at [`PIE_BASE`], the heap (brk) right after the highest segment, the 8 MiB stack below
//! [`STACK_TOP`], mmap regions top-down from [`super::memory::MMAP_BASE`].

use super::elf::{Elf, ElfError, ET_DYN, PF_R, PF_W, PF_X};
use super::guest::Guest;
use super::memory::{
    page_down, page_up, AddressSpace, OutOfMemory, MMAP_MIN_ADDR, PROT_EXEC, PROT_READ, PROT_WRITE,
    STACK_SIZE, STACK_TOP,
};
use lockstep_interp::mem::GuestRam;
use lockstep_interp::state::{reg, CpuState};
use lockstep_interp::{Cpu, CpuConfig};

/// Load address of a static-PIE (ET_DYN) executable: where Linux puts a PIE without ASLR.
pub const PIE_BASE: u64 = 0x5555_5555_4000;

/// The guest's environment: small, fixed, independent of the host.
pub const ENVIRONMENT: [&str; 4] = ["PATH=/usr/bin:/bin", "HOME=/", "TERM=dumb", "LANG=C"];

/// AT_HWCAP: CPUID leaf 1 EDX of our synthetic CPU, as Linux reports it.
pub fn hwcap() -> u64 {
    lockstep_interp::cpuid::query(1, 0, 0, lockstep_interp::cpuid::OsState::RESET).edx as u64
}

/// Fixed identity of the guest process.
pub const GUEST_PID: u64 = 1000;
pub const GUEST_PPID: u64 = 1;

/// Largest total size of argument and environment strings (Linux: a quarter of the stack limit).
pub const ARG_MAX: usize = (STACK_SIZE / 4) as usize;

// Auxiliary vector keys.
pub const AT_NULL: u64 = 0;
pub const AT_PHDR: u64 = 3;
pub const AT_PHENT: u64 = 4;
pub const AT_PHNUM: u64 = 5;
pub const AT_PAGESZ: u64 = 6;
pub const AT_BASE: u64 = 7;
pub const AT_FLAGS: u64 = 8;
pub const AT_ENTRY: u64 = 9;
pub const AT_UID: u64 = 11;
pub const AT_EUID: u64 = 12;
pub const AT_GID: u64 = 13;
pub const AT_EGID: u64 = 14;
pub const AT_PLATFORM: u64 = 15;
pub const AT_HWCAP: u64 = 16;
pub const AT_CLKTCK: u64 = 17;
pub const AT_SECURE: u64 = 23;
pub const AT_RANDOM: u64 = 25;
pub const AT_HWCAP2: u64 = 26;
pub const AT_EXECFN: u64 = 31;

/// Why a program could not be started (the `<problem>` of `lockstep: <path>: <problem>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    Elf(ElfError),
    Layout(String),
    TooBig,
    ArgsTooLong,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Elf(e) => e.fmt(f),
            LoadError::Layout(s) => write!(f, "invalid ELF: {s}"),
            LoadError::TooBig => f.write_str("program does not fit in guest memory (see --ram-mb)"),
            LoadError::ArgsTooLong => f.write_str("argument list too long"),
        }
    }
}

impl From<ElfError> for LoadError {
    fn from(e: ElfError) -> Self {
        LoadError::Elf(e)
    }
}

impl From<OutOfMemory> for LoadError {
    fn from(_: OutOfMemory) -> Self {
        LoadError::TooBig
    }
}

/// What the loader placed where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub entry: u64,
    pub phdr: u64,
    pub phnum: u64,
    pub bias: u64,
    pub brk_start: u64,
}

fn prot_of(flags: u32) -> u32 {
    let mut p = 0;
    if flags & PF_R != 0 {
        p |= PROT_READ;
    }
    if flags & PF_W != 0 {
        p |= PROT_WRITE;
    }
    if flags & PF_X != 0 {
        p |= PROT_EXEC;
    }
    p
}

/// Map the PT_LOAD segments of `elf` (the bytes of `file`) into `mm`.
pub fn load_segments(
    mm: &mut AddressSpace,
    ram: &mut GuestRam,
    elf: &Elf,
    file: &[u8],
) -> Result<Image, LoadError> {
    let (lo, hi) = elf.span();
    let bias = if elf.e_type == ET_DYN {
        PIE_BASE.wrapping_sub(page_down(lo))
    } else {
        0
    };
    let limit = STACK_TOP - STACK_SIZE;
    let lo_b = lo.wrapping_add(bias);
    let hi_b = hi.wrapping_add(bias);
    if lo_b < MMAP_MIN_ADDR || hi_b > limit || hi_b < lo_b {
        return Err(LoadError::Layout(format!(
            "segments at {lo_b:#x}..{hi_b:#x} lie outside the user address space \
             ({MMAP_MIN_ADDR:#x}..{limit:#x})"
        )));
    }
    for p in elf.loads() {
        let vaddr = p.vaddr.wrapping_add(bias); // in range: checked above
        let start = page_down(vaddr);
        let end = page_up(vaddr + p.memsz).ok_or(LoadError::TooBig)?;
        if end == start {
            continue;
        }
        mm.map_union(ram, start, end, prot_of(p.flags));
        // Like the kernel's file mapping: whole file pages from page_down(offset) up to the end
        // of the segment's file data, rounded up to a page (or the end of the file).
        // (If the offset is not congruent to the address, only the segment's own bytes.)
        let shift = vaddr - start;
        let (src, dst) = if p.offset >= shift {
            (p.offset - shift, start)
        } else {
            (p.offset, vaddr)
        };
        let data_end = p.offset + p.filesz;
        let to = page_up(data_end).unwrap_or(data_end).min(file.len() as u64);
        if p.filesz > 0 && to > src {
            mm.poke(ram, dst, &file[src as usize..to as usize])?;
        }
        // Zero the part of the last file page that belongs to .bss.
        if p.memsz > p.filesz {
            let bss = vaddr + p.filesz;
            let bss_page_end = page_up(bss).ok_or(LoadError::TooBig)?.min(end);
            if bss_page_end > bss {
                mm.poke(ram, bss, &vec![0u8; (bss_page_end - bss) as usize])?;
            }
        }
    }
    let brk_start = page_up(hi_b).ok_or(LoadError::TooBig)?;
    Ok(Image {
        entry: elf.entry.wrapping_add(bias),
        phdr: elf.phdr_vaddr().wrapping_add(bias),
        phnum: elf.phnum as u64,
        bias,
        brk_start,
    })
}

/// Build argc/argv/envp/auxv and the strings they point at below [`STACK_TOP`]; returns the
/// initial RSP (16-byte aligned, pointing at argc).
pub fn build_stack(
    mm: &mut AddressSpace,
    ram: &mut GuestRam,
    image: &Image,
    argv: &[Vec<u8>],
    envp: &[Vec<u8>],
    execfn: &[u8],
    random: [u8; 16],
) -> Result<u64, LoadError> {
    let strings: usize =
        argv.iter().chain(envp).map(|s| s.len() + 1).sum::<usize>() + execfn.len() + 1;
    if strings > ARG_MAX || argv.iter().chain(envp).any(|s| s.contains(&0)) {
        return Err(LoadError::ArgsTooLong);
    }
    mm.map(
        ram,
        STACK_TOP - STACK_SIZE,
        STACK_TOP,
        PROT_READ | PROT_WRITE,
    );

    // Strings, from low to high: argv, envp, execfn, then an 8-byte end marker at the top.
    let mut blob = Vec::with_capacity(strings);
    let mut ptrs = Vec::with_capacity(argv.len() + envp.len() + 1);
    let base = STACK_TOP - 8 - strings as u64;
    for s in argv
        .iter()
        .chain(envp)
        .map(|s| s.as_slice())
        .chain([execfn])
    {
        ptrs.push(base + blob.len() as u64);
        blob.extend_from_slice(s);
        blob.push(0);
    }
    mm.poke(ram, base, &blob)?;
    let execfn_ptr = ptrs[argv.len() + envp.len()];

    let platform = b"x86_64\0";
    let platform_ptr = base - platform.len() as u64;
    mm.poke(ram, platform_ptr, platform)?;
    let random_ptr = (platform_ptr & !15) - 16;
    mm.poke(ram, random_ptr, &random)?;

    let auxv: [(u64, u64); 19] = [
        (AT_HWCAP, hwcap()),
        (AT_PAGESZ, 4096),
        (AT_CLKTCK, 100),
        (AT_PHDR, image.phdr),
        (AT_PHENT, super::elf::PHDR_SIZE as u64),
        (AT_PHNUM, image.phnum),
        (AT_BASE, 0),
        (AT_FLAGS, 0),
        (AT_ENTRY, image.entry),
        (AT_UID, 0),
        (AT_EUID, 0),
        (AT_GID, 0),
        (AT_EGID, 0),
        (AT_SECURE, 0),
        (AT_RANDOM, random_ptr),
        (AT_HWCAP2, 0),
        (AT_EXECFN, execfn_ptr),
        (AT_PLATFORM, platform_ptr),
        (AT_NULL, 0),
    ];
    let mut words: Vec<u64> = Vec::new();
    words.push(argv.len() as u64);
    words.extend_from_slice(&ptrs[..argv.len()]);
    words.push(0);
    words.extend_from_slice(&ptrs[argv.len()..argv.len() + envp.len()]);
    words.push(0);
    for (k, v) in auxv {
        words.push(k);
        words.push(v);
    }
    let sp = (random_ptr - words.len() as u64 * 8) & !15;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    mm.poke(ram, sp, &bytes)?;
    Ok(sp)
}

/// Everything needed to start a program.
pub struct Setup<'a> {
    pub file: &'a [u8],
    /// argv, argv[0] included.
    pub argv: Vec<Vec<u8>>,
    /// AT_EXECFN: the path as given.
    pub execfn: Vec<u8>,
    pub ram_bytes: u64,
    pub random: [u8; 16],
    pub rng_seed: [u8; 32],
}

/// Parse and load the program and return a guest ready to run at its entry point.
pub fn load(s: &Setup) -> Result<(Guest, Image), LoadError> {
    let elf = Elf::parse(s.file)?;
    let mut ram = GuestRam::new(s.ram_bytes).map_err(|_| LoadError::TooBig)?;
    // Frames are handed out in order (`memory::Frames`): the RAM is used densely.
    if crate::host_heap::huge_pages_wanted() {
        ram.prefer_huge_pages();
    }
    let mut mm = AddressSpace::new(&mut ram)?;
    let image = load_segments(&mut mm, &mut ram, &elf, s.file)?;
    mm.init_brk(image.brk_start);
    let envp: Vec<Vec<u8>> = ENVIRONMENT.iter().map(|e| e.as_bytes().to_vec()).collect();
    let sp = build_stack(
        &mut mm, &mut ram, &image, &s.argv, &envp, &s.execfn, s.random,
    )?;
    // Linux starts a process with every GPR zero (RDX = 0: no atexit hook), IF set.
    let mut st = CpuState::long_mode_flat(mm.cr3, 3);
    st.gpr[reg::RSP] = sp;
    st.rip = image.entry;
    let cpu = Cpu::new(
        st,
        CpuConfig {
            syscall_to_host: true,
        },
        s.rng_seed,
    );
    Ok((Guest { cpu, ram, mm }, image))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::elf::tests::{build, load_seg};
    use crate::user::elf::ET_EXEC;

    fn setup(file: &[u8], argv: &[&str]) -> Result<(Guest, Image), LoadError> {
        load(&Setup {
            file,
            argv: argv.iter().map(|s| s.as_bytes().to_vec()).collect(),
            execfn: b"/bin/prog".to_vec(),
            ram_bytes: 64 << 20,
            random: *b"0123456789abcdef",
            rng_seed: [1; 32],
        })
    }

    fn small_exec(e_type: u16) -> Vec<u8> {
        // Text: header + phdrs + code in one R+X page; data: 16 bytes + 0x2000 of bss.
        let hdr = 64 + 2 * 56;
        let code = [0x0f, 0x05, 0x0f, 0x0b]; // syscall; ud2
        let data = *b"DATA-DATA-DATA!!";
        let mut tail = code.to_vec();
        tail.extend_from_slice(&data);
        let text_len = (hdr + code.len()) as u64;
        let base = if e_type == ET_EXEC { 0x40_0000 } else { 0 };
        build(
            e_type,
            base + hdr as u64,
            &[
                load_seg(0, base, text_len, text_len, PF_R | PF_X),
                load_seg(text_len, base + 0x1000 + text_len, 16, 0x2000, PF_R | PF_W),
            ],
            &tail,
        )
    }

    fn read(g: &mut Guest, va: u64, n: usize) -> Vec<u8> {
        g.read_mem(va, n).unwrap()
    }

    #[test]
    fn loads_segments_and_bss() {
        let (mut g, img) = setup(&small_exec(ET_EXEC), &["prog"]).unwrap();
        assert_eq!(img.bias, 0);
        assert_eq!(img.entry, 0x40_00b0);
        assert_eq!(img.phdr, 0x40_0040);
        assert_eq!(read(&mut g, 0x40_00b0, 2), [0x0f, 0x05]);
        assert_eq!(read(&mut g, 0x40_0000, 4), b"\x7fELF");
        let d = 0x40_1000 + 0xb4;
        assert_eq!(read(&mut g, d, 16), b"DATA-DATA-DATA!!");
        // .bss right after is zero, also on the same page as the data.
        assert_eq!(read(&mut g, d + 16, 64), vec![0u8; 64]);
        assert_eq!(img.brk_start, 0x40_4000);
        assert_eq!(g.mm.brk, 0x40_4000);
        // Text is not writable by the guest, data is not executable.
        assert!(g.write_mem(0x40_00b0, &[0]).is_err());
        assert!(g.write_mem(d, b"x").is_ok());
        let vmas: Vec<_> = g.mm.vmas().map(|(s, v)| (s, v.end, v.prot)).collect();
        assert_eq!(vmas[0], (0x40_0000, 0x40_1000, PROT_READ | PROT_EXEC));
        assert_eq!(vmas[1], (0x40_1000, 0x40_4000, PROT_READ | PROT_WRITE));
    }

    #[test]
    fn static_pie_loads_at_fixed_base() {
        let (mut g, img) = setup(&small_exec(ET_DYN), &["prog"]).unwrap();
        assert_eq!(img.bias, PIE_BASE);
        assert_eq!(img.entry, PIE_BASE + 0xb0);
        assert_eq!(g.cpu.state.rip, PIE_BASE + 0xb0);
        assert_eq!(read(&mut g, PIE_BASE, 4), b"\x7fELF");
    }

    #[test]
    fn initial_stack_follows_the_abi() {
        let (mut g, img) = setup(&small_exec(ET_EXEC), &["prog", "-x", "two words"]).unwrap();
        let sp = g.cpu.state.gpr[reg::RSP];
        assert_eq!(sp % 16, 0);
        assert_eq!(g.read_u64(sp).unwrap(), 3);
        let cstr = |g: &mut Guest, p: u64| g.read_cstr(p, 4096).unwrap().unwrap();
        let mut at = sp + 8;
        let mut args = vec![];
        loop {
            let p = g.read_u64(at).unwrap();
            at += 8;
            if p == 0 {
                break;
            }
            args.push(cstr(&mut g, p));
        }
        assert_eq!(args, [&b"prog"[..], b"-x", b"two words"]);
        let mut env = vec![];
        loop {
            let p = g.read_u64(at).unwrap();
            at += 8;
            if p == 0 {
                break;
            }
            env.push(String::from_utf8(cstr(&mut g, p)).unwrap());
        }
        assert_eq!(env, ENVIRONMENT);
        let mut aux = std::collections::BTreeMap::new();
        loop {
            let k = g.read_u64(at).unwrap();
            let v = g.read_u64(at + 8).unwrap();
            at += 16;
            if k == AT_NULL {
                break;
            }
            assert!(aux.insert(k, v).is_none(), "duplicate auxv key {k}");
        }
        assert_eq!(aux[&AT_PHDR], img.phdr);
        assert_eq!(aux[&AT_PHNUM], 2);
        assert_eq!(aux[&AT_PHENT], 56);
        assert_eq!(aux[&AT_ENTRY], img.entry);
        assert_eq!(aux[&AT_PAGESZ], 4096);
        assert_eq!(aux[&AT_HWCAP], hwcap());
        assert_ne!(hwcap() & (1 << 26), 0, "SSE2 advertised");
        assert_eq!(aux[&AT_CLKTCK], 100);
        assert_eq!(aux[&AT_SECURE], 0);
        assert_eq!(aux[&AT_BASE], 0);
        assert_eq!(aux.len(), 18);
        assert_eq!(read(&mut g, aux[&AT_RANDOM], 16), b"0123456789abcdef");
        assert_eq!(cstr(&mut g, aux[&AT_PLATFORM]), b"x86_64");
        assert_eq!(cstr(&mut g, aux[&AT_EXECFN]), b"/bin/prog");
        // Registers: all zero but RSP; entry RIP.
        for (i, &v) in g.cpu.state.gpr.iter().enumerate() {
            if i != reg::RSP {
                assert_eq!(v, 0, "gpr {i}");
            }
        }
        assert_eq!(g.cpu.state.rip, img.entry);
        assert_eq!(g.cpu.state.cpl(), 3);
    }

    #[test]
    fn static_pie_linked_high_still_loads_at_the_base() {
        let f = build(
            ET_DYN,
            0x7000_0000_0040,
            &[load_seg(0, 0x7000_0000_0000, 120, 0x3000, PF_R | PF_X)],
            &[],
        );
        let (mut g, img) = setup(&f, &["p"]).unwrap();
        assert_eq!(img.entry, PIE_BASE + 0x40);
        assert_eq!(img.brk_start, PIE_BASE + 0x3000);
        assert_eq!(read(&mut g, PIE_BASE, 4), b"\x7fELF");
    }

    #[test]
    fn rejects_layout_errors() {
        let f = build(ET_EXEC, 0x1000, &[load_seg(0, 0x1000, 64, 64, PF_R)], &[]);
        assert!(matches!(setup(&f, &["p"]), Err(LoadError::Layout(_))));
        let f = build(
            ET_EXEC,
            0x1000,
            &[load_seg(0, STACK_TOP - 0x1000, 64, 64, PF_R)],
            &[],
        );
        assert!(matches!(setup(&f, &["p"]), Err(LoadError::Layout(_))));
        let big = "x".repeat(ARG_MAX);
        assert_eq!(
            setup(&small_exec(ET_EXEC), &["p", &big]).err(),
            Some(LoadError::ArgsTooLong)
        );
    }
}
