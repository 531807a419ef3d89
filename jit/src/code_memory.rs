//! Executable memory for the JIT's module: compiled functions packed one after the other
//! across finalised batches, instead of a fresh page-aligned mapping whenever one does not
//! fit (cranelift-jit's `SystemMemoryProvider`).
//!
//! Why: with the default provider every batch, and every function that did not fit the rest
//! of its batch's page, started at offset 0 of a new page. A batch of one (a promotion is
//! finalised at once) is such a function. The first cache lines of all those functions share
//! the same L1 instruction-cache sets (the set index is the address bits below the page
//! size), and a dozen hot loops starting at offset 0 evict each other from an 8-way cache:
//! bits ran 6% slower with its loops promoted one by one than compiled in batches, with
//! the same code (session 40, docs/jit.md).
//!
//! How: code goes into chunks mapped read-write; a finalisation makes the pages written
//! since the previous one read-and-execute (W^X: a page is never writable and executable at
//! once; `crate::patch` makes a finalised page writable again, not executable, only to
//! rewrite exit jumps while the dispatcher runs). The next batch starts on the page after,
//! at the same offset within the page where the previous batch ended, so consecutive
//! functions keep consecutive cache sets; the part of that page below the offset stays
//! unused (as the rest of a batch's last page was before). Writable and read-only data (not used by our functions today) go to
//! cranelift-jit's own provider.

use cranelift_jit::{BranchProtection, JITMemoryKind, JITMemoryProvider, SystemMemoryProvider};
use cranelift_module::{ModuleError, ModuleResult};
use std::io;

/// The host page size this layout assumes (x86-64 Linux; checked in [`CodeMemory::new`]).
const PAGE: usize = 4096;

/// The size of a chunk of code memory (a larger function gets a chunk of its own size).
const CHUNK: usize = 1 << 20;

/// One mapping of code memory.
struct Chunk {
    base: *mut u8,
    len: usize,
}

/// The module's executable memory; see the module documentation.
pub struct CodeMemory {
    /// Every chunk mapped so far; the last is the one allocated from.
    chunks: Vec<Chunk>,
    /// The next free byte's offset in the last chunk.
    pos: usize,
    /// The offset in the last chunk below which its pages are read-and-execute (page
    /// aligned): no allocation goes there.
    sealed: usize,
    /// Ranges written since the last finalisation in chunks left behind (chunk index, start
    /// and end offsets), to seal with it.
    unsealed: Vec<(usize, usize, usize)>,
    /// Writable and read-only data.
    data: SystemMemoryProvider,
}

// SAFETY: the raw pointers are owned mappings only this value reads or changes; moving it to
// another thread moves that ownership with it (as cranelift-jit's own providers do).
unsafe impl Send for CodeMemory {}

