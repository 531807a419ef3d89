//! Page groups: accesses of one guest block that share an address expression (the same base
//! and index values, different displacements) reuse the first access's TLB hit instead of
//! probing the TLB again.
//!
//! The first access of a group probes as usual; on its fast path it records the page offset
//! of its address and its host address in two variables. A later access of the group, `delta`
//! bytes away, is in the same page exactly when `offset + delta` stays within the page, and
//! then its host address is the recorded one plus `delta`: one add, one compare, no table
//! load. Otherwise (another page, or a recorded offset that is not valid) it leaves the
//! block like any access that misses its fast path (see `super::mem`) — or, at least
//! [`PROBE_DELTA`] bytes away, probes the TLB first in a cold block.
//!
//! Why a hit stays a hit: between two accesses of a group nothing on the main path fills or
//! drops TLB entries. A memory access that misses never continues on the main path (it
//! leaves the block for the interpreter), and an instruction run through the trampoline,
//! which may do anything to the TLB, sets the offset of every group to [`INVALID`]. So the
//! interpreter, running the same instructions, would hit the same entry for every access
//! the group serves: same translation, same accessed and dirty bits, same TLB contents
//! afterwards.
//!
//! Keys are register versions (a number that changes whenever the lowering gives a GPR
//! variable a new value), so a group lasts while its base and index registers keep their
//! values; updates by a constant (PUSH, POP, CALL, RET, `add/sub reg, imm`) are followed
//! through [`Lower::derive`], so a function's prologue and its frame accesses share one group.
//!
//! In a region, a member whose every edge (all lowered before it, none a run-time target)
//! hands over the same group — same key, same variables — starts with it ([`Inherited`]):
//! its accesses through that base join it instead of probing. Such a group's record may not
//! be valid on every path in (an edge lowered later that lacks it sets its offset to
//! [`INVALID`]), so its members outside the recorded page probe the TLB in a cold block, as a
//! carried group's do, and the first one becomes the record.

use super::Lower;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, Value};
use cranelift_frontend::Variable;

/// What an address is apart from its displacement: the root version of its base register
/// (see [`Lower::derive`]) and its index register's version with the scale.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AddrKey {
    /// The base register (16: none, or RIP), for [`later_bases`].
    pub reg: u8,
    pub base: Option<u32>,
    pub index: Option<(u32, u8)>,
}

/// An offset no access of a group can start at: marks the group's record as not valid.
/// Negative, so that both kinds of member check fail for it: the upper-bound check compares
/// unsigned, the lower-bound one signed (see [`Lower::group_member`]).
pub const INVALID: i64 = -(1 << 20);

/// Largest displacement difference served by a group (farther is never in the same page).
const MAX_DELTA: i64 = 4095;

/// A member at least this far from its group's first access probes the TLB itself when it
/// is outside the recorded page, instead of leaving the block (see `Lower::fast_path`).
pub const PROBE_DELTA: i64 = 512;

/// Groups kept per block and table: an older one is forgotten for a new one.
const MAX_GROUPS: usize = 4;

/// For each instruction of `insns`: the base registers (bit 16: none or RIP) of the memory
/// operands of the instructions after it, RSP for a stack access, and `after` (those of the
/// blocks a region goes on to, which an edge may hand the block's groups: [`Inherited`]). An
/// access starts a group only when a later one may join it.
pub fn later_bases(insns: &[lockstep_interp::decode::DecodedInsn], after: u32) -> Vec<u32> {
    let mut out = vec![0u32; insns.len()];
    let mut acc = after;
    for (i, d) in insns.iter().enumerate().rev() {
        out[i] = acc;
        acc |= bases(&d.ins);
    }
    out
}

/// The base registers `insns` access memory through, as [`later_bases`] counts them.
pub fn block_bases(insns: &[lockstep_interp::decode::DecodedInsn]) -> u32 {
    insns.iter().fold(0, |a, d| a | bases(&d.ins))
}

