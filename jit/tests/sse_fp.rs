//! The natively lowered SSE floating-point instructions (`lift/sse_fp.rs`) against the
//! interpreter: every lowered form (register and memory sources) on operands biased to special
//! values (zeros, denormals, NaNs with payloads, infinities, band edges, overflowing and
//! underflowing results, exact and inexact results) and fixed-seed random values, under
//! default and non-default MXCSR environments; plus #GP for a misaligned m128, #PF, #NM/#UD
//! with SSE unavailable. After every instruction the result, MXCSR (then reset) and, for the
//! compares, RFLAGS are folded into R8, so a wrong value or PE decision of any single
//! instruction shows in the final state.

mod common;

use common::{compare, eager_config, XorShift};
use iced_x86::code_asm::*;
use lockstep_interp::state::ctl;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

/// Records (32 bytes: 16 of operand a, 16 of operand b) per table.
const N: u64 = 160;
/// The f64-biased table, the f32-biased table, scratch, the MXCSR to reset to.
const TAB_D: u64 = DATA_BASE;
const TAB_S: u64 = DATA_BASE + 0x2000;
const SCRATCH: u64 = DATA_BASE + 0x8000;
const MX_BASE: u64 = DATA_BASE + 0x9000;

const D_SPECIAL: &[u64] = &[
    0,
    0x8000_0000_0000_0000,             // -0
    0x3ff0_0000_0000_0000,             // 1
    0xbff0_0000_0000_0000,             // -1
    0x3ff8_0000_0000_0000,             // 1.5
    0x4008_0000_0000_0000,             // 3
    0x3fb9_9999_9999_999a,             // 0.1
    0xc004_0000_0000_0000,             // -2.5
    1,                                 // smallest denormal (and the integer 1)
    0x000f_ffff_ffff_ffff,             // largest denormal
    0x8000_0000_0000_0001,             // negative denormal
    0x0010_0000_0000_0000,             // smallest normal
    0x7ff8_0000_0000_0000,             // qNaN
    0x7ff0_0000_0000_0001,             // sNaN
    0x7ff8_dead_beef_0001,             // qNaN with payload
    0xfff4_0000_0000_1234,             // negative sNaN with payload
    0x7ff0_0000_0000_0000,             // +inf
    0xfff0_0000_0000_0000,             // -inf
    0x7fef_ffff_ffff_ffff,             // max
    100 << 52,                         // band low edge
    (99 << 52) | 0x8_0000_0000_0000,   // just below the band
    (1947 << 52) | 0xf_ffff_ffff_ffff, // band high edge
    1948 << 52,                        // just above
    (1023 + 900) << 52,                // 2^900: products overflow the band
    (1023 - 900) << 52,                // 2^-900: products underflow
    0x41e0_0000_0000_0000,             // 2^31
    0xc1e0_0000_0000_0000,             // -2^31
    0xc1e0_0000_0010_0000,             // -2^31 - 0.5
    0x41df_ffff_ffe0_0000,             // 2^31 - 1
    0x41df_ffff_fff0_0000,             // 2^31 - 0.5
    0x43e0_0000_0000_0000,             // 2^63
    0xc3e0_0000_0000_0000,             // -2^63
    0x4340_0000_0000_0001,             // 2^53 + 2
    0x3ff0_0000_0000_0001,             // 1 + ulp
    0x47ef_ffff_e000_0000,             // f32 max
    0x47ef_ffff_f000_0000,             // rounds to f32 inf
    0x3810_0000_0000_0000,             // f32 min normal
    0x36a0_0000_0000_0000,             // f32 denormal range
    0x380f_ffff_f000_0000,             // rounds up to the f32 min normal
    u64::MAX,                          // NaN, and the integer -1
    0x7fff_ffff_ffff_ffff,             // NaN, and i64::MAX
    0x0020_0000_0000_0001,             // the integer 2^53 + 1
    0x0000_0000_8000_0000,             // the integer 2^31
    0xffff_ffff_8000_0000,             // the integer -2^31
];

