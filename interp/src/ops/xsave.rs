//! XSAVE family: XSAVE/XSAVE64, XSAVEOPT/XSAVEOPT64 (as XSAVE), XSAVEC/XSAVEC64, XRSTOR/
//! XRSTOR64 (standard and compacted form), XGETBV (ECX = 0 and 1), XSETBV, and the VEX state
//! instructions VLDMXCSR/VSTMXCSR. State components:
//! x87 (bit 0), SSE (bit 1) and AVX (bit 2); no supervisor components (no XSAVES/XRSTORS).
//!
//! Layout (SDM vol. 1, ch. 13): legacy area 0..511 exactly as FXSAVE (x87 0..23 and 32..159,
//! MXCSR/MXCSR_MASK 24..31, XMM 160..415), header 512..575 (XSTATE_BV, XCOMP_BV), AVX upper
//! halves 576..831. With only these three components the compacted format places AVX at 576
//! as well, so both forms share one layout.
//!
//! XINUSE is derived from the state's values (a component is in use unless it is in its initial
//! configuration), not tracked per instruction as this host does; docs/floating-point.md lists
//! where that shows in XSTATE_BV and XGETBV(1).

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::mmu::Access;
use crate::ops::check_no_lock;
use crate::ops::sse_common::MXCSR_MASK;
use crate::ops::x87_ctl::{fxrstor_image, fxsave_image};
use crate::state::{ctl, reg, CpuState, X87State};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// XCR0 / XSTATE_BV bit of each component.
pub const X87: u64 = 1 << 0;
pub const SSE: u64 = 1 << 1;
pub const AVX: u64 = 1 << 2;
/// Components XCR0 may enable.
pub const XCR0_SUPPORTED: u64 = X87 | SSE | AVX;
/// Offset of the XSAVE header and of the AVX component (standard and compacted form).
pub const HEADER: usize = 512;
pub const AVX_OFFSET: usize = 576;
/// Size of the area for every supported component.
pub const MAX_SIZE: usize = 832;
/// XCOMP_BV bit 63: the area is in compacted form.
const COMPACTED: u64 = 1 << 63;
/// Initial MXCSR value.
const MXCSR_INIT: u32 = 0x1f80;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Mnemonic::*;
    Some(match ins.mnemonic() {
        Xsave | Xsave64 | Xsaveopt | Xsaveopt64 => xsave,
        Xsavec | Xsavec64 => xsavec,
        Xrstor | Xrstor64 => xrstor,
        Xgetbv => xgetbv,
        Xsetbv => xsetbv,
        Vldmxcsr => vldmxcsr,
        Vstmxcsr => vstmxcsr,
        _ => return None,
    })
}

/// XSETBV ends the block: later VEX instructions of the block may change between #UD and
/// executing (the interpreter checks XCR0 at execution, but translated code may not).
pub fn ends_block(ins: &Instruction) -> bool {
    ins.mnemonic() == Mnemonic::Xsetbv
}

/// XSAVE area size for the components enabled in `xcr0` (CPUID.(EAX=0DH,ECX=0):EBX).
pub fn area_size(xcr0: u64) -> u32 {
    if xcr0 & AVX != 0 {
        MAX_SIZE as u32
    } else {
        AVX_OFFSET as u32
    }
}

/// Number of XMM/YMM registers the area holds: 16 in 64-bit mode, else 8.
fn nregs(st: &CpuState) -> usize {
    if st.in_64bit_mode() {
        16
    } else {
        8
    }
}

/// Is the x87 state in its initial configuration (FCW 037F, FSW 0, all empty, pointers and
/// registers 0)?
fn x87_is_init(f: &X87State) -> bool {
    f.fcw == 0x037f
        && f.fsw == 0
        && f.ftw == 0
        && f.fop == 0
        && f.fip == 0
        && f.fdp == 0
        && f.regs.iter().all(|r| r[..10].iter().all(|&b| b == 0))
}