/// The base register of `ins`'s memory operand (bit 16: none or RIP), and RSP for a stack
/// access.
fn bases(ins: &iced_x86::Instruction) -> u32 {
    use iced_x86::{OpKind, Register};
    let mut acc = 0;
    if ins.stack_pointer_increment() != 0 {
        acc |= 1 << lockstep_interp::state::reg::RSP;
    }
    if (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory) {
        acc |= match lockstep_interp::operand::gpr_ref(ins.memory_base()) {
            Some(g) if ins.memory_base() != Register::None => 1 << g.index,
            _ => 1 << 16,
        };
    }
    acc
}

/// Per instruction of `insns`: the GPRs it writes (full registers, as bits `1 << index`)
/// and whether it writes memory (for [`stores_back`] and [`carried_bases`]).
fn effects(insns: &[lockstep_interp::decode::DecodedInsn]) -> Vec<(u32, bool)> {
    use iced_x86::OpAccess;
    let mut info = iced_x86::InstructionInfoFactory::new();
    insns
        .iter()
        .map(|d| {
            let i = info.info(&d.ins);
            let regs = i
                .used_registers()
                .iter()
                .filter(|r| !matches!(r.access(), OpAccess::Read | OpAccess::CondRead))
                .filter_map(|r| lockstep_interp::operand::gpr_ref(r.register().full_register()))
                .fold(0u32, |m, g| m | 1 << g.index);
            let stores = i.used_memory().iter().any(|m| {
                matches!(
                    m.access(),
                    OpAccess::Write
                        | OpAccess::CondWrite
                        | OpAccess::ReadWrite
                        | OpAccess::ReadCondWrite
                )
            });
            (regs, stores)
        })
        .collect()
}

/// How far `ins` moves 64-bit GPR `reg` when it is `add/sub reg, imm` (what
/// [`Lower::derive`] follows); `None` for any other instruction.
fn constant_step(ins: &iced_x86::Instruction, reg: usize) -> Option<i64> {
    use iced_x86::{Mnemonic, OpKind};
    let r = ins.op0_register();
    let ours = ins.op0_kind() == OpKind::Register
        && r.is_gpr64()
        && lockstep_interp::operand::gpr_ref(r).is_some_and(|g| g.index == reg)
        && matches!(
            ins.op1_kind(),
            OpKind::Immediate8to64 | OpKind::Immediate32to64
        );
    match ins.mnemonic() {
        Mnemonic::Add if ours => Some(ins.immediate(1) as i64),
        Mnemonic::Sub if ours => Some((ins.immediate(1) as i64).wrapping_neg()),
        _ => None,
    }
}

/// For each instruction of `insns`: whether it is a load (a GPR destination, a memory
/// source) of bytes that a later instruction of the block stores to, through the same
/// address expression — the same base and index registers, the base moved only by `add/sub
/// reg64, imm` in between (what [`Lower::derive`] follows), a displacement that makes up for
/// it, and no more bytes than the load read (`mov ecx,[rsi]; add rsi,4; … mov [rsi-4],eax`).
/// A block runs straight through unless it leaves early, so such a load is followed by the
/// store whenever it completes: it may start a write group and leave the block when the
/// write TLB misses (see `Lower::load_through_write`), since the store would miss as well.
pub fn stores_back(insns: &[lockstep_interp::decode::DecodedInsn]) -> Vec<bool> {
    use iced_x86::{Mnemonic, OpKind, Register};
    let effects = effects(insns);
    let bit = |r: Register| {
        lockstep_interp::operand::gpr_ref(r)
            .filter(|_| r != Register::None)
            .map_or(0, |g| 1u32 << g.index)
    };
    let explicit_mem = |ins: &iced_x86::Instruction| {
        (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory)
            && ins.stack_pointer_increment() == 0
            && !matches!(ins.memory_segment(), Register::FS | Register::GS)
    };
    let mut out = vec![false; insns.len()];
    for (i, d) in insns.iter().enumerate() {
        let ins = &d.ins;
        let load = matches!(
            ins.mnemonic(),
            Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsx | Mnemonic::Movsxd
        ) && ins.op0_kind() == OpKind::Register
            && ins.op1_kind() == OpKind::Memory
            && explicit_mem(ins)
            && !effects[i].1;
        if !load {
            continue;
        }
        let (base, index) = (ins.memory_base(), ins.memory_index());
        let (b, x) = (bit(base), bit(index));
        if effects[i].0 & (b | x) != 0 {
            continue;
        }
        let size = ins.memory_size().size();
        let disp = ins.memory_displacement64() as i64;
        let mut moved = 0i64;
        for (j, e) in insns.iter().enumerate().skip(i + 1) {
            let s = &e.ins;
            if effects[j].1
                && explicit_mem(s)
                && s.memory_base() == base
                && s.memory_index() == index
                && s.memory_index_scale() == ins.memory_index_scale()
                && s.memory_segment() == ins.memory_segment()
                && (s.memory_displacement64() as i64).wrapping_add(moved) == disp
                && s.memory_size().size() <= size
            {
                out[i] = true;
                break;
            }
            let written = effects[j].0;
            if written & x != 0 {
                break;
            }
            if written & b != 0 {
                match lockstep_interp::operand::gpr_ref(base)
                    .filter(|_| base.is_gpr64())
                    .and_then(|g| constant_step(s, g.index))
                {
                    Some(step) => moved = moved.wrapping_add(step),
                    None => break,
                }
            }
        }
    }
    out
}

