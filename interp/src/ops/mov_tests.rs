//! Tests of the MOV family (`mov.rs`), plus small helpers shared by this test modules.

use crate::cpu::{Exit, ExitReason};
use crate::fault::Fault;
use crate::state::flags::{AF, CF, DF, FIXED1, IF, OF, PF, SF, STATUS, ZF};
use crate::state::{reg, sreg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
use iced_x86::code_asm::*;

/// Deterministic pseudo-random numbers for the native comparisons (xorshift64*).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Values that hit edge cases often: small, sign boundaries, all ones, random.
    pub fn interesting(&mut self) -> u64 {
        let r = self.next();
        match r % 8 {
            0 => 0,
            1 => u64::MAX,
            2 => 1u64 << (r >> 58),
            3 => (1u64 << (r >> 58)).wrapping_sub(1),
            4 => r >> 60,
            _ => self.next(),
        }
    }
}

/// Assemble `f` plus a final `ud2`, let `setup` prepare the machine, run until the `ud2`
/// (asserting that it is reached) and return the machine.
pub(crate) fn run_to_ud2(
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
    setup: impl FnOnce(&mut TestMachine),
) -> TestMachine {
    let code = TestMachine::assemble(|a| {
        f(a)?;
        a.ud2()
    });
    let mut m = TestMachine::new();
    setup(&mut m);
    let e = m.run_code(&code, 10_000);
    assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")), "{e:?}");
    m
}

/// Run raw bytes followed by `ud2`; return the machine (asserting the `ud2` is reached).
pub(crate) fn run_bytes_to_ud2(bytes: &[u8], setup: impl FnOnce(&mut TestMachine)) -> TestMachine {
    let mut code = bytes.to_vec();
    code.extend_from_slice(&[0x0f, 0x0b]);
    let mut m = TestMachine::new();
    setup(&mut m);
    let e = m.run_code(&code, 10_000);
    assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")), "{e:?}");
    m
}

/// Run exactly one instruction given as bytes; return the machine and the exit.
pub(crate) fn run_one(bytes: &[u8], setup: impl FnOnce(&mut TestMachine)) -> (TestMachine, Exit) {
    let mut m = TestMachine::new();
    setup(&mut m);
    let e = m.run_code(bytes, 1);
    (m, e)
}

/// Run the first instruction of `f`, expecting it to fault with `fault`; check that RIP stays
/// at the instruction, nothing retired, and the architectural state is otherwise unchanged.
pub(crate) fn expect_fault(
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
    setup: impl FnOnce(&mut TestMachine),
    fault: Fault,
) -> TestMachine {
    let code = TestMachine::assemble(f);
    expect_fault_bytes(&code, setup, fault)
}

pub(crate) fn expect_fault_bytes(
    code: &[u8],
    setup: impl FnOnce(&mut TestMachine),
    fault: Fault,
) -> TestMachine {
    let mut m = TestMachine::new();
    setup(&mut m);
    m.load(CODE_BASE, code);
    m.cpu.state.rip = CODE_BASE;
    let before = m.cpu.state.clone();
    let e = m.run(1);
    assert_eq!(e.reason, ExitReason::Exception(fault));
    assert_eq!(e.retired, 0);
    assert_eq!(
        m.cpu.state, before,
        "state changed by a faulting instruction"
    );
    m
}

/// Make the 2 MiB page holding `addr` read-only (user, present) in the test machine.
pub(crate) fn make_read_only(m: &mut TestMachine, addr: u64) {
    let i = addr >> 21;
    m.ram.write_u64(0x3000 + i * 8, (i << 21) | 0x85).unwrap();
    m.cpu.flush_tlb();
}

/// An address that is not mapped in the test machine (beyond its 1 GiB).
pub(crate) const UNMAPPED: u64 = 0x4000_0000;

/// Page fault of a user-mode access to `addr` (not present) with `write`.
pub(crate) fn pf_not_present(addr: u64, write: bool) -> Fault {
    Fault::PageFault {
        addr,
        code: 4 | if write { 2 } else { 0 },
    }
}

const D: u64 = DATA_BASE;

