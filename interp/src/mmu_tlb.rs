//! The software TLB (part of `mmu`, re-exported there): direct-mapped tables per access kind
//! and privilege, each with an occupancy bitmap so that flushes cost what is filled.

use super::{Access, Translation};
use crate::mem::{fresh_epoch, PAGE_SHIFT};

#[cfg(test)]
#[path = "mmu_tlb_tests.rs"]
mod tests;

/// Entries per table (a power of two; lockstep-jit probes `vpn & (TLB_ENTRIES - 1)` inline).
/// Chosen by measurement, see docs/paging.md.
pub const TLB_ENTRIES: usize = 8192;

/// Words of an occupancy bitmap.
const WORDS: usize = TLB_ENTRIES / 64;
const _: () = assert!(TLB_ENTRIES.is_power_of_two() && TLB_ENTRIES >= 64);

/// Bytes per TLB entry in [`Tlb::raw_table`]: `{ tag: u64, host: u64 }`.
pub const TLB_ENTRY_BYTES: u64 = 16;

/// `#[repr(C)]`: the JIT reads entries inline (tag at offset 0, host at offset 8).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TlbEntry {
    /// Linear page number, or `u64::MAX` when empty.
    tag: u64,
    /// Host address of the page in guest RAM minus the linear page address (wrapping):
    /// `host_base + physical page - linear page`, with the [`Tlb`]'s `host_base`. The host
    /// address of linear `lin` in the page is `lin + host`, one addition (the JIT's fast
    /// path); its physical address `lin + host - host_base`. Always RAM: MMIO pages are never
    /// cached. Nothing the guest can observe depends on the host part: the interpreter only
    /// ever uses the physical address, and `host_base` is the same in every entry.
    host: u64,
}

impl TlbEntry {
    /// The physical page address of a filled entry.
    fn phys(&self, host_base: u64) -> u64 {
        self.host
            .wrapping_sub(host_base)
            .wrapping_add(self.tag << PAGE_SHIFT)
    }
}

const _: () = assert!(std::mem::size_of::<TlbEntry>() as u64 == TLB_ENTRY_BYTES);

const EMPTY: TlbEntry = TlbEntry {
    tag: u64::MAX,
    host: 0,
};

/// Per-entry side data (same index as the entry): bits 0..4 = page size bits - 12 of the
/// page the translation came from, bit 7 = global.
const META_GLOBAL: u8 = 0x80;
const META_SIZE: u8 = 0x1f;

/// One direct-mapped table. Invariants: bit `s` of `occ` is set exactly when entry `s` is
/// filled (`tag != u64::MAX`); bit `s` of `large` exactly when it is filled and came from a
/// page larger than 4 KiB; bit `s` of `global` exactly when it is filled from a global page
/// (so a CR3 write visits only the non-global entries). `meta[s]` is meaningful only for
/// filled entries. `filled` counts the bits of `occ`, so that an empty table is seen as such
/// without scanning the bitmap (what `--verify` asks of the write tables for every block).
#[derive(Clone)]
struct Table {
    entries: [TlbEntry; TLB_ENTRIES],
    meta: [u8; TLB_ENTRIES],
    occ: [u64; WORDS],
    large: [u64; WORDS],
    global: [u64; WORDS],
    filled: u32,
}

/// Word index and bit of slot `s` in a bitmap.
#[inline]
fn bit(s: usize) -> (usize, u64) {
    (s / 64, 1u64 << (s % 64))
}