const S_SPECIAL: &[u32] = &[
    0,
    0x8000_0000,
    0x3f80_0000, // 1
    0xbf80_0000,
    0x3fc0_0000, // 1.5
    0x4040_0000, // 3
    0x3dcc_cccd, // 0.1
    1,
    0x007f_ffff,
    0x8000_0001,
    0x0080_0000,
    0x7fc0_0000,
    0x7f80_0001,
    0x7fc0_beef,
    0xffa0_0001,
    0x7f80_0000,
    0xff80_0000,
    0x7f7f_ffff,
    40 << 23,
    (39 << 23) | 0x40_0000,
    (214 << 23) | 0x7f_ffff,
    215 << 23,
    (127 + 80) << 23,
    (127 - 80) << 23,
    0x4f00_0000, // 2^31
    0xcf00_0000,
    0x5f00_0000, // 2^63
    0xdf00_0000,
    0x4b80_0001, // 2^24 + 2
    0x3f80_0001,
    0xffff_ffff,
    0x0100_0001, // the integer 2^24 + 1
];

/// An f64 bit pattern: specials, typical values, band edges, values with short significands
/// (exact results) and random bits.
fn gen_d(r: &mut XorShift, typical_only: bool) -> u64 {
    let k = if typical_only {
        1 + r.next() % 3
    } else {
        r.next() % 8
    };
    let sign = (r.next() & 1) << 63;
    match k {
        0 => D_SPECIAL[(r.next() % D_SPECIAL.len() as u64) as usize],
        1 => sign | ((1023 - 60 + r.next() % 121) << 52) | (r.next() >> 12),
        // Short significands: many exact sums, products and quotients.
        2 => sign | ((1023 - 30 + r.next() % 61) << 52) | ((r.next() >> 12) & !((1 << 40) - 1)),
        3 => sign | ((1023 - 150 + r.next() % 301) << 52) | (r.next() >> 12),
        4 => {
            let e = if r.next() & 1 == 0 { 100 } else { 1947 };
            sign | ((e - 3 + r.next() % 7) << 52) | (r.next() >> 12)
        }
        5 => sign | ((r.next() % 2048) << 52) | (r.next() >> 12),
        6 => r.next() >> (r.next() % 64),
        _ => r.next(),
    }
}

fn gen_s(r: &mut XorShift, typical_only: bool) -> u32 {
    let k = if typical_only {
        1 + r.next() % 3
    } else {
        r.next() % 8
    };
    let sign = ((r.next() & 1) << 31) as u32;
    let frac = (r.next() >> 41) as u32;
    match k {
        0 => S_SPECIAL[(r.next() % S_SPECIAL.len() as u64) as usize],
        1 => sign | ((127 - 20 + r.next() % 41) << 23) as u32 | frac,
        2 => sign | ((127 - 10 + r.next() % 21) << 23) as u32 | (frac & !0xffff),
        3 => sign | ((127 - 60 + r.next() % 121) << 23) as u32 | frac,
        4 => {
            let e = if r.next() & 1 == 0 { 40 } else { 214 };
            sign | ((e - 3 + r.next() % 7) << 23) as u32 | frac
        }
        5 => sign | ((r.next() % 256) << 23) as u32 | frac,
        6 => (r.next() >> (r.next() % 64)) as u32,
        _ => r.next() as u32,
    }
}

/// Fill the two tables (even records: typical lanes only, so packed forms take the fast path
/// often) and set the MXCSR every instruction starts from.
fn setup(m: &mut TestMachine, seed: u64, mx: u32) {
    let mut r = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut d = Vec::new();
    let mut s = Vec::new();
    for i in 0..N {
        let typical = i % 2 == 0;
        let mut dr: Vec<u64> = (0..4).map(|_| gen_d(&mut r, typical)).collect();
        let mut sr: Vec<u32> = (0..8).map(|_| gen_s(&mut r, typical)).collect();
        // Every fourth record compares equal operands (b = a; lane 1: b = -a, so ±0 pairs).
        if i % 4 == 3 {
            dr[2] = dr[0];
            dr[3] = dr[1] ^ (1 << 63);
            for k in 0..4 {
                sr[4 + k] = sr[k] ^ (((k == 1) as u32) << 31);
            }
        }
        if i % 8 == 7 {
            dr[0] &= 1 << 63;
            dr[2] = dr[0] ^ (1 << 63);
            sr[0] &= 1 << 31;
            sr[4] = sr[0] ^ (1 << 31);
        }
        for v in dr {
            d.extend_from_slice(&v.to_le_bytes());
        }
        for v in sr {
            s.extend_from_slice(&v.to_le_bytes());
        }
    }
    m.load(TAB_D, &d);
    m.load(TAB_S, &s);
    m.load(MX_BASE, &mx.to_le_bytes());
    m.cpu.state.mxcsr = mx;
}

