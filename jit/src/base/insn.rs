//! The instructions the baseline tier compiles, and how: most are the guest instruction itself
//! with its register operands renamed to host scratch registers (RAX's family for the first
//! operand, RDX's for the second) and its memory operand to `[R9 + R8]`, the host address the TLB
//! probe found. The host then computes exactly what the guest instruction computes, flags
//! included; the flags the architecture leaves undefined never come from the host (AF after
//! a logic operation is 0, this reference host's value, as the interpreter has it).
//! PUSH/POP, the branches, CALL and RET are written out.

use super::emit::{Emit, CF, STATUS};
use super::shift::{by_cl, of_by_one, shift_by_cl, shift_count, shift_of_fix};
use crate::frame::gpr_off;
use iced_x86::code_asm::*;
use iced_x86::{Code, ConditionCode, Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::ops::mov::{is_cmovcc, is_setcc};
use lockstep_interp::state::{flags, reg};

/// How an instruction takes part in the flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FlagUse {
    None,
    /// Writes every status flag (without reading any).
    Overwrite,
    /// Reads a flag, or writes only some (INC/DEC keep CF).
    Read,
}

/// AF, which logic operations clear.
pub(super) const AF: u32 = flags::AF as u32;

/// OF, SF, PF, ZF.
pub(super) const OF: u32 = flags::OF as u32;
pub(super) const SF: u32 = flags::SF as u32;
pub(super) const PF: u32 = flags::PF as u32;
const ZF: u32 = flags::ZF as u32;

/// The flags a renamed instruction takes from the host, and the flags it replaces.
fn flag_masks(ins: &Instruction) -> Option<(u32, u32)> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Add | Sub | Cmp | Neg | Adc | Sbb => (STATUS, STATUS),
        And | Or | Xor | Test => (STATUS & !AF, STATUS),
        Inc | Dec => (STATUS & !CF, STATUS & !CF),
        // MUL and IMUL: CF and OF from the host; SF and PF (undefined) the interpreter's,
        // from the product's low half ([`Emit::captured_sf_pf_of_rax`]); ZF and AF 0.
        Imul | Mul => (CF | OF | SF | PF, STATUS),
        // Shifts by a non-zero constant count below the width (`covers`): AF is 0, and OF
        // for a count above 1 (undefined) is the interpreter's: SAR's 0, SHL's and SHR's
        // as for a count of 1 ([`shift_of_fix`], which puts it in the capture).
        Sar if shift_count(ins) > 1 => (STATUS & !AF & !OF, STATUS),
        Shl | Shr | Sar => (STATUS & !AF, STATUS),
        // SHLD/SHRD by a non-zero constant (`covers`): AF is 0, OF for a count above 1 the
        // interpreter's, as for a count of 1 ([`shift_of_fix`]).
        Shld | Shrd => (STATUS & !AF, STATUS),
        // CF and ZF from the host (for POPCNT only ZF); the rest 0, as the interpreter has
        // the undefined ones.
        Tzcnt | Lzcnt => (CF | ZF, STATUS),
        Popcnt => (ZF, STATUS),
        _ => return None,
    })
}

/// The first operand's size in bytes (a register or memory).
pub(super) fn operand_size(ins: &Instruction) -> u32 {
    match ins.op0_kind() {
        OpKind::Memory => ins.memory_size().size() as u32,
        _ => ins.op0_register().size() as u32,
    }
}

/// Is the first operand (a register or memory) 64-bit?
pub(super) fn wide(ins: &Instruction) -> bool {
    ins.op0_register().size() == 8 || ins.memory_size().size() == 8
}

fn flag_use(ins: &Instruction) -> FlagUse {
    use Mnemonic::*;
    if super::simd::form(ins).is_some_and(|f| f.flags) {
        return FlagUse::Overwrite;
    }
    if by_cl(ins) {
        // A count of 0 keeps the flags: they are read.
        return FlagUse::Read;
    }
    match ins.mnemonic() {
        // (BT*: CF only, the rest kept.)
        Inc | Dec | Adc | Sbb | Bt | Bts | Btr | Btc => FlagUse::Read,
        Bsf | Bsr => FlagUse::Overwrite,
        _ if flag_masks(ins).is_some() => FlagUse::Overwrite,
        _ if reads_condition(ins) => FlagUse::Read,
        _ => FlagUse::None,
    }
}

/// Jcc, SETcc, CMOVcc.
fn reads_condition(ins: &Instruction) -> bool {
    ins.condition_code() != ConditionCode::None
}

/// For each instruction: are the flags it writes dead — replaced by a later instruction of
/// the block that writes every status flag, with nothing in between (that one included) that
/// reads a flag, writes only some, or may leave for the interpreter (a memory access, DIV/
/// IDIV: the deferring exit leaves with the flags as they are)? One backward pass.
pub fn dead_flags(insns: &[DecodedInsn]) -> Vec<bool> {
    let mut dead = vec![false; insns.len()];
    // Is the flag state after this point overwritten before anything can see it?
    let mut overwritten = false;
    for (i, d) in insns.iter().enumerate().rev() {
        dead[i] = overwritten;
        let ins = &d.ins;
        // (DIV/IDIV leave before the host runs one that could fault, or a wide dividend.)
        let may_leave = (0..ins.op_count()).any(|k| ins.op_kind(k) == OpKind::Memory)
            && ins.mnemonic() != Mnemonic::Lea
            || ins.is_stack_instruction()
            || matches!(ins.mnemonic(), Mnemonic::Div | Mnemonic::Idiv);
        overwritten = match flag_use(ins) {
            _ if may_leave || ins.flow_control() != iced_x86::FlowControl::Next => false,
            FlagUse::Overwrite => true,
            FlagUse::Read => false,
            FlagUse::None => overwritten,
        };
    }
    dead
}

