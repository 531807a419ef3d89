//! A small x86-64 encoder for the baseline emitter's common fixed forms (MOV, LEA, the ALU
//! group, TEST, shifts by an immediate, SETcc, CMOVcc, MOVZX, IMUL, PUSH/POP, JMP/CALL r/m,
//! RET, LAHF/SAHF, STMXCSR/LDMXCSR), producing the bytes iced's `Encoder` produces for them;
//! anything else (another form, a prefix, a memory operand without a base register, AH..BH)
//! is left to iced.
//!
//! iced's encoder looks each instruction up in its tables and builds it operand by operand:
//! in libm's run (180,000 instructions in 931 baseline functions) that was over half of the
//! baseline tier's compile time. These forms are ~90% of what the emitter writes.

use iced_x86::{Code, Instruction, OpKind, Register};

/// How the operands of a form are placed.
#[derive(Clone, Copy)]
enum Form {
    /// ModRM.rm = operand 0 (register or memory), ModRM.reg = operand 1 (a register).
    Mr,
    /// ModRM.reg = operand 0 (a register), ModRM.rm = operand 1 (register or memory).
    Rm,
    /// ModRM.rm = operand 0, ModRM.reg = the opcode extension, then operand 1's immediate.
    Mi(u8, Imm),
    /// ModRM.rm = operand 0, ModRM.reg = the opcode extension; no other operand.
    M(u8),
    /// The register (operand 0) in the opcode's low three bits, then operand 1's immediate
    /// (if any).
    O(Imm),
    /// The accumulator implied (operand 0), then operand 1's immediate.
    A(Imm),
    /// No operands.
    Z,
}

/// Immediate sizes.
#[derive(Clone, Copy, PartialEq)]
enum Imm {
    No,
    B,
    D,
    Q,
}

/// Register operand sizes (what the ModRM register operands must be).
#[derive(Clone, Copy, PartialEq)]
enum Size {
    B8,
    W16,
    D32,
    Q64,
}

/// A form: opcode bytes (after any REX), REX.W, the operands' sizes (the ModRM.reg or opcode
/// register operand's, then the r/m operand's) and the placement.
struct Spec {
    op: &'static [u8],
    w: bool,
    reg: Size,
    rm: Size,
    form: Form,
}

const fn spec(op: &'static [u8], w: bool, reg: Size, rm: Size, form: Form) -> Option<Spec> {
    Some(Spec {
        op,
        w,
        reg,
        rm,
        form,
    })
}

/// The ALU group's opcodes: `base + 1` r/m,r; `base + 3` r,r/m; `base + 5` eAX,imm32;
/// `base + 4` AL,imm8; `81 /ext` r/m,imm32; `83 /ext` r/m,imm8.
macro_rules! alu {
    ($code:expr, $base:literal, $ext:literal,
     $rm64_r64:ident, $rm32_r32:ident, $r64_rm64:ident, $r32_rm32:ident,
     $rm64_imm32:ident, $rm32_imm32:ident, $rm64_imm8:ident, $rm32_imm8:ident,
     $rax_imm32:ident, $eax_imm32:ident, $al_imm8:ident, $rm8_r8:ident) => {
        match $code {
            Code::$rm64_r64 => return spec(&[$base + 1], true, Q64, Q64, Mr),
            Code::$rm32_r32 => return spec(&[$base + 1], false, D32, D32, Mr),
            Code::$rm8_r8 => return spec(&[$base], false, B8, B8, Mr),
            Code::$r64_rm64 => return spec(&[$base + 3], true, Q64, Q64, Rm),
            Code::$r32_rm32 => return spec(&[$base + 3], false, D32, D32, Rm),
            Code::$rm64_imm32 => return spec(&[0x81], true, Q64, Q64, Mi($ext, D)),
            Code::$rm32_imm32 => return spec(&[0x81], false, D32, D32, Mi($ext, D)),
            Code::$rm64_imm8 => return spec(&[0x83], true, Q64, Q64, Mi($ext, B)),
            Code::$rm32_imm8 => return spec(&[0x83], false, D32, D32, Mi($ext, B)),
            Code::$rax_imm32 => return spec(&[$base + 5], true, Q64, Q64, A(D)),
            Code::$eax_imm32 => return spec(&[$base + 5], false, D32, D32, A(D)),
            Code::$al_imm8 => return spec(&[$base + 4], false, B8, B8, A(B)),
            _ => {}
        }
    };
}

