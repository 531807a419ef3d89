//! Paging: the page walks (32-bit, PAE, 4-level; accessed/dirty bits, U/S, R/W, NX, WP, SMEP,
//! SMAP, global pages) and the software TLB. What is modelled: docs/paging.md.

use crate::fault::{pf, Fault};
use crate::mem::{fresh_epoch, GuestRam, PAGE_SHIFT};
use crate::state::{ctl, flags, CpuState};

#[path = "mmu_legacy.rs"]
mod legacy;
pub use legacy::load_pdptes;

#[cfg(test)]
#[path = "mmu_tests.rs"]
mod tests;

/// Physical address width advertised in CPUID 0x8000_0008 (bits).
pub const MAX_PHYS_BITS: u32 = 40;
const PHYS_MASK: u64 = ((1u64 << MAX_PHYS_BITS) - 1) & !0xfff;
/// Bits 51:MAXPHYADDR of a 4-level paging entry (reserved).
const RSVD_HI_LONG: u64 = 0x000f_ffff_ffff_f000 & !((1u64 << MAX_PHYS_BITS) - 1);

/// CR4.PSE (4 MiB pages with 32-bit paging).
pub const CR4_PSE: u64 = 1 << 4;

/// Kind of memory access, for permission checks and page-fault error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// Who makes an access, for the permission checks (SDM 4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priv {
    /// An explicit access at CPL 3.
    User,
    /// An explicit access at CPL 0-2 (SMAP honours RFLAGS.AC).
    Supervisor,
    /// An implicit supervisor access (descriptor tables, TSS, IDT, interrupt frames) at any
    /// CPL: supervisor checks, and SMAP ignores RFLAGS.AC.
    Implicit,
}

/// A successful translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Physical address of the 4 KiB page holding the linear address.
    pub phys_page: u64,
    /// log2 of the size of the page that maps it: 12, 21 (2 MiB), 22 (4 MiB) or 30 (1 GiB).
    pub page_bits: u8,
    /// Global translation (G bit in the leaf entry with CR4.PGE set).
    pub global: bool,
    /// Every level allows user accesses (U/S = 1).
    pub user_page: bool,
    /// The permission outcome does not depend on RFLAGS.AC, so the TLB may cache it (false
    /// for supervisor accesses to user pages with CR4.SMAP set).
    pub cacheable: bool,
}

const PTE_P: u64 = 1 << 0;
const PTE_RW: u64 = 1 << 1;
const PTE_US: u64 = 1 << 2;
const PTE_A: u64 = 1 << 5;
const PTE_D: u64 = 1 << 6;
const PTE_PS: u64 = 1 << 7;
const PTE_G: u64 = 1 << 8;
const PTE_NX: u64 = 1 << 63;

/// True if `lin` is canonical for 48-bit linear addresses.
#[inline]
pub fn is_canonical(lin: u64) -> bool {
    ((lin as i64) << 16 >> 16) as u64 == lin
}

/// The paging mode selected by CR0.PG, CR4.PAE and EFER.LMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Bits32,
    Pae,
    Level4,
}

/// Current paging mode.
pub fn mode(st: &CpuState) -> Mode {
    if st.cr0 & ctl::CR0_PG == 0 {
        Mode::Off
    } else if st.efer & ctl::EFER_LMA != 0 {
        Mode::Level4
    } else if st.cr4 & ctl::CR4_PAE != 0 {
        Mode::Pae
    } else {
        Mode::Bits32
    }
}

/// Translate a linear address as the engines do: PAE paging uses the PDPTEs cached in `tlb`
/// (loaded by MOV to CR0/CR3/CR4 through [`load_pdptes`] and [`Tlb::set_pdptes`]); if none
/// are cached (e.g. after a restore) they are loaded from memory now and kept.
pub fn translate(
    ram: &mut GuestRam,
    st: &CpuState,
    tlb: &mut Tlb,
    lin: u64,
    access: Access,
    prv: Priv,
) -> Result<Translation, Fault> {
    if mode(st) == Mode::Pae && tlb.pdptes.is_none() {
        tlb.pdptes = Some(load_pdptes(ram, st)?);
    }
    walk(ram, st, tlb.pdptes.as_ref(), lin, access, prv)
}

