//! Differential test of the VEX move and integer families (`avx_mov`, `avx_int`, `avx_int2`)
//! against the host CPU: every VEX code these families claim is built from iced's operand
//! description with random registers (YMM/XMM 0-3, EAX/ECX/EDX), register and memory
//! operands and random imm8, run natively and in the interpreter over deterministic
//! pseudo-random inputs; YMM0-3 (all 256 bits), RAX/RCX/RDX, the status flags and the memory
//! buffer must agree bit for bit.

use crate::cpu::ExitReason;
use crate::ops::avx_common::get_ymm;
use crate::ops::native::XorShift;
use crate::ops::{avx_int, avx_int2, avx_mov};
use crate::state::flags::{FIXED1, IF, STATUS};
use crate::state::reg;
use crate::testkit::{TestMachine, DATA_BASE};
use iced_x86::code_asm::*;
use iced_x86::{Code, Encoder, Instruction, Mnemonic, OpKind, Register};
use memmap2::{Mmap, MmapMut};

/// Register image exchanged with the native code: YMM0-3 at 0, RAX 128, RCX 136, RDX 144,
/// RFLAGS 152.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    ymm: [[u128; 2]; 4],
    rax: u64,
    rcx: u64,
    rdx: u64,
    rflags: u64,
}

const MEM_LEN: usize = 128;

#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mem([u8; MEM_LEN]);

struct Native {
    _map: Mmap,
    f: extern "sysv64" fn(*mut Frame, *mut u8),
}

impl Native {
    fn new(insn: &[u8]) -> Native {
        let mut a = CodeAssembler::new(64).unwrap();
        let ymms = [ymm0, ymm1, ymm2, ymm3];
        a.mov(r8, rdi).unwrap();
        for (i, y) in ymms.into_iter().enumerate() {
            a.vmovdqu(y, ymmword_ptr(r8 + 32 * i as i32)).unwrap();
        }
        a.mov(rax, qword_ptr(r8 + 128)).unwrap();
        a.mov(rcx, qword_ptr(r8 + 136)).unwrap();
        a.mov(rdx, qword_ptr(r8 + 144)).unwrap();
        a.push(qword_ptr(r8 + 152)).unwrap();
        a.popfq().unwrap();
        a.db(insn).unwrap();
        a.pushfq().unwrap();
        a.pop(qword_ptr(r8 + 152)).unwrap();
        a.mov(qword_ptr(r8 + 128), rax).unwrap();
        a.mov(qword_ptr(r8 + 136), rcx).unwrap();
        a.mov(qword_ptr(r8 + 144), rdx).unwrap();
        for (i, y) in ymms.into_iter().enumerate() {
            a.vmovdqu(ymmword_ptr(r8 + 32 * i as i32), y).unwrap();
        }
        a.vzeroupper().unwrap();
        a.ret().unwrap();
        let code = a.assemble(0).unwrap();
        let mut map = MmapMut::map_anon(4096).unwrap();
        map[..code.len()].copy_from_slice(&code);
        let map = map.make_exec().unwrap();
        // SAFETY: the mapping holds a complete System V function built just above: it reads
        // and writes only the frame (rdi, kept in r8) and the memory buffer (rsi) where the
        // instruction's memory operand lives, clobbers only caller-saved state (r8, rax, rcx,
        // rdx, ymm0-15, status flags; VZEROALL/VZEROUPPER touch only caller-saved vector
        // state) and returns. The mapping lives as long as `Native`.
        let f = unsafe {
            core::mem::transmute::<*const u8, extern "sysv64" fn(*mut Frame, *mut u8)>(map.as_ptr())
        };
        Native { _map: map, f }
    }

    fn run(&self, frame: &mut Frame, mem: &mut Mem, off: usize) {
        assert!(off + 32 <= MEM_LEN);
        (self.f)(frame, mem.0[off..].as_mut_ptr());
    }
}

fn emulate(m: &mut TestMachine, code: &[u8], frame: &mut Frame, mem: &mut Mem, off: usize) {
    let st = &mut m.cpu.state;
    for i in 0..4 {
        crate::ops::avx_common::set_ymm(st, i, frame.ymm[i]);
    }
    st.gpr[reg::RAX] = frame.rax;
    st.gpr[reg::RCX] = frame.rcx;
    st.gpr[reg::RDX] = frame.rdx;
    st.gpr[reg::RSI] = DATA_BASE + off as u64;
    st.rflags = (st.rflags & !STATUS) | (frame.rflags & STATUS);
    m.load(DATA_BASE, &mem.0);
    let e = m.run_code(code, 1);
    assert_eq!(e.reason, ExitReason::Budget, "interpreter stopped: {e:?}");
    let st = &m.cpu.state;
    for i in 0..4 {
        frame.ymm[i] = get_ymm(st, i);
    }
    frame.rax = st.gpr[reg::RAX];
    frame.rcx = st.gpr[reg::RCX];
    frame.rdx = st.gpr[reg::RDX];
    frame.rflags = st.rflags;
    m.ram.read_phys(DATA_BASE, &mut mem.0).unwrap();
}

