//! TestMachine tests of the SSE floating-point families: unmasked exceptions (#XM, or #UD with
//! CR4.OSXMMEXCPT clear) that write nothing, sticky flags, alignment and availability faults.
//! (Bit-exact results against the host are in `sse_fp_native`.)

use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::ops::sse_common::get_xmm;
use crate::state::{ctl, flags, reg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;

const ONE: u32 = 0x3f80_0000;
const SNAN: u32 = 0x7f80_0001;

fn dwords(d: [u32; 4]) -> u128 {
    d.iter()
        .enumerate()
        .fold(0, |v, (i, &x)| v | (x as u128) << (32 * i))
}

/// Run `code` once with xmm0 = `a`, xmm1 = `b` and MXCSR = `mxcsr`.
fn run(code: &[u8], a: u128, b: u128, mxcsr: u32) -> (TestMachine, ExitReason) {
    let mut m = TestMachine::new();
    m.cpu.state.ymm[0] = [a as u64, (a >> 64) as u64, 5, 6];
    m.cpu.state.ymm[1] = [b as u64, (b >> 64) as u64, 7, 8];
    m.cpu.state.mxcsr = mxcsr;
    let e = m.run_code(code, 1);
    (m, e.reason)
}

#[test]
fn masked_exceptions_set_sticky_flags_and_write() {
    let code = TestMachine::assemble(|a| a.addps(xmm0, xmm1));
    let a = dwords([SNAN, ONE, 0x7f7f_ffff, 1]);
    let b = dwords([ONE, 0x3380_0000, 0x7f7f_ffff, 0]);
    let (m, r) = run(&code, a, b, 0x1f80 | 0x10);
    assert_eq!(r, ExitReason::Budget);
    // IE (SNaN), PE (1 + 2^-24), OE|PE (overflow), DE (denormal); UE was already set.
    assert_eq!(m.cpu.state.mxcsr, 0x1f80 | 0x3f & !0x04);
    assert_eq!(
        get_xmm(&m.cpu.state, 0),
        dwords([0x7fc0_0001, ONE, 0x7f80_0000, 1])
    );
    assert_eq!(
        m.cpu.state.ymm[0][2..],
        [5, 6],
        "legacy SSE keeps bits 255:128"
    );
}

#[test]
fn unmasked_precomputation_exception_writes_nothing() {
    let code = TestMachine::assemble(|a| a.addps(xmm0, xmm1));
    let a = dwords([SNAN, ONE, 0x7f7f_ffff, 2]);
    let b = dwords([ONE, 0x3380_0000, 0x7f7f_ffff, 3]);
    // IM clear: lane 0 raises an unmasked IE. The pre-computation flags of all lanes are
    // recorded (IE, and DE from lane 3's denormals, masked), the other lanes' OE/PE are
    // post-computation flags that are not, and nothing is written.
    let (m, r) = run(&code, a, b, 0x1f80 & !0x80);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.mxcsr, 0x1f00 | 0x03);
    assert_eq!(get_xmm(&m.cpu.state, 0), a);
    assert_eq!(m.cpu.state.rip, CODE_BASE, "#XM is a fault");
    assert_eq!(m.cpu.retired, 0);
}

#[test]
fn unmasked_exception_without_osxmmexcpt_is_ud() {
    let code = TestMachine::assemble(|a| a.divss(xmm0, xmm1));
    let mut m = TestMachine::new();
    m.cpu.state.cr4 &= !ctl::CR4_OSXMMEXCPT;
    m.cpu.state.ymm[0][0] = ONE as u64;
    m.cpu.state.ymm[1][0] = 0;
    m.cpu.state.mxcsr = 0x1f80 & !0x200; // ZM clear
    let e = m.run_code(&code, 1);
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
    assert_eq!(m.cpu.state.mxcsr, 0x1d80 | 0x04);
    assert_eq!(m.cpu.state.ymm[0][0], ONE as u64);
}

