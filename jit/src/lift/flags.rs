//! Lazy status flags: a flag-writing instruction records its operands and result; the flag
//! bits are computed only when an instruction reads them (conditions are evaluated straight
//! from the operands where possible), before a trampoline call, or at an exit. Flags that a
//! later instruction overwrites first are never computed (dead-flag elimination).
//!
//! The formulas are those of `lockstep_interp::flags` (add/sub/logic, INC/DEC keep CF).

use super::{host_mem, Lower, RFLAGS};
use crate::frame::OFF_RFLAGS;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, InstructionData, Opcode, Value};
use iced_x86::ConditionCode;
use lockstep_interp::state::flags::{AF, CF, OF, PF, SF, STATUS, ZF};

/// The six status flags as iced reports an instruction's flag use (`rflags_read`,
/// `rflags_modified`).
pub const ICED_STATUS: u32 = {
    use iced_x86::RflagsBits as R;
    R::OF | R::SF | R::ZF | R::AF | R::CF | R::PF
};

/// For each instruction of `insns`: are the status flags it leaves dead — does a later
/// instruction of the block overwrite all of them from its operands alone (ADD, SUB, CMP,
/// AND, OR, XOR, TEST, NEG of registers and immediates) before anything could observe them?
/// Everything in between must be a native instruction on general-purpose registers and
/// immediates that neither reads the flags nor can leave the block (no memory operand, no
/// stack access, no branch, no DIV/IDIV): an exit or a trampoline call would store the flags
/// as they are. One backward pass over the block.
pub fn dead_after(insns: &[lockstep_interp::decode::DecodedInsn]) -> Vec<bool> {
    use iced_x86::{FlowControl, Mnemonic as M, OpKind};
    let status = ICED_STATUS;
    let mut dead = vec![false; insns.len()];
    // Whether the flags left before the instruction looked at are dead.
    let mut ahead = false;
    for (i, d) in insns.iter().enumerate().rev() {
        dead[i] = ahead;
        let ins = &d.ins;
        let plain = (0..ins.op_count()).all(|k| match ins.op_kind(k) {
            OpKind::Register => ins.op_register(k).is_gpr(),
            OpKind::Immediate8
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate32to64
            | OpKind::Immediate64 => true,
            _ => false,
        });
        let safe = plain
            && ins.flow_control() == FlowControl::Next
            && ins.stack_pointer_increment() == 0
            && !matches!(ins.mnemonic(), M::Div | M::Idiv)
            && ins.rflags_read() & status == 0
            && super::insn::is_native(d);
        ahead = safe
            && (ahead
                || matches!(
                    ins.mnemonic(),
                    M::Add | M::Sub | M::Cmp | M::And | M::Or | M::Xor | M::Test | M::Neg
                ));
    }
    dead
}

/// The operation that defined some flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagOp {
    /// a + b (CF = carry out).
    Add,
    /// a - b (also CMP).
    Sub,
    /// AND/OR/XOR/TEST: CF = OF = AF = 0.
    Logic,
    /// a + 1, CF untouched.
    Inc,
    /// a - 1, CF untouched.
    Dec,
    /// a + b + CF-in (`Pending::cin`, 0/1).
    Adc,
    /// a - b - CF-in (`Pending::cin`, 0/1).
    Sbb,
    /// SHL/SHR/SAR by a constant count `1..width-1` (`a` = original operand). AF = 0; OF as
    /// for a count of 1 (host rule, `lockstep_interp::ops::shift`).
    Shl(u8),
    Shr(u8),
    Sar(u8),
    /// ROL/ROR by a constant count: CF (and OF when the record's mask has it) only.
    Rol,
    Ror,
    /// IMUL: `res` = low half, `b` = overflow (0/1). CF = OF = overflow, SF/PF from the
    /// result, ZF = AF = 0 (host rule, `lockstep_interp::ops::muldiv`).
    Mul,
    /// CF and OF precomputed in `b` (as their RFLAGS bits), SF/ZF/PF from `res`, AF = 0:
    /// shifts and rotates by CL, SHLD/SHRD, BT* (`lift::shift`, `lift::bit`).
    Bits,
    /// As `Bits`, unless `Pending::cin` is 1 (a run-time shift count of 0): then the flags
    /// are unchanged, their old values being the bits of `b` (the whole RFLAGS).
    BitsOrKeep,
    /// A record handed over from a predecessor block of the region: the operation, size and
    /// the flags it defines are only known at run time, encoded in `Pending::code` (see
    /// [`encode`]). Its flags are computed by the `fold_flags` helper, only on the paths that
    /// need them (exits, trampoline calls, a rare read before the flags are overwritten).
    Dyn,
}

/// The operation number of a raw record ([`RAW_CODE`]).
pub const RAW_OP: u64 = 16;

/// The run-time record a baseline function hands over at a chained exit (`base::emit`,
/// "Flags"): the host's flags as LAHF and SETO leave them in its `res` (RFLAGS' low byte in
/// bits 8–15, OF in bit 0; see [`raw_status`]), already exact for every flag its mask
/// defines (every status flag; a mask reduced as for any record when later instructions
/// redefine some). Not an operation of the static lowering: only `fold_flags` and the
/// conditions of run-time records (`lift::flags_dyn`) read it.
pub const RAW_CODE: u64 = RAW_OP | 8 << SIZE_SHIFT | STATUS << MASK_SHIFT;

