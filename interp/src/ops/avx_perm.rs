//! AVX/AVX2 data rearrangement: broadcasts (VBROADCASTSS/SD/F128/I128, VPBROADCASTB/W/D/Q),
//! 128-bit lane moves (VINSERT*128, VEXTRACT*128, VPERM2*128), cross-lane permutes (VPERMD/PS/
//! Q/PD), in-lane permutes (VPERMILPS/PD, imm and variable), VPBLENDD, masked moves
//! (VPMASKMOVD/Q, VMASKMOVPS/PD) and the variable shifts VPSLLVD/Q, VPSRLVD/Q, VPSRAVD.
//!
//! All of these only move or shift bits: no MXCSR flags, no SIMD exceptions.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::Access;
use crate::ops::avx_common::{check_avx, read_vec, vec_index, vlen, write_vec, V256};
use crate::Ctx;
use iced_x86::{EncodingKind, Instruction, Mnemonic, OpKind};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    Some(match ins.mnemonic() {
        Vbroadcastss | Vbroadcastsd | Vbroadcastf128 | Vbroadcasti128 | Vpbroadcastb
        | Vpbroadcastw | Vpbroadcastd | Vpbroadcastq => broadcast,
        Vinsertf128 | Vinserti128 => insert128,
        Vextractf128 | Vextracti128 => extract128,
        Vperm2f128 | Vperm2i128 => perm2x128,
        Vpermd | Vpermps => permd,
        Vpermq | Vpermpd => permq,
        Vpermilps | Vpermilpd => permil,
        Vpblendd => pblendd,
        Vpmaskmovd | Vpmaskmovq | Vmaskmovps | Vmaskmovpd => maskmov,
        Vpsllvd | Vpsllvq | Vpsrlvd | Vpsrlvq | Vpsravd => shiftv,
        _ => return None,
    })
}

// ----- element views -----

/// The 256 bits as eight dwords (element 0 first).
pub fn to_d(v: V256) -> [u32; 8] {
    let mut o = [0u32; 8];
    for (i, e) in o.iter_mut().enumerate() {
        *e = (v[i / 4] >> (32 * (i % 4))) as u32;
    }
    o
}

pub fn from_d(d: [u32; 8]) -> V256 {
    let mut v = [0u128; 2];
    for (i, &e) in d.iter().enumerate() {
        v[i / 4] |= (e as u128) << (32 * (i % 4));
    }
    v
}

/// The 256 bits as four qwords.
pub fn to_q(v: V256) -> [u64; 4] {
    [
        v[0] as u64,
        (v[0] >> 64) as u64,
        v[1] as u64,
        (v[1] >> 64) as u64,
    ]
}

pub fn from_q(q: [u64; 4]) -> V256 {
    [
        (q[0] as u128) | ((q[1] as u128) << 64),
        (q[2] as u128) | ((q[3] as u128) << 64),
    ]
}

fn imm(ins: &Instruction) -> u8 {
    ins.immediate8()
}

// ----- semantic functions -----

/// Replicate the low `esize` bytes of `src` over `len` bytes.
pub fn broadcast_val(src: V256, esize: u8, len: u8) -> V256 {
    let (e, bits) = match esize {
        1 => (src[0] & 0xff, 8),
        2 => (src[0] & 0xffff, 16),
        4 => (src[0] & 0xffff_ffff, 32),
        8 => (src[0] & u64::MAX as u128, 64),
        _ => (src[0], 128),
    };
    let mut lane = 0u128;
    let mut s = 0;
    while s < 128 {
        lane |= e << s;
        s += bits;
    }
    [lane, if len == 32 { lane } else { 0 }]
}

