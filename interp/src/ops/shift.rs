//! Shifts and rotates: SHL/SAL, SHR, SAR, ROL, ROR, RCL, RCR (SHLD/SHRD and the BMI2 shifts
//! live in `shift_double.rs`).
//!
//! Every semantic function takes the operand value, the raw count (masked here to 5 bits, or 6
//! for 64-bit operands), the operand size in bytes and the current RFLAGS, and returns the
//! result and all six status flags (flags the instruction leaves alone are copied from
//! `rflags`). A masked count of 0 changes no flag.
//!
//! "Undefined" flags follow this Intel host (checked natively in `shift/native_tests.rs`):
//! - OF for counts > 1 is computed exactly as for a count of 1, from the *original* operand
//!   (and CF-in for RCL/RCR); it is not recomputed from the final result.
//! - AF is cleared by SHL/SHR/SAR with a non-zero count; rotates leave it alone.
//! - CF of SHL/SHR with a count larger than the operand width (8/16-bit forms) is 0; SAR gives
//!   the sign bit.
//! - RCL/RCR 8/16-bit whose count is a non-zero multiple of 9/17 change nothing, not even OF.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags::{self, szp};
use crate::operand::{mask, op_size, sext};
use crate::ops::check_no_lock;
use crate::state::flags::{CF, OF, STATUS};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic, OpKind};

/// Count mask: 5 bits for 8/16/32-bit operands, 6 bits for 64-bit ones.
#[inline(always)]
pub fn count_mask(size: u8) -> u64 {
    if size == 8 {
        0x3f
    } else {
        0x1f
    }
}

/// Bit `n` of `v` as 0/1 (`n` < 64).
#[inline(always)]
fn bit(v: u64, n: u32) -> u64 {
    (v >> n) & 1
}

/// Flags of a shift result: SF/ZF/PF from the result, AF cleared, CF and OF given (as 0/1).
#[inline(always)]
fn shift_flags(res: u64, size: u8, cf: u64, of: u64) -> u64 {
    szp(res, size) | if cf != 0 { CF } else { 0 } | if of != 0 { OF } else { 0 }
}

/// Keep every status flag of `rflags` except CF and OF, which are replaced.
#[inline(always)]
fn rotate_flags(rflags: u64, cf: u64, of: u64) -> u64 {
    (rflags & STATUS & !(CF | OF)) | if cf != 0 { CF } else { 0 } | if of != 0 { OF } else { 0 }
}

/// SHL/SAL. CF = last bit shifted out (0 once the count exceeds the width).
/// OF = MSB(v) ^ MSB-1(v) for every non-zero count (host: as for count 1). AF = 0 (host).
pub fn shl(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    let res = (v << c) & m;
    let cf = if c <= bits { bit(v, bits - c) } else { 0 };
    let of = bit(v, bits - 1) ^ bit(v, bits - 2);
    (res, shift_flags(res, size, cf, of))
}

/// SHR. CF = last bit shifted out (0 once the count exceeds the width).
/// OF = MSB(v) for every non-zero count (host: as for count 1). AF = 0 (host).
pub fn shr(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    let res = v >> c;
    let cf = bit(v, c - 1);
    let of = bit(v, bits - 1);
    (res, shift_flags(res, size, cf, of))
}

/// SAR. CF = last bit shifted out (the sign once the count exceeds the width). OF = 0, AF = 0
/// (host).
pub fn sar(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (v & m, rflags & STATUS);
    }
    let sv = sext(v & m, size) as i64;
    let res = (sv >> c) as u64 & m;
    let cf = ((sv >> (c - 1)) & 1) as u64;
    (res, shift_flags(res, size, cf, 0))
}

/// Rotate the low `bits` bits of `v` left by `c` (< `bits`).
#[inline(always)]
fn rotl_bits(v: u64, c: u32, bits: u32) -> u64 {
    if c == 0 {
        v
    } else {
        ((v << c) | (v >> (bits - c))) & mask((bits / 8) as u8)
    }
}

/// ROL. Only CF and OF change. CF = LSB(result); OF = MSB(v) ^ MSB-1(v) for every non-zero
/// count (host: OF of a 1-bit rotate of the original), even when count is a multiple of the width.
pub fn rol(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    let res = rotl_bits(v, c % bits, bits);
    let of = bit(v, bits - 1) ^ bit(v, bits - 2);
    (res, rotate_flags(rflags, res & 1, of))
}

/// ROR. Only CF and OF change. CF = MSB(result); OF = MSB(v) ^ LSB(v) for every non-zero count
/// (host: OF of a 1-bit rotate of the original, i.e. MSB ^ MSB-1 of that rotate).
pub fn ror(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    let res = rotl_bits(v, (bits - c % bits) % bits, bits);
    let of = bit(v, bits - 1) ^ (v & 1);
    (res, rotate_flags(rflags, bit(res, bits - 1), of))
}

