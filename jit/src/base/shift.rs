//! The baseline tier's shifts whose flags need more than a capture of the host's: the count
//! of a constant shift, OF above a count of 1 (the interpreter's), and SHL/SHR/SAR/SHLD/SHRD
//! by CL, whose count of 0 keeps every flag.

use super::emit::Emit;
use super::emit::STATUS;
use super::insn::{access, host_reg, memory_at_r9, operand_size, wide, AF};
use iced_x86::code_asm::*;
use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::state::reg;

/// A covered shift's count (masked as the hardware masks it).
pub(super) fn shift_count(ins: &Instruction) -> u32 {
    let mask = if wide(ins) { 63 } else { 31 };
    // SHLD/SHRD: the count is the third operand.
    let kind = if ins.op_count() == 3 {
        ins.op2_kind()
    } else {
        ins.op1_kind()
    };
    match kind {
        OpKind::Immediate8 => ins.immediate8() as u32 & mask,
        // The D1 forms: a count of 1 (iced gives it as an 8-bit immediate too).
        _ => 1,
    }
}

/// Does the instruction's host OF need the interpreter's value (SHL/SHR/SHLD/SHRD by more
/// than 1)?
pub(super) fn shift_of_fix(ins: &Instruction) -> bool {
    use Mnemonic::*;
    matches!(ins.mnemonic(), Shl | Shr | Shld | Shrd) && shift_count(ins) > 1
}

/// OF of the same shift by 1 of the original first operand (in RAX, else at `[R9 + R8]`: only its
/// own bytes, the probe checked no more), into R11 as 0 or 1 — the interpreter's OF for SHL/
/// SHR/SHLD/SHRD by more than 1, which the architecture leaves undefined. SHLD/SHRD's source
/// is in RDX's family. Clobbers the host's flags.
pub(super) fn of_by_one(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    let size = operand_size(ins);
    match (ins.op0_kind() == OpKind::Memory, size) {
        (false, _) => e.a.mov(r11, rax)?,
        (true, 8) => e.a.mov(r11, qword_ptr(r9 + r8))?,
        (true, 4) => e.a.mov(r11d, dword_ptr(r9 + r8))?,
        (true, 2) => e.a.movzx(r11d, word_ptr(r9 + r8))?,
        (true, _) => e.a.movzx(r11d, byte_ptr(r9 + r8))?,
    }
    use Mnemonic::{Shl, Shld, Shr};
    let code = match (ins.mnemonic(), size) {
        (Shl, 8) => Code::Shl_rm64_imm8,
        (Shl, 4) => Code::Shl_rm32_imm8,
        (Shl, 2) => Code::Shl_rm16_imm8,
        (Shl, _) => Code::Shl_rm8_imm8,
        (Shr, 8) => Code::Shr_rm64_imm8,
        (Shr, 4) => Code::Shr_rm32_imm8,
        (Shr, 2) => Code::Shr_rm16_imm8,
        (Shr, _) => Code::Shr_rm8_imm8,
        (Shld, 8) => Code::Shld_rm64_r64_imm8,
        (Shld, _) => Code::Shld_rm32_r32_imm8,
        (_, 8) => Code::Shrd_rm64_r64_imm8,
        (_, _) => Code::Shrd_rm32_r32_imm8,
    };
    let (one, src) = match size {
        8 => (Register::R11, Register::RDX),
        4 => (Register::R11D, Register::EDX),
        2 => (Register::R11W, Register::DX),
        _ => (Register::R11L, Register::DL),
    };
    let by_one = if ins.op_count() == 3 {
        Instruction::with3(code, one, src, 1u32)?
    } else {
        Instruction::with2(code, one, 1u32)?
    };
    e.a.add_instruction(by_one)?;
    // (Where a capture has OF: PUSHF costs ~1.1 ns here.)
    e.a.seto(r11b)?;
    e.a.movzx(r11d, r11b)
}