/// Translate a linear address with a page walk (no TLB). `pdptes` are the PDPTE registers
/// for PAE paging (`None`: read them from CR3 now; a reserved bit then gives #GP(0)).
pub fn walk(
    ram: &mut GuestRam,
    st: &CpuState,
    pdptes: Option<&[u64; 4]>,
    lin: u64,
    access: Access,
    prv: Priv,
) -> Result<Translation, Fault> {
    match mode(st) {
        Mode::Off => Ok(Translation {
            phys_page: lin & 0xffff_ffff & !0xfff,
            page_bits: 12,
            global: false,
            user_page: true,
            cacheable: true,
        }),
        Mode::Bits32 => legacy::walk32(&mut Walker::new(ram, st, lin, access, prv)),
        Mode::Pae => {
            let p = match pdptes {
                Some(p) => *p,
                None => load_pdptes(ram, st)?,
            };
            legacy::walk_pae(&mut Walker::new(ram, st, lin, access, prv), &p)
        }
        Mode::Level4 => walk_long(&mut Walker::new(ram, st, lin, access, prv)),
    }
}

/// State of one page walk: the access, the rights gathered so far, the error-code bits.
struct Walker<'a> {
    ram: &'a mut GuestRam,
    st: &'a CpuState,
    lin: u64,
    access: Access,
    prv: Priv,
    /// Error-code bits describing the access (W/R, U/S, I/D).
    code: u32,
    writable: bool,
    user: bool,
    nx: bool,
}

impl<'a> Walker<'a> {
    fn new(ram: &'a mut GuestRam, st: &'a CpuState, lin: u64, access: Access, prv: Priv) -> Self {
        let mut code = 0u32;
        if access == Access::Write {
            code |= pf::WRITE;
        }
        if prv == Priv::User {
            code |= pf::USER;
        }
        // I/D: instruction fetch with SMEP, or with PAE/4-level paging and EFER.NXE.
        let pae_nx = st.cr4 & ctl::CR4_PAE != 0 && st.efer & ctl::EFER_NXE != 0;
        if access == Access::Exec && (st.cr4 & ctl::CR4_SMEP != 0 || pae_nx) {
            code |= pf::FETCH;
        }
        Walker {
            ram,
            st,
            lin,
            access,
            prv,
            code,
            writable: true,
            user: true,
            nx: false,
        }
    }

    fn nxe(&self) -> bool {
        self.st.efer & ctl::EFER_NXE != 0
    }

    fn not_present(&self) -> Fault {
        Fault::PageFault {
            addr: self.lin,
            code: self.code,
        }
    }

    fn reserved(&self) -> Fault {
        Fault::PageFault {
            addr: self.lin,
            code: self.code | pf::PRESENT | pf::RSVD,
        }
    }

    /// Read a paging-structure entry (8 bytes, or 4 for 32-bit paging). Entries outside RAM
    /// read as all ones (open bus).
    fn read(&self, addr: u64, wide: bool) -> u64 {
        if wide {
            self.ram.read_u64(addr).unwrap_or(u64::MAX)
        } else {
            let mut b = [0u8; 4];
            match self.ram.read_phys(addr, &mut b) {
                Ok(()) => u32::from_le_bytes(b) as u64,
                Err(_) => u32::MAX as u64,
            }
        }
    }

    /// Fold an entry's R/W, U/S and (if `has_nx`) XD bits into the rights.
    fn accumulate(&mut self, pte: u64, has_nx: bool) {
        self.writable &= pte & PTE_RW != 0;
        self.user &= pte & PTE_US != 0;
        self.nx |= has_nx && pte & PTE_NX != 0;
    }

    /// Set bits in an entry in memory if not already set.
    fn set_bits(&mut self, addr: u64, pte: u64, bits: u64, wide: bool) {
        if pte & bits == bits {
            return;
        }
        let new = pte | bits;
        let _ = if wide {
            self.ram.write_u64(addr, new)
        } else {
            self.ram.write_phys(addr, &(new as u32).to_le_bytes())
        };
    }

    /// A non-leaf entry was used: set its accessed bit (at once, so it stays set even if the
    /// walk faults further down, as Intel's page walker does).
    fn pass(&mut self, addr: u64, pte: u64, wide: bool) {
        self.set_bits(addr, pte, PTE_A, wide);
    }

