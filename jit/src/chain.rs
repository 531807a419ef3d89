//! Block chaining: a two-way set-associative table, keyed by guest RIP, of compiled blocks that
//! compiled code may jump to directly (a `tail` call) instead of returning to the dispatcher.
//!
//! An entry is written by the dispatcher each time it runs a compiled block. A block exit
//! with a known target (direct branches and fall-through: the set's address is a compile-time
//! constant; RET and near indirect JMP/CALL: hashed at run time) tail-calls the module's hop
//! stub (`lift::hop`) with the target and its set; the stub takes the set's first way
//! when its RIP is the target, else the second, and jumps to that entry's function when the
//! entry's RIP is the target, no yield is pending, and the remaining budget covers the target
//! block's whole length; otherwise it returns to the dispatcher.
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
    /// Guest RIP of the block (`u64::MAX`: empty; never a valid, canonical target).
    pub rip: u64,
    /// Entry address of the compiled block (`tail` convention).
    pub func: u64,
    /// Instructions in the block.
    pub len: u64,
}

pub const EMPTY: ChainEntry = ChainEntry {
    rip: u64::MAX,
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
        assert_eq!(t.probe(other).rip, u64::MAX);
        t.clear();
        assert_eq!(t.probe(rips[2]).rip, u64::MAX);
    }

    #[test]
    fn table_and_sets_are_cache_line_aligned() {
        let t = ChainTable::default();
        assert_eq!(t.addr() % 64, 0);
        assert_eq!(core::mem::size_of::<ChainSet>(), 64);
        assert_eq!(OFF_RIP, 0);
    }
}
