//! The guest's address space: a physical page allocator, real 4-level page tables in guest RAM,
//! the list of mappings (VMAs) and demand paging.
//!
//! Page tables live in physical pages that are never mapped into the guest's address space.
//! A mapping (ELF segment, stack, brk heap, anonymous mmap) is recorded as a VMA; its pages get
//! a physical frame and a page-table entry on first touch (a not-present #PF inside a VMA whose
//! protection allows the access), or eagerly when the loader writes into them. Unpopulated
//! pages read as zero, like Linux's anonymous memory.

use lockstep_interp::fault::pf;
use lockstep_interp::mem::{GuestRam, PAGE_SIZE};
use std::collections::BTreeMap;

/// `PROT_*` bits of mmap/mprotect.
pub const PROT_READ: u32 = 1;
pub const PROT_WRITE: u32 = 2;
pub const PROT_EXEC: u32 = 4;

/// End (exclusive) of the user address space, as on x86-64 Linux (`TASK_SIZE`).
pub const TASK_SIZE: u64 = 0x7fff_ffff_f000;
/// Lowest address a mapping may use (Linux's default `vm.mmap_min_addr`).
pub const MMAP_MIN_ADDR: u64 = 0x1_0000;
/// Top of the stack (exclusive); the stack VMA is the 8 MiB below it.
pub const STACK_TOP: u64 = TASK_SIZE;
/// Stack size (also the RLIMIT_STACK we report).
pub const STACK_SIZE: u64 = 8 << 20;
/// Where top-down mmap placement starts: 128 MiB below the top, Linux's minimum stack gap
/// (`mmap_base` without randomisation).
pub const MMAP_BASE: u64 = TASK_SIZE - (128 << 20);

const PTE_P: u64 = 1 << 0;
const PTE_RW: u64 = 1 << 1;
const PTE_US: u64 = 1 << 2;
const PTE_NX: u64 = 1 << 63;
const PTE_ADDR: u64 = 0x000f_ffff_ffff_f000;

/// Round down / up to a page boundary.
pub fn page_down(a: u64) -> u64 {
    a & !(PAGE_SIZE - 1)
}

/// Round up to a page boundary; `None` on overflow.
pub fn page_up(a: u64) -> Option<u64> {
    a.checked_add(PAGE_SIZE - 1).map(page_down)
}

/// Guest physical memory ran out (the guest touched more memory than `--ram-mb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory;

/// Physical page allocator: a bump pointer plus a LIFO free list (deterministic order).
#[derive(Debug)]
struct Frames {
    next: u64,
    limit: u64,
    free: Vec<u64>,
}

impl Frames {
    fn alloc(&mut self, ram: &mut GuestRam) -> Result<u64, OutOfMemory> {
        if let Some(p) = self.free.pop() {
            // A recycled frame: clear it (write_phys also retires any decoded code in it).
            ram.write_phys(p, &[0u8; PAGE_SIZE as usize])
                .map_err(|_| OutOfMemory)?;
            return Ok(p);
        }
        if self.next + PAGE_SIZE > self.limit {
            return Err(OutOfMemory);
        }
        // Never-used frames are still zero from the anonymous host mapping.
        let p = self.next;
        self.next += PAGE_SIZE;
        Ok(p)
    }
}

/// One mapping: `[start, end)` with `PROT_*` bits. Stored keyed by `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub end: u64,
    pub prot: u32,
}

/// The guest's address space.
#[derive(Debug)]
pub struct AddressSpace {
    frames: Frames,
    /// Physical address of the PML4 (CR3).
    pub cr3: u64,
    /// Non-overlapping mappings, keyed by start address.
    vmas: BTreeMap<u64, Vma>,
    /// Populated user pages: linear page address -> physical frame.
    pages: BTreeMap<u64, u64>,
    /// Start of the brk heap (page aligned) and the current break.
    pub brk_start: u64,
    pub brk: u64,
    /// Populated pages whose PTE was cleared or rewritten since [`Self::take_stale`]: the
    /// only pages a TLB may hold a translation of that is no longer right (it caches present
    /// leaf entries only). `None`: more than [`STALE_PAGES_MAX`] of them.
    stale: Option<Vec<u64>>,
    /// The range those pages lie in (`[lowest, highest + PAGE_SIZE)`; empty: none), kept for
    /// when the list is too long.
    stale_span: (u64, u64),
}

