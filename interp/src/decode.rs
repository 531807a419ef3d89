//! Basic-block decoding with iced-x86 and the decoded-block cache keyed by physical address.
//!
//! A block is decoded once and reused until one of its code pages is written (page code
//! versions in [`GuestRam`]) or the cache is flushed. Each instruction carries the handler
//! chosen for it at decode time, so execution never re-dispatches on the opcode.

use crate::ctx::Ctx;
use crate::fault::{Fault, Trap};
use crate::mem::{GuestRam, PAGE_SHIFT, PAGE_SIZE};
use crate::mmu::Access;
use crate::ops;
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Semantic entry point of one instruction form: checks, operands, semantics, writeback.
pub type Handler = fn(&mut Ctx, &Instruction) -> Result<(), Trap>;

/// One decoded instruction and its handler.
#[derive(Clone)]
pub struct DecodedInsn {
    pub ins: Instruction,
    pub handler: Handler,
}

/// Lookup epochs that never match a real pair (epochs start at multiples of 2^32 and count
/// up): see [`Ctx::code_lookup_epochs`].
pub const UNCHECKED: (u64, u64) = (u64::MAX, u64::MAX);

/// Longest block, in instructions.
pub const MAX_BLOCK_INSNS: usize = 64;
/// Most blocks kept before the cache is flushed (bounds host memory).
pub const MAX_CACHED_BLOCKS: usize = 1 << 18;

/// A decoded basic block.
#[derive(Clone)]
pub struct Block {
    /// The instructions. Empty while the engine runs the block (it takes them out of the cache
    /// for the duration, see [`BlockCache::take_insns`]).
    pub insns: Box<[DecodedInsn]>,
    key: BlockKey,
    /// Linear address of the block's first byte when it was last found valid.
    lin: u64,
    /// The execute-TLB and code epochs at which the block was last found valid for `lin`: while
    /// both are unchanged, the same lookup would find it again (same translation, same code).
    /// [`UNCHECKED`] when no lookup may be skipped.
    checked: (u64, u64),
    /// Every instruction has a specialised handler (`ops::fast`): each retires exactly one
    /// instruction and none reads or changes `cpu.retired`, so the engine may count them in bulk.
    pub all_fast: bool,
    /// Physical pages the block's bytes came from, with their code versions at decode time.
    pages: [(u64, u32); 2],
    npages: usize,
}

impl Block {
    /// Are all of the block's code pages unchanged since decode?
    #[inline]
    pub fn valid(&self, ram: &GuestRam) -> bool {
        self.code_words().all(|(p, w)| ram.code_word(p) == w)
    }

    /// The physical pages the block's bytes came from (one or two), each with the code word
    /// ([`GuestRam::code_word`]) the page has for as long as the block stays valid.
    pub fn code_words(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.pages[..self.npages]
            .iter()
            .map(|&(p, v)| (p, crate::mem::valid_code_word(v)))
    }

    /// The block's cache key (its physical address, RIP and decode mode).
    pub fn key(&self) -> BlockKey {
        self.key
    }
}

/// Cache key: the block's physical address, its linear RIP (decoded RIP-relative operands and
/// branch targets depend on it), the decode mode and the CS-limit window.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlockKey {
    pub phys: u64,
    pub rip: u64,
    pub bitness: u32,
    /// Legacy modes: the number of bytes from RIP to CS.limit (inclusive) when that is small
    /// enough to cut the block ([`CUT_NONE`] or more is stored as 0); always 0 in 64-bit
    /// mode. A block never holds bytes beyond its window: the instruction that would cross
    /// CS.limit is replaced by one raising #GP(0).
    pub cut: u32,
}

/// A CS-limit window at least this long cannot cut a block (one page of instructions plus
/// the 14 bytes of a first instruction running into the next page).
pub const CUT_NONE: u64 = PAGE_SIZE + 16;

/// The CS-limit window of a legacy-mode fetch at `rip` ([`BlockKey::cut`]); #GP(0) when RIP
/// itself is beyond the limit.
#[inline]
fn cut_window(st: &crate::state::CpuState, rip: u64) -> Result<u32, Fault> {
    let limit = st.seg[crate::state::sreg::CS].limit as u64;
    if rip > limit {
        return Err(Fault::GP0);
    }
    let avail = limit - rip + 1;
    Ok(if avail >= CUT_NONE { 0 } else { avail as u32 })
}

