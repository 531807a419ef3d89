//! The baseline tier: a single guest block compiled straight to x86-64 machine code (iced-x86's
//! assembler), without Cranelift, for blocks made only of the instructions `insn` covers.
//!
//! Compiling a block this way takes microseconds instead of Cranelift's ~300 µs; the code keeps
//! the guest registers and RFLAGS in `CpuState` memory at every instruction boundary (each
//! instruction loads its operands and stores its result, as qemu's TCG does), so it needs no
//! register allocation and every exit is exact without write-back. It follows the same protocol
//! as a Cranelift block function (docs/jit.md, "Chaining" and "Baseline tier"):
//! - entered as `(state, frame, entered, rip)` in RDI, RSI, RDX, RCX (the `tail` convention),
//!   from `enter` or a hop stub, with no stack arguments; it keeps no frame of its own;
//! - the entry check (the execute TLB still maps the page to the physical page decoded, the
//!   code words are unchanged) unless `entered` is its own check word;
//! - the flag record a predecessor handed over (`Frame::fl_code`) is folded at entry when the
//!   block reads flags first, and dropped when the block's first flag write replaces them all;
//! - a memory access that misses the TLB's fast path leaves before its instruction with
//!   `ret::STOP | ret::DEFER` (the interpreter runs it), as lifted code does;
//! - chained exits tail-call the module's hop stubs with `(state, frame, entered, target,
//!   link or set, retired)`;
//! - with a run counter ([`RunCounters`]), each entry counts down, and the entry that
//!   reaches zero leaves before the first instruction with [`ret::PROMOTE`]: the dispatcher
//!   compiles the block again with Cranelift, whose code runs hot blocks faster (guest
//!   registers in host registers, lazy flags). The baseline tier takes the many blocks that
//!   run a few thousand times, Cranelift the few that run millions of times.

mod asm;
mod bit;
mod emit;
mod encode;
pub mod insn;
mod muldiv;
mod regs;
mod shift;
pub mod simd;

use crate::chain;
use crate::frame::{ret, Frame, OFF_RFLAGS, OFF_RIP};
use crate::page_gen::PageCert;
use emit::Emit;
use iced_x86::code_asm::*;
use iced_x86::Mnemonic;
use lockstep_interp::decode::Block;

/// What a baseline block is compiled against (the module's and the engine's addresses).
pub struct BaseTarget {
    pub chain_table: u64,
    /// The next free link and how many are left (see `lift::LowerTarget::links`).
    pub links: (u64, usize),
    pub dyn_links: bool,
    pub ram_base: u64,
    pub hop: u64,
    pub fold: u64,
    /// The run counter the entry counts down (`None`: the block is never promoted).
    pub counter: Option<u64>,
    /// Chained jumps count themselves (`JitConfig::count_chains`).
    pub count_chains: bool,
    /// Direct exits get patchable jumps and the function fast entries (`JitConfig::patch`).
    pub patch: bool,
    /// The page checks that compare the page generation first (`crate::page_gen`).
    pub cert: PageCert,
}

/// The baseline functions' run counters: one `u32` per function, counted down by its entry
/// (see [`ret::PROMOTE`]). Boxed, so that the addresses compiled code holds never move;
/// bounded ([`RunCounters::LEN`]); handed out in order and all taken back with the module.
pub struct RunCounters {
    counts: Box<[u32]>,
    used: usize,
}

impl Default for RunCounters {
    fn default() -> Self {
        RunCounters {
            counts: vec![0; Self::LEN].into_boxed_slice(),
            used: 0,
        }
    }
}

impl RunCounters {
    /// Counters per module (as many as `JitConfig::max_compiled`'s default).
    pub const LEN: usize = 1 << 16;

    /// A counter set to `runs`, its address; `None` when every counter is taken.
    pub fn take(&mut self, runs: u32) -> Option<u64> {
        let c = self.counts.get_mut(self.used)?;
        *c = runs;
        self.used += 1;
        Some(c as *mut u32 as u64)
    }

    /// Whether [`Self::take`] would find one.
    pub fn available(&self) -> bool {
        self.used < self.counts.len()
    }

