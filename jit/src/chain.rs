//! Block chaining: a direct-mapped table, keyed by guest RIP, of compiled blocks that compiled
//! code may jump to directly (a `tail` call) instead of returning to the dispatcher.
//!
//! An entry is written by the dispatcher each time it runs a compiled block. It records what
//! the dispatcher's own lookup depended on: the physical page the execute TLB gave for the
//! block's RIP, and the code words (version + mark, `GuestRam::code_word`) of the block's
//! pages. A block exit with a known target (direct branches and fall-through: the slot index
//! is a compile-time constant; RET and near indirect JMP/CALL: hashed at run time) jumps to
//! the entry's function only if
//! - the entry's RIP is the target,
//! - the current execute TLB still maps the target's page to the recorded physical page (so
//!   the dispatcher would translate RIP the same way, with the same permissions),
//! - the code words of the block's pages are unchanged (no write hit its code since),
//! - no yield is pending, and the remaining budget covers the target block's whole length.
//!
//! Otherwise it returns to the dispatcher. These checks are local to the target: unrelated TLB
//! fills, privilege swaps and code writes elsewhere leave the link usable (a kernel fills and
//! flushes its execute TLB all the time). Only 64-bit blocks are compiled, and compiled code
//! never changes mode, so RIP is the linear address. The table is cleared whenever the module
//! is freed.

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
    /// Physical page address the execute TLB gave for `rip` (page-aligned).
    pub phys: u64,
    /// The block's code pages: physical page number in the low 32 bits, its code word in the
    /// high 32 (a one-page block repeats its page in `code1`).
    pub code0: u64,
    pub code1: u64,
}

pub const EMPTY: ChainEntry = ChainEntry {
    rip: u64::MAX,
    func: 0,
    len: u64::MAX,
    phys: u64::MAX,
    code0: 0,
    code1: 0,
};

/// Pack a page number and its code word for [`ChainEntry::code0`]; `None` when the page
/// number does not fit in 32 bits (such a block is not chained).
pub fn code_ref(page: u64, word: u32) -> Option<u64> {
    u32::try_from(page)
        .ok()
        .map(|p| p as u64 | (word as u64) << 32)
}

/// Entries in the table (a power of two).
pub const ENTRIES: usize = 1 << 13;
pub const ENTRY_BYTES: i64 = core::mem::size_of::<ChainEntry>() as i64;
pub const OFF_RIP: i32 = core::mem::offset_of!(ChainEntry, rip) as i32;
pub const OFF_FUNC: i32 = core::mem::offset_of!(ChainEntry, func) as i32;
pub const OFF_LEN: i32 = core::mem::offset_of!(ChainEntry, len) as i32;
pub const OFF_PHYS: i32 = core::mem::offset_of!(ChainEntry, phys) as i32;
pub const OFF_CODE0: i32 = core::mem::offset_of!(ChainEntry, code0) as i32;
pub const OFF_CODE1: i32 = core::mem::offset_of!(ChainEntry, code1) as i32;

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