/// The first way `insns` touch the flags.
pub fn first_flag_use<'a>(insns: impl IntoIterator<Item = &'a DecodedInsn>) -> FlagUse {
    insns
        .into_iter()
        .map(|d| flag_use(&d.ins))
        .find(|&u| u != FlagUse::None)
        .unwrap_or(FlagUse::None)
}

/// The instructions renamed and run on the host.
fn renamed(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Mov | Movzx
            | Movsx
            | Movsxd
            | Add
            | Sub
            | And
            | Or
            | Xor
            | Cmp
            | Test
            | Inc
            | Dec
            | Neg
            | Not
            | Lea
            | Adc
            | Sbb
    ) || is_cmovcc(m)
        || is_setcc(m)
}

/// A general-purpose register the renaming can take: not AH/CH/DH/BH.
fn plain_gpr(r: Register) -> bool {
    gpr_ref(r).is_some_and(|g| !g.high)
}

/// May `ins`'s AH/CH/DH/BH operands be renamed (to AH for the first operand, DH for the
/// second)? Only where the renamed instruction needs no REX prefix, with which those encodings
/// mean SPL/BPL/SIL/DIL: no memory operand (`[R9 + R8]`), no 64-bit operand, and a renamed
/// instruction of at most two operands that is not LEA.
fn high_bytes_renamable(ins: &Instruction) -> bool {
    let m = ins.mnemonic();
    renamed(m)
        && m != Mnemonic::Lea
        && ins.op_count() <= 2
        && (0..ins.op_count()).all(|i| match ins.op_kind(i) {
            OpKind::Register => gpr_ref(ins.op_register(i)).is_some_and(|g| g.size < 8),
            OpKind::Memory => false,
            _ => true,
        })
}

/// A memory operand with 64-bit addressing (base and index 64-bit registers or RIP).
fn addressable(ins: &Instruction) -> bool {
    let ok = |r: Register| r == Register::None || r == Register::RIP || r.is_gpr64();
    ok(ins.memory_base()) && ok(ins.memory_index())
}

fn canonical(v: u64) -> bool {
    ((v << 16) as i64 >> 16) as u64 == v
}

/// Does the baseline tier compile `ins` (`last`: the block's last instruction)?
pub fn covers(ins: &Instruction, last: bool) -> bool {
    if ins.code_size() != iced_x86::CodeSize::Code64
        || ins.has_lock_prefix()
        || ins.has_rep_prefix()
        || ins.has_repne_prefix()
    {
        return false;
    }
    if super::simd::form(ins).is_some() {
        return true;
    }
    let m = ins.mnemonic();
    let high_ok = high_bytes_renamable(ins);
    let operands_ok = (0..ins.op_count()).all(|i| match ins.op_kind(i) {
        OpKind::Register => plain_gpr(ins.op_register(i)) || high_ok,
        OpKind::Memory => addressable(ins),
        OpKind::Immediate8
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => true,
        OpKind::NearBranch64 => canonical(ins.near_branch_target()),
        _ => false,
    });
    if !operands_ok {
        return false;
    }
    match ins.code() {
        Code::Nopd | Code::Nopw | Code::Nopq | Code::Nop_rm16 | Code::Nop_rm32 | Code::Nop_rm64 => {
            return true
        }
        // The moffs forms have no ModRM to rename into.
        Code::Mov_AL_moffs8
        | Code::Mov_AX_moffs16
        | Code::Mov_EAX_moffs32
        | Code::Mov_RAX_moffs64
        | Code::Mov_moffs8_AL
        | Code::Mov_moffs16_AX
        | Code::Mov_moffs32_EAX
        | Code::Mov_moffs64_RAX => return false,
        Code::Push_r64 | Code::Pushq_imm8 | Code::Pushq_imm32 => return true,
        _ if super::simd::control_store(ins) => return true,
        Code::Pop_r64 => return ins.op0_register() != Register::RSP,
        Code::Call_rel32_64
        | Code::Jmp_rel8_64
        | Code::Jmp_rel32_64
        | Code::Retnq
        | Code::Jmp_rm64
        | Code::Call_rm64
        | Code::Jrcxz_rel8_64
        | Code::Jecxz_rel8_64 => return last,
        // Shifts of 32- and 64-bit operands by a constant: the masked count is below the
        // width, so CF is defined; a count of 0 (which changes nothing) is left out.
        Code::Shl_rm32_imm8
        | Code::Shl_rm64_imm8
        | Code::Shr_rm32_imm8
        | Code::Shr_rm64_imm8
        | Code::Sar_rm32_imm8
        | Code::Sar_rm64_imm8
        | Code::Shl_rm32_1
        | Code::Shl_rm64_1
        | Code::Shr_rm32_1
        | Code::Shr_rm64_1
        | Code::Sar_rm32_1
        | Code::Sar_rm64_1
        | Code::Shld_rm32_r32_imm8
        | Code::Shld_rm64_r64_imm8
        | Code::Shrd_rm32_r32_imm8
        | Code::Shrd_rm64_r64_imm8 => return shift_count(ins) != 0,
        // 8- and 16-bit ones (session 37) by a masked count below their width: CF defined.
        Code::Shl_rm8_imm8
        | Code::Shr_rm8_imm8
        | Code::Sar_rm8_imm8
        | Code::Shl_rm8_1
        | Code::Shr_rm8_1
        | Code::Sar_rm8_1
        | Code::Shl_rm16_imm8
        | Code::Shr_rm16_imm8
        | Code::Sar_rm16_imm8
        | Code::Shl_rm16_1
        | Code::Shr_rm16_1
        | Code::Sar_rm16_1 => {
            let bits = 8 * operand_size(ins);
            return (1..bits).contains(&shift_count(ins));
        }
        _ if by_cl(ins) => return true,
        // Sign extensions within RAX, or of RAX into RDX.
        Code::Cbw | Code::Cwde | Code::Cdqe | Code::Cwd | Code::Cdq | Code::Cqo => return true,
        // Renamed, when this host has them (else the host would run TZCNT and LZCNT as BSF
        // and BSR).
        Code::Tzcnt_r16_rm16
        | Code::Tzcnt_r32_rm32
        | Code::Tzcnt_r64_rm64
        | Code::Lzcnt_r16_rm16
        | Code::Lzcnt_r32_rm32
        | Code::Lzcnt_r64_rm64
        | Code::Popcnt_r16_rm16
        | Code::Popcnt_r32_rm32
        | Code::Popcnt_r64_rm64 => return bit_counts_on_host(ins.mnemonic()),
        Code::Imul_r32_rm32
        | Code::Imul_r64_rm64
        | Code::Imul_r32_rm32_imm8
        | Code::Imul_r32_rm32_imm32
        | Code::Imul_r64_rm64_imm8
        | Code::Imul_r64_rm64_imm32
        | Code::Mul_rm32
        | Code::Mul_rm64
        | Code::Imul_rm32
        | Code::Imul_rm64
        | Code::Div_rm32
        | Code::Div_rm64
        | Code::Idiv_rm32
        | Code::Idiv_rm64 => return true,
        _ if super::bit::covers(ins) => return true,
        _ => {}
    }
    if ins.is_jcc_short_or_near() {
        return last;
    }
    // A renamed instruction: at most two operands, the second not a second register of the
    // same family as the first's host register (each gets its own).
    renamed(m) && ins.op_count() <= 2 && (m != Mnemonic::Lea || ins.op0_kind() == OpKind::Register)
}

