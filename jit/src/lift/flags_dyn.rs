//! Conditions of a run-time flag record (`FlagOp::Dyn`, the record a chained jump or a region
//! edge hands over) without the `fold_flags` helper when the record is a CMP/SUB or a
//! TEST/logic operation.
//!
//! A block that reads the flags before writing them — the `jg` after `cmp; je` that
//! compilers emit for three-way compares, a loop head testing what the previous block
//! compared — used to fold the handed-over record into RFLAGS through the helper (a C call,
//! ~60 host instructions) to test one condition. Here the block tests the record's code at
//! run time: for a SUB or logic record defining every status flag (what CMP, SUB, TEST, AND,
//! OR, XOR leave) it evaluates the condition from the operands at the record's size, shifted
//! to the top of the register so that the signed and unsigned compares see the operand
//! width; for a raw record (the host flags a baseline function hands over, `flags::RAW_CODE`)
//! it tests the RFLAGS bits they hold; any other record takes the old path in a cold block.
//! The record stays pending either way: exits hand it over as before.

use super::flags::{encode, FlagOp, Pending, RAW_CODE, SIZE_FIELD, SIZE_SHIFT};
use super::Lower;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, Value};
use iced_x86::ConditionCode;
use lockstep_interp::state::flags::STATUS;

impl Lower<'_> {
    /// `cc` from the run-time record `p` (`Some` for the conditions of CF, ZF and SF, which
    /// SUB and logic records give from their operands; `None`: the caller folds).
    pub(super) fn cond_dyn(&mut self, p: Pending, cc: ConditionCode) -> Option<Value> {
        use ConditionCode as C;
        if !matches!(
            cc,
            C::e | C::ne | C::b | C::ae | C::be | C::a | C::l | C::ge | C::le | C::g | C::s | C::ns
        ) {
            return None;
        }
        let code = p.code?;
        let key = self.b.ins().band_imm_s(code, !SIZE_FIELD as i64);
        let sub_key = encode(FlagOp::Sub, 0, STATUS) as i64;
        let logic_key = encode(FlagOp::Logic, 0, STATUS) as i64;
        let is_sub = self.b.ins().icmp_imm_s(IntCC::Equal, key, sub_key);
        let is_logic = self.b.ins().icmp_imm_s(IntCC::Equal, key, logic_key);
        let is_raw = self.b.ins().icmp_imm_s(IntCC::Equal, code, RAW_CODE as i64);
        let known = self.b.ins().bor(is_sub, is_logic);
        let known = self.b.ins().bor(known, is_raw);

        let fast = self.b.create_block();
        let slow = self.b.create_block();
        let join = self.b.create_block();
        let out = self.b.append_block_param(join, types::I8);
        self.b.set_cold_block(slow);
        self.b.ins().brif(known, fast, &[], slow, &[]);
        self.b.seal_block(fast);
        self.b.seal_block(slow);

        // Operands zero-extended from `size` bytes, shifted left by 64 - 8 * size: equal and
        // unsigned order are kept, and the sign bit is the operand's.
        self.b.switch_to_block(fast);
        let size = self.b.ins().band_imm_s(code, SIZE_FIELD as i64);
        // (The size in bytes times 8: its bits.)
        let bits = self.b.ins().ushr_imm_s(size, SIZE_SHIFT as i64 - 3);
        let sixty_four = self.b.ins().iconst(types::I64, 64);
        let k = self.b.ins().isub(sixty_four, bits);
        let a = self.b.ins().ishl(p.a, k);
        let b = self.b.ins().ishl(p.b, k);
        let r = self.b.ins().ishl(p.res, k);
        let sub = match cc {
            C::e => self.b.ins().icmp(IntCC::Equal, a, b),
            C::ne => self.b.ins().icmp(IntCC::NotEqual, a, b),
            C::b => self.b.ins().icmp(IntCC::UnsignedLessThan, a, b),
            C::ae => self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, b),
            C::be => self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, a, b),
            C::a => self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, b),
            C::l => self.b.ins().icmp(IntCC::SignedLessThan, a, b),
            C::ge => self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, a, b),
            C::le => self.b.ins().icmp(IntCC::SignedLessThanOrEqual, a, b),
            C::g => self.b.ins().icmp(IntCC::SignedGreaterThan, a, b),
            C::s => self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0),
            _ => self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, r, 0),
        };
        // Logic: CF = OF = 0, so SF != OF is SF.
        let logic = match cc {
            C::b => self.b.ins().iconst(types::I8, 0),
            C::ae => self.b.ins().iconst(types::I8, 1),
            C::e | C::be => self.b.ins().icmp_imm_s(IntCC::Equal, r, 0),
            C::ne | C::a => self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0),
            C::l | C::s => self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0),
            C::ge | C::ns => self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, r, 0),
            C::le => self.b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, r, 0),
            _ => self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, r, 0),
        };
        let v = self.b.ins().select(is_logic, logic, sub);
        // Raw (a baseline function's host flags, `flags::RAW_CODE`): the RFLAGS bits.
        let lo = self.b.ins().ushr_imm_u(p.res, 8);
        let of = self.b.ins().band_imm_s(p.res, 1);
        let of = self.b.ins().ishl_imm_u(of, 11);
        let rf = self.b.ins().bor(lo, of);
        let raw = self.cond_of_rflags(rf, cc);
        let v = self.b.ins().select(is_raw, raw, v);
        self.b.ins().jump(join, &[v.into()]);

        // Any other record: fold everything pending (compile-time state unchanged) and test
        // the RFLAGS bits.
        self.b.switch_to_block(slow);
        let rf = self.flags_value().expect("a pending record gives a value");
        let v = self.cond_of_rflags(rf, cc);
        self.b.ins().jump(join, &[v.into()]);
        self.b.seal_block(join);
        self.b.switch_to_block(join);
        Some(out)
    }
}
