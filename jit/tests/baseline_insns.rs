//! Instructions the baseline tier (`lockstep_jit::base`) took on in session 37, each in a
//! block the tier must compile (checked in the statistics), with the interpreter's state,
//! memory and retired count at every budget slice: 8-bit operations on AH/CH/DH/BH;
//! STMXCSR, VSTMXCSR and FNSTCW; DIV and IDIV; BT/BTS/BTR/BTC, BSF and BSR; 8- and 16-bit
//! shifts by a constant. And negative
//! 8-bit immediates of PUSH and of `add/sub rsp` (the tier once took the raw byte); MOVs
//! between registers and of immediates, which go straight to the destination's slot, and the
//! zeroing idioms, which do not load their register (session 45).

mod common;

use common::{baseline_config, compare, ran_to_hlt, short_slices};
use iced_x86::code_asm::*;
use lockstep_interp::state::{ctl, reg};
use lockstep_interp::testkit::{TestMachine, DATA_BASE};
use lockstep_interp::ExitReason;

/// Every compiled block but the last one's (HLT) was the tier's, and none failed to compile
/// (a failed compile falls back to Cranelift's tier, which would hide a fault of the tier's).
fn all_in_the_tier(jit: &lockstep_jit::Jit) {
    let s = &jit.stats;
    assert!(s.compiled - s.baseline <= 1, "{}", s.summary());
    assert_eq!(s.compile_errors, 0, "{}", s.summary());
}

/// 8-bit operations reading and writing AH/CH/DH/BH, with the low bytes and immediates, their
/// flags read by conditions: the renamed instruction works on host AH (first operand) and DH
/// (second), and only the high byte goes back.
#[test]
fn high_byte_registers_match_the_interpreter() {
    for value in [0u64, 0x1234_5678_9abc_def0, 0x8080_8080_8080_8080, u64::MAX] {
        let code = TestMachine::assemble(|a| {
            let mut next = a.create_label();
            a.jmp(next)?;
            a.set_label(&mut next)?;
            a.and(dh, 0x9f)?;
            a.test(ah, 8)?;
            a.sete(bh)?;
            a.add(ah, al)?;
            a.adc(ch, dh)?;
            a.sub(ch, 3)?;
            a.mov(al, ah)?;
            a.mov(dh, cl)?;
            a.movzx(esi, ah)?;
            a.movsx(edi, ch)?;
            a.cmp(dh, bh)?;
            a.setl(ah)?;
            a.inc(bh)?;
            a.neg(ch)?;
            a.not(dh)?;
            a.xor(bh, bh)?;
            a.or(ch, bl)?;
            a.test(ah, ah)?;
            let mut end = a.create_label();
            a.jmp(end)?;
            a.set_label(&mut end)?;
            a.hlt()
        });
        let setup = move |m: &mut TestMachine| {
            m.cpu.state.gpr[reg::RAX] = value;
            m.cpu.state.gpr[reg::RBX] = value.rotate_left(13);
            m.cpu.state.gpr[reg::RCX] = value ^ 0x5a5a_5a5a_a5a5_a5a5;
            m.cpu.state.gpr[reg::RDX] = !value;
        };
        let (_, jit, exit) = compare(&code, &short_slices(), baseline_config(), &setup);
        assert!(ran_to_hlt(&exit), "{exit:?}");
        all_in_the_tier(&jit);
    }
}