    /// Take every counter back (the module that used them is gone).
    pub fn clear(&mut self) {
        self.counts[..self.used].fill(0);
        self.used = 0;
    }
}

/// A compiled baseline block: its machine code (position-independent: every address in it
/// is an absolute constant) and the targets of the links its exits took, in order.
pub struct BaseCode {
    pub bytes: Vec<u8>,
    pub links: Vec<u64>,
    /// The instructions of all its blocks: what an entry (and a round of a loop through
    /// the start) must find in the budget, checked once for the whole trace.
    pub len: u64,
    /// The offsets of its fast entries (see [`entry`]): the one that checks the page, and the
    /// one that does not (for a jump from a function with the same check word).
    pub fast: Option<(usize, usize)>,
    /// Its patchable direct exits: the offset of the jump, the exit's link and the `entered`
    /// word it passes (see `Emit::exit_const`, `patch::Patches::scan`).
    pub sites: Vec<(usize, u64, u64)>,
    /// Its check word (`chain::block_check`).
    pub check: u64,
}

/// Can the baseline tier compile `block`? 64-bit code in one page, every instruction covered
/// by [`insn::covers`], constant branch targets canonical.
pub fn covers(block: &Block) -> bool {
    let insns = &block.insns;
    if insns.is_empty() || chain::block_check(block) == u64::MAX {
        return false;
    }
    let last = insns.len() - 1;
    insns
        .iter()
        .enumerate()
        .all(|(i, d)| insn::covers(&d.ins, i == last))
}

/// Compile `block` (which [`covers`] accepts), and after it the blocks of `trace` when there
/// are any: a *trace* is a chain of blocks of the same page (or of the page of a function an
/// indirect CALL goes into, checked on the way in), each the one its predecessor's last
/// instruction goes on to ([`insn::leads_to`]: the way a Jcc takes most often, a JMP or CALL
/// target, an indirect CALL's recorded target, a fall-through, a RET's expected return
/// site), compiled as one function.
/// Going from one to the next costs nothing instead of an exit, a hop and an entry
/// (docs/jit.md, "Baseline tier", Traces); captured flags stay pending across. The function
/// is entered only at `block`; its callers check that the budget covers the whole trace
/// ([`BaseCode::len`]), as does a jump back to the start. `Err` names what the
/// assembler refused, or a trace whose blocks do not follow one another.
pub fn compile(block: &Block, trace: &[&Block], t: &BaseTarget) -> Result<BaseCode, String> {
    let page = |b: &Block| (b.key().phys >> 12, b.key().rip >> 12);
    let parts: Vec<&Block> = core::iter::once(block)
        .chain(trace.iter().copied())
        .collect();
    // The pages the trace's code may run in without a check: the entry's (the entry check
    // covers it), then each that an indirect CALL goes into, checked on the way in
    // (`insn::emit_to_next`'s guard; the trace search takes another page only so, for the
    // function the call went to: `JitConfig::inline_calls`).
    let mut checked = vec![page(block)];
    let mut guards: Vec<Option<chain::PageExpect>> = vec![None; parts.len()];
    for (p, b) in parts.iter().enumerate().skip(1) {
        let into_call = parts[p - 1]
            .insns
            .last()
            .is_some_and(|d| d.ins.code() == iced_x86::Code::Call_rm64);
        let fine = covers(b) && (checked.contains(&page(b)) || into_call);
        if !fine {
            return Err(format!(
                "trace: the block at {:#x} is not one of this page the tier covers",
                b.key().rip
            ));
        }
        if !checked.contains(&page(b)) {
            checked.push(page(b));
            // (`covers`: a block in one page.)
            guards[p] = Some(chain::page_expect(b, t.ram_base).ok_or("a block in no page")?);
        }
    }
    // The first pass checks each access that takes an earlier probe's hit; when one did (or
    // took a kept hit back), its code is dropped unassembled and the second pass makes use
    // of what the first found (`Emit::found`).
    let (mut e, len) = emit_function(block, &parts, &guards, t, Vec::new())?;
    if e.redo {
        let found = core::mem::take(&mut e.found);
        (e, _) = emit_function(block, &parts, &guards, t, found)?;
    }
    let links = core::mem::take(&mut e.new_links);
    let (bytes, fast, sites) = e.finish().map_err(|e| e.to_string())?;
    Ok(BaseCode {
        bytes,
        links,
        len,
        fast,
        sites,
        check: chain::block_check(block),
    })
}