type Asm<'a> = &'a mut CodeAssembler;
type R = Result<(), IcedError>;

/// Fold XMM1, MXCSR (then reset to the base) and RAX into R8.
fn fold(a: Asm) -> R {
    a.movups(xmmword_ptr(rdi), xmm1)?;
    a.stmxcsr(dword_ptr(rdi + 16))?;
    a.xor(r8, qword_ptr(rdi))?;
    a.rol(r8, 5)?;
    a.xor(r8, qword_ptr(rdi + 8))?;
    a.rol(r8, 7)?;
    a.xor(r8, qword_ptr(rdi + 16))?;
    a.rol(r8, 11)?;
    a.xor(r8, rax)?;
    a.ldmxcsr(dword_ptr(rsi))
}

/// Load operands a (XMM1) and b (XMM2) from the record at `t`.
fn load(a: Asm, t: AsmRegister64) -> R {
    a.movaps(xmm1, xmmword_ptr(t))?;
    a.movaps(xmm2, xmmword_ptr(t + 16))?;
    a.xor(eax, eax)
}

type Bin = fn(Asm, AsmRegisterXmm, AsmMemoryOperand) -> R;
type BinR = fn(Asm, AsmRegisterXmm, AsmRegisterXmm) -> R;

/// `op xmm1, xmm2` and `op xmm1, [t + 16]` (the memory operand typed by `mem`).
fn both(
    a: Asm,
    t: AsmRegister64,
    r: BinR,
    m: Bin,
    mem: fn(AsmMemoryOperand) -> AsmMemoryOperand,
) -> R {
    load(a, t)?;
    r(a, xmm1, xmm2)?;
    fold(a)?;
    load(a, t)?;
    m(a, xmm1, mem(t + 16))?;
    fold(a)
}

fn q(m: AsmMemoryOperand) -> AsmMemoryOperand {
    qword_ptr(m)
}
fn d(m: AsmMemoryOperand) -> AsmMemoryOperand {
    dword_ptr(m)
}
fn x(m: AsmMemoryOperand) -> AsmMemoryOperand {
    xmmword_ptr(m)
}

macro_rules! bin {
    ($a:expr, $t:expr, $op:ident, $mem:expr) => {
        both(
            $a,
            $t,
            |a, x, y| a.$op(x, y).map(|_| ()),
            |a, x, m| a.$op(x, m).map(|_| ()),
            $mem,
        )?
    };
}

/// A compare: its flags folded through PUSHF, and through SETA/SETP (lazy flags read).
fn comi(
    a: Asm,
    t: AsmRegister64,
    r: BinR,
    m: Bin,
    mem: fn(AsmMemoryOperand) -> AsmMemoryOperand,
) -> R {
    for reg in [true, false] {
        load(a, t)?;
        a.add(r9, 1)?; // a pending flags record COMIS must replace
        if reg {
            r(a, xmm1, xmm2)?;
        } else {
            m(a, xmm1, mem(t + 16))?;
        }
        a.seta(al)?;
        a.setp(dl)?;
        a.add(r9, rdx)?;
        a.pushfq()?;
        a.pop(rdx)?;
        a.xor(rax, rdx)?;
        a.mov(rdx, rbp)?;
        fold(a)?;
    }
    Ok(())
}

macro_rules! cmp {
    ($a:expr, $t:expr, $op:ident, $mem:expr) => {
        comi(
            $a,
            $t,
            |a, x, y| a.$op(x, y).map(|_| ()),
            |a, x, m| a.$op(x, m).map(|_| ()),
            $mem,
        )?
    };
}