/// Is the code claimed by one of the families under test?
fn claimed(ins: &Instruction) -> bool {
    avx_mov::lookup(ins).is_some()
        || avx_int::lookup(ins).is_some()
        || avx_int2::lookup(ins).is_some()
}

fn aligned(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Vmovdqa | Vmovaps | Vmovapd | Vmovntdq | Vmovntps | Vmovntpd | Vmovntdqa
    )
}

/// Operand kinds of a code, read from its iced name (`VEX_Vpaddb_ymm_ymm_ymmm256`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum K {
    Xmm,
    Ymm,
    XmmM,
    YmmM,
    Mem,
    Gpr32,
    Gpr64,
    Gpr32M,
    Gpr64M,
    Imm8,
}

fn kinds(code: Code) -> Option<Vec<K>> {
    let name = format!("{code:?}");
    let rest = name.strip_prefix("VEX_")?;
    let mut out = Vec::new();
    for t in rest.split('_').skip(1) {
        out.push(match t {
            "xmm" => K::Xmm,
            "ymm" => K::Ymm,
            "r32" => K::Gpr32,
            "r64" => K::Gpr64,
            "imm8" => K::Imm8,
            "0F11" => continue,
            _ if t.starts_with("xmmm") => K::XmmM,
            _ if t.starts_with("ymmm") => K::YmmM,
            _ if t.starts_with("rm32") || t.starts_with("r32m") => K::Gpr32M,
            _ if t.starts_with("rm64") || t.starts_with("r64m") => K::Gpr64M,
            _ if t.starts_with('m') => K::Mem,
            _ => return None,
        });
    }
    Some(out)
}

/// Register `base + n`.
fn nth_reg(base: Register, n: usize) -> Register {
    Register::values()
        .skip_while(|&r| r != base)
        .nth(n)
        .unwrap()
}

/// Build one instruction of `code` with random operands; `mem` picks memory for the operand
/// that may be memory. None when the code's operands are outside what this test builds.
fn build(code: Code, rng: &mut XorShift, mem: bool) -> Option<Instruction> {
    let gpr32 = [Register::EAX, Register::ECX, Register::EDX];
    let gpr64 = [Register::RAX, Register::RCX, Register::RDX];
    let mut ins = Instruction::default();
    ins.set_code(code);
    for (i, k) in kinds(code)?.into_iter().enumerate() {
        let i = i as u32;
        let v = (rng.next() % 4) as usize;
        let g = v % 3;
        let op = match k {
            K::Xmm => Some(nth_reg(Register::XMM0, v)),
            K::Ymm => Some(nth_reg(Register::YMM0, v)),
            K::XmmM if !mem => Some(nth_reg(Register::XMM0, v)),
            K::YmmM if !mem => Some(nth_reg(Register::YMM0, v)),
            K::Gpr32 => Some(gpr32[g]),
            K::Gpr64 => Some(gpr64[g]),
            K::Gpr32M if !mem => Some(gpr32[g]),
            K::Gpr64M if !mem => Some(gpr64[g]),
            K::Imm8 => {
                ins.set_op_kind(i, OpKind::Immediate8);
                ins.set_immediate8(rng.next() as u8);
                continue;
            }
            _ => None,
        };
        match op {
            Some(r) => {
                ins.set_op_kind(i, OpKind::Register);
                ins.set_op_register(i, r);
            }
            None => {
                ins.set_op_kind(i, OpKind::Memory);
                ins.set_memory_base(Register::RSI);
                ins.set_memory_index(Register::None);
                ins.set_memory_index_scale(1);
                ins.set_memory_displacement64(0);
                ins.set_memory_displ_size(0);
            }
        }
    }
    Some(ins)
}

fn encode(ins: &Instruction) -> Vec<u8> {
    let mut e = Encoder::new(64);
    e.encode(ins, 0)
        .unwrap_or_else(|err| panic!("encode {:?}: {err}", ins.code()));
    e.take_buffer()
}