/// Call `f` with every slot whose bit is set in `map` (in slot order). `f` may clear bits of
/// slots it has been called with.
#[inline]
fn for_each_set(map: &[u64; WORDS], mut f: impl FnMut(usize)) {
    for (w, &word) in map.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            f(w * 64 + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
}

impl Table {
    /// An empty table, built in place: `Box::new(Table { .. })` built its 136 KiB on the
    /// stack and copied them (six tables: 12% of a short program's start-up instructions).
    fn new() -> Box<Table> {
        // SAFETY: a `Table` is integers only (`TlbEntry`'s two `u64`s, `u8`s, `u64`s, a
        // `u32`), for which all-zero bytes are a valid value.
        let mut t: Box<Table> = unsafe { Box::new_zeroed().assume_init() };
        t.entries.fill(EMPTY);
        t
    }

    fn fill(&mut self, s: usize, e: TlbEntry, meta: u8) {
        let (w, b) = bit(s);
        self.entries[s] = e;
        self.meta[s] = meta;
        if self.occ[w] & b == 0 {
            self.filled += 1;
        }
        self.occ[w] |= b;
        if meta & META_SIZE != 0 {
            self.large[w] |= b;
        } else {
            self.large[w] &= !b;
        }
        if meta & META_GLOBAL != 0 {
            self.global[w] |= b;
        } else {
            self.global[w] &= !b;
        }
    }

    /// Slot `s` is filled with `e` and `meta`.
    fn holds(&self, s: usize, e: TlbEntry, meta: u8) -> bool {
        self.occupied(s) && self.entries[s] == e && self.meta[s] == meta
    }

    fn occupied(&self, s: usize) -> bool {
        let (w, b) = bit(s);
        self.occ[w] & b != 0
    }

    fn is_global(&self, s: usize) -> bool {
        let (w, b) = bit(s);
        self.global[w] & b != 0
    }

    fn clear(&mut self, s: usize) {
        let (w, b) = bit(s);
        self.entries[s] = EMPTY;
        if self.occ[w] & b != 0 {
            self.filled -= 1;
        }
        self.occ[w] &= !b;
        self.large[w] &= !b;
        self.global[w] &= !b;
    }

    /// Make this table equal to `src`, visiting only the slots filled in either (an empty
    /// slot holds [`EMPTY`] in both; `meta` matters only for filled ones): what `--verify`
    /// copies after each block stays proportional to the entries in use, not the table size.
    fn copy_from(&mut self, src: &Table) {
        if self.filled == 0 && src.filled == 0 {
            return;
        }
        let mut either = [0u64; WORDS];
        for (e, (d, s)) in either.iter_mut().zip(self.occ.iter().zip(&src.occ)) {
            *e = d | s;
        }
        for_each_set(&either, |i| {
            self.entries[i] = src.entries[i];
            self.meta[i] = src.meta[i];
        });
        self.occ = src.occ;
        self.large = src.large;
        self.global = src.global;
        self.filled = src.filled;
    }

    /// Drop every entry (visits only the filled ones).
    fn clear_all(&mut self) {
        if self.filled == 0 {
            return;
        }
        self.filled = 0;
        let occ = self.occ;
        for_each_set(&occ, |s| self.entries[s] = EMPTY);
        self.occ = [0; WORDS];
        self.large = [0; WORDS];
        self.global = [0; WORDS];
    }

    /// Drop every non-global entry (visits only those).
    fn clear_non_global(&mut self) {
        if self.filled == 0 {
            return;
        }
        let mut local = [0u64; WORDS];
        for (l, (o, g)) in local.iter_mut().zip(self.occ.iter().zip(&self.global)) {
            *l = o & !g;
            self.filled -= l.count_ones();
        }
        for_each_set(&local, |s| self.entries[s] = EMPTY);
        for (o, l) in self.occ.iter_mut().zip(&local) {
            *o &= !l;
        }
        for (g, l) in self.large.iter_mut().zip(&local) {
            *g &= !l;
        }
    }

    /// Drop every filled entry for which `drop(entry, meta)` holds.
    fn drop_where(&mut self, mut drop: impl FnMut(&TlbEntry, u8) -> bool) {
        let occ = self.occ;
        for_each_set(&occ, |s| {
            if drop(&self.entries[s], self.meta[s]) {
                self.clear(s);
            }
        });
    }

    /// Drop every entry from a large page that holds linear page `vpn`.
    fn drop_large_holding(&mut self, vpn: u64) {
        let large = self.large;
        for_each_set(&large, |s| {
            let size = (self.meta[s] & META_SIZE) as u32;
            if (self.entries[s].tag ^ vpn) >> size == 0 {
                self.clear(s);
            }
        });
    }
}

/// Index of the table for an access kind in a [`TlbSet`].
#[inline(always)]
fn index(a: Access) -> usize {
    match a {
        Access::Read => 0,
        Access::Write => 1,
        Access::Exec => 2,
    }
}

/// A cached write entry as [`Tlb::write_entries`] lists it (`--verify`).
#[derive(Clone, Copy, Debug)]
pub struct WriteEntry {
    /// In the user (CPL 3) set.
    user: bool,
    slot: usize,
    entry: TlbEntry,
    meta: u8,
}

/// The three direct-mapped tables (read, write, execute) for one privilege, and the epochs of
/// its execute table (see [`Tlb::exec_epoch`]): each moves on to a value no epoch of this TLB
/// has had.
#[derive(Clone)]
struct TlbSet {
    tables: [Box<Table>; 3],
    /// Moves on whenever an execute lookup in this set that hit could now give another answer.
    exec_epoch: u64,
    /// Moves on whenever such a lookup that hit a global entry could: not on a CR3 write,
    /// which keeps global entries.
    exec_epoch_global: u64,
}

impl Default for TlbSet {
    fn default() -> Self {
        TlbSet {
            tables: [Table::new(), Table::new(), Table::new()],
            exec_epoch: u64::MAX,
            exec_epoch_global: u64::MAX,
        }
    }
}

/// Direct-mapped software TLB, one array per access kind, in two sets: one for user (CPL 3)
/// and one for supervisor accesses, swapped when the CPL crosses 3 ([`Tlb::set_user`]); the
/// current set is always the one for the current CPL, so a hit needs no privilege check.
///
/// Every write entry is a copy of the read entry in the same slot of its set (tag, host and
/// page size and global bits): a write fill fills the read slot too, a read fill that puts
/// something else in its slot drops the write entry there, and every drop treats the two
/// tables alike or drops write entries only. So a write-TLB hit is a read-TLB hit with the
/// same translation, and either engine may read through a write entry — the interpreter's
/// read-modify-writes do, lockstep-jit's loads that share a page group with a store do —
/// and get what a read lookup would give, even after the guest changed a PTE without INVLPG.
///
/// Flushes: all entries on CR0/CR4/EFER paging-bit writes ([`Tlb::flush`]), non-global ones on
/// CR3 writes ([`Tlb::flush_non_global`]), one page on INVLPG ([`Tlb::invalidate_page`]).
/// Each table keeps a bitmap of its filled entries, so a flush visits only those.
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
    /// lockstep-jit's `--verify` mode: `Verify` manages the write entries itself (it keeps a
    /// few from one block to the next, [`Tlb::write_entries`] / [`Tlb::set_write_entries`],
    /// and drops the rest), so filling or dropping one does not move [`Tlb::version`]; a
    /// page's old bytes are logged before a store can hit its entry (see
    /// `Ctx::translate_slow`).
    step_local_writes: bool,
    /// The last execute epoch handed out ([`Tlb::fresh`]): epochs count up from here, so no
    /// two of this TLB's are ever equal.
    epoch_next: u64,
    /// The PAE PDPTE registers (loaded by MOV to CR0/CR3/CR4; `None`: load at the next walk).
    pdptes: Option<[u64; 4]>,
    /// Moves on with every change of anything above ([`Tlb::version`]).
    version: u64,
    /// Host address of guest RAM's first byte, as the entries' `host` fields include it
    /// ([`Tlb::set_host_base`]; 0 until set).
    host_base: u64,
}