#[test]
fn mov_all_sizes_and_high_bytes() {
    let m = run_to_ud2(
        |a| {
            a.mov(rax, 0x1122_3344_5566_7788u64)?;
            a.mov(rbx, rax)?;
            a.mov(ecx, eax)?; // zero-extends
            a.mov(dx, ax)?; // merges
            a.mov(ah, 0xabu32)?;
            a.mov(sil, al)?;
            a.mov(bh, ah)?;
            a.mov(qword_ptr(D), -2i32)?; // imm32 sign-extended to 64
            a.mov(dword_ptr(D + 8), 0x8000_0000u32)?;
            a.mov(r8, qword_ptr(D))?;
            a.mov(r9d, dword_ptr(D + 8))?;
            a.mov(r10w, word_ptr(D + 8))?;
            a.mov(r11b, byte_ptr(D + 11))
        },
        |m| {
            m.cpu.state.gpr[reg::RDX] = u64::MAX;
            m.cpu.state.gpr[reg::RSI] = u64::MAX;
            m.cpu.state.gpr[reg::R9] = u64::MAX;
            m.cpu.state.gpr[reg::R10] = u64::MAX;
            m.cpu.state.gpr[reg::R11] = u64::MAX;
        },
    );
    assert_eq!(m.gpr(reg::RAX), 0x1122_3344_5566_ab88);
    assert_eq!(m.gpr(reg::RBX), 0x1122_3344_5566_ab88);
    assert_eq!(m.gpr(reg::RCX), 0x5566_7788);
    assert_eq!(m.gpr(reg::RDX), 0xffff_ffff_ffff_7788);
    assert_eq!(m.gpr(reg::RSI), 0xffff_ffff_ffff_ff88);
    assert_eq!(m.gpr(reg::RBX) >> 8 & 0xff, 0xab);
    assert_eq!(m.gpr(reg::R8), 0xffff_ffff_ffff_fffe);
    assert_eq!(m.gpr(reg::R9), 0x8000_0000);
    assert_eq!(m.gpr(reg::R10), 0xffff_ffff_ffff_0000);
    assert_eq!(m.gpr(reg::R11), 0xffff_ffff_ffff_ff80);
}

#[test]
fn mov_moffs_forms() {
    let mut code = vec![0x48, 0xa1]; // mov rax, [moffs64]
    code.extend_from_slice(&D.to_le_bytes());
    code.push(0xa2); // mov [moffs64], al
    code.extend_from_slice(&(D + 16).to_le_bytes());
    code.extend_from_slice(&[0x67, 0x8b, 0x0c, 0x25]); // mov ecx, [disp32] (addr32)
    code.extend_from_slice(&(D as u32 + 8).to_le_bytes());
    code.extend_from_slice(&[0x67, 0xa1]); // mov eax, [moffs32] (addr32)
    code.extend_from_slice(&(D as u32 + 4).to_le_bytes());
    let m = run_bytes_to_ud2(&code, |m| {
        m.ram.write_u64(D, 0x0102_0304_0506_0708).unwrap();
        m.ram.write_u64(D + 8, 0xaabb_ccdd).unwrap();
    });
    assert_eq!(m.read_u64(D + 16) & 0xff, 0x08);
    assert_eq!(m.gpr(reg::RCX), 0xaabb_ccdd);
    assert_eq!(m.gpr(reg::RAX), 0x0102_0304);
}

#[test]
fn mov_from_segment_register() {
    // 8C D8: mov eax, ds; 66 8C DB: mov bx, ds; 48 8C D9: mov rcx, ds; 8C 22: mov [rdx], fs
    let code = [
        0x8c, 0xd8, 0x66, 0x8c, 0xdb, 0x48, 0x8c, 0xd9, 0x8c, 0x22, 0x8c, 0xce,
    ];
    let m = run_bytes_to_ud2(&code, |m| {
        m.cpu.state.seg[sreg::DS].selector = 0x2b;
        m.cpu.state.seg[sreg::FS].selector = 0x1234;
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RBX] = u64::MAX;
        m.cpu.state.gpr[reg::RCX] = u64::MAX;
        m.cpu.state.gpr[reg::RDX] = D;
        m.cpu.state.gpr[reg::RSI] = u64::MAX;
        m.ram.write_u64(D, u64::MAX).unwrap();
    });
    assert_eq!(m.gpr(reg::RAX), 0x2b);
    assert_eq!(m.gpr(reg::RBX), 0xffff_ffff_ffff_002b);
    assert_eq!(m.gpr(reg::RCX), 0x2b);
    assert_eq!(m.read_u64(D), 0xffff_ffff_ffff_1234);
    assert_eq!(m.gpr(reg::RSI), m.cpu.state.seg[sreg::CS].selector as u64); // mov esi, cs
}