/// Emit `d` (one [`covers`] accepts); `last`: the block's last instruction, which ends it.
pub fn emit(e: &mut Emit, d: &DecodedInsn, last: bool, dead: bool) -> Result<(), IcedError> {
    let ins = &d.ins;
    let simd = super::simd::form(ins);
    match ins.code() {
        _ if simd.is_some() => super::simd::emit(e, ins, simd.expect("checked"), dead)?,
        _ if super::simd::control_store(ins) => super::simd::emit_control_store(e, ins)?,
        Code::Nopd | Code::Nopw | Code::Nopq | Code::Nop_rm16 | Code::Nop_rm32 | Code::Nop_rm64 => {
        }
        Code::Push_r64 => {
            let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
            push(e, |e| e.load_reg(rax, g))?;
        }
        Code::Pushq_imm8 | Code::Pushq_imm32 => {
            // (Sign-extended: `immediate64` is the raw field, 0xff for `push -1`.)
            let v = ins.immediate(0);
            push(e, move |e| e.a.mov(rax, v))?;
        }
        Code::Pop_r64 => {
            let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
            // (R8 left where it is: a run of POPs reads at growing displacements.)
            let d = e.access_near(reg::RSP, 0, false, 8, true)?;
            e.a.mov(rax, qword_ptr(r9 + r8 + d))?;
            rsp_past_pop(e, d)?;
            e.a.mov(qword_ptr(rdi + gpr_off(g)), rax)?;
            e.reg_written(g);
        }
        Code::Call_rel32_64 => {
            let ret_ip = e.next_ip;
            push(e, move |e| e.a.mov(rax, ret_ip))?;
            e.exit_const(ins.near_branch_target())?;
        }
        Code::Jmp_rel8_64 | Code::Jmp_rel32_64 => e.exit_const(ins.near_branch_target())?,
        Code::Retnq => {
            e.access_at(reg::RSP, 0, false, 8)?;
            e.a.mov(rcx, qword_ptr(r9 + r8))?;
            match e.loop_top {
                // (Back to the top of the loop, or at least a direct exit to its start.)
                Some((start, ..)) if e.ret_to_top => {
                    ret_expecting(e, start)?;
                    e.exit_const(start)?;
                }
                _ => ret_exit(e)?,
            }
        }
        Code::Jmp_rm64 => {
            indirect_target(e, ins, rcx)?;
            e.exit_dyn()?;
        }
        Code::Call_rm64 => {
            call_indirect(e, ins)?;
            e.exit_dyn()?;
        }
        Code::Mul_rm32 | Code::Mul_rm64 | Code::Imul_rm32 | Code::Imul_rm64 => {
            super::muldiv::mul(e, ins, dead)?
        }
        Code::Div_rm32 | Code::Div_rm64 | Code::Idiv_rm32 | Code::Idiv_rm64 => {
            super::muldiv::div(e, ins)?
        }
        _ if super::bit::covers(ins) => match ins.mnemonic() {
            Mnemonic::Bsf | Mnemonic::Bsr => super::bit::scan(e, ins, dead)?,
            _ => super::bit::bit_test(e, ins)?,
        },
        Code::Cbw | Code::Cwde | Code::Cdqe | Code::Cwd | Code::Cdq | Code::Cqo => {
            sign_extend(e, ins)?
        }
        _ if by_cl(ins) => shift_by_cl(e, ins, dead)?,
        _ if ins.is_jcc_short_or_near() => jcc(e, ins)?,
        Code::Jrcxz_rel8_64 | Code::Jecxz_rel8_64 => jrcxz(e, ins)?,
        _ if ins.mnemonic() == Mnemonic::Lea => lea(e, ins)?,
        _ => match super::regs::mov_imm(ins) {
            Some(mov) => super::regs::emit_mov_imm(e, mov)?,
            None => rename(e, ins, dead)?,
        },
    }
    if last && ins.flow_control() == iced_x86::FlowControl::Next {
        // Falling off the block's end (a length cap or a page boundary ended it).
        e.exit_const(e.next_ip)?;
    }
    Ok(())
}