/// The bits of a code that hold the operation number (see [`encode`]).
pub const OP_FIELD: u64 = 0x1f;
/// Where [`encode`] puts the shift count, the operand size and the flags a record defines,
/// and the bits of the count and size fields.
const COUNT_SHIFT: u32 = 5;
const COUNT_FIELD: u64 = 0x3f << COUNT_SHIFT;
pub const SIZE_SHIFT: u32 = 11;
pub const SIZE_FIELD: u64 = 0xf << SIZE_SHIFT;
pub const MASK_SHIFT: u32 = 15;
/// The bits of a code below its mask (operation, count, size).
pub const BELOW_MASK: u64 = (1 << MASK_SHIFT) - 1;

// Every code fits a sign-extended 32-bit immediate (one store of it).
const _: () = assert!(RAW_CODE < 1 << 31 && (0xfff << MASK_SHIFT) < 1u64 << 31);

/// `code` (of [`encode`], or [`RAW_CODE`]) as the sign-extended 32-bit immediate of a store
/// or compare of the 64-bit field.
pub fn code_imm(code: u64) -> i32 {
    debug_assert!(code < 1 << 31, "{code:#x}");
    code as i32
}

/// RFLAGS' status bits from a raw capture (the layout of [`RAW_CODE`]'s `res`).
pub fn raw_status(raw: u64) -> u64 {
    ((raw >> 8) & (CF | PF | AF | ZF | SF)) | (raw & 1) << 11
}

/// Run-time encoding of a static record (`Pending` with a constant operation): operation
/// number in bits 0..5, shift count in bits 5..11, size in bits 11..15 ([`SIZE_SHIFT`]), the
/// flags it defines (RFLAGS bits 0..12) in bits 15..27 ([`MASK_SHIFT`]). 0: no record.
/// ([`RAW_CODE`] is the one run-time record that is not a static one's.) Below 2^31, so
/// that compiled code stores and compares a code as an immediate ([`code_imm`]).
pub fn encode(op: FlagOp, size: u8, mask: u64) -> u64 {
    let (n, count) = match op {
        FlagOp::Add => (1, 0),
        FlagOp::Sub => (2, 0),
        FlagOp::Logic => (3, 0),
        FlagOp::Inc => (4, 0),
        FlagOp::Dec => (5, 0),
        FlagOp::Adc => (6, 0),
        FlagOp::Sbb => (7, 0),
        FlagOp::Shl(c) => (8, c),
        FlagOp::Shr(c) => (9, c),
        FlagOp::Sar(c) => (10, c),
        FlagOp::Rol => (11, 0),
        FlagOp::Ror => (12, 0),
        FlagOp::Mul => (13, 0),
        FlagOp::Bits => (14, 0),
        FlagOp::BitsOrKeep => (15, 0),
        FlagOp::Dyn => unreachable!("a run-time record has no static encoding"),
    };
    debug_assert!(
        count < 64 && size <= 8 && mask <= 0xfff,
        "{op:?} {size} {mask:#x}"
    );
    n | (count as u64) << COUNT_SHIFT | (size as u64) << SIZE_SHIFT | mask << MASK_SHIFT
}

/// Inverse of [`encode`] for the helper: (operation, size, defined flags); `None` for 0 or an
/// unknown number.
pub fn decode(code: u64) -> Option<(FlagOp, u8, u64)> {
    let count = ((code & COUNT_FIELD) >> COUNT_SHIFT) as u8;
    let op = match code & OP_FIELD {
        1 => FlagOp::Add,
        2 => FlagOp::Sub,
        3 => FlagOp::Logic,
        4 => FlagOp::Inc,
        5 => FlagOp::Dec,
        6 => FlagOp::Adc,
        7 => FlagOp::Sbb,
        8 => FlagOp::Shl(count),
        9 => FlagOp::Shr(count),
        10 => FlagOp::Sar(count),
        11 => FlagOp::Rol,
        12 => FlagOp::Ror,
        13 => FlagOp::Mul,
        14 => FlagOp::Bits,
        15 => FlagOp::BitsOrKeep,
        _ => return None,
    };
    Some((
        op,
        ((code & SIZE_FIELD) >> SIZE_SHIFT) as u8,
        code >> MASK_SHIFT,
    ))
}

/// The RFLAGS bits `mask` as operation `op` on `size`-byte operands defines them (`a`, `b`,
/// `res` zero-extended, `cin` 0/1): the same formulas as the lowering's `flag_bits`, for the
/// `fold_flags` helper.
pub fn bits_of(op: FlagOp, size: u8, mask: u64, a: u64, b: u64, res: u64, cin: u64) -> u64 {
    use FlagOp as F;
    let sb = (size as u32 * 8).clamp(8, 64) - 1;
    let bit = |v: u64, n: u32| (v >> n.min(63)) & 1;
    if op == F::BitsOrKeep && cin != 0 {
        return b & mask;
    }
    let mut f = 0;
    if mask & CF != 0 {
        f |= match op {
            F::Add => (res < a) as u64,
            F::Sub => (a < b) as u64,
            F::Adc => ((res < a) as u64) | ((res == a) as u64 & cin),
            F::Sbb => ((a < b) as u64) | ((a == b) as u64 & cin),
            F::Shl(c) => bit(a, (sb + 1).wrapping_sub(c as u32)),
            F::Shr(c) | F::Sar(c) => bit(a, (c as u32).wrapping_sub(1)),
            F::Rol => res & 1,
            F::Ror => bit(res, sb),
            F::Mul => b & 1,
            F::Bits | F::BitsOrKeep => b & CF,
            F::Logic | F::Inc | F::Dec | F::Dyn => 0,
        };
    }
    if mask & PF != 0 && (res as u8).count_ones().is_multiple_of(2) {
        f |= PF;
    }
    let arith = matches!(op, F::Add | F::Sub | F::Adc | F::Sbb | F::Inc | F::Dec);
    if mask & AF != 0 && arith {
        f |= (a ^ b ^ res) & AF;
    }
    if mask & ZF != 0 && op != F::Mul && res == 0 {
        f |= ZF;
    }
    if mask & SF != 0 {
        f |= bit(res, sb) << 7;
    }
    if mask & OF != 0 {
        let t = match op {
            F::Add | F::Inc | F::Adc => bit((a ^ res) & (b ^ res), sb),
            F::Sub | F::Dec | F::Sbb => bit((a ^ b) & (a ^ res), sb),
            F::Shl(_) | F::Rol => bit(a ^ (a << 1), sb),
            F::Shr(_) => bit(a, sb),
            F::Ror => bit(a ^ (a << sb), sb),
            F::Mul => b & 1,
            F::Bits | F::BitsOrKeep => (b & OF) >> 11,
            F::Logic | F::Sar(_) | F::Dyn => 0,
        };
        f |= t << 11;
    }
    f & mask
}

