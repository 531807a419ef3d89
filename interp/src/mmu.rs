//! Paging: the 4-level page walk (accessed/dirty bits, U/S, R/W, NX, WP, SMEP, SMAP) and the software TLB.

use crate::fault::{pf, Fault};
use crate::mem::{fresh_epoch, GuestRam, PAGE_SHIFT};
use crate::state::{ctl, flags, CpuState};

/// Physical address width advertised in CPUID 0x8000_0008 (bits).
pub const MAX_PHYS_BITS: u32 = 40;
const PHYS_MASK: u64 = ((1u64 << MAX_PHYS_BITS) - 1) & !0xfff;

/// Kind of memory access, for permission checks and page-fault error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// A successful translation.
#[derive(Clone, Copy, Debug)]
pub struct Translation {
    /// Physical address of the 4 KiB page.
    pub phys_page: u64,
}

const PTE_P: u64 = 1 << 0;
const PTE_RW: u64 = 1 << 1;
const PTE_US: u64 = 1 << 2;
const PTE_A: u64 = 1 << 5;
const PTE_D: u64 = 1 << 6;
const PTE_PS: u64 = 1 << 7;
const PTE_NX: u64 = 1 << 63;

/// True if `lin` is canonical for 48-bit linear addresses.
#[inline]
pub fn is_canonical(lin: u64) -> bool {
    ((lin as i64) << 16 >> 16) as u64 == lin
}

/// Translate a linear address. `user` is true for accesses made at CPL 3 (not implicit
/// supervisor accesses such as descriptor-table reads).
pub fn walk(
    ram: &mut GuestRam,
    st: &CpuState,
    lin: u64,
    access: Access,
    user: bool,
) -> Result<Translation, Fault> {
    if st.cr0 & ctl::CR0_PG == 0 {
        return Ok(Translation {
            phys_page: lin & 0xffff_ffff & !0xfff,
        });
    }
    if st.cr4 & ctl::CR4_PAE == 0 || st.efer & ctl::EFER_LMA == 0 {
        // 32-bit and PAE legacy paging arrive with the system-level CPU issue.
        return Err(Fault::ud(
            "legacy (non-long-mode) paging is not implemented",
        ));
    }
    let nxe = st.efer & ctl::EFER_NXE != 0;
    let mut code = 0u32;
    if access == Access::Write {
        code |= pf::WRITE;
    }
    if user {
        code |= pf::USER;
    }
    if access == Access::Exec && nxe {
        code |= pf::FETCH;
    }
    let not_present = |c: u32| Fault::PageFault { addr: lin, code: c };
    let reserved = |c: u32| Fault::PageFault {
        addr: lin,
        code: c | pf::PRESENT | pf::RSVD,
    };

    let mut table = st.cr3 & PHYS_MASK;
    let mut writable = true;
    let mut usr = true;
    let mut nx = false;
    let mut entries: [(u64, u64); 4] = [(0, 0); 4];
    let mut levels = 0;
    let mut phys_page = 0;
    for level in (0..4).rev() {
        let idx = (lin >> (12 + 9 * level)) & 0x1ff;
        let addr = table + idx * 8;
        let pte = ram.read_u64(addr).unwrap_or(u64::MAX);
        if pte & PTE_P == 0 {
            return Err(not_present(code));
        }
        // Reserved bits: above MAXPHYADDR, NX without EFER.NXE, PS in the PML4.
        let rsvd_hi = pte & 0x000f_ffff_ffff_f000 & !((1u64 << MAX_PHYS_BITS) - 1);
        if rsvd_hi != 0 || (!nxe && pte & PTE_NX != 0) || (level == 3 && pte & PTE_PS != 0) {
            return Err(reserved(code));
        }
        writable &= pte & PTE_RW != 0;
        usr &= pte & PTE_US != 0;
        nx |= nxe && pte & PTE_NX != 0;
        entries[levels] = (addr, pte);
        levels += 1;
        if level == 0 || (pte & PTE_PS != 0) {
            let size_bits = 12 + 9 * level;
            if level > 0 {
                // Large page: bits 12..size_bits-1 (except PAT at bit 12) must be zero.
                let rs = pte & ((1u64 << size_bits) - 1) & !0x1fff;
                if rs != 0 {
                    return Err(reserved(code));
                }
            }
            let base = pte & PHYS_MASK & !((1u64 << size_bits) - 1);
            phys_page = base | (lin & ((1u64 << size_bits) - 1) & !0xfff);
            break;
        }
        table = pte & PHYS_MASK;
    }

    // Permission checks.
    let prot = |c: u32| Fault::PageFault {
        addr: lin,
        code: c | pf::PRESENT,
    };
    if user {
        if !usr || (access == Access::Write && !writable) {
            return Err(prot(code));
        }
    } else {
        if access == Access::Write && !writable && st.cr0 & ctl::CR0_WP != 0 {
            return Err(prot(code));
        }
        if usr && access == Access::Exec && st.cr4 & ctl::CR4_SMEP != 0 {
            return Err(prot(code));
        }
        if usr
            && access != Access::Exec
            && st.cr4 & ctl::CR4_SMAP != 0
            && (st.cpl() == 3 || st.rflags & flags::AC == 0)
        {
            return Err(prot(code));
        }
    }
    if access == Access::Exec && nx {
        return Err(prot(code));
    }

    // Accessed bits on every level, dirty on the leaf for writes.
    for (i, &(addr, pte)) in entries[..levels].iter().enumerate() {
        let mut new = pte | PTE_A;
        if i == levels - 1 && access == Access::Write {
            new |= PTE_D;
        }
        if new != pte {
            let _ = ram.write_u64(addr, new);
        }
    }
    Ok(Translation { phys_page })
}

