//! The baseline tier's emitter state and its building blocks: guest registers in memory,
//! memory operands through the inline TLB probe, RFLAGS kept exact in memory (host flags
//! captured and merged), the deferring exits and the chained exits.
//!
//! Host registers: RDI the `CpuState`, RSI the frame (both live for the whole function);
//! RAX and RDX an instruction's operands, R8 a linear address, R9 the host delta of its page
//! (the TLB entry's `host` field, which a probe found: the host address is `[R9 + R8]`), R10
//! captured host flags awaiting their merge, RCX and R11 scratch.
//!
//! Captured flags stay in R10 across memory accesses (addressing and probes leave R10 alone):
//! a deferring exit merges them on its cold path, a chained exit hands them to the next
//! function as a raw flag record ([`Emit::hand_over`]), and a later instruction that writes
//! every status flag replaces them without a merge on the main path.

use super::BaseTarget;
use crate::chain;
use crate::frame::{gpr_off, ret, Frame, OFF_RFLAGS, OFF_RIP};
use iced_x86::code_asm::*;
use lockstep_interp::decode::{Block, DecodedInsn};
use lockstep_interp::mmu::{TLB_ENTRIES, TLB_ENTRY_BYTES};
use lockstep_interp::state::flags;

/// The six status flags of RFLAGS, and CF, as the 32-bit immediates the code uses.
pub const STATUS: u32 = flags::STATUS as u32;
pub const CF: u32 = flags::CF as u32;

/// A piece of cold code, assembled after the main path.
type Cold = Box<dyn FnOnce(&mut CodeAssembler) -> Result<(), IcedError>>;

/// The last memory access whose linear address and page's host delta R8 and R9 still hold:
/// R8 is guest register `g`'s current value plus `off`; its page's hit came from the write
/// table (and so serves reads as well) or the read one. The bytes from `g + lo` to `g + hi`
/// are the span of the accesses at `g` since that probe (which decides whether the next one
/// may take its hit, in both passes of [`Emit::found`]); the bytes from `g + ok_lo` to
/// `g + ok_hi` are known to lie in its page (the span checked so far, or the whole span the
/// probe checked up front): an access inside them needs no check.
#[derive(Clone, Copy, Debug)]
struct Last {
    g: usize,
    off: i64,
    write: bool,
    lo: i64,
    hi: i64,
    ok_lo: i64,
    ok_hi: i64,
    /// The probe's index in the function ([`Emit::found`]), and how far `g` has moved since
    /// (its value then is its value now plus `moved`).
    id: usize,
    moved: i64,
    /// The frame slot (`Frame::hits`) its host delta goes to when another access takes R8
    /// and R9 ([`Emit::kept`]), and whether it is there.
    slot: usize,
    stored: bool,
}

impl Last {
    /// Does this hit serve an access of `size` bytes at its register plus `disp`: through a
    /// table that covers it, near enough, the span still small?
    fn serves(&self, g: usize, disp: i64, write: bool, size: u32) -> bool {
        let end = disp.wrapping_add(size as i64);
        self.g == g
            && (self.write || !write)
            && disp.wrapping_sub(self.off).unsigned_abs() < REUSE_DELTA as u64
            && self.hi.max(end) - self.lo.min(disp) <= MAX_SPAN
    }
}

/// The widest span one probe checks up front ([`Emit::found`]): well inside a page, so that a
/// span whose first and last byte hit the same TLB entry lies in one page.
const MAX_SPAN: i64 = 2048;

/// What the first of a function's two passes finds out about one of its probes
/// ([`Emit::found`]): the span of the accesses its hit serves (`lo..hi`, relative to the
/// register's value at the probe), and whether a later access took the hit back from the
/// frame ([`Emit::kept`]).
#[derive(Clone, Copy, Debug)]
pub struct Probed {
    lo: i64,
    hi: i64,
    taken_back: bool,
}

/// Largest distance from the last access that an access takes without a TLB probe (as
/// `lift::group::PROBE_DELTA`: one in another page leaves for the interpreter, so a far one
/// probes).
const REUSE_DELTA: i64 = 512;

/// Host flags held in R10, awaiting their merge into RFLAGS: the flags taken from them (`set`)
/// and the flags the instruction replaces (`clear`). R10 holds them as LAHF and SETO leave
/// them (the raw layout): RFLAGS' low byte in bits 8–15 and OF in bit 0 (PUSHF costs ~1.1 ns
/// on this host, POPF ~3.7 ns, LAHF/SAHF with SETO/CMP ~0.3 ns).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Capture {
    set: u32,
    clear: u32,
}

/// What the host's flags hold at the current point of the main path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HostFlags {
    /// Nothing known: a condition must reload them from RFLAGS.
    Stale,
    /// The guest's status flags (AF aside, which no condition reads).
    Guest,
    /// The guest's, except CF (after INC/DEC, which keep the guest's CF).
    GuestButCarry,
}

/// What a shared exit tail merges ([`Emit::shared_tail`]): the pending capture, whether the
/// incoming flag record is live, whether the host's MXCSR flags go into the guest's.
type TailKey = (Option<Capture>, bool, bool);

