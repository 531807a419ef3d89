//! Guest memory in compiled code: effective addresses (64-bit mode), and loads/stores with an
//! inline software-TLB fast path (tag compare, same page → host pointer); everything else
//! (misses, page crossings, MMIO, code pages, faults) leaves the block before the
//! instruction, for the interpreter.

use super::group::{self, AddrKey, Role};
use super::{guest_mem, host_mem, Lower};
use crate::frame::{ret, seg_base_off, Frame};
use cranelift_codegen::ir::{
    condcodes::IntCC, types, InstBuilder, InstructionData, Opcode, Type, Value,
};
use iced_x86::{Instruction, Register};
use lockstep_interp::mmu::{TLB_ENTRIES, TLB_ENTRY_BYTES};
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::state::sreg;

/// A memory operand's linear address and, for a 64-bit address without a segment base, its
/// key and displacement (see `super::group`). (Whether it is SS-relative, #SS instead of #GP
/// for a non-canonical address, is the interpreter's business: a miss leaves it the
/// instruction.)
#[derive(Clone, Copy)]
pub struct Addr {
    pub lin: Value,
    pub key: Option<(AddrKey, i64)>,
}

/// Address size of a memory operand in 64-bit mode, as `lockstep_interp::operand` decides it.
fn addr_size(ins: &Instruction) -> u8 {
    let b = ins.memory_base();
    if b == Register::RIP || (Register::RAX..=Register::R15).contains(&b) {
        return 8;
    }
    if b == Register::EIP || (Register::EAX..=Register::R15D).contains(&b) {
        return 4;
    }
    if b != Register::None {
        return 2;
    }
    let i = ins.memory_index();
    if i != Register::None {
        return i.size() as u8;
    }
    match ins.memory_displ_size() {
        2 => 2,
        _ => 8,
    }
}

/// Can the memory operand be addressed natively (64-bit mode, GPR base/index only)?
pub fn addressable(ins: &Instruction) -> bool {
    let b = ins.memory_base();
    let i = ins.memory_index();
    let base_ok =
        matches!(b, Register::None | Register::RIP | Register::EIP) || gpr_ref(b).is_some();
    let index_ok = i == Register::None || (gpr_ref(i).is_some() && i.size() >= 4);
    base_ok && index_ok && addr_size(ins) >= 4
}