/// The encoding of `code`, when it is one of the forms handled here.
fn spec_of(code: Code) -> Option<Spec> {
    use Form::*;
    use Imm::{B, D, Q};
    use Size::*;
    alu!(
        code,
        0x00,
        0,
        Add_rm64_r64,
        Add_rm32_r32,
        Add_r64_rm64,
        Add_r32_rm32,
        Add_rm64_imm32,
        Add_rm32_imm32,
        Add_rm64_imm8,
        Add_rm32_imm8,
        Add_RAX_imm32,
        Add_EAX_imm32,
        Add_AL_imm8,
        Add_rm8_r8
    );
    alu!(
        code,
        0x08,
        1,
        Or_rm64_r64,
        Or_rm32_r32,
        Or_r64_rm64,
        Or_r32_rm32,
        Or_rm64_imm32,
        Or_rm32_imm32,
        Or_rm64_imm8,
        Or_rm32_imm8,
        Or_RAX_imm32,
        Or_EAX_imm32,
        Or_AL_imm8,
        Or_rm8_r8
    );
    alu!(
        code,
        0x10,
        2,
        Adc_rm64_r64,
        Adc_rm32_r32,
        Adc_r64_rm64,
        Adc_r32_rm32,
        Adc_rm64_imm32,
        Adc_rm32_imm32,
        Adc_rm64_imm8,
        Adc_rm32_imm8,
        Adc_RAX_imm32,
        Adc_EAX_imm32,
        Adc_AL_imm8,
        Adc_rm8_r8
    );
    alu!(
        code,
        0x18,
        3,
        Sbb_rm64_r64,
        Sbb_rm32_r32,
        Sbb_r64_rm64,
        Sbb_r32_rm32,
        Sbb_rm64_imm32,
        Sbb_rm32_imm32,
        Sbb_rm64_imm8,
        Sbb_rm32_imm8,
        Sbb_RAX_imm32,
        Sbb_EAX_imm32,
        Sbb_AL_imm8,
        Sbb_rm8_r8
    );
    alu!(
        code,
        0x20,
        4,
        And_rm64_r64,
        And_rm32_r32,
        And_r64_rm64,
        And_r32_rm32,
        And_rm64_imm32,
        And_rm32_imm32,
        And_rm64_imm8,
        And_rm32_imm8,
        And_RAX_imm32,
        And_EAX_imm32,
        And_AL_imm8,
        And_rm8_r8
    );
    alu!(
        code,
        0x28,
        5,
        Sub_rm64_r64,
        Sub_rm32_r32,
        Sub_r64_rm64,
        Sub_r32_rm32,
        Sub_rm64_imm32,
        Sub_rm32_imm32,
        Sub_rm64_imm8,
        Sub_rm32_imm8,
        Sub_RAX_imm32,
        Sub_EAX_imm32,
        Sub_AL_imm8,
        Sub_rm8_r8
    );
    alu!(
        code,
        0x30,
        6,
        Xor_rm64_r64,
        Xor_rm32_r32,
        Xor_r64_rm64,
        Xor_r32_rm32,
        Xor_rm64_imm32,
        Xor_rm32_imm32,
        Xor_rm64_imm8,
        Xor_rm32_imm8,
        Xor_RAX_imm32,
        Xor_EAX_imm32,
        Xor_AL_imm8,
        Xor_rm8_r8
    );
    alu!(
        code,
        0x38,
        7,
        Cmp_rm64_r64,
        Cmp_rm32_r32,
        Cmp_r64_rm64,
        Cmp_r32_rm32,
        Cmp_rm64_imm32,
        Cmp_rm32_imm32,
        Cmp_rm64_imm8,
        Cmp_rm32_imm8,
        Cmp_RAX_imm32,
        Cmp_EAX_imm32,
        Cmp_AL_imm8,
        Cmp_rm8_r8
    );
    // Shifts and rotates by an immediate: C1 /ext ib.
    let shift = |w: bool, s: Size, ext: u8| spec(&[0xC1], w, s, s, Mi(ext, B));
    match code {
        Code::Mov_rm64_r64 => spec(&[0x89], true, Q64, Q64, Mr),
        Code::Mov_rm32_r32 => spec(&[0x89], false, D32, D32, Mr),
        Code::Mov_rm8_r8 => spec(&[0x88], false, B8, B8, Mr),
        Code::Mov_r64_rm64 => spec(&[0x8B], true, Q64, Q64, Rm),
        Code::Mov_r32_rm32 => spec(&[0x8B], false, D32, D32, Rm),
        Code::Mov_r8_rm8 => spec(&[0x8A], false, B8, B8, Rm),
        Code::Mov_r64_imm64 => spec(&[0xB8], true, Q64, Q64, O(Q)),
        Code::Mov_r32_imm32 => spec(&[0xB8], false, D32, D32, O(D)),
        Code::Mov_rm64_imm32 => spec(&[0xC7], true, Q64, Q64, Mi(0, D)),
        Code::Mov_rm32_imm32 => spec(&[0xC7], false, D32, D32, Mi(0, D)),
        Code::Mov_rm8_imm8 => spec(&[0xC6], false, B8, B8, Mi(0, B)),
        Code::Lea_r64_m => spec(&[0x8D], true, Q64, Q64, Rm),
        Code::Lea_r32_m => spec(&[0x8D], false, D32, D32, Rm),
        Code::Test_rm64_r64 => spec(&[0x85], true, Q64, Q64, Mr),
        Code::Test_rm32_r32 => spec(&[0x85], false, D32, D32, Mr),
        Code::Test_rm8_r8 => spec(&[0x84], false, B8, B8, Mr),
        Code::Test_rm64_imm32 => spec(&[0xF7], true, Q64, Q64, Mi(0, D)),
        Code::Test_rm32_imm32 => spec(&[0xF7], false, D32, D32, Mi(0, D)),
        Code::Test_RAX_imm32 => spec(&[0xA9], true, Q64, Q64, A(D)),
        Code::Test_EAX_imm32 => spec(&[0xA9], false, D32, D32, A(D)),
        Code::Test_AL_imm8 => spec(&[0xA8], false, B8, B8, A(B)),
        Code::Rol_rm64_imm8 => shift(true, Q64, 0),
        Code::Ror_rm64_imm8 => shift(true, Q64, 1),
        Code::Shl_rm64_imm8 => shift(true, Q64, 4),
        Code::Shr_rm64_imm8 => shift(true, Q64, 5),
        Code::Sar_rm64_imm8 => shift(true, Q64, 7),
        Code::Rol_rm32_imm8 => shift(false, D32, 0),
        Code::Ror_rm32_imm8 => shift(false, D32, 1),
        Code::Shl_rm32_imm8 => shift(false, D32, 4),
        Code::Shr_rm32_imm8 => shift(false, D32, 5),
        Code::Sar_rm32_imm8 => shift(false, D32, 7),
        Code::Not_rm64 => spec(&[0xF7], true, Q64, Q64, M(2)),
        Code::Neg_rm64 => spec(&[0xF7], true, Q64, Q64, M(3)),
        Code::Inc_rm64 => spec(&[0xFF], true, Q64, Q64, M(0)),
        Code::Dec_rm64 => spec(&[0xFF], true, Q64, Q64, M(1)),
        Code::Imul_r64_rm64 => spec(&[0x0F, 0xAF], true, Q64, Q64, Rm),
        Code::Imul_r32_rm32 => spec(&[0x0F, 0xAF], false, D32, D32, Rm),
        Code::Movzx_r32_rm8 => spec(&[0x0F, 0xB6], false, D32, B8, Rm),
        Code::Movzx_r32_rm16 => spec(&[0x0F, 0xB7], false, D32, W16, Rm),
        Code::Movzx_r64_rm8 => spec(&[0x0F, 0xB6], true, Q64, B8, Rm),
        Code::Movzx_r64_rm16 => spec(&[0x0F, 0xB7], true, Q64, W16, Rm),
        Code::Movsxd_r64_rm32 => spec(&[0x63], true, Q64, D32, Rm),
        Code::Push_r64 => spec(&[0x50], false, Q64, Q64, O(Imm::No)),
        Code::Pop_r64 => spec(&[0x58], false, Q64, Q64, O(Imm::No)),
        Code::Xchg_r64_RAX => spec(&[0x90], true, Q64, Q64, O(Imm::No)),
        Code::Jmp_rm64 => spec(&[0xFF], false, Q64, Q64, M(4)),
        Code::Call_rm64 => spec(&[0xFF], false, Q64, Q64, M(2)),
        Code::Stmxcsr_m32 => spec(&[0x0F, 0xAE], false, D32, D32, M(3)),
        Code::Ldmxcsr_m32 => spec(&[0x0F, 0xAE], false, D32, D32, M(2)),
        Code::Retnq => spec(&[0xC3], false, Q64, Q64, Z),
        Code::Lahf => spec(&[0x9F], false, Q64, Q64, Z),
        Code::Sahf => spec(&[0x9E], false, Q64, Q64, Z),
        // SETcc r/m8: 0F 90+cc /0; CMOVcc r,r/m: 0F 40+cc (looked up last: the table scans
        // stay off the path of the common forms above).
        _ => {
            if let Some(cc) = setcc(code) {
                return spec(&SETCC[cc as usize], false, B8, B8, M(0));
            }
            let (cc, w) = cmovcc(code)?;
            let s = if w { Q64 } else { D32 };
            spec(&CMOVCC[cc as usize], w, s, s, Rm)
        }
    }
}

