//! The baseline tier's bit tests and scans: BT/BTS/BTR/BTC of a 32- or 64-bit register, or of
//! memory at a constant bit offset, and BSF/BSR into a 32- or 64-bit register. Their flags
//! are the interpreter's, not the host's where the architecture leaves them undefined.

use super::emit::{Emit, HostFlags, CF, STATUS};
use super::insn::{access, memory_at_r9, wide, AF};
use crate::frame::{gpr_off, OFF_RFLAGS};
use iced_x86::code_asm::*;
use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::operand::gpr_ref;

/// The forms this file compiles. A register bit offset into memory addresses a bit string
/// beyond the operand (left out).
pub(super) fn covers(ins: &Instruction) -> bool {
    use Code::*;
    match ins.code() {
        Bt_rm32_imm8 | Bt_rm64_imm8 | Bts_rm32_imm8 | Bts_rm64_imm8 | Btr_rm32_imm8
        | Btr_rm64_imm8 | Btc_rm32_imm8 | Btc_rm64_imm8 => true,
        Bt_rm32_r32 | Bt_rm64_r64 | Bts_rm32_r32 | Bts_rm64_r64 | Btr_rm32_r32 | Btr_rm64_r64
        | Btc_rm32_r32 | Btc_rm64_r64 => ins.op0_kind() == OpKind::Register,
        Bsf_r32_rm32 | Bsf_r64_rm64 | Bsr_r32_rm32 | Bsr_r64_rm64 => true,
        _ => false,
    }
}

/// BT/BTS/BTR/BTC: the host's own, then CF (the tested bit) put into RFLAGS, which holds
/// the guest's flags exactly (captures merged first; an incoming record was folded at entry,
/// the instruction counting as a flag reader): the interpreter keeps every other status flag,
/// which the architecture leaves undefined.
pub(super) fn bit_test(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    let wide = wide(ins);
    let mut h = *ins;
    let writes = ins.mnemonic() != Mnemonic::Bt;
    if ins.op0_kind() == OpKind::Memory {
        access(e, ins, writes, if wide { 8 } else { 4 })?;
        memory_at_r9(&mut h, 0);
    }
    e.flush()?;
    if e.record_live {
        // (Not expected: see above. Were it still there, the interpreter runs it.)
        let defer = e.defer_label()?;
        return e.a.jmp(defer);
    }
    let (r0, r1) = if wide {
        (Register::RAX, Register::RDX)
    } else {
        (Register::EAX, Register::EDX)
    };
    let mut dest = None;
    if ins.op0_kind() == OpKind::Register {
        let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
        e.load_reg(rax, g)?;
        h.set_op0_register(r0);
        dest = writes.then_some(g);
    }
    if ins.op1_kind() == OpKind::Register {
        let g = gpr_ref(ins.op1_register()).map_or(0, |g| g.index);
        e.load_reg(rdx, g)?;
        h.set_op1_register(r1);
    }
    e.host_insn(h)?;
    e.a.setb(r11b)?;
    e.a.and(byte_ptr(rdi + OFF_RFLAGS), !(CF as u8) as i32)?;
    e.a.or(byte_ptr(rdi + OFF_RFLAGS), r11b)?;
    e.host = HostFlags::Stale;
    if let Some(g) = dest {
        // (A 32-bit result was zero-extended.)
        e.store_reg(g, rax, 8)?;
        e.reg_written(g);
    }
    Ok(())
}

/// BSF/BSR: for a non-zero source the index of its lowest/highest set bit goes to the
/// destination; a zero source leaves the destination as it is. Flags as the interpreter has
/// them: ZF for a zero source, PF the parity of the index (1 for a zero source), CF, OF, SF
/// and AF 0 — made by a TEST of the index with bit 8 set (of 0 for a zero source), captured
/// without its AF.
pub(super) fn scan(e: &mut Emit, ins: &Instruction, dead: bool) -> Result<(), IcedError> {
    let wide = wide(ins);
    let mut h = *ins;
    if ins.op1_kind() == OpKind::Memory {
        access(e, ins, false, if wide { 8 } else { 4 })?;
        memory_at_r9(&mut h, 0);
    } else {
        let g = gpr_ref(ins.op1_register()).map_or(0, |g| g.index);
        e.load_reg(rdx, g)?;
        h.set_op1_register(if wide { Register::RDX } else { Register::EDX });
    }
    // Every status flag replaced: an earlier capture is dropped unmerged.
    e.replace_pending();
    h.set_op0_register(if wide { Register::RCX } else { Register::ECX });
    e.host_insn(h)?;
    let mut zero = e.a.create_label();
    let mut join = e.a.create_label();
    e.a.je(zero)?;
    let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
    // (A 32-bit index was zero-extended.)
    e.a.mov(qword_ptr(rdi + gpr_off(g)), rcx)?;
    e.a.or(ecx, 0x100)?;
    e.a.jmp(join)?;
    e.a.set_label(&mut zero)?;
    e.a.xor(ecx, ecx)?;
    e.a.set_label(&mut join)?;
    e.reg_written(g);
    if dead {
        // (A label needs an instruction after it.)
        e.a.nop()?;
        e.host = HostFlags::Stale;
        return Ok(());
    }
    e.a.test(ecx, ecx)?;
    e.capture(STATUS & !AF, STATUS)
}
