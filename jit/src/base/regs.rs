//! The baseline tier's register operands without the renamed host instruction's load: MOVs
//! of immediates straight into the destination's slot, and 64-bit second operands that the
//! host instruction reads from their slots in `CpuState`.

use super::emit::Emit;
use crate::frame::gpr_off;
use iced_x86::code_asm::*;
use iced_x86::{Code, Instruction, MemoryOperand, Mnemonic, OpKind, Register};
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::ops::mov::is_cmovcc;

/// `ins` as a MOV of an immediate into a 32- or 64-bit guest register: the register's index
/// and its whole 64-bit value afterwards (`immediate(1)`: zero-extended from 32 bits for a
/// 32-bit MOV, sign-extended from imm32 for `mov r/m64, imm32`); `None` for every other
/// instruction. (A MOV between registers is renamed, its 64-bit source read from its slot:
/// [`slot_source_form`].)
pub(super) fn mov_imm(ins: &Instruction) -> Option<(usize, u64)> {
    use Code::*;
    if ins.op0_kind() != OpKind::Register {
        return None;
    }
    let dst = gpr_ref(ins.op0_register()).filter(|d| !d.high && d.size >= 4)?;
    let value = match ins.code() {
        Mov_r32_imm32 | Mov_rm32_imm32 => ins.immediate(1) as u32 as u64,
        Mov_r64_imm64 | Mov_rm64_imm32 => ins.immediate(1),
        _ => return None,
    };
    Some((dst.index, value))
}

/// A MOV [`mov_imm`] accepts: the value stored into the register's slot at once when `mov
/// qword [m], imm32` sign-extends to it, else through RAX — no renamed host MOV. Flags and
/// R8–R10 untouched.
pub(super) fn emit_mov_imm(e: &mut Emit, (g, value): (usize, u64)) -> Result<(), IcedError> {
    let slot = qword_ptr(rdi + gpr_off(g));
    if value as i64 == value as i32 as i64 {
        e.a.mov(slot, value as i32)?;
    } else {
        e.a.mov(rax, value)?;
        e.a.mov(slot, rax)?;
    }
    e.reg_written(g);
    Ok(())
}

/// How a renamed instruction takes its second operand, a guest register, from the register's
/// slot in `CpuState` ([`with_slot_source`]): the instruction's own encoding when it has only
/// an `op r, r/m` one (IMUL, CMOVcc, MOVZX …); for MOV and the ALU operations, whose
/// register-register form may be `op r/m, r`, their `op r, r/m` encoding; TEST (`test r/m,
/// r` only) with its operands swapped, as AND does not care for the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotSource {
    Same,
    Code(Code),
    Swapped,
}

