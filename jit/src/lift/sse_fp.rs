//! Native lowering of SSE floating-point arithmetic: ADD/SUB/MUL/DIV/SQRT {SS,SD,PS,PD},
//! MIN/MAX {SS,SD}, (U)COMIS{S,D}, CVTSI2S{S,D}, CVTTS{S,D}2SI and CVTSS2SD/CVTSD2SS (legacy),
//! and the VEX.128 scalar forms of the same (VADDSD, …, VCVTSD2SS, VUCOMISD); scalar FMA3
//! (VFMADD/VFMSUB/VFNMADD/VFNMSUB{132,213,231}{SS,SD}) when MXCSR.PE is already set.
//!
//! The model is the interpreter's quick host path (`lockstep_interp::fp::host_quick`): when
//! the guest MXCSR is the default environment (all exceptions masked, round to nearest, no
//! DAZ/FTZ; the sticky flags may be anything) and the operands and result are zeros or normal
//! numbers inside the band `LO..=HI` of biased exponents, the host's result is the guest's,
//! no exception but PE can occur, and PE is decided exactly by an error-free transformation
//! (TwoSum for add/sub; for f64 mul/div/sqrt the remainder by one FMA — so those need the host
//! FMA, else they stay on the trampoline; for f32 the product in double). MIN/MAX and COMIS
//! of operands that are neither NaN nor denormal raise nothing under any MXCSR. The fast path
//! ORs PE into MXCSR when the result is inexact.
//!
//! SSE unavailable (CR0.EM/TS, CR4.OSFXSR) leaves the block before the instruction, as in
//! `sse_int.rs`. Anything else — a non-default MXCSR, a NaN, denormal, infinite or
//! out-of-band operand or result, a TLB miss, a misaligned m128 — runs the whole instruction
//! through the interpreter's handler in a cold path, so every flag, fault and corner case is
//! the interpreter's.

use super::sse_fp_forms::{covered, Ar, Op, Spec};
use super::sse_int::{used_gprs, vec_off};
use super::{guest_mem, Lower, RFLAGS};
use crate::frame::{ret, OFF_RFLAGS};
use cranelift_codegen::ir::{
    condcodes::{FloatCC, IntCC},
    types, InstBuilder, MemFlagsData, Type, Value,
};
use iced_x86::{Instruction, OpKind};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::fp::mxcsr;
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::state::flags::{CF, STATUS, ZF};
use lockstep_interp::state::CpuState;

/// Bit layout of a format: (integer type, float type, fraction bits, exponent mask, band).
#[derive(Clone, Copy)]
struct Fmt {
    ity: Type,
    fty: Type,
    frac: i64,
    exp: i64,
    lo: i64,
    hi: i64,
    /// Significand precision (bits).
    prec: i64,
}

// The bands of `host_quick`'s `Native` implementations (f32 40..=214, f64 100..=1947).
const F32: Fmt = Fmt {
    ity: types::I32,
    fty: types::F32,
    frac: 23,
    exp: 0xff,
    lo: 40,
    hi: 214,
    prec: 24,
};
const F64: Fmt = Fmt {
    ity: types::I64,
    fty: types::F64,
    frac: 52,
    exp: 0x7ff,
    lo: 100,
    hi: 1947,
    prec: 53,
};

fn fmt(f64: bool) -> Fmt {
    if f64 {
        F64
    } else {
        F32
    }
}

const OFF_MXCSR: i32 = core::mem::offset_of!(CpuState, mxcsr) as i32;

/// Outcome of the fast computation (in the first fast block): the result is used only when
/// `ok` holds.
struct Res {
    ok: Value,
    /// Result lanes (integer bit patterns), or a GPR value (FloatToInt), or RFLAGS status bits
    /// (Comi).
    vals: Vec<Value>,
    /// Inexact (I8 boolean), for the conversions that may set PE.
    inexact: Option<Value>,
    /// ADD/SUB/MUL/DIV/SQRT: the lanes' inputs of [`Lower::arith_exact`], evaluated only
    /// when MXCSR.PE is still clear.
    exact_later: Vec<[Value; 3]>,
}

