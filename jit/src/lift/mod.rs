//! Lifting one decoded guest block to Cranelift IR: guest registers cached in SSA variables,
//! lazy status flags (computed only where read or at an exit), exits that write the cache back,
//! memory accesses with an inline software-TLB fast path, and the interpreter trampoline for
//! every instruction without a native lowering.
//!
//! The block's main path is straight-line (one guest instruction after another); every exit
//! (a fault, a store into code, a branch) leaves it through a side block that writes back the
//! registers dirty at that point. So compile-time sets (`loaded`, `dirty`, pending flags) are
//! exact at each point of the main path.

mod avx_int;
mod bit;
pub(crate) mod flags;
mod flags_dyn;
mod group;
pub mod hop;
mod insn;
mod mem;
mod muldiv;
mod shift;
mod sse_fp;
mod sse_fp_forms;
pub(crate) mod sse_int;
mod sse_mov;
mod x87;

use crate::frame::{gpr_off, ret, Frame, OFF_RFLAGS, OFF_RIP};
use crate::page_gen::PageCert;
use cranelift_codegen::ir::{
    condcodes::IntCC, types, AbiParam, AliasRegion, AliasRegionData, Block as IrBlock, InstBuilder,
    MemFlagsData, SigRef, Signature, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, Variable};
use flags::Pending;
use lockstep_interp::decode::{Block, DecodedInsn};

pub use insn::is_native;

/// Most natively lowered memory-operand instructions per block, and of those, most
/// read-modify-writes (see `lower_block`).
const MAX_NATIVE_MEM: usize = 32;
const MAX_NATIVE_RMW: usize = 8;

/// Index of the RFLAGS variable (after the 16 GPRs).
const RFLAGS: usize = 16;
/// Mask of the 16 GPR variables (see `Lower::store_regs`).
const GPRS: u32 = 0xffff;

/// Signatures and addresses of the helpers compiled code calls.
#[derive(Clone, Copy)]
pub struct HelperSigs {
    pub exec: SigRef,
    pub raise: SigRef,
    /// `fold_flags(base, code, a, b, res, cin) -> rflags`.
    pub fold: SigRef,
    /// A compiled block (`tail` convention), for chained jumps.
    pub block: SigRef,
    /// The hop stub (`hop::hop_signature`).
    pub hop: SigRef,
    /// Where to call the raise and fold helpers (with the signatures above).
    pub addrs: crate::compiler::HelperAddrs,
}

/// Native-code statistics of one translated block.
#[derive(Clone, Copy, Debug, Default)]
pub struct LowerStats {
    pub native: u32,
    pub helper: u32,
    /// Guest blocks lowered into the function (the region's size).
    pub blocks: u32,
    /// Edges between them (jumps inside the function).
    pub edges: u32,
    /// ... of which need no budget check (`region::budget_checks`).
    pub free_edges: u32,
    /// Calls of the `fold_flags` helper emitted (all on cold or rare paths).
    pub dyn_folds: u32,
    /// Accesses served by a page group carried from the previous run of their block
    /// (`group::Carry`).
    pub carried: u32,
    /// Page groups region members start with, handed over by their edges
    /// (`group::Inherited`).
    pub inherited: u32,
}

/// The edge variables of the two run-time flag records (code, a, b, res, cin each) that
/// travel between the blocks of a region (see `flags::Lower::flags_to_edge`).
pub struct EdgeVars {
    pub a: [Variable; 5],
    pub b: [Variable; 5],
}

/// One guest block of the region being lowered.
struct Member {
    rip: u64,
    len: u64,
    /// Its IR block, once an edge (or the function entry) refers to it.
    ir: Option<IrBlock>,
    /// Entered with the flags as run-time records (it overwrites every status flag before
    /// anything reads them, or passes them on untouched: [`lazy_members`]); otherwise the
    /// edges fold the flags into RFLAGS first.
    lazy_flags: bool,
    /// Its first instruction (or the first after register moves and LEAs) overwrites every
    /// status flag and cannot leave the block ([`first_overwrites_flags`]): the
    /// flags it is entered with are dead, so the edges' records are not read (and SSA
    /// construction gives the block no parameters for them).
    flags_dead: bool,
    /// Starts right after a CALL of the region: a RET or indirect jump to it (a run-time
    /// target) becomes a jump inside the function.
    ret_site: bool,
    /// An indirect CALL of the region may jump to it (`region::indirect_call_targets`).
    call_target: bool,
    /// Its virtual and physical page numbers: a member on a page other than the entry's (a
    /// function taken in for an indirect call) is entered from another page only through
    /// [`Member::guard`], and never by a direct jump from another page.
    page: (u64, u64),
    /// For a member on a page other than the entry's: what its page must still hold, checked
    /// on every jump into it from another page ([`crate::chain::page_expect`]). `None` for
    /// the entry's page (the function's entry check covers it), and for a member in more
    /// than one page, which is then not entered from another page at all.
    guard: Option<crate::chain::PageExpect>,
    /// The carried registers it starts with dirty (`region::dirty_on_entry`).
    entry_dirty: u32,
    /// Address of its last instruction: jumps to other members leave from there.
    last_ip: u64,
    /// The replayable instruction (`insn::is_replayable`) whose flags a jump at its end
    /// leaves (`region::flags_tail`).
    tail: Option<iced_x86::Instruction>,
    /// The instruction whose flags it starts by replaying (`region::replays`): every jump to
    /// it inside the region comes from a member whose `tail` is that instruction, and hands
    /// over no flags.
    replay: Option<iced_x86::Instruction>,
}

/// The lifting state of one block.
pub struct Lower<'a> {
    pub b: FunctionBuilder<'a>,
    state: Value,
    frame: Value,
    /// The page checks that compare the page generation first (`LowerTarget::cert`).
    cert: PageCert,
    /// `ret_var` holds the count (`cpu.retired`, at [`Frame::STATE_TO_RETIRED`] from `state`):
    /// in a region, whose edges carry it in SSA values, loaded once at entry, relative to
    /// `Frame::region_end` ([`Lower::biased`]): `ret_var` holds `retired - region_end` (the end
    /// at most `Frame::COUNT_REACH` past the count), so that a budget check compares the
    /// variable with a constant (`ret_var + k + span > 0`), and the end, loaded again where
    /// an exit or a helper call needs the count itself, holds no register in the region.
    /// (Measured with callgrind, session 48: bignum −7.5%, collatz −4.0%, primes −3.3%,
    /// recursion −1.8%, arith and hash +0.8%, geomean −1.1%; session 46 kept the end's value
    /// from the entry in a register for the exits instead, which cost more than it saved
    /// outside one-block loops.) Not in a single
    /// block: there `cpu.retired` in memory stays the count at entry (or at the last trampoline
    /// call), and exits read it when they store the new count, so no register holds it across
    /// the block.
    count_in_var: bool,
    /// GPR0..15 and RFLAGS.
    vars: [Variable; 17],
    /// Bit i: variable i holds the register's current value.
    loaded: u32,
    /// Bit i: variable i differs from memory (write back at exits).
    dirty: u32,
    /// Status flags not yet folded into the RFLAGS variable.
    pending: Vec<Pending>,
    /// The record the function started with, as loaded from the frame, while it may still
    /// be there unchanged (single-block functions): an exit handing exactly it on stores
    /// nothing.
    incoming: Option<[Value; 5]>,
    /// `retired` at the last synchronisation point, plus `k` natively retired since.
    ret_var: Variable,
    k: i64,
    /// `ret_var` is ahead of `cpu.retired` in memory even when `k` is 0 (a region block
    /// entered through a jump inside the function).
    ret_stale: bool,
    /// Emitting a cold exit: flags are folded by a helper call instead of inline code.
    pub cold: bool,
    /// Set (to a constant true) once this block's main path has made the SSE-enabled check
    /// (CR0.EM/TS clear, CR4.OSFXSR set; `assert_vec_enabled`); CR0/CR4 change only through
    /// the trampoline, which clears it.
    sse_ok: Option<Value>,
    /// The same for VEX instructions (CR4.OSXSAVE, XCR0, CR0.TS).
    avx_ok: Option<Value>,
    /// Whether MXCSR is the default environment (`sse_fp`'s fast-path condition), computed
    /// on the main path at the block's first SSE arithmetic instruction. Only LDMXCSR,
    /// FXRSTOR and the like change MXCSR's control bits, and they run through the
    /// trampoline, which clears it (an SSE instruction's own slow path changes only flags).
    mx_env: Option<Value>,
    /// Read TLB, write TLB (loaded at their first use on the main path).
    tlb_ptrs: [Option<Value>; 2],
    /// Fold constant offsets while lifting (see `Lower::offset_by`): only for a function
    /// compiled at `opt_level=none`; an optimising level's e-graph folds them itself (doing
    /// it here too only reorders its input, which moved one of bignum's loops to a worse
    /// register allocation).
    fold_offsets: bool,
    sigs: HelperSigs,
    /// Address of the chain table (`crate::chain`).
    chain_table: u64,
    /// [`LowerTarget::links`] and the targets of the links taken so far.
    links: (u64, usize),
    new_links: Vec<u64>,
    /// [`LowerTarget::dyn_links`].
    dyn_links: bool,
    /// [`LowerTarget::switch_order`].
    switch_order: Vec<u64>,
    /// The instruction being lowered.
    ins_ip: u64,
    next_ip: u64,
    /// RIP in memory is already the right value for the next exit (after a trampoline call).
    rip_in_memory: bool,
    /// Page groups of the current guest block, and stack-pointer values derived by constant
    /// steps (see `group`).
    groups: Vec<group::Group>,
    /// For each region member, the page groups it starts with (`group::Inherited`), once it
    /// is lowered (`group::Lower::settle_inherited`).
    inherited: Vec<Option<group::Inherited>>,
    /// For each region member not yet lowered, the groups each edge into it so far hands
    /// over, with the register versions they name (`group::Lower::settle_inherited`).
    landings: Vec<Vec<group::Inherited>>,
    /// For each region member: the members whose blocks may jump to it directly, and whether
    /// it has been lowered (`group::Lower::settle_inherited`).
    preds: Vec<Vec<usize>>,
    lowered: Vec<bool>,
    /// For each region member, the base registers its successors in the region address
    /// memory through (`group::later_bases`: an access whose group an edge may hand on
    /// starts one).
    succ_bases: Vec<u32>,
    derived: Vec<(u32, u32, i64)>,
    /// Version of each GPR variable's value, and the last version handed out.
    versions: [u32; 16],
    next_version: u32,
    /// `group::later_bases` of the instruction being lowered.
    later_bases: u32,
    /// `group::stores_back` of the instruction being lowered.
    stores_back: bool,
    /// Per region member: the page groups it carries from one run into the next (a block
    /// that jumps to its own start; the peeled copy of the first block shares the first
    /// block's), see `group::carried_bases`.
    carries: Vec<Vec<group::Carry>>,
    /// The status flags the instruction being lowered leaves are dead
    /// ([`flags::dead_after`], computed once per block): nothing observes them before they
    /// are overwritten.
    pub flags_dead: bool,
    /// The entry block's virtual page and check word (`chain::ChainEntry::check`), when it
    /// lies in one page; the constants that enable same-page entry-check skips at chain exits
    /// (turned off after lowering if the function calls the interpreter); whether it does.
    own_check: Option<(u64, u64)>,
    skip_enables: Vec<cranelift_codegen::ir::Inst>,
    exec_called: bool,
    pub stats: LowerStats,
    /// The region: its blocks, the ones still to lower, the registers it carries in SSA
    /// values across its edges (`register_use`), the flag edge variables.
    members: Vec<Member>,
    work: Vec<usize>,
    regs_used: u32,
    /// The carried registers some block of the region writes: their stores are deferred to
    /// the exits (no write-through at edges or before memory accesses); a member starts with
    /// those its predecessors may have written dirty (`Member::entry_dirty`).
    keep: u32,
    edge: Option<EdgeVars>,
    /// Recent zero extensions (IR block, value, size, result), reused for the same value in
    /// the same IR block: a register read twice at one width is extended once
    /// (`mem::Lower::zext`; `opt_level=none` does not merge them).
    zext_memo: Vec<(IrBlock, Value, u8, Value)>,
    /// The write-back tails of deferring exits ([`Lower::emit_exit_code`]), one per set of
    /// dirty registers: a cold block that stores its parameters (those registers, in index
    /// order) and returns its last one (the exit word). Only in a large region
    /// ([`SHARED_TAILS_MIN`], `LowerTarget::shared_tails_min`); `None` in any other
    /// function.
    write_back_tails: Option<Vec<(u32, IrBlock)>>,
    /// A zero defined where the region starts (dominating every member): see
    /// `flags::Lower::edge_zero`.
    region_zero: Option<Value>,
    /// The member being lowered.
    current: usize,
    /// A region's budget checks (`region::budget_checks`): which member jumps need none.
    budget: Option<crate::region::BudgetChecks>,
    /// Members that are the region's blocks; any after them are copies (the first block's,
    /// for the function entry), which no jump inside the region goes to.
    members_in_region: usize,
}