/// Every lowered form on each record of both tables. RBX walks the f64 table, RBP the f32
/// table (RDX is scratch and gets RBP back after use).
fn program() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, N)?;
        a.mov(rbx, TAB_D)?;
        a.mov(rbp, TAB_S)?;
        a.mov(rdi, SCRATCH)?;
        a.mov(rsi, MX_BASE)?;
        a.xor(r8, r8)?;
        a.xor(r9, r9)?;
        a.set_label(&mut top)?;
        let (t, u) = (rbx, rbp);
        bin!(a, t, addsd, q);
        bin!(a, t, subsd, q);
        bin!(a, t, mulsd, q);
        bin!(a, t, divsd, q);
        bin!(a, t, sqrtsd, q);
        bin!(a, t, minsd, q);
        bin!(a, t, maxsd, q);
        bin!(a, t, addpd, x);
        bin!(a, t, subpd, x);
        bin!(a, t, mulpd, x);
        bin!(a, t, divpd, x);
        bin!(a, t, sqrtpd, x);
        bin!(a, t, cvtsd2ss, q);
        bin!(a, u, addss, d);
        bin!(a, u, subss, d);
        bin!(a, u, mulss, d);
        bin!(a, u, divss, d);
        bin!(a, u, sqrtss, d);
        bin!(a, u, minss, d);
        bin!(a, u, maxss, d);
        bin!(a, u, addps, x);
        bin!(a, u, subps, x);
        bin!(a, u, mulps, x);
        bin!(a, u, divps, x);
        bin!(a, u, sqrtps, x);
        bin!(a, u, cvtss2sd, d);
        cmp!(a, t, comisd, q);
        cmp!(a, t, ucomisd, q);
        cmp!(a, u, comiss, d);
        cmp!(a, u, ucomiss, d);
        a.mov(rdx, rbp)?;
        // Integer sources: the records' bit patterns.
        for tab in [t, u] {
            load(a, tab)?;
            a.mov(r10, qword_ptr(tab + 16))?;
            a.cvtsi2sd(xmm1, r10)?;
            fold(a)?;
            a.cvtsi2sd(xmm1, r10d)?;
            fold(a)?;
            a.cvtsi2ss(xmm1, r10)?;
            fold(a)?;
            a.cvtsi2ss(xmm1, r10d)?;
            fold(a)?;
            a.cvtsi2sd(xmm1, qword_ptr(tab + 8))?;
            fold(a)?;
            a.cvtsi2sd(xmm1, dword_ptr(tab + 4))?;
            fold(a)?;
            a.cvtsi2ss(xmm1, qword_ptr(tab + 24))?;
            fold(a)?;
            a.cvtsi2ss(xmm1, dword_ptr(tab + 20))?;
            fold(a)?;
        }
        // Truncating conversions to integers (RAX is folded).
        load(a, t)?;
        a.cvttsd2si(rax, xmm2)?;
        fold(a)?;
        a.cvttsd2si(eax, xmm1)?;
        fold(a)?;
        a.cvttsd2si(r11, qword_ptr(t + 16))?;
        a.mov(rax, r11)?;
        fold(a)?;
        a.cvttsd2si(eax, qword_ptr(t + 24))?;
        fold(a)?;
        load(a, u)?;
        a.cvttss2si(rax, xmm2)?;
        fold(a)?;
        a.cvttss2si(eax, xmm1)?;
        fold(a)?;
        a.cvttss2si(r11, dword_ptr(u + 16))?;
        a.mov(rax, r11)?;
        fold(a)?;
        a.cvttss2si(eax, dword_ptr(u + 20))?;
        fold(a)?;
        a.add(rbx, 32i32)?;
        a.add(rbp, 32i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

type Tri = fn(Asm, AsmRegisterXmm, AsmRegisterXmm, AsmMemoryOperand) -> R;
type TriR = fn(Asm, AsmRegisterXmm, AsmRegisterXmm, AsmRegisterXmm) -> R;

/// Operands for a VEX form: a in XMM4, b in XMM2, and YMM1 (the destination) with all 256
/// bits set from the record, so the zeroing of bits 255:128 shows.
fn load_vex(a: Asm, t: AsmRegister64) -> R {
    a.movaps(xmm4, xmmword_ptr(t))?;
    a.movaps(xmm2, xmmword_ptr(t + 16))?;
    a.vmovdqu(ymm1, ymmword_ptr(t))?;
    a.xor(eax, eax)
}

/// [`fold`], plus bits 255:128 of YMM1.
fn fold_vex(a: Asm) -> R {
    a.vmovdqu(ymmword_ptr(rdi + 32), ymm1)?;
    a.xor(r8, qword_ptr(rdi + 48))?;
    a.rol(r8, 3)?;
    a.xor(r8, qword_ptr(rdi + 56))?;
    fold(a)
}

/// `op xmm1, xmm4, xmm2` and `op xmm1, xmm4, [t + 16]`.
fn both_vex(
    a: Asm,
    t: AsmRegister64,
    r: TriR,
    m: Tri,
    mem: fn(AsmMemoryOperand) -> AsmMemoryOperand,
) -> R {
    load_vex(a, t)?;
    r(a, xmm1, xmm4, xmm2)?;
    fold_vex(a)?;
    load_vex(a, t)?;
    m(a, xmm1, xmm4, mem(t + 16))?;
    fold_vex(a)
}

macro_rules! tri {
    ($a:expr, $t:expr, $op:ident, $mem:expr) => {
        both_vex(
            $a,
            $t,
            |a, x, y, z| a.$op(x, y, z).map(|_| ()),
            |a, x, y, m| a.$op(x, y, m).map(|_| ()),
            $mem,
        )?
    };
}

/// The VEX forms, as [`program`].
fn program_vex() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, N)?;
        a.mov(rbx, TAB_D)?;
        a.mov(rbp, TAB_S)?;
        a.mov(rdi, SCRATCH)?;
        a.mov(rsi, MX_BASE)?;
        a.xor(r8, r8)?;
        a.xor(r9, r9)?;
        a.set_label(&mut top)?;
        let (t, u) = (rbx, rbp);
        tri!(a, t, vaddsd, q);
        tri!(a, t, vsubsd, q);
        tri!(a, t, vmulsd, q);
        tri!(a, t, vdivsd, q);
        tri!(a, t, vsqrtsd, q);
        tri!(a, t, vminsd, q);
        tri!(a, t, vmaxsd, q);
        tri!(a, t, vcvtsd2ss, q);
        tri!(a, u, vaddss, d);
        tri!(a, u, vsubss, d);
        tri!(a, u, vmulss, d);
        tri!(a, u, vdivss, d);
        tri!(a, u, vsqrtss, d);
        tri!(a, u, vminss, d);
        tri!(a, u, vmaxss, d);
        tri!(a, u, vcvtss2sd, d);
        cmp!(a, t, vcomisd, q);
        cmp!(a, t, vucomisd, q);
        cmp!(a, u, vcomiss, d);
        cmp!(a, u, vucomiss, d);
        for tab in [t, u] {
            load_vex(a, tab)?;
            a.mov(r10, qword_ptr(tab + 16))?;
            a.vcvtsi2sd(xmm1, xmm4, r10)?;
            fold_vex(a)?;
            a.vcvtsi2sd(xmm1, xmm4, r10d)?;
            fold_vex(a)?;
            a.vcvtsi2ss(xmm1, xmm4, r10)?;
            fold_vex(a)?;
            a.vcvtsi2ss(xmm1, xmm4, dword_ptr(tab + 20))?;
            fold_vex(a)?;
            a.vcvtsi2sd(xmm1, xmm4, qword_ptr(tab + 8))?;
            fold_vex(a)?;
        }
        load_vex(a, t)?;
        a.vcvttsd2si(rax, xmm2)?;
        fold(a)?;
        a.vcvttsd2si(eax, qword_ptr(t + 24))?;
        fold(a)?;
        load_vex(a, u)?;
        a.vcvttss2si(rax, dword_ptr(u + 16))?;
        fold(a)?;
        a.vcvttss2si(eax, xmm4)?;
        fold(a)?;
        a.add(rbx, 32i32)?;
        a.add(rbp, 32i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn vex_scalar_forms_match_interpreter() {
    let code = program_vex();
    for (i, &mx) in [
        0x1f80u32, 0x1f80, 0x1fa0, 0x5f80, 0x1fc0, 0x9f80, 0x0f80, 0x1e80,
    ]
    .iter()
    .enumerate()
    {
        let (_, jit, exit) = compare(&code, &[100_000_000], eager_config(), &|m| {
            setup(m, 30 + i as u64, mx)
        });
        if i < 2 {
            assert!(exit.retired > 50_000, "{exit:?}");
            assert!(jit.stats.native_insns > 100, "{:?}", jit.stats);
        }
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    }
    let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 41) % 89).collect();
    compare(&code, &slices, eager_config(), &|m| setup(m, 3, 0x1f80));
}