fn v128(rng: &mut XorShift) -> u128 {
    let a = (rng.next() as u128) << 64 | rng.next() as u128;
    match rng.next() % 6 {
        // sparse bytes (zeros for the string compares, equal lanes for compares)
        0 => {
            let bits = rng.next();
            let m: [u8; 16] =
                core::array::from_fn(|i| if bits >> (i % 64) & 1 != 0 { 0xff } else { 0 });
            a & u128::from_le_bytes(m)
        }
        1 => a & 0x7f7f_7f7f_7f7f_7f7f_7f7f_7f7f_7f7f_7f7f,
        2 => (rng.next() % 40) as u128,
        _ => a,
    }
}

fn frame(rng: &mut XorShift) -> Frame {
    let mut f = Frame {
        ymm: core::array::from_fn(|_| [v128(rng), v128(rng)]),
        rax: rng.next(),
        rcx: rng.next(),
        rdx: rng.next(),
        rflags: (rng.next() & STATUS) | FIXED1 | IF,
    };
    // Related inputs: copy lanes or single elements between registers now and then.
    if rng.next().is_multiple_of(3) {
        let (a, b) = ((rng.next() % 4) as usize, (rng.next() % 4) as usize);
        let mask = (rng.next() as u128) << 64 | rng.next() as u128;
        f.ymm[a][0] = (f.ymm[a][0] & mask) | (f.ymm[b][0] & !mask);
    }
    // Small explicit lengths for VPCMPESTRx, sometimes negative.
    if rng.next().is_multiple_of(2) {
        f.rax = (rng.next() % 40).wrapping_sub(20);
        f.rdx = (rng.next() % 40).wrapping_sub(20);
    }
    f
}

#[test]
fn avx_move_and_integer_forms_match_the_host_cpu() {
    if !std::is_x86_feature_detected!("avx2") {
        eprintln!("host lacks AVX2: skipped");
        return;
    }
    let mut rng = XorShift::new(0x5eed_a5c1);
    let mut m = TestMachine::new();
    let mut forms = 0;
    let mut cases = 0;
    for code in Code::values() {
        let Some(ks) = kinds(code) else {
            continue;
        };
        let Some(probe) = build(code, &mut rng, false) else {
            continue;
        };
        if !claimed(&probe) {
            continue;
        }
        forms += 1;
        let has_mem = ks
            .iter()
            .any(|k| matches!(k, K::XmmM | K::YmmM | K::Mem | K::Gpr32M | K::Gpr64M));
        let has_reg_form = !ks.contains(&K::Mem);
        for variant in 0..24 {
            let mem = has_mem && (!has_reg_form || variant % 2 == 1);
            let ins = build(code, &mut rng, mem).unwrap();
            let bytes = encode(&ins);
            let native = Native::new(&bytes);
            for _ in 0..24 {
                let off = if aligned(code.mnemonic()) {
                    32 * (rng.next() % 2) as usize
                } else {
                    (rng.next() % 64) as usize
                };
                let f0 = frame(&mut rng);
                let mut mem0 = Mem([0; MEM_LEN]);
                for b in mem0.0.iter_mut() {
                    *b = rng.next() as u8;
                }
                let (mut fn_, mut mn) = (f0, mem0);
                native.run(&mut fn_, &mut mn, off);
                let (mut fi, mut mi) = (f0, mem0);
                emulate(&mut m, &bytes, &mut fi, &mut mi, off);
                fn_.rflags &= STATUS;
                fi.rflags &= STATUS;
                assert_eq!(
                    (fi, mi),
                    (fn_, mn),
                    "{ins} ({code:?}) off {off} inputs {f0:x?} mem {mem0:x?}"
                );
                cases += 1;
            }
        }
    }
    eprintln!("{forms} VEX forms, {cases} cases");
    assert!(forms > 250, "only {forms} forms claimed");
}

/// Every VEX code of a mnemonic in the lane tables is claimed (no operand shape is missed).
#[test]
fn every_vex_form_of_a_table_mnemonic_is_claimed() {
    let mut rng = XorShift::new(1);
    let mut seen = 0;
    for code in Code::values() {
        let m = code.mnemonic();
        let listed = avx_int::binary_semantic(m).is_some()
            || avx_int::unary_semantic(m).is_some()
            || avx_int::shift_imm_semantic(m).is_some();
        if !listed || kinds(code).is_none() {
            continue;
        }
        seen += 1;
        let ins = build(code, &mut rng, false).unwrap();
        assert!(claimed(&ins), "{code:?} not claimed");
    }
    assert!(seen > 180, "{seen}");
}
