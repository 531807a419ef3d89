//! VEX-encoded packed-integer instructions (AVX 128-bit and AVX2 256-bit forms) whose legacy
//! SSE2/SSSE3/SSE4.1/SSE4.2 form exists: three-operand arithmetic, compares, logic (incl. the
//! bitwise VANDPS..VXORPD), unpacks, packs, shuffles, shifts, PALIGNR, blends, PMOVSX/ZX,
//! PTEST/VTESTPS/VTESTPD. Extracts, inserts, PHMINPOSUW, MPSADBW and PCMPxSTRx are in
//! `avx_int2`.
//!
//! Every form reuses the legacy semantic function: VEX `dst = f(src1 (vvvv), src2 (r/m))`, for
//! 256-bit forms applied to each 128-bit lane ([`per_lane`]). No VEX form requires alignment;
//! a 128-bit form zeroes bits 255:128 of its destination.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags;
use crate::ops::avx_common::{check_avx, per_lane, read_vec, vlen, write_vec, V256};
use crate::ops::sse_common::BinOp;
use crate::ops::{sse41, sse42, sse_int, sse_shuf, ssse3};
use crate::state::flags::{CF, STATUS, ZF};
use crate::Ctx;
use iced_x86::{Code, EncodingKind, Instruction, Mnemonic, OpKind};

/// Handlers of this family (VEX encodings only).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    let m = ins.mnemonic();
    let regs = |n: u32| (0..n).all(|i| ins.op_kind(i) == OpKind::Register);
    if ins.op_count() == 3 && regs(2) {
        if let Some(h) = binary_lookup(m) {
            return Some(h);
        }
    }
    if ins.op_count() == 2 && regs(1) {
        if let Some(h) = unary_lookup(m) {
            return Some(h);
        }
    }
    if ins.op_count() == 3 && regs(2) && ins.op_kind(2) == OpKind::Immediate8 {
        if let Some(h) = shift_imm_lookup(m) {
            return Some(h);
        }
    }
    if ins.op_count() == 3 && regs(2) && ins.op_kind(2) != OpKind::Immediate8 {
        if let Some(h) = shift_xmm_lookup(m) {
            return Some(h);
        }
    }
    Some(match ins.code() {
        Code::VEX_Vpshufd_xmm_xmmm128_imm8 | Code::VEX_Vpshufd_ymm_ymmm256_imm8 => h_vpshufd,
        Code::VEX_Vpshuflw_xmm_xmmm128_imm8 | Code::VEX_Vpshuflw_ymm_ymmm256_imm8 => h_vpshuflw,
        Code::VEX_Vpshufhw_xmm_xmmm128_imm8 | Code::VEX_Vpshufhw_ymm_ymmm256_imm8 => h_vpshufhw,
        Code::VEX_Vpslldq_xmm_xmm_imm8 | Code::VEX_Vpslldq_ymm_ymm_imm8 => h_vpslldq,
        Code::VEX_Vpsrldq_xmm_xmm_imm8 | Code::VEX_Vpsrldq_ymm_ymm_imm8 => h_vpsrldq,
        Code::VEX_Vshufps_xmm_xmm_xmmm128_imm8 | Code::VEX_Vshufps_ymm_ymm_ymmm256_imm8 => {
            h_vshufps
        }
        Code::VEX_Vshufpd_xmm_xmm_xmmm128_imm8 | Code::VEX_Vshufpd_ymm_ymm_ymmm256_imm8 => {
            h_vshufpd
        }
        Code::VEX_Vpalignr_xmm_xmm_xmmm128_imm8 | Code::VEX_Vpalignr_ymm_ymm_ymmm256_imm8 => {
            h_vpalignr
        }
        Code::VEX_Vpblendw_xmm_xmm_xmmm128_imm8 | Code::VEX_Vpblendw_ymm_ymm_ymmm256_imm8 => {
            h_vpblendw
        }
        Code::VEX_Vpblendvb_xmm_xmm_xmmm128_xmm | Code::VEX_Vpblendvb_ymm_ymm_ymmm256_ymm => {
            h_vpblendvb
        }
        Code::VEX_Vptest_xmm_xmmm128 | Code::VEX_Vptest_ymm_ymmm256 => h_vptest,
        Code::VEX_Vtestps_xmm_xmmm128 | Code::VEX_Vtestps_ymm_ymmm256 => h_vtestps,
        Code::VEX_Vtestpd_xmm_xmmm128 | Code::VEX_Vtestpd_ymm_ymmm256 => h_vtestpd,
        Code::VEX_Vpmovsxbw_xmm_xmmm64 | Code::VEX_Vpmovsxbw_ymm_xmmm128 => h_vpmovsxbw,
        Code::VEX_Vpmovsxbd_xmm_xmmm32 | Code::VEX_Vpmovsxbd_ymm_xmmm64 => h_vpmovsxbd,
        Code::VEX_Vpmovsxbq_xmm_xmmm16 | Code::VEX_Vpmovsxbq_ymm_xmmm32 => h_vpmovsxbq,
        Code::VEX_Vpmovsxwd_xmm_xmmm64 | Code::VEX_Vpmovsxwd_ymm_xmmm128 => h_vpmovsxwd,
        Code::VEX_Vpmovsxwq_xmm_xmmm32 | Code::VEX_Vpmovsxwq_ymm_xmmm64 => h_vpmovsxwq,
        Code::VEX_Vpmovsxdq_xmm_xmmm64 | Code::VEX_Vpmovsxdq_ymm_xmmm128 => h_vpmovsxdq,
        Code::VEX_Vpmovzxbw_xmm_xmmm64 | Code::VEX_Vpmovzxbw_ymm_xmmm128 => h_vpmovzxbw,
        Code::VEX_Vpmovzxbd_xmm_xmmm32 | Code::VEX_Vpmovzxbd_ymm_xmmm64 => h_vpmovzxbd,
        Code::VEX_Vpmovzxbq_xmm_xmmm16 | Code::VEX_Vpmovzxbq_ymm_xmmm32 => h_vpmovzxbq,
        Code::VEX_Vpmovzxwd_xmm_xmmm64 | Code::VEX_Vpmovzxwd_ymm_xmmm128 => h_vpmovzxwd,
        Code::VEX_Vpmovzxwq_xmm_xmmm32 | Code::VEX_Vpmovzxwq_ymm_xmmm64 => h_vpmovzxwq,
        Code::VEX_Vpmovzxdq_xmm_xmmm64 | Code::VEX_Vpmovzxdq_ymm_xmmm128 => h_vpmovzxdq,
        _ => return None,
    })
}