/// Does `ins`, the last instruction of a block, go on to `next` without leaving the block's
/// function when the baseline tier compiles the block followed by the one at `next` (a
/// trace, see `base::compile`): a JMP or CALL to it, a Jcc either way of which is it (the
/// other way exits), or an instruction that falls through to it (a block cut by its
/// length).
pub fn leads_to(ins: &Instruction, next: u64) -> bool {
    match ins.code() {
        Code::Jmp_rel8_64 | Code::Jmp_rel32_64 | Code::Call_rel32_64 => {
            ins.near_branch_target() == next
        }
        _ if ins.is_jcc_short_or_near() => {
            ins.near_branch_target() == next || ins.next_ip() == next
        }
        // Checked at run time: the return address popped must be `next`, and the target of
        // an indirect CALL (with its page: see `emit_to_next`).
        Code::Retnq | Code::Call_rm64 => true,
        _ => ins.flow_control() == iced_x86::FlowControl::Next && ins.next_ip() == next,
    }
}

/// Emit `d`, the last instruction of a trace's block, which goes on to the next block at
/// `next` ([`leads_to`] holds): a JMP nothing, a CALL its push, a Jcc the exit of its other
/// way (the way to `next` jumps over it), a RET its pop and, when the return address is not
/// `next` (the return site of a CALL earlier in the trace), the exit there; an indirect CALL
/// its push and, when the target is not `next` or `guard` (the page of `next`, when the trace
/// has not been there yet) fails, the exit to the target; any other instruction itself.
pub fn emit_to_next(
    e: &mut Emit,
    d: &DecodedInsn,
    next: u64,
    guard: Option<crate::chain::PageExpect>,
    dead: bool,
    replaced: bool,
) -> Result<(), IcedError> {
    let ins = &d.ins;
    match ins.code() {
        Code::Call_rm64 => {
            // As the CALL that ends a block (`emit`), up to the exit.
            call_indirect(e, ins)?;
            super::emit::cmp_const(&mut e.a, rcx, next)?;
            e.host = super::emit::HostFlags::Stale;
            let before = e.branch_state();
            let mut miss = e.a.create_label();
            let mut on = e.a.create_label();
            e.a.jne(miss)?;
            if let Some(g) = guard {
                // (R8 no longer holds the last access's address: the next block forgets it
                // anyway, `Emit::next_part`.)
                let (expect, words) = ((g.off, g.vpn, g.host), [(g.code_page, g.word)]);
                super::check_page(e, expect, words, miss, on)?;
            }
            e.a.jmp(on)?;
            e.a.set_label(&mut miss)?;
            e.exit_dyn()?;
            e.restore(before);
            e.a.set_label(&mut on)
        }
        Code::Jmp_rel8_64 | Code::Jmp_rel32_64 => Ok(()),
        Code::Retnq => {
            e.access_at(reg::RSP, 0, false, 8)?;
            e.a.mov(rcx, qword_ptr(r9 + r8))?;
            ret_expecting(e, next)
        }
        Code::Call_rel32_64 => {
            let ret_ip = e.next_ip;
            push(e, move |e| e.a.mov(rax, ret_ip))
        }
        _ if ins.is_jcc_short_or_near() => jcc_toward(e, ins, next, replaced),
        _ => emit(e, d, false, dead),
    }
}

/// The rest of a RET whose return address is in RCX and whose pop read it through R8/R9
/// (`access_at` RSP): a non-canonical address leaves for the interpreter (#GP at the RET),
/// else RSP moves past it and the block exits there.
fn ret_exit(e: &mut Emit) -> Result<(), IcedError> {
    canonical_or_defer(e, rcx)?;
    e.a.lea(r8, qword_ptr(r8 + 8))?;
    e.a.mov(qword_ptr(rdi + gpr_off(reg::RSP)), r8)?;
    e.exit_dyn()
}

/// The rest of a RET (as [`ret_exit`]) that is expected to return to `rip` (the next block
/// of a trace, or the start of the function: `Emit::ret_to_top`): when it does, RSP moves
/// past the address and the code after this goes on; else the exit to the address popped.
fn ret_expecting(e: &mut Emit, rip: u64) -> Result<(), IcedError> {
    super::emit::cmp_const(&mut e.a, rcx, rip)?;
    e.host = super::emit::HostFlags::Stale;
    let before = e.branch_state();
    let mut same = e.a.create_label();
    e.a.je(same)?;
    ret_exit(e)?;
    e.restore(before);
    e.a.set_label(&mut same)?;
    rsp_past_pop(e, 0)
}