pub struct Emit {
    pub a: CodeAssembler,
    cold: Vec<Cold>,
    /// Direct exits get a patchable jump (`BaseTarget::patch`).
    patch: bool,
    /// The patchable jumps of the direct exits so far: the label id on the jump, the
    /// exit's link, and the `entered` word the exit passes (see [`Emit::exit_const`]).
    pub sites: Vec<(u64, u64, u64)>,
    /// The label ids of the function's fast entries (checked, trusted), when it has them
    /// (`base::entry`).
    pub fast: Option<(u64, u64)>,
    /// The shared tails of cold exits ([`Emit::leave_at`]): per (pending capture, incoming
    /// record live, MXCSR to merge), the label of the code that merges them and returns the
    /// exit word in RCX.
    tails: Vec<(TailKey, CodeLabel)>,
    pub ram_base: u64,
    /// The page checks that compare the page generation first (`BaseTarget::cert`).
    pub cert: crate::page_gen::PageCert,
    pub fold: u64,
    pub counter: Option<u64>,
    chain_table: u64,
    links: (u64, usize),
    dyn_links: bool,
    hop: u64,
    /// Chained jumps count themselves (`JitConfig::count_chains`).
    count_chains: bool,
    /// The targets of the links taken so far, in order (`lift::Lowered::links`).
    pub new_links: Vec<u64>,
    /// The block's virtual page and check word (for `entered` of same-page targets).
    vpn: u64,
    own: u64,
    /// Instructions in the block.
    pub len: u64,
    /// The current instruction: its index (instructions retired before it), RIP and next RIP.
    pub k: u64,
    pub ip: u64,
    pub next_ip: u64,
    /// Captured host flags in R10 not yet merged into RFLAGS.
    pending: Option<Capture>,
    /// Instead of a capture: the guest's status flags are those of a logic operation (AND,
    /// OR, XOR, TEST) of this many bytes (4 or 8) whose result RAX holds (zero-extended),
    /// and the host's flags
    /// are still its own. Only between such an instruction and the function's last Jcc, whose
    /// exits hand them over as a `Logic` record ([`Emit::hand_over`]).
    lazy: Option<u8>,
    /// The instruction being emitted may leave its flags lazy (`base::compile`: a logic
    /// operation right before the function's last instruction, a Jcc whose both ways exit).
    pub lazy_ok: bool,
    /// The instruction being emitted is right before a Jcc that ends a block of a trace
    /// (`base::compile`): its capture may wait for the Jcc ([`Emit::defer_capture`]).
    pub defer_ok: bool,
    /// The instruction being emitted is right before an ADC or SBB of registers and
    /// immediates in the same block (`base::compile`): it reads CF from the host's flags as
    /// they are and replaces every status flag, nothing in between can leave or clobber
    /// them, so an ALU producer's flags need no capture (`insn::rename`).
    pub carry_next: bool,
    /// A capture not yet taken: the host's flags are the guest's (the instruction before
    /// the trace's Jcc wrote them), to be captured on the Jcc's exit path and, unless the
    /// next block's first instruction replaces them all, on its way on (`insn::jcc_toward`).
    pub uncaptured: Option<Capture>,
    pub host: HostFlags,
    /// The last access, while R8 and R9 still hold its linear address and host delta.
    last: Option<Last>,
    /// The function is emitted twice (`base::compile`) when an access takes an earlier
    /// probe's hit after a check that it is in the same page, or takes a kept hit back from
    /// the frame (`redo`): the first pass records, per probe of [`Emit::access_near`] in
    /// order, what [`Probed`] holds (`found`); the second (`known`, the first's findings)
    /// checks each span whole in its probe — the accesses inside it go without checks — and
    /// stores the host delta of the hits taken back, and only of those, when another access
    /// takes R8 and R9 from them.
    pub found: Vec<Probed>,
    pub redo: bool,
    pub known: Vec<Probed>,
    /// Earlier hits that R8 and R9 no longer hold but that still serve their register
    /// (`Frame::HIT_SLOTS` at most, one per frame slot): an access one of them serves loads
    /// its host delta from the frame instead of probing.
    kept: Vec<Last>,
    /// The frame may still hold an incoming flag record that the next full flag write must
    /// drop (`Frame::fl_code` set to 0).
    pub record_live: bool,
    /// The block's SSE / AVX availability check has been made on the main path
    /// (`simd::usable`).
    pub sse_ok: bool,
    pub avx_ok: bool,
    /// The host's MXCSR holds the flags raised since the block's first floating-point
    /// instruction: every exit from here merges them (`simd::merge_mxcsr`).
    pub mx: bool,
    /// When a block of the function jumps back to the function's start (a loop of one block,
    /// or of a trace's blocks): the start's RIP, the label after the function's entry where
    /// such a jump goes on without leaving ([`Emit::exit_const`]), and the trace's length
    /// (the budget a round needs to start), and whether the host's MXCSR is set up
    /// before the top (else a round that set it up leaves instead of going round: the next
    /// round's set-up would drop the flags it collected).
    pub loop_top: Option<(u64, CodeLabel, u64, bool)>,
    /// The function's last instruction is a RET that may return to its start (`base::loop_top`):
    /// when it does, it goes on as [`Emit::exit_const`] to the start.
    pub ret_to_top: bool,
}

impl Emit {
    pub fn new(t: &BaseTarget, block: &Block) -> Result<Emit, IcedError> {
        Ok(Emit {
            a: CodeAssembler::new(64)?,
            cold: Vec::new(),
            patch: t.patch,
            sites: Vec::new(),
            fast: None,
            tails: Vec::new(),
            ram_base: t.ram_base,
            cert: t.cert.clone(),
            fold: t.fold,
            counter: t.counter,
            chain_table: t.chain_table,
            links: t.links,
            dyn_links: t.dyn_links,
            hop: t.hop,
            count_chains: t.count_chains,
            new_links: Vec::new(),
            vpn: block.key().rip >> 12,
            own: chain::block_check(block),
            len: block.insns.len() as u64,
            k: 0,
            ip: 0,
            next_ip: 0,
            pending: None,
            lazy: None,
            lazy_ok: false,
            defer_ok: false,
            carry_next: false,
            uncaptured: None,
            host: HostFlags::Stale,
            record_live: false,
            last: None,
            found: Vec::new(),
            redo: false,
            known: Vec::new(),
            kept: Vec::new(),
            sse_ok: false,
            avx_ok: false,
            mx: false,
            loop_top: None,
            ret_to_top: false,
        })
    }

    /// Queue cold code (assembled after the main path, in order).
    pub fn later(&mut self, f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError> + 'static) {
        self.cold.push(Box::new(f));
    }

    /// The machine code (the main path, then the cold code), the offsets in it of the fast
    /// entries (checked, trusted) and of the patchable jumps of [`Emit::sites`] (with each
    /// site's link and `entered`). No fast entry and no site when the assembler cannot say
    /// where they are.
    #[allow(clippy::type_complexity)]
    pub fn finish(
        mut self,
    ) -> Result<(Vec<u8>, Option<(usize, usize)>, Vec<(usize, u64, u64)>), IcedError> {
        for f in core::mem::take(&mut self.cold) {
            f(&mut self.a)?;
        }
        let mut report: Vec<u64> = self.sites.iter().map(|s| s.0).collect();
        if let Some((checked, trusted)) = self.fast {
            report.extend([checked, trusted]);
        }
        let (bytes, at) = super::asm::assemble(&mut self.a, &report)?;
        let n = self.sites.len();
        let fast = match (self.fast, at.get(n), at.get(n + 1)) {
            (Some(_), Some(&Some(c)), Some(&Some(t))) => Some((c, t)),
            _ => None,
        };
        let sites = match fast {
            Some(_) => (self.sites.iter().zip(&at))
                .filter_map(|(&(_, link, entered), &off)| Some((off?, link, entered)))
                .collect(),
            None => Vec::new(),
        };
        Ok((bytes, fast, sites))
    }

    /// Whether direct exits get patchable jumps and the function fast entries.
    pub fn patch_exits(&self) -> bool {
        self.patch
    }

    /// Whether chained jumps count themselves.
    pub fn count_chains(&self) -> bool {
        self.count_chains
    }

