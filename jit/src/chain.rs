//! Block chaining: a direct-mapped table, keyed by guest RIP, of compiled blocks that compiled
//! code may jump to directly (a `tail` call) instead of returning to the dispatcher.
//!
//! An entry is written by the dispatcher each time it runs a compiled block. A block exit
//! with a known target (direct branches and fall-through: the slot index is a compile-time
//! constant; RET and near indirect JMP/CALL: hashed at run time) jumps to the entry's function
//! when the entry's RIP is the target, no yield is pending, and the remaining budget covers
//! the target block's whole length; otherwise it returns to the dispatcher.
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

/// One chain-table entry (`#[repr(C)]`: compiled code reads it by offset).
#[repr(C)]
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

/// Entries in the table (a power of two).
pub const ENTRIES: usize = 1 << 13;
pub const ENTRY_BYTES: i64 = core::mem::size_of::<ChainEntry>() as i64;
pub const OFF_RIP: i32 = core::mem::offset_of!(ChainEntry, rip) as i32;
pub const OFF_FUNC: i32 = core::mem::offset_of!(ChainEntry, func) as i32;
pub const OFF_LEN: i32 = core::mem::offset_of!(ChainEntry, len) as i32;

/// Multiplier of the RIP hash (Fibonacci hashing).
pub const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
/// Shift that keeps the top bits of the product as the index.
pub const HASH_SHIFT: u32 = 64 - ENTRIES.trailing_zeros();

/// Slot of `rip` (compiled code computes the same for dynamic targets).
#[inline]
pub fn slot(rip: u64) -> usize {
    (rip.wrapping_mul(HASH_MUL) >> HASH_SHIFT) as usize
}

/// The table: boxed, so its address (baked into compiled code) never moves.
pub struct ChainTable {
    pub entries: Box<[ChainEntry]>,
}

impl Default for ChainTable {
    fn default() -> Self {
        ChainTable {
            entries: vec![EMPTY; ENTRIES].into_boxed_slice(),
        }
    }
}

impl ChainTable {
    pub fn addr(&self) -> u64 {
        self.entries.as_ptr() as u64
    }

    pub fn clear(&mut self) {
        self.entries.fill(EMPTY);
    }

    pub fn set(&mut self, e: ChainEntry) {
        self.entries[slot(e.rip)] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_in_range_and_spread() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..1000u64 {
            let s = slot(0x40_1000 + i * 16);
            assert!(s < ENTRIES);
            seen.insert(s);
        }
        assert!(seen.len() > 900, "{}", seen.len());
        assert_eq!(slot(u64::MAX), slot(u64::MAX));
    }
}
