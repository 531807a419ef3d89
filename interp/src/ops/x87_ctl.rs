//! x87 control instructions: FINIT/FNINIT, FCLEX/FNCLEX, FLDCW, FSTCW/FNSTCW, FSTSW/FNSTSW
//! (m16 and AX), FLDENV, FSTENV/FNSTENV, FSAVE/FNSAVE, FRSTOR (the protected-mode formats used
//! in 64-bit mode, 28/108 bytes, or 14/94 bytes with a 66h prefix), FXSAVE/FXRSTOR (legacy
//! 512-byte area, also the REX.W forms), FWAIT, EMMS and the 8087/287 leftovers FENI/FDISI/
//! FSETPM (no-ops).
//!
//! Control instructions do not update FIP/FDP/FOP.

use super::x87_common::*;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::Access;
use crate::ops::check_no_lock;
use crate::ops::sse_common::MXCSR_MASK;
use crate::state::{ctl, X87State};
use crate::x87::{sw, F80};
use crate::Ctx;
use iced_x86::{Instruction, MemorySize, Mnemonic, OpKind};

pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Finit | Fninit => finit,
        Fclex | Fnclex => fclex,
        Fldcw => fldcw,
        Fstcw | Fnstcw => fstcw,
        Fstsw | Fnstsw => fstsw,
        Fldenv | Frstor => fldenv,
        Fstenv | Fnstenv | Fsave | Fnsave => fstenv,
        Fxsave | Fxsave64 => fxsave,
        Fxrstor | Fxrstor64 => fxrstor,
        Wait => fwait,
        Emms => emms,
        Feni | Fneni | Fdisi | Fndisi | Fsetpm | Fnsetpm => fnop_ctl,
        _ => return None,
    })
}

/// The "F..." spellings wait (check for a pending exception) first; the "FN..." ones do not.
fn waits(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Finit | Fclex | Fstcw | Fstsw | Fstenv | Fsave | Fldcw | Fldenv | Frstor
    )
}

fn check_ctl(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_fpu(x, ins)?;
    if waits(ins.mnemonic()) {
        check_pending(x)?;
    }
    Ok(())
}

/// FNINIT state: control 037F, status 0, all empty, pointers 0 (registers keep their bits).
pub fn init(f: &mut X87State) {
    f.fcw = 0x037f;
    f.fsw = 0;
    f.ftw = 0;
    f.fop = 0;
    f.fip = 0;
    f.fdp = 0;
}

fn finit(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    init(&mut x.cpu.state.x87);
    Ok(())
}

fn fclex(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    x.cpu.state.x87.fsw &= !(sw::EXC | sw::SF | sw::ES | sw::B);
    Ok(())
}

/// A control word as loaded: reserved bits 7 and 15:13 read as 0, bit 6 as 1 (this host).
pub fn load_fcw(v: u16) -> u16 {
    (v & 0x1f3f) | 0x40
}

/// After the control word or status word changes, ES and B summarise the unmasked flags.
pub fn update_es(f: &mut X87State) {
    if f.fsw & sw::EXC & !f.fcw != 0 {
        f.fsw |= sw::ES | sw::B;
    } else {
        f.fsw &= !(sw::ES | sw::B);
    }
}

fn fldcw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    let a = x.mem_addr(ins, 2, false)?;
    let v = x.read(a, 2)? as u16;
    let f = &mut x.cpu.state.x87;
    f.fcw = load_fcw(v);
    update_es(f);
    Ok(())
}

fn fstcw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    let a = x.mem_addr(ins, 2, true)?;
    let v = x.cpu.state.x87.fcw;
    x.write(a, 2, v as u64)?;
    Ok(())
}

fn fstsw(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    let v = x.cpu.state.x87.fsw as u64;
    if ins.op_kind(0) == OpKind::Memory {
        let a = x.mem_addr(ins, 2, true)?;
        x.write(a, 2, v)?;
    } else {
        x.write_op(ins, 0, v)?;
    }
    Ok(())
}

/// Is this the 16-bit (14/94-byte) format?
fn small_env(ins: &Instruction) -> bool {
    matches!(
        ins.memory_size(),
        MemorySize::FpuEnv14 | MemorySize::FpuState94
    )
}

/// The protected-mode environment image (28 bytes, or 14 with `small`).
fn env_image(f: &X87State, small: bool) -> ([u8; 28], usize) {
    let mut b = [0u8; 28];
    let tw = full_tag_word(f);
    if small {
        let words = [f.fcw, f.fsw, tw, f.fip as u16, 0, f.fdp as u16, 0];
        for (i, w) in words.iter().enumerate() {
            b[2 * i..2 * i + 2].copy_from_slice(&w.to_le_bytes());
        }
        return (b, 14);
    }
    let dwords = [
        0xffff_0000 | f.fcw as u32,
        0xffff_0000 | f.fsw as u32,
        0xffff_0000 | tw as u32,
        f.fip as u32,
        ((f.fop as u32) & 0x7ff) << 16,
        f.fdp as u32,
        0xffff_0000,
    ];
    for (i, d) in dwords.iter().enumerate() {
        b[4 * i..4 * i + 4].copy_from_slice(&d.to_le_bytes());
    }
    (b, 28)
}