/// VPERM2F128/VPERM2I128: each destination lane picks one of a.lo, a.hi, b.lo, b.hi by its
/// imm8 nibble (bits 1:0), or zero when the nibble's bit 3 is set.
pub fn perm2x128_val(a: V256, b: V256, imm: u8) -> V256 {
    let pick = |sel: u8| {
        if sel & 8 != 0 {
            0
        } else {
            [a[0], a[1], b[0], b[1]][(sel & 3) as usize]
        }
    };
    [pick(imm & 0xf), pick(imm >> 4)]
}

/// VPERMD/VPERMPS: dst[i] = src[idx[i] & 7] across the whole 256 bits.
pub fn permd_val(idx: V256, src: V256) -> V256 {
    let (i, s) = (to_d(idx), to_d(src));
    from_d(core::array::from_fn(|k| s[(i[k] & 7) as usize]))
}

/// VPERMQ/VPERMPD: dst[i] = src[imm bits 2i+1:2i].
pub fn permq_val(src: V256, imm: u8) -> V256 {
    let s = to_q(src);
    from_q(core::array::from_fn(|k| s[((imm >> (2 * k)) & 3) as usize]))
}

/// VPERMILPS: within each lane, dword k takes lane dword ctl[k] & 3.
pub fn permilps(src: V256, ctl: [u32; 8], len: u8) -> V256 {
    let s = to_d(src);
    let n = len as usize / 4;
    from_d(core::array::from_fn(|k| {
        if k < n {
            s[(k & !3) | (ctl[k] & 3) as usize]
        } else {
            0
        }
    }))
}

/// VPERMILPD: within each lane, qword k takes lane qword (ctl[k] bit 0).
pub fn permilpd(src: V256, ctl: [u64; 4], len: u8) -> V256 {
    let s = to_q(src);
    let n = len as usize / 8;
    from_q(core::array::from_fn(|k| {
        if k < n {
            s[(k & !1) | (ctl[k] & 1) as usize]
        } else {
            0
        }
    }))
}

/// VPBLENDD: dword k from `b` when imm bit k is set, else from `a`.
pub fn pblendd_val(a: V256, b: V256, imm: u8, len: u8) -> V256 {
    let (x, y) = (to_d(a), to_d(b));
    let n = len as usize / 4;
    from_d(core::array::from_fn(|k| {
        if k >= n {
            0
        } else if (imm >> k) & 1 != 0 {
            y[k]
        } else {
            x[k]
        }
    }))
}

/// Variable shifts: counts at or above the element width give 0 (logical) or the sign fill
/// (arithmetic, VPSRAVD).
pub fn shiftv_val(m: Mnemonic, a: V256, c: V256, len: u8) -> V256 {
    match m {
        Mnemonic::Vpsllvq | Mnemonic::Vpsrlvq => {
            let (x, n) = (to_q(a), to_q(c));
            from_q(core::array::from_fn(|k| {
                if k * 8 >= len as usize || n[k] > 63 {
                    0
                } else if m == Mnemonic::Vpsllvq {
                    x[k] << n[k]
                } else {
                    x[k] >> n[k]
                }
            }))
        }
        _ => {
            let (x, n) = (to_d(a), to_d(c));
            from_d(core::array::from_fn(|k| {
                if k * 4 >= len as usize {
                    0
                } else if m == Mnemonic::Vpsravd {
                    ((x[k] as i32) >> n[k].min(31)) as u32
                } else if n[k] > 31 {
                    0
                } else if m == Mnemonic::Vpsllvd {
                    x[k] << n[k]
                } else {
                    x[k] >> n[k]
                }
            }))
        }
    }
}

// ----- handlers -----

fn broadcast(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    use Mnemonic::*;
    check_avx(x, ins)?;
    let len = vlen(ins);
    let esize = match ins.mnemonic() {
        Vpbroadcastb => 1,
        Vpbroadcastw => 2,
        Vbroadcastss | Vpbroadcastd => 4,
        Vbroadcastsd | Vpbroadcastq => 8,
        _ => 16,
    };
    // VBROADCASTF128/I128 exist only as ymm, m128; VBROADCASTSD/F128 only with VEX.L = 1
    // (iced rejects the L0 encodings at decode).
    if esize == 16 && ins.op_kind(1) != OpKind::Memory {
        return Err(Fault::ud("VBROADCASTx128 needs a memory source").into());
    }
    let src = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, broadcast_val(src, esize, len), len, false)?;
    Ok(())
}

