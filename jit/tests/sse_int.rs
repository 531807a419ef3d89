//! The natively lowered SSE integer moves/logic/adds/shifts/shuffles (`lower/sse_int.rs`)
//! against the interpreter: random XMM and memory contents, register and memory operands
//! (aligned, misaligned, page-crossing), CR0.TS set (#NM) and a loop that runs compiled.

mod common;

use common::{compare, eager_config};
use iced_x86::code_asm::*;
use lockstep_interp::state::ctl;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

/// Fill XMM0-15 and the first 8 KiB of data with a deterministic pattern.
fn fill(m: &mut TestMachine, seed: u64) {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for y in m.cpu.state.ymm.iter_mut() {
        for q in y.iter_mut() {
            *q = next();
        }
    }
    let data: Vec<u8> = (0..0x2000).map(|_| next() as u8).collect();
    m.load(DATA_BASE, &data);
}

/// Every covered instruction, register and memory forms, in a loop of 50 iterations that
/// walks RBX through the data (so memory operands are aligned on even iterations only for
/// the unaligned forms, and always aligned for the others).
fn program() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 50u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movdqa(xmm1, xmmword_ptr(rbx))?;
        a.movdqu(xmm2, xmmword_ptr(rbx + 3))?;
        a.movups(xmm3, xmmword_ptr(rbx + 17))?;
        a.movaps(xmm4, xmm1)?;
        a.paddd(xmm1, xmm2)?;
        a.paddq(xmm3, xmmword_ptr(rbx + 0x40))?;
        a.paddb(xmm4, xmm5)?;
        a.paddw(xmm5, xmm6)?;
        a.psubd(xmm6, xmm1)?;
        a.psubq(xmm7, xmm2)?;
        a.psubb(xmm8, xmm3)?;
        a.psubw(xmm9, xmm4)?;
        a.pxor(xmm10, xmm1)?;
        a.por(xmm11, xmmword_ptr(rbx + 0x50))?;
        a.pand(xmm12, xmm2)?;
        a.pandn(xmm13, xmm3)?;
        a.xorps(xmm14, xmm4)?;
        a.andnps(xmm15, xmm5)?;
        a.orpd(xmm0, xmm6)?;
        a.pslld(xmm1, 7)?;
        a.psrld(xmm2, 9)?;
        a.psllq(xmm3, 40)?;
        a.psrlq(xmm4, 63)?;
        a.psrad(xmm5, 3)?;
        a.psraw(xmm6, 20)?;
        a.psllw(xmm7, 16)?;
        a.psrlw(xmm8, 1)?;
        a.pshufd(xmm9, xmm1, 0x1b)?;
        a.pshufd(xmm10, xmmword_ptr(rbx + 0x60), 0xe4)?;
        a.punpckldq(xmm11, xmm2)?;
        a.punpckhdq(xmm12, xmm3)?;
        a.punpcklqdq(xmm13, xmm4)?;
        a.punpckhqdq(xmm14, xmmword_ptr(rbx + 0x70))?;
        a.movdqa(xmmword_ptr(rbx + 0x1000), xmm9)?;
        a.movdqu(xmmword_ptr(rbx + 0x1009), xmm10)?;
        a.movaps(xmmword_ptr(rbx + 0x1020), xmm11)?;
        a.movups(xmmword_ptr(rbx + 0x1033), xmm12)?;
        a.add(rbx, 16i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

#[test]
fn sse_int_matches_interpreter() {
    let code = program();
    for seed in [1u64, 7, 99] {
        let (_, jit, exit) = compare(&code, &[1_000_000], eager_config(), &|m| fill(m, seed));
        // 2 + 50 iterations of 40 instructions, then HLT at CPL 3 (#GP).
        assert_eq!(exit.retired, 2002, "{exit:?}");
        assert!(jit.stats.native_insns > 30, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        // Budget slices that stop inside the loop body.
        let slices: Vec<u64> = (0..300).map(|i| 1 + (i * 31) % 47).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed));
    }
}

/// A misaligned MOVDQA source: #GP(0) at the instruction, in both engines.
#[test]
fn misaligned_movdqa_faults_like_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rcx, 10u64)?;
        a.mov(rbx, DATA_BASE)?;
        a.set_label(&mut top)?;
        a.movdqa(xmm1, xmmword_ptr(rbx))?;
        a.add(rbx, 8i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    });
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| fill(m, 3));
    assert!(
        matches!(exit.reason, ExitReason::Exception(_)),
        "expected #GP: {exit:?}"
    );
}

/// CR0.TS set: the first SSE instruction raises #NM in both engines.
#[test]
fn cr0_ts_gives_device_not_available() {
    let code = program();
    let (_, _, exit) = compare(&code, &[10_000], eager_config(), &|m| {
        fill(m, 5);
        m.cpu.state.cr0 |= ctl::CR0_TS;
    });
    assert!(
        matches!(exit.reason, ExitReason::Exception(_)),
        "expected #NM: {exit:?}"
    );
}
