//! Shared pieces of the VEX-encoded (AVX, AVX2, FMA, F16C) families: the availability check,
//! YMM register access with the VEX zeroing rule, and vector operand reads/writes of 128 or 256
//! bits.
//!
//! VEX rule: an instruction with VEX.L = 0 writes bits 127:0 of its destination and zeroes bits
//! 255:128 (legacy SSE leaves them alone). A 256-bit operand is `[lo, hi]` as two `u128`.

use crate::fault::Fault;
use crate::ops::sse_common::xmm_index;
use crate::state::{ctl, CpuState};
use crate::Ctx;
use iced_x86::{Instruction, OpKind, Register};

/// XCR0 bits that must both be set for AVX: SSE state (1) and AVX state (2).
pub const XCR0_SSE_AVX: u64 = 0b110;

/// A vector value of up to 256 bits: `[bits 127:0, bits 255:128]`.
pub type V256 = [u128; 2];

/// Availability check every VEX handler runs first: CR4.OSXSAVE = 0 or XCR0[2:1] != 11b -> #UD,
/// then CR0.TS = 1 -> #NM. (iced rejects LOCK and legacy prefixes with VEX at decode.)
#[inline]
pub fn check_avx(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    crate::ops::check_no_lock(ins)?;
    let st = &x.cpu.state;
    if st.cr4 & ctl::CR4_OSXSAVE == 0 {
        return Err(Fault::ud("VEX instruction with CR4.OSXSAVE clear"));
    }
    if st.xcr0 & XCR0_SSE_AVX != XCR0_SSE_AVX {
        return Err(Fault::ud("VEX instruction with AVX state disabled in XCR0"));
    }
    if st.cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    Ok(())
}

/// Is `r` a YMM register?
#[inline]
pub fn is_ymm(r: Register) -> bool {
    (Register::YMM0 as u32..=Register::YMM15 as u32).contains(&(r as u32))
}

/// Index (0..15) of an XMM or YMM register (folded into range: no guest input can index out).
#[inline]
pub fn vec_index(r: Register) -> usize {
    if is_ymm(r) {
        (r as usize).wrapping_sub(Register::YMM0 as usize) & 15
    } else {
        xmm_index(r)
    }
}

/// Vector length of the instruction in bytes: 32 when operand 0 (or, for stores, operand 1) is
/// a YMM register or a 256-bit memory operand, else 16.
#[inline]
pub fn vlen(ins: &Instruction) -> u8 {
    for n in 0..ins.op_count() {
        if ins.op_kind(n) == OpKind::Register && is_ymm(ins.op_register(n)) {
            return 32;
        }
    }
    16
}

/// The full 256 bits of register `i`.
#[inline]
pub fn get_ymm(st: &CpuState, i: usize) -> V256 {
    let y = &st.ymm[i & 15];
    [
        ((y[1] as u128) << 64) | y[0] as u128,
        ((y[3] as u128) << 64) | y[2] as u128,
    ]
}

/// Write all 256 bits of register `i`.
#[inline]
pub fn set_ymm(st: &mut CpuState, i: usize, v: V256) {
    let y = &mut st.ymm[i & 15];
    y[0] = v[0] as u64;
    y[1] = (v[0] >> 64) as u64;
    y[2] = v[1] as u64;
    y[3] = (v[1] >> 64) as u64;
}

/// VEX write of `len` bytes (16 or 32) to register `i`: with 16, bits 255:128 become zero.
#[inline]
pub fn set_vec(st: &mut CpuState, i: usize, v: V256, len: u8) {
    set_ymm(st, i, if len == 32 { v } else { [v[0], 0] });
}

