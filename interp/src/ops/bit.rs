//! Bit test and scan: BT, BTS, BTR, BTC, BSF, BSR, TZCNT, LZCNT, POPCNT.

use crate::decode::Handler;
use crate::fault::Trap;
use crate::flags::{parity, set_status};
use crate::operand::{mask, sext};
use crate::ops::{check_lock_mem_dest, check_no_lock};
use crate::state::flags::{CF, PF, STATUS, ZF};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic, OpKind, Register};

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Bt => bt,
        Mnemonic::Bts => bts,
        Mnemonic::Btr => btr,
        Mnemonic::Btc => btc,
        Mnemonic::Bsf => bsf_h,
        Mnemonic::Bsr => bsr_h,
        Mnemonic::Tzcnt => tzcnt_h,
        Mnemonic::Lzcnt => lzcnt_h,
        Mnemonic::Popcnt => popcnt_h,
        _ => return None,
    })
}

/// What BT* does to the selected bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    /// BT: only test.
    Test,
    /// BTS: set.
    Set,
    /// BTR: clear.
    Reset,
    /// BTC: complement.
    Complement,
}

/// Status flags BT* write: CF only. OF/SF/AF/PF are "undefined"; this Intel host leaves them
/// (and ZF) unchanged.
pub const BT_FLAGS: u64 = CF;
/// Status flags BSF/BSR/TZCNT/LZCNT/POPCNT write: all six.
pub const SCAN_FLAGS: u64 = STATUS;

/// BT*: bit `bit` (taken modulo the operand width) of the `size`-byte `val`.
/// Returns (new value, flags) with CF = the bit's old value.
pub fn bit_op(op: BitOp, val: u64, bit: u64, size: u8) -> (u64, u64) {
    let sel = 1u64 << (bit & (size as u64 * 8 - 1));
    let cf = if val & sel != 0 { CF } else { 0 };
    let new = match op {
        BitOp::Test => val,
        BitOp::Set => val | sel,
        BitOp::Reset => val & !sel,
        BitOp::Complement => val ^ sel,
    };
    (new & mask(size), cf)
}

/// BSF: index of the lowest set bit, or `None` (destination left unchanged) for a zero source.
/// Rule found on this Intel host: CF=OF=SF=AF=0, ZF = (source == 0), PF = parity of the index
/// (PF=1 for a zero source); with a zero source the destination register is not written at all
/// (even a 32-bit destination keeps its upper half).
pub fn bsf(src: u64, size: u8) -> (Option<u64>, u64) {
    scan_result(src & mask(size), |s| s.trailing_zeros())
}

/// BSR: index of the highest set bit; flags and zero source as [`bsf`].
pub fn bsr(src: u64, size: u8) -> (Option<u64>, u64) {
    scan_result(src & mask(size), |s| 63 - s.leading_zeros())
}

fn scan_result(s: u64, index: fn(u64) -> u32) -> (Option<u64>, u64) {
    if s == 0 {
        (None, ZF | PF)
    } else {
        let i = index(s) as u64;
        (Some(i), parity(i))
    }
}

/// Flags of TZCNT/LZCNT (this Intel host): CF = (source == 0), ZF = (result == 0), the
/// "undefined" OF/SF/AF/PF are 0.
fn count_flags(src_zero: bool, res: u64) -> u64 {
    (if src_zero { CF } else { 0 }) | (if res == 0 { ZF } else { 0 })
}

/// TZCNT: number of trailing zero bits (the operand width for a zero source).
pub fn tzcnt(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    let res = if s == 0 {
        size as u64 * 8
    } else {
        s.trailing_zeros() as u64
    };
    (res, count_flags(s == 0, res))
}

/// LZCNT: number of leading zero bits within the operand width.
pub fn lzcnt(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    let res = (s.leading_zeros() - (64 - size as u32 * 8)) as u64;
    (res, count_flags(s == 0, res))
}

/// POPCNT: number of set bits. ZF = (source == 0), the other five are cleared (manual).
pub fn popcnt(src: u64, size: u8) -> (u64, u64) {
    let s = src & mask(size);
    (s.count_ones() as u64, if s == 0 { ZF } else { 0 })
}