impl Lower<'_> {
    fn fbits(&mut self, f: Fmt, x: Value) -> Value {
        self.b.ins().bitcast(f.fty, MemFlagsData::new(), x)
    }

    fn ibits(&mut self, f: Fmt, x: Value) -> Value {
        self.b.ins().bitcast(f.ity, MemFlagsData::new(), x)
    }

    /// ±0.
    fn is_zero(&mut self, x: Value) -> Value {
        let t = self.b.ins().ishl_imm_s(x, 1);
        self.b.ins().icmp_imm_s(IntCC::Equal, t, 0)
    }

    fn exp_field(&mut self, f: Fmt, x: Value) -> Value {
        let e = self.b.ins().ushr_imm_s(x, f.frac);
        self.b.ins().band_imm_s(e, f.exp)
    }

    /// A normal number with the biased exponent in the band.
    fn in_band(&mut self, f: Fmt, x: Value) -> Value {
        let y = self.b.ins().ishl_imm_s(x, 1);
        self.band_of_doubled(f, y)
    }

    /// [`Self::in_band`] of `x` from `y = x << 1` (sign shifted out, the biased exponent in
    /// the top bits): `lo << p <= y < (hi + 1) << p` with `p` = fraction bits + 1, as one
    /// unsigned compare after subtracting the lower bound.
    fn band_of_doubled(&mut self, f: Fmt, y: Value) -> Value {
        let p = f.frac + 1;
        let t = self.b.ins().iadd_imm_s(y, -(f.lo << p));
        let width = ((f.hi - f.lo + 1) as u64) << p;
        self.b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, t, width as i64)
    }

    /// (±0, [`Self::in_band`]) of `x`, sharing the shift.
    fn zero_and_band(&mut self, f: Fmt, x: Value) -> (Value, Value) {
        let y = self.b.ins().ishl_imm_s(x, 1);
        let z = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        (z, self.band_of_doubled(f, y))
    }

    fn zero_or_band(&mut self, f: Fmt, x: Value) -> Value {
        let (z, b) = self.zero_and_band(f, x);
        self.b.ins().bor(z, b)
    }

    /// Neither a NaN nor a denormal: a zero fraction (zero, infinity), or a biased exponent
    /// other than 0 and the maximum (`host_quick::plain`).
    fn plain(&mut self, f: Fmt, x: Value) -> Value {
        let width = f.ity.bits() as i64;
        let t = self.b.ins().ishl_imm_s(x, width - f.frac);
        let fz = self.b.ins().icmp_imm_s(IntCC::Equal, t, 0);
        let e = self.exp_field(f, x);
        let t = self.b.ins().iadd_imm_s(e, -1);
        let n = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, t, f.exp - 1);
        self.b.ins().bor(fz, n)
    }

    fn all(&mut self, v: &[Value]) -> Value {
        let mut acc = v[0];
        for &x in &v[1..] {
            acc = self.b.ins().band(acc, x);
        }
        acc
    }

    /// `x * y == z` exactly (no NaN, no infinity: the FMA remainder, or for singles the
    /// product in double).
    fn mul_exact(&mut self, f: Fmt, x: Value, y: Value, z: Value) -> Value {
        if f.fty == types::F64 {
            let nz = self.b.ins().fneg(z);
            let r = self.b.ins().fma(x, y, nz);
            let zero = self.b.ins().f64const(0.0);
            self.b.ins().fcmp(FloatCC::Equal, r, zero)
        } else {
            let x = self.b.ins().fpromote(types::F64, x);
            let y = self.b.ins().fpromote(types::F64, y);
            let z = self.b.ins().fpromote(types::F64, z);
            let p = self.b.ins().fmul(x, y);
            self.b.ins().fcmp(FloatCC::Equal, p, z)
        }
    }

    /// One lane of ADD/SUB/MUL/DIV/SQRT (`host_quick::arith_native`): (result bits, ok, the
    /// float operands and result for [`Self::arith_exact`]).
    fn arith_lane(&mut self, f: Fmt, op: Ar, a: Value, b: Value) -> (Value, Value, [Value; 3]) {
        let (x, y) = (self.fbits(f, a), self.fbits(f, b));
        let (zb, bb) = self.zero_and_band(f, b);
        match op {
            Ar::Add | Ar::Sub => {
                let y = if op == Ar::Sub {
                    self.b.ins().fneg(y)
                } else {
                    y
                };
                let r = self.b.ins().fadd(x, y);
                let ri = self.ibits(f, r);
                let zb_a = self.zero_or_band(f, a);
                let zb_b = self.b.ins().bor(zb, bb);
                let zb_r = self.zero_or_band(f, ri);
                let ok = self.all(&[zb_a, zb_b, zb_r]);
                (ri, ok, [x, y, r])
            }
            Ar::Mul => {
                let r = self.b.ins().fmul(x, y);
                let ri = self.ibits(f, r);
                let (za, ba) = self.zero_and_band(f, a);
                let zb_a = self.b.ins().bor(za, ba);
                let zb_b = self.b.ins().bor(zb, bb);
                let br = self.in_band(f, ri);
                let rok = self.b.ins().bor(za, zb);
                let rok = self.b.ins().bor(rok, br);
                let ok = self.all(&[zb_a, zb_b, rok]);
                (ri, ok, [x, y, r])
            }
            Ar::Div => {
                let r = self.b.ins().fdiv(x, y);
                let ri = self.ibits(f, r);
                let (za, ba) = self.zero_and_band(f, a);
                let zb_a = self.b.ins().bor(za, ba);
                let br = self.in_band(f, ri);
                let rok = self.b.ins().bor(za, br);
                let ok = self.all(&[zb_a, bb, rok]);
                (ri, ok, [x, y, r])
            }
            Ar::Sqrt => {
                let r = self.b.ins().sqrt(y);
                let ri = self.ibits(f, r);
                // A zero (either sign), or a positive band value (whose root is in the band).
                let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, b, 0);
                let bpos = self.b.ins().band(bb, pos);
                let br = self.in_band(f, ri);
                let rok = self.b.ins().bor(zb, br);
                let inok = self.b.ins().bor(zb, bpos);
                let ok = self.b.ins().band(inok, rok);
                (ri, ok, [x, y, r])
            }
        }
    }

    /// Is the lane's result exact? (`[x, y, r]` from [`Self::arith_lane`]; `y` negated for
    /// SUB.)
    fn arith_exact(&mut self, f: Fmt, op: Ar, [x, y, r]: [Value; 3]) -> Value {
        match op {
            Ar::Add | Ar::Sub => {
                // TwoSum: the error term is zero (an exact zero result included).
                let bp = self.b.ins().fsub(r, x);
                let ap = self.b.ins().fsub(r, bp);
                let da = self.b.ins().fsub(x, ap);
                let db = self.b.ins().fsub(y, bp);
                let e = self.b.ins().fadd(da, db);
                let ei = self.ibits(f, e);
                self.is_zero(ei)
            }
            // (A zero factor gives a zero remainder too.)
            Ar::Mul => self.mul_exact(f, x, y, r),
            Ar::Div => self.mul_exact(f, r, y, x),
            Ar::Sqrt => self.mul_exact(f, r, r, y),
        }
    }
}

