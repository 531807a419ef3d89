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
use std::sync::Arc;

/// Semantic entry point of one instruction form: checks, operands, semantics, writeback.
pub type Handler = fn(&mut Ctx, &Instruction) -> Result<(), Trap>;

/// One decoded instruction and its handler.
#[derive(Clone)]
pub struct DecodedInsn {
    pub ins: Instruction,
    pub handler: Handler,
}

/// Longest block, in instructions.
pub const MAX_BLOCK_INSNS: usize = 64;
/// Most blocks kept before the cache is flushed (bounds host memory).
pub const MAX_CACHED_BLOCKS: usize = 1 << 18;

/// A decoded basic block.
pub struct Block {
    pub insns: Vec<DecodedInsn>,
    /// Physical pages the block's bytes came from, with their code versions at decode time.
    pages: [(u64, u32); 2],
    npages: usize,
}

impl Block {
    /// Are all of the block's code pages unchanged since decode?
    #[inline]
    pub fn valid(&self, ram: &GuestRam) -> bool {
        self.pages[..self.npages]
            .iter()
            .all(|&(p, v)| ram.is_code_page(p) && ram.code_version(p) == v)
    }
}

/// Cache key: the block's physical address, its linear RIP (decoded RIP-relative operands and
/// branch targets depend on it) and the decode mode.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BlockKey {
    pub phys: u64,
    pub rip: u64,
    pub bitness: u32,
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

/// Decoded blocks of one vCPU.
#[derive(Default)]
pub struct BlockCache {
    map: FixedMap<BlockKey, Arc<Block>>,
    /// Blocks decoded since start (statistics).
    pub decoded: u64,
}

impl BlockCache {
    pub fn clear(&mut self) {
        self.map.clear();
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl Ctx<'_> {
    /// The block starting at the current RIP: from the cache if still valid, else decoded now.
    pub fn block_at_rip(&mut self) -> Result<Arc<Block>, Fault> {
        let rip = self.cpu.state.rip;
        let bitness = self.cpu.state.code_bitness();
        let lin = self.code_linear(rip);
        let phys = self.translate(lin, Access::Exec)?;
        let key = BlockKey { phys, rip, bitness };
        if let Some(b) = self.cpu.blocks.map.get(&key) {
            if b.valid(self.ram) {
                return Ok(b.clone());
            }
        }
        let block = Arc::new(self.decode_block(rip, lin, phys, bitness)?);
        if self.cpu.blocks.map.len() >= MAX_CACHED_BLOCKS {
            self.cpu.blocks.map.clear();
        }
        self.cpu.blocks.map.insert(key, block.clone());
        self.cpu.blocks.decoded += 1;
        Ok(block)
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

    fn decode_block(
        &mut self,
        rip: u64,
        lin: u64,
        phys: u64,
        bitness: u32,
    ) -> Result<Block, Fault> {
        let page = phys >> PAGE_SHIFT;
        let in_page = (PAGE_SIZE - (phys & 0xfff)) as usize;
        let mut buf = [0u8; 4096 + 16];
        self.fetch_bytes(lin, &mut buf[..in_page])?;
        let mut insns = Vec::with_capacity(16);
        let mut pages = [(page, 0u32), (0, 0)];
        let mut npages = 1;
        let mut pos = 0usize;
        while insns.len() < MAX_BLOCK_INSNS && pos < in_page {
            let ip = rip.wrapping_add(pos as u64);
            let mut dec = Decoder::with_ip(bitness, &buf[pos..in_page], ip, DecoderOptions::NONE);
            let mut ins = Instruction::default();
            dec.decode_out(&mut ins);
            if ins.is_invalid() && dec.last_error() == iced_x86::DecoderError::NoMoreBytes {
                if !insns.is_empty() {
                    break; // Let the straddling instruction start its own block.
                }
                // The first instruction crosses into the next page: fetch it (may fault there).
                let next_lin = lin.wrapping_add(in_page as u64);
                let need = 15usize.saturating_sub(in_page - pos).min(15);
                let next_phys = self.translate(next_lin, Access::Exec)?;
                self.fetch_bytes(next_lin, &mut buf[in_page..in_page + need])?;
                let mut dec =
                    Decoder::with_ip(bitness, &buf[pos..in_page + need], ip, DecoderOptions::NONE);
                dec.decode_out(&mut ins);
                pages[1] = (next_phys >> PAGE_SHIFT, 0);
                npages = 2;
                let handler = ops::lookup(&ins);
                insns.push(DecodedInsn { ins, handler });
                break;
            }
            let len = ins.len();
            let ends = ins.is_invalid()
                || ins.flow_control() != FlowControl::Next
                || ops::ends_block(&ins);
            let handler = ops::lookup(&ins);
            insns.push(DecodedInsn { ins, handler });
            pos += len.max(1);
            if ends {
                break;
            }
        }
        for (p, v) in pages[..npages].iter_mut() {
            if !self.ram.contains(*p << PAGE_SHIFT, PAGE_SIZE) {
                return Err(Fault::ud(
                    "executing from MMIO (non-RAM) memory is not supported",
                ));
            }
            *v = self.ram.mark_code(*p);
            self.cpu.tlb.flush_writes_to(*p << PAGE_SHIFT);
        }
        Ok(Block {
            insns,
            pages,
            npages,
        })
    }
}