/// The trace `parts` (see [`compile`]) emitted, not yet assembled, with what a first pass
/// found about its probes (`known`, `Emit::found`); and its length in instructions.
fn emit_function(
    block: &Block,
    parts: &[&Block],
    guards: &[Option<chain::PageExpect>],
    t: &BaseTarget,
    known: Vec<emit::Probed>,
) -> Result<(Emit, u64), String> {
    let mut e = Emit::new(t, block).map_err(|e| e.to_string())?;
    e.known = known;
    let len: u64 = parts.iter().map(|b| b.insns.len() as u64).sum();
    entry(&mut e, block, parts, len).map_err(|e| e.to_string())?;
    loop_top(&mut e, parts, len).map_err(|e| e.to_string())?;
    let mut before = 0u64;
    for (p, part) in parts.iter().enumerate() {
        let next = parts.get(p + 1).map(|b| b.key().rip);
        let n = part.insns.len();
        if p > 0 {
            let first = part.insns.first().ok_or("an empty block in a trace")?;
            e.start_insn(before as usize, first);
            let jump = parts[p - 1]
                .insns
                .last()
                .is_some_and(|d| d.ins.is_jcc_short_or_near() || d.ins.is_jmp_short_or_near());
            e.next_part(before + n as u64, jump && guards[p].is_none());
        }
        // Per block: the way on to the next one is a barrier for the flags, as an exit is.
        let dead = insn::dead_flags(&part.insns);
        let ends_in_jcc = part
            .insns
            .last()
            .is_some_and(|d| d.ins.is_jcc_short_or_near());
        for (i, d) in part.insns.iter().enumerate() {
            e.start_insn(before as usize + i, d);
            let last = i + 1 == n;
            let before_jcc = i + 2 == n && ends_in_jcc;
            // The instruction right before the function's last, a Jcc whose both ways exit
            // (not a loop's way back to the top, which wants RFLAGS whole): its flags may go
            // to the exits lazily.
            e.lazy_ok = before_jcc && next.is_none() && e.loop_top.is_none();
            // The instruction right before a Jcc that goes on to the next block: its capture
            // may wait for the Jcc's paths (`Emit::defer_capture`).
            e.defer_ok = before_jcc && next.is_some();
            e.carry_next = part.insns.get(i + 1).is_some_and(|n| {
                matches!(n.ins.mnemonic(), Mnemonic::Adc | Mnemonic::Sbb)
                    && insn::register_operands(&n.ins)
            });
            let r = match next {
                Some(next) if last => {
                    if !insn::leads_to(&d.ins, next) {
                        return Err(format!("trace: {} does not go on to {next:#x}", d.ins));
                    }
                    // (Only a Jcc's way on asks.)
                    let replaced = ends_in_jcc && insn::replaces_flags_first(&parts[p + 1].insns);
                    insn::emit_to_next(&mut e, d, next, guards[p + 1], dead[i], replaced)
                }
                _ => insn::emit(&mut e, d, last, dead[i]),
            };
            r.map_err(|err| format!("{}: {err}", d.ins))?;
        }
        before += n as u64;
    }
    Ok((e, len))
}