/// RSP moved past the qword a POP or RET read at `[R9 + R8 + d]` (R8 kept: the next access
/// through RSP may take the same hit).
fn rsp_past_pop(e: &mut Emit, d: i32) -> Result<(), IcedError> {
    e.a.lea(r11, qword_ptr(r8 + (d + 8)))?;
    e.a.mov(qword_ptr(rdi + gpr_off(reg::RSP)), r11)?;
    e.reg_moved(reg::RSP, 8);
    Ok(())
}

/// A Jcc one of whose ways, `toward` (its target or its next instruction), the code after
/// it goes on with: the exit of the other way, jumped over on the way `toward`.
/// A capture the instruction before waited with (`Emit::uncaptured`) is taken on the exit
/// path, and on the way on unless `replaced` (the next block's first instruction replaces
/// every status flag before anything can read them, [`replaces_flags_first`]).
fn jcc_toward(
    e: &mut Emit,
    ins: &Instruction,
    toward: u64,
    replaced: bool,
) -> Result<(), IcedError> {
    let c = ins.condition_code();
    let waiting = e.uncaptured.take();
    e.flags_for(reads_carry(c))?;
    let before = e.branch_state();
    let (on, other) = if ins.near_branch_target() == toward {
        (c, ins.next_ip())
    } else {
        (negated(c), ins.near_branch_target())
    };
    let mut cont = e.a.create_label();
    jump_if(&mut e.a, on, cont)?;
    if let Some(w) = waiting {
        e.take_capture(w)?;
    }
    e.exit_const(other)?;
    e.restore(before);
    e.a.set_label(&mut cont)?;
    match waiting {
        Some(w) if !replaced => e.take_capture(w),
        _ => Ok(()),
    }
}

/// Do `insns` (a trace's next block) replace every status flag before anything the tier
/// emits for them can read or clobber them: ADD, SUB, AND, OR, XOR, CMP or TEST of registers
/// and immediates (no memory operand, so no probe and no deferring exit before it), after
/// nothing but MOV, MOVZX, MOVSX and MOVSXD of registers and immediates (whose code leaves
/// the host's flags alone)? Then a capture waiting at the Jcc before them is not needed on
/// the way on.
pub fn replaces_flags_first(insns: &[DecodedInsn]) -> bool {
    use Mnemonic::*;
    for d in insns {
        let ins = &d.ins;
        if !register_operands(ins) {
            return false;
        }
        match ins.mnemonic() {
            Add | Sub | And | Or | Xor | Cmp | Test => return true,
            Mov | Movzx | Movsx | Movsxd => continue,
            _ => return false,
        }
    }
    false
}

/// Are `ins`'s operands general registers and immediates only?
pub(super) fn register_operands(ins: &Instruction) -> bool {
    (0..ins.op_count()).all(|op| match ins.op_kind(op) {
        OpKind::Register => gpr_ref(ins.op_register(op)).is_some(),
        k => matches!(
            k,
            OpKind::Immediate8
                | OpKind::Immediate16
                | OpKind::Immediate32
                | OpKind::Immediate8to16
                | OpKind::Immediate8to32
                | OpKind::Immediate8to64
                | OpKind::Immediate32to64
                | OpKind::Immediate64
        ),
    })
}

/// The condition that holds exactly when `c` does not.
fn negated(c: ConditionCode) -> ConditionCode {
    use ConditionCode::*;
    match c {
        o => no,
        no => o,
        b => ae,
        ae => b,
        e => ne,
        ne => e,
        be => a,
        a => be,
        s => ns,
        ns => s,
        p => np,
        np => p,
        l => ge,
        ge => l,
        le => g,
        g => le,
        None => None,
    }
}

/// The target of JMP/CALL r/m64 into `dst` (RCX or RDX): from its register, or loaded
/// through the probe; a non-canonical one leaves for the interpreter (#GP at the branch).
fn indirect_target(e: &mut Emit, ins: &Instruction, dst: AsmRegister64) -> Result<(), IcedError> {
    if ins.op0_kind() == OpKind::Memory {
        access(e, ins, false, 8)?;
        e.a.mov(dst, qword_ptr(r9 + r8))?;
    } else {
        let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
        e.load_reg(dst, g)?;
    }
    canonical_or_defer(e, dst)
}

/// CALL r/m64 up to its jump: the target read first (its address may use RSP), in RDX
/// across the push of the return address, then in RCX.
fn call_indirect(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    indirect_target(e, ins, rdx)?;
    let ret_ip = e.next_ip;
    push(e, move |e| e.a.mov(rax, ret_ip))?;
    e.a.mov(rcx, rdx)
}

/// A branch target in `target` that is not canonical leaves for the interpreter, which runs
/// the branch and raises #GP (clobbers RAX and the host's flags).
fn canonical_or_defer(e: &mut Emit, target: AsmRegister64) -> Result<(), IcedError> {
    e.a.mov(rax, target)?;
    e.a.shl(rax, 16)?;
    e.a.sar(rax, 16)?;
    e.a.cmp(rax, target)?;
    let defer = e.defer_label()?;
    e.a.jne(defer)?;
    e.host = super::emit::HostFlags::Stale;
    Ok(())
}

