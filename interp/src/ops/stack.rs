//! Stack instructions: PUSH/POP (register, memory, immediate, segment register), PUSHF/POPF with
//! the privilege rules, ENTER (incl. nesting) and LEAVE.
//!
//! RSP only changes once every access of the instruction has succeeded (`Ctx::push`/`pop`/
//! `peek_stack` guarantee it for single accesses; multi-access instructions probe first).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::operand::{mask, op_size, write_gpr, GprRef};
use crate::ops::check_no_lock;
use crate::state::flags::{AC, AF, CF, DF, FIXED1, ID, IF, IOPL, NT, OF, PF, RF, SF, TF, VM, ZF};
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    let size = || ins.stack_pointer_increment().unsigned_abs();
    Some(match ins.mnemonic() {
        Mnemonic::Push => {
            if ins.op0_kind() == OpKind::Register && ins.op0_register().is_segment_register() {
                sized(size(), push_sreg::<2>, push_sreg::<4>, push_sreg::<8>)
            } else {
                push
            }
        }
        // POP Sreg belongs to the segment family (looked up first).
        Mnemonic::Pop => pop,
        Mnemonic::Pushf | Mnemonic::Pushfd | Mnemonic::Pushfq => {
            sized(size(), pushf::<2>, pushf::<4>, pushf::<8>)
        }
        Mnemonic::Popf | Mnemonic::Popfd | Mnemonic::Popfq => {
            sized(size(), popf::<2>, popf::<4>, popf::<8>)
        }
        Mnemonic::Enter => match ins.code() {
            Code::Enterw_imm16_imm8 => enter::<2>,
            Code::Enterd_imm16_imm8 => enter::<4>,
            _ => enter::<8>,
        },
        Mnemonic::Leave => match ins.code() {
            Code::Leavew => leave::<2>,
            Code::Leaved => leave::<4>,
            _ => leave::<8>,
        },
        _ => return None,
    })
}

/// POPF can set IF or TF: end the block so that a pending interrupt or the single-step trap is
/// seen at the next boundary. (Wire into `ops::ends_block`.)
pub fn ends_block(ins: &Instruction) -> bool {
    matches!(
        ins.mnemonic(),
        Mnemonic::Popf | Mnemonic::Popfd | Mnemonic::Popfq
    )
}

fn sized(size: u32, h2: Handler, h4: Handler, h8: Handler) -> Handler {
    match size {
        2 => h2,
        4 => h4,
        _ => h8,
    }
}

/// Checked linear address of an `S`-byte stack access at offset `off` (wrapped to the stack
/// width; outside 64-bit mode SS's limit and type are checked, #SS(0)).
#[inline]
fn stack_lin<const S: u8>(x: &mut Ctx, off: u64, write: bool) -> Result<u64, Fault> {
    x.stack_addr(off, S, write)
}

/// PUSH r/m, r, imm: the value is read first (PUSH RSP pushes the old RSP; PUSH [RSP+d]
/// addresses with the old RSP). Immediates arrive sign-extended to the operand size.
fn push(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let v = x.read_op(ins, 0)?;
    x.push(v, size)?;
    Ok(())
}

/// PUSH Sreg with an `S`-byte operand: the selector, zero-extended (this host writes all
/// 8 bytes for PUSH FS/GS in 64-bit mode; the upper bytes become zero).
fn push_sreg<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let i = crate::operand::sreg_index(ins.op0_register())
        .ok_or(Fault::ud("PUSH of a non-existent segment register"))?;
    let sel = x.cpu.state.seg[i].selector as u64;
    x.push(sel, S)?;
    Ok(())
}

/// POP r/m. To a register: RSP moves, then the register is written (so POP RSP loads the
/// popped value). To memory: the address is computed with RSP already incremented (Intel);
/// if the store faults RSP is restored.
fn pop(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    if ins.op0_kind() == OpKind::Register {
        let v = x.pop(size)?;
        x.write_op(ins, 0, v)?;
        return Ok(());
    }
    let v = x.peek_stack(0, size)?;
    let saved = x.cpu.state.gpr[reg::RSP];
    x.add_rsp(size as u64);
    if let Err(e) = x.write_op(ins, 0, v) {
        x.cpu.state.gpr[reg::RSP] = saved;
        return Err(e.into());
    }
    Ok(())
}

/// Image of RFLAGS that PUSHF stores: RF and VM read as 0.
pub fn pushf_value(rflags: u64, size: u8) -> u64 {
    rflags & !(RF | VM) & mask(size)
}

/// PUSHF: in virtual-8086 mode with IOPL < 3, #GP(0) (no VME).
fn pushf<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    if st.rflags & VM != 0 && st.iopl() < 3 {
        return Err(Fault::GP0.into());
    }
    let v = pushf_value(x.cpu.state.rflags, S);
    x.push(v, S)?;
    Ok(())
}

