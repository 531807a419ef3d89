//! Tests of RDMSR/WRMSR/RDPMC.

use super::num::*;
use super::*;
use crate::cpu::ExitReason;
use crate::ops::systest::{long_machine, run, CODE};
use crate::state::flags::IOPL;
use crate::testkit::TestMachine;
use crate::testkit_sys::SysMachine;
use iced_x86::code_asm::*;

/// Run `wrmsr(index, v); rdmsr(index); hlt` at CPL 0 in long mode.
fn write_then_read(index: u32, v: u64) -> (ExitReason, SysMachine) {
    let mut m = long_machine(|a| {
        a.mov(ecx, index)?;
        a.mov(eax, v as u32)?;
        a.mov(edx, (v >> 32) as u32)?;
        a.wrmsr()?;
        a.xor(eax, eax)?;
        a.xor(edx, edx)?;
        a.rdmsr()?;
        a.hlt()
    });
    let e = run(&mut m, 100);
    (e.reason, m)
}

fn read(index: u32) -> Result<u64, ExitReason> {
    let mut m = long_machine(|a| {
        a.mov(ecx, index)?;
        a.rdmsr()?;
        a.hlt()
    });
    let e = run(&mut m, 100);
    if e.reason != ExitReason::Halt {
        return Err(e.reason);
    }
    Ok((m.cpu.state.gpr[reg::RDX] << 32) | m.cpu.state.gpr[reg::RAX])
}

fn gp() -> ExitReason {
    ExitReason::Exception(Fault::GP0)
}

#[test]
fn every_writable_msr_round_trips() {
    let mut cases = vec![
        (APIC_BASE, 0xfed0_0900u64),
        (APIC_BASE, 0xfee0_0100), // disabled; BSP bit kept
        (SYSENTER_CS, 0x10),
        (SYSENTER_ESP, 0xffff_8000_0000_1000),
        (SYSENTER_EIP, 0x0000_7fff_ffff_f000),
        (MCG_STATUS, 0),
        (MISC_ENABLE, 0x1809),
        (PAT, 0x0007_0406_0501_0007),
        (MTRR_DEF_TYPE, 0xc06),
        (TSC_DEADLINE, 0x1234_5678_9abc_def0),
        (
            EFER,
            ctl::EFER_SCE | ctl::EFER_LME | ctl::EFER_LMA | ctl::EFER_NXE,
        ),
        (STAR, 0x0023_0010_dead_beef),
        (LSTAR, 0xffff_ffff_8100_0000),
        (CSTAR, 0x0000_1234_5678_9000),
        (SFMASK, 0x4_7700),
        (FS_BASE, 0xffff_8880_0000_0000),
        (GS_BASE, 0x7fff_0000_1000),
        (KERNEL_GS_BASE, 0xffff_8000_0000_0040),
        (TSC_AUX, 0xdead_beef),
        (BIOS_SIGN_ID, 0),
    ];
    for i in 0..8u32 {
        cases.push((MTRR_PHYSBASE0 + 2 * i, 0x80_0000_0006 + ((i as u64) << 12)));
        cases.push((MTRR_PHYSBASE0 + 2 * i + 1, 0xff_f000_0800));
    }
    for (n, idx) in [
        0x250u32, 0x258, 0x259, 0x268, 0x269, 0x26a, 0x26b, 0x26c, 0x26d, 0x26e, 0x26f,
    ]
    .into_iter()
    .enumerate()
    {
        cases.push((idx, 0x0605_0401_0006_0504u64.rotate_left(8 * n as u32)));
    }
    for (idx, v) in cases {
        let (r, m) = write_then_read(idx, v);
        assert_eq!(r, ExitReason::Halt, "msr {idx:#x}");
        let got = (m.cpu.state.gpr[reg::RDX] << 32) | m.cpu.state.gpr[reg::RAX];
        let want = match idx {
            APIC_BASE => v | 0x100,
            // Writes are ignored; reads give the microcode revision in bits 63:32.
            BIOS_SIGN_ID => super::MICROCODE_REVISION << 32,
            _ => v,
        };
        assert_eq!(got, want, "msr {idx:#x}");
        assert_eq!(m.cpu.state.gpr[reg::RDX] >> 32, 0);
    }
}

