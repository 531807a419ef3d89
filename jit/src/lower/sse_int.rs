//! Native lowering of the legacy-SSE integer moves, logic, adds and shifts that hashing and
//! copying loops use (MOVDQA/MOVDQU/MOVAPS/MOVUPS loads, stores and register moves, PAND/
//! PANDN/POR/PXOR and their PS/PD twins, PADD/PSUB B/W/D/Q, PSLL/PSRL/PSRA by an immediate,
//! PSHUFD, PUNPCKL/H DQ/QDQ): Cranelift SIMD on the XMM registers in `CpuState`. These have
//! no MXCSR or flag effects, so the host's SIMD instructions give the interpreter's results
//! exactly (`lockstep_interp::ops::{sse_mov, sse_int, sse_shuf}`).
//!
//! The fast path runs when CR0.EM/TS are clear and CR4.OSFXSR is set and, for a memory
//! operand, the access hits the TLB inside one page (and is 16-byte aligned where the
//! instruction requires it). Anything else — the checks' faults, a TLB miss, MMIO, a
//! misaligned access — runs the whole instruction through the interpreter's handler in a cold
//! path, so every fault and corner case is the interpreter's.

use super::{guest_mem, host_mem, Lower};
use crate::frame::ret;
use cranelift_codegen::ir::{condcodes::IntCC, types, InstBuilder, MemFlagsData, Value};
use iced_x86::{Code, Instruction, OpKind, Register};
use lockstep_interp::decode::DecodedInsn;
use lockstep_interp::state::{ctl, CpuState};

/// What a covered instruction does.
#[derive(Clone, Copy)]
enum Op {
    /// xmm ← xmm/m128 (`aligned`: a memory source must be 16-byte aligned).
    Load {
        aligned: bool,
    },
    /// m128 ← xmm (or xmm ← xmm through the store encoding).
    Store {
        aligned: bool,
    },
    And,
    AndNot,
    Or,
    Xor,
    /// Lane-wise wrapping add/sub with the lane type.
    Add(types::Type),
    Sub(types::Type),
    /// Shift every lane by the immediate: (lane type, kind 0 = left, 1 = logical right,
    /// 2 = arithmetic right).
    ShiftImm(types::Type, u8),
    Pshufd,
    /// Interleave: (lane bytes, high half).
    Unpack(u8, bool),
}

