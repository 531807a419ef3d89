//! x87 loads and arithmetic from a form decoded once and packed in a word, for the JIT's
//! native x87 path: FLD/FILD (m32/m64/m80 floats, m16/m32/m64 integers, ST(i)) and
//! FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR in every form but BCD. [`run`] first tries the common case
//! on its own (`run_fast`: a load that raises nothing into an empty register, arithmetic of
//! two normal numbers with a normal result through `x87::fast`), else computes and commits
//! with the interpreter handlers' own functions (`x87_arith::binary_compute`/`binary_commit`,
//! `x87_load::load_compute`/`load_commit`); it declines, leaving the state untouched, whenever
//! the handler would do more than that: the FPU unavailable (#NM), a pending exception (#MF),
//! or an unmasked exception to record (FOP, FDP). The caller then runs the handler.

use super::x87_arith::{binary_commit, binary_compute, binary_form, mem_value, BinaryForm, Op};
use super::x87_common::{get_st, is_mem, st_index, unmasked};
use super::x87_load::{load_commit, load_compute, load_mem_value};
use crate::state::{ctl, CpuState, X87State};
use crate::x87::fast;
use crate::x87::{sw, Env, F80};
use iced_x86::{Instruction, MemorySize, Mnemonic};

const KIND_LOAD: u64 = 1;
const MEM: u64 = 1 << 12;

/// The memory operand kinds, in their 3-bit codes.
const SIZES: [MemorySize; 6] = [
    MemorySize::Float32,
    MemorySize::Float64,
    MemorySize::Float80,
    MemorySize::Int16,
    MemorySize::Int32,
    MemorySize::Int64,
];

/// The packed form of `ins`, or `None` if [`run`] does not cover it. Layout: bit 0 load (else
/// arithmetic), bits 3:2 the operation, bit 4 reversed, bit 5 pop, bits 8:6 the destination,
/// bits 11:9 the source register, bit 12 a memory source, bits 15:13 its kind.
pub fn form_of(ins: &Instruction) -> Option<u64> {
    use Mnemonic::*;
    if ins.has_lock_prefix() {
        return None;
    }
    let mem_kind = |ins: &Instruction| -> Option<u64> {
        SIZES
            .iter()
            .position(|&s| s == ins.memory_size())
            .map(|k| MEM | (k as u64) << 13)
    };
    match ins.mnemonic() {
        Fld | Fild => {
            if is_mem(ins, 0) {
                Some(KIND_LOAD | mem_kind(ins)?)
            } else {
                Some(KIND_LOAD | (st_index(ins, 0) as u64) << 9)
            }
        }
        Fadd | Faddp | Fiadd | Fsub | Fsubp | Fisub | Fsubr | Fsubrp | Fisubr | Fmul | Fmulp
        | Fimul | Fdiv | Fdivp | Fidiv | Fdivr | Fdivrp | Fidivr => {
            let f = binary_form(ins);
            let op = match f.op {
                Op::Add => 0,
                Op::Sub => 1,
                Op::Mul => 2,
                Op::Div => 3,
            };
            let src = match f.src {
                Some(i) => (i as u64) << 9,
                None => mem_kind(ins)?,
            };
            Some(
                op << 2 | (f.reverse as u64) << 4 | (f.pop as u64) << 5 | (f.dst as u64) << 6 | src,
            )
        }
        _ => None,
    }
}

/// Bytes of the memory operand of a packed form (0: none).
pub fn mem_bytes(form: u64) -> u8 {
    if form & MEM == 0 {
        return 0;
    }
    SIZES[((form >> 13) & 7) as usize].size() as u8
}

/// Run the packed form of the instruction at `ip`, whose memory operand (if any) holds `lo`
/// (bits 63:0, zero-extended) and `hi` (bits 79:64 of an m80). True when done (FIP is `ip`);
/// false when the interpreter's handler must run it, the state unchanged.
pub fn run(s: &mut CpuState, form: u64, ip: u64, lo: u64, hi: u64) -> bool {
    if s.cr0 & (ctl::CR0_EM | ctl::CR0_TS) != 0 || s.x87.fsw & sw::ES != 0 {
        return false;
    }
    run_fast(&mut s.x87, form, ip, lo, hi) || run_general(&mut s.x87, form, ip, lo, hi)
}

