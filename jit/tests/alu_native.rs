//! The natively lowered one-operand MUL/IMUL, DIV/IDIV (`lift/muldiv.rs`), shifts and
//! rotates by CL and SHLD/SHRD (`lift/shift.rs`) and BT/BTS/BTR/BTC (`lift/bit.rs`) against
//! the interpreter: every form and size, edge and random (xorshift) operands, the flags
//! captured after each instruction (PUSHFQ and SETcc), faults (#DE) and budget slices; and
//! the 32-bit ALU, LEA and INC/DEC forms that are lowered at 32 bits (`lift/insn.rs`).

mod common;

use common::{compare, eager_config};
use iced_x86::code_asm::*;
use lockstep_interp::ops::muldiv::{div, idiv};
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

type Op = Box<dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>>;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An edge value (counts and sign boundaries) or a random one.
    fn value(&mut self) -> u64 {
        const EDGE: [u64; 26] = [
            0,
            1,
            2,
            7,
            8,
            9,
            15,
            16,
            17,
            31,
            32,
            33,
            63,
            64,
            65,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0x8000,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            1 << 63,
            u64::MAX,
            (1 << 63) - 1,
        ];
        let r = self.next();
        match r % 4 {
            0 => EDGE[(r >> 8) as usize % EDGE.len()],
            1 => r >> (r >> 58),
            _ => self.next(),
        }
    }
}

/// Input records: RAX, RDX, RCX, RSI, RDI, R8 (48 bytes each).
const REC: u64 = 48;
/// Where the captured results go.
const OUT: u64 = DATA_BASE + 0x3000;
const ITER: u64 = 24;

/// A loop of `ITER` iterations; each runs every op of `ops` on registers loaded from the
/// next input record and stores RFLAGS (PUSHFQ), four SETcc results and RAX/RDX/RSI/R8.
fn program(ops: &[Op]) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(r15, ITER)?;
        a.mov(rbx, DATA_BASE)?;
        a.mov(r14, OUT)?;
        a.set_label(&mut top)?;
        for op in ops {
            a.mov(rax, qword_ptr(rbx))?;
            a.mov(rdx, qword_ptr(rbx + 8))?;
            a.mov(rcx, qword_ptr(rbx + 16))?;
            a.mov(rsi, qword_ptr(rbx + 24))?;
            a.mov(rdi, qword_ptr(rbx + 32))?;
            a.mov(r8, qword_ptr(rbx + 40))?;
            op(a)?;
            a.sete(r10b)?;
            a.setb(r11b)?;
            a.seto(r12b)?;
            a.sets(r13b)?;
            a.pushfq()?;
            a.pop(r9)?;
            a.mov(qword_ptr(r14), r9)?;
            a.mov(qword_ptr(r14 + 8), rax)?;
            a.mov(qword_ptr(r14 + 16), rdx)?;
            a.mov(qword_ptr(r14 + 24), rsi)?;
            a.mov(qword_ptr(r14 + 32), r8)?;
            a.mov(byte_ptr(r14 + 40), r10b)?;
            a.mov(byte_ptr(r14 + 41), r11b)?;
            a.mov(byte_ptr(r14 + 42), r12b)?;
            a.mov(byte_ptr(r14 + 43), r13b)?;
            a.add(r14, 48i32)?;
            // Wrap the output inside the compared window.
            a.and(r14, (OUT | 0x7fff) as i32)?;
        }
        a.add(rbx, REC as i32)?;
        a.dec(r15)?;
        a.jnz(top)?;
        a.hlt()
    })
}

/// Fill the input records with `rec(rng, i)` and RFLAGS with some status bits.
fn fill(m: &mut TestMachine, seed: u64, rec: &dyn Fn(&mut Rng) -> [u64; 6]) {
    let mut rng = Rng(seed | 1);
    let mut data = Vec::new();
    for _ in 0..ITER {
        for v in rec(&mut rng) {
            data.extend_from_slice(&v.to_le_bytes());
        }
    }
    m.load(DATA_BASE, &data);
    // The memory operands of the ops: RDI points here (random qwords).
    let more: Vec<u8> = (0..0x400).map(|_| rng.value() as u8).collect();
    m.load(DATA_BASE + 0x2000, &more);
    m.cpu.state.rflags |= 0x8d5 & rng.next();
}

