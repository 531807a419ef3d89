//! Block chaining: a two-way set-associative table, keyed by guest RIP, of compiled blocks that
//! compiled code may jump to directly (a `tail` call) instead of returning to the dispatcher.
//!
//! An entry is written by the dispatcher each time it runs a compiled block, and when a
//! function is made callable. A block exit with a known target (direct branches and
//! fall-through: the set's address is a compile-time constant; RET and near indirect JMP/CALL:
//! hashed at run time) tail-calls the module's hop stub (`lift::hop`) with the target and its
//! set; the stub takes the set's first way when its RIP is the target, else the second, and
//! jumps to that entry's function when the entry's RIP is the target, no yield is pending,
//! and the remaining budget covers the target block's whole length; otherwise it returns to
//! the dispatcher. Exits normally go through their own [`Link`] first, which remembers what
//! the table gave them.
//!
//! Two ways, not one: with one entry per slot, two hot blocks whose RIPs hash alike evicted
//! each other on every run — each jump to one found the other, went back to the dispatcher,
//! which wrote its entry over the other's, and so on (libm's printf and heap's malloc each had
//! such a pair, ~250 K and ~400 K extra dispatches). A set of two keeps both; it takes a third
//! RIP of the same set to evict one.
//!
//! Whether the function is still the right code for that RIP is checked by the function
//! itself, on entry through a chained jump (the dispatcher has just checked the same when it
//! calls a function, and says so in its `entered` argument; so does a jump from code of the
//! same page that knows the check would pass: see [`block_check`]): the execute TLB
//! must still map the RIP's page to the physical page the block was decoded from (so the
//! dispatcher would translate RIP the same way, with the same permissions), and the block's
//! code pages must still have the code words they had at decode (no write hit them since).
//! On failure it returns to the dispatcher before doing anything. These checks are local to
//! the target: unrelated TLB fills, privilege swaps and code writes leave the link usable (a
//! kernel fills and flushes its execute TLB all the time), and they sit once in each function
//! rather than at each of its exits. Only 64-bit blocks are compiled, and compiled code never
//! changes mode, so RIP is the linear address. The table is cleared whenever the module is freed.

use lockstep_interp::decode::Block;

/// One chain-table entry (`#[repr(C)]`: compiled code reads it by offset; 32 bytes, so that a
/// set of two is one 64-byte cache line).
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug)]
pub struct ChainEntry {
    /// Guest RIP of the block ([`NO_RIP`]: empty).
    pub rip: u64,
    /// Entry address of the compiled block (`tail` convention).
    pub func: u64,
    /// Instructions in the block.
    pub len: u64,
}

/// The RIP of an empty entry or link: not canonical, so never the target of an exit (direct
/// targets are canonical, and indirect ones are checked before the exit: a non-canonical one
/// is a #GP at the branch). `u64::MAX` served until session 25, but it is canonical: an exit
/// to 0xffff_ffff_ffff_ffff matched an empty entry and jumped to its null function.
pub const NO_RIP: u64 = 1 << 63;

pub const EMPTY: ChainEntry = ChainEntry {
    rip: NO_RIP,
    func: 0,
    len: u64::MAX,
};

/// The check word of `block`: for a block in one page (its key's), the physical page number
/// and that page's code word at decode, `page << 32 | word`; `u64::MAX` otherwise (a valid
/// code word is never 0, so no block in one page has it, and no check word is 0). A block's
/// function skips its entry check when its `entered` argument is this word: the dispatcher
/// passes it after making the check itself, and so does a chained jump from a function with
/// the same check word, on the same virtual page, that has made no interpreter call (see
/// `lift::Lower::skip_target_check`).
pub fn block_check(block: &Block) -> u64 {
    let mut words = block.code_words();
    match (words.next(), words.next()) {
        (Some((page, w)), None) if page == block.key().phys >> 12 => page << 32 | w as u64,
        _ => u64::MAX,
    }
}

