//! Native comparison of the soft-float core with this host's x87 (`core::arch::asm!`), over
//! deterministic pseudo-random operands biased to special encodings, for every RC and PC.

use super::arith;
use super::float::{sw, Env, F80};
use crate::ops::native::{host_is_amd, host_is_intel, XorShift};
use core::arch::asm;

/// Random 80-bit operand biased to specials and edge exponents.
pub fn rand_f80(r: &mut XorShift) -> F80 {
    let k = r.next() % 32;
    let sign = if r.next() & 1 != 0 { 0x8000 } else { 0 };
    let sig = r.next();
    let few = |r: &mut XorShift| {
        let x = r.next();
        (1u64 << 63) | (x & r.next() & r.next()) >> 1
    };
    let (e, s): (u16, u64) = match k {
        0 => (0, 0),
        1 => (0x7fff, 1 << 63),
        2 => (0x7fff, (3 << 62) | (sig >> 2) & r.next()),
        3 => (0x7fff, (1 << 63) | ((sig >> 2) | 1)),
        4 => (0, (sig >> (1 + r.next() % 63)).max(1)),
        5 => (0, (1 << 63) | sig),
        6 => ((r.next() % 0x7ffe) as u16 + 1, sig >> 1),
        7 => (0x7fff, (sig >> 1).max(1)),
        8 => (0x7ffe, u64::MAX),
        9 => (1, 1 << 63),
        10..=12 => ((r.next() % 80) as u16 + 1, few(r)),
        13..=15 => (0x7ffe - (r.next() % 80) as u16, few(r)),
        16..=21 => (0x3fff - 40 + (r.next() % 80) as u16, few(r)),
        22..=23 => (0x3fff - 40 + (r.next() % 80) as u16, (1 << 63) | sig),
        24 => (0x3fff, 1 << 63),
        _ => ((r.next() % 0x7ffe) as u16 + 1, (1 << 63) | sig),
    };
    F80 {
        se: e | sign,
        sig: s,
    }
}

/// A second operand, often close to the first (cancellation, equal magnitudes, ties).
pub fn rand_pair(r: &mut XorShift) -> (F80, F80) {
    let a = rand_f80(r);
    let b = match r.next() % 6 {
        0 => F80 {
            se: a.se ^ ((r.next() & 1) << 15) as u16,
            sig: a.sig ^ (r.next() & 0xff),
        },
        1 => F80 {
            se: (a.se & 0x8000) | (a.exp().wrapping_add((r.next() % 70) as u16) & 0x7fff),
            sig: a.sig,
        },
        _ => rand_f80(r),
    };
    (a, b)
}

/// Control words to try: every RC x PC, masked; plus some with unmasked exceptions.
pub fn control_words(r: &mut XorShift, n: usize) -> Vec<u16> {
    let mut v = Vec::new();
    for rc in 0..4u16 {
        for pc in [0u16, 2, 3] {
            v.push(0x7f | (pc << 8) | (rc << 10));
        }
    }
    for _ in 0..n {
        v.push(0x40 | (r.next() as u16 & 0x3f) | ((r.next() as u16 & 0xf) << 8));
    }
    v
}

macro_rules! native_binop {
    ($name:ident, $ins:literal) => {
        /// ST0 = a, ST1 = b, `$ins`, then (ST0 bits, status word).
        fn $name(a: F80, b: F80, fcw: u16) -> (F80, u16) {
            let ab = a.to_bytes();
            let bb = b.to_bytes();
            let mut out = [0u8; 10];
            let status: u16;
            // SAFETY: only x87 state and the local buffers are touched; the status word is read
            // and exceptions cleared (non-waiting) before the next waiting instruction, so no
            // #MF is raised; FNINIT leaves the default control word for the rest of the program.
            unsafe {
                asm!(
                    "fninit",
                    "fldcw word ptr [{cw}]",
                    "fld tbyte ptr [{b}]",
                    "fld tbyte ptr [{a}]",
                    $ins,
                    "fnstsw ax",
                    "fnclex",
                    "fstp tbyte ptr [{o}]",
                    "fninit",
                    cw = in(reg) &fcw,
                    a = in(reg) ab.as_ptr(),
                    b = in(reg) bb.as_ptr(),
                    o = in(reg) out.as_mut_ptr(),
                    out("ax") status,
                );
            }
            (F80::from_bytes(&out), status)
        }
    };
}

native_binop!(n_add, "fadd st, st(1)");
native_binop!(n_sub, "fsub st, st(1)");
native_binop!(n_mul, "fmul st, st(1)");
native_binop!(n_div, "fdiv st, st(1)");
native_binop!(n_sqrt, "fsqrt");

/// Model the register-destination outcome of an arithmetic result: (ST0, status word) after
/// the operation with ST0 = `old` before, TOP = 6.
pub fn model_reg(old: F80, res: (F80, u16), fcw: u16) -> (F80, u16) {
    let (v, f) = res;
    let unmasked = f & sw::EXC & !fcw;
    let mut status = f | (6 << 11);
    if unmasked != 0 {
        status |= sw::ES | sw::B;
    }
    let v = if unmasked & (sw::IE | sw::DE | sw::ZE) != 0 {
        old
    } else {
        v
    };
    (v, status)
}

fn compare(
    name: &str,
    n: usize,
    seed: u64,
    native: fn(F80, F80, u16) -> (F80, u16),
    model: fn(F80, F80, &Env) -> (F80, u16),
) {
    if !(host_is_intel() || host_is_amd()) {
        return;
    }
    let mut r = XorShift::new(seed);
    let cws = control_words(&mut r, 20);
    let mut bad = 0;
    for i in 0..n {
        let (a, b) = rand_pair(&mut r);
        let cw = cws[i % cws.len()];
        let env = Env::from_fcw(cw);
        let h = native(a, b, cw);
        let m = model_reg(a, model(a, b, &env), cw);
        if h != m {
            bad += 1;
            if bad <= 12 {
                eprintln!(
                    "{name} cw={cw:04x} a={:04x}:{:016x} b={:04x}:{:016x}: host {:04x}:{:016x} sw={:04x}, model {:04x}:{:016x} sw={:04x}",
                    { a.se }, { a.sig }, { b.se }, { b.sig }, { h.0.se }, { h.0.sig }, h.1, { m.0.se }, { m.0.sig }, m.1
                );
            }
        }
    }
    assert_eq!(bad, 0, "{name}: {bad} of {n} cases differ from the host");
}

#[test]
fn add_matches_host() {
    compare("fadd", 40000, 1, n_add, |a, b, e| {
        arith::add(a, b, false, e)
    });
}

#[test]
fn sub_matches_host() {
    compare("fsub", 40000, 2, n_sub, |a, b, e| arith::add(a, b, true, e));
}

#[test]
fn mul_matches_host() {
    compare("fmul", 40000, 3, n_mul, arith::mul);
}

#[test]
fn div_matches_host() {
    compare("fdiv", 40000, 4, n_div, arith::div);
}

#[test]
fn sqrt_matches_host() {
    compare("fsqrt", 40000, 5, n_sqrt, |a, _, e| arith::sqrt(a, e));
}