/// `op xmm1, xmm2, xmm5` and `op xmm1, xmm2, [t + 8]` (three different operands: XMM1 = a,
/// XMM2 = b, XMM5 and the memory = the second lane of a).
macro_rules! fma {
    ($a:expr, $t:expr, $mem:ident, $($op:ident),*) => {$(
        load_vex($a, $t)?;
        $a.movups(xmm5, xmmword_ptr($t + 8))?;
        $a.$op(xmm1, xmm2, xmm5)?;
        fold_vex($a)?;
        load_vex($a, $t)?;
        $a.$op(xmm1, xmm2, $mem($t + 8))?;
        fold_vex($a)?;
    )*};
}

/// The scalar FMA3 forms (lowered only with MXCSR.PE already set).
fn program_fma() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, N)?;
        a.mov(rbx, TAB_D)?;
        a.mov(rbp, TAB_S)?;
        a.mov(rdi, SCRATCH)?;
        a.mov(rsi, MX_BASE)?;
        a.xor(r8, r8)?;
        a.set_label(&mut top)?;
        let (t, u) = (rbx, rbp);
        fma!(
            a,
            t,
            qword_ptr,
            vfmadd132sd,
            vfmadd213sd,
            vfmadd231sd,
            vfmsub132sd,
            vfmsub213sd,
            vfmsub231sd,
            vfnmadd132sd,
            vfnmadd213sd,
            vfnmadd231sd,
            vfnmsub132sd,
            vfnmsub213sd,
            vfnmsub231sd
        );
        fma!(
            a,
            u,
            dword_ptr,
            vfmadd132ss,
            vfmadd213ss,
            vfmadd231ss,
            vfmsub132ss,
            vfmsub213ss,
            vfmsub231ss,
            vfnmadd132ss,
            vfnmadd213ss,
            vfnmadd231ss,
            vfnmsub132ss,
            vfnmsub213ss,
            vfnmsub231ss
        );
        a.add(rbx, 32i32)?;
        a.add(rbp, 32i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn fma_scalar_forms_match_interpreter() {
    let code = program_fma();
    let envs = [
        0x1fa0u32, 0x1fa0, 0x1f80, 0x1fbf, 0x3fa0, 0x1fe0, 0x9fa0, 0x0fa0, 0x1f20,
    ];
    for (i, &mx) in envs.iter().enumerate() {
        let (_, jit, exit) = compare(&code, &[100_000_000], eager_config(), &|m| {
            setup(m, 50 + i as u64, mx)
        });
        if i < 2 {
            assert!(exit.retired > 50_000, "{exit:?}");
            assert!(jit.stats.native_insns > 100, "{:?}", jit.stats);
        }
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    }
    let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 43) % 83).collect();
    compare(&code, &slices, eager_config(), &|m| setup(m, 4, 0x1fa0));
}

