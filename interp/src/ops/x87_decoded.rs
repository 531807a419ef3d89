//! x87 loads and arithmetic from a form decoded once and packed in a word, for the JIT's
//! native x87 path: FLD/FILD (m32/m64/m80 floats, m16/m32/m64 integers, ST(i)) and
//! FADD/FSUB/FSUBR/FMUL/FDIV/FDIVR in every form but BCD. [`run`] computes and commits with the
//! interpreter handlers' own functions (`x87_arith::binary_compute`/`binary_commit`,
//! `x87_load::load_compute`/`load_commit`) and declines, leaving the state untouched, whenever
//! the handler would do more than that: the FPU unavailable (#NM), a pending exception (#MF),
//! or an unmasked exception to record (FOP, FDP). The caller then runs the handler.

use super::x87_arith::{binary_commit, binary_compute, binary_form, mem_value, BinaryForm, Op};
use super::x87_common::{get_st, is_mem, st_index, unmasked};
use super::x87_load::{load_commit, load_compute, load_mem_value};
use crate::state::{ctl, CpuState};
use crate::x87::sw;
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
    let f = &mut s.x87;
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
        let op = match (form >> 2) & 3 {
            0 => Op::Add,
            1 => Op::Sub,
            2 => Op::Mul,
            _ => Op::Div,
        };
        let b = BinaryForm {
            op,
            reverse: form & (1 << 4) != 0,
            pop: form & (1 << 5) != 0,
            dst: ((form >> 6) & 7) as usize,
            src: (!mem).then_some(reg),
        };
        let (v, flags) = binary_compute(f, b, mem.then(|| mem_value(size, lo)));
        if unmasked(f, flags) != 0 {
            return false;
        }
        binary_commit(f, b, v, flags);
    }
    f.fip = ip;
    true
}
