//! Legacy-mode segment checks (null, type, limit) on the memory operands of the SIMD, x87,
//! MMX, bit-string, atomic, cache-control, string-I/O and XSAVE families, in 32-bit protected
//! mode on the system test machine (GDT of `segment_tests.rs`: ES = 0x20 is read-only data
//! with limit 0xfff, SS = 0x68 read/write with limit 0xfff).

use super::tests::{pm_machine, run32};
use crate::fault::Fault;
use crate::state::{ctl, reg};
use crate::testkit_sys::{SysMachine, SysStop};
use iced_x86::code_asm::*;

type Prog = fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// A protected-mode machine with SSE, AVX and XSAVE enabled and ES = 0x20, SS = 0x68
/// loaded by the program prologue.
fn machine() -> SysMachine {
    let mut m = pm_machine();
    let st = &mut m.cpu.state;
    st.cr4 |= ctl::CR4_OSFXSR | ctl::CR4_OSXMMEXCPT | ctl::CR4_OSXSAVE;
    st.xcr0 = 0b111;
    m
}

/// Run `body` after loading ES = 0x20 and SS = 0x68 (ESP = EBP = 0x800).
fn run(body: Prog) -> (SysMachine, SysStop) {
    let mut m = machine();
    let stop = run32(&mut m, |a| {
        a.mov(ax, 0x20)?;
        a.mov(es, ax)?;
        a.mov(ax, 0x68)?;
        a.mov(ss, ax)?;
        a.mov(esp, 0x800)?;
        a.mov(ebp, 0x800)?;
        body(a)?;
        a.hlt()
    });
    (m, stop)
}

fn expect(name: &str, body: Prog, want: Fault) {
    let (_, stop) = run(body);
    assert_eq!(stop, SysStop::Exception(want), "{name}");
}

fn expect_ok(name: &str, body: Prog) {
    let (_, stop) = run(body);
    assert_eq!(stop, SysStop::Halt, "{name}");
}

#[test]
fn sse_and_avx_operands_check_limit_and_type() {
    expect(
        "movups crossing the limit",
        |a| a.movups(xmm0, xmmword_ptr(0xff8).es()),
        Fault::GP0,
    );
    expect_ok("movups at the limit", |a| {
        a.movups(xmm0, xmmword_ptr(0xff0).es())
    });
    expect(
        "movaps store to read-only",
        |a| a.movaps(xmmword_ptr(0).es(), xmm0),
        Fault::GP0,
    );
    expect(
        "movups store to read-only",
        |a| a.movups(xmmword_ptr(0).es(), xmm0),
        Fault::GP0,
    );
    expect(
        "paddd m128",
        |a| a.paddd(xmm0, xmmword_ptr(0x1000).es()),
        Fault::GP0,
    );
    expect(
        "movq load",
        |a| a.movq(xmm0, qword_ptr(0xffc).es()),
        Fault::GP0,
    );
    expect(
        "movss store",
        |a| a.movss(dword_ptr(0).es(), xmm0),
        Fault::GP0,
    );
    expect(
        "movhps store",
        |a| a.movhps(qword_ptr(0).es(), xmm0),
        Fault::GP0,
    );
    expect(
        "pinsrb",
        |a| a.pinsrb(xmm0, byte_ptr(0x1000).es(), 0),
        Fault::GP0,
    );
    expect(
        "vmovups ymm crossing",
        |a| a.vmovups(ymm0, ymmword_ptr(0xff0).es()),
        Fault::GP0,
    );
    expect_ok("vmovups xmm at the limit", |a| {
        a.vmovups(xmm0, xmmword_ptr(0xff0).es())
    });
    expect(
        "vmovups store",
        |a| a.vmovups(xmmword_ptr(0).es(), xmm0),
        Fault::GP0,
    );
    expect(
        "vmaskmovps store",
        |a| a.vmaskmovps(xmmword_ptr(0).es(), xmm1, xmm0),
        Fault::GP0,
    );
    // SS-relative operands fault with #SS(0).
    expect(
        "movups [ebp] beyond SS",
        |a| {
            a.mov(ebp, 0xff8)?;
            a.movups(xmm0, xmmword_ptr(ebp))
        },
        Fault::StackFault(0),
    );
    // A null DS faults on use.
    expect(
        "movups through null DS",
        |a| {
            a.xor(eax, eax)?;
            a.mov(ds, ax)?;
            a.movups(xmm0, xmmword_ptr(0x100))
        },
        Fault::GP0,
    );
}

#[test]
fn gather_elements_are_checked() {
    expect(
        "vpgatherdd beyond ES",
        |a| {
            a.vpcmpeqd(xmm2, xmm2, xmm2)?; // all elements selected
            a.vpxor(xmm1, xmm1, xmm1)?;
            a.mov(ebx, 0xffe)?;
            a.vpgatherdd_3(xmm0, dword_ptr(ebx + xmm1).es(), xmm2)
        },
        Fault::GP0,
    );
}