    /// The leaf entry maps a page of `1 << page_bits` bytes at `frame`: check the access
    /// rights, then set A (and D for a write) in the leaf.
    fn finish(
        &mut self,
        addr: u64,
        pte: u64,
        wide: bool,
        frame: u64,
        page_bits: u32,
    ) -> Result<Translation, Fault> {
        let st = self.st;
        let smap = st.cr4 & ctl::CR4_SMAP != 0;
        let allowed = match self.prv {
            Priv::User => {
                self.user
                    && match self.access {
                        Access::Read => true,
                        Access::Write => self.writable,
                        Access::Exec => !self.nx,
                    }
            }
            Priv::Supervisor | Priv::Implicit => {
                let smap_blocks =
                    self.user && smap && (self.prv == Priv::Implicit || st.rflags & flags::AC == 0);
                match self.access {
                    Access::Read => !smap_blocks,
                    Access::Write => !smap_blocks && (self.writable || st.cr0 & ctl::CR0_WP == 0),
                    Access::Exec => {
                        let smep_blocks = self.user && st.cr4 & ctl::CR4_SMEP != 0;
                        !self.nx && !smep_blocks
                    }
                }
            }
        };
        if !allowed {
            return Err(Fault::PageFault {
                addr: self.lin,
                code: self.code | pf::PRESENT,
            });
        }
        let bits = if self.access == Access::Write {
            PTE_A | PTE_D
        } else {
            PTE_A
        };
        self.set_bits(addr, pte, bits, wide);
        let within = (1u64 << page_bits) - 1;
        Ok(Translation {
            phys_page: (frame & !within) | (self.lin & within & !0xfff),
            page_bits: page_bits as u8,
            global: pte & PTE_G != 0 && st.cr4 & ctl::CR4_PGE != 0,
            user_page: self.user,
            cacheable: !(self.prv != Priv::User && self.user && smap),
        })
    }
}

