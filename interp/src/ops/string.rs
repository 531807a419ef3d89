//! String instructions: MOVS, STOS, LODS, CMPS, SCAS in byte/word/dword/qword sizes, with
//! REP/REPE/REPNE, DF, 64/32/16-bit address size and a segment override on the source.
//!
//! RETIREMENT RULE (project decision, docs/determinism-rep.md): a REP-prefixed string
//! instruction retires one instruction per iteration; zero iterations retire one (the engine's
//! usual +1). The engine adds 1 after a successful handler return, so a REP handler that
//! completes after n >= 1 iterations adds n - 1 to `cpu.retired` itself. One call runs at most
//! `budget_end - retired` iterations (>= 1 is guaranteed) and at most [`MAX_ITERS_PER_CALL`];
//! stopping with iterations left, it adds the n iterations done, leaves RCX/RSI/RDI updated and
//! returns `Trap::Partial` (the engine re-executes the instruction later). A fault mid-way
//! keeps the completed iterations (registers updated), adds them, and returns the fault.
//!
//! REPE/REPNE on MOVS/STOS/LODS behave as REP. Tests live in `string_tests.rs` and
//! `string_tests_exec.rs`.

use crate::ctx::Ctx;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags::{self, set_status};
use crate::mem::PAGE_SIZE;
use crate::mmu::Access;
use crate::operand::{mask, write_reg};
use crate::ops::check_no_lock;
use crate::state::flags::{DF, STATUS, ZF};
use crate::state::reg::{RAX, RCX, RDI, RSI};
use iced_x86::{Code, Instruction, OpKind, Register};

/// Most iterations one handler call runs before returning `Trap::Partial`.
pub const MAX_ITERS_PER_CALL: u64 = 1 << 20;

/// Handlers of this family. Dispatch is by `Code`: the MOVSD/CMPSD mnemonics are shared
/// with SSE2 instructions.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    use Code::*;
    Some(match ins.code() {
        Movsb_m8_m8 | Movsw_m16_m16 | Movsd_m32_m32 | Movsq_m64_m64 => movs,
        Stosb_m8_AL | Stosw_m16_AX | Stosd_m32_EAX | Stosq_m64_RAX => stos,
        Lodsb_AL_m8 | Lodsw_AX_m16 | Lodsd_EAX_m32 | Lodsq_RAX_m64 => lods,
        Cmpsb_m8_m8 | Cmpsw_m16_m16 | Cmpsd_m32_m32 | Cmpsq_m64_m64 => cmps,
        Scasb_AL_m8 | Scasw_AX_m16 | Scasd_EAX_m32 | Scasq_RAX_m64 => scas,
        _ => return None,
    })
}

