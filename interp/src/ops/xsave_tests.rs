//! Tests of the XSAVE family: fault rules, XRSTOR init/load semantics, XSETBV/XGETBV, and
//! byte-for-byte comparisons of XSAVE/XSAVEC images with this host.

use super::*;
use crate::cpu::ExitReason;
use crate::state::sreg;
use crate::testkit::{TestMachine, DATA_BASE};
use iced_x86::code_asm::*;

const OUT: u64 = DATA_BASE + 0x1000;

fn run(m: &mut TestMachine, code: &[u8], n: u64) -> ExitReason {
    m.run_code(code, n).reason
}

fn is_ud(r: &ExitReason) -> bool {
    matches!(r, ExitReason::Exception(Fault::InvalidOpcode { .. }))
}

fn read_area(m: &TestMachine, at: u64) -> [u8; MAX_SIZE] {
    let mut a = [0u8; MAX_SIZE];
    for (i, c) in a.chunks_mut(8).enumerate() {
        c.copy_from_slice(&m.read_u64(at + 8 * i as u64).to_le_bytes());
    }
    a
}

/// A valid standard-form image with every component non-initial and XSTATE_BV = `bv`.
fn busy_image(bv: u64) -> [u8; 1024] {
    let mut img = [0u8; 1024];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for b in img.iter_mut().take(MAX_SIZE) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *b = s as u8;
    }
    // FCW 037F, FSW: TOP 5 and C1/C3, no exception flags; FTW random; FOP/FIP/FDP zero; MXCSR
    // with flags and RC set; bytes 416..511 and the header after XSTATE_BV zero.
    img[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    img[2..4].copy_from_slice(&(0x4200u16 | 5 << 11).to_le_bytes());
    img[5..24].fill(0);
    img[24..28].copy_from_slice(&0x7fa1u32.to_le_bytes());
    img[28..32].copy_from_slice(&0xffffu32.to_le_bytes());
    for i in 0..8 {
        img[42 + 16 * i..48 + 16 * i].fill(0);
    }
    img[416..576].fill(0);
    img[HEADER..HEADER + 8].copy_from_slice(&bv.to_le_bytes());
    img
}

fn init_image(mxcsr: u32) -> [u8; 1024] {
    let mut img = [0u8; 1024];
    img[24..28].copy_from_slice(&mxcsr.to_le_bytes());
    img
}

/// Run `xrstor64 [DATA_BASE]` (RFBM 7), then `op`, then `save [OUT]` in the interpreter on an
/// area pre-filled with 0xAA; returns the area.
fn interp_case(
    img: &[u8; 1024],
    op: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
    compacted_save: bool,
) -> [u8; MAX_SIZE] {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, img);
    m.load(OUT, &[0xaa; 1024]);
    let code = TestMachine::assemble(|a| {
        a.mov(eax, 7)?;
        a.xor(edx, edx)?;
        a.xrstor64(ptr(DATA_BASE))?;
        op(a)?;
        if compacted_save {
            a.xsavec64(ptr(OUT))
        } else {
            a.xsave64(ptr(OUT))
        }
    });
    assert_eq!(run(&mut m, &code, 5), ExitReason::Budget);
    read_area(&m, OUT)
}

#[test]
fn faults_without_osxsave_with_ts_and_misaligned() {
    let save = TestMachine::assemble(|a| a.xsave64(ptr(DATA_BASE)));
    let get = TestMachine::assemble(|a| a.xgetbv());
    let mut m = TestMachine::new();
    m.cpu.state.cr4 &= !ctl::CR4_OSXSAVE;
    assert!(is_ud(&run(&mut m, &save, 1)));
    assert!(is_ud(&run(&mut m, &get, 1)));
    let mut m = TestMachine::new();
    m.cpu.state.cr0 |= ctl::CR0_TS;
    assert_eq!(
        run(&mut m, &save, 1),
        ExitReason::Exception(Fault::DeviceNotAvailable)
    );
    // XGETBV does not care about CR0.TS.
    m.cpu.state.gpr[reg::RCX] = 0;
    assert_eq!(run(&mut m, &get, 1), ExitReason::Budget);
    assert_eq!(m.gpr(reg::RAX), 7);
    let mut m = TestMachine::new();
    for off in [8u64, 16, 32, 48] {
        let c = TestMachine::assemble(|a| a.xsave64(ptr(DATA_BASE + off)));
        assert_eq!(run(&mut m, &c, 1), ExitReason::Exception(Fault::GP0));
        let c = TestMachine::assemble(|a| a.xrstor64(ptr(DATA_BASE + off)));
        assert_eq!(run(&mut m, &c, 1), ExitReason::Exception(Fault::GP0));
    }
}

