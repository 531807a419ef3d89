//! Integer arithmetic and logic: ADD, ADC, SUB, SBB, CMP, AND, OR, XOR, TEST, INC, DEC, NEG,
//! NOT, and the ADX carry chains ADCX/ADOX.
//!
//! All flags here are defined by the SDM except AF after AND/OR/XOR/TEST, which this Intel host
//! clears (checked natively in the tests below), as `flags::logic` does.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags;
use crate::operand::{mask, op_size};
use crate::ops::{check_lock_mem_dest, check_no_lock};
use crate::state::flags::{CF, OF, STATUS};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Which operation a handler performs (const-generic parameter).
pub mod op {
    pub const ADD: u8 = 0;
    pub const ADC: u8 = 1;
    pub const SUB: u8 = 2;
    pub const SBB: u8 = 3;
    pub const AND: u8 = 4;
    pub const OR: u8 = 5;
    pub const XOR: u8 = 6;
    pub const INC: u8 = 7;
    pub const DEC: u8 = 8;
    pub const NEG: u8 = 9;
    pub const NOT: u8 = 10;
}

/// Two-operand ALU operation `a op b` ([`op::ADD`]..=[`op::XOR`]) on `size`-byte operands.
/// Returns the result and all six status flags. ADC/SBB read CF from `rflags`; logic
/// operations clear CF, OF and AF (AF is "undefined"; this host clears it).
#[inline(always)]
pub fn binop(op: u8, a: u64, b: u64, size: u8, rflags: u64) -> (u64, u64) {
    match op {
        op::ADD => flags::add(a, b, 0, size),
        op::ADC => flags::add(a, b, rflags & CF, size),
        op::SUB => flags::sub(a, b, 0, size),
        op::SBB => flags::sub(a, b, rflags & CF, size),
        op::AND => logic(a & b, size),
        op::OR => logic(a | b, size),
        _ => logic(a ^ b, size),
    }
}

#[inline(always)]
fn logic(res: u64, size: u8) -> (u64, u64) {
    let res = res & mask(size);
    (res, flags::logic(res, size))
}

/// INC: like ADD 1, but CF keeps its value from `rflags`.
#[inline(always)]
pub fn inc(a: u64, size: u8, rflags: u64) -> (u64, u64) {
    let (res, f) = flags::add(a, 1, 0, size);
    (res, (f & !CF) | (rflags & CF))
}

/// DEC: like SUB 1, but CF keeps its value from `rflags`.
#[inline(always)]
pub fn dec(a: u64, size: u8, rflags: u64) -> (u64, u64) {
    let (res, f) = flags::sub(a, 1, 0, size);
    (res, (f & !CF) | (rflags & CF))
}

/// NEG: 0 - a; CF = (a != 0), the other flags as for that subtraction.
#[inline(always)]
pub fn neg(a: u64, size: u8) -> (u64, u64) {
    flags::sub(0, a, 0, size)
}

/// NOT: one's complement, no flags.
#[inline(always)]
pub fn not(a: u64, size: u8) -> u64 {
    !a & mask(size)
}

/// ADCX: unsigned `a + b + CF`; only CF changes (the carry out). Returns (result, flags).
#[inline(always)]
pub fn adcx(a: u64, b: u64, size: u8, rflags: u64) -> (u64, u64) {
    let (res, carry) = add_carry(a, b, rflags & CF != 0, size);
    (res, (rflags & STATUS & !CF) | if carry { CF } else { 0 })
}

/// ADOX: unsigned `a + b + OF`; only OF changes (the carry out). Returns (result, flags).
#[inline(always)]
pub fn adox(a: u64, b: u64, size: u8, rflags: u64) -> (u64, u64) {
    let (res, carry) = add_carry(a, b, rflags & OF != 0, size);
    (res, (rflags & STATUS & !OF) | if carry { OF } else { 0 })
}

/// `a + b + c` on `size` bytes: (result, unsigned carry out).
#[inline(always)]
fn add_carry(a: u64, b: u64, c: bool, size: u8) -> (u64, bool) {
    let m = mask(size);
    let wide = (a & m) as u128 + (b & m) as u128 + c as u128;
    ((wide as u64) & m, wide > m as u128)
}

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Add => bin_h::<{ op::ADD }>,
        Mnemonic::Adc => bin_h::<{ op::ADC }>,
        Mnemonic::Sub => bin_h::<{ op::SUB }>,
        Mnemonic::Sbb => bin_h::<{ op::SBB }>,
        Mnemonic::And => bin_h::<{ op::AND }>,
        Mnemonic::Or => bin_h::<{ op::OR }>,
        Mnemonic::Xor => bin_h::<{ op::XOR }>,
        Mnemonic::Cmp => compare_h::<{ op::SUB }>,
        Mnemonic::Test => compare_h::<{ op::AND }>,
        Mnemonic::Inc => unary_h::<{ op::INC }>,
        Mnemonic::Dec => unary_h::<{ op::DEC }>,
        Mnemonic::Neg => unary_h::<{ op::NEG }>,
        Mnemonic::Not => unary_h::<{ op::NOT }>,
        Mnemonic::Adcx => adx_h::<false>,
        Mnemonic::Adox => adx_h::<true>,
        _ => return None,
    })
}