/// `0F base+cc` for each condition code `cc`.
const fn cc_opcodes(base: u8) -> [[u8; 2]; 16] {
    let mut t = [[0x0F, 0]; 16];
    let mut cc = 0;
    while cc < 16 {
        t[cc][1] = base + cc as u8;
        cc += 1;
    }
    t
}

/// SETcc's opcodes (`0F 90+cc`) and CMOVcc's (`0F 40+cc`), by condition code.
const SETCC: [[u8; 2]; 16] = cc_opcodes(0x90);
const CMOVCC: [[u8; 2]; 16] = cc_opcodes(0x40);

/// The condition code of a `SETcc r/m8`.
fn setcc(code: Code) -> Option<u8> {
    const CODES: [Code; 16] = [
        Code::Seto_rm8,
        Code::Setno_rm8,
        Code::Setb_rm8,
        Code::Setae_rm8,
        Code::Sete_rm8,
        Code::Setne_rm8,
        Code::Setbe_rm8,
        Code::Seta_rm8,
        Code::Sets_rm8,
        Code::Setns_rm8,
        Code::Setp_rm8,
        Code::Setnp_rm8,
        Code::Setl_rm8,
        Code::Setge_rm8,
        Code::Setle_rm8,
        Code::Setg_rm8,
    ];
    CODES.iter().position(|&c| c == code).map(|cc| cc as u8)
}

