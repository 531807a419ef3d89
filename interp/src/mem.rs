//! Guest physical RAM (one anonymous mapping) with code-page tracking for exact self-modifying code.

use memmap2::MmapMut;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

pub const PAGE_SIZE: u64 = 4096;
pub const PAGE_SHIFT: u32 = 12;

#[derive(Debug, Error)]
pub enum MemError {
    #[error("guest RAM size {0} bytes is not a positive multiple of 4096")]
    BadSize(u64),
    #[error("cannot map {size} bytes of guest RAM: {source}")]
    Map { size: u64, source: std::io::Error },
    #[error("guest physical range {addr:#x}+{len:#x} lies outside RAM ({ram:#x} bytes)")]
    OutOfRange { addr: u64, len: u64, ram: u64 },
}

/// Guest physical memory.
///
/// Each page has a *code version*: when code is decoded from a page the page is marked, and the
/// first write to a marked page bumps its version and clears the mark. Decoded blocks remember
/// the versions of the pages they came from and are dropped when a version moved on.
pub struct GuestRam {
    map: MmapMut,
    size: u64,
    /// Per page: code version (bit 31 = page currently holds decoded code).
    code: CodeTable,
    /// lockstep-jit's `--verify` mode: when `Some`, every write noted by [`GuestRam::note_write`]
    /// is logged as (physical address, bytes before the write), so a block's writes can be
    /// compared and undone. Writers call `note_write` before changing the bytes.
    pub write_log: Option<Vec<(u64, Vec<u8>)>>,
    /// Moves on whenever any page's code version does (see [`GuestRam::code_epoch`]).
    code_epoch: u64,
}

/// A starting value for a cache epoch counter that no other instance has used, so that an epoch
/// remembered from one instance (RAM, TLB) never matches another instance's by accident.
pub fn fresh_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1 << 32);
    NEXT.fetch_add(1 << 32, Ordering::Relaxed)
}

const CODE_MARK: u32 = 1 << 31;

/// The code words of [`GuestRam`], one `u32` per page, in an anonymous mapping of their own:
/// the host zero-fills its pages when first touched, so a large RAM (user mode's default is
/// 4 GiB: a 4 MiB table) costs nothing at start for the pages that never hold code. (A
/// zeroed heap allocation was cleared eagerly: ~0.5 ms of every `lockstep user` run.)
struct CodeTable {
    map: MmapMut,
    len: usize,
}

impl CodeTable {
    fn new(len: usize) -> std::io::Result<CodeTable> {
        let map = MmapMut::map_anon(len.max(1) * 4)?;
        Ok(CodeTable { map, len })
    }

    fn words(&self) -> &[u32] {
        // SAFETY: the mapping is page-aligned (so aligned for `u32`), at least `len * 4`
        // bytes long, zero-filled by the host at creation (every bit pattern is a valid
        // `u32`), and borrowed from `self`, which owns it, for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<u32>(), self.len) }
    }

    fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `words`, with the mapping borrowed mutably and exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast::<u32>(), self.len) }
    }
}

/// The code word ([`GuestRam::code_word`]) of a page holding decoded code of `version`.
pub const fn valid_code_word(version: u32) -> u32 {
    version | CODE_MARK
}

