//! AVX2 gathers: VPGATHERDD/DQ/QD/QQ and VGATHERDPS/DPD/QPS/QPD, 128 and 256 bit.
//!
//! `op dest, [base + index_vector * scale + disp], mask`. Element k is loaded when the sign bit
//! of mask element k is set; elements complete in order, lowest first, and each completed
//! element clears its whole mask element. On a fault the destination and mask registers keep
//! the elements completed so far (RIP stays at the instruction, the faulting element's mask is
//! still set), so re-running after the fault is handled continues where it stopped; the exact
//! register images on a fault follow this host (see `gather`). On success the whole mask
//! register is zeroed. Destination elements whose mask was clear keep their old value; bits
//! above the gathered elements are zeroed (the VEX rule for 128-bit forms, and bits 127:64 of
//! the Q-index/dword-data forms with an XMM index). Checked against the host, faults mid-gather
//! included, in `avx_perm_native`.
//!
//! Address size: 32-bit addressing (67h) is recognised from a 32-bit base register; a VSIB
//! operand with no base under 67h is computed with 64-bit wrap-around (not checked natively).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::operand::read_reg;
use crate::ops::avx_common::{check_avx, get_ymm, is_ymm, set_vec, set_ymm, vec_index, V256};
use crate::ops::avx_perm::{from_d, from_q, to_d, to_q};
use crate::Ctx;
use iced_x86::{EncodingKind, Instruction, Mnemonic, OpKind, Register};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    if ins.encoding() != EncodingKind::VEX {
        return None;
    }
    match ins.mnemonic() {
        Vpgatherdd | Vpgatherdq | Vpgatherqd | Vpgatherqq | Vgatherdps | Vgatherdpd
        | Vgatherqps | Vgatherqpd => Some(gather),
        _ => None,
    }
}

/// (index element size, data element size) of a gather mnemonic.
fn sizes(m: Mnemonic) -> (usize, usize) {
    use Mnemonic::*;
    match m {
        Vpgatherdd | Vgatherdps => (4, 4),
        Vpgatherdq | Vgatherdpd => (4, 8),
        Vpgatherqd | Vgatherqps => (8, 4),
        _ => (8, 8),
    }
}

/// Element `k` of `v` for element size `es` (4 or 8), zero-extended.
fn elem(v: V256, es: usize, k: usize) -> u64 {
    if es == 8 {
        to_q(v)[k & 3]
    } else {
        to_d(v)[k & 7] as u64
    }
}

fn set_elem(v: &mut V256, es: usize, k: usize, e: u64) {
    if es == 8 {
        let mut q = to_q(*v);
        q[k & 3] = e;
        *v = from_q(q);
    } else {
        let mut d = to_d(*v);
        d[k & 7] = e as u32;
        *v = from_d(d);
    }
}

/// Keep only the low `n` elements of size `es` (the rest become zero).
fn keep_low(v: V256, es: usize, n: usize) -> V256 {
    let bits = (es * 8 * n) as u32;
    match bits {
        0 => [0, 0],
        1..=127 => [v[0] & ((1u128 << bits) - 1), 0],
        128 => [v[0], 0],
        129..=255 => [v[0], v[1] & ((1u128 << (bits - 128)) - 1)],
        _ => v,
    }
}

