//! Instruction semantics, one file per family. Each family maps decoded instructions to
//! handlers at decode time; anything no family claims raises #UD naming itself.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::Ctx;
use iced_x86::{Code, Instruction};

pub mod alu;
pub mod atomic;
pub mod avx_common;
pub mod avx_cvt;
pub mod avx_fp;
#[cfg(all(test, target_arch = "x86_64"))]
mod avx_fp_native;
pub mod avx_gather;
pub mod avx_int;
pub mod avx_int2;
pub mod avx_mov;
#[cfg(all(test, target_arch = "x86_64"))]
mod avx_native;
pub mod avx_perm;
#[cfg(all(test, target_arch = "x86_64"))]
mod avx_perm_native;
pub mod bit;
pub mod bmi;
pub mod control;
pub mod cr;
pub mod desc_table;
pub mod f16c;
pub mod far;
pub mod fast;
pub mod fast_misc;
pub mod fma;
pub mod interrupt;
pub mod io;
pub mod iopl;
pub mod legacy;
pub mod mmx;
pub mod mov;
pub mod msr;
pub mod muldiv;
#[cfg(test)]
pub(crate) mod native;
pub mod pcmpstr;
pub mod segment;
pub mod shift;
pub mod shift_double;
#[cfg(all(test, target_arch = "x86_64"))]
mod simd_int_native;
pub mod sse41;
pub mod sse42;
pub mod sse_blend;
pub mod sse_cmp;
pub mod sse_common;
pub mod sse_cvt;
pub mod sse_fp;
#[cfg(all(test, target_arch = "x86_64"))]
mod sse_fp_inputs;
#[cfg(all(test, target_arch = "x86_64"))]
mod sse_fp_native;
#[cfg(test)]
mod sse_fp_tests;
pub mod sse_int;
pub mod sse_mov;
#[cfg(all(test, target_arch = "x86_64"))]
mod sse_native;
pub mod sse_shuf;
pub mod ssse3;
pub mod stack;
pub mod string;
pub mod sysenter;
pub mod system;
#[cfg(test)]
pub(crate) mod systest;
pub mod x87_arith;
pub mod x87_cmp;
pub mod x87_common;
pub mod x87_ctl;
pub mod x87_decoded;
pub mod x87_load;
#[cfg(all(test, target_arch = "x86_64"))]
mod x87_native;
#[cfg(test)]
mod x87_tests;
pub mod x87_trans;
pub mod xsave;

/// The handler for a decoded instruction: a specialised one for the hottest shapes (`fast`),
/// else the family's.
pub fn lookup(ins: &Instruction) -> Handler {
    if ins.code() == Code::INVALID {
        return invalid;
    }
    fast::lookup(ins).unwrap_or_else(|| family_lookup(ins))
}

/// The family handler for a decoded instruction (never a specialised one).
pub fn family_lookup(ins: &Instruction) -> Handler {
    if ins.code() == Code::INVALID {
        return invalid;
    }
    sse_mov::lookup(ins)
        .or_else(|| sse_int::lookup(ins))
        .or_else(|| sse_shuf::lookup(ins))
        .or_else(|| sse_common::lookup(ins))
        .or_else(|| ssse3::lookup(ins))
        .or_else(|| sse41::lookup(ins))
        .or_else(|| sse42::lookup(ins))
        .or_else(|| pcmpstr::lookup(ins))
        .or_else(|| mmx::lookup(ins))
        .or_else(|| sse_fp::lookup(ins))
        .or_else(|| sse_cmp::lookup(ins))
        .or_else(|| sse_cvt::lookup(ins))
        .or_else(|| sse_blend::lookup(ins))
        .or_else(|| avx_mov::lookup(ins))
        .or_else(|| avx_int::lookup(ins))
        .or_else(|| avx_int2::lookup(ins))
        .or_else(|| avx_fp::lookup(ins))
        .or_else(|| avx_cvt::lookup(ins))
        .or_else(|| fma::lookup(ins))
        .or_else(|| f16c::lookup(ins))
        .or_else(|| avx_perm::lookup(ins))
        .or_else(|| avx_gather::lookup(ins))
        .or_else(|| alu::lookup(ins))
        .or_else(|| shift::lookup(ins))
        .or_else(|| shift_double::lookup(ins))
        .or_else(|| muldiv::lookup(ins))
        .or_else(|| bit::lookup(ins))
        .or_else(|| bmi::lookup(ins))
        .or_else(|| segment::lookup(ins))
        .or_else(|| far::lookup(ins))
        .or_else(|| desc_table::lookup(ins))
        .or_else(|| legacy::lookup(ins))
        .or_else(|| mov::lookup(ins))
        .or_else(|| stack::lookup(ins))
        .or_else(|| interrupt::lookup(ins))
        .or_else(|| control::lookup(ins))
        .or_else(|| string::lookup(ins))
        .or_else(|| system::lookup(ins))
        .or_else(|| msr::lookup(ins))
        .or_else(|| cr::lookup(ins))
        .or_else(|| io::lookup(ins))
        .or_else(|| iopl::lookup(ins))
        .or_else(|| sysenter::lookup(ins))
        .or_else(|| x87_load::lookup(ins))
        .or_else(|| x87_arith::lookup(ins))
        .or_else(|| x87_cmp::lookup(ins))
        .or_else(|| x87_ctl::lookup(ins))
        .or_else(|| x87_trans::lookup(ins))
        .or_else(|| xsave::lookup(ins))
        .unwrap_or(not_implemented)
}

/// Instructions that must end a block although they do not transfer control (they change
/// mode, paging or interrupt state, or talk to devices). Families add theirs here.
pub fn ends_block(ins: &Instruction) -> bool {
    system::ends_block(ins)
        || stack::ends_block(ins)
        || msr::ends_block(ins)
        || cr::ends_block(ins)
        || io::ends_block(ins)
        || iopl::ends_block(ins)
        || sysenter::ends_block(ins)
        || interrupt::ends_block(ins)
        || xsave::ends_block(ins)
        || segment::ends_block(ins)
        || far::ends_block(ins)
        || desc_table::ends_block(ins)
}

fn invalid(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("invalid encoding").into())
}

fn not_implemented(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("instruction not implemented").into())
}

/// Does the instruction have a LOCK prefix? LOCK is only valid on memory-destination
/// read-modify-write forms; families that allow it check this, everyone else raises #UD
/// through [`check_no_lock`].
#[inline]
pub fn check_no_lock(ins: &Instruction) -> Result<(), Fault> {
    if ins.has_lock_prefix() {
        Err(Fault::ud("LOCK prefix not allowed on this instruction"))
    } else {
        Ok(())
    }
}

/// LOCK is allowed only when operand 0 is memory.
#[inline]
pub fn check_lock_mem_dest(ins: &Instruction) -> Result<(), Fault> {
    if ins.has_lock_prefix() && ins.op0_kind() != iced_x86::OpKind::Memory {
        Err(Fault::ud("LOCK prefix with a register destination"))
    } else {
        Ok(())
    }
}
