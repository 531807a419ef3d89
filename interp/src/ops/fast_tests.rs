//! Differential tests of the specialised handlers (`fast.rs`): every fast handler must do exactly
//! what the family handler for the same instruction does, on random states, including faults.

use super::lookup as fast_lookup;
use crate::decode::Handler;
use crate::fault::Trap;
use crate::ops::family_lookup;
use crate::ops::mov::tests::Rng;
use crate::state::{flags, reg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE, STACK_TOP};
use crate::Ctx;
use iced_x86::code_asm::*;
use iced_x86::{Decoder, DecoderOptions, Instruction, Register};

fn decode_all(bytes: &[u8]) -> Vec<Instruction> {
    let mut d = Decoder::with_ip(64, bytes, CODE_BASE, DecoderOptions::NONE);
    let mut v = Vec::new();
    while d.can_decode() {
        v.push(d.decode());
    }
    v
}

/// Instructions the fast handlers must claim: every shape and size they cover.
fn claimed() -> Vec<Instruction> {
    let code = TestMachine::assemble(|a| {
        // ALU, all operations, reg/reg, reg/imm8, reg/imm32, reg/mem, mem/reg, mem/imm.
        macro_rules! alu {
            ($op:ident) => {
                a.$op(rax, rbx)?;
                a.$op(r9d, ecx)?;
                a.$op(dx, si)?;
                a.$op(sil, r10b)?;
                a.$op(al, bl)?;
                a.$op(r11, 5i32)?;
                a.$op(r11, -3i32)?;
                a.$op(rax, 0x1234_5678i32)?;
                a.$op(rcx, -0x1234_5678i32)?;
                a.$op(edx, 0x7fi32)?;
                a.$op(esi, 0x8000_0000u32 as i32)?;
                a.$op(eax, -1i32)?;
                a.$op(cx, -2i32)?;
                a.$op(di, 0x1234i32)?;
                a.$op(al, 0x80i32)?;
                a.$op(r8b, 0x7fi32)?;
                a.$op(rdx, qword_ptr(rbx + rsi * 4 + 8))?;
                a.$op(ecx, dword_ptr(rbx - 4))?;
                a.$op(di, word_ptr(rbx + rsi))?;
                a.$op(bl, byte_ptr(rsi * 2 + 0x40_0000))?;
                a.$op(qword_ptr(rbx + 0x10), rdx)?;
                a.$op(dword_ptr(rbx + rsi * 8), ecx)?;
                a.$op(word_ptr(rbx), di)?;
                a.$op(byte_ptr(rbx + 3), dl)?;
                a.$op(qword_ptr(rbx), -7i32)?;
                a.$op(qword_ptr(rbx), 0x1234_5678i32)?;
                a.$op(dword_ptr(rbx + 8), 0x7fi32)?;
                a.$op(dword_ptr(rbx + 8), 0x8765_4321u32 as i32)?;
                a.$op(word_ptr(rbx + 2), -2i32)?;
                a.$op(word_ptr(rbx + 2), 0x1234i32)?;
                a.$op(byte_ptr(rbx + 1), 0x81i32)?;
                a.$op(qword_ptr(0x40_0100u64), rax)?;
            };
        }
        alu!(add);
        alu!(adc);
        alu!(sub);
        alu!(sbb);
        alu!(and);
        alu!(or);
        alu!(xor);
        alu!(cmp);
        a.test(rax, rbx)?;
        a.test(ecx, edx)?;
        a.test(al, 0x41i32)?;
        a.test(rcx, -5i32)?;
        a.test(qword_ptr(rbx + 8), rax)?;
        a.test(byte_ptr(rbx), 0x80i32)?;
        a.test(dword_ptr(rbx), 0x8000_0001u32 as i32)?;
        for r in [rax, rsp, r15] {
            a.inc(r)?;
            a.dec(r)?;
        }
        a.inc(ecx)?;
        a.dec(dx)?;
        a.inc(bpl)?;
        a.dec(al)?;
        // MOV.
        a.mov(rax, rbx)?;
        a.mov(ecx, r12d)?;
        a.mov(dx, si)?;
        a.mov(dil, r8b)?;
        a.mov(rax, qword_ptr(rbx + rsi * 8 - 8))?;
        a.mov(eax, dword_ptr(rbx))?;
        a.mov(ax, word_ptr(rbx))?;
        a.mov(cl, byte_ptr(rbx + 1))?;
        a.mov(qword_ptr(rbx), rdx)?;
        a.mov(dword_ptr(rbx + 4), edx)?;
        a.mov(word_ptr(rbx + 6), dx)?;
        a.mov(byte_ptr(rbx + 7), dl)?;
        a.mov(rax, -5i64)?;
        a.mov(r9, 0x1234_5678_9abc_def0u64)?;
        a.mov(ecx, 0xffff_fff0u32)?;
        a.mov(dx, 0x8000u32)?;
        a.mov(al, 0x80u32)?;
        a.mov(qword_ptr(rbx), -2i32)?;
        a.mov(dword_ptr(rbx), 0x8000_0000u32)?;
        a.mov(word_ptr(rbx), 0xfffeu32)?;
        a.mov(byte_ptr(rbx), 0x7fu32)?;
        a.mov(rax, qword_ptr(0x40_0010u64))?;
        // MOVZX/MOVSX/MOVSXD.
        a.movzx(eax, bl)?;
        a.movzx(rax, r9b)?;
        a.movzx(ecx, dx)?;
        a.movzx(rcx, dx)?;
        a.movzx(cx, sil)?;
        a.movzx(eax, byte_ptr(rbx))?;
        a.movzx(rax, word_ptr(rbx + 2))?;
        a.movsx(eax, bl)?;
        a.movsx(rax, r9b)?;
        a.movsx(ecx, dx)?;
        a.movsx(rcx, dx)?;
        a.movsx(cx, sil)?;
        a.movsx(eax, byte_ptr(rbx))?;
        a.movsx(rax, word_ptr(rbx + 2))?;
        a.movsxd(rax, ebx)?;
        a.movsxd(rax, dword_ptr(rbx + 4))?;
        // LEA.
        a.lea(rax, qword_ptr(rbx + rsi * 4 + 0x10))?;
        a.lea(eax, qword_ptr(rbx + rsi * 4 - 0x10))?;
        a.lea(ax, qword_ptr(rbx + rsi))?;
        a.lea(rcx, qword_ptr(rsi * 8))?;
        // Stack and control.
        // Shifts and rotates, SHLD/SHRD.
        macro_rules! shifts {
            ($op:ident) => {
                a.$op(rax, 1)?;
                a.$op(rdx, 5)?;
                a.$op(rsi, 63)?;
                a.$op(r9, cl)?;
                a.$op(eax, 1)?;
                a.$op(ecx, 31)?;
                a.$op(r10d, cl)?;
                a.$op(dx, 17)?;
                a.$op(si, cl)?;
                a.$op(al, 9)?;
                a.$op(r8b, cl)?;
            };
        }
        shifts!(shl);
        shifts!(shr);
        shifts!(sar);
        shifts!(rol);
        shifts!(ror);
        a.shld(rax, rbx, 5)?;
        a.shrd(rax, rbx, 63)?;
        a.shld(eax, ebx, cl)?;
        a.shrd(r8d, ebx, cl)?;
        a.shld(ax, bx, 17)?;
        a.shrd(dx, si, 3)?;
        // NOT, NEG, IMUL, BT*.
        for r in [rax, r13] {
            a.not(r)?;
            a.neg(r)?;
        }
        a.not(ecx)?;
        a.neg(edx)?;
        a.not(si)?;
        a.neg(dil)?;
        for r in [rbx, rcx] {
            a.mul(r)?;
            a.imul(r)?;
            a.div(r)?;
            a.idiv(r)?;
        }
        a.mul(ecx)?;
        a.imul(esi)?;
        a.div(ecx)?;
        a.idiv(r9d)?;
        a.mul(qword_ptr(rbx))?;
        a.imul(dword_ptr(rbx + 4))?;
        a.div(qword_ptr(rbx + 8))?;
        a.idiv(dword_ptr(rbx))?;
        a.imul_2(rax, rbx)?;
        a.imul_2(ecx, edx)?;
        a.imul_2(ax, bx)?;
        a.imul_2(rax, qword_ptr(rbx))?;
        a.imul_2(eax, dword_ptr(rbx + 4))?;
        a.imul_3(rax, rbx, 5)?;
        a.imul_3(rax, rbx, -0x1234_5678)?;
        a.imul_3(ecx, edx, 100_000)?;
        a.imul_3(cx, dx, -3)?;
        a.bt(rax, rbx)?;
        a.bts(eax, ecx)?;
        a.btr(ax, dx)?;
        a.btc(rax, r9)?;
        a.bt(rax, 63)?;
        a.bts(ecx, 40)?;
        a.btr(r8, 7)?;
        a.btc(dx, 20)?;
        // Indirect branches, CBW family, NOPs.
        a.jmp(rax)?;
        a.jmp(qword_ptr(rbx + 8))?;
        a.call(rcx)?;
        a.call(qword_ptr(rbx))?;
        a.cdqe()?;
        a.cwde()?;
        a.cqo()?;
        a.cdq()?;
        a.nop()?;
        a.nop_1(dword_ptr(rax + rbx * 2))?;
        a.endbr64()?;
        // CMOVcc, SETcc: every condition.
        macro_rules! conds {
            ($($cmov:ident $set:ident),*) => {
                $(
                    a.$cmov(rax, rbx)?;
                    a.$cmov(ecx, edx)?;
                    a.$cmov(rax, qword_ptr(rbx + 8))?;
                    a.$cmov(esi, dword_ptr(rbx))?;
                    a.$set(al)?;
                    a.$set(r9b)?;
                    a.$set(byte_ptr(rbx + 5))?;
                )*
            };
        }
        conds!(cmovo seto, cmovno setno, cmovb setb, cmovae setae, cmove sete, cmovne setne,
            cmovbe setbe, cmova seta, cmovs sets, cmovns setns, cmovp setp, cmovnp setnp,
            cmovl setl, cmovge setge, cmovle setle, cmovg setg);
        a.push(rbx)?;
        a.push(rsp)?;
        a.pop(rbx)?;
        a.pop(rsp)?;
        a.ret()?;
        let mut l = a.create_label();
        a.set_label(&mut l)?;
        a.call(l)?;
        a.jmp(l)?;
        a.je(l)?;
        a.jne(l)?;
        a.jo(l)?;
        a.jno(l)?;
        a.jb(l)?;
        a.jae(l)?;
        a.jbe(l)?;
        a.ja(l)?;
        a.js(l)?;
        a.jns(l)?;
        a.jp(l)?;
        a.jnp(l)?;
        a.jl(l)?;
        a.jge(l)?;
        a.jle(l)?;
        a.jg(l)
    });
    let mut v = decode_all(&code);
    // Long forms of the branches (rel32) and RIP-relative operands.
    let mut a = CodeAssembler::new(64).unwrap();
    let mut far = a.create_label();
    a.je(far).unwrap();
    a.jmp(far).unwrap();
    a.add(rax, qword_ptr(far)).unwrap();
    a.mov(qword_ptr(far), rcx).unwrap();
    a.lea(rdx, qword_ptr(far)).unwrap();
    a.db(&[0x90; 300]).unwrap();
    a.set_label(&mut far).unwrap();
    a.nop().unwrap();
    let bytes = a.assemble(CODE_BASE).unwrap();
    v.extend(decode_all(&bytes).into_iter().take(5));
    v
}