/// AVX state disabled in XCR0: the first VEX form raises #UD in both engines.
#[test]
fn vex_with_avx_disabled_is_ud() {
    for op in [
        (|a: Asm| a.vaddsd(xmm1, xmm2, xmm3).map(|_| ())) as fn(Asm) -> R,
        |a| a.vucomisd(xmm1, qword_ptr(rbx)).map(|_| ()),
        |a| a.vcvttsd2si(rax, xmm1).map(|_| ()),
    ] {
        let e = single(op, &|m| m.cpu.state.xcr0 = 0b11);
        assert!(is_exception(&e), "{e:?}");
        assert_eq!(e.retired, 2, "{e:?}");
    }
}

/// The MXCSR environments: default (flags clear, or PE / all flags already set), each
/// rounding mode, DAZ, FTZ, and unmasked exceptions (#XM/#UD at the first one raised).
const ENVS: &[u32] = &[
    0x1f80, 0x1fa0, 0x1fbf, 0x3f80, 0x5f80, 0x7f80, 0x1fc0, 0x9f80, 0x9fc0, 0x1f00, 0x0f80, 0x1d80,
    0x1e80, 0x1b80, 0x1780,
];

#[test]
fn sse_fp_matches_interpreter_default_env() {
    let code = program();
    for seed in [1u64, 2, 3, 4] {
        let (_, jit, exit) = compare(&code, &[100_000_000], eager_config(), &|m| {
            setup(m, seed, 0x1f80)
        });
        assert!(
            matches!(exit.reason, ExitReason::Exception(_)),
            "ends at HLT (#GP at CPL 3): {exit:?}"
        );
        assert!(exit.retired > 100_000, "{exit:?}");
        assert!(jit.stats.native_insns > 100, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    }
}

#[test]
fn sse_fp_matches_interpreter_every_env() {
    let code = program();
    for (i, &mx) in ENVS.iter().enumerate() {
        let (_, jit, _) = compare(&code, &[100_000_000], eager_config(), &|m| {
            setup(m, 10 + i as u64, mx)
        });
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
    }
}

/// Budget slices that stop inside the loop body (retired counts and state at every stop).
#[test]
fn sse_fp_budget_slices() {
    let code = program();
    let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 37) % 97).collect();
    compare(&code, &slices, eager_config(), &|m| setup(m, 5, 0x1f80));
}