#[test]
fn xgetbv_values_and_bad_ecx() {
    let get = TestMachine::assemble(|a| a.xgetbv());
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = u64::MAX;
    m.cpu.state.gpr[reg::RDX] = u64::MAX;
    m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_0000_0000;
    assert_eq!(run(&mut m, &get, 1), ExitReason::Budget);
    assert_eq!((m.gpr(reg::RAX), m.gpr(reg::RDX)), (7, 0));
    // ECX = 1: XCR0 & XINUSE; the fresh machine has everything initial.
    m.cpu.state.gpr[reg::RCX] = 1;
    assert_eq!(run(&mut m, &get, 1), ExitReason::Budget);
    assert_eq!(m.gpr(reg::RAX), 0);
    m.cpu.state.ymm[3][3] = 1;
    m.cpu.state.x87.fcw = 0x27f;
    assert_eq!(run(&mut m, &get, 1), ExitReason::Budget);
    assert_eq!(m.gpr(reg::RAX), X87 | AVX);
    m.cpu.state.gpr[reg::RCX] = 2;
    assert_eq!(run(&mut m, &get, 1), ExitReason::Exception(Fault::GP0));
}

#[test]
fn xsetbv_privilege_and_value_checks() {
    let set = TestMachine::assemble(|a| a.xsetbv());
    let mut m = TestMachine::new();
    m.cpu.state.gpr[reg::RAX] = 3;
    assert_eq!(run(&mut m, &set, 1), ExitReason::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.xcr0, 7);
    m.cpu.state.seg[sreg::CS].selector &= !3;
    for bad in [0u64, 2, 4, 5, 6, 8, 0xf, 0xe7, 1 << 32 | 7] {
        m.cpu.state.gpr[reg::RAX] = bad & 0xffff_ffff;
        m.cpu.state.gpr[reg::RDX] = bad >> 32;
        assert_eq!(
            run(&mut m, &set, 1),
            ExitReason::Exception(Fault::GP0),
            "{bad:#x}"
        );
        assert_eq!(m.cpu.state.xcr0, 7);
    }
    m.cpu.state.gpr[reg::RDX] = 0;
    m.cpu.state.gpr[reg::RCX] = 1;
    m.cpu.state.gpr[reg::RAX] = 7;
    assert_eq!(run(&mut m, &set, 1), ExitReason::Exception(Fault::GP0));
    m.cpu.state.gpr[reg::RCX] = 0;
    for good in [1u64, 7, 3] {
        m.cpu.state.gpr[reg::RAX] = good | 0xffff_ffff_0000_0000;
        assert_eq!(run(&mut m, &set, 1), ExitReason::Budget);
        assert_eq!(m.cpu.state.xcr0, good);
    }
    // With AVX disabled in XCR0, VEX instructions are #UD.
    let vex = TestMachine::assemble(|a| a.vpxor(ymm0, ymm0, ymm0));
    assert!(is_ud(&run(&mut m, &vex, 1)));
    m.cpu.state.cr4 &= !ctl::CR4_OSXSAVE;
    assert!(is_ud(&run(&mut m, &set, 1)));
}