/// FNSTCW, then STMXCSR and VSTMXCSR after a division that raised PE in the host's MXCSR
/// (which the store must include), all in one block run ten times, each time after an
/// LDMXCSR (another block) that clears the flags; with CR0.TS set, FNSTCW leaves for the
/// interpreter, which raises #NM.
#[test]
fn control_register_stores_match_the_interpreter() {
    let avx = std::arch::is_x86_feature_detected!("avx");
    for ts in [false, true] {
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            let mut next = a.create_label();
            a.mov(rbx, DATA_BASE)?;
            a.mov(dword_ptr(rbx + 16), 0x1f80 | 0x10)?;
            a.mov(esi, 10)?;
            a.set_label(&mut top)?;
            a.ldmxcsr(dword_ptr(rbx + 16))?;
            a.jmp(next)?;
            a.set_label(&mut next)?;
            a.fnstcw(word_ptr(rbx + 8))?;
            a.mov(eax, 10)?;
            a.cvtsi2sd(xmm0, eax)?;
            a.mov(eax, 3)?;
            a.cvtsi2sd(xmm1, eax)?;
            a.divsd(xmm0, xmm1)?;
            a.stmxcsr(dword_ptr(rbx))?;
            if avx {
                a.vstmxcsr(dword_ptr(rbx + 4))?;
            }
            a.mov(ecx, dword_ptr(rbx))?;
            a.add(r12d, ecx)?;
            a.dec(esi)?;
            a.jne(top)?;
            a.hlt()
        });
        let setup = move |m: &mut TestMachine| {
            m.cpu.state.x87.fcw = 0x027f;
            if ts {
                m.cpu.state.cr0 |= ctl::CR0_TS;
            }
        };
        let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &setup);
        if ts {
            assert!(
                matches!(exit.reason, ExitReason::Exception(_)) && !ran_to_hlt(&exit),
                "{exit:?}"
            );
            continue;
        }
        assert!(ran_to_hlt(&exit), "{exit:?}");
        assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
        let at = |off: usize| {
            let b = &m.ram.bytes()[DATA_BASE as usize + off..];
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        assert_eq!(at(0), 0x1f80 | 0x10 | 0x20, "STMXCSR: UE kept, PE raised");
        if avx {
            assert_eq!(at(4), 0x1f80 | 0x30, "VSTMXCSR");
        }
        assert_eq!(at(8) & 0xffff, 0x027f, "FNSTCW");
        assert_eq!(m.gpr(reg::R12), 10 * (0x1f80 | 0x30));
    }
}

/// DIV and IDIV of 32- and 64-bit register and memory operands, each case its own block, all
/// run 30 times: quotients and remainders, the flags (set by a CMP before) unchanged, a
/// dividend wider than the check takes (left to the interpreter), and at the end a division
/// that raises #DE.
#[test]
fn divisions_match_the_interpreter() {
    // (signed, 64-bit, memory operand, RDX, RAX, divisor)
    let cases: [(bool, bool, bool, u64, u64, u64); 12] = [
        (false, true, false, 0, 1_000_000_007, 97),
        (false, true, true, 5, 0x1234_5678_9abc_def0, 0x10_0000_0001),
        (false, true, false, 96, u64::MAX, 97),
        (
            false,
            false,
            false,
            0xdead_0000_0003,
            0xffff_ffff_0000_0007,
            0x1_0000_0005,
        ),
        (false, false, true, 0, 12_345_678, 1),
        (true, true, false, u64::MAX, -1_000_000_007i64 as u64, 97),
        (true, true, true, 0, 1_000_000_007, -97i64 as u64),
        (true, true, false, u64::MAX, 1u64 << 63, 3),
        (true, true, false, 1, 5, 7),
        (true, false, false, 0xffff_ffff, 0x8000_0001, -3i64 as u64),
        (true, false, true, 0, 0x7fff_ffff, 0xffff_ffff),
        (true, true, false, 0, u64::MAX >> 1, -1i64 as u64),
    ];
    let code = TestMachine::assemble(|a| {
        let mut round = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.mov(r15d, 30)?;
        a.set_label(&mut round)?;
        for (k, &(signed, wide, mem, hi, lo, d)) in cases.iter().enumerate() {
            let out = 24 * k as i32;
            let mut next = a.create_label();
            a.mov(rdx, hi)?;
            a.mov(rax, lo)?;
            a.mov(rsi, d)?;
            a.mov(qword_ptr(rbx + 0x800), rsi)?;
            a.cmp(rsi, rax)?;
            a.jmp(next)?;
            a.set_label(&mut next)?;
            match (signed, wide, mem) {
                (false, true, false) => a.div(rsi)?,
                (false, true, true) => a.div(qword_ptr(rbx + 0x800))?,
                (false, false, false) => a.div(esi)?,
                (false, false, true) => a.div(dword_ptr(rbx + 0x800))?,
                (true, true, false) => a.idiv(rsi)?,
                (true, true, true) => a.idiv(qword_ptr(rbx + 0x800))?,
                (true, false, false) => a.idiv(esi)?,
                (true, false, true) => a.idiv(dword_ptr(rbx + 0x800))?,
            }
            a.setb(cl)?;
            a.sete(ch)?;
            a.mov(qword_ptr(rbx + out), rax)?;
            a.mov(qword_ptr(rbx + out + 8), rdx)?;
            a.mov(word_ptr(rbx + out + 16), cx)?;
        }
        a.dec(r15d)?;
        a.jne(round)?;
        // INT_MIN / -1: #DE.
        let mut last = a.create_label();
        a.mov(rax, 1u64 << 63)?;
        a.cqo()?;
        a.mov(rsi, -1i64)?;
        a.jmp(last)?;
        a.set_label(&mut last)?;
        a.idiv(rsi)?;
        a.hlt()
    });
    let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &|_| {});
    assert!(
        matches!(exit.reason, ExitReason::Exception(_)) && !ran_to_hlt(&exit),
        "{exit:?}"
    );
    all_in_the_tier(&jit);
    let at = |off: usize| {
        let b = &m.ram.bytes()[DATA_BASE as usize + off..];
        u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
    };
    assert_eq!((at(0), at(8)), (1_000_000_007 / 97, 1_000_000_007 % 97));
    assert_eq!(at(24 * 7), (i64::MIN / 3) as u64);
}