/// Sets in the table (a power of two), of [`WAYS`] entries each.
pub const SETS: usize = 1 << 12;
/// Entries per set.
pub const WAYS: usize = 2;
pub const ENTRY_BYTES: i64 = core::mem::size_of::<ChainEntry>() as i64;
/// Bytes per set: the set index times this is the set's offset in the table.
pub const SET_BYTES: i64 = ENTRY_BYTES * WAYS as i64;
pub const OFF_RIP: i32 = core::mem::offset_of!(ChainEntry, rip) as i32;
pub const OFF_FUNC: i32 = core::mem::offset_of!(ChainEntry, func) as i32;
pub const OFF_LEN: i32 = core::mem::offset_of!(ChainEntry, len) as i32;

const _: () = assert!(ENTRY_BYTES == 32 && SET_BYTES == 64);

/// Multiplier of the RIP hash (Fibonacci hashing).
pub const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
/// Shift that keeps the top bits of the product as the set index.
pub const HASH_SHIFT: u32 = 64 - SETS.trailing_zeros();

/// The top `bits` bits of `rip`'s Fibonacci hash: the chain table's set index (`bits` =
/// `log2(SETS)`) and the dispatcher's front slot (its own width).
#[inline]
pub fn rip_hash(rip: u64, bits: u32) -> usize {
    (rip.wrapping_mul(HASH_MUL) >> (64 - bits)) as usize
}

/// Set of `rip` (compiled code computes the same for dynamic targets).
#[inline]
pub fn set_of(rip: u64) -> usize {
    rip_hash(rip, SETS.trailing_zeros())
}

/// Address of `rip`'s set in the table at `table` (a direct exit's constant).
#[inline]
pub fn set_addr(table: u64, rip: u64) -> u64 {
    table + set_of(rip) as u64 * SET_BYTES as u64
}

/// One set: a cache line (`#[repr(C)]`, aligned, so compiled code finds way 1 at
/// [`ENTRY_BYTES`] from way 0).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct ChainSet {
    pub ways: [ChainEntry; WAYS],
}

const EMPTY_SET: ChainSet = ChainSet {
    ways: [EMPTY; WAYS],
};

/// The table: boxed, so its address (baked into compiled code) never moves.
pub struct ChainTable {
    pub sets: Box<[ChainSet]>,
}

impl Default for ChainTable {
    fn default() -> Self {
        ChainTable {
            sets: vec![EMPTY_SET; SETS].into_boxed_slice(),
        }
    }
}

impl ChainTable {
    pub fn addr(&self) -> u64 {
        self.sets.as_ptr() as u64
    }

    pub fn clear(&mut self) {
        self.sets.fill(EMPTY_SET);
    }

    /// Record `e`: over the way that already has its RIP, else in way 0, the previous way 0
    /// moving to way 1 (whose entry is dropped). A RIP found in either way stays where it is,
    /// so two blocks of one set run in turn keep both their entries.
    pub fn set(&mut self, e: ChainEntry) {
        let set = &mut self.sets[set_of(e.rip)];
        if let Some(w) = set.ways.iter_mut().find(|w| w.rip == e.rip) {
            *w = e;
        } else {
            set.ways[1] = set.ways[0];
            set.ways[0] = e;
        }
    }

    /// The entry for `rip`, as compiled code finds it (way 0 if its RIP matches, else way 1,
    /// whose RIP the caller still compares). The lookup of `lift`'s exits, for the tests.
    #[cfg(test)]
    pub fn probe(&self, rip: u64) -> &ChainEntry {
        let set = &self.sets[set_of(rip)];
        if set.ways[0].rip == rip {
            &set.ways[0]
        } else {
            &set.ways[1]
        }
    }
}