fn insert128(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let mut a = read_vec(x, ins, 1, false)?;
    let b = read_vec(x, ins, 2, false)?;
    a[(imm(ins) & 1) as usize] = b[0];
    write_vec(x, ins, 0, a, 32, false)?;
    Ok(())
}

fn extract128(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let a = read_vec(x, ins, 1, false)?;
    let v = [a[(imm(ins) & 1) as usize], 0];
    write_vec(x, ins, 0, v, 16, false)?;
    Ok(())
}

fn perm2x128(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let a = read_vec(x, ins, 1, false)?;
    let b = read_vec(x, ins, 2, false)?;
    write_vec(x, ins, 0, perm2x128_val(a, b, imm(ins)), 32, false)?;
    Ok(())
}

fn permd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let idx = read_vec(x, ins, 1, false)?;
    let src = read_vec(x, ins, 2, false)?;
    write_vec(x, ins, 0, permd_val(idx, src), 32, false)?;
    Ok(())
}

fn permq(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let src = read_vec(x, ins, 1, false)?;
    write_vec(x, ins, 0, permq_val(src, imm(ins)), 32, false)?;
    Ok(())
}

fn permil(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let ps = ins.mnemonic() == Mnemonic::Vpermilps;
    let (src, ctl) = if ins.op_count() == 3 && ins.op_kind(2) == OpKind::Immediate8 {
        // Immediate form: the same selector for every lane.
        let i = imm(ins) as u64;
        let src = read_vec(x, ins, 1, false)?;
        let ctl = if ps {
            let d: [u32; 8] = core::array::from_fn(|k| ((i >> (2 * (k % 4))) & 3) as u32);
            from_d(d)
        } else {
            from_q(core::array::from_fn(|k| (i >> k) & 1))
        };
        (src, ctl)
    } else {
        let src = read_vec(x, ins, 1, false)?;
        let ctl = read_vec(x, ins, 2, false)?;
        // The variable PD form selects with bit 1 of each control qword.
        let ctl = if ps {
            ctl
        } else {
            from_q(to_q(ctl).map(|c| (c >> 1) & 1))
        };
        (src, ctl)
    };
    let v = if ps {
        permilps(src, to_d(ctl), len)
    } else {
        permilpd(src, to_q(ctl), len)
    };
    write_vec(x, ins, 0, v, len, false)?;
    Ok(())
}

fn pblendd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let a = read_vec(x, ins, 1, false)?;
    let b = read_vec(x, ins, 2, false)?;
    write_vec(x, ins, 0, pblendd_val(a, b, imm(ins), len), len, false)?;
    Ok(())
}

fn shiftv(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let a = read_vec(x, ins, 1, false)?;
    let c = read_vec(x, ins, 2, false)?;
    write_vec(x, ins, 0, shiftv_val(ins.mnemonic(), a, c, len), len, false)?;
    Ok(())
}

