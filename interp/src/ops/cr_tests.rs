//! Tests of MOV CR/DR, CLTS, LMSW, SMSW, WBINVD/INVD and INVLPG.

use super::*;
use crate::cpu::ExitReason;
use crate::ops::msr::num::EFER;
use crate::ops::systest::{identity_map, long_machine, prot_machine, run, PML4};
use crate::state::reg;
use crate::testkit::TestMachine;
use crate::testkit_sys::SysMachine;
use iced_x86::code_asm::*;

fn gp() -> ExitReason {
    ExitReason::Exception(Fault::GP0)
}

#[test]
fn entering_and_leaving_long_mode_through_cr0_pg() {
    let mut m = prot_machine(|a| {
        a.mov(eax, cr4)?;
        a.or(eax, 0x20)?; // PAE
        a.mov(cr4, eax)?;
        a.mov(eax, PML4 as u32)?;
        a.mov(cr3, eax)?;
        a.mov(ecx, EFER)?;
        a.rdmsr()?;
        a.or(eax, 0x100)?; // LME
        a.wrmsr()?;
        a.mov(eax, cr0)?;
        a.or(eax, 0x8000_0001u32 as i32)?;
        a.mov(cr0, eax)?; // PG: long mode (compatibility mode, CS.L = 0)
        a.rdmsr()?;
        a.mov(esi, eax)?;
        a.mov(eax, cr0)?;
        a.and(eax, 0x7fff_ffff)?;
        a.mov(cr0, eax)?; // leave long mode again
        a.rdmsr()?;
        a.mov(edi, eax)?;
        a.hlt()
    });
    identity_map(&mut m);
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RSI] & 0x500, 0x500, "LME and LMA after PG=1");
    assert_eq!(st.gpr[reg::RDI] & 0x500, 0x100, "LMA clear after PG=0");
    assert_eq!(st.cr0 & ctl::CR0_PG, 0);
    assert_eq!(st.code_bitness(), 32);
}

#[test]
fn long_mode_entry_checks() {
    // PG with LME but without PAE: #GP, nothing changes.
    let mut m = prot_machine(|a| {
        a.mov(ecx, EFER)?;
        a.mov(eax, 0x100u32)?;
        a.xor(edx, edx)?;
        a.wrmsr()?;
        a.mov(eax, 0x8000_0011u32)?;
        a.mov(cr0, eax)
    });
    assert_eq!(run(&mut m, 100).reason, gp());
    assert_eq!(m.cpu.state.efer, ctl::EFER_LME);
    assert_eq!(m.cpu.state.cr0 & ctl::CR0_PG, 0);
    // With CS.L set (while long mode is not yet active): #GP.
    let mut st = m.cpu.state.clone();
    st.cr4 |= ctl::CR4_PAE;
    st.seg[sreg::CS].attr |= 1 << 13;
    assert_eq!(cr0_write(&st, 0x8000_0011), Err(Fault::GP0));
    st.seg[sreg::CS].attr &= !(1 << 13);
    assert_eq!(
        cr0_write(&st, 0x8000_0011),
        Ok((0x8000_0011, ctl::EFER_LME | ctl::EFER_LMA))
    );
}

#[test]
fn clearing_pg_in_64bit_mode_faults() {
    let mut m = long_machine(|a| {
        a.mov(rax, cr0)?;
        a.btr(rax, 31)?;
        a.mov(cr0, rax)
    });
    assert_eq!(run(&mut m, 10).reason, gp());
    assert_ne!(m.cpu.state.efer & ctl::EFER_LMA, 0);
}

#[test]
fn cr0_reserved_and_inconsistent_values() {
    for v in [0x8000_0000u32, 0x2000_0001] {
        let mut m = prot_machine(|a| {
            a.mov(eax, v)?;
            a.mov(cr0, eax)
        });
        assert_eq!(run(&mut m, 10).reason, gp(), "cr0 = {v:#x}");
    }
    let mut m = long_machine(|a| {
        a.mov(rax, cr0)?;
        a.bts(rax, 32)?;
        a.mov(cr0, rax)
    });
    assert_eq!(run(&mut m, 10).reason, gp());
    // Undefined low bits are dropped, ET reads as 1; CD+NW is fine.
    let mut m = prot_machine(|a| {
        a.mov(eax, 0x6000_0041u32)?;
        a.mov(cr0, eax)?;
        a.mov(ebx, cr0)?;
        a.hlt()
    });
    assert_eq!(run(&mut m, 10).reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RBX], 0x6000_0011);
}

