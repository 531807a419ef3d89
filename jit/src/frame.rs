//! The block frame: one `#[repr(C)]` record per engine run that compiled blocks and their
//! helpers share (context and state pointers, TLB tables, budget limits, exit reason).

use crate::page_gen::{Epochs, Gens};
use core::mem::offset_of;
use lockstep_interp::mmu::Access;
use lockstep_interp::{Cpu, CpuState, Ctx, ExitReason};

/// What a compiled block returns, its *exit word*, and what the instruction trampoline returns
/// (a bare status).
///
/// Bits 0–3 are the status ([`ret::STOP`], [`ret::DISPATCH`]; the trampoline also returns
/// [`ret::NEXT`]). Bit 4, [`ret::DEFER`] (with `STOP`): the block left before an instruction
/// whose memory access missed its inline fast path, and the dispatcher interprets from there.
/// Bit 5, [`ret::PACKED`]: the exit did not store RIP and did not add its block's retired
/// instructions to `cpu.retired`; the word carries both — bits 8–15 the instructions to add,
/// bits 16–63 RIP (sign-extended from bit 47) — and the dispatcher applies them
/// ([`ret::apply`]). A cold exit with a constant RIP is then one constant and a return instead of
/// up to ten IR instructions of stores (docs/jit.md, "Exits").
pub mod ret {
    /// Trampoline only: the instruction completed, continue with the next one in the block.
    pub const NEXT: u64 = 0;
    /// Stop the engine: the reason is in [`super::Frame::exit`], or, with [`DEFER`], the
    /// interpreter runs the instruction at RIP. RIP and `retired` are exact (after
    /// [`apply`]).
    pub const STOP: u64 = 1;
    /// The block ended (or was left early); RIP and `retired` are exact (after [`apply`]),
    /// keep dispatching.
    pub const DISPATCH: u64 = 2;
    /// A baseline function left at its entry, before its first instruction (RIP and
    /// `retired` exact, as for [`DISPATCH`]), because its run counter ran out: the dispatcher
    /// compiles its block again with Cranelift (see `crate::base::RunCounters`).
    pub const PROMOTE: u64 = 3;
    /// The status bits of an exit word.
    pub const STATUS: u64 = 0xf;
    pub const DEFER: u64 = 1 << 4;
    pub const PACKED: u64 = 1 << 5;
    const K_SHIFT: u32 = 8;
    const RIP_SHIFT: u32 = 16;

    /// The exit word for `status` (with [`DEFER`] or not) that sets RIP to `rip` and adds `k`
    /// to `cpu.retired`; `None` when they do not fit (a non-canonical RIP, `k` ≥ 256).
    pub fn pack(status: u64, rip: u64, k: u64) -> Option<u64> {
        let canonical = ((rip << RIP_SHIFT) as i64 >> RIP_SHIFT) as u64 == rip;
        (canonical && k < 256).then_some(status | PACKED | k << K_SHIFT | rip << RIP_SHIFT)
    }

    /// Apply what a packed exit word carries to `rip` and `retired` (nothing for a word
    /// without [`PACKED`]).
    pub fn apply(word: u64, rip: &mut u64, retired: &mut u64) {
        if word & PACKED != 0 {
            *rip = (word as i64 >> RIP_SHIFT) as u64;
            *retired += (word >> K_SHIFT) & 0xff;
        }
    }
}