/// Which translations a TLB must drop after the address space changed
/// ([`AddressSpace::take_stale`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stale {
    /// Those of these pages.
    Pages(Vec<u64>),
    /// Too many pages to list: those of every page in `[start, end)`.
    Range { start: u64, end: u64 },
}

/// Most stale pages [`AddressSpace`] lists one by one; beyond, the whole TLB goes.
const STALE_PAGES_MAX: usize = 64;

impl AddressSpace {
    /// An empty address space over `ram`. Physical page 0 is left unused.
    pub fn new(ram: &mut GuestRam) -> Result<Self, OutOfMemory> {
        let mut frames = Frames {
            next: PAGE_SIZE,
            limit: ram.size(),
            free: Vec::new(),
        };
        let cr3 = frames.alloc(ram)?;
        Ok(AddressSpace {
            frames,
            cr3,
            vmas: BTreeMap::new(),
            pages: BTreeMap::new(),
            brk_start: 0,
            brk: 0,
            stale: Some(Vec::new()),
            stale_span: (u64::MAX, 0),
        })
    }

    // ----- page tables -----

    fn pte_flags(prot: u32) -> u64 {
        let mut f = PTE_P | PTE_US;
        if prot & PROT_WRITE != 0 {
            f |= PTE_RW;
        }
        if prot & PROT_EXEC == 0 {
            f |= PTE_NX;
        }
        f
    }

    /// Physical address of the leaf PTE for `va`, creating intermediate tables if `create`.
    fn leaf_slot(
        &mut self,
        ram: &mut GuestRam,
        va: u64,
        create: bool,
    ) -> Result<Option<u64>, OutOfMemory> {
        let mut table = self.cr3;
        for level in (1..4).rev() {
            let slot = table + ((va >> (12 + 9 * level)) & 0x1ff) * 8;
            let e = ram.read_u64(slot).map_err(|_| OutOfMemory)?;
            if e & PTE_P != 0 {
                table = e & PTE_ADDR;
                continue;
            }
            if !create {
                return Ok(None);
            }
            // Intermediate entries allow everything; the leaf decides.
            let t = self.frames.alloc(ram)?;
            ram.write_u64(slot, t | PTE_P | PTE_RW | PTE_US)
                .map_err(|_| OutOfMemory)?;
            table = t;
        }
        Ok(Some(table + ((va >> 12) & 0x1ff) * 8))
    }

    fn set_pte(&mut self, ram: &mut GuestRam, va: u64, value: u64) -> Result<(), OutOfMemory> {
        if let Some(slot) = self.leaf_slot(ram, va, value != 0)? {
            ram.write_u64(slot, value).map_err(|_| OutOfMemory)?;
        }
        Ok(())
    }

    /// Note that the present PTE of the populated page `va` changed.
    fn mark_stale(&mut self, va: u64) {
        let (lo, hi) = self.stale_span;
        self.stale_span = (lo.min(va), hi.max(va + PAGE_SIZE));
        if let Some(list) = &mut self.stale {
            if list.len() < STALE_PAGES_MAX {
                list.push(va);
            } else {
                self.stale = None;
            }
        }
    }

    /// The pages whose translations went stale since the last call (listed, or the range
    /// they lie in when there were too many), and start a new list.
    pub fn take_stale(&mut self) -> Stale {
        let (start, end) = std::mem::replace(&mut self.stale_span, (u64::MAX, 0));
        match self.stale.replace(Vec::new()) {
            Some(pages) => Stale::Pages(pages),
            None => Stale::Range { start, end },
        }
    }

    /// Give the page at `va` (page aligned, inside a VMA) a frame, if it has none.
    /// Returns the frame.
    pub fn populate(&mut self, ram: &mut GuestRam, va: u64) -> Result<u64, OutOfMemory> {
        if let Some(&p) = self.pages.get(&va) {
            return Ok(p);
        }
        let prot = self.find(va).map(|(_, v)| v.prot).unwrap_or(0);
        let frame = self.frames.alloc(ram)?;
        if let Err(e) = self.set_pte(ram, va, frame | Self::pte_flags(prot)) {
            self.frames.free.push(frame);
            return Err(e);
        }
        self.pages.insert(va, frame);
        Ok(frame)
    }