/// Stands for the instruction that crosses CS.limit at the end of a cut block.
fn cs_limit_fault(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::GP0.into())
}

/// The pseudo-instruction at `rip` that raises #GP(0) because the instruction there runs past
/// CS.limit (its bytes beyond the limit are never fetched).
fn cs_limit_insn(rip: u64) -> DecodedInsn {
    let mut ins = Instruction::default();
    ins.set_ip(rip);
    ins.set_next_ip(rip);
    DecodedInsn {
        ins,
        handler: cs_limit_fault,
    }
}

/// FxHash-style fixed hasher: deterministic, and the cache is never iterated anyway.
#[derive(Default)]
pub struct FixedHasher(u64);

impl Hasher for FixedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64)
    }
}

pub type FixedMap<K, V> = HashMap<K, V, BuildHasherDefault<FixedHasher>>;

/// Entries of the jump cache (a power of two).
const JUMP_ENTRIES: usize = 4096;
const NO_BLOCK: u32 = u32::MAX;

/// A jump-cache entry: the last block found for a RIP (its key is re-checked on every hit).
#[derive(Clone, Copy)]
struct JumpEntry {
    rip: u64,
    block: u32,
}

const EMPTY_JUMP: JumpEntry = JumpEntry {
    rip: 0,
    block: NO_BLOCK,
};

/// Decoded blocks of one vCPU: an arena of blocks, a map from [`BlockKey`] to arena index and a
/// direct-mapped jump cache from RIP to arena index in front of the map. A jump-cache hit is
/// only used after checking the full key (physical address from the current translation, RIP,
/// bitness) and the code versions, so it returns exactly the block the map would.
pub struct BlockCache {
    map: FixedMap<BlockKey, u32>,
    arena: Vec<Block>,
    jump: Box<[JumpEntry; JUMP_ENTRIES]>,
    /// Bumped by every [`BlockCache::clear`]; instructions taken out of the arena before a
    /// clear are not put back.
    generation: u64,
    /// Blocks decoded since start (statistics).
    pub decoded: u64,
}

impl Default for BlockCache {
    fn default() -> Self {
        BlockCache {
            map: FixedMap::default(),
            arena: Vec::new(),
            jump: Box::new([EMPTY_JUMP; JUMP_ENTRIES]),
            generation: 0,
            decoded: 0,
        }
    }
}