/// The entry: the skip test, the entry check, and the incoming flag record's fold when the
/// block — or a later block of its trace (`parts`), if it does not touch the flags — reads a
/// flag before writing them all.
fn entry(e: &mut Emit, block: &Block, parts: &[&Block], len: u64) -> Result<(), IcedError> {
    let (off, vpn, want) = chain::exec_tlb_expect(block, e.ram_base);
    let own = chain::block_check(block);
    let mut body = e.a.create_label();
    let mut fail = e.a.create_label();
    e.a.mov(rax, own)?;
    e.a.cmp(rdx, rax)?;
    e.a.je(body)?;
    // (A failed check leaves from cold code: the checked entry falls through.)
    e.later(move |a| {
        a.set_label(&mut fail)?;
        a.mov(qword_ptr(rdi + OFF_RIP), rcx)?;
        a.mov(eax, ret::DISPATCH as u32)?;
        a.ret()
    });
    // (`covers` made sure the block is in one page.)
    let expect = (off, vpn, want);
    if e.patch_exits() {
        fast_entries(e, block, len, expect, fail, body)?;
    } else {
        check_page(e, expect, block.code_words(), fail, body)?;
    }
    e.a.set_label(&mut body)?;
    if let Some(counter) = e.counter {
        // The run counter; at zero, back to the dispatcher before anything is done (the
        // incoming flag record, if any, is still in the frame: the dispatcher folds it).
        let mut promote = e.a.create_label();
        e.a.mov(rax, counter)?;
        e.a.sub(dword_ptr(rax), 1)?;
        e.a.je(promote)?;
        let rip = block.key().rip;
        e.later(move |a| {
            a.set_label(&mut promote)?;
            emit::exit_word(a, ret::PROMOTE, rip, 0)
        });
    }
    // (Over the whole trace: a first block that never touches the flags leaves the record
    // to the next one.)
    match insn::first_flag_use(parts.iter().flat_map(|b| &b.insns)) {
        insn::FlagUse::Read => fold_incoming(e)?,
        insn::FlagUse::None | insn::FlagUse::Overwrite => e.record_live = true,
    }
    Ok(())
}

/// The fast entries, which a direct exit's patched jump goes to (`patch::Patches::scan`)
/// instead of through its link: each makes the budget check the link jump would have made
/// (`retired`, in R9, plus the function's length `len` against the chain end; the hop counted
/// with `count_chains`), then the checked one the entry check and the trusted one none (for
/// a jump from a function with the same check word, whose entry check covered this page as
/// the link jump's `entered` says today). A failed budget check leaves for the dispatcher at
/// the function's RIP, as the link jump's does. The entry's page check follows the checked
/// fast entry, which sets RCX (what a failed check stores as RIP) to the function's RIP and
/// falls into it; the normal entry jumps to it when it does not skip it. The page check ends
/// in a jump to `body`, into which the trusted entry falls. (One copy of the page check: the
/// patched jumps take most entries.)
fn fast_entries(
    e: &mut Emit,
    block: &Block,
    len: u64,
    expect: (i32, u64, u64),
    fail: CodeLabel,
    body: CodeLabel,
) -> Result<(), IcedError> {
    let rip = block.key().rip;
    let mut back = e.a.create_label();
    let count = e.count_chains();
    // A fast entry's start: its label (the id, for the offset) and the budget check.
    let budget = |e: &mut Emit| -> Result<u64, IcedError> {
        let mut start = e.a.create_label();
        e.a.set_label(&mut start)?;
        e.a.add(r9, len as i32)?;
        let id = e.last_label();
        e.a.cmp(r9, qword_ptr(rsi + Frame::OFF_CHAIN_END))?;
        e.a.ja(back)?;
        if count {
            e.a.add(qword_ptr(rsi + Frame::OFF_CHAINS), 1)?;
        }
        Ok(id)
    };
    let mut check = e.a.create_label();
    e.a.jmp(check)?;
    let checked_id = budget(e)?;
    e.a.mov(rcx, rip)?;
    e.a.set_label(&mut check)?;
    check_page(e, expect, block.code_words(), fail, body)?;
    e.a.jmp(body)?;
    let trusted_id = budget(e)?;
    e.fast = Some((checked_id, trusted_id));
    // (A failed budget check leaves through the entry check's failure, with RCX set.)
    e.later(move |a| {
        a.set_label(&mut back)?;
        a.mov(rcx, rip)?;
        a.jmp(fail)
    });
    Ok(())
}