/// Sets R8–R12 from the status flags (CF, ZF, SF, OF, PF): conditions read them right after
/// the instruction under test.
fn read_flags(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.setb(r8b)?;
    a.sete(r9b)?;
    a.sets(r10b)?;
    a.seto(r11b)?;
    a.setp(r12b)
}

/// BT/BTS/BTR/BTC of registers (constant and register bit offsets, taken modulo the width)
/// and of memory at constant offsets, after a CMP whose other flags they must keep; BSF/BSR
/// of registers and memory, zero sources included (the destination kept, ZF and PF set);
/// every case its own block, all run 20 times, the flags read by conditions after each.
#[test]
fn bit_tests_and_scans_match_the_interpreter() {
    let code = TestMachine::assemble(|a| {
        let mut round = a.create_label();
        a.mov(rbx, DATA_BASE)?;
        a.mov(r15d, 20)?;
        a.set_label(&mut round)?;
        let sources: [u64; 4] = [0, 1, 0x8000_0000_0000_0000, 0x0000_0f00_0000_2400];
        for (k, &v) in sources.iter().enumerate() {
            let out = 64 * k as i32;
            for step in 0..4 {
                let mut next = a.create_label();
                a.mov(rdx, v)?;
                a.mov(qword_ptr(rbx + 0x800), rdx)?;
                a.mov(rax, 0x5555_5555_5555_5555u64)?;
                a.mov(ecx, 37 + step)?;
                a.cmp(rdx, rax)?;
                a.jmp(next)?;
                a.set_label(&mut next)?;
                match step {
                    0 => {
                        a.bt(rdx, 63)?;
                        read_flags(a)?;
                        a.bts(eax, ecx)?;
                        a.btr(qword_ptr(rbx + 0x800), 10)?;
                        a.btc(rdx, rcx)?;
                    }
                    1 => {
                        a.bsf(rax, rdx)?;
                        read_flags(a)?;
                        a.bsr(ecx, dword_ptr(rbx + 0x800))?;
                    }
                    2 => {
                        a.bsr(rsi, qword_ptr(rbx + 0x800))?;
                        read_flags(a)?;
                        a.bsf(eax, edx)?;
                    }
                    _ => {
                        a.btc(dword_ptr(rbx + 0x800), 31)?;
                        read_flags(a)?;
                        a.bt(edx, ecx)?;
                        a.setb(sil)?;
                    }
                }
                a.mov(qword_ptr(rbx + out + 8 * step), rax)?;
                a.mov(qword_ptr(rbx + out + 32), rcx)?;
                a.mov(qword_ptr(rbx + out + 40), rdx)?;
                a.add(r13, r8)?;
                a.add(r13, r9)?;
                a.add(r13, r10)?;
                a.add(r13, r11)?;
                a.add(r13, r12)?;
                a.add(r14, rsi)?;
            }
        }
        a.dec(r15d)?;
        a.jne(round)?;
        a.hlt()
    });
    let setup = |m: &mut TestMachine| {
        m.cpu.state.gpr[reg::RSI] = 0x1234;
    };
    let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &setup);
    assert!(ran_to_hlt(&exit), "{exit:?}");
    all_in_the_tier(&jit);
    assert!(m.gpr(reg::R13) != 0);
}