    /// The id of the label on the instruction just added.
    pub fn last_label(&self) -> u64 {
        self.a.instructions().last().map_or(0, |i| i.ip())
    }

    /// Add a guest instruction renamed for the host (`h`, a copy of the guest's), without its
    /// guest IP: the assembler wants distinct IPs, and a trace may hold one guest instruction
    /// twice (a block that starts inside another).
    pub fn host_insn(&mut self, mut h: iced_x86::Instruction) -> Result<(), IcedError> {
        h.set_ip(0);
        self.a.add_instruction(h)
    }

    pub fn start_insn(&mut self, i: usize, d: &DecodedInsn) {
        self.k = i as u64;
        self.ip = d.ins.ip();
        self.next_ip = d.ins.next_ip();
    }

    // ----- registers -----

    pub fn load_reg(&mut self, host: AsmRegister64, g: usize) -> Result<(), IcedError> {
        self.a.mov(host, qword_ptr(rdi + gpr_off(g)))
    }

    /// Store `host` (RAX or RDX), the new value of guest register `g` after a `size`-byte
    /// operation, into it: all 8 bytes whatever the size — a 4-byte result was zero-extended
    /// by the host operation that made it, and for a 1- or 2-byte one the caller loaded the
    /// whole register into `host` before the operation, which kept the rest. (A narrower
    /// store would be right too, but the next 8-byte load of the register, usually the next
    /// instruction's, cannot take its value from such a store: ~10 cycles on this host.
    /// `setg al; movzx eax, al` in qsort's comparator was a third of its samples.)
    pub fn store_reg(&mut self, g: usize, host: AsmRegister64, size: u8) -> Result<(), IcedError> {
        debug_assert!(matches!(size, 1 | 2 | 4 | 8));
        self.a.mov(qword_ptr(rdi + gpr_off(g)), host)
    }

    /// Store host AH into guest register `g`'s bits 8–15 (an AH/CH/DH/BH destination).
    pub fn store_high_byte(&mut self, g: usize) -> Result<(), IcedError> {
        self.a.mov(byte_ptr(rdi + gpr_off(g) + 1), ah)
    }

    // ----- flags -----

    /// Capture the host's flags right after a flag-writing host instruction: `set` the flags
    /// taken from the host, `clear` the flags the instruction replaces (the rest of `clear`
    /// become 0, as AF after a logic operation). Into R10 in the raw layout ([`Capture`]),
    /// without touching the host's flags or any register but R10 and R11.
    pub fn capture(&mut self, set: u32, clear: u32) -> Result<(), IcedError> {
        self.capture_via(r11, set, clear)
    }

    /// [`Emit::capture`] with RAX kept in `scratch` (clobbered) meanwhile: register moves,
    /// which the host renames, rather than XCHG (three micro-ops on Intel cores: a capture
    /// and a restore through XCHG took 3.8 ns in a dependent chain on a Xeon, 2.4 ns through
    /// moves).
    pub fn capture_via(
        &mut self,
        scratch: AsmRegister64,
        set: u32,
        clear: u32,
    ) -> Result<(), IcedError> {
        debug_assert!(self.pending.is_none(), "merge flushed before the host op");
        self.a.mov(scratch, rax)?;
        raw_capture_through_rax(&mut self.a)?;
        self.a.mov(rax, scratch)?;
        self.captured(set, clear);
        Ok(())
    }

    /// The capture of `set` and `clear` is in R10, the host's flags still its producer's.
    fn captured(&mut self, set: u32, clear: u32) {
        self.pending = Some(Capture { set, clear });
        self.host = if set & CF != 0 {
            HostFlags::Guest
        } else {
            HostFlags::GuestButCarry
        };
    }

    /// [`Emit::capture`] when RAX is free (the instruction's result already stored, or none):
    /// LAHF and SETO straight into RAX, three instructions instead of five. Clobbers RAX.
    pub fn capture_in_rax(&mut self, set: u32, clear: u32) -> Result<(), IcedError> {
        debug_assert!(self.pending.is_none(), "merge flushed before the host op");
        raw_capture_through_rax(&mut self.a)?;
        self.captured(set, clear);
        Ok(())
    }

    /// Instead of [`Emit::capture_in_rax`] right after the flag-writing host instruction,
    /// for the instruction before a trace's Jcc (`defer_ok`): the host's flags stay the
    /// guest's, the capture waits (`uncaptured`) for the Jcc's paths. Only for a capture
    /// with CF (a condition reading CF finds it in the host's flags).
    pub fn defer_capture(&mut self, set: u32, clear: u32) {
        debug_assert!(self.pending.is_none() && self.defer_ok && set & CF != 0);
        self.uncaptured = Some(Capture { set, clear });
        self.host = HostFlags::Guest;
    }

    /// The capture [`Emit::defer_capture`] left, taken now (the host's flags still the
    /// producer's: nothing but a Jcc and a label since). Clobbers RAX.
    pub fn take_capture(&mut self, c: Capture) -> Result<(), IcedError> {
        self.capture_in_rax(c.set, c.clear)
    }

    /// After a captured multiplication whose low half is in RAX (EAX if not `wide`): the
    /// capture's SF and PF become those of the low half (the interpreter's values of these
    /// undefined flags), its CF and OF stay the host's, the rest 0. Through a TEST and LAHF
    /// (RAX kept); clobbers R11 and the host's flags, which stop being the guest's.
    pub fn captured_sf_pf_of_rax(&mut self, wide: bool) -> Result<(), IcedError> {
        debug_assert!(self.pending.is_some(), "a capture to fix");
        let (sf, pf) = (flags::SF as u32, flags::PF as u32);
        if wide {
            self.a.test(rax, rax)?;
        } else {
            self.a.test(eax, eax)?;
        }
        self.a.mov(r11, rax)?;
        self.a.lahf()?;
        self.a.xchg(r11, rax)?;
        // R11's bits 8–15 are the TEST's low flag byte, where the capture has its own.
        self.a.and(r11d, (sf | pf) << 8)?;
        self.a.and(r10d, (CF << 8) | 1)?;
        self.a.or(r10d, r11d)?;
        self.host = HostFlags::Stale;
        Ok(())
    }

    /// Replace the OF of the capture awaiting its merge by R11 (0 or 1, as SETO leaves it).
    /// Clobbers the host's flags, which stop being the guest's.
    pub fn captured_of_from_r11(&mut self) -> Result<(), IcedError> {
        self.a.and(r10d, !1)?;
        self.a.or(r10d, r11d)?;
        self.host = HostFlags::Stale;
        Ok(())
    }