/// Lower `d` if it is covered: `Some(Continue)`.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<super::insn::Outcome> {
    let ins = &d.ins;
    let spec = covered(ins)?;
    let mut ok = l.assert_vec_enabled(spec.vex);
    let mx = l.state_load(types::I32, OFF_MXCSR);
    if spec.needs_env() {
        // Masks all set, RC nearest, no DAZ/FTZ (`host_quick::default_env`); once per block
        // (see `Lower::mx_env`).
        let env = match l.mx_env {
            Some(env) => env,
            None => {
                let masks = (mxcsr::FLAGS << mxcsr::MASK_SHIFT) as i64;
                let control = ((3 << mxcsr::RC_SHIFT) | mxcsr::FTZ | mxcsr::DAZ) as i64;
                let m = l.b.ins().band_imm_s(mx, masks | control);
                let env = l.b.ins().icmp_imm_s(IntCC::Equal, m, masks);
                l.mx_env = Some(env);
                env
            }
        };
        ok = l.b.ins().band(ok, env);
    }
    if matches!(spec.op, Op::Fma { .. }) {
        let pe = l.b.ins().band_imm_s(mx, mxcsr::PE as i64);
        let pe_set = l.b.ins().icmp_imm_s(IntCC::NotEqual, pe, 0);
        ok = l.b.ins().band(ok, pe_set);
    }
    let mut host = None;
    let (_, nb) = spec.sources();
    if ins.op_kind(nb) == OpKind::Memory {
        let a = l.mem_addr(ins);
        let size = ins.memory_size().size() as u8;
        let tr = l.tlb_read();
        let (hit, entry) = l.tlb_probe(tr, a.lin, size);
        ok = l.b.ins().band(ok, hit);
        if size == 16 {
            let low = l.b.ins().band_imm_s(a.lin, 15);
            let al = l.b.ins().icmp_imm_s(IntCC::Equal, low, 0);
            ok = l.b.ins().band(ok, al);
        }
        host = Some((entry, a.lin));
    }
    // Values the slow path must not change: a GPR source, and RFLAGS (COMIS keeps its
    // non-status bits), read on the main path.
    let gpr_src = (ins.op_kind(nb) == OpKind::Register && gpr_ref(ins.op_register(nb)).is_some())
        .then(|| l.read_reg(ins.op_register(nb)));
    let rf_old = (spec.op == Op::Comi).then(|| l.gpr(RFLAGS));
    let gpr_dst = (spec.op == Op::FloatToInt)
        .then(|| gpr_ref(ins.op0_register()))
        .flatten();

    let fast = l.b.create_block();
    let commit = l.b.create_block();
    let slow = l.b.create_block();
    let join = l.b.create_block();
    l.b.set_cold_block(slow);
    l.b.ins().brif(ok, fast, &[], slow, &[]);
    l.b.seal_block(fast);

    // The computation, and the checks that need its operands and result.
    l.b.switch_to_block(fast);
    let haddr = host.map(|(entry, lin)| l.host_addr(entry, lin));
    let res = compute(l, ins, spec, haddr, gpr_src);
    l.b.ins().brif(res.ok, commit, &[], slow, &[]);
    l.b.seal_block(commit);
    l.b.seal_block(slow);

    // Slow path (compile-time state of before the instruction): the interpreter's handler.
    l.b.switch_to_block(slow);
    l.sync_retired_for_device();
    let used = used_gprs(ins);
    l.store_regs(used & l.dirty);
    let saved_pending = l.pending.clone();
    let saved_dirty = l.dirty;
    if rf_old.is_some() {
        // The handler reads and writes RFLAGS in memory: give it the current flags, and keep
        // the exit below from storing them again over the handler's.
        l.cold = true;
        if let Some(f) = l.flags_value() {
            l.state_store(f, OFF_RFLAGS);
        }
        l.cold = false;
        l.pending.clear();
        l.dirty &= !(1 << RFLAGS);
    }
    let status = l.call_exec_insn(d);
    let c =
        l.b.ins()
            .icmp_imm_s(IntCC::NotEqual, status, ret::NEXT as i64);
    let (k, stale) = (l.k, l.ret_stale);
    l.k = 0;
    l.ret_stale = false;
    l.dirty &= !used;
    l.side_exit_if(c, None, Some(status), 0);
    (l.k, l.ret_stale, l.dirty) = (k, stale, saved_dirty);
    l.unsync_retired();
    l.pending = saved_pending;
    if let Some(g) = gpr_dst {
        let v = l.state_load(types::I64, crate::frame::gpr_off(g.index));
        l.b.def_var(l.vars[g.index], v);
        l.new_version(g.index);
    }
    if rf_old.is_some() {
        let v = l.state_load(types::I64, OFF_RFLAGS);
        l.b.def_var(l.vars[RFLAGS], v);
    }
    l.b.ins().jump(join, &[]);

    // Fast path: write the results.
    l.b.switch_to_block(commit);
    if !res.exact_later.is_empty() {
        // PE already set (the common case once a program has rounded anything): nothing to
        // decide or store.
        let Op::Arith(op) = spec.op else {
            unreachable!("only arithmetic defers its exactness")
        };
        let decide = l.b.create_block();
        let write = l.b.create_block();
        let pe_set = l.b.ins().band_imm_s(mx, mxcsr::PE as i64);
        l.b.ins().brif(pe_set, write, &[], decide, &[]);
        l.b.seal_block(decide);
        l.b.switch_to_block(decide);
        let f = fmt(spec.f64);
        let exacts: Vec<Value> = res
            .exact_later
            .iter()
            .map(|&ops| l.arith_exact(f, op, ops))
            .collect();
        let exact = l.all(&exacts);
        let pe = l.b.ins().iconst(types::I32, mxcsr::PE as i64);
        let z = l.b.ins().iconst(types::I32, 0);
        let pe = l.b.ins().select(exact, z, pe);
        let m = l.b.ins().bor(mx, pe);
        l.state_store(m, OFF_MXCSR);
        l.b.ins().jump(write, &[]);
        l.b.seal_block(write);
        l.b.switch_to_block(write);
    }
    if let Some(inexact) = res.inexact {
        let pe = l.b.ins().iconst(types::I32, mxcsr::PE as i64);
        let z = l.b.ins().iconst(types::I32, 0);
        let pe = l.b.ins().select(inexact, pe, z);
        let m = l.b.ins().bor(mx, pe);
        l.state_store(m, OFF_MXCSR);
    }
    match spec.op {
        Op::Comi => {
            let rf = rf_old.expect("COMIS read RFLAGS");
            let keep = l.b.ins().band_imm_s(rf, !(STATUS as i64));
            let rf = l.b.ins().bor(keep, res.vals[0]);
            l.b.def_var(l.vars[RFLAGS], rf);
        }
        Op::FloatToInt => l.write_reg(ins.op0_register(), res.vals[0]),
        _ => {
            // The computed lanes; a legacy scalar keeps the rest of the destination, a VEX
            // one takes bits 127:64 from the first source and zeroes bits 255:128.
            let off = vec_off(ins.op0_register());
            if spec.vex {
                // (FMA: the destination is the first source.)
                let from = if matches!(spec.op, Op::Fma { .. }) {
                    off
                } else {
                    vec_off(ins.op1_register())
                };
                let lo = l.state_load(types::I64, from);
                let hi = l.state_load(types::I64, from + 8);
                let z = l.b.ins().iconst(types::I64, 0);
                l.state_store(lo, off);
                l.state_store(hi, off + 8);
                l.state_store(z, off + 16);
                l.state_store(z, off + 24);
            }
            let w = res_width(spec) as i32;
            for (i, &v) in res.vals.iter().enumerate() {
                l.state_store(v, off + w * i as i32);
            }
        }
    }
    l.b.ins().jump(join, &[]);
    l.b.seal_block(join);
    l.b.switch_to_block(join);
    if rf_old.is_some() {
        // Every status flag is in the RFLAGS variable now (both paths defined it).
        l.pending.clear();
        l.loaded |= 1 << RFLAGS;
        l.dirty |= 1 << RFLAGS;
    }
    l.retire();
    Some(super::insn::Outcome::Continue)
}