/// XINUSE from values: bit 0 unless the x87 state is initial, bit 1 if any XMM register is
/// non-zero (MXCSR does not count, as on this host), bit 2 if any YMM upper half is non-zero.
pub fn xinuse(st: &CpuState) -> u64 {
    let mut v = 0;
    if !x87_is_init(&st.x87) {
        v |= X87;
    }
    if st.ymm.iter().any(|y| y[0] != 0 || y[1] != 0) {
        v |= SSE;
    }
    if st.ymm.iter().any(|y| y[2] != 0 || y[3] != 0) {
        v |= AVX;
    }
    v
}

/// Availability shared by the family: #UD with CR4.OSXSAVE clear (also for LOCK), #NM with
/// CR0.TS set (not for XGETBV/XSETBV, which do not touch the state components).
fn check_osxsave(x: &Ctx, ins: &Instruction) -> Result<(), Fault> {
    check_no_lock(ins)?;
    if x.cpu.state.cr4 & ctl::CR4_OSXSAVE == 0 {
        return Err(Fault::ud("XSAVE family with CR4.OSXSAVE clear"));
    }
    Ok(())
}

/// Checks of the save/restore instructions; returns the 64-byte aligned area address (the
/// `len` bytes touched checked against the segment in legacy modes).
fn area_addr(x: &mut Ctx, ins: &Instruction, len: usize, write: bool) -> Result<u64, Fault> {
    check_osxsave(x, ins)?;
    if x.cpu.state.cr0 & ctl::CR0_TS != 0 {
        return Err(Fault::DeviceNotAvailable);
    }
    let a = x.mem_addr(ins, len as u64, write)?;
    if a & 63 != 0 {
        // As FXSAVE: a non-canonical stack-relative (RSP/RBP base) operand is #SS before the
        // alignment #GP on this host.
        let long = x.cpu.state.efer & ctl::EFER_LMA != 0;
        if long && x.ss_operand && !crate::mmu::is_canonical(a) {
            return Err(Fault::StackFault(0));
        }
        return Err(Fault::GP0);
    }
    Ok(a)
}

/// Offset of the lowest byte an operation on the components in `set` touches: 0 with x87,
/// 24 (MXCSR) with SSE or AVX, else the header.
fn first_touched(set: u64) -> usize {
    if set & X87 != 0 {
        0
    } else if set & (SSE | AVX) != 0 {
        24
    } else {
        HEADER
    }
}

/// The page checks before an XSAVE* writes (this host, measured with the area running into an
/// unmapped page at every 64-byte offset and every RFBM): the last byte of the extent RFBM
/// selects (575, or 831 with AVX), then the first byte touched; a #PF reports that byte. The
/// area (at most 832 bytes) spans at most two pages, so this covers every byte written.
fn probe_save(x: &mut Ctx, a: u64, rfbm: u64, first: usize) -> Result<(), Fault> {
    x.translate(a.wrapping_add(extent(rfbm) as u64 - 1), Access::Write)?;
    x.translate(a.wrapping_add(first as u64), Access::Write)?;
    Ok(())
}

/// Requested-feature bitmap: EDX:EAX & XCR0.
fn rfbm(st: &CpuState) -> u64 {
    let edx_eax = (st.gpr[reg::RDX] as u32 as u64) << 32 | st.gpr[reg::RAX] as u32 as u64;
    edx_eax & st.xcr0
}

/// Bytes of the area an operation with `rfbm` touches.
fn extent(rfbm: u64) -> usize {
    if rfbm & AVX != 0 {
        MAX_SIZE
    } else {
        AVX_OFFSET
    }
}

