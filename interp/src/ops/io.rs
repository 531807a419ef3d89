//! Port I/O: IN/OUT (imm8 and DX forms, 8/16/32-bit) and INS/OUTS (with REP), through
//! `Bus::pio_in`/`pio_out`, with the I/O privilege rules.
//!
//! Permission (SDM Vol. 1 §19.5): always allowed in real mode; in protected and long mode
//! allowed when CPL <= IOPL (and not in virtual-8086 mode), else every bit of the accessed
//! ports in the TSS I/O permission bitmap must be clear. The bitmap check reads the 16-bit
//! map base at TSS offset 102 and then two bytes of the map (as the hardware does); a TSS that
//! is not a 32/64-bit TSS, shorter than 104 bytes, or whose map bytes lie beyond TR.limit
//! gives #GP(0).
//!
//! Every I/O instruction sets `yield_requested` (the machine looks at its devices right after
//! it) and ends its block. REP INS/OUTS follow the string retirement rule of `ops::string`
//! (one retired instruction per iteration, `Trap::Partial` when the budget ends first). A REP
//! that stops part-way (budget, or a fault) does not set the yield flag: the engine stops
//! there anyway. (After `string::MAX_ITERS_PER_CALL` iterations with budget left the engine
//! re-executes the REP without a machine round trip.)

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::operand::{mask, read_reg, write_reg};
use crate::ops::check_no_lock;
use crate::ops::string::MAX_ITERS_PER_CALL;
use crate::state::ctl;
use crate::state::flags::{DF, VM};
use crate::state::reg::{RCX, RDI, RDX, RSI};
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code::*;
    Some(match ins.code() {
        In_AL_imm8 | In_AX_imm8 | In_EAX_imm8 | In_AL_DX | In_AX_DX | In_EAX_DX => in_,
        Out_imm8_AL | Out_imm8_AX | Out_imm8_EAX | Out_DX_AL | Out_DX_AX | Out_DX_EAX => out,
        Insb_m8_DX | Insw_m16_DX | Insd_m32_DX => ins_,
        Outsb_DX_m8 | Outsw_DX_m16 | Outsd_DX_m32 => outs,
        _ => return None,
    })
}

/// Every I/O instruction ends its block.
pub fn ends_block(ins: &Instruction) -> bool {
    matches!(
        ins.mnemonic(),
        Mnemonic::In
            | Mnemonic::Out
            | Mnemonic::Insb
            | Mnemonic::Insw
            | Mnemonic::Insd
            | Mnemonic::Outsb
            | Mnemonic::Outsw
            | Mnemonic::Outsd
    )
}

/// The I/O permission check for `size` bytes at `port`.
pub fn check_io(x: &mut Ctx, port: u16, size: u8) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.cr0 & ctl::CR0_PE == 0 {
        return Ok(());
    }
    if st.rflags & VM == 0 && st.cpl() <= st.iopl() {
        return Ok(());
    }
    let tr = st.tr;
    let long = st.efer & ctl::EFER_LMA != 0;
    // Type 9 (available) or 11 (busy) 32-bit TSS, the same types as a 64-bit TSS in long mode.
    let typ = tr.attr & 0xf;
    if !(typ == 9 || typ == 11) || tr.limit < 103 {
        return Err(Fault::GP0);
    }
    let lin = |off: u64| {
        let a = tr.base.wrapping_add(off);
        if long {
            a
        } else {
            a & 0xffff_ffff
        }
    };
    let mut b = [0u8; 2];
    x.read_bytes_supervisor(lin(102), &mut b)?;
    let map = u16::from_le_bytes(b) as u64;
    let off = map + (port as u64 >> 3);
    if off + 1 > tr.limit as u64 {
        return Err(Fault::GP0);
    }
    x.read_bytes_supervisor(lin(off), &mut b)?;
    let bits = u16::from_le_bytes(b) >> (port & 7);
    if bits & ((1u16 << size) - 1) != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// The port operand of IN/OUT: imm8 or DX.
fn port_of(x: &Ctx, ins: &Instruction, n: u32) -> u16 {
    match ins.op_kind(n) {
        OpKind::Immediate8 => ins.immediate8() as u16,
        _ => x.cpu.state.gpr[RDX] as u16,
    }
}

/// IN AL/AX/EAX, imm8/DX. EAX zero-extends into RAX; AL/AX merge.
fn in_(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let dst = ins.op0_register();
    let size = dst.size() as u8;
    let port = port_of(x, ins, 1);
    check_io(x, port, size)?;
    x.bus.set_now(x.cpu.retired);
    let v = x.bus.pio_in(port, size) as u64 & mask(size);
    write_reg(&mut x.cpu.state, dst, v);
    x.cpu.yield_requested = true;
    Ok(())
}