/// VPMASKMOV/VMASKMOV. Load: `op v, mask, m` (masked-out elements read as zero and are never
/// accessed); store: `op m, mask, v` (only elements with the mask sign bit set are written).
/// Every selected element is checked (translated) before anything is written, lowest element
/// first, so a fault leaves memory and registers unchanged.
fn maskmov(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    use Mnemonic::*;
    check_avx(x, ins)?;
    let len = vlen(ins);
    let esize: u8 = match ins.mnemonic() {
        Vpmaskmovq | Vmaskmovpd => 8,
        _ => 4,
    };
    let n = (len / esize) as usize;
    let mask_reg = vec_index(ins.op_register(1));
    let mask = crate::ops::avx_common::get_ymm(&x.cpu.state, mask_reg);
    let sel = |k: usize| -> bool {
        if esize == 8 {
            to_q(mask)[k] >> 63 != 0
        } else {
            to_d(mask)[k] >> 31 != 0
        }
    };
    // The whole operand is checked against its segment (legacy modes), whatever the mask.
    let store = ins.op_kind(0) == OpKind::Memory;
    let a = x.mem_addr(ins, len as u64, store)?;
    if store {
        let v = read_vec(x, ins, 2, false)?;
        // This host checks the first byte of the lowest selected element, then the last
        // byte of the highest one, and reports the first that faults (32 bytes span at most
        // two pages, so this covers every selected byte).
        let first = (0..n).find(|&k| sel(k));
        let last = (0..n).rev().find(|&k| sel(k));
        if let (Some(lo), Some(hi)) = (first, last) {
            let e = esize as u64;
            x.translate(a.wrapping_add(lo as u64 * e), Access::Write)?;
            x.translate(a.wrapping_add(hi as u64 * e + e - 1), Access::Write)?;
        }
        for k in (0..n).filter(|&k| sel(k)) {
            x.probe_write(a.wrapping_add((k * esize as usize) as u64), esize as u64)?;
        }
        for k in (0..n).filter(|&k| sel(k)) {
            let e = if esize == 8 {
                to_q(v)[k]
            } else {
                to_d(v)[k] as u64
            };
            x.write(a.wrapping_add((k * esize as usize) as u64), esize, e)?;
        }
    } else {
        let mut out = [0u64; 8];
        for (k, o) in out.iter_mut().enumerate().take(n) {
            if sel(k) {
                *o = x.read(a.wrapping_add((k * esize as usize) as u64), esize)?;
            }
        }
        let v = if esize == 8 {
            from_q([out[0], out[1], out[2], out[3]])
        } else {
            from_d(out.map(|e| e as u32))
        };
        write_vec(x, ins, 0, v, len, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_round_trip() {
        let v = [
            0x0011_2233_4455_6677_8899_aabb_ccdd_eeffu128,
            0x1234u128 << 100,
        ];
        assert_eq!(from_d(to_d(v)), v);
        assert_eq!(from_q(to_q(v)), v);
        assert_eq!(to_d(v)[0], 0xccdd_eeff);
        assert_eq!(to_q(v)[1], 0x0011_2233_4455_6677);
    }

    #[test]
    fn perm2x128_zeroes_with_bit3() {
        let a = [1, 2];
        let b = [3, 4];
        assert_eq!(perm2x128_val(a, b, 0x31), [2, 4]);
        assert_eq!(perm2x128_val(a, b, 0x08), [0, 1]);
        assert_eq!(perm2x128_val(a, b, 0x82), [3, 0]);
    }

    #[test]
    fn variable_shift_counts_saturate() {
        let a = from_d([0x8000_0001; 8]);
        let c = from_d([0, 1, 31, 32, 33, u32::MAX, 4, 100]);
        let r = to_d(shiftv_val(Mnemonic::Vpsravd, a, c, 32));
        assert_eq!(r[0], 0x8000_0001);
        assert_eq!(r[1], 0xc000_0000);
        assert_eq!(r[3], 0xffff_ffff);
        assert_eq!(r[5], 0xffff_ffff);
        let r = to_d(shiftv_val(Mnemonic::Vpsllvd, a, c, 16));
        assert_eq!(r, [0x8000_0001, 2, 0x8000_0000, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn broadcast_fills_the_lanes() {
        assert_eq!(
            broadcast_val([0xab, 0], 1, 16),
            [u128::from_le_bytes([0xab; 16]), 0]
        );
        let v = broadcast_val([0x1122_3344_5566_7788, 0], 8, 32);
        assert_eq!(to_q(v), [0x1122_3344_5566_7788; 4]);
    }
}