    /// The flags of a logic operation just run, whose result of `size` bytes RAX holds
    /// (zero-extended), left
    /// to the exits of the function's last Jcc (`lazy_ok`): no capture, the host's flags
    /// stay the guest's for the Jcc.
    pub fn lazy_logic(&mut self, size: u8) {
        debug_assert!(self.pending.is_none() && matches!(size, 4 | 8));
        self.lazy = Some(size);
        self.host = HostFlags::Guest;
    }

    /// Merge captured flags into RFLAGS (clobbers the host's flags).
    pub fn flush(&mut self) -> Result<(), IcedError> {
        if self.lazy.is_some() {
            // (Not on any path the tier emits today: lazy flags reach only the exits, which
            // hand them over. Captured here from the host's flags, which are still the
            // logic operation's, RAX kept.)
            debug_assert!(self.host == HostFlags::Guest);
            self.lazy = None;
            self.capture(STATUS & !super::insn::AF, STATUS)?;
        }
        let Some(c) = self.pending.take() else {
            return Ok(());
        };
        merge(&mut self.a, c, self.record_live)?;
        if c.clear == STATUS {
            self.record_live = false;
        }
        self.host = HostFlags::Stale;
        Ok(())
    }

    /// At a chained exit: captured flags that replace every status flag (the common end of a
    /// block, `cmp; jcc`) are handed to the next block as a raw flag record
    /// (`lift::flags::RAW_CODE`: the capture in `Frame::fl_res`, its undefined-as-0 flags
    /// cleared) — two stores instead of the merge's ten instructions and read-modify-write
    /// of RFLAGS; the next block folds it only if it reads a flag before writing them all
    /// (as any record). Any other capture (INC/DEC keep CF) is merged ([`Emit::flush`]).
    pub fn hand_over(&mut self) -> Result<(), IcedError> {
        if let Some(size) = self.lazy.take() {
            // A `Logic` record of the result (its flags: CF, OF and AF 0, ZF, SF and PF of
            // the result), two stores instead of the capture's seven instructions.
            use crate::lift::flags::{code_imm, encode, FlagOp};
            self.a.mov(qword_ptr(rsi + Frame::OFF_FL_RES), rax)?;
            let code = code_imm(encode(FlagOp::Logic, size, flags::STATUS));
            self.a.mov(qword_ptr(rsi + Frame::OFF_FL_CODE), code)?;
            self.record_live = false;
            return Ok(());
        }
        let Some(c) = self.pending else {
            return Ok(());
        };
        if c.clear != STATUS {
            return self.flush();
        }
        self.pending = None;
        let keep = raw_layout(c.set);
        if keep != raw_layout(STATUS) {
            self.a.and(r10d, keep as i32)?;
            self.host = HostFlags::Stale;
        }
        self.a.mov(qword_ptr(rsi + Frame::OFF_FL_RES), r10)?;
        let code = crate::lift::flags::code_imm(crate::lift::flags::RAW_CODE);
        self.a.mov(qword_ptr(rsi + Frame::OFF_FL_CODE), code)?;
        self.record_live = false;
        Ok(())
    }

    /// Before an instruction that writes every status flag: captured flags not yet merged
    /// are replaced by its own, so they are dropped (deferring exits before it merged them on
    /// their cold paths).
    pub fn replace_pending(&mut self) {
        self.pending = None;
    }

    /// Before INC/DEC, which keep CF: when the guest's CF is to be had cheaply — the host's
    /// flags are the guest's, or the capture awaiting its merge has CF — make the host's
    /// flags the guest's (restored from that capture if needed). The host instruction then
    /// leaves every status flag the guest's (it keeps the host's CF), so it counts as
    /// replacing them all (the capture is dropped, as before any such instruction) and is
    /// captured whole: no merge of the old capture before it (ten instructions and a
    /// read-modify-write of RFLAGS) and, at a chained exit, a raw record handed over instead
    /// of merging a capture without CF. False, nothing done, otherwise (flags left lazy by a
    /// logic operation are never followed by INC/DEC: see `lazy_ok`).
    pub fn carry_through(&mut self) -> Result<bool, IcedError> {
        let cheap = self.host == HostFlags::Guest || self.pending.is_some_and(|c| c.set & CF != 0);
        if !cheap || self.lazy.is_some() {
            return Ok(false);
        }
        self.flags_for(true)?;
        Ok(true)
    }

    /// The flag state at a branch, for the code of its other side ([`Emit::restore`]).
    pub fn branch_state(&self) -> (Option<Capture>, HostFlags, bool, Option<u8>) {
        (self.pending, self.host, self.record_live, self.lazy)
    }

    pub fn restore(&mut self, s: (Option<Capture>, HostFlags, bool, Option<u8>)) {
        (self.pending, self.host, self.record_live, self.lazy) = s;
    }

    /// Make the host's flags hold the guest's for a condition (reading CF if `carry`): as
    /// they are after the last flag-writing instruction, else restored from the capture
    /// awaiting its merge when it has every flag the condition reads, else reloaded from
    /// RFLAGS.
    pub fn flags_for(&mut self, carry: bool) -> Result<(), IcedError> {
        match self.host {
            HostFlags::Guest => return Ok(()),
            HostFlags::GuestButCarry if !carry => return Ok(()),
            _ => {}
        }
        if let Some(c) = self.pending {
            if c.set & CF != 0 || !carry {
                // The host's own flags as captured: OF from `cmp al, 0x81` (1 - -127
                // overflows, 0 - -127 does not), the rest from AH; RAX and R10 as they were
                // (RAX kept in R11, free between instructions, rather than XCHGs: see
                // `capture_via`).
                self.a.mov(r11, rax)?;
                self.a.mov(rax, r10)?;
                self.a.cmp(al, -127)?;
                self.a.sahf()?;
                self.a.mov(rax, r11)?;
                self.host = if c.set & CF != 0 {
                    HostFlags::Guest
                } else {
                    HostFlags::GuestButCarry
                };
                return Ok(());
            }
        }
        self.flush()?;
        // From RFLAGS: OF (bit 11) as above, the low byte through AH (clobbers RAX).
        rflags_of(&mut self.a, eax)?;
        self.a.cmp(al, -127)?;
        self.a.mov(ah, byte_ptr(rdi + OFF_RFLAGS))?;
        self.a.sahf()?;
        self.host = HostFlags::Guest;
        Ok(())
    }

    /// Guest register `g` got a new value.
    pub fn reg_written(&mut self, g: usize) {
        if self.last.is_some_and(|l| l.g == g) {
            self.last = None;
        }
        self.kept.retain(|l| l.g != g);
    }