#[test]
fn mmx_and_x87_operands_check_limit_and_type() {
    expect(
        "movq mm load",
        |a| a.movq(mm0, qword_ptr(0xffc).es()),
        Fault::GP0,
    );
    expect(
        "paddb mm, m64",
        |a| a.paddb(mm0, qword_ptr(0xff9).es()),
        Fault::GP0,
    );
    expect(
        "maskmovq to read-only DS",
        |a| {
            a.mov(ax, 0x20)?;
            a.mov(ds, ax)?;
            a.xor(edi, edi)?;
            a.maskmovq(mm0, mm1)
        },
        Fault::GP0,
    );
    expect("fld m64", |a| a.fld(qword_ptr(0xffc).es()), Fault::GP0);
    expect("fld m80", |a| a.fld(tword_ptr(0xff8).es()), Fault::GP0);
    expect_ok("fld m80 at the limit", |a| a.fld(tword_ptr(0xff6).es()));
    expect(
        "fstp to read-only",
        |a| {
            a.fldz()?;
            a.fstp(dword_ptr(0).es())
        },
        Fault::GP0,
    );
    expect(
        "fistp to read-only",
        |a| {
            a.fldz()?;
            a.fistp(word_ptr(0).es())
        },
        Fault::GP0,
    );
    expect("fadd m32", |a| a.fadd(dword_ptr(0xffd).es()), Fault::GP0);
    expect("fcom m64", |a| a.fcom(qword_ptr(0xff9).es()), Fault::GP0);
    expect(
        "fnstcw to read-only",
        |a| a.fnstcw(word_ptr(0).es()),
        Fault::GP0,
    );
    expect(
        "fldcw crossing",
        |a| a.fldcw(word_ptr(0xfff).es()),
        Fault::GP0,
    );
    expect(
        "fnstenv to read-only",
        |a| a.fnstenv(ptr(0).es()),
        Fault::GP0,
    );
    expect("fldenv crossing", |a| a.fldenv(ptr(0xff0).es()), Fault::GP0);
    expect("fxsave to read-only", |a| a.fxsave(ptr(0).es()), Fault::GP0);
    expect(
        "fxrstor crossing",
        |a| a.fxrstor(ptr(0xe10).es()),
        Fault::GP0,
    );
    expect_ok("fxrstor at the limit", |a| {
        // A valid image (MXCSR 0x1f80) read from the last 512 bytes of ES.
        a.fxsave(ptr(0x1000))?;
        a.fxrstor(ptr(0xe00).es())
    });
    expect(
        "xsave to read-only",
        |a| {
            a.mov(eax, 7)?;
            a.xor(edx, edx)?;
            a.xsave(ptr(0).es())
        },
        Fault::GP0,
    );
}

#[test]
fn bit_atomic_cache_and_string_io_operands_are_checked() {
    expect(
        "bt register offset beyond the limit",
        |a| {
            a.xor(ebx, ebx)?;
            a.mov(eax, 0x8000)?; // byte 0x1000
            a.bt(dword_ptr(ebx).es(), eax)
        },
        Fault::GP0,
    );
    expect_ok("bt inside the limit", |a| {
        a.xor(ebx, ebx)?;
        a.mov(eax, 0x7fe0)?; // dword at 0xffc
        a.bt(dword_ptr(ebx).es(), eax)
    });
    expect(
        "bts to read-only",
        |a| a.bts(dword_ptr(0).es(), 1),
        Fault::GP0,
    );
    expect(
        "btc [ebp] beyond SS",
        |a| {
            a.mov(ecx, 0x8000)?;
            a.btc(dword_ptr(ebp), ecx)
        },
        Fault::StackFault(0),
    );
    expect(
        "cmpxchg8b to read-only",
        |a| a.cmpxchg8b(qword_ptr(0).es()),
        Fault::GP0,
    );
    expect(
        "xadd to read-only",
        |a| a.xadd(dword_ptr(0).es(), eax),
        Fault::GP0,
    );
    expect(
        "clflush beyond the limit",
        |a| a.clflush(byte_ptr(0x1000).es()),
        Fault::GP0,
    );
    expect(
        "insb to read-only ES",
        |a| {
            a.mov(dx, 0x80)?;
            a.xor(edi, edi)?;
            a.insb()
        },
        Fault::GP0,
    );
    expect(
        "outsb beyond ES via override",
        |a| {
            a.mov(dx, 0x80)?;
            a.mov(esi, 0x1000)?;
            a.db(&[0x26, 0x6e]) // es outsb
        },
        Fault::GP0,
    );
}