/// Instructions the fast handlers must leave to the families.
fn not_claimed() -> Vec<Instruction> {
    let mut bytes = TestMachine::assemble(|a| {
        a.add(ah, bl)?;
        a.mov(bh, al)?;
        a.add(rax, qword_ptr(rbx).fs())?;
        a.mov(qword_ptr(rbx).gs(), rax)?;
        a.add(eax, dword_ptr(ebx))?;
        a.lea(rax, qword_ptr(ebx + esi))?;
        a.lock().add(qword_ptr(rbx), rax)?;
        a.push(qword_ptr(rbx))?;
        a.ret_1(8)?;
        a.shl(qword_ptr(rbx), 1)?;
        a.rcl(rax, 1)?;
        a.mul(cl)?;
        a.div(cx)?;
        a.imul_3(rax, qword_ptr(rbx), 5)?;
        a.bt(qword_ptr(rbx), rax)?;
        a.cmovne(ax, bx)?;
        a.seta(ah)?;
        a.not(qword_ptr(rbx))?;
        a.jmp(qword_ptr(rbx).fs())
    });
    // LOCK on a register form (#UD in the family handler).
    bytes.extend_from_slice(&[0xf0, 0x48, 0x01, 0xd8]);
    decode_all(&bytes)
}

#[test]
fn fast_handlers_claim_the_shapes_they_cover() {
    for ins in claimed() {
        assert!(
            fast_lookup(&ins).is_some(),
            "not claimed: {ins} ({:?})",
            ins.code()
        );
    }
    for ins in not_claimed() {
        assert!(
            fast_lookup(&ins).is_none(),
            "claimed: {ins} ({:?})",
            ins.code()
        );
    }
}