/// Declares mnemonic -> semantic function tables with one thin handler per entry.
macro_rules! vex_table {
    ($semantic:ident, $lookup:ident, $hmod:ident, $ty:ty, $shared:ident;
     $($h:ident: $m:ident => $f:expr;)*) => {
        /// The legacy semantic function a VEX mnemonic of this table reuses.
        pub fn $semantic(m: Mnemonic) -> Option<$ty> {
            Some(match m {
                $(Mnemonic::$m => $f,)*
                _ => return None,
            })
        }

        fn $lookup(m: Mnemonic) -> Option<Handler> {
            Some(match m {
                $(Mnemonic::$m => $hmod::$h,)*
                _ => return None,
            })
        }

        mod $hmod {
            #[allow(unused_imports)]
            use super::*;
            $(
                pub fn $h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                    super::$shared(x, ins, $f)
                }
            )*
        }
    };
}

vex_table! {
    binary_semantic, binary_lookup, bin, BinOp, binary;
    vpaddb: Vpaddb => sse_int::paddb;
    vpaddw: Vpaddw => sse_int::paddw;
    vpaddd: Vpaddd => sse_int::paddd;
    vpaddq: Vpaddq => sse_int::paddq;
    vpsubb: Vpsubb => sse_int::psubb;
    vpsubw: Vpsubw => sse_int::psubw;
    vpsubd: Vpsubd => sse_int::psubd;
    vpsubq: Vpsubq => sse_int::psubq;
    vpaddusb: Vpaddusb => sse_int::paddusb;
    vpaddusw: Vpaddusw => sse_int::paddusw;
    vpsubusb: Vpsubusb => sse_int::psubusb;
    vpsubusw: Vpsubusw => sse_int::psubusw;
    vpaddsb: Vpaddsb => sse_int::paddsb;
    vpaddsw: Vpaddsw => sse_int::paddsw;
    vpsubsb: Vpsubsb => sse_int::psubsb;
    vpsubsw: Vpsubsw => sse_int::psubsw;
    vpcmpeqb: Vpcmpeqb => sse_int::pcmpeqb;
    vpcmpeqw: Vpcmpeqw => sse_int::pcmpeqw;
    vpcmpeqd: Vpcmpeqd => sse_int::pcmpeqd;
    vpcmpeqq: Vpcmpeqq => sse41::pcmpeqq;
    vpcmpgtb: Vpcmpgtb => sse_int::pcmpgtb;
    vpcmpgtw: Vpcmpgtw => sse_int::pcmpgtw;
    vpcmpgtd: Vpcmpgtd => sse_int::pcmpgtd;
    vpcmpgtq: Vpcmpgtq => sse42::pcmpgtq;
    vpminub: Vpminub => sse_int::pminub;
    vpmaxub: Vpmaxub => sse_int::pmaxub;
    vpminsw: Vpminsw => sse_int::pminsw;
    vpmaxsw: Vpmaxsw => sse_int::pmaxsw;
    vpminsb: Vpminsb => sse41::pminsb;
    vpmaxsb: Vpmaxsb => sse41::pmaxsb;
    vpminuw: Vpminuw => sse41::pminuw;
    vpmaxuw: Vpmaxuw => sse41::pmaxuw;
    vpminsd: Vpminsd => sse41::pminsd;
    vpmaxsd: Vpmaxsd => sse41::pmaxsd;
    vpminud: Vpminud => sse41::pminud;
    vpmaxud: Vpmaxud => sse41::pmaxud;
    vpavgb: Vpavgb => sse_int::pavgb;
    vpavgw: Vpavgw => sse_int::pavgw;
    vpmullw: Vpmullw => sse_int::pmullw;
    vpmulhw: Vpmulhw => sse_int::pmulhw;
    vpmulhuw: Vpmulhuw => sse_int::pmulhuw;
    vpmuludq: Vpmuludq => sse_int::pmuludq;
    vpmulld: Vpmulld => sse41::pmulld;
    vpmuldq: Vpmuldq => sse41::pmuldq;
    vpmulhrsw: Vpmulhrsw => ssse3::pmulhrsw;
    vpmaddwd: Vpmaddwd => sse_int::pmaddwd;
    vpmaddubsw: Vpmaddubsw => ssse3::pmaddubsw;
    vpsadbw: Vpsadbw => sse_int::psadbw;
    vpand: Vpand => sse_int::pand;
    vpandn: Vpandn => sse_int::pandn;
    vpor: Vpor => sse_int::por;
    vpxor: Vpxor => sse_int::pxor;
    vandps: Vandps => sse_int::pand;
    vandpd: Vandpd => sse_int::pand;
    vandnps: Vandnps => sse_int::pandn;
    vandnpd: Vandnpd => sse_int::pandn;
    vorps: Vorps => sse_int::por;
    vorpd: Vorpd => sse_int::por;
    vxorps: Vxorps => sse_int::pxor;
    vxorpd: Vxorpd => sse_int::pxor;
    vpshufb: Vpshufb => ssse3::pshufb;
    vphaddw: Vphaddw => ssse3::phaddw;
    vphaddd: Vphaddd => ssse3::phaddd;
    vphaddsw: Vphaddsw => ssse3::phaddsw;
    vphsubw: Vphsubw => ssse3::phsubw;
    vphsubd: Vphsubd => ssse3::phsubd;
    vphsubsw: Vphsubsw => ssse3::phsubsw;
    vpsignb: Vpsignb => ssse3::psignb;
    vpsignw: Vpsignw => ssse3::psignw;
    vpsignd: Vpsignd => ssse3::psignd;
    vpunpcklbw: Vpunpcklbw => sse_shuf::punpcklbw;
    vpunpcklwd: Vpunpcklwd => sse_shuf::punpcklwd;
    vpunpckldq: Vpunpckldq => sse_shuf::punpckldq;
    vpunpcklqdq: Vpunpcklqdq => sse_shuf::punpcklqdq;
    vpunpckhbw: Vpunpckhbw => sse_shuf::punpckhbw;
    vpunpckhwd: Vpunpckhwd => sse_shuf::punpckhwd;
    vpunpckhdq: Vpunpckhdq => sse_shuf::punpckhdq;
    vpunpckhqdq: Vpunpckhqdq => sse_shuf::punpckhqdq;
    vunpcklps: Vunpcklps => sse_shuf::punpckldq;
    vunpcklpd: Vunpcklpd => sse_shuf::punpcklqdq;
    vunpckhps: Vunpckhps => sse_shuf::punpckhdq;
    vunpckhpd: Vunpckhpd => sse_shuf::punpckhqdq;
    vpacksswb: Vpacksswb => sse_shuf::packsswb;
    vpackssdw: Vpackssdw => sse_shuf::packssdw;
    vpackuswb: Vpackuswb => sse_shuf::packuswb;
    vpackusdw: Vpackusdw => sse41::packusdw;
}

