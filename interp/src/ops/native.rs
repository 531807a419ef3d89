//! Test-only helpers that run instructions natively on the host (`core::arch::asm!`) so the
//! semantic functions can be compared with real hardware, "undefined" flags included.
//!
//! Every native wrapper loads RFLAGS with `push; popfq`, runs one instruction on registers and
//! reads RFLAGS back with `pushfq; pop`. Only the six status flags (plus the fixed bit 1 and IF,
//! which user-mode POPFQ leaves alone) are ever loaded, so no trap or alignment flag is set.

use crate::operand::{mask, sign_bit};
use crate::state::flags::{AF, CF, FIXED1, IF, OF, PF, SF, STATUS, ZF};

/// Deterministic xorshift64 generator with a fixed seed (no host entropy in tests either).
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A test operand: mostly random, often an edge value (0, 1, all ones, sign bit, ...),
    /// sometimes a value with only a few bits set. Bits above the operand size are random too
    /// (semantic functions must ignore them).
    pub fn operand(&mut self, size: u8) -> u64 {
        let bits = size as u32 * 8;
        let sign = 1u64 << (bits - 1);
        let r = self.next();
        let edge = [
            0,
            1,
            2,
            sign,
            sign - 1,
            sign + 1,
            u64::MAX,
            0x7f,
            0x80,
            0x0f,
            0x10,
        ];
        let pick = self.next();
        match pick % 8 {
            0 => (r & !crate::operand::mask(size)) | edge[(pick >> 8) as usize % edge.len()],
            1 => (r & !crate::operand::mask(size)) | (1u64 << ((pick >> 8) % bits as u64)),
            2 => r & self.next() & self.next(),
            _ => r,
        }
    }

    /// A `size`-byte value biased toward interesting shapes (small, sparse, dense, edges).
    pub fn val(&mut self, size: u8) -> u64 {
        let bits = size as u32 * 8;
        let r = self.next();
        let v = match r % 8 {
            0 => r >> 59,
            1 => 1u64 << (self.next() % bits as u64),
            2 => !(1u64 << (self.next() % bits as u64)),
            3 => self.next() >> (self.next() % 64),
            4 => edge_values(size)[(self.next() % 6) as usize],
            _ => self.next(),
        };
        v & mask(size)
    }

    /// Random status flags plus the fixed bit 1 (no IF).
    pub fn status_flags(&mut self) -> u64 {
        (self.next() & STATUS) | FIXED1
    }

    /// Random status flags (with the fixed bit and IF, as the host needs for POPFQ).
    pub fn flags(&mut self) -> u64 {
        (self.next() & STATUS) | FIXED1 | IF
    }
}

/// The operand sizes every comparison covers.
pub const SIZES: [u8; 4] = [1, 2, 4, 8];

/// Is the host an Intel CPU? The "undefined" flag rules are this Intel host's; elsewhere the
/// native comparisons are skipped (a different machine must not turn the tests red by itself).
pub fn host_is_intel() -> bool {
    &host_vendor() == b"GenuineIntel"
}

/// Is the host an AMD CPU? Its x87 arithmetic (FADD…FDIV, FSQRT, every control word and
/// operand class the comparisons draw) matched Intel's model on an AMD EPYC host (session 39),
/// so `x87::native_tests` run there too.
pub fn host_is_amd() -> bool {
    &host_vendor() == b"AuthenticAMD"
}

/// CPUID leaf 0's vendor string.
pub fn host_vendor() -> [u8; 12] {
    let r = core::arch::x86_64::__cpuid(0);
    let mut v = [0u8; 12];
    v[..4].copy_from_slice(&r.ebx.to_le_bytes());
    v[4..8].copy_from_slice(&r.edx.to_le_bytes());
    v[8..].copy_from_slice(&r.ecx.to_le_bytes());
    v
}

/// `OSZAPC` rendering of the status flags, `.` for clear.
pub fn fmt_flags(f: u64) -> String {
    [
        (OF, 'O'),
        (SF, 'S'),
        (ZF, 'Z'),
        (AF, 'A'),
        (PF, 'P'),
        (CF, 'C'),
    ]
    .iter()
    .map(|&(b, c)| if f & b != 0 { c } else { '.' })
    .collect()
}

/// Collects mismatches between host and model; `finish` fails the test listing the first few.
#[derive(Default)]
pub struct Mismatches {
    pub count: usize,
    pub cases: usize,
    first: Vec<String>,
}

impl Mismatches {
    /// Compare one case: `what` describes the inputs, results are compared under `mask`.
    pub fn check(
        &mut self,
        what: impl FnOnce() -> String,
        mask: u64,
        host: (u64, u64),
        model: (u64, u64),
    ) {
        self.cases += 1;
        let (hr, hf) = (host.0 & mask, host.1 & STATUS);
        let (mr, mf) = (model.0 & mask, model.1 & STATUS);
        if hr != mr || hf != mf {
            self.count += 1;
            if self.first.len() < 12 {
                self.first.push(format!(
                    "{}: host {hr:#x} {} model {mr:#x} {}",
                    what(),
                    fmt_flags(hf),
                    fmt_flags(mf)
                ));
            }
        }
    }

    pub fn finish(self, name: &str) {
        assert!(self.cases > 0, "{name}: no cases ran");
        assert!(
            self.count == 0,
            "{name}: {} of {} cases differ from the host:\n{}",
            self.count,
            self.cases,
            self.first.join("\n")
        );
    }
}

