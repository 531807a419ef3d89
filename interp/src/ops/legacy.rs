//! Instructions that exist only outside 64-bit mode: PUSHA/PUSHAD, POPA/POPAD, BOUND and the
//! BCD adjustments AAA/AAS/AAM/AAD/DAA/DAS (iced decodes none of them as 64-bit code).
//!
//! The flags the SDM leaves undefined for the BCD instructions are NOT host-verified (the
//! host runs 64-bit code, where these opcodes are invalid): this model sets SF/ZF/PF from
//! the AL result and clears OF (and AF/CF for AAM/AAD). See docs/system-cpu.md.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags::{set_status, szp};
use crate::operand::{op_size, sext, write_gpr, GprRef};
use crate::ops::check_no_lock;
use crate::state::flags::{AF, CF, STATUS};
use crate::state::reg;
use crate::Ctx;
use iced_x86::{Code, Instruction, OpKind};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code as C;
    Some(match ins.code() {
        C::Pushaw => pusha::<2>,
        C::Pushad => pusha::<4>,
        C::Popaw => popa::<2>,
        C::Popad => popa::<4>,
        C::Bound_r16_m1616 | C::Bound_r32_m3232 => bound,
        C::Aaa => aaa,
        C::Aas => aas,
        C::Aam_imm8 => aam,
        C::Aad_imm8 => aad,
        C::Daa => daa,
        C::Das => das,
        _ => return None,
    })
}

/// PUSHA/PUSHAD: AX, CX, DX, BX, the original SP, BP, SI, DI (`S` bytes each). All eight
/// writes are checked before SP changes.
fn pusha<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = x.cpu.state.gpr;
    let m = crate::operand::mask(S);
    let vals = [
        g[reg::RAX] & m,
        g[reg::RCX] & m,
        g[reg::RDX] & m,
        g[reg::RBX] & m,
        g[reg::RSP] & m,
        g[reg::RBP] & m,
        g[reg::RSI] & m,
        g[reg::RDI] & m,
    ];
    x.push_many(&vals, S)?;
    Ok(())
}

/// POPA/POPAD: DI, SI, BP, (SP skipped), BX, DX, CX, AX. All reads happen before any register
/// changes.
fn popa<const S: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let mut v = [0u64; 8];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = x.peek_stack(i as u64 * S as u64, S)?;
    }
    let order = [
        reg::RDI,
        reg::RSI,
        reg::RBP,
        reg::RSP,
        reg::RBX,
        reg::RDX,
        reg::RCX,
        reg::RAX,
    ];
    for (i, &r) in order.iter().enumerate() {
        if r != reg::RSP {
            let g = GprRef {
                index: r,
                size: S,
                high: false,
            };
            write_gpr(&mut x.cpu.state, g, v[i]);
        }
    }
    x.add_rsp(8 * S as u64);
    Ok(())
}

/// BOUND r, m: #BR unless lower <= index <= upper (signed, operand size; the bounds are the
/// two operand-sized values at m).
fn bound(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.op1_kind() != OpKind::Memory {
        return Err(Fault::ud("BOUND with a register operand").into());
    }
    let s = op_size(ins, 0);
    let idx = sext(x.read_op(ins, 0)?, s) as i64;
    let a = x.mem_addr(ins, s as u64, false)?;
    let lower = sext(x.read(a, s)?, s) as i64;
    let b = x.mem_addr_plus(ins, s as u64, s as u64, false)?;
    let upper = sext(x.read(b, s)?, s) as i64;
    if idx < lower || idx > upper {
        return Err(Fault::BoundRange.into());
    }
    Ok(())
}

fn al(x: &Ctx) -> u8 {
    x.cpu.state.gpr[reg::RAX] as u8
}

fn set_ax(x: &mut Ctx, ax: u16) {
    let r = &mut x.cpu.state.gpr[reg::RAX];
    *r = (*r & !0xffff) | ax as u64;
}

fn set_al(x: &mut Ctx, v: u8) {
    let r = &mut x.cpu.state.gpr[reg::RAX];
    *r = (*r & !0xff) | v as u64;
}

/// AAA/AAS result: (AX, adjusted). `sub` for AAS.
pub fn ascii_adjust(ax: u16, af: bool, sub: bool) -> (u16, bool) {
    let al = ax as u8;
    if al & 0xf > 9 || af {
        // AAS: AX = AX - 6 (a borrow reaches AH), then AH = AH - 1.
        let ax = if sub {
            ax.wrapping_sub(6).wrapping_sub(0x100)
        } else {
            ax.wrapping_add(0x106)
        };
        (ax & 0xff0f, true)
    } else {
        (ax & 0xff0f, false)
    }
}

fn aaa_aas(x: &mut Ctx, sub: bool) {
    let af = x.cpu.state.rflags & AF != 0;
    let (ax, adj) = ascii_adjust(x.cpu.state.gpr[reg::RAX] as u16, af, sub);
    set_ax(x, ax);
    let f = szp(ax as u8 as u64, 1) | if adj { AF | CF } else { 0 };
    set_status(&mut x.cpu.state, STATUS, f);
}

fn aaa(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    aaa_aas(x, false);
    Ok(())
}

fn aas(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    aaa_aas(x, true);
    Ok(())
}

/// AAM imm8: AH = AL / imm8, AL = AL % imm8 (#DE for 0); SF/ZF/PF from AL.
fn aam(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let base = ins.immediate8();
    if base == 0 {
        return Err(Fault::DivideError.into());
    }
    let a = al(x);
    let r = a % base;
    set_ax(x, (((a / base) as u16) << 8) | r as u16);
    set_status(&mut x.cpu.state, STATUS, szp(r as u64, 1));
    Ok(())
}

/// AAD imm8: AL = AL + AH * imm8 (8 bits), AH = 0; SF/ZF/PF from AL.
fn aad(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let ax = x.cpu.state.gpr[reg::RAX] as u16;
    let r = (ax as u8).wrapping_add(((ax >> 8) as u8).wrapping_mul(ins.immediate8()));
    set_ax(x, r as u16);
    set_status(&mut x.cpu.state, STATUS, szp(r as u64, 1));
    Ok(())
}

/// DAA/DAS on AL with AF/CF (SDM pseudo-code): (AL, AF, CF).
pub fn decimal_adjust(al: u8, af: bool, cf: bool, sub: bool) -> (u8, bool, bool) {
    let mut r = al;
    let mut new_cf = false;
    let mut new_af = false;
    if al & 0xf > 9 || af {
        let (v, c) = if sub {
            al.overflowing_sub(6)
        } else {
            al.overflowing_add(6)
        };
        r = v;
        new_cf = cf || c;
        new_af = true;
    }
    if al > 0x99 || cf {
        r = if sub {
            r.wrapping_sub(0x60)
        } else {
            r.wrapping_add(0x60)
        };
        new_cf = true;
    } else if !sub {
        new_cf = false;
    }
    (r, new_af, new_cf)
}

fn daa_das(x: &mut Ctx, sub: bool) {
    let f = x.cpu.state.rflags;
    let (r, af, cf) = decimal_adjust(al(x), f & AF != 0, f & CF != 0, sub);
    set_al(x, r);
    let flags = szp(r as u64, 1) | if af { AF } else { 0 } | if cf { CF } else { 0 };
    set_status(&mut x.cpu.state, STATUS, flags);
}

fn daa(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    daa_das(x, false);
    Ok(())
}

fn das(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    daa_das(x, true);
    Ok(())
}

#[cfg(test)]
#[path = "legacy_tests.rs"]
mod tests;