/// Run `ops` on both engines for several seeds, whole and in budget slices.
fn check(ops: &[Op], rec: &dyn Fn(&mut Rng) -> [u64; 6]) {
    let code = program(ops);
    for seed in [1u64, 0x1234_5678, 0xdead_beef_cafe] {
        let (_, jit, exit) = compare(&code, &[10_000_000], eager_config(), &|m| {
            fill(m, seed, rec)
        });
        assert!(
            matches!(exit.reason, ExitReason::Exception(_)),
            "ends at HLT (#GP at CPL 3): {exit:?}"
        );
        assert!(jit.stats.native_insns > 0, "{:?}", jit.stats);
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 37) % 101).collect();
        compare(&code, &slices, eager_config(), &|m| fill(m, seed, rec));
    }
}

fn random_rec(r: &mut Rng) -> [u64; 6] {
    [
        r.value(),
        r.value(),
        r.value(),
        r.value(),
        DATA_BASE + 0x2000 + (r.next() % 0x3f0),
        r.value(),
    ]
}

macro_rules! ops {
    ($($e:expr),* $(,)?) => {
        vec![$(Box::new($e) as Op),*]
    };
}

#[test]
fn mul_imul_one_operand() {
    let ops: Vec<Op> = ops![
        |a: &mut CodeAssembler| a.mul(rsi),
        |a: &mut CodeAssembler| a.mul(esi),
        |a: &mut CodeAssembler| a.mul(si),
        |a: &mut CodeAssembler| a.mul(sil),
        |a: &mut CodeAssembler| a.mul(ah),
        |a: &mut CodeAssembler| a.mul(rdx),
        |a: &mut CodeAssembler| a.mul(rax),
        |a: &mut CodeAssembler| a.imul(r8),
        |a: &mut CodeAssembler| a.imul(r8d),
        |a: &mut CodeAssembler| a.imul(r8w),
        |a: &mut CodeAssembler| a.imul(r8b),
        |a: &mut CodeAssembler| a.imul(rax),
        |a: &mut CodeAssembler| a.mul(qword_ptr(rdi)),
        |a: &mut CodeAssembler| a.mul(dword_ptr(rdi + 1)),
        |a: &mut CodeAssembler| a.mul(word_ptr(rdi)),
        |a: &mut CodeAssembler| a.mul(byte_ptr(rdi)),
        |a: &mut CodeAssembler| a.imul(qword_ptr(rdi + 3)),
        |a: &mut CodeAssembler| a.imul(dword_ptr(rdi)),
        |a: &mut CodeAssembler| a.imul(word_ptr(rdi)),
        |a: &mut CodeAssembler| a.imul(byte_ptr(rdi + 5)),
    ];
    check(&ops, &random_rec);
}