/// Address-size mask of the memory operand (64-bit mode: 8 or 4 bytes via 67h).
fn addr_mask(ins: &Instruction) -> u64 {
    let r = match ins.memory_base() {
        Register::None => ins.memory_index(),
        b => b,
    };
    let size = match r {
        Register::RIP => 8,
        Register::EIP => 4,
        Register::None => match ins.memory_displ_size() {
            2 => 2,
            4 => 4,
            _ => 8,
        },
        r => r.size(),
    };
    mask(size as u8)
}

fn bt(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    bt_any(x, ins, BitOp::Test)
}

fn bts(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    bt_any(x, ins, BitOp::Set)
}

fn btr(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    bt_any(x, ins, BitOp::Reset)
}

fn btc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_lock_mem_dest(ins)?;
    bt_any(x, ins, BitOp::Complement)
}

/// BT* r/m, r and BT* r/m, imm8. With a memory operand and a register offset the offset is a
/// signed bit index into a bit string starting at the effective address: the operand-sized
/// word at `ea + (offset >> log2(width)) * size` is accessed. Immediate offsets and register
/// destinations take the offset modulo the width.
fn bt_any(x: &mut Ctx, ins: &Instruction, op: BitOp) -> Result<(), Trap> {
    let size = x.op_size(ins, 0);
    let bit = x.read_op(ins, 1)?;
    if ins.op0_kind() == OpKind::Memory {
        let mut off = x.effective_offset(ins);
        if ins.op1_kind() == OpKind::Register {
            let shift = (size as u32 * 8).trailing_zeros();
            let words = (sext(bit, size) as i64) >> shift;
            off = off.wrapping_add(words.wrapping_mul(size as i64) as u64) & addr_mask(ins);
        }
        let lin =
            x.seg_linear_checked(ins.memory_segment(), off, size as u64, op != BitOp::Test)?;
        let val = if op == BitOp::Test {
            x.read(lin, size)?
        } else {
            x.read_rmw(lin, size)?
        };
        let (new, f) = bit_op(op, val, bit, size);
        if op != BitOp::Test {
            x.write(lin, size, new)?;
        }
        set_status(&mut x.cpu.state, BT_FLAGS, f);
    } else {
        let val = x.read_op(ins, 0)?;
        let (new, f) = bit_op(op, val, bit, size);
        if op != BitOp::Test {
            x.write_op(ins, 0, new)?;
        }
        set_status(&mut x.cpu.state, BT_FLAGS, f);
    }
    Ok(())
}

/// BSF/BSR r, r/m: the destination is written only for a non-zero source.
fn scan(x: &mut Ctx, ins: &Instruction, f: fn(u64, u8) -> (Option<u64>, u64)) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let src = x.read_op(ins, 1)?;
    let (res, fl) = f(src, size);
    if let Some(v) = res {
        x.write_op(ins, 0, v)?;
    }
    set_status(&mut x.cpu.state, SCAN_FLAGS, fl);
    Ok(())
}

fn bsf_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    scan(x, ins, bsf)
}

fn bsr_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    scan(x, ins, bsr)
}

/// TZCNT/LZCNT/POPCNT r, r/m.
fn count(x: &mut Ctx, ins: &Instruction, f: fn(u64, u8) -> (u64, u64)) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let size = x.op_size(ins, 0);
    let src = x.read_op(ins, 1)?;
    let (res, fl) = f(src, size);
    x.write_op(ins, 0, res)?;
    set_status(&mut x.cpu.state, SCAN_FLAGS, fl);
    Ok(())
}

fn tzcnt_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    count(x, ins, tzcnt)
}

fn lzcnt_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    count(x, ins, lzcnt)
}