/// Signature of a block: `(state, frame, entered, rip) -> exit word` (see [`ret`]); `entered`
/// equal to the block's check word (`chain::block_check`): skip the entry check (see
/// [`entry_check`]); `rip`: the guest RIP the function is entered at — its first block's, or
/// one of its member entries' (see [`Lowered::member_entries`]).
pub fn block_signature(call_conv: CallConv) -> Signature {
    let mut s = Signature::new(call_conv);
    for _ in 0..4 {
        s.params.push(AbiParam::new(types::I64));
    }
    s.returns.push(AbiParam::new(types::I64));
    s
}

/// Indices of the exec, raise and fold helpers' signatures in [`helper_signatures`].
pub const HELPER_EXEC: usize = 0;
pub const HELPER_RAISE: usize = 1;
pub const HELPER_FOLD: usize = 2;

/// Helper signatures: exec(frame, insn) -> status; raise(frame, kind);
/// fold_flags(base, code, a, b, res, cin) -> u64.
pub fn helper_signatures(call_conv: CallConv) -> [Signature; 3] {
    let p = |n: usize| {
        (0..n)
            .map(|_| AbiParam::new(types::I64))
            .collect::<Vec<_>>()
    };
    let mut exec = Signature::new(call_conv);
    exec.params = p(2);
    exec.returns.push(AbiParam::new(types::I64));
    let mut raise = Signature::new(call_conv);
    raise.params = p(2);
    let mut fold = Signature::new(call_conv);
    fold.params = p(6);
    fold.returns.push(AbiParam::new(types::I64));
    [exec, raise, fold]
}

/// The signature of a helper's `preserve_all` adapter: the helper's parameters, no result
/// (it goes to `Frame::ret`).
pub fn adapter_signature(helper: &Signature) -> Signature {
    let mut s = helper.clone();
    s.call_conv = CallConv::PreserveAll;
    s.returns.clear();
    s
}

/// Cranelift's alias analysis keeps the last store per alias region (a store without one is
/// a fence for all) and forwards a stored value to a later load of the same place only
/// while no other store to that region came between. So guest memory, the host-side
/// records, and each of the sixteen vector registers in `CpuState` (every access to them
/// goes through [`state_mem`], by way of [`Lower::state_load`] and [`Lower::state_store`])
/// are regions of their own: the lifted SSE code keeps the
/// XMM registers in `CpuState`, and a load of one takes the value just stored to it across
/// stores to the others and to guest memory, and repeated loads of it merge. Sound because
/// every location is accessed under one region only (guest RAM never through the records'
/// flags, nor a record through [`guest_mem`]), and calls observe and clobber every region.
/// [`lower_region`] declares them, in this order, in each function it builds.
const GUEST_REGION: u32 = 0;
const HOST_REGION: u32 = 1;
const VEC_REGION: u32 = 2;

/// Guest memory: never traps (RAM is mapped), may be unaligned.
pub(super) fn guest_mem() -> MemFlagsData {
    MemFlagsData::new()
        .with_notrap()
        .with_alias_region(Some(AliasRegion::from_u32(GUEST_REGION)))
}

/// Host-side records (CpuState, Frame, TLB): aligned, never trapping. Not for `CpuState`'s
/// vector registers ([`state_mem`]).
fn host_mem() -> MemFlagsData {
    MemFlagsData::trusted().with_alias_region(Some(AliasRegion::from_u32(HOST_REGION)))
}

/// An access to `CpuState` at byte offset `off`: inside the vector registers
/// (`CpuState::ymm`), that register's own alias region (never trapping, not assumed
/// aligned: `CpuState` gives vectors no 16-byte alignment); elsewhere [`host_mem`].
fn state_mem(off: i32) -> MemFlagsData {
    let base = core::mem::offset_of!(lockstep_interp::state::CpuState, ymm) as i32;
    match off - base {
        d @ 0..512 => MemFlagsData::new()
            .with_notrap()
            .with_alias_region(Some(AliasRegion::from_u32(VEC_REGION + d as u32 / 32))),
        _ => host_mem(),
    }
}

/// For one block, as bit sets of general-purpose registers (bit i: GPR i), from iced's
/// account of every instruction (implicit operands and address registers included):
/// - the registers it reads before it writes them (a write of 8 or 16 bits counts as a read:
///   it keeps the rest). Those of all a region's blocks are the ones it keeps in SSA values
///   across its edges; a register every block writes before reading needs no value on entry
///   (edges leave memory current for it), so it is neither loaded at the function's entry
///   nor handed along its edges as a block parameter. RFLAGS is not among them either: edges
///   leave it current in memory (lazy members get the status flags as records), and a block
///   that needs it loads it — carried around a loop, it only took a register or a spill slot
///   on every back edge;
/// - the registers it writes, in whole or in part (MUL's RDX, PUSH's RSP included).
fn register_use(block: &Block) -> (u32, u32) {
    use iced_x86::{InstructionInfoFactory, OpAccess, Register};
    let mut fac = InstructionInfoFactory::new();
    let (mut read_first, mut written, mut whole_written) = (0u32, 0u32, 0u32);
    for d in block.insns.iter() {
        let mut writes = 0u32;
        for u in fac.info(&d.ins).used_registers() {
            let full = u.register().full_register();
            if !(Register::RAX..=Register::R15).contains(&full) {
                continue;
            }
            let bit = 1u32 << (full as u32 - Register::RAX as u32);
            let whole = u.register().size() >= 4;
            let reads = match u.access() {
                OpAccess::Write => !whole,
                OpAccess::None | OpAccess::NoMemAccess => false,
                _ => true,
            };
            if reads && whole_written & bit == 0 {
                read_first |= bit;
            }
            if !matches!(
                u.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::None | OpAccess::NoMemAccess
            ) {
                written |= bit;
            }
            if matches!(u.access(), OpAccess::Write) && whole {
                writes |= bit;
            }
        }
        whole_written |= writes;
    }
    (read_first, written)
}

/// Does `block` overwrite every status flag (natively) before anything could read them: an
/// instruction that reads flags, the trampoline, or the block's end? Then its edges may hand
/// the flags over lazily.
fn overwrites_flags_first(insns: &[DecodedInsn]) -> bool {
    let status = flags::ICED_STATUS;
    for d in insns {
        if !insn::is_native(d) || d.ins.rflags_read() & status != 0 {
            return false;
        }
        // (iced counts DIV/IDIV's "undefined" flags as modified; the interpreter leaves them.)
        let div = matches!(
            d.ins.mnemonic(),
            iced_x86::Mnemonic::Div | iced_x86::Mnemonic::Idiv
        );
        if d.ins.rflags_modified() & status == status && !div {
            return true;
        }
    }
    false
}

/// Does `block` leave the status flags alone: every instruction lowered natively, none reading
/// or writing a status flag (`pop rbx; ret`, `jmp`)? Its exits see the flags it was entered
/// with.
fn flags_transparent(insns: &[DecodedInsn]) -> bool {
    insns.iter().all(|d| {
        insn::is_native(d)
            && (d.ins.rflags_read() | d.ins.rflags_modified()) & flags::ICED_STATUS == 0
    })
}

/// Which members of a region take their flags as run-time records from the edges into them
/// ([`Member::lazy_flags`]): those that overwrite every status flag before anything reads
/// them, and those that leave the flags alone ([`flags_transparent`]) and jump only to such
/// members inside the region (`succ`: `region::generous_successors`) — `cmp eax,1; jbe` to a
/// lone `ret` that returns to a site starting with `and`: the edge to the `ret` hands the
/// CMP's record on instead of folding it into RFLAGS, and so does the `ret`. (A transparent
/// member that may go on to one folding its flags would fold them there through the helper,
/// rather than inline on the way in.) Its exits leaving the region hand the record over when
/// they can (see `Lower::store_flags_for_exit`).
fn lazy_members(blocks: &[&Block], succ: &[Vec<usize>]) -> Vec<bool> {
    let mut lazy: Vec<bool> = blocks
        .iter()
        .map(|b| overwrites_flags_first(&b.insns))
        .collect();
    let transparent: Vec<bool> = blocks.iter().map(|b| flags_transparent(&b.insns)).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..blocks.len() {
            if !lazy[i] && transparent[i] && succ[i].iter().all(|&j| lazy[j]) {
                lazy[i] = true;
                changed = true;
            }
        }
    }
    lazy
}

