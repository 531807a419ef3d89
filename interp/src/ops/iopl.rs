//! CLI and STI with the IOPL rules (no VME/PVI: CR4.VME/PVI are never accepted), and STAC/CLAC.
//!
//! Both are allowed in real mode and when CPL <= IOPL (in virtual-8086 mode CPL is 3, so IOPL
//! must be 3); otherwise #GP(0). STI that sets IF (IF was 0) starts the interrupt shadow for
//! the next instruction and yields, so the machine can deliver a pending interrupt right
//! after that instruction; STI with IF already 1 changes nothing.
//!
//! STAC/CLAC set/clear EFLAGS.AC (SMAP's override for supervisor accesses to user pages):
//! #UD unless CPUID advertises SMAP, and at CPL > 0 (also in real and virtual-8086 mode,
//! where CPL is 0 or 3: STAC/CLAC are valid at CPL 0 in any mode, the SDM's only rule).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::ops::check_no_lock;
use crate::state::{ctl, flags::AC, flags::IF, CpuState};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Cli => cli,
        Mnemonic::Sti => sti,
        Mnemonic::Stac => stac,
        Mnemonic::Clac => clac,
        _ => return None,
    })
}

/// STI ends its block (it may make an interrupt deliverable).
pub fn ends_block(ins: &Instruction) -> bool {
    ins.mnemonic() == Mnemonic::Sti
}

/// May the current privilege change IF (CLI/STI, and IF through POPF)?
pub fn if_change_allowed(st: &CpuState) -> bool {
    st.cr0 & ctl::CR0_PE == 0 || st.cpl() <= st.iopl()
}

fn cli(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if !if_change_allowed(&x.cpu.state) {
        return Err(Fault::GP0.into());
    }
    x.cpu.state.rflags &= !IF;
    Ok(())
}

fn sti(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    if !if_change_allowed(st) {
        return Err(Fault::GP0.into());
    }
    if st.rflags & IF == 0 {
        st.rflags |= IF;
        st.interrupt_shadow = true;
        x.cpu.yield_requested = true;
    }
    Ok(())
}

fn check_stac_clac(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_no_lock(ins)?;
    if crate::cpuid::LEAF7_EBX & crate::cpuid::bits::SMAP == 0 {
        return Err(Fault::ud("STAC/CLAC without SMAP"));
    }
    if x.cpu.state.cpl() != 0 {
        return Err(Fault::ud("STAC/CLAC at CPL > 0"));
    }
    Ok(())
}

/// STAC: EFLAGS.AC = 1. SMAP checks read AC at every access (supervisor accesses to user
/// pages are never cached in the TLB while SMAP is on), so nothing needs flushing.
fn stac(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_stac_clac(x, ins)?;
    x.cpu.state.rflags |= AC;
    Ok(())
}

/// CLAC: EFLAGS.AC = 0.
fn clac(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_stac_clac(x, ins)?;
    x.cpu.state.rflags &= !AC;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::state::flags::{IF, IOPL};
    use crate::testkit::TestMachine;
    use crate::testkit_sys::SysMachine;
    use iced_x86::code_asm::*;

    #[test]
    fn cli_sti_at_cpl3_need_iopl3() {
        for iopl in [0u64, 3] {
            for (code, name) in [(vec![0xfa], "cli"), (vec![0xfb], "sti")] {
                let mut m = TestMachine::new();
                m.cpu.state.rflags = (m.cpu.state.rflags & !IOPL) | (iopl << 12);
                if name == "sti" {
                    m.cpu.state.rflags &= !IF;
                }
                let e = m.run_code(&code, 1);
                if iopl == 3 {
                    assert_eq!(e.retired, 1, "{name}");
                    assert_eq!(m.cpu.state.rflags & IF != 0, name == "sti", "{name}");
                } else {
                    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0), "{name}");
                    assert_eq!(e.retired, 0);
                }
            }
        }
    }

    #[test]
    fn sti_sets_shadow_and_yields_only_when_if_was_clear() {
        let mut m = SysMachine::new(4);
        let code = {
            let mut a = CodeAssembler::new(32).unwrap();
            a.cli().unwrap();
            a.sti().unwrap();
            a.nop().unwrap();
            a.sti().unwrap();
            a.nop().unwrap();
            a.hlt().unwrap();
            a.assemble(0x1000).unwrap()
        };
        m.load(0x1000, &code);
        m.start_protected_flat(0x1000);
        m.cpu.state.rflags |= IF;
        let e = m.run(100);
        assert_eq!(e.reason, ExitReason::Yield);
        assert_eq!(e.retired, 2);
        assert!(m.cpu.state.interrupt_shadow);
        assert_ne!(m.cpu.state.rflags & IF, 0);
        m.cpu.state.interrupt_shadow = false;
        // The second STI (IF already 1) neither yields nor sets the shadow.
        let e = m.run(100);
        assert_eq!(e.reason, ExitReason::Halt);
        assert_eq!(e.retired, 4);
        assert!(!m.cpu.state.interrupt_shadow);
    }

    #[test]
    fn cli_in_real_mode_ignores_iopl() {
        let mut m = SysMachine::new(2);
        m.load(0x7c00, &[0xfa, 0xf4]); // cli; hlt
        m.start_real(0, 0x7c00);
        m.cpu.state.rflags |= IF;
        let e = m.run(10);
        assert_eq!(e.reason, ExitReason::Halt);
        assert_eq!(m.cpu.state.rflags & IF, 0);
    }
}