impl BlockCache {
    pub fn clear(&mut self) {
        self.map.clear();
        self.arena.clear();
        self.jump.fill(EMPTY_JUMP);
        self.generation = self.generation.wrapping_add(1);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[inline(always)]
    fn jump_slot(rip: u64) -> usize {
        (rip ^ (rip >> 12)) as usize & (JUMP_ENTRIES - 1)
    }

    /// The block at arena index `idx` (as returned by [`Ctx::block_at_rip`]).
    #[inline]
    pub fn block(&self, idx: u32) -> &Block {
        &self.arena[idx as usize]
    }

    /// Take the instructions of block `idx` out of the cache while they run (so the engine can
    /// hold them while handlers get the whole CPU mutably). Give them back with
    /// [`BlockCache::put_insns`] and the generation returned here.
    #[inline]
    pub fn take_insns(&mut self, idx: u32) -> (Box<[DecodedInsn]>, bool, u64) {
        let b = &mut self.arena[idx as usize];
        (std::mem::take(&mut b.insns), b.all_fast, self.generation)
    }

    /// Return instructions taken by [`BlockCache::take_insns`]; dropped if the cache was
    /// cleared in between.
    #[inline]
    pub fn put_insns(&mut self, idx: u32, insns: Box<[DecodedInsn]>, generation: u64) {
        if generation == self.generation {
            if let Some(b) = self.arena.get_mut(idx as usize) {
                // The slot holds the empty slice `take_insns` left (no allocation to free).
                std::mem::forget(std::mem::replace(&mut b.insns, insns));
            }
        }
    }

    /// Insert a freshly decoded block (replacing a stale one with the same key); returns its index.
    fn insert(&mut self, block: Block) -> u32 {
        if let Some(&i) = self.map.get(&block.key) {
            self.arena[i as usize] = block;
            return i;
        }
        if self.map.len() >= MAX_CACHED_BLOCKS {
            self.clear();
        }
        let i = self.arena.len() as u32;
        self.map.insert(block.key, i);
        self.arena.push(block);
        i
    }
}

impl Ctx<'_> {
    /// The block starting at the current RIP (its arena index in `cpu.blocks`): from the cache
    /// if still valid, else decoded now.
    #[inline]
    pub fn block_at_rip(&mut self) -> Result<u32, Fault> {
        // The TLB set must match the CPL before any instruction of the block looks it up.
        self.sync_tlb_privilege();
        let st = &self.cpu.state;
        let rip = st.rip;
        let (bitness, lin, cut) = if st.in_64bit_mode() {
            (64, rip, 0)
        } else {
            (
                st.code_bitness(),
                self.code_linear(rip),
                cut_window(st, rip)?,
            )
        };
        let slot = BlockCache::jump_slot(rip);
        let e = self.cpu.blocks.jump[slot];
        if e.rip == rip {
            if let Some(b) = self.cpu.blocks.arena.get(e.block as usize) {
                // Nothing the lookup depends on has changed since the block was last found
                // valid at this RIP: the translation (execute TLB unchanged) and the code.
                if self.cpu.tlb.exec_epoch_holds(b.checked.0)
                    && b.checked.1 == self.ram.code_epoch()
                    && b.lin == lin
                    && b.key.rip == rip
                    && b.key.bitness == bitness
                    && b.key.cut == cut
                {
                    return Ok(e.block);
                }
            }
        }
        self.block_at_checked(rip, bitness, cut, lin, slot)
    }

    /// The cache key of the block at the current RIP and its linear address (for engines with
    /// their own block cache): bitness, CS-limit window (#GP(0) when RIP is beyond CS.limit
    /// in a legacy mode, before any translation) and the execute translation (may fault).
    #[inline]
    pub fn block_key(&mut self) -> Result<(BlockKey, u64), Fault> {
        let st = &self.cpu.state;
        let rip = st.rip;
        let (bitness, lin, cut) = if st.in_64bit_mode() {
            (64, rip, 0)
        } else {
            (
                st.code_bitness(),
                self.code_linear(rip),
                cut_window(st, rip)?,
            )
        };
        let phys = self.translate(lin, Access::Exec)?;
        Ok((
            BlockKey {
                phys,
                rip,
                bitness,
                cut,
            },
            lin,
        ))
    }

    /// The full lookup: translate, then the jump cache entry or the map (checking the block's
    /// key and code versions), else decode. Records the epochs at which the block was found.
    #[inline(never)]
    fn block_at_checked(
        &mut self,
        rip: u64,
        bitness: u32,
        cut: u32,
        lin: u64,
        slot: usize,
    ) -> Result<u32, Fault> {
        let phys = self.translate(lin, Access::Exec)?;
        let key = BlockKey {
            phys,
            rip,
            bitness,
            cut,
        };
        let e = self.cpu.blocks.jump[slot];
        let idx = match self.cpu.blocks.arena.get(e.block as usize) {
            Some(b) if e.rip == rip && b.key == key && b.valid(self.ram) => e.block,
            _ => self.block_at_slow(key, lin)?,
        };
        self.cpu.blocks.jump[slot] = JumpEntry { rip, block: idx };
        let checked = self.code_lookup_epochs(lin);
        let b = &mut self.cpu.blocks.arena[idx as usize];
        b.lin = lin;
        b.checked = checked;
        Ok(idx)
    }

    /// The epochs under which a block just found for code at linear `lin` stays the block a
    /// new lookup there would find (while both are unchanged, the lookup may be skipped): the
    /// execute-TLB and code epochs when the execute TLB holds `lin`'s translation, else
    /// [`UNCHECKED`] — a translation that is never cached (a supervisor fetch from a user page
    /// under SMAP) can change without any epoch moving, so it is walked again every time.
    /// (lockstep-jit's front table redoes the execute-TLB lookup instead, which is exact in the
    /// same way: both engines see a remapping at the same instruction.)
    #[inline]
    pub fn code_lookup_epochs(&self, lin: u64) -> (u64, u64) {
        match self.cpu.tlb.exec_hit_epoch(lin) {
            Some(e) => (e, self.ram.code_epoch()),
            None => UNCHECKED,
        }
    }