#[test]
fn xrstor_header_checks_leave_state_alone() {
    let rstor = TestMachine::assemble(|a| {
        a.mov(eax, 7)?;
        a.xor(edx, edx)?;
        a.xrstor64(ptr(DATA_BASE))
    });
    let bad: [(usize, u64); 6] = [
        (HEADER, 8),                 // XSTATE_BV bit beyond XCR0
        (HEADER + 8, 4),             // XCOMP_BV without bit 63
        (HEADER + 16, 1),            // standard form: bytes 16..23 must be 0
        (HEADER + 8, COMPACTED | 8), // XCOMP_BV bit beyond XCR0
        (24, 0x1_0000),              // MXCSR reserved bit
        (HEADER, COMPACTED),         // XSTATE_BV bit 63
    ];
    for (at, v) in bad {
        let mut img = busy_image(7);
        img[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let mut m = TestMachine::new();
        m.load(DATA_BASE, &img);
        let before = m.cpu.state.clone();
        assert_eq!(
            run(&mut m, &rstor, 3),
            ExitReason::Exception(Fault::GP0),
            "{at} {v:#x}"
        );
        assert_eq!(m.cpu.state.ymm, before.ymm);
        assert_eq!(m.cpu.state.x87, before.x87);
    }
    // Compacted: XSTATE_BV outside XCOMP_BV, and non-zero bytes 16..63.
    for (bv, extra) in [(6u64, 0usize), (2, HEADER + 40)] {
        let mut img = busy_image(bv);
        img[HEADER + 8..HEADER + 16].copy_from_slice(&(COMPACTED | 2).to_le_bytes());
        if extra != 0 {
            img[extra] = 1;
        }
        let mut m = TestMachine::new();
        m.load(DATA_BASE, &img);
        assert_eq!(run(&mut m, &rstor, 3), ExitReason::Exception(Fault::GP0));
    }
}

#[test]
fn xrstor_initialises_cleared_components_and_loads_mxcsr() {
    let mut m = TestMachine::new();
    m.cpu.state.ymm = [[0x1111; 4]; 16];
    m.cpu.state.x87.fcw = 0x7f;
    m.cpu.state.x87.regs[2][0] = 9;
    let mut img = busy_image(0);
    img[24..28].copy_from_slice(&0x1f81u32.to_le_bytes());
    m.load(DATA_BASE, &img);
    let code = TestMachine::assemble(|a| {
        a.mov(eax, 7)?;
        a.xor(edx, edx)?;
        a.xrstor64(ptr(DATA_BASE))
    });
    assert_eq!(run(&mut m, &code, 3), ExitReason::Budget);
    assert_eq!(m.cpu.state.ymm, [[0; 4]; 16]);
    assert_eq!(m.cpu.state.x87, X87State::default());
    assert_eq!(m.cpu.state.mxcsr, 0x1f81);
    // RFBM = 4 only: XMM low halves stay, upper halves load.
    let mut m = TestMachine::new();
    m.cpu.state.ymm = [[0x1111; 4]; 16];
    let img = busy_image(7);
    m.load(DATA_BASE, &img);
    let code = TestMachine::assemble(|a| {
        a.mov(eax, 4)?;
        a.xor(edx, edx)?;
        a.xrstor64(ptr(DATA_BASE))
    });
    assert_eq!(run(&mut m, &code, 3), ExitReason::Budget);
    assert_eq!(m.cpu.state.ymm[5][0], 0x1111);
    assert_eq!(m.cpu.state.ymm[5][2], get_u64(&img, AVX_OFFSET + 80));
    assert_eq!(m.cpu.state.mxcsr, 0x7fa1);
    assert_eq!(m.cpu.state.x87.fcw, 0x037f);
}

#[test]
fn round_trip_through_memory() {
    let img = busy_image(7);
    let out = interp_case(&img, |a| a.nop(), false);
    // Bytes 416..511 and the header are not written, except XSTATE_BV bits 2:0.
    let mut expect = [0xaau8; MAX_SIZE];
    expect[..416].copy_from_slice(&img[..416]);
    expect[AVX_OFFSET..].copy_from_slice(&img[AVX_OFFSET..MAX_SIZE]);
    expect[HEADER] = 0xaa | 7;
    assert_eq!(out, expect);
    // XSAVEC then XRSTOR (compacted) gives the same state as the standard round trip.
    let out_c = interp_case(&img, |a| a.nop(), true);
    assert_eq!(get_u64(&out_c, HEADER + 8), COMPACTED | 7);
    let mut back = [0u8; 1024];
    back[..MAX_SIZE].copy_from_slice(&out_c);
    back[HEADER + 16..AVX_OFFSET].fill(0);
    back[416..512].fill(0);
    let again = interp_case(&back, |a| a.nop(), false);
    assert_eq!(again, out);
}

#[test]
fn vldmxcsr_vstmxcsr() {
    let code = TestMachine::assemble(|a| {
        a.vldmxcsr(dword_ptr(DATA_BASE))?;
        a.vstmxcsr(dword_ptr(DATA_BASE + 8))?;
        a.vldmxcsr(dword_ptr(DATA_BASE + 16))
    });
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x7fc0u32.to_le_bytes());
    m.load(DATA_BASE + 8, &u32::MAX.to_le_bytes());
    m.load(DATA_BASE + 16, &0x1_1f80u32.to_le_bytes());
    assert_eq!(run(&mut m, &code, 3), ExitReason::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.mxcsr, 0x7fc0);
    assert_eq!(m.read_u64(DATA_BASE + 8) as u32, 0x7fc0);
    let mut m = TestMachine::new();
    m.cpu.state.xcr0 = 3;
    assert!(is_ud(&run(&mut m, &code, 1)));
}