fn classify(ins: &Instruction) -> Option<Op> {
    use Code as C;
    if ins.has_lock_prefix() {
        return None;
    }
    Some(match ins.code() {
        C::Movdqa_xmm_xmmm128 | C::Movaps_xmm_xmmm128 | C::Movapd_xmm_xmmm128 => {
            Op::Load { aligned: true }
        }
        C::Movdqu_xmm_xmmm128 | C::Movups_xmm_xmmm128 | C::Movupd_xmm_xmmm128 => {
            Op::Load { aligned: false }
        }
        C::Movdqa_xmmm128_xmm | C::Movaps_xmmm128_xmm | C::Movapd_xmmm128_xmm => {
            Op::Store { aligned: true }
        }
        C::Movdqu_xmmm128_xmm | C::Movups_xmmm128_xmm | C::Movupd_xmmm128_xmm => {
            Op::Store { aligned: false }
        }
        C::Pand_xmm_xmmm128 | C::Andps_xmm_xmmm128 | C::Andpd_xmm_xmmm128 => Op::And,
        C::Pandn_xmm_xmmm128 | C::Andnps_xmm_xmmm128 | C::Andnpd_xmm_xmmm128 => Op::AndNot,
        C::Por_xmm_xmmm128 | C::Orps_xmm_xmmm128 | C::Orpd_xmm_xmmm128 => Op::Or,
        C::Pxor_xmm_xmmm128 | C::Xorps_xmm_xmmm128 | C::Xorpd_xmm_xmmm128 => Op::Xor,
        C::Paddb_xmm_xmmm128 => Op::Add(types::I8X16),
        C::Paddw_xmm_xmmm128 => Op::Add(types::I16X8),
        C::Paddd_xmm_xmmm128 => Op::Add(types::I32X4),
        C::Paddq_xmm_xmmm128 => Op::Add(types::I64X2),
        C::Psubb_xmm_xmmm128 => Op::Sub(types::I8X16),
        C::Psubw_xmm_xmmm128 => Op::Sub(types::I16X8),
        C::Psubd_xmm_xmmm128 => Op::Sub(types::I32X4),
        C::Psubq_xmm_xmmm128 => Op::Sub(types::I64X2),
        C::Psllw_xmm_imm8 => Op::ShiftImm(types::I16X8, 0),
        C::Pslld_xmm_imm8 => Op::ShiftImm(types::I32X4, 0),
        C::Psllq_xmm_imm8 => Op::ShiftImm(types::I64X2, 0),
        C::Psrlw_xmm_imm8 => Op::ShiftImm(types::I16X8, 1),
        C::Psrld_xmm_imm8 => Op::ShiftImm(types::I32X4, 1),
        C::Psrlq_xmm_imm8 => Op::ShiftImm(types::I64X2, 1),
        C::Psraw_xmm_imm8 => Op::ShiftImm(types::I16X8, 2),
        C::Psrad_xmm_imm8 => Op::ShiftImm(types::I32X4, 2),
        C::Pshufd_xmm_xmmm128_imm8 => Op::Pshufd,
        C::Punpckldq_xmm_xmmm128 => Op::Unpack(4, false),
        C::Punpckhdq_xmm_xmmm128 => Op::Unpack(4, true),
        C::Punpcklqdq_xmm_xmmm128 => Op::Unpack(8, false),
        C::Punpckhqdq_xmm_xmmm128 => Op::Unpack(8, true),
        _ => return None,
    })
}

/// What `ins` does, if it is one of the instructions lowered here.
fn covered(ins: &Instruction) -> Option<Op> {
    classify(ins).filter(|_| (0..ins.op_count()).all(|n| operand_ok(ins, n)))
}

/// Is `ins` one of the instructions lowered here?
pub fn covers(ins: &Instruction) -> bool {
    covered(ins).is_some()
}

fn operand_ok(ins: &Instruction, n: u32) -> bool {
    match ins.op_kind(n) {
        OpKind::Register => ins.op_register(n).is_xmm(),
        OpKind::Memory => super::mem::addressable(ins),
        OpKind::Immediate8 => true,
        _ => false,
    }
}

/// Byte offset of XMM register `r` (the low 128 bits of its YMM register) in `CpuState`.
fn xmm_off(r: Register) -> i32 {
    let i = r as usize - Register::XMM0 as usize;
    (core::mem::offset_of!(CpuState, ymm) + 32 * i) as i32
}

/// Little-endian lane order for vector bitcasts.
fn lanes_le() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}

impl Lower<'_> {
    /// The checks every SSE instruction makes (`check_sse`): CR0.EM and CR0.TS clear,
    /// CR4.OSFXSR set — computed once per block (until a trampoline call, which may change
    /// CR0/CR4).
    fn sse_enabled(&mut self) -> Value {
        if let Some(v) = self.sse_ok {
            return v;
        }
        let st = self.state;
        let cr0 = self
            .b
            .ins()
            .load(types::I64, host_mem(), st, crate::frame::OFF_CR0);
        let cr4 = self
            .b
            .ins()
            .load(types::I64, host_mem(), st, crate::frame::OFF_CR4);
        let em_ts = (ctl::CR0_EM | ctl::CR0_TS) as i64;
        let bad0 = self.b.ins().band_imm_s(cr0, em_ts);
        let ok0 = self.b.ins().icmp_imm_s(IntCC::Equal, bad0, 0);
        let fx = self.b.ins().band_imm_s(cr4, ctl::CR4_OSFXSR as i64);
        let ok4 = self.b.ins().icmp_imm_s(IntCC::NotEqual, fx, 0);
        let ok = self.b.ins().band(ok0, ok4);
        self.sse_ok = Some(ok);
        ok
    }

    fn xmm(&mut self, r: Register) -> Value {
        let st = self.state;
        // (`CpuState` gives vectors no 16-byte alignment: the guest-memory flags fit.)
        self.b.ins().load(types::I8X16, guest_mem(), st, xmm_off(r))
    }

    fn set_xmm(&mut self, r: Register, v: Value) {
        let st = self.state;
        let v = if self.b.func.dfg.value_type(v) == types::I8X16 {
            v
        } else {
            self.b.ins().bitcast(types::I8X16, lanes_le(), v)
        };
        self.b.ins().store(guest_mem(), v, st, xmm_off(r));
    }
}