/// The [`SlotSource`] of `ins`, when its first operand is a register and its second another
/// 64-bit register (not the first one: `test rax, rax` loads it once). Only 64-bit: the
/// slot was most likely just stored whole, and a load of the same 8 bytes from the same base
/// and displacement takes the stored value at once (AMD's memory renaming; on the Intel Xeon
/// of session 46 ~0.4 ns per store-load hop), a narrower one waits for store forwarding
/// (~1.5 ns per hop there) — with 32-bit sources too, sort's comparator ran 7% slower on the
/// AMD host for 1.4% fewer host instructions.
pub(super) fn slot_source_form(ins: &Instruction) -> Option<SlotSource> {
    use Code::*;
    use Mnemonic::*;
    if ins.op0_kind() != OpKind::Register
        || ins.op1_kind() != OpKind::Register
        || ins.op1_register() == ins.op0_register()
        || gpr_ref(ins.op1_register()).is_none_or(|g| g.size != 8)
    {
        return None;
    }
    let m = ins.mnemonic();
    // (Only `op r, r/m` encodings exist for these.)
    if matches!(m, Imul | Movzx | Movsx | Movsxd | Tzcnt | Lzcnt | Popcnt) || is_cmovcc(m) {
        return Some(SlotSource::Same);
    }
    let size = gpr_ref(ins.op0_register())?.size;
    let pick = |forms: [Code; 4]| {
        let i = match size {
            1 => 0,
            2 => 1,
            4 => 2,
            _ => 3,
        };
        Some(SlotSource::Code(forms[i]))
    };
    match m {
        Mov => pick([Mov_r8_rm8, Mov_r16_rm16, Mov_r32_rm32, Mov_r64_rm64]),
        Add => pick([Add_r8_rm8, Add_r16_rm16, Add_r32_rm32, Add_r64_rm64]),
        Or => pick([Or_r8_rm8, Or_r16_rm16, Or_r32_rm32, Or_r64_rm64]),
        Adc => pick([Adc_r8_rm8, Adc_r16_rm16, Adc_r32_rm32, Adc_r64_rm64]),
        Sbb => pick([Sbb_r8_rm8, Sbb_r16_rm16, Sbb_r32_rm32, Sbb_r64_rm64]),
        And => pick([And_r8_rm8, And_r16_rm16, And_r32_rm32, And_r64_rm64]),
        Sub => pick([Sub_r8_rm8, Sub_r16_rm16, Sub_r32_rm32, Sub_r64_rm64]),
        Xor => pick([Xor_r8_rm8, Xor_r16_rm16, Xor_r32_rm32, Xor_r64_rm64]),
        Cmp => pick([Cmp_r8_rm8, Cmp_r16_rm16, Cmp_r32_rm32, Cmp_r64_rm64]),
        Test => Some(SlotSource::Swapped),
        _ => None,
    }
}

/// `h` (`ins` renamed, its first operand RAX's family) with its second operand the slot of
/// `ins`'s second register, as [`slot_source_form`] chose.
pub(super) fn with_slot_source(
    h: &Instruction,
    ins: &Instruction,
    form: SlotSource,
) -> Result<Instruction, IcedError> {
    let g = gpr_ref(ins.op1_register()).expect("slot_source_form: a plain GPR");
    let slot = MemoryOperand::with_base_displ(Register::RDI, gpr_off(g.index) as i64);
    let dst = h.op0_register();
    match form {
        SlotSource::Same if ins.op_count() == 3 => {
            Instruction::with3(ins.code(), dst, slot, ins.immediate(2) as i32)
        }
        SlotSource::Same => Instruction::with2(ins.code(), dst, slot),
        SlotSource::Code(code) => Instruction::with2(code, dst, slot),
        SlotSource::Swapped => Instruction::with2(ins.code(), slot, dst),
    }
}

/// `add/sub/and/or/xor r64, imm` (ADD and SUB by `add rsp` as well): the guest register's
/// index, for [`on_slot`].
pub(super) fn rmw_imm(ins: &Instruction) -> Option<usize> {
    use Code::*;
    let ok = matches!(
        ins.code(),
        Add_rm64_imm8
            | Add_rm64_imm32
            | Sub_rm64_imm8
            | Sub_rm64_imm32
            | And_rm64_imm8
            | And_rm64_imm32
            | Or_rm64_imm8
            | Or_rm64_imm32
            | Xor_rm64_imm8
            | Xor_rm64_imm32
    ) && ins.op0_kind() == OpKind::Register;
    ok.then(|| {
        gpr_ref(ins.op0_register())
            .filter(|g| g.size == 8)
            .map(|g| g.index)
    })
    .flatten()
}

/// [`rmw_imm`]'s instruction on guest register `g`'s slot in place: `add qword [rdi + slot],
/// imm`, one host instruction instead of a load, the operation and a store (the host's flags
/// are the same as of the register form).
pub(super) fn on_slot(ins: &Instruction, g: usize) -> Result<Instruction, IcedError> {
    let slot = MemoryOperand::with_base_displ(Register::RDI, gpr_off(g) as i64);
    Instruction::with2(ins.code(), slot, ins.immediate(1) as i32)
}