#[test]
fn shifts_and_rotates_by_cl() {
    let mut ops: Vec<Op> = Vec::new();
    for m in 0..5u8 {
        for r in [rsi, r8] {
            ops.push(Box::new(move |a: &mut CodeAssembler| match m {
                0 => a.shl(r, cl),
                1 => a.shr(r, cl),
                2 => a.sar(r, cl),
                3 => a.rol(r, cl),
                _ => a.ror(r, cl),
            }));
        }
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.shl(esi, cl),
            1 => a.shr(esi, cl),
            2 => a.sar(esi, cl),
            3 => a.rol(esi, cl),
            _ => a.ror(esi, cl),
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.shl(si, cl),
            1 => a.shr(si, cl),
            2 => a.sar(si, cl),
            3 => a.rol(si, cl),
            _ => a.ror(si, cl),
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.shl(sil, cl),
            1 => a.shr(sil, cl),
            2 => a.sar(sil, cl),
            3 => a.rol(sil, cl),
            _ => a.ror(sil, cl),
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.shl(ah, cl),
            1 => a.shr(ah, cl),
            2 => a.sar(ah, cl),
            3 => a.rol(ah, cl),
            _ => a.ror(ah, cl),
        }));
        // The flags of a shift followed by one with the same count (cond from the record).
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            a.add(rax, rdx)?;
            match m {
                0 => a.shl(rdx, cl),
                1 => a.shr(edx, cl),
                2 => a.sar(dx, cl),
                3 => a.rol(dl, cl),
                _ => a.ror(rdx, cl),
            }
        }));
    }
    // `shl cl, cl`: the count register is the destination.
    ops.push(Box::new(|a: &mut CodeAssembler| a.shl(cl, cl)));
    // An inner loop whose flags travel between iterations as run-time records; counts 64 and
    // 32 (masked to 0) keep the flags of the DEC and of the previous shift's CF.
    // The same with counts that are multiples of 32: the 32-bit ROL's record (count 0) reaches
    // the next iteration through the edge, whose SHL (count 0 every other time) folds it.
    ops.push(Box::new(|a: &mut CodeAssembler| {
        let mut top = a.create_label();
        a.and(ecx, 0x60)?;
        a.mov(r9d, 6u32)?;
        a.set_label(&mut top)?;
        a.shl(rsi, cl)?;
        a.adc(rdx, 0)?;
        a.sar(rax, cl)?;
        a.rol(r8d, cl)?;
        a.lea(rcx, qword_ptr(rcx + 32))?;
        a.dec(r9d)?;
        a.jnz(top)
    }));
    ops.push(Box::new(|a: &mut CodeAssembler| {
        let mut top = a.create_label();
        a.mov(ecx, 70u32)?;
        a.set_label(&mut top)?;
        a.shl(rsi, cl)?;
        a.adc(rdx, 0)?;
        a.rol(r8d, cl)?;
        a.sar(rax, cl)?;
        a.dec(ecx)?;
        a.jnz(top)
    }));
    check(&ops, &random_rec);
}

#[test]
fn double_shifts() {
    let mut ops: Vec<Op> = Vec::new();
    for left in [true, false] {
        for k in [0u32, 1, 5, 31, 32, 33, 63, 64, 200] {
            ops.push(Box::new(move |a: &mut CodeAssembler| {
                if left {
                    a.shld(rsi, r8, k)
                } else {
                    a.shrd(rsi, r8, k)
                }
            }));
            ops.push(Box::new(move |a: &mut CodeAssembler| {
                if left {
                    a.shld(esi, r8d, k)
                } else {
                    a.shrd(esi, r8d, k)
                }
            }));
        }
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            if left {
                a.shld(rax, rdx, cl)
            } else {
                a.shrd(rax, rdx, cl)
            }
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            if left {
                a.shld(eax, edx, cl)
            } else {
                a.shrd(eax, edx, cl)
            }
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            if left {
                a.shld(rsi, rsi, cl)
            } else {
                a.shrd(r8d, esi, cl)
            }
        }));
        // 16-bit forms stay on the trampoline; run them between native ones.
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            if left {
                a.shld(si, r8w, cl)
            } else {
                a.shrd(si, r8w, 20u32)
            }
        }));
    }
    check(&ops, &random_rec);
}

#[test]
fn bit_tests() {
    let mut ops: Vec<Op> = Vec::new();
    for m in 0..4u8 {
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.bt(rsi, rcx),
            1 => a.bts(rsi, rcx),
            2 => a.btr(rsi, rcx),
            _ => a.btc(rsi, rcx),
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.bt(esi, ecx),
            1 => a.bts(esi, ecx),
            2 => a.btr(esi, ecx),
            _ => a.btc(esi, ecx),
        }));
        ops.push(Box::new(move |a: &mut CodeAssembler| match m {
            0 => a.bt(si, cx),
            1 => a.bts(si, cx),
            2 => a.btr(si, cx),
            _ => a.btc(si, cx),
        }));
        for k in [0u32, 5, 31, 63, 64, 100, 255] {
            ops.push(Box::new(move |a: &mut CodeAssembler| match m {
                0 => a.bt(r8, k),
                1 => a.bts(r8d, k),
                2 => a.btr(r8w, k),
                _ => a.btc(r8, k),
            }));
            ops.push(Box::new(move |a: &mut CodeAssembler| match m {
                0 => a.bt(qword_ptr(rdi), k),
                1 => a.bts(dword_ptr(rdi + 1), k),
                2 => a.btr(word_ptr(rdi), k),
                _ => a.btc(qword_ptr(rdi + 2), k),
            }));
        }
        // Memory with a register offset (trampoline) between the native ones.
        ops.push(Box::new(move |a: &mut CodeAssembler| {
            a.and(ecx, 0xff)?;
            match m {
                0 => a.bt(qword_ptr(rdi), rcx),
                1 => a.bts(dword_ptr(rdi), ecx),
                2 => a.btr(qword_ptr(rdi), rcx),
                _ => a.btc(word_ptr(rdi), cx),
            }
        }));
    }
    check(&ops, &random_rec);
}

