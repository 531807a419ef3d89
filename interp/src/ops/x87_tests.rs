//! TestMachine tests of the x87 families: results through memory, the deferred #MF on the
//! next waiting instruction, #NM/#UD/#GP rules, stack faults, the pointers.

use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::state::ctl;
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use crate::x87::{sw, F80};
use iced_x86::code_asm::*;

fn run(m: &mut TestMachine, code: &[u8], budget: u64) -> ExitReason {
    m.run_code(code, budget).reason
}

#[test]
fn add_and_store_double() {
    let code = TestMachine::assemble(|a| {
        a.fld1()?;
        a.fld1()?;
        a.faddp(st1, st0)?;
        a.fstp(qword_ptr(DATA_BASE))?;
        a.fldpi()?;
        a.fstp(tword_ptr(DATA_BASE + 16))
    });
    let mut m = TestMachine::new();
    assert_eq!(run(&mut m, &code, 6), ExitReason::Budget);
    assert_eq!(m.read_u64(DATA_BASE), 2.0f64.to_bits());
    assert_eq!(m.read_u64(DATA_BASE + 16), 0xc90f_daa2_2168_c235);
    let f = &m.cpu.state.x87;
    assert_eq!(f.fsw & sw::TOP, 0, "stack balanced");
    assert_eq!(f.ftw, 0);
}

#[test]
fn unmasked_zero_divide_faults_on_next_waiting_instruction() {
    let code = TestMachine::assemble(|a| {
        a.fldcw(word_ptr(DATA_BASE))?; // 0
        a.fld1()?; // 1
        a.fldz()?; // 2
        a.fdivp(st1, st0)?; // 3: ZE unmasked, recorded
        a.fnstsw(ax)?; // 4: non-waiting, no fault
        a.fld1() // 5: waiting -> #MF here
    });
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x037bu16.to_le_bytes());
    let e = m.run_code(&code, 10);
    assert_eq!(e.reason, ExitReason::Exception(Fault::X87Error));
    assert_eq!(e.retired, 5);
    let f = &m.cpu.state.x87;
    assert_eq!(f.fsw & (sw::ZE | sw::ES | sw::B), sw::ZE | sw::ES | sw::B);
    assert_eq!(
        m.cpu.state.gpr[0] as u16 & sw::ZE,
        sw::ZE,
        "FNSTSW AX saw ZE"
    );
    // The divide did not happen: ST(0) = 0, ST(1) = 1 (no pop).
    assert_eq!((f.fsw >> 11) & 7, 6);
    // FIP points at FDIVP (DE F9), FOP = 6F9.
    assert_eq!(f.fop, 0x6f9);
    let rip = m.cpu.state.rip;
    assert_eq!(rip, f.fip + 4, "faulting FLD1 follows FDIVP and FNSTSW AX");
    assert!(f.fip > CODE_BASE);
}

#[test]
fn fnclex_clears_pending_and_fwait_passes() {
    let code = TestMachine::assemble(|a| {
        a.fldcw(word_ptr(DATA_BASE))?;
        a.fld1()?;
        a.fldz()?;
        a.fdivp(st1, st0)?;
        a.fnclex()?;
        a.wait()?;
        a.fld1()
    });
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x037bu16.to_le_bytes());
    assert_eq!(run(&mut m, &code, 7), ExitReason::Budget);
    assert_eq!(m.cpu.state.x87.fsw & (sw::EXC | sw::ES), 0);
}

#[test]
fn fwait_raises_pending_mf() {
    let code = TestMachine::assemble(|a| {
        a.fldcw(word_ptr(DATA_BASE))?;
        a.fld1()?;
        a.fldz()?;
        a.fdivp(st1, st0)?;
        a.wait()
    });
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x037bu16.to_le_bytes());
    let e = m.run_code(&code, 10);
    assert_eq!(e.reason, ExitReason::Exception(Fault::X87Error));
    assert_eq!(e.retired, 4);
}

