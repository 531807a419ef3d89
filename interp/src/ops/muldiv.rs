//! Multiplication and division: MUL, IMUL (one, two and three operands), DIV, IDIV, MULX.

use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags::{parity, set_status};
use crate::operand::{mask, sext, write_gpr, GprRef};
use crate::ops::check_no_lock;
use crate::state::flags::{CF, OF, SF, STATUS};
use crate::state::{reg, CpuState};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Mul => mul1,
        Mnemonic::Imul => match ins.op_count() {
            1 => imul1,
            _ => imul_n,
        },
        Mnemonic::Div => div1,
        Mnemonic::Idiv => idiv1,
        Mnemonic::Mulx => mulx_h,
        _ => return None,
    })
}

/// Status flags MUL and IMUL write (all six; SF/ZF/AF/PF are "undefined" in the manual).
pub const MUL_FLAGS: u64 = STATUS;
/// Status flags DIV and IDIV write: none (this Intel host leaves all six unchanged).
pub const DIV_FLAGS: u64 = 0;

/// Flags of a multiplication. CF=OF=`overflow` (manual). Rule found on this Intel host for the
/// "undefined" ones: SF = sign of the low half, PF = parity of its low byte, ZF = 0, AF = 0.
#[inline]
fn mul_flags(lo: u64, overflow: bool, size: u8) -> u64 {
    let mut f = parity(lo);
    if lo & crate::operand::sign_bit(size) != 0 {
        f |= SF;
    }
    if overflow {
        f |= CF | OF;
    }
    f
}

/// Unsigned product of the low `size` bytes of `a` and `b`: (low half, high half, flags).
pub fn mul(a: u64, b: u64, size: u8) -> (u64, u64, u64) {
    let m = mask(size);
    let p = (a & m) as u128 * (b & m) as u128;
    let lo = p as u64 & m;
    let hi = (p >> (size as u32 * 8)) as u64 & m;
    (lo, hi, mul_flags(lo, hi != 0, size))
}

/// Signed product of the low `size` bytes of `a` and `b`: (low half, high half, flags).
/// CF=OF=1 when the full product does not equal the sign-extended low half.
pub fn imul(a: u64, b: u64, size: u8) -> (u64, u64, u64) {
    let m = mask(size);
    let p = sext(a, size) as i64 as i128 * sext(b, size) as i64 as i128;
    let lo = p as u64 & m;
    let hi = (p >> (size as u32 * 8)) as u64 & m;
    let overflow = p != sext(lo, size) as i64 as i128;
    (lo, hi, mul_flags(lo, overflow, size))
}

/// Unsigned division of `hi:lo` (each `size` bytes) by `divisor`: (quotient, remainder).
/// #DE when the divisor is zero or the quotient does not fit in `size` bytes.
pub fn div(lo: u64, hi: u64, divisor: u64, size: u8) -> Result<(u64, u64), Fault> {
    let m = mask(size);
    let d = (divisor & m) as u128;
    if d == 0 {
        return Err(Fault::DivideError);
    }
    let n = (((hi & m) as u128) << (size as u32 * 8)) | (lo & m) as u128;
    let q = n / d;
    if q > m as u128 {
        return Err(Fault::DivideError);
    }
    Ok((q as u64, (n % d) as u64))
}

/// Signed division of `hi:lo` (each `size` bytes) by `divisor`: (quotient, remainder), both
/// masked to `size` bytes. The quotient truncates toward zero, the remainder has the dividend's
/// sign. #DE when the divisor is zero or the quotient does not fit (e.g. INT_MIN / -1).
pub fn idiv(lo: u64, hi: u64, divisor: u64, size: u8) -> Result<(u64, u64), Fault> {
    let m = mask(size);
    let bits = size as u32 * 8;
    let d = sext(divisor, size) as i64 as i128;
    if d == 0 {
        return Err(Fault::DivideError);
    }
    let raw = (((hi & m) as u128) << bits) | (lo & m) as u128;
    let sh = 128 - 2 * bits;
    let n = ((raw << sh) as i128) >> sh;
    let (Some(q), Some(r)) = (n.checked_div(d), n.checked_rem(d)) else {
        return Err(Fault::DivideError);
    };
    let limit = 1i128 << (bits - 1);
    if q < -limit || q >= limit {
        return Err(Fault::DivideError);
    }
    Ok((q as u64 & m, r as u64 & m))
}