    /// Drop the frames of populated pages in `[start, end)`; they refault as zero pages
    /// (munmap, MADV_DONTNEED).
    pub fn discard(&mut self, ram: &mut GuestRam, start: u64, end: u64) {
        let gone: Vec<(u64, u64)> = self
            .pages
            .range(start..end)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (va, frame) in gone {
            // Clearing an existing PTE never allocates.
            let _ = self.set_pte(ram, va, 0);
            self.mark_stale(va);
            self.pages.remove(&va);
            self.frames.free.push(frame);
        }
    }

    /// Handle a page fault the engine reported: populate the page if `addr` lies in a VMA whose
    /// protection allows the access. `Ok(false)` means a real fault (SIGSEGV).
    pub fn fault_in(
        &mut self,
        ram: &mut GuestRam,
        addr: u64,
        code: u32,
    ) -> Result<bool, OutOfMemory> {
        if code & pf::PRESENT != 0 || code & pf::RSVD != 0 {
            return Ok(false);
        }
        let Some((_, vma)) = self.find(addr) else {
            return Ok(false);
        };
        let ok = if code & pf::WRITE != 0 {
            vma.prot & PROT_WRITE != 0
        } else if code & pf::FETCH != 0 {
            vma.prot & PROT_EXEC != 0
        } else {
            // x86 cannot map a page writable or executable without also making it readable.
            vma.prot != 0
        };
        if !ok {
            return Ok(false);
        }
        self.populate(ram, page_down(addr))?;
        Ok(true)
    }

    /// Copy `data` to user address `va`, bypassing protections (the loader). Pages are
    /// populated; the range must lie in VMAs.
    pub fn poke(&mut self, ram: &mut GuestRam, va: u64, data: &[u8]) -> Result<(), OutOfMemory> {
        let mut done = 0usize;
        while done < data.len() {
            let a = va + done as u64;
            let n = ((PAGE_SIZE - (a & 0xfff)) as usize).min(data.len() - done);
            let frame = self.populate(ram, page_down(a))?;
            ram.write_phys(frame + (a & 0xfff), &data[done..done + n])
                .map_err(|_| OutOfMemory)?;
            done += n;
        }
        Ok(())
    }

    // ----- VMAs -----

    /// The VMA containing `addr`.
    pub fn find(&self, addr: u64) -> Option<(u64, Vma)> {
        let (&s, &v) = self.vmas.range(..=addr).next_back()?;
        (addr < v.end).then_some((s, v))
    }