/// Read vector operand `n` (XMM/YMM register or a 16/32-byte memory operand) as 256 bits
/// (the high half is zero for 128-bit operands). With `aligned`, a memory operand that is not
/// aligned to its size raises #GP(0) before any access (VMOVAPS/VMOVDQA/VMOVNT*; every other
/// VEX instruction accepts any alignment).
pub fn read_vec(x: &mut Ctx, ins: &Instruction, n: u32, aligned: bool) -> Result<V256, Fault> {
    match ins.op_kind(n) {
        OpKind::Register => Ok(get_ymm(&x.cpu.state, vec_index(ins.op_register(n)))),
        OpKind::Memory => {
            let size = ins.memory_size().size() as u64;
            let a = x.mem_addr(ins, size, false)?;
            if aligned && a & (size.max(1) - 1) != 0 {
                return Err(Fault::GP0);
            }
            match size {
                32 => {
                    let mut b = [0u8; 32];
                    x.read_bytes(a, &mut b)?;
                    let lo = u128::from_le_bytes(b[..16].try_into().unwrap_or_default());
                    let hi = u128::from_le_bytes(b[16..].try_into().unwrap_or_default());
                    Ok([lo, hi])
                }
                16 => Ok([x.read_u128(a)?, 0]),
                s @ (1 | 2 | 4 | 8) => Ok([x.read(a, s as u8)? as u128, 0]),
                _ => Err(Fault::ud("unsupported VEX memory operand size")),
            }
        }
        _ => Err(Fault::ud("unsupported VEX operand kind")),
    }
}

/// Write vector operand `n`: a register gets the VEX zeroing rule for `len`; memory gets
/// exactly `len` bytes (or the memory operand's own size if smaller).
pub fn write_vec(
    x: &mut Ctx,
    ins: &Instruction,
    n: u32,
    v: V256,
    len: u8,
    aligned: bool,
) -> Result<(), Fault> {
    match ins.op_kind(n) {
        OpKind::Register => {
            set_vec(&mut x.cpu.state, vec_index(ins.op_register(n)), v, len);
            Ok(())
        }
        OpKind::Memory => {
            let size = (ins.memory_size().size() as u64).min(len as u64);
            let a = x.mem_addr(ins, size, true)?;
            if aligned && a & (size.max(1) - 1) != 0 {
                return Err(Fault::GP0);
            }
            let mut b = [0u8; 32];
            b[..16].copy_from_slice(&v[0].to_le_bytes());
            b[16..].copy_from_slice(&v[1].to_le_bytes());
            x.write_bytes(a, &b[..size as usize])
        }
        _ => Err(Fault::ud("unsupported VEX destination operand kind")),
    }
}