/// Nothing changes on a segment fault: the registers and memory are as before.
#[test]
fn segment_faults_are_precise() {
    let (m, stop) = run(|a| {
        a.mov(ebx, 0x1234)?;
        a.mov(eax, 0x8000)?;
        a.bts(dword_ptr(0).es(), eax)
    });
    assert_eq!(stop, SysStop::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.gpr[reg::RBX], 0x1234);
    assert_eq!(m.ram.bytes()[0x20000..0x20004], [0, 0, 0, 0]);
}

// ----- CS limit on instruction fetch -----

use super::tests::{asm, CODE};
use crate::cpu::ExitReason;
use crate::state::sreg;

/// `nop; nop; nop; mov eax, 0x12345678 (5 bytes); hlt` at CODE with CS.limit = CODE + `end`.
fn limit_machine(end: u64) -> SysMachine {
    let mut m = pm_machine();
    let code = asm(32, CODE, |a| {
        a.nop()?;
        a.nop()?;
        a.nop()?;
        a.mov(eax, 0x1234_5678u32)?;
        a.hlt()
    });
    assert_eq!(code.len(), 9);
    m.load(CODE, &code);
    m.cpu.state.seg[sreg::CS].limit = (CODE + end) as u32;
    m
}

#[test]
fn fetch_stops_at_the_cs_limit() {
    // The MOV (bytes 3..=7) crosses a limit at byte 5: three NOPs retire, #GP(0) at the MOV.
    let mut m = limit_machine(5);
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    assert_eq!(e.retired, 3);
    assert_eq!(m.cpu.state.rip, CODE + 3);
    assert_eq!(m.cpu.state.gpr[reg::RAX], 0);
    // A MOV ending exactly at the limit runs; the HLT after it is beyond: #GP(0) there.
    let mut m = limit_machine(7);
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    assert_eq!(e.retired, 4);
    assert_eq!(m.cpu.state.rip, CODE + 8);
    assert_eq!(m.cpu.state.gpr[reg::RAX], 0x1234_5678);
    // RIP beyond the limit faults before anything is fetched.
    let mut m = limit_machine(7);
    m.cpu.state.rip = CODE + 0x100;
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    assert_eq!(e.retired, 0);
}

/// The same code runs to the HLT with a large limit, faults after the limit shrinks, and runs
/// again once it grows: decoded blocks are keyed by the CS-limit window.
#[test]
fn cached_blocks_follow_the_cs_limit() {
    let mut m = limit_machine(8);
    for (end, want) in [
        (8, ExitReason::Halt),
        (5, ExitReason::Exception(Fault::GP0)),
    ] {
        for _ in 0..2 {
            m.cpu.state.seg[sreg::CS].limit = (CODE + end) as u32;
            m.cpu.state.rip = CODE;
            m.cpu.state.halted = false;
            assert_eq!(m.run(100).reason, want, "limit CODE+{end}");
        }
    }
    m.cpu.state.seg[sreg::CS].limit = 0xffff_ffff;
    m.cpu.state.rip = CODE;
    assert_eq!(m.run(100).reason, ExitReason::Halt);
}

/// An instruction crossing a CS limit at the end of RAM raises #GP(0): the bytes beyond the
/// limit are never fetched.
#[test]
fn crossing_the_limit_at_the_end_of_ram_is_gp() {
    let mut m = pm_machine();
    let top = (4u64 << 20) - 2;
    m.load(top, &[0xb8, 0x78]); // mov eax, imm32 (3 more bytes beyond the limit)
    m.cpu.state.seg[sreg::CS].limit = (4u32 << 20) - 1;
    m.cpu.state.rip = top;
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    assert_eq!(m.cpu.state.rip, top);
}

/// Real mode: an instruction wrapping past IP 0xffff (limit 0xffff) is #GP(0).
#[test]
fn real_mode_fetch_past_0xffff_is_gp() {
    let mut m = SysMachine::new(4);
    m.deliver_exceptions = false;
    m.start_real(0x1000, 0xfffd);
    // nop at 0xfffd; mov ax, 0x1234 (B8 34 12) at 0xfffe runs past 0xffff.
    m.load(0x1fffd, &[0x90, 0xb8, 0x34]);
    let e = m.run(100);
    assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
    assert_eq!(e.retired, 1);
    assert_eq!(m.cpu.state.rip, 0xfffe);
}

#[test]
fn xlat_checks_the_segment() {
    expect(
        "xlat beyond ES",
        |a| {
            a.mov(ebx, 0xfff)?;
            a.mov(eax, 1)?;
            a.db(&[0x26, 0xd7]) // es xlatb
        },
        Fault::GP0,
    );
    expect_ok("xlat at the limit", |a| {
        a.mov(ebx, 0xffe)?;
        a.mov(eax, 1)?;
        a.db(&[0x26, 0xd7])
    });
}