/// Does `block` start with an instruction that always defines every status flag from its
/// operands alone (ADD, SUB, CMP, AND, OR, XOR, TEST, NEG: unlike a shift by a count that
/// may be 0, or an instruction leaving some flag "undefined" as the interpreter keeps it),
/// lowered natively, without a memory operand (their only way to leave the block; it also
/// rules out LOCK) — first, or after register moves and LEAs only (`mov edi,edx; lea
/// ebx,[rdx-2]; and edi,1`), which neither read flags nor can leave the block? Then nothing
/// can observe the flags the block is entered with.
fn first_overwrites_flags(block: &Block) -> bool {
    use iced_x86::Mnemonic as M;
    let no_memory = |d: &DecodedInsn| {
        !(0..d.ins.op_count()).any(|i| d.ins.op_kind(i) == iced_x86::OpKind::Memory)
    };
    for d in &block.insns {
        if !insn::is_native(d) || !no_memory(d) {
            return false;
        }
        match d.ins.mnemonic() {
            M::Add | M::Sub | M::Cmp | M::And | M::Or | M::Xor | M::Test | M::Neg => return true,
            M::Mov | M::Movzx | M::Movsx | M::Movsxd | M::Lea => {}
            _ => return false,
        }
    }
    false
}

/// Where a flag record handed over by a chained jump travels: `[code, a, b, res, cin]`.
const FLAG_RECORD: [i32; 5] = [
    Frame::OFF_FL_CODE,
    Frame::OFF_FL_A,
    Frame::OFF_FL_B,
    Frame::OFF_FL_RES,
    Frame::OFF_FL_CIN,
];

/// On entry through a chained jump, check that this function is still the right code for its
/// RIP (see `crate::chain`): the execute TLB maps the RIP's page to the block's physical page,
/// and the block's code pages have the code words they had at decode. Otherwise return to the
/// dispatcher, nothing done but storing RIP (the function's own address: a chained jump does
/// not store it; the exit that jumped here stored `retired` and the flag record the
/// dispatcher folds). The check is skipped when `entered`, the third argument, is the block's
/// check word (`chain::block_check`): the dispatcher passes it, having just made the check,
/// and so does a chained jump from a function with the same check word (same-page skips, see
/// `Lower::skip_target_check`). Any other value (0 from other jumps) makes the check.
/// Leaves the builder in the block where the function's body starts; returns the flag record
/// the body starts with (`[code, a, b, res, cin]`), loaded there from the frame: what the
/// chained jump handed over, or code 0 from the dispatcher
/// ([`Frame::refresh`](crate::frame::Frame::refresh) clears it).
/// The frame keeps that record until an exit replaces it, so an exit that hands the same
/// record on need not store it again (see [`Lower::store_flags_for_exit`]).
fn entry_check(
    b: &mut FunctionBuilder<'_>,
    [state, frame, entered, rip]: [Value; 4],
    entry: &Block,
    ram_base: u64,
) -> [Value; 5] {
    let (off, vpn, want) = crate::chain::exec_tlb_expect(entry, ram_base);
    let ld = |b: &mut FunctionBuilder<'_>, base: Value, off: i32| {
        b.ins().load(types::I64, host_mem(), base, off)
    };
    let body = b.create_block();
    let check = b.create_block();
    let fail = b.create_block();
    b.set_cold_block(fail);
    let skip = b.ins().icmp_imm_s(
        IntCC::Equal,
        entered,
        crate::chain::block_check(entry) as i64,
    );
    b.ins().brif(skip, body, &[], check, &[]);
    b.seal_block(check);
    b.switch_to_block(check);
    let ok = page_ok(b, frame, (off, vpn, want), entry.code_words());
    b.ins().brif(ok, body, &[], fail, &[]);
    b.seal_block(fail);
    b.seal_block(body);
    b.switch_to_block(fail);
    // Back to the dispatcher at the RIP entered (the first block's or a member entry's).
    b.ins().store(host_mem(), rip, state, OFF_RIP);
    let word = b.ins().iconst(types::I64, ret::DISPATCH as i64);
    b.ins().return_(&[word]);
    b.switch_to_block(body);
    FLAG_RECORD.map(|off| ld(b, frame, off))
}

/// With `gen` (the page generation a page check's conditions held under at the compile:
/// `crate::page_gen`), a compare of the frame's generation with it that goes on to `pass`
/// when equal (the conditions still hold) and to a new block (left current, sealed) for the
/// full check otherwise; nothing without.
fn gen_or_check(b: &mut FunctionBuilder<'_>, frame: Value, gen: Option<i32>, pass: IrBlock) {
    if let Some(g) = gen {
        let now = b.ins().load(types::I64, host_mem(), frame, Frame::OFF_GEN);
        let same = b.ins().icmp_imm_s(IntCC::Equal, now, g as i64);
        let full = b.create_block();
        b.ins().brif(same, pass, &[], full, &[]);
        b.seal_block(full);
        b.switch_to_block(full);
    }
}

/// Whether the page checks of a function's entry hold (also made on the way into a member in
/// another page, `Lower::enterable`): the execute TLB entry at byte `off` has tag `vpn` and
/// host field `host` — the page's host address in RAM minus its linear address
/// (`chain::exec_tlb_expect`) — and each code page of `words` has its code word.
fn page_ok(
    b: &mut FunctionBuilder<'_>,
    frame: Value,
    (off, vpn, host): (i32, u64, u64),
    words: impl IntoIterator<Item = (u64, u32)>,
) -> Value {
    // Constant offsets go into the loads (fewer IR instructions; the same host code).
    let tlb = b
        .ins()
        .load(types::I64, host_mem(), frame, Frame::OFF_TLB_EXEC);
    let tag = b.ins().load(types::I64, host_mem(), tlb, off);
    let mut ok = b.ins().icmp_imm_s(IntCC::Equal, tag, vpn as i64);
    let h = b.ins().load(types::I64, host_mem(), tlb, off + 8);
    let c = b.ins().icmp_imm_s(IntCC::Equal, h, host as i64);
    ok = b.ins().band(ok, c);
    let table = b
        .ins()
        .load(types::I64, host_mem(), frame, Frame::OFF_CODE_TABLE);
    for (page, word) in words {
        let off = page.wrapping_mul(4);
        let (base, off) = match i32::try_from(off) {
            Ok(o) => (table, o),
            Err(_) => (b.ins().iadd_imm_s(table, off as i64), 0),
        };
        let w = b.ins().uload32(host_mem(), base, off);
        let c = b.ins().icmp_imm_s(IntCC::Equal, w, word as i64);
        ok = b.ins().band(ok, c);
    }
    ok
}

/// The entry block's virtual page and its check word (`chain::block_check`), when the block
/// lies in one page.
fn own_check(entry: &Block) -> Option<(u64, u64)> {
    let check = crate::chain::block_check(entry);
    (check != u64::MAX).then(|| (entry.key().rip >> 12, check))
}

/// What a region's code is compiled for: the host ISA's frontend settings, the chain table's
/// address, the RAM's host base (the entry check's constant), and whether lifting folds
/// constant offsets itself (a function compiled at `opt_level=none`, see `Lower::offset_by`).
pub struct LowerTarget {
    pub frontend: cranelift_codegen::isa::TargetFrontendConfig,
    pub chain_table: u64,
    /// The next free link (`crate::chain::Link`) and how many are left: direct exits take
    /// links from here, in order ([`Lowered::links`]).
    pub links: (u64, usize),
    /// Indirect exits take links too (else only direct exits do).
    pub dyn_links: bool,
    pub ram_base: u64,
    pub fold_offsets: bool,
    /// The targets the region's `switch` jumps went to while interpreted, most frequent
    /// first (`Jit::switch_targets`): a switch jump compares its run-time target with these
    /// members first, then with the others in region order (host-side only: the order of
    /// the compares, not what they decide).
    pub switch_order: Vec<u64>,
    /// The page checks that compare the frame's page generation first: those whose
    /// conditions held at the compile, under that generation (`crate::page_gen`).
    pub cert: PageCert,
    /// Guest instructions from which the region's deferring exits share write-back tails
    /// ([`SHARED_TAILS_MIN`] but in tests).
    pub shared_tails_min: usize,
}