/// One instruction form at the start of a program, with `setup` applied.
fn single(op: impl Fn(Asm) -> R, setup_fn: &dyn Fn(&mut TestMachine)) -> lockstep_interp::Exit {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 4u64)?;
        a.mov(rbx, TAB_D)?;
        a.set_label(&mut top)?;
        op(a)?;
        a.add(rbx, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| {
        setup(m, 7, 0x1f80);
        setup_fn(m);
    });
    exit
}

fn is_exception(e: &lockstep_interp::Exit) -> bool {
    matches!(e.reason, ExitReason::Exception(_))
}

/// A misaligned m128 (RBX steps by 8): #GP at the second iteration in both engines.
#[test]
fn misaligned_packed_operand_faults() {
    for op in [
        (|a: Asm| a.addpd(xmm1, xmmword_ptr(rbx)).map(|_| ())) as fn(Asm) -> R,
        |a| a.mulps(xmm1, xmmword_ptr(rbx)).map(|_| ()),
        |a| a.sqrtpd(xmm1, xmmword_ptr(rbx)).map(|_| ()),
    ] {
        let e = single(op, &|_| {});
        assert!(is_exception(&e), "{e:?}");
        assert_eq!(e.retired, 2 + 4, "{e:?}");
    }
}

/// An unmapped scalar memory operand: #PF in both engines.
#[test]
fn unmapped_operand_faults() {
    let e = single(
        |a| {
            a.mov(rdx, 0x7fff_0000_0000u64)?;
            a.addsd(xmm1, qword_ptr(rdx))
        },
        &|_| {},
    );
    assert!(is_exception(&e), "{e:?}");
}