/// A block exit's link (`#[repr(C)]`, read and written by the link stubs by offset): for a
/// direct exit, the function its constant target ran as the last time the exit found it
/// through the chain table, so that later jumps from the exit go straight there (one load, no
/// table probe); for an indirect exit (RET, JMP/CALL through a register or memory), the last
/// target it found and its function, used when the next target is the same (a one-entry
/// cache per exit: a PLT slot, a function returning mostly to one caller).
/// Filled only by the stubs, from a chain-table entry for the link's RIP; emptied (`func` 0)
/// when a function for that RIP is compiled again ([`LinkTable::unlink`]), and all at once with
/// the module. A function reached through its link checks itself on entry exactly as when
/// reached through the table, so a link to a function whose code went stale only costs a trip
/// to the dispatcher.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug)]
pub struct Link {
    /// Entry address of the linked function; when empty, the fill stub's
    /// (`lift::hop::hop_fill_code`, [`LinkTable::set_fill`]), with `len` 0.
    pub func: u64,
    /// Instructions in the linked block.
    pub len: u64,
    /// Address of the chain table, where the fill stub (an empty link) and an indirect exit
    /// whose link holds another target look the target up, in its hashed set.
    pub set: u64,
    /// The exit's target RIP.
    pub rip: u64,
}

pub const LINK_BYTES: i64 = core::mem::size_of::<Link>() as i64;
pub const LINK_FUNC: i32 = core::mem::offset_of!(Link, func) as i32;
pub const LINK_LEN: i32 = core::mem::offset_of!(Link, len) as i32;
pub const LINK_SET: i32 = core::mem::offset_of!(Link, set) as i32;
pub const LINK_RIP: i32 = core::mem::offset_of!(Link, rip) as i32;
/// The RIP of an indirect exit's link before its first fill (never a valid target).
pub const DYN: u64 = NO_RIP;
const _: () = assert!(LINK_BYTES == 32);

/// What a compiled function's entry check expects of the execute TLB for `block` (decoded
/// from RAM whose host base is `ram_base`): the byte offset of the entry for its page in the
/// table, the tag there (the virtual page number) and the entry's host field (the physical
/// page's host address minus the virtual page's address). Lifted and baseline entry checks
/// both compare these, then the block's code words.
pub fn exec_tlb_expect(block: &Block, ram_base: u64) -> (i32, u64, u64) {
    use lockstep_interp::mmu::{TLB_ENTRIES, TLB_ENTRY_BYTES};
    let key = block.key();
    let vpn = key.rip >> 12;
    let off = ((vpn & (TLB_ENTRIES as u64 - 1)) * TLB_ENTRY_BYTES) as i32;
    let host = ram_base
        .wrapping_add(key.phys & !0xfff)
        .wrapping_sub(key.rip & !0xfff);
    (off, vpn, host)
}

/// What a jump into `block` from code that has not checked its page must find, as the
/// block's own entry check would (`JitConfig::inline_calls`: a callee in another page): the
/// execute TLB entry at `off` mapping virtual page `vpn` with host field `host`
/// ([`exec_tlb_expect`]), and code page `code_page` with code word `word`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageExpect {
    pub off: i32,
    pub vpn: u64,
    pub host: u64,
    pub code_page: u64,
    pub word: u32,
}

/// [`PageExpect`] for `block` (decoded from RAM at host base `ram_base`); `None` for a block
/// in more than one page, which such a jump does not enter.
pub fn page_expect(block: &Block, ram_base: u64) -> Option<PageExpect> {
    let mut words = block.code_words();
    let (code_page, word) = words.next()?;
    if words.next().is_some() {
        return None;
    }
    let (off, vpn, host) = exec_tlb_expect(block, ram_base);
    Some(PageExpect {
        off,
        vpn,
        host,
        code_page,
        word,
    })
}

/// The address of the link for an exit to `t` of a function being compiled, which takes its
/// links in order from `links` (the next free one and how many are left, see
/// [`LinkTable::next`]) and records their targets in `taken`: direct exits to one target share
/// a link, an indirect exit's ([`DYN`]) is its own. `None` when none is left.
pub fn link_for(links: (u64, usize), taken: &mut Vec<u64>, t: u64) -> Option<u64> {
    let (base, left) = links;
    let shared = (t != DYN)
        .then(|| taken.iter().position(|&r| r == t))
        .flatten();
    let i = match shared {
        Some(i) => i,
        None if taken.len() < left => {
            taken.push(t);
            taken.len() - 1
        }
        None => return None,
    };
    Some(base + i as u64 * LINK_BYTES as u64)
}

