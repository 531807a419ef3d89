//! Tests of the exchange family (`atomic.rs`), with native comparisons of CMPXCHG, CMPXCHG8B,
//! CMPXCHG16B and XADD on the host.

use crate::fault::Fault;
use crate::ops::mov::tests::{
    expect_fault, expect_fault_bytes, make_read_only, pf_not_present, run_bytes_to_ud2, run_to_ud2,
    Rng, UNMAPPED,
};
use crate::state::flags::{FIXED1, IF, STATUS, ZF};
use crate::state::reg;
use crate::testkit::{TestMachine, DATA_BASE};
use iced_x86::code_asm::*;

const D: u64 = DATA_BASE;

/// Register results of one native run: (rax, rdx, rflags, memory).
type Host = (u64, u64, u64, u64);

/// Run `cmpxchg <dest>, <src>` natively with RAX = acc, RDX = dest, RCX = src, [mem] = mem.
/// `which` selects the form: 1/2/4/8 = register dl..rdx, 0x11 = dh, 0x84 = dword [mem].
fn host_cmpxchg(which: u32, acc: u64, dst: u64, src: u64, mem: u64, fl: u64) -> Host {
    let (mut a, mut d, mut f, mut m) = (acc, dst, fl, mem);
    let p = &mut m as *mut u64;
    macro_rules! run {
        ($ins:literal) => {
            // SAFETY: loads status flags, runs one CMPXCHG on RAX/RCX/RDX and a stack-local
            // u64, then reads RFLAGS back. No other state is touched.
            unsafe {
                core::arch::asm!("push {f}", "popfq", $ins, "pushfq", "pop {f}",
                    f = inout(reg) f, p = in(reg) p, inout("rax") a, inout("rdx") d, in("rcx") src)
            }
        };
    }
    match which {
        1 => run!("cmpxchg dl, cl /* {p} */"),
        0x11 => run!("cmpxchg dh, cl /* {p} */"),
        2 => run!("cmpxchg dx, cx /* {p} */"),
        4 => run!("cmpxchg edx, ecx /* {p} */"),
        8 => run!("cmpxchg rdx, rcx /* {p} */"),
        _ => run!("cmpxchg dword ptr [{p}], ecx"),
    }
    (a, d, f, m)
}

fn interp_cmpxchg(which: u32, acc: u64, dst: u64, src: u64, mem: u64, fl: u64) -> Host {
    let m = run_to_ud2(
        |a| match which {
            1 => a.cmpxchg(dl, cl),
            0x11 => a.cmpxchg(dh, cl),
            2 => a.cmpxchg(dx, cx),
            4 => a.cmpxchg(edx, ecx),
            8 => a.cmpxchg(rdx, rcx),
            _ => a.cmpxchg(dword_ptr(rsi), ecx),
        },
        |m| {
            let st = &mut m.cpu.state;
            st.gpr[reg::RAX] = acc;
            st.gpr[reg::RDX] = dst;
            st.gpr[reg::RCX] = src;
            st.gpr[reg::RSI] = D;
            st.rflags = fl;
            m.ram.write_u64(D, mem).unwrap();
        },
    );
    (
        m.gpr(reg::RAX),
        m.gpr(reg::RDX),
        m.cpu.state.rflags,
        m.read_u64(D),
    )
}

#[test]
fn cmpxchg_native_all_forms() {
    let mut rng = Rng(0xc3c3_0001);
    for which in [1u32, 0x11, 2, 4, 8, 0x84] {
        for i in 0..48 {
            let fl = (rng.next() & STATUS) | FIXED1 | IF;
            let acc = rng.interesting();
            let src = rng.interesting();
            let mut dst = rng.interesting();
            let mut mem = rng.next();
            if i % 2 == 0 {
                // Make the comparison succeed in the compared width (upper bits differ).
                let shift = if which == 0x11 { 8 } else { 0 };
                dst = (dst & !0xffff_ffff) | (acc & 0xffff_ffff) << shift;
                mem = (mem & !0xffff_ffff) | (acc & 0xffff_ffff);
            }
            let host = host_cmpxchg(which, acc, dst, src, mem, fl);
            let ours = interp_cmpxchg(which, acc, dst, src, mem, fl);
            assert_eq!(
                ours, host,
                "form {which:#x} acc={acc:#x} dst={dst:#x} src={src:#x} mem={mem:#x}"
            );
        }
    }
}

