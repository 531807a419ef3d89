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