/// MULX: unsigned product of the low `size` (4 or 8) bytes: (low half, high half). No flags.
pub fn mulx(a: u64, b: u64, size: u8) -> (u64, u64) {
    let (lo, hi, _) = mul(a, b, size);
    (lo, hi)
}

/// The accumulator pair of a one-operand multiply/divide: (rAX part, rDX part) in `size` bytes;
/// for bytes, AL and AH.
#[inline]
fn read_acc(st: &CpuState, size: u8) -> (u64, u64) {
    let (a, d) = (st.gpr[reg::RAX], st.gpr[reg::RDX]);
    if size == 1 {
        (a & 0xff, (a >> 8) & 0xff)
    } else {
        (a & mask(size), d & mask(size))
    }
}

/// Write a result pair back: AL/AH (as AX) for bytes, else rAX and rDX with register-width rules.
#[inline]
fn write_acc(st: &mut CpuState, size: u8, low: u64, high: u64) {
    let g = |index, size| GprRef {
        index,
        size,
        high: false,
    };
    if size == 1 {
        write_gpr(st, g(reg::RAX, 2), ((high & 0xff) << 8) | (low & 0xff));
    } else {
        write_gpr(st, g(reg::RAX, size), low);
        write_gpr(st, g(reg::RDX, size), high);
    }
}

/// Shared shape of MUL/IMUL with one operand: rDX:rAX (AX for bytes) = rAX * r/m.
fn mul_acc(
    x: &mut Ctx,
    ins: &Instruction,
    f: fn(u64, u64, u8) -> (u64, u64, u64),
) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let src = x.read_op(ins, 0)?;
    let st = &mut x.cpu.state;
    let (a, _) = read_acc(st, size);
    let (lo, hi, fl) = f(a, src, size);
    write_acc(st, size, lo, hi);
    set_status(st, MUL_FLAGS, fl);
    Ok(())
}

fn mul1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mul_acc(x, ins, mul)
}

fn imul1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    mul_acc(x, ins, imul)
}

/// IMUL r, r/m (dest *= src) and IMUL r, r/m, imm (dest = src * imm).
fn imul_n(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let (a, b) = if ins.op_count() == 3 {
        (x.read_op(ins, 1)?, x.read_op(ins, 2)?)
    } else {
        (x.read_op(ins, 0)?, x.read_op(ins, 1)?)
    };
    let (lo, _, fl) = imul(a, b, size);
    x.write_op(ins, 0, lo)?;
    set_status(&mut x.cpu.state, MUL_FLAGS, fl);
    Ok(())
}

/// A divide semantic function: (low, high, divisor, size) -> (quotient, remainder).
type DivFn = fn(u64, u64, u64, u8) -> Result<(u64, u64), Fault>;

/// Shared shape of DIV/IDIV: rAX = rDX:rAX / r/m, rDX = remainder (AL/AH from AX for bytes).
fn div_acc(x: &mut Ctx, ins: &Instruction, f: DivFn) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let divisor = x.read_op(ins, 0)?;
    let (lo, hi) = read_acc(&x.cpu.state, size);
    let (q, r) = f(lo, hi, divisor, size)?;
    write_acc(&mut x.cpu.state, size, q, r);
    Ok(())
}

fn div1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    div_acc(x, ins, div)
}

fn idiv1(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    div_acc(x, ins, idiv)
}

/// MULX hi, lo, r/m: hi:lo = rDX * r/m, flags untouched. When both destinations are the same
/// register it receives the high half (written last).
fn mulx_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let src = x.read_op(ins, 2)?;
    let d = x.cpu.state.gpr[reg::RDX];
    let (lo, hi) = mulx(d, src, size);
    x.write_op(ins, 1, lo)?;
    x.write_op(ins, 0, hi)?;
    Ok(())
}