#[test]
fn msrs_land_in_their_state_fields() {
    let (_, m) = write_then_read(FS_BASE, 0x1234_5000);
    assert_eq!(m.cpu.state.seg[sreg::FS].base, 0x1234_5000);
    let (_, m) = write_then_read(GS_BASE, 0x5000);
    assert_eq!(m.cpu.state.seg[sreg::GS].base, 0x5000);
    let (_, m) = write_then_read(TSC_DEADLINE, 77);
    assert_eq!(m.cpu.state.msr.tsc_deadline, 77);
    let (_, m) = write_then_read(MTRR_PHYSBASE0 + 3, 0xf_c000_0800);
    assert_eq!(m.cpu.state.msr.mtrr_var[3], 0xf_c000_0800);
}

#[test]
fn read_only_and_reset_values() {
    assert_eq!(read(MTRRCAP), Ok(0x508));
    assert_eq!(read(FEATURE_CONTROL), Ok(1));
    assert_eq!(read(PLATFORM_INFO).map(|v| (v >> 8) & 0xff), Ok(10));
    assert_eq!(read(APIC_BASE), Ok(0xfee0_0900));
    assert_eq!(read(MISC_ENABLE), Ok(0x1801));
    assert_eq!(read(MCG_CAP), Ok(0));
    assert_eq!(read(BIOS_SIGN_ID), Ok(super::MICROCODE_REVISION << 32));
    assert_eq!(read(PAT), Ok(0x0007_0406_0007_0406));
    assert_eq!(read(MTRR_DEF_TYPE), Ok(0));
    assert_eq!(read(ARCH_CAPABILITIES), Ok(ARCH_CAPABILITIES_VALUE));
    // RDCL_NO and MDS_NO (Linux: no page-table isolation, no buffer clearing), no IBRS_ALL.
    assert_eq!(ARCH_CAPABILITIES_VALUE & 0b10_0011, 0b10_0001);
    for idx in [
        MTRRCAP,
        FEATURE_CONTROL,
        PLATFORM_INFO,
        MCG_CAP,
        ARCH_CAPABILITIES,
    ] {
        let v = read(idx).unwrap();
        assert_eq!(
            write_then_read(idx, v).0,
            gp(),
            "write to read-only {idx:#x}"
        );
    }
}

#[test]
fn unknown_and_unadvertised_msrs_fault() {
    // TSC_ADJUST, SPEC_CTRL, PRED_CMD, x2APIC TPR/EOI, a perf counter,
    // BIOS_UPDT_TRIG and nonsense.
    for idx in [
        0x3bu32,
        0x48,
        0x49,
        0x808,
        0x80b,
        0xc1,
        0x79,
        0x1234_5678,
        0xc000_0104,
    ] {
        assert_eq!(read(idx), Err(gp()), "rdmsr {idx:#x}");
        assert_eq!(write_then_read(idx, 0).0, gp(), "wrmsr {idx:#x}");
    }
}

#[test]
fn reserved_bits_and_bad_values_fault() {
    let cases: &[(u32, u64)] = &[
        (EFER, 1 << 1),
        (EFER, 1 << 12),
        (APIC_BASE, 0xfee0_0900 | (1 << 10)), // x2APIC not advertised
        (APIC_BASE, 0xfee0_0901),
        (APIC_BASE, 1 << 40),
        (PAT, 0x0007_0406_0007_0402),
        (PAT, 0x0007_0406_0007_0408),
        (MTRR_DEF_TYPE, 0x2),
        (MTRR_DEF_TYPE, 0x1006),
        (MTRR_PHYSBASE0, 0x1000 | 3),
        (MTRR_PHYSBASE0, 0x100),
        (MTRR_PHYSBASE0 + 1, 0x801),
        (MTRR_PHYSBASE0 + 1, 1 << 40),
        (0x250, 0x0606_0606_0606_0607),
        (MISC_ENABLE, 1 << 22),
        (MISC_ENABLE, 1 << 34),
        (MCG_STATUS, 1),
        (TSC_AUX, 1 << 32),
        (SFMASK, 1 << 32),
        (LSTAR, 0x0000_8000_0000_0000),
        (CSTAR, 0x8000_0000_0000_0000),
        (FS_BASE, 0x0001_0000_0000_0000),
        (GS_BASE, 0xfff0_0000_0000_0000),
        (KERNEL_GS_BASE, 0x0000_8000_0000_0000),
        (SYSENTER_EIP, 0x0000_8000_0000_0000),
        (SYSENTER_ESP, 0x0080_0000_0000_0000),
    ];
    for &(idx, v) in cases {
        let (r, m) = write_then_read(idx, v);
        assert_eq!(r, gp(), "msr {idx:#x} value {v:#x}");
        // Nothing changed: the fault is at WRMSR, with the MSR still at its old value.
        assert_eq!(m.cpu.state.rip, CODE + 15, "msr {idx:#x}");
        assert_eq!(m.cpu.state, {
            let mut fresh = long_machine(|a| a.hlt());
            fresh.cpu.state.rip = m.cpu.state.rip;
            fresh.cpu.state.gpr = m.cpu.state.gpr;
            fresh.cpu.state
        });
    }
}