#[test]
fn device_not_available_rules() {
    let fld = TestMachine::assemble(|a| a.fld1());
    let wait = TestMachine::assemble(|a| a.wait());
    let emms = TestMachine::assemble(|a| a.emms());
    let mut m = TestMachine::new();
    m.cpu.state.cr0 |= ctl::CR0_TS;
    assert_eq!(
        run(&mut m, &fld, 1),
        ExitReason::Exception(Fault::DeviceNotAvailable)
    );
    // WAIT: #NM only with MP and TS (MP is set in the flat state).
    assert_eq!(
        run(&mut m, &wait, 1),
        ExitReason::Exception(Fault::DeviceNotAvailable)
    );
    m.cpu.state.cr0 &= !ctl::CR0_MP;
    assert_eq!(run(&mut m, &wait, 1), ExitReason::Budget);
    m.cpu.state.cr0 &= !ctl::CR0_TS;
    m.cpu.state.cr0 |= ctl::CR0_EM;
    assert_eq!(
        run(&mut m, &fld, 1),
        ExitReason::Exception(Fault::DeviceNotAvailable)
    );
    assert!(matches!(
        run(&mut m, &emms, 1),
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
}

#[test]
fn masked_stack_overflow_pushes_indefinite() {
    let code = TestMachine::assemble(|a| {
        for _ in 0..9 {
            a.fld1()?;
        }
        a.fstp(tword_ptr(DATA_BASE))
    });
    let mut m = TestMachine::new();
    assert_eq!(run(&mut m, &code, 10), ExitReason::Budget);
    let mut b = [0u8; 10];
    m.ram.read_phys(DATA_BASE, &mut b).unwrap();
    assert_eq!(F80::from_bytes(&b), F80::INDEFINITE);
    let f = m.cpu.state.x87.fsw;
    assert_eq!(f & (sw::IE | sw::SF), sw::IE | sw::SF);
    // The FSTP cleared C1 again; the overflow had set it (checked through FNSTSW below).
    let code = TestMachine::assemble(|a| {
        for _ in 0..9 {
            a.fld1()?;
        }
        a.fnstsw(ax)
    });
    let mut m = TestMachine::new();
    run(&mut m, &code, 10);
    assert_eq!(m.cpu.state.gpr[0] as u16 & sw::C1, sw::C1);
}

#[test]
fn stack_underflow_unmasked_leaves_memory() {
    let code = TestMachine::assemble(|a| {
        a.fldcw(word_ptr(DATA_BASE))?;
        a.fst(qword_ptr(DATA_BASE + 8))
    });
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x037eu16.to_le_bytes());
    m.load(DATA_BASE + 8, &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(run(&mut m, &code, 2), ExitReason::Budget);
    assert_eq!(m.read_u64(DATA_BASE + 8), 0x1122_3344_5566_7788);
    let f = &m.cpu.state.x87;
    assert_eq!(
        f.fsw & (sw::IE | sw::SF | sw::C1 | sw::ES),
        sw::IE | sw::SF | sw::ES
    );
    assert_eq!(f.fdp, DATA_BASE + 8);
}

#[test]
fn fxsave_alignment_and_mxcsr_checks() {
    let save = TestMachine::assemble(|a| a.fxsave(ptr(DATA_BASE + 8)));
    let mut m = TestMachine::new();
    assert_eq!(run(&mut m, &save, 1), ExitReason::Exception(Fault::GP0));
    let rstor = TestMachine::assemble(|a| a.fxrstor64(ptr(DATA_BASE)));
    let mut img = [0u8; 512];
    img[24..28].copy_from_slice(&0x0001_0000u32.to_le_bytes());
    m.load(DATA_BASE, &img);
    assert_eq!(run(&mut m, &rstor, 1), ExitReason::Exception(Fault::GP0));
    // A valid round trip.
    let code = TestMachine::assemble(|a| {
        a.fldpi()?;
        a.fxsave64(ptr(DATA_BASE))?;
        a.fninit()?;
        a.fxrstor64(ptr(DATA_BASE))?;
        a.fstp(tword_ptr(DATA_BASE + 1024))
    });
    let mut m = TestMachine::new();
    assert_eq!(run(&mut m, &code, 5), ExitReason::Budget);
    assert_eq!(m.read_u64(DATA_BASE + 1024), 0xc90f_daa2_2168_c235);
    assert_eq!(m.read_u64(DATA_BASE + 24) as u32, 0x1f80);
}

#[test]
fn fsave_frstor_round_trip() {
    let code = TestMachine::assemble(|a| {
        a.fldln2()?;
        a.fld1()?;
        a.fnsave(ptr(DATA_BASE))?;
        a.fld1()?; // after FNINIT: pushes into an empty stack
        a.frstor(ptr(DATA_BASE))?;
        a.fstp(tword_ptr(DATA_BASE + 512))?;
        a.fstp(tword_ptr(DATA_BASE + 528))
    });
    let mut m = TestMachine::new();
    assert_eq!(run(&mut m, &code, 7), ExitReason::Budget);
    assert_eq!(m.read_u64(DATA_BASE + 512), 0x8000_0000_0000_0000);
    assert_eq!(m.read_u64(DATA_BASE + 528), 0xb172_17f7_d1cf_79ac);
    // The saved tag word marks ST(0..1) valid (00) and the rest empty.
    let tw = u16::from_le_bytes([
        m.ram.bytes()[DATA_BASE as usize + 8],
        m.ram.bytes()[DATA_BASE as usize + 9],
    ]);
    assert_eq!(tw, 0x0fff);
}

#[test]
fn fcomi_sets_rflags() {
    let code = TestMachine::assemble(|a| {
        a.fld1()?;
        a.fldz()?;
        a.fcomi(st0, st1)
    });
    let mut m = TestMachine::new();
    run(&mut m, &code, 3);
    use crate::state::flags::{CF, PF, ZF};
    assert_eq!(m.cpu.state.rflags & (CF | PF | ZF), CF, "0 < 1");
}

/// Random x87-heavy byte streams (D8..DF opcodes with random ModR/M and operands, WAIT,
/// FXSAVE/FXRSTOR, EMMS) never panic the host, whatever state they build up.
#[test]
fn random_x87_streams_do_not_panic() {
    let mut r = crate::ops::native::XorShift::new(0x87f0);
    for _ in 0..3000 {
        let mut data = vec![0u8; 136];
        for b in data.iter_mut() {
            *b = r.next() as u8;
        }
        // Point RSI/RDI-based operands somewhere mapped half the time.
        if r.next() & 1 == 0 {
            data[6 * 8..6 * 8 + 8].copy_from_slice(&DATA_BASE.to_le_bytes());
            data[7 * 8..7 * 8 + 8].copy_from_slice(&(DATA_BASE + 0x1000).to_le_bytes());
        }
        for _ in 0..40 {
            match r.next() % 10 {
                0 => data.push(0x9b),
                1 => data.extend_from_slice(&[0x48, 0x0f, 0xae, (r.next() as u8 & 0x08) | 0x06]),
                2 => data.extend_from_slice(&[0x0f, 0x77]),
                _ => {
                    data.push(0xd8 + (r.next() % 8) as u8);
                    let modrm = r.next() as u8;
                    data.push(modrm);
                    // Keep memory forms on [rsi]/[rdi] so that they usually hit RAM.
                    if modrm < 0xc0 {
                        let l = data.len();
                        data[l - 1] = (modrm & 0x38) | 0x06 | (r.next() as u8 & 1);
                    }
                }
            }
        }
        let _ = crate::testkit::fuzz_decode_exec(&data);
    }
}

// ----- behaviour measured on the reference host (issue 3) -----
// The fault addresses below were measured natively (operands next to a PROT_NONE page, the
// address from the SIGSEGV's si_addr) and by `lockstep difftest --isa simd`.

use crate::testkit::TEST_RAM;

fn page_fault_addr(r: ExitReason) -> u64 {
    match r {
        ExitReason::Exception(Fault::PageFault { addr, .. }) => addr,
        other => panic!("expected #PF, got {other:?}"),
    }
}

#[test]
fn state_images_running_into_a_bad_page_report_the_operand_last_byte() {
    // (instruction, operand offset below the end of RAM, expected #PF offset from the end).
    type Asm = fn(&mut CodeAssembler, u64) -> Result<(), IcedError>;
    let cases: [(&str, Asm, u64, u64); 5] = [
        ("fxsave", |a, p| a.fxsave(ptr(p)), 256, 255),
        (
            "fxsave, only unwritten bytes over",
            |a, p| a.fxsave(ptr(p)),
            400,
            111,
        ),
        ("fxrstor", |a, p| a.fxrstor(ptr(p)), 256, 255),
        ("fnstenv", |a, p| a.fnstenv(ptr(p)), 10, 17),
        ("fnsave", |a, p| a.fnsave(ptr(p)), 50, 57),
    ];
    for (name, f, below, want) in cases {
        let p = TEST_RAM - below;
        let code = TestMachine::assemble(|a| f(a, p));
        let mut m = TestMachine::new();
        let addr = page_fault_addr(run(&mut m, &code, 1));
        assert_eq!(addr, TEST_RAM + want, "{name}");
        // Entirely on the bad page: the first byte, but the last for FXSAVE/FXRSTOR.
        let code = TestMachine::assemble(|a| f(a, TEST_RAM + 0x20));
        let mut m = TestMachine::new();
        let want = if name.starts_with("fx") {
            0x20 + 511
        } else {
            0x20
        };
        assert_eq!(
            page_fault_addr(run(&mut m, &code, 1)),
            TEST_RAM + want,
            "{name}"
        );
    }
    // The first byte on the bad page (below): the first byte.
    let code = TestMachine::assemble(|a| a.fnstenv(ptr(CODE_BASE - 10)));
    let mut m = TestMachine::new();
    assert_eq!(page_fault_addr(run(&mut m, &code, 1)), CODE_BASE - 10);
}

#[test]
fn fxsave_misaligned_non_canonical_stack_operand_is_ss() {
    let code = TestMachine::assemble(|a| a.fxsave(ptr(rbp + 8)));
    let mut m = TestMachine::new();
    m.cpu.state.gpr[crate::state::reg::RBP] = 0x8000_0000_0000_0000;
    assert_eq!(
        run(&mut m, &code, 1),
        ExitReason::Exception(Fault::StackFault(0))
    );
    let code = TestMachine::assemble(|a| a.fxsave(ptr(rbx + 8)));
    let mut m = TestMachine::new();
    m.cpu.state.gpr[crate::state::reg::RBX] = 0x8000_0000_0000_0000;
    assert_eq!(run(&mut m, &code, 1), ExitReason::Exception(Fault::GP0));
}

#[test]
fn fnstenv_stores_es_then_clears_it_with_all_exceptions_masked() {
    let code = TestMachine::assemble(|a| a.fnstenv(ptr(DATA_BASE)));
    let mut m = TestMachine::new();
    m.cpu.state.x87.fcw = 0x037b; // ZM clear
    m.cpu.state.x87.fsw = sw::ZE | sw::ES | sw::B | (3 << 11);
    assert_eq!(run(&mut m, &code, 1), ExitReason::Budget);
    let stored = m.read_u64(DATA_BASE + 4) as u16;
    assert_eq!(stored, sw::ZE | sw::ES | sw::B | (3 << 11));
    assert_eq!(m.cpu.state.x87.fcw, 0x037f);
    assert_eq!(m.cpu.state.x87.fsw, sw::ZE | (3 << 11));
}

#[test]
fn fstpnce_with_an_empty_st0_only_pops() {
    let code = TestMachine::assemble(|a| a.fstpnce(st2));
    let mut m = TestMachine::new();
    let f = &mut m.cpu.state.x87;
    f.fcw = 0x037e; // IM clear: a stack fault would set ES
    f.fsw = (5 << 11) | sw::C1;
    f.ftw = 0b1000_0000; // ST(2) = R7 valid, ST(0) = R5 empty
    f.regs[7][..10].copy_from_slice(&F80::ONE.to_bytes());
    assert_eq!(run(&mut m, &code, 1), ExitReason::Budget);
    let f = &m.cpu.state.x87;
    assert_eq!(f.fsw, 6 << 11, "TOP + 1, C1 cleared, no flags");
    assert_eq!(f.ftw, 0b1000_0000);
    assert_eq!(F80::from_bytes(&f.regs[7][..10]), F80::ONE);
}

#[test]
fn mmx_store_that_faults_has_set_top_zero_but_not_the_tags() {
    let code = TestMachine::assemble(|a| a.movq(qword_ptr(TEST_RAM), mm0));
    let mut m = TestMachine::new();
    m.cpu.state.x87.fsw = 5 << 11;
    m.cpu.state.x87.ftw = 0xe0;
    assert_eq!(page_fault_addr(run(&mut m, &code, 1)), TEST_RAM);
    assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (0, 0xe0));
    // A load that faults changes nothing.
    let code = TestMachine::assemble(|a| a.movq(mm0, qword_ptr(TEST_RAM)));
    let mut m = TestMachine::new();
    m.cpu.state.x87.fsw = 5 << 11;
    m.cpu.state.x87.ftw = 0xe0;
    assert_eq!(page_fault_addr(run(&mut m, &code, 1)), TEST_RAM);
    assert_eq!((m.cpu.state.x87.fsw, m.cpu.state.x87.ftw), (5 << 11, 0xe0));
}