/// The condition code and REX.W of a `CMOVcc r32/r64, r/m`.
fn cmovcc(code: Code) -> Option<(u8, bool)> {
    const CODES: [Code; 16] = [
        Code::Cmovo_r64_rm64,
        Code::Cmovno_r64_rm64,
        Code::Cmovb_r64_rm64,
        Code::Cmovae_r64_rm64,
        Code::Cmove_r64_rm64,
        Code::Cmovne_r64_rm64,
        Code::Cmovbe_r64_rm64,
        Code::Cmova_r64_rm64,
        Code::Cmovs_r64_rm64,
        Code::Cmovns_r64_rm64,
        Code::Cmovp_r64_rm64,
        Code::Cmovnp_r64_rm64,
        Code::Cmovl_r64_rm64,
        Code::Cmovge_r64_rm64,
        Code::Cmovle_r64_rm64,
        Code::Cmovg_r64_rm64,
    ];
    if let Some(cc) = CODES.iter().position(|&c| c == code) {
        return Some((cc as u8, true));
    }
    // The 32-bit forms are each 64-bit form's code minus one.
    CODES
        .iter()
        .position(|&c| c as u32 == code as u32 + 1)
        .map(|cc| (cc as u8, false))
}

/// A general register's number (0..15) for an operand of `size`, and whether it needs a REX
/// prefix as a byte register (SPL, BPL, SIL, DIL); `None` for any other register (AH..BH
/// among them: they cannot be encoded with REX).
fn gpr(r: Register, size: Size) -> Option<(u8, bool)> {
    let (lo, ok) = match size {
        Size::Q64 => (Register::RAX, r.is_gpr64()),
        Size::D32 => (Register::EAX, r.is_gpr32()),
        Size::W16 => (Register::AX, r.is_gpr16()),
        Size::B8 => {
            if !r.is_gpr8() {
                return None;
            }
            // AL..BL, AH..BH, SPL..DIL, R8L..R15L.
            let i = r as u32 - Register::AL as u32;
            return match i {
                0..=3 => Some((i as u8, false)),
                4..=7 => None,
                8..=11 => Some((i as u8 - 4, true)),
                _ => Some((i as u8 - 4, false)),
            };
        }
    };
    ok.then(|| ((r as u32 - lo as u32) as u8, false))
}