/// One division: (is signed, size, divisor register or memory).
fn div_op(signed: bool, size: u8, mem: bool) -> Op {
    Box::new(move |a: &mut CodeAssembler| match (signed, size, mem) {
        (false, 8, false) => a.div(rsi),
        (false, 4, false) => a.div(esi),
        (false, 2, false) => a.div(si),
        (false, 1, false) => a.div(sil),
        (true, 8, false) => a.idiv(rsi),
        (true, 4, false) => a.idiv(esi),
        (true, 2, false) => a.idiv(si),
        (true, 1, false) => a.idiv(sil),
        (false, 8, true) => a.div(qword_ptr(rbx + 24)),
        (false, 4, true) => a.div(dword_ptr(rbx + 24)),
        (false, 2, true) => a.div(word_ptr(rbx + 24)),
        (false, 1, true) => a.div(byte_ptr(rbx + 24)),
        (true, 8, true) => a.idiv(qword_ptr(rbx + 24)),
        (true, 4, true) => a.idiv(dword_ptr(rbx + 24)),
        (true, 2, true) => a.idiv(word_ptr(rbx + 24)),
        (_, _, true) => a.idiv(byte_ptr(rbx + 24)),
        (_, _, false) => a.idiv(sil),
    })
}

/// Records whose division by RSI does not fault for every op in `forms` (RDX:RAX over RSI).
fn div_rec(forms: Vec<(bool, u8)>) -> impl Fn(&mut Rng) -> [u64; 6] {
    move |r: &mut Rng| loop {
        let (mut va, mut vd, vs) = (r.value(), r.value(), r.value());
        // Often: a small high half, or the sign extension of the low half.
        match r.next() % 4 {
            0 => vd = 0,
            1 => vd = ((va as i64) >> 63) as u64,
            2 => vd %= vs.max(1),
            _ => va = r.value(),
        }
        let ok = forms.iter().all(|&(signed, size)| {
            let (lo, hi) = if size == 1 { (va, va >> 8) } else { (va, vd) };
            if signed {
                idiv(lo, hi, vs, size).is_ok()
            } else {
                div(lo, hi, vs, size).is_ok()
            }
        });
        if ok {
            return [va, vd, r.value(), vs, r.value(), r.value()];
        }
    }
}

#[test]
fn divisions_that_do_not_fault() {
    for signed in [false, true] {
        for size in [1u8, 2, 4, 8] {
            let ops = vec![div_op(signed, size, false), div_op(signed, size, true)];
            check(&ops, &div_rec(vec![(signed, size)]));
        }
    }
}

/// #DE (divisor 0, quotient overflow, INT_MIN / -1) at the instruction in both engines,
/// after some iterations that did not fault.
#[test]
fn division_faults() {
    let cases: [(bool, u8, u64, u64, u64); 9] = [
        (false, 8, 5, 0, 0),
        (false, 8, 5, 7, 7),
        (false, 4, 5, 9, 3),
        (false, 1, 0x1234, 0, 0x12),
        (true, 8, 1 << 63, u64::MAX, u64::MAX),
        (true, 8, 0, 1, 2),
        (true, 4, 0x8000_0000, u64::MAX, u64::MAX),
        (true, 2, 0x8000, 0xffff, 0xffff),
        (true, 1, 0x8000, 0, 0xff),
    ];
    for (signed, size, va, vd, vs) in cases {
        for mem in [false, true] {
            let ops = vec![div_op(signed, size, mem)];
            let code = program(&ops);
            let good = div_rec(vec![(signed, size)]);
            let setup = |m: &mut TestMachine| {
                fill(m, 77, &good);
                // The fifth record faults.
                let at = DATA_BASE + 4 * REC;
                m.load(at, &va.to_le_bytes());
                m.load(at + 8, &vd.to_le_bytes());
                m.load(at + 24, &vs.to_le_bytes());
            };
            let (_, _, exit) = compare(&code, &[1_000_000], eager_config(), &setup);
            assert_eq!(
                exit.reason,
                ExitReason::Exception(lockstep_interp::Fault::DivideError),
                "{signed} {size} {va:#x} {vd:#x} {vs:#x}"
            );
        }
    }
}