impl CodeMemory {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(
            page, PAGE as libc::c_long,
            "JIT code memory assumes 4 KiB pages"
        );
        let pos = std::env::var("LOCKSTEP_JIT_CODE_OFFSET")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0usize)
            % PAGE;
        CodeMemory {
            chunks: Vec::new(),
            pos,
            sealed: 0,
            unsealed: Vec::new(),
            data: SystemMemoryProvider::new(),
        }
    }

    /// A new chunk of at least `min` bytes, read-write; allocation continues at `offset`
    /// in it. What was written of the chunk left behind since the last finalisation is
    /// sealed with the next one.
    fn new_chunk(&mut self, min: usize, offset: usize) -> io::Result<()> {
        let len = min.max(CHUNK).next_multiple_of(PAGE);
        // SAFETY: an anonymous private mapping at an address the kernel chooses; the
        // arguments are valid and the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if let Some(last) = self.chunks.len().checked_sub(1) {
            // `pos` (the end of the last allocation) never passes the chunk's end, whose
            // length is a multiple of the page.
            let end = self.pos.next_multiple_of(PAGE);
            if end > self.sealed {
                self.unsealed.push((last, self.sealed, end));
            }
        }
        self.chunks.push(Chunk {
            base: base.cast(),
            len,
        });
        self.pos = offset;
        self.sealed = 0;
        Ok(())
    }

    fn allocate_code(&mut self, size: usize, align: u64) -> io::Result<*mut u8> {
        let align = usize::try_from(align)
            .ok()
            .filter(|a| a.is_power_of_two() && *a <= PAGE)
            .ok_or_else(|| io::Error::other(format!("unsupported code alignment {align}")))?;
        // Past the sealed pages, at the offset in the page where the last batch ended.
        let from = if self.pos < self.sealed {
            self.sealed + self.pos % PAGE
        } else {
            self.pos
        };
        let at = from.next_multiple_of(align);
        let end = at.checked_add(size);
        let at = match (self.chunks.last(), end) {
            (Some(c), Some(end)) if end <= c.len => at,
            _ => {
                let offset = (self.pos % PAGE).next_multiple_of(align) % PAGE;
                let min = size
                    .checked_add(offset)
                    .ok_or_else(|| io::Error::other("code allocation too large"))?;
                self.new_chunk(min, offset)?;
                offset
            }
        };
        let chunk = self.chunks.last().expect("a chunk");
        self.pos = at + size;
        // SAFETY: `at + size <= chunk.len` (checked above, or the new chunk is at least that
        // long), so the pointer stays inside the mapping.
        Ok(unsafe { chunk.base.add(at) })
    }

    /// Make the bytes from offset `from` to `to` (page aligned) of chunk `i` read-and-execute;
    /// an error (not a call to mprotect) for a range that is not inside that chunk.
    fn seal(&self, i: usize, from: usize, to: usize) -> io::Result<()> {
        let chunk = self.chunks.get(i).filter(|c| from < to && to <= c.len);
        let Some(c) = chunk.filter(|_| from.is_multiple_of(PAGE) && to.is_multiple_of(PAGE)) else {
            return Err(io::Error::other(format!(
                "JIT code memory: sealing {from:#x}..{to:#x} of chunk {i}, outside it"
            )));
        };
        // SAFETY: the range lies inside chunk `i`'s mapping (checked above) and is page
        // aligned, as mprotect requires; no Rust reference points into it.
        let r = unsafe {
            libc::mprotect(
                c.base.add(from).cast(),
                to - from,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Default for CodeMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl JITMemoryProvider for CodeMemory {
    fn allocate(&mut self, size: usize, align: u64, kind: JITMemoryKind) -> io::Result<*mut u8> {
        match kind {
            JITMemoryKind::Executable => self.allocate_code(size, align),
            other => self.data.allocate(size, align, other),
        }
    }

    unsafe fn free_memory(&mut self) {
        for c in self.chunks.drain(..) {
            // SAFETY: each chunk is a mapping made by `new_chunk` of exactly this length,
            // unmapped once (drained); the caller guarantees no function in it runs again.
            unsafe { libc::munmap(c.base.cast(), c.len) };
        }
        self.unsealed.clear();
        self.pos = 0;
        self.sealed = 0;
        // SAFETY: forwarded under the caller's guarantee.
        unsafe { self.data.free_memory() };
    }

    fn finalize(&mut self, branch_protection: BranchProtection) -> ModuleResult<()> {
        let sealing = |e| ModuleError::Allocation { err: e };
        for (i, from, to) in std::mem::take(&mut self.unsealed) {
            self.seal(i, from, to).map_err(sealing)?;
        }
        if let Some(last) = self.chunks.len().checked_sub(1) {
            let end = self.pos.next_multiple_of(PAGE);
            if end > self.sealed {
                self.seal(last, self.sealed, end).map_err(sealing)?;
                self.sealed = end;
            }
        }
        // (x86-64 keeps instruction fetch coherent with stores: no cache flush needed.)
        self.data.finalize(branch_protection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The protection of the mapping that holds `addr`, from /proc/self/maps (`r-xp` …).
    fn protection(addr: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        for line in maps.lines() {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
            let Some((lo, hi)) = range.split_once('-') else {
                continue;
            };
            let lo = usize::from_str_radix(lo, 16).unwrap_or(usize::MAX);
            let hi = usize::from_str_radix(hi, 16).unwrap_or(0);
            if (lo..hi).contains(&addr) {
                return perms.to_string();
            }
        }
        panic!("{addr:#x} is not mapped");
    }

    /// Writes `mov eax, value; ret` at `p`.
    fn write_const_fn(p: *mut u8, value: u32) {
        let mut code = vec![0xb8];
        code.extend_from_slice(&value.to_le_bytes());
        code.push(0xc3);
        // SAFETY: `p` was just allocated with room for these 6 bytes and is writable.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len()) };
    }

    /// Calls the function at `p` (finalised, so executable).
    fn call(p: *mut u8) -> u32 {
        // SAFETY: `p` holds `mov eax, imm32; ret` (`write_const_fn`) in executable memory.
        let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(p) };
        f()
    }

    #[test]
    fn batches_pack_at_the_previous_end_and_sealed_pages_are_not_writable() {
        let mut m = CodeMemory::new();
        let a = m.allocate(100, 16, JITMemoryKind::Executable).unwrap();
        let b = m.allocate(6, 16, JITMemoryKind::Executable).unwrap();
        // One batch: one after the other.
        assert_eq!(b as usize, a as usize + 112);
        write_const_fn(a, 7);
        write_const_fn(b, 8);
        m.finalize(BranchProtection::None).unwrap();
        assert_eq!((call(a), call(b)), (7, 8));
        assert_eq!(protection(a as usize), "r-xp");
        // The next batch: on the next page, at the offset where the last one ended.
        let c = m.allocate(6, 16, JITMemoryKind::Executable).unwrap();
        let end = b as usize + 6;
        assert_eq!(c as usize % PAGE, end.next_multiple_of(16) % PAGE);
        assert!(c as usize / PAGE > end / PAGE, "{c:?} on a sealed page");
        assert_eq!(protection(c as usize), "rw-p");
        write_const_fn(c, 9);
        m.finalize(BranchProtection::None).unwrap();
        assert_eq!((call(a), call(b), call(c)), (7, 8, 9));
        // A function larger than a chunk gets a chunk of its own; later ones still fit.
        let big = m
            .allocate(CHUNK + 10, 16, JITMemoryKind::Executable)
            .unwrap();
        write_const_fn(big, 10);
        let d = m.allocate(6, 16, JITMemoryKind::Executable).unwrap();
        write_const_fn(d, 11);
        m.finalize(BranchProtection::None).unwrap();
        assert_eq!((call(big), call(d), call(c)), (10, 11, 9));
        assert_eq!(protection(big as usize), "r-xp");
        assert!(m.allocate(6, 8192, JITMemoryKind::Executable).is_err());
        // Batches of one function each (promotions): a page each, through several chunks;
        // every one stays callable and the sealing stays inside our mappings.
        let mut fns = Vec::new();
        for i in 0..(2 * CHUNK / PAGE) as u32 {
            let p = m.allocate(6, 16, JITMemoryKind::Executable).unwrap();
            write_const_fn(p, 100 + i);
            m.finalize(BranchProtection::None).unwrap();
            fns.push(p);
        }
        for (i, p) in fns.iter().enumerate() {
            assert_eq!(call(*p), 100 + i as u32);
        }
        assert_eq!((call(a), call(d)), (7, 11));
        // SAFETY: none of the functions is called again.
        unsafe { m.free_memory() };
    }
}