/// The ModRM r/m part of operand `op`: (mod, rm, SIB, displacement bytes, REX.X, REX.B,
/// byte register needing REX), or `None` when iced must encode it.
struct RmPart {
    modrm: u8,
    sib: Option<u8>,
    disp: Disp,
    x: bool,
    b: bool,
    force_rex: bool,
}

#[derive(Clone, Copy)]
enum Disp {
    None,
    B(i8),
    D(i32),
}

fn rm_part(ins: &Instruction, op: u32, size: Size) -> Option<RmPart> {
    match ins.op_kind(op) {
        OpKind::Register => {
            let (n, force_rex) = gpr(ins.op_register(op), size)?;
            Some(RmPart {
                modrm: 0xC0 | (n & 7),
                sib: None,
                disp: Disp::None,
                x: false,
                b: n >= 8,
                force_rex,
            })
        }
        OpKind::Memory => memory(ins),
        _ => None,
    }
}

/// A `[base + index*scale + disp]` operand with 64-bit registers, chosen as iced chooses
/// (its `memory_displ_size`: 0 no displacement, 1 a byte if it fits, 8 four bytes).
fn memory(ins: &Instruction) -> Option<RmPart> {
    if ins.segment_prefix() != Register::None {
        return None;
    }
    let (base, _) = gpr(ins.memory_base(), Size::Q64)?;
    let index = match ins.memory_index() {
        Register::None => None,
        r => match gpr(r, Size::Q64)? {
            (4, _) => return None,
            (n, _) => Some(n),
        },
    };
    let disp64 = ins.memory_displacement64() as i64;
    let disp = i32::try_from(disp64).ok()?;
    let disp = match ins.memory_displ_size() {
        0 if disp != 0 => return None,
        0 if base & 7 != 5 => Disp::None,
        0 | 1 => match i8::try_from(disp) {
            Ok(b) => Disp::B(b),
            Err(_) => Disp::D(disp),
        },
        8 => Disp::D(disp),
        _ => return None,
    };
    let mode = match disp {
        Disp::None => 0x00,
        Disp::B(_) => 0x40,
        Disp::D(_) => 0x80,
    };
    let scale = match ins.memory_index_scale() {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        _ => return None,
    };
    let (modrm, sib) = match index {
        // (iced writes a SIB byte for a scale without an index)
        None if scale != 0 => return None,
        None if base & 7 != 4 => (mode | (base & 7), None),
        None => (mode | 4, Some(0x20 | (base & 7))),
        Some(i) => (mode | 4, Some((scale << 6) | ((i & 7) << 3) | (base & 7))),
    };
    Some(RmPart {
        modrm,
        sib,
        disp,
        x: index.is_some_and(|i| i >= 8),
        b: base >= 8,
        force_rex: false,
    })
}