/// Flags of CMPS/SCAS: exactly those of `SUB a, b` (all six defined; checked against the host).
#[inline]
pub fn compare_flags(a: u64, b: u64, size: u8) -> u64 {
    flags::sub(a, b, 0, size).1
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rep {
    None,
    /// REP, or REPE/REPNE on an instruction that does not test ZF.
    Plain,
    /// REPE on CMPS/SCAS: stop when ZF = 0.
    WhileEqual,
    /// REPNE on CMPS/SCAS: stop when ZF = 1.
    WhileNotEqual,
}

/// The geometry of one execution of a string instruction.
#[derive(Clone, Copy, Debug)]
struct Str {
    /// Element size in bytes.
    esize: u8,
    /// Address size in bytes (8, 4 or 2): the width of RSI/RDI/RCX used.
    asize: u8,
    /// Segment of the source (DS unless overridden). The destination is always ES.
    src_seg: Register,
    /// DF = 0.
    forward: bool,
    rep: Rep,
    /// The multi-element fast paths may run: 64-bit mode, or segments whose limit checks can
    /// not fail within a chunk (flat 4 GiB expand-up segments).
    bulk: bool,
}

/// True in 64-bit mode, or when the source segment and ES are usable, expand-up, 4 GiB data
/// segments (then only the first element of a chunk needs the checks).
fn bulk_ok(x: &Ctx, ins: &Instruction) -> bool {
    let st = &x.cpu.state;
    if st.in_64bit_mode() {
        return true;
    }
    let flat = |r: Register| {
        let s = &st.seg[crate::operand::sreg_index(r).unwrap_or(crate::state::sreg::DS)];
        s.limit == 0xffff_ffff && s.attr & 0x8c == 0x80
    };
    let src = match ins.segment_prefix() {
        Register::None => Register::DS,
        s => s,
    };
    flat(src) && flat(Register::ES)
}

/// Address size from the operand kinds iced decoded (67h selects ESI/EDI in 64-bit mode).
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

impl Str {
    fn new(x: &Ctx, ins: &Instruction, tests_zf: bool) -> Str {
        let rep = match (ins.has_repe_prefix(), ins.has_repne_prefix(), tests_zf) {
            (false, false, _) => Rep::None,
            (_, _, false) => Rep::Plain,
            (true, _, true) => Rep::WhileEqual,
            (false, true, true) => Rep::WhileNotEqual,
        };
        Str {
            esize: ins.memory_size().size() as u8,
            asize: address_size(ins),
            src_seg: match ins.segment_prefix() {
                Register::None => Register::DS,
                s => s,
            },
            forward: x.cpu.state.rflags & DF == 0,
            rep,
            bulk: bulk_ok(x, ins),
        }
    }

    /// RSI, RDI or RCX at the address size.
    #[inline]
    fn reg(&self, x: &Ctx, r: usize) -> u64 {
        x.cpu.state.gpr[r] & mask(self.asize)
    }

    /// Write RSI, RDI or RCX at the address size (32-bit writes zero-extend, 16-bit merge).
    #[inline]
    fn set_reg(&self, x: &mut Ctx, r: usize, v: u64) {
        let g = &mut x.cpu.state.gpr[r];
        *g = match self.asize {
            8 => v,
            4 => v & 0xffff_ffff,
            _ => (*g & !0xffff) | (v & 0xffff),
        };
    }

    /// Move RSI or RDI by `n` elements in the direction DF selects.
    #[inline]
    fn advance(&self, x: &mut Ctx, r: usize, n: u64) {
        let bytes = n.wrapping_mul(self.esize as u64);
        let delta = if self.forward {
            bytes
        } else {
            bytes.wrapping_neg()
        };
        let v = self.reg(x, r).wrapping_add(delta);
        self.set_reg(x, r, v);
    }

    /// Checked linear address of the current source element (legacy-mode segment checks).
    #[inline]
    fn src(&self, x: &mut Ctx) -> Result<u64, Fault> {
        let off = self.reg(x, RSI);
        x.seg_linear_checked(self.src_seg, off, self.esize as u64, false)
    }

    /// Checked linear address of the current destination element (ES); `write` for MOVS/STOS.
    #[inline]
    fn dst_for(&self, x: &mut Ctx, write: bool) -> Result<u64, Fault> {
        let off = self.reg(x, RDI);
        x.seg_linear_checked(Register::ES, off, self.esize as u64, write)
    }

    #[inline]
    fn dst(&self, x: &mut Ctx) -> Result<u64, Fault> {
        self.dst_for(x, true)
    }

    /// Whole elements that fit from offset `off` (linear `lin`, the current element) in the
    /// direction DF selects before the offset wraps at the address size or the linear address
    /// leaves its page. Backward, the current element must lie in its page, and the elements
    /// below it down to the page start (or offset 0) count.
    #[inline]
    fn room(&self, off: u64, lin: u64) -> u64 {
        let e = self.esize as u64;
        let in_page = lin & 0xfff;
        if !self.forward {
            if in_page + e > PAGE_SIZE {
                return 0;
            }
            // (`off / e + 1` is 2^64 for a 64-bit offset of all ones: saturate.)
            return (in_page / e + 1).min((off / e).saturating_add(1));
        }
        let space = match self.asize {
            8 => u64::MAX,
            4 => (1u64 << 32) - off,
            _ => (1u64 << 16) - off,
        };
        (PAGE_SIZE - in_page).min(space) / e
    }

    /// The lowest physical byte of a run of `len` bytes whose current element is at `phys`:
    /// `phys` itself forward; backward the current element is the run's highest.
    #[inline]
    fn run_start(&self, phys: u64, len: u64) -> u64 {
        if self.forward {
            phys
        } else {
            phys - (len - self.esize as u64)
        }
    }

    /// REP with a zero count. Host rule (Intel, measured in `addr32_zero_count_matches_host`):
    /// with 32-bit addressing REP still writes ECX, clearing RCX[63:32]; MOVS also rewrites ESI
    /// and EDI, STOS rewrites EDI; LODS, CMPS and SCAS leave RSI/RDI alone. Flags and memory are
    /// unchanged. 16- and 64-bit addressing change nothing.
    fn zero_count(&self, x: &mut Ctx, rsi: bool, rdi: bool) {
        if self.asize != 4 {
            return;
        }
        let regs = [(RCX, true), (RSI, rsi), (RDI, rdi)];
        for (r, touched) in regs {
            if touched {
                let v = self.reg(x, r);
                self.set_reg(x, r, v);
            }
        }
    }
}

/// Iterations this call may run.
#[inline]
fn iteration_limit(x: &Ctx) -> u64 {
    x.cpu
        .budget_end
        .saturating_sub(x.cpu.retired)
        .clamp(1, MAX_ITERS_PER_CALL)
}

/// End a REP instruction that ran `n` iterations in this call; `left` if some remain.
#[inline]
fn rep_end(x: &mut Ctx, n: u64, left: bool) -> Result<(), Trap> {
    if left {
        x.cpu.retired += n;
        Err(Trap::Partial)
    } else {
        // The engine adds the last one (or the single one of a zero-count REP).
        x.cpu.retired += n.saturating_sub(1);
        Ok(())
    }
}

/// A fault after `n` completed iterations: they stay committed and retired.
#[inline]
fn rep_fault(x: &mut Ctx, n: u64, f: Fault) -> Trap {
    x.cpu.retired += n;
    f.into()
}

// ----- MOVS -----

/// One MOVS element: read, write, then advance (nothing changes if either access faults).
#[inline]
fn movs_one(x: &mut Ctx, g: &Str) -> Result<(), Fault> {
    let lin = g.src(x)?;
    let v = x.read(lin, g.esize)?;
    let lin = g.dst(x)?;
    x.write(lin, g.esize, v)?;
    g.advance(x, RSI, 1);
    g.advance(x, RDI, 1);
    Ok(())
}

/// REP MOVS fast path: copy up to `max` elements at once, in the direction DF selects, when
/// they lie within one page on each side and both pages are RAM. Returns the elements copied
/// (0: not applicable, do one element the slow way). Faults are those the first element would
/// raise.
fn movs_chunk(x: &mut Ctx, g: &Str, max: u64) -> Result<u64, Fault> {
    let (rsi, rdi) = (g.reg(x, RSI), g.reg(x, RDI));
    if !g.bulk {
        return Ok(0);
    }
    // A segment fault is left to the element-by-element path (its order of checks).
    let (Ok(src), Ok(dst)) = (g.src(x), g.dst(x)) else {
        return Ok(0);
    };
    let k = max.min(g.room(rsi, src)).min(g.room(rdi, dst));
    if k < 2 {
        return Ok(0);
    }
    let ps = x.translate(src, Access::Read)?;
    let pd = x.translate(dst, Access::Write)?;
    let len = k * g.esize as u64;
    let (ps, pd) = (g.run_start(ps, len), g.run_start(pd, len));
    if !x.ram.contains(ps, len) || !x.ram.contains(pd, len) {
        return Ok(0);
    }
    // note_write before the copy: the verify write log (lockstep-jit) records the old bytes.
    if x.ram.note_write(pd, len) {
        x.cpu.smc = true;
    }
    let copy = if g.forward {
        copy_forward
    } else {
        copy_backward
    };
    copy(
        x.ram.bytes_mut(),
        ps as usize,
        pd as usize,
        len as usize,
        g.esize as usize,
    );
    g.advance(x, RSI, k);
    g.advance(x, RDI, k);
    Ok(k)
}

/// Copy `len` bytes from `s` to `d` with the result of an element-by-element forward copy of
/// `e`-byte elements (which differs from memmove when `d` lies ahead of `s` within the range).
pub fn copy_forward(mem: &mut [u8], s: usize, d: usize, len: usize, e: usize) {
    let dist = d.wrapping_sub(s);
    if d <= s || dist >= len {
        // The source is read before any write reaches it: memmove gives the same bytes.
        mem.copy_within(s..s + len, d);
    } else if dist >= e {
        // Each element reads bytes that are either untouched or already final, so the copy
        // equals a byte-wise forward copy: the first `dist` source bytes repeated. Fill by
        // doubling (the written prefix is always a multiple of the period `dist`).
        mem.copy_within(s..s + dist, d);
        let mut done = dist;
        while done < len {
            let n = done.min(len - done);
            mem.copy_within(d..d + n, d + done);
            done += n;
        }
    } else {
        // Elements overlap their own predecessor's destination: copy one element at a time
        // (each element is read whole, then written whole).
        for i in (0..len).step_by(e) {
            mem.copy_within(s + i..s + i + e, d + i);
        }
    }
}

/// Copy `len` bytes from `s` to `d` (the lowest bytes of both ranges) with the result of an
/// element-by-element copy of `e`-byte elements from the highest element down (MOVS with
/// DF = 1).
pub fn copy_backward(mem: &mut [u8], s: usize, d: usize, len: usize, e: usize) {
    if d >= s || s - d >= len {
        // Every element is read before a write reaches it (writes go above the elements still
        // to be read, or do not overlap them): memmove gives the same bytes.
        mem.copy_within(s..s + len, d);
    } else {
        // A write may reach a source element still to be read: one element at a time.
        for i in (0..len).step_by(e).rev() {
            mem.copy_within(s + i..s + i + e, d + i);
        }
    }
}

fn movs(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = Str::new(x, ins, false);
    if g.rep == Rep::None {
        movs_one(x, &g)?;
        return Ok(());
    }
    let mut count = g.reg(x, RCX);
    if count == 0 {
        g.zero_count(x, true, true);
        return Ok(());
    }
    let limit = iteration_limit(x);
    let mut n = 0u64;
    while count > 0 && n < limit {
        let done = movs_chunk(x, &g, (limit - n).min(count));
        let done = match done {
            Ok(0) => movs_one(x, &g).map(|()| 1),
            other => other,
        };
        match done {
            Ok(k) => {
                count -= k;
                n += k;
                g.set_reg(x, RCX, count);
            }
            Err(f) => return Err(rep_fault(x, n, f)),
        }
    }
    rep_end(x, n, count > 0)
}

// ----- STOS -----

#[inline]
fn stos_one(x: &mut Ctx, g: &Str, val: u64) -> Result<(), Fault> {
    let lin = g.dst(x)?;
    x.write(lin, g.esize, val)?;
    g.advance(x, RDI, 1);
    Ok(())
}

/// REP STOS fast path: fill up to `max` elements within one RAM page at once, in the
/// direction DF selects.
fn stos_chunk(x: &mut Ctx, g: &Str, max: u64, val: u64) -> Result<u64, Fault> {
    let rdi = g.reg(x, RDI);
    if !g.bulk {
        return Ok(0);
    }
    let Ok(dst) = g.dst(x) else {
        return Ok(0);
    };
    let k = max.min(g.room(rdi, dst));
    if k < 2 {
        return Ok(0);
    }
    let pd = x.translate(dst, Access::Write)?;
    let len = k * g.esize as u64;
    let pd = g.run_start(pd, len);
    if !x.ram.contains(pd, len) {
        return Ok(0);
    }
    // note_write before the fill: the verify write log (lockstep-jit) records the old bytes.
    if x.ram.note_write(pd, len) {
        x.cpu.smc = true;
    }
    let buf = &mut x.ram.bytes_mut()[pd as usize..(pd + len) as usize];
    match g.esize {
        1 => buf.fill(val as u8),
        2 => fill_elements::<2>(buf, val),
        4 => fill_elements::<4>(buf, val),
        _ => fill_elements::<8>(buf, val),
    }
    g.advance(x, RDI, k);
    Ok(k)
}

/// Fill `buf` (a whole number of `N`-byte elements) with the low `N` bytes of `val`,
/// little-endian. A pattern of one repeated byte (zero: a page being cleared) is a plain
/// byte fill; otherwise the element size is a constant, so each copy is a single store
/// rather than a `memcpy` call per element.
fn fill_elements<const N: usize>(buf: &mut [u8], val: u64) {
    let bytes = val.to_le_bytes();
    let mut pat = [0u8; N];
    pat.copy_from_slice(&bytes[..N]);
    if pat.iter().all(|&b| b == pat[0]) {
        buf.fill(pat[0]);
        return;
    }
    for el in buf.chunks_exact_mut(N) {
        el.copy_from_slice(&pat);
    }
}

fn stos(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = Str::new(x, ins, false);
    let val = x.cpu.state.gpr[RAX] & mask(g.esize);
    if g.rep == Rep::None {
        stos_one(x, &g, val)?;
        return Ok(());
    }
    let mut count = g.reg(x, RCX);
    if count == 0 {
        g.zero_count(x, false, true);
        return Ok(());
    }
    let limit = iteration_limit(x);
    let mut n = 0u64;
    while count > 0 && n < limit {
        let done = stos_chunk(x, &g, (limit - n).min(count), val);
        let done = match done {
            Ok(0) => stos_one(x, &g, val).map(|()| 1),
            other => other,
        };
        match done {
            Ok(k) => {
                count -= k;
                n += k;
                g.set_reg(x, RCX, count);
            }
            Err(f) => return Err(rep_fault(x, n, f)),
        }
    }
    rep_end(x, n, count > 0)
}

// ----- LODS -----

#[inline]
fn lods_one(x: &mut Ctx, g: &Str, dst: Register) -> Result<(), Fault> {
    let lin = g.src(x)?;
    let v = x.read(lin, g.esize)?;
    write_reg(&mut x.cpu.state, dst, v);
    g.advance(x, RSI, 1);
    Ok(())
}

fn lods(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = Str::new(x, ins, false);
    let dst = ins.op0_register();
    if g.rep == Rep::None {
        lods_one(x, &g, dst)?;
        return Ok(());
    }
    let mut count = g.reg(x, RCX);
    if count == 0 {
        g.zero_count(x, false, false);
        return Ok(());
    }
    let limit = iteration_limit(x);
    let mut n = 0u64;
    while count > 0 && n < limit {
        if let Err(f) = lods_one(x, &g, dst) {
            return Err(rep_fault(x, n, f));
        }
        count -= 1;
        n += 1;
        g.set_reg(x, RCX, count);
    }
    rep_end(x, n, count > 0)
}

// ----- CMPS / SCAS -----

/// One CMPS element: compare [src] with ES:[RDI] (as `SUB [src], [rdi]`), then advance.
#[inline]
fn cmps_one(x: &mut Ctx, g: &Str) -> Result<(), Fault> {
    let lin = g.src(x)?;
    let a = x.read(lin, g.esize)?;
    let lin = g.dst_for(x, false)?;
    let b = x.read(lin, g.esize)?;
    set_status(&mut x.cpu.state, STATUS, compare_flags(a, b, g.esize));
    g.advance(x, RSI, 1);
    g.advance(x, RDI, 1);
    Ok(())
}

/// One SCAS element: compare the accumulator with ES:[RDI] (as `SUB acc, [rdi]`), then advance.
#[inline]
fn scas_one(x: &mut Ctx, g: &Str) -> Result<(), Fault> {
    let a = x.cpu.state.gpr[RAX] & mask(g.esize);
    let lin = g.dst_for(x, false)?;
    let b = x.read(lin, g.esize)?;
    set_status(&mut x.cpu.state, STATUS, compare_flags(a, b, g.esize));
    g.advance(x, RDI, 1);
    Ok(())
}

/// The REP/REPE/REPNE loop shared by CMPS and SCAS.
fn compare_loop(
    x: &mut Ctx,
    g: &Str,
    one: fn(&mut Ctx, &Str) -> Result<(), Fault>,
) -> Result<(), Trap> {
    if g.rep == Rep::None {
        one(x, g)?;
        return Ok(());
    }
    let mut count = g.reg(x, RCX);
    if count == 0 {
        g.zero_count(x, false, false);
        return Ok(());
    }
    let limit = iteration_limit(x);
    let mut n = 0u64;
    let mut stopped = false;
    while count > 0 && n < limit {
        if let Err(f) = one(x, g) {
            return Err(rep_fault(x, n, f));
        }
        count -= 1;
        n += 1;
        g.set_reg(x, RCX, count);
        let zf = x.cpu.state.rflags & ZF != 0;
        stopped = match g.rep {
            Rep::WhileEqual => !zf,
            Rep::WhileNotEqual => zf,
            _ => false,
        };
        if stopped {
            break;
        }
    }
    rep_end(x, n, count > 0 && !stopped)
}

fn cmps(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = Str::new(x, ins, true);
    compare_loop(x, &g, cmps_one)
}

fn scas(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let g = Str::new(x, ins, true);
    compare_loop(x, &g, scas_one)
}

#[cfg(test)]
#[path = "string_tests.rs"]
mod tests;
#[cfg(test)]
#[path = "string_tests_exec.rs"]
mod tests_exec;