/// Whether page groups are carried across a one-block loop's runs (`LOCKSTEP_JIT_CARRY=0`
/// turns it off, for measurements; read once).
pub fn carry_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOCKSTEP_JIT_CARRY").is_none_or(|v| v != "0"))
}

/// A page group carried from one run of a block that jumps to its own start into the next
/// (see [`carried_bases`] and `Lower::carry_into`): its base register, the displacement its
/// record has at the next run's start (in terms of the register's value then), its table,
/// and its two variables, shared by every run.
#[derive(Clone, Copy, Debug)]
pub struct Carry {
    pub reg: u8,
    /// For an indexed access (`[base + reg * scale + disp]`, `reg` the register that steps):
    /// the base register, which the block does not write, and the scale.
    pub fixed: Option<(u8, u8)>,
    pub seed: i64,
    pub write: bool,
    pub off: Variable,
    pub host: Variable,
}

/// A page group [`carried_bases`] found: the register that steps (by `add/sub reg64, imm`
/// only), the fixed base and scale when it is an index, the seed displacement (see [`Carry`]),
/// and whether any of its accesses writes memory.
pub type CarriedBase = (u8, Option<(u8, u8)>, i64, bool);

/// An address expression of [`carried_bases`]: the stepping register, and the fixed base and
/// scale when it is an index.
type Expr = (u8, Option<(u8, u8)>);