#[test]
fn mov_to_segment_register_checks_the_selector() {
    // mov ds, ax with a selector beyond the GDT limit: #GP(selector), nothing changes
    // (the segment family's own tests cover the loads).
    expect_fault_bytes(
        &[0x8e, 0xd8],
        |m| {
            m.cpu.state.gpr[0] = 0x13;
            m.cpu.state.gdtr.limit = 7;
        },
        Fault::GeneralProtection(0x10),
    );
}

#[test]
fn mov_memory_faults_leave_state_unchanged() {
    expect_fault(
        |a| a.mov(rax, qword_ptr(UNMAPPED)),
        |_| {},
        pf_not_present(UNMAPPED, false),
    );
    expect_fault(
        |a| a.mov(qword_ptr(UNMAPPED + 8), rax),
        |_| {},
        pf_not_present(UNMAPPED + 8, true),
    );
}

#[test]
fn movzx_movsx_movsxd() {
    let m = run_to_ud2(
        |a| {
            a.movzx(eax, byte_ptr(D))?;
            a.movsx(rbx, byte_ptr(D))?;
            a.movsx(cx, bh)?;
            a.movzx(rdx, word_ptr(D + 2))?;
            a.movsx(esi, word_ptr(D + 2))?;
            a.movsxd(rdi, dword_ptr(D + 4))?;
            a.movsxd(r8, r9d)?;
            a.movzx(r10w, al)
        },
        |m| {
            m.ram.write_u64(D, 0x8000_0000_9abc_0081).unwrap();
            m.cpu.state.gpr[reg::RAX] = u64::MAX;
            m.cpu.state.gpr[reg::R9] = 0x1_7fff_ffff;
            m.cpu.state.gpr[reg::R10] = u64::MAX;
        },
    );
    assert_eq!(m.gpr(reg::RAX), 0x81);
    assert_eq!(m.gpr(reg::RBX), 0xffff_ffff_ffff_ff81);
    assert_eq!(m.gpr(reg::RCX), 0xffff); // movsx cx, bh(=0xff)
    assert_eq!(m.gpr(reg::RDX), 0x9abc);
    assert_eq!(m.gpr(reg::RSI), 0xffff_9abc);
    assert_eq!(m.gpr(reg::RDI), 0xffff_ffff_8000_0000);
    assert_eq!(m.gpr(reg::R8), 0x7fff_ffff);
    assert_eq!(m.gpr(reg::R10), 0xffff_ffff_ffff_0081);
    // 63 /r without REX.W (movsxd r32, r/m32) is a plain 32-bit move: zero-extends.
    let m = run_bytes_to_ud2(&[0x63, 0xc1], |m| {
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_8000_0001;
    });
    assert_eq!(m.gpr(reg::RAX), 0x8000_0001);
}