#[test]
fn cmpxchg_32bit_register_zero_extension_rules() {
    // Success: destination zero-extended, RAX untouched. Failure: RAX zero-extended,
    // destination untouched (measured on the host; the native test above re-checks it).
    let ok = interp_cmpxchg(
        4,
        0xaaaa_aaaa_0000_0005,
        0xbbbb_bbbb_0000_0005,
        0xcccc_cccc_0000_0009,
        0,
        FIXED1,
    );
    assert_eq!((ok.0, ok.1), (0xaaaa_aaaa_0000_0005, 9));
    assert!(ok.2 & ZF != 0);
    let fail = interp_cmpxchg(
        4,
        0xaaaa_aaaa_0000_0005,
        0xbbbb_bbbb_0000_0007,
        0xcccc_cccc_0000_0009,
        0,
        FIXED1,
    );
    assert_eq!((fail.0, fail.1), (7, 0xbbbb_bbbb_0000_0007));
    assert!(fail.2 & ZF == 0);
}

#[test]
fn cmpxchg_memory_is_always_written() {
    // A failing compare still writes the old value back, so a read-only page faults (write).
    let mut m = expect_fault(
        |a| a.cmpxchg(qword_ptr(rsi), rcx),
        |m| {
            make_read_only(m, D);
            m.cpu.state.gpr[reg::RSI] = D;
            m.cpu.state.gpr[reg::RAX] = 1;
            m.ram.write_u64(D, 2).unwrap();
        },
        Fault::PageFault { addr: D, code: 7 },
    );
    assert_eq!(m.read_u64(D), 2);
    // With LOCK on a writable page: the exchange happens.
    let code = TestMachine::assemble(|a| {
        a.lock().cmpxchg(qword_ptr(rsi), rcx)?;
        a.ud2()
    });
    m = TestMachine::new();
    m.cpu.state.gpr[reg::RSI] = D;
    m.cpu.state.gpr[reg::RAX] = 2;
    m.cpu.state.gpr[reg::RCX] = 0x77;
    m.ram.write_u64(D, 2).unwrap();
    m.run_code(&code, 10);
    assert_eq!(m.read_u64(D), 0x77);
    // LOCK with a register destination is an invalid encoding.
    expect_fault_bytes(
        &[0xf0, 0x0f, 0xb1, 0xca],
        |_| {},
        Fault::ud("invalid encoding"),
    );
}

/// CMPXCHG8B natively: returns (rax, rdx, rflags, memory).
fn host_cmpxchg8b(acc: u64, hi: u64, b: u64, c: u64, mem: u64, fl: u64) -> Host {
    let (mut a, mut d, mut f, mut m) = (acc, hi, fl, mem);
    // SAFETY: RBX is reserved by the compiler, so the new low half travels in RSI and is
    // swapped into RBX around the instruction and back. Touches a stack-local u64 only.
    unsafe {
        core::arch::asm!("push {f}", "popfq", "xchg rbx, rsi", "cmpxchg8b [{p}]", "xchg rbx, rsi",
            "pushfq", "pop {f}",
            f = inout(reg) f, p = in(reg) &mut m as *mut u64, inout("rax") a, inout("rdx") d,
            in("rsi") b, in("rcx") c)
    }
    (a, d, f, m)
}

#[test]
fn cmpxchg8b_native() {
    let mut rng = Rng(0x8b8b);
    for i in 0..64 {
        let fl = (rng.next() & STATUS) | FIXED1 | IF;
        let (acc, hi, b, c) = (rng.next(), rng.next(), rng.next(), rng.next());
        let mem = if i % 2 == 0 {
            (hi << 32) | (acc & 0xffff_ffff)
        } else {
            rng.interesting()
        };
        let host = host_cmpxchg8b(acc, hi, b, c, mem, fl);
        let m = run_to_ud2(
            |a| a.lock().cmpxchg8b(qword_ptr(rdi)),
            |m| {
                let st = &mut m.cpu.state;
                st.gpr[reg::RAX] = acc;
                st.gpr[reg::RDX] = hi;
                st.gpr[reg::RBX] = b;
                st.gpr[reg::RCX] = c;
                st.gpr[reg::RDI] = D;
                st.rflags = fl;
                m.ram.write_u64(D, mem).unwrap();
            },
        );
        let ours = (
            m.gpr(reg::RAX),
            m.gpr(reg::RDX),
            m.cpu.state.rflags,
            m.read_u64(D),
        );
        assert_eq!(ours, host, "acc={acc:#x} hi={hi:#x} mem={mem:#x}");
    }
}

