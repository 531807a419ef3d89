//! BMI1/BMI2 bit manipulation: ANDN, BEXTR, BLSI, BLSMSK, BLSR, BZHI, PDEP, PEXT (MULX is in
//! muldiv.rs).

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags::set_status;
use crate::operand::{mask, sign_bit};
use crate::ops::check_no_lock;
use crate::state::flags::{CF, SF, STATUS, ZF};
use crate::Ctx;
use iced_x86::{Code, Instruction, Mnemonic};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Andn => andn_h,
        // Only the BMI1 register form; AMD TBM's BEXTR with an immediate is not modelled.
        Mnemonic::Bextr => match ins.code() {
            Code::VEX_Bextr_r32_rm32_r32 | Code::VEX_Bextr_r64_rm64_r64 => bextr_h,
            _ => return None,
        },
        Mnemonic::Blsi => blsi_h,
        Mnemonic::Blsmsk => blsmsk_h,
        Mnemonic::Blsr => blsr_h,
        Mnemonic::Bzhi => bzhi_h,
        Mnemonic::Pdep => pdep_h,
        Mnemonic::Pext => pext_h,
        _ => return None,
    })
}

/// Status flags written by ANDN/BEXTR/BLS*/BZHI: all six (PDEP/PEXT write none).
pub const BMI_FLAGS: u64 = STATUS;

/// ZF and SF of a `size`-byte result.
#[inline]
fn zs(res: u64, size: u8) -> u64 {
    (if res == 0 { ZF } else { 0 }) | (if res & sign_bit(size) != 0 { SF } else { 0 })
}

/// ANDN: `!a & b`. SF, ZF from the result, CF=OF=0; the "undefined" AF and PF are 0 on this
/// Intel host.
pub fn andn(a: u64, b: u64, size: u8) -> (u64, u64) {
    let res = !a & b & mask(size);
    (res, zs(res, size))
}

/// BEXTR: `len` = ctl[15:8] bits of `src` starting at bit `start` = ctl[7:0] (bits beyond the
/// operand are zero). ZF from the result, CF=OF=0; the "undefined" SF, AF, PF are 0 on this
/// Intel host.
pub fn bextr(src: u64, ctl: u64, size: u8) -> (u64, u64) {
    let bits = size as u64 * 8;
    let (start, len) = (ctl & 0xff, (ctl >> 8) & 0xff);
    let res = if start >= bits {
        0
    } else {
        let v = (src & mask(size)) >> start;
        if len >= 64 {
            v
        } else {
            v & ((1u64 << len) - 1)
        }
    };
    (res, if res == 0 { ZF } else { 0 })
}

/// BLSI: lowest set bit. SF, ZF from the result, CF = (source != 0), OF=0; AF=PF=0 (host).
pub fn blsi(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    let res = s & s.wrapping_neg();
    (res, zs(res, size) | if s != 0 { CF } else { 0 })
}

/// BLSMSK: mask up to and including the lowest set bit. SF from the result, ZF=0, CF =
/// (source == 0), OF=0; AF=PF=0 (host).
pub fn blsmsk(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    let res = (s ^ s.wrapping_sub(1)) & mask(size);
    (res, (zs(res, size) & SF) | if s == 0 { CF } else { 0 })
}

/// BLSR: clear the lowest set bit. SF, ZF from the result, CF = (source == 0), OF=0; AF=PF=0
/// (host).
pub fn blsr(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    let res = s & s.wrapping_sub(1);
    (res, zs(res, size) | if s == 0 { CF } else { 0 })
}

/// BZHI: clear the bits of `src` from index idx[7:0] up. SF, ZF from the result, CF = (index >
/// operand width - 1), OF=0; AF=PF=0 (host).
pub fn bzhi(src: u64, idx: u64, size: u8) -> (u64, u64) {
    let n = idx & 0xff;
    let bits = size as u64 * 8;
    let s = src & mask(size);
    let (res, cf) = if n < bits {
        (s & ((1u64 << n) - 1), 0)
    } else {
        (s, CF)
    };
    (res, zs(res, size) | cf)
}