/// Rotate the `bits+1`-bit value CF:v left by `c` (1..=bits). Returns (result, CF).
#[inline(always)]
fn rcl_wide(v: u64, cf: u64, c: u32, bits: u32) -> (u64, u64) {
    let w = bits + 1;
    let x = ((cf as u128) << bits) | v as u128;
    let wmask = (1u128 << w) - 1;
    let y = ((x << c) | (x >> (w - c))) & wmask;
    ((y as u64) & mask((bits / 8) as u8), (y >> bits) as u64 & 1)
}

/// Effective RCL/RCR rotate count: masked count mod 9 (8-bit) or 17 (16-bit); the masked count
/// itself for 32/64-bit.
#[inline(always)]
fn rc_count(count: u64, size: u8) -> u32 {
    let c = (count & count_mask(size)) as u32;
    match size {
        1 => c % 9,
        2 => c % 17,
        _ => c,
    }
}

/// RCL. Only CF and OF change. OF = MSB(v) ^ MSB-1(v) for every effective non-zero count
/// (host: OF of a 1-bit RCL of the original). An effective count of 0 (incl. 9/18/27 for 8-bit,
/// 17 for 16-bit) changes nothing (host).
pub fn rcl(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = rc_count(count, size);
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    let (res, cf) = rcl_wide(v, rflags & CF, c, bits);
    let of = bit(v, bits - 1) ^ bit(v, bits - 2);
    (res, rotate_flags(rflags, cf, of))
}

/// RCR. Only CF and OF change. OF = MSB(v) ^ CF-in for every effective non-zero count (host:
/// OF of a 1-bit RCR of the original). An effective count of 0 changes nothing (host).
pub fn rcr(v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let v = v & m;
    let c = rc_count(count, size);
    if c == 0 {
        return (v, rflags & STATUS);
    }
    let bits = size as u32 * 8;
    // Rotating right by c in a (bits+1)-bit ring is rotating left by bits+1-c.
    let (res, cf) = rcl_wide(v, rflags & CF, bits + 1 - c, bits);
    let of = bit(v, bits - 1) ^ (rflags & CF);
    (res, rotate_flags(rflags, cf, of))
}

/// Which shift a handler performs (const-generic parameter).
pub mod op {
    pub const SHL: u8 = 0;
    pub const SHR: u8 = 1;
    pub const SAR: u8 = 2;
    pub const ROL: u8 = 3;
    pub const ROR: u8 = 4;
    pub const RCL: u8 = 5;
    pub const RCR: u8 = 6;
}

/// Dispatch to the semantic function of shift `op` (an [`op`] constant).
#[inline(always)]
pub fn shift(op: u8, v: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    match op {
        op::SHL => shl(v, count, size, rflags),
        op::SHR => shr(v, count, size, rflags),
        op::SAR => sar(v, count, size, rflags),
        op::ROL => rol(v, count, size, rflags),
        op::ROR => ror(v, count, size, rflags),
        op::RCL => rcl(v, count, size, rflags),
        _ => rcr(v, count, size, rflags),
    }
}

/// Handlers of this family (SHLD/SHRD and BMI2 shifts: see `shift_double`).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Shl | Mnemonic::Sal => shift_h::<{ op::SHL }>,
        Mnemonic::Shr => shift_h::<{ op::SHR }>,
        Mnemonic::Sar => shift_h::<{ op::SAR }>,
        Mnemonic::Rol => shift_h::<{ op::ROL }>,
        Mnemonic::Ror => shift_h::<{ op::ROR }>,
        Mnemonic::Rcl => shift_h::<{ op::RCL }>,
        Mnemonic::Rcr => shift_h::<{ op::RCR }>,
        _ => return None,
    })
}

/// Reference host: ROL/ROR of a register with an imm8 count (C0/C1) whose masked count is
/// greater than 1 leave OF unchanged; memory destinations, the by-1 (D0/D1) and the CL (D2/D3)
/// forms compute it as for a count of 1. Measured exhaustively for 8-bit operands (all values,
/// counts 1..7) and by the host differential for every size. `f` are the flags `shift` computed;
/// returns the flags to store. Every handler of these forms must apply it.
#[inline(always)]
pub fn rotate_reg_imm_of(
    op: u8,
    reg_imm: bool,
    count: u64,
    size: u8,
    old_rflags: u64,
    f: u64,
) -> u64 {
    if (op == op::ROL || op == op::ROR) && reg_imm && count & count_mask(size) > 1 {
        (f & !OF) | (old_rflags & OF)
    } else {
        f
    }
}

/// `op r/m, 1|CL|imm8`. The destination is always written back (a 32-bit register is
/// zero-extended even for a count of 0; memory is accessed as a read-modify-write).
fn shift_h<const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let count = x.read_op(ins, 1)?;
    let v = x.read_op_rmw(ins, 0)?;
    let (res, mut f) = shift(OP, v, count, size, x.cpu.state.rflags);
    let reg_imm = ins.op0_kind() == OpKind::Register && ins.op1_kind() == OpKind::Immediate8;
    f = rotate_reg_imm_of(OP, reg_imm, count, size, x.cpu.state.rflags, f);
    x.write_op(ins, 0, res)?;
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

