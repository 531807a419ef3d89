//! Shared pieces of the legacy SSE/SSE2 families: the availability check (#UD/#NM), XMM
//! register access, xmm/m128 operand reads with the alignment rule, lane conversions, and
//! LDMXCSR/STMXCSR.
//!
//! Legacy (non-VEX) SSE writes only bits 127:0 of a register; bits 255:128 (`ymm[i][2..4]`)
//! are left as they are, as the hardware does.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::ops::check_no_lock;
use crate::state::{ctl, CpuState};
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind, Register};

/// MXCSR bits this model implements (incl. DAZ): the MXCSR_MASK that FXSAVE reports.
pub const MXCSR_MASK: u32 = 0xffff;

/// Availability check every SSE handler runs first, in the architectural priority order:
/// LOCK, CR0.EM = 1 or CR4.OSFXSR = 0 -> #UD, then CR0.TS = 1 -> #NM.
#[inline]
pub fn check_sse(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    if st.cr0 & ctl::CR0_EM != 0 {
        return Err(Fault::ud("SSE instruction with CR0.EM set"));
    }
    if st.cr4 & ctl::CR4_OSFXSR == 0 {
        return Err(Fault::ud("SSE instruction with CR4.OSFXSR clear"));
    }
    if st.cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    Ok(())
}

/// Index (0..15) of an XMM register. Legacy encodings reach only XMM0..XMM15; anything else
/// is folded into range so that no guest input can index out of bounds.
#[inline]
pub fn xmm_index(r: Register) -> usize {
    (r as usize).wrapping_sub(Register::XMM0 as usize) & 15
}

/// Bits 127:0 of register `i`.
#[inline]
pub fn get_xmm(st: &CpuState, i: usize) -> u128 {
    let y = &st.ymm[i & 15];
    ((y[1] as u128) << 64) | y[0] as u128
}

/// Write bits 127:0 of register `i`, leaving bits 255:128 alone.
#[inline]
pub fn set_xmm(st: &mut CpuState, i: usize, v: u128) {
    let y = &mut st.ymm[i & 15];
    y[0] = v as u64;
    y[1] = (v >> 64) as u64;
}

/// The XMM register of operand `n` (which must be a register operand).
#[inline]
pub fn xmm_op(ins: &Instruction, n: u32) -> usize {
    xmm_index(ins.op_register(n))
}

/// Linear address of a 16-byte memory operand. With `aligned`, a misaligned address raises
/// #GP(0) before any memory access (legacy SSE rule for every m128 operand except the
/// explicitly unaligned moves). The segment (legacy modes) is checked first, for a read or a
/// `write`.
#[inline]
pub fn m128_addr(x: &mut Ctx, ins: &Instruction, aligned: bool, write: bool) -> Result<u64, Fault> {
    let a = x.mem_addr(ins, 16, write)?;
    if aligned && a & 15 != 0 {
        return Err(Fault::GP0);
    }
    Ok(a)
}

/// Read operand `n`, an XMM register or a 16-byte memory operand.
#[inline]
pub fn read_xmm_m128(x: &mut Ctx, ins: &Instruction, n: u32, aligned: bool) -> Result<u128, Fault> {
    if ins.op_kind(n) == OpKind::Memory {
        let a = m128_addr(x, ins, aligned, false)?;
        x.read_u128(a)
    } else {
        Ok(get_xmm(&x.cpu.state, xmm_op(ins, n)))
    }
}

/// Read operand `n`, an XMM register (low 64 bits) or an 8-byte memory operand.
#[inline]
pub fn read_xmm_m64(x: &mut Ctx, ins: &Instruction, n: u32) -> Result<u64, Fault> {
    if ins.op_kind(n) == OpKind::Memory {
        let a = x.mem_addr(ins, 8, false)?;
        x.read(a, 8)
    } else {
        Ok(get_xmm(&x.cpu.state, xmm_op(ins, n)) as u64)
    }
}

/// Read operand `n`, an XMM register (low 32 bits) or a 4-byte memory operand.
#[inline]
pub fn read_xmm_m32(x: &mut Ctx, ins: &Instruction, n: u32) -> Result<u32, Fault> {
    if ins.op_kind(n) == OpKind::Memory {
        let a = x.mem_addr(ins, 4, false)?;
        Ok(x.read(a, 4)? as u32)
    } else {
        Ok(get_xmm(&x.cpu.state, xmm_op(ins, n)) as u32)
    }
}