/// Shared between the dispatcher, compiled code and the helpers. Compiled code reads the
/// fields by offset ([`Frame::OFF_TLB_READ`], …).
#[repr(C)]
pub struct Frame {
    /// `&mut ctx.cpu.state` (compiled code gets it as its first argument too).
    pub state: *mut CpuState,
    /// The `Ctx` of the current run (lifetime erased; only used while the run lasts).
    pub ctx: *mut Ctx<'static>,
    /// Read and write TLB tables (see `lockstep_interp::mmu::Tlb::raw_table`; their entries
    /// hold host addresses into this machine's RAM, `Ctx::new` sees to that).
    pub tlb_read: *const u64,
    pub tlb_write: *const u64,
    /// `cpu.budget_end`: compiled code compares it after instructions that may retire more
    /// than one (REP strings).
    pub budget_end: u64,
    /// Chaining (see `crate::chain`): the current execute-TLB table (re-read by every helper,
    /// since helpers are the only code that can swap the TLB's privilege sets), the RAM's code
    /// words (`GuestRam::code_table`), the `retired` value no chained block may go past
    /// (`budget_end`, or 0 to disable chaining, as `Verify` does), and the number of chained
    /// jumps taken (statistics).
    pub tlb_exec: *const u64,
    pub code_table: *const u32,
    /// A flag record handed from a block exit to the block it jumps to (see
    /// `lift::flags::encode`; `fl_code` 0: none): the status flags in `CpuState::rflags` are
    /// stale and this record defines them. Only meaningful on entry through a chained jump.
    pub fl_code: u64,
    pub fl_a: u64,
    pub fl_b: u64,
    pub fl_res: u64,
    pub fl_cin: u64,
    pub chain_end: u64,
    pub chains: u64,
    /// The `retired` value no jump between the blocks of one region may go past (`budget_end`;
    /// `Verify` lowers it so that one dispatch stays short).
    pub region_end: u64,
    /// The current page generation (`crate::page_gen`), which compiled page checks compare
    /// with first, and the engine's record of generations that [`Frame::sync_tlb`] keeps it
    /// by (null: none; the generation stays 0, which no check compares with).
    pub gen: u64,
    /// See [`Frame::gen`].
    pub gens: *mut Gens,
    /// Host deltas of TLB hits a baseline function keeps for later accesses (`base::emit`,
    /// `Emit::kept`): written and read only within one run of one function.
    pub hits: [u64; Frame::HIT_SLOTS],
    /// Why the block stopped the engine (with [`ret::STOP`] without [`ret::DEFER`]).
    pub exit: Option<ExitReason>,
}

impl Frame {
    pub const OFF_TLB_READ: i32 = offset_of!(Frame, tlb_read) as i32;
    pub const OFF_TLB_WRITE: i32 = offset_of!(Frame, tlb_write) as i32;
    pub const OFF_BUDGET_END: i32 = offset_of!(Frame, budget_end) as i32;
    pub const OFF_TLB_EXEC: i32 = offset_of!(Frame, tlb_exec) as i32;
    pub const OFF_CODE_TABLE: i32 = offset_of!(Frame, code_table) as i32;
    pub const OFF_FL_CODE: i32 = offset_of!(Frame, fl_code) as i32;
    pub const OFF_FL_A: i32 = offset_of!(Frame, fl_a) as i32;
    pub const OFF_FL_B: i32 = offset_of!(Frame, fl_b) as i32;
    pub const OFF_FL_RES: i32 = offset_of!(Frame, fl_res) as i32;
    pub const OFF_FL_CIN: i32 = offset_of!(Frame, fl_cin) as i32;
    pub const OFF_CHAIN_END: i32 = offset_of!(Frame, chain_end) as i32;
    pub const OFF_CHAINS: i32 = offset_of!(Frame, chains) as i32;
    pub const OFF_REGION_END: i32 = offset_of!(Frame, region_end) as i32;
    pub const OFF_GEN: i32 = offset_of!(Frame, gen) as i32;
    /// Slots of [`Frame::hits`].
    pub const HIT_SLOTS: usize = 4;

    /// The byte offset of hit slot `slot` (below [`Frame::HIT_SLOTS`]).
    pub const fn hit_off(slot: usize) -> i32 {
        (offset_of!(Frame, hits) + 8 * slot) as i32
    }
    /// How far past the count `region_end` may lie: far beyond any dispatch, and small
    /// enough that a region's count relative to it (`lift::Lower::biased`) never wraps a signed
    /// compare while the count grows within one dispatch.
    pub const COUNT_REACH: u64 = 1 << 62;
    /// Where `cpu.retired` is relative to `cpu.state` (both fields of one `Cpu`, whose state
    /// [`Frame::refresh`] takes): compiled code addresses the count from its `state` argument
    /// rather than through a pointer to it, one load instead of two.
    pub const STATE_TO_RETIRED: i32 =
        (offset_of!(Cpu, retired) as i64 - offset_of!(Cpu, state) as i64) as i32;