/// A host instruction `insn dst, src` on two registers of one width (`m` is the register
/// template modifier: ":l", ":x", ":e" or ""). Yields `fn(dst, src, rflags) -> (dst, rflags)`.
macro_rules! native_rr {
    ($insn:literal, $m:literal) => {{
        fn f(a: u64, b: u64, fl: u64) -> (u64, u64) {
            let (mut a, mut fl) = (a, fl);
            // SAFETY: register-only instruction between a POPFQ/PUSHFQ pair that leaves the
            // stack balanced; only status flags, bit 1 and IF are loaded into RFLAGS.
            unsafe {
                core::arch::asm!(
                    "push {fl}", "popfq",
                    concat!($insn, " {a", $m, "}, {b", $m, "}"),
                    "pushfq", "pop {fl}",
                    a = inout(reg) a, b = in(reg) b, fl = inout(reg) fl,
                )
            }
            (a, fl)
        }
        f as fn(u64, u64, u64) -> (u64, u64)
    }};
}

/// A host instruction `insn dst` on one register. Yields `fn(dst, rflags) -> (dst, rflags)`.
macro_rules! native_r {
    ($insn:literal, $m:literal) => {{
        fn f(a: u64, fl: u64) -> (u64, u64) {
            let (mut a, mut fl) = (a, fl);
            // SAFETY: as in `native_rr`.
            unsafe {
                core::arch::asm!(
                    "push {fl}", "popfq",
                    concat!($insn, " {a", $m, "}"),
                    "pushfq", "pop {fl}",
                    a = inout(reg) a, fl = inout(reg) fl,
                )
            }
            (a, fl)
        }
        f as fn(u64, u64) -> (u64, u64)
    }};
}

/// A host shift/rotate `insn dst, cl`. Yields `fn(dst, count, rflags) -> (dst, rflags)`.
macro_rules! native_shift_cl {
    ($insn:literal, $m:literal) => {{
        fn f(a: u64, c: u64, fl: u64) -> (u64, u64) {
            let (mut a, mut fl) = (a, fl);
            // SAFETY: as in `native_rr`.
            unsafe {
                core::arch::asm!(
                    "push {fl}", "popfq",
                    concat!($insn, " {a", $m, "}, cl"),
                    "pushfq", "pop {fl}",
                    a = inout(reg) a, fl = inout(reg) fl, in("cl") c as u8,
                )
            }
            (a, fl)
        }
        f as fn(u64, u64, u64) -> (u64, u64)
    }};
}

/// A host shift/rotate in its shift-by-one encoding (D0/D1). Yields `fn(dst, rflags)`.
macro_rules! native_shift_1 {
    ($insn:literal, $m:literal) => {{
        fn f(a: u64, fl: u64) -> (u64, u64) {
            let (mut a, mut fl) = (a, fl);
            // SAFETY: as in `native_rr`.
            unsafe {
                core::arch::asm!(
                    "push {fl}", "popfq",
                    concat!($insn, " {a", $m, "}, 1"),
                    "pushfq", "pop {fl}",
                    a = inout(reg) a, fl = inout(reg) fl,
                )
            }
            (a, fl)
        }
        f as fn(u64, u64) -> (u64, u64)
    }};
}

/// A host double shift `insn dst, src, cl`. Yields `fn(dst, src, count, rflags)`.
macro_rules! native_shd_cl {
    ($insn:literal, $m:literal) => {{
        fn f(a: u64, b: u64, c: u64, fl: u64) -> (u64, u64) {
            let (mut a, mut fl) = (a, fl);
            // SAFETY: as in `native_rr`.
            unsafe {
                core::arch::asm!(
                    "push {fl}", "popfq",
                    concat!($insn, " {a", $m, "}, {b", $m, "}, cl"),
                    "pushfq", "pop {fl}",
                    a = inout(reg) a, b = in(reg) b, fl = inout(reg) fl, in("cl") c as u8,
                )
            }
            (a, fl)
        }
        f as fn(u64, u64, u64, u64) -> (u64, u64)
    }};
}

pub(crate) use {native_r, native_rr, native_shd_cl, native_shift_1, native_shift_cl};

/// 0, 1, 2, all-ones, the sign bit and its neighbours, for `size` bytes.
pub fn edge_values(size: u8) -> [u64; 8] {
    let (m, s) = (mask(size), sign_bit(size));
    [0, 1, 2, m, s, s - 1, s + 1, m - 1]
}

/// Call `f(a, b, flags_in)` for all pairs of edge values and 400 pseudo-random pairs
/// (the random ones with random bits above `size` bytes, which must be ignored).
pub fn for_inputs(size: u8, mut f: impl FnMut(u64, u64, u64)) {
    let mut r = XorShift::new(0x0123_4567_89ab_cdef ^ size as u64);
    let e = edge_values(size);
    for &a in &e {
        for &b in &e {
            let fl = r.status_flags();
            f(a, b, fl);
        }
    }
    for _ in 0..400 {
        let junk = |r: &mut XorShift| {
            if r.next() & 1 == 0 {
                r.next() & !mask(size)
            } else {
                0
            }
        };
        let a = r.val(size) | junk(&mut r);
        let b = r.val(size) | junk(&mut r);
        let fl = r.status_flags();
        f(a, b, fl);
    }
}