/// OUT imm8/DX, AL/AX/EAX.
fn out(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let src = ins.op1_register();
    let size = src.size() as u8;
    let port = port_of(x, ins, 0);
    check_io(x, port, size)?;
    let v = read_reg(&x.cpu.state, src) as u32;
    x.bus.set_now(x.cpu.retired);
    x.bus.pio_out(port, size, v);
    x.cpu.yield_requested = true;
    Ok(())
}

/// Address size (8, 4 or 2) of a string I/O instruction, from its memory operand kind.
fn address_size(ins: &Instruction) -> u8 {
    for i in 0..ins.op_count() {
        match ins.op_kind(i) {
            OpKind::MemorySegRSI | OpKind::MemoryESRDI => return 8,
            OpKind::MemorySegESI | OpKind::MemoryESEDI => return 4,
            OpKind::MemorySegSI | OpKind::MemoryESDI => return 2,
            _ => {}
        }
    }
    8
}

/// Geometry of one INS/OUTS execution.
struct StrIo {
    esize: u8,
    asize: u8,
    rep: bool,
    forward: bool,
}

impl StrIo {
    fn new(x: &Ctx, ins: &Instruction) -> StrIo {
        StrIo {
            esize: ins.memory_size().size() as u8,
            asize: address_size(ins),
            rep: ins.has_rep_prefix() || ins.has_repne_prefix(),
            forward: x.cpu.state.rflags & DF == 0,
        }
    }

    fn reg(&self, x: &Ctx, r: usize) -> u64 {
        x.cpu.state.gpr[r] & mask(self.asize)
    }

    fn set_reg(&self, x: &mut Ctx, r: usize, v: u64) {
        let g = &mut x.cpu.state.gpr[r];
        *g = match self.asize {
            8 => v,
            4 => v & 0xffff_ffff,
            _ => (*g & !0xffff) | (v & 0xffff),
        };
    }

    fn advance(&self, x: &mut Ctx, r: usize) {
        let d = self.esize as u64;
        let v = if self.forward {
            self.reg(x, r).wrapping_add(d)
        } else {
            self.reg(x, r).wrapping_sub(d)
        };
        self.set_reg(x, r, v);
    }

    /// Run up to the iteration limit; `one` does one element (and may fault).
    fn run(
        &self,
        x: &mut Ctx,
        mut one: impl FnMut(&mut Ctx) -> Result<(), Fault>,
    ) -> Result<(), Trap> {
        if !self.rep {
            one(x)?;
            x.cpu.yield_requested = true;
            return Ok(());
        }
        let mut count = self.reg(x, RCX);
        if count == 0 {
            // As for the other string instructions: 32-bit addressing still writes ECX.
            if self.asize == 4 {
                self.set_reg(x, RCX, 0);
            }
            return Ok(());
        }
        let limit = x
            .cpu
            .budget_end
            .saturating_sub(x.cpu.retired)
            .clamp(1, MAX_ITERS_PER_CALL);
        let mut n = 0u64;
        while count != 0 && n < limit {
            if let Err(f) = one(x) {
                x.cpu.retired += n;
                return Err(f.into());
            }
            count -= 1;
            self.set_reg(x, RCX, count);
            n += 1;
        }
        if count != 0 {
            // The engine stops at the budget right after this, and the machine looks at its
            // devices then; no yield flag is left behind for the next run.
            x.cpu.retired += n;
            Err(Trap::Partial)
        } else {
            x.cpu.yield_requested = true;
            x.cpu.retired += n - 1;
            Ok(())
        }
    }
}

/// INS m, DX: ES:[rDI] = port; rDI moves by the element size. The destination is checked for
/// writability before the port is read, so a page fault loses no device data.
fn ins_(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let s = StrIo::new(x, ins);
    let port = x.cpu.state.gpr[RDX] as u16;
    check_io(x, port, s.esize)?;
    s.run(x, |x| {
        let lin = x.seg_linear_checked(Register::ES, s.reg(x, RDI), s.esize as u64, true)?;
        x.probe_write(lin, s.esize as u64)?;
        x.bus.set_now(x.cpu.retired);
        let v = x.bus.pio_in(port, s.esize) as u64 & mask(s.esize);
        x.write(lin, s.esize, v)?;
        s.advance(x, RDI);
        Ok(())
    })
}

/// OUTS DX, m: port = DS:[rSI] (segment override allowed); rSI moves by the element size.
fn outs(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let s = StrIo::new(x, ins);
    let port = x.cpu.state.gpr[RDX] as u16;
    let seg = match ins.segment_prefix() {
        Register::None => Register::DS,
        r => r,
    };
    check_io(x, port, s.esize)?;
    s.run(x, |x| {
        let lin = x.seg_linear_checked(seg, s.reg(x, RSI), s.esize as u64, false)?;
        let v = x.read(lin, s.esize)?;
        x.bus.set_now(x.cpu.retired);
        x.bus.pio_out(port, s.esize, v as u32);
        s.advance(x, RSI);
        Ok(())
    })
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
