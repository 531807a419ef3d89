//! Arithmetic flag computation (eager): semantic functions return the six status flags as RFLAGS bits.

use crate::operand::{mask, sign_bit};
use crate::state::flags::{AF, CF, OF, PF, SF, ZF};
use crate::state::CpuState;
use iced_x86::ConditionCode;

/// PF: even parity of the low byte.
#[inline(always)]
pub fn parity(v: u64) -> u64 {
    if (v as u8).count_ones().is_multiple_of(2) {
        PF
    } else {
        0
    }
}

/// SF, ZF and PF of a `size`-byte result.
#[inline(always)]
pub fn szp(res: u64, size: u8) -> u64 {
    let r = res & mask(size);
    let mut f = parity(r);
    if r == 0 {
        f |= ZF;
    }
    if r & sign_bit(size) != 0 {
        f |= SF;
    }
    f
}

/// Flags of `a + b + carry_in` (ADD/ADC). Returns (result, flags).
#[inline(always)]
pub fn add(a: u64, b: u64, carry_in: u64, size: u8) -> (u64, u64) {
    let m = mask(size);
    let (a, b) = (a & m, b & m);
    let wide = (a as u128) + (b as u128) + (carry_in as u128);
    let res = (wide as u64) & m;
    let mut f = szp(res, size);
    if wide > m as u128 {
        f |= CF;
    }
    if (a ^ res) & (b ^ res) & sign_bit(size) != 0 {
        f |= OF;
    }
    if (a ^ b ^ res) & 0x10 != 0 {
        f |= AF;
    }
    (res, f)
}

/// Flags of `a - b - borrow_in` (SUB/SBB/CMP/NEG). Returns (result, flags).
#[inline(always)]
pub fn sub(a: u64, b: u64, borrow_in: u64, size: u8) -> (u64, u64) {
    let m = mask(size);
    let (a, b) = (a & m, b & m);
    let res = a.wrapping_sub(b).wrapping_sub(borrow_in) & m;
    let mut f = szp(res, size);
    if (a as u128) < (b as u128) + (borrow_in as u128) {
        f |= CF;
    }
    if (a ^ b) & (a ^ res) & sign_bit(size) != 0 {
        f |= OF;
    }
    if (a ^ b ^ res) & 0x10 != 0 {
        f |= AF;
    }
    (res, f)
}

/// Flags of a logical result (AND/OR/XOR/TEST): CF=OF=0, AF=0 (what Intel hardware does).
#[inline(always)]
pub fn logic(res: u64, size: u8) -> u64 {
    szp(res, size)
}

/// Replace the status flags selected by `which` with `new`.
#[inline(always)]
pub fn set_status(st: &mut CpuState, which: u64, new: u64) {
    st.rflags = (st.rflags & !which) | (new & which);
}

/// Evaluate a condition code against RFLAGS.
#[inline]
pub fn cond(rflags: u64, cc: ConditionCode) -> bool {
    let f = |b: u64| rflags & b != 0;
    match cc {
        ConditionCode::None => true,
        ConditionCode::o => f(OF),
        ConditionCode::no => !f(OF),
        ConditionCode::b => f(CF),
        ConditionCode::ae => !f(CF),
        ConditionCode::e => f(ZF),
        ConditionCode::ne => !f(ZF),
        ConditionCode::be => f(CF) || f(ZF),
        ConditionCode::a => !f(CF) && !f(ZF),
        ConditionCode::s => f(SF),
        ConditionCode::ns => !f(SF),
        ConditionCode::p => f(PF),
        ConditionCode::np => !f(PF),
        ConditionCode::l => f(SF) != f(OF),
        ConditionCode::ge => f(SF) == f(OF),
        ConditionCode::le => f(ZF) || f(SF) != f(OF),
        ConditionCode::g => !f(ZF) && f(SF) == f(OF),
    }
}
