//! Data movement: MOV (incl. moffs and segment-register sources), MOVZX/MOVSX/MOVSXD, CMOVcc,
//! SETcc, BSWAP, MOVBE, LEA, CBW/CWDE/CDQE/CWD/CDQ/CQO, the NOP family (incl. hint NOPs and
//! prefetches), LAHF/SAHF and the flag instructions CLC/STC/CMC/CLD/STD.
//! XCHG, CMPXCHG*, XADD live in `atomic.rs`.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags;
use crate::operand::{mask, op_size, sext, write_gpr, GprRef};
use crate::ops::check_no_lock;
use crate::state::flags::{AF, CF, DF, PF, SF, ZF};
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// CMOVcc (any condition).
pub fn is_cmovcc(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Cmovo
            | Mnemonic::Cmovno
            | Mnemonic::Cmovb
            | Mnemonic::Cmovae
            | Mnemonic::Cmove
            | Mnemonic::Cmovne
            | Mnemonic::Cmovbe
            | Mnemonic::Cmova
            | Mnemonic::Cmovs
            | Mnemonic::Cmovns
            | Mnemonic::Cmovp
            | Mnemonic::Cmovnp
            | Mnemonic::Cmovl
            | Mnemonic::Cmovge
            | Mnemonic::Cmovle
            | Mnemonic::Cmovg
    )
}

/// SETcc (any condition).
pub fn is_setcc(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Seto
            | Mnemonic::Setno
            | Mnemonic::Setb
            | Mnemonic::Setae
            | Mnemonic::Sete
            | Mnemonic::Setne
            | Mnemonic::Setbe
            | Mnemonic::Seta
            | Mnemonic::Sets
            | Mnemonic::Setns
            | Mnemonic::Setp
            | Mnemonic::Setnp
            | Mnemonic::Setl
            | Mnemonic::Setge
            | Mnemonic::Setle
            | Mnemonic::Setg
    )
}

/// The instructions that execute as NOPs (the `nop` handler: nothing but the LOCK check): 90
/// (incl. 66 90), 0F 1F /0, PAUSE, ENDBR32/64, and the hint-NOP space 0F 18..0F 1F (reserved
/// NOPs, prefetches, CLDEMOTE). Prefetch hints never fault. RDSSPD/Q sit in the same space and
/// execute as NOPs while CET shadow stacks are off (our CPUID has no CET), so the destination
/// register is left unchanged. lockstep-jit lowers the same set as NOPs.
pub fn runs_as_nop(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Nop
            | Mnemonic::Reservednop
            | Mnemonic::Pause
            | Mnemonic::Endbr32
            | Mnemonic::Endbr64
            | Mnemonic::Prefetch
            | Mnemonic::Prefetchnta
            | Mnemonic::Prefetcht0
            | Mnemonic::Prefetcht1
            | Mnemonic::Prefetcht2
            | Mnemonic::Prefetchw
            | Mnemonic::Prefetchwt1
            | Mnemonic::Prefetchit0
            | Mnemonic::Prefetchit1
            | Mnemonic::Cldemote
            | Mnemonic::Rdsspd
            | Mnemonic::Rdsspq
    )
}

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Mov => return lookup_mov(ins),
        Mnemonic::Movzx => movzx,
        Mnemonic::Xlatb => xlat,
        Mnemonic::Movsx | Mnemonic::Movsxd => movsx,
        m if is_cmovcc(m) => cmovcc,
        m if is_setcc(m) => setcc,
        Mnemonic::Bswap => bswap,
        Mnemonic::Movbe => movbe,
        Mnemonic::Lea => lea,
        Mnemonic::Cbw | Mnemonic::Cwde | Mnemonic::Cdqe => cbw,
        Mnemonic::Cwd | Mnemonic::Cdq | Mnemonic::Cqo => cwd,
        m if runs_as_nop(m) => nop,
        Mnemonic::Lahf => lahf,
        Mnemonic::Sahf => sahf,
        Mnemonic::Clc => clc,
        Mnemonic::Stc => stc,
        Mnemonic::Cmc => cmc,
        Mnemonic::Cld => cld,
        Mnemonic::Std => std_,
        _ => return crate::ops::atomic::lookup(ins),
    })
}

/// MOV forms: general, moffs and immediate forms go to [`mov`], segment-register forms to their
/// own handlers; control/debug/test-register moves are left to the system family.
fn lookup_mov(ins: &Instruction) -> Option<Handler> {
    let reg_op = |n: u32| (ins.op_kind(n) == OpKind::Register).then(|| ins.op_register(n));
    for n in 0..2 {
        if let Some(r) = reg_op(n) {
            if r.is_cr() || r.is_dr() || r.is_tr() {
                return None;
            }
        }
    }
    if reg_op(0).is_some_and(|r| r.is_segment_register()) {
        return Some(mov_to_sreg);
    }
    if reg_op(1).is_some_and(|r| r.is_segment_register()) {
        return Some(mov_from_sreg);
    }
    Some(mov)
}

fn mov(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 1)?;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// MOV r/m, Sreg: the visible selector. A 32/64-bit register destination gets it zero-extended,
/// a 16-bit one (66h) keeps bits 16..63 (measured on the host); memory always gets 16 bits.
fn mov_from_sreg(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let i = crate::operand::sreg_index(ins.op1_register())
        .ok_or(Fault::ud("MOV from a non-existent segment register"))?;
    let sel = x.cpu.state.seg[i].selector as u64;
    x.write_op(ins, 0, sel)?;
    Ok(())
}

fn mov_to_sreg(_: &mut Ctx, _: &Instruction) -> Result<(), Trap> {
    Err(Fault::ud("MOV to segment register not implemented").into())
}