#[test]
fn cmpxchg16b_success_failure_alignment() {
    let setup = |m: &mut TestMachine, addr: u64, lo: u64, hi: u64| {
        let st = &mut m.cpu.state;
        st.gpr[reg::RAX] = 0x1111;
        st.gpr[reg::RDX] = 0x2222;
        st.gpr[reg::RBX] = 0xbbbb;
        st.gpr[reg::RCX] = 0xcccc;
        st.gpr[reg::RDI] = addr;
        st.rflags = FIXED1 | STATUS;
        m.ram.write_u64(addr, lo).unwrap();
        m.ram.write_u64(addr + 8, hi).unwrap();
    };
    let prog = |a: &mut CodeAssembler| a.lock().cmpxchg16b(xmmword_ptr(rdi));
    let m = run_to_ud2(prog, |m| setup(m, D, 0x1111, 0x2222));
    assert_eq!((m.read_u64(D), m.read_u64(D + 8)), (0xbbbb, 0xcccc));
    assert_eq!((m.gpr(reg::RAX), m.gpr(reg::RDX)), (0x1111, 0x2222));
    assert_eq!(m.cpu.state.rflags, FIXED1 | STATUS);
    let m = run_to_ud2(prog, |m| setup(m, D, 0x1111, 0x3333));
    assert_eq!((m.read_u64(D), m.read_u64(D + 8)), (0x1111, 0x3333));
    assert_eq!((m.gpr(reg::RAX), m.gpr(reg::RDX)), (0x1111, 0x3333));
    assert_eq!(m.cpu.state.rflags, FIXED1 | (STATUS & !ZF));
    // Misaligned: #GP(0) before any access; a read-only page faults even on failure.
    expect_fault(prog, |m| setup(m, D + 8, 0x1111, 0x2222), Fault::GP0);
    expect_fault(
        prog,
        |m| {
            setup(m, D, 0, 0);
            make_read_only(m, D);
        },
        Fault::PageFault { addr: D, code: 7 },
    );
    // Register operand: invalid encoding.
    expect_fault_bytes(
        &[0x48, 0x0f, 0xc7, 0xc8],
        |_| {},
        Fault::ud("invalid encoding"),
    );
}

#[test]
fn cmpxchg16b_native() {
    if !std::is_x86_feature_detected!("cmpxchg16b") {
        return;
    }
    #[repr(align(16))]
    struct A([u64; 2]);
    let mut rng = Rng(0x1616);
    for i in 0..16 {
        let fl = (rng.next() & STATUS) | FIXED1 | IF;
        let (acc, hi, b, c) = (rng.next(), rng.next(), rng.next(), rng.next());
        let mem = if i % 2 == 0 {
            [acc, hi]
        } else {
            [acc, rng.next()]
        };
        let mut cell = A(mem);
        let (mut ha, mut hd, mut hf) = (acc, hi, fl);
        // SAFETY: as for CMPXCHG8B; the operand is a 16-byte aligned stack local.
        unsafe {
            core::arch::asm!("push {f}", "popfq", "xchg rbx, rsi", "cmpxchg16b [{p}]",
                "xchg rbx, rsi", "pushfq", "pop {f}",
                f = inout(reg) hf, p = in(reg) cell.0.as_mut_ptr(), inout("rax") ha,
                inout("rdx") hd, in("rsi") b, in("rcx") c)
        }
        let m = run_to_ud2(
            |a| a.cmpxchg16b(xmmword_ptr(rdi)),
            |m| {
                let st = &mut m.cpu.state;
                st.gpr[reg::RAX] = acc;
                st.gpr[reg::RDX] = hi;
                st.gpr[reg::RBX] = b;
                st.gpr[reg::RCX] = c;
                st.gpr[reg::RDI] = D;
                st.rflags = fl;
                m.ram.write_u64(D, mem[0]).unwrap();
                m.ram.write_u64(D + 8, mem[1]).unwrap();
            },
        );
        assert_eq!(
            (m.gpr(reg::RAX), m.gpr(reg::RDX), m.cpu.state.rflags),
            (ha, hd, hf)
        );
        assert_eq!([m.read_u64(D), m.read_u64(D + 8)], cell.0);
    }
}