/// Native comparisons: the host runs XRSTOR64 (RFBM 7) from the same image, the same middle
/// instruction and XSAVE64/XSAVEC64, into an area pre-filled with 0xAA.
#[cfg(target_arch = "x86_64")]
mod native {
    use super::*;

    #[repr(C, align(64))]
    struct Area([u8; 1024]);

    macro_rules! host_case {
        ($img:expr, $op:literal, $save:literal) => {{
            let img = Area(*$img);
            let mut out = Area([0xaa; 1024]);
            let mx = 0x1f80u32;
            // SAFETY: XRSTOR64/XSAVE(C)64 with RFBM 7 on 64-byte aligned 1 KiB buffers (the host
            // has XSAVE/XSAVEC/AVX, checked by the caller; the image is valid: the interpreter
            // accepted it). The clobber list covers the vector and x87 registers; FNINIT,
            // VZEROUPPER and LDMXCSR leave the x87/SSE state as the ABI expects.
            unsafe {
                core::arch::asm!(
                    "xrstor64 [{i}]",
                    $op,
                    concat!($save, " [{o}]"),
                    "fninit",
                    "vzeroupper",
                    "ldmxcsr [{m}]",
                    i = in(reg) img.0.as_ptr(),
                    o = in(reg) out.0.as_mut_ptr(),
                    m = in(reg) &mx,
                    inout("eax") 7u32 => _,
                    inout("edx") 0u32 => _,
                    clobber_abi("C"),
                );
            }
            let mut r = [0u8; MAX_SIZE];
            r.copy_from_slice(&out.0[..MAX_SIZE]);
            r
        }};
    }

    fn have() -> bool {
        std::is_x86_feature_detected!("xsave")
            && std::is_x86_feature_detected!("xsavec")
            && std::is_x86_feature_detected!("avx")
    }

    fn same(name: &str, host: &[u8; MAX_SIZE], ours: &[u8; MAX_SIZE], skip: &[usize]) {
        // The model is an Intel CPU: MXCSR_MASK (bytes 28..32) is 0xffff. AMD's has bit 17
        // too (the misaligned-SSE exception mask), a documented vendor difference.
        let vendor: &[usize] = if crate::ops::native::host_is_intel() {
            &[]
        } else {
            &[28, 29, 30, 31]
        };
        for i in 0..MAX_SIZE {
            if !skip.contains(&i) && !vendor.contains(&i) {
                assert_eq!(host[i], ours[i], "{name}: byte {i}");
            }
        }
    }

    #[test]
    fn xsave_matches_host() {
        if !have() {
            return;
        }
        let init = init_image(0x1f80);
        let busy = busy_image(7);
        same(
            "init",
            &host_case!(&init, "nop", "xsave64"),
            &interp_case(&init, |a| a.nop(), false),
            &[],
        );
        // FLD1: only FIP (bytes 8..15, the instruction's address) differs.
        let fip: Vec<usize> = (8..16).collect();
        same(
            "fld1",
            &host_case!(&init, "fld1", "xsave64"),
            &interp_case(&init, |a| a.fld1(), false),
            &fip,
        );
        same(
            "busy",
            &host_case!(&busy, "nop", "xsave64"),
            &interp_case(&busy, |a| a.nop(), false),
            &[],
        );
        // YMM upper halves non-zero, then VZEROUPPER: AVX back in its initial state.
        same(
            "vzeroupper",
            &host_case!(&busy, "vzeroupper", "xsave64"),
            &interp_case(&busy, |a| a.vzeroupper(), false),
            &[],
        );
        // MXCSR loaded from memory with XSTATE_BV = 0.
        let mx = init_image(0x1f81);
        same(
            "mxcsr",
            &host_case!(&mx, "nop", "xsave64"),
            &interp_case(&mx, |a| a.nop(), false),
            &[],
        );
    }