/// Append `ins`'s encoding to `out` and return true, or leave `out` as it was and return
/// false when `ins` is not a form handled here (iced's encoder must take it).
pub fn encode(ins: &Instruction, out: &mut Vec<u8>) -> bool {
    let Some(s) = spec_of(ins.code()) else {
        return false;
    };
    if ins.has_lock_prefix()
        || ins.has_rep_prefix()
        || ins.has_repne_prefix()
        || ins.has_xacquire_prefix()
        || ins.has_xrelease_prefix()
    {
        return false;
    }
    let w = if s.w { 0x48 } else { 0 };
    let imm = |kind: Imm, out: &mut Vec<u8>| match kind {
        Imm::No => {}
        Imm::B => out.push(ins.immediate8()),
        Imm::D => out.extend_from_slice(&ins.immediate32().to_le_bytes()),
        Imm::Q => out.extend_from_slice(&ins.immediate64().to_le_bytes()),
    };
    let (rm, reg, ext) = match s.form {
        Form::Z => {
            out.extend_from_slice(s.op);
            return true;
        }
        Form::O(kind) => {
            let Some((n, force)) = gpr(ins.op0_register(), s.reg) else {
                return false;
            };
            let rex = w | (n >= 8) as u8;
            if rex != 0 || force {
                out.push(0x40 | rex);
            }
            out.extend_from_slice(&s.op[..s.op.len() - 1]);
            out.push(s.op[s.op.len() - 1] + (n & 7));
            imm(kind, out);
            return true;
        }
        Form::A(kind) => {
            if w != 0 {
                out.push(w);
            }
            out.extend_from_slice(s.op);
            imm(kind, out);
            return true;
        }
        Form::Mr => (rm_part(ins, 0, s.rm), gpr(ins.op1_register(), s.reg), None),
        Form::Rm => (rm_part(ins, 1, s.rm), gpr(ins.op0_register(), s.reg), None),
        Form::Mi(e, kind) => (rm_part(ins, 0, s.rm), Some((e, false)), Some(kind)),
        Form::M(e) => (rm_part(ins, 0, s.rm), Some((e, false)), None),
    };
    let (Some(rm), Some((r, force_reg))) = (rm, reg) else {
        return false;
    };
    let rex = w | ((r >= 8) as u8) << 2 | (rm.x as u8) << 1 | rm.b as u8;
    if rex != 0 || rm.force_rex || force_reg {
        out.push(0x40 | rex);
    }
    out.extend_from_slice(s.op);
    out.push(rm.modrm | (r & 7) << 3);
    out.extend(rm.sib);
    match rm.disp {
        Disp::None => {}
        Disp::B(b) => out.push(b as u8),
        Disp::D(d) => out.extend_from_slice(&d.to_le_bytes()),
    }
    if let Some(kind) = ext {
        imm(kind, out);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{encode, spec_of};
    use iced_x86::{Code, Encoder, Instruction, MemoryOperand, OpCodeOperandKind as K, Register};
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// An operand for `Instruction::with*`.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        R(Register),
        M(MemoryOperand),
        I(i32),
        U(u32),
        Q(u64),
    }

    fn pick(rng: &mut ChaCha8Rng, first: Register, n: u32) -> Register {
        let k = first as u32 + rng.next_u32() % n;
        Register::values().find(|r| *r as u32 == k).unwrap()
    }

    /// A random memory operand as the emitter's assembler makes them: a base, maybe an index
    /// (never RSP) with a scale, a displacement of any size, its size hint 0 (no displacement),
    /// 1 or 8.
    fn mem(rng: &mut ChaCha8Rng) -> MemoryOperand {
        let base = pick(rng, Register::RAX, 16);
        let index = match rng.next_u32() % 3 {
            0 => Register::None,
            _ => loop {
                let r = pick(rng, Register::RAX, 16);
                if r != Register::RSP {
                    break r;
                }
            },
        };
        let scale = match index {
            Register::None => 1,
            _ => 1 << (rng.next_u32() % 4),
        };
        let displ: i64 = match rng.next_u32() % 5 {
            0 => 0,
            1 => (rng.next_u32() % 256) as i64 - 128,
            2 => (rng.next_u32() % 512) as i64 - 256,
            3 => rng.next_u32() as i32 as i64,
            _ => [127, -128, 128, -129, i32::MAX as i64, i32::MIN as i64]
                [rng.next_u32() as usize % 6],
        };
        let displ_size = match (displ, rng.next_u32() % 2) {
            (0, 0) => 0,
            (_, 0) => 1,
            _ => 8,
        };
        MemoryOperand::new(base, index, scale, displ, displ_size, false, Register::None)
    }

    /// A random operand of `kind`, or `None` for a kind these forms do not have.
    fn operand(rng: &mut ChaCha8Rng, kind: K) -> Option<Op> {
        let m = rng.next_u32() & 1 == 0;
        Some(match kind {
            K::r8_or_mem if m => Op::M(mem(rng)),
            K::r16_or_mem if m => Op::M(mem(rng)),
            K::r32_or_mem if m => Op::M(mem(rng)),
            K::r64_or_mem if m => Op::M(mem(rng)),
            K::mem => Op::M(mem(rng)),
            K::r8_or_mem | K::r8_reg | K::r8_opcode => Op::R(pick(rng, Register::AL, 20)),
            K::r16_or_mem | K::r16_reg => Op::R(pick(rng, Register::AX, 16)),
            K::r32_or_mem | K::r32_reg | K::r32_opcode => Op::R(pick(rng, Register::EAX, 16)),
            K::r64_or_mem | K::r64_reg | K::r64_opcode => Op::R(pick(rng, Register::RAX, 16)),
            K::al => Op::R(Register::AL),
            K::eax => Op::R(Register::EAX),
            K::rax => Op::R(Register::RAX),
            K::imm8 => Op::U(rng.next_u32() % 256),
            K::imm8sex32 | K::imm8sex64 => Op::I((rng.next_u32() % 256) as i32 - 128),
            K::imm32 => Op::U(rng.next_u32()),
            K::imm32sex64 => Op::I(rng.next_u32() as i32),
            K::imm64 => Op::Q(rng.next_u64()),
            _ => return None,
        })
    }

    fn build(code: Code, ops: &[Op]) -> Instruction {
        use Op::*;
        let r = match *ops {
            [] => Ok(Instruction::with(code)),
            [R(a)] => Instruction::with1(code, a),
            [M(a)] => Instruction::with1(code, a),
            [R(a), R(b)] => Instruction::with2(code, a, b),
            [R(a), M(b)] => Instruction::with2(code, a, b),
            [M(a), R(b)] => Instruction::with2(code, a, b),
            [R(a), I(b)] => Instruction::with2(code, a, b),
            [R(a), U(b)] => Instruction::with2(code, a, b),
            [R(a), Q(b)] => Instruction::with2(code, a, b),
            [M(a), I(b)] => Instruction::with2(code, a, b),
            [M(a), U(b)] => Instruction::with2(code, a, b),
            _ => panic!("{code:?}: operands {ops:?}"),
        };
        r.unwrap_or_else(|e| panic!("{code:?} {ops:?}: {e}"))
    }

    /// Every form handled here, with random registers (AH..BH among them), memory operands
    /// (every base, index and scale, displacements at the byte and dword limits, each size
    /// hint) and immediates: the same bytes as iced's encoder, and only AH..BH declined.
    #[test]
    fn same_bytes_as_iceds_encoder() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut enc = Encoder::new(64);
        let mut forms = 0;
        let mut ours = Vec::new();
        for code in Code::values().filter(|&c| spec_of(c).is_some()) {
            forms += 1;
            let info = code.op_code();
            for _ in 0..400 {
                let ops: Vec<Op> = (0..info.op_count())
                    .map(|i| operand(&mut rng, info.op_kind(i)).expect("operand kind"))
                    .collect();
                let ins = build(code, &ops);
                let high_byte = (0..ins.op_count()).any(|i| {
                    ins.op_kind(i) == iced_x86::OpKind::Register
                        && (Register::AH..=Register::BH).contains(&ins.op_register(i))
                });
                ours.clear();
                let handled = encode(&ins, &mut ours);
                let r = enc.encode(&ins, 0);
                let iced = enc.take_buffer();
                match r {
                    Ok(_) => {
                        assert!(handled || high_byte, "{ins} ({code:?}) declined");
                        if handled {
                            assert_eq!(ours, iced, "{ins} ({code:?})");
                        }
                    }
                    Err(e) => assert!(!handled, "{ins} ({code:?}): iced refused ({e})"),
                }
            }
        }
        assert!(forms >= 150, "{forms} forms");
    }

    /// What iced must encode: a segment prefix, no base register, RSP as index, a RIP base, a
    /// LOCK prefix, a form not in the table.
    #[test]
    fn declines_what_it_does_not_cover() {
        use iced_x86::code_asm::*;
        let mut a = CodeAssembler::new(64).unwrap();
        a.mov(rax, qword_ptr(rbx + 8).fs()).unwrap();
        a.mov(rax, qword_ptr(0x1000u64)).unwrap();
        a.mov(rax, qword_ptr(rcx * 4 + 8)).unwrap();
        a.lock().add(qword_ptr(rdi), rax).unwrap();
        a.mov(ah, byte_ptr(rdi)).unwrap();
        a.movdqu(xmm0, xmmword_ptr(rdi)).unwrap();
        a.shl(rax, cl).unwrap();
        let mut out = Vec::new();
        for ins in a.instructions() {
            assert!(!encode(ins, &mut out), "{ins}");
        }
        let rsp_index = Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RAX,
            MemoryOperand::new(Register::RBX, Register::RSP, 1, 0, 0, false, Register::None),
        )
        .unwrap();
        assert!(!encode(&rsp_index, &mut out));
        let scale_alone = Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RAX,
            MemoryOperand::new(
                Register::RBX,
                Register::None,
                2,
                0,
                0,
                false,
                Register::None,
            ),
        )
        .unwrap();
        assert!(!encode(&scale_alone, &mut out));
        assert!(out.is_empty());
    }
}
