//! The native x87 path (`lift/x87.rs`: FLD/FILD and FADD…FDIVR in every form) against the
//! interpreter: each form on operands biased to special encodings (zeros, denormals,
//! pseudo-denormals, unnormals, infinities, pseudo-infinities, NaNs, extremes, near-equal
//! pairs for cancellation, fixed-seed random bits) under control words with every rounding and
//! precision control, masked and unmasked exceptions (a #MF then ends the run in both
//! engines); plus #NM with CR0.TS set and budget slices. After every form the status word and
//! the stored ST(0) and FIP are folded into R8, and `compare` checks the whole state (FIP included)
//! and memory after every slice.

mod common;

use common::{compare, eager_config, XorShift};
use iced_x86::code_asm::*;
use lockstep_interp::state::ctl;
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

/// Records of 32 bytes: operand a (m80 in the first 10 bytes), operand b at +16.
const N: u64 = 96;
const TAB: u64 = DATA_BASE;
const SCRATCH: u64 = DATA_BASE + 0x8000;
const CW: u64 = DATA_BASE + 0x9000;

/// (sign/exponent word, significand) of special 80-bit encodings.
const SPECIAL: &[(u16, u64)] = &[
    (0, 0),
    (0x8000, 0),
    (0x3fff, 1 << 63),               // 1
    (0xbfff, 0xc000_0000_0000_0000), // -1.5
    (0x4000, 0xa000_0000_0000_0000), // 2.5
    (0, 1),                          // smallest denormal
    (0x8000, 0x7fff_ffff_ffff_ffff), // largest negative denormal
    (0, 0x8000_0000_0000_0001),      // pseudo-denormal
    (1, 1 << 63),                    // smallest normal
    (0x3fff, 0x4000_0000_0000_0000), // unnormal
    (0x7fff, 1 << 63),               // +inf
    (0xffff, 1 << 63),               // -inf
    (0x7fff, 0),                     // pseudo-infinity
    (0x7fff, 0xc000_0000_0000_0000), // QNaN (indefinite-like)
    (0x7fff, 0xa000_0000_0000_0001), // SNaN
    (0xffff, 0xc000_dead_beef_0000), // negative QNaN with payload
    (0x7ffe, u64::MAX),              // max
    (0xfffe, u64::MAX),              // -max
    (0x3fff, u64::MAX),              // 2 - ulp
    (0x403e, 1 << 63),               // 2^63
    (0x0001, 0x8000_0000_0000_0001), // near the underflow threshold
];

fn gen(r: &mut XorShift, other: Option<(u16, u64)>) -> (u16, u64) {
    match r.next() % 8 {
        0 | 1 => SPECIAL[(r.next() % SPECIAL.len() as u64) as usize],
        2 => {
            // Near the other operand: cancellation, carries, equal magnitudes.
            let (se, sig) = other.unwrap_or((0x3fff, 1 << 63));
            let d = (r.next() % 3) as u16;
            (
                se ^ (((r.next() & 1) as u16) << 15) ^ d,
                sig ^ (r.next() & 0xff),
            )
        }
        3 => (r.next() as u16, r.next()),
        _ => {
            // A normal number of moderate exponent.
            let e = 0x3fff - 40 + (r.next() % 80) as u16;
            (e | (((r.next() & 1) as u16) << 15), r.next() | 1 << 63)
        }
    }
}

fn setup(m: &mut TestMachine, seed: u64, cw: u16) {
    let mut r = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t = Vec::new();
    for _ in 0..N {
        let a = gen(&mut r, None);
        let b = gen(&mut r, Some(a));
        for (se, sig) in [a, b] {
            t.extend_from_slice(&sig.to_le_bytes());
            t.extend_from_slice(&se.to_le_bytes());
            // Padding bytes that an access of the wrong width would pick up.
            t.extend_from_slice(&r.next().to_le_bytes()[..6]);
        }
    }
    m.load(TAB, &t);
    m.load(CW, &cw.to_le_bytes());
    m.cpu.state.x87.fcw = cw;
}

type Asm<'a> = &'a mut CodeAssembler;
type R = Result<(), IcedError>;