#[test]
fn cmov_moves_and_zero_extends() {
    let setup = |m: &mut TestMachine, fl: u64| {
        m.cpu.state.rflags = FIXED1 | IF | fl;
        m.cpu.state.gpr[reg::RAX] = 0xaaaa_aaaa_aaaa_aaaa;
        m.cpu.state.gpr[reg::RBX] = 0xbbbb_bbbb_bbbb_bbbb;
        m.cpu.state.gpr[reg::RCX] = 0xcccc_cccc_cccc_cccc;
        m.cpu.state.gpr[reg::RDX] = 0xdddd_dddd_dddd_dddd;
    };
    let prog = |a: &mut CodeAssembler| {
        a.cmove(rax, r15)?;
        a.cmove(ebx, r15d)?;
        a.cmove(cx, r15w)?;
        a.cmove(edx, dword_ptr(D))
    };
    // Condition false (ZF=0): 64/16-bit untouched, 32-bit zero-extended.
    let m = run_to_ud2(prog, |m| setup(m, 0));
    assert_eq!(m.gpr(reg::RAX), 0xaaaa_aaaa_aaaa_aaaa);
    assert_eq!(m.gpr(reg::RBX), 0xbbbb_bbbb);
    assert_eq!(m.gpr(reg::RCX), 0xcccc_cccc_cccc_cccc);
    assert_eq!(m.gpr(reg::RDX), 0xdddd_dddd);
    // Condition true.
    let m = run_to_ud2(prog, |m| {
        setup(m, ZF);
        m.cpu.state.gpr[reg::R15] = 0x1234_5678_9abc_def0;
        m.ram.write_u64(D, 0x5555_6666_7777_8888).unwrap();
    });
    assert_eq!(m.gpr(reg::RAX), 0x1234_5678_9abc_def0);
    assert_eq!(m.gpr(reg::RBX), 0x9abc_def0);
    assert_eq!(m.gpr(reg::RCX), 0xcccc_cccc_cccc_def0);
    assert_eq!(m.gpr(reg::RDX), 0x7777_8888);
    // A memory source is read (and faults) even when the condition is false.
    expect_fault(
        |a| a.cmove(eax, dword_ptr(UNMAPPED)),
        |m| setup(m, 0),
        pf_not_present(UNMAPPED, false),
    );
}

#[test]
fn setcc_matches_flags() {
    let m = run_to_ud2(
        |a| {
            a.setb(al)?;
            a.setae(ah)?;
            a.setle(bl)?;
            a.setg(byte_ptr(D))?;
            a.setp(sil)
        },
        |m| {
            m.cpu.state.rflags = FIXED1 | CF | SF | PF;
            m.cpu.state.gpr[reg::RAX] = 0xffff;
            m.ram.write_u64(D, u64::MAX).unwrap();
        },
    );
    assert_eq!(m.gpr(reg::RAX) & 0xffff, 0x0001);
    assert_eq!(m.gpr(reg::RBX) & 0xff, 1); // SF != OF
    assert_eq!(m.read_u64(D), 0xffff_ffff_ffff_ff00);
    assert_eq!(m.gpr(reg::RSI) & 0xff, 1);
}

/// SETcc for all 16 conditions over random flags: interpreter vs host.
#[test]
fn setcc_native_all_conditions() {
    macro_rules! native_setcc {
        ($($ins:literal),*) => {
            |flags: u64| -> [u8; 16] {
                let mut out = [0u8; 16];
                let mut i = 0;
                $(
                    let r: u8;
                    // SAFETY: loads RFLAGS (status flags only, IF kept) and runs one SETcc;
                    // touches only the named registers and the stack for push/popf.
                    unsafe {
                        core::arch::asm!("push {f}", "popfq", concat!($ins, " {r}"),
                            f = in(reg) flags, r = out(reg_byte) r);
                    }
                    out[i] = r;
                    i += 1;
                )*
                let _ = i;
                out
            }
        };
    }
    let native = native_setcc!(
        "seto", "setno", "setb", "setae", "sete", "setne", "setbe", "seta", "sets", "setns",
        "setp", "setnp", "setl", "setge", "setle", "setg"
    );
    let mut rng = Rng(0x5e7c_c0de);
    for _ in 0..64 {
        let fl = (rng.next() & STATUS) | FIXED1 | IF;
        let want = native(fl);
        let m = run_to_ud2(
            |a| {
                a.seto(byte_ptr(D))?;
                a.setno(byte_ptr(D + 1))?;
                a.setb(byte_ptr(D + 2))?;
                a.setae(byte_ptr(D + 3))?;
                a.sete(byte_ptr(D + 4))?;
                a.setne(byte_ptr(D + 5))?;
                a.setbe(byte_ptr(D + 6))?;
                a.seta(byte_ptr(D + 7))?;
                a.sets(byte_ptr(D + 8))?;
                a.setns(byte_ptr(D + 9))?;
                a.setp(byte_ptr(D + 10))?;
                a.setnp(byte_ptr(D + 11))?;
                a.setl(byte_ptr(D + 12))?;
                a.setge(byte_ptr(D + 13))?;
                a.setle(byte_ptr(D + 14))?;
                a.setg(byte_ptr(D + 15))
            },
            |m| m.cpu.state.rflags = fl,
        );
        let mut got = [0u8; 16];
        got[..8].copy_from_slice(&m.read_u64(D).to_le_bytes());
        got[8..].copy_from_slice(&m.read_u64(D + 8).to_le_bytes());
        assert_eq!(got, want, "flags {fl:#x}");
    }
}