/// SHL/SHR/SAR/SHLD/SHRD of a 32- or 64-bit operand by CL (the forms `insn::covers` takes).
pub(super) fn by_cl(ins: &Instruction) -> bool {
    matches!(
        ins.code(),
        Code::Shl_rm32_CL
            | Code::Shl_rm64_CL
            | Code::Shr_rm32_CL
            | Code::Shr_rm64_CL
            | Code::Sar_rm32_CL
            | Code::Sar_rm64_CL
            | Code::Shld_rm32_r32_CL
            | Code::Shld_rm64_r64_CL
            | Code::Shrd_rm32_r32_CL
            | Code::Shrd_rm64_r64_CL
    )
}

/// A shift by CL ([`by_cl`]): the host's own with the guest's RCX in RCX. A masked count of
/// 0 changes no flag (the operand is written back unchanged, as the interpreter does), so the
/// status the block goes on with is made in R10 at run time: RFLAGS (exact: captures before
/// were merged, and the instruction counts as reading the flags, so an incoming record was
/// folded) for a count of 0, else the host's with AF 0 and OF as the interpreter has it for
/// counts above 1 (SAR's 0; the others' that of the same shift by 1 of the original operand).
pub(super) fn shift_by_cl(e: &mut Emit, ins: &Instruction, dead: bool) -> Result<(), IcedError> {
    let wide = wide(ins);
    let mut h = *ins;
    if ins.op0_kind() == OpKind::Memory {
        access(e, ins, true, ins.memory_size().size() as u32)?;
        memory_at_r9(&mut h, 0);
    }
    if !dead {
        e.flush()?;
        if e.record_live {
            // (Not expected: `flag_use` makes the entry fold the record. Were it still there,
            // the interpreter runs the instruction.)
            let defer = e.defer_label()?;
            return e.a.jmp(defer);
        }
    }
    let size = if wide { 8 } else { 4 };
    let dest = match ins.op0_kind() {
        OpKind::Register => {
            let g = gpr_ref(ins.op0_register())
                .expect("covered: a plain GPR")
                .index;
            e.load_reg(rax, g)?;
            h.set_op_register(0, host_reg(0, size));
            Some(g)
        }
        _ => None,
    };
    let double = ins.op_count() == 3;
    if double {
        let g = gpr_ref(ins.op1_register())
            .expect("covered: a plain GPR")
            .index;
        e.load_reg(rdx, g)?;
        h.set_op_register(1, host_reg(1, size));
    }
    e.load_reg(rcx, reg::RCX)?;
    let of_fix = !dead && ins.mnemonic() != Mnemonic::Sar;
    if of_fix {
        of_by_one(e, ins)?;
    }
    e.host_insn(h)?;
    if dead {
        e.host = super::emit::HostFlags::Stale;
    } else {
        // The host's flags as a capture's, then made what the count says they are (R11
        // holds the OF by one: RAX kept in RDX, whose SHLD/SHRD source is no longer needed).
        e.capture_via(rdx, STATUS, STATUS)?;
        let mut zero = e.a.create_label();
        let mut done = e.a.create_label();
        e.a.and(ecx, if wide { 63 } else { 31 })?;
        e.a.je(zero)?;
        // (AF is bit 12, OF bit 0 in a capture.)
        e.a.and(r10d, !(AF << 8))?;
        if of_fix {
            let mut by_one = e.a.create_label();
            e.a.cmp(ecx, 1)?;
            e.a.je(by_one)?;
            e.a.and(r10d, !1)?;
            e.a.or(r10d, r11d)?;
            e.a.set_label(&mut by_one)?;
        } else {
            e.a.and(r10d, !1)?;
        }
        e.a.jmp(done)?;
        e.a.set_label(&mut zero)?;
        super::emit::rflags_as_capture(&mut e.a)?;
        e.a.set_label(&mut done)?;
        // (A label needs an instruction after it.)
        e.a.nop()?;
        e.host = super::emit::HostFlags::Stale;
    }
    if let Some(g) = dest {
        e.store_reg(g, rax, size)?;
        e.reg_written(g);
    }
    Ok(())
}