/// The checks a compiled function's entry makes of its page (also made on the way into a
/// callee's page in a trace, `insn::emit_to_next`): the execute TLB entry at byte `off` has
/// tag `vpn` and host field `host` (`chain::exec_tlb_expect`), and each code page of `words`
/// has its code word; any that fails goes to `fail`, and the code after the checks is where
/// they pass. When all of them held at the compile (`BaseTarget::cert`), the frame's page
/// generation is compared first: the same one as then, and they all still hold
/// (`crate::page_gen`), so the code jumps to `pass`, where the caller goes on after the
/// checks. Clobbers R8, RAX and the host's flags.
pub(super) fn check_page(
    e: &mut Emit,
    (off, vpn, host): (i32, u64, u64),
    words: impl IntoIterator<Item = (u64, u32)>,
    fail: CodeLabel,
    pass: CodeLabel,
) -> Result<(), IcedError> {
    let words: Vec<(u64, u32)> = words.into_iter().collect();
    if let Some(g) = e.cert.gen_for(vpn, host, words.iter().copied()) {
        e.a.cmp(qword_ptr(rsi + Frame::OFF_GEN), g)?;
        e.a.je(pass)?;
    }
    e.a.mov(r8, qword_ptr(rsi + Frame::OFF_TLB_EXEC))?;
    for (at, value) in [(off, vpn), (off + 8, host)] {
        // (A value that is a sign-extended 32-bit immediate is compared as one.)
        match i32::try_from(value as i64) {
            Ok(imm) => e.a.cmp(qword_ptr(r8 + at), imm)?,
            Err(_) => {
                e.a.mov(rax, value)?;
                e.a.cmp(qword_ptr(r8 + at), rax)?;
            }
        }
        e.a.jne(fail)?;
    }
    e.a.mov(r8, qword_ptr(rsi + Frame::OFF_CODE_TABLE))?;
    for (page, word) in words {
        match i32::try_from(page.wrapping_mul(4)) {
            Ok(off) => e.a.cmp(dword_ptr(r8 + off), word)?,
            Err(_) => {
                e.a.mov(rax, page.wrapping_mul(4))?;
                e.a.cmp(dword_ptr(r8 + rax), word)?;
            }
        }
        e.a.jne(fail)?;
    }
    Ok(())
}

/// For a function one of whose blocks (the first, or a later one of its trace, `parts`) can
/// go back to the function's start (`region::successors`): the top of the loop, after the
/// entry, where that jump goes on (see `Emit::exit_const`). A first block that does
/// floating-point arithmetic sets up the host's MXCSR before the top (once per entry, not
/// per round: `simd::default_mxcsr`).
fn loop_top(e: &mut Emit, parts: &[&Block], len: u64) -> Result<(), IcedError> {
    let block = parts[0];
    let rip = block.key().rip;
    let Some(first) = block.insns.first() else {
        return Ok(());
    };
    // A trace that starts at the return site of a CALL it makes and ends with a RET (the
    // callee's, inlined) goes back to its start when the RET returns there, as a loop
    // whose body calls a function does when its compile started after the call.
    let last_ins = |b: &&Block| b.insns.last().map(|d| d.ins);
    let ret_back = parts.len() > 1
        && parts
            .last()
            .and_then(last_ins)
            .is_some_and(|i| i.code() == iced_x86::Code::Retnq)
        && parts.iter().filter_map(last_ins).any(|i| {
            matches!(
                i.code(),
                iced_x86::Code::Call_rel32_64 | iced_x86::Code::Call_rm64
            ) && i.next_ip() == rip
        });
    if !ret_back
        && !parts
            .iter()
            .any(|b| crate::region::successors(b).contains(&rip))
    {
        return Ok(());
    }
    e.ret_to_top = ret_back;
    // (Only for the first block's: set up for a later block's on every entry, it cost
    // matrix 7% where rounds mostly leave before that block.)
    let mx_at_top = block
        .insns
        .iter()
        .any(|d| simd::form(&d.ins).is_some_and(|f| f.fp));
    if mx_at_top {
        e.start_insn(0, first);
        simd::default_mxcsr(e)?;
    }
    // (A label goes on the next instruction, which may already carry the entry's.)
    e.a.nop()?;
    let mut top = e.a.create_label();
    e.a.set_label(&mut top)?;
    e.loop_top = Some((rip, top, len, mx_at_top));
    Ok(())
}