impl Default for Tlb {
    fn default() -> Self {
        let mut t = Tlb {
            cur: TlbSet::default(),
            other: TlbSet::default(),
            user: false,
            has_large: false,
            step_local_writes: false,
            epoch_next: fresh_epoch(),
            pdptes: None,
            version: fresh_epoch(),
            host_base: 0,
        };
        t.renew_exec_epochs(true);
        t
    }
}

impl Tlb {
    #[inline]
    fn slot(vpn: u64) -> usize {
        vpn as usize & (TLB_ENTRIES - 1)
    }

    #[inline(always)]
    fn table(&self, a: Access) -> &Table {
        &self.cur.tables[index(a)]
    }

    /// Both sets' tables.
    fn all_tables(&mut self) -> impl Iterator<Item = &mut Table> {
        self.cur
            .tables
            .iter_mut()
            .chain(self.other.tables.iter_mut())
            .map(|t| &mut **t)
    }

    /// Physical page of `lin` if cached for `access` (at the privilege of [`Tlb::set_user`]).
    #[inline(always)]
    pub fn lookup(&self, lin: u64, access: Access) -> Option<u64> {
        let vpn = lin >> PAGE_SHIFT;
        let e = self.table(access).entries[Self::slot(vpn)];
        (e.tag == vpn).then_some(
            e.host
                .wrapping_sub(self.host_base)
                .wrapping_add(lin & !0xfff),
        )
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
        self.version = self.version.wrapping_add(1);
        std::mem::swap(&mut self.cur, &mut self.other);
        self.user = user;
    }