pub const TLB_ENTRIES: usize = 512;

/// `#[repr(C)]`: the JIT reads entries inline (tag at offset 0, phys at offset 8).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TlbEntry {
    /// Linear page number, or `u64::MAX` when empty.
    tag: u64,
    /// Physical page address (always RAM: MMIO pages are never cached).
    phys: u64,
}

const EMPTY: TlbEntry = TlbEntry {
    tag: u64::MAX,
    phys: 0,
};

/// Direct-mapped software TLB, one array per access kind. Flushed whenever anything it depends
/// on changes (CR0/CR3/CR4/EFER writes, CPL changes, INVLPG, restore).
#[derive(Clone)]
pub struct Tlb {
    read: Box<[TlbEntry; TLB_ENTRIES]>,
    write: Box<[TlbEntry; TLB_ENTRIES]>,
    exec: Box<[TlbEntry; TLB_ENTRIES]>,
    /// Never cache write translations (lockstep-jit's `--verify` mode: every store then takes
    /// the slow path, where `GuestRam::note_write` logs it).
    no_write_entries: bool,
    /// Moves on whenever an execute entry may change (flushes, execute inserts).
    exec_epoch: u64,
}

impl Default for Tlb {
    fn default() -> Self {
        Tlb {
            read: Box::new([EMPTY; TLB_ENTRIES]),
            write: Box::new([EMPTY; TLB_ENTRIES]),
            exec: Box::new([EMPTY; TLB_ENTRIES]),
            no_write_entries: false,
            exec_epoch: fresh_epoch(),
        }
    }
}

/// Bytes per TLB entry in [`Tlb::raw_table`]: `{ tag: u64, phys: u64 }`.
pub const TLB_ENTRY_BYTES: u64 = 16;

impl Tlb {
    #[inline]
    fn slot(vpn: u64) -> usize {
        vpn as usize & (TLB_ENTRIES - 1)
    }

    #[inline]
    fn table(&self, a: Access) -> &[TlbEntry; TLB_ENTRIES] {
        match a {
            Access::Read => &self.read,
            Access::Write => &self.write,
            Access::Exec => &self.exec,
        }
    }

    /// Physical page of `lin` if cached for `access`.
    #[inline(always)]
    pub fn lookup(&self, lin: u64, access: Access) -> Option<u64> {
        let vpn = lin >> PAGE_SHIFT;
        let e = self.table(access)[Self::slot(vpn)];
        (e.tag == vpn).then_some(e.phys)
    }

    /// A value that changes whenever the execute entries may change. While it stays the same,
    /// an execute lookup that hit before hits again with the same result.
    #[inline]
    pub fn exec_epoch(&self) -> u64 {
        self.exec_epoch
    }

    pub fn insert(&mut self, lin: u64, access: Access, phys: u64) {
        if access == Access::Write && self.no_write_entries {
            return;
        }
        let vpn = lin >> PAGE_SHIFT;
        let t = match access {
            Access::Read => &mut self.read,
            Access::Write => &mut self.write,
            Access::Exec => {
                self.exec_epoch = self.exec_epoch.wrapping_add(1);
                &mut self.exec
            }
        };
        t[Self::slot(vpn)] = TlbEntry { tag: vpn, phys };
    }

    /// For lockstep-jit's inline fast path: the first entry of the table for `access`.
    /// [`TLB_ENTRIES`] entries of [`TLB_ENTRY_BYTES`] each, `#[repr(C)] { tag, phys }`: `tag` is
    /// the linear page number (`u64::MAX` when empty), `phys` the physical page address (RAM).
    /// The tables are boxed, so the pointer stays valid while the `Tlb` lives.
    pub fn raw_table(&self, access: Access) -> *const u64 {
        self.table(access).as_ptr().cast()
    }

    /// lockstep-jit's `--verify` mode: stop (or resume) caching write translations, and drop
    /// the cached ones.
    pub fn set_no_write_entries(&mut self, on: bool) {
        self.no_write_entries = on;
        if on {
            self.write.fill(EMPTY);
        }
    }

    pub fn flush(&mut self) {
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
        self.read.fill(EMPTY);
        self.write.fill(EMPTY);
        self.exec.fill(EMPTY);
    }

    /// Drop one linear page (INVLPG).
    pub fn flush_page(&mut self, lin: u64) {
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
        for t in [&mut self.read, &mut self.write, &mut self.exec] {
            if t[s].tag == vpn {
                t[s] = EMPTY;
            }
        }
    }

    /// Drop write entries that point at a physical page (it now holds decoded code, so writes
    /// must take the slow path that invalidates blocks).
    pub fn flush_writes_to(&mut self, phys_page: u64) {
        for e in self.write.iter_mut() {
            if e.tag != u64::MAX && e.phys == phys_page {
                *e = EMPTY;
            }
        }
    }
}