/// SSE unavailable: CR0.TS (#NM), CR0.EM (#UD), CR4.OSFXSR clear (#UD) — at the first FP
/// instruction, in both engines.
#[test]
fn sse_unavailable_faults() {
    let setups: [&dyn Fn(&mut TestMachine); 3] = [
        &|m| m.cpu.state.cr0 |= ctl::CR0_TS,
        &|m| m.cpu.state.cr0 |= ctl::CR0_EM,
        &|m| m.cpu.state.cr4 &= !ctl::CR4_OSFXSR,
    ];
    for s in setups {
        for op in [
            (|a: Asm| a.addsd(xmm1, xmm2).map(|_| ())) as fn(Asm) -> R,
            |a| a.ucomisd(xmm1, qword_ptr(rbx)).map(|_| ()),
            |a| a.cvttsd2si(rax, xmm1).map(|_| ()),
        ] {
            let e = single(op, s);
            assert!(is_exception(&e), "{e:?}");
            assert_eq!(e.retired, 2, "{e:?}");
        }
    }
}

/// COMISD faulting in the slow path (IE unmasked, an SNaN operand) right after an ADD whose
/// flags are still pending: the fault leaves the ADD's flags in RFLAGS, in both engines.
#[test]
fn comis_fault_keeps_pending_flags() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 3u64)?;
        a.mov(rbx, TAB_D)?;
        a.set_label(&mut top)?;
        a.mov(rax, -1i64)?;
        a.add(rax, rcx)?;
        a.comisd(xmm1, qword_ptr(rbx))?;
        a.ucomiss(xmm1, dword_ptr(rbx + 8))?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    // Third iteration: the COMISD (RBX + 0x20) or the UCOMISS (RBX + 0x28) meets an SNaN.
    for (nan_at, nan) in [(0x20u64, 0x7ff0_0000_0000_0001u64), (0x28, 0x7f80_0001)] {
        let (m, _, exit) = compare(&code, &[10_000], eager_config(), &|m| {
            setup(m, 9, 0x1f00);
            for k in 0..6 {
                m.load(TAB_D + 8 * k, &0x3ff0_0000_0000_0000u64.to_le_bytes());
            }
            m.load(TAB_D + nan_at, &nan.to_le_bytes());
            m.cpu.state.ymm[1][0] = 0x3ff0_0000_0000_0000;
        });
        assert_eq!(
            exit.retired,
            2 + 2 * 7 + 2 + (nan_at == 0x28) as u64,
            "{exit:?}"
        );
        assert!(is_exception(&exit), "{exit:?}");
        assert_ne!(m.cpu.state.rflags & 0x8d5, 0, "the ADD's flags");
    }
}

/// LDMXCSR between two SSE divisions of one block: the first runs under the default
/// environment (the fast path, rounding to nearest), the second after the block switched to
/// rounding up, so it must leave the fast path (compiled code checks the environment once
/// per block, until a trampolined instruction such as LDMXCSR) — 2/3 rounds differently.
#[test]
fn ldmxcsr_inside_a_block_ends_the_default_environment() {
    const TWO_THIRDS_UP: u64 = 0x3fe5_5555_5555_5556;
    const TWO_THIRDS_NEAREST: u64 = 0x3fe5_5555_5555_5555;
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 50u64)?;
        a.mov(rbx, SCRATCH)?;
        a.set_label(&mut top)?;
        a.ldmxcsr(dword_ptr(rbx + 32))?;
        a.movsd_2(xmm1, qword_ptr(rbx))?;
        a.movsd_2(xmm2, qword_ptr(rbx + 8))?;
        a.divsd(xmm1, xmm2)?;
        a.ldmxcsr(dword_ptr(rbx + 36))?;
        a.movsd_2(xmm3, qword_ptr(rbx))?;
        a.divsd(xmm3, xmm2)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let setup = |m: &mut TestMachine| {
        m.load(SCRATCH, &2.0f64.to_bits().to_le_bytes());
        m.load(SCRATCH + 8, &3.0f64.to_bits().to_le_bytes());
        m.load(SCRATCH + 32, &0x1f80u32.to_le_bytes());
        m.load(SCRATCH + 36, &0x5f80u32.to_le_bytes());
    };
    let (m, jit, _) = compare(&code, &[10_000], eager_config(), &setup);
    assert!(jit.stats.native_insns > 0, "{:?}", jit.stats);
    // (The state compared equal: these are both engines' results.)
    assert_eq!(m.cpu.state.ymm[1][0], TWO_THIRDS_NEAREST);
    assert_eq!(m.cpu.state.ymm[3][0], TWO_THIRDS_UP);
}