/// Byte width of a result lane.
fn res_width(spec: Spec) -> u8 {
    match spec.op {
        Op::Widen => 8,
        Op::Narrow => 4,
        _ if spec.f64 => 8,
        _ => 4,
    }
}

/// The operands, the result and the fast-path conditions that depend on them.
fn compute(
    l: &mut Lower,
    ins: &Instruction,
    spec: Spec,
    haddr: Option<Value>,
    gpr_src: Option<Value>,
) -> Res {
    let f = fmt(spec.f64);
    let w = if spec.f64 { 8 } else { 4 };
    let (na, nb) = spec.sources();
    // Lane `i` of XMM/memory operand `n` in format `f`.
    let lane = |l: &mut Lower, n: u32, i: i32| -> Value {
        match ins.op_kind(n) {
            OpKind::Memory => {
                let h = haddr.expect("memory operand has a host address");
                l.b.ins().load(f.ity, guest_mem(), h, w * i)
            }
            _ => {
                let off = vec_off(ins.op_register(n));
                l.state_load(f.ity, off + w * i)
            }
        }
    };
    match spec.op {
        Op::Arith(op) => {
            let mut vals = Vec::new();
            let mut oks = Vec::new();
            let mut later = Vec::new();
            for i in 0..spec.lanes as i32 {
                let a = if op == Ar::Sqrt {
                    lane(l, nb, i)
                } else {
                    lane(l, na, i)
                };
                let b = lane(l, nb, i);
                let (r, ok, ops) = l.arith_lane(f, op, a, b);
                vals.push(r);
                oks.push(ok);
                later.push(ops);
            }
            let ok = l.all(&oks);
            Res {
                ok,
                vals,
                inexact: None,
                exact_later: later,
            }
        }
        Op::MinMax(max) => {
            let (a, b) = (lane(l, na, 0), lane(l, nb, 0));
            let pa = l.plain(f, a);
            let pb = l.plain(f, b);
            let ok = l.b.ins().band(pa, pb);
            let (x, y) = (l.fbits(f, a), l.fbits(f, b));
            // The first operand when strictly smaller (larger), else the second.
            let first = if max {
                l.b.ins().fcmp(FloatCC::LessThan, y, x)
            } else {
                l.b.ins().fcmp(FloatCC::LessThan, x, y)
            };
            let r = l.b.ins().select(first, a, b);
            Res {
                ok,
                vals: vec![r],
                inexact: None,
                exact_later: Vec::new(),
            }
        }
        Op::Comi => {
            let (a, b) = (lane(l, na, 0), lane(l, nb, 0));
            let pa = l.plain(f, a);
            let pb = l.plain(f, b);
            let ok = l.b.ins().band(pa, pb);
            let (x, y) = (l.fbits(f, a), l.fbits(f, b));
            let lt = l.b.ins().fcmp(FloatCC::LessThan, x, y);
            let eq = l.b.ins().fcmp(FloatCC::Equal, x, y);
            let cf = l.iconst(CF);
            let zf = l.iconst(ZF);
            let z = l.iconst(0);
            let e = l.b.ins().select(eq, zf, z);
            let bits = l.b.ins().select(lt, cf, e);
            Res {
                ok,
                vals: vec![bits],
                inexact: None,
                exact_later: Vec::new(),
            }
        }
        Op::IntToFloat => {
            let wide = ins.op_kind(nb) == OpKind::Register && ins.op_register(nb).is_gpr64()
                || ins.op_kind(nb) == OpKind::Memory && ins.memory_size().size() == 8;
            let raw = match gpr_src {
                Some(v) => v,
                None => {
                    let h = haddr.expect("memory operand has a host address");
                    if wide {
                        l.b.ins().load(types::I64, guest_mem(), h, 0)
                    } else {
                        l.b.ins().uload32(guest_mem(), h, 0)
                    }
                }
            };
            // The source sign-extended to 64 bits (a 32-bit source converts exactly the same).
            let v = if wide {
                raw
            } else {
                let t = l.b.ins().ireduce(types::I32, raw);
                l.b.ins().sextend(types::I64, t)
            };
            let r = l.b.ins().fcvt_from_sint(f.fty, v);
            let ri = l.ibits(f, r);
            // Exact when the significant bits of |v| span at most the precision.
            let u = l.b.ins().iabs(v);
            let lz = l.b.ins().clz(u);
            let tz = l.b.ins().ctz(u);
            let used = l.b.ins().iadd(lz, tz);
            // (span = 64 - used > prec; a zero has used = 128.)
            let inexact =
                l.b.ins()
                    .icmp_imm_s(IntCC::SignedLessThan, used, 64 - f.prec);
            let ok = l.b.ins().iconst(types::I8, 1);
            Res {
                ok,
                vals: vec![ri],
                inexact: Some(inexact),
                exact_later: Vec::new(),
            }
        }
        Op::FloatToInt => {
            let a = lane(l, nb, 0);
            let x = l.fbits(f, a);
            let x = if spec.f64 {
                x
            } else {
                l.b.ins().fpromote(types::F64, x)
            };
            let bits = ins.op0_register().size() * 8;
            // |x| < 2^(bits-1): the truncation is in range (never the integer indefinite);
            // false for a NaN.
            let ax = l.b.ins().fabs(x);
            let lim = l.b.ins().f64const(2f64.powi(bits as i32 - 1));
            let ok = l.b.ins().fcmp(FloatCC::LessThan, ax, lim);
            let ity = if bits == 8 * 8 {
                types::I64
            } else {
                types::I32
            };
            let r = l.b.ins().fcvt_to_sint_sat(ity, x);
            let back = l.b.ins().fcvt_from_sint(types::F64, r);
            let inexact = l.b.ins().fcmp(FloatCC::NotEqual, back, x);
            let r = if ity == types::I32 {
                l.b.ins().uextend(types::I64, r)
            } else {
                r
            };
            Res {
                ok,
                vals: vec![r],
                inexact: Some(inexact),
                exact_later: Vec::new(),
            }
        }
        Op::Fma {
            order,
            neg_prod,
            neg_c,
        } => {
            let (d, s2, s3) = (lane(l, 0, 0), lane(l, 1, 0), lane(l, 2, 0));
            let (a, b, c) = match order {
                132 => (d, s3, s2),
                213 => (s2, d, s3),
                _ => (s2, s3, d),
            };
            // Operands zero or in the band and a result in the band: no flag but PE (already
            // set) is possible, and the host's fused result is the guest's. (A zero result may
            // be an underflow: slow path.)
            let za = l.zero_or_band(f, a);
            let zb = l.zero_or_band(f, b);
            let zc = l.zero_or_band(f, c);
            let (x, y, z) = (l.fbits(f, a), l.fbits(f, b), l.fbits(f, c));
            let x = if neg_prod { l.b.ins().fneg(x) } else { x };
            let z = if neg_c { l.b.ins().fneg(z) } else { z };
            let r = l.b.ins().fma(x, y, z);
            let ri = l.ibits(f, r);
            let br = l.in_band(f, ri);
            let ok = l.all(&[za, zb, zc, br]);
            Res {
                ok,
                vals: vec![ri],
                inexact: None,
                exact_later: Vec::new(),
            }
        }
        Op::Widen => {
            // Exact; a NaN or a denormal raises a flag.
            let a = lane(l, nb, 0);
            let ok = l.plain(F32, a);
            let x = l.fbits(F32, a);
            let r = l.b.ins().fpromote(types::F64, x);
            let ri = l.ibits(F64, r);
            Res {
                ok,
                vals: vec![ri],
                inexact: None,
                exact_later: Vec::new(),
            }
        }
        Op::Narrow => {
            // A zero or an infinity converts exactly; a band value needs a band result.
            let a = lane(l, nb, 0);
            let x = l.fbits(F64, a);
            let r = l.b.ins().fdemote(types::F32, x);
            let ri = l.ibits(F32, r);
            let t = l.b.ins().ishl_imm_s(a, 1);
            let inf =
                l.b.ins()
                    .icmp_imm_s(IntCC::Equal, t, (0x7ff0_0000_0000_0000u64 << 1) as i64);
            let z = l.b.ins().icmp_imm_s(IntCC::Equal, t, 0);
            let special = l.b.ins().bor(inf, z);
            let ba = l.band_of_doubled(F64, t);
            let br = l.in_band(F32, ri);
            let regular = l.b.ins().band(ba, br);
            let ok = l.b.ins().bor(special, regular);
            let back = l.b.ins().fpromote(types::F64, r);
            let inexact = l.b.ins().fcmp(FloatCC::NotEqual, back, x);
            Res {
                ok,
                vals: vec![ri],
                inexact: Some(inexact),
                exact_later: Vec::new(),
            }
        }
    }
}