fn gather(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_avx(x, ins)?;
    let (isz, dsz) = sizes(ins.mnemonic());
    if ins.op_kind(0) != OpKind::Register
        || ins.op_kind(1) != OpKind::Memory
        || ins.op_kind(2) != OpKind::Register
    {
        return Err(Fault::ud("gather operand shape").into());
    }
    let (dr, mr, ir) = (ins.op_register(0), ins.op_register(2), ins.memory_index());
    let (d, m, i) = (vec_index(dr), vec_index(mr), vec_index(ir));
    if d == m || d == i || m == i {
        return Err(Fault::ud("gather with repeated dest/index/mask register").into());
    }
    let len: usize = if is_ymm(dr) { 32 } else { 16 };
    let ilen: usize = if is_ymm(ir) { 32 } else { 16 };
    let n = (len / dsz).min(ilen / isz);
    let l256 = len == 32 || ilen == 32;
    let st = &x.cpu.state;
    let (mut dest, mut mask, index) = (get_ymm(st, d), get_ymm(st, m), get_ymm(st, i));
    let base = ins.memory_base();
    let base_val = if base == Register::None {
        0
    } else {
        read_reg(st, base)
    };
    // 32-bit addressing (67h) shows as a 32-bit base register.
    let addr32 = base != Register::None
        && (Register::EAX as u32..=Register::R15D as u32).contains(&(base as u32));
    let scale = ins.memory_index_scale() as u64;
    let disp = ins.memory_displacement64();
    let seg = ins.memory_segment();
    let mut result = Ok(());
    let mut done = 0;
    for k in 0..n {
        if elem(mask, dsz, k) >> (dsz * 8 - 1) == 0 {
            continue;
        }
        let ix = if isz == 4 {
            elem(index, 4, k) as u32 as i32 as i64 as u64
        } else {
            elem(index, 8, k)
        };
        let mut off = base_val
            .wrapping_add(ix.wrapping_mul(scale))
            .wrapping_add(disp);
        if addr32 {
            off &= 0xffff_ffff;
        }
        let a = match x.seg_linear_checked(seg, off, dsz as u64, false) {
            Ok(a) => a,
            Err(f) => {
                result = Err(f);
                break;
            }
        };
        match x.read(a, dsz as u8) {
            Ok(v) => {
                done += 1;
                set_elem(&mut dest, dsz, k, v);
                set_elem(&mut mask, dsz, k, 0);
            }
            Err(f) => {
                result = Err(f);
                break;
            }
        }
    }
    let st = &mut x.cpu.state;
    if result.is_ok() {
        set_vec(st, d, keep_low(dest, dsz, n), len as u8);
        set_vec(st, m, [0, 0], len as u8);
        return Ok(());
    }
    // Fault (this host): every element slot of the whole mask register (all 256 bits, element
    // size = data size) becomes all ones if its sign bit is set and it was not completed, else
    // zero; bits 255:128 are then zeroed when VEX.L = 0. The destination is written only if at
    // least one element completed: completed elements replaced, other bits kept, except bits
    // 255:128, which are zeroed when VEX.L = 0 (an XMM destination of a YMM-index form keeps
    // them).
    let mut norm = [0u128, 0];
    for k in 0..32 / dsz {
        if elem(mask, dsz, k) >> (dsz * 8 - 1) != 0 {
            set_elem(&mut norm, dsz, k, u64::MAX);
        }
    }
    if !l256 {
        norm[1] = 0;
    }
    set_ymm(st, m, norm);
    if done > 0 {
        if !l256 {
            dest[1] = 0;
        }
        set_ymm(st, d, dest);
    }
    result.map_err(Trap::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    #[allow(unused_imports)]
    use iced_x86::code_asm::{dword_ptr, qword_ptr, rsi, ymm0, ymm1, ymm2};

    #[test]
    fn gather_dd_loads_selected_elements_and_clears_the_mask() {
        let mut m = TestMachine::new();
        for k in 0..16u64 {
            m.ram.write_u64(DATA_BASE + 8 * k, 0x1111_0000 + k).unwrap();
        }
        m.cpu.state.gpr[reg::RSI] = DATA_BASE;
        set_ymm(&mut m.cpu.state, 0, from_d([0xdead; 8]));
        set_ymm(&mut m.cpu.state, 1, from_d([0, 1, 2, 3, 4, 5, 6, 7]));
        set_ymm(
            &mut m.cpu.state,
            2,
            from_d([!0, 0, !0, 0x7fff_ffff, !0, !0, 0, 0x8000_0000]),
        );
        let code =
            TestMachine::assemble(|a| a.vpgatherdd_3(ymm0, dword_ptr(rsi + ymm1 * 8 + 8), ymm2));
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        let d = to_d(get_ymm(&m.cpu.state, 0));
        assert_eq!(
            d,
            [
                0x1111_0001,
                0xdead,
                0x1111_0003,
                0xdead,
                0x1111_0005,
                0x1111_0006,
                0xdead,
                0x1111_0008
            ]
        );
        assert_eq!(get_ymm(&m.cpu.state, 2), [0, 0]);
    }

    #[test]
    fn gather_with_repeated_registers_is_ud() {
        let mut m = TestMachine::new();
        let code = TestMachine::assemble(|a| a.vpgatherqq_3(ymm1, qword_ptr(rsi + ymm1 * 8), ymm2));
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
    }
}
