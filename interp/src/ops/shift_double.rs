//! Double-precision shifts (SHLD/SHRD) and the flagless BMI2 shifts (SARX/SHLX/SHRX/RORX).
//!
//! "Undefined" behaviour follows this Intel host (checked natively in the tests below):
//! - SHLD/SHRD OF for counts > 1 is computed as for a count of 1 from the original operands
//!   (SHLD: MSB(dst) ^ MSB-1(dst); SHRD: MSB(dst) ^ LSB(src)), not from the final result.
//!   AF is cleared for every non-zero count.
//! - 16-bit forms with a count of 17..31 shift the 48-bit value dst:src:dst (SHLD takes its
//!   result from the top, SHRD from the bottom), so bits of the destination come back in;
//!   CF is the last bit shifted out of that 48-bit value.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags::{self, szp};
use crate::operand::{mask, op_size};
use crate::ops::check_no_lock;
use crate::ops::shift::count_mask;
use crate::state::flags::{CF, OF, STATUS};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};

/// Flags of a double shift: SF/ZF/PF from the result, AF = 0, CF and OF given (as 0/1).
#[inline(always)]
fn shd_flags(res: u64, size: u8, cf: u64, of: u64) -> u64 {
    szp(res, size) | if cf != 0 { CF } else { 0 } | if of != 0 { OF } else { 0 }
}

/// SHLD dst, src, count: shift dst left, filling from the top of src. Returns (result, flags).
/// CF = last bit shifted out of dst; OF = MSB(dst) ^ MSB-1(dst) for every non-zero count
/// (host: as for a count of 1). A masked count of 0 changes nothing.
pub fn shld(dst: u64, src: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let (dst, src) = (dst & m, src & m);
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (dst, rflags & STATUS);
    }
    let (res, cf) = if size == 2 {
        // 48-bit dst:src:dst; counts 17..31 are the host's "undefined" case.
        let t = (dst << 32) | (src << 16) | dst;
        ((t >> (32 - c)) & m, (t >> (48 - c)) & 1)
    } else {
        // 8-byte and 4-byte forms: c < bits always.
        let bits = size as u32 * 8;
        let wide = ((dst as u128) << bits) | src as u128;
        ((((wide << c) >> bits) as u64) & m, (dst >> (bits - c)) & 1)
    };
    let top = size as u32 * 8 - 1;
    let of = ((dst >> top) ^ (dst >> (top - 1))) & 1;
    (res, shd_flags(res, size, cf, of))
}

/// SHRD dst, src, count: shift dst right, filling from the bottom of src. Returns (result,
/// flags). CF = last bit shifted out of dst; OF = MSB(dst) ^ LSB(src) for every non-zero count
/// (host: as for a count of 1). A masked count of 0 changes nothing.
pub fn shrd(dst: u64, src: u64, count: u64, size: u8, rflags: u64) -> (u64, u64) {
    let m = mask(size);
    let (dst, src) = (dst & m, src & m);
    let c = (count & count_mask(size)) as u32;
    if c == 0 {
        return (dst, rflags & STATUS);
    }
    let (res, cf) = if size == 2 {
        // 48-bit dst:src:dst, shifted right; counts 17..31 are the host's "undefined" case.
        let t = (dst << 32) | (src << 16) | dst;
        ((t >> c) & m, (t >> (c - 1)) & 1)
    } else {
        let bits = size as u32 * 8;
        let wide = ((src as u128) << bits) | dst as u128;
        (((wide >> c) as u64) & m, ((wide >> (c - 1)) as u64) & 1)
    };
    let top = size as u32 * 8 - 1;
    let of = ((dst >> top) ^ src) & 1;
    (res, shd_flags(res, size, cf, of))
}

/// SHLX: logical left shift, count masked to 5/6 bits, no flags.
pub fn shlx(v: u64, count: u64, size: u8) -> u64 {
    (v << (count & count_mask(size))) & mask(size)
}

/// SHRX: logical right shift, count masked to 5/6 bits, no flags.
pub fn shrx(v: u64, count: u64, size: u8) -> u64 {
    (v & mask(size)) >> (count & count_mask(size))
}

/// SARX: arithmetic right shift, count masked to 5/6 bits, no flags.
pub fn sarx(v: u64, count: u64, size: u8) -> u64 {
    let sv = crate::operand::sext(v & mask(size), size) as i64;
    (sv >> (count & count_mask(size))) as u64 & mask(size)
}

/// RORX: rotate right by an immediate masked to 5/6 bits, no flags.
pub fn rorx(v: u64, count: u64, size: u8) -> u64 {
    let v = v & mask(size);
    let c = (count & count_mask(size)) as u32;
    if size == 8 {
        v.rotate_right(c)
    } else {
        (v as u32).rotate_right(c) as u64
    }
}

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Shld => shd_h::<true>,
        Mnemonic::Shrd => shd_h::<false>,
        Mnemonic::Shlx => bmi2_h::<0>,
        Mnemonic::Shrx => bmi2_h::<1>,
        Mnemonic::Sarx => bmi2_h::<2>,
        Mnemonic::Rorx => bmi2_h::<3>,
        _ => return None,
    })
}