#[test]
fn condition_codes_round_trip() {
    for cc in iced_x86::ConditionCode::values() {
        assert_eq!(super::cc_from(cc as u8), cc);
    }
}

/// Put a random state into `m`: the instruction's memory operand (if any) usually lands in the
/// data area, sometimes at a supervisor page, an unmapped page or a non-canonical address, and
/// the stack is usually in mapped memory.
fn randomise(m: &mut TestMachine, rng: &mut Rng, ins: &Instruction) {
    for i in 0..16 {
        m.cpu.state.gpr[i] = rng.interesting();
    }
    let fl = rng.next() & (flags::STATUS | flags::DF);
    m.cpu.state.rflags = flags::FIXED1 | flags::IF | fl;
    let mut data = [0u8; 8192];
    for c in data.chunks_mut(8) {
        c.copy_from_slice(&rng.interesting().to_le_bytes());
    }
    m.load(DATA_BASE, &data);
    m.load(STACK_TOP - 4096, &data[..4096]);
    let bad = |rng: &mut Rng| match rng.next() % 3 {
        0 => 0x1000,                // supervisor page: #PF
        1 => 0x8000_0000_0000,      // non-canonical: #GP
        _ => 0x7000_0000_0000 - 64, // unmapped (beyond the test GiB's PDPT entry): #PF
    };
    let base = ins.memory_base();
    let index = ins.memory_index();
    if index.is_gpr64() {
        m.cpu.state.gpr[index.number()] = rng.next() % 64;
    }
    if base.is_gpr64() && base != Register::RSP {
        m.cpu.state.gpr[base.number()] = if rng.next().is_multiple_of(8) {
            bad(rng)
        } else {
            // Near the end of the data page now and then, to cross into the next page.
            DATA_BASE + 4096 - 256 + rng.next() % 512
        };
    }
    m.cpu.state.gpr[reg::RSP] = if rng.next().is_multiple_of(8) {
        bad(rng)
    } else {
        STACK_TOP - 512 + (rng.next() % 64) * 8 - (rng.next() % 2) * 3
    };
    // FS/GS bases (64-bit mode: the only segment bases that apply), small so that accesses
    // stay in mapped memory.
    m.cpu.state.seg[crate::state::sreg::FS].base = rng.next() % 512;
    m.cpu.state.seg[crate::state::sreg::GS].base = rng.next() % 512;
    m.cpu.state.rip = ins.next_ip();
}