/// PUSH: the value `value` puts in RAX to `[RSP - 8]`, then RSP lowered.
fn push(
    e: &mut Emit,
    value: impl FnOnce(&mut Emit) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    e.access_at(reg::RSP, -8, true, 8)?;
    value(e)?;
    e.a.mov(qword_ptr(r9 + r8), rax)?;
    e.a.mov(qword_ptr(rdi + gpr_off(reg::RSP)), r8)?;
    e.reg_moved(reg::RSP, -8);
    Ok(())
}

/// Does the condition read CF?
fn reads_carry(c: ConditionCode) -> bool {
    use ConditionCode::*;
    matches!(c, b | ae | be | a)
}

/// Jcc: both ways leave the block (the taken way's exit after the other's).
fn jcc(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    jcc_toward(e, ins, ins.near_branch_target(), false)?;
    e.exit_const(ins.near_branch_target())
}

/// JRCXZ/JECXZ: the guest's RCX (ECX) tested on the host, each way an exit. The host's
/// flags are then not the guest's; captured ones stay in R10 for the exits to merge.
fn jrcxz(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    e.load_reg(rcx, reg::RCX)?;
    if ins.code() == Code::Jecxz_rel8_64 {
        e.a.test(ecx, ecx)?;
    } else {
        e.a.test(rcx, rcx)?;
    }
    e.host = super::emit::HostFlags::Stale;
    let before = e.branch_state();
    let mut zero = e.a.create_label();
    e.a.je(zero)?;
    e.exit_const(ins.next_ip())?;
    e.restore(before);
    e.a.set_label(&mut zero)?;
    e.exit_const(ins.near_branch_target())
}

fn jump_if(a: &mut CodeAssembler, c: ConditionCode, l: CodeLabel) -> Result<(), IcedError> {
    type C = ConditionCode;
    match c {
        C::o => a.jo(l),
        C::no => a.jno(l),
        C::b => a.jb(l),
        C::ae => a.jae(l),
        C::e => a.je(l),
        C::ne => a.jne(l),
        C::be => a.jbe(l),
        C::a => a.ja(l),
        C::s => a.js(l),
        C::ns => a.jns(l),
        C::p => a.jp(l),
        C::np => a.jnp(l),
        C::l => a.jl(l),
        C::ge => a.jge(l),
        C::le => a.jle(l),
        C::g => a.jg(l),
        C::None => unreachable!("a Jcc has a condition"),
    }
}

/// LEA: the effective address (no segment base), truncated to the destination's size;
/// computed in RCX, so that R8 and R9 stay the last access's.
fn lea(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    let mut m = *ins;
    m.set_segment_prefix(Register::None);
    e.addr_into(&m, rcx)?;
    let g = gpr_ref(ins.op0_register()).map_or(0, |g| g.index);
    e.reg_written(g);
    let slot = rdi + gpr_off(g);
    match gpr_ref(ins.op0_register()).map_or(8, |g| g.size) {
        2 => e.a.mov(word_ptr(slot), cx),
        4 => {
            e.a.mov(ecx, ecx)?;
            e.a.mov(qword_ptr(slot), rcx)
        }
        _ => e.a.mov(qword_ptr(slot), rcx),
    }
}

/// The host register of operand `op` (0: RAX's family, 1: RDX's) in `size` bytes.
pub(super) fn host_reg(op: u32, size: u8) -> Register {
    use Register::*;
    match (op, size) {
        (0, 1) => AL,
        (0, 2) => AX,
        (0, 4) => EAX,
        (0, _) => RAX,
        (_, 1) => DL,
        (_, 2) => DX,
        (_, 4) => EDX,
        (_, _) => RDX,
    }
}

