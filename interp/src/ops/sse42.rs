//! SSE4.2 PCMPGTQ and CRC32 (the string compares PCMPxSTRx are in `pcmpstr`).
//!
//! CRC32 is a general-purpose instruction: no CR0.EM/CR0.TS/CR4.OSFXSR checks (SDM 13.1.4),
//! only #UD for LOCK; it changes no flags.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::check_no_lock;
use crate::ops::sse_common::{from_qwords, qwords, sse_binary_family};
use crate::Ctx;
use iced_x86::{Code, Instruction};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    if let Some(h) = binary_lookup(ins) {
        return Some(h);
    }
    Some(match ins.code() {
        Code::Crc32_r32_rm8
        | Code::Crc32_r64_rm8
        | Code::Crc32_r32_rm16
        | Code::Crc32_r32_rm32
        | Code::Crc32_r64_rm64 => h_crc32,
        _ => return None,
    })
}

sse_binary_family! {
    pcmpgtq: Pcmpgtq_xmm_xmmm128;
}

/// Signed 64-bit greater-than, all ones per true lane.
pub fn pcmpgtq(a: u128, b: u128) -> u128 {
    let (a, b) = (qwords(a), qwords(b));
    from_qwords(core::array::from_fn(|i| {
        if a[i] as i64 > b[i] as i64 {
            u64::MAX
        } else {
            0
        }
    }))
}

/// The reflected CRC-32C (Castagnoli) polynomial.
const CRC32C_POLY: u32 = 0x82f6_3b78;

/// CRC32 accumulation of the low `size` bytes of `data` (least significant first) into
/// `crc`, with the bit-reflected CRC-32C polynomial and no pre/post inversion, as the
/// instruction does.
pub fn crc32c(crc: u32, data: u64, size: u8) -> u32 {
    let mut c = crc;
    for i in 0..size.min(8) as u32 {
        c ^= (data >> (8 * i)) as u8 as u32;
        for _ in 0..8 {
            c = (c >> 1) ^ (CRC32C_POLY & (c & 1).wrapping_neg());
        }
    }
    c
}

/// CRC32 r32/r64, r/m8/16/32/64: the low 32 bits of the destination are the running CRC;
/// the result is written zero-extended (bits 63:32 of a 64-bit destination become 0).
fn h_crc32(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 1);
    let data = x.read_op(ins, 1)?;
    let crc = x.read_op(ins, 0)? as u32;
    x.write_op(ins, 0, crc32c(crc, data, size) as u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::ops::sse_common::get_xmm;
    use crate::state::{ctl, reg};
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn crc32c_check_value() {
        // The standard CRC-32C check: "123456789" with initial value and final XOR all ones.
        let crc = b"123456789"
            .iter()
            .fold(!0u32, |c, &b| crc32c(c, b as u64, 1));
        assert_eq!(!crc, 0xe306_9283);
        // Wider operands are the same as their bytes in little-endian order.
        let d = 0x0807_0605_0403_0201u64;
        let bytewise = (0..8).fold(0x1234_5678u32, |c, i| crc32c(c, d >> (8 * i), 1));
        assert_eq!(crc32c(0x1234_5678, d, 8), bytewise);
        assert_eq!(crc32c(crc32c(0x1234_5678, d, 4), d >> 32, 4), bytewise);
    }

    #[test]
    fn pcmpgtq_is_signed() {
        let a = from_qwords([1u64 << 63, 5]);
        let b = from_qwords([0, 4]);
        assert_eq!(qwords(pcmpgtq(a, b)), [0, u64::MAX]);
        assert_eq!(qwords(pcmpgtq(b, a)), [u64::MAX, 0]);
        assert_eq!(pcmpgtq(a, a), 0);
    }

    #[test]
    fn crc32_forms_and_no_sse_checks() {
        let code = TestMachine::assemble(|a| {
            a.crc32(eax, bl)?;
            a.crc32(rcx, qword_ptr(DATA_BASE))?;
            a.crc32(edx, bh)?;
            a.crc32(esi, word_ptr(DATA_BASE + 1))?;
            a.pcmpgtq(xmm1, xmm2)
        });
        let mut m = TestMachine::new();
        let st = &mut m.cpu.state;
        // CRC32 runs with CR0.TS set (no #NM); the SSE instruction after it does fault.
        st.cr0 |= ctl::CR0_TS;
        st.gpr[reg::RAX] = 0xffff_ffff_0000_0001;
        st.gpr[reg::RBX] = 0xabcd;
        st.gpr[reg::RCX] = 0xdead_beef_1111_2222;
        st.gpr[reg::RDX] = u64::MAX;
        st.gpr[reg::RSI] = 7;
        m.load(DATA_BASE, &0x0102_0304_0506_0708u64.to_le_bytes());
        let e = m.run_code(&code, 5);
        assert_eq!(
            e.reason,
            ExitReason::Exception(crate::fault::Fault::DeviceNotAvailable)
        );
        assert_eq!(e.retired, 4);
        assert_eq!(m.gpr(reg::RAX), crc32c(1, 0xcd, 1) as u64);
        assert_eq!(
            m.gpr(reg::RCX),
            crc32c(0x1111_2222, 0x0102_0304_0506_0708, 8) as u64
        );
        assert_eq!(m.gpr(reg::RDX), crc32c(u32::MAX, 0xab, 1) as u64);
        assert_eq!(m.gpr(reg::RSI), crc32c(7, 0x0607, 2) as u64);
        assert_eq!(get_xmm(&m.cpu.state, 1), 0);
    }
}
