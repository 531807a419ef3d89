//! FMA3: VFMADD/VFMSUB/VFNMADD/VFNMSUB/VFMADDSUB/VFMSUBADD in the 132/213/231 operand orders,
//! PS/PD (128 and 256 bit) and SS/SD, each fused with a single rounding ([`crate::fp::fma`]).
//!
//! Operands: `op dst, src2 (vvvv), src3 (r/m)`, with dst also the first source.
//! 132: dst*src3 + src2; 213: src2*dst + src3; 231: src2*src3 + dst.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::fp::fma::fma;
use crate::fp::host;
use crate::fp::{Format, Mx, F32, F64};
use crate::ops::avx_common::{check_avx, get_ymm, read_vec, vec_index, vlen, V256};
use crate::ops::avx_fp::finish;
use crate::ops::sse_fp::{lane, lanes, read_scalar, with_lane};
use crate::Ctx;
use iced_x86::{EncodingKind, Instruction};

/// Operation kinds.
const MADD: u8 = 0;
const MSUB: u8 = 1;
const NMADD: u8 = 2;
const NMSUB: u8 = 3;
const MADDSUB: u8 = 4;
const MSUBADD: u8 = 5;

/// Handlers of this family (VEX FMA3 encodings only; FMA4 and EVEX forms are not claimed).
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    let name = format!("{:?}", ins.mnemonic()).to_ascii_lowercase();
    let rest = name.strip_prefix('v')?;
    let kinds: [(&str, u8); 6] = [
        ("fmaddsub", MADDSUB),
        ("fmsubadd", MSUBADD),
        ("fnmadd", NMADD),
        ("fnmsub", NMSUB),
        ("fmadd", MADD),
        ("fmsub", MSUB),
    ];
    let (kind, rest) = kinds
        .iter()
        .find_map(|&(p, k)| rest.strip_prefix(p).map(|r| (k, r)))?;
    let (order, ty) = rest.split_at_checked(3)?;
    macro_rules! pick {
        ($($k:ident),*) => {
            match kind {
                $($k => pick_order::<$k>(order, ty),)*
                _ => None,
            }
        };
    }
    pick!(MADD, MSUB, NMADD, NMSUB, MADDSUB, MSUBADD)
}

fn pick_order<const K: u8>(order: &str, ty: &str) -> Option<Handler> {
    match order {
        "132" => pick_type::<K, 132>(ty),
        "213" => pick_type::<K, 213>(ty),
        "231" => pick_type::<K, 231>(ty),
        _ => None,
    }
}

fn pick_type<const K: u8, const O: u16>(ty: &str) -> Option<Handler> {
    Some(match ty {
        "ps" => packed::<F32, K, O>,
        "pd" => packed::<F64, K, O>,
        "ss" => scalar::<F32, K, O>,
        "sd" => scalar::<F64, K, O>,
        _ => return None,
    })
}

/// One lane `i` of kind `K`: (negate product, negate addend).
#[inline]
fn signs(k: u8, i: usize) -> (bool, bool) {
    match k {
        MADD => (false, false),
        MSUB => (false, true),
        NMADD => (true, false),
        NMSUB => (true, true),
        // FMADDSUB: even lanes subtract, odd lanes add; FMSUBADD the reverse.
        MADDSUB => (false, i.is_multiple_of(2)),
        _ => (false, i % 2 == 1),
    }
}

/// (multiplicand, multiplier, addend) of operand order `O` from (dst, src2, src3).
#[inline]
fn order<T>(o: u16, d: T, s2: T, s3: T) -> (T, T, T) {
    match o {
        132 => (d, s3, s2),
        213 => (s2, d, s3),
        _ => (s2, s3, d),
    }
}