/// PUSH of negative 8-bit immediates and `add/sub rsp` by negative 8-bit immediates, with
/// stack accesses after them that reuse the last TLB hit (R8 moved by the known step), in a
/// function called 400 times (most of them past the small budget slices): the tier took
/// `immediate64`, the raw byte (0xff for `push -1`, a step of 248 for `add rsp, -8`), until a
/// JIT golden run of `strings` printed 255 for -1.
#[test]
fn negative_immediates_of_push_and_rsp_steps_match_the_interpreter() {
    let code = calls(
        400,
        |a| a.mov(rax, 0x1122_3344_5566_7788u64),
        |a| {
            a.push(-1)?;
            a.push(-128)?;
            a.sub(rsp, -16)?;
            a.mov(qword_ptr(rsp - 24), rax)?;
            a.add(rsp, -32)?;
            a.mov(rdx, qword_ptr(rsp + 8))?;
            a.mov(rcx, qword_ptr(rsp + 24))?;
            a.mov(rsi, qword_ptr(rsp + 16))?;
            a.add(rsp, 32)?;
            a.add(r12, rdx)?;
            a.add(r13, rcx)?;
            a.add(r14, rsi)
        },
    );
    let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    all_in_the_tier(&jit);
    assert_eq!(m.gpr(reg::R13), (-400i64) as u64);
    assert_eq!(m.gpr(reg::R14), (-128i64 * 400) as u64);
}

/// Code added to a program.
type Emitter = fn(&mut CodeAssembler) -> Result<(), IcedError>;

/// A program that runs `setup`, then calls a function `f` made of `body` `rounds` times
/// (counting in R15), then HLT: `f`'s blocks are not a loop, so the tier takes them, and
/// most calls run past the small budget slices.
fn calls(rounds: u32, setup: Emitter, body: Emitter) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut round = a.create_label();
        let mut f = a.create_label();
        let mut done = a.create_label();
        a.mov(r15d, rounds)?;
        setup(a)?;
        a.set_label(&mut round)?;
        a.call(f)?;
        a.dec(r15d)?;
        a.jne(round)?;
        a.jmp(done)?;
        a.set_label(&mut f)?;
        body(a)?;
        a.ret()?;
        a.set_label(&mut done)?;
        a.hlt()
    })
}

/// SHL/SHR/SAR of 8- and 16-bit registers and memory by 1 and by larger constants below the
/// width (OF by more than 1 the interpreter's: as for a count of 1, SAR's 0), the flags read
/// by conditions after each, in a function called 400 times on changing values.
#[test]
fn narrow_shifts_match_the_interpreter() {
    let setup: Emitter = |a| {
        a.mov(rbx, DATA_BASE)?;
        a.mov(rdi, 0x9e37_79b9_7f4a_7c15u64)
    };
    let code = calls(400, setup, |a| {
        a.imul_3(rdi, rdi, 0x2545_f491)?;
        a.add(rdi, r15)?;
        a.mov(rax, rdi)?;
        a.mov(rcx, rdi)?;
        a.mov(rdx, rdi)?;
        a.mov(qword_ptr(rbx), rdi)?;
        let shifts: [Emitter; 10] = [
            |a| a.shr(al, 5),
            |a| a.shl(cl, 1),
            |a| a.sar(dl, 3),
            |a| a.shl(sil, 7),
            |a| a.shl(ax, 9),
            |a| a.sar(cx, 1),
            |a| a.shr(dx, 15),
            |a| a.shl(byte_ptr(rbx + 1), 3),
            |a| a.sar(word_ptr(rbx + 2), 6),
            |a| a.shr(byte_ptr(rbx + 5), 1),
        ];
        for shift in shifts {
            shift(a)?;
            read_flags(a)?;
            // Every flag into R13 (each step after the conditions read them).
            for r in [r8, r9, r10, r11, r12] {
                a.imul_3(r13, r13, 3)?;
                a.add(r13, r)?;
            }
        }
        a.shl(word_ptr(rbx + 6), 2)?;
        read_flags(a)?;
        a.add(r14, qword_ptr(rbx))?;
        a.add(r14, rax)?;
        a.add(r14, rcx)?;
        a.add(r14, rdx)
    });
    let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    all_in_the_tier(&jit);
    assert!(m.gpr(reg::R13) != 0);
}