/// RFLAGS after POPF/POPFD/POPFQ (real mode: pass CPL 0; virtual-8086 mode with IOPL 3:
/// CPL 3). Status flags, TF, DF, NT, AC and ID load; IOPL only at CPL 0; IF only when
/// CPL <= IOPL; VM, VIP/VIF and the reserved bits are unaffected; bit 1 is set; RF ends up
/// clear. A 16-bit POPF touches bits 0..15 only. (Matches this host at CPL 3, IOPL 0.)
pub fn popf_value(old: u64, popped: u64, cpl: u8, iopl: u8, size: u8) -> u64 {
    let mut modifiable = CF | PF | AF | ZF | SF | TF | DF | OF | NT | AC | ID;
    if cpl == 0 {
        modifiable |= IOPL;
    }
    if cpl <= iopl {
        modifiable |= IF;
    }
    modifiable &= mask(size);
    let new = (old & !modifiable) | (popped & modifiable);
    (new & !(RF | VM)) | (old & VM) | FIXED1
}

fn popf<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &x.cpu.state;
    // Virtual-8086 mode without VME: POPF needs IOPL 3.
    if st.rflags & VM != 0 && st.iopl() < 3 {
        return Err(Fault::GP0.into());
    }
    let v = x.peek_stack(0, S)?;
    let st = &x.cpu.state;
    let old = st.rflags;
    let new = popf_value(old, v, st.cpl(), st.iopl(), S);
    x.add_rsp(S as u64);
    x.cpu.state.rflags = new;
    if old & IF == 0 && new & IF != 0 {
        // An interrupt may now be deliverable: let the machine look right after this.
        x.cpu.yield_requested = true;
    }
    // An AC change needs no TLB flush: the TLB never holds a translation whose outcome
    // depends on AC under SMAP (see `mmu::Tlb`).
    Ok(())
}

/// ENTER imm16, imm8 with `S`-byte frame pointers. Level = imm8 mod 32.
/// Push RBP; FrameTemp = RSP; for level > 0 copy level-1 frame pointers from [RBP - i*S]
/// (addressed with the full RBP, as on the host) and push FrameTemp; then RBP = FrameTemp
/// (a 16-bit form writes BP only) and RSP -= imm16. Every read, every push slot and a write of
/// S bytes at the final RSP (as on the host) is checked before anything changes.
fn enter<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = S as u64;
    let alloc = ins.immediate16() as u64;
    let level = (ins.immediate8_2nd() & 31) as u64;
    let rsp = x.cpu.state.gpr[reg::RSP];
    let rbp = x.cpu.state.gpr[reg::RBP];
    // The pushes are written one at a time, as the hardware does: a nested-frame slot read
    // after an earlier push sees that push, and a fault on a later access leaves the earlier
    // pushes in memory (registers stay unchanged). Measured on the reference host.
    let slot = |k: u64| rsp.wrapping_sub(size * (k + 1));
    let mut n = 0u64;
    let lin = stack_lin::<S>(x, slot(n), true)?;
    x.write(lin, S, rbp & mask(S))?;
    n += 1;
    let frame_temp = slot(0);
    if level > 0 {
        for i in 1..level {
            let lin = stack_lin::<S>(x, rbp.wrapping_sub(i * size), false)?;
            let v = x.read(lin, S)?;
            let lin = stack_lin::<S>(x, slot(n), true)?;
            x.write(lin, S, v)?;
            n += 1;
        }
        let lin = stack_lin::<S>(x, slot(n), true)?;
        x.write(lin, S, frame_temp & mask(S))?;
        n += 1;
    }
    let final_rsp = rsp.wrapping_sub(size * n).wrapping_sub(alloc);
    let lin = stack_lin::<S>(x, final_rsp, true)?;
    x.probe_write(lin, size)?;
    let bp = GprRef {
        index: reg::RBP,
        size: S,
        high: false,
    };
    write_gpr(&mut x.cpu.state, bp, frame_temp);
    x.add_rsp(final_rsp.wrapping_sub(rsp));
    Ok(())
}

/// LEAVE: RSP = RBP (at the stack width), then pop RBP (`S` bytes; a 16-bit form writes BP).
fn leave<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let rbp = x.cpu.state.gpr[reg::RBP];
    let lin = stack_lin::<S>(x, rbp, false)?;
    let v = x.read(lin, S)?;
    let rsp = x.cpu.state.gpr[reg::RSP];
    x.add_rsp(rbp.wrapping_sub(rsp).wrapping_add(S as u64));
    let bp = GprRef {
        index: reg::RBP,
        size: S,
        high: false,
    };
    write_gpr(&mut x.cpu.state, bp, v);
    Ok(())
}

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;