vex_table! {
    unary_semantic, unary_lookup, un, BinOp, unary;
    vpabsb: Vpabsb => ssse3::pabsb;
    vpabsw: Vpabsw => ssse3::pabsw;
    vpabsd: Vpabsd => ssse3::pabsd;
}

/// A shift of every element by a 64-bit count (counts above the width handled inside).
pub type ShiftOp = fn(u128, u64) -> u128;

vex_table! {
    shift_imm_semantic, shift_imm_lookup, shi, ShiftOp, shift_imm;
    vpsllw: Vpsllw => sse_shuf::psllw;
    vpslld: Vpslld => sse_shuf::pslld;
    vpsllq: Vpsllq => sse_shuf::psllq;
    vpsrlw: Vpsrlw => sse_shuf::psrlw;
    vpsrld: Vpsrld => sse_shuf::psrld;
    vpsrlq: Vpsrlq => sse_shuf::psrlq;
    vpsraw: Vpsraw => sse_shuf::psraw;
    vpsrad: Vpsrad => sse_shuf::psrad;
}

vex_table! {
    shift_xmm_semantic, shift_xmm_lookup, shx, ShiftOp, shift_xmm;
    vpsllw: Vpsllw => sse_shuf::psllw;
    vpslld: Vpslld => sse_shuf::pslld;
    vpsllq: Vpsllq => sse_shuf::psllq;
    vpsrlw: Vpsrlw => sse_shuf::psrlw;
    vpsrld: Vpsrld => sse_shuf::psrld;
    vpsrlq: Vpsrlq => sse_shuf::psrlq;
    vpsraw: Vpsraw => sse_shuf::psraw;
    vpsrad: Vpsrad => sse_shuf::psrad;
}