#[test]
fn bswap_all_sizes_and_native_r16() {
    let m = run_bytes_to_ud2(
        &[
            0x48, 0x0f, 0xc8, // bswap rax
            0x0f, 0xcb, // bswap ebx
            0x66, 0x0f, 0xc9, // bswap cx (undefined: this host clears it)
            0x66, 0x41, 0x0f, 0xc8, // bswap r8w
        ],
        |m| {
            m.cpu.state.gpr[reg::RAX] = 0x0102_0304_0506_0708;
            m.cpu.state.gpr[reg::RBX] = 0xffff_ffff_1122_3344;
            m.cpu.state.gpr[reg::RCX] = 0x1122_3344_5566_7788;
            m.cpu.state.gpr[reg::R8] = 0x1122_3344_5566_7788;
        },
    );
    assert_eq!(m.gpr(reg::RAX), 0x0807_0605_0403_0201);
    assert_eq!(m.gpr(reg::RBX), 0x4433_2211);
    assert_eq!(m.gpr(reg::RCX), 0x1122_3344_5566_0000);
    assert_eq!(m.gpr(reg::R8), 0x1122_3344_5566_0000);
    let mut rng = Rng(0xb5a9);
    for _ in 0..16 {
        let v = rng.next();
        let mut host = v;
        // SAFETY: BSWAP AX on a register operand only.
        unsafe { core::arch::asm!(".byte 0x66, 0x0f, 0xc8", inout("rax") host) };
        let m = run_bytes_to_ud2(&[0x66, 0x0f, 0xc8], |m| m.cpu.state.gpr[reg::RAX] = v);
        assert_eq!(m.gpr(reg::RAX), host, "bswap ax of {v:#x}");
    }
}

#[test]
fn movbe_loads_and_stores() {
    let m = run_to_ud2(
        |a| {
            a.movbe(rax, qword_ptr(D))?;
            a.movbe(ebx, dword_ptr(D))?;
            a.movbe(cx, word_ptr(D))?;
            a.movbe(qword_ptr(D + 8), rax)?;
            a.movbe(word_ptr(D + 16), cx)
        },
        |m| {
            m.ram.write_u64(D, 0x0102_0304_0506_0708).unwrap();
            m.ram.write_u64(D + 16, u64::MAX).unwrap();
            m.cpu.state.gpr[reg::RBX] = u64::MAX;
            m.cpu.state.gpr[reg::RCX] = u64::MAX;
        },
    );
    assert_eq!(m.gpr(reg::RAX), 0x0807_0605_0403_0201);
    assert_eq!(m.gpr(reg::RBX), 0x0807_0605);
    assert_eq!(m.gpr(reg::RCX), 0xffff_ffff_ffff_0807);
    assert_eq!(m.read_u64(D + 8), 0x0102_0304_0506_0708);
    assert_eq!(m.read_u64(D + 16), 0xffff_ffff_ffff_0708);
}

#[test]
fn lea_address_and_operand_sizes() {
    let m = run_to_ud2(
        |a| {
            a.lea(rax, qword_ptr(rbx + rcx * 4 + 0x10))?;
            a.lea(edx, qword_ptr(rbx + rcx * 4 + 0x10))?; // truncated to 32
            a.lea(si, qword_ptr(rbx - 1))?; // 16-bit destination merges
            a.lea(rdi, qword_ptr(rbx + rcx * 8 - 0x20))?; // wraps
            a.lea(r8, qword_ptr(UNMAPPED)) // no memory access
        },
        |m| {
            m.cpu.state.gpr[reg::RBX] = 0x1_0000_0000;
            m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_ffff_fff0;
        },
    );
    assert_eq!(m.gpr(reg::RAX), 0x0_ffff_ffd0u64);
    assert_eq!(m.gpr(reg::RDX), 0xffff_ffd0);
    assert_eq!(m.gpr(reg::RSI), 0xffff);
    assert_eq!(m.gpr(reg::RDI), 0x0_ffff_ff60);
    assert_eq!(m.gpr(reg::R8), UNMAPPED);
    // RIP-relative: lea rax, [rip+0x10] (48 8D 05 disp32) is next RIP + 0x10.
    let m = run_bytes_to_ud2(&[0x48, 0x8d, 0x05, 0x10, 0, 0, 0], |_| {});
    assert_eq!(m.gpr(reg::RAX), CODE_BASE + 7 + 0x10);
    // 67h: 32-bit address arithmetic wraps at 4 GiB; 8D 44 0B 10 = lea eax,[ebx+ecx+0x10].
    let m = run_bytes_to_ud2(&[0x67, 0x48, 0x8d, 0x44, 0x0b, 0x10], |m| {
        m.cpu.state.gpr[reg::RBX] = 0xaaaa_aaaa_ffff_fff8;
        m.cpu.state.gpr[reg::RCX] = 4;
    });
    assert_eq!(m.gpr(reg::RAX), 0xc);
}