/// For a block that jumps to its own start (a loop of one block): the address expressions it
/// accesses memory through that move by a constant from one run to the next — a base
/// register (not RSP) with no index, changed only by `add/sub reg64, imm`; or a base register
/// the block does not write plus such an index register times its scale — with the
/// displacement of the last such access in terms of the stepping register's value at the
/// next run's start (the access's displacement minus the run's net step, times the scale)
/// and whether any of them writes memory. A group of that expression then carries its record
/// into the next run: bignum's `mov ecx,[rsi]; add rsi,4; … mov [rsi-4],eax; … jne` finds
/// the next element 4 bytes after the last one's record, `_IO_default_xsputn`'s `movzx edx,
/// byte [r12+rax]; mov [rdi+rax],dl; add rax,1; … jne` the next byte one after, and each
/// probes the TLB only when it leaves the page. A guess: `Lower::carry_into` checks at the
/// jump back that the record is where the next run expects it, and marks it not valid
/// otherwise.
pub fn carried_bases(insns: &[lockstep_interp::decode::DecodedInsn]) -> Vec<CarriedBase> {
    use iced_x86::{Mnemonic, OpKind, Register};
    const RSP: usize = lockstep_interp::state::reg::RSP;
    let effects = effects(insns);
    let written = effects.iter().fold(0u32, |m, e| m | e.0);
    // Per register: still a candidate, its net step so far.
    let mut ok = [true; 16];
    ok[RSP] = false;
    let mut moved = [0i64; 16];
    // Per expression (stepping register, fixed base and scale): the last access's
    // displacement (in terms of the stepping register's value at the run's start, in bytes)
    // and whether one of its accesses writes.
    let mut last: Vec<(Expr, i64, bool)> = Vec::new();
    for (d, &(regs, stores)) in insns.iter().zip(&effects) {
        let ins = &d.ins;
        let mem = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory)
            && !matches!(ins.mnemonic(), Mnemonic::Lea | Mnemonic::Invlpg)
            && !lockstep_interp::ops::mov::runs_as_nop(ins.mnemonic());
        let (base, index) = (ins.memory_base(), ins.memory_index());
        let gpr = |r: Register| {
            r.is_gpr64()
                .then(|| lockstep_interp::operand::gpr_ref(r))
                .flatten()
                .map(|g| g.index)
        };
        let expr = match (gpr(base), index) {
            _ if !mem || matches!(ins.memory_segment(), Register::FS | Register::GS) => None,
            (Some(b), Register::None) => Some((b, None, 1i64)),
            (Some(b), i) => gpr(i).filter(|_| written & (1 << b) == 0).map(|x| {
                (
                    x,
                    Some((b as u8, ins.memory_index_scale() as u8)),
                    ins.memory_index_scale() as i64,
                )
            }),
            _ => None,
        };
        if let Some((r, fixed, scale)) = expr {
            let disp =
                (ins.memory_displacement64() as i64).wrapping_add(moved[r].wrapping_mul(scale));
            let key = (r as u8, fixed);
            match last.iter_mut().find(|e| e.0 == key) {
                Some(e) => {
                    e.1 = disp;
                    e.2 |= stores;
                }
                None => last.push((key, disp, stores)),
            }
        }
        for r in 0..16 {
            if regs & (1 << r) != 0 && ok[r] {
                match constant_step(ins, r) {
                    Some(step) => moved[r] = moved[r].wrapping_add(step),
                    None => ok[r] = false,
                }
            }
        }
    }
    last.into_iter()
        .filter(|((r, _), _, _)| ok[*r as usize])
        .map(|((r, fixed), disp, writes)| {
            let scale = fixed.map_or(1, |f| f.1 as i64);
            (
                r,
                fixed,
                disp.wrapping_sub(moved[r as usize].wrapping_mul(scale)),
                writes,
            )
        })
        .collect()
}

/// One group: its key and table, the displacement of its first access, and the variables
/// holding that access's page offset ([`INVALID`] after a trampolined instruction) and host
/// address.
#[derive(Clone, Copy, Debug)]
pub struct Group {
    key: AddrKey,
    write: bool,
    disp: i64,
    off: Variable,
    host: Variable,
    /// The first access's size, and whether no trampolined instruction has run since it
    /// (see [`Lower::group_covers`]).
    size: u8,
    clean: bool,
    /// A carried group ([`Carry`]): its base register's version at the run's start and the
    /// seed displacement it started with.
    carried: Option<(u32, i64)>,
    /// Handed over by a region edge ([`Inherited`]): its record may not be valid on every
    /// path into the member, so a member outside the recorded page probes the TLB rather
    /// than leave, and becomes the record, as for a carried group.
    inherited: bool,
}

impl Group {
    /// The same group: same key, table, displacement and first-access size, in the same
    /// variables.
    fn same(&self, o: &Group) -> bool {
        self.key == o.key
            && self.write == o.write
            && self.disp == o.disp
            && self.size == o.size
            && self.off == o.off
            && self.host == o.host
    }
}

/// Page groups and the register versions their keys name: those a region member starts
/// with, or those an edge into a member not yet lowered hands over (see
/// [`Lower::jump_to_member`] and [`Lower::settle_inherited`]).
#[derive(Clone, Debug)]
pub struct Inherited {
    groups: Vec<Group>,
    versions: [u32; 16],
}

/// Whether groups are handed across region edges (`LOCKSTEP_JIT_INHERIT=0` turns it off,
/// for measurements).
fn inherit_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOCKSTEP_JIT_INHERIT").is_none_or(|v| v != "0"))
}

/// How an access relates to the groups: it starts group `i`, is a member of group `i`
/// (`delta` bytes from its first access), or neither.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    None,
    First(usize),
    Member(usize, i64),
}