// ----- shared handlers -----

/// `dst = f(src1, src2)` per 128-bit lane.
#[inline(always)]
fn binary(x: &mut Ctx, ins: &Instruction, f: BinOp) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let b = read_vec(x, ins, 2, false)?;
    let a = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, per_lane(a, b, len, f), len, false)?;
    Ok(())
}

/// `dst = f(_, src)` per 128-bit lane (VPABS*: the first argument is unused).
#[inline(always)]
fn unary(x: &mut Ctx, ins: &Instruction, f: BinOp) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let b = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, per_lane([0, 0], b, len, f), len, false)?;
    Ok(())
}

/// VPSLLW.. dst (vvvv), src (r/m), imm8.
#[inline(always)]
fn shift_imm(x: &mut Ctx, ins: &Instruction, f: ShiftOp) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let a = read_vec(x, ins, 1, false)?;
    let c = ins.immediate8() as u64;
    write_vec(x, ins, 0, per_lane(a, a, len, |v, _| f(v, c)), len, false)?;
    Ok(())
}

/// VPSLLW.. dst, src1, xmm/m128: the count is bits 63:0 of the third operand, for every lane.
#[inline(always)]
fn shift_xmm(x: &mut Ctx, ins: &Instruction, f: ShiftOp) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let c = read_vec(x, ins, 2, false)?[0] as u64;
    let a = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, per_lane(a, a, len, |v, _| f(v, c)), len, false)?;
    Ok(())
}

/// `dst = f(src, imm8)` per lane (VPSHUFD/LW/HW, VPSLLDQ/VPSRLDQ).
#[inline(always)]
fn unary_imm(x: &mut Ctx, ins: &Instruction, f: fn(u128, u8) -> u128) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let a = read_vec(x, ins, 1, false)?;
    let imm = ins.immediate8();
    write_vec(x, ins, 0, per_lane(a, a, len, |v, _| f(v, imm)), len, false)?;
    Ok(())
}