/// Links in a table: exits compiled after it is full tail-call the plain hop stub (with the
/// set) until the module is freed with the table.
pub const LINKS: usize = 1 << 15;

/// Every direct exit's link, handed out in order as functions are compiled: allocated once
/// with room for [`LINKS`] and never grown past it, so that the addresses compiled code holds
/// never move; bounded. Only the links handed out are written (pushed), so the pages of the
/// rest are never touched (a run uses a few thousand of the 32,768).
pub struct LinkTable {
    links: Vec<Link>,
    /// What an empty link holds as its function: the module's fill stub, which looks the
    /// exit's target up and fills the link (so that the jump through a link needs no test
    /// for an empty one: with length 0 the budget check passes and the jump goes there).
    fill: u64,
}

impl Default for LinkTable {
    fn default() -> Self {
        LinkTable {
            links: Vec::with_capacity(LINKS),
            fill: 0,
        }
    }
}

impl LinkTable {
    /// The fill stub of the module the links are handed out for (before the first link).
    pub fn set_fill(&mut self, fill: u64) {
        debug_assert!(self.links.is_empty());
        self.fill = fill;
    }

    /// Address of the next link to hand out and how many are left.
    pub fn next(&self) -> (u64, usize) {
        let used = self.links.len();
        let addr = self.links.as_ptr() as u64 + used as u64 * LINK_BYTES as u64;
        (addr, LINKS - used)
    }

    /// Hand out the next `rips.len()` links (at most what [`Self::next`] said was left), empty
    /// (holding the fill stub): for direct exits to those RIPs, and for indirect exits where a
    /// RIP is [`DYN`], looking targets up in the chain table at `table`.
    pub fn hand_out(&mut self, rips: &[u64], table: u64) {
        let n = rips.len().min(LINKS - self.links.len());
        for &rip in &rips[..n] {
            // (Within the capacity: the vector never moves.)
            self.links.push(Link {
                func: self.fill,
                len: 0,
                set: table,
                rip,
            });
        }
    }

    /// Empty the links to any of `rips` (sorted): a new function was made for each, and the
    /// one a link holds may be one whose code went stale.
    pub fn unlink(&mut self, rips: &[u64]) {
        for l in &mut self.links {
            if l.func != self.fill && rips.binary_search(&l.rip).is_ok() {
                l.func = self.fill;
                l.len = 0;
            }
        }
    }

    /// Drop every link (the module's functions are gone).
    pub fn clear(&mut self) {
        self.links.clear();
    }