    /// Guest register `g` moved by `delta` (PUSH, POP, `add/sub rsp, imm`).
    pub fn reg_moved(&mut self, g: usize, delta: i64) {
        for l in self.last.iter_mut().chain(self.kept.iter_mut()) {
            if l.g == g {
                l.off = l.off.wrapping_sub(delta);
                l.lo = l.lo.wrapping_sub(delta);
                l.hi = l.hi.wrapping_sub(delta);
                l.ok_lo = l.ok_lo.wrapping_sub(delta);
                l.ok_hi = l.ok_hi.wrapping_sub(delta);
                l.moved = l.moved.wrapping_add(delta);
            }
        }
    }

    /// Before R8 and R9 take another access: the hit they hold is kept ([`Emit::kept`]), its
    /// host delta stored in its frame slot when the first pass found a later access that
    /// takes it back.
    fn displace(&mut self) -> Result<(), IcedError> {
        let Some(mut l) = self.last.take() else {
            return Ok(());
        };
        if !l.stored && self.known.get(l.id).is_some_and(|p| p.taken_back) {
            self.a.mov(qword_ptr(rsi + Frame::hit_off(l.slot)), r9)?;
            l.stored = true;
        }
        self.kept.push(l);
        Ok(())
    }

    // ----- memory -----

    /// An access of `size` bytes at guest register `g` plus `disp` (no segment base) through
    /// the read or the `write` table: the linear address into R8 and its page's host delta
    /// into R9 (the host address is `[R9 + R8]`), or the deferring exit. When the last access went through the same table (or the
    /// write table, for a read) at the same register, less than [`REUSE_DELTA`] bytes away,
    /// its TLB hit serves this one if
    /// it is in the same page (nothing on the main path fills or drops TLB entries: a miss
    /// leaves the block; see `lift::group`); in another page the access defers. Clobbers
    /// RCX, R11 and the flags.
    pub fn access_at(
        &mut self,
        g: usize,
        disp: i64,
        write: bool,
        size: u32,
    ) -> Result<(), IcedError> {
        self.access_near(g, disp, write, size, false).map(|_| ())
    }

    /// [`Emit::access_at`], where with `keep_r8` an access through the last access's hit
    /// leaves R8 where it is: the access's host address is then `[R9 + R8 + d]` for the `d`
    /// returned (0 otherwise) — one LEA fewer, for instructions that use the address only
    /// there (`insn::rename`).
    pub fn access_near(
        &mut self,
        g: usize,
        disp: i64,
        write: bool,
        size: u32,
        keep_r8: bool,
    ) -> Result<i32, IcedError> {
        self.host = HostFlags::Stale;
        // A write hit serves a read too: the write table holds only pages the current
        // privilege may write, and x86 has no page that can be written but not read (no
        // read side effects either: MMIO pages are never cached).
        if let Some(l) = self.last.filter(|l| l.serves(g, disp, write, size)) {
            return self.reuse(l, disp, size, keep_r8);
        }
        if let Some(i) = self
            .kept
            .iter()
            .position(|l| l.serves(g, disp, write, size))
        {
            // A kept hit: R8 its last access's address, R9 its host delta from the frame.
            let l = self.kept.remove(i);
            debug_assert!(l.stored || self.known.is_empty(), "a kept hit not stored");
            self.displace()?;
            self.load_reg(r8, g)?;
            if l.off != 0 {
                self.a.lea(r8, qword_ptr(r8 + l.off as i32))?;
            }
            self.a.mov(r9, qword_ptr(rsi + Frame::hit_off(l.slot)))?;
            if let Some(p) = self.found.get_mut(l.id) {
                p.taken_back = true;
            }
            // (The first pass stored no host delta: its code is not kept.)
            self.redo = true;
            return self.reuse(l, disp, size, keep_r8);
        }
        self.displace()?;
        self.load_reg(r8, g)?;
        if disp != 0 {
            self.a.lea(r8, qword_ptr(r8 + disp as i32))?;
        }
        let id = self.found.len();
        let end = disp.wrapping_add(size as i64);
        self.found.push(Probed {
            lo: disp,
            hi: end,
            taken_back: false,
        });
        // The whole span the first pass found, or the access's own bytes.
        let (ok_lo, ok_hi) = match self.known.get(id) {
            Some(&Probed { lo, hi, .. }) if lo <= disp && end <= hi && hi - lo <= MAX_SPAN => {
                (lo, hi)
            }
            _ => (disp, end),
        };
        self.probe_span(write, ok_lo - disp, ok_hi - disp)?;
        let slot = id % Frame::HIT_SLOTS;
        // (The slot is this hit's now.)
        self.kept.retain(|l| l.slot != slot);
        self.last = Some(Last {
            g,
            off: disp,
            write,
            lo: disp,
            hi: end,
            ok_lo,
            ok_hi,
            id,
            moved: 0,
            slot,
            stored: false,
        });
        Ok(0)
    }

    /// An access of `size` bytes at `l`'s register plus `disp` through `l`'s hit, which R8
    /// and R9 hold ([`Last::serves`]): no check inside the span known to be in the page (a
    /// pop of what a push stored, a load of a slot stored to earlier, any access of a span
    /// the probe checked whole), else the page-offset test. R8 moves to the access's
    /// address unless `keep_r8` ([`Emit::access_near`]: the displacement from R8 returned).
    fn reuse(&mut self, l: Last, disp: i64, size: u32, keep_r8: bool) -> Result<i32, IcedError> {
        let delta = disp.wrapping_sub(l.off);
        let end = disp.wrapping_add(size as i64);
        let (lo, hi) = (l.lo.min(disp), l.hi.max(end));
        if !(l.ok_lo <= disp && end <= l.ok_hi) {
            let last = 4096 - size as i64;
            // The last access's page offset plus `delta` must stay in [0, last].
            self.a.mov(ecx, r8d)?;
            self.a.and(ecx, 0xfff)?;
            if delta >= 0 {
                self.a.cmp(ecx, (last - delta) as i32)?;
            } else {
                self.a.add(rcx, delta as i32)?;
                self.a.cmp(rcx, last as i32)?;
            }
            let defer = self.defer_label()?;
            self.a.ja(defer)?;
            self.redo = true;
        }
        let moved = delta != 0 && !keep_r8;
        if moved {
            // (R9, the page's host delta, serves the whole page.)
            self.a.lea(r8, qword_ptr(r8 + delta as i32))?;
        }
        if let Some(p) = self.found.get_mut(l.id) {
            (p.lo, p.hi) = (lo.wrapping_add(l.moved), hi.wrapping_add(l.moved));
        }
        // Both spans are in the page, and so is everything between them. (`off` is where
        // R8 is.)
        self.last = Some(Last {
            off: if moved { disp } else { l.off },
            lo,
            hi,
            ok_lo: l.ok_lo.min(disp),
            ok_hi: l.ok_hi.max(end),
            ..l
        });
        Ok(if moved { 0 } else { delta as i32 })
    }