#[test]
fn cr4_supported_set_follows_cpuid() {
    let sup = cr4_supported();
    for b in [
        ctl::CR4_PAE,
        ctl::CR4_PGE,
        ctl::CR4_PSE,
        ctl::CR4_TSD,
        ctl::CR4_PCE,
    ] {
        assert_ne!(sup & b, 0, "{b:#x}");
    }
    for b in [
        ctl::CR4_VME,
        ctl::CR4_PVI,
        ctl::CR4_UMIP,
        ctl::CR4_LA57,
        ctl::CR4_VMXE,
        ctl::CR4_SMXE,
        ctl::CR4_PCIDE,
        ctl::CR4_PKE,
        ctl::CR4_CET,
        1 << 32,
    ] {
        assert_eq!(sup & b, 0, "{b:#x}");
        let mut m = long_machine(|a| {
            a.mov(rax, cr4)?;
            a.mov(rbx, b)?;
            a.or(rax, rbx)?;
            a.mov(cr4, rax)
        });
        m.cpu.state.cr4 &= sup;
        assert_eq!(run(&mut m, 10).reason, gp(), "cr4 bit {b:#x}");
        assert_eq!(m.cpu.state.cr4, m.cpu.state.gpr[reg::RAX] & !b);
    }
    let mut m = long_machine(|a| {
        a.mov(rax, cr4)?;
        a.or(rax, 0x184)?; // TSD, PGE, PCE
        a.mov(cr4, rax)?;
        a.mov(rbx, cr4)?;
        a.btr(rax, 5)?; // PAE off in long mode: #GP
        a.mov(cr4, rax)
    });
    // The flat long-mode state sets CR4 bits (FSGSBASE, OSXSAVE) that CPUID may not
    // advertise yet.
    m.cpu.state.cr4 &= sup;
    assert_eq!(run(&mut m, 10).reason, gp());
    assert_eq!(m.cpu.state.gpr[reg::RBX] & 0x1a4, 0x1a4);
    assert_eq!(m.cpu.state.cr4 & 0x1a4, 0x1a4);
}

#[test]
fn cr2_cr3_cr8() {
    let mut m = long_machine(|a| {
        a.mov(rax, 0xffff_8000_dead_b000u64)?;
        a.mov(cr2, rax)?;
        a.mov(rbx, cr2)?;
        a.mov(rax, PML4 | 0x18)?;
        a.mov(cr3, rax)?;
        a.mov(rcx, cr3)?;
        a.mov(eax, 0xfu32)?;
        a.mov(cr8, rax)?;
        a.mov(rdx, cr8)?;
        a.mov(rax, 1u64 << 40 | PML4)?;
        a.mov(cr3, rax)
    });
    assert_eq!(run(&mut m, 100).reason, gp());
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::RBX], 0xffff_8000_dead_b000);
    assert_eq!(st.gpr[reg::RCX], PML4 | 0x18);
    assert_eq!(st.gpr[reg::RDX], 0xf);
    assert_eq!(st.cr8, 0xf);
    let mut m = long_machine(|a| {
        a.mov(eax, 0x10u32)?;
        a.mov(cr8, rax)
    });
    assert_eq!(run(&mut m, 10).reason, gp());
}