/// `SHLD/SHRD r/m, r, imm8|CL`. Always writes the destination back (32-bit zero-extension
/// even for a count of 0).
fn shd_h<const LEFT: bool>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let src = x.read_op(ins, 1)?;
    let count = x.read_op(ins, 2)?;
    let dst = x.read_op_rmw(ins, 0)?;
    let rflags = x.cpu.state.rflags;
    let (res, f) = if LEFT {
        shld(dst, src, count, size, rflags)
    } else {
        shrd(dst, src, count, size, rflags)
    };
    x.write_op(ins, 0, res)?;
    flags::set_status(&mut x.cpu.state, STATUS, f);
    Ok(())
}

/// `SHLX/SHRX/SARX r, r/m, r` and `RORX r, r/m, imm8` (VEX; the decoder rejects VEX.L=1).
fn bmi2_h<const OP: u8>(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = op_size(ins, 0);
    let v = x.read_op(ins, 1)?;
    let count = x.read_op(ins, 2)?;
    let res = match OP {
        0 => shlx(v, count, size),
        1 => shrx(v, count, size),
        2 => sarx(v, count, size),
        _ => rorx(v, count, size),
    };
    x.write_op(ins, 0, res)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operand::mask;
    use crate::ops::native::{host_is_intel, native_shd_cl, Mismatches, XorShift, SIZES};
    use crate::state::flags::{AF, PF, SF, ZF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    type NativeShd = fn(u64, u64, u64, u64) -> (u64, u64);
    type ModelShd = fn(u64, u64, u64, u8, u64) -> (u64, u64);

    fn compare_shd(name: &str, host: [NativeShd; 3], model: ModelShd) {
        if !host_is_intel() {
            eprintln!("{name}: host is not Intel, native comparison skipped");
            return;
        }
        let mut rng = XorShift::new(0x0005_d5d5_0000_0001 ^ name.len() as u64);
        let mut mm = Mismatches::default();
        // No 8-bit form exists.
        for (i, &size) in SIZES[1..].iter().enumerate() {
            for _ in 0..300 {
                let (d, s, fl) = (rng.operand(size), rng.operand(size), rng.flags());
                for count in 0..72u64 {
                    mm.check(
                        || format!("{name} size {size} d={d:#x} s={s:#x} c={count} fl={fl:#x}"),
                        mask(size),
                        host[i](d, s, count, fl),
                        model(d, s, count, size, fl),
                    );
                }
            }
        }
        mm.finish(name);
    }

    #[test]
    fn shld_matches_host() {
        compare_shd(
            "shld",
            [
                native_shd_cl!("shld", ":x"),
                native_shd_cl!("shld", ":e"),
                native_shd_cl!("shld", ""),
            ],
            shld,
        );
    }

    #[test]
    fn shrd_matches_host() {
        compare_shd(
            "shrd",
            [
                native_shd_cl!("shrd", ":x"),
                native_shd_cl!("shrd", ":e"),
                native_shd_cl!("shrd", ""),
            ],
            shrd,
        );
    }

    /// `insn dst, src, count` (BMI2 three-register form) on the host, flags untouched.
    macro_rules! native_bmi2 {
        ($insn:literal, $m:literal) => {{
            fn f(a: u64, c: u64) -> u64 {
                let d: u64;
                // SAFETY: a register-only BMI2 instruction; callers check the feature first.
                unsafe {
                    core::arch::asm!(
                        concat!($insn, " {d", $m, "}, {a", $m, "}, {c", $m, "}"),
                        d = lateout(reg) d, a = in(reg) a, c = in(reg) c,
                        options(pure, nomem, nostack, preserves_flags),
                    )
                }
                d
            }
            f as fn(u64, u64) -> u64
        }};
    }

    /// RORX with every immediate 0..=63 on the host: one function per immediate.
    macro_rules! native_rorx_table {
        ($m:literal; $($n:literal)*) => {
            [$({
                fn f(a: u64) -> u64 {
                    let d: u64;
                    // SAFETY: a register-only BMI2 instruction; callers check the feature first.
                    unsafe {
                        core::arch::asm!(
                            concat!("rorx {d", $m, "}, {a", $m, "}, ", $n),
                            d = lateout(reg) d, a = in(reg) a,
                            options(pure, nomem, nostack, preserves_flags),
                        )
                    }
                    d
                }
                f as fn(u64) -> u64
            }),*]
        };
    }

    #[test]
    fn bmi2_matches_host() {
        if !std::is_x86_feature_detected!("bmi2") {
            eprintln!("host lacks BMI2, native comparison skipped");
            return;
        }
        type Host = fn(u64, u64) -> u64;
        type Model = fn(u64, u64, u8) -> u64;
        let forms: [(&str, Host, Host, Model); 3] = [
            (
                "shlx",
                native_bmi2!("shlx", ":e"),
                native_bmi2!("shlx", ""),
                shlx,
            ),
            (
                "shrx",
                native_bmi2!("shrx", ":e"),
                native_bmi2!("shrx", ""),
                shrx,
            ),
            (
                "sarx",
                native_bmi2!("sarx", ":e"),
                native_bmi2!("sarx", ""),
                sarx,
            ),
        ];
        let rorx32 = native_rorx_table!(":e"; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
            20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
            48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
        let rorx64 = native_rorx_table!(""; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
            20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
            48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
        let mut rng = XorShift::new(0xb312);
        let mut mm = Mismatches::default();
        for &size in &[4u8, 8] {
            for _ in 0..300 {
                let v = rng.operand(size);
                for count in 0..72u64 {
                    // Count registers carry random upper bits too (they must be masked off).
                    let creg = (rng.next() & !0xff) | count;
                    for (name, h32, h64, model) in forms {
                        let host = if size == 4 { h32 } else { h64 };
                        mm.check(
                            || format!("{name} size {size} v={v:#x} c={creg:#x}"),
                            mask(size),
                            (host(v, creg), 0),
                            (model(v, creg, size), 0),
                        );
                    }
                    if count < 64 {
                        let host = if size == 4 { rorx32 } else { rorx64 };
                        mm.check(
                            || format!("rorx size {size} v={v:#x} imm={count}"),
                            mask(size),
                            (host[count as usize](v), 0),
                            (rorx(v, count, size), 0),
                        );
                    }
                }
            }
        }
        mm.finish("bmi2 shifts");
    }

    #[test]
    fn semantic_basics() {
        assert_eq!(shld(0x8001, 0xc000, 2, 2, 0), (0x0007, OF));
        assert_eq!(shrd(0x0003, 0x0001, 1, 2, 0), (0x8001, CF | OF | SF));
        assert_eq!(shld(0x1234, 0x5678, 0, 2, ZF | AF), (0x1234, ZF | AF));
        assert_eq!(
            shld(0x8000_0000_0000_0000, 0, 1, 8, 0),
            (0, CF | OF | ZF | PF)
        );
        assert_eq!(shlx(1, 33, 4), 2);
        assert_eq!(sarx(0x8000_0000, 31, 4), 0xffff_ffff);
        assert_eq!(rorx(1, 1, 8), 1 << 63);
    }

    #[test]
    fn shld_shrd_through_the_interpreter() {
        let code = TestMachine::assemble(|a| {
            a.shld(eax, ebx, cl)?;
            a.shrd(word_ptr(DATA_BASE), dx, 4)?;
            a.shld(qword_ptr(DATA_BASE + 8), rbx, 8)?;
            Ok(())
        });
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_0000_0001;
        m.cpu.state.gpr[reg::RBX] = 0xa000_0000_c000_0000;
        m.cpu.state.gpr[reg::RCX] = 0x22; // masked to 2
        m.cpu.state.gpr[reg::RDX] = 0x000f;
        m.load(DATA_BASE, &0xaaaa_1238u64.to_le_bytes());
        m.load(DATA_BASE + 8, &0x0012_3456_789a_bcdeu64.to_le_bytes());
        let e = m.run_code(&code, 3);
        assert_eq!(e.retired, 3, "{:?}", e.reason);
        assert_eq!(m.gpr(reg::RAX), 0x7);
        assert_eq!(m.read_u64(DATA_BASE), 0xaaaa_f123);
        assert_eq!(m.read_u64(DATA_BASE + 8), 0x1234_5678_9abc_dea0);
        assert_eq!(m.cpu.state.rflags & STATUS, PF);
    }

    #[test]
    fn bmi2_through_the_interpreter() {
        let code = TestMachine::assemble(|a| {
            a.shlx(eax, dword_ptr(DATA_BASE), ecx)?;
            a.sarx(rbx, rdx, rcx)?;
            a.rorx(rsi, qword_ptr(DATA_BASE), 4)?;
            a.shrx(r8d, edx, ecx)?;
            Ok(())
        });
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RCX] = 0x44; // 4 after masking
        m.cpu.state.gpr[reg::RDX] = 0x8000_0000_0000_0100;
        m.cpu.state.gpr[reg::R8] = u64::MAX;
        m.load(DATA_BASE, &0x1234_5678_9abc_def1u64.to_le_bytes());
        let flags_before = m.cpu.state.rflags;
        let e = m.run_code(&code, 4);
        assert_eq!(e.retired, 4, "{:?}", e.reason);
        assert_eq!(m.gpr(reg::RAX), 0xabcd_ef10);
        assert_eq!(m.gpr(reg::RBX), 0xf800_0000_0000_0010);
        assert_eq!(m.gpr(reg::RSI), 0x1123_4567_89ab_cdef);
        assert_eq!(m.gpr(reg::R8), 0x10);
        assert_eq!(m.cpu.state.rflags, flags_before);
    }
}