/// The common case of [`run`] in few steps: a load that raises nothing into an empty
/// register, or arithmetic on two normal numbers with a normal result
/// ([`fast::arith`](crate::x87::fast::arith)) and PE masked. False, the state untouched,
/// for anything else.
#[inline(always)]
fn run_fast(f: &mut X87State, form: u64, ip: u64, lo: u64, hi: u64) -> bool {
    // (`x87_common`'s stack helpers and the commit functions inline, TOP read once: through
    // them the helper ran ~50 more host instructions per operation, ldouble +5.7%.)
    let top = ((f.fsw >> 11) & 7) as usize;
    let reg = ((form >> 9) & 7) as usize;
    let mem = form & MEM != 0;
    let size = SIZES[((form >> 13) & 7) as usize];
    let full = |f: &X87State, i: usize| f.ftw & (1 << ((top + i) & 7)) != 0;
    let read = |f: &X87State, i: usize| F80::from_bytes(&f.regs[(top + i) & 7][..10]);
    // The source: the memory operand as `convert` reads it, if that raises nothing, or a
    // full ST(reg).
    let source = |f: &X87State, convert: fn(MemorySize, u64, u64) -> (F80, u16)| {
        if mem {
            match convert(size, lo, hi) {
                (v, 0) => Some(v),
                _ => None,
            }
        } else {
            full(f, reg).then(|| read(f, reg))
        }
    };
    if form & KIND_LOAD != 0 {
        let Some(v) = source(f, |s, lo, hi| load_mem_value(s, lo, hi as u16)) else {
            return false;
        };
        // As `load_commit` with no flags: the push, C1 cleared.
        let t = (top + 7) & 7;
        if f.ftw & (1 << t) != 0 {
            return false; // stack overflow
        }
        f.regs[t][..10].copy_from_slice(&v.to_bytes());
        f.ftw |= 1 << t;
        f.fsw = (f.fsw & !(sw::TOP | sw::C1)) | (t as u16) << 11;
    } else {
        let b = binary_of(form);
        if f.fcw & sw::PE == 0 || !full(f, b.dst) {
            return false;
        }
        let Some(src) = source(f, |s, lo, _| mem_value(s, lo)) else {
            return false;
        };
        let d = read(f, b.dst);
        let (x, y) = if b.reverse { (src, d) } else { (d, src) };
        let e = Env::from_fcw(f.fcw);
        let Some((v, flags)) = fast::arith(b.op, x, y, e.prec, e.rc) else {
            return false;
        };
        // As `binary_commit`: the destination, then the pop; PE sticky, C1 replaced.
        let p = (top + b.dst) & 7;
        f.regs[p][..10].copy_from_slice(&v.to_bytes());
        f.ftw |= 1 << p;
        f.fsw = (f.fsw & !sw::C1) | flags;
        if b.pop {
            f.ftw &= !(1 << top);
            f.fsw = (f.fsw & !sw::TOP) | (((top + 1) & 7) as u16) << 11;
        }
    }
    f.fip = ip;
    true
}

/// The arithmetic form packed in `form` (see [`form_of`]).
fn binary_of(form: u64) -> BinaryForm {
    BinaryForm {
        op: [Op::Add, Op::Sub, Op::Mul, Op::Div][((form >> 2) & 3) as usize],
        reverse: form & (1 << 4) != 0,
        pop: form & (1 << 5) != 0,
        dst: ((form >> 6) & 7) as usize,
        src: (form & MEM == 0).then_some(((form >> 9) & 7) as usize),
    }
}