/// One 128-bit lane of a packed FMA.
pub fn fma_lanes<P: Format>(k: u8, a: u128, b: u128, c: u128, mx: Mx) -> (u128, u32) {
    if let Some(r) = host::fma_packed::<P>(k, a, b, c, mx) {
        return r;
    }
    let mut r = 0;
    let mut flags = 0;
    for i in 0..lanes::<P>() {
        let (np, nc) = signs(k, i);
        let (v, f) = fma::<P>(
            lane::<P>(a, i),
            lane::<P>(b, i),
            lane::<P>(c, i),
            np,
            nc,
            mx,
        );
        r = with_lane::<P>(r, i, v);
        flags |= f;
    }
    (r, flags)
}

fn packed<P: Format, const K: u8, const O: u16>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let len = vlen(ins);
    let s3 = read_vec(x, ins, 2, false)?;
    let st = &x.cpu.state;
    let d: V256 = get_ymm(st, vec_index(ins.op_register(0)));
    let s2: V256 = get_ymm(st, vec_index(ins.op_register(1)));
    let (a, b, c) = order(O, d, s2, s3);
    let mx = Mx(st.mxcsr);
    let (lo, f0) = fma_lanes::<P>(K, a[0], b[0], c[0], mx);
    let (hi, f1) = if len == 32 {
        fma_lanes::<P>(K, a[1], b[1], c[1], mx)
    } else {
        (0, 0)
    };
    finish(x, ins, [lo, hi], len, f0 | f1)
}

/// Scalar forms: the low lane; bits 127:W of the destination kept, 255:128 zeroed.
fn scalar<P: Format, const K: u8, const O: u16>(
    x: &mut Ctx,
    ins: &Instruction,
) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let s3 = read_scalar::<P>(x, ins, 2)?;
    let st = &x.cpu.state;
    let dv = get_ymm(st, vec_index(ins.op_register(0)))[0];
    let s2 = lane::<P>(get_ymm(st, vec_index(ins.op_register(1)))[0], 0);
    let (a, b, c) = order(O, lane::<P>(dv, 0), s2, s3);
    let (np, nc) = signs(K, 0);
    let (v, flags) = fma::<P>(a, b, c, np, nc, Mx(st.mxcsr));
    finish(x, ins, [with_lane::<P>(dv, 0, v), 0], 16, flags)
}

#[cfg(test)]
mod tests {
    use crate::cpu::ExitReason;
    use crate::ops::avx_common::{get_ymm, set_ymm};
    use crate::testkit::TestMachine;
    use iced_x86::code_asm::*;

    #[test]
    fn orders_and_kinds() {
        let (one, two, three) = (0x3f80_0000u128, 0x4000_0000u128, 0x4040_0000u128);
        let run = |f: &dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>| {
            let code = TestMachine::assemble(f);
            let mut m = TestMachine::new();
            set_ymm(&mut m.cpu.state, 0, [two | 0xdead << 64, 5]);
            set_ymm(&mut m.cpu.state, 1, [three, 0]);
            set_ymm(&mut m.cpu.state, 2, [one, 0]);
            assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
            get_ymm(&m.cpu.state, 0)
        };
        // 132: 2*1 + 3 = 5; 213: 3*2 + 1 = 7; 231: 3*1 + 2 = 5; fnmsub231: -(3*1) - 2 = -5.
        assert_eq!(
            run(&|a| a.vfmadd132ss(xmm0, xmm1, xmm2)),
            [0x40a0_0000 | 0xdead << 64, 0]
        );
        assert_eq!(
            run(&|a| a.vfmadd213ss(xmm0, xmm1, xmm2)),
            [0x40e0_0000 | 0xdead << 64, 0]
        );
        assert_eq!(
            run(&|a| a.vfmadd231ss(xmm0, xmm1, xmm2)),
            [0x40a0_0000 | 0xdead << 64, 0]
        );
        assert_eq!(
            run(&|a| a.vfnmsub231ss(xmm0, xmm1, xmm2)),
            [0xc0a0_0000 | 0xdead << 64, 0]
        );
        // Packed: the other lanes of the 128-bit form are computed (0*0 + 0) and the upper
        // half is zeroed.
        assert_eq!(run(&|a| a.vfmadd132ps(xmm0, xmm1, xmm2))[1], 0);
    }
}
