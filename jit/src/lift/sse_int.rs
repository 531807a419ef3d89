//! Native lowering of SSE/AVX integer instructions (the driver, and the legacy-SSE integer
//! arithmetic, logic, compares, shifts and shuffles): Cranelift SIMD on the vector registers
//! in `CpuState`. These have no MXCSR or flag effects, so the host's SIMD instructions give
//! the interpreter's results exactly (`lockstep_interp::ops::{sse_int, sse_shuf, ssse3}`);
//! the moves are classified in `sse_mov.rs`, the VEX forms in `avx_int.rs`.
//!
//! The availability check (legacy SSE: CR0.EM/TS clear and CR4.OSFXSR set; VEX: CR4.OSXSAVE
//! set, XCR0 enabling SSE and AVX state, CR0.TS clear) is made once per block on the main
//! path (`Lower::assert_vec_enabled`): when it fails the block leaves before the instruction
//! and the interpreter raises the fault. A register-only instruction then needs nothing else.
//! With a memory operand the fast path runs when the access hits the TLB inside one page (and
//! is aligned where the instruction requires it); anything else — a TLB miss, MMIO, a
//! misaligned access — runs the whole instruction through the interpreter's handler in a cold
//! path, so every fault and corner case is the interpreter's.

use super::{guest_mem, host_mem, Lower};
use crate::frame::ret;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, MemFlagsData, Type, Value};
use iced_x86::{Code, Instruction, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::ops::avx_common::XCR0_SSE_AVX;
use lockstep_interp::state::{ctl, CpuState};

/// A lane-wise (per 128-bit half) binary operation `dst = f(a, b)`.
#[derive(Clone, Copy)]
pub(super) enum Bin {
    And,
    /// PANDN: (NOT a) AND b.
    AndNot,
    Or,
    Xor,
    /// Lane-wise wrapping add/sub with the lane type.
    Add(Type),
    Sub(Type),
    /// Unsigned saturating add/sub.
    AddSatU(Type),
    SubSatU(Type),
    /// Compares: all-ones lanes where true.
    CmpEq(Type),
    CmpGt(Type),
    MinU(Type),
    MaxU(Type),
    MinS(Type),
    MaxS(Type),
    /// Interleave: (lane bytes, high half).
    Unpack(u8, bool),
    Pshufb,
    /// Narrow the signed lanes of type `.0` of a (low half) and b (high half) with signed
    /// (false) or unsigned (true) saturation: PACKSSWB/PACKSSDW/PACKUSWB.
    Pack(Type, bool),
    /// Low half of each lane product (PMULLW/PMULLD).
    Mul(Type),
    /// Unsigned rounding average (a + b + 1) >> 1 (PAVGB/PAVGW).
    Avg(Type),
}

/// What a covered instruction does.
#[derive(Clone, Copy)]
pub(super) enum Op {
    /// Operand 0 ← operand 1, the whole vector (loads, stores, register moves).
    Mov,
    /// Legacy `dst = f(dst, src)`; VEX `dst = f(src1, src2)`.
    Bin(Bin),
    /// Shift every lane of the destination by the immediate: (lane type, kind 0 = left,
    /// 1 = logical right, 2 = arithmetic right).
    ShiftImm(Type, u8),
    /// PSLLDQ (true) / PSRLDQ (false) by the immediate.
    ByteShift(bool),
    Pshufd,
    /// MOVD/MOVQ xmm, r/m32|r/m64 and MOVQ xmm, xmm/m64: the low qword gets the zero-extended
    /// source, the rest of the XMM register (VEX: of the YMM register) is zeroed.
    MovToVec,
    /// MOVD/MOVQ r/m32|r/m64, xmm and MOVQ xmm/m64, xmm: the low 4/8 bytes of the source; an
    /// XMM destination gets them zero-extended as for [`Op::MovToVec`].
    MovFromVec,
    /// MOVSS/MOVSD xmm, xmm (either encoding): the low 4/8 bytes of the source replace
    /// those of the destination; the rest of the destination is kept.
    MovLow(u8),
    /// MOVHPS/MOVHPD (true) and MOVLPS/MOVLPD (false) xmm, m64: the qword replaces the high
    /// (low) qword of the destination; the rest is kept.
    LoadHalf(bool),
    /// MOVHPS/MOVHPD m64, xmm: the source's high qword.
    StoreHigh,
    /// VMOVSS/VMOVSD xmm1, xmm2, xmm3: the low 4/8 bytes of operand 2, the rest of bits 127:0
    /// from operand 1, bits 255:128 zeroed.
    MergeLow(u8),
    /// PMOVMSKB r32|r64, xmm|ymm: bit i = sign bit of byte i (zero-extended).
    Movmsk,
    /// VZEROUPPER: bits 255:128 of every YMM register become zero.
    Vzeroupper,
    /// VPBROADCASTB/W/D/Q, VBROADCASTSS/SD: the low element (lane type given) of an XMM
    /// register or memory in every lane.
    Broadcast(Type),
}

/// A covered instruction: its operation, encoding and memory alignment rule.
#[derive(Clone, Copy)]
pub(super) struct Spec {
    pub op: Op,
    /// VEX vector length (16 or 32 bytes); `None` for legacy SSE.
    pub vex: Option<u8>,
    /// Alignment a memory operand must have (1: any; else its size or 16).
    pub align: u8,
}

impl Spec {
    pub(super) fn legacy(op: Op, align: u8) -> Spec {
        Spec {
            op,
            vex: None,
            align,
        }
    }
}

fn classify(ins: &Instruction) -> Option<Spec> {
    use Code as C;
    if ins.has_lock_prefix() {
        return None;
    }
    if let Some(s) = super::sse_mov::classify(ins).or_else(|| super::avx_int::classify(ins)) {
        return Some(s);
    }
    let bin = |b| Spec::legacy(Op::Bin(b), 16);
    let imm = |op| Spec::legacy(op, 16);
    Some(match ins.code() {
        C::Pand_xmm_xmmm128 | C::Andps_xmm_xmmm128 | C::Andpd_xmm_xmmm128 => bin(Bin::And),
        C::Pandn_xmm_xmmm128 | C::Andnps_xmm_xmmm128 | C::Andnpd_xmm_xmmm128 => bin(Bin::AndNot),
        C::Por_xmm_xmmm128 | C::Orps_xmm_xmmm128 | C::Orpd_xmm_xmmm128 => bin(Bin::Or),
        C::Pxor_xmm_xmmm128 | C::Xorps_xmm_xmmm128 | C::Xorpd_xmm_xmmm128 => bin(Bin::Xor),
        C::Paddb_xmm_xmmm128 => bin(Bin::Add(types::I8X16)),
        C::Paddw_xmm_xmmm128 => bin(Bin::Add(types::I16X8)),
        C::Paddd_xmm_xmmm128 => bin(Bin::Add(types::I32X4)),
        C::Paddq_xmm_xmmm128 => bin(Bin::Add(types::I64X2)),
        C::Psubb_xmm_xmmm128 => bin(Bin::Sub(types::I8X16)),
        C::Psubw_xmm_xmmm128 => bin(Bin::Sub(types::I16X8)),
        C::Psubd_xmm_xmmm128 => bin(Bin::Sub(types::I32X4)),
        C::Psubq_xmm_xmmm128 => bin(Bin::Sub(types::I64X2)),
        C::Paddusb_xmm_xmmm128 => bin(Bin::AddSatU(types::I8X16)),
        C::Paddusw_xmm_xmmm128 => bin(Bin::AddSatU(types::I16X8)),
        C::Psubusb_xmm_xmmm128 => bin(Bin::SubSatU(types::I8X16)),
        C::Psubusw_xmm_xmmm128 => bin(Bin::SubSatU(types::I16X8)),
        C::Pcmpeqb_xmm_xmmm128 => bin(Bin::CmpEq(types::I8X16)),
        C::Pcmpeqw_xmm_xmmm128 => bin(Bin::CmpEq(types::I16X8)),
        C::Pcmpeqd_xmm_xmmm128 => bin(Bin::CmpEq(types::I32X4)),
        C::Pcmpgtb_xmm_xmmm128 => bin(Bin::CmpGt(types::I8X16)),
        C::Pcmpgtw_xmm_xmmm128 => bin(Bin::CmpGt(types::I16X8)),
        C::Pcmpgtd_xmm_xmmm128 => bin(Bin::CmpGt(types::I32X4)),
        C::Pminub_xmm_xmmm128 => bin(Bin::MinU(types::I8X16)),
        C::Pmaxub_xmm_xmmm128 => bin(Bin::MaxU(types::I8X16)),
        C::Pminsw_xmm_xmmm128 => bin(Bin::MinS(types::I16X8)),
        C::Pmaxsw_xmm_xmmm128 => bin(Bin::MaxS(types::I16X8)),
        C::Punpcklbw_xmm_xmmm128 => bin(Bin::Unpack(1, false)),
        C::Punpckhbw_xmm_xmmm128 => bin(Bin::Unpack(1, true)),
        C::Punpcklwd_xmm_xmmm128 => bin(Bin::Unpack(2, false)),
        C::Punpckhwd_xmm_xmmm128 => bin(Bin::Unpack(2, true)),
        C::Punpckldq_xmm_xmmm128 | C::Unpcklps_xmm_xmmm128 => bin(Bin::Unpack(4, false)),
        C::Punpckhdq_xmm_xmmm128 | C::Unpckhps_xmm_xmmm128 => bin(Bin::Unpack(4, true)),
        C::Punpcklqdq_xmm_xmmm128 | C::Unpcklpd_xmm_xmmm128 => bin(Bin::Unpack(8, false)),
        C::Punpckhqdq_xmm_xmmm128 | C::Unpckhpd_xmm_xmmm128 => bin(Bin::Unpack(8, true)),
        C::Pshufb_xmm_xmmm128 => bin(Bin::Pshufb),
        C::Packsswb_xmm_xmmm128 => bin(Bin::Pack(types::I16X8, false)),
        C::Packssdw_xmm_xmmm128 => bin(Bin::Pack(types::I32X4, false)),
        C::Packuswb_xmm_xmmm128 => bin(Bin::Pack(types::I16X8, true)),
        C::Packusdw_xmm_xmmm128 => bin(Bin::Pack(types::I32X4, true)),
        C::Pminsb_xmm_xmmm128 => bin(Bin::MinS(types::I8X16)),
        C::Pmaxsb_xmm_xmmm128 => bin(Bin::MaxS(types::I8X16)),
        C::Pminuw_xmm_xmmm128 => bin(Bin::MinU(types::I16X8)),
        C::Pmaxuw_xmm_xmmm128 => bin(Bin::MaxU(types::I16X8)),
        C::Pminsd_xmm_xmmm128 => bin(Bin::MinS(types::I32X4)),
        C::Pmaxsd_xmm_xmmm128 => bin(Bin::MaxS(types::I32X4)),
        C::Pminud_xmm_xmmm128 => bin(Bin::MinU(types::I32X4)),
        C::Pmaxud_xmm_xmmm128 => bin(Bin::MaxU(types::I32X4)),
        C::Pcmpeqq_xmm_xmmm128 => bin(Bin::CmpEq(types::I64X2)),
        C::Pmullw_xmm_xmmm128 => bin(Bin::Mul(types::I16X8)),
        C::Pmulld_xmm_xmmm128 => bin(Bin::Mul(types::I32X4)),
        C::Pavgb_xmm_xmmm128 => bin(Bin::Avg(types::I8X16)),
        C::Pavgw_xmm_xmmm128 => bin(Bin::Avg(types::I16X8)),
        C::Psllw_xmm_imm8 => imm(Op::ShiftImm(types::I16X8, 0)),
        C::Pslld_xmm_imm8 => imm(Op::ShiftImm(types::I32X4, 0)),
        C::Psllq_xmm_imm8 => imm(Op::ShiftImm(types::I64X2, 0)),
        C::Psrlw_xmm_imm8 => imm(Op::ShiftImm(types::I16X8, 1)),
        C::Psrld_xmm_imm8 => imm(Op::ShiftImm(types::I32X4, 1)),
        C::Psrlq_xmm_imm8 => imm(Op::ShiftImm(types::I64X2, 1)),
        C::Psraw_xmm_imm8 => imm(Op::ShiftImm(types::I16X8, 2)),
        C::Psrad_xmm_imm8 => imm(Op::ShiftImm(types::I32X4, 2)),
        C::Pslldq_xmm_imm8 => imm(Op::ByteShift(true)),
        C::Psrldq_xmm_imm8 => imm(Op::ByteShift(false)),
        C::Pshufd_xmm_xmmm128_imm8 => imm(Op::Pshufd),
        C::Pmovmskb_r32_xmm | C::Pmovmskb_r64_xmm => imm(Op::Movmsk),
        _ => return None,
    })
}

/// What `ins` does, if it is one of the instructions lowered here.
fn covered(ins: &Instruction) -> Option<Spec> {
    classify(ins).filter(|_| (0..ins.op_count()).all(|n| operand_ok(ins, n)))
}

/// Is `ins` one of the instructions lowered here?
pub fn covers(ins: &Instruction) -> bool {
    covered(ins).is_some()
}

fn operand_ok(ins: &Instruction, n: u32) -> bool {
    match ins.op_kind(n) {
        OpKind::Register => {
            let r = ins.op_register(n);
            r.is_xmm()
                || r.is_ymm()
                || ((r.is_gpr32() || r.is_gpr64()) && gpr_ref(r).is_some_and(|g| !g.high))
        }
        OpKind::Memory => super::mem::addressable(ins),
        OpKind::Immediate8 => true,
        _ => false,
    }
}

/// Byte offset of the YMM register of XMM/YMM register `r` in `CpuState` (bits 127:0 there,
/// bits 255:128 at +16).
pub(crate) fn vec_off(r: Register) -> i32 {
    let i = if r.is_ymm() {
        r as usize - Register::YMM0 as usize
    } else {
        r as usize - Register::XMM0 as usize
    };
    (core::mem::offset_of!(CpuState, ymm) + 32 * (i & 15)) as i32
}

/// Little-endian lane order for vector bitcasts.
fn lanes_le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}