/// `hi:lo / d` and the remainder, for a quotient that fits in 64 bits (`hi < d`, so `d` is
/// not zero). On x86-64 one DIV instruction; Rust's `u128 / u128` is a call into the
/// compiler's 128-bit division routine (it cannot know that the quotient fits), which was
/// ~5% of an x87 division-heavy run. Also the JIT's 64-bit DIV helper.
#[inline]
pub fn div_128_by_64(hi: u64, lo: u64, d: u64) -> (u64, u64) {
    assert!(hi < d, "quotient exceeds 64 bits");
    #[cfg(target_arch = "x86_64")]
    {
        let (q, r): (u64, u64);
        // SAFETY: DIV divides RDX:RAX by `d`; `hi < d` (asserted above) rules out both of its
        // faults (#DE for a zero divisor or a quotient over 64 bits). It reads and writes
        // only RAX, RDX and the flags: no memory, no stack.
        unsafe {
            core::arch::asm!(
                "div {d}",
                d = in(reg) d,
                inout("rax") lo => q,
                inout("rdx") hi => r,
                options(pure, nomem, nostack),
            );
        }
        (q, r)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let n = ((hi as u128) << 64) | lo as u128;
        ((n / d as u128) as u64, (n % d as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{Exit, ExitReason};
    use crate::state::flags::{AF, PF, ZF};
    use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
    use iced_x86::code_asm::*;

    /// Run `code` (exactly `n` instructions) with the given registers preset.
    fn run(code: &[u8], n: u64, regs: &[(usize, u64)]) -> (TestMachine, Exit) {
        let mut m = TestMachine::new();
        for &(r, v) in regs {
            m.cpu.state.gpr[r] = v;
        }
        let e = m.run_code(code, n);
        (m, e)
    }

    fn assert_de(code: &[u8], regs: &[(usize, u64)]) {
        let (m, e) = run(code, 1, regs);
        assert_eq!(e.reason, ExitReason::Exception(Fault::DivideError));
        assert_eq!(e.retired, 0);
        assert_eq!(m.cpu.state.rip, CODE_BASE);
        for &(r, v) in regs {
            assert_eq!(m.gpr(r), v, "register {r} changed by a faulting divide");
        }
    }

    #[test]
    fn semantic_edge_cases() {
        assert_eq!(mul(u64::MAX, u64::MAX, 8), (1, u64::MAX - 1, CF | OF));
        assert_eq!(mul(0x80, 2, 1), (0, 1, CF | OF | PF));
        assert_eq!(mul(3, 5, 2), (15, 0, PF));
        assert_eq!(imul(u64::MAX, u64::MAX, 8), (1, 0, 0));
        assert_eq!(imul(0x8000, 0xffff, 2), (0x8000, 0, CF | OF | SF | PF));
        assert_eq!(imul(0xff, 0x7f, 1), (0x81, 0xff, SF | PF));
        assert_eq!(div(7, 0, 0, 4), Err(Fault::DivideError));
        assert_eq!(div(0, 5, 5, 4), Err(Fault::DivideError));
        assert_eq!(div(0, 4, 5, 4), Ok((0xcccc_cccc, 4)));
        assert_eq!(
            div(u64::MAX, u64::MAX - 1, u64::MAX, 8),
            Ok((u64::MAX, u64::MAX - 1))
        );
        assert_eq!(idiv(0, 1 << 63, u64::MAX, 8), Err(Fault::DivideError));
        assert_eq!(
            idiv(1 << 63, u64::MAX, u64::MAX, 8),
            Err(Fault::DivideError)
        );
        assert_eq!(idiv(0x80, 0xff, 0xff, 1), Err(Fault::DivideError));
        assert_eq!(idiv(0x8000, 0xffff, 0xffff, 2), Err(Fault::DivideError));
        assert_eq!(idiv(0x8000_0000, 0xffff_ffff, 1, 4), Ok((0x8000_0000, 0)));
        // -7 / 2 = -3 remainder -1.
        assert_eq!(
            idiv(-7i64 as u64, u64::MAX, 2, 8),
            Ok((-3i64 as u64, u64::MAX))
        );
        assert_eq!(idiv(0xfff9, 0xffff, 2, 2), Ok((0xfffd, 0xffff)));
        assert_eq!(mulx(u64::MAX, 2, 4), (0xffff_fffe, 1));
        // ZF and AF are always clear on this host, even for a zero product.
        assert_eq!(mul(0, 0, 8).2 & (ZF | AF), 0);
    }

    #[test]
    fn mul_forms_through_the_machine() {
        // mul qword [DATA_BASE]; mul byte: AX = AL * r/m8; imul r, m, imm.
        let code = TestMachine::assemble(|a| {
            a.mul(qword_ptr(DATA_BASE))?;
            a.mul(bh)?;
            a.imul_3(ecx, dword_ptr(DATA_BASE + 8), -3)?;
            a.imul_2(si, di)
        });
        let mut m = TestMachine::new();
        m.ram.write_u64(DATA_BASE, 0x1_0000_0001).unwrap();
        m.ram.write_u64(DATA_BASE + 8, 0x7fff_ffff).unwrap();
        m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_ffff_fff0;
        m.cpu.state.gpr[reg::RBX] = 0x0300;
        m.cpu.state.gpr[reg::RCX] = u64::MAX;
        m.cpu.state.gpr[reg::RSI] = 0xaaaa_bbbb_cccc_0100;
        m.cpu.state.gpr[reg::RDI] = 0x0100;
        let e = m.run_code(&code, 2);
        assert_eq!(e.reason, ExitReason::Budget);
        let p = 0xffff_ffff_ffff_fff0u128 * 0x1_0000_0001u128;
        let lo = p as u64;
        // `mul bh` then replaced AX by AL (the product's low byte) * 3.
        assert_eq!(m.gpr(reg::RDX), (p >> 64) as u64);
        assert_eq!(m.gpr(reg::RAX), (lo & !0xffff) | ((lo & 0xff) * 3));
        let e = m.run(2);
        assert_eq!(e.reason, ExitReason::Budget);
        // 0x7fff_ffff * -3 overflows 32 bits: ECX zero-extended, CF=OF=1.
        assert_eq!(
            m.gpr(reg::RCX),
            (0x7fff_ffffu64.wrapping_mul(-3i64 as u64)) as u32 as u64
        );
        // 0x100 * 0x100 = 0x10000: SI = 0 (merged), overflow.
        assert_eq!(m.gpr(reg::RSI), 0xaaaa_bbbb_cccc_0000);
        assert_eq!(m.cpu.state.rflags & STATUS, CF | OF | PF);
    }

    #[test]
    fn div_forms_through_the_machine() {
        let code = TestMachine::assemble(|a| {
            a.div(dword_ptr(DATA_BASE))?;
            a.idiv(cl)?;
            a.idiv(r8)
        });
        let mut m = TestMachine::new();
        m.ram.write_u64(DATA_BASE, 10).unwrap();
        m.cpu.state.gpr[reg::RAX] = 0xdead_0000_0000_0067; // EDX:EAX = 3:0x67
        m.cpu.state.gpr[reg::RDX] = 0xbeef_0000_0000_0003;
        m.cpu.state.rflags |= CF | ZF | AF;
        let e = m.run_code(&code, 1);
        assert_eq!(e.reason, ExitReason::Budget);
        let n = (3u64 << 32) | 0x67;
        assert_eq!(m.gpr(reg::RAX), n / 10);
        assert_eq!(m.gpr(reg::RDX), n % 10);
        // Flags untouched by DIV on this host.
        assert_eq!(m.cpu.state.rflags & STATUS, CF | ZF | AF);
        // idiv cl: AX = -100, CL = 7 -> AL = -14, AH = -2.
        m.cpu.state.gpr[reg::RAX] = 0x1234_ff9c;
        m.cpu.state.gpr[reg::RCX] = 7;
        m.run(1);
        assert_eq!(m.gpr(reg::RAX), 0x1234_fef2);
        m.cpu.state.gpr[reg::RAX] = 100;
        m.cpu.state.gpr[reg::RDX] = 0;
        m.cpu.state.gpr[reg::R8] = -7i64 as u64;
        m.run(1);
        assert_eq!(m.gpr(reg::RAX), -14i64 as u64);
        assert_eq!(m.gpr(reg::RDX), 2);
    }

    #[test]
    fn divide_errors_are_precise() {
        let div0 = TestMachine::assemble(|a| a.div(rbx));
        assert_de(&div0, &[(reg::RAX, 5), (reg::RDX, 0), (reg::RBX, 0)]);
        // Quotient overflow of DIV: RDX >= divisor.
        assert_de(&div0, &[(reg::RAX, 0), (reg::RDX, 9), (reg::RBX, 9)]);
        let div_m = TestMachine::assemble(|a| a.div(word_ptr(DATA_BASE)));
        assert_de(&div_m, &[(reg::RAX, 0), (reg::RDX, 1)]); // memory divisor is 0
        let idiv64 = TestMachine::assemble(|a| a.idiv(rbx));
        assert_de(
            &idiv64,
            &[
                (reg::RAX, 1 << 63),
                (reg::RDX, u64::MAX),
                (reg::RBX, u64::MAX),
            ],
        );
        let idiv32 = TestMachine::assemble(|a| a.idiv(ebx));
        assert_de(
            &idiv32,
            &[
                (reg::RAX, 0x8000_0000),
                (reg::RDX, u64::MAX),
                (reg::RBX, 0xffff_ffff),
            ],
        );
        let idiv8 = TestMachine::assemble(|a| a.idiv(bl));
        assert_de(&idiv8, &[(reg::RAX, 0xff80), (reg::RBX, 0xff)]);
        // 0x100 / 2 = 0x80 does not fit a signed byte.
        assert_de(&idiv8, &[(reg::RAX, 0x0100), (reg::RBX, 2)]);
        // ...but -0x100 / 2 = -0x80 does.
        let (m, e) = run(&idiv8, 1, &[(reg::RAX, 0xff00), (reg::RBX, 2)]);
        assert_eq!(e.reason, ExitReason::Budget);
        assert_eq!(m.gpr(reg::RAX), 0x0080);
    }

    #[test]
    fn mulx_and_lock() {
        let code = TestMachine::assemble(|a| {
            a.mulx(r9, r10, qword_ptr(DATA_BASE))?;
            a.mulx(eax, eax, ebx)
        });
        let mut m = TestMachine::new();
        m.ram.write_u64(DATA_BASE, 1 << 63).unwrap();
        m.cpu.state.gpr[reg::RDX] = 6;
        m.cpu.state.gpr[reg::RAX] = 0x1111_1111_2222_2222;
        m.cpu.state.gpr[reg::RBX] = 0x8000_0001;
        m.cpu.state.rflags |= SF | PF;
        assert_eq!(m.run_code(&code, 2).reason, ExitReason::Budget);
        assert_eq!((m.gpr(reg::R9), m.gpr(reg::R10)), (3, 0));
        // Same destination twice: gets the high half of 6 * 0x8000_0001 = 3:0x0000_0006.
        assert_eq!(m.gpr(reg::RAX), 3);
        assert_eq!(m.cpu.state.rflags & STATUS, SF | PF);
        // lock mul rbx
        let (m, e) = run(&[0xf0, 0x48, 0xf7, 0xe3], 1, &[]);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        assert_eq!(m.cpu.state.rip, CODE_BASE);
    }

    #[cfg(target_arch = "x86_64")]
    mod native {
        //! The semantic functions against this host CPU.
        use super::super::*;
        use crate::ops::native::{edge_values, for_inputs, host_is_intel, XorShift as Rng};
        use core::arch::asm;

        /// Run `$ins` natively with RAX=`$a`, RDX=`$d`, RCX=`$c` and RFLAGS=`$f`; returns
        /// (RAX, RDX, RFLAGS).
        macro_rules! native {
            ($ins:literal, $a:expr, $d:expr, $c:expr, $f:expr) => {{
                let (mut a, mut d, mut f): (u64, u64, u64) = ($a, $d, $f);
                // SAFETY: the template runs one register-only instruction between a balanced
                // push/popfq and pushfq/pop; it touches no memory but the stack below RSP.
                unsafe {
                    asm!("push {f}", "popfq", $ins, "pushfq", "pop {f}", f = inout(reg) f,
                        inout("rax") a, inout("rdx") d, in("rcx") $c);
                }
                (a, d, f)
            }};
        }

        type Native = fn(u64, u64, u64) -> (u64, u64, u64);

        /// Compare a multiply form over deterministic inputs. `f(a, b, flags)` runs natively with
        /// RAX=a, RDX=b and returns (RAX, RDX, RFLAGS); `sem(a, b)` is the expected
        /// (low, high, flags). `one_op` forms also write the high half to DX/EDX/RDX (AH).
        fn check_mul(
            name: &str,
            size: u8,
            one_op: bool,
            f: Native,
            sem: &dyn Fn(u64, u64) -> (u64, u64, u64),
        ) {
            // SF/ZF/AF/PF are undefined in the manual: compared only on an Intel host.
            let cmp = if host_is_intel() { STATUS } else { CF | OF };
            let m = mask(size);
            let mut n = 0;
            for_inputs(size, |a, b, fin| {
                let (ra, rd, fo) = f(a, b, fin);
                let (lo, hi, fl) = sem(a, b);
                let ctx = format!("{name}: a={a:#x} b={b:#x}");
                match size {
                    1 => assert_eq!(ra & 0xffff, (hi << 8) | lo, "{ctx}"),
                    4 => assert_eq!(ra, lo, "{ctx}"),
                    _ => assert_eq!(ra & m, lo, "{ctx}"),
                }
                if one_op && size > 1 {
                    assert_eq!(rd & m, hi, "{ctx}");
                }
                assert_eq!(
                    fo & cmp,
                    ((fin & !MUL_FLAGS) | fl) & cmp,
                    "{ctx} flags in {fin:#x}"
                );
                n += 1;
            });
            assert!(n >= 300, "{name}: only {n} cases");
        }

        #[test]
        fn mul_and_imul_match_host() {
            check_mul(
                "mul8",
                1,
                true,
                |a, b, f| native!("mul dl", a, b, 0u64, f),
                &|a, b| mul(a, b, 1),
            );
            check_mul(
                "mul16",
                2,
                true,
                |a, b, f| native!("mul dx", a, b, 0u64, f),
                &|a, b| mul(a, b, 2),
            );
            check_mul(
                "mul32",
                4,
                true,
                |a, b, f| native!("mul edx", a, b, 0u64, f),
                &|a, b| mul(a, b, 4),
            );
            check_mul(
                "mul64",
                8,
                true,
                |a, b, f| native!("mul rdx", a, b, 0u64, f),
                &|a, b| mul(a, b, 8),
            );
            check_mul(
                "imul8",
                1,
                true,
                |a, b, f| native!("imul dl", a, b, 0u64, f),
                &|a, b| imul(a, b, 1),
            );
            check_mul(
                "imul16",
                2,
                true,
                |a, b, f| native!("imul dx", a, b, 0u64, f),
                &|a, b| imul(a, b, 2),
            );
            check_mul(
                "imul32",
                4,
                true,
                |a, b, f| native!("imul edx", a, b, 0u64, f),
                &|a, b| imul(a, b, 4),
            );
            check_mul(
                "imul64",
                8,
                true,
                |a, b, f| native!("imul rdx", a, b, 0u64, f),
                &|a, b| imul(a, b, 8),
            );
            check_mul(
                "imul16 r,r",
                2,
                false,
                |a, b, f| native!("imul ax, dx", a, b, 0u64, f),
                &|a, b| imul(a, b, 2),
            );
            check_mul(
                "imul32 r,r",
                4,
                false,
                |a, b, f| native!("imul eax, edx", a, b, 0u64, f),
                &|a, b| imul(a, b, 4),
            );
            check_mul(
                "imul64 r,r",
                8,
                false,
                |a, b, f| native!("imul rax, rdx", a, b, 0u64, f),
                &|a, b| imul(a, b, 8),
            );
            check_mul(
                "imul16 r,r,i8",
                2,
                false,
                |a, b, f| native!("imul ax, dx, -3", a, b, 0u64, f),
                &|_, b| imul(b, -3i64 as u64, 2),
            );
            check_mul(
                "imul16 r,r,i16",
                2,
                false,
                |a, b, f| native!("imul ax, dx, 0x7ff1", a, b, 0u64, f),
                &|_, b| imul(b, 0x7ff1, 2),
            );
            check_mul(
                "imul32 r,r,i8",
                4,
                false,
                |a, b, f| native!("imul eax, edx, 127", a, b, 0u64, f),
                &|_, b| imul(b, 127, 4),
            );
            check_mul(
                "imul32 r,r,i32",
                4,
                false,
                |a, b, f| native!("imul eax, edx, 0x12345679", a, b, 0u64, f),
                &|_, b| imul(b, 0x1234_5679, 4),
            );
            check_mul(
                "imul64 r,r,i8",
                8,
                false,
                |a, b, f| native!("imul rax, rdx, -128", a, b, 0u64, f),
                &|_, b| imul(b, -128i64 as u64, 8),
            );
            check_mul(
                "imul64 r,r,i32",
                8,
                false,
                |a, b, f| native!("imul rax, rdx, -0x7654321", a, b, 0u64, f),
                &|_, b| imul(b, -0x765_4321i64 as u64, 8),
            );
        }

        #[test]
        fn mulx_matches_host() {
            if !std::is_x86_feature_detected!("bmi2") {
                eprintln!("skipped: host has no BMI2");
                return;
            }
            let cmp = STATUS; // MULX writes no flags: all six must be unchanged on any host.
            for_inputs(4, |a, b, fin| {
                let (mut f, hi, lo): (u64, u64, u64);
                f = fin;
                // SAFETY: register-only MULX between a balanced push/popfq and pushfq/pop.
                unsafe {
                    asm!("push {f}", "popfq", "mulx {hi:e}, {lo:e}, {src:e}", "pushfq", "pop {f}",
                        f = inout(reg) f, hi = out(reg) hi, lo = out(reg) lo, src = in(reg) a,
                        in("rdx") b);
                }
                assert_eq!((lo, hi), mulx(b, a, 4), "mulx32 a={a:#x} b={b:#x}");
                assert_eq!(f & cmp, fin & cmp);
            });
            for_inputs(8, |a, b, fin| {
                let (mut f, hi, lo): (u64, u64, u64);
                f = fin;
                // SAFETY: register-only MULX between a balanced push/popfq and pushfq/pop.
                unsafe {
                    asm!("push {f}", "popfq", "mulx {hi}, {lo}, {src}", "pushfq", "pop {f}",
                        f = inout(reg) f, hi = out(reg) hi, lo = out(reg) lo, src = in(reg) a,
                        in("rdx") b);
                }
                assert_eq!((lo, hi), mulx(b, a, 8), "mulx64 a={a:#x} b={b:#x}");
                assert_eq!(f & cmp, fin & cmp);
            });
        }

        /// Compare a divide form. `f(rax, rdx, rcx, flags)`; only inputs that do not fault are
        /// run natively (the semantic function decides, and faulting inputs are counted).
        fn check_div(
            name: &str,
            size: u8,
            signed: bool,
            f: &dyn Fn(u64, u64, u64, u64) -> (u64, u64, u64),
        ) {
            let sem = if signed { idiv } else { div };
            // All six flags are undefined; this Intel host leaves them unchanged.
            let cmp = if host_is_intel() { STATUS } else { DIV_FLAGS };
            let m = mask(size);
            let mut r = Rng::new(0x005e_edd1 + size as u64);
            let edges = edge_values(size);
            let (mut ran, mut faults, mut i) = (0, 0, 0u64);
            while ran < 400 {
                i += 1;
                assert!(i < 100_000, "{name}: too few non-faulting inputs");
                let garbage = r.next() & !m;
                let d = if i % 5 == 0 {
                    edges[(r.next() % edges.len() as u64) as usize]
                } else {
                    r.val(size)
                };
                let lo = if i % 7 == 0 {
                    edges[(r.next() % edges.len() as u64) as usize]
                } else {
                    r.val(size)
                };
                let hi = match r.next() % 4 {
                    // A dividend that fits in `size` bytes: zero- or sign-extended.
                    0 if signed => (sext(lo, size) >> 63) & m,
                    0 => 0,
                    1 if d & m != 0 && !signed => (r.next() & m) % (d & m),
                    _ => r.val(size),
                };
                let fin = r.status_flags();
                let Ok((q, rem)) = sem(lo, hi, d, size) else {
                    faults += 1;
                    continue;
                };
                let (ra, rd, fo) = if size == 1 {
                    f(garbage << 8 | hi << 8 | lo, garbage, d | garbage, fin)
                } else {
                    f(lo | garbage, hi | garbage, d | garbage, fin)
                };
                let ctx = format!("{name}: {hi:#x}:{lo:#x} / {d:#x}");
                match size {
                    1 => assert_eq!(ra, garbage << 8 | rem << 8 | q, "{ctx}"),
                    2 => assert_eq!((ra, rd), (garbage | q, garbage | rem), "{ctx}"),
                    _ => assert_eq!((ra, rd), (q, rem), "{ctx}"),
                }
                assert_eq!(fo & cmp, fin & cmp, "{ctx} flags");
                ran += 1;
            }
            assert!(faults > 0, "{name}: no faulting input was generated");
        }

        #[test]
        fn div_and_idiv_match_host() {
            check_div("div8", 1, false, &|a, d, c, f| {
                native!("div cl", a, d, c, f)
            });
            check_div("div16", 2, false, &|a, d, c, f| {
                native!("div cx", a, d, c, f)
            });
            check_div("div32", 4, false, &|a, d, c, f| {
                native!("div ecx", a, d, c, f)
            });
            check_div("div64", 8, false, &|a, d, c, f| {
                native!("div rcx", a, d, c, f)
            });
            check_div("idiv8", 1, true, &|a, d, c, f| {
                native!("idiv cl", a, d, c, f)
            });
            check_div("idiv16", 2, true, &|a, d, c, f| {
                native!("idiv cx", a, d, c, f)
            });
            check_div("idiv32", 4, true, &|a, d, c, f| {
                native!("idiv ecx", a, d, c, f)
            });
            check_div("idiv64", 8, true, &|a, d, c, f| {
                native!("idiv rcx", a, d, c, f)
            });
        }
    }

    /// The DIV path against Rust's 128-bit division, over random dividends whose quotient
    /// fits in 64 bits (edge cases first: the largest high half, a divisor of one).
    #[test]
    fn div_128_by_64_matches_u128_division() {
        use crate::ops::native::XorShift;
        let mut r = XorShift::new(0x05ee_dd1f);
        let mut cases = vec![
            (0, 0, 1),
            (0, u64::MAX, 1),
            (u64::MAX - 1, u64::MAX, u64::MAX),
        ];
        for _ in 0..100_000 {
            let d = r.next() >> (r.next() % 64) | 1;
            cases.push((r.next() % d, r.next(), d));
        }
        for (hi, lo, d) in cases {
            let n = ((hi as u128) << 64) | lo as u128;
            let want = ((n / d as u128) as u64, (n % d as u128) as u64);
            assert_eq!(div_128_by_64(hi, lo, d), want, "{hi:#x}:{lo:#x} / {d:#x}");
        }
    }
}