/// FSTENV/FNSTENV (then all exceptions masked) and FSAVE/FNSAVE (then FNINIT).
fn fstenv(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    let small = small_env(ins);
    let save = matches!(ins.mnemonic(), Mnemonic::Fsave | Mnemonic::Fnsave);
    let f = &x.cpu.state.x87;
    let (env, n) = env_image(f, small);
    let mut img = [0u8; 108];
    img[..n].copy_from_slice(&env[..n]);
    let mut len = n;
    if save {
        for i in 0..8 {
            img[n + 10 * i..n + 10 * i + 10].copy_from_slice(&read_st(f, i).to_bytes());
        }
        len = n + 80;
    }
    let a = x.mem_addr(ins, len as u64, true)?;
    probe_area(x, a, len as u64, Access::Write)?;
    x.write_bytes(a, &img[..len])?;
    let f = &mut x.cpu.state.x87;
    if save {
        init(f);
    } else {
        // All exceptions masked: ES and B follow (cleared; the stored image keeps them).
        f.fcw |= 0x3f;
        update_es(f);
    }
    Ok(())
}

/// FLDENV and FRSTOR.
fn fldenv(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_ctl(x, ins)?;
    let small = small_env(ins);
    let rstor = ins.mnemonic() == Mnemonic::Frstor;
    let n = if small { 14 } else { 28 };
    let len = if rstor { n + 80 } else { n };
    let mut img = [0u8; 108];
    let a = x.mem_addr(ins, len as u64, false)?;
    probe_area(x, a, len as u64, Access::Read)?;
    x.read_bytes(a, &mut img[..len])?;
    let w = |i: usize| u16::from_le_bytes([img[i], img[i + 1]]);
    let d = |i: usize| u32::from_le_bytes([img[i], img[i + 1], img[i + 2], img[i + 3]]);
    let f = &mut x.cpu.state.x87;
    if small {
        f.fcw = load_fcw(w(0));
        f.fsw = w(2);
        f.ftw = abridge_tag_word(w(4));
        f.fip = w(6) as u64;
        f.fdp = w(10) as u64;
        f.fop = 0;
    } else {
        f.fcw = load_fcw(w(0));
        f.fsw = w(4);
        f.ftw = abridge_tag_word(w(8));
        f.fip = d(12) as u64;
        f.fop = (d(16) >> 16) as u16 & 0x7ff;
        f.fdp = d(20) as u64;
    }
    if rstor {
        for i in 0..8 {
            let v = F80::from_bytes(&img[n + 10 * i..n + 10 * i + 10]);
            let p = phys(f, i);
            f.regs[p][..10].copy_from_slice(&v.to_bytes());
        }
    }
    update_es(f);
    Ok(())
}

/// The state-image instructions (FNSTENV, FLDENV, FNSAVE, FRSTOR, FXSAVE, FXRSTOR) check the
/// operand's first byte, then its last byte (this host): a #PF for an area running into an
/// unmapped page reports the operand's last byte, not the page's first.
fn probe_area(x: &mut Ctx, a: u64, len: u64, access: Access) -> Result<(), Fault> {
    x.translate(a, access)?;
    x.translate(a.wrapping_add(len - 1), access)?;
    Ok(())
}

/// FXSAVE/FXRSTOR check the other way round: the 512-byte area's last byte, then its first
/// (this host: an area entirely on an unmapped page reports its last byte).
fn probe_area_fx(x: &mut Ctx, a: u64, access: Access) -> Result<(), Fault> {
    x.translate(a.wrapping_add(511), access)?;
    x.translate(a, access)?;
    Ok(())
}

/// Availability of FXSAVE/FXRSTOR: #NM on CR0.TS or CR0.EM; the 512-byte area must lie in its
/// segment (legacy modes) and be 16-byte aligned.
fn fx_addr(x: &mut Ctx, ins: &Instruction, write: bool) -> Result<u64, Fault> {
    check_no_lock(ins)?;
    if x.cpu.state.cr0 & (ctl::CR0_EM | ctl::CR0_TS) != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    let a = x.mem_addr(ins, 512, write)?;
    if a & 15 != 0 {
        // A non-canonical stack-relative (RSP/RBP base) operand is #SS before the alignment
        // #GP on this host.
        let long = x.cpu.state.efer & ctl::EFER_LMA != 0;
        if long && x.ss_operand && !crate::mmu::is_canonical(a) {
            return Err(Fault::StackFault(0));
        }
        return Err(Fault::GP0);
    }
    Ok(a)
}