    #[test]
    fn xsavec_matches_host() {
        if !have() {
            return;
        }
        let init = init_image(0x1f80);
        let busy = busy_image(7);
        let mx = init_image(0x1f81);
        for (name, img) in [("init", &init), ("busy", &busy), ("mxcsr", &mx)] {
            same(
                name,
                &host_case!(img, "nop", "xsavec64"),
                &interp_case(img, |a| a.nop(), true),
                &[],
            );
        }
        let fip: Vec<usize> = (8..16).collect();
        same(
            "fld1",
            &host_case!(&init, "fld1", "xsavec64"),
            &interp_case(&init, |a| a.fld1(), true),
            &fip,
        );
        // A compacted image restored, then saved in standard form.
        let mut c = [0u8; 1024];
        c[..MAX_SIZE].copy_from_slice(&interp_case(&busy, |a| a.nop(), true));
        c[HEADER + 16..AVX_OFFSET].fill(0);
        c[416..512].fill(0);
        same(
            "compacted xrstor",
            &host_case!(&c, "nop", "xsave64"),
            &interp_case(&c, |a| a.nop(), false),
            &[],
        );
    }

    /// The documented difference: an SSE instruction leaves the XMM registers zero. An Intel
    /// host tracks XINUSE per instruction and reports SSE in use; the model derives it from
    /// values.
    #[test]
    fn xinuse_difference_is_only_xstate_bv() {
        if !have() {
            return;
        }
        let init = init_image(0x1f80);
        let host = host_case!(&init, "pxor xmm0, xmm0", "xsave64");
        let ours = interp_case(&init, |a| a.pxor(xmm0, xmm0), false);
        same("pxor", &host, &ours, &[HEADER]);
        // Intel hosts track XINUSE per instruction (SSE in use after the PXOR); an AMD EPYC
        // host reported it not in use, as the model does.
        if crate::ops::native::host_is_intel() {
            assert_eq!(host[HEADER] & 7, SSE as u8);
        }
        assert_eq!(ours[HEADER] & 7, 0);
    }
}

/// XSAVEOPT after VZEROALL (SSE and AVX in their initial configuration) writes MXCSR and the
/// XSTATE_BV bits but not the XMM/YMM bytes; XSAVE writes them (host, SIMD difftest seed 11).
#[test]
fn xsaveopt_skips_components_not_in_use() {
    for opt in [false, true] {
        let mut m = TestMachine::new();
        m.load(DATA_BASE, &busy_image(7));
        m.load(OUT, &[0xaa; 1024]);
        let code = TestMachine::assemble(|a| {
            a.mov(eax, 7)?;
            a.xor(edx, edx)?;
            a.xrstor64(ptr(DATA_BASE))?;
            a.vzeroall()?;
            if opt {
                a.xsaveopt64(ptr(OUT))
            } else {
                a.xsave64(ptr(OUT))
            }
        });
        assert_eq!(run(&mut m, &code, 5), ExitReason::Budget);
        let area = read_area(&m, OUT);
        let fill = if opt { 0xaa } else { 0 };
        assert!(area[160..416].iter().all(|&b| b == fill), "opt {opt}");
        assert!(area[AVX_OFFSET..].iter().all(|&b| b == fill), "opt {opt}");
        assert_eq!(area[24..28], 0x7fa1u32.to_le_bytes());
        assert_eq!(area[0..2], 0x037fu16.to_le_bytes());
        // XSTATE_BV: the RFBM bits are x87 only; the other bits of the 0xAA fill stay.
        assert_eq!(area[HEADER..HEADER + 2], [0xa9, 0xaa]);
    }
}

/// #PF order (measured natively): XSAVE checks the extent's last byte, then the first byte it
/// writes; XRSTOR reads XCOMP_BV (byte 520) first.
#[test]
fn xsave_xrstor_page_fault_addresses() {
    // TestMachine maps 1 GiB; use a linear address past it for the unmapped part.
    let end = crate::testkit::TEST_RAM;
    let cases: [(u64, u32, bool, u64); 4] = [
        (end, 7, false, end + 831),      // entirely unmapped: the last byte
        (end - 64, 6, false, end + 767), // last byte unmapped
        (end, 0, true, end + 520),       // XRSTOR: XCOMP_BV first
        (end - 576, 7, true, end + 255), // XRSTOR: then the AVX extent's last byte
    ];
    for (at, rfbm, restore, want) in cases {
        let mut m = TestMachine::new();
        let code = TestMachine::assemble(|a| {
            a.mov(eax, rfbm)?;
            a.xor(edx, edx)?;
            a.mov(rbx, at)?;
            if restore {
                a.xrstor64(ptr(rbx))
            } else {
                a.xsave64(ptr(rbx))
            }
        });
        match run(&mut m, &code, 4) {
            ExitReason::Exception(Fault::PageFault { addr, .. }) => {
                assert_eq!(addr, want, "at {at:#x} rfbm {rfbm} restore {restore}")
            }
            r => panic!("{r:?}"),
        }
    }
}