#[test]
fn unmasked_postcomputation_exceptions() {
    let code = TestMachine::assemble(|a| a.mulss(xmm0, xmm1));
    // Inexact with PM clear: PE recorded, destination unchanged.
    let (m, r) = run(&code, 0x3f80_0001, 0x3f80_0001, 0x1f80 & !0x1000);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(
        (m.cpu.state.mxcsr & 0x3f, m.cpu.state.ymm[0][0]),
        (0x20, 0x3f80_0001)
    );
    // Overflow with OM clear: OE, and PE only if the result rounded with an unbounded
    // exponent is inexact (host-measured: MAX * 2 gives OE alone, MAX * 3 OE|PE).
    let (m, r) = run(&code, 0x7f7f_ffff, 0x4000_0000, 0x1f80 & !0x400);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x08);
    let (m, r) = run(&code, 0x7f7f_ffff, 0x4040_0000, 0x1f80 & !0x400);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x28);
    // Underflow with UM clear: the same rule (MIN_NORMAL * 0.75 is exact unbounded: UE alone).
    let (m, r) = run(&code, 0x0080_0000, 0x3f40_0000, 0x1f80 & !0x800);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x10);
    // An exact denormal result: no exception when UM is set, UE (and #XM) when it is clear.
    let (m, r) = run(&code, 3, ONE as u128, 0x1f80);
    assert_eq!(r, ExitReason::Budget);
    assert_eq!((m.cpu.state.mxcsr & 0x3f, m.cpu.state.ymm[0][0]), (0x02, 3));
    let (m, r) = run(&code, 3, ONE as u128, 0x1f80 & !0x800);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!((m.cpu.state.mxcsr & 0x3f, m.cpu.state.ymm[0][0]), (0x12, 3));
    // FTZ does not apply when UM is clear.
    let (m, _) = run(&code, 3, ONE as u128, 0x9f80 & !0x800);
    assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x12);
}

#[test]
fn unmasked_denormal_operand_and_daz() {
    let code = TestMachine::assemble(|a| a.addsd(xmm0, xmm1));
    let (m, r) = run(&code, 1, 0, 0x1f80 & !0x100);
    assert_eq!(r, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.mxcsr & 0x3f, 0x02);
    // DAZ: the denormal is a zero, no DE.
    let (m, r) = run(&code, 1, 0, (0x1f80 & !0x100) | 0x40);
    assert_eq!(r, ExitReason::Budget);
    assert_eq!((m.cpu.state.mxcsr & 0x3f, m.cpu.state.ymm[0][0]), (0, 0));
}

#[test]
fn comiss_flags_and_unmasked_invalid() {
    let code = TestMachine::assemble(|a| a.comiss(xmm0, xmm1));
    let (m, r) = run(&code, 0x4000_0000, ONE as u128, 0x1f80);
    assert_eq!(r, ExitReason::Budget);
    assert_eq!(m.cpu.state.rflags & flags::STATUS, 0);
    let (m, _) = run(&code, ONE as u128, 0x4000_0000, 0x1f80);
    assert_eq!(m.cpu.state.rflags & flags::STATUS, flags::CF);
    // Unordered, QNaN: COMISS signals IE; unmasked, RFLAGS stays as it was.
    let mut m = TestMachine::new();
    m.cpu.state.ymm[0][0] = 0x7fc0_0000;
    m.cpu.state.rflags |= flags::OF | flags::SF;
    m.cpu.state.mxcsr = 0x1f00;
    let e = m.run_code(&code, 1);
    assert_eq!(e.reason, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.cpu.state.rflags & flags::STATUS, flags::OF | flags::SF);
    assert_eq!(m.cpu.state.mxcsr, 0x1f01);
    // UCOMISS does not signal on a QNaN: unordered is ZF PF CF, OF/SF cleared.
    let code = TestMachine::assemble(|a| a.ucomiss(xmm0, xmm1));
    let e = m.run_code(&code, 1);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(
        m.cpu.state.rflags & flags::STATUS,
        flags::ZF | flags::PF | flags::CF
    );
}

#[test]
fn conversion_to_integer_unmasked_invalid_keeps_the_register() {
    let code = TestMachine::assemble(|a| a.cvttss2si(rax, xmm0));
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 0x1234;
    m.cpu.state.ymm[0][0] = 0x7fc0_0000;
    m.cpu.state.mxcsr = 0x1f00;
    let e = m.run_code(&code, 1);
    assert_eq!(e.reason, ExitReason::Exception(Fault::SimdError));
    assert_eq!(m.gpr(reg::RAX), 0x1234);
    m.cpu.state.mxcsr = 0x1f80;
    let e = m.run_code(&code, 1);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(m.gpr(reg::RAX), 0x8000_0000_0000_0000);
    // A 32-bit destination gets 0x80000000, zero-extended.
    let code = TestMachine::assemble(|a| a.cvtss2si(eax, xmm0));
    m.cpu.state.gpr[reg::RAX] = u64::MAX;
    m.run_code(&code, 1);
    assert_eq!(m.gpr(reg::RAX), 0x8000_0000);
}