    /// The link at `addr` (what the stubs wrote: `patch::Patches::scan`, tests).
    pub fn at(&self, addr: u64) -> Option<&Link> {
        let off = addr.checked_sub(self.links.as_ptr() as u64)?;
        if off % LINK_BYTES as u64 != 0 {
            return None;
        }
        self.links.get((off / LINK_BYTES as u64) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_in_range_and_spread() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000u64 {
            let s = set_of(0x40_1000 + i * 16);
            assert!(s < SETS);
            seen.insert(s);
        }
        assert!(seen.len() > 850, "{}", seen.len());
        assert_eq!(set_of(u64::MAX), set_of(u64::MAX));
    }

    fn entry(rip: u64, func: u64) -> ChainEntry {
        ChainEntry { rip, func, len: 1 }
    }

    /// `n` distinct RIPs of one set (a hash collision, as libm's printf had).
    fn same_set(n: usize) -> Vec<u64> {
        let want = set_of(0x40_0000);
        (0x40_0000u64..)
            .filter(|&r| set_of(r) == want)
            .take(n)
            .collect()
    }

    #[test]
    fn two_rips_of_one_set_keep_their_entries_when_run_in_turn() {
        let rips = same_set(2);
        let mut t = ChainTable::default();
        for round in 0..4 {
            for (i, &r) in rips.iter().enumerate() {
                t.set(entry(r, 100 * round + i as u64));
            }
            for (i, &r) in rips.iter().enumerate() {
                let e = t.probe(r);
                assert_eq!(
                    (e.rip, e.func),
                    (r, 100 * round + i as u64),
                    "round {round}"
                );
            }
        }
    }

    #[test]
    fn a_third_rip_evicts_the_older_way_only() {
        let rips = same_set(3);
        let mut t = ChainTable::default();
        t.set(entry(rips[0], 1));
        t.set(entry(rips[1], 2));
        t.set(entry(rips[2], 3));
        assert_eq!(t.probe(rips[2]).func, 3);
        assert_eq!(t.probe(rips[1]).func, 2);
        // The oldest is gone: the probe lands on an entry of another RIP.
        assert_ne!(t.probe(rips[0]).rip, rips[0]);
        // Nothing of another set moved.
        let other = (0x40_0000u64..)
            .find(|&r| set_of(r) != set_of(rips[0]))
            .expect("another set");
        assert_eq!(t.probe(other).rip, NO_RIP);
        t.clear();
        assert_eq!(t.probe(rips[2]).rip, NO_RIP);
    }

    #[test]
    fn links_are_handed_out_in_order_emptied_by_rip_and_bounded() {
        let mut t = LinkTable::default();
        let (table, fill) = (0x10_0000, 0x9000);
        t.set_fill(fill);
        let (first, left) = t.next();
        assert_eq!(left, LINKS);
        t.hand_out(&[0x40_1000, DYN, 0x40_2000], table);
        let (next, left) = t.next();
        assert_eq!((next - first, left), (3 * LINK_BYTES as u64, LINKS - 3));
        // Empty: the fill stub with length 0 (the budget check passes, the jump fills).
        let l = *t.at(first).expect("handed out");
        assert_eq!((l.func, l.len, l.rip, l.set), (fill, 0, 0x40_1000, table));
        let d = *t.at(first + LINK_BYTES as u64).expect("dyn");
        assert_eq!((d.func, d.len, d.rip, d.set), (fill, 0, DYN, table));
        // What the stubs write on a hit.
        for (i, rip) in [(0, 0x40_1000), (1, 0x40_3000), (2, 0x40_2000)] {
            let l = &mut t.links[i];
            (l.func, l.len, l.rip) = (0x7000 + i as u64, 5, rip);
        }
        t.unlink(&[0x40_2000, 0x40_3000]);
        let links: Vec<(u64, u64)> = t.links[..3].iter().map(|l| (l.func, l.len)).collect();
        assert_eq!(links, [(0x7000, 5), (fill, 0), (fill, 0)]);
        // Never more than LINKS: the rest of a request gets none.
        t.hand_out(&vec![0x40_4000; LINKS], table);
        assert_eq!(t.next().1, 0);
        assert!(t.at(first + LINKS as u64 * LINK_BYTES as u64).is_none());
        t.clear();
        assert_eq!(t.next(), (first, LINKS));
        assert!(t.at(first).is_none());
    }

    /// No exit target can match an empty entry: exit targets are canonical. (A link is
    /// written when it is handed out; none exists empty of a target.)
    #[test]
    fn empty_entries_and_links_have_a_non_canonical_rip() {
        use lockstep_interp::mmu::is_canonical;
        assert!(!is_canonical(EMPTY.rip) && !is_canonical(DYN));
        // The highest canonical address, which the old marker was, probes an empty set.
        let t = ChainTable::default();
        assert!(is_canonical(u64::MAX));
        assert_ne!(t.probe(u64::MAX).rip, u64::MAX);
    }

    #[test]
    fn table_and_sets_are_cache_line_aligned() {
        let t = ChainTable::default();
        assert_eq!(t.addr() % 64, 0);
        assert_eq!(core::mem::size_of::<ChainSet>(), 64);
        assert_eq!(OFF_RIP, 0);
    }
}