    /// All VMAs in ascending order (tests, diagnostics).
    pub fn vmas(&self) -> impl Iterator<Item = (u64, Vma)> + '_ {
        self.vmas.iter().map(|(&s, &v)| (s, v))
    }

    /// Populated pages in ascending address order: (linear, physical).
    pub fn pages(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.pages.iter().map(|(&a, &b)| (a, b))
    }

    /// Is `[start, end)` free of mappings?
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        if let Some((_, v)) = self.vmas.range(..end).next_back() {
            if v.end > start {
                return false;
            }
        }
        true
    }

    /// Remove `[start, end)` from the VMA list (splitting), returning the removed pieces.
    fn carve(&mut self, start: u64, end: u64) -> Vec<(u64, Vma)> {
        let hit: Vec<(u64, Vma)> = self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .map(|(&s, &v)| (s, v))
            .collect();
        let mut removed = Vec::new();
        for (s, v) in hit {
            self.vmas.remove(&s);
            if s < start {
                self.vmas.insert(
                    s,
                    Vma {
                        end: start,
                        prot: v.prot,
                    },
                );
            }
            if v.end > end {
                self.vmas.insert(
                    end,
                    Vma {
                        end: v.end,
                        prot: v.prot,
                    },
                );
            }
            removed.push((
                s.max(start),
                Vma {
                    end: v.end.min(end),
                    prot: v.prot,
                },
            ));
        }
        removed.reverse();
        removed
    }

    /// Insert a VMA over a free range, merging with equal neighbours.
    fn insert_merged(&mut self, mut start: u64, mut end: u64, prot: u32) {
        if let Some((s, v)) = self.find(start.wrapping_sub(1)) {
            if v.end == start && v.prot == prot && start > 0 {
                self.vmas.remove(&s);
                start = s;
            }
        }
        if let Some(&v) = self.vmas.get(&end) {
            if v.prot == prot {
                self.vmas.remove(&end);
                end = v.end;
            }
        }
        self.vmas.insert(start, Vma { end, prot });
    }

    /// Map `[start, end)` (page aligned) with `prot`, replacing whatever was there.
    pub fn map(&mut self, ram: &mut GuestRam, start: u64, end: u64, prot: u32) {
        self.unmap(ram, start, end);
        self.insert_merged(start, end, prot);
    }

    /// Map `[start, end)` giving pages already mapped the union of both protections (ELF
    /// segments that share a page). Populated pages keep their contents.
    pub fn map_union(&mut self, ram: &mut GuestRam, start: u64, end: u64, prot: u32) {
        let old = self.carve(start, end);
        self.insert_merged(start, end, prot);
        for (s, v) in old {
            if v.prot | prot != prot {
                self.protect_unchecked(ram, s, v.end, v.prot | prot);
            }
        }
        self.refresh_ptes(ram, start, end);
    }

    /// Remove mappings in `[start, end)` and free their frames.
    pub fn unmap(&mut self, ram: &mut GuestRam, start: u64, end: u64) {
        self.carve(start, end);
        self.discard(ram, start, end);
    }

    /// Does `[start, end)` lie entirely inside mappings?
    pub fn is_mapped(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        while at < end {
            match self.find(at) {
                Some((_, v)) => at = v.end,
                None => return false,
            }
        }
        true
    }

    fn protect_unchecked(&mut self, ram: &mut GuestRam, start: u64, end: u64, prot: u32) {
        self.carve(start, end);
        self.insert_merged(start, end, prot);
        self.refresh_ptes(ram, start, end);
    }

    /// Change protection of `[start, end)`, which must be fully mapped.
    pub fn protect(&mut self, ram: &mut GuestRam, start: u64, end: u64, prot: u32) -> bool {
        if !self.is_mapped(start, end) {
            return false;
        }
        self.protect_unchecked(ram, start, end, prot);
        true
    }

    /// Rewrite the PTEs of populated pages in `[start, end)` from their VMAs.
    fn refresh_ptes(&mut self, ram: &mut GuestRam, start: u64, end: u64) {
        let pages: Vec<(u64, u64)> = self
            .pages
            .range(start..end)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (va, frame) in pages {
            let prot = self.find(va).map(|(_, v)| v.prot).unwrap_or(0);
            let _ = self.set_pte(ram, va, frame | Self::pte_flags(prot));
            self.mark_stale(va);
        }
    }

    /// Find a free range of `len` bytes for mmap: the hint if it is free, else top-down
    /// below [`MMAP_BASE`] (or below 2 GiB with `low32`, like MAP_32BIT).
    pub fn find_free(&self, hint: u64, len: u64, low32: bool) -> Option<u64> {
        let (floor, top) = if low32 {
            (0x4000_0000, 0x8000_0000)
        } else {
            (MMAP_MIN_ADDR, MMAP_BASE)
        };
        let hint = page_down(hint);
        if hint >= MMAP_MIN_ADDR
            && hint.checked_add(len).is_some_and(|e| e <= TASK_SIZE)
            && self.is_free(hint, hint + len)
        {
            return Some(hint);
        }
        let mut hi = top;
        for (&s, v) in self.vmas.range(..top).rev() {
            if v.end < hi && hi - v.end >= len {
                return Some(hi - len);
            }
            hi = hi.min(s);
            if hi < floor.saturating_add(len) {
                return None;
            }
        }
        (hi >= floor.saturating_add(len)).then(|| hi - len)
    }

    // ----- brk -----

    /// Set up the heap to start at `start` (page aligned, just above the loaded image).
    pub fn init_brk(&mut self, start: u64) {
        self.brk_start = start;
        self.brk = start;
    }

    /// The brk system call: returns the new (or unchanged) break.
    pub fn set_brk(&mut self, ram: &mut GuestRam, want: u64) -> u64 {
        if want < self.brk_start || want > MMAP_BASE {
            return self.brk;
        }
        let (Some(old_end), Some(new_end)) = (page_up(self.brk), page_up(want)) else {
            return self.brk;
        };
        if new_end > old_end {
            if !self.is_free(old_end, new_end) {
                return self.brk;
            }
            self.insert_merged(old_end, new_end, PROT_READ | PROT_WRITE);
        } else if new_end < old_end {
            self.unmap(ram, new_end, old_end);
        }
        self.brk = want;
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> (GuestRam, AddressSpace) {
        let mut ram = GuestRam::new(16 << 20).unwrap();
        let a = AddressSpace::new(&mut ram).unwrap();
        (ram, a)
    }

    #[test]
    fn changed_populated_pages_are_listed_stale() {
        let (mut ram, mut a) = space();
        a.map(&mut ram, 0x10000, 0x20000, RW);
        a.populate(&mut ram, 0x11000).unwrap();
        a.populate(&mut ram, 0x13000).unwrap();
        assert_eq!(a.take_stale(), Stale::Pages(vec![]));
        // Only populated pages have translations to drop.
        a.protect(&mut ram, 0x10000, 0x12000, PROT_READ);
        a.unmap(&mut ram, 0x12000, 0x20000);
        assert_eq!(a.take_stale(), Stale::Pages(vec![0x11000, 0x13000]));
        assert_eq!(a.take_stale(), Stale::Pages(vec![]));
        // Beyond the list's length: the range of the populated pages.
        a.map(&mut ram, 0x100000, 0x200000, RW);
        for p in 1..=STALE_PAGES_MAX as u64 + 1 {
            a.populate(&mut ram, 0x100000 + p * PAGE_SIZE).unwrap();
        }
        a.unmap(&mut ram, 0x100000, 0x200000);
        let end = 0x100000 + (STALE_PAGES_MAX as u64 + 2) * PAGE_SIZE;
        assert_eq!(
            a.take_stale(),
            Stale::Range {
                start: 0x101000,
                end
            }
        );
        assert_eq!(a.take_stale(), Stale::Pages(vec![]));
    }

    fn list(a: &AddressSpace) -> Vec<(u64, u64, u32)> {
        a.vmas().map(|(s, v)| (s, v.end, v.prot)).collect()
    }

    const RW: u32 = PROT_READ | PROT_WRITE;

    #[test]
    fn map_split_merge_unmap() {
        let (mut ram, mut a) = space();
        a.map(&mut ram, 0x10000, 0x20000, RW);
        a.map(&mut ram, 0x20000, 0x30000, RW);
        assert_eq!(list(&a), vec![(0x10000, 0x30000, RW)]);
        assert!(a.protect(&mut ram, 0x14000, 0x18000, PROT_READ));
        assert_eq!(
            list(&a),
            vec![
                (0x10000, 0x14000, RW),
                (0x14000, 0x18000, PROT_READ),
                (0x18000, 0x30000, RW)
            ]
        );
        assert!(!a.protect(&mut ram, 0x2f000, 0x31000, PROT_READ));
        a.unmap(&mut ram, 0x12000, 0x1a000);
        assert_eq!(
            list(&a),
            vec![(0x10000, 0x12000, RW), (0x1a000, 0x30000, RW)]
        );
        assert!(a.find(0x12000).is_none());
        assert_eq!(a.find(0x11fff).unwrap().0, 0x10000);
        assert!(a.is_free(0x12000, 0x1a000));
        assert!(!a.is_free(0x12000, 0x1b000));
    }

    #[test]
    fn demand_paging_respects_protection_and_frees_frames() {
        let (mut ram, mut a) = space();
        a.map(&mut ram, 0x40_0000, 0x40_2000, PROT_READ);
        // Read fault in a readable VMA populates; write fault does not.
        assert_eq!(a.fault_in(&mut ram, 0x40_0010, 0), Ok(true));
        assert_eq!(a.fault_in(&mut ram, 0x40_1010, pf::WRITE), Ok(false));
        assert_eq!(a.fault_in(&mut ram, 0x40_1010, pf::FETCH), Ok(false));
        assert_eq!(a.fault_in(&mut ram, 0x50_0000, 0), Ok(false));
        assert_eq!(a.fault_in(&mut ram, 0x40_0000, pf::PRESENT), Ok(false));
        assert_eq!(a.pages().count(), 1);
        let frame = a.pages().next().unwrap().1;
        ram.write_phys(frame, &[0xaa; 8]).unwrap();
        a.unmap(&mut ram, 0x40_0000, 0x40_2000);
        assert_eq!(a.pages().count(), 0);
        // The recycled frame comes back zeroed.
        a.map(&mut ram, 0x60_0000, 0x60_1000, RW);
        let f2 = a.populate(&mut ram, 0x60_0000).unwrap();
        assert_eq!(f2, frame);
        assert_eq!(ram.read_u64(f2).unwrap(), 0);
    }

    #[test]
    fn page_table_entries_carry_permissions() {
        let (mut ram, mut a) = space();
        a.map(&mut ram, 0x40_0000, 0x40_1000, PROT_READ | PROT_EXEC);
        let f = a.populate(&mut ram, 0x40_0000).unwrap();
        let slot = a.leaf_slot(&mut ram, 0x40_0000, false).unwrap().unwrap();
        assert_eq!(ram.read_u64(slot).unwrap(), f | PTE_P | PTE_US);
        a.protect(&mut ram, 0x40_0000, 0x40_1000, RW);
        assert_eq!(
            ram.read_u64(slot).unwrap(),
            f | PTE_P | PTE_US | PTE_RW | PTE_NX
        );
        // Page-table frames are never user pages.
        assert!(a.pages().all(|(_, p)| p != a.cr3));
    }

    #[test]
    fn find_free_top_down_and_hint() {
        let (mut ram, mut a) = space();
        let x = a.find_free(0, 0x2000, false).unwrap();
        assert_eq!(x, MMAP_BASE - 0x2000);
        a.map(&mut ram, x, x + 0x2000, RW);
        let y = a.find_free(0, 0x1000, false).unwrap();
        assert_eq!(y, x - 0x1000);
        // A free hint is honoured, a taken one is not.
        assert_eq!(a.find_free(0x1000_0000, 0x1000, false), Some(0x1000_0000));
        assert_eq!(a.find_free(x, 0x1000, false), Some(y));
        let z = a.find_free(0, 0x1000, true).unwrap();
        assert_eq!(z, 0x8000_0000 - 0x1000);
        assert_eq!(a.find_free(0, TASK_SIZE, false), None);
    }

    #[test]
    fn brk_grows_and_shrinks() {
        let (mut ram, mut a) = space();
        a.init_brk(0x60_0000);
        assert_eq!(a.set_brk(&mut ram, 0), 0x60_0000);
        assert_eq!(a.set_brk(&mut ram, 0x60_1234), 0x60_1234);
        assert_eq!(list(&a), vec![(0x60_0000, 0x60_2000, RW)]);
        a.populate(&mut ram, 0x60_1000).unwrap();
        assert_eq!(a.set_brk(&mut ram, 0x60_0800), 0x60_0800);
        assert_eq!(list(&a), vec![(0x60_0000, 0x60_1000, RW)]);
        assert_eq!(a.pages().count(), 0);
        // Growing into another mapping fails and keeps the old break.
        a.map(&mut ram, 0x60_3000, 0x60_4000, RW);
        assert_eq!(a.set_brk(&mut ram, 0x60_5000), 0x60_0800);
    }

    #[test]
    fn map_union_merges_shared_page_permissions() {
        let (mut ram, mut a) = space();
        a.map_union(&mut ram, 0x40_0000, 0x40_2000, PROT_READ | PROT_EXEC);
        a.map_union(&mut ram, 0x40_1000, 0x40_3000, RW);
        assert_eq!(
            list(&a),
            vec![
                (0x40_0000, 0x40_1000, PROT_READ | PROT_EXEC),
                (0x40_1000, 0x40_2000, RW | PROT_EXEC),
                (0x40_2000, 0x40_3000, RW)
            ]
        );
    }

    #[test]
    fn out_of_frames_is_reported() {
        let mut ram = GuestRam::new(4 * PAGE_SIZE).unwrap();
        let mut a = AddressSpace::new(&mut ram).unwrap();
        a.map(&mut ram, 0x40_0000, 0x50_0000, RW);
        // cr3 + 3 intermediate tables use the remaining frames (page 0 is reserved).
        assert_eq!(a.populate(&mut ram, 0x40_0000), Err(OutOfMemory));
    }
}