#[test]
fn debug_registers_alias_and_fixed_bits() {
    let mut m = long_machine(|a| {
        a.mov(rax, 0xffff_ffff_ffff_fff1u64)?;
        a.mov(dr0, rax)?;
        a.mov(r8, dr0)?;
        a.mov(eax, 0x0000_6001u32)?;
        a.mov(dr4, rax)?; // DR6 while CR4.DE = 0
        a.mov(rbx, dr6)?;
        a.mov(eax, 0x0003_1f01u32)?;
        a.mov(dr7, rax)?;
        a.mov(rcx, dr5)?; // DR7
        a.mov(rax, 1u64 << 32)?;
        a.mov(dr7, rax)
    });
    assert_eq!(run(&mut m, 100).reason, gp());
    let st = &m.cpu.state;
    assert_eq!(st.gpr[reg::R8], 0xffff_ffff_ffff_fff1);
    assert_eq!(st.gpr[reg::RBX], 0xffff_6ff1);
    assert_eq!(st.gpr[reg::RCX], 0x0003_0701);
    // With CR4.DE, DR4/DR5 are #UD.
    let mut m = long_machine(|a| a.mov(rax, dr4));
    m.cpu.state.cr4 |= ctl::CR4_DE;
    assert!(matches!(
        run(&mut m, 10).reason,
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
}

#[test]
fn privileged_at_cpl3() {
    let progs: Vec<Vec<u8>> = vec![
        TestMachine::assemble(|a| a.mov(cr0, rax)),
        TestMachine::assemble(|a| a.mov(rax, cr3)),
        TestMachine::assemble(|a| a.mov(cr8, rax)),
        TestMachine::assemble(|a| a.mov(dr7, rax)),
        TestMachine::assemble(|a| a.mov(rax, dr6)),
        TestMachine::assemble(|a| a.clts()),
        TestMachine::assemble(|a| a.lmsw(ax)),
        TestMachine::assemble(|a| a.wbinvd()),
        TestMachine::assemble(|a| a.invd()),
        TestMachine::assemble(|a| a.invlpg(byte_ptr(rax))),
    ];
    for p in progs {
        let mut m = TestMachine::new();
        let e = m.run_code(&p, 1);
        assert_eq!(e.reason, gp(), "{p:x?}");
        assert_eq!(e.retired, 0);
    }
    // SMSW is not privileged (no UMIP).
    let mut m = TestMachine::new();
    let e = m.run_code(&TestMachine::assemble(|a| a.smsw(eax)), 1);
    assert_eq!(e.retired, 1);
    assert_eq!(m.gpr(reg::RAX), m.cpu.state.cr0 & 0xffff_ffff);
}

#[test]
fn non_existent_control_registers_are_ud() {
    // mov cr1, rax ; mov rax, cr5 ; mov cr9, rax (REX.R)
    for code in [
        &[0x0f, 0x22, 0xc8][..],
        &[0x0f, 0x20, 0xe8],
        &[0x44, 0x0f, 0x22, 0xc8],
    ] {
        let mut m = long_machine(|a| a.hlt());
        m.load(crate::ops::systest::CODE, code);
        assert!(
            matches!(
                run(&mut m, 1).reason,
                ExitReason::Exception(Fault::InvalidOpcode { .. })
            ),
            "{code:x?}"
        );
    }
}

#[test]
fn clts_lmsw_smsw() {
    let mut m = long_machine(|a| {
        a.clts()?;
        a.mov(eax, 0xeu32)?; // MP, EM, TS; PE clear in the source
        a.lmsw(ax)?;
        a.mov(r8, cr0)?;
        a.mov(rbx, -1i64)?;
        a.smsw(bx)?;
        a.mov(rcx, -1i64)?;
        a.smsw(ecx)?;
        a.smsw(rdx)?;
        a.mov(qword_ptr(0x9000u64), -1i32)?;
        a.smsw(word_ptr(0x9000u64))?;
        a.hlt()
    });
    m.cpu.state.cr0 |= ctl::CR0_TS;
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    let st = &m.cpu.state;
    let c0 = st.cr0;
    assert_eq!(c0 & 0xf, 0xf, "PE kept, MP/EM/TS loaded");
    assert_eq!(st.gpr[reg::R8], c0);
    assert_eq!(st.gpr[reg::RBX], 0xffff_ffff_ffff_0000 | (c0 & 0xffff));
    assert_eq!(st.gpr[reg::RCX], c0 & 0xffff_ffff);
    assert_eq!(st.gpr[reg::RDX], c0);
    assert_eq!(
        m.ram.read_u64(0x9000).unwrap(),
        0xffff_ffff_ffff_0000 | (c0 & 0xffff)
    );
    assert_eq!(lmsw_value(0x11, 0), 0x11);
    assert_eq!(lmsw_value(0x10, 0x1), 0x11);
}

#[test]
fn lmsw_enters_protected_mode_from_real_mode() {
    let mut m = SysMachine::new(2);
    // mov ax, 1 ; lmsw ax ; hlt
    m.load(0x7c00, &[0xb8, 0x01, 0x00, 0x0f, 0x01, 0xf0, 0xf4]);
    m.start_real(0, 0x7c00);
    assert_eq!(m.run(10).reason, ExitReason::Halt);
    assert_ne!(m.cpu.state.cr0 & ctl::CR0_PE, 0);
}

#[test]
fn invlpg_drops_a_stale_translation() {
    // Read linear 0x200000 (cached), remap its 2 MiB page to 0x400000 behind the TLB's back,
    // read again (stale is allowed), INVLPG, read again (must see the new page).
    let mut m = long_machine(|a| {
        a.mov(rax, qword_ptr(0x20_0000u64))?;
        a.mov(qword_ptr(0x3008u64), r9)?; // PD[1] = 0x400000 | 0x87
        a.mov(rbx, qword_ptr(0x20_0000u64))?;
        a.invlpg(byte_ptr(0x20_0000u64))?;
        a.mov(rcx, qword_ptr(0x20_0000u64))?;
        a.wbinvd()?;
        a.invd()?;
        a.hlt()
    });
    m.ram.write_u64(0x20_0000, 0x1111).unwrap();
    m.ram.write_u64(0x40_0000, 0x2222).unwrap();
    m.cpu.state.gpr[reg::R9] = 0x40_0087;
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.gpr[reg::RAX], 0x1111);
    assert_eq!(m.cpu.state.gpr[reg::RCX], 0x2222);
}

#[test]
fn uncached_code_translation_is_walked_again_at_each_block_lookup() {
    // Supervisor code calling into a user page with SMAP on and SMEP off: that execute
    // translation is never cached (see mmu's `cacheable`), so a block lookup must walk again
    // each time, as lockstep-jit's dispatcher does, and not reuse the block found there by
    // the last walk. Remapping the page without INVLPG must then run the new code.
    let mut m = long_machine(|a| {
        a.mov(rbx, 0x20_0000u64)?;
        a.call(rbx)?;
        a.mov(r10, rax)?;
        a.mov(qword_ptr(0x3008u64), r9)?; // PD[1] = 0x400000 | 0x87, no INVLPG
        a.call(rbx)?;
        a.mov(r11, rax)?;
        a.hlt()
    });
    // The code's own 2 MiB page supervisor-only (its translation is cached), PD[1] a user page.
    m.ram.write_u64(0x3000, 0x83).unwrap();
    let ret_const = |v: u8| [0xb8, v, 0, 0, 0, 0xc3]; // mov eax, v ; ret
    m.ram.write_phys(0x20_0000, &ret_const(1)).unwrap();
    m.ram.write_phys(0x40_0000, &ret_const(2)).unwrap();
    m.cpu.state.gpr[reg::R9] = 0x40_0087;
    m.cpu.state.cr4 |= crate::state::ctl::CR4_SMAP;
    assert_eq!(run(&mut m, 100).reason, ExitReason::Halt);
    assert_eq!(m.cpu.state.gpr[reg::R10], 1);
    assert_eq!(
        m.cpu.state.gpr[reg::R11],
        2,
        "the block from the old mapping ran"
    );
}

#[test]
fn writes_end_blocks_reads_do_not() {
    let dec = |bytes: &[u8]| iced_x86::Decoder::with_ip(64, bytes, 0, 0).decode();
    assert!(ends_block(&dec(&[0x0f, 0x22, 0xc0]))); // mov cr0, rax
    assert!(ends_block(&dec(&[0x0f, 0x23, 0xf8]))); // mov dr7, rax
    assert!(ends_block(&dec(&[0x0f, 0x01, 0x38]))); // invlpg [rax]
    assert!(!ends_block(&dec(&[0x0f, 0x20, 0xc0]))); // mov rax, cr0
    assert!(!ends_block(&dec(&[0x48, 0x89, 0xc0]))); // mov rax, rax
}