#[test]
fn cbw_cwd_family() {
    let run = |bytes: &[u8], acc: u64| {
        let m = run_bytes_to_ud2(bytes, |m| {
            m.cpu.state.gpr[reg::RAX] = acc;
            m.cpu.state.gpr[reg::RDX] = 0x5555_5555_5555_5555;
        });
        (m.gpr(reg::RAX), m.gpr(reg::RDX))
    };
    let hi = 0xaaaa_aaaa_aaaa_0000;
    assert_eq!(run(&[0x66, 0x98], hi | 0x80).0, hi | 0xff80); // cbw
    assert_eq!(run(&[0x98], 0xaaaa_aaaa_0000_8000).0, 0xffff_8000); // cwde
    assert_eq!(
        run(&[0x48, 0x98], 0xaaaa_aaaa_8000_0000).0,
        0xffff_ffff_8000_0000
    ); // cdqe
    assert_eq!(run(&[0x48, 0x98], 0xaaaa_aaaa_7000_0000).0, 0x7000_0000);
    assert_eq!(run(&[0x66, 0x99], 0x8000).1, 0x5555_5555_5555_ffff); // cwd
    assert_eq!(run(&[0x66, 0x99], 0x7fff).1, 0x5555_5555_5555_0000);
    assert_eq!(run(&[0x99], 0x8000_0000).1, 0xffff_ffff); // cdq zero-extends rdx
    assert_eq!(run(&[0x99], 0x1).1, 0);
    assert_eq!(run(&[0x48, 0x99], 1 << 63).1, u64::MAX); // cqo
    assert_eq!(run(&[0x48, 0x99], 5).1, 0);
}