/// The FXSAVE image (bytes 0..416; 416..511 are not written).
pub fn fxsave_image(st: &crate::state::CpuState, rex_w: bool) -> [u8; 416] {
    let f = &st.x87;
    let mut b = [0u8; 416];
    b[0..2].copy_from_slice(&f.fcw.to_le_bytes());
    b[2..4].copy_from_slice(&f.fsw.to_le_bytes());
    b[4] = f.ftw;
    b[6..8].copy_from_slice(&(f.fop & 0x7ff).to_le_bytes());
    if rex_w {
        b[8..16].copy_from_slice(&f.fip.to_le_bytes());
        b[16..24].copy_from_slice(&f.fdp.to_le_bytes());
    } else {
        b[8..12].copy_from_slice(&(f.fip as u32).to_le_bytes());
        b[16..20].copy_from_slice(&(f.fdp as u32).to_le_bytes());
    }
    let sse = st.cr4 & ctl::CR4_OSFXSR != 0;
    if sse {
        b[24..28].copy_from_slice(&st.mxcsr.to_le_bytes());
        b[28..32].copy_from_slice(&MXCSR_MASK.to_le_bytes());
    }
    // Registers are written whatever their tags. (After a process starts with the x87 state
    // in its initial configuration this host's FXSAVE may write zeros for registers that were
    // emptied since, an effect of the XSAVE init optimisation that is not modelled; see
    // docs/x87.md.)
    for i in 0..8 {
        b[32 + 16 * i..42 + 16 * i].copy_from_slice(&read_st(f, i).to_bytes());
    }
    if sse {
        let n = if st.in_64bit_mode() { 16 } else { 8 };
        for i in 0..n {
            b[160 + 16 * i..168 + 16 * i].copy_from_slice(&st.ymm[i][0].to_le_bytes());
            b[168 + 16 * i..176 + 16 * i].copy_from_slice(&st.ymm[i][1].to_le_bytes());
        }
    }
    b
}

fn fxsave(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let a = fx_addr(x, ins, true)?;
    probe_area_fx(x, a, Access::Write)?;
    let img = fxsave_image(&x.cpu.state, ins.mnemonic() == Mnemonic::Fxsave64);
    x.write_bytes(a, &img)?;
    Ok(())
}

/// Load an FXSAVE image into the state. Err(#GP) if MXCSR has reserved bits set.
pub fn fxrstor_image(
    st: &mut crate::state::CpuState,
    b: &[u8; 416],
    rex_w: bool,
) -> Result<(), Fault> {
    let sse = st.cr4 & ctl::CR4_OSFXSR != 0;
    let mxcsr = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    if sse && mxcsr & !MXCSR_MASK != 0 {
        return Err(Fault::GP0);
    }
    let q = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let f = &mut st.x87;
    f.fcw = load_fcw(u16::from_le_bytes([b[0], b[1]]));
    f.fsw = u16::from_le_bytes([b[2], b[3]]);
    f.ftw = b[4];
    f.fop = u16::from_le_bytes([b[6], b[7]]) & 0x7ff;
    if rex_w {
        // This host keeps a 57-bit FIP: bits 63:57 are loaded as copies of bit 56 (FXRSTOR64
        // of 0xe912345678abcdef reads back 0xff12345678abcdef); FDP loads unchanged.
        f.fip = ((q(8) << 7) as i64 >> 7) as u64;
        f.fdp = q(16);
    } else {
        f.fip = q(8) & 0xffff_ffff;
        f.fdp = q(16) & 0xffff_ffff;
    }
    for i in 0..8 {
        let p = phys(f, i);
        f.regs[p][..10].copy_from_slice(&b[32 + 16 * i..42 + 16 * i]);
    }
    // ES and B are recomputed from the loaded flags and masks (this host).
    update_es(f);
    if sse {
        st.mxcsr = mxcsr;
        let n = if st.in_64bit_mode() { 16 } else { 8 };
        for i in 0..n {
            st.ymm[i][0] = q(160 + 16 * i);
            st.ymm[i][1] = q(168 + 16 * i);
        }
    }
    Ok(())
}

fn fxrstor(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let a = fx_addr(x, ins, false)?;
    probe_area_fx(x, a, Access::Read)?;
    let mut b = [0u8; 416];
    x.read_bytes(a, &mut b)?;
    let mut st = x.cpu.state.clone();
    fxrstor_image(&mut st, &b, ins.mnemonic() == Mnemonic::Fxrstor64)?;
    x.cpu.state = st;
    Ok(())
}

/// FWAIT/WAIT: #NM only if CR0.MP and CR0.TS are both set; then any pending #MF.
fn fwait(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let cr0 = x.cpu.state.cr0;
    if cr0 & ctl::CR0_MP != 0 && cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable.into());
    }
    check_pending(x)?;
    Ok(())
}

/// EMMS: #UD with CR0.EM, #NM with CR0.TS, #MF if an exception is pending; all registers
/// empty. This host also resets TOP to 0.
fn emms(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let cr0 = x.cpu.state.cr0;
    if cr0 & ctl::CR0_EM != 0 {
        return Err(Fault::ud("EMMS with CR0.EM set").into());
    }
    if cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable.into());
    }
    check_pending(x)?;
    let f = &mut x.cpu.state.x87;
    f.ftw = 0;
    set_top(f, 0);
    Ok(())
}

/// FENI/FDISI/FSETPM: no-ops since the 387.
fn fnop_ctl(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_fpu(x, ins)?;
    Ok(())
}