/// `op r/m, r|imm` and `op r, r/m` (LOCK allowed with a memory destination).
fn bin_h<const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    let size = op_size(ins, 0);
    let b = x.read_op(ins, 1)?;
    let a = x.read_op_rmw(ins, 0)?;
    let (res, f) = binop(OP, a, b, size, x.cpu.state.rflags);
    x.write_op(ins, 0, res)?;
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

/// CMP (a SUB) and TEST (an AND) that only set flags; never lockable.
fn compare_h<const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let a = x.read_op(ins, 0)?;
    let b = x.read_op(ins, 1)?;
    let (_, f) = binop(OP, a, b, size, x.cpu.state.rflags);
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

/// INC, DEC, NEG, NOT on r/m (LOCK allowed with a memory destination).
fn unary_h<const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    let size = op_size(ins, 0);
    let a = x.read_op_rmw(ins, 0)?;
    let rflags = x.cpu.state.rflags;
    let (res, f) = match OP {
        op::INC => inc(a, size, rflags),
        op::DEC => dec(a, size, rflags),
        op::NEG => neg(a, size),
        _ => (not(a, size), rflags),
    };
    x.write_op(ins, 0, res)?;
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

/// `ADCX/ADOX r32/64, r/m32/64`.
fn adx_h<const OVERFLOW: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let b = x.read_op(ins, 1)?;
    let a = x.read_op(ins, 0)?;
    let rflags = x.cpu.state.rflags;
    let (res, f) = if OVERFLOW {
        adox(a, b, size, rflags)
    } else {
        adcx(a, b, size, rflags)
    };
    x.write_op(ins, 0, res)?;
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

#[cfg(test)]
mod native_tests {
    //! Native comparison with this host for every operation and size.
    use super::*;
    use crate::ops::native::{host_is_intel, native_r, native_rr, Mismatches, XorShift, SIZES};

    type Host2 = fn(u64, u64, u64) -> (u64, u64);
    type Host1 = fn(u64, u64) -> (u64, u64);

    macro_rules! four_sizes {
        ($mac:ident, $insn:literal) => {
            [
                $mac!($insn, ":l"),
                $mac!($insn, ":x"),
                $mac!($insn, ":e"),
                $mac!($insn, ""),
            ]
        };
    }

    /// 400 operand pairs per size, each with random input flags.
    fn compare2(
        name: &str,
        sizes: &[u8],
        host: &[Host2],
        model: impl Fn(u64, u64, u8, u64) -> (u64, u64),
    ) {
        let mut rng = XorShift::new(0xa1u64 << 32 ^ name.len() as u64 ^ name.as_bytes()[0] as u64);
        let mut mm = Mismatches::default();
        for (i, &size) in sizes.iter().enumerate() {
            for _ in 0..400 {
                let (a, b, fl) = (rng.operand(size), rng.operand(size), rng.flags());
                mm.check(
                    || format!("{name} size {size} a={a:#x} b={b:#x} fl={fl:#x}"),
                    mask(size),
                    host[i](a, b, fl),
                    model(a, b, size, fl),
                );
            }
        }
        mm.finish(name);
    }

    fn compare1(name: &str, host: [Host1; 4], model: impl Fn(u64, u8, u64) -> (u64, u64)) {
        let mut rng = XorShift::new(0xa2u64 << 32 ^ name.as_bytes()[0] as u64);
        let mut mm = Mismatches::default();
        for (i, &size) in SIZES.iter().enumerate() {
            for _ in 0..400 {
                let (a, fl) = (rng.operand(size), rng.flags());
                mm.check(
                    || format!("{name} size {size} a={a:#x} fl={fl:#x}"),
                    mask(size),
                    host[i](a, fl),
                    model(a, size, fl),
                );
            }
        }
        mm.finish(name);
    }