/// A renamed instruction: memory operand through the probe, register operands loaded,
/// the host instruction, the flags captured (unless `dead`, see [`dead_flags`]), the
/// destination register stored.
fn rename(e: &mut Emit, ins: &Instruction, dead: bool) -> Result<(), IcedError> {
    use Mnemonic::*;
    let m = ins.mnemonic();
    let masks = flag_masks(ins);
    // Does the instruction read / write its first operand?
    let writes0 = !matches!(m, Cmp | Test);
    let reads0 =
        !matches!(m, Mov | Movzx | Movsx | Movsxd | Tzcnt | Lzcnt | Popcnt) && !is_setcc(m);
    let mut h = *ins;
    for op in 0..ins.op_count() {
        if ins.op_kind(op) == OpKind::Memory {
            let write = op == 0 && writes0;
            let size = ins.memory_size().size() as u32;
            // (R8 left where it is: the operand takes the displacement. Not for a shift
            // whose OF is that of a shift by 1, which reads the operand at `[R9 + R8]`.)
            let d = access_near(e, ins, write, size, !shift_of_fix(ins))?;
            memory_at_r9(&mut h, d);
        }
    }
    // INC/DEC with the guest's CF in the host's flags: they replace every status flag then
    // (and drop the capture awaiting its merge below, as any such instruction).
    let carried = matches!(m, Inc | Dec) && !dead && e.carry_through()?;
    let masks = if carried {
        Some((STATUS, STATUS))
    } else {
        masks
    };
    match masks {
        _ if reads_condition(ins) => e.flags_for(reads_carry(ins.condition_code()))?,
        // ADC/SBB read CF and replace every status flag: the guest's flags in the host's, a
        // capture awaiting its merge consumed by them.
        Some(_) if matches!(m, Adc | Sbb) => {
            e.flags_for(true)?;
            e.replace_pending();
        }
        // Every status flag replaced: an earlier capture is dropped unmerged.
        Some((_, clear)) if clear == STATUS => e.replace_pending(),
        // The merge of an earlier capture goes first (it clobbers the host's flags).
        Some(_) => e.flush()?,
        None => {}
    }
    let lazy = if e.lazy_ok { lazy_logic(ins) } else { None };
    // `add rsp, 8`, `and rax, -16`: on the register's slot in place, nothing loaded or stored
    // — unless the flags go lazily to the exits (their record wants the result in RAX).
    let in_place = super::regs::rmw_imm(ins).filter(|_| lazy.is_none());
    let mut dest = None;
    // A second operand that is a guest register is read from its slot by the host
    // instruction itself (`add rax, [rdi + slot]`) rather than loaded into RDX first.
    let slot_source = super::regs::slot_source_form(ins);
    for op in 0..ins.op_count() {
        let loaded = ins.op_kind(op) == OpKind::Register
            && !(op == 1 && slot_source.is_some())
            && in_place.is_none();
        if !loaded {
            continue;
        }
        let g = gpr_ref(ins.op_register(op)).expect("covered: a plain GPR");
        // A source that is the destination register itself (`test eax, eax`, `xor eax,
        // eax`, `sbb rax, rax`), already loaded: RAX's family again, no second load (the
        // covered instructions write no source operand). Two-operand forms only: SHLD/SHRD's
        // OF (`of_by_one`) reads the source from RDX.
        let again = op > 0
            && reads0
            && ins.op_count() == 2
            && ins.op_kind(0) == OpKind::Register
            && ins.op_register(op) == ins.op_register(0);
        let host = if op == 0 { rax } else { rdx };
        // `xor eax, eax`, `sub rax, rax`, `sbb eax, eax`: of 32 or 64 bits, the result and the
        // flags do not depend on the register's value (the host computes them from any), so
        // it is not loaded. (Narrower, the host operation would keep RAX's other bytes.)
        let value_unused = op == 0
            && g.size >= 4
            && matches!(m, Xor | Sub | Sbb)
            && ins.op_count() == 2
            && ins.op_kind(1) == OpKind::Register
            && ins.op_register(1) == ins.op_register(0);
        // A 1- or 2-byte destination is loaded whole even when the instruction does not
        // read it: the host operation keeps the rest, and the store writes all 8 bytes
        // (`Emit::store_reg`).
        let narrow = op == 0 && writes0 && g.size < 4 && !g.high;
        if (op > 0 || reads0 || narrow) && !again && !value_unused {
            e.load_reg(host, g.index)?;
        }
        let family = if again { 0 } else { op };
        h.set_op_register(
            op,
            match (g.high, family) {
                // (`covers`: only where the renamed instruction needs no REX prefix.)
                (true, 0) => Register::AH,
                (true, _) => Register::DH,
                (false, _) => host_reg(family, g.size),
            },
        );
        if op == 0 && writes0 {
            dest = Some((g.index, g.size, g.high));
        }
    }
    if let Some(form) = slot_source {
        h = super::regs::with_slot_source(&h, ins, form)?;
    }
    if let Some(g) = in_place {
        h = super::regs::on_slot(ins, g)?;
    }
    let of_fix = shift_of_fix(ins) && !dead;
    if of_fix {
        of_by_one(e, ins)?;
    }
    e.host_insn(h)?;
    // The destination is stored before the capture (a MOV keeps the host's flags), which
    // then has RAX to itself — but IMUL's SF/PF fix reads the product in RAX after it.
    let imul_fix = m == Imul && !dead;
    let changed = |e: &mut Emit, g: usize| match rsp_step(ins) {
        Some(d) => e.reg_moved(g, d),
        None => e.reg_written(g),
    };
    if let Some(g) = in_place {
        changed(e, g);
    }
    let store = |e: &mut Emit| -> Result<(), IcedError> {
        if let Some((g, size, high)) = dest {
            if high {
                e.store_high_byte(g)?;
            } else {
                e.store_reg(g, rax, size)?;
            }
            changed(e, g);
        }
        Ok(())
    };
    if !imul_fix {
        store(e)?;
    }
    match (masks, lazy) {
        (Some(_), _) if dead => e.host = super::emit::HostFlags::Stale,
        (Some(_), Some(size)) => {
            if size == 4 && m == Test {
                // (TEST loaded the whole register: the record's result is its low 32 bits,
                // as AND/OR/XOR leave theirs. MOV keeps the host's flags for the Jcc.)
                e.a.mov(eax, eax)?;
            }
            e.lazy_logic(size)
        }
        // Read by the ADC/SBB right after, from the host's flags (`Emit::carry_next`): an
        // ALU operation's are the guest's whole (AF aside), not captured.
        (Some((_, clear)), None)
            if e.carry_next
                && clear == STATUS
                && matches!(m, Add | Sub | Cmp | Neg | Adc | Sbb | And | Or | Xor | Test) =>
        {
            e.host = super::emit::HostFlags::Guest
        }
        (Some((set, clear)), None) if imul_fix => e.capture(set, clear)?,
        (Some((set, clear)), None) if e.defer_ok && !of_fix && set & CF != 0 => {
            e.defer_capture(set, clear)
        }
        (Some((set, clear)), None) => e.capture_in_rax(set, clear)?,
        (None, _) => {}
    }
    if imul_fix {
        // SF and PF of the product's low half (the destination), as the interpreter has them.
        e.captured_sf_pf_of_rax(wide(ins))?;
        store(e)?;
    }
    if of_fix {
        // The host's own OF may differ from the capture's: conditions restore from it.
        e.captured_of_from_r11()?;
    }
    Ok(())
}