#[test]
fn scans_counts_and_bswap() {
    let ops: Vec<Op> = ops![
        |a: &mut CodeAssembler| a.bsf(rax, rsi),
        |a: &mut CodeAssembler| a.bsf(eax, esi),
        |a: &mut CodeAssembler| a.bsf(ax, si),
        |a: &mut CodeAssembler| a.bsr(rdx, r8),
        |a: &mut CodeAssembler| a.bsr(edx, r8d),
        |a: &mut CodeAssembler| a.bsr(dx, r8w),
        |a: &mut CodeAssembler| a.bsf(rax, qword_ptr(rdi)),
        |a: &mut CodeAssembler| a.bsr(eax, dword_ptr(rdi + 1)),
        |a: &mut CodeAssembler| a.bsf(ax, word_ptr(rdi + 2)),
        |a: &mut CodeAssembler| a.tzcnt(rax, rsi),
        |a: &mut CodeAssembler| a.tzcnt(eax, esi),
        |a: &mut CodeAssembler| a.tzcnt(ax, si),
        |a: &mut CodeAssembler| a.lzcnt(rdx, r8),
        |a: &mut CodeAssembler| a.lzcnt(edx, r8d),
        |a: &mut CodeAssembler| a.lzcnt(dx, r8w),
        |a: &mut CodeAssembler| a.popcnt(rax, rsi),
        |a: &mut CodeAssembler| a.popcnt(eax, esi),
        |a: &mut CodeAssembler| a.popcnt(ax, si),
        |a: &mut CodeAssembler| a.tzcnt(rax, qword_ptr(rdi)),
        |a: &mut CodeAssembler| a.lzcnt(eax, dword_ptr(rdi)),
        |a: &mut CodeAssembler| a.popcnt(ax, word_ptr(rdi + 3)),
        |a: &mut CodeAssembler| a.bswap(rsi),
        |a: &mut CodeAssembler| a.bswap(r8d),
        |a: &mut CodeAssembler| {
            // BSWAP r16 (66 0F C8+r): iced's assembler has no 16-bit form.
            a.db(&[0x66, 0x0f, 0xce])
        },
        // A scan whose source is zero often, followed by a flag reader.
        |a: &mut CodeAssembler| {
            a.and(esi, 0x30)?;
            a.bsf(rax, rsi)
        },
    ];
    check(&ops, &random_rec);
}