#[test]
fn efer_rules() {
    // Pure function: LMA is read-only, LME cannot change while paging is on.
    let pg = ctl::CR0_PG | ctl::CR0_PE;
    let lm = ctl::EFER_LME | ctl::EFER_LMA;
    assert_eq!(efer_write(lm, ctl::EFER_LME, pg), Ok(lm));
    assert_eq!(
        efer_write(lm, lm | ctl::EFER_NXE, pg),
        Ok(lm | ctl::EFER_NXE)
    );
    assert_eq!(efer_write(lm, 0, pg), Err(Fault::GP0));
    assert_eq!(efer_write(0, ctl::EFER_LME, pg), Err(Fault::GP0));
    assert_eq!(
        efer_write(0, ctl::EFER_LME | ctl::EFER_LMA, 1),
        Ok(ctl::EFER_LME)
    );
    assert_eq!(efer_write(0, ctl::EFER_SCE, pg), Ok(ctl::EFER_SCE));
    // In the machine: writing EFER without LMA in long mode keeps LMA.
    let (r, m) = write_then_read(EFER, ctl::EFER_LME | ctl::EFER_SCE);
    assert_eq!(r, ExitReason::Halt);
    assert_ne!(m.cpu.state.efer & ctl::EFER_LMA, 0);
    assert_eq!(m.cpu.state.efer & ctl::EFER_NXE, 0);
}

#[test]
fn rdtsc_after_wrmsr_tsc() {
    let mut m = long_machine(|a| {
        a.mov(ecx, TSC)?;
        a.mov(eax, 0x1000u32)?;
        a.mov(edx, 5u32)?;
        a.wrmsr()?; // the TSC reads 5:0x1000 here
        a.nop()?;
        a.rdtsc()?; // two instructions later
        a.mov(r8, rax)?;
        a.mov(r9, rdx)?;
        a.rdmsr()?;
        a.hlt()
    });
    m.cpu.retired = 1_000_000;
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    let st = &m.cpu.state;
    assert_eq!(
        (st.gpr[reg::R9] << 32) | st.gpr[reg::R8],
        (5 << 32) + 0x1002
    );
    assert_eq!(
        (st.gpr[reg::RDX] << 32) | st.gpr[reg::RAX],
        (5 << 32) + 0x1005
    );
}

#[test]
fn cpl3_and_rdpmc_fault() {
    for code in [[0x0f, 0x32], [0x0f, 0x30], [0x0f, 0x33]] {
        let mut m = TestMachine::new();
        m.cpu.state.rflags |= IOPL; // IOPL does not matter
        m.cpu.state.gpr[reg::RCX] = TSC as u64;
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, gp(), "{code:x?}");
        assert_eq!(e.retired, 0);
    }
    // RDPMC at CPL 0 too.
    let mut m = long_machine(|a| {
        a.xor(ecx, ecx)?;
        a.rdpmc()
    });
    assert_eq!(run(&mut m, 10).reason, gp());
}

#[test]
fn rdmsr_works_in_real_mode() {
    let mut m = SysMachine::new(2);
    // mov ecx, 0x1b ; rdmsr ; hlt
    m.load(
        0x7c00,
        &[0x66, 0xb9, 0x1b, 0x00, 0x00, 0x00, 0x0f, 0x32, 0xf4],
    );
    m.start_real(0x0703, 0xbd0); // CS.RPL would be 3: real mode is still CPL 0
    let e = m.run(10);
    assert_eq!(e.reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RAX], 0xfee0_0900);
}

#[test]
fn wrmsr_ends_the_block_and_apic_base_yields() {
    let mut m = long_machine(|a| {
        a.mov(ecx, APIC_BASE)?;
        a.mov(eax, 0xfee0_0800u32)?;
        a.xor(edx, edx)?;
        a.wrmsr()?;
        a.hlt()
    });
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Yield);
    assert_eq!(e.retired, 4);
    let ins = iced_x86::Decoder::with_ip(64, &[0x0f, 0x30], 0, 0).decode();
    assert!(crate::ops::ends_block(&ins));
}