/// Flags defined by one operation and not yet folded into RFLAGS. `a`, `b`, `res` are 64-bit
/// values holding the `size`-byte operands zero-extended.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub op: FlagOp,
    pub a: Value,
    pub b: Value,
    pub res: Value,
    pub size: u8,
    /// Flags (RFLAGS bits) this record still defines.
    pub mask: u64,
    /// Carry/borrow in of ADC/SBB (0/1), else unused.
    pub cin: Option<Value>,
    /// [`FlagOp::Dyn`]: the run-time encoding ([`encode`]).
    pub code: Option<Value>,
}

/// Flags an operation writes.
pub fn written(op: FlagOp) -> u64 {
    match op {
        FlagOp::Inc | FlagOp::Dec => STATUS & !CF,
        FlagOp::Rol | FlagOp::Ror => CF | OF,
        // Upper bound: the run-time record defines at most the status flags.
        _ => STATUS,
    }
}

/// Flags a condition code reads.
fn cc_reads(cc: ConditionCode) -> u64 {
    use ConditionCode as C;
    match cc {
        C::None => 0,
        C::o | C::no => OF,
        C::b | C::ae => CF,
        C::e | C::ne => ZF,
        C::be | C::a => CF | ZF,
        C::s | C::ns => SF,
        C::p | C::np => PF,
        C::l | C::ge => SF | OF,
        C::le | C::g => ZF | SF | OF,
    }
}