/// Lift a region into the function under construction in `b` (its signature must be
/// [`block_signature`]). `blocks[0]` is the entry; the others are blocks of the same code page
/// that branches of the region may reach, and the blocks of a function an indirect CALL of
/// the region goes to (`region::indirect_call_targets`, possibly in another page): a branch
/// to one of them becomes a jump inside the function (registers stay in SSA values, flags
/// stay lazy), guarded by the budget (and, into another page, by that page's check).
pub fn lower_region(
    mut b: FunctionBuilder<'_>,
    blocks: &[&Block],
    native: bool,
    target: LowerTarget,
    sig_for: impl Fn(&mut FunctionBuilder<'_>) -> HelperSigs,
) -> Lowered {
    let LowerTarget {
        frontend,
        chain_table,
        links,
        dyn_links,
        ram_base,
        fold_offsets,
        switch_order,
        cert,
        shared_tails_min,
    } = target;
    for id in GUEST_REGION..VEC_REGION + 16 {
        let what = match id {
            GUEST_REGION => "guest memory",
            HOST_REGION => "host records",
            _ => "a vector register",
        };
        let region = b.func.dfg.alias_regions.insert(AliasRegionData {
            user_id: id,
            description: what.into(),
        });
        debug_assert_eq!(region, AliasRegion::from_u32(id));
    }
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let state = b.block_params(entry)[0];
    let frame = b.block_params(entry)[1];
    let entered = b.block_params(entry)[2];
    let rip_in = b.block_params(entry)[3];
    let sigs = sig_for(&mut b);
    let incoming = entry_check(&mut b, [state, frame, entered, rip_in], blocks[0], ram_base);
    let vars: [Variable; 17] = core::array::from_fn(|_| b.declare_var(types::I64));
    let ret_var = b.declare_var(types::I64);
    let region = crate::region::is_region(blocks);
    // A loop of one block: it carries the registers it only writes too.
    let one_block_loop = region && blocks.len() == 1;
    let (regs_used, keep, entry_dirty, tails, replays, lazy) = if region {
        let uses: Vec<(u32, u32)> = blocks.iter().map(|b| register_use(b)).collect();
        let written: Vec<u32> = uses.iter().map(|u| u.1).collect();
        let mut regs_used = uses.iter().fold(0, |a, u| a | u.0);
        if one_block_loop {
            // The registers it only writes are carried too, so that they are stored at its
            // exits rather than on every run round it.
            regs_used |= written[0];
        }
        let keep = regs_used & written.iter().fold(0, |a, w| a | w);
        let succ = crate::region::generous_successors(blocks);
        let entry_dirty = crate::region::dirty_on_entry(&succ, &written, keep);
        let tails: Vec<_> = blocks
            .iter()
            .map(|b| crate::region::flags_tail(b, insn::is_replayable))
            .collect();
        let replays = crate::region::replays(&succ, &tails, insn::same_replay);
        let lazy = lazy_members(blocks, &succ);
        (regs_used, keep, entry_dirty, tails, replays, lazy)
    } else {
        // (A single block has no edges to take flag records from.)
        let none = vec![None; blocks.len()];
        (
            0,
            0,
            vec![0; blocks.len()],
            none.clone(),
            none,
            vec![false; blocks.len()],
        )
    };
    let ret_sites = crate::region::return_sites(blocks.iter().copied());
    let call_targets = if region {
        crate::region::indirect_call_targets(blocks)
    } else {
        Vec::new()
    };
    let page_of = |blk: &Block| (blk.key().rip >> 12, blk.key().phys >> 12);
    let home = page_of(blocks[0]);
    let mut members: Vec<Member> = blocks
        .iter()
        .zip(&entry_dirty)
        .zip(tails.into_iter().zip(replays))
        .zip(lazy)
        .enumerate()
        .map(|(i, (((blk, &entry_dirty), (tail, replay)), lazy_flags))| {
            let rip = crate::region::start(blk);
            let flags_dead = first_overwrites_flags(blk);
            let page = page_of(blk);
            let guard = (page != home)
                .then(|| crate::chain::page_expect(blk, ram_base))
                .flatten();
            Member {
                rip,
                len: blk.insns.len() as u64,
                ir: None,
                lazy_flags,
                flags_dead,
                ret_site: ret_sites.contains(&rip),
                call_target: call_targets.contains(&i),
                page,
                guard,
                entry_dirty,
                last_ip: blk.insns.last().map_or(u64::MAX, |d| d.ins.ip()),
                tail,
                replay: replay.filter(|_| !flags_dead),
            }
        })
        .collect();
    // The function entry hands over the frame's flag record, not a replayable one: when the
    // first block replays, the entry goes to a copy of it (`peel`) that takes the record.
    let members_in_region = members.len();
    let mut order: Vec<&Block> = blocks.to_vec();
    let peel = members[0].replay.is_some();
    if peel {
        let copy = Member {
            replay: None,
            ..members[0]
        };
        members.push(copy);
        order.push(blocks[0]);
    }
    // Member entries: the function entered at another member's RIP (a jump into the loop
    // from outside it) starts at that member, which takes the handed-over flag record as the
    // first block does. Not a member that replays flags (its entry would have no record to
    // replay), nor one whose check word differs from the first block's (the function's entry
    // check must cover it).
    let member_entries: Vec<usize> = if region {
        let check = crate::chain::block_check(blocks[0]);
        (1..members_in_region)
            .filter(|&i| {
                members[i].replay.is_none()
                    && check != u64::MAX
                    && crate::chain::block_check(blocks[i]) == check
            })
            .collect()
    } else {
        Vec::new()
    };
    // The member the function's entry runs first: the peeled copy of the first block, if any.
    let first = if peel { members_in_region } else { 0 };
    // Each block's static successors (for the budget checks, the members' predecessors and
    // the bases their successors use).
    let order_succ: Vec<Vec<u64>> = order.iter().map(|b| crate::region::successors(b)).collect();
    // Which jumps between members check the budget, and what an entry must cover.
    let budget = region.then(|| {
        let member_of = |rip: u64| {
            members[..members_in_region]
                .iter()
                .position(|m| m.rip == rip)
        };
        let succ: Vec<Vec<usize>> = order_succ
            .iter()
            .map(|targets| targets.iter().copied().filter_map(member_of).collect())
            .collect();
        let len: Vec<u64> = members.iter().map(|m| m.len).collect();
        let multi: Vec<bool> = order.iter().map(|b| retires_many(b)).collect();
        crate::region::budget_checks(&succ, &len, &multi, &[first])
    });
    let entry_len = budget.as_ref().map(|c| c.span[first]);
    let member_entry_lens: Vec<u64> = match &budget {
        Some(c) => member_entries.iter().map(|&i| c.span[i]).collect(),
        None => Vec::new(),
    };
    let mut l = Lower {
        b,
        state,
        frame,
        cert,
        count_in_var: region,
        vars,
        loaded: 0,
        dirty: 0,
        pending: Vec::new(),
        incoming: None,
        ret_var,
        k: 0,
        ret_stale: false,
        cold: false,
        sse_ok: None,
        avx_ok: None,
        mx_env: None,
        tlb_ptrs: [None; 2],
        fold_offsets,
        sigs,
        chain_table,
        links,
        new_links: Vec::new(),
        dyn_links,
        switch_order,
        ins_ip: 0,
        next_ip: 0,
        rip_in_memory: false,
        groups: Vec::new(),
        inherited: vec![None; members.len()],
        landings: vec![Vec::new(); members.len()],
        preds: members
            .iter()
            .map(|m| {
                (0..order.len())
                    .filter(|&p| order_succ[p].contains(&m.rip))
                    .collect()
            })
            .collect(),
        lowered: vec![false; members.len()],
        succ_bases: if region {
            order_succ
                .iter()
                .map(|succ| {
                    succ.iter()
                        .filter_map(|&rip| blocks.iter().find(|m| crate::region::start(m) == rip))
                        .fold(0, |a, m| a | group::block_bases(&m.insns))
                })
                .collect()
        } else {
            Vec::new()
        },
        derived: Vec::new(),
        versions: [0; 16],
        next_version: 0,
        later_bases: 0,
        stores_back: false,
        carries: Vec::new(),
        flags_dead: false,
        own_check: own_check(blocks[0]),
        skip_enables: Vec::new(),
        exec_called: false,
        stats: LowerStats::default(),
        members,
        work: Vec::new(),
        regs_used,
        keep,
        edge: None,
        zext_memo: Vec::new(),
        write_back_tails: (blocks.iter().map(|b| b.insns.len()).sum::<usize>() >= shared_tails_min)
            .then(Vec::new),
        region_zero: None,
        current: 0,
        members_in_region,
        budget,
    };
    if region {
        // Everything the region's blocks share is set up once, here, on entry: the count in
        // `ret_var` (`Lower::biased`: relative to `region_end`), and the TLB pointers, which
        // must dominate every block.
        let r0 = l.load_count();
        let count = l.biased(r0);
        l.b.def_var(l.ret_var, count);
        l.tlb_read();
        l.tlb_write();
        if group::carry_enabled() {
            let carries: Vec<Vec<group::Carry>> = (0..members_in_region)
                .map(|i| {
                    let blk = order[i];
                    if !crate::region::successors(blk).contains(&l.members[i].rip) {
                        return Vec::new();
                    }
                    group::carried_bases(&blk.insns)
                        .into_iter()
                        .map(|(reg, fixed, seed, write)| group::Carry {
                            reg,
                            fixed,
                            seed,
                            write,
                            off: l.b.declare_var(types::I64),
                            host: l.b.declare_var(types::I64),
                        })
                        .collect()
                })
                .collect();
            // The peeled copy shares the first block's variables.
            l.carries = carries;
            if peel {
                l.carries.push(l.carries[0].clone());
            }
        }
        for i in 0..17 {
            if regs_used & (1 << i) != 0 {
                l.gpr(i);
            }
        }
        let mut decl = || core::array::from_fn(|_| l.b.declare_var(types::I64));
        let edge = EdgeVars {
            a: decl(),
            b: decl(),
        };
        // The entry goes to the first block, or to the member entry `rip` names, which starts
        // with the flag record a chained jump handed over (`enter_member`).
        let z = l.iconst(0);
        l.region_zero = Some(z);
        if !member_entries.is_empty() {
            let main = l.b.create_block();
            let other = l.b.create_block();
            let at_first =
                l.b.ins()
                    .icmp_imm_s(IntCC::Equal, rip_in, l.members[0].rip as i64);
            l.b.ins().brif(at_first, main, &[], other, &[]);
            l.b.seal_block(other);
            l.b.switch_to_block(other);
            let mut switch = cranelift_frontend::Switch::new();
            let mut starts = Vec::new();
            for &i in &member_entries {
                let start = l.b.create_block();
                switch.set_entry(l.members[i].rip as u128, start);
                starts.push((i, start));
            }
            switch.emit(&mut l.b, rip_in, main);
            for (i, start) in starts {
                l.b.seal_block(start);
                l.b.switch_to_block(start);
                l.enter_member(i, &edge, incoming);
            }
            l.b.seal_block(main);
            l.b.switch_to_block(main);
        }
        l.enter_member(first, &edge, incoming);
        l.edge = Some(edge);
        while let Some(i) = l.work.pop() {
            let blk = l.members[i].ir.expect("queued blocks have an IR block");
            l.settle_inherited(i);
            l.b.switch_to_block(blk);
            l.current = i;
            l.loaded = regs_used;
            // Edges write the registers through, except the carried ones the region writes:
            // those the blocks before this one may have changed can differ from memory.
            l.dirty = l.members[i].entry_dirty;
            l.k = 0;
            l.ret_stale = true;
            l.rip_in_memory = false;
            if l.members[i].flags_dead {
                l.pending.clear();
            } else if let Some(ins) = l.members[i].replay {
                l.pending.clear();
                insn::replay_flags(&mut l, &ins);
            } else if l.members[i].lazy_flags {
                let edge = l.edge.take().expect("edge variables");
                l.flags_from_edge(&edge);
                l.edge = Some(edge);
            } else {
                l.pending.clear();
            }
            l.lower_insns(order[i], native);
        }
    } else {
        l.stats.blocks = 1;
        l.take_incoming(incoming);
        l.incoming = Some(incoming);
        l.lower_insns(blocks[0], native);
    }
    if l.exec_called {
        // The interpreter may have changed the execute TLB or swapped its privilege sets:
        // every chained jump lets its target check itself.
        for inst in core::mem::take(&mut l.skip_enables) {
            l.b.func.replace(inst).iconst(types::I64, 0);
        }
    }
    l.b.seal_all_blocks();
    drop_unused_loads(l.b.func, &incoming);
    let stats = l.stats;
    let links = core::mem::take(&mut l.new_links);
    l.b.finalize(frontend);
    Lowered {
        stats,
        member_entries,
        member_entry_lens,
        entry_len,
        links,
    }
}

/// May `b` retire more instructions than it has (a REP string: the budget is checked again
/// after it)?
fn retires_many(b: &Block) -> bool {
    b.insns.iter().any(|d| {
        d.ins.is_string_instruction() && (d.ins.has_rep_prefix() || d.ins.has_repne_prefix())
    })
}

/// What [`lower_region`] made.
pub struct Lowered {
    pub stats: LowerStats,
    /// Region members (indices into its blocks, never 0) the function may also be entered at,
    /// with their RIP as its `rip` argument: a member that does not replay flags, in the
    /// first block's page with the same check word (so the function's entry check covers
    /// it). Their cache entries can run this function instead of compiling their own (see
    /// `Jit::promote`).
    pub member_entries: Vec<usize>,
    /// For each of `member_entries`: the instructions an entry there must find in the budget
    /// (`region::BudgetChecks::span`).
    pub member_entry_lens: Vec<u64>,
    /// A region's: the instructions an entry into the function must find in the budget (its
    /// first block's and those it may run on to before a check); `None` for a single block
    /// (its length).
    pub entry_len: Option<u64>,
    /// The target RIPs of the links the function's direct exits took, in order from
    /// [`LowerTarget::links`] (the caller fills them in before the function can run).
    pub links: Vec<u64>,
}

/// Remove the loads defining `values` that no instruction uses. Cranelift keeps every load
/// (it counts them as side effects); the incoming flag record's are mostly dead, the record
/// being handed on untouched (see [`Lower::store_flags_for_exit`]), and would otherwise
/// cost five loads on every entry to the function.
fn drop_unused_loads(func: &mut cranelift_codegen::ir::Function, values: &[Value]) {
    let mut used = vec![false; values.len()];
    for block in func.layout.blocks() {
        for inst in func.layout.block_insts(block) {
            for v in func.dfg.inst_values(inst) {
                let v = func.dfg.resolve_aliases(v);
                if let Some(k) = values.iter().position(|&x| x == v) {
                    used[k] = true;
                }
            }
        }
    }
    for (&v, used) in values.iter().zip(used) {
        if let cranelift_codegen::ir::ValueDef::Result(inst, _) = func.dfg.value_def(v) {
            if !used && func.dfg.insts[inst].opcode().can_load() {
                func.layout.remove_inst(inst);
            }
        }
    }
}

/// The general-purpose registers (bit i: GPR i) an instruction uses, if it may take the lean
/// trampoline: it continues with the next instruction, does not touch RFLAGS, and has no
/// implicit effects beyond what iced reports.
fn lean_registers(d: &DecodedInsn) -> Option<u32> {
    use iced_x86::{FlowControl, InstructionInfoFactory, OpAccess, Register};
    let ins = &d.ins;
    if ins.flow_control() != FlowControl::Next
        || ins.rflags_read() != 0
        || ins.rflags_modified() != 0
        || ins.is_string_instruction()
        || ins.stack_pointer_increment() != 0
        || ins.has_lock_prefix()
        || ins.is_invalid()
    {
        return None;
    }
    let mut regs = 0u32;
    let mut fac = InstructionInfoFactory::new();
    for u in fac.info(ins).used_registers() {
        let r = u.register();
        if r.is_segment_register() && !matches!(u.access(), OpAccess::Read | OpAccess::None) {
            return None;
        }
        if r.is_cr() || r.is_dr() || r.is_tr() {
            return None;
        }
        let full = r.full_register();
        // (RIP-relative addressing: the handler computes it from the decoded instruction.)
        if (Register::RAX..=Register::R15).contains(&full) {
            regs |= 1 << (full as u32 - Register::RAX as u32);
        }
    }
    Some(regs)
}

/// A near indirect JMP/CALL through a register or memory in 64-bit mode (cannot change mode).
fn near_indirect(ins: &iced_x86::Instruction) -> bool {
    use iced_x86::Code;
    matches!(ins.code(), Code::Jmp_rm64 | Code::Call_rm64)
}

/// Where an exit's RIP comes from.
#[derive(Clone, Copy)]
pub enum Rip {
    Const(u64),
    Dyn(Value),
}

/// The guest instructions from which a function's deferring exits share write-back tails
/// ([`Lower::emit_exit_code`]). Below, the tails only reshuffle register allocation: in a
/// small loop region a jump with arguments to a shared block instead of the stores changed
/// the hot loop's allocation (collatz +8.1% host instructions, bignum −5.4%), while a large
/// region's exits are most of its IR (recursion's `fib`, 226 instructions: 4,963 → 3,780 IR
/// instructions, 31 → 19 KB of code).
pub const SHARED_TAILS_MIN: usize = 128;

/// An exit's status (see [`ret`]): a constant, or one a helper returned.
#[derive(Clone, Copy)]
enum Status {
    Const(u64),
    Dyn(Value),
}

/// Where a block exit goes: a known RIP, a run-time RIP, or one of two known RIPs chosen by a
/// condition (`Either(c, taken, fall)`).
#[derive(Clone, Copy)]
enum Exit {
    Const(u64),
    Dyn(Value),
    /// A `switch` jump (`region::is_switch_jump`): like `Dyn`, and inside a region it may go
    /// to any member.
    Switch(Value),
    /// An indirect near CALL's target: like `Dyn`, and inside a region it may go to a member
    /// taken in as a called function (`Member::call_target`).
    Call(Value),
    Either(Value, u64, u64),
}

impl From<Rip> for Exit {
    fn from(r: Rip) -> Exit {
        match r {
            Rip::Const(t) => Exit::Const(t),
            Rip::Dyn(v) => Exit::Dyn(v),
        }
    }
}

impl Lower<'_> {
    /// Forget what the main path has established about machine state (the SSE/AVX and MXCSR
    /// checks, the page groups' TLB hits): at a guest block's start, whose IR block the
    /// earlier checks need not dominate, and after a trampoline call, whose handler may have
    /// changed any of it.
    fn forget_machine_facts(&mut self) {
        self.sse_ok = None;
        self.avx_ok = None;
        self.mx_env = None;
        self.end_groups();
    }

    /// Lower the instructions of one guest block at the current position, with its exits.
    fn lower_insns(&mut self, block: &Block, native: bool) {
        let l = self;
        l.forget_machine_facts();
        l.take_inherited_groups();
        if let Some(c) = l.carries.get(l.current).filter(|c| !c.is_empty()) {
            let c = c.clone();
            l.seed_carries(&c);
        }
        let after = l.succ_bases.get(l.current).copied().unwrap_or(0);
        let later = group::later_bases(&block.insns, after);
        let stored = group::stores_back(&block.insns);
        let dead = flags::dead_after(&block.insns);
        let n = block.insns.len();
        let mut ended = false;
        // Natively lowered memory accesses so far: each costs a TLB probe and cold slow-path
        // and fault exits; past a per-block cap (only reached by pathological blocks, e.g.
        // runs of `add [rax], al` in zero-filled memory) the rest go through the trampoline,
        // which bounds the IR size and so the compile time.
        let mut mem_ops = 0usize;
        let mut rmw_ops = 0usize;
        for (i, d) in block.insns.iter().enumerate() {
            l.ins_ip = d.ins.ip();
            l.next_ip = d.ins.next_ip();
            l.later_bases = later[i];
            l.stores_back = stored[i];
            l.flags_dead = dead[i];
            let has_mem = (0..d.ins.op_count())
                .any(|k| d.ins.op_kind(k) == iced_x86::OpKind::Memory)
                && d.ins.mnemonic() != iced_x86::Mnemonic::Lea
                && !lockstep_interp::ops::mov::runs_as_nop(d.ins.mnemonic());
            let rmw = has_mem
                && d.ins.op0_kind() == iced_x86::OpKind::Memory
                && d.ins.mnemonic() != iced_x86::Mnemonic::Mov;
            mem_ops += has_mem as usize;
            rmw_ops += rmw as usize;
            let within_cap = mem_ops <= MAX_NATIVE_MEM && rmw_ops <= MAX_NATIVE_RMW;
            let outcome = if native && (within_cap || !has_mem) {
                // An instruction that may leave the block part-way (memory fault, slow path
                // to a device, store into code, #DE) finds the registers in memory: its exits
                // then store almost nothing, which keeps the (cold) exit code small.
                let stack = d.ins.stack_pointer_increment() != 0;
                let div = matches!(
                    d.ins.mnemonic(),
                    iced_x86::Mnemonic::Div | iced_x86::Mnemonic::Idiv
                );
                let branch = d.ins.flow_control() != iced_x86::FlowControl::Next;
                if (has_mem || stack || div) && !branch {
                    l.flush_regs();
                }
                insn::lower(l, d)
            } else {
                insn::Outcome::NotNative
            };
            match outcome {
                insn::Outcome::Continue => {
                    l.stats.native += 1;
                    l.rip_in_memory = false;
                }
                insn::Outcome::Ended => {
                    l.stats.native += 1;
                    ended = true;
                    break;
                }
                insn::Outcome::NotNative => {
                    l.stats.helper += 1;
                    l.call_handler(d, n - i - 1);
                }
            }
        }
        if !ended {
            if !l.rip_in_memory {
                l.emit_chain_exit(Rip::Const(l.next_ip));
            } else if block.insns.last().is_some_and(|d| near_indirect(&d.ins)) {
                // A trampolined near indirect JMP/CALL: the target is in memory; the mode
                // cannot have changed, so the chain table may be probed with it.
                let rip = l.b.ins().load(types::I64, host_mem(), l.state, OFF_RIP);
                if crate::region::ends_in_indirect_call(block) {
                    l.end_block_call(rip);
                } else {
                    l.emit_chain_exit(Rip::Dyn(rip));
                }
            } else {
                l.emit_exit(None, ret::DISPATCH);
            }
        }
    }

    /// From the function's entry into region member `i` (the first block, its entry copy, or
    /// a member entry): the member starts with the flag record a chained jump handed over, as if
    /// a region edge had brought it — in the edge's status slot, or folded into RFLAGS if the
    /// member reads flags before it writes them all (a member that replays is never entered
    /// this way).
    fn enter_member(&mut self, i: usize, edge: &EdgeVars, incoming: [Value; 5]) {
        let z = self.region_zero.expect("region set up");
        for v in edge.a.iter() {
            self.b.def_var(*v, z);
        }
        if self.members[i].lazy_flags {
            for (v, &x) in edge.b.iter().zip(incoming.iter()) {
                self.b.def_var(*v, x);
            }
        } else {
            for v in edge.b.iter() {
                self.b.def_var(*v, z);
            }
            self.fold_incoming(incoming);
        }
        self.carry_into(i, false);
        self.jump_to_member(i);
    }

    /// The IR block of region member `i` (created, and queued for lowering, on first use).
    fn member_block(&mut self, i: usize) -> IrBlock {
        if let Some(b) = self.members[i].ir {
            return b;
        }
        let b = self.b.create_block();
        self.members[i].ir = Some(b);
        self.work.push(i);
        self.stats.blocks += 1;
        b
    }

    /// The member of the region starting at `rip` that a direct jump from the current
    /// member may go to, if any: one on the entry's page or on the current member's (a member
    /// on another page is entered only through its guard, [`Lower::enterable`]).
    fn member_at(&self, rip: u64) -> Option<usize> {
        self.edge.as_ref()?;
        let (home, here) = (self.members[0].page, self.members[self.current].page);
        self.members[..self.members_in_region]
            .iter()
            .position(|m| m.rip == rip && (m.page == home || m.page == here))
    }

    /// A jump to member `m` from the current member, after a compare that found its RIP as
    /// the run-time target: when `m` is on another page than the entry's and the current
    /// member's, its page is checked first ([`Member::guard`]: the execute TLB still maps its
    /// virtual page to the physical page it was decoded from, and that page still has its
    /// code word — what its own function's entry check would establish), and a failed check
    /// goes on to `miss`, as a different target would. `None`: `m` cannot be entered from
    /// here (a member in several pages); nothing emitted. `Some`: the current position
    /// (after the check, if one was needed) is where the jump goes on.
    fn enterable(&mut self, m: usize, miss: IrBlock) -> Option<()> {
        let (home, here) = (self.members[0].page, self.members[self.current].page);
        let page = self.members[m].page;
        if page == home || page == here {
            return Some(());
        }
        let g = self.members[m].guard?;
        let words = [(g.code_page, g.word)];
        let pass = self.b.create_block();
        let gen = self.cert.gen_for(g.vpn, g.host, words.into_iter());
        gen_or_check(&mut self.b, self.frame, gen, pass);
        let ok = page_ok(&mut self.b, self.frame, (g.off, g.vpn, g.host), words);
        self.b.ins().brif(ok, pass, &[], miss, &[]);
        self.b.seal_block(pass);
        self.b.switch_to_block(pass);
        Some(())
    }

    /// A branch to member `t` (the current instruction is complete, counted in `k`; `direct`:
    /// a direct jump, not a run-time target): if the budget covers what the target may run
    /// before the next check (`region::BudgetChecks::span`; no check at all for a jump the
    /// check on the way here covered), jump to it inside the function with the
    /// registers in SSA values and the flags handed over; otherwise leave with RIP at the
    /// target (the dispatcher runs it, or the interpreter the rest of the budget). Leaves the
    /// compile-time state as it was.
    fn emit_region_edge(&mut self, t: usize, direct: bool) {
        self.stats.edges += 1;
        let (rip, lazy) = (self.members[t].rip, self.members[t].lazy_flags);
        let budget = self
            .budget
            .as_ref()
            .expect("regions plan their budget checks");
        let (free, span) = (
            direct && budget.free[self.current].contains(&t),
            budget.span[t],
        );
        let r0 = self.b.use_var(self.ret_var);
        let r = self.b.ins().iadd_imm_s(r0, self.k);
        if !free {
            // retired + k + span > region_end, relative to the end (within
            // `Frame::COUNT_REACH` of it, so the signed compare cannot wrap).
            let over =
                self.b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThan, r0, -(span as i64) - self.k);
            self.side_exit_if(over, Some(Rip::Const(rip)), None, ret::DISPATCH);
        } else {
            self.stats.free_edges += 1;
        }

        // A target that replays its flags must be entered with the flags of that instruction:
        // from the end of a member that ends with it (always so, by `region::replays`; were it
        // not, leaving the function instead is still right).
        let replay = self.members[t].replay;
        if let Some(want) = replay {
            let cur = &self.members[self.current];
            let hands_it_over = self.ins_ip == cur.last_ip
                && cur.tail.is_some_and(|have| insn::same_replay(&have, &want));
            if !hands_it_over {
                self.emit_exit(Some(Rip::Const(rip)), ret::DISPATCH);
                return;
            }
        }
        let saved = (self.loaded, self.dirty, self.pending.clone());
        // The target expects every register of the region in its variable ...
        for i in 0..17 {
            if self.regs_used & (1 << i) != 0 {
                self.gpr(i);
            }
        }
        // ... the flags as it enters: none (it replays them), handed over, or folded into
        // RFLAGS ...
        if replay.is_none() && lazy {
            let edge = self.edge.take().expect("edge variables");
            self.flags_to_edge(&edge);
            self.edge = Some(edge);
        } else if replay.is_none() {
            if let Some(f) = self.flags_value() {
                self.b.def_var(self.vars[RFLAGS], f);
            }
        }
        // ... and memory up to date except for the registers whose stores wait for an exit
        // (it enters with only those dirty, so that its exits store only them and what it
        // changes itself).
        if replay.is_none() && !lazy && !self.pending.is_empty() {
            self.dirty |= 1 << RFLAGS;
        }
        // (A kept register dirty here that the target does not expect dirty would be a gap
        // in `dirty_on_entry`; it is stored here rather than lost.)
        let expected = self.members[t].entry_dirty;
        self.store_regs(self.dirty & !(self.keep & expected));
        self.b.def_var(self.ret_var, r);
        self.carry_into(t, true);
        self.jump_to_member(t);
        (self.loaded, self.dirty, self.pending) = saved;
    }

    /// Store the cached registers in `mask` (bit i: GPR i, bit 16: RFLAGS variable) to
    /// `CpuState`; the compile-time state is left alone.
    fn store_regs(&mut self, mask: u32) {
        for i in 0..17 {
            if mask & (1 << i) != 0 {
                let v = self.b.use_var(self.vars[i]);
                let off = if i == RFLAGS { OFF_RFLAGS } else { gpr_off(i) };
                self.b.ins().store(host_mem(), v, self.state, off);
            }
        }
    }

    /// Store the dirty general-purpose registers (main path) except those a region keeps for
    /// its exits; they stay in their variables.
    fn flush_regs(&mut self) {
        self.store_regs(self.dirty & GPRS & !self.keep);
        self.dirty &= (1 << RFLAGS) | self.keep;
    }

    // ----- registers -----

    /// Current 64-bit value of GPR `i` (loaded on first use).
    pub fn gpr(&mut self, i: usize) -> Value {
        if self.loaded & (1 << i) == 0 {
            let off = if i == RFLAGS { OFF_RFLAGS } else { gpr_off(i) };
            let v = self.b.ins().load(types::I64, host_mem(), self.state, off);
            self.b.def_var(self.vars[i], v);
            self.loaded |= 1 << i;
            self.new_version(i);
        }
        self.b.use_var(self.vars[i])
    }

    /// Set GPR `i` to the 64-bit `v`.
    pub fn set_gpr(&mut self, i: usize, v: Value) {
        self.new_version(i);
        self.b.def_var(self.vars[i], v);
        self.loaded |= 1 << i;
        self.dirty |= 1 << i;
    }

    pub fn iconst(&mut self, v: u64) -> Value {
        self.b.ins().iconst(types::I64, v as i64)
    }

    // ----- exits -----

    /// Leave the flags for whoever runs next: a single pending record that defines every
    /// status flag goes to the frame (`Frame::fl_code`, …) as it is — the next block of a
    /// chained jump takes it over, and the dispatcher folds it into RFLAGS when compiled code
    /// returns — with the rest of RFLAGS stored; anything else is folded and stored, and the
    /// frame's record cleared. No helper call on this path, except where a member that left
    /// the flags alone still holds the edges' two records and the CF one is not empty: those
    /// are folded through the helper (in a cold block).
    fn store_flags_for_exit(&mut self) {
        if let Some((cf, rec)) = self.edge_records() {
            // A member entered with the edges' two run-time records that left the flags
            // alone (see `lazy_members`): without a CF record (its code 0, the usual case) the
            // other one goes to the frame as it is; with one, both are folded.
            let (hand, fold, join) = (
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
            );
            self.b.set_cold_block(fold);
            self.b.ins().brif(cf[0], fold, &[], hand, &[]);
            self.b.seal_block(hand);
            self.b.seal_block(fold);
            self.b.switch_to_block(hand);
            self.store_rflags_var();
            for (v, off) in rec.iter().zip(FLAG_RECORD) {
                self.b.ins().store(host_mem(), *v, self.frame, off);
            }
            self.b.ins().jump(join, &[]);
            self.b.switch_to_block(fold);
            let cold = core::mem::replace(&mut self.cold, true);
            self.fold_and_store_flags();
            self.cold = cold;
            self.b.ins().jump(join, &[]);
            self.b.seal_block(join);
            self.b.switch_to_block(join);
            return;
        }
        match self.handover_record() {
            Some(rec) => {
                self.store_rflags_var();
                if self.incoming == Some(rec) {
                    // The frame still holds it: nothing of this function replaced it.
                    return;
                }
                let used = self.record_fields_used();
                for ((v, off), used) in rec.iter().zip(FLAG_RECORD).zip(used) {
                    if used {
                        self.b.ins().store(host_mem(), *v, self.frame, off);
                    }
                }
            }
            None => self.fold_and_store_flags(),
        }
    }

    /// Store the RFLAGS variable when it differs from memory (the bits a handed-over record
    /// does not define).
    fn store_rflags_var(&mut self) {
        if self.dirty & (1 << RFLAGS) != 0 {
            let f = self.b.use_var(self.vars[RFLAGS]);
            self.b.ins().store(host_mem(), f, self.state, OFF_RFLAGS);
        }
    }

    /// Fold the pending flags into RFLAGS and store it, and clear the frame's flag record.
    fn fold_and_store_flags(&mut self) {
        if let Some(f) = self.flags_value() {
            self.b.ins().store(host_mem(), f, self.state, OFF_RFLAGS);
        }
        let z = self.iconst(0);
        self.b
            .ins()
            .store(host_mem(), z, self.frame, Frame::OFF_FL_CODE);
    }

    /// Emit, in the current (side) block, the exit: write back dirty registers and the flags,
    /// RIP and `retired`, then return the exit word for `status` (see [`ret`]; a constant one
    /// may have [`ret::DEFER`] set). With a constant status, a constant RIP and the
    /// instructions retired since `retired` was last stored go into the word instead
    /// ([`ret::PACKED`]) when they fit.
    /// Leaves the compile-time state untouched.
    fn emit_exit_code(&mut self, rip: Option<Rip>, status: Status) {
        // Exits are cold: fold the flags through the helper (small code) rather than inline.
        self.cold = true;
        // A deferring exit (before a memory access that missed its fast path: one per access
        // at most) leaves its dirty registers to a tail it shares with the others that have
        // the same ones: recursion's `fib` region had 63 such exits of ~16 stores each, 1,400
        // of its 4,963 IR instructions.
        let regs = self.dirty & GPRS;
        let shared = matches!(status, Status::Const(c) if c & ret::DEFER != 0)
            && regs != 0
            && self.write_back_tails.is_some();
        if !shared {
            self.store_regs(regs);
        }
        self.store_flags_for_exit();
        // Packed: a constant status and RIP (a helper's status comes with RIP in memory).
        // `ret_stale`: a region block's count is in `ret_var`, not yet in memory.
        let packed = match (rip, status) {
            (Some(Rip::Const(r)), Status::Const(c)) if !self.ret_stale => {
                ret::pack(c, r, self.k as u64)
            }
            _ => None,
        };
        let word = match packed {
            Some(w) => self.iconst(w),
            None => {
                match rip {
                    Some(Rip::Const(r)) => {
                        let v = self.iconst(r);
                        self.b.ins().store(host_mem(), v, self.state, OFF_RIP);
                    }
                    Some(Rip::Dyn(v)) => {
                        self.b.ins().store(host_mem(), v, self.state, OFF_RIP);
                    }
                    None => {}
                }
                let _ = self.store_retired();
                match status {
                    Status::Const(c) => self.iconst(c),
                    Status::Dyn(v) => v,
                }
            }
        };
        if shared {
            let (tail, new) = self.write_back_tail(regs);
            let mut args: Vec<_> = (0..16)
                .filter(|i| regs & (1 << i) != 0)
                .map(|i| self.b.use_var(self.vars[i]).into())
                .collect();
            args.push(word.into());
            self.b.ins().jump(tail, &args);
            if new {
                // (The current block is filled: the tail's code goes in now, and the caller
                // switches on from a filled block as after a return.)
                self.b.switch_to_block(tail);
                let params = self.b.block_params(tail).to_vec();
                let (word, regs_v) = params.split_last().expect("the word parameter");
                for (i, &v) in (0..16).filter(|i| regs & (1 << i) != 0).zip(regs_v) {
                    self.b.ins().store(host_mem(), v, self.state, gpr_off(i));
                }
                self.b.ins().return_(&[*word]);
            }
        } else {
            self.b.ins().return_(&[word]);
        }
        self.cold = false;
    }

    /// The write-back tail for the dirty registers `regs` (see `write_back_tails`), and
    /// whether it is new (its parameters made, its code still to emit). Sealed with every
    /// block at the end: only the deferring exits' jumps reach it.
    fn write_back_tail(&mut self, regs: u32) -> (IrBlock, bool) {
        let tails = self
            .write_back_tails
            .as_mut()
            .expect("a large region's tails");
        if let Some(&(_, t)) = tails.iter().find(|(m, _)| *m == regs) {
            return (t, false);
        }
        let tail = self.b.create_block();
        self.b.set_cold_block(tail);
        for _ in 0..=regs.count_ones() {
            self.b.append_block_param(tail, types::I64);
        }
        tails.push((regs, tail));
        (tail, true)
    }

    fn emit_exit(&mut self, rip: Option<Rip>, status: u64) {
        self.emit_exit_code(rip, Status::Const(status));
    }

    /// Leave the block through a cold side exit when `cond` is true; continue on the main path
    /// otherwise.
    pub fn side_exit_if(&mut self, cond: Value, rip: Option<Rip>, code: Option<Value>, k: u64) {
        let exit = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(exit);
        self.b.ins().brif(cond, exit, &[], cont, &[]);
        self.b.seal_block(exit);
        self.b.seal_block(cont);
        self.b.switch_to_block(exit);
        let status = match code {
            Some(c) => Status::Dyn(c),
            None => Status::Const(k),
        };
        self.emit_exit_code(rip, status);
        self.b.switch_to_block(cont);
    }

    /// End the block here: the current instruction is complete (counted in `k`), continue at
    /// `rip` — in the next block directly when the chain table allows it.
    pub fn end_block(&mut self, rip: Rip) {
        self.emit_chain_exit(rip);
    }

    /// End the block with an indirect JMP to `target`: in a region, to the member it names
    /// when it names one (compared in member order), else through the chain table.
    pub fn end_block_indirect(&mut self, target: Value) {
        self.emit_chain_exit(Exit::Switch(target));
    }

    /// End the block with an indirect near CALL to the run-time `target` (the return address
    /// pushed): a jump inside the function when it is a member taken in as the called
    /// function (`Member::call_target`, its page checked), else through the chain table.
    pub fn end_block_call(&mut self, target: Value) {
        self.emit_chain_exit(Exit::Call(target));
    }

    /// End the block with a conditional branch whose two ways both leave the function: one
    /// exit, to `taken` when `c` is true and to `fall` otherwise (the target and its chain
    /// entry are selected, not branched to: half the exit code of two exits).
    pub fn end_block_either(&mut self, c: Value, taken: u64, fall: u64) {
        self.emit_chain_exit(Exit::Either(c, taken, fall));
    }

    /// A normal block exit to `exit` (in the current block): write everything back, then jump
    /// to the compiled block for the target if the chain table has a valid one whose length
    /// fits in the budget (see `crate::chain`), else store RIP and return [`ret::DISPATCH`]:
    /// the lookup is the hop stub's (`hop`), which the exit tail-calls.
    fn emit_chain_exit(&mut self, exit: impl Into<Exit>) {
        let exit = exit.into();
        use crate::chain;
        let rip = match exit {
            Exit::Const(t) => Rip::Const(t),
            Exit::Dyn(v) | Exit::Switch(v) | Exit::Call(v) => Rip::Dyn(v),
            Exit::Either(c, t, f) => {
                let (t, f) = (self.iconst(t), self.iconst(f));
                Rip::Dyn(self.b.ins().select(c, t, f))
            }
        };
        match exit {
            Exit::Const(t) => {
                if let Some(m) = self.member_at(t) {
                    self.emit_region_edge(m, true);
                    return;
                }
            }
            Exit::Dyn(v) | Exit::Switch(v) | Exit::Call(v) if self.edge.is_some() => {
                // Returns to a return site of the region stay inside, and so do switch jumps
                // to any member (a jump table among the cases of a loop) and calls to a
                // function the region took in. A member on another page is entered only
                // when its page checks out (`Lower::enterable`).
                let mut sites: Vec<usize> = (0..self.members_in_region)
                    .filter(|&i| match exit {
                        Exit::Switch(_) => true,
                        Exit::Call(_) => self.members[i].call_target,
                        _ => self.members[i].ret_site,
                    })
                    .collect();
                if let Exit::Switch(_) = exit {
                    // The targets seen most often first (a stable sort: the others keep
                    // region order, after them).
                    let rank = |i: &usize| {
                        let rip = self.members[*i].rip;
                        self.switch_order.iter().position(|&t| t == rip)
                    };
                    sites.sort_by_key(|i| rank(i).unwrap_or(usize::MAX));
                }
                for m in sites {
                    let hit = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::Equal, v, self.members[m].rip as i64);
                    let yes = self.b.create_block();
                    let no = self.b.create_block();
                    self.b.ins().brif(hit, yes, &[], no, &[]);
                    self.b.seal_block(yes);
                    self.b.switch_to_block(yes);
                    match self.enterable(m, no) {
                        Some(()) => self.emit_region_edge(m, false),
                        None => {
                            self.b.ins().jump(no, &[]);
                        }
                    }
                    self.b.seal_block(no);
                    self.b.switch_to_block(no);
                }
            }
            _ => {}
        }
        self.store_regs(self.dirty & GPRS);
        self.store_flags_for_exit();
        let target = match rip {
            Rip::Const(r) => self.iconst(r),
            Rip::Dyn(v) => v,
        };
        let r = match self.store_retired() {
            Some(r) => r,
            None => self.retired_slot(),
        };
        // A direct exit goes through its link(s) and the link stub; any other exit (or
        // when the links have run out) through the set for the target and the hop stub.
        let linked = match exit {
            Exit::Const(t) => self.link_for(t).map(|a| self.iconst(a)),
            Exit::Either(c, t, f) => match (self.link_for(t), self.link_for(f)) {
                (Some(lt), Some(lf)) => {
                    let (lt, lf) = (self.iconst(lt), self.iconst(lf));
                    Some(self.b.ins().select(c, lt, lf))
                }
                _ => None,
            },
            Exit::Dyn(_) | Exit::Switch(_) | Exit::Call(_) if self.dyn_links => {
                self.link_for(crate::chain::DYN).map(|a| self.iconst(a))
            }
            _ => None,
        };
        let entered = match self.skip_target_check(exit, rip) {
            Some(v) => v,
            None => self.iconst(0),
        };
        let (st, f) = (self.state, self.frame);
        if let Some(link) = linked {
            let stub = match exit {
                Exit::Dyn(_) | Exit::Switch(_) | Exit::Call(_) => self.sigs.addrs.hop_dyn,
                Exit::Const(_) | Exit::Either(..) => self.sigs.addrs.hop_link,
            };
            let stub = self.iconst(stub);
            self.b.ins().return_call_indirect(
                self.sigs.hop,
                stub,
                &[st, f, entered, target, link, r],
            );
            return;
        }
        // The set for the target.
        let set_of = |l: &mut Self, t: u64| l.iconst(chain::set_addr(l.chain_table, t));
        let set = match (exit, rip) {
            (Exit::Either(c, t, f), _) => {
                let (st, sf) = (set_of(self, t), set_of(self, f));
                self.b.ins().select(c, st, sf)
            }
            (_, Rip::Const(t)) => set_of(self, t),
            (_, Rip::Dyn(v)) => {
                let h = self.b.ins().imul_imm_s(v, chain::HASH_MUL as i64);
                let idx = self.b.ins().ushr_imm_s(h, chain::HASH_SHIFT as i64);
                let off = self.b.ins().imul_imm_s(idx, chain::SET_BYTES);
                let base = self.iconst(self.chain_table);
                self.b.ins().iadd(base, off)
            }
        };
        // The lookup and the jump: in the module's hop stub (see `hop`).
        let stub = self.iconst(self.sigs.addrs.hop);
        self.b
            .ins()
            .return_call_indirect(self.sigs.hop, stub, &[st, f, entered, target, set, r]);
    }

    /// The address of the link for a direct exit to `t` (one per target in a function), or
    /// `None` when the link table has none left.
    fn link_for(&mut self, t: u64) -> Option<u64> {
        crate::chain::link_for(self.links, &mut self.new_links, t)
    }

    /// On the way to a chained jump: when the target is on the virtual page this function's
    /// entry check validated, the target's `entered` argument: this function's check word
    /// (`chain::block_check`, a constant). A target with the same check word skips its own
    /// check, which would pass: same virtual page, and that page still maps the physical page
    /// and holds the code word both were decoded with (this function's check made sure of it
    /// on entry, and a store into the page would have left this function before the exit).
    /// `None` when the target is known not to qualify. The constant becomes 0 (no target's
    /// check word) if the function calls the interpreter, the only code that can change the
    /// execute TLB or swap its privilege sets.
    fn skip_target_check(&mut self, exit: Exit, rip: Rip) -> Option<Value> {
        let (vpn, own) = self.own_check?;
        let dyn_target = match (exit, rip) {
            (Exit::Either(_, t, f), _) if t >> 12 == vpn && f >> 12 == vpn => None,
            (Exit::Either(..), _) => return None,
            (_, Rip::Const(t)) if t >> 12 == vpn => None,
            (_, Rip::Const(_)) => return None,
            (_, Rip::Dyn(v)) => Some(v),
        };
        let word = self.iconst(own);
        let inst = self.b.func.dfg.value_def(word).unwrap_inst();
        self.skip_enables.push(inst);
        Some(match dyn_target {
            None => word,
            Some(v) => {
                let page = self.b.ins().ushr_imm_s(v, 12);
                let same = self.b.ins().icmp_imm_s(IntCC::Equal, page, vpn as i64);
                let zero = self.iconst(0);
                self.b.ins().select(same, word, zero)
            }
        })
    }

    /// Count the current instruction as retired (after its last fallible step).
    pub fn retire(&mut self) {
        self.k += 1;
    }

    // ----- the trampoline -----

    /// Run `d` through the interpreter's handler: write everything back, call, forget the
    /// cache, and leave the block if the instruction said so. `after`: instructions that
    /// follow in the block (a REP string that used up budget must not let them run).
    fn call_handler(&mut self, d: &DecodedInsn, after: usize) {
        if let Some(regs) = lean_registers(d) {
            self.call_handler_lean(d, regs);
            return;
        }
        self.write_back();
        self.loaded = 0;
        self.dirty = 0;
        self.pending.clear();
        // Everything is in memory: the exit only returns the status.
        self.exec_call(d);
        let rep = d.ins.has_rep_prefix() || d.ins.has_repne_prefix();
        if after > 0 && rep && d.ins.is_string_instruction() {
            let r = self.retired_slot();
            let be = self
                .b
                .ins()
                .load(types::I64, host_mem(), self.frame, Frame::OFF_BUDGET_END);
            let left = self.b.ins().isub(be, r);
            let short = self
                .b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThan, left, after as i64);
            self.side_exit_if(short, None, None, ret::DISPATCH);
        }
    }

    /// The trampoline for an instruction that neither reads nor writes RFLAGS and uses only
    /// the general-purpose registers `regs` (SSE/AVX/x87 arithmetic and moves, mostly): only
    /// those registers go through memory; the others stay in their variables, dirty or not,
    /// and the flags stay pending (an exit after the call stores and folds them as usual).
    fn call_handler_lean(&mut self, d: &DecodedInsn, regs: u32) {
        self.store_regs(regs & self.dirty);
        self.dirty &= !regs;
        let _ = self.store_retired();
        // It may have written any of `regs`: read them from memory when next needed. RIP and
        // `retired` are in memory; an exit stores the other dirty registers and the flags
        // (the instruction changed neither) and returns the status.
        self.loaded &= !regs;
        self.exec_call(d);
    }

    /// Call the instruction trampoline for `d` (`retired` in memory is up to date), reload
    /// `retired` into a region's variable, and leave the block with the helper's status when
    /// it is not NEXT.
    fn exec_call(&mut self, d: &DecodedInsn) {
        let status = self.call_exec_insn(d);
        // The handler may have changed CR0/CR4 (CLTS, MOV CR), XCR0 or MXCSR, and filled or
        // flushed the TLB.
        self.forget_machine_facts();
        self.k = 0;
        self.ret_stale = false;
        if self.count_in_var {
            let r = self.load_count();
            let r = self.biased(r);
            self.b.def_var(self.ret_var, r);
        }
        self.rip_in_memory = true;
        let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, status, 0);
        self.side_exit_if(c, None, Some(status), 0);
    }

    /// The call of the instruction trampoline `exec_insn(frame, d)`; returns its status.
    /// Invalidates every page group on the path it is on.
    fn call_exec_insn(&mut self, d: &DecodedInsn) -> Value {
        let insn = self.iconst(d as *const DecodedInsn as u64);
        let f = self.iconst(crate::helpers::exec_insn as *const () as u64);
        let frame = self.frame;
        let call = self
            .b
            .ins()
            .call_indirect(self.sigs.exec, f, &[frame, insn]);
        self.exec_called = true;
        // The handler may have filled any TLB table: no page group is valid after it (SSE
        // slow paths rejoin the main path after this call).
        self.groups_invalidate();
        self.b.inst_results(call)[0]
    }

    /// On a slow memory path (which may reach a device): make `cpu.retired` in memory exact
    /// for this instruction, as the interpreter keeps it, so devices see the same virtual
    /// time in both engines. The compile-time state (`ret_var`, `k`) is left alone: exits
    /// store the same value again.
    pub fn sync_retired_for_device(&mut self) {
        self.store_retired_plus(self.k);
    }

    /// Back on the main path after a slow path that synced `cpu.retired`
    /// ([`Self::sync_retired_for_device`]) and ran the instruction in the interpreter (one
    /// more retired): in a single block, where memory holds the count the main path adds
    /// `k` to, take those `k + 1` off again. In a region, whose count is in `ret_var`, store
    /// `ret_var` when memory is meant to hold it (`!ret_stale`): packed exits
    /// ([`ret::PACKED`]) add their `k` to what memory holds.
    pub fn unsync_retired(&mut self) {
        if self.count_in_var {
            if !self.ret_stale {
                // Memory must hold `ret_var` again: a packed exit adds its `k` to memory.
                let r = self.retired_slot();
                self.store_count(r);
            }
            return;
        }
        self.store_retired_plus(-self.k - 1);
    }

    /// The count that `k` is added to (see `Lower::count_in_var`): in a region, `ret_var`;
    /// in a single block, `cpu.retired` loaded here.
    fn retired_slot(&mut self) -> Value {
        if self.count_in_var {
            let r = self.b.use_var(self.ret_var);
            let end = self.load_region_end();
            return self.b.ins().iadd(r, end);
        }
        self.load_count()
    }

    /// `Frame::region_end`, loaded here: the same value throughout a dispatch, so the exits
    /// load it again rather than keep the entry's value in a register through the region.
    fn load_region_end(&mut self) -> Value {
        let f = self.frame;
        self.b
            .ins()
            .load(types::I64, host_mem(), f, Frame::OFF_REGION_END)
    }

    /// A count as a region's `ret_var` holds it (relative to `region_end`).
    fn biased(&mut self, count: Value) -> Value {
        let end = self.load_region_end();
        self.b.ins().isub(count, end)
    }

    /// A load of `ty` from `CpuState` at byte offset `off`, in [`state_mem`]'s alias region.
    pub(super) fn state_load(&mut self, ty: types::Type, off: i32) -> Value {
        let st = self.state;
        self.b.ins().load(ty, state_mem(off), st, off)
    }

    /// [`Lower::state_load`] of 4 bytes, zero-extended to 64 bits.
    pub(super) fn state_uload32(&mut self, off: i32) -> Value {
        let st = self.state;
        self.b.ins().uload32(state_mem(off), st, off)
    }

    /// A store of `v` to `CpuState` at byte offset `off`, in [`state_mem`]'s alias region.
    pub(super) fn state_store(&mut self, v: Value, off: i32) {
        let st = self.state;
        self.b.ins().store(state_mem(off), v, st, off);
    }

    /// `cpu.retired` as memory holds it.
    fn load_count(&mut self) -> Value {
        self.b
            .ins()
            .load(types::I64, host_mem(), self.state, Frame::STATE_TO_RETIRED)
    }

    /// Store `v` to `cpu.retired`.
    fn store_count(&mut self, v: Value) {
        self.b
            .ins()
            .store(host_mem(), v, self.state, Frame::STATE_TO_RETIRED);
    }

    /// Store the count of [`Self::retired_slot`] plus `delta` to `cpu.retired`; the stored
    /// value.
    fn store_retired_plus(&mut self, delta: i64) -> Value {
        let r = self.retired_slot();
        let r = self.b.ins().iadd_imm_s(r, delta);
        self.store_count(r);
        r
    }

    /// Make `cpu.retired` in memory `ret_var + k` when it may differ (some instruction
    /// retired since the last store, or a region block entered with it stale); the stored
    /// value, `None` when memory was already right.
    fn store_retired(&mut self) -> Option<Value> {
        if self.k == 0 && !self.ret_stale {
            return None;
        }
        Some(self.store_retired_plus(self.k))
    }

    /// Store every dirty register, the flags and `retired` (before a trampoline call).
    fn write_back(&mut self) {
        self.sync_flags();
        self.store_regs(self.dirty);
        self.dirty = 0;
        if let Some(r) = self.store_retired() {
            if self.count_in_var {
                let r = self.biased(r);
                self.b.def_var(self.ret_var, r);
            }
            self.k = 0;
            self.ret_stale = false;
        }
    }
}