/// A packed binary operation `dst = f(dst, src)`.
pub type BinOp = fn(u128, u128) -> u128;

/// Shared handler of every `op xmm, xmm/m128` form: `dst = f(dst, src)` with a 16-byte-aligned
/// m128 source (#GP(0) otherwise).
#[inline(always)]
pub fn binary(x: &mut Ctx, ins: &Instruction, f: BinOp) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_xmm(st, d), src);
    set_xmm(st, d, r);
    Ok(())
}

/// A packed binary operation with an immediate, `dst = f(dst, src, imm8)`.
pub type BinImmOp = fn(u128, u128, u8) -> u128;

/// Shared handler of `op xmm, xmm/m128, imm8` forms: `dst = f(dst, src, imm8)` with a
/// 16-byte-aligned m128 source.
#[inline(always)]
pub fn binary_imm(x: &mut Ctx, ins: &Instruction, f: BinImmOp) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let src = read_xmm_m128(x, ins, 1, true)?;
    let d = xmm_op(ins, 0);
    let st = &mut x.cpu.state;
    let r = f(get_xmm(st, d), src, ins.immediate8());
    set_xmm(st, d, r);
    Ok(())
}

/// Declares `op xmm, xmm/m128` forms: for each semantic function (a [`BinOp`] in the calling
/// module), the iced codes it serves. Generates `binary_semantic` (code -> semantic function,
/// for tests and the JIT), one thin handler per function, and `binary_lookup`.
macro_rules! sse_binary_family {
    ($($name:ident: $($code:ident)|+;)*) => {
        /// The semantic function of a binary (`dst = f(dst, src)`) form of this family.
        pub fn binary_semantic(code: iced_x86::Code) -> Option<$crate::ops::sse_common::BinOp> {
            Some(match code {
                $($(iced_x86::Code::$code)|+ => $name,)*
                _ => return None,
            })
        }

        /// Handlers of the binary forms of this family (legacy XMM encodings only; MMX and
        /// VEX forms are not claimed).
        pub fn binary_lookup(ins: &iced_x86::Instruction) -> Option<$crate::decode::Handler> {
            Some(match ins.code() {
                $($(iced_x86::Code::$code)|+ => binary_handlers::$name,)*
                _ => return None,
            })
        }

        mod binary_handlers {
            $(
                pub fn $name(
                    x: &mut $crate::Ctx,
                    ins: &iced_x86::Instruction,
                ) -> Result<(), $crate::fault::Trap> {
                    $crate::ops::sse_common::binary(x, ins, super::$name)
                }
            )*
        }
    };
}
pub(crate) use sse_binary_family;

// ----- lane views (little-endian, lane 0 = bits 7:0 / 15:0 / ...) -----

/// Lane-wise `f` over bytes, words, dwords or qwords of two 128-bit values.
#[inline(always)]
pub fn map_b(a: u128, b: u128, f: impl Fn(u8, u8) -> u8) -> u128 {
    let (a, b) = (bytes(a), bytes(b));
    from_bytes(core::array::from_fn(|i| f(a[i], b[i])))
}

#[inline(always)]
pub fn map_w(a: u128, b: u128, f: impl Fn(u16, u16) -> u16) -> u128 {
    let (a, b) = (words(a), words(b));
    from_words(core::array::from_fn(|i| f(a[i], b[i])))
}

#[inline(always)]
pub fn map_d(a: u128, b: u128, f: impl Fn(u32, u32) -> u32) -> u128 {
    let (a, b) = (dwords(a), dwords(b));
    from_dwords(core::array::from_fn(|i| f(a[i], b[i])))
}

#[inline(always)]
pub fn map_q(a: u128, b: u128, f: impl Fn(u64, u64) -> u64) -> u128 {
    let (a, b) = (qwords(a), qwords(b));
    from_qwords(core::array::from_fn(|i| f(a[i], b[i])))
}

#[inline]
pub fn bytes(v: u128) -> [u8; 16] {
    v.to_le_bytes()
}

#[inline]
pub fn from_bytes(b: [u8; 16]) -> u128 {
    u128::from_le_bytes(b)
}

#[inline]
pub fn words(v: u128) -> [u16; 8] {
    core::array::from_fn(|i| (v >> (16 * i)) as u16)
}

#[inline]
pub fn from_words(w: [u16; 8]) -> u128 {
    w.iter()
        .enumerate()
        .fold(0, |acc, (i, &x)| acc | (x as u128) << (16 * i))
}