impl GuestRam {
    /// Map `size` bytes of zeroed RAM (lazily backed by the host).
    pub fn new(size: u64) -> Result<Self, MemError> {
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(MemError::BadSize(size));
        }
        let map =
            MmapMut::map_anon(size as usize).map_err(|source| MemError::Map { size, source })?;
        Ok(GuestRam {
            map,
            size,
            code: CodeTable::new((size / PAGE_SIZE) as usize)
                .map_err(|source| MemError::Map { size, source })?,
            write_log: None,
            code_epoch: fresh_epoch(),
        })
    }

    /// Ask the host to back this RAM with transparent huge pages (`MADV_HUGEPAGE`; a hint,
    /// host-side only: nothing the guest sees changes, and a host without them ignores it).
    /// Meant for RAM used densely from its start, as user mode hands out physical frames in
    /// order: one 2 MiB host page fault then covers 512 guest pages (heap's run: 8,167 host
    /// page faults → 679, ~5–11% less time). Not for a machine's RAM, which a kernel touches
    /// scattered over its whole size: each 2 MiB touched would be zeroed whole.
    pub fn prefer_huge_pages(&self) {
        #[cfg(target_os = "linux")]
        let _ = self.map.advise(memmap2::Advice::HugePage);
    }

    #[inline]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// True when `[addr, addr+len)` lies in RAM.
    #[inline]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr.checked_add(len).is_some_and(|end| end <= self.size)
    }

    fn check(&self, addr: u64, len: u64) -> Result<usize, MemError> {
        if self.contains(addr, len) {
            Ok(addr as usize)
        } else {
            Err(MemError::OutOfRange {
                addr,
                len,
                ram: self.size,
            })
        }
    }

    /// The whole of RAM as bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The whole of RAM, writable. Writers that bypass [`GuestRam::write_phys`] must call
    /// [`GuestRam::note_write`] for the pages they touch.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Copy out of guest physical memory.
    pub fn read_phys(&self, addr: u64, out: &mut [u8]) -> Result<(), MemError> {
        let a = self.check(addr, out.len() as u64)?;
        out.copy_from_slice(&self.map[a..a + out.len()]);
        Ok(())
    }

    /// Copy into guest physical memory, keeping code tracking exact.
    pub fn write_phys(&mut self, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let a = self.check(addr, data.len() as u64)?;
        if !data.is_empty() {
            self.note_write(addr, data.len() as u64);
        }
        self.map[a..a + data.len()].copy_from_slice(data);
        Ok(())
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, MemError> {
        let mut b = [0; 8];
        self.read_phys(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), MemError> {
        self.write_phys(addr, &v.to_le_bytes())
    }

    /// The raw code word of a page: its version with the mark bit ([`GuestRam::code_table`]).
    /// A block decoded from the page at version `v` is valid while this is
    /// [`valid_code_word`]`(v)` (`Block::valid`, and compiled code's entry check).
    #[inline]
    pub fn code_word(&self, page: u64) -> u32 {
        self.code.words()[page as usize]
    }

    /// For lockstep-jit's compiled blocks: the code words of all pages, one `u32` per page,
    /// indexed by physical page number. The table is allocated once with the RAM and never
    /// resized, so the pointer stays valid while the `GuestRam` lives.
    pub fn code_table(&self) -> *const u32 {
        self.code.words().as_ptr()
    }

    /// Does the page currently hold decoded code?
    #[inline]
    pub fn is_code_page(&self, page: u64) -> bool {
        self.code.words()[page as usize] & CODE_MARK != 0
    }

    /// A value that changes whenever any page's code version changes (a write hit a page holding
    /// decoded code). While it stays the same, every decoded block found valid stays valid.
    #[inline]
    pub fn code_epoch(&self) -> u64 {
        self.code_epoch
    }

    /// Mark a page as holding decoded code; returns its version.
    pub fn mark_code(&mut self, page: u64) -> u32 {
        let v = &mut self.code.words_mut()[page as usize];
        *v |= CODE_MARK;
        *v & !CODE_MARK
    }

    /// `--verify` (write log on): log the old bytes of the whole 4 KiB page at `page` (a
    /// physical page address), before a write TLB entry lets stores reach it unlogged.
    #[inline]
    pub fn log_page(&mut self, page: u64) {
        if self.write_log.is_some() {
            self.log_old(page & !(PAGE_SIZE - 1), PAGE_SIZE);
        }
    }

    /// Push the current bytes of `[addr, addr+len)` (when all in RAM) to the write log, if on.
    fn log_old(&mut self, addr: u64, len: u64) {
        if let Some(log) = &mut self.write_log {
            if let Some(old) = addr
                .checked_add(len)
                .and_then(|end| self.map.get(addr as usize..end as usize))
            {
                log.push((addr, old.to_vec()));
            }
        }
    }

    /// Record a write to `[addr, addr+len)`: every marked page in the range gets a new version.
    /// Returns true if any code page was hit. Call it before writing the bytes (the verify
    /// write log records the old bytes here).
    #[inline]
    pub fn note_write(&mut self, addr: u64, len: u64) -> bool {
        if self.write_log.is_some() {
            self.log_old(addr, len);
        }
        let first = addr >> PAGE_SHIFT;
        let last = (addr + len.max(1) - 1) >> PAGE_SHIFT;
        let mut hit = false;
        for p in first..=last {
            if let Some(v) = self.code.words_mut().get_mut(p as usize) {
                if *v & CODE_MARK != 0 {
                    *v = (*v & !CODE_MARK).wrapping_add(1) & !CODE_MARK;
                    hit = true;
                }
            }
        }
        if hit {
            self.code_epoch = self.code_epoch.wrapping_add(1);
        }
        hit
    }
}

/// Everything outside RAM that the CPU can reach: MMIO and port I/O. Devices live behind it.
pub trait Bus {
    /// Read `size` (1, 2, 4, 8) bytes at a physical address that is not RAM.
    fn mmio_read(&mut self, addr: u64, size: u8) -> u64;
    /// Write `size` bytes at a physical address that is not RAM.
    fn mmio_write(&mut self, addr: u64, size: u8, value: u64);
    /// IN from an I/O port.
    fn pio_in(&mut self, port: u16, size: u8) -> u32;
    /// OUT to an I/O port.
    fn pio_out(&mut self, port: u16, size: u8, value: u32);
    /// Called right before every device access with the vCPU's exact retired-instruction
    /// count (its virtual time), so devices can compute timer and counter values.
    fn set_now(&mut self, _retired: u64) {}
    /// RDMSR of an MSR a device owns (local APIC: x2APIC registers, TSC deadline). `None`:
    /// not a device MSR (the CPU handles it or raises #GP).
    fn msr_read(&mut self, _msr: u32) -> Option<u64> {
        None
    }
    /// WRMSR of a device-owned MSR; `false`: not a device MSR.
    fn msr_write(&mut self, _msr: u32, _value: u64) -> bool {
        false
    }
}

/// A bus with nothing on it: unmapped reads return all ones, writes are dropped, as on a PC.
#[derive(Default, Debug, Clone, Copy)]
pub struct NullBus;

impl Bus for NullBus {
    fn mmio_read(&mut self, _addr: u64, size: u8) -> u64 {
        if size >= 8 {
            u64::MAX
        } else {
            (1u64 << (size as u32 * 8)) - 1
        }
    }
    fn mmio_write(&mut self, _addr: u64, _size: u8, _value: u64) {}
    fn pio_in(&mut self, _port: u16, size: u8) -> u32 {
        if size >= 4 {
            u32::MAX
        } else {
            (1u32 << (size as u32 * 8)) - 1
        }
    }
    fn pio_out(&mut self, _port: u16, _size: u8, _value: u32) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code words of a large RAM (user mode's default 4 GiB: a million pages) start at
    /// zero everywhere, the last page included, and a write to a marked page moves its version
    /// on (and the epoch) while leaving its neighbours alone.
    #[test]
    fn code_words_of_a_large_ram_start_at_zero_and_track_writes() {
        let mut ram = GuestRam::new(4 << 30).expect("4 GiB, lockstep user's default RAM");
        let last = (4u64 << 30) / PAGE_SIZE - 1;
        for page in [0, 1, last / 2, last] {
            assert_eq!(ram.code_word(page), 0);
            assert!(!ram.is_code_page(page));
        }
        assert_eq!(ram.mark_code(last), 0);
        assert_eq!(ram.code_word(last), valid_code_word(0));
        let epoch = ram.code_epoch();
        assert!(ram.note_write(last * PAGE_SIZE + 8, 4));
        assert_eq!(ram.code_word(last), 1);
        assert_ne!(ram.code_epoch(), epoch);
        assert!(!ram.note_write((last - 1) * PAGE_SIZE, 8));
        assert_eq!(ram.code_word(last - 1), 0);
        // The table compiled code reads is these words.
        assert_eq!(ram.code_table(), ram.code.words().as_ptr());
    }
}