/// The forms, each run on a fresh stack holding ST(0) = b, ST(1) = a (the record at RBX).
#[allow(clippy::vec_init_then_push)] // the macro pushes each operation's forms
fn forms() -> Vec<fn(Asm) -> R> {
    macro_rules! each_op {
        ($v:ident, $($op:ident, $op2:ident, $opp:ident, $iop:ident);*) => {$(
            $v.push(|a| a.$op2(st0, st1));
            $v.push(|a| a.$op2(st1, st0));
            $v.push(|a| a.$op2(st0, st0));
            $v.push(|a| a.$opp(st1, st0));
            $v.push(|a| a.$opp(st2, st0)); // ST(2) is empty: stack underflow
            $v.push(|a| a.$op(dword_ptr(rbx)));
            $v.push(|a| a.$op(qword_ptr(rbx + 16)));
            $v.push(|a| a.$iop(word_ptr(rbx + 8)));
            $v.push(|a| a.$iop(dword_ptr(rbx + 4)));
        )*};
    }
    let mut v: Vec<fn(Asm) -> R> = Vec::new();
    each_op!(v, fadd, fadd_2, faddp, fiadd; fsub, fsub_2, fsubp, fisub;
        fsubr, fsubr_2, fsubrp, fisubr; fmul, fmul_2, fmulp, fimul;
        fdiv, fdiv_2, fdivp, fidiv; fdivr, fdivr_2, fdivrp, fidivr);
    v.push(|a| a.fld(st1));
    v.push(|a| a.fld(st3)); // empty: stack underflow
    v.push(|a| a.fld(tword_ptr(rbx + 16)));
    v.push(|a| a.fld(qword_ptr(rbx)));
    v.push(|a| a.fld(dword_ptr(rbx + 4)));
    v.push(|a| a.fild(word_ptr(rbx + 8)));
    v.push(|a| a.fild(dword_ptr(rbx)));
    v.push(|a| a.fild(qword_ptr(rbx + 16)));
    v
}

/// A loop over the records running every form, folding each outcome into R8; HLT at the end
/// (#GP at CPL 3 in the test machine, or the end of the run).
fn program() -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        a.mov(rbx, TAB)?;
        a.mov(rdi, SCRATCH)?;
        a.mov(rsi, CW)?;
        a.mov(rcx, N)?;
        a.xor(r8, r8)?;
        a.set_label(&mut top)?;
        for f in forms() {
            a.fninit()?;
            a.fldcw(word_ptr(rsi))?;
            a.fld(tword_ptr(rbx))?;
            a.fld(tword_ptr(rbx + 16))?;
            f(a)?;
            a.fnstsw(ax)?;
            // FIP (the environment's instruction pointer, offset 12) before FSTP replaces it.
            a.fnstenv(ptr(rdi + 32))?;
            a.xor(r8d, dword_ptr(rdi + 44))?;
            a.fstp(tword_ptr(rdi))?;
            a.xor(r8, qword_ptr(rdi))?;
            a.rol(r8, 7)?;
            a.movzx(edx, word_ptr(rdi + 8))?;
            a.xor(r8, rdx)?;
            a.rol(r8, 5)?;
            a.movzx(eax, ax)?;
            a.xor(r8, rax)?;
        }
        a.add(rbx, 32i32)?;
        a.dec(rcx)?;
        a.jnz(top)?;
        a.hlt()
    })
}

/// Control words: every RC x PC with all exceptions masked, and a few with some unmasked.
fn control_words() -> Vec<u16> {
    let mut v = Vec::new();
    for rc in 0..4u16 {
        for pc in [0u16, 2, 3] {
            v.push(0x107f | (pc << 8) | (rc << 10));
        }
    }
    v.extend([0x037e, 0x037b, 0x0377, 0x036f, 0x035f, 0x033f, 0x0360]);
    v
}

#[test]
fn x87_forms_match_interpreter() {
    let code = program();
    let forms = forms().len() as u64;
    for (i, cw) in control_words().into_iter().enumerate() {
        let (_, jit, exit) = compare(&code, &[100_000_000], eager_config(), &|m| {
            setup(m, 1 + i as u64, cw)
        });
        assert!(
            matches!(exit.reason, ExitReason::Exception(_)),
            "ends at HLT (#GP) or a #MF: {exit:?}"
        );
        assert_eq!(jit.stats.compile_errors, 0, "{:?}", jit.stats.last_error);
        if cw & 0x3f == 0x3f {
            // Every record ran: the x87 forms (three or more per step) were lowered natively.
            assert!(exit.retired > N * forms * 10, "{exit:?}");
            assert!(
                jit.stats.native_insns > 3 * forms,
                "x87 forms not lowered natively: {:?}",
                jit.stats
            );
        }
    }
}

#[test]
fn x87_budget_slices() {
    let code = program();
    let slices: Vec<u64> = (0..400).map(|i| 1 + (i * 41) % 89).collect();
    compare(&code, &slices, eager_config(), &|m| setup(m, 99, 0x037f));
}

/// CR0.TS set: the first x87 instruction raises #NM in both engines.
#[test]
fn x87_with_ts_set_is_nm() {
    let code = TestMachine::assemble(|a| {
        a.mov(rbx, TAB)?;
        a.fld(tword_ptr(rbx))?;
        a.fadd_2(st0, st0)?;
        a.hlt()
    });
    let (_, _, exit) = compare(&code, &[1000], eager_config(), &|m| {
        setup(m, 5, 0x037f);
        m.cpu.state.cr0 |= ctl::CR0_TS;
    });
    assert!(
        matches!(
            exit.reason,
            ExitReason::Exception(lockstep_interp::Fault::DeviceNotAvailable)
        ),
        "{exit:?}"
    );
    assert_eq!(exit.retired, 1, "{exit:?}");
}