/// [`run`] through the interpreter handlers' own functions.
fn run_general(f: &mut X87State, form: u64, ip: u64, lo: u64, hi: u64) -> bool {
    let size = SIZES[((form >> 13) & 7) as usize];
    let reg = ((form >> 9) & 7) as usize;
    let mem = form & MEM != 0;
    if form & KIND_LOAD != 0 {
        let src = if mem {
            Some(load_mem_value(size, lo, hi as u16))
        } else {
            get_st(f, reg).map(|v| (v, 0))
        };
        let (v, flags) = load_compute(f, src);
        if unmasked(f, flags) != 0 {
            return false;
        }
        load_commit(f, v, flags);
    } else {
        let b = binary_of(form);
        let (v, flags) = binary_compute(f, b, mem.then(|| mem_value(size, lo)));
        if unmasked(f, flags) != 0 {
            return false;
        }
        binary_commit(f, b, v, flags);
    }
    f.fip = ip;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// A register or memory value: mostly normal numbers near one another, some specials.
    fn value(r: &mut ChaCha8Rng) -> F80 {
        let e = match r.next_u32() % 8 {
            0 => r.next_u32() as u16 & 0x7fff,
            1 => 0,
            2 => 0x7fff,
            _ => 0x3fff - 40 + (r.next_u32() % 80) as u16,
        };
        let sig = match r.next_u32() % 4 {
            0 => r.next_u64(),
            1 => 1 << 63,
            _ => 1 << 63 | r.next_u64(),
        };
        F80 {
            se: (r.next_u32() as u16 & 0x8000) | e,
            sig,
        }
    }

    /// Memory operand bits of each kind: plain numbers, zeros, denormals, NaNs, extremes.
    fn mem_bits(r: &mut ChaCha8Rng, kind: u64) -> (u64, u64) {
        let pick = r.next_u32() % 6;
        let lo = match (kind, pick) {
            (_, 0) => 0,
            (_, 1) => r.next_u64() & 0xff, // a denormal float, a small integer
            (0, 2) => 0x7f80_0001,         // f32 SNaN
            (1, 2) => 0x7ff0_0000_0000_0001,
            (0, _) => 0x3f80_0000 | (r.next_u64() & 0x807f_ffff), // f32 around 1
            (1, _) => 0x3ff0_0000_0000_0000 | (r.next_u64() & 0x800f_ffff_ffff_ffff),
            (2, _) => {
                let v = value(r);
                return ({ v.sig }, v.se as u64);
            }
            _ => r.next_u64() >> (r.next_u32() % 64),
        };
        (lo, 0)
    }

    /// Where [`run_fast`] answers, it leaves the same state as the general path: random
    /// stacks (full and empty registers), control words (PC, RC, masks), loads and
    /// arithmetic in every form.
    #[test]
    fn fast_path_leaves_the_state_the_general_path_leaves() {
        let mut r = ChaCha8Rng::seed_from_u64(7);
        let (mut fast, mut total) = (0u32, 0u32);
        for _ in 0..200_000 {
            let mut f = X87State::default();
            for reg in f.regs.iter_mut() {
                reg[..10].copy_from_slice(&value(&mut r).to_bytes());
            }
            f.ftw = (r.next_u32() | r.next_u32()) as u8;
            f.fsw = (r.next_u32() as u16) & !(sw::ES | sw::B);
            f.fcw = (r.next_u32() as u16 | r.next_u32() as u16) & 0xf3f;
            let kind = (r.next_u32() % 6) as u64;
            let mem = r.next_u32() % 2 == 0;
            let form = if r.next_u32() % 3 == 0 {
                KIND_LOAD
                    | if mem {
                        MEM | kind << 13
                    } else {
                        (r.next_u64() & 7) << 9
                    }
            } else {
                let src = if mem && kind != 2 && kind != 5 {
                    MEM | kind << 13
                } else {
                    (r.next_u64() & 7) << 9
                };
                (r.next_u64() & 0xff) << 2 & 0x1fc | src
            };
            let (lo, hi) = mem_bits(&mut r, kind);
            let mut a = f;
            let mut b = f;
            total += 1;
            if run_fast(&mut a, form, 0x1234, lo, hi) {
                fast += 1;
                let done = run_general(&mut b, form, 0x1234, lo, hi);
                assert!(done, "form {form:#x}: the general path declined");
                assert_eq!(a, b, "form {form:#x} lo {lo:#x} hi {hi:#x} from {f:?}");
            } else {
                assert_eq!(a, f, "form {form:#x}: declined but changed the state");
            }
        }
        assert!(fast > total / 8, "fast path taken {fast} of {total}");
    }
}