impl Lower<'_> {
    /// The current version of GPR `i` (of the value `Lower::gpr` returns now).
    pub fn gpr_version(&self, i: usize) -> u32 {
        self.versions[i]
    }

    /// Variable `i` gets a new value: give it a new version (GPRs only; RFLAGS, variable 16,
    /// is never an address).
    pub(super) fn new_version(&mut self, i: usize) {
        if let Some(v) = self.versions.get_mut(i) {
            self.next_version = self.next_version.wrapping_add(1);
            *v = self.next_version;
        }
    }

    /// Record that GPR `i`'s current value is the value it had at version `from`, plus
    /// `delta`, so that addresses based on either share groups.
    pub fn derive(&mut self, i: usize, from: u32, delta: i64) {
        let (root, off) = self.root(from);
        if self.derived.len() >= 64 {
            self.derived.remove(0);
        }
        self.derived
            .push((self.versions[i], root, off.wrapping_add(delta)));
    }

    /// The version `v` was derived from by constant steps, and the sum of the steps.
    pub fn root(&self, v: u32) -> (u32, i64) {
        self.derived
            .iter()
            .rev()
            .find(|d| d.0 == v)
            .map_or((v, 0), |d| (d.1, d.2))
    }

    /// Forget every group and derivation (at a block start, and after an instruction that
    /// ran in the interpreter, which may have done anything to the TLB).
    pub fn end_groups(&mut self) {
        self.groups.clear();
        self.derived.clear();
    }

    /// The role of an access at `key` + `disp` to the read (`write` false) or write table.
    pub(super) fn group_role(
        &mut self,
        key: Option<(AddrKey, i64)>,
        write: bool,
        size: u8,
    ) -> Role {
        let Some((key, disp)) = key else {
            return Role::None;
        };
        if let Some((i, delta)) = self.group_find(key, disp, write) {
            return Role::Member(i, delta);
        }
        if self.later_bases & (1 << key.reg) == 0 {
            // No later instruction of the block addresses through this register.
            return Role::None;
        }
        if self.groups.iter().filter(|g| g.write == write).count() >= MAX_GROUPS {
            let oldest = self.groups.iter().position(|g| g.write == write);
            self.groups.remove(oldest.expect("a group of this table"));
        }
        let off = self.b.declare_var(types::I64);
        let host = self.b.declare_var(types::I64);
        self.groups.push(Group {
            key,
            write,
            disp,
            off,
            host,
            size,
            clean: true,
            carried: None,
            inherited: false,
        });
        Role::First(self.groups.len() - 1)
    }

    /// The group of the read (`write` false) or write table that an access at `key` + `disp`
    /// is a member of, and its distance from the group's first access.
    pub(super) fn group_find(&self, key: AddrKey, disp: i64, write: bool) -> Option<(usize, i64)> {
        // (`unsigned_abs`: two absolute addresses — `mov al, [moffs64]` — can be 2^63 apart,
        // whose signed distance has no absolute value; `abs` wrapped it to a negative "near"
        // delta in release builds, and a member at the group's host address minus 2^63.)
        let i = self.groups.iter().position(|g| {
            g.key == key
                && g.write == write
                && disp.wrapping_sub(g.disp).unsigned_abs() <= MAX_DELTA as u64
        })?;
        Some((i, disp.wrapping_sub(self.groups[i].disp)))
    }

    /// On the fast path of group `i`'s first access: record its address `lin` and host
    /// address.
    pub(super) fn group_record(&mut self, i: usize, lin: Value, host: Value) {
        let g = self.groups[i];
        let off = self.b.ins().band_imm_s(lin, 0xfff);
        self.b.def_var(g.off, off);
        self.b.def_var(g.host, host);
    }

    /// Whether a member `delta` bytes from group `i`'s first access, of `size` bytes, is in
    /// the recorded page (and the record valid).
    pub(super) fn group_member(&mut self, i: usize, delta: i64, size: u8) -> Value {
        let g = self.groups[i];
        let off = self.b.use_var(g.off);
        let last = 4096 - size as i64;
        if delta >= 0 {
            // offset + delta <= last, as offset <= last - delta (unsigned: offset is never
            // negative, and INVALID, negative, is above every bound).
            return self
                .b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, off, last - delta);
        }
        if delta <= g.size as i64 - size as i64 {
            // Below the record and ending no later than the recorded access, which was in the
            // page: only offset + delta >= 0 is left to check, as offset >= -delta (signed:
            // INVALID is below every bound). One compare, no add.
            return self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, off, -delta);
        }
        let at = self.b.ins().iadd_imm_s(off, delta);
        self.b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, at, last)
    }

    /// Host address of a member `delta` bytes from group `i`'s first access (once
    /// [`Lower::group_member`] said it is in the page).
    pub(super) fn group_host(&mut self, i: usize, delta: i64) -> Value {
        let host = self.b.use_var(self.groups[i].host);
        self.b.ins().iadd_imm_s(host, delta)
    }

    /// At the start of a block that jumps to its own start: give the carried groups' base
    /// registers new versions and start with those groups, their records as the edge into
    /// the block left them (valid only from the block's own end, see [`Lower::carry_into`]).
    pub(super) fn seed_carries(&mut self, carries: &[Carry]) {
        // (One new version per stepping register, which several carries may share:
        // `[r12 + rax]` and `[rdi + rax]`.)
        let mut renewed = 0u32;
        for c in carries {
            if renewed & (1 << c.reg) == 0 {
                self.new_version(c.reg as usize);
                renewed |= 1 << c.reg;
            }
            let v = self.versions[c.reg as usize];
            let key = match c.fixed {
                None => AddrKey {
                    reg: c.reg,
                    base: Some(v),
                    index: None,
                },
                Some((b, scale)) => AddrKey {
                    reg: b,
                    base: Some(self.root(self.versions[b as usize]).0),
                    index: Some((v, scale)),
                },
            };
            self.groups.push(Group {
                key,
                write: c.write,
                disp: c.seed,
                off: c.off,
                host: c.host,
                size: 1,
                clean: false,
                carried: Some((v, c.seed)),
                inherited: false,
            });
        }
    }

    /// A jump into region member `t` (queued for lowering if it is not yet), handing it the
    /// current page groups ([`Inherited`]): before `t` is lowered the edge's groups are noted
    /// for [`Lower::settle_inherited`]; after, the groups `t` took that this path does not
    /// have are marked not valid on it first.
    pub(super) fn jump_to_member(&mut self, t: usize) {
        let target = self.member_block(t);
        if t >= self.inherited.len() || !inherit_enabled() {
            self.b.ins().jump(target, &[]);
            return;
        }
        match self.inherited[t].take() {
            // Lowered, starting with no group (every back edge): nothing to mark.
            Some(inh) if inh.groups.is_empty() => self.inherited[t] = Some(inh),
            Some(inh) => {
                let have = self.handed_groups();
                self.invalidate_missing(&inh.groups, &have);
                self.inherited[t] = Some(inh);
            }
            None => {
                let groups = self.handed_groups();
                self.landings[t].push(Inherited {
                    groups,
                    versions: self.versions,
                });
            }
        }
        self.b.ins().jump(target, &[]);
    }

    /// Before region member `t` is lowered: it takes the groups every edge so far hands over
    /// (the same group, in the same variables, under the same key), keyed by the register
    /// versions of those edges — none if an edge may still come from a member not yet
    /// lowered (a loop's back edge: marking them not valid on it would make its accesses
    /// probe in cold blocks on every run round) or from a run-time target (a return site, a
    /// call target). Whatever path reaches `t`, an inherited group is valid only where it
    /// describes the registers `t` starts with: edges lowered later mark what they lack not
    /// valid ([`Lower::jump_to_member`]).
    pub(super) fn settle_inherited(&mut self, t: usize) {
        if t >= self.inherited.len() {
            return;
        }
        self.lowered[t] = true;
        let edges = std::mem::take(&mut self.landings[t]);
        let closed = !self.members[t].ret_site
            && !self.members[t].call_target
            && self.preds[t].iter().all(|&p| self.lowered[p]);
        let mut groups = match (closed, edges.first()) {
            (true, Some(e)) => e.groups.clone(),
            _ => Vec::new(),
        };
        groups.retain(|g| edges.iter().all(|e| e.groups.iter().any(|h| h.same(g))));
        self.inherited[t] = Some(Inherited {
            versions: edges.first().map_or(self.versions, |e| e.versions),
            groups,
        });
    }

    /// On the current path: the groups of `taken` that are not in `have` get an [`INVALID`]
    /// offset (and a zero host address).
    fn invalidate_missing(&mut self, taken: &[Group], have: &[Group]) {
        let missing: Vec<Group> = taken
            .iter()
            .filter(|g| !have.iter().any(|h| h.same(g)))
            .copied()
            .collect();
        if missing.is_empty() {
            return;
        }
        let bad = self.iconst(INVALID as u64);
        let z = self.iconst(0);
        for g in missing {
            self.b.def_var(g.off, bad);
            self.b.def_var(g.host, z);
        }
    }

    /// The current groups as handed to a region member: not carried, no index register, and
    /// keyed by the base register's current version (not a root it was derived from: a member
    /// starts without derivations), or by no register.
    fn handed_groups(&self) -> Vec<Group> {
        self.groups
            .iter()
            .filter(|g| g.carried.is_none() && g.key.index.is_none())
            .filter_map(|g| {
                let Some(base) = g.key.base else {
                    return Some(Group {
                        clean: false,
                        inherited: true,
                        ..*g
                    });
                };
                let v = *self.versions.get(g.key.reg as usize)?;
                let (root, moved) = self.root(v);
                (root == base).then_some(Group {
                    key: AddrKey {
                        base: Some(v),
                        ..g.key
                    },
                    disp: g.disp.wrapping_sub(moved),
                    clean: false,
                    inherited: true,
                    ..*g
                })
            })
            .collect()
    }

    /// At a region member's start (its groups and derivations just forgotten): take the
    /// groups its edges hand it, with the register versions they are keyed by; or, with none,
    /// give every register a new version.
    pub(super) fn take_inherited_groups(&mut self) {
        // (The member's `Inherited` stays: later edges into it compare against it.)
        match self.inherited.get(self.current).and_then(Option::as_ref) {
            Some(inh) if !inh.groups.is_empty() => {
                self.versions = inh.versions;
                self.groups = inh.groups.clone();
                self.stats.inherited += self.groups.len() as u32;
            }
            _ => {
                for i in 0..16 {
                    self.new_version(i);
                }
            }
        }
    }

    /// Whether group `i` is a group of the write table.
    pub(super) fn group_writes(&self, i: usize) -> bool {
        self.groups[i].write
    }

    /// Whether group `i`'s record may not be valid here: carried, or handed over by a
    /// region edge.
    pub(super) fn group_rerecords(&self, i: usize) -> bool {
        self.groups[i].carried.is_some() || self.groups[i].inherited
    }

    /// A member of carried group `i` at `lin`, `delta` bytes from its record, `size` bytes,
    /// has been accessed at `host`: it becomes the record (what the next run starts from).
    pub(super) fn group_rerecord(
        &mut self,
        i: usize,
        lin: Value,
        host: Value,
        delta: i64,
        size: u8,
    ) {
        self.group_record(i, lin, host);
        self.stats.carried += self.groups[i].carried.is_some() as u32;
        let g = &mut self.groups[i];
        g.disp = g.disp.wrapping_add(delta);
        g.size = size;
        g.clean = true;
        // Recorded on every path now: an inherited group goes on as the block's own.
        g.inherited = false;
    }

    /// Before a jump into region member `t` (`from_body`: a jump from the end of a member,
    /// not the function's entry): the records of `t`'s carried groups stay what they are only
    /// on a jump from a run of the same block whose group is still there, with no
    /// trampolined instruction since it recorded (else its offset would be not valid
    /// already) and its record where the next run expects it — the base register moved by
    /// constant steps only, by as much as makes the record the seed displacement from the
    /// register's new value. Otherwise the records are marked not valid.
    pub(super) fn carry_into(&mut self, t: usize, from_body: bool) {
        let into = self.carries[t].clone();
        for c in into {
            let same_block = from_body && self.carries[self.current].iter().any(|k| k.off == c.off);
            let keep = same_block
                && self.groups.iter().any(|g| {
                    g.off == c.off
                        && g.carried.is_some_and(|(start, seed)| {
                            let (root, moved) = self.root(self.versions[c.reg as usize]);
                            let scale = c.fixed.map_or(1, |f| f.1 as i64);
                            root == start
                                && seed == c.seed
                                && moved.wrapping_mul(scale).wrapping_add(seed) == g.disp
                        })
                });
            if !keep {
                let bad = self.iconst(INVALID as u64);
                self.b.def_var(c.off, bad);
                let z = self.iconst(0);
                self.b.def_var(c.host, z);
            }
        }
    }

    /// After an instruction run through the trampoline (which may fill or drop any TLB
    /// entry): mark every group not valid.
    pub(super) fn groups_invalidate(&mut self) {
        if self.groups.is_empty() {
            return;
        }
        let bad = self.iconst(INVALID as u64);
        for g in &mut self.groups {
            self.b.def_var(g.off, bad);
            g.clean = false;
        }
    }

    /// Whether group `i`'s first access's fast path already proved a member `delta` bytes
    /// from it, of `size` bytes, in the page: the same bytes or fewer at the same address
    /// (`mov ecx,[rsi]; add rsi,4; ... mov [rsi-4],eax`), with no trampolined instruction
    /// since (which may have dropped the entry the record came from).
    pub(super) fn group_covers(&self, i: usize, delta: i64, size: u8) -> bool {
        let g = &self.groups[i];
        delta == 0 && size <= g.size && g.clean
    }
}