fn get_u64(a: &[u8], at: usize) -> u64 {
    a.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

fn put_u64(a: &mut [u8], at: usize, v: u64) {
    if let Some(s) = a.get_mut(at..at + 8) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Store the components in `save` into `area` (legacy layout + AVX at 576). x87 bytes 0..23
/// and 32..159 as FXSAVE (64-bit FIP/FDP with REX.W); MXCSR and MXCSR_MASK when `mxcsr`.
fn store_components(st: &CpuState, area: &mut [u8; MAX_SIZE], save: u64, mxcsr: bool, rex_w: bool) {
    if save & X87 != 0 {
        let img = fxsave_image(st, rex_w);
        area[0..24].copy_from_slice(&img[0..24]);
        area[32..160].copy_from_slice(&img[32..160]);
    }
    if mxcsr {
        area[24..28].copy_from_slice(&st.mxcsr.to_le_bytes());
        area[28..32].copy_from_slice(&MXCSR_MASK.to_le_bytes());
    }
    let n = nregs(st);
    for i in 0..n {
        let y = &st.ymm[i];
        if save & SSE != 0 {
            put_u64(area, 160 + 16 * i, y[0]);
            put_u64(area, 168 + 16 * i, y[1]);
        }
        if save & AVX != 0 {
            put_u64(area, AVX_OFFSET + 16 * i, y[2]);
            put_u64(area, AVX_OFFSET + 8 + 16 * i, y[3]);
        }
    }
}

/// XSAVE (standard form) on an area image: components in RFBM are written whatever their
/// XINUSE bit (this host writes the initial values of unused ones, which are also the current
/// values); MXCSR if RFBM[1] or RFBM[2]; XSTATE_BV[i] = XINUSE[i] for i in RFBM, other bits and
/// the rest of the header unchanged.
pub fn xsave_area(st: &CpuState, area: &mut [u8; MAX_SIZE], rfbm: u64, rex_w: bool) {
    xsave_area_some(st, area, rfbm, rfbm, rex_w);
}

/// XSAVE's image with only the components in `write` stored (XSAVEOPT: those in use).
fn xsave_area_some(st: &CpuState, area: &mut [u8; MAX_SIZE], rfbm: u64, write: u64, rex_w: bool) {
    store_components(st, area, write, rfbm & (SSE | AVX) != 0, rex_w);
    let bv = get_u64(area, HEADER);
    put_u64(area, HEADER, (bv & !rfbm) | (xinuse(st) & rfbm));
}

/// XSAVEC on an area image: only components in use are written; SSE counts as in use also when
/// MXCSR is not 1F80 (this host; MXCSR is written only with SSE). XSTATE_BV = saved set,
/// XCOMP_BV = RFBM | bit 63, header bytes 16..63 unchanged.
pub fn xsavec_area(st: &CpuState, area: &mut [u8; MAX_SIZE], rfbm: u64, rex_w: bool) {
    let save = xsavec_set(st, rfbm);
    store_components(st, area, save, save & SSE != 0, rex_w);
    put_u64(area, HEADER, save);
    put_u64(area, HEADER + 8, rfbm | COMPACTED);
}

/// The components XSAVEC writes: those of RFBM in use, SSE also when MXCSR is not 1F80.
fn xsavec_set(st: &CpuState, rfbm: u64) -> u64 {
    let mut inuse = xinuse(st);
    if st.mxcsr != MXCSR_INIT {
        inuse |= SSE;
    }
    inuse & rfbm
}

/// XRSTOR on an area image: header checks (#GP), then load or initialise each component in
/// RFBM. `st` is only changed when Ok.
pub fn xrstor_area(
    st: &mut CpuState,
    area: &[u8; MAX_SIZE],
    rfbm: u64,
    rex_w: bool,
) -> Result<(), Fault> {
    let bv = get_u64(area, HEADER);
    let comp = get_u64(area, HEADER + 8);
    let compacted = comp & COMPACTED != 0;
    if compacted {
        // XCOMP_BV may only name enabled components, XSTATE_BV only components in XCOMP_BV,
        // and header bytes 16..63 must be zero.
        if comp & !COMPACTED & !st.xcr0 != 0
            || bv & !comp & !COMPACTED != 0
            || bv & COMPACTED != 0
            || area[HEADER + 16..AVX_OFFSET].iter().any(|&b| b != 0)
        {
            return Err(Fault::GP0);
        }
    } else if bv & !st.xcr0 != 0 || area[HEADER + 8..HEADER + 24].iter().any(|&b| b != 0) {
        // Standard form: XSTATE_BV within XCR0, header bytes 8..23 zero.
        return Err(Fault::GP0);
    }
    let mxcsr = u32::from_le_bytes([area[24], area[25], area[26], area[27]]);
    // Standard form loads MXCSR when RFBM[1] or RFBM[2], whatever XSTATE_BV says (this host:
    // also with XSTATE_BV = 0); compacted form loads it with SSE data and otherwise resets it.
    let load_mxcsr = if compacted {
        rfbm & bv & SSE != 0
    } else {
        rfbm & (SSE | AVX) != 0
    };
    if load_mxcsr && mxcsr & !MXCSR_MASK != 0 {
        return Err(Fault::GP0);
    }
    let mut new = st.clone();
    if rfbm & X87 != 0 {
        if bv & X87 != 0 {
            // FXRSTOR's x87 loader on a copy with CR4.OSFXSR clear, so that it leaves the SSE
            // state alone; bytes 24..31 are only MXCSR, checked above.
            let mut tmp = st.clone();
            tmp.cr4 &= !ctl::CR4_OSFXSR;
            let mut img = [0u8; 416];
            img.copy_from_slice(&area[0..416]);
            fxrstor_image(&mut tmp, &img, rex_w)?;
            new.x87 = tmp.x87;
        } else {
            new.x87 = X87State::default();
        }
    }
    if load_mxcsr {
        new.mxcsr = mxcsr;
    } else if compacted && rfbm & SSE != 0 {
        new.mxcsr = MXCSR_INIT;
    }
    let n = nregs(st);
    for i in 0..n {
        let y = &mut new.ymm[i];
        if rfbm & SSE != 0 {
            let load = bv & SSE != 0;
            y[0] = if load { get_u64(area, 160 + 16 * i) } else { 0 };
            y[1] = if load { get_u64(area, 168 + 16 * i) } else { 0 };
        }
        if rfbm & AVX != 0 {
            let load = bv & AVX != 0;
            y[2] = if load {
                get_u64(area, AVX_OFFSET + 16 * i)
            } else {
                0
            };
            y[3] = if load {
                get_u64(area, AVX_OFFSET + 8 + 16 * i)
            } else {
                0
            };
        }
    }
    *st = new;
    Ok(())
}

fn is_rex_w(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(m, Xsave64 | Xsaveopt64 | Xsavec64 | Xrstor64)
}

/// Read bytes `first..len` of the area (the pages were checked before), the rest zero.
fn read_area(x: &mut Ctx, a: u64, first: usize, len: usize) -> Result<[u8; MAX_SIZE], Fault> {
    let mut area = [0u8; MAX_SIZE];
    let first = first.min(len);
    x.read_bytes(a.wrapping_add(first as u64), &mut area[first..len])?;
    Ok(area)
}

/// XSAVE/XSAVE64 and XSAVEOPT/XSAVEOPT64. XSAVEOPT uses the init optimisation as this host
/// does: a component not in use (XINUSE, derived from values here) is not written, only its
/// XSTATE_BV bit cleared (MXCSR is still written with RFBM[1] or RFBM[2]); seen on the host
/// after VZEROALL. The modified optimisation (skipping components unchanged since an XRSTOR
/// from the same area) is not modelled: the skipped bytes would hold the same values anyway,
/// unless that XRSTOR initialised the component.
fn xsave(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let rfbm = rfbm(&x.cpu.state);
    let len = extent(rfbm);
    let a = area_addr(x, ins, len, true)?;
    let opt = matches!(ins.mnemonic(), Mnemonic::Xsaveopt | Mnemonic::Xsaveopt64);
    let write = if opt {
        rfbm & xinuse(&x.cpu.state)
    } else {
        rfbm
    };
    let first = if write & X87 != 0 {
        0
    } else {
        first_touched(rfbm & !X87)
    };
    probe_save(x, a, rfbm, first)?;
    let mut area = read_area(x, a, first, len)?;
    xsave_area_some(
        &x.cpu.state,
        &mut area,
        rfbm,
        write,
        is_rex_w(ins.mnemonic()),
    );
    x.write_bytes(a.wrapping_add(first as u64), &area[first..len])?;
    Ok(())
}

/// XSAVEC/XSAVEC64: compacted form.
fn xsavec(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let rfbm = rfbm(&x.cpu.state);
    let len = extent(rfbm);
    let a = area_addr(x, ins, len, true)?;
    // The lowest byte written is that of the first component saved (in use: see xsavec_area);
    // MXCSR (24) only with SSE, so AVX alone starts at the header.
    let first = first_touched(xsavec_set(&x.cpu.state, rfbm) & (X87 | SSE));
    probe_save(x, a, rfbm, first)?;
    let mut area = read_area(x, a, first, len)?;
    xsavec_area(&x.cpu.state, &mut area, rfbm, is_rex_w(ins.mnemonic()));
    x.write_bytes(a.wrapping_add(first as u64), &area[first..len])?;
    Ok(())
}

/// XRSTOR/XRSTOR64. Reads the legacy area and header, plus the AVX area when RFBM[2].
///
/// Page checks (this host, measured): XCOMP_BV (byte 520) is read first, then the last byte of
/// the extent (831 when AVX is in RFBM, or in RFBM & XCOMP_BV for the compacted form), then the
/// first byte of the RFBM components, whatever XSTATE_BV says; all before the header checks.
fn xrstor(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    let rfbm = rfbm(&x.cpu.state);
    let a = area_addr(x, ins, extent(rfbm), false)?;
    let comp = x.read(a.wrapping_add(HEADER as u64 + 8), 8)?;
    let set = if comp & COMPACTED != 0 {
        rfbm & comp
    } else {
        rfbm
    };
    let len = extent(set);
    x.translate(a.wrapping_add(len as u64 - 1), Access::Read)?;
    let first = first_touched(rfbm);
    x.translate(a.wrapping_add(first as u64), Access::Read)?;
    let area = read_area(x, a, first.min(HEADER), len)?;
    let mut st = x.cpu.state.clone();
    xrstor_area(&mut st, &area, rfbm, is_rex_w(ins.mnemonic()))?;
    x.cpu.state = st;
    Ok(())
}

/// XGETBV: ECX = 0 -> XCR0, ECX = 1 -> XCR0 & XINUSE, else #GP(0). Any CPL.
fn xgetbv(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_osxsave(x, ins)?;
    let st = &mut x.cpu.state;
    let v = match st.gpr[reg::RCX] as u32 {
        0 => st.xcr0,
        1 => st.xcr0 & xinuse(st),
        _ => return Err(Fault::GP0.into()),
    };
    st.gpr[reg::RAX] = v & 0xffff_ffff;
    st.gpr[reg::RDX] = v >> 32;
    Ok(())
}

/// Is `v` a value XSETBV accepts for XCR0? x87 must stay enabled, AVX needs SSE, and only
/// supported components may be set.
pub fn valid_xcr0(v: u64) -> bool {
    v & X87 != 0 && v & !XCR0_SUPPORTED == 0 && (v & AVX == 0 || v & SSE != 0)
}

/// XSETBV: CPL 0 only, ECX = 0 only, EDX:EAX a valid XCR0 value; else #GP(0).
fn xsetbv(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_osxsave(x, ins)?;
    let st = &mut x.cpu.state;
    if st.cpl() != 0 || st.gpr[reg::RCX] as u32 != 0 {
        return Err(Fault::GP0.into());
    }
    let v = (st.gpr[reg::RDX] as u32 as u64) << 32 | st.gpr[reg::RAX] as u32 as u64;
    if !valid_xcr0(v) {
        return Err(Fault::GP0.into());
    }
    st.xcr0 = v;
    Ok(())
}

/// VLDMXCSR: LDMXCSR under the VEX availability rule (#UD without OSXSAVE/XCR0 SSE|AVX).
fn vldmxcsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    crate::ops::avx_common::check_avx(x, ins)?;
    let v = x.read_op(ins, 0)? as u32;
    x.cpu.state.mxcsr = crate::ops::sse_common::ldmxcsr_value(v)?;
    Ok(())
}

/// VSTMXCSR: STMXCSR under the VEX availability rule.
fn vstmxcsr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    crate::ops::avx_common::check_avx(x, ins)?;
    let v = x.cpu.state.mxcsr;
    x.write_op(ins, 0, v as u64)?;
    Ok(())
}

#[cfg(test)]
#[path = "xsave_tests.rs"]
mod tests;