/// 32-bit forms, which the lifting computes at 32 bits and whose zero extensions it skips
/// when they would change nothing (`lift::mem::Lower::zext`): the upper halves of every
/// captured register must be the interpreter's (zero for a 32-bit destination, untouched
/// for the others), including registers read twice, results read back at 64 bits, and LEA
/// with wrapping displacements.
#[test]
fn thirty_two_bit_forms() {
    let ops: Vec<Op> = ops![
        |a: &mut CodeAssembler| a.add(eax, edx),
        |a: &mut CodeAssembler| a.sub(esi, eax),
        |a: &mut CodeAssembler| a.and(edx, 0xffff_fffeu32 as i32),
        |a: &mut CodeAssembler| a.or(r8d, esi),
        |a: &mut CodeAssembler| a.xor(eax, eax),
        |a: &mut CodeAssembler| a.xor(esi, edx),
        |a: &mut CodeAssembler| a.add(esi, esi),
        |a: &mut CodeAssembler| a.cmp(eax, edx),
        |a: &mut CodeAssembler| a.test(esi, esi),
        |a: &mut CodeAssembler| a.cmp(r8d, -1),
        |a: &mut CodeAssembler| a.sub(eax, dword_ptr(rdi + 4)),
        |a: &mut CodeAssembler| a.and(edx, dword_ptr(rdi)),
        |a: &mut CodeAssembler| {
            a.mov(eax, edx)?;
            a.add(eax, 0x7fff_ffff)?;
            a.mov(rdx, rax)
        },
        |a: &mut CodeAssembler| {
            a.mov(esi, dword_ptr(rdi))?;
            a.add(esi, esi)?;
            a.mov(r8, rsi)
        },
        |a: &mut CodeAssembler| a.lea(eax, dword_ptr(rdx - 1)),
        |a: &mut CodeAssembler| a.lea(esi, dword_ptr(rax + rdx * 4 + 0x7fff_fff0)),
        |a: &mut CodeAssembler| a.lea(edx, dword_ptr(rax + rax * 2)),
        |a: &mut CodeAssembler| a.lea(r8d, dword_ptr(rsi * 8 - 0x80)),
        |a: &mut CodeAssembler| a.lea(eax, dword_ptr(0x1234_5678)),
        |a: &mut CodeAssembler| a.lea(eax, dword_ptr(edx + esi + 8)),
        |a: &mut CodeAssembler| a.lea(rax, qword_ptr(edx - 8)),
        |a: &mut CodeAssembler| a.lea(si, word_ptr(rax + 0x1ffff)),
        |a: &mut CodeAssembler| a.inc(eax),
        |a: &mut CodeAssembler| a.dec(esi),
        |a: &mut CodeAssembler| {
            a.dec(edx)?;
            a.inc(edx)?;
            a.mov(r8, rdx)
        },
    ];
    check(&ops, &random_rec);
}

/// The zeroing idioms (`xor r, r`, `sub r, r`), which the JIT computes without reading the
/// register at 32 and 64 bits, and their 8/16-bit forms (which keep the upper bits), with the
/// flags they set, after the register has been written in the same block or not.
#[test]
fn zeroing_idioms() {
    let ops: Vec<Op> = ops![
        |a: &mut CodeAssembler| a.xor(rax, rax),
        |a: &mut CodeAssembler| a.sub(rdx, rdx),
        |a: &mut CodeAssembler| a.sub(esi, esi),
        |a: &mut CodeAssembler| {
            a.add(r8, rax)?;
            a.xor(r8d, r8d)
        },
        |a: &mut CodeAssembler| {
            a.mov(r8, rsi)?;
            a.sub(r8, r8)
        },
        |a: &mut CodeAssembler| a.xor(dl, dl),
        |a: &mut CodeAssembler| a.sub(si, si),
        |a: &mut CodeAssembler| a.sub(ah, ah),
        |a: &mut CodeAssembler| {
            a.sub(eax, eax)?;
            a.adc(rdx, rsi)
        },
    ];
    check(&ops, &random_rec);
}

/// Byte and word register writes (merged into the old value) read back by MOVZX of the same
/// and other widths, and by 32/64-bit uses: compiled code takes the written part directly
/// only where the merge leaves exactly it in the low bytes (`Lower::zext`).
#[test]
fn partial_register_writes_read_back() {
    let ops = ops![
        |a: &mut CodeAssembler| {
            a.cmp(rax, rdx)?;
            a.setg(al)?;
            a.setl(dl)?;
            a.movzx(eax, al)?;
            a.movzx(edx, dl)?;
            a.sub(eax, edx)
        },
        |a: &mut CodeAssembler| {
            a.mov(al, cl)?;
            a.movzx(edx, ax)?;
            a.movzx(esi, al)
        },
        |a: &mut CodeAssembler| {
            a.mov(ah, cl)?;
            a.movzx(edx, al)?;
            a.movzx(esi, ax)?;
            a.movzx(edi, ah)
        },
        |a: &mut CodeAssembler| {
            a.mov(ax, cx)?;
            a.movzx(edx, al)?;
            a.movzx(esi, ax)?;
            a.mov(r8d, eax)
        },
        |a: &mut CodeAssembler| {
            a.test(ecx, ecx)?;
            a.setne(dl)?;
            a.mov(dh, al)?;
            a.movzx(esi, dl)?;
            a.movzx(r8d, dx)?;
            a.add(rdx, rsi)
        },
    ];
    check(&ops, &random_rec);
}
