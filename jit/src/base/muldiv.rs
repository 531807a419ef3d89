//! The baseline tier's one-operand multiplications and divisions: MUL/IMUL and DIV/IDIV of
//! RDX:RAX by a 32- or 64-bit register or memory operand.

use super::emit::{Emit, CF, STATUS};
use super::insn::{access, memory_at_r9, wide, OF, PF, SF};
use iced_x86::code_asm::*;
use iced_x86::{Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::state::reg;

/// MUL/IMUL r/m32 and r/m64 (one operand): EDX:EAX or RDX:RAX = RAX times the operand
/// (loaded into RCX when a register), both halves stored; flags as
/// [`Emit::captured_sf_pf_of_rax`] makes them.
pub(super) fn mul(e: &mut Emit, ins: &Instruction, dead: bool) -> Result<(), IcedError> {
    let wide = wide(ins);
    let mut h = *ins;
    if ins.op0_kind() == OpKind::Memory {
        let size = ins.memory_size().size() as u32;
        access(e, ins, false, size)?;
        memory_at_r9(&mut h, 0);
    } else {
        let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
        e.load_reg(rcx, g)?;
        h.set_op0_register(if wide { Register::RCX } else { Register::ECX });
    }
    // Every status flag replaced: an earlier capture is dropped unmerged.
    e.replace_pending();
    e.load_reg(rax, reg::RAX)?;
    e.host_insn(h)?;
    if dead {
        e.host = super::emit::HostFlags::Stale;
    } else {
        e.capture(CF | OF | SF | PF, STATUS)?;
        e.captured_sf_pf_of_rax(wide)?;
    }
    // (A 32-bit product zero-extended both halves.)
    e.store_reg(reg::RAX, rax, 8)?;
    e.store_reg(reg::RDX, rdx, 8)?;
    e.reg_written(reg::RAX);
    e.reg_written(reg::RDX);
    Ok(())
}

/// DIV/IDIV of RDX:RAX (EDX:EAX) by a 64-bit (32-bit) register or memory operand, on the
/// host, when a check shows it cannot raise #DE: for DIV, the high half below the divisor
/// (which also rules out a zero divisor); for IDIV, the dividend the sign extension of its
/// low half, a non-zero divisor, and not the most negative low half by -1. Anything else
/// (the faults, and the rare wide dividends) leaves for the interpreter. The status flags,
/// which the architecture leaves undefined, stay the guest's (the interpreter's choice): a
/// capture awaiting its merge stays, the host's flags are stale.
pub(super) fn div(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    let wide = wide(ins);
    if ins.op0_kind() == OpKind::Memory {
        access(e, ins, false, if wide { 8 } else { 4 })?;
        if wide {
            e.a.mov(rcx, qword_ptr(r9 + r8))?;
        } else {
            e.a.mov(ecx, dword_ptr(r9 + r8))?;
        }
    } else {
        let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
        e.load_reg(rcx, g)?;
    }
    e.host = super::emit::HostFlags::Stale;
    e.load_reg(rax, reg::RAX)?;
    e.load_reg(rdx, reg::RDX)?;
    let defer = e.defer_label()?;
    let signed = ins.mnemonic() == Mnemonic::Idiv;
    match (signed, wide) {
        (false, true) => {
            e.a.cmp(rdx, rcx)?;
            e.a.jae(defer)?;
        }
        (false, false) => {
            e.a.cmp(edx, ecx)?;
            e.a.jae(defer)?;
        }
        (true, _) => {
            let mut fits = e.a.create_label();
            if wide {
                e.a.mov(r11, rax)?;
                e.a.sar(r11, 63)?;
                e.a.cmp(r11, rdx)?;
                e.a.jne(defer)?;
                e.a.test(rcx, rcx)?;
                e.a.je(defer)?;
                e.a.cmp(rcx, -1)?;
                e.a.jne(fits)?;
                e.a.mov(r11, 1u64 << 63)?;
                e.a.cmp(rax, r11)?;
            } else {
                e.a.mov(r11d, eax)?;
                e.a.sar(r11d, 31)?;
                e.a.cmp(r11d, edx)?;
                e.a.jne(defer)?;
                e.a.test(ecx, ecx)?;
                e.a.je(defer)?;
                e.a.cmp(ecx, -1)?;
                e.a.jne(fits)?;
                e.a.cmp(eax, i32::MIN)?;
            }
            e.a.je(defer)?;
            e.a.set_label(&mut fits)?;
        }
    }
    match (signed, wide) {
        (false, true) => e.a.div(rcx)?,
        (false, false) => e.a.div(ecx)?,
        (true, true) => e.a.idiv(rcx)?,
        (true, false) => e.a.idiv(ecx)?,
    }
    // (A 32-bit quotient and remainder zero-extended.)
    e.store_reg(reg::RAX, rax, 8)?;
    e.store_reg(reg::RDX, rdx, 8)?;
    e.reg_written(reg::RAX);
    e.reg_written(reg::RDX);
    Ok(())
}