/// PDEP: deposit the low bits of `src` at the set bits of `sel`. No flags.
pub fn pdep(src: u64, sel: u64, size: u8) -> u64 {
    let (mut m, mut res, mut k) = (sel & mask(size), 0u64, 0u32);
    while m != 0 {
        let low = m & m.wrapping_neg();
        if (src >> k) & 1 != 0 {
            res |= low;
        }
        k += 1;
        m &= m - 1;
    }
    res
}

/// PEXT: gather the bits of `src` at the set bits of `sel` into the low bits. No flags.
pub fn pext(src: u64, sel: u64, size: u8) -> u64 {
    let (mut m, mut res, mut k) = (sel & mask(size), 0u64, 0u32);
    while m != 0 {
        let low = m & m.wrapping_neg();
        if src & low != 0 {
            res |= 1 << k;
        }
        k += 1;
        m &= m - 1;
    }
    res
}

/// Shape of the three-operand forms: dest = f(op `a`, op `b`), optionally writing flags.
#[inline]
fn three(
    x: &mut Ctx,
    ins: &Instruction,
    (a, b): (u32, u32),
    f: fn(u64, u64, u8) -> (u64, u64),
    which: u64,
) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let va = x.read_op(ins, a)?;
    let vb = x.read_op(ins, b)?;
    let (res, fl) = f(va, vb, size);
    x.write_op(ins, 0, res)?;
    set_status(&mut x.cpu.state, which, fl);
    Ok(())
}

/// Shape of BLSI/BLSMSK/BLSR: dest (VEX.vvvv) = f(r/m).
#[inline]
fn two(x: &mut Ctx, ins: &Instruction, f: fn(u64, u8) -> (u64, u64)) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let src = x.read_op(ins, 1)?;
    let (res, fl) = f(src, size);
    x.write_op(ins, 0, res)?;
    set_status(&mut x.cpu.state, BMI_FLAGS, fl);
    Ok(())
}

/// ANDN r, r(vvvv), r/m.
fn andn_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    three(x, ins, (1, 2), andn, BMI_FLAGS)
}

/// BEXTR r, r/m, r(vvvv).
fn bextr_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    three(x, ins, (1, 2), bextr, BMI_FLAGS)
}

/// BZHI r, r/m, r(vvvv).
fn bzhi_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    three(x, ins, (1, 2), bzhi, BMI_FLAGS)
}

/// PDEP r, r(vvvv), r/m.
fn pdep_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    three(x, ins, (1, 2), |a, b, s| (pdep(a, b, s), 0), 0)
}

/// PEXT r, r(vvvv), r/m.
fn pext_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    three(x, ins, (1, 2), |a, b, s| (pext(a, b, s), 0), 0)
}

fn blsi_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    two(x, ins, blsi)
}

fn blsmsk_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    two(x, ins, blsmsk)
}