    /// True when the current set is the user set.
    pub fn is_user(&self) -> bool {
        self.user
    }

    /// The current set's execute epoch: while it stays the same, an execute lookup that hit
    /// before hits again with the same result. Each set has its own (never equal to the
    /// other's), so a round trip to the other privilege and back leaves it as it was. It
    /// moves on when the set's execute table changes in a way that could change a hit: a
    /// flush, INVLPG, a CR3 write, or a fill that replaces a different entry (a fill into an
    /// empty slot changes no hit).
    #[inline]
    pub fn exec_epoch(&self) -> u64 {
        self.cur.exec_epoch
    }

    /// The epoch to remember for an execute lookup of `lin` that hits now (`None`: it misses):
    /// the set's global epoch when the entry is global (it survives CR3 writes), else
    /// [`Tlb::exec_epoch`]. While [`Tlb::exec_epoch_holds`] says it holds, the lookup hits
    /// again with the same result.
    #[inline]
    pub fn exec_hit_epoch(&self, lin: u64) -> Option<u64> {
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        let t = self.table(Access::Exec);
        (t.entries[s].tag == vpn).then(|| {
            if t.is_global(s) {
                self.cur.exec_epoch_global
            } else {
                self.cur.exec_epoch
            }
        })
    }

    /// The `host` field of the current set's execute entry for virtual page `vpn`, when the
    /// entry in its slot is that page's: what lockstep-jit's compiled page checks compare
    /// (the tag and this field, read through [`Tlb::raw_table`]).
    #[inline]
    pub fn exec_host(&self, vpn: u64) -> Option<u64> {
        let e = self.table(Access::Exec).entries[Self::slot(vpn)];
        (e.tag == vpn).then_some(e.host)
    }

    /// Does an epoch from [`Tlb::exec_hit_epoch`] (or [`Tlb::exec_epoch`]) still hold?
    #[inline(always)]
    pub fn exec_epoch_holds(&self, epoch: u64) -> bool {
        epoch == self.cur.exec_epoch || epoch == self.cur.exec_epoch_global
    }

    /// A new execute epoch.
    fn fresh(&mut self) -> u64 {
        self.epoch_next = self.epoch_next.wrapping_add(1);
        self.epoch_next
    }

    /// New execute epochs for both sets: only the non-global ones (`global` false, a CR3
    /// write), or both kinds.
    fn renew_exec_epochs(&mut self, global: bool) {
        self.cur.exec_epoch = self.fresh();
        self.other.exec_epoch = self.fresh();
        if global {
            self.cur.exec_epoch_global = self.fresh();
            self.other.exec_epoch_global = self.fresh();
        }
    }