    #[test]
    fn binops_match_host() {
        if !host_is_intel() {
            eprintln!("host is not Intel, native comparison skipped");
            return;
        }
        let forms: [(&str, u8, [Host2; 4]); 7] = [
            ("add", op::ADD, four_sizes!(native_rr, "add")),
            ("adc", op::ADC, four_sizes!(native_rr, "adc")),
            ("sub", op::SUB, four_sizes!(native_rr, "sub")),
            ("sbb", op::SBB, four_sizes!(native_rr, "sbb")),
            ("and", op::AND, four_sizes!(native_rr, "and")),
            ("or", op::OR, four_sizes!(native_rr, "or")),
            ("xor", op::XOR, four_sizes!(native_rr, "xor")),
        ];
        for (name, o, host) in forms {
            compare2(name, &SIZES, &host, |a, b, s, f| binop(o, a, b, s, f));
        }
        // CMP and TEST leave the destination alone.
        let cmp = four_sizes!(native_rr, "cmp");
        compare2("cmp", &SIZES, &cmp, |a, b, s, f| {
            (a, binop(op::SUB, a, b, s, f).1)
        });
        let test = four_sizes!(native_rr, "test");
        compare2("test", &SIZES, &test, |a, b, s, f| {
            (a, binop(op::AND, a, b, s, f).1)
        });
    }

    #[test]
    fn unary_ops_match_host() {
        if !host_is_intel() {
            eprintln!("host is not Intel, native comparison skipped");
            return;
        }
        compare1("inc", four_sizes!(native_r, "inc"), inc);
        compare1("dec", four_sizes!(native_r, "dec"), dec);
        compare1("neg", four_sizes!(native_r, "neg"), |a, s, _| neg(a, s));
        compare1("not", four_sizes!(native_r, "not"), |a, s, f| {
            (not(a, s), f)
        });
    }