#[test]
fn xadd_native_all_forms() {
    let mut rng = Rng(0xadd);
    for which in [1u32, 2, 4, 8, 0x44, 0x84] {
        for _ in 0..48 {
            let fl = (rng.next() & STATUS) | FIXED1 | IF;
            let (dst, src, mem) = (rng.interesting(), rng.interesting(), rng.interesting());
            let (mut d, mut f, mut mm) = (dst, fl, mem);
            let mut s = src;
            let p = &mut mm as *mut u64;
            macro_rules! run {
                ($ins:literal) => {
                    // SAFETY: one XADD on RCX/RDX or a stack-local u64; flags in and out.
                    unsafe {
                        core::arch::asm!("push {f}", "popfq", $ins, "pushfq", "pop {f}",
                            f = inout(reg) f, p = in(reg) p, inout("rdx") d, inout("rcx") s)
                    }
                };
            }
            match which {
                1 => run!("xadd dl, cl /* {p} */"),
                2 => run!("xadd dx, cx /* {p} */"),
                4 => run!("xadd edx, ecx /* {p} */"),
                8 => run!("xadd rdx, rcx /* {p} */"),
                0x44 => run!("xadd edx, edx /* {p} */"),
                _ => run!("lock xadd qword ptr [{p}], rcx"),
            }
            let m = run_to_ud2(
                |a| match which {
                    1 => a.xadd(dl, cl),
                    2 => a.xadd(dx, cx),
                    4 => a.xadd(edx, ecx),
                    8 => a.xadd(rdx, rcx),
                    0x44 => a.xadd(edx, edx),
                    _ => a.lock().xadd(qword_ptr(rsi), rcx),
                },
                |m| {
                    let st = &mut m.cpu.state;
                    st.gpr[reg::RDX] = dst;
                    st.gpr[reg::RCX] = src;
                    st.gpr[reg::RSI] = D;
                    st.rflags = fl;
                    m.ram.write_u64(D, mem).unwrap();
                },
            );
            let ours = (
                m.gpr(reg::RDX),
                m.gpr(reg::RCX),
                m.cpu.state.rflags,
                m.read_u64(D),
            );
            assert_eq!(
                ours,
                (d, s, f, mm),
                "form {which:#x} {dst:#x} {src:#x} {mem:#x}"
            );
        }
    }
}

#[test]
fn xchg_forms() {
    let m = run_bytes_to_ud2(
        &[
            0x87, 0xc0, // xchg eax, eax: zero-extends RAX
            0x41, 0x93, // xchg r11d, eax... (41 93 = xchg r11d, eax)
            0x86, 0xe3, // xchg bl, ah
            0x66, 0x87, 0x0e, // xchg [rsi], cx
            0xf0, 0x48, 0x87, 0x7e, 0x08, // lock xchg [rsi+8], rdi
        ],
        |m| {
            let st = &mut m.cpu.state;
            st.gpr[reg::RAX] = 0xffff_ffff_1234_5678;
            st.gpr[reg::R11] = 0xffff_ffff_aaaa_bbbb;
            st.gpr[reg::RBX] = 0x11;
            st.gpr[reg::RCX] = 0x9999_8888;
            st.gpr[reg::RSI] = D;
            st.gpr[reg::RDI] = 0x0102_0304_0506_0708;
            m.ram.write_u64(D, 0xdead_beef_cafe_f00d).unwrap();
            m.ram.write_u64(D + 8, 0x55).unwrap();
        },
    );
    // After xchg eax,eax: rax = 0x12345678; xchg r11d,eax: rax=0xaaaabbbb, r11=0x12345678.
    // xchg bl, ah: ah was 0xbb.
    assert_eq!(m.gpr(reg::R11), 0x1234_5678);
    assert_eq!(m.gpr(reg::RAX), 0xaaaa_11bb);
    assert_eq!(m.gpr(reg::RBX), 0xbb);
    assert_eq!(m.gpr(reg::RCX), 0x9999_f00d);
    assert_eq!(m.read_u64(D), 0xdead_beef_cafe_8888);
    assert_eq!(m.read_u64(D + 8), 0x0102_0304_0506_0708);
    assert_eq!(m.gpr(reg::RDI), 0x55);
    // Memory faults leave both operands unchanged: read-only page (write fault), unmapped page.
    let m = expect_fault(
        |a| a.xchg(qword_ptr(rsi), rax),
        |m| {
            make_read_only(m, D);
            m.cpu.state.gpr[reg::RSI] = D;
            m.cpu.state.gpr[reg::RAX] = 7;
            m.ram.write_u64(D, 3).unwrap();
        },
        Fault::PageFault { addr: D, code: 7 },
    );
    assert_eq!(m.read_u64(D), 3);
    expect_fault(
        |a| a.xchg(qword_ptr(rsi), rax),
        |m| m.cpu.state.gpr[reg::RSI] = UNMAPPED,
        pf_not_present(UNMAPPED, true),
    );
}

#[test]
fn xadd_memory_fault_is_precise() {
    let m = expect_fault(
        |a| a.xadd(dword_ptr(rsi), ecx),
        |m| {
            make_read_only(m, D);
            m.cpu.state.gpr[reg::RSI] = D;
            m.cpu.state.gpr[reg::RCX] = 1;
            m.ram.write_u64(D, 41).unwrap();
        },
        Fault::PageFault { addr: D, code: 7 },
    );
    assert_eq!(m.read_u64(D), 41);
}