/// General-purpose registers the interpreter's handler reads or writes for `ins` (address
/// registers and GPR operands), as a mask of GPR indices.
pub(super) fn used_gprs(ins: &Instruction) -> u32 {
    let mut m = 0;
    let mut add = |r: Register| {
        if let Some(g) = gpr_ref(r) {
            m |= 1 << g.index;
        }
    };
    for n in 0..ins.op_count() {
        match ins.op_kind(n) {
            OpKind::Register => add(ins.op_register(n)),
            OpKind::Memory => {
                add(ins.memory_base());
                add(ins.memory_index());
            }
            _ => {}
        }
    }
    m
}

impl Lower<'_> {
    /// CR0 and CR4 as they are now (in `CpuState`).
    fn cr0_cr4(&mut self) -> (Value, Value) {
        let cr0 = self.state_load(types::I64, crate::frame::OFF_CR0);
        let cr4 = self.state_load(types::I64, crate::frame::OFF_CR4);
        (cr0, cr4)
    }

    /// The checks every SSE instruction makes (`check_sse`): CR0.EM and CR0.TS clear,
    /// CR4.OSFXSR set (made once per block by [`Self::assert_vec_enabled`]).
    fn sse_enabled(&mut self) -> Value {
        let (cr0, cr4) = self.cr0_cr4();
        let em_ts = (ctl::CR0_EM | ctl::CR0_TS) as i64;
        let bad0 = self.b.ins().band_imm_s(cr0, em_ts);
        let ok0 = self.b.ins().icmp_imm_s(IntCC::Equal, bad0, 0);
        let fx = self.b.ins().band_imm_s(cr4, ctl::CR4_OSFXSR as i64);
        let ok4 = self.b.ins().icmp_imm_s(IntCC::NotEqual, fx, 0);
        self.b.ins().band(ok0, ok4)
    }

    /// The checks every VEX instruction makes (`check_avx`): CR4.OSXSAVE set, XCR0 enabling
    /// SSE and AVX state, CR0.TS clear (made once per block like [`Self::sse_enabled`]; XCR0
    /// changes only through XSETBV, a trampoline call).
    fn avx_enabled(&mut self) -> Value {
        let (cr0, cr4) = self.cr0_cr4();
        let st = self.state;
        let xcr0 = self.b.ins().load(
            types::I64,
            host_mem(),
            st,
            core::mem::offset_of!(CpuState, xcr0) as i32,
        );
        let ts = self.b.ins().band_imm_s(cr0, ctl::CR0_TS as i64);
        let ok0 = self.b.ins().icmp_imm_s(IntCC::Equal, ts, 0);
        let xs = self.b.ins().band_imm_s(cr4, ctl::CR4_OSXSAVE as i64);
        let ok4 = self.b.ins().icmp_imm_s(IntCC::NotEqual, xs, 0);
        let x = self.b.ins().band_imm_s(xcr0, XCR0_SSE_AVX as i64);
        let okx = self
            .b
            .ins()
            .icmp_imm_s(IntCC::Equal, x, XCR0_SSE_AVX as i64);
        let ok = self.b.ins().band(ok0, ok4);
        self.b.ins().band(ok, okx)
    }

    /// Make the block's SSE check (AVX with `vex`) on the main path, once: unless the
    /// instructions are usable, leave before the current one (the interpreter runs it and
    /// raises the #UD or #NM); past that point the main path knows they are — until a
    /// trampoline call, which may change CR0/CR4 or XCR0 and resets the knowledge with
    /// `sse_ok`/`avx_ok` (which hold nothing else). Returns the (now constant) check.
    pub(super) fn assert_vec_enabled(&mut self, vex: bool) -> Value {
        if let Some(v) = if vex { self.avx_ok } else { self.sse_ok } {
            return v;
        }
        let ok = if vex {
            self.avx_enabled()
        } else {
            self.sse_enabled()
        };
        self.fast_or_defer(ok);
        let t = self.b.ins().iconst(types::I8, 1);
        if vex {
            self.avx_ok = Some(t);
        } else {
            self.sse_ok = Some(t);
        }
        t
    }

    /// 16 bytes of `CpuState` at `off` (a register half).
    fn vload(&mut self, off: i32) -> Value {
        self.state_load(types::I8X16, off)
    }

    fn vstore(&mut self, off: i32, v: Value) {
        let v = self.as_bytes(v);
        self.state_store(v, off);
    }

    fn as_bytes(&mut self, v: Value) -> Value {
        if self.b.func.dfg.value_type(v) == types::I8X16 {
            v
        } else {
            self.b.ins().bitcast(types::I8X16, lanes_le(), v)
        }
    }

    fn vzero(&mut self) -> Value {
        let z = self.b.ins().iconst(types::I64, 0);
        let z = self.b.ins().splat(types::I64X2, z);
        self.as_bytes(z)
    }

    /// A lane-wise binary operation on one 128-bit half.
    fn bin(&mut self, op: Bin, a: Value, b: Value) -> Value {
        let le = lanes_le();
        let typed = |l: &mut Self, ty: Type| {
            let x = l.b.ins().bitcast(ty, le, a);
            let y = l.b.ins().bitcast(ty, le, b);
            (x, y)
        };
        match op {
            Bin::And => self.b.ins().band(a, b),
            Bin::AndNot => self.b.ins().band_not(b, a),
            Bin::Or => self.b.ins().bor(a, b),
            Bin::Xor => self.b.ins().bxor(a, b),
            Bin::Add(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().iadd(x, y)
            }
            Bin::Sub(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().isub(x, y)
            }
            Bin::AddSatU(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().uadd_sat(x, y)
            }
            Bin::SubSatU(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().usub_sat(x, y)
            }
            Bin::CmpEq(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().icmp(IntCC::Equal, x, y)
            }
            Bin::CmpGt(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().icmp(IntCC::SignedGreaterThan, x, y)
            }
            Bin::MinU(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().umin(x, y)
            }
            Bin::MaxU(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().umax(x, y)
            }
            Bin::MinS(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().smin(x, y)
            }
            Bin::MaxS(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().smax(x, y)
            }
            Bin::Unpack(lane, high) => {
                // Alternate lanes of a and b, from the low or the high half.
                let mut mask = Vec::with_capacity(16);
                let base = if high { 8 } else { 0 };
                for i in 0..8 / lane {
                    for k in 0..lane {
                        mask.push(base + i * lane + k);
                    }
                    for k in 0..lane {
                        mask.push(16 + base + i * lane + k);
                    }
                }
                let imm = self.b.func.dfg.immediates.push(mask.into());
                self.b.ins().shuffle(a, b, imm)
            }
            Bin::Pshufb => {
                // x86: an index with bit 7 set gives 0, else byte (index & 15). Cranelift's
                // swizzle gives 0 for any index >= 16: keep bit 7 and bits 3:0 only.
                let m = self.b.ins().iconst(types::I8, 0x8f);
                let m = self.b.ins().splat(types::I8X16, m);
                let idx = self.b.ins().band(b, m);
                self.b.ins().swizzle(a, idx)
            }
            Bin::Mul(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().imul(x, y)
            }
            Bin::Avg(ty) => {
                let (x, y) = typed(self, ty);
                self.b.ins().avg_round(x, y)
            }
            Bin::Pack(ty, unsigned) => {
                let (x, y) = typed(self, ty);
                if unsigned {
                    self.b.ins().unarrow(x, y)
                } else {
                    self.b.ins().snarrow(x, y)
                }
            }
        }
    }
}