    /// A frame for `ctx`. The raw pointers stay valid while `ctx` is neither moved nor dropped
    /// and its TLB is not replaced; the dispatcher refreshes them before each block.
    /// `gens`: the engine's generations (see [`Frame::gens`]), alive and not otherwise
    /// borrowed while the frame is used.
    pub fn new(ctx: &mut Ctx<'_>, gens: *mut Gens) -> Frame {
        let mut f = Frame {
            state: core::ptr::null_mut(),
            ctx: core::ptr::null_mut(),
            tlb_read: core::ptr::null(),
            tlb_write: core::ptr::null(),
            budget_end: 0,
            tlb_exec: core::ptr::null(),
            code_table: core::ptr::null(),
            fl_code: 0,
            fl_a: 0,
            fl_b: 0,
            fl_res: 0,
            fl_cin: 0,
            chain_end: 0,
            chains: 0,
            region_end: 0,
            gen: 0,
            gens,
            hits: [0; Frame::HIT_SLOTS],
            exit: None,
        };
        f.refresh(ctx);
        f
    }

    /// Re-derive every pointer from `ctx` (before a compiled block runs).
    #[inline]
    pub fn refresh(&mut self, ctx: &mut Ctx<'_>) {
        self.state = &raw mut ctx.cpu.state;
        self.budget_end = ctx.cpu.budget_end;
        self.chain_end = ctx.cpu.budget_end;
        // (Within `COUNT_REACH` of the count: a region counts relative to it.)
        self.region_end = ctx
            .cpu
            .budget_end
            .min(ctx.cpu.retired.saturating_add(Self::COUNT_REACH));
        self.code_table = ctx.ram.code_table();
        self.fl_code = 0;
        self.ctx = (ctx as *mut Ctx<'_>).cast();
        self.sync_tlb(ctx);
    }

    /// Re-read the TLB tables (after anything that may have swapped the TLB's sets).
    #[inline]
    pub fn sync_tlb(&mut self, ctx: &Ctx<'_>) {
        self.tlb_read = ctx.cpu.tlb.raw_table(Access::Read);
        self.tlb_write = ctx.cpu.tlb.raw_table(Access::Write);
        self.tlb_exec = ctx.cpu.tlb.raw_table(Access::Exec);
        // SAFETY: `gens` is null or the engine's `Gens`, which outlives the frame and which
        // nothing else touches while the frame is in use (see `Frame::new`).
        if let Some(g) = unsafe { self.gens.as_mut() } {
            self.gen = g.sync(Epochs::of(&ctx.cpu.tlb, &*ctx.ram)) as u64;
        }
    }
}

/// Byte offset of `gpr[i]` in [`CpuState`].
pub const fn gpr_off(i: usize) -> i32 {
    (offset_of!(CpuState, gpr) + 8 * i) as i32
}
pub const OFF_RIP: i32 = offset_of!(CpuState, rip) as i32;
pub const OFF_RFLAGS: i32 = offset_of!(CpuState, rflags) as i32;
pub const OFF_CR0: i32 = offset_of!(CpuState, cr0) as i32;
pub const OFF_CR4: i32 = offset_of!(CpuState, cr4) as i32;

/// Byte offset of segment `i`'s base in [`CpuState`].
pub fn seg_base_off(i: usize) -> i32 {
    (offset_of!(CpuState, seg)
        + i * core::mem::size_of::<lockstep_interp::state::Segment>()
        + offset_of!(lockstep_interp::state::Segment, base)) as i32
}

#[cfg(test)]
mod tests {
    use super::ret;

    #[test]
    fn packed_exit_words_give_back_rip_and_count() {
        for (rip, k) in [
            (0x40_1000u64, 0u64),
            (0xffff_ffff_8100_0000, 63),
            (0x7fff_ffff_ffff, 255),
            (0xffff_8000_0000_0000, 1),
        ] {
            for status in [ret::STOP, ret::DISPATCH, ret::STOP | ret::DEFER] {
                let w = ret::pack(status, rip, k).expect("fits");
                assert_eq!(w & ret::STATUS, status & ret::STATUS);
                assert_eq!(w & ret::DEFER, status & ret::DEFER);
                let (mut r, mut n) = (0x1234, 1000);
                ret::apply(w, &mut r, &mut n);
                assert_eq!((r, n), (rip, 1000 + k), "{rip:#x} {k}");
            }
        }
    }

    #[test]
    fn what_does_not_fit_is_not_packed_and_bare_words_change_nothing() {
        assert_eq!(ret::pack(ret::DISPATCH, 0x8000_0000_0000, 0), None);
        assert_eq!(ret::pack(ret::DISPATCH, 0x40_1000, 256), None);
        let (mut r, mut n) = (0x1234, 7);
        ret::apply(ret::DISPATCH, &mut r, &mut n);
        ret::apply(ret::STOP | ret::DEFER, &mut r, &mut n);
        assert_eq!((r, n), (0x1234, 7));
    }
}