#[test]
fn nop_forms_do_nothing_and_never_touch_memory() {
    let forms: &[&[u8]] = &[
        &[0x90],
        &[0x66, 0x90],
        &[0x48, 0x90],
        &[0x0f, 0x1f, 0x00],
        &[0x0f, 0x1f, 0x44, 0x00, 0x00],
        &[0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        &[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        &[0xf3, 0x90],
        &[0xf3, 0x0f, 0x1e, 0xfa],
        &[0xf3, 0x0f, 0x1e, 0xfb],
        &[0x0f, 0x18, 0x00],
        &[0x0f, 0x18, 0x08],
        &[0x0f, 0x18, 0x10],
        &[0x0f, 0x18, 0x18],
        &[0x0f, 0x18, 0x38],
        &[0x0f, 0x0d, 0x00],
        &[0x0f, 0x0d, 0x08],
        &[0x0f, 0x0d, 0x10],
        &[0x0f, 0x19, 0x00],
        &[0x0f, 0x1a, 0x00],
        &[0x0f, 0x1b, 0x00],
        &[0x0f, 0x1c, 0x00],
        &[0x0f, 0x1d, 0x00],
        &[0x0f, 0x1e, 0x00],
        &[0x0f, 0x18, 0xc0],
        &[0xf3, 0x48, 0x0f, 0x1e, 0xc8], // rdsspq rax: NOP without CET
    ];
    for f in forms {
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0x8000_0000_0000_0000; // non-canonical: any access faults
        let before = m.cpu.state.clone();
        let e = m.run_code(f, 1);
        assert_eq!(e.reason, ExitReason::Budget, "{f:02x?}");
        assert_eq!(m.cpu.state.rip, CODE_BASE + f.len() as u64, "{f:02x?}");
        let mut after = m.cpu.state.clone();
        after.rip = before.rip;
        assert_eq!(after, before, "{f:02x?}");
    }
    // xchg r8d, eax (41 90) is not a NOP.
    let m = run_bytes_to_ud2(&[0x41, 0x90], |m| {
        m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_0000_0001;
        m.cpu.state.gpr[reg::R8] = 0xffff_ffff_0000_0002;
    });
    assert_eq!((m.gpr(reg::RAX), m.gpr(reg::R8)), (2, 1));
    // LOCK NOP is an invalid encoding.
    expect_fault_bytes(&[0xf0, 0x90], |_| {}, Fault::ud("invalid encoding"));
}

#[test]
fn lahf_sahf_and_native() {
    let mut rng = Rng(0x1a4f);
    for _ in 0..32 {
        let fl = (rng.next() & STATUS) | FIXED1 | IF;
        let ah_in = rng.next() & 0xff;
        let (host_ah, host_flags): (u64, u64);
        // SAFETY: loads status flags, runs LAHF and SAHF on RAX, reads RFLAGS back.
        unsafe {
            let mut acc = ah_in << 8;
            let f_out: u64;
            core::arch::asm!("push {f}", "popfq", "lahf", "mov {t}, rax", "mov ah, cl", "sahf",
                "pushfq", "pop {fo}", "mov rax, {t}",
                f = in(reg) fl, in("cl") ah_in as u8, t = out(reg) _, fo = out(reg) f_out,
                inout("rax") acc);
            host_ah = (acc >> 8) & 0xff;
            host_flags = f_out;
        }
        let code = [0x9f, 0x48, 0x89, 0xc3, 0x88, 0xcc, 0x9e]; // lahf; mov rbx,rax; mov ah,cl; sahf
        let m = run_bytes_to_ud2(&code, |m| {
            m.cpu.state.rflags = fl;
            m.cpu.state.gpr[reg::RCX] = ah_in;
        });
        assert_eq!((m.gpr(reg::RBX) >> 8) & 0xff, host_ah, "lahf with {fl:#x}");
        assert_eq!(
            m.cpu.state.rflags, host_flags,
            "sahf {ah_in:#x} over {fl:#x}"
        );
    }
}

#[test]
fn flag_instructions() {
    let m = run_to_ud2(
        |a| {
            a.stc()?;
            a.std()?;
            a.cmc()?;
            a.cmc()
        },
        |m| m.cpu.state.rflags = FIXED1 | ZF | OF | AF,
    );
    assert_eq!(m.cpu.state.rflags, FIXED1 | ZF | OF | AF | CF | DF);
    let m = run_to_ud2(
        |a| {
            a.clc()?;
            a.cld()
        },
        |m| m.cpu.state.rflags = FIXED1 | CF | DF | SF,
    );
    assert_eq!(m.cpu.state.rflags, FIXED1 | SF);
}

#[test]
fn xlat_reads_rbx_plus_unsigned_al() {
    let mut table = vec![0u8; 256];
    for (i, b) in table.iter_mut().enumerate() {
        *b = (i as u8) ^ 0xa5;
    }
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &table);
    // 64-bit addressing: RAX's other bits are kept.
    m.cpu.state.gpr[reg::RAX] = 0x1122_3344_5566_7785;
    m.cpu.state.gpr[reg::RBX] = DATA_BASE;
    let e = m.run_code(&[0xd7, 0x0f, 0x0b], 10); // xlatb; ud2
    assert_eq!(e.retired, 1);
    assert_eq!(m.gpr(reg::RAX), 0x1122_3344_5566_7700 | (0x85 ^ 0xa5));
    // 32-bit addressing (67h) uses EBX: the upper half of RBX is ignored.
    m.cpu.state.gpr[reg::RAX] = 0x10;
    m.cpu.state.gpr[reg::RBX] = 0xffff_0000_0000_0000 | DATA_BASE;
    let e = m.run_code(&[0x67, 0xd7, 0x0f, 0x0b], 10);
    assert_eq!(e.retired, 1);
    assert_eq!(m.gpr(reg::RAX), 0x10 ^ 0xa5);
}