/// `dst = f(src1, src2, imm8)` per lane; `hi_imm` maps imm8 to the upper lane's imm8.
#[inline(always)]
fn binary_imm(
    x: &mut Ctx,
    ins: &Instruction,
    f: fn(u128, u128, u8) -> u128,
    hi_imm: fn(u8) -> u8,
) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let b = read_vec(x, ins, 2, false)?;
    let a = read_vec(x, ins, 1, false)?;
    let imm = ins.immediate8();
    let r = [
        f(a[0], b[0], imm),
        if len == 32 {
            f(a[1], b[1], hi_imm(imm))
        } else {
            0
        },
    ];
    write_vec(x, ins, 0, r, len, false)?;
    Ok(())
}

pub(crate) fn same(i: u8) -> u8 {
    i
}

fn h_vpshufd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary_imm(x, ins, sse_shuf::pshufd)
}
fn h_vpshuflw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary_imm(x, ins, sse_shuf::pshuflw)
}
fn h_vpshufhw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary_imm(x, ins, sse_shuf::pshufhw)
}
fn h_vpslldq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary_imm(x, ins, sse_shuf::pslldq)
}
fn h_vpsrldq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    unary_imm(x, ins, sse_shuf::psrldq)
}
fn h_vshufps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, sse_shuf::shufps, same)
}
/// VSHUFPD ymm: the upper lane uses imm8[3:2].
fn h_vshufpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, sse_shuf::shufpd, |i| i >> 2)
}
fn h_vpalignr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, ssse3::palignr, same)
}
fn h_vpblendw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    binary_imm(x, ins, sse41::pblendw, same)
}

/// VPBLENDVB dst, src1, src2, mask: the mask register is encoded in imm8[7:4].
fn h_vpblendvb(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let b = read_vec(x, ins, 2, false)?;
    let a = read_vec(x, ins, 1, false)?;
    let m = read_vec(x, ins, 3, false)?;
    let r = [
        sse41::pblendvb(a[0], b[0], m[0]),
        sse41::pblendvb(a[1], b[1], m[1]),
    ];
    write_vec(x, ins, 0, r, len, false)?;
    Ok(())
}

// ----- tests -----

/// VPTEST/VTESTPS/VTESTPD over all `len` bytes, only the bits in `mask` of each lane:
/// ZF = (a AND b) == 0, CF = (NOT a AND b) == 0; AF, OF, PF, SF cleared.
pub fn vtest(a: V256, b: V256, mask: u128) -> u64 {
    let and = ((a[0] & b[0]) | (a[1] & b[1])) & mask;
    let andn = ((!a[0] & b[0]) | (!a[1] & b[1])) & mask;
    (if and == 0 { ZF } else { 0 }) | (if andn == 0 { CF } else { 0 })
}

#[inline(always)]
fn test(x: &mut Ctx, ins: &Instruction, mask: u128) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let b = read_vec(x, ins, 1, false)?;
    let a = read_vec(x, ins, 0, false)?;
    // A 128-bit form reads a register's full 256 bits: only the low lane counts.
    let (a, b) = if vlen(ins) == 32 {
        (a, b)
    } else {
        ([a[0], 0], [b[0], 0])
    };
    flags::set_status(&mut x.cpu.state, STATUS, vtest(a, b, mask));
    Ok(())
}

fn h_vptest(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    test(x, ins, u128::MAX)
}
fn h_vtestps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    test(x, ins, 0x8000_0000_8000_0000_8000_0000_8000_0000)
}
fn h_vtestpd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    test(x, ins, 0x8000_0000_0000_0000_8000_0000_0000_0000)
}

// ----- sign/zero extension -----

/// VPMOVSX/ZX: `from`-byte elements from the low bytes of the source, widened to `to`-byte
/// lanes; the 256-bit form widens twice as many elements (from a 128-bit or narrower source).
pub fn vpmov(src: u128, from: u32, to: u32, signed: bool, len: u8) -> V256 {
    let lo = sse41::pmov_extend(src, from, to, signed);
    let consumed = 128 * from / to;
    let hi = if len == 32 {
        sse41::pmov_extend(src >> consumed, from, to, signed)
    } else {
        0
    };
    [lo, hi]
}

