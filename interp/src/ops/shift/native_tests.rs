//! Native comparison of SHL/SHR/SAR/ROL/ROR/RCL/RCR with this host, every size, all counts.

use super::*;
use crate::operand::mask;
use crate::ops::native::{
    host_is_intel, native_shift_1, native_shift_cl, Mismatches, XorShift, SIZES,
};

type Native = fn(u64, u64, u64) -> (u64, u64);
type Native1 = fn(u64, u64) -> (u64, u64);
type Model = fn(u64, u64, u8, u64) -> (u64, u64);

macro_rules! four_sizes {
    ($mac:ident, $insn:literal) => {
        [
            $mac!($insn, ":l"),
            $mac!($insn, ":x"),
            $mac!($insn, ":e"),
            $mac!($insn, ""),
        ]
    };
}

/// Each size: 300 operands x every count 0..=71 (so masking is exercised) with random input
/// flags, plus the shift-by-one encoding.
fn compare(name: &str, host: [Native; 4], host1: [Native1; 4], model: Model) {
    if !host_is_intel() {
        eprintln!("{name}: host is not Intel, native comparison skipped");
        return;
    }
    let mut rng = XorShift::new(0x5eed_0000_0000_0001 ^ name.len() as u64);
    let mut mm = Mismatches::default();
    for (i, &size) in SIZES.iter().enumerate() {
        for _ in 0..300 {
            let v = rng.operand(size);
            let fl = rng.flags();
            for count in 0..72u64 {
                let got = host[i](v, count, fl);
                let want = model(v, count, size, fl);
                mm.check(
                    || format!("{name} size {size} v={v:#x} count={count} fl={fl:#x}"),
                    mask(size),
                    got,
                    want,
                );
            }
            let got = host1[i](v, fl);
            let want = model(v, 1, size, fl);
            mm.check(
                || format!("{name} size {size} v={v:#x} by-one fl={fl:#x}"),
                mask(size),
                got,
                want,
            );
        }
    }
    mm.finish(name);
}

#[test]
fn shl_matches_host() {
    compare(
        "shl",
        four_sizes!(native_shift_cl, "shl"),
        four_sizes!(native_shift_1, "shl"),
        shl,
    );
}

#[test]
fn shr_matches_host() {
    compare(
        "shr",
        four_sizes!(native_shift_cl, "shr"),
        four_sizes!(native_shift_1, "shr"),
        shr,
    );
}

#[test]
fn sar_matches_host() {
    compare(
        "sar",
        four_sizes!(native_shift_cl, "sar"),
        four_sizes!(native_shift_1, "sar"),
        sar,
    );
}

#[test]
fn rol_matches_host() {
    compare(
        "rol",
        four_sizes!(native_shift_cl, "rol"),
        four_sizes!(native_shift_1, "rol"),
        rol,
    );
}

#[test]
fn ror_matches_host() {
    compare(
        "ror",
        four_sizes!(native_shift_cl, "ror"),
        four_sizes!(native_shift_1, "ror"),
        ror,
    );
}

#[test]
fn rcl_matches_host() {
    compare(
        "rcl",
        four_sizes!(native_shift_cl, "rcl"),
        four_sizes!(native_shift_1, "rcl"),
        rcl,
    );
}

#[test]
fn rcr_matches_host() {
    compare(
        "rcr",
        four_sizes!(native_shift_cl, "rcr"),
        four_sizes!(native_shift_1, "rcr"),
        rcr,
    );
}