fn popcnt_h(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    count(x, ins, popcnt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use crate::state::flags::{AF, OF, SF};
    use crate::state::reg;
    use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
    use iced_x86::code_asm::*;

    #[test]
    fn semantic_edge_cases() {
        assert_eq!(bit_op(BitOp::Set, 0, 70, 8), (1 << 6, 0));
        assert_eq!(bit_op(BitOp::Reset, 0xffff, 31, 2), (0x7fff, CF));
        assert_eq!(bit_op(BitOp::Complement, 0x10, 4, 4), (0, CF));
        assert_eq!(bit_op(BitOp::Test, 0x10, 36, 4), (0x10, CF));
        assert_eq!(bsf(0x8000_0000_0000_0000, 4), (None, ZF | PF));
        assert_eq!(bsf(0x0001_0000_0000_0100, 8), (Some(8), 0));
        assert_eq!(bsr(0x0001_0000_0000_0100, 8), (Some(48), PF));
        assert_eq!(bsr(0xffff, 2), (Some(15), PF));
        assert_eq!(tzcnt(0, 2), (16, CF));
        assert_eq!(tzcnt(0x8000, 2), (15, 0));
        assert_eq!(lzcnt(0, 4), (32, CF));
        assert_eq!(lzcnt(1 << 63, 8), (0, ZF));
        assert_eq!(lzcnt(1, 2), (15, 0));
        assert_eq!(popcnt(u64::MAX, 4), (32, 0));
        assert_eq!(popcnt(0xffff_0000, 2), (0, ZF));
    }

    #[test]
    fn bit_string_addressing() {
        // bts [rbx], rax with negative and large offsets; bt/btr/btc with imm and memory.
        let code = TestMachine::assemble(|a| {
            a.bts(qword_ptr(rbx), rax)?; // rax = -1: bit 63 of the qword at rbx-8
            a.btr(dword_ptr(rbx + 4), ecx)?; // ecx = 33: bit 1 of the dword at rbx+8
            a.btc(word_ptr(rbx), dx)?; // dx = -17: bit 15 of the word at rbx-4
            a.bt(qword_ptr(rbx), 127)?; // imm: modulo 64 -> bit 63 of [rbx]
            a.bts(r8d, 35)?; // register: bit 3, upper half zeroed
            a.bt(r9w, si) // register: offset modulo 16
        });
        let mut m = TestMachine::new();
        let base = DATA_BASE + 0x100;
        m.ram.write_u64(base, 1 << 63).unwrap();
        m.ram.write_u64(base + 8, 0x2).unwrap();
        m.cpu.state.gpr[reg::RBX] = base;
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RCX] = 33;
        m.cpu.state.gpr[reg::RDX] = -17i64 as u64;
        m.cpu.state.gpr[reg::R8] = 0xffff_ffff_0000_0000;
        m.cpu.state.gpr[reg::R9] = 0x4000;
        m.cpu.state.gpr[reg::RSI] = 0xfffe; // 14 modulo 16
        m.cpu.state.rflags |= SF | OF | ZF | AF | PF;
        assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
        assert_eq!(m.read_u64(base - 8), 1 << 63);
        assert_eq!(m.cpu.state.rflags & STATUS, SF | OF | ZF | AF | PF);
        m.run(1);
        assert_eq!(m.read_u64(base + 8), 0);
        assert_eq!(m.cpu.state.rflags & STATUS, SF | OF | ZF | AF | PF | CF);
        m.run(1);
        assert_eq!(m.read_u64(base - 8), (1 << 63) | (0x8000 << 32));
        assert_eq!(m.cpu.state.rflags & CF, 0);
        m.run(1);
        assert_eq!(m.cpu.state.rflags & CF, CF);
        m.run(1);
        assert_eq!(m.gpr(reg::R8), 8);
        assert_eq!(m.cpu.state.rflags & CF, 0);
        assert_eq!(m.run(1).reason, ExitReason::Budget);
        assert_eq!(m.cpu.state.rflags & CF, CF);
        assert_eq!(m.cpu.state.rip, CODE_BASE + code.len() as u64);
    }

    #[test]
    fn lock_rules() {
        // lock bts [rbx], rax is fine; lock bt [rbx], rax and lock bts rax, rbx are #UD.
        let ok = [0xf0, 0x48, 0x0f, 0xab, 0x03];
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RBX] = DATA_BASE;
        m.cpu.state.gpr[reg::RAX] = 5;
        assert_eq!(m.run_code(&ok, 1).reason, ExitReason::Budget);
        assert_eq!(m.read_u64(DATA_BASE), 1 << 5);
        for bad in [
            &[0xf0, 0x48, 0x0f, 0xa3, 0x03][..],
            &[0xf0, 0x48, 0x0f, 0xab, 0xd8],
        ] {
            let mut m = TestMachine::new();
            let e = m.run_code(bad, 1);
            assert!(matches!(
                e.reason,
                ExitReason::Exception(Fault::InvalidOpcode { .. })
            ));
            assert_eq!(m.cpu.state.rip, CODE_BASE);
        }
    }

    #[test]
    fn bts_to_a_read_only_page_faults_before_anything_changes() {
        // The page tables (first 2 MiB) are supervisor-only: a write there faults.
        let code = TestMachine::assemble(|a| a.bts(qword_ptr(0x1000u64), rax));
        let mut m = TestMachine::new();
        m.cpu.state.rflags |= CF;
        let e = m.run_code(&code, 1);
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::PageFault { .. })
        ));
        assert_eq!(m.cpu.state.rflags & CF, CF);
        assert_eq!(m.cpu.state.rip, CODE_BASE);
    }

    #[test]
    fn scans_and_counts_through_the_machine() {
        let code = TestMachine::assemble(|a| {
            a.bsf(eax, ebx)?; // ebx = 0: RAX untouched, upper half kept
            a.bsr(rcx, qword_ptr(DATA_BASE))?;
            a.tzcnt(dx, si)?;
            a.lzcnt(edi, esi)?;
            a.popcnt(r8, qword_ptr(DATA_BASE))
        });
        let mut m = TestMachine::new();
        m.ram.write_u64(DATA_BASE, 0x00f0_0000_0000_0001).unwrap();
        m.cpu.state.gpr[reg::RAX] = 0xdead_beef_cafe_f00d;
        m.cpu.state.gpr[reg::RDX] = 0x1111_2222_3333_4444;
        m.cpu.state.gpr[reg::RSI] = 0xffff_0000;
        m.cpu.state.gpr[reg::RDI] = u64::MAX;
        assert_eq!(m.run_code(&code, 1).reason, ExitReason::Budget);
        assert_eq!(m.gpr(reg::RAX), 0xdead_beef_cafe_f00d);
        assert_eq!(m.cpu.state.rflags & STATUS, ZF | PF);
        m.run(4);
        assert_eq!(m.gpr(reg::RCX), 55);
        assert_eq!(m.gpr(reg::RDX), 0x1111_2222_3333_0010); // 16-bit: merged, CF=1
        assert_eq!(m.gpr(reg::RDI), 0); // zero-extended
        assert_eq!(m.gpr(reg::R8), 5);
        assert_eq!(m.cpu.state.rflags & STATUS, 0);
    }

    #[cfg(target_arch = "x86_64")]
    mod native {
        //! The semantic functions (and the bit-string handlers) against this host CPU.
        use super::super::*;
        use crate::ops::native::{for_inputs, host_is_intel, XorShift as Rng};
        use crate::state::reg;
        use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
        use core::arch::asm;
        use iced_x86::code_asm::*;

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

        type Native = fn(u64, u64, u64) -> (u64, u64);

        /// Compare `f(a, b, flags_in) -> (RAX, RFLAGS)` (RAX=a, RDX=b) with
        /// `sem(a, b) -> (expected RAX, flags written)`. `which`: the status flags the
        /// instruction writes (the rest must be unchanged); `defined`: those the manual
        /// defines, compared on any host (all six only on Intel).
        fn check(
            name: &str,
            size: u8,
            which: u64,
            defined: u64,
            f: Native,
            sem: &dyn Fn(u64, u64) -> (u64, u64),
        ) {
            let cmp = if host_is_intel() { STATUS } else { defined };
            let mut n = 0;
            for_inputs(size, |a, b, fin| {
                let (ra, fo) = f(a, b, fin);
                let (want, fl) = sem(a, b);
                let want_f = (fin & !which) | (fl & which);
                assert_eq!(ra, want, "{name}: a={a:#x} b={b:#x}");
                assert_eq!(
                    fo & cmp,
                    want_f & cmp,
                    "{name} flags: a={a:#x} b={b:#x} in {fin:#x}"
                );
                n += 1;
            });
            assert!(n >= 300);
        }

        /// Full RAX after writing `v` to its `size`-byte part whose old value was `old`.
        pub(crate) fn merged(old: u64, v: u64, size: u8) -> u64 {
            match size {
                4 => v & 0xffff_ffff,
                8 => v,
                _ => (old & !mask(size)) | (v & mask(size)),
            }
        }

        /// BT* register forms: RAX is the bit base, RDX (or an immediate) the offset.
        macro_rules! bt_case {
            ($ins:literal, $op:expr, $size:expr, $off:expr) => {
                check(
                    $ins,
                    $size,
                    BT_FLAGS,
                    CF,
                    |a, b, f| native!($ins, a, b, f),
                    &|a, b| {
                        let (new, fl) = bit_op($op, a & mask($size), $off(b), $size);
                        let res = if $op == BitOp::Test {
                            a
                        } else {
                            merged(a, new, $size)
                        };
                        (res, fl)
                    },
                )
            };
        }

        #[test]
        fn bt_register_forms_match_host() {
            let r = |b: u64| b;
            bt_case!("bt ax, dx", BitOp::Test, 2, r);
            bt_case!("bt eax, edx", BitOp::Test, 4, r);
            bt_case!("bt rax, rdx", BitOp::Test, 8, r);
            bt_case!("bts ax, dx", BitOp::Set, 2, r);
            bt_case!("bts eax, edx", BitOp::Set, 4, r);
            bt_case!("bts rax, rdx", BitOp::Set, 8, r);
            bt_case!("btr ax, dx", BitOp::Reset, 2, r);
            bt_case!("btr eax, edx", BitOp::Reset, 4, r);
            bt_case!("btr rax, rdx", BitOp::Reset, 8, r);
            bt_case!("btc ax, dx", BitOp::Complement, 2, r);
            bt_case!("btc eax, edx", BitOp::Complement, 4, r);
            bt_case!("btc rax, rdx", BitOp::Complement, 8, r);
            bt_case!("bt ax, 21", BitOp::Test, 2, |_| 21);
            bt_case!("bts eax, 63", BitOp::Set, 4, |_| 63);
            bt_case!("btr rax, 200", BitOp::Reset, 8, |_| 200);
            bt_case!("btc rax, 5", BitOp::Complement, 8, |_| 5);
        }

        /// BSF/BSR: an unwritten destination keeps all 64 bits.
        macro_rules! scan_case {
            ($ins:literal, $f:expr, $size:expr) => {
                check(
                    $ins,
                    $size,
                    SCAN_FLAGS,
                    ZF,
                    |a, b, f| native!($ins, a, b, f),
                    &|a, b| {
                        let (res, fl) = $f(b, $size);
                        (res.map_or(a, |v| merged(a, v, $size)), fl)
                    },
                )
            };
        }

        macro_rules! count_case {
            ($ins:literal, $f:expr, $size:expr, $defined:expr) => {
                check(
                    $ins,
                    $size,
                    SCAN_FLAGS,
                    $defined,
                    |a, b, f| native!($ins, a, b, f),
                    &|a, b| {
                        let (res, fl) = $f(b, $size);
                        (merged(a, res, $size), fl)
                    },
                )
            };
        }

        #[test]
        fn scans_match_host() {
            scan_case!("bsf ax, dx", bsf, 2);
            scan_case!("bsf eax, edx", bsf, 4);
            scan_case!("bsf rax, rdx", bsf, 8);
            scan_case!("bsr ax, dx", bsr, 2);
            scan_case!("bsr eax, edx", bsr, 4);
            scan_case!("bsr rax, rdx", bsr, 8);
        }

        #[test]
        fn counts_match_host() {
            if std::is_x86_feature_detected!("bmi1") {
                count_case!("tzcnt ax, dx", tzcnt, 2, CF | ZF);
                count_case!("tzcnt eax, edx", tzcnt, 4, CF | ZF);
                count_case!("tzcnt rax, rdx", tzcnt, 8, CF | ZF);
            } else {
                eprintln!("skipped TZCNT: host has no BMI1");
            }
            if std::is_x86_feature_detected!("lzcnt") {
                count_case!("lzcnt ax, dx", lzcnt, 2, CF | ZF);
                count_case!("lzcnt eax, edx", lzcnt, 4, CF | ZF);
                count_case!("lzcnt rax, rdx", lzcnt, 8, CF | ZF);
            } else {
                eprintln!("skipped LZCNT: host has no LZCNT");
            }
            if std::is_x86_feature_detected!("popcnt") {
                // POPCNT defines all six flags.
                count_case!("popcnt ax, dx", popcnt, 2, STATUS);
                count_case!("popcnt eax, edx", popcnt, 4, STATUS);
                count_case!("popcnt rax, rdx", popcnt, 8, STATUS);
            } else {
                eprintln!("skipped POPCNT: host has no POPCNT");
            }
        }

        const BUF: usize = 512;
        const MID: u64 = 256;

        /// BT* with a memory bit string: the same instruction natively on a host buffer and in
        /// the interpreter on guest memory, with offsets reaching both sides of the base.
        fn check_mem(
            name: &str,
            size: u8,
            native: &dyn Fn(*mut u8, u64, u64) -> u64,
            asm: fn(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>,
        ) {
            let cmp = if host_is_intel() { STATUS } else { BT_FLAGS };
            let code = TestMachine::assemble(asm);
            let mut m = TestMachine::new();
            m.load(CODE_BASE, &code);
            let mut r = Rng::new(0xb175_7e57 ^ size as u64);
            let width = size as i64 * 8;
            let reach = (MID as i64 - 8) * 8; // stays inside the buffer
            let edges = [
                0,
                1,
                -1,
                width - 1,
                width,
                -width,
                -width - 1,
                reach - 1,
                -reach,
            ];
            for i in 0..400 {
                let mut host = [0u8; BUF];
                for c in host.chunks_mut(8) {
                    c.copy_from_slice(&r.next().to_le_bytes());
                }
                let off = match edges.get(i) {
                    Some(&e) => e,
                    None => (r.next() % (2 * reach as u64)) as i64 - reach,
                } as u64;
                // Bits above the operand size must be ignored.
                let off = off & mask(size) | (r.next() & !mask(size));
                let fin = r.status_flags();
                m.load(DATA_BASE, &host);
                // SAFETY: MID is inside `host`; `check_mem` keeps offsets within it.
                let fo = native(unsafe { host.as_mut_ptr().add(MID as usize) }, off, fin);
                m.cpu.state.gpr[reg::RBX] = DATA_BASE + MID;
                m.cpu.state.gpr[reg::RDX] = off;
                m.cpu.state.rflags = fin;
                m.cpu.state.rip = CODE_BASE;
                let e = m.run(1);
                assert_eq!(e.reason, crate::cpu::ExitReason::Budget, "{name}");
                let mut guest = [0u8; BUF];
                m.ram.read_phys(DATA_BASE, &mut guest).unwrap();
                assert_eq!(guest, host, "{name}: offset {off:#x}");
                assert_eq!(
                    m.cpu.state.rflags & cmp,
                    fo & cmp,
                    "{name}: offset {off:#x}"
                );
            }
        }

        macro_rules! mem_case {
            ($ins:literal, $size:expr, $asm:expr) => {
                check_mem(
                    $ins,
                    $size,
                    &|p, o, f| {
                        let mut f = f;
                        // SAFETY: `p` points into a live buffer and the bit offset `o` keeps
                        // the accessed word inside it; flags are saved and restored around.
                        unsafe {
                            asm!("push {f}", "popfq", $ins, "pushfq", "pop {f}",
                                f = inout(reg) f, p = in(reg) p, in("rdx") o);
                        }
                        f
                    },
                    $asm,
                )
            };
        }

        #[test]
        fn bit_strings_match_host() {
            mem_case!("bt word ptr [{p}], dx", 2, |a| a.bt(word_ptr(rbx), dx));
            mem_case!("bt dword ptr [{p}], edx", 4, |a| a.bt(dword_ptr(rbx), edx));
            mem_case!("bt qword ptr [{p}], rdx", 8, |a| a.bt(qword_ptr(rbx), rdx));
            mem_case!("bts word ptr [{p}], dx", 2, |a| a.bts(word_ptr(rbx), dx));
            mem_case!("bts dword ptr [{p}], edx", 4, |a| a
                .bts(dword_ptr(rbx), edx));
            mem_case!("bts qword ptr [{p}], rdx", 8, |a| a
                .bts(qword_ptr(rbx), rdx));
            mem_case!("btr word ptr [{p}], dx", 2, |a| a.btr(word_ptr(rbx), dx));
            mem_case!("btr dword ptr [{p}], edx", 4, |a| a
                .btr(dword_ptr(rbx), edx));
            mem_case!("btr qword ptr [{p}], rdx", 8, |a| a
                .btr(qword_ptr(rbx), rdx));
            mem_case!("lock btc word ptr [{p}], dx", 2, |a| a
                .lock()
                .btc(word_ptr(rbx), dx));
            mem_case!("btc dword ptr [{p}], edx", 4, |a| a
                .btc(dword_ptr(rbx), edx));
            mem_case!("btc qword ptr [{p}], rdx", 8, |a| a
                .btc(qword_ptr(rbx), rdx));
            // Immediate offsets are taken modulo the width, never reaching other words.
            mem_case!("btc word ptr [{p}], 35", 2, |a| a.btc(word_ptr(rbx), 35));
            mem_case!("bts dword ptr [{p}], 0xff", 4, |a| a
                .bts(dword_ptr(rbx), 0xff));
            mem_case!("btr qword ptr [{p}], 64", 8, |a| a.btr(qword_ptr(rbx), 64));
        }
    }
}