#[inline(always)]
fn pmov(x: &mut Ctx, ins: &Instruction, from: u32, to: u32, signed: bool) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let src = read_vec(x, ins, 1, false)?[0];
    write_vec(x, ins, 0, vpmov(src, from, to, signed, len), len, false)?;
    Ok(())
}

macro_rules! pmov_handlers {
    ($($h:ident = ($from:expr, $to:expr, $signed:expr);)*) => {
        $(
            fn $h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
                pmov(x, ins, $from, $to, $signed)
            }
        )*
    };
}

pmov_handlers! {
    h_vpmovsxbw = (1, 2, true);
    h_vpmovsxbd = (1, 4, true);
    h_vpmovsxbq = (1, 8, true);
    h_vpmovsxwd = (2, 4, true);
    h_vpmovsxwq = (2, 8, true);
    h_vpmovsxdq = (4, 8, true);
    h_vpmovzxbw = (1, 2, false);
    h_vpmovzxbd = (1, 4, false);
    h_vpmovzxbq = (1, 8, false);
    h_vpmovzxwd = (2, 4, false);
    h_vpmovzxwq = (2, 8, false);
    h_vpmovzxdq = (4, 8, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::ops::avx_common::get_ymm;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn three_operand_form_and_lanes() {
        let code = TestMachine::assemble(|a| {
            a.vpaddd(ymm0, ymm1, ymm2)?;
            a.vpaddd(xmm3, xmm1, xmmword_ptr(DATA_BASE + 4))
        });
        let mut m = TestMachine::new();
        m.cpu.state.ymm[1] = [1 | 2 << 32, 3, 4, 5 << 32];
        m.cpu.state.ymm[2] = [10 | 20 << 32, 30, 40, 50 << 32];
        m.cpu.state.ymm[3] = [9; 4];
        m.load(DATA_BASE + 4, &[1; 16]);
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.cpu.state.ymm[0], [11 | 22 << 32, 33, 44, 55 << 32]);
        // Unaligned memory is fine for VEX; bits 255:128 are zeroed.
        let k = 0x0101_0101u64;
        assert_eq!(
            m.cpu.state.ymm[3],
            [(1 + k) | (2 + k) << 32, (3 + k) | k << 32, 0, 0]
        );
    }

    #[test]
    fn lane_crossing_rules() {
        // VPALIGNR ymm works per 128-bit lane; VPMOVZXBW ymm widens 16 bytes.
        let src: V256 = [
            u128::from_le_bytes(core::array::from_fn(|i| i as u8)),
            u128::from_le_bytes(core::array::from_fn(|i| 16 + i as u8)),
        ];
        let r = per_lane(src, src, 32, |a, b| ssse3::palignr(a, b, 4));
        assert_eq!(r[1] as u8, 20);
        let w = vpmov(src[0], 1, 2, false, 32);
        assert_eq!(w[1] as u16, 8);
        assert_eq!((w[1] >> 112) as u16, 15);
        assert_eq!(vpmov(src[0], 1, 2, false, 16)[1], 0);
    }

    #[test]
    fn vptest_flags() {
        assert_eq!(vtest([0, 1], [0, 1], u128::MAX), CF);
        assert_eq!(vtest([0, 0], [0, 1], u128::MAX), ZF);
        assert_eq!(vtest([1, 0], [0, 0], u128::MAX), ZF | CF);
        assert_eq!(vtest([0, 1], [0, 1], 1 << 127), ZF | CF);
    }

    #[test]
    fn ud_when_osxsave_clear_and_nm_when_ts() {
        let code = TestMachine::assemble(|a| a.vpxor(ymm0, ymm0, ymm0));
        let mut m = TestMachine::new();
        m.cpu.state.cr4 &= !crate::state::ctl::CR4_OSXSAVE;
        m.cpu.state.ymm[0] = [1; 4];
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        let mut m = TestMachine::new();
        m.cpu.state.cr0 |= crate::state::ctl::CR0_TS;
        m.cpu.state.ymm[0] = [1; 4];
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Exception(Fault::DeviceNotAvailable));
        assert_eq!(get_ymm(&m.cpu.state, 0), [1 | 1 << 64, 1 | 1 << 64]);
    }
}