#[cfg(test)]
mod tests {
    use super::stores_back;
    use iced_x86::code_asm::*;

    /// `stores_back` of the code `f` assembles.
    fn stored(f: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<bool> {
        let mut a = CodeAssembler::new(64).unwrap();
        f(&mut a).unwrap();
        let bytes = a.assemble(0x1000).unwrap();
        let insns: Vec<_> =
            iced_x86::Decoder::with_ip(64, &bytes, 0x1000, iced_x86::DecoderOptions::NONE)
                .into_iter()
                .map(|ins| lockstep_interp::decode::DecodedInsn {
                    ins,
                    handler: lockstep_interp::ops::lookup(&ins),
                })
                .collect();
        stores_back(&insns)
    }

    #[test]
    fn a_load_is_stored_back_only_through_the_same_address_expression() {
        // bignum's loop: the base moves on by a constant, the displacement makes up for it.
        let v = stored(|a| {
            a.mov(ecx, dword_ptr(rsi))?;
            a.add(rsi, 4)?;
            a.imul_3(rax, rcx, 10)?;
            a.mov(dword_ptr(rsi - 4), eax)
        });
        assert_eq!(v, [true, false, false, false]);
        // Fewer bytes back, at an index, RIP-relative: stored back.
        assert!(
            stored(|a| {
                a.mov(rcx, qword_ptr(rdi + rdx * 8 + 16))?;
                a.mov(word_ptr(rdi + rdx * 8 + 16), cx)
            })[0]
        );
        assert!(
            stored(|a| {
                let mut x = a.create_label();
                a.mov(eax, dword_ptr(x))?;
                a.add(eax, 1)?;
                a.mov(dword_ptr(x), eax)?;
                a.set_label(&mut x)?;
                a.nop()
            })[0]
        );
        // More bytes than were read; another displacement; a base or index given another
        // value; a different index; a read-modify-write load (it has its own write probe).
        let not = [
            stored(|a| {
                a.mov(ecx, dword_ptr(rsi))?;
                a.mov(qword_ptr(rsi), rcx)
            }),
            stored(|a| {
                a.mov(ecx, dword_ptr(rsi))?;
                a.add(rsi, 4)?;
                a.mov(dword_ptr(rsi), ecx)
            }),
            stored(|a| {
                a.mov(ecx, dword_ptr(rsi))?;
                a.mov(rsi, rdi)?;
                a.mov(dword_ptr(rsi), ecx)
            }),
            stored(|a| {
                a.mov(ecx, dword_ptr(rsi + rdx * 4))?;
                a.inc(rdx)?;
                a.mov(dword_ptr(rsi + rdx * 4 - 4), ecx)
            }),
            stored(|a| {
                a.mov(ecx, dword_ptr(rsi + rdx * 4))?;
                a.mov(dword_ptr(rsi + rdx * 2), ecx)
            }),
            stored(|a| {
                a.mov(rsi, qword_ptr(rsi))?;
                a.mov(qword_ptr(rsi), rcx)
            }),
            stored(|a| {
                a.add(dword_ptr(rsi), ecx)?;
                a.mov(dword_ptr(rsi), ecx)
            }),
        ];
        for (k, v) in not.iter().enumerate() {
            assert!(!v[0], "case {k}");
        }
    }
}