impl Lower<'_> {
    /// Record that `op` defined its flags.
    pub fn set_flags(&mut self, op: FlagOp, a: Value, b: Value, res: Value, size: u8) {
        let w = written(op);
        self.set_flags_masked(op, a, b, res, size, w, None);
    }

    /// Record that `op` defined the flags `w` (ADC/SBB pass their carry in as `cin`).
    #[allow(clippy::too_many_arguments)]
    pub fn set_flags_masked(
        &mut self,
        op: FlagOp,
        a: Value,
        b: Value,
        res: Value,
        size: u8,
        w: u64,
        cin: Option<Value>,
    ) {
        for p in &mut self.pending {
            p.mask &= !w;
        }
        self.pending.retain(|p| p.mask != 0);
        self.pending.push(Pending {
            op,
            a,
            b,
            res,
            size,
            mask: w,
            cin,
            code: None,
        });
    }

    /// `v`'s low `size` bytes as a sized integer (for signed compares).
    pub fn narrow(&mut self, v: Value, size: u8) -> Value {
        match self.defining(v) {
            // `uextend.i64 x` narrowed back to x's width is x.
            Some(InstructionData::Unary {
                opcode: Opcode::Uextend,
                arg,
            }) if self.b.func.dfg.value_type(arg).bytes() == u32::from(size) => return arg,
            // A constant is made at the narrow type (an immediate operand for the host).
            Some(InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            }) if size < 8 => {
                let ty = match size {
                    1 => types::I8,
                    2 => types::I16,
                    _ => types::I32,
                };
                let m = (1u64 << (u32::from(size) * 8)) - 1;
                return self.b.ins().iconst(ty, (imm.bits() as u64 & m) as i64);
            }
            _ => {}
        }
        match size {
            1 => self.b.ins().ireduce(types::I8, v),
            2 => self.b.ins().ireduce(types::I16, v),
            4 => self.b.ins().ireduce(types::I32, v),
            _ => v,
        }
    }

    fn bit(&mut self, c: Value, pos: u32) -> Value {
        let v = self.b.ins().uextend(types::I64, c);
        if pos == 0 {
            v
        } else {
            self.b.ins().ishl_imm_s(v, pos as i64)
        }
    }

    /// Bit `sb` of `v`, moved to `pos`.
    fn move_bit(&mut self, v: Value, sb: u32, pos: u32) -> Value {
        let t = self.b.ins().ushr_imm_s(v, sb as i64);
        let t = self.b.ins().band_imm_s(t, 1);
        if pos == 0 {
            t
        } else {
            self.b.ins().ishl_imm_s(t, pos as i64)
        }
    }

    /// The RFLAGS bits `want` (a subset of `p.mask`) as defined by `p`.
    fn flag_bits(&mut self, p: Pending, want: u64) -> Value {
        use FlagOp as F;
        let sb = p.size as u32 * 8 - 1;
        let mut parts: Vec<Value> = Vec::new();
        let (a, b, res) = (p.a, p.b, p.res);
        if want & CF != 0 {
            let c = match p.op {
                F::Add => {
                    let c = self.b.ins().icmp(IntCC::UnsignedLessThan, res, a);
                    Some(self.bit(c, 0))
                }
                F::Sub => {
                    let c = self.b.ins().icmp(IntCC::UnsignedLessThan, a, b);
                    Some(self.bit(c, 0))
                }
                F::Adc | F::Sbb => {
                    // Carry out: res < a (ADC) / a < b (SBB), or equality with a carry in.
                    let (x, y) = if p.op == F::Adc { (res, a) } else { (a, b) };
                    let lt = self.b.ins().icmp(IntCC::UnsignedLessThan, x, y);
                    let lt = self.bit(lt, 0);
                    let eq = self.b.ins().icmp(IntCC::Equal, x, y);
                    let eq = self.bit(eq, 0);
                    let cin = p.cin.expect("ADC/SBB carry in");
                    let eq = self.b.ins().band(eq, cin);
                    Some(self.b.ins().bor(lt, eq))
                }
                F::Shl(c) => Some(self.move_bit(a, sb + 1 - c as u32, 0)),
                F::Shr(c) | F::Sar(c) => Some(self.move_bit(a, c as u32 - 1, 0)),
                F::Rol => Some(self.b.ins().band_imm_s(res, 1)),
                F::Ror => Some(self.move_bit(res, sb, 0)),
                F::Mul => Some(b),
                F::Bits | F::BitsOrKeep => Some(self.b.ins().band_imm_s(b, CF as i64)),
                F::Logic | F::Inc | F::Dec | F::Dyn => None,
            };
            parts.extend(c);
        }
        if want & PF != 0 {
            let t = self.b.ins().band_imm_s(res, 0xff);
            let t = self.b.ins().popcnt(t);
            let t = self.b.ins().band_imm_s(t, 1);
            let t = self.b.ins().bxor_imm_s(t, 1);
            parts.push(self.b.ins().ishl_imm_s(t, 2));
        }
        let arith = matches!(p.op, F::Add | F::Sub | F::Adc | F::Sbb | F::Inc | F::Dec);
        if want & AF != 0 && arith {
            let t = self.b.ins().bxor(a, b);
            let t = self.b.ins().bxor(t, res);
            parts.push(self.b.ins().band_imm_s(t, AF as i64));
        }
        if want & ZF != 0 && p.op != F::Mul {
            let c = self.b.ins().icmp_imm_s(IntCC::Equal, res, 0);
            parts.push(self.bit(c, 6));
        }
        if want & SF != 0 {
            parts.push(self.move_bit(res, sb, 7));
        }
        if want & OF != 0 {
            let t = match p.op {
                F::Add | F::Inc | F::Adc => {
                    let x = self.b.ins().bxor(a, res);
                    let y = self.b.ins().bxor(b, res);
                    Some(self.b.ins().band(x, y))
                }
                F::Sub | F::Dec | F::Sbb => {
                    let x = self.b.ins().bxor(a, b);
                    let y = self.b.ins().bxor(a, res);
                    Some(self.b.ins().band(x, y))
                }
                // MSB(a) ^ MSB-1(a).
                F::Shl(_) | F::Rol => {
                    let x = self.b.ins().ishl_imm_s(a, 1);
                    Some(self.b.ins().bxor(a, x))
                }
                F::Shr(_) => Some(a),
                // MSB(a) ^ LSB(a).
                F::Ror => {
                    let x = self.b.ins().ishl_imm_s(a, sb as i64);
                    Some(self.b.ins().bxor(a, x))
                }
                F::Mul => {
                    parts.push(self.b.ins().ishl_imm_s(b, 11));
                    None
                }
                F::Bits | F::BitsOrKeep => {
                    parts.push(self.b.ins().band_imm_s(b, OF as i64));
                    None
                }
                F::Logic | F::Sar(_) | F::Dyn => None,
            };
            if let Some(t) = t {
                parts.push(self.move_bit(t, sb, 11));
            }
        }
        let mut acc = match parts.first() {
            Some(&v) => v,
            None => self.iconst(0),
        };
        for &v in parts.iter().skip(1) {
            acc = self.b.ins().bor(acc, v);
        }
        if p.op == F::BitsOrKeep {
            // A count of 0: the old flags, kept in `b`.
            let keep = self.b.ins().band_imm_s(b, want as i64);
            let cin = p.cin.expect("BitsOrKeep has its zero-count flag");
            let z = self.b.ins().icmp_imm_s(IntCC::NotEqual, cin, 0);
            acc = self.b.ins().select(z, keep, acc);
        }
        acc
    }

    /// RFLAGS with the pending flags folded in, computed in the current block without
    /// changing the compile-time state; `None` when memory already holds it.
    pub fn flags_value(&mut self) -> Option<Value> {
        if self.pending.is_empty() {
            return (self.dirty & (1 << RFLAGS) != 0).then(|| self.b.use_var(self.vars[RFLAGS]));
        }
        let mut rf = if self.loaded & (1 << RFLAGS) != 0 {
            self.b.use_var(self.vars[RFLAGS])
        } else {
            self.b
                .ins()
                .load(types::I64, host_mem(), self.state, OFF_RFLAGS)
        };
        for p in self.pending.clone() {
            rf = self.fold_one(rf, p);
        }
        Some(rf)
    }

    /// `rf` with the flags of record `p` folded in.
    fn fold_one(&mut self, rf: Value, p: Pending) -> Value {
        if p.op == FlagOp::Dyn {
            return self.fold_dyn(rf, p);
        }
        if self.cold {
            // The same formulas in the helper: one call instead of a few dozen instructions.
            let code = self.iconst(encode(p.op, p.size, p.mask));
            let cin = match p.cin {
                Some(c) => c,
                None => code,
            };
            let q = Pending {
                op: FlagOp::Dyn,
                code: Some(code),
                cin: Some(cin),
                ..p
            };
            return self.fold_dyn(rf, q);
        }
        let bits = self.flag_bits(p, p.mask);
        let rf = self.b.ins().band_imm_s(rf, !(p.mask as i64));
        self.b.ins().bor(rf, bits)
    }

    /// Fold a run-time record through the `fold_flags` helper, keeping the bits outside its
    /// compile-time mask (a later instruction of this block may have redefined them).
    fn fold_dyn(&mut self, rf: Value, p: Pending) -> Value {
        self.stats.dyn_folds += 1;
        let code = p.code.expect("run-time record has a code");
        let cin = p.cin.expect("run-time record has a carry in");
        let folded = self.call_fold(rf, [code, p.a, p.b, p.res, cin]);
        if p.mask == STATUS {
            return folded;
        }
        let keep = self.b.ins().band_imm_s(rf, !(p.mask as i64));
        let new = self.b.ins().band_imm_s(folded, p.mask as i64);
        self.b.ins().bor(keep, new)
    }

    /// Hand the pending flags over to a successor in the region: at most two records travel
    /// as run-time records in the edge variables (the last one, and before it the latest one
    /// that still defines CF — what an INC/DEC leaves behind); any other record is folded
    /// into the RFLAGS variable here. Changes no compile-time state.
    pub fn flags_to_edge(&mut self, edge: &super::EdgeVars) {
        let pending = self.pending.clone();
        let n = pending.len();
        let last = n.checked_sub(1);
        // (Only a record reduced to exactly CF; anything else is folded here, in order.)
        let cf_rec = last
            .and_then(|l| (0..l).rev().find(|&i| pending[i].mask & CF != 0))
            .filter(|&i| pending[i].mask == CF);
        let mut rf: Option<Value> = None;
        for (i, p) in pending.iter().enumerate() {
            if Some(i) == last || Some(i) == cf_rec {
                continue;
            }
            let base = match rf {
                Some(v) => v,
                None => self.gpr(super::RFLAGS),
            };
            rf = Some(self.fold_one(base, *p));
        }
        if let Some(v) = rf {
            self.b.def_var(self.vars[super::RFLAGS], v);
        }
        let slots = [(cf_rec, CF, &edge.a), (last, STATUS, &edge.b)];
        for (rec, keep, vars) in slots {
            let vals = match rec.map(|i| pending[i]) {
                None => None,
                Some(p) if p.op == FlagOp::Dyn => {
                    let code = p.code.expect("run-time record has a code");
                    let code = if p.mask == keep {
                        code
                    } else {
                        // Only the flags it still defines at compile time.
                        self.b
                            .ins()
                            .band_imm_s(code, ((p.mask << MASK_SHIFT) | BELOW_MASK) as i64)
                    };
                    Some((code, p.a, p.b, p.res, p.cin.expect("carry in")))
                }
                Some(p) => {
                    let code = self.iconst(encode(p.op, p.size, p.mask));
                    let cin = match p.cin {
                        Some(c) => c,
                        None => self.edge_zero(),
                    };
                    Some((code, p.a, p.b, p.res, cin))
                }
            };
            let vals = match vals {
                Some(v) => v,
                None => {
                    let z = self.edge_zero();
                    (z, z, z, z, z)
                }
            };
            for (var, v) in vars.iter().zip([vals.0, vals.1, vals.2, vals.3, vals.4]) {
                self.b.def_var(*var, v);
            }
        }
    }

    /// The zero that every edge hands over for an empty record slot or a carry in of 0: one
    /// value defined at the region's start, so that a slot every edge into a block leaves
    /// empty is the same value on all of them, and SSA construction drops its block
    /// parameter (distinct constants would keep it, and the loop would move it around).
    fn edge_zero(&self) -> Value {
        self.region_zero
            .expect("a region defines its zero before lowering its blocks")
    }

    /// At the start of a region block entered from other blocks: the two run-time records of
    /// the edge variables are pending (the CF one first).
    pub fn flags_from_edge(&mut self, edge: &super::EdgeVars) {
        self.pending.clear();
        for (vars, mask) in [(&edge.a, CF), (&edge.b, STATUS)] {
            let v: Vec<Value> = vars.iter().map(|&x| self.b.use_var(x)).collect();
            self.pending.push(Pending {
                op: FlagOp::Dyn,
                a: v[1],
                b: v[2],
                res: v[3],
                size: 8,
                mask,
                cin: Some(v[4]),
                code: Some(v[0]),
            });
        }
    }

    /// The two run-time records a region member took from its edges, as `[code, a, b, res,
    /// cin]` (the CF one first), when they are all that is pending: nothing since has
    /// defined a flag.
    pub fn edge_records(&self) -> Option<([Value; 5], [Value; 5])> {
        let [c, s] = self.pending.as_slice() else {
            return None;
        };
        let untouched = |p: &Pending, mask| p.op == FlagOp::Dyn && p.mask == mask;
        if !(untouched(c, CF) && untouched(s, STATUS)) {
            return None;
        }
        let rec = |p: &Pending| -> Option<[Value; 5]> { Some([p.code?, p.a, p.b, p.res, p.cin?]) };
        Some((rec(c)?, rec(s)?))
    }

    /// Would [`Lower::handover_record`] give a record (one pending record defining every
    /// status flag)?
    pub fn can_hand_over(&self) -> bool {
        matches!(self.pending.as_slice(), [p] if p.mask == STATUS)
    }

    /// The pending flags as one run-time record `[code, a, b, res, cin]` to hand to the next
    /// block through the frame, when they are exactly one record defining every status flag.
    pub fn handover_record(&mut self) -> Option<[Value; 5]> {
        if !self.can_hand_over() {
            return None;
        }
        let p = self.pending[0];
        let code = match p.code {
            Some(c) if p.op == FlagOp::Dyn => c,
            _ => self.iconst(encode(p.op, p.size, p.mask)),
        };
        let cin = match p.cin {
            Some(c) => c,
            None => self.iconst(0),
        };
        Some([code, p.a, p.b, p.res, cin])
    }

    /// Which fields of the record [`Self::handover_record`] returns (`[code, a, b, res, cin]`)
    /// the flags it defines depend on ([`bits_of`]): a logic operation's only on the result;
    /// `cin` only ADC's, SBB's and BitsOrKeep's (whose records carry one) and a run-time
    /// record's. An exit stores only those: the frame's other fields keep stale values that
    /// nothing reads for that code.
    pub fn record_fields_used(&self) -> [bool; 5] {
        let p = &self.pending[0];
        let operands = !matches!(p.op, FlagOp::Logic);
        let cin = p.cin.is_some() || matches!(p.op, FlagOp::BitsOrKeep | FlagOp::Dyn);
        [true, operands, operands, true, cin]
    }

    /// `fold_flags(rf, record)` through the helper.
    pub fn call_fold(&mut self, rf: Value, rec: [Value; 5]) -> Value {
        let f = self.iconst(self.sigs.addrs.fold);
        let call = self.b.ins().call_indirect(
            self.sigs.fold,
            f,
            &[rf, rec[0], rec[1], rec[2], rec[3], rec[4]],
        );
        self.b.inst_results(call)[0]
    }

    /// A single block's start: the record a chained jump handed over (code 0: none) defines
    /// the status flags, pending like any other run-time record.
    pub fn take_incoming(&mut self, rec: [Value; 5]) {
        self.pending.clear();
        self.pending.push(Pending {
            op: FlagOp::Dyn,
            a: rec[1],
            b: rec[2],
            res: rec[3],
            size: 8,
            mask: STATUS,
            cin: Some(rec[4]),
            code: Some(rec[0]),
        });
    }

    /// A region's start whose entry block reads flags before writing them: fold the handed
    /// over record (if any) into RFLAGS, in memory (region blocks start with memory up to
    /// date) and in its variable if loaded.
    pub fn fold_incoming(&mut self, rec: [Value; 5]) {
        let base = self
            .b
            .ins()
            .load(types::I64, host_mem(), self.state, OFF_RFLAGS);
        let fold = self.b.create_block();
        let join = self.b.create_block();
        let rf = self.b.append_block_param(join, types::I64);
        self.b.ins().brif(rec[0], fold, &[], join, &[base.into()]);
        self.b.seal_block(fold);
        self.b.switch_to_block(fold);
        let v = self.call_fold(base, rec);
        self.b.ins().store(host_mem(), v, self.state, OFF_RFLAGS);
        self.b.ins().jump(join, &[v.into()]);
        self.b.seal_block(join);
        self.b.switch_to_block(join);
        if self.loaded & (1 << super::RFLAGS) != 0 {
            self.b.def_var(self.vars[super::RFLAGS], rf);
        }
    }

    /// Fold all pending flags into the RFLAGS variable (main path).
    pub fn sync_flags(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let rf = self.flags_value().expect("pending flags give a value");
        self.pending.clear();
        self.set_gpr(RFLAGS, rf);
    }

    /// The condition `cc` as a boolean (I8), from the operands of the operation that set the
    /// flags it reads when there is one, else from the RFLAGS bits.
    pub fn cond(&mut self, cc: ConditionCode) -> Value {
        let need = cc_reads(cc);
        if need == 0 {
            return self.b.ins().iconst(types::I8, 1);
        }
        if let Some(p) = self.pending.iter().copied().find(|p| p.mask & need == need) {
            if let Some(v) = self.cond_direct(p, cc) {
                return v;
            }
        }
        self.sync_flags();
        let rf = self.gpr(RFLAGS);
        self.cond_of_rflags(rf, cc)
    }

    /// The condition `cc` from the RFLAGS value `rf`.
    pub(super) fn cond_of_rflags(&mut self, rf: Value, cc: ConditionCode) -> Value {
        use ConditionCode as C;
        let bit = |l: &mut Lower, m: u64| {
            let t = l.b.ins().band_imm_s(rf, m as i64);
            l.b.ins().icmp_imm_s(IntCC::NotEqual, t, 0)
        };
        let (v, negate) = match cc {
            C::None => unreachable!("handled above"),
            C::o | C::no => (bit(self, OF), cc == C::no),
            C::b | C::ae => (bit(self, CF), cc == C::ae),
            C::e | C::ne => (bit(self, ZF), cc == C::ne),
            C::be | C::a => (bit(self, CF | ZF), cc == C::a),
            C::s | C::ns => (bit(self, SF), cc == C::ns),
            C::p | C::np => (bit(self, PF), cc == C::np),
            C::l | C::ge | C::le | C::g => {
                // SF != OF: bit 7 xor bit 11.
                let s = self.move_bit(rf, 7, 0);
                let o = self.move_bit(rf, 11, 0);
                let x = self.b.ins().bxor(s, o);
                let lt = if matches!(cc, C::le | C::g) {
                    let z = self.move_bit(rf, 6, 0);
                    self.b.ins().bor(x, z)
                } else {
                    x
                };
                let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, lt, 0);
                (c, matches!(cc, C::ge | C::g))
            }
        };
        if negate {
            self.b.ins().bxor_imm_s(v, 1)
        } else {
            v
        }
    }

    /// Conditions computable straight from the operands of `p`.
    fn cond_direct(&mut self, p: Pending, cc: ConditionCode) -> Option<Value> {
        use ConditionCode as C;
        let sized = |l: &mut Lower, v: Value| l.narrow(v, p.size);
        let ic = |l: &mut Lower, c: IntCC, x: Value, y: Value| l.b.ins().icmp(c, x, y);
        Some(match (p.op, cc) {
            (FlagOp::Dyn, _) => return self.cond_dyn(p, cc),
            (FlagOp::Sub, _) => {
                // At the operands' width: a 32-bit compare of registers whose zero extension
                // (`mov %eax,%eax`) nothing else needs.
                let (a, b) =
                    if p.size == 4 && matches!(cc, C::b | C::ae | C::e | C::ne | C::be | C::a) {
                        (sized(self, p.a), sized(self, p.b))
                    } else {
                        (p.a, p.b)
                    };
                match cc {
                    C::b => ic(self, IntCC::UnsignedLessThan, a, b),
                    C::ae => ic(self, IntCC::UnsignedGreaterThanOrEqual, a, b),
                    C::e => ic(self, IntCC::Equal, a, b),
                    C::ne => ic(self, IntCC::NotEqual, a, b),
                    C::be => ic(self, IntCC::UnsignedLessThanOrEqual, a, b),
                    C::a => ic(self, IntCC::UnsignedGreaterThan, a, b),
                    C::l | C::ge | C::le | C::g | C::s | C::ns => {
                        let (x, y) = if matches!(cc, C::s | C::ns) {
                            let r = sized(self, p.res);
                            let z = self.narrow_zero(p.size);
                            (r, z)
                        } else {
                            (sized(self, a), sized(self, b))
                        };
                        let c = match cc {
                            C::l | C::s => IntCC::SignedLessThan,
                            C::ge | C::ns => IntCC::SignedGreaterThanOrEqual,
                            C::le => IntCC::SignedLessThanOrEqual,
                            _ => IntCC::SignedGreaterThan,
                        };
                        ic(self, c, x, y)
                    }
                    _ => return None,
                }
            }
            (FlagOp::Logic, _) => {
                let r = sized(self, p.res);
                let z = self.narrow_zero(p.size);
                let c = match cc {
                    C::e | C::be => IntCC::Equal,
                    C::ne | C::a => IntCC::NotEqual,
                    C::s | C::l => IntCC::SignedLessThan,
                    C::ns | C::ge => IntCC::SignedGreaterThanOrEqual,
                    C::le => IntCC::SignedLessThanOrEqual,
                    C::g => IntCC::SignedGreaterThan,
                    C::b | C::o => return Some(self.b.ins().iconst(types::I8, 0)),
                    C::ae | C::no => return Some(self.b.ins().iconst(types::I8, 1)),
                    _ => return None,
                };
                ic(self, c, r, z)
            }
            (
                FlagOp::Add
                | FlagOp::Inc
                | FlagOp::Dec
                | FlagOp::Adc
                | FlagOp::Sbb
                | FlagOp::Shl(_)
                | FlagOp::Shr(_)
                | FlagOp::Sar(_)
                | FlagOp::Bits,
                C::e | C::ne | C::s | C::ns,
            ) => {
                let r = sized(self, p.res);
                let z = self.narrow_zero(p.size);
                let c = match cc {
                    C::e => IntCC::Equal,
                    C::ne => IntCC::NotEqual,
                    C::s => IntCC::SignedLessThan,
                    _ => IntCC::SignedGreaterThanOrEqual,
                };
                ic(self, c, r, z)
            }
            // CF of an addition (ADC chains read it): `flag_bits`' formulas, without folding
            // every other flag into RFLAGS first.
            (FlagOp::Add, C::b | C::ae) => {
                let c = if cc == C::b {
                    IntCC::UnsignedLessThan
                } else {
                    IntCC::UnsignedGreaterThanOrEqual
                };
                ic(self, c, p.res, p.a)
            }
            (FlagOp::Adc | FlagOp::Sbb, C::b | C::ae) => {
                let (x, y) = if p.op == FlagOp::Adc {
                    (p.res, p.a)
                } else {
                    (p.a, p.b)
                };
                let lt = ic(self, IntCC::UnsignedLessThan, x, y);
                let eq = ic(self, IntCC::Equal, x, y);
                let cin = p.cin.expect("ADC/SBB carry in");
                let cin = self.b.ins().icmp_imm_s(IntCC::NotEqual, cin, 0);
                let eq = self.b.ins().band(eq, cin);
                let carry = self.b.ins().bor(lt, eq);
                if cc == C::b {
                    carry
                } else {
                    self.b.ins().bxor_imm_s(carry, 1)
                }
            }
            (FlagOp::Bits, C::b | C::ae) => {
                let t = self.b.ins().band_imm_s(p.b, CF as i64);
                let c = if cc == C::b {
                    IntCC::NotEqual
                } else {
                    IntCC::Equal
                };
                self.b.ins().icmp_imm_s(c, t, 0)
            }
            _ => return None,
        })
    }

    fn narrow_zero(&mut self, size: u8) -> Value {
        let ty = match size {
            1 => types::I8,
            2 => types::I16,
            4 => types::I32,
            _ => types::I64,
        };
        self.b.ins().iconst(ty, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(bytes: &[u8]) -> Vec<lockstep_interp::decode::DecodedInsn> {
        iced_x86::Decoder::with_ip(64, bytes, 0x1000, iced_x86::DecoderOptions::NONE)
            .into_iter()
            .map(|ins| lockstep_interp::decode::DecodedInsn {
                ins,
                handler: lockstep_interp::ops::lookup(&ins),
            })
            .collect()
    }

    #[test]
    fn shift_flags_are_dead_only_before_an_unobserved_overwrite() {
        // shr rax,cl; mov ecx,ebx; sub ecx,edx; and eax,1 (bits' loop): dead after the shift.
        let a = decoded(&[0x48, 0xd3, 0xe8, 0x89, 0xd9, 0x29, 0xd1, 0x83, 0xe0, 0x01]);
        assert!(dead_after(&a)[0]);
        // shr rax,cl; mov rdx,[rbx]; add rdx,rax: the load may fault in between.
        let b = decoded(&[0x48, 0xd3, 0xe8, 0x48, 0x8b, 0x13, 0x48, 0x01, 0xc2]);
        assert!(!dead_after(&b)[0]);
        // shr rax,cl; setc dl; add rdx,rax: read first.
        let c = decoded(&[0x48, 0xd3, 0xe8, 0x0f, 0x92, 0xc2, 0x48, 0x01, 0xc2]);
        assert!(!dead_after(&c)[0]);
        // shr rax,cl; inc rdx (keeps CF); nothing overwrites all of them before the end.
        let d = decoded(&[0x48, 0xd3, 0xe8, 0x48, 0xff, 0xc2]);
        assert!(!dead_after(&d)[0]);
    }

    #[test]
    fn bits_or_keep_keeps_the_old_flags_for_a_zero_count() {
        let old = CF | ZF | SF | AF | OF | 0x202;
        assert_eq!(
            bits_of(FlagOp::BitsOrKeep, 8, STATUS, 5, old, 0, 1),
            old & STATUS
        );
        assert_eq!(
            bits_of(FlagOp::BitsOrKeep, 4, CF | OF, 5, old, 0, 1),
            CF | OF
        );
        // Count non-zero: as `Bits` (CF and OF from `b`, SF/ZF/PF from the result, AF = 0).
        for (b, res) in [(CF, 0u64), (OF, 0x80), (CF | OF, 0x8000_0000), (0, 3)] {
            assert_eq!(
                bits_of(FlagOp::BitsOrKeep, 4, STATUS, 7, b, res, 0),
                bits_of(FlagOp::Bits, 4, STATUS, 7, b, res, 0)
            );
        }
        assert_eq!(
            bits_of(FlagOp::Bits, 4, STATUS, 0, CF, 0x8000_0000, 0),
            CF | SF | PF
        );
        let code = encode(FlagOp::BitsOrKeep, 2, CF | OF);
        assert_eq!(decode(code), Some((FlagOp::BitsOrKeep, 2, CF | OF)));
    }

    /// Every static record's code decodes to what was encoded, and every code (the raw one
    /// too) fits the sign-extended 32-bit immediate compiled code stores and compares it as;
    /// a mask reduced in place (`band_imm` with `BELOW_MASK`) keeps the rest of the code.
    #[test]
    fn codes_round_trip_and_fit_an_immediate() {
        let ops = [
            FlagOp::Add,
            FlagOp::Sub,
            FlagOp::Logic,
            FlagOp::Inc,
            FlagOp::Dec,
            FlagOp::Adc,
            FlagOp::Sbb,
            FlagOp::Rol,
            FlagOp::Ror,
            FlagOp::Mul,
            FlagOp::Bits,
            FlagOp::BitsOrKeep,
        ];
        let shifts = (0..64u8).flat_map(|c| [FlagOp::Shl(c), FlagOp::Shr(c), FlagOp::Sar(c)]);
        for op in ops.into_iter().chain(shifts) {
            for size in [1u8, 2, 4, 8] {
                for mask in [STATUS, CF, CF | OF, STATUS & !CF, OF, ZF | SF] {
                    let code = encode(op, size, mask);
                    assert_eq!(decode(code), Some((op, size, mask)), "{code:#x}");
                    assert_eq!(code_imm(code) as i64 as u64, code);
                    let reduced = code & ((CF << MASK_SHIFT) | BELOW_MASK);
                    assert_eq!(decode(reduced), Some((op, size, mask & CF)));
                }
            }
        }
        assert_eq!(code_imm(RAW_CODE) as i64 as u64, RAW_CODE);
        assert_eq!(RAW_CODE & OP_FIELD, RAW_OP);
        assert_eq!(decode(RAW_CODE), None, "the raw record is no static one");
    }
}