fn blsr_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    two(x, ins, blsr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::state::flags::{AF, OF, PF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn semantic_edge_cases() {
        assert_eq!(andn(0xf0, 0xff, 1), (0x0f, 0));
        assert_eq!(andn(0, 1 << 63, 8), (1 << 63, SF));
        assert_eq!(bextr(0xabcd_1234, 0x0804, 4), (0x23, 0));
        assert_eq!(bextr(u64::MAX, 0xff00, 8), (u64::MAX, 0));
        assert_eq!(bextr(u64::MAX, 0x10_3c, 4), (0, ZF)); // start 60 >= 32
        assert_eq!(bextr(u64::MAX, 0x30_1c, 4), (0xf, 0)); // bits past 31 read as 0
        assert_eq!(blsi(0b1011_0000, 4), (0b1_0000, CF));
        assert_eq!(blsi(0, 8), (0, ZF));
        assert_eq!(blsmsk(0, 4), (0xffff_ffff, SF | CF));
        assert_eq!(blsmsk(0b1000, 8), (0b1111, 0));
        assert_eq!(blsr(1 << 31 | 1, 4), (1 << 31, SF));
        assert_eq!(blsr(0, 4), (0, ZF | CF));
        assert_eq!(bzhi(u64::MAX, 0x104, 8), (0xf, 0)); // only idx[7:0] counts
        assert_eq!(bzhi(u64::MAX, 32, 4), (0xffff_ffff, SF | CF));
        assert_eq!(bzhi(u64::MAX, 0, 8), (0, ZF));
        assert_eq!(pdep(0b101, 0xf0f0, 8), 0b0101_0000);
        assert_eq!(pdep(u64::MAX, u64::MAX, 4), 0xffff_ffff);
        assert_eq!(pext(0xabcd, 0xff00, 2), 0xab);
        assert_eq!(pext(u64::MAX, 1 << 63, 8), 1);
    }

    #[test]
    fn forms_through_the_machine() {
        let code = TestMachine::assemble(|a| {
            a.andn(eax, ebx, dword_ptr(DATA_BASE))?;
            a.bextr(rcx, qword_ptr(DATA_BASE), rdx)?;
            a.blsr(r8, qword_ptr(DATA_BASE))?;
            a.bzhi(r9d, esi, edi)?;
            a.pdep(r10, rsi, qword_ptr(DATA_BASE))?;
            a.pext(r11d, esi, dword_ptr(DATA_BASE))
        });
        let mut m = TestMachine::new();
        m.ram.write_u64(DATA_BASE, 0xff00_0000_0000_f0f0).unwrap();
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RBX] = 0x0000_0000_0000_00ff;
        m.cpu.state.gpr[reg::RDX] = 0x0808; // 8 bits from bit 8
        m.cpu.state.gpr[reg::RSI] = 0x1234_5678_9abc_def0;
        m.cpu.state.gpr[reg::RDI] = 12;
        m.cpu.state.gpr[reg::R9] = u64::MAX;
        m.cpu.state.rflags |= AF | PF | OF;
        assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
        assert_eq!(m.gpr(reg::RAX), 0xf000); // 32-bit: upper half zeroed
        assert_eq!(m.cpu.state.rflags & STATUS, 0);
        m.run(1);
        assert_eq!(m.gpr(reg::RCX), 0xf0);
        m.run(1);
        assert_eq!(m.gpr(reg::R8), 0xff00_0000_0000_f0e0);
        assert_eq!(m.cpu.state.rflags & STATUS, SF);
        m.run(1);
        assert_eq!(m.gpr(reg::R9), 0xef0);
        m.cpu.state.rflags |= PF | CF;
        assert_eq!(m.run(2).reason, ExitReason::Budget);
        assert_eq!(
            m.gpr(reg::R10),
            pdep(0x1234_5678_9abc_def0, 0xff00_0000_0000_f0f0, 8)
        );
        assert_eq!(m.gpr(reg::R11), 0xdf);
        assert_eq!(m.cpu.state.rflags & STATUS, PF | CF); // PDEP/PEXT: untouched
    }

    #[cfg(target_arch = "x86_64")]
    mod native {
        //! The semantic functions against this host CPU.
        use super::super::*;
        use crate::ops::native::{for_inputs, host_is_intel};
        use crate::state::flags::OF;
        use core::arch::asm;

        /// Run `$ins` natively with RAX=`$a`, RDX=`$d` and RFLAGS=`$f`; returns (RAX, RFLAGS).
        macro_rules! native {
            ($ins:literal, $a:expr, $d:expr, $f:expr) => {{
                let (mut a, mut f): (u64, u64) = ($a, $f);
                // SAFETY: the template runs one register-only instruction between a balanced
                // push/popfq and pushfq/pop; it touches no memory but the stack below RSP.
                unsafe {
                    asm!("push {f}", "popfq", $ins, "pushfq", "pop {f}", f = inout(reg) f,
                        inout("rax") a, in("rdx") $d);
                }
                (a, f)
            }};
        }

        /// Compare `$ins` (RAX=a, RDX=b in, RAX out) with `$sem(a, b)` over deterministic
        /// inputs; `$which` are the flags it writes, `$defined` those the manual defines.
        macro_rules! case {
            ($ins:literal, $size:expr, $which:expr, $defined:expr, $sem:expr) => {{
                let cmp = if host_is_intel() { STATUS } else { $defined };
                let sem: &dyn Fn(u64, u64) -> (u64, u64) = &$sem;
                for_inputs($size, |a, b, fin| {
                    let (ra, fo) = native!($ins, a, b, fin);
                    let (want, fl) = sem(a, b);
                    let want = if $size == 4 { want } else { want & mask($size) };
                    assert_eq!(ra, want, "{}: a={a:#x} b={b:#x}", $ins);
                    let want_f = (fin & !$which) | (fl & $which);
                    assert_eq!(fo & cmp, want_f & cmp, "{} flags: a={a:#x} b={b:#x}", $ins);
                });
            }};
        }

        #[test]
        fn bmi1_matches_host() {
            if !std::is_x86_feature_detected!("bmi1") {
                eprintln!("skipped: host has no BMI1");
                return;
            }
            let all = BMI_FLAGS;
            let zsco = ZF | SF | CF | OF;
            case!("andn eax, eax, edx", 4, all, zsco, |a, b| andn(a, b, 4));
            case!("andn rax, rax, rdx", 8, all, zsco, |a, b| andn(a, b, 8));
            case!("bextr eax, eax, edx", 4, all, ZF | CF | OF, |a, b| bextr(
                a, b, 4
            ));
            case!("bextr rax, rax, rdx", 8, all, ZF | CF | OF, |a, b| bextr(
                a, b, 8
            ));
            case!("bextr rax, rdx, rax", 8, all, ZF | CF | OF, |a, b| bextr(
                b, a, 8
            ));
            case!("blsi eax, edx", 4, all, zsco, |_, b| blsi(b, 4));
            case!("blsi rax, rdx", 8, all, zsco, |_, b| blsi(b, 8));
            case!("blsmsk eax, edx", 4, all, zsco, |_, b| blsmsk(b, 4));
            case!("blsmsk rax, rdx", 8, all, zsco, |_, b| blsmsk(b, 8));
            case!("blsr eax, edx", 4, all, zsco, |_, b| blsr(b, 4));
            case!("blsr rax, rdx", 8, all, zsco, |_, b| blsr(b, 8));
        }

        #[test]
        fn bmi2_matches_host() {
            if !std::is_x86_feature_detected!("bmi2") {
                eprintln!("skipped: host has no BMI2");
                return;
            }
            let zsco = ZF | SF | CF | OF;
            case!("bzhi eax, eax, edx", 4, BMI_FLAGS, zsco, |a, b| bzhi(
                a, b, 4
            ));
            case!("bzhi rax, rax, rdx", 8, BMI_FLAGS, zsco, |a, b| bzhi(
                a, b, 8
            ));
            case!("bzhi rax, rdx, rax", 8, BMI_FLAGS, zsco, |a, b| bzhi(
                b, a, 8
            ));
            case!("pdep eax, eax, edx", 4, 0, STATUS, |a, b| (
                pdep(a, b, 4),
                0
            ));
            case!("pdep rax, rax, rdx", 8, 0, STATUS, |a, b| (
                pdep(a, b, 8),
                0
            ));
            case!("pdep rax, rdx, rax", 8, 0, STATUS, |a, b| (
                pdep(b, a, 8),
                0
            ));
            case!("pext eax, eax, edx", 4, 0, STATUS, |a, b| (
                pext(a, b, 4),
                0
            ));
            case!("pext rax, rax, rdx", 8, 0, STATUS, |a, b| (
                pext(a, b, 8),
                0
            ));
            case!("pext rax, rdx, rax", 8, 0, STATUS, |a, b| (
                pext(b, a, 8),
                0
            ));
        }
    }
}