    /// Cache a 4 KiB, non-global translation.
    pub fn insert(&mut self, lin: u64, access: Access, phys: u64) {
        self.insert_entry(lin, access, phys, 0);
    }

    /// Cache a translation from [`super::walk`] (remembering its page size and global bit).
    pub fn insert_translation(&mut self, lin: u64, access: Access, t: &Translation) {
        let size = t.page_bits.saturating_sub(12) & META_SIZE;
        if size != 0 && !self.has_large {
            self.has_large = true;
            self.version = self.version.wrapping_add(1);
        }
        let meta = size | if t.global { META_GLOBAL } else { 0 };
        self.insert_entry(lin, access, t.phys_page, meta);
    }

    fn insert_entry(&mut self, lin: u64, access: Access, phys: u64, meta: u8) {
        if !(access == Access::Write && self.step_local_writes) {
            self.version = self.version.wrapping_add(1);
        }
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        let e = TlbEntry {
            tag: vpn,
            host: self
                .host_base
                .wrapping_add(phys)
                .wrapping_sub(vpn << PAGE_SHIFT),
        };
        let t = &self.cur.tables[index(access)];
        if access == Access::Exec && t.occupied(s) && (t.entries[s] != e || t.meta[s] != meta) {
            // A hit on the replaced entry may now miss or differ.
            if t.is_global(s) {
                self.cur.exec_epoch_global = self.fresh();
            }
            self.cur.exec_epoch = self.fresh();
        }
        self.cur.tables[index(access)].fill(s, e, meta);
        // Keep every write entry a copy of the read entry in its slot (see `Tlb`).
        let [read, write, _] = &mut self.cur.tables;
        match access {
            Access::Write if !read.holds(s, e, meta) => {
                self.version = self.version.wrapping_add(1);
                read.fill(s, e, meta);
            }
            // (A read fill has moved the version already.)
            Access::Read if write.occupied(s) && !write.holds(s, e, meta) => write.clear(s),
            _ => {}
        }
    }

    /// For lockstep-jit's inline fast path: the first entry of the current set's table for
    /// `access`. [`TLB_ENTRIES`] entries of [`TLB_ENTRY_BYTES`] each, `#[repr(C)] { tag, host }`:
    /// `tag` is the linear page number (`u64::MAX` when empty), `host` the page's host
    /// address in guest RAM minus the linear page address, wrapping (valid for the RAM
    /// whose base was last given to [`Tlb::set_host_base`]). The tables are boxed: the pointer stays valid while the `Tlb` lives and
    /// no privilege swap ([`Tlb::set_user`]) happens; the JIT re-reads it before each block.
    pub fn raw_table(&self, access: Access) -> *const u64 {
        self.table(access).entries.as_ptr().cast()
    }

    /// Make the entries hold host addresses into the guest RAM whose first byte is at host
    /// address `base` (the machine's RAM, before anything reads the tables' `host` fields
    /// directly). A different base moves every filled entry along; the physical addresses
    /// they give stay the same.
    #[inline]
    pub fn set_host_base(&mut self, base: u64) {
        if self.host_base != base {
            self.rebase(base);
        }
    }

    #[cold]
    fn rebase(&mut self, base: u64) {
        let moved = base.wrapping_sub(self.host_base);
        self.host_base = base;
        for t in self.all_tables() {
            let occ = t.occ;
            for_each_set(&occ, |s| {
                t.entries[s].host = t.entries[s].host.wrapping_add(moved);
            });
        }
    }

    /// lockstep-jit's `--verify` mode: write entries belong to one verified block (see the
    /// field `step_local_writes`). Drops the cached write entries either way.
    pub fn set_step_local_writes(&mut self, on: bool) {
        self.version = self.version.wrapping_add(1);
        self.step_local_writes = on;
        self.drop_write_entries();
    }