/// `if frame.fl_code != 0 { rflags = fold_flags(rflags, record); frame.fl_code = 0 }`, on a
/// cold path at the end of the function: a raw record (a baseline predecessor's, see
/// `Emit::hand_over`) merged inline, any other through the helper.
fn fold_incoming(e: &mut Emit) -> Result<(), IcedError> {
    let mut cold = e.a.create_label();
    let mut back = e.a.create_label();
    e.a.cmp(qword_ptr(rsi + Frame::OFF_FL_CODE), 0)?;
    e.a.jne(cold)?;
    e.a.set_label(&mut back)?;
    let fold = e.fold;
    e.later(move |a| {
        use crate::lift::flags::{encode, FlagOp, RAW_CODE};
        let logic = |size| encode(FlagOp::Logic, size, lockstep_interp::state::flags::STATUS);
        a.set_label(&mut cold)?;
        // The baseline tier's records (`Emit::hand_over`: raw captures and lazy logic
        // flags) are merged inline.
        let (mut logic8, mut logic4, mut call) =
            (a.create_label(), a.create_label(), a.create_label());
        fold_record(a, RAW_CODE, logic8, back, emit::merge_raw_record)?;
        a.set_label(&mut logic8)?;
        fold_record(a, logic(8), logic4, back, |a| {
            emit::merge_logic_record(a, 8)
        })?;
        a.set_label(&mut logic4)?;
        fold_record(a, logic(4), call, back, |a| emit::merge_logic_record(a, 4))?;
        a.set_label(&mut call)?;
        // Entered like a call (RSP = 8 mod 16): two pushes and 8 bytes align the call.
        a.push(rdi)?;
        a.push(rsi)?;
        a.sub(rsp, 8)?;
        a.mov(rdx, qword_ptr(rsi + Frame::OFF_FL_A))?;
        a.mov(rcx, qword_ptr(rsi + Frame::OFF_FL_B))?;
        a.mov(r8, qword_ptr(rsi + Frame::OFF_FL_RES))?;
        a.mov(r9, qword_ptr(rsi + Frame::OFF_FL_CIN))?;
        a.mov(rax, rsi)?;
        a.mov(rsi, qword_ptr(rax + Frame::OFF_FL_CODE))?;
        a.mov(rdi, qword_ptr(rdi + OFF_RFLAGS))?;
        a.mov(rax, fold)?;
        a.call(rax)?;
        a.add(rsp, 8)?;
        a.pop(rsi)?;
        a.pop(rdi)?;
        a.mov(qword_ptr(rdi + OFF_RFLAGS), rax)?;
        a.mov(qword_ptr(rsi + Frame::OFF_FL_CODE), 0)?;
        a.jmp(back)
    });
    Ok(())
}

/// If the incoming record's code is `code`, `merge` and a jump to `back`; else on to `miss`.
fn fold_record(
    a: &mut CodeAssembler,
    code: u64,
    miss: CodeLabel,
    back: CodeLabel,
    merge: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    let code = crate::lift::flags::code_imm(code);
    a.cmp(qword_ptr(rsi + Frame::OFF_FL_CODE), code)?;
    a.jne(miss)?;
    merge(a)?;
    a.jmp(back)
}

/// A listing of baseline machine code (diagnostics: `--verify` reports, IR dumps).
pub fn disassemble(code: &[u8]) -> String {
    use iced_x86::Formatter;
    let mut dec = iced_x86::Decoder::with_ip(64, code, 0, iced_x86::DecoderOptions::NONE);
    let mut fmt = iced_x86::IntelFormatter::new();
    let mut out = String::new();
    for i in &mut dec {
        let mut s = String::new();
        fmt.format(&i, &mut s);
        out.push_str(&format!("{:5x}  {s}\n", i.ip()));
    }
    out
}