fn run(m: &mut TestMachine, h: Handler, ins: &Instruction) -> Result<(), Trap> {
    let mut ctx = Ctx::new(&mut m.cpu, &mut m.ram, &mut m.bus);
    h(&mut ctx, ins)
}

fn mem(m: &TestMachine, at: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    m.ram.read_phys(at, &mut v).unwrap();
    v
}

#[test]
fn fast_handlers_match_family_handlers() {
    let mut rng = Rng(0xfa57_0001);
    let mut faults = 0;
    let mut total = 0;
    let (mut a, mut b) = (TestMachine::new(), TestMachine::new());
    for ins in claimed() {
        let fast = fast_lookup(&ins).unwrap();
        let family = family_lookup(&ins);
        for _ in 0..150 {
            let seed = rng.next();
            randomise(&mut a, &mut Rng(seed), &ins);
            randomise(&mut b, &mut Rng(seed), &ins);
            let ra = run(&mut a, fast, &ins);
            let rb = run(&mut b, family, &ins);
            assert_eq!(ra, rb, "{ins}: result");
            assert_eq!(a.cpu.state, b.cpu.state, "{ins}: state");
            assert_eq!(a.cpu.smc, b.cpu.smc, "{ins}: smc");
            assert_eq!(
                mem(&a, DATA_BASE, 8192),
                mem(&b, DATA_BASE, 8192),
                "{ins}: data"
            );
            assert_eq!(
                mem(&a, STACK_TOP - 4096, 4096),
                mem(&b, STACK_TOP - 4096, 4096),
                "{ins}: stack"
            );
            faults += ra.is_err() as u32;
            total += 1;
        }
    }
    // The states must exercise faults too (bad addresses, bad return targets), not only hits.
    assert!(faults > total / 50, "{faults} faults in {total} runs");
}