    /// Drop every write entry (both sets). Moves [`Tlb::version`] on unless write entries are
    /// step-local.
    pub fn drop_write_entries(&mut self) {
        if !self.step_local_writes {
            self.version = self.version.wrapping_add(1);
        }
        let w = index(Access::Write);
        self.cur.tables[w].clear_all();
        self.other.tables[w].clear_all();
    }

    /// `--verify`: the cached write entries of both sets, when there are at most `max` of them
    /// (`None` otherwise), to be put back with [`Tlb::set_write_entries`].
    pub fn write_entries(&self, max: usize) -> Option<Vec<WriteEntry>> {
        let w = index(Access::Write);
        let mut out = Vec::new();
        for (user, set) in [(self.user, &self.cur), (!self.user, &self.other)] {
            let t = &set.tables[w];
            if t.filled as usize + out.len() > max {
                return None;
            }
            if t.filled == 0 {
                continue;
            }
            for_each_set(&t.occ, |s| {
                out.push(WriteEntry {
                    user,
                    slot: s,
                    entry: t.entries[s],
                    meta: t.meta[s],
                })
            });
        }
        Some(out)
    }

    /// `--verify`: make `list` (from [`Tlb::write_entries`]) the cached write entries, exactly.
    /// Moves [`Tlb::version`] on unless write entries are step-local.
    pub fn set_write_entries(&mut self, list: &[WriteEntry]) {
        self.drop_write_entries();
        let w = index(Access::Write);
        for e in list {
            let set = if e.user == self.user {
                &mut self.cur
            } else {
                &mut self.other
            };
            // Only beside the same read entry (see `Tlb`): a write entry is a cache, it may
            // always be left out.
            if set.tables[index(Access::Read)].holds(e.slot, e.entry, e.meta) {
                set.tables[w].fill(e.slot, e.entry, e.meta);
            }
        }
    }

    /// The physical address of the page a write entry maps.
    pub fn write_entry_page(&self, e: &WriteEntry) -> u64 {
        e.entry.phys(self.host_base)
    }

    /// Drop every entry, global ones included (CR0.PG/WP, CR4.PGE/PAE/PSE/SMEP/SMAP, EFER.NXE
    /// changes; restore). Keeps the PDPTE registers.
    pub fn flush(&mut self) {
        self.version = self.version.wrapping_add(1);
        self.renew_exec_epochs(true);
        self.all_tables().for_each(Table::clear_all);
        self.has_large = false;
    }

    /// Drop every non-global entry (MOV to CR3; no PCIDs are modelled).
    pub fn flush_non_global(&mut self) {
        self.version = self.version.wrapping_add(1);
        self.renew_exec_epochs(false);
        self.all_tables().for_each(Table::clear_non_global);
    }

    /// INVLPG: drop the translations of the page holding `lin`, global ones included, in both
    /// sets. An entry that came from a large page is dropped if that large page holds `lin`
    /// (other 4 KiB pieces of it may be cached in other slots).
    pub fn invalidate_page(&mut self, lin: u64) {
        let vpn = lin >> PAGE_SHIFT;
        let s = Self::slot(vpn);
        self.version = self.version.wrapping_add(1);
        let before = self.exec_filled();
        let has_large = self.has_large;
        for t in self.all_tables() {
            if t.entries[s].tag == vpn {
                t.clear(s);
            }
            if has_large {
                t.drop_large_holding(vpn);
            }
        }
        // A page that was never run from (a heap page unmapped, a data page made
        // read-only) changes no execute hit.
        self.renew_exec_epochs_if_dropped(before);
    }

    /// How many entries the two sets' execute tables hold.
    fn exec_filled(&self) -> [u32; 2] {
        let exec = index(Access::Exec);
        [&self.cur, &self.other].map(|set| set.tables[exec].filled)
    }

    /// After dropping entries: new execute epochs when an execute entry went (`before`: what
    /// [`Tlb::exec_filled`] said before), else none — no execute hit changed.
    fn renew_exec_epochs_if_dropped(&mut self, before: [u32; 2]) {
        if self.exec_filled() != before {
            self.renew_exec_epochs(true);
        }
    }