/// A vector operand's value as (bits 127:0, bits 255:128 when `len` is 32).
type Vec2 = (Value, Option<Value>);

/// Lower `d` if it is covered: `Some(Continue)`.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<super::insn::Outcome> {
    let ins = &d.ins;
    let spec = covered(ins)?;
    let mem_n = (0..ins.op_count()).find(|&n| ins.op_kind(n) == OpKind::Memory);
    let mut ok = l.assert_vec_enabled(spec.vex.is_some());
    // A GPR source is read on the main path (both paths then agree on its variable).
    let gpr_src = (0..ins.op_count())
        .find(|&n| ins.op_kind(n) == OpKind::Register && gpr_ref(ins.op_register(n)).is_some())
        .filter(|&n| n > 0)
        .map(|n| l.read_reg(ins.op_register(n)));
    if mem_n.is_none() {
        // Registers only: nothing else can fail, so no slow path.
        fast_path(l, ins, spec, None, gpr_src);
        l.retire();
        return Some(super::insn::Outcome::Continue);
    }
    // The memory operand's host address (valid on the fast path only).
    let mut host = None;
    if let Some(n) = mem_n {
        let a = l.mem_addr(ins);
        let size = ins.memory_size().size() as u8;
        let table = if n == 0 { l.tlb_write() } else { l.tlb_read() };
        let (hit, entry) = l.tlb_probe(table, a.lin, size);
        ok = l.b.ins().band(ok, hit);
        if spec.align > 1 {
            let low = l.b.ins().band_imm_s(a.lin, spec.align as i64 - 1);
            let al = l.b.ins().icmp_imm_s(IntCC::Equal, low, 0);
            ok = l.b.ins().band(ok, al);
        }
        host = Some((entry, a.lin));
    }
    let gpr_dst = (ins.op0_kind() == OpKind::Register)
        .then(|| gpr_ref(ins.op0_register()))
        .flatten();
    let fast = l.b.create_block();
    let slow = l.b.create_block();
    let join = l.b.create_block();
    l.b.set_cold_block(slow);
    l.b.ins().brif(ok, fast, &[], slow, &[]);
    l.b.seal_block(fast);
    l.b.seal_block(slow);

    // Slow path first (with the compile-time register state of before the instruction): the
    // interpreter's handler does it all, faults included.
    l.b.switch_to_block(slow);
    l.sync_retired_for_device();
    let used = used_gprs(ins);
    l.store_regs(used & l.dirty);
    let status = l.call_exec_insn(d);
    let c =
        l.b.ins()
            .icmp_imm_s(IntCC::NotEqual, status, ret::NEXT as i64);
    // The handler set RIP and `retired` (exactly one instruction retired on NEXT): an exit
    // returns its status and stores only the other dirty registers and the flags (the
    // instruction's GPRs are in memory, possibly written by the handler).
    let (k, stale, dirty) = (l.k, l.ret_stale, l.dirty);
    l.k = 0;
    l.ret_stale = false;
    l.dirty &= !used;
    l.side_exit_if(c, None, Some(status), 0);
    (l.k, l.ret_stale, l.dirty) = (k, stale, dirty);
    l.unsync_retired();
    if let Some(g) = gpr_dst {
        let v = l.b.ins().load(
            types::I64,
            host_mem(),
            l.state,
            crate::frame::gpr_off(g.index),
        );
        l.b.def_var(l.vars[g.index], v);
        l.new_version(g.index);
    }
    l.b.ins().jump(join, &[]);

    l.b.switch_to_block(fast);
    let haddr = host.map(|(entry, lin)| l.host_addr(entry, lin));
    // (A GPR destination is written through `write_reg`: loaded and dirty from here on.)
    fast_path(l, ins, spec, haddr, gpr_src);
    l.b.ins().jump(join, &[]);
    l.b.seal_block(join);
    l.b.switch_to_block(join);
    l.retire();
    Some(super::insn::Outcome::Continue)
}