#[cfg(test)]
mod native_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::state::flags::{AF, PF, SF, ZF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    fn run(code: Vec<u8>, m: &mut TestMachine, n: u64) {
        let e = m.run_code(&code, n);
        assert_eq!(e.retired, n, "exit {:?}", e.reason);
    }

    #[test]
    fn semantic_basics() {
        assert_eq!(shl(0x81, 1, 1, 0), (0x02, CF | OF));
        assert_eq!(shr(0x81, 1, 1, 0), (0x40, CF | OF));
        assert_eq!(sar(0x81, 1, 1, 0), (0xc0, CF | SF | PF));
        assert_eq!(sar(0x80, 31, 1, 0), (0xff, CF | SF | PF));
        assert_eq!(rol(0x81, 1, 1, 0), (0x03, CF | OF));
        assert_eq!(ror(0x81, 1, 1, 0), (0xc0, CF));
        assert_eq!(rcl(0x80, 1, 1, 0), (0x00, CF | OF));
        assert_eq!(rcr(0x01, 1, 1, CF), (0x80, CF | OF));
        // Count 0 (after masking) changes nothing.
        assert_eq!(shl(5, 32, 4, ZF | AF), (5, ZF | AF));
        assert_eq!(shl(5, 64, 8, SF), (5, SF));
        // 64-bit uses 6 count bits.
        assert_eq!(shl(1, 63, 8, 0).0, 1 << 63);
        assert_eq!(rcl(1, 9, 1, OF | CF), (1, OF | CF));
        assert_eq!(rcr(1, 17, 2, 0), (1, 0));
        assert_eq!(ror(1, 64, 8, 0), (1, 0));
    }

    #[test]
    fn shl_reg_cl_and_imm_and_one() {
        let code = TestMachine::assemble(|a| {
            a.shl(rax, cl)?;
            a.shl(ebx, 4)?;
            a.sar(dx, 1)?;
            Ok(())
        });
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0x8000_0000_0000_0001;
        m.cpu.state.gpr[reg::RCX] = 0x41; // masked to 1
        m.cpu.state.gpr[reg::RBX] = 0xffff_ffff_1234_5678;
        m.cpu.state.gpr[reg::RDX] = 0x1111_8002;
        run(code, &mut m, 1);
        assert_eq!(m.gpr(reg::RAX), 2);
        assert_eq!(m.cpu.state.rflags & STATUS, CF | OF);
        m.run(1);
        assert_eq!(m.gpr(reg::RBX), 0x2345_6780);
        assert_eq!(m.cpu.state.rflags & STATUS, CF);
        m.run(1);
        assert_eq!(m.gpr(reg::RDX), 0x1111_c001);
        assert_eq!(m.cpu.state.rflags & STATUS, SF);
    }

    #[test]
    fn count_zero_keeps_flags_but_zero_extends_32bit() {
        let code = TestMachine::assemble(|a| a.shr(eax, cl));
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0xdead_beef_0000_0080;
        m.cpu.state.gpr[reg::RCX] = 0x20;
        m.cpu.state.rflags |= ZF | OF | AF;
        run(code, &mut m, 1);
        assert_eq!(m.gpr(reg::RAX), 0x80);
        assert_eq!(m.cpu.state.rflags & STATUS, ZF | OF | AF);
    }

    #[test]
    fn high_byte_and_memory_destinations() {
        let code = TestMachine::assemble(|a| {
            a.rol(ah, 4)?;
            a.rcr(word_ptr(DATA_BASE), 1)?;
            a.sar(qword_ptr(DATA_BASE + 8), cl)?;
            Ok(())
        });
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0x12_a5ff;
        m.cpu.state.gpr[reg::RCX] = 4;
        m.load(DATA_BASE, &0x1_0003u64.to_le_bytes());
        m.load(DATA_BASE + 8, &0x8000_0000_0000_0010u64.to_le_bytes());
        run(code, &mut m, 1);
        assert_eq!(m.gpr(reg::RAX), 0x12_5aff);
        m.cpu.state.rflags |= CF;
        m.run(1);
        // CF-in 1 enters at bit 15, bit 0 goes to CF; the word above is untouched.
        assert_eq!(m.read_u64(DATA_BASE), 0x1_8001);
        assert_eq!(m.cpu.state.rflags & (CF | OF), CF | OF);
        m.run(1);
        assert_eq!(m.read_u64(DATA_BASE + 8), 0xf800_0000_0000_0001);
        assert_eq!(m.cpu.state.rflags & STATUS, SF);
    }

    #[test]
    fn lock_is_ud_and_readonly_memory_faults_before_change() {
        let mut m = TestMachine::new();
        // lock shl dword [DATA_BASE], 1
        let mut code = vec![0xf0];
        code.extend(TestMachine::assemble(|a| a.shl(dword_ptr(DATA_BASE), 1)));
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        // A shift to the supervisor-only page tables faults as a write, flags unchanged.
        let mut m = TestMachine::new();
        let flags_before = m.cpu.state.rflags;
        let code = TestMachine::assemble(|a| a.shl(dword_ptr(0x1000u64), 1));
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { code: 7, .. })
        ));
        assert_eq!(m.cpu.state.rflags, flags_before);
    }
}