    /// Drop the translations of every linear page in `[start, end)` (page-aligned), in both
    /// sets: the read and write tables are cleared whole (visiting only their filled slots,
    /// as a flush does), the execute tables only of entries for a page in the range (from a
    /// large page that overlaps it, for a large one). So the execute epochs move only when an
    /// execute entry went: unmapping a data range with many populated pages changes no
    /// execute hit, and compiled code keeps its page checks' generation (lockstep-jit's
    /// `page_gen`). A TLB may drop any entry at any time; the read and write entries beyond
    /// the range are refilled from the page tables, which say what they said.
    pub fn invalidate_range(&mut self, start: u64, end: u64) {
        let (lo, hi) = (start >> PAGE_SHIFT, end.div_ceil(1 << PAGE_SHIFT));
        if lo >= hi {
            return;
        }
        self.version = self.version.wrapping_add(1);
        let exec = index(Access::Exec);
        let before = self.exec_filled();
        for set in [&mut self.cur, &mut self.other] {
            for (i, t) in set.tables.iter_mut().enumerate() {
                if i != exec {
                    t.clear_all();
                    continue;
                }
                t.drop_where(|e, meta| {
                    // The entry's pages: its tag's, or the whole large page holding it.
                    let size = (meta & META_SIZE) as u32;
                    let first = e.tag >> size << size;
                    let last = first | ((1u64 << size) - 1);
                    first < hi && last >= lo
                });
            }
        }
        self.renew_exec_epochs_if_dropped(before);
    }

    /// Drop one linear page (INVLPG); the same as [`Tlb::invalidate_page`].
    pub fn flush_page(&mut self, lin: u64) {
        self.invalidate_page(lin);
    }

    /// Drop write entries that point at a physical page (it now holds decoded code, so writes
    /// must take the slow path that invalidates blocks).
    pub fn flush_writes_to(&mut self, phys_page: u64) {
        self.version = self.version.wrapping_add(1);
        let w = index(Access::Write);
        for set in [&mut self.cur, &mut self.other] {
            let base = self.host_base;
            set.tables[w].drop_where(|e, _| e.phys(base) == phys_page);
        }
    }

    /// The cached PAE PDPTE registers.
    pub fn pdptes(&self) -> Option<[u64; 4]> {
        self.pdptes
    }

    /// Set the PAE PDPTE registers (from [`super::load_pdptes`] at MOV to CR0/CR3/CR4), or
    /// `None` to have the next PAE walk load them from CR3.
    pub fn set_pdptes(&mut self, p: Option<[u64; 4]>) {
        self.version = self.version.wrapping_add(1);
        self.pdptes = p;
    }

    /// A value that changes whenever anything in the TLB may have changed (every `&mut self`
    /// method that can change it moves it on; a clone or [`Tlb::copy_from`] takes it along).
    /// While it stays the same, the TLB holds exactly what it held.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Make `self` a copy of `src` in place: no allocation, and the tables keep their
    /// addresses (what [`Tlb::raw_table`] returned stays valid for the current set). For
    /// lockstep-jit's `--verify`, which puts the TLB back after each block's JIT run.
    pub fn copy_from(&mut self, src: &Tlb) {
        let pairs = self
            .cur
            .tables
            .iter_mut()
            .zip(src.cur.tables.iter())
            .chain(self.other.tables.iter_mut().zip(src.other.tables.iter()));
        for (d, s) in pairs {
            d.copy_from(s);
        }
        self.user = src.user;
        self.has_large = src.has_large;
        self.step_local_writes = src.step_local_writes;
        self.cur.exec_epoch = src.cur.exec_epoch;
        self.other.exec_epoch = src.other.exec_epoch;
        self.cur.exec_epoch_global = src.cur.exec_epoch_global;
        self.other.exec_epoch_global = src.other.exec_epoch_global;
        self.epoch_next = src.epoch_next;
        self.pdptes = src.pdptes;
        self.version = src.version;
    }
}