    /// The linear address of `ins`'s memory operand into R8 (64-bit addressing; an FS or GS
    /// segment prefix adds its base). Clobbers R11 and the flags (captured flags stay in
    /// R10).
    pub fn addr(&mut self, ins: &iced_x86::Instruction) -> Result<(), IcedError> {
        self.displace()?;
        self.addr_into(ins, r8)
    }

    /// [`Emit::addr`] into `dst` (RCX for LEA, which clears the segment prefix first and
    /// leaves R8 and R9 to the last access).
    pub fn addr_into(
        &mut self,
        ins: &iced_x86::Instruction,
        dst: AsmRegister64,
    ) -> Result<(), IcedError> {
        use iced_x86::Register;
        use lockstep_interp::operand::gpr_ref;
        self.host = HostFlags::Stale;
        let disp = ins.memory_displacement64() as i64;
        let base = ins.memory_base();
        let index = ins.memory_index();
        if base == Register::RIP || base == Register::None {
            self.a.mov(dst, disp as u64)?;
        } else {
            let g = gpr_ref(base).map(|g| g.index).unwrap_or(0);
            self.load_reg(dst, g)?;
            if index == Register::None && disp != 0 {
                self.a.lea(dst, qword_ptr(dst + disp as i32))?;
            }
        }
        if index != Register::None {
            let g = gpr_ref(index).map(|g| g.index).unwrap_or(0);
            self.load_reg(r11, g)?;
            let scale = ins.memory_index_scale();
            let d = if base == Register::RIP || base == Register::None {
                0
            } else {
                disp as i32
            };
            self.a.lea(dst, qword_ptr(dst + r11 * scale + d))?;
        }
        match ins.memory_segment() {
            Register::FS => self
                .a
                .add(dst, qword_ptr(rdi + crate::frame::seg_base_off(4)))?,
            Register::GS => self
                .a
                .add(dst, qword_ptr(rdi + crate::frame::seg_base_off(5)))?,
            _ => {}
        }
        Ok(())
    }

    /// The TLB probe for `size` bytes at the linear address in R8 through the read or the
    /// `write` table: the page's host delta into R9 (the entry's `host` field: the host
    /// address is `[R9 + R8]`), or (a miss, a page crossing) the deferring
    /// exit. Clobbers RCX, R11 and the flags; keeps R8 (and R10, captured flags).
    pub fn probe(&mut self, write: bool, size: u32) -> Result<(), IcedError> {
        self.probe_span(write, 0, size as i64)
    }

    /// [`Emit::probe`] of the bytes from `R8 + a` to `R8 + b` (`a <= 0 < b`, at most
    /// [`MAX_SPAN`] of them): all in the page whose host delta goes into R9, or the deferring
    /// exit. The entry is the one of the first byte's page, its tag compared with the last
    /// byte's page: the two pages are at most one apart and a page's entry is the one its low
    /// bits pick, so a hit means one page.
    fn probe_span(&mut self, write: bool, a: i64, b: i64) -> Result<(), IcedError> {
        debug_assert!(a <= 0 && 0 < b && b - a <= MAX_SPAN);
        self.host = HostFlags::Stale;
        let table = if write {
            Frame::OFF_TLB_WRITE
        } else {
            Frame::OFF_TLB_READ
        };
        let shift = 12 - TLB_ENTRY_BYTES.trailing_zeros();
        // (The entry's offset needs the first byte's bits 12–24 only: 32-bit arithmetic.
        // With BMI2 one RORX moves them down; the bits it rotates in at the top are masked
        // off.)
        let first32 = if a == 0 {
            r8d
        } else {
            self.a.lea(r11, qword_ptr(r8 + a as i32))?;
            r11d
        };
        if host_bmi2() {
            self.a.rorx(ecx, first32, shift)?;
        } else {
            self.a.mov(ecx, first32)?;
            self.a.shr(ecx, shift)?;
        }
        self.a
            .and(ecx, ((TLB_ENTRIES as u64 - 1) * TLB_ENTRY_BYTES) as u32)?;
        self.a.add(rcx, qword_ptr(rsi + table))?;
        self.a.lea(r11, qword_ptr(r8 + (b as i32 - 1)))?;
        self.a.shr(r11, 12)?;
        self.a.cmp(qword_ptr(rcx), r11)?;
        let defer = self.defer_label()?;
        self.a.jne(defer)?;
        self.a.mov(r9, qword_ptr(rcx + 8))
    }

    /// A cold exit that leaves before the current instruction with `STOP | DEFER` (the
    /// interpreter runs it): registers are in memory, captured flags awaiting their merge
    /// (in R10) are merged into RFLAGS there, RIP and the count are in the exit word.
    pub fn defer_label(&mut self) -> Result<CodeLabel, IcedError> {
        self.leave_label(ret::STOP | ret::DEFER)
    }

    /// A cold exit that leaves before the current instruction with `status` in its exit word
    /// ([`Emit::defer_label`]'s, or `DISPATCH`): flags and MXCSR merged as there.
    fn leave_label(&mut self, status: u64) -> Result<CodeLabel, IcedError> {
        self.leave_at(status, self.ip, self.k)
    }

    /// A cold exit with `status` at `ip`, `k` instructions into the function: captured flags
    /// and MXCSR merged as at [`Emit::defer_label`]'s.
    fn leave_at(&mut self, status: u64, ip: u64, k: u64) -> Result<CodeLabel, IcedError> {
        debug_assert!(
            self.lazy.is_none(),
            "lazy flags reach only the last Jcc's exits"
        );
        let mut l = self.a.create_label();
        let (pending, record_live, mx) = (self.pending, self.record_live, self.mx);
        match ret::pack(status, ip, k) {
            // Something to merge first: the exit word into RCX and on to the tail that merges
            // it, shared by every such exit of the function with the same merge (a dozen
            // instructions each otherwise; most memory accesses have a cold exit).
            Some(w) if pending.is_some() || mx => {
                let tail = self.shared_tail((pending, record_live, mx));
                self.later(move |a| {
                    a.set_label(&mut l)?;
                    a.mov(rcx, w)?;
                    a.jmp(tail)
                });
            }
            _ => self.later(move |a| {
                a.set_label(&mut l)?;
                merges(a, (pending, record_live, mx))?;
                exit_word(a, status, ip, k)
            }),
        }
        Ok(l)
    }

    /// The label of the cold code that makes the merges `key` asks for (the capture in R10
    /// with the incoming record live or not, the host's MXCSR flags) and returns the exit
    /// word in RCX; queued on first use. (The merges touch R10, R11 and RAX only.)
    fn shared_tail(&mut self, key: TailKey) -> CodeLabel {
        if let Some(&(_, l)) = self.tails.iter().find(|(k, _)| *k == key) {
            return l;
        }
        let mut l = self.a.create_label();
        self.tails.push((key, l));
        self.later(move |a| {
            a.set_label(&mut l)?;
            merges(a, key)?;
            a.mov(rax, rcx)?;
            a.ret()
        });
        l
    }