fn movzx(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 1)?;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// MOVSX and MOVSXD (the r16/r32 MOVSXD forms are plain moves: the source is as wide as the
/// destination).
fn movsx(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 1)?;
    x.write_op(ins, 0, sext(v, op_size(ins, 1)))?;
    Ok(())
}

/// CMOVcc: the source is always read (a memory source faults even when the condition is
/// false); a 32-bit destination is zero-extended even when nothing moves.
fn cmovcc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let src = x.read_op(ins, 1)?;
    if flags::cond(x.cpu.state.rflags, ins.condition_code()) {
        x.write_op(ins, 0, src)?;
    } else if op_size(ins, 0) == 4 {
        let cur = x.read_op(ins, 0)?;
        x.write_op(ins, 0, cur)?;
    }
    Ok(())
}

fn setcc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = flags::cond(x.cpu.state.rflags, ins.condition_code()) as u64;
    x.write_op(ins, 0, v)?;
    Ok(())
}

/// Byte-reverse a `size`-byte value. The 16-bit form (66 0F C8+r) is undefined in the manual;
/// this host clears the low 16 bits of the register (bits 16..63 unchanged), so it yields 0.
pub fn bswap_value(v: u64, size: u8) -> u64 {
    match size {
        8 => v.swap_bytes(),
        4 => (v as u32).swap_bytes() as u64,
        2 => 0,
        _ => v & mask(size),
    }
}

fn bswap(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let v = x.read_op(ins, 0)?;
    x.write_op(ins, 0, bswap_value(v, op_size(ins, 0)))?;
    Ok(())
}

/// MOVBE: a load or store with the bytes reversed (16-bit: a real byte swap).
fn movbe(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let v = x.read_op(ins, 1)?;
    let r = match size {
        2 => (v as u16).swap_bytes() as u64,
        _ => bswap_value(v, size),
    };
    x.write_op(ins, 0, r)?;
    Ok(())
}

/// XLAT/XLATB: AL = seg:[rBX + zero-extended AL] (DS unless overridden; the address size picks
/// RBX, EBX or BX and wraps the sum).
fn xlat(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    let sum = st.gpr[reg::RBX].wrapping_add(st.gpr[reg::RAX] & 0xff);
    let off = match ins.memory_base() {
        iced_x86::Register::EBX => sum & 0xffff_ffff,
        iced_x86::Register::BX => sum & 0xffff,
        _ => sum,
    };
    let a = x.seg_linear_checked(ins.memory_segment(), off, 1, false)?;
    let v = x.read(a, 1)?;
    crate::operand::write_reg(&mut x.cpu.state, iced_x86::Register::AL, v);
    Ok(())
}

/// LEA: the offset (no segment base) at the address size, truncated to the operand size by the
/// register write (a 32-bit destination zero-extends, a 16-bit one merges).
fn lea(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.op1_kind() != OpKind::Memory {
        return Err(Fault::ud("LEA with a register source").into());
    }
    let off = x.effective_offset(ins);
    x.write_op(ins, 0, off)?;
    Ok(())
}

/// CBW/CWDE/CDQE: sign-extend the low half of the accumulator into the whole of it.
fn cbw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size: u8 = match ins.code() {
        Code::Cbw => 2,
        Code::Cwde => 4,
        _ => 8,
    };
    let a = x.cpu.state.gpr[reg::RAX];
    let v = sext(a, size / 2);
    write_gpr(&mut x.cpu.state, gpr(reg::RAX, size), v);
    Ok(())
}

/// CWD/CDQ/CQO: fill the data register with the accumulator's sign.
fn cwd(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size: u8 = match ins.code() {
        Code::Cwd => 2,
        Code::Cdq => 4,
        _ => 8,
    };
    let a = sext(x.cpu.state.gpr[reg::RAX], size);
    let v = if (a as i64) < 0 { u64::MAX } else { 0 };
    write_gpr(&mut x.cpu.state, gpr(reg::RDX, size), v);
    Ok(())
}

fn gpr(index: usize, size: u8) -> GprRef {
    GprRef {
        index,
        size,
        high: false,
    }
}

/// All NOP forms: no memory access (a NOP's or prefetch's memory operand is never touched).
fn nop(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Ok(())
}

/// LAHF image of RFLAGS: SF:ZF:0:AF:0:PF:1:CF.
pub fn lahf_value(rflags: u64) -> u64 {
    (rflags & (SF | ZF | AF | PF | CF)) | 2
}

fn lahf(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let ah = lahf_value(x.cpu.state.rflags);
    write_gpr(
        &mut x.cpu.state,
        GprRef {
            index: reg::RAX,
            size: 1,
            high: true,
        },
        ah,
    );
    Ok(())
}

/// SAHF loads SF, ZF, AF, PF and CF from AH; OF and everything else stay.
fn sahf(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let ah = (x.cpu.state.gpr[reg::RAX] >> 8) & 0xff;
    flags::set_status(&mut x.cpu.state, SF | ZF | AF | PF | CF, ah);
    Ok(())
}

fn set_flag_bits(x: &mut Ctx, ins: &Instruction, clear: u64, set: u64) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    st.rflags = (st.rflags & !clear) | set;
    Ok(())
}

fn clc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    set_flag_bits(x, ins, CF, 0)
}

fn stc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    set_flag_bits(x, ins, 0, CF)
}

fn cmc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let cf = x.cpu.state.rflags & CF;
    set_flag_bits(x, ins, CF, cf ^ CF)
}

fn cld(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    set_flag_bits(x, ins, DF, 0)
}

fn std_(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    set_flag_bits(x, ins, 0, DF)
}

#[cfg(test)]
#[path = "mov_tests.rs"]
pub(crate) mod tests;