/// Lower `d` if it is covered: `Some(Continue)`.
pub fn lower(l: &mut Lower, d: &DecodedInsn) -> Option<super::insn::Outcome> {
    let ins = &d.ins;
    let op = covered(ins)?;
    let mem_n = (0..ins.op_count()).find(|&n| ins.op_kind(n) == OpKind::Memory);
    let mut ok = l.sse_enabled();
    // The memory operand's host address (valid on the fast path only).
    let mut host = None;
    if let Some(_n) = mem_n {
        let a = l.mem_addr(ins);
        let store = matches!(op, Op::Store { .. });
        let (tr, tw, ram) = l.mem_base();
        let (hit, entry) = l.tlb_probe(if store { tw } else { tr }, a.lin, 16);
        ok = l.b.ins().band(ok, hit);
        let must_align = match op {
            Op::Load { aligned } | Op::Store { aligned } => aligned,
            // Legacy-SSE m128 sources are always aligned (#GP otherwise).
            _ => true,
        };
        if must_align {
            let low = l.b.ins().band_imm_s(a.lin, 15);
            let al = l.b.ins().icmp_imm_s(IntCC::Equal, low, 0);
            ok = l.b.ins().band(ok, al);
        }
        host = Some((entry, a.lin, ram));
    }
    let fast = l.b.create_block();
    let slow = l.b.create_block();
    let join = l.b.create_block();
    l.b.set_cold_block(slow);
    l.b.ins().brif(ok, fast, &[], slow, &[]);
    l.b.seal_block(fast);
    l.b.seal_block(slow);

    l.b.switch_to_block(fast);
    let haddr = host.map(|(entry, lin, ram)| l.host_addr(entry, lin, ram));
    let src = |l: &mut Lower, n: u32| -> Value {
        match ins.op_kind(n) {
            OpKind::Memory => {
                let h = haddr.expect("memory operand has a host address");
                l.b.ins().load(types::I8X16, guest_mem(), h, 0)
            }
            _ => l.xmm(ins.op_register(n)),
        }
    };
    let le = lanes_le();
    match op {
        Op::Load { .. } => {
            let v = src(l, 1);
            l.set_xmm(ins.op0_register(), v);
        }
        Op::Store { .. } => {
            let v = l.xmm(ins.op1_register());
            if ins.op0_kind() == OpKind::Memory {
                let h = haddr.expect("memory operand has a host address");
                l.b.ins().store(guest_mem(), v, h, 0);
            } else {
                l.set_xmm(ins.op0_register(), v);
            }
        }
        Op::And | Op::AndNot | Op::Or | Op::Xor => {
            let a = l.xmm(ins.op0_register());
            let b = src(l, 1);
            let r = match op {
                Op::And => l.b.ins().band(a, b),
                // PANDN: (NOT dst) AND src.
                Op::AndNot => l.b.ins().band_not(b, a),
                Op::Or => l.b.ins().bor(a, b),
                _ => l.b.ins().bxor(a, b),
            };
            l.set_xmm(ins.op0_register(), r);
        }
        Op::Add(ty) | Op::Sub(ty) => {
            let a = l.xmm(ins.op0_register());
            let b = src(l, 1);
            let a = l.b.ins().bitcast(ty, le, a);
            let b = l.b.ins().bitcast(ty, le, b);
            let r = if matches!(op, Op::Add(_)) {
                l.b.ins().iadd(a, b)
            } else {
                l.b.ins().isub(a, b)
            };
            l.set_xmm(ins.op0_register(), r);
        }
        Op::ShiftImm(ty, kind) => {
            let bits = ty.lane_bits() as u64;
            let count = ins.immediate8() as u64;
            let a = l.xmm(ins.op0_register());
            let a = l.b.ins().bitcast(ty, le, a);
            let r = match kind {
                // A count beyond the lane width clears the lane (Cranelift masks counts).
                0 | 1 if count >= bits => {
                    let z = l.b.ins().iconst(types::I64, 0);
                    let z = l.b.ins().splat(types::I64X2, z);
                    l.b.ins().bitcast(ty, le, z)
                }
                0 => {
                    let c = l.b.ins().iconst(types::I32, count as i64);
                    l.b.ins().ishl(a, c)
                }
                1 => {
                    let c = l.b.ins().iconst(types::I32, count as i64);
                    l.b.ins().ushr(a, c)
                }
                // Arithmetic: a count beyond the width fills with the sign.
                _ => {
                    let c = l.b.ins().iconst(types::I32, count.min(bits - 1) as i64);
                    l.b.ins().sshr(a, c)
                }
            };
            l.set_xmm(ins.op0_register(), r);
        }
        Op::Pshufd => {
            let a = src(l, 1);
            let imm = ins.immediate8();
            let mut mask = [0u8; 16];
            for (lane, m) in mask.chunks_mut(4).enumerate() {
                let from = (imm >> (2 * lane)) & 3;
                for (k, b) in m.iter_mut().enumerate() {
                    *b = from * 4 + k as u8;
                }
            }
            let imm = l.b.func.dfg.immediates.push(mask.to_vec().into());
            let r = l.b.ins().shuffle(a, a, imm);
            l.set_xmm(ins.op0_register(), r);
        }
        Op::Unpack(lane, high) => {
            let a = l.xmm(ins.op0_register());
            let b = src(l, 1);
            // Alternate lanes of dst and src, from the low or the high half.
            let mut mask = Vec::with_capacity(16);
            let base = if high { 8 } else { 0 };
            let lanes = 8 / lane;
            for i in 0..lanes {
                for k in 0..lane {
                    mask.push(base + i * lane + k);
                }
                for k in 0..lane {
                    mask.push(16 + base + i * lane + k);
                }
            }
            let imm = l.b.func.dfg.immediates.push(mask.into());
            let r = l.b.ins().shuffle(a, b, imm);
            l.set_xmm(ins.op0_register(), r);
        }
    }
    l.b.ins().jump(join, &[]);

    // Slow path: the interpreter's handler does it all (faults included).
    l.b.switch_to_block(slow);
    l.sync_retired_for_device();
    let status = l.call_exec_insn(d);
    let c =
        l.b.ins()
            .icmp_imm_s(IntCC::NotEqual, status, ret::NEXT as i64);
    // The handler set RIP and `retired` (exactly one instruction retired on NEXT): an exit
    // returns its status and stores only the other dirty registers and the flags.
    let (k, stale) = (l.k, l.ret_stale);
    l.k = 0;
    l.ret_stale = false;
    l.side_exit_if(c, None, Some(status), 0);
    (l.k, l.ret_stale) = (k, stale);
    l.b.ins().jump(join, &[]);
    l.b.seal_block(join);
    l.b.switch_to_block(join);
    l.retire();
    Some(super::insn::Outcome::Continue)
}