/// Random encodings around the opcodes the fast handlers cover (random legacy and REX prefixes,
/// ModRM, SIB, displacement and immediate bytes): whatever `fast::lookup` claims must behave
/// exactly like the family handler. Catches shapes the hand-written list above misses.
#[test]
fn random_encodings_match_family_handlers() {
    const OPCODES: &[&[u8]] = &[
        &[0x00],
        &[0x01],
        &[0x02],
        &[0x03],
        &[0x04],
        &[0x05],
        &[0x08],
        &[0x09],
        &[0x0a],
        &[0x0b],
        &[0x10],
        &[0x11],
        &[0x12],
        &[0x13],
        &[0x18],
        &[0x19],
        &[0x1a],
        &[0x1b],
        &[0x20],
        &[0x21],
        &[0x22],
        &[0x23],
        &[0x28],
        &[0x29],
        &[0x2a],
        &[0x2b],
        &[0x30],
        &[0x31],
        &[0x32],
        &[0x33],
        &[0x38],
        &[0x39],
        &[0x3a],
        &[0x3b],
        &[0x3c],
        &[0x3d],
        &[0x50],
        &[0x53],
        &[0x54],
        &[0x58],
        &[0x5c],
        &[0x5f],
        &[0x63],
        &[0x69],
        &[0x6b],
        &[0x70],
        &[0x74],
        &[0x7f],
        &[0x80],
        &[0x81],
        &[0x83],
        &[0x84],
        &[0x85],
        &[0x88],
        &[0x89],
        &[0x8a],
        &[0x8b],
        &[0x8d],
        &[0x90],
        &[0x98],
        &[0x99],
        &[0xa0],
        &[0xa1],
        &[0xa2],
        &[0xa3],
        &[0xb0],
        &[0xb4],
        &[0xb8],
        &[0xbf],
        &[0xc0],
        &[0xc1],
        &[0xc2],
        &[0xc3],
        &[0xc6],
        &[0xc7],
        &[0xd0],
        &[0xd1],
        &[0xd2],
        &[0xd3],
        &[0xe8],
        &[0xe9],
        &[0xeb],
        &[0xf6],
        &[0xf7],
        &[0xfe],
        &[0xff],
        &[0x0f, 0x1f],
        &[0x0f, 0x40],
        &[0x0f, 0x42],
        &[0x0f, 0x45],
        &[0x0f, 0x4f],
        &[0x0f, 0x80],
        &[0x0f, 0x84],
        &[0x0f, 0x8f],
        &[0x0f, 0x90],
        &[0x0f, 0x94],
        &[0x0f, 0x9f],
        &[0x0f, 0xa3],
        &[0x0f, 0xa4],
        &[0x0f, 0xa5],
        &[0x0f, 0xab],
        &[0x0f, 0xac],
        &[0x0f, 0xad],
        &[0x0f, 0xaf],
        &[0x0f, 0xb3],
        &[0x0f, 0xb6],
        &[0x0f, 0xb7],
        &[0x0f, 0xba],
        &[0x0f, 0xbb],
        &[0x0f, 0xbe],
        &[0x0f, 0xbf],
        &[0xf3, 0x0f, 0x1e, 0xfa],
    ];
    const PREFIXES: &[u8] = &[
        0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x2e, 0x3e, 0x26, 0x36, 0x64, 0x65,
    ];
    let mut rng = Rng(0xfa57_0002);
    let (mut a, mut b) = (TestMachine::new(), TestMachine::new());
    let mut claimed = 0;
    for _ in 0..20_000 {
        let mut bytes = Vec::new();
        for _ in 0..rng.next() % 3 {
            bytes.push(PREFIXES[(rng.next() % PREFIXES.len() as u64) as usize]);
        }
        if rng.next().is_multiple_of(2) {
            bytes.push(0x40 | (rng.next() % 16) as u8);
        }
        bytes.extend_from_slice(OPCODES[(rng.next() % OPCODES.len() as u64) as usize]);
        for _ in 0..12 {
            bytes.push(rng.next() as u8);
        }
        let mut d = Decoder::with_ip(64, &bytes, CODE_BASE, DecoderOptions::NONE);
        let ins = d.decode();
        if ins.is_invalid() {
            continue;
        }
        let Some(fast) = fast_lookup(&ins) else {
            continue;
        };
        claimed += 1;
        let family = family_lookup(&ins);
        for _ in 0..8 {
            let seed = rng.next();
            randomise(&mut a, &mut Rng(seed), &ins);
            randomise(&mut b, &mut Rng(seed), &ins);
            let ra = run(&mut a, fast, &ins);
            let rb = run(&mut b, family, &ins);
            let what = format!(
                "{ins} ({:?}, bytes {:02x?})",
                ins.code(),
                &bytes[..ins.len()]
            );
            assert_eq!(ra, rb, "{what}: result");
            assert_eq!(a.cpu.state, b.cpu.state, "{what}: state");
            assert_eq!(
                mem(&a, DATA_BASE, 8192),
                mem(&b, DATA_BASE, 8192),
                "{what}: data"
            );
            assert_eq!(
                mem(&a, STACK_TOP - 4096, 4096),
                mem(&b, STACK_TOP - 4096, 4096),
                "{what}: stack"
            );
        }
    }
    assert!(claimed > 5_000, "only {claimed} random encodings claimed");
}