/// The native semantics (every check passed, a memory operand at host address `haddr`).
fn fast_path(
    l: &mut Lower,
    ins: &Instruction,
    spec: Spec,
    haddr: Option<Value>,
    gpr_src: Option<Value>,
) {
    let len = spec.vex.unwrap_or(16);
    let host = || haddr.expect("memory operand has a host address");
    // Vector operand `n` (register or memory) as halves.
    let src = |l: &mut Lower, n: u32| -> Vec2 {
        match ins.op_kind(n) {
            OpKind::Memory => {
                let h = host();
                let lo = l.b.ins().load(types::I8X16, guest_mem(), h, 0);
                let hi = (len == 32).then(|| l.b.ins().load(types::I8X16, guest_mem(), h, 16));
                (lo, hi)
            }
            _ => {
                let off = vec_off(ins.op_register(n));
                let lo = l.vload(off);
                let hi = (len == 32).then(|| l.vload(off + 16));
                (lo, hi)
            }
        }
    };
    // Write vector operand 0: legacy keeps bits 255:128, VEX.128 zeroes them.
    let dst = |l: &mut Lower, v: Vec2| match ins.op0_kind() {
        OpKind::Memory => {
            let h = host();
            let lo = l.as_bytes(v.0);
            l.b.ins().store(guest_mem(), lo, h, 0);
            if let Some(hi) = v.1 {
                let hi = l.as_bytes(hi);
                l.b.ins().store(guest_mem(), hi, h, 16);
            }
        }
        _ => {
            let off = vec_off(ins.op0_register());
            l.vstore(off, v.0);
            match (spec.vex, v.1) {
                (Some(_), Some(hi)) => l.vstore(off + 16, hi),
                (Some(_), None) => {
                    let z = l.vzero();
                    l.vstore(off + 16, z);
                }
                (None, _) => {}
            }
        }
    };
    // The low qword `q` (I64) of register operand 0, the rest zeroed by the encoding's rule.
    let dst_q = |l: &mut Lower, q: Value| {
        let off = vec_off(ins.op0_register());
        let z = l.b.ins().iconst(types::I64, 0);
        l.state_store(q, off);
        l.state_store(z, off + 8);
        if spec.vex.is_some() {
            let zv = l.vzero();
            l.vstore(off + 16, zv);
        }
    };
    match spec.op {
        Op::Mov => {
            let v = src(l, 1);
            dst(l, v);
        }
        Op::Bin(op) => {
            // Legacy: dst = f(dst, src); VEX: dst = f(src1, src2).
            let (na, nb) = if spec.vex.is_some() { (1, 2) } else { (0, 1) };
            let a = src(l, na);
            let b = src(l, nb);
            let lo = l.bin(op, a.0, b.0);
            let hi = match (a.1, b.1) {
                (Some(x), Some(y)) => Some(l.bin(op, x, y)),
                _ => None,
            };
            dst(l, (lo, hi));
        }
        Op::ShiftImm(ty, kind) => {
            let le = lanes_le();
            let bits = ty.lane_bits() as u64;
            let count = ins.immediate8() as u64;
            let a = src(l, 0).0;
            let a = l.b.ins().bitcast(ty, le, a);
            let r = match kind {
                // A count beyond the lane width clears the lane (Cranelift masks counts).
                0 | 1 if count >= bits => l.vzero(),
                0 => {
                    let c = l.b.ins().iconst(types::I32, count as i64);
                    l.b.ins().ishl(a, c)
                }
                1 => {
                    let c = l.b.ins().iconst(types::I32, count as i64);
                    l.b.ins().ushr(a, c)
                }
                // Arithmetic: a count beyond the width fills with the sign.
                _ => {
                    let c = l.b.ins().iconst(types::I32, count.min(bits - 1) as i64);
                    l.b.ins().sshr(a, c)
                }
            };
            dst(l, (r, None));
        }
        Op::ByteShift(left) => {
            let n = ins.immediate8() as usize;
            let a = src(l, 0).0;
            let z = l.vzero();
            let r = if n > 15 {
                z
            } else {
                // Byte i of the result: a[i - n] (left) / a[i + n] (right), 16 = zero.
                let mask: Vec<u8> = (0..16usize)
                    .map(|i| match left {
                        true if i >= n => (i - n) as u8,
                        false if i + n < 16 => (i + n) as u8,
                        _ => 16,
                    })
                    .collect();
                let imm = l.b.func.dfg.immediates.push(mask.into());
                l.b.ins().shuffle(a, z, imm)
            };
            dst(l, (r, None));
        }
        Op::Pshufd => {
            let a = src(l, 1).0;
            let imm = ins.immediate8();
            let mut mask = [0u8; 16];
            for (lane, m) in mask.chunks_mut(4).enumerate() {
                let from = (imm >> (2 * lane)) & 3;
                for (k, b) in m.iter_mut().enumerate() {
                    *b = from * 4 + k as u8;
                }
            }
            let imm = l.b.func.dfg.immediates.push(mask.to_vec().into());
            let r = l.b.ins().shuffle(a, a, imm);
            dst(l, (r, None));
        }
        Op::MovToVec => {
            let q = match ins.op1_kind() {
                OpKind::Memory if ins.memory_size().size() == 4 => {
                    l.b.ins().uload32(guest_mem(), host(), 0)
                }
                OpKind::Memory => l.b.ins().load(types::I64, guest_mem(), host(), 0),
                _ => match gpr_src {
                    Some(v) => v,
                    None => {
                        let off = vec_off(ins.op1_register());
                        l.state_load(types::I64, off)
                    }
                },
            };
            dst_q(l, q);
        }
        Op::MovFromVec => {
            let q = l.state_load(types::I64, vec_off(ins.op1_register()));
            match ins.op0_kind() {
                OpKind::Memory if ins.memory_size().size() == 4 => {
                    l.b.ins().istore32(guest_mem(), q, host(), 0);
                }
                OpKind::Memory => {
                    l.b.ins().store(guest_mem(), q, host(), 0);
                }
                _ if gpr_ref(ins.op0_register()).is_some() => l.write_reg(ins.op0_register(), q),
                _ => dst_q(l, q),
            }
        }
        Op::MovLow(w) => {
            let (from, to) = (vec_off(ins.op1_register()), vec_off(ins.op0_register()));
            if w == 8 {
                let q = l.state_load(types::I64, from);
                l.state_store(q, to);
            } else {
                let d = l.state_load(types::I32, from);
                l.state_store(d, to);
            }
        }
        Op::LoadHalf(high) => {
            let q = l.b.ins().load(types::I64, guest_mem(), host(), 0);
            let off = vec_off(ins.op0_register()) + if high { 8 } else { 0 };
            l.state_store(q, off);
        }
        Op::StoreHigh => {
            let off = vec_off(ins.op1_register()) + 8;
            let q = l.state_load(types::I64, off);
            l.b.ins().store(guest_mem(), q, host(), 0);
        }
        Op::MergeLow(w) => {
            // Every source read before the destination is written (it may be either source).
            let (d, a, b) = (
                vec_off(ins.op0_register()),
                vec_off(ins.op1_register()),
                vec_off(ins.op2_register()),
            );
            let hi = l.state_load(types::I64, a + 8);
            let lo = if w == 8 {
                l.state_load(types::I64, b)
            } else {
                let e = l.state_uload32(b);
                let m = l.state_uload32(a + 4);
                let m = l.b.ins().ishl_imm_s(m, 32);
                l.b.ins().bor(e, m)
            };
            l.state_store(lo, d);
            l.state_store(hi, d + 8);
            let z = l.vzero();
            l.vstore(d + 16, z);
        }
        Op::Movmsk => {
            let v = src(l, 1);
            let lo = l.b.ins().vhigh_bits(types::I32, v.0);
            let lo = l.b.ins().uextend(types::I64, lo);
            let m = match v.1 {
                Some(hi) => {
                    let hi = l.b.ins().vhigh_bits(types::I32, hi);
                    let hi = l.b.ins().uextend(types::I64, hi);
                    let hi = l.b.ins().ishl_imm_s(hi, 16);
                    l.b.ins().bor(lo, hi)
                }
                None => lo,
            };
            l.write_reg(ins.op0_register(), m);
        }
        Op::Broadcast(vty) => {
            let ty = vty.lane_type();
            let e = match ins.op1_kind() {
                OpKind::Memory => l.b.ins().load(ty, guest_mem(), host(), 0),
                _ => {
                    let off = vec_off(ins.op1_register());
                    l.state_load(ty, off)
                }
            };
            let v = l.b.ins().splat(vty, e);
            let v = l.as_bytes(v);
            dst(l, (v, (len == 32).then_some(v)));
        }
        Op::Vzeroupper => {
            let z = l.vzero();
            let base = core::mem::offset_of!(CpuState, ymm) as i32;
            for i in 0..16 {
                l.vstore(base + 32 * i + 16, z);
            }
        }
    }
}