/// The size of the result a logic operation leaves in RAX, when its flags can be left lazy
/// (`Emit::lazy_logic`): AND, OR and XOR into a 32- or 64-bit register, and TEST of such a
/// register with itself (whose result is the register, loaded into RAX).
fn lazy_logic(ins: &Instruction) -> Option<u8> {
    use Mnemonic::*;
    if ins.op0_kind() != OpKind::Register {
        return None;
    }
    let g = gpr_ref(ins.op0_register()).filter(|g| !g.high && g.size >= 4)?;
    let ok = match ins.mnemonic() {
        And | Or | Xor => true,
        Test => ins.op1_kind() == OpKind::Register && ins.op1_register() == ins.op0_register(),
        _ => false,
    };
    ok.then_some(g.size)
}

/// Does this host run TZCNT (BMI1), LZCNT (LZCNT) and POPCNT (POPCNT)?
fn bit_counts_on_host(m: Mnemonic) -> bool {
    static HOST: std::sync::OnceLock<[bool; 3]> = std::sync::OnceLock::new();
    let h = HOST.get_or_init(|| {
        [
            std::arch::is_x86_feature_detected!("bmi1"),
            std::arch::is_x86_feature_detected!("lzcnt"),
            std::arch::is_x86_feature_detected!("popcnt"),
        ]
    });
    match m {
        Mnemonic::Tzcnt => h[0],
        Mnemonic::Lzcnt => h[1],
        _ => h[2],
    }
}

/// CBW/CWDE/CDQE (within RAX) and CWD/CDQ/CQO (RAX's sign into RDX): the host's own on the
/// guest's registers; a 16-bit result keeps the rest of its register.
fn sign_extend(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    e.load_reg(rax, reg::RAX)?;
    let into_rdx = matches!(ins.code(), Code::Cwd | Code::Cdq | Code::Cqo);
    if ins.code() == Code::Cwd {
        e.load_reg(rdx, reg::RDX)?;
    }
    e.host_insn(*ins)?;
    let (g, host) = if into_rdx {
        (reg::RDX, rdx)
    } else {
        (reg::RAX, rax)
    };
    e.store_reg(g, host, 8)?;
    e.reg_written(g);
    Ok(())
}

/// The access to `ins`'s memory operand (`size` bytes, through the read or the `write` table):
/// its linear address into R8 and its page's host delta into R9, or the deferring exit.
pub(super) fn access(
    e: &mut Emit,
    ins: &Instruction,
    write: bool,
    size: u32,
) -> Result<(), IcedError> {
    access_near(e, ins, write, size, false).map(|_| ())
}

/// [`access`], where with `keep_r8` an access through the last access's hit leaves R8 where
/// it is and returns the operand's distance from it (`Emit::access_near`; 0 otherwise).
fn access_near(
    e: &mut Emit,
    ins: &Instruction,
    write: bool,
    size: u32,
    keep_r8: bool,
) -> Result<i32, IcedError> {
    match simple_base(ins) {
        Some(g) => {
            let disp = ins.memory_displacement64() as i64;
            e.access_near(g, disp, write, size, keep_r8)
        }
        None => {
            e.addr(ins)?;
            e.probe(write, size)?;
            Ok(0)
        }
    }
}

/// `h`'s memory operand renamed to `[R9 + R8 + d]`, the host address (where [`access`] put
/// the linear address and its page's host delta; `d` is 0 but after [`access_near`]).
pub(super) fn memory_at_r9(h: &mut Instruction, d: i32) {
    h.set_memory_base(Register::R9);
    h.set_memory_index(Register::R8);
    h.set_memory_index_scale(1);
    h.set_memory_displacement64(d as i64 as u64);
    // (64-bit addressing: a displacement of 8 bytes in iced's terms, encoded in 4.)
    h.set_memory_displ_size(match d {
        0 => 0,
        _ if i8::try_from(d).is_ok() => 1,
        _ => 8,
    });
    h.set_segment_prefix(Register::None);
}

/// The base register of a memory operand addressed as base plus displacement only (no
/// index, no FS/GS base), for [`Emit::access_at`].
fn simple_base(ins: &Instruction) -> Option<usize> {
    let base = ins.memory_base();
    let plain = ins.memory_index() == Register::None
        && !matches!(ins.memory_segment(), Register::FS | Register::GS)
        && base != Register::RIP
        && base != Register::None;
    plain
        .then(|| gpr_ref(base).filter(|g| g.size == 8).map(|g| g.index))
        .flatten()
}

/// `add rsp, imm` / `sub rsp, imm`: how far RSP moves.
fn rsp_step(ins: &Instruction) -> Option<i64> {
    let imm = matches!(
        ins.op1_kind(),
        OpKind::Immediate8to64 | OpKind::Immediate32to64
    );
    if ins.op0_register() != Register::RSP || !imm {
        return None;
    }
    match ins.mnemonic() {
        // (Sign-extended, as the instruction takes it.)
        Mnemonic::Add => Some(ins.immediate(1) as i64),
        Mnemonic::Sub => Some((ins.immediate(1) as i64).wrapping_neg()),
        _ => None,
    }
}