/// MOVs between registers (a 64-bit source read from its slot) and of immediates
/// (`regs::emit_mov_imm`): 32-bit MOVs, which zero the upper half, of registers whose upper
/// halves are set; 64-bit ones, to itself too;
/// 32-bit immediates with bit 31 set (zero-extended, where `mov qword [m], imm32` would
/// sign-extend) and without; `mov r64, imm32` negative (sign-extended); MOVABS of values that
/// do and do not fit a sign-extended imm32. And the zeroing idioms of 32 and 64 bits, whose
/// register is not loaded (XOR, SUB, SBB after a borrow and without), beside 8- and 16-bit
/// ones, which keep the register's other bytes, with their flags read. And instructions whose
/// second operand, a register, the host reads from its slot: MOVZX, MOVSX(D), CMOVcc, IMUL,
/// 8- and 16-bit MOV, ADD, SUB, ADC, CMP and TEST. In a function called 400 times on changing
/// values.
#[test]
fn direct_movs_zero_idioms_and_slot_sources_match_the_interpreter() {
    let setup: Emitter = |a| a.mov(rdi, 0x9e37_79b9_7f4a_7c15u64);
    let code = calls(400, setup, |a| {
        a.imul_3(rdi, rdi, 0x2545_f491)?;
        a.add(rdi, r15)?;
        for r in [rax, rbx, rcx, rdx, rsi, r8, r9, r10, r11] {
            a.mov(r, rdi)?;
            a.imul_3(rdi, rdi, 0x2545_f491)?;
        }
        a.mov(eax, ebx)?;
        a.mov(r8d, ecx)?;
        a.mov(edx, edx)?;
        a.mov(rsi, r9)?;
        a.mov(r10, r10)?;
        a.add(r14, rax)?;
        a.add(r14, r8)?;
        a.add(r14, rdx)?;
        a.add(r14, rsi)?;
        a.add(r14, r10)?;
        a.mov(ebx, 0x8000_0001u32)?;
        a.mov(ecx, 5u32)?;
        a.mov(r9, -5i64)?;
        a.mov(r11, 0x1234_5678_9abc_def0u64)?;
        a.mov(rax, 0x7fff_ffffu64)?;
        a.add(r14, rbx)?;
        a.add(r14, rcx)?;
        a.add(r14, r9)?;
        a.add(r14, r11)?;
        a.add(r14, rax)?;
        a.mov(rax, rdi)?;
        a.mov(rbx, rdi)?;
        a.mov(rcx, rdi)?;
        a.mov(rdx, rdi)?;
        a.mov(rsi, rdi)?;
        a.xor(eax, eax)?;
        read_flags(a)?;
        a.sub(rbx, rbx)?;
        a.cmp(rdi, r15)?;
        a.sbb(ecx, ecx)?;
        read_flags(a)?;
        a.cmp(r15, rdi)?;
        a.sbb(rdx, rdx)?;
        a.xor(si, si)?;
        a.sub(dil, dil)?;
        read_flags(a)?;
        // Second operands read from their slots (`insn::with_slot_source`), of every width,
        // from registers whose other bytes are set.
        a.mov(rbx, rdi)?;
        a.imul_3(rdi, rdi, 0x2545_f491)?;
        a.mov(r8, rdi)?;
        a.not(rdi)?;
        a.movzx(eax, bl)?;
        a.movzx(ecx, r8w)?;
        a.movsx(rdx, bl)?;
        a.movsxd(rsi, r8d)?;
        a.add(r14, rax)?;
        a.add(r14, rcx)?;
        a.add(r14, rdx)?;
        a.add(r14, rsi)?;
        a.cmp(bx, r8w)?;
        a.cmovl(rax, rdi)?;
        a.cmovg(ecx, r8d)?;
        a.imul_2(rdx, rbx)?;
        a.imul_3(esi, r8d, 7)?;
        a.add(cx, di)?;
        a.sub(dl, r8b)?;
        a.mov(sil, bl)?;
        a.mov(r9w, r8w)?;
        a.adc(r9, rbx)?;
        a.test(r8d, edi)?;
        read_flags(a)?;
        a.add(r14, rax)?;
        a.add(r14, rcx)?;
        a.add(r14, rdx)?;
        a.add(r14, rsi)?;
        for r in [rax, rbx, rcx, rdx, rsi, rdi, r8, r9, r10, r11, r12] {
            a.imul_3(r13, r13, 3)?;
            a.add(r13, r)?;
        }
        Ok(())
    });
    let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &|_| {});
    assert!(ran_to_hlt(&exit), "{exit:?}");
    all_in_the_tier(&jit);
    assert!(m.gpr(reg::R13) != 0 && m.gpr(reg::R14) != 0);
}