    /// Map lookup, then decode.
    fn block_at_slow(&mut self, key: BlockKey, lin: u64) -> Result<u32, Fault> {
        if let Some(&i) = self.cpu.blocks.map.get(&key) {
            if self.cpu.blocks.arena[i as usize].valid(self.ram) {
                return Ok(i);
            }
        }
        let block = self.decode_block(key, lin)?;
        self.cpu.blocks.decoded += 1;
        Ok(self.cpu.blocks.insert(block))
    }

    /// Linear address of a code offset (CS base applies outside 64-bit mode).
    #[inline]
    pub fn code_linear(&self, rip: u64) -> u64 {
        let st = &self.cpu.state;
        if st.in_64bit_mode() {
            rip
        } else {
            st.seg[crate::state::sreg::CS].base.wrapping_add(rip) & 0xffff_ffff
        }
    }

    fn decode_block(&mut self, key: BlockKey, lin: u64) -> Result<Block, Fault> {
        let BlockKey {
            phys,
            rip,
            bitness,
            cut,
        } = key;
        let page = phys >> PAGE_SHIFT;
        // Bytes that may be fetched: to the end of the page, and not beyond CS.limit.
        let window = if cut == 0 { usize::MAX } else { cut as usize };
        let in_page = ((PAGE_SIZE - (phys & 0xfff)) as usize).min(window);
        // The first instruction does not fit before CS.limit (not the page end): #GP(0).
        let limit_in_page = window <= in_page;
        let mut insns = Vec::with_capacity(16);
        let mut pages = [(page, 0u32), (0, 0)];
        let mut npages = 1;
        // The first bytes, kept when the first instruction runs past the end of the page.
        let mut head = [0u8; 16];
        let first_straddles = if self.ram.contains(phys, in_page as u64) {
            // RAM: decode in place. (Fetching would copy exactly these bytes: the translation
            // was just made and is in the TLB.)
            let bytes = &self.ram.bytes()[phys as usize..phys as usize + in_page];
            let r = decode_run(&mut insns, bytes, rip, bitness);
            if r {
                let n = in_page.min(15);
                head[..n].copy_from_slice(&bytes[..n]);
            }
            r
        } else {
            let mut buf = vec![0u8; in_page];
            self.fetch_bytes(lin, &mut buf)?;
            let r = decode_run(&mut insns, &buf, rip, bitness);
            if r {
                let n = in_page.min(15);
                head[..n].copy_from_slice(&buf[..n]);
            }
            r
        };
        if first_straddles && limit_in_page {
            insns.push(cs_limit_insn(rip));
        } else if first_straddles {
            // The first instruction crosses into the next page (so `in_page` < 15): fetch the
            // rest of it from there (may fault there), up to CS.limit.
            let have = in_page.min(15);
            let next_lin = lin.wrapping_add(in_page as u64);
            let need = 15usize.min(window) - have;
            let next_phys = self.translate(next_lin, Access::Exec)?;
            self.fetch_bytes(next_lin, &mut head[have..have + need])?;
            let mut dec =
                Decoder::with_ip(bitness, &head[..have + need], rip, DecoderOptions::NONE);
            let mut ins = Instruction::default();
            dec.decode_out(&mut ins);
            pages[1] = (next_phys >> PAGE_SHIFT, 0);
            npages = 2;
            if ins.is_invalid() && dec.last_error() == iced_x86::DecoderError::NoMoreBytes {
                // Runs past CS.limit on the next page.
                insns.push(cs_limit_insn(rip));
            } else {
                let handler = ops::lookup(&ins);
                insns.push(DecodedInsn { ins, handler });
            }
        }
        for (p, v) in pages[..npages].iter_mut() {
            if !self.ram.contains(*p << PAGE_SHIFT, PAGE_SIZE) {
                return Err(Fault::ud(
                    "executing from MMIO (non-RAM) memory is not supported",
                ));
            }
            // Write entries to a marked page are never inserted (`Ctx::translate_slow`), and
            // only a write clears the mark: flush them when the page becomes marked.
            if !self.ram.is_code_page(*p) {
                self.cpu.tlb.flush_writes_to(*p << PAGE_SHIFT);
            }
            *v = self.ram.mark_code(*p);
        }
        let all_fast = insns.iter().all(|d| ops::fast::lookup(&d.ins).is_some());
        Ok(Block {
            insns: insns.into_boxed_slice(),
            all_fast,
            key,
            lin,
            // Set when the lookup finishes.
            checked: UNCHECKED,
            pages,
            npages,
        })
    }
}