#[inline]
pub fn dwords(v: u128) -> [u32; 4] {
    core::array::from_fn(|i| (v >> (32 * i)) as u32)
}

#[inline]
pub fn from_dwords(d: [u32; 4]) -> u128 {
    d.iter()
        .enumerate()
        .fold(0, |acc, (i, &x)| acc | (x as u128) << (32 * i))
}

#[inline]
pub fn qwords(v: u128) -> [u64; 2] {
    [v as u64, (v >> 64) as u64]
}

#[inline]
pub fn from_qwords(q: [u64; 2]) -> u128 {
    ((q[1] as u128) << 64) | q[0] as u128
}

// ----- LDMXCSR / STMXCSR -----

/// Handlers of this file.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.code() {
        Code::Ldmxcsr_m32 => ldmxcsr,
        Code::Stmxcsr_m32 => stmxcsr,
        _ => return None,
    })
}

/// New MXCSR for LDMXCSR: bits outside [`MXCSR_MASK`] set -> #GP(0).
pub fn ldmxcsr_value(v: u32) -> Result<u32, Fault> {
    if v & !MXCSR_MASK != 0 {
        Err(Fault::GP0)
    } else {
        Ok(v)
    }
}

fn ldmxcsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = x.read_op(ins, 0)? as u32;
    x.cpu.state.mxcsr = ldmxcsr_value(v)?;
    Ok(())
}

fn stmxcsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_sse(x, ins)?;
    let v = x.cpu.state.mxcsr;
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn lane_views_round_trip() {
        let v = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        assert_eq!(words(v)[0], 0x3210);
        assert_eq!(words(v)[7], 0x0123);
        assert_eq!(dwords(v)[1], 0xfedc_ba98);
        assert_eq!(qwords(v)[1], 0x0123_4567_89ab_cdef);
        assert_eq!(from_words(words(v)), v);
        assert_eq!(from_dwords(dwords(v)), v);
        assert_eq!(from_qwords(qwords(v)), v);
        assert_eq!(from_bytes(bytes(v)), v);
    }

    fn run_pxor(cr0_set: u64, cr4_clear: u64) -> (ExitReason, u64) {
        let code = TestMachine::assemble(|a| a.pxor(xmm1, xmm1));
        let mut m = TestMachine::new();
        m.cpu.state.cr0 |= cr0_set;
        m.cpu.state.cr4 &= !cr4_clear;
        m.cpu.state.ymm[1] = [1, 2, 3, 4];
        let e = m.run_code(&code, 1);
        (e.reason, m.cpu.state.ymm[1][0])
    }

    #[test]
    fn availability_checks() {
        assert_eq!(run_pxor(0, 0), (ExitReason::Budget, 0));
        assert_eq!(
            run_pxor(ctl::CR0_EM, 0),
            (
                ExitReason::Exception(Fault::ud("SSE instruction with CR0.EM set")),
                1
            )
        );
        assert_eq!(
            run_pxor(0, ctl::CR4_OSFXSR),
            (
                ExitReason::Exception(Fault::ud("SSE instruction with CR4.OSFXSR clear")),
                1
            )
        );
        assert_eq!(
            run_pxor(ctl::CR0_TS, 0),
            (ExitReason::Exception(Fault::DeviceNotAvailable), 1)
        );
        // #UD has priority over #NM.
        assert!(matches!(
            run_pxor(ctl::CR0_TS | ctl::CR0_EM, 0).0,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
    }

    #[test]
    fn ldmxcsr_stmxcsr() {
        let code = TestMachine::assemble(|a| {
            a.ldmxcsr(dword_ptr(DATA_BASE))?;
            a.stmxcsr(dword_ptr(DATA_BASE + 8))?;
            a.ldmxcsr(dword_ptr(DATA_BASE + 16))
        });
        let mut m = TestMachine::new();
        m.load(DATA_BASE, &0xffffu32.to_le_bytes());
        m.load(DATA_BASE + 16, &0x1_1f80u32.to_le_bytes());
        let e = m.run_code(&code, 3);
        assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
        assert_eq!(e.retired, 2);
        assert_eq!(m.cpu.state.mxcsr, 0xffff);
        assert_eq!(m.read_u64(DATA_BASE + 8) & 0xffff_ffff, 0xffff);
        assert_eq!(ldmxcsr_value(0x1f80), Ok(0x1f80));
        assert_eq!(ldmxcsr_value(0x8000_0000), Err(Fault::GP0));
    }
}