    /// Going on from one block of a trace (see `base::compile`) to the next, whose first
    /// instruction is the current one and which ends `upto` instructions into the function.
    /// No budget check: the entry checked the whole trace's (`BaseCode::len`; until session
    /// 38 each block checked its own here). Captured flags stay pending across (the exit
    /// merges them).
    ///
    /// `flags_kept`: the block before ended in a Jcc or a JMP, whose way on emits nothing
    /// that touches the host's flags (no guard: only an indirect CALL's target gets one), so
    /// what they hold stays known — `cmp; je …; jg …` reads the second condition straight
    /// from them rather than restoring them from the capture.
    pub fn next_part(&mut self, upto: u64, flags_kept: bool) {
        // R8/R9's last access is forgotten: one probe per block keeps the reasoning local.
        self.last = None;
        self.kept.clear();
        self.len = upto;
        if !flags_kept {
            self.host = HostFlags::Stale;
        }
    }

    // ----- exits -----

    /// The block's end, to the constant `target` after all its instructions: back to the top
    /// of a loop through the function's start (see [`Emit::loop_top`]) when the incoming
    /// flag record is gone, else a chained exit.
    pub fn exit_const(&mut self, target: u64) -> Result<(), IcedError> {
        if let Some((rip, top, round_len, mx_at_top)) = self.loop_top {
            // A round starts with RFLAGS whole and no incoming record: the capture is merged
            // (which drops the record when it replaces every status flag).
            let full = self.pending.is_some_and(|c| c.clear == STATUS);
            if rip == target && (!self.record_live || full) && (mx_at_top || !self.mx) {
                self.flush()?;
                return self.loop_back(rip, top, round_len);
            }
        }
        self.hand_over()?;
        self.merge_mxcsr()?;
        self.count()?;
        let entered = if target >> 12 == self.vpn {
            self.own
        } else {
            0
        };
        let link = self.link_for(target);
        if let (Some(link), true) = (link, self.patch) {
            // The patchable jump: to the code after it (the jump through the link) until
            // the compiler points it at the target's fast entry (`patch::Patches::scan`),
            // which checks the budget itself; R9 holds the count, as the link jump wants.
            let mut site = self.a.create_label();
            let mut through_link = self.a.create_label();
            self.a.set_label(&mut site)?;
            self.a.jmp(through_link)?;
            self.sites.push((self.last_label(), link, entered));
            self.a.set_label(&mut through_link)?;
        }
        self.a.mov(rcx, target)?;
        self.a.mov(rdx, entered)?;
        match link {
            Some(link) => {
                self.a.mov(r8, link)?;
                self.linked_jump(false)
            }
            None => {
                self.a.mov(r8, chain::set_addr(self.chain_table, target))?;
                self.a.mov(rax, self.hop)?;
                self.a.jmp(rax)
            }
        }
    }

    /// The jump back to the top of a loop through the function's start (flags merged): the
    /// count moves on by the instructions of the round (`len`: the trace's blocks so far),
    /// and the next round runs when the budget covers the whole trace (`retired + round_len
    /// <= region_end`, `round_len` being `BaseCode::len`, as an entry checks it), else the
    /// dispatcher takes over at the start. The host's MXCSR keeps collecting the loop's
    /// flags (the exits merge them).
    fn loop_back(&mut self, rip: u64, top: CodeLabel, round_len: u64) -> Result<(), IcedError> {
        self.count()?;
        if let Some(counter) = self.counter {
            // Rounds count down the run counter too (a loop entered once runs them all
            // here): at zero, to the dispatcher for the promotion, at the loop's start.
            self.a.mov(rax, counter)?;
            self.a.sub(dword_ptr(rax), 1)?;
            let promote = self.leave_at(ret::PROMOTE, rip, 0)?;
            self.a.je(promote)?;
        }
        self.a.add(r9, round_len as i32)?;
        self.a.cmp(r9, qword_ptr(rsi + Frame::OFF_REGION_END))?;
        // (The count is already moved on: the next round starts from nothing.)
        let out = self.leave_at(ret::DISPATCH, rip, 0)?;
        self.a.ja(out)?;
        self.a.jmp(top)
    }

    /// The jump through the link at R8 made here rather than in the shared link stub (an
    /// empty link jumps to the fill stub; an indirect exit whose link holds another target
    /// makes the table lookup here): see `lift::hop::own_linked_jump`.
    fn linked_jump(&mut self, check_rip: bool) -> Result<(), IcedError> {
        let mut slow = check_rip.then(|| self.a.create_label());
        let mut back = self.a.create_label();
        let count = self.count_chains;
        crate::lift::hop::own_linked_jump(&mut self.a, slow, back, count)?;
        self.later(move |a| {
            crate::lift::hop::own_linked_jump_ends(a, slow.as_mut(), &mut back, count)
        });
        Ok(())
    }

    /// The block's end, to the target in RCX (canonical) after all its instructions.
    pub fn exit_dyn(&mut self) -> Result<(), IcedError> {
        self.hand_over()?;
        self.merge_mxcsr()?;
        self.count()?;
        // `entered`: the own check word when the target is on this block's page.
        self.a.mov(rax, rcx)?;
        self.a.shr(rax, 12)?;
        self.a.xor(edx, edx)?;
        cmp_const(&mut self.a, rax, self.vpn)?;
        self.a.mov(r11, self.own)?;
        self.a.cmove(rdx, r11)?;
        let link = if self.dyn_links {
            self.link_for(chain::DYN)
        } else {
            None
        };
        match link {
            Some(link) => {
                self.a.mov(r8, link)?;
                return self.linked_jump(true);
            }
            None => {
                self.a.mov(r8, chain::HASH_MUL)?;
                self.a.imul_2(r8, rcx)?;
                self.a.shr(r8, chain::HASH_SHIFT)?;
                self.a.shl(r8, chain::SET_BYTES.trailing_zeros())?;
                self.a.mov(r11, self.chain_table)?;
                self.a.add(r8, r11)?;
                self.a.mov(rax, self.hop)?;
            }
        }
        self.a.jmp(rax)
    }

    /// At a chained exit after a floating-point instruction: the host's MXCSR flags into the
    /// guest's (keeps RCX, the dynamic target).
    fn merge_mxcsr(&mut self) -> Result<(), IcedError> {
        if self.mx {
            super::simd::merge_mxcsr(&mut self.a)?;
            self.host = HostFlags::Stale;
        }
        Ok(())
    }