/// Decode a block's instructions from `bytes` (starting at `rip`) into `insns`, up to the
/// first control transfer or block-ending instruction, an invalid encoding or
/// [`MAX_BLOCK_INSNS`]. An instruction that runs past the end of `bytes` is left for its own
/// block; returns true when that is the very first one (the caller fetches the next page).
fn decode_run(insns: &mut Vec<DecodedInsn>, bytes: &[u8], rip: u64, bitness: u32) -> bool {
    let mut dec = Decoder::with_ip(bitness, bytes, rip, DecoderOptions::NONE);
    let mut pos = 0usize;
    while insns.len() < MAX_BLOCK_INSNS && pos < bytes.len() {
        let mut ins = Instruction::default();
        dec.decode_out(&mut ins);
        if ins.is_invalid() && dec.last_error() == iced_x86::DecoderError::NoMoreBytes {
            return insns.is_empty();
        }
        let len = ins.len();
        let ends =
            ins.is_invalid() || ins.flow_control() != FlowControl::Next || ops::ends_block(&ins);
        let handler = ops::lookup(&ins);
        insns.push(DecodedInsn { ins, handler });
        pos += len.max(1);
        if ends {
            break;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::state::reg;
    use crate::testkit::{TestMachine, CODE_BASE};
    use iced_x86::code_asm::*;

    /// A loop block that already ran (and sits in the jump cache) is rewritten by a later
    /// block; the next pass runs the new code.
    #[test]
    fn code_written_by_another_block_is_redecoded() {
        // loop: add rdx, 1 ; dec rcx ; jnz loop   (rdx += 1 per pass)
        // then patch the `add rdx, 1` imm8 to 5, reset rcx, run the loop again, ud2.
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            let mut again = a.create_label();
            let mut done = a.create_label();
            a.mov(ecx, 3u32)?;
            a.set_label(&mut top)?;
            a.add(rdx, 1)?;
            a.dec(rcx)?;
            a.jne(top)?;
            a.cmp(rbx, 0)?;
            a.jne(done)?;
            a.mov(rbx, 1u64)?;
            a.set_label(&mut again)?;
            a.mov(rcx, 2u64)?;
            a.mov(byte_ptr(CODE_BASE + 5 + 3), 5u32)?;
            a.jmp(top)?;
            a.set_label(&mut done)?;
            a.ud2()
        });
        // `mov ecx, 3` is 5 bytes (B9 imm32); `add rdx, 1` is 48 83 C2 01.
        assert_eq!(&code[5..9], &[0x48, 0x83, 0xc2, 0x01]);
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 1000);
        assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
        assert_eq!(m.gpr(reg::RDX), 3 + 2 * 5);
    }

    /// Code changed from outside the CPU (the harness writing guest RAM) between runs is seen.
    #[test]
    fn code_written_between_runs_is_seen() {
        let mut m = TestMachine::new();
        let one = TestMachine::assemble(|a| {
            a.mov(eax, 1u32)?;
            a.ud2()
        });
        let two = TestMachine::assemble(|a| {
            a.mov(eax, 2u32)?;
            a.ud2()
        });
        for (code, want) in [(&one, 1), (&one, 1), (&two, 2), (&one, 1)] {
            let e = m.run_code(code, 10);
            assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
            assert_eq!(m.gpr(reg::RAX), want);
        }
    }

    /// Remapping the code page and flushing the TLB makes the same RIP run the new page's code.
    #[test]
    fn remapped_code_page_runs_after_tlb_flush() {
        let mut m = TestMachine::new();
        let one = TestMachine::assemble(|a| {
            a.mov(eax, 1u32)?;
            a.ud2()
        });
        let two = TestMachine::assemble(|a| {
            a.mov(eax, 2u32)?;
            a.ud2()
        });
        // Map linear 0x7f00_0000_0000 with a 4 KiB page to CODE_BASE, then to CODE_BASE + 4096.
        const LIN: u64 = 0x7f00_0000_0000;
        let (pdpt, pd, pt) = (0x10000u64, 0x11000u64, 0x12000u64);
        let pml4 = m.cpu.state.cr3;
        m.ram
            .write_u64(pml4 + ((LIN >> 39) & 511) * 8, pdpt | 7)
            .unwrap();
        m.ram.write_u64(pdpt, pd | 7).unwrap();
        m.ram.write_u64(pd, pt | 7).unwrap();
        m.load(CODE_BASE, &one);
        m.load(CODE_BASE + 4096, &two);
        for (phys, want) in [(CODE_BASE, 1), (CODE_BASE + 4096, 2), (CODE_BASE, 1)] {
            m.ram.write_u64(pt, phys | 7).unwrap();
            m.cpu.flush_tlb();
            m.cpu.state.rip = LIN;
            let e = m.run(10);
            assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
            assert_eq!(m.gpr(reg::RAX), want);
        }
    }

    /// An instruction that crosses into the next page: decoded from both pages, and a later
    /// write to its bytes on the second page is seen.
    #[test]
    fn instruction_crossing_a_page_boundary() {
        let mut m = TestMachine::new();
        let start = CODE_BASE + 4096 - 4;
        let code = |imm: u64| {
            let mut a = CodeAssembler::new(64).unwrap();
            a.nop().unwrap();
            a.mov(rax, imm).unwrap(); // 10 bytes at page end - 3: 3 here, 7 on the next page
            a.ud2().unwrap();
            a.assemble(start).unwrap()
        };
        let first = code(0x1122_3344_5566_7788);
        assert_eq!(first.len(), 13);
        m.load(start, &first);
        for want in [0x1122_3344_5566_7788u64, 0x99aa_bbcc_ddee_ff88] {
            // The second run changes only bytes on the second page.
            let bytes = code(want);
            assert_eq!(bytes[..4], first[..4]);
            m.load(start, &bytes);
            m.cpu.state.rip = start;
            let e = m.run(10);
            assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
            assert_eq!(e.retired, 2);
            assert_eq!(m.gpr(reg::RAX), want);
        }
    }

    /// An instruction that crosses into a page that is not mapped: the instructions before it
    /// run (in their own block), then #PF for the second page at the crossing instruction.
    #[test]
    fn instruction_crossing_into_an_unmapped_page_faults() {
        let mut m = TestMachine::new();
        // Linear 0x7f00_0000_0000: one 4 KiB page mapped to CODE_BASE, the next one not.
        const LIN: u64 = 0x7f00_0000_0000;
        let (pdpt, pd, pt) = (0x10000u64, 0x11000u64, 0x12000u64);
        let pml4 = m.cpu.state.cr3;
        m.ram
            .write_u64(pml4 + ((LIN >> 39) & 511) * 8, pdpt | 7)
            .unwrap();
        m.ram.write_u64(pdpt, pd | 7).unwrap();
        m.ram.write_u64(pd, pt | 7).unwrap();
        m.ram.write_u64(pt, CODE_BASE | 7).unwrap();
        m.cpu.flush_tlb();
        let start = LIN + 4096 - 5;
        let mut a = CodeAssembler::new(64).unwrap();
        a.nop().unwrap();
        a.nop().unwrap();
        a.mov(rax, 0x1122_3344_5566_7788u64).unwrap(); // starts 3 bytes before the page end
        let bytes = a.assemble(start).unwrap();
        m.load(CODE_BASE + 4096 - 5, &bytes[..5]);
        m.cpu.state.rip = start;
        let e = m.run(10);
        assert_eq!(e.retired, 2);
        assert!(
            matches!(
                e.reason,
                ExitReason::Exception(Fault::PageFault { addr, .. }) if addr == LIN + 4096
            ),
            "{:?}",
            e.reason
        );
        assert_eq!(m.cpu.state.rip, start + 2);
        assert_eq!(m.gpr(reg::RAX), 0);
    }
}