/// A logic operation right before a block's last instruction, a Jcc both of whose ways leave
/// the function, hands its flags over as a `Logic` record of its result instead of a capture
/// (`Emit::hand_over`, session 45): 32- and 64-bit TEST of a register with itself (the 32-bit
/// one of a register whose upper half is set while its lower half is sometimes 0), AND, OR
/// and XOR. Both ways read the flags first: the taken one on the next page in the tier
/// (`fold_incoming`'s inline merge of the record), the fall-through one in a block the tier
/// does not cover (ROL), which Cranelift compiles (a run-time record); budget slices stop
/// between them (the dispatcher folds the record).
#[test]
fn logic_flags_handed_over_as_records_match_the_interpreter() {
    fn body<const OP: u8>(a: &mut CodeAssembler) -> Result<(), IcedError> {
        let mut far = a.create_label();
        let mut join = a.create_label();
        a.imul_3(rdi, rdi, 0x2545_f491)?;
        a.add(rdi, r15)?;
        // RAX: RDI shifted left by R15 % 64 (the low half 0 for shifts of 32 and more).
        a.mov(rax, rdi)?;
        a.mov(ecx, r15d)?;
        a.and(ecx, 63)?;
        a.shl(rax, cl)?;
        a.mov(rdx, rdi)?;
        a.mov(rsi, rax)?;
        a.imul_3(rsi, rsi, 3)?;
        match OP {
            0 => a.test(eax, eax)?,
            1 => a.test(rax, rax)?,
            2 => a.and(esi, edx)?,
            3 => a.or(rsi, rax)?,
            _ => a.xor(edx, eax)?,
        }
        a.jl(far)?;
        read_flags(a)?;
        a.rol(r14, 1)?;
        a.jmp(join)?;
        // The taken way starts on the next page (never executed).
        a.db(&[0xcc; 4096])?;
        a.set_label(&mut far)?;
        read_flags(a)?;
        a.add(r14, 1)?;
        a.set_label(&mut join)?;
        for r in [r8, r9, r10, r11, r12, rsi, rdx] {
            a.imul_3(r13, r13, 3)?;
            a.add(r13, r)?;
        }
        Ok(())
    }
    let setup: Emitter = |a| a.mov(rdi, 0x9e37_79b9_7f4a_7c15u64);
    let bodies: [Emitter; 5] = [body::<0>, body::<1>, body::<2>, body::<3>, body::<4>];
    for body in bodies {
        let code = calls(400, setup, body);
        let (m, jit, exit) = compare(&code, &short_slices(), baseline_config(), &|_| {});
        assert!(ran_to_hlt(&exit), "{exit:?}");
        let s = &jit.stats;
        assert_eq!(s.compile_errors, 0, "{}", s.summary());
        assert!(s.baseline >= 3, "{}", s.summary());
        assert!(m.gpr(reg::R13) != 0 && m.gpr(reg::R14) != 0);
    }
}