#[test]
fn alignment_rules() {
    let cases: [(Vec<u8>, bool); 6] = [
        (
            TestMachine::assemble(|a| a.addps(xmm0, xmmword_ptr(DATA_BASE + 4))),
            true,
        ),
        (
            TestMachine::assemble(|a| a.cvtpd2ps(xmm0, xmmword_ptr(DATA_BASE + 8))),
            true,
        ),
        (
            TestMachine::assemble(|a| a.dpps(xmm0, xmmword_ptr(DATA_BASE + 8), 0xff)),
            true,
        ),
        (
            TestMachine::assemble(|a| a.addss(xmm0, dword_ptr(DATA_BASE + 4))),
            false,
        ),
        (
            TestMachine::assemble(|a| a.lddqu(xmm0, xmmword_ptr(DATA_BASE + 3))),
            false,
        ),
        (
            TestMachine::assemble(|a| a.cvtps2pd(xmm0, qword_ptr(DATA_BASE + 4))),
            false,
        ),
    ];
    for (code, faults) in cases {
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 1);
        let want = if faults {
            ExitReason::Exception(Fault::GP0)
        } else {
            ExitReason::Budget
        };
        assert_eq!(e.reason, want, "{code:x?}");
    }
}

#[test]
fn availability_and_memory_faults_leave_mxcsr_alone() {
    let code = TestMachine::assemble(|a| a.sqrtsd(xmm0, qword_ptr(0x1000u64)));
    let mut m = TestMachine::new();
    m.cpu.state.mxcsr = 0x1f80;
    let e = m.run_code(&code, 1);
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::PageFault { .. })
    ));
    assert_eq!(m.cpu.state.mxcsr, 0x1f80);
    let code = TestMachine::assemble(|a| a.roundss(xmm0, xmm1, 0));
    m.cpu.state.cr0 |= ctl::CR0_TS;
    let e = m.run_code(&code, 1);
    assert_eq!(e.reason, ExitReason::Exception(Fault::DeviceNotAvailable));
    m.cpu.state.cr0 |= ctl::CR0_EM;
    let e = m.run_code(&code, 1);
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
}

#[test]
fn flags_accumulate_over_a_sequence() {
    let code = TestMachine::assemble(|a| {
        a.divsd(xmm0, xmm1)?; // 1/3: PE
        a.sqrtsd(xmm2, xmm3)?; // sqrt(-1): IE
        a.cvtsi2ss(xmm4, rax)?; // 2^63 - 1: PE
        a.stmxcsr(dword_ptr(DATA_BASE))
    });
    let mut m = TestMachine::new();
    m.cpu.state.ymm[0][0] = 0x3ff0_0000_0000_0000;
    m.cpu.state.ymm[1][0] = 0x4008_0000_0000_0000;
    m.cpu.state.ymm[3][0] = 0xbff0_0000_0000_0000;
    m.cpu.state.gpr[reg::RAX] = i64::MAX as u64;
    let e = m.run_code(&code, 4);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(m.read_u64(DATA_BASE) as u32, 0x1f80 | 0x21);
    assert_eq!(m.cpu.state.ymm[0][0], 0x3fd5_5555_5555_5555);
    assert_eq!(m.cpu.state.ymm[2][0], 0xfff8_0000_0000_0000);
    assert_eq!(m.cpu.state.ymm[4][0] as u32, 0x5f00_0000);
}

#[test]
fn extractps_insertps_and_blendv() {
    let code = TestMachine::assemble(|a| {
        a.extractps(eax, xmm1, 2)?;
        a.extractps(dword_ptr(DATA_BASE), xmm1, 3)?;
        a.insertps(xmm0, xmm1, 0b1100_0010)?;
        a.blendvps(xmm2, xmm1)
    });
    let mut m = TestMachine::new();
    let b = dwords([10, 11, 12, 0x8000_000d]);
    m.cpu.state.ymm[1] = [b as u64, (b >> 64) as u64, 0, 0];
    m.cpu.state.gpr[reg::RAX] = u64::MAX;
    let e = m.run_code(&code, 4);
    assert_eq!(e.reason, ExitReason::Budget);
    assert_eq!(m.gpr(reg::RAX), 12);
    assert_eq!(m.read_u64(DATA_BASE) as u32, 0x8000_000d);
    // insertps: dword 3 of xmm1 into dword 0, dword 1 zeroed.
    assert_eq!(get_xmm(&m.cpu.state, 0), dwords([0x8000_000d, 0, 0, 0]));
    // blendvps mask is xmm0 (now: only dword 0 has its sign bit set).
    assert_eq!(get_xmm(&m.cpu.state, 2), dwords([10, 0, 0, 0]));
}