    #[test]
    fn adx_matches_host() {
        if !std::is_x86_feature_detected!("adx") {
            eprintln!("host lacks ADX, native comparison skipped");
            return;
        }
        let adcx_h = [native_rr!("adcx", ":e"), native_rr!("adcx", "")];
        let adox_h = [native_rr!("adox", ":e"), native_rr!("adox", "")];
        compare2("adcx", &[4, 8], &adcx_h, adcx);
        compare2("adox", &[4, 8], &adox_h, adox);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::state::flags::{AF, PF, SF, ZF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    fn machine() -> TestMachine {
        let mut m = TestMachine::new();
        for (i, r) in m.cpu.state.gpr.iter_mut().enumerate() {
            if i != reg::RSP {
                *r = 0x1111_1111_1111_1111 * i as u64;
            }
        }
        m
    }

    fn status(m: &TestMachine) -> u64 {
        m.cpu.state.rflags & STATUS
    }

    fn is_ud(e: crate::Exit) -> bool {
        matches!(e.reason, ExitReason::Exception(Fault::InvalidOpcode { .. }))
    }

    #[test]
    fn semantic_basics() {
        assert_eq!(binop(op::ADD, 0x7f, 1, 1, 0), (0x80, OF | SF | AF));
        assert_eq!(binop(op::ADC, 0xffff, 0, 2, CF), (0, CF | ZF | PF | AF));
        assert_eq!(
            binop(op::SBB, 0, 0, 4, CF),
            (0xffff_ffff, CF | SF | PF | AF)
        );
        assert_eq!(binop(op::XOR, 5, 5, 8, CF | OF | AF), (0, ZF | PF));
        assert_eq!(inc(u64::MAX, 8, CF), (0, CF | ZF | PF | AF));
        assert_eq!(dec(0, 1, 0), (0xff, SF | PF | AF));
        assert_eq!(neg(0, 4), (0, ZF | PF));
        assert_eq!(neg(0x80, 1), (0x80, CF | OF | SF));
        assert_eq!(not(0x0f, 2), 0xfff0);
        assert_eq!(adcx(u64::MAX, 0, 8, CF | ZF), (0, CF | ZF));
        assert_eq!(adox(1, 2, 4, OF | CF), (4, CF));
    }

    #[test]
    fn register_widths_and_high_bytes() {
        let code = TestMachine::assemble(|a| {
            a.add(ah, bh)?; // 8-bit high: 0x00 + 0x33
            a.sub(cx, dx)?; // 16-bit merge
            a.xor(esi, edi)?; // 32-bit zero-extends
            a.add(r8, -1i32)?; // imm8 sign-extended to 64
            a.and(r9b, 0x0f)?;
            Ok(())
        });
        let mut m = machine();
        let e = m.run_code(&code, 5);
        assert_eq!(e.retired, 5, "{:?}", e.reason);
        assert_eq!(m.gpr(reg::RAX), 0x3300);
        assert_eq!(m.gpr(reg::RCX), 0x1111_1111_1111_eeef);
        assert_eq!(m.gpr(reg::RSI), 0x6666_6666 ^ 0x7777_7777);
        assert_eq!(m.gpr(reg::R8), 0x8888_8888_8888_8887);
        assert_eq!(m.gpr(reg::R9), 0x9999_9999_9999_9909);
        assert_eq!(status(&m), PF); // AND 0x99, 0x0f = 0x09: even parity
    }

    #[test]
    fn memory_forms_and_lock() {
        let code = TestMachine::assemble(|a| {
            a.lock().add(qword_ptr(DATA_BASE), rbx)?;
            a.sub(ecx, dword_ptr(DATA_BASE + 8))?;
            a.lock().inc(byte_ptr(DATA_BASE + 16))?;
            a.lock().neg(word_ptr(DATA_BASE + 24))?;
            a.lock().not(dword_ptr(DATA_BASE + 32))?;
            a.cmp(qword_ptr(DATA_BASE), 0x3333_3334i32)?;
            Ok(())
        });
        let mut m = machine();
        m.load(DATA_BASE, &1u64.to_le_bytes());
        m.load(DATA_BASE + 8, &0x1111_1112u64.to_le_bytes());
        m.load(DATA_BASE + 16, &0xaaffu64.to_le_bytes());
        m.load(DATA_BASE + 24, &0x1_0001u64.to_le_bytes());
        m.load(DATA_BASE + 32, &0x5555_0000_0000_ffffu64.to_le_bytes());
        m.cpu.state.rflags |= CF;
        let e = m.run_code(&code, 1);
        assert_eq!(e.retired, 1);
        assert_eq!(m.read_u64(DATA_BASE), 0x3333_3333_3333_3334);
        m.run(1);
        assert_eq!(m.gpr(reg::RCX), 0xffff_ffff);
        assert_eq!(status(&m), CF | SF | PF | AF);
        m.run(1);
        assert_eq!(m.read_u64(DATA_BASE + 16), 0xaa00);
        assert_eq!(status(&m), CF | ZF | PF | AF); // CF preserved from SUB
        m.run(1);
        assert_eq!(m.read_u64(DATA_BASE + 24), 0x1_ffff);
        assert_eq!(status(&m), CF | SF | PF | AF);
        m.run(1);
        assert_eq!(m.read_u64(DATA_BASE + 32), 0x5555_0000_ffff_0000);
        assert_eq!(status(&m), CF | SF | PF | AF); // NOT: flags unchanged
        m.run(1);
        // 0x3333_3333_3333_3334 - 0x3333_3334 = 0x3333_3333_0000_0000
        assert_eq!(m.read_u64(DATA_BASE), 0x3333_3333_3333_3334);
        assert_eq!(status(&m), PF);
    }

    #[test]
    fn lock_rules() {
        type Emit = fn(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>;
        let forms: [Emit; 4] = [
            |a| a.lock().add(rax, rbx).map(|_| ()),
            |a| a.lock().cmp(qword_ptr(DATA_BASE), rbx).map(|_| ()),
            |a| a.lock().test(qword_ptr(DATA_BASE), rbx).map(|_| ()),
            |a| a.lock().inc(ecx).map(|_| ()),
        ];
        for f in forms {
            let mut m = machine();
            let before = m.cpu.state.clone();
            let e = m.run_code(&TestMachine::assemble(f), 1);
            assert!(is_ud(e), "{:?}", e.reason);
            assert_eq!(m.cpu.state, before);
        }
    }

    #[test]
    fn test_and_cmp_do_not_write() {
        let code = TestMachine::assemble(|a| {
            a.test(bh, 0x80)?;
            a.cmp(eax, ebx)?;
            Ok(())
        });
        let mut m = machine();
        m.cpu.state.gpr[reg::RBX] = 0x8000;
        m.cpu.state.gpr[reg::RAX] = 0x7fff;
        let before = m.cpu.state.gpr;
        m.run_code(&code, 1);
        assert_eq!(status(&m), SF);
        m.run(1);
        assert_eq!(status(&m), CF | SF | PF);
        assert_eq!(m.cpu.state.gpr, before);
    }

    #[test]
    fn adx_chains() {
        let code = TestMachine::assemble(|a| {
            a.adcx(rax, rbx)?;
            a.adox(ecx, dword_ptr(DATA_BASE))?;
            Ok(())
        });
        let mut m = machine();
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RBX] = 0;
        m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_ffff_fff0;
        m.load(DATA_BASE, &0x10u64.to_le_bytes());
        m.cpu.state.rflags |= CF | OF | ZF;
        let e = m.run_code(&code, 2);
        assert_eq!(e.retired, 2, "{:?}", e.reason);
        assert_eq!(m.gpr(reg::RAX), 0);
        assert_eq!(m.gpr(reg::RCX), 1);
        assert_eq!(status(&m), CF | OF | ZF);
    }

    #[test]
    fn rmw_to_read_only_memory_faults_with_nothing_changed() {
        let code = TestMachine::assemble(|a| a.add(qword_ptr(0x1000u64), rax));
        let mut m = machine();
        let before = m.cpu.state.clone();
        let e = m.run_code(&code, 1);
        assert_eq!(
            e.reason,
            ExitReason::Exception(Fault::PageFault {
                addr: 0x1000,
                code: 7
            })
        );
        assert_eq!(m.cpu.state, before);
    }
}