/// 4-level paging (IA-32e): PML4E, PDPTE (1 GiB pages), PDE (2 MiB pages), PTE.
fn walk_long(w: &mut Walker) -> Result<Translation, Fault> {
    let nxe = w.nxe();
    let mut table = w.st.cr3 & PHYS_MASK;
    for level in (0..4u32).rev() {
        let shift = 12 + 9 * level;
        let addr = table | (((w.lin >> shift) & 0x1ff) << 3);
        let pte = w.read(addr, true);
        if pte & PTE_P == 0 {
            return Err(w.not_present());
        }
        // Reserved: bits 51:MAXPHYADDR, XD without EFER.NXE, PS in a PML4E, and in a
        // large-page entry the address bits below the page size (bit 12 is PAT).
        let leaf = level == 0 || (level < 3 && pte & PTE_PS != 0);
        let mut rsvd = pte & RSVD_HI_LONG;
        if !nxe {
            rsvd |= pte & PTE_NX;
        }
        if level == 3 {
            rsvd |= pte & PTE_PS;
        }
        if leaf && level > 0 {
            rsvd |= pte & ((1u64 << shift) - 1) & !0x1fff;
        }
        if rsvd != 0 {
            return Err(w.reserved());
        }
        w.accumulate(pte, nxe);
        if leaf {
            return w.finish(addr, pte, true, pte & PHYS_MASK, shift);
        }
        w.pass(addr, pte, true);
        table = pte & PHYS_MASK;
    }
    unreachable!("the level-0 entry is always a leaf")
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

/// Per-entry side data (same index as the entry): bits 0..4 = page size bits - 12 of the
/// page the translation came from, bit 7 = global.
const META_GLOBAL: u8 = 0x80;
const META_SIZE: u8 = 0x1f;

/// The three direct-mapped tables (read, write, execute) for one privilege, with side data.
#[derive(Clone)]
struct TlbSet {
    read: Box<[TlbEntry; TLB_ENTRIES]>,
    write: Box<[TlbEntry; TLB_ENTRIES]>,
    exec: Box<[TlbEntry; TLB_ENTRIES]>,
    /// Side data of read, write, exec entries.
    meta: Box<[[u8; TLB_ENTRIES]; 3]>,
}

impl Default for TlbSet {
    fn default() -> Self {
        TlbSet {
            read: Box::new([EMPTY; TLB_ENTRIES]),
            write: Box::new([EMPTY; TLB_ENTRIES]),
            exec: Box::new([EMPTY; TLB_ENTRIES]),
            meta: Box::new([[0; TLB_ENTRIES]; 3]),
        }
    }
}

impl TlbSet {
    fn tables_mut(&mut self) -> [(&mut [TlbEntry; TLB_ENTRIES], &mut [u8; TLB_ENTRIES]); 3] {
        let [mr, mw, mx] = &mut *self.meta;
        [
            (&mut *self.read, mr),
            (&mut *self.write, mw),
            (&mut *self.exec, mx),
        ]
    }

    /// Drop every entry for which `drop(tag, meta)` holds.
    fn drop_where(&mut self, mut drop: impl FnMut(u64, u8) -> bool) {
        for (t, m) in self.tables_mut() {
            for (e, &mut mm) in t.iter_mut().zip(m.iter_mut()) {
                if e.tag != u64::MAX && drop(e.tag, mm) {
                    *e = EMPTY;
                }
            }
        }
    }
}

/// Direct-mapped software TLB, one array per access kind, in two sets: one for user (CPL 3)
/// and one for supervisor accesses, swapped when the CPL crosses 3 ([`Tlb::set_user`]); the
/// current set is always the one for the current CPL, so a hit needs no privilege check.
///
/// Flushes: all entries on CR0/CR4/EFER paging-bit writes ([`Tlb::flush`]), non-global ones on
/// CR3 writes ([`Tlb::flush_non_global`]), one page on INVLPG ([`Tlb::invalidate_page`]).
#[derive(Clone)]
pub struct Tlb {
    /// The set for the current privilege (its tables are what [`Tlb::raw_table`] returns).
    cur: TlbSet,
    /// The set for the other privilege.
    other: TlbSet,
    /// `cur` is the user (CPL 3) set.
    user: bool,
    /// Some entry (in either set) may come from a page larger than 4 KiB.
    has_large: bool,
    /// Never cache write translations (lockstep-jit's `--verify` mode: every store then takes
    /// the slow path, where `GuestRam::note_write` logs it).
    no_write_entries: bool,
    /// Moves on whenever an execute entry may change (flushes, execute inserts, set swaps).
    exec_epoch: u64,
    /// The PAE PDPTE registers (loaded by MOV to CR0/CR3/CR4; `None`: load at the next walk).
    pdptes: Option<[u64; 4]>,
}

impl Default for Tlb {
    fn default() -> Self {
        Tlb {
            cur: TlbSet::default(),
            other: TlbSet::default(),
            user: false,
            has_large: false,
            no_write_entries: false,
            exec_epoch: fresh_epoch(),
            pdptes: None,
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
            Access::Read => &self.cur.read,
            Access::Write => &self.cur.write,
            Access::Exec => &self.cur.exec,
        }
    }

    /// Physical page of `lin` if cached for `access` (at the privilege of [`Tlb::set_user`]).
    #[inline(always)]
    pub fn lookup(&self, lin: u64, access: Access) -> Option<u64> {
        let vpn = lin >> PAGE_SHIFT;
        let e = self.table(access)[Self::slot(vpn)];
        (e.tag == vpn).then_some(e.phys)
    }

    /// Make the current set the one for user (CPL 3) accesses if `user`, else supervisor.
    /// Called before every lookup path (`Ctx::translate`, block lookup) with `CPL == 3`; the
    /// swap changes the [`Tlb::raw_table`] pointers and the execute epoch.
    #[inline(always)]
    pub fn set_user(&mut self, user: bool) {
        if self.user != user {
            self.swap_sets(user);
        }
    }

    #[inline(never)]
    fn swap_sets(&mut self, user: bool) {
        std::mem::swap(&mut self.cur, &mut self.other);
        self.user = user;
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
    }

    /// True when the current set is the user set.
    pub fn is_user(&self) -> bool {
        self.user
    }

    /// A value that changes whenever the execute entries may change. While it stays the same,
    /// an execute lookup that hit before hits again with the same result.
    #[inline]
    pub fn exec_epoch(&self) -> u64 {
        self.exec_epoch
    }

    /// Cache a 4 KiB, non-global translation.
    pub fn insert(&mut self, lin: u64, access: Access, phys: u64) {
        self.insert_entry(lin, access, phys, 0);
    }

    /// Cache a translation from [`walk`] (remembering its page size and global bit).
    pub fn insert_translation(&mut self, lin: u64, access: Access, t: &Translation) {
        let size = t.page_bits.saturating_sub(12) & META_SIZE;
        if size != 0 {
            self.has_large = true;
        }
        let meta = size | if t.global { META_GLOBAL } else { 0 };
        self.insert_entry(lin, access, t.phys_page, meta);
    }

    fn insert_entry(&mut self, lin: u64, access: Access, phys: u64, meta: u8) {
        if access == Access::Write && self.no_write_entries {
            return;
        }
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        let (t, i) = match access {
            Access::Read => (&mut self.cur.read, 0),
            Access::Write => (&mut self.cur.write, 1),
            Access::Exec => {
                self.exec_epoch = self.exec_epoch.wrapping_add(1);
                (&mut self.cur.exec, 2)
            }
        };
        t[s] = TlbEntry { tag: vpn, phys };
        self.cur.meta[i][s] = meta;
    }

    /// For lockstep-jit's inline fast path: the first entry of the current set's table for
    /// `access`. [`TLB_ENTRIES`] entries of [`TLB_ENTRY_BYTES`] each, `#[repr(C)] { tag, phys }`:
    /// `tag` is the linear page number (`u64::MAX` when empty), `phys` the physical page
    /// address (RAM). The tables are boxed: the pointer stays valid while the `Tlb` lives and
    /// no privilege swap ([`Tlb::set_user`]) happens; the JIT re-reads it before each block.
    pub fn raw_table(&self, access: Access) -> *const u64 {
        self.table(access).as_ptr().cast()
    }

    /// lockstep-jit's `--verify` mode: stop (or resume) caching write translations, and drop
    /// the cached ones.
    pub fn set_no_write_entries(&mut self, on: bool) {
        self.no_write_entries = on;
        if on {
            self.cur.write.fill(EMPTY);
            self.other.write.fill(EMPTY);
        }
    }

    /// Drop every entry, global ones included (CR0.PG/WP, CR4.PGE/PAE/PSE/SMEP/SMAP, EFER.NXE
    /// changes; restore). Keeps the PDPTE registers.
    pub fn flush(&mut self) {
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
        for set in [&mut self.cur, &mut self.other] {
            set.read.fill(EMPTY);
            set.write.fill(EMPTY);
            set.exec.fill(EMPTY);
        }
        self.has_large = false;
    }

    /// Drop every non-global entry (MOV to CR3; no PCIDs are modelled).
    pub fn flush_non_global(&mut self) {
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
        for set in [&mut self.cur, &mut self.other] {
            set.drop_where(|_, m| m & META_GLOBAL == 0);
        }
    }

    /// INVLPG: drop the translations of the page holding `lin`, global ones included, in both
    /// sets. An entry that came from a large page is dropped if that large page holds `lin`
    /// (other 4 KiB pieces of it may be cached in other slots).
    pub fn invalidate_page(&mut self, lin: u64) {
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        self.exec_epoch = self.exec_epoch.wrapping_add(1);
        let has_large = self.has_large;
        for set in [&mut self.cur, &mut self.other] {
            for (t, _) in set.tables_mut() {
                if t[s].tag == vpn {
                    t[s] = EMPTY;
                }
            }
            if has_large {
                set.drop_where(|tag, m| {
                    let size = (m & META_SIZE) as u32;
                    size != 0 && (tag ^ vpn) >> size == 0
                });
            }
        }
    }

    /// Drop one linear page (INVLPG); the same as [`Tlb::invalidate_page`].
    pub fn flush_page(&mut self, lin: u64) {
        self.invalidate_page(lin);
    }

    /// Drop write entries that point at a physical page (it now holds decoded code, so writes
    /// must take the slow path that invalidates blocks).
    pub fn flush_writes_to(&mut self, phys_page: u64) {
        for set in [&mut self.cur, &mut self.other] {
            for e in set.write.iter_mut() {
                if e.tag != u64::MAX && e.phys == phys_page {
                    *e = EMPTY;
                }
            }
        }
    }

    /// The cached PAE PDPTE registers.
    pub fn pdptes(&self) -> Option<[u64; 4]> {
        self.pdptes
    }

    /// Set the PAE PDPTE registers (from [`load_pdptes`] at MOV to CR0/CR3/CR4), or `None`
    /// to have the next PAE walk load them from CR3.
    pub fn set_pdptes(&mut self, p: Option<[u64; 4]>) {
        self.pdptes = p;
    }
}