impl Lower<'_> {
    /// Zero-extended value of a GPR operand of any width.
    pub fn read_reg(&mut self, r: Register) -> Value {
        let g = gpr_ref(r).expect("GPR operand");
        let v = self.gpr(g.index);
        if g.high {
            let t = self.b.ins().ushr_imm_s(v, 8);
            self.b.ins().band_imm_s(t, 0xff)
        } else {
            self.zext(v, g.size)
        }
    }

    /// Write a GPR operand with the x86 width rules (32-bit zero-extends, 8/16-bit merge).
    pub fn write_reg(&mut self, r: Register, v: Value) {
        let g = gpr_ref(r).expect("GPR operand");
        let new = match (g.size, g.high) {
            (8, _) => v,
            (4, _) => self.zext(v, 4),
            (size, high) => {
                let old = self.gpr(g.index);
                let m: u64 = if size == 2 { 0xffff } else { 0xff };
                let sh = if high { 8 } else { 0 };
                let keep = self.b.ins().band_imm_s(old, !((m << sh) as i64));
                let part = self.b.ins().band_imm_s(v, m as i64);
                let part = if high {
                    self.b.ins().ishl_imm_s(part, 8)
                } else {
                    part
                };
                self.b.ins().bor(keep, part)
            }
        };
        self.set_gpr(g.index, new);
    }

    /// How many low bits of `v` may be nonzero, as far as the instruction defining it tells
    /// (its type's width when it tells nothing): a zero extension, a narrow load, a constant,
    /// an AND with one of those. `zext` and `narrow` use it to skip reduce/extend pairs that
    /// change nothing — 32-bit code produced one for every operand read, which Cranelift at
    /// `opt_level=none` emits as register moves.
    fn known_bits(&self, v: Value) -> u32 {
        self.known_bits_depth(v, 2)
    }

    /// The instruction that defines `v`, if an instruction does (not a block parameter).
    pub fn defining(&self, v: Value) -> Option<InstructionData> {
        let dfg = &self.b.func.dfg;
        dfg.value_def(v).inst().map(|i| dfg.insts[i])
    }

    fn known_bits_depth(&self, v: Value, depth: u32) -> u32 {
        let dfg = &self.b.func.dfg;
        let ty = dfg.value_type(v);
        let Some(def) = self.defining(v) else {
            return ty.bits();
        };
        let bits = match def {
            InstructionData::Unary {
                opcode: Opcode::Uextend,
                arg,
            } => dfg.value_type(arg).bits(),
            InstructionData::Load { opcode, .. } => match opcode {
                Opcode::Uload8 => 8,
                Opcode::Uload16 => 16,
                Opcode::Uload32 => 32,
                _ => ty.bits(),
            },
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } if ty == types::I64 => 64 - (imm.bits() as u64).leading_zeros(),
            InstructionData::Binary {
                opcode: Opcode::Band,
                args: [a, b],
            } if depth > 0 => self
                .known_bits_depth(a, depth - 1)
                .min(self.known_bits_depth(b, depth - 1)),
            _ => ty.bits(),
        };
        bits.min(ty.bits())
    }

    /// Low `size` bytes of `v`, zero-extended.
    pub fn zext(&mut self, v: Value, size: u8) -> Value {
        if size >= 8 || self.known_bits(v) <= u32::from(size) * 8 {
            return v;
        }
        if let Some(part) = self.merged_low_part(v, size) {
            return part;
        }
        let here = self.b.current_block();
        if let Some(&(_, _, _, r)) = self
            .zext_memo
            .iter()
            .find(|&&(blk, x, sz, _)| Some(blk) == here && x == v && sz == size)
        {
            return r;
        }
        let r = self.zext_uncached(v, size);
        if let Some(blk) = here {
            if self.zext_memo.len() == 16 {
                self.zext_memo.remove(0);
            }
            self.zext_memo.push((blk, v, size, r));
        }
        r
    }

    /// When `v` is an 8/16-bit register write's merge ([`Lower::write_reg`]: `(old & keep) |
    /// part`, `keep` clearing at least the low `size` bytes) and `part` has no bits above
    /// them: `part`, the low `size` bytes of `v` (SETcc into AL and then MOVZX EAX, AL reads
    /// back what the SETcc wrote).
    fn merged_low_part(&self, v: Value, size: u8) -> Option<Value> {
        let [keep, part] = self.binary_of(v, Opcode::Bor)?;
        let [_, k] = self.binary_of(keep, Opcode::Band)?;
        let low = (1u64 << (u32::from(size) * 8)) - 1;
        let bits = u32::from(size) * 8;
        ((self.const_of(k)? as u64) & low == 0 && self.known_bits(part) <= bits).then_some(part)
    }

    /// The operands of `v`, when a binary `opcode` instruction defines it.
    fn binary_of(&self, v: Value, opcode: Opcode) -> Option<[Value; 2]> {
        match self.defining(v)? {
            InstructionData::Binary { opcode: o, args } if o == opcode => Some(args),
            _ => None,
        }
    }

    /// The argument of the `opcode` instruction (a unary one) that defines `v`, if one does.
    fn unary_of(&self, v: Value, opcode: Opcode) -> Option<Value> {
        match self.defining(v)? {
            InstructionData::Unary { opcode: o, arg } if o == opcode => Some(arg),
            _ => None,
        }
    }

    /// The constant `v` is, when an `iconst` defines it.
    fn const_of(&self, v: Value) -> Option<i64> {
        match self.defining(v)? {
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    }

    fn zext_uncached(&mut self, v: Value, size: u8) -> Value {
        match size {
            1 => {
                let t = self.b.ins().ireduce(types::I8, v);
                self.b.ins().uextend(types::I64, t)
            }
            2 => {
                let t = self.b.ins().ireduce(types::I16, v);
                self.b.ins().uextend(types::I64, t)
            }
            4 => {
                let t = self.b.ins().ireduce(types::I32, v);
                self.b.ins().uextend(types::I64, t)
            }
            _ => v,
        }
    }

    /// For a store of the low `size` bytes of `v`: the value `v` zero-extends when those
    /// bytes are its (`uextend(ireduce(x))` keeping at least `size` bytes: a 32-bit register
    /// operand read across an edge), so that the store takes them from `x` without the
    /// extension (`mov %eax,%eax` before a 4-byte store).
    fn low_bytes_source(&self, v: Value, size: u8) -> Value {
        let ty = |x: Value| self.b.func.dfg.value_type(x);
        self.unary_of(v, Opcode::Uextend)
            .filter(|&t| ty(t).bytes() >= u32::from(size))
            .and_then(|t| self.unary_of(t, Opcode::Ireduce))
            .filter(|&x| ty(x) == types::I64)
            .unwrap_or(v)
    }

    /// Low `size` bytes of `v`, sign-extended.
    pub fn sext(&mut self, v: Value, size: u8) -> Value {
        match size {
            1 | 2 | 4 => {
                let t = self.narrow(v, size);
                self.b.ins().sextend(types::I64, t)
            }
            _ => v,
        }
    }

    /// Effective address (offset before segmentation), masked to the address size.
    pub fn effective_offset(&mut self, ins: &Instruction) -> Value {
        let ea = self.offset_sum(ins, types::I64);
        match addr_size(ins) {
            8 => ea,
            4 => self.zext(ea, 4),
            _ => self.zext(ea, 2),
        }
    }

    /// Displacement + base + index·scale at width `ty` (I64, or I32 for the low half only),
    /// without adding a zero displacement.
    fn offset_sum(&mut self, ins: &Instruction, ty: Type) -> Value {
        let narrow = ty == types::I32;
        let mut ea = None;
        let base = ins.memory_base();
        if !matches!(base, Register::None | Register::RIP | Register::EIP) {
            let v = self.read_reg(base);
            ea = Some(if narrow { self.narrow(v, 4) } else { v });
        }
        let index = ins.memory_index();
        if index != Register::None {
            let v = self.read_reg(index);
            let v = if narrow { self.narrow(v, 4) } else { v };
            let s = match ins.memory_index_scale() {
                2 => self.b.ins().ishl_imm_s(v, 1),
                4 => self.b.ins().ishl_imm_s(v, 2),
                8 => self.b.ins().ishl_imm_s(v, 3),
                _ => v,
            };
            ea = Some(match ea {
                Some(e) => self.b.ins().iadd(e, s),
                None => s,
            });
        }
        let disp = ins.memory_displacement64();
        match ea {
            Some(e) if disp == 0 => e,
            Some(e) => self.b.ins().iadd_imm_s(e, disp as i64),
            None => self.b.ins().iconst(
                ty,
                if narrow {
                    disp as u32 as i64
                } else {
                    disp as i64
                },
            ),
        }
    }

    /// LEA's result for operand size `size`: for 32 bits, computed at 32 bits (the host
    /// zero-extends such a result for free).
    pub fn lea_value(&mut self, ins: &Instruction, size: u8) -> Value {
        if size == 4 && matches!(addr_size(ins), 8 | 4) {
            let v = self.offset_sum(ins, types::I32);
            return self.b.ins().uextend(types::I64, v);
        }
        self.effective_offset(ins)
    }

    /// Linear address of the memory operand (64-bit mode: only FS and GS have a base).
    pub fn mem_addr(&mut self, ins: &Instruction) -> Addr {
        let seg = ins.memory_segment();
        let off = self.effective_offset(ins);
        let lin = match seg {
            Register::FS | Register::GS => {
                let i = if seg == Register::FS {
                    sreg::FS
                } else {
                    sreg::GS
                };
                let base = self
                    .b
                    .ins()
                    .load(types::I64, host_mem(), self.state, seg_base_off(i));
                self.b.ins().iadd(off, base)
            }
            _ => off,
        };
        let key = if matches!(seg, Register::FS | Register::GS) || addr_size(ins) != 8 {
            None
        } else {
            Some(self.addr_key(ins))
        };
        Addr { lin, key }
    }

    /// Key and displacement of a 64-bit memory operand (the values `effective_offset` used).
    fn addr_key(&mut self, ins: &Instruction) -> (AddrKey, i64) {
        let mut disp = ins.memory_displacement64() as i64;
        let mut reg = 16;
        let base = match ins.memory_base() {
            Register::None | Register::RIP => None,
            b => {
                let g = gpr_ref(b).expect("GPR base").index;
                reg = g as u8;
                let (root, off) = self.root(self.gpr_version(g));
                disp = disp.wrapping_add(off);
                Some(root)
            }
        };
        let index = match ins.memory_index() {
            Register::None => None,
            i => {
                let g = gpr_ref(i).expect("GPR index").index;
                // An index moved by constants (`add rax, 1`) keys as its root, the steps
                // times the scale going into the displacement, as for a base.
                let scale = ins.memory_index_scale();
                let (root, off) = self.root(self.gpr_version(g));
                disp = disp.wrapping_add(off.wrapping_mul(scale as i64));
                Some((root, scale as u8))
            }
        };
        (AddrKey { reg, base, index }, disp)
    }

    /// The stack slot `delta` bytes from `rsp`, RSP's current value, for PUSH, POP, CALL and
    /// RET.
    pub fn stack_addr(&mut self, rsp: Value, delta: i64) -> Addr {
        let lin = if delta == 0 {
            rsp
        } else {
            self.b.ins().iadd_imm_s(rsp, delta)
        };
        let (root, off) = self.root(self.gpr_version(lockstep_interp::state::reg::RSP));
        let key = AddrKey {
            reg: lockstep_interp::state::reg::RSP as u8,
            base: Some(root),
            index: None,
        };
        Addr {
            lin,
            key: Some((key, off.wrapping_add(delta))),
        }
    }

    /// The read TLB's pointer (each TLB pointer is loaded once, on the main path, where first
    /// needed: a function that only reads memory does not load the write TLB's pointer).
    pub(super) fn tlb_read(&mut self) -> Value {
        if let Some(r) = self.tlb_ptrs[0] {
            return r;
        }
        let r = self
            .b
            .ins()
            .load(types::I64, host_mem(), self.frame, Frame::OFF_TLB_READ);
        self.tlb_ptrs[0] = Some(r);
        r
    }

    /// The write TLB's pointer (see [`Self::tlb_read`]).
    pub(super) fn tlb_write(&mut self) -> Value {
        if let Some(w) = self.tlb_ptrs[1] {
            return w;
        }
        let w = self
            .b
            .ins()
            .load(types::I64, host_mem(), self.frame, Frame::OFF_TLB_WRITE);
        self.tlb_ptrs[1] = Some(w);
        w
    }

    /// The write TLB's pointer if `write`, else the read TLB's.
    fn tlb(&mut self, write: bool) -> Value {
        if write {
            self.tlb_write()
        } else {
            self.tlb_read()
        }
    }

    /// TLB probe: (hit and the access stays inside the page, address of the entry). One
    /// compare decides both: the entry's tag must be the page of the access's last byte,
    /// and the entry is the slot of its first byte's page — a crossing access has a last
    /// page whose slot is the next one, so no tag in this slot can match it.
    pub(super) fn tlb_probe(&mut self, table: Value, lin: Value, size: u8) -> (Value, Value) {
        const _: () = assert!(TLB_ENTRY_BYTES.is_power_of_two());
        // The entry's byte offset, `(vpn % TLB_ENTRIES) * TLB_ENTRY_BYTES`, in two steps.
        let shift = 12 - TLB_ENTRY_BYTES.trailing_zeros() as i64;
        let scaled = self.b.ins().ushr_imm_s(lin, shift);
        let off = self
            .b
            .ins()
            .band_imm_s(scaled, ((TLB_ENTRIES as u64 - 1) * TLB_ENTRY_BYTES) as i64);
        let entry = self.b.ins().iadd(table, off);
        let tag = self.b.ins().load(types::I64, host_mem(), entry, 0);
        let end = if size > 1 {
            self.offset_by(lin, size as i64 - 1)
        } else {
            lin
        };
        let last = self.b.ins().ushr_imm_s(end, 12);
        let ok = self.b.ins().icmp(IntCC::Equal, tag, last);
        (ok, entry)
    }

    /// `v` as `x + constant` when an add of a constant defines it (a displacement).
    fn base_and_offset(&self, v: Value) -> Option<(Value, i64)> {
        let [x, k] = self.binary_of(v, Opcode::Iadd)?;
        let k = self.const_of(k)?;
        (self.b.func.dfg.value_type(v) == types::I64).then_some((x, k))
    }

    /// `v + c`. When `v` is itself `x + constant` (a displacement), the constants are
    /// folded: `x + (constant + c)` is one host LEA, where `v + c` would materialise `c` in a
    /// register first (Cranelift at `opt_level=none` does not fold them).
    fn offset_by(&mut self, v: Value, c: i64) -> Value {
        match self.base_and_offset(v) {
            Some((x, k)) if self.fold_offsets => self.b.ins().iadd_imm_s(x, k.wrapping_add(c)),
            _ => self.b.ins().iadd_imm_s(v, c),
        }
    }

    /// Host address of a TLB hit: the entry's `host` (the page's host address minus the
    /// linear page address) + the linear address.
    pub(super) fn host_addr(&mut self, entry: Value, lin: Value) -> Value {
        let host = self.b.ins().load(types::I64, host_mem(), entry, 8);
        self.b.ins().iadd(host, lin)
    }

    /// Load `size` bytes at `a` (zero-extended). Anything but a fast-path hit leaves the block
    /// with RIP at the current instruction (see [`Lower::defer_exit`]).
    pub fn load(&mut self, a: Addr, size: u8) -> Value {
        let host = self.access_host(a, size, false);
        self.load_host(host, size)
    }

    /// Load the destination of a read-modify-write through the write TLB, which decides
    /// writability before anything changes (a read-only page misses and leaves the whole
    /// instruction to the interpreter, which raises the write fault as its `read_op_rmw`
    /// does, and reads through the same write-TLB entry on a hit). Returns the value and the
    /// host address, for [`Lower::store_host`] to write the result back without a second
    /// probe.
    pub fn load_rmw(&mut self, a: Addr, size: u8) -> (Value, Value) {
        let host = self.access_host(a, size, true);
        (self.load_host(host, size), host)
    }

    /// The host address of an access of `size` bytes at `a` through the read or the `write`
    /// TLB (its page group's, or a probe of its own; see [`Lower::fast_path`]), made current.
    /// Write-TLB entries never point at pages holding decoded code, so a write's fast path
    /// needs no self-modifying-code check.
    fn access_host(&mut self, a: Addr, size: u8, write: bool) -> Value {
        if !write {
            if let Some(host) = self.load_through_write(a, size) {
                return host;
            }
        }
        let table = self.tlb(write);
        let role = self.group_role(a.key, write, size);
        self.fast_path(table, a.lin, size, role)
    }

    /// A load served by the write TLB, when that saves a probe: a member of a write group of
    /// its address, or a load of bytes a later instruction of the block stores back to
    /// (`group::stores_back`: `mov ecx,[rsi]; add rsi,4; … mov [rsi-4],eax`), which starts a
    /// write group that the store joins without a check of its own ([`Lower::group_covers`]).
    /// Exact: a write entry is always a copy of the read entry in its slot
    /// (`lockstep_interp::mmu::Tlb`), so a write hit is the read hit the interpreter gets.
    /// Such a load leaves the block when the write TLB misses: the store would miss too (a
    /// page not yet written since its translation was cached, read-only, or holding code),
    /// so that costs at most one more trip to the interpreter per store that takes one.
    fn load_through_write(&mut self, a: Addr, size: u8) -> Option<Value> {
        let (key, disp) = a.key?;
        let role = match self.group_find(key, disp, true) {
            Some((i, delta)) => Role::Member(i, delta),
            None if self.stores_back && self.group_find(key, disp, false).is_none() => {
                self.group_role(a.key, true, size)
            }
            None => return None,
        };
        // A member outside the recorded page that probes the TLB probes the read TLB.
        let table = self.tlb(!matches!(role, Role::Member(..)));
        Some(self.fast_path(table, a.lin, size, role))
    }

    /// Load `size` bytes (zero-extended) at a host address.
    fn load_host(&mut self, host: Value, size: u8) -> Value {
        match size {
            1 => self.b.ins().uload8(types::I64, guest_mem(), host, 0),
            2 => self.b.ins().uload16(types::I64, guest_mem(), host, 0),
            4 => self.b.ins().uload32(guest_mem(), host, 0),
            _ => self.b.ins().load(types::I64, guest_mem(), host, 0),
        }
    }

    /// The fast path of an access, made current; returns the host address to access. For a
    /// group member: the in-page check and the group's host address; for any other access,
    /// the TLB probe and, on a hit, the entry's host address (recorded when the access starts
    /// a group). Everything else — a TLB miss, a page crossing, a member outside its group's
    /// page — leaves the block before the instruction through [`Lower::defer_exit`].
    fn fast_path(&mut self, table: Value, lin: Value, size: u8, role: Role) -> Value {
        if let Role::Member(i, delta) = role {
            if self.group_covers(i, delta, size) {
                return self.group_host(i, delta);
            }
            if self.group_rerecords(i) {
                return self.carried_member(i, lin, size, delta);
            }
            let ok = self.group_member(i, delta, size);
            if delta.abs() < group::PROBE_DELTA {
                self.fast_or_defer(ok);
                return self.group_host(i, delta);
            }
            // Far from the group's first access: outside its page often enough (always, for
            // some sites: a global structure straddling a page boundary) that a cold probe
            // of the TLB beats leaving the block.
            return self.in_page_or_probe(ok, i, delta, table, lin, size);
        }
        let host = self.probe_or_defer(table, lin, size);
        if let Role::First(i) = role {
            self.group_record(i, lin, host);
        }
        host
    }

    /// A member of a carried group (`group::Carry`) or of one a region edge handed over
    /// (`group::Inherited`): in the recorded page, the recorded host address plus `delta`;
    /// otherwise (another page, or a record not valid: the first run after entering the
    /// block from elsewhere, a path into the member that did not have the group) a probe of
    /// the group's own table in a cold block, leaving the block if it misses. Either way the
    /// access becomes the group's record.
    fn carried_member(&mut self, i: usize, lin: Value, size: u8, delta: i64) -> Value {
        let table = self.tlb(self.group_writes(i));
        let ok = self.group_member(i, delta, size);
        let host = self.in_page_or_probe(ok, i, delta, table, lin, size);
        self.group_rerecord(i, lin, host, delta, size);
        host
    }

    /// The host address of a member of group `i`, `delta` bytes from its record: the recorded
    /// one plus `delta` when `ok` (in the recorded page), else a probe of `table` in cold
    /// blocks, leaving the block if it misses. Made current.
    fn in_page_or_probe(
        &mut self,
        ok: Value,
        i: usize,
        delta: i64,
        table: Value,
        lin: Value,
        size: u8,
    ) -> Value {
        let inpage = self.b.create_block();
        let probe = self.b.create_block();
        let join = self.b.create_block();
        let host = self.b.append_block_param(join, types::I64);
        self.b.set_cold_block(probe);
        self.b.ins().brif(ok, inpage, &[], probe, &[]);
        self.b.seal_block(inpage);
        self.b.seal_block(probe);
        self.b.switch_to_block(inpage);
        let h = self.group_host(i, delta);
        self.b.ins().jump(join, &[h.into()]);
        self.b.switch_to_block(probe);
        let h = self.probe_or_defer(table, lin, size);
        let hit = self.b.current_block().expect("a current block");
        self.b.set_cold_block(hit);
        self.b.ins().jump(join, &[h.into()]);
        self.b.seal_block(join);
        self.b.switch_to_block(join);
        host
    }

    /// Probe the TLB for `lin`: the host address on a hit (made current), else leave the block
    /// ([`Lower::fast_or_defer`]).
    fn probe_or_defer(&mut self, table: Value, lin: Value, size: u8) -> Value {
        let (ok, entry) = self.tlb_probe(table, lin, size);
        self.fast_or_defer(ok);
        self.host_addr(entry, lin)
    }

    /// Branch on `ok` to a new fast block (made current) or a cold exit that leaves the
    /// accesses of the current instruction to the interpreter ([`Lower::defer_exit`]).
    pub(super) fn fast_or_defer(&mut self, ok: Value) {
        let fast = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(ok, fast, &[], slow, &[]);
        self.b.seal_block(fast);
        self.b.seal_block(slow);
        self.b.switch_to_block(slow);
        self.defer_exit();
        self.b.switch_to_block(fast);
    }

    /// Leave the block before the current instruction with [`ret::DEFER`] in the exit word:
    /// the dispatcher interprets from the instruction (see
    /// `Jit::run_entry`), whose interpreter handler then fills the TLB, walks the page
    /// tables, crosses the page, reaches the device or the code page, or raises the fault —
    /// exactly as the interpreter alone would, since nothing of the instruction was done
    /// (a memory access is never preceded by a side effect of its instruction: a
    /// read-modify-write's flags are recorded only after its store, docs/jit.md "Memory").
    /// Compiled code thus calls no memory helper, and a slow
    /// path never rejoins the main path (so no page group is ever invalidated by one).
    fn defer_exit(&mut self) {
        let ip = self.ins_ip;
        self.emit_exit(Some(super::Rip::Const(ip)), ret::STOP | ret::DEFER);
    }

    /// Store the low `size` bytes of `v` at `a`. Anything but a fast-path hit (a miss, a page
    /// crossing, a device, a page holding decoded code, a fault) leaves the block with RIP at
    /// the current instruction (see [`Lower::defer_exit`]); nothing is left to test after it.
    pub fn store(&mut self, a: Addr, size: u8, v: Value) {
        let host = self.access_host(a, size, true);
        self.store_host(host, size, v);
    }

    /// Store the low `size` bytes of `v` at a host address: a read-modify-write's destination
    /// ([`Lower::load_rmw`]).
    pub fn store_host(&mut self, host: Value, size: u8, v: Value) {
        let v = self.low_bytes_source(v, size);
        match size {
            1 => self.b.ins().istore8(guest_mem(), v, host, 0),
            2 => self.b.ins().istore16(guest_mem(), v, host, 0),
            4 => self.b.ins().istore32(guest_mem(), v, host, 0),
            _ => self.b.ins().store(guest_mem(), v, host, 0),
        };
    }
}