    /// `cpu.retired += len`, the new count in R9 (the hop stubs' `retired`).
    fn count(&mut self) -> Result<(), IcedError> {
        // (An add to memory and a load: one instruction fewer than load, add, store.)
        self.a
            .add(qword_ptr(rdi + Frame::STATE_TO_RETIRED), self.len as i32)?;
        self.a.mov(r9, qword_ptr(rdi + Frame::STATE_TO_RETIRED))?;
        self.host = HostFlags::Stale;
        Ok(())
    }

    /// The address of the link for an exit to `t` (shared by direct exits to one target), or
    /// `None` when the link table has none left.
    fn link_for(&mut self, t: u64) -> Option<u64> {
        chain::link_for(self.links, &mut self.new_links, t)
    }
}

/// `cmp r, value`: against an immediate when `value` is a sign-extended 32-bit one (a RIP or
/// page number of the low 2 GiB), else through R11 (clobbered then).
pub(super) fn cmp_const(
    a: &mut CodeAssembler,
    r: AsmRegister64,
    value: u64,
) -> Result<(), IcedError> {
    match i32::try_from(value as i64) {
        Ok(imm) => a.cmp(r, imm),
        Err(_) => {
            a.mov(r11, value)?;
            a.cmp(r, r11)
        }
    }
}

/// The guest's OF (RFLAGS bit 11) into `r` as 0 or 1 (clobbers the host's flags).
fn rflags_of(a: &mut CodeAssembler, r: AsmRegister32) -> Result<(), IcedError> {
    a.movzx(r, byte_ptr(rdi + OFF_RFLAGS + 1))?;
    a.shr(r, 3)?;
    a.and(r, 1)
}

/// RFLAGS' status into R10 in a capture's raw layout ([`Capture`]): the guest's flags as they
/// are (clobbers R11 and the host's flags).
pub fn rflags_as_capture(a: &mut CodeAssembler) -> Result<(), IcedError> {
    rflags_of(a, r10d)?;
    a.movzx(r11d, byte_ptr(rdi + OFF_RFLAGS))?;
    a.shl(r11d, 8)?;
    a.or(r10d, r11d)
}

/// The capture in R10 ([`Capture`]) put in RFLAGS' layout: the low byte from bits 8–15, OF
/// from bit 0 (clobbers R11 and the host's flags).
fn from_raw(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.mov(r11d, r10d)?;
    a.shr(r10d, 8)?;
    a.and(r11d, 1)?;
    a.shl(r11d, 11)?;
    a.or(r10d, r11d)
}

/// The bits of a capture's raw layout ([`Capture`]) that hold the RFLAGS bits `f` (the
/// inverse of `lift::flags::raw_status`, by which the record's readers convert back).
fn raw_layout(f: u32) -> u32 {
    (f & 0xff) << 8 | (f >> 11) & 1
}

/// A raw flag record's capture (`lift::flags::RAW_CODE`), loaded into R10, merged as a
/// capture of every status flag (see [`merge`]; the record dropped).
pub(super) fn merge_raw_record(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.mov(r10, qword_ptr(rsi + Frame::OFF_FL_RES))?;
    let all = Capture {
        set: STATUS,
        clear: STATUS,
    };
    merge(a, all, true)
}

/// The host's flags into R10 in the raw layout ([`Capture`]) by LAHF and SETO into RAX.
/// Clobbers RAX.
fn raw_capture_through_rax(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.lahf()?;
    a.seto(al)?;
    a.movzx(r10d, ax)
}

/// A `Logic` record of `size` bytes (4 or 8; [`Emit::hand_over`]'s lazy flags) merged: the
/// host's flags of a TEST of its result, captured (AF 0, as the record has it) and merged
/// as [`merge_raw_record`] merges a raw one (the record dropped). Clobbers RAX.
pub(super) fn merge_logic_record(a: &mut CodeAssembler, size: u8) -> Result<(), IcedError> {
    if size == 8 {
        a.mov(rax, qword_ptr(rsi + Frame::OFF_FL_RES))?;
        a.test(rax, rax)?;
    } else {
        a.mov(eax, dword_ptr(rsi + Frame::OFF_FL_RES))?;
        a.test(eax, eax)?;
    }
    raw_capture_through_rax(a)?;
    let logic = Capture {
        set: STATUS & !super::insn::AF,
        clear: STATUS,
    };
    merge(a, logic, true)
}

/// The merges a cold exit makes before its exit word (`key` as in [`Emit::shared_tail`]): the
/// pending capture into the flags (with the incoming record live or not), then the host's
/// MXCSR flags into the guest's.
fn merges(a: &mut CodeAssembler, (pending, record_live, mx): TailKey) -> Result<(), IcedError> {
    if let Some(c) = pending {
        merge(a, c, record_live)?;
    }
    if mx {
        super::simd::merge_mxcsr(a)?;
    }
    Ok(())
}

/// Merge the flags captured in R10 into RFLAGS: `set` taken from them, the rest of `clear`
/// cleared; when they replace every status flag and an incoming flag record may still be in
/// the frame (`record_live`), the record is dropped. Clobbers R10, R11 and the host's flags.
fn merge(a: &mut CodeAssembler, c: Capture, record_live: bool) -> Result<(), IcedError> {
    let Capture { set, clear } = c;
    from_raw(a)?;
    a.and(r10d, set)?;
    a.mov(r11, qword_ptr(rdi + OFF_RFLAGS))?;
    a.and(r11, !(clear as i32))?;
    a.or(r11, r10)?;
    a.mov(qword_ptr(rdi + OFF_RFLAGS), r11)?;
    if record_live && clear == STATUS {
        // Every status flag is this block's now: the incoming record is dead.
        a.mov(qword_ptr(rsi + Frame::OFF_FL_CODE), 0)?;
    }
    Ok(())
}

/// Return the exit word for `status` that sets RIP to `ip` and adds `k` to the count (stored
/// first when it does not fit a packed word).
pub(super) fn exit_word(
    a: &mut CodeAssembler,
    status: u64,
    ip: u64,
    k: u64,
) -> Result<(), IcedError> {
    match ret::pack(status, ip, k) {
        Some(w) => a.mov(rax, w)?,
        None => {
            a.mov(rax, ip)?;
            a.mov(qword_ptr(rdi + OFF_RIP), rax)?;
            a.add(qword_ptr(rdi + Frame::STATE_TO_RETIRED), k as i32)?;
            a.mov(eax, status as u32)?;
        }
    }
    a.ret()
}

/// Does this host have BMI2 (RORX, for the TLB probe)?
fn host_bmi2() -> bool {
    static HOST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| std::arch::is_x86_feature_detected!("bmi2"))
}