/// Apply a 128-bit lane function to each 128-bit lane of a VEX operation (`len` 16 or 32).
#[inline]
pub fn per_lane(a: V256, b: V256, len: u8, f: impl Fn(u128, u128) -> u128) -> V256 {
    [f(a[0], b[0]), if len == 32 { f(a[1], b[1]) } else { 0 }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::testkit::TestMachine;

    #[test]
    fn vex_128_write_zeroes_the_upper_half() {
        let mut st = CpuState::default();
        set_ymm(&mut st, 3, [1, 2]);
        set_vec(&mut st, 3, [5, 9], 16);
        assert_eq!(get_ymm(&st, 3), [5, 0]);
        set_vec(&mut st, 3, [5, 9], 32);
        assert_eq!(get_ymm(&st, 3), [5, 9]);
    }

    #[test]
    fn avx_needs_osxsave_and_xcr0() {
        // vzeroupper is the simplest VEX instruction; the check runs before it is looked up,
        // so use any VEX encoding through check_avx directly.
        let mut m = TestMachine::new();
        let code = TestMachine::assemble(|a| a.vzeroupper());
        m.cpu.state.xcr0 = 1;
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        let mut dec = iced_x86::Decoder::new(64, &code, 0);
        let ins = dec.decode();
        let mut m = TestMachine::new();
        let ctx = Ctx::new(&mut m.cpu, &mut m.ram, &mut m.bus);
        assert!(check_avx(&ctx, &ins).is_ok());
        ctx.cpu.state.cr4 &= !ctl::CR4_OSXSAVE;
        assert!(check_avx(&ctx, &ins).is_err());
    }

    /// Every VEX instruction except the GPR-only BMI ones raises #UD with CR4.OSXSAVE clear or
    /// with XCR0 lacking SSE|AVX, before touching anything: a sweep over VEX2 and VEX3
    /// (maps 0F, 0F38, 0F3A) opcodes with a register and a memory ModRM.
    #[test]
    fn every_vex_instruction_needs_osxsave_and_xcr0() {
        use iced_x86::{CpuidFeature, Decoder, DecoderOptions, EncodingKind, Mnemonic::*};
        let gpr_only = [
            Andn, Bextr, Blsi, Blsmsk, Blsr, Bzhi, Mulx, Pdep, Pext, Rorx, Sarx, Shlx, Shrx,
        ];
        let mut encodings: Vec<Vec<u8>> = Vec::new();
        for op in 0..=255u8 {
            for modrm in [0xc1u8, 0x00] {
                for b1 in [0xf8u8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff, 0x78, 0x7d] {
                    encodings.push(vec![0xc5, b1, op, modrm, 0x11]);
                }
                for map in 1..=3u8 {
                    for wlpp in 0..16u8 {
                        // W (bit 7), vvvv = 1111b inverted, L (bit 2), pp.
                        let b2 = (wlpp & 8) << 4 | 0x78 | (wlpp & 7);
                        encodings.push(vec![0xc4, 0xe0 | map, b2, op, modrm, 0x11]);
                    }
                }
            }
        }
        let mut m = TestMachine::new();
        let base = m.cpu.state.clone();
        let mut checked = 0;
        for code in &encodings {
            let ins = Decoder::with_ip(64, code, crate::testkit::CODE_BASE, DecoderOptions::NONE)
                .decode();
            if ins.is_invalid()
                || ins.encoding() != EncodingKind::VEX
                || gpr_only.contains(&ins.mnemonic())
            {
                continue;
            }
            for (cr4_off, xcr0) in [(ctl::CR4_OSXSAVE, 7), (0, 1), (0, 3), (0, 5)] {
                m.cpu.state = base.clone();
                m.cpu.state.gpr[0] = crate::testkit::DATA_BASE;
                m.cpu.state.cr4 &= !cr4_off;
                m.cpu.state.xcr0 = xcr0;
                m.cpu.state.ymm[1] = [3; 4];
                let before = m.cpu.state.clone();
                let e = m.run_code(code, 1);
                assert!(
                    matches!(e.reason, ExitReason::Exception(Fault::InvalidOpcode { .. })),
                    "{ins} ({code:02x?}) cr4 off {cr4_off:#x} xcr0 {xcr0}: {:?}",
                    e.reason
                );
                assert_eq!(m.cpu.state.ymm, before.ymm, "{ins}");
                checked += 1;
            }
        }
        assert!(checked > 2000, "only {checked} checks");
        // With AVX enabled, none of them is missing from the interpreter.
        let mut missing = std::collections::BTreeSet::new();
        for code in &encodings {
            let ins = Decoder::with_ip(64, code, crate::testkit::CODE_BASE, DecoderOptions::NONE)
                .decode();
            // Only the advertised VEX extensions (not AVX-512 mask ops, AMX, VAES, FMA4, ...).
            let advertised = ins.cpuid_features().iter().all(|f| {
                matches!(
                    f,
                    CpuidFeature::AVX | CpuidFeature::AVX2 | CpuidFeature::FMA | CpuidFeature::F16C
                )
            });
            if ins.is_invalid() || ins.encoding() != EncodingKind::VEX || !advertised {
                continue;
            }
            m.cpu.state = base.clone();
            m.cpu.state.gpr[0] = crate::testkit::DATA_BASE;
            let e = m.run_code(code, 1);
            if let ExitReason::Exception(Fault::InvalidOpcode { what }) = e.reason {
                if what.contains("not implemented") {
                    missing.insert(format!("{:?}", ins.mnemonic()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "VEX instructions not implemented: {missing:?}"
        );
    }
}
