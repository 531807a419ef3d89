//! The table of instruction forms the generator draws from: every general-purpose instruction of
//! 64-bit mode in each operand size and operand kind, with the flags the SDM leaves undefined.
//!
//! Most forms are described by an iced `Code` whose name spells its operands
//! (`Add_rm32_imm8`); an `rm` operand expands into a register form (`:r`) and a memory form
//! (`:m`), and lockable memory forms get a `:lock` twin. Forms that need a setup (division,
//! indirect branches, POPF, ENTER/LEAVE, strings) have their own [`Kind`].
//!
//! The SIMD, x87 and state-management forms come from [`super::forms_simd`] and are appended
//! to the same table; every form carries its ISA group ([`Isa`]) for `--isa` and the report.

use super::forms_simd::simd_forms;
pub use super::forms_simd::Isa;
use super::host::Feature;
use iced_x86::{Code, Register, RepPrefixKind};
use std::collections::{BTreeMap, BTreeSet};

/// RFLAGS status bits.
pub const CF: u64 = 1;
pub const PF: u64 = 1 << 2;
pub const AF: u64 = 1 << 4;
pub const ZF: u64 = 1 << 6;
pub const SF: u64 = 1 << 7;
pub const DF: u64 = 1 << 10;
pub const OF: u64 = 1 << 11;
pub const STATUS: u64 = CF | PF | AF | ZF | SF | OF;

/// One operand of a plain form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A general-purpose register of this many bytes (1 includes AH..BH).
    R(u8),
    /// A memory operand of this many bytes, inside the data area.
    M(u8),
    /// An address that is computed but not accessed (LEA, NOP r/m): any registers.
    Addr,
    /// A 64-bit absolute `moffs` operand of this many bytes.
    Moffs(u8),
    /// An immediate of this many bits.
    Imm(u8),
    /// The constant 1 of the shift-by-one forms.
    One,
    /// An implicit register named by the form (AL, AX, EAX, RAX, CL).
    Fixed(Register),
    /// A register holding a small signed value (the bit offset of BT* with a memory operand).
    Small(u8),
    /// XMM0..15, YMM0..15, MM0..7, ST(0)..ST(7) chosen at random.
    Xmm,
    Ymm,
    Mm,
    Sti,
    /// A SIMD/x87 memory operand of this many bytes (aligned to its size, up to 64, nine times
    /// in ten; the rest tests the alignment rules).
    Mem(u16),
}

/// String instruction families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Str {
    Movs,
    Stos,
    Lods,
    Cmps,
    Scas,
}

/// How a form's instructions are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One instruction with these operands.
    Plain(Vec<Op>),
    /// DIV/IDIV: usually preceded by a setup that avoids #DE (zero or sign-extend the high half).
    Div(Vec<Op>),
    /// A relative branch (Jcc, JMP, LOOPcc, JrCXZ, CALL) over the following 1-byte instruction.
    Branch,
    /// JMP/CALL through a register loaded with LEA [rip+...]; `mem`: through memory instead.
    Indirect {
        mem: bool,
    },
    /// RET (with an imm16 if `imm`) to an address pushed just before.
    Ret {
        imm: bool,
    },
    /// POPF of the flags image pushed by PUSHF with status bits and DF flipped.
    Popf,
    Enter,
    Leave,
    /// A string instruction (operand size in bytes) with this repeat prefix.
    String(Str, u8, RepPrefixKind),
    /// An AVX2 gather: destination and mask registers (YMM if `ymm`), a VSIB operand with an
    /// XMM/YMM (`ymm_index`) index of dword/qword (`index_q`) lanes; the index and mask
    /// registers' initial lanes are chosen so that most elements address the data area.
    Gather {
        ymm: bool,
        ymm_index: bool,
        index_q: bool,
        elem_q: bool,
    },
    /// MASKMOVQ/MASKMOVDQU: a byte-masked store to [RDI] (RDI reserved, into the data area).
    MaskMov(Op),
    /// XSAVE/XSAVEOPT (or, with `restore`, XRSTOR preceded by `save` to the same place with
    /// the header's reserved bytes cleared): EDX:EAX a random subset of x87 | SSE | AVX.
    Xsave {
        restore: bool,
        save: Code,
    },
    /// A state load (FXRSTOR, FRSTOR, FLDENV) preceded three times in four by `save` to the same
    /// address, so that it loads a valid image.
    AfterSave {
        save: Code,
        size: u16,
    },
    /// LDMXCSR (`mxcsr`) or FLDCW preceded four times in five by a store of a sensible value.
    LoadCtl {
        mxcsr: bool,
    },
    /// F2XM1/FYL2XP1, whose result the SDM leaves undefined outside |ST(0)| <= `max` (f64
    /// bits): preceded by FLD of an in-range double stored to memory first.
    X87Domain {
        max: u64,
    },
    /// XGETBV: `mov ecx, sel` (0 mostly, 1 for XINUSE, or an invalid selector: #GP), XGETBV,
    /// then `and eax, 7`: the host's XCR0 (0x600e7 under Linux: AVX-512 and AMX enabled) is not
    /// the model's (x87 | SSE | AVX), so only the model's components are compared; EDX (bits
    /// 63:32) is 0 on both sides.
    Xgetbv,
}

/// Register roles a form needs reserved for the whole case.
pub mod need {
    /// RSI, RDI point into the data area, RCX holds a small count.
    pub const STR: u8 = 1;
    /// RBP points into the stack area (ENTER with nesting, LEAVE).
    pub const RBP: u8 = 2;
    /// A register with a small signed value (BT* bit offsets).
    pub const SMALL: u8 = 4;
    /// RDI points into the data area (MASKMOVQ/MASKMOVDQU).
    pub const RDI: u8 = 8;
}

/// One entry of the table.
#[derive(Clone, Debug)]
pub struct Form {
    /// Unique name: the iced code name plus `:r`/`:m`/`:lock` suffixes.
    pub name: String,
    pub code: Code,
    pub kind: Kind,
    /// Emit a LOCK prefix.
    pub lock: bool,
    /// Flags the SDM calls undefined after this instruction.
    pub undef_flags: u64,
    /// The SDM leaves the result itself undefined for some inputs (BSF/BSR of 0, BSWAP r16,
    /// SHLD/SHRD r16 with count > 16): only run where undefined behaviour is compared.
    pub undef_result: bool,
    pub feature: Feature,
    /// Roles from [`need`].
    pub needs: u8,
    /// ISA group (`--isa`, per-extension coverage).
    pub isa: Isa,
    /// x87 condition codes (C0..C3 bits of FSW) the SDM leaves undefined after this form.
    pub undef_fsw: u16,
    /// Not run at all, with the reason (listed among the skipped forms).
    pub excluded: Option<&'static str>,
}

const CCS: [&str; 16] = [
    "o", "no", "b", "ae", "e", "ne", "be", "a", "s", "ns", "p", "np", "l", "ge", "le", "g",
];
const SIZES: [u32; 4] = [8, 16, 32, 64];

fn code_map() -> BTreeMap<String, Code> {
    Code::values().map(|c| (format!("{c:?}"), c)).collect()
}

/// Mnemonic part of a code name (`VEX_Andn_r32_r32_rm32` -> `Andn`).
fn mnemonic(name: &str) -> &str {
    let n = name.strip_prefix("VEX_").unwrap_or(name);
    n.split('_').next().unwrap_or(n)
}

fn parse_ops(name: &str) -> Vec<(String, Option<Op>)> {
    let n = name.strip_prefix("VEX_").unwrap_or(name);
    n.split('_')
        .skip(1)
        .map(|t| {
            let num = |p: &str| t.strip_prefix(p).and_then(|s| s.parse::<u32>().ok());
            let op = if let Some(b) = num("rm") {
                Some(Op::R((b / 8) as u8)) // placeholder, expanded by the caller
            } else if let Some(b) = num("moffs") {
                Some(Op::Moffs((b / 8) as u8))
            } else if let Some(b) = num("imm") {
                Some(Op::Imm(b as u8))
            } else if let Some(b) = num("r") {
                Some(Op::R((b / 8) as u8))
            } else if let Some(b) = num("m") {
                Some(Op::M((b / 8) as u8))
            } else {
                match t {
                    "m" => Some(Op::Addr),
                    "1" => Some(Op::One),
                    "AL" => Some(Op::Fixed(Register::AL)),
                    "AX" => Some(Op::Fixed(Register::AX)),
                    "EAX" => Some(Op::Fixed(Register::EAX)),
                    "RAX" => Some(Op::Fixed(Register::RAX)),
                    "CL" => Some(Op::Fixed(Register::CL)),
                    _ => None, // encoding aliases such as F6r1, F7r1
                }
            };
            (t.to_string(), op)
        })
        .collect()
}

fn undef_flags(mn: &str, name: &str) -> u64 {
    let by_one = name.ends_with("_1");
    let size16 = name.contains("rm16");
    match mn {
        "Mul" | "Imul" => SF | ZF | AF | PF,
        "Div" | "Idiv" => STATUS,
        "And" | "Or" | "Xor" | "Test" => AF,
        "Shl" | "Shr" | "Sal" | "Sar" if by_one => AF,
        // Count > 1: OF undefined; count >= width (8/16-bit): CF undefined; AF always.
        "Shl" | "Shr" | "Sal" | "Sar" => AF | OF | CF,
        "Rol" | "Ror" | "Rcl" | "Rcr" if by_one => 0,
        "Rol" | "Ror" | "Rcl" | "Rcr" => OF,
        "Shld" | "Shrd" if size16 => STATUS,
        "Shld" | "Shrd" => AF | OF,
        "Bsf" | "Bsr" => CF | OF | SF | AF | PF,
        "Bt" | "Bts" | "Btr" | "Btc" => OF | SF | AF | PF,
        "Tzcnt" | "Lzcnt" => OF | SF | PF | AF,
        "Andn" | "Blsi" | "Blsmsk" | "Blsr" | "Bzhi" => AF | PF,
        "Bextr" => AF | SF | PF,
        _ => 0,
    }
}

fn undef_result(mn: &str, name: &str) -> bool {
    matches!(mn, "Bsf" | "Bsr")
        || name == "Bswap_r16"
        || (matches!(mn, "Shld" | "Shrd") && name.contains("rm16"))
}

fn feature(mn: &str) -> Feature {
    match mn {
        "Movbe" => Feature::Movbe,
        "Lzcnt" => Feature::Lzcnt,
        "Popcnt" => Feature::Popcnt,
        "Tzcnt" | "Andn" | "Bextr" | "Blsi" | "Blsmsk" | "Blsr" => Feature::Bmi1,
        "Bzhi" | "Pdep" | "Pext" | "Mulx" | "Rorx" | "Sarx" | "Shlx" | "Shrx" => Feature::Bmi2,
        "Adcx" | "Adox" => Feature::Adx,
        "Cmpxchg16b" => Feature::Cx16,
        "Lahf" | "Sahf" => Feature::LahfSahf,
        _ => Feature::Base,
    }
}

fn lockable(mn: &str) -> bool {
    matches!(
        mn,
        "Add"
            | "Adc"
            | "And"
            | "Btc"
            | "Btr"
            | "Bts"
            | "Cmpxchg"
            | "Cmpxchg8b"
            | "Cmpxchg16b"
            | "Dec"
            | "Inc"
            | "Neg"
            | "Not"
            | "Or"
            | "Sbb"
            | "Sub"
            | "Xor"
            | "Xadd"
            | "Xchg"
    )
}

/// Names of the plain (and DIV-like) forms, before r/m expansion.
fn plain_names() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut add = |s: String| v.push(s);
    for m in ["Add", "Or", "Adc", "Sbb", "And", "Sub", "Xor", "Cmp"] {
        for s in [
            "rm8_r8",
            "rm16_r16",
            "rm32_r32",
            "rm64_r64",
            "r8_rm8",
            "r16_rm16",
            "r32_rm32",
            "r64_rm64",
            "AL_imm8",
            "AX_imm16",
            "EAX_imm32",
            "RAX_imm32",
            "rm8_imm8",
            "rm16_imm16",
            "rm32_imm32",
            "rm64_imm32",
            "rm16_imm8",
            "rm32_imm8",
            "rm64_imm8",
        ] {
            add(format!("{m}_{s}"));
        }
    }
    for s in [
        "rm8_r8",
        "rm16_r16",
        "rm32_r32",
        "rm64_r64",
        "AL_imm8",
        "AX_imm16",
        "EAX_imm32",
        "RAX_imm32",
        "rm8_imm8",
        "rm16_imm16",
        "rm32_imm32",
        "rm64_imm32",
        "rm8_imm8_F6r1",
        "rm16_imm16_F7r1",
        "rm32_imm32_F7r1",
        "rm64_imm32_F7r1",
    ] {
        add(format!("Test_{s}"));
    }
    for s in [
        "rm8_r8",
        "rm16_r16",
        "rm32_r32",
        "rm64_r64",
        "r8_rm8",
        "r16_rm16",
        "r32_rm32",
        "r64_rm64",
        "AL_moffs8",
        "AX_moffs16",
        "EAX_moffs32",
        "RAX_moffs64",
        "moffs8_AL",
        "moffs16_AX",
        "moffs32_EAX",
        "moffs64_RAX",
        "r8_imm8",
        "r16_imm16",
        "r32_imm32",
        "r64_imm64",
        "rm8_imm8",
        "rm16_imm16",
        "rm32_imm32",
        "rm64_imm32",
    ] {
        add(format!("Mov_{s}"));
    }
    for m in ["Movzx", "Movsx"] {
        for s in [
            "r16_rm8", "r32_rm8", "r64_rm8", "r16_rm16", "r32_rm16", "r64_rm16",
        ] {
            add(format!("{m}_{s}"));
        }
    }
    for s in ["r16_rm16", "r32_rm32", "r64_rm32"] {
        add(format!("Movsxd_{s}"));
    }
    for cc in CCS {
        for b in [16, 32, 64] {
            add(format!("Cmov{cc}_r{b}_rm{b}"));
        }
        add(format!("Set{cc}_rm8"));
    }
    for b in SIZES {
        add(format!("Xchg_rm{b}_r{b}"));
        add(format!("Xadd_rm{b}_r{b}"));
        add(format!("Cmpxchg_rm{b}_r{b}"));
        for m in ["Inc", "Dec", "Neg", "Not", "Mul", "Imul", "Div", "Idiv"] {
            add(format!("{m}_rm{b}"));
        }
        for m in ["Rol", "Ror", "Rcl", "Rcr", "Shl", "Shr", "Sal", "Sar"] {
            for c in ["1", "CL", "imm8"] {
                add(format!("{m}_rm{b}_{c}"));
            }
        }
    }
    add("Xchg_r16_AX".into());
    add("Xchg_r32_EAX".into());
    add("Xchg_r64_RAX".into());
    add("Cmpxchg8b_m64".into());
    add("Cmpxchg16b_m128".into());
    for b in [16, 32, 64] {
        add(format!("Bswap_r{b}"));
        add(format!("Lea_r{b}_m"));
        add(format!("Movbe_r{b}_m{b}"));
        add(format!("Movbe_m{b}_r{b}"));
        for c in ["imm8", "CL"] {
            add(format!("Shld_rm{b}_r{b}_{c}"));
            add(format!("Shrd_rm{b}_r{b}_{c}"));
        }
        add(format!("Imul_r{b}_rm{b}"));
        add(format!("Imul_r{b}_rm{b}_imm8"));
        add(format!(
            "Imul_r{b}_rm{b}_imm{}",
            if b == 16 { 16 } else { 32 }
        ));
        for m in ["Bt", "Bts", "Btr", "Btc"] {
            add(format!("{m}_rm{b}_r{b}"));
            add(format!("{m}_rm{b}_imm8"));
        }
        for m in ["Bsf", "Bsr", "Tzcnt", "Lzcnt", "Popcnt"] {
            add(format!("{m}_r{b}_rm{b}"));
        }
        add(format!("Nop_rm{b}"));
    }
    for b in [32, 64] {
        for m in ["Sarx", "Shlx", "Shrx", "Bextr", "Bzhi"] {
            add(format!("VEX_{m}_r{b}_rm{b}_r{b}"));
        }
        for m in ["Andn", "Pdep", "Pext", "Mulx"] {
            add(format!("VEX_{m}_r{b}_r{b}_rm{b}"));
        }
        for m in ["Blsi", "Blsmsk", "Blsr"] {
            add(format!("VEX_{m}_r{b}_rm{b}"));
        }
        add(format!("VEX_Rorx_r{b}_rm{b}_imm8"));
        for m in ["Adcx", "Adox"] {
            add(format!("{m}_r{b}_rm{b}"));
        }
    }
    for s in [
        "Push_r16",
        "Push_r64",
        "Pop_r16",
        "Pop_r64",
        "Push_rm16",
        "Push_rm64",
        "Pop_rm16",
        "Pop_rm64",
        "Pushq_imm8",
        "Pushq_imm32",
        "Pushw_imm8",
        "Push_imm16",
        "Pushfw",
        "Pushfq",
        "Lahf",
        "Sahf",
        "Cbw",
        "Cwde",
        "Cdqe",
        "Cwd",
        "Cdq",
        "Cqo",
        "Clc",
        "Stc",
        "Cmc",
        "Cld",
        "Std",
        "Nopd",
        "Nopw",
        "Nopq",
    ] {
        add(s.into());
    }
    v
}

/// LOCK on an instruction or operand kind that does not allow it: #UD on both sides.
const LOCK_UD: [&str; 5] = [
    "Add_r32_rm32:m",
    "Add_rm32_r32:r",
    "Mov_rm32_r32:m",
    "Cmp_rm64_r64:m",
    "Bt_rm32_imm8:m",
];

/// Build the whole table. Panics if a name does not exist in iced (a bug in this file,
/// caught by the unit test).
pub fn table() -> Vec<Form> {
    let codes = code_map();
    let code = |n: &str| -> Code {
        *codes
            .get(n)
            .unwrap_or_else(|| panic!("unknown iced code {n}"))
    };
    let mut out = Vec::new();
    fn push(
        out: &mut Vec<Form>,
        name: String,
        c: Code,
        kind: Kind,
        lock: bool,
        mn: &str,
        base: &str,
    ) {
        let needs = match &kind {
            Kind::String(..) => need::STR,
            Kind::Enter | Kind::Leave => need::RBP,
            Kind::Plain(ops) if ops.iter().any(|o| matches!(o, Op::Small(_))) => need::SMALL,
            _ => 0,
        };
        out.push(Form {
            name,
            code: c,
            kind,
            lock,
            undef_flags: undef_flags(mn, base),
            undef_result: undef_result(mn, base),
            feature: feature(mn),
            needs,
            isa: Isa::Gp,
            undef_fsw: 0,
            excluded: None,
        });
    }

    for base in plain_names() {
        let c = code(&base);
        let mn = mnemonic(&base).to_string();
        let toks = parse_ops(&base);
        let rm_at = toks.iter().position(|(t, _)| t.starts_with("rm"));
        let ops: Vec<Op> = toks.iter().filter_map(|(_, o)| *o).collect();
        let is_div = mn == "Div" || mn == "Idiv";
        let variants: Vec<(String, Vec<Op>)> = match rm_at {
            None => vec![(base.clone(), ops)],
            Some(i) => {
                let size = match toks[i].1 {
                    Some(Op::R(s)) => s,
                    _ => unreachable!(),
                };
                let mut reg = ops.clone();
                let mut mem = ops.clone();
                reg[i] = Op::R(size);
                mem[i] = Op::M(size);
                if matches!(mn.as_str(), "Bt" | "Bts" | "Btr" | "Btc") {
                    if let Some(Op::R(s)) = mem.get(1).copied() {
                        mem[1] = Op::Small(s);
                    }
                }
                vec![(format!("{base}:r"), reg), (format!("{base}:m"), mem)]
            }
        };
        for (name, ops) in variants {
            let mem_dest = matches!(ops.first(), Some(Op::M(_)));
            let kind = if is_div {
                Kind::Div(ops.clone())
            } else {
                Kind::Plain(ops.clone())
            };
            push(&mut out, name.clone(), c, kind, false, &mn, &base);
            if mem_dest && lockable(&mn) {
                push(
                    &mut out,
                    format!("{name}:lock"),
                    c,
                    Kind::Plain(ops.clone()),
                    true,
                    &mn,
                    &base,
                );
            }
            if LOCK_UD.contains(&name.as_str()) {
                push(
                    &mut out,
                    format!("{name}:lock#UD"),
                    c,
                    Kind::Plain(ops),
                    true,
                    &mn,
                    &base,
                );
            }
        }
    }

    let special = |out: &mut Vec<Form>, name: &str, kind: Kind| {
        let c = code(name);
        push(out, name.to_string(), c, kind, false, mnemonic(name), name);
    };
    for cc in CCS {
        special(&mut out, &format!("J{cc}_rel8_64"), Kind::Branch);
        special(&mut out, &format!("J{cc}_rel32_64"), Kind::Branch);
    }
    for n in [
        "Jmp_rel8_64",
        "Jmp_rel32_64",
        "Call_rel32_64",
        "Loop_rel8_64_RCX",
        "Loope_rel8_64_RCX",
        "Loopne_rel8_64_RCX",
        "Loop_rel8_64_ECX",
        "Loope_rel8_64_ECX",
        "Loopne_rel8_64_ECX",
        "Jrcxz_rel8_64",
        "Jecxz_rel8_64",
    ] {
        special(&mut out, n, Kind::Branch);
    }
    for n in ["Jmp_rm64", "Call_rm64"] {
        let c = code(n);
        let mn = mnemonic(n).to_string();
        push(
            &mut out,
            format!("{n}:r"),
            c,
            Kind::Indirect { mem: false },
            false,
            &mn,
            n,
        );
        push(
            &mut out,
            format!("{n}:m"),
            c,
            Kind::Indirect { mem: true },
            false,
            &mn,
            n,
        );
    }
    special(&mut out, "Retnq", Kind::Ret { imm: false });
    special(&mut out, "Retnq_imm16", Kind::Ret { imm: true });
    special(&mut out, "Popfq", Kind::Popf);
    special(&mut out, "Popfw", Kind::Popf);
    special(&mut out, "Enterq_imm16_imm8", Kind::Enter);
    special(&mut out, "Enterw_imm16_imm8", Kind::Enter);
    special(&mut out, "Leaveq", Kind::Leave);
    special(&mut out, "Leavew", Kind::Leave);

    let strs = [
        ("Movsb_m8_m8", Str::Movs, 1),
        ("Movsw_m16_m16", Str::Movs, 2),
        ("Movsd_m32_m32", Str::Movs, 4),
        ("Movsq_m64_m64", Str::Movs, 8),
        ("Stosb_m8_AL", Str::Stos, 1),
        ("Stosw_m16_AX", Str::Stos, 2),
        ("Stosd_m32_EAX", Str::Stos, 4),
        ("Stosq_m64_RAX", Str::Stos, 8),
        ("Lodsb_AL_m8", Str::Lods, 1),
        ("Lodsw_AX_m16", Str::Lods, 2),
        ("Lodsd_EAX_m32", Str::Lods, 4),
        ("Lodsq_RAX_m64", Str::Lods, 8),
        ("Cmpsb_m8_m8", Str::Cmps, 1),
        ("Cmpsw_m16_m16", Str::Cmps, 2),
        ("Cmpsd_m32_m32", Str::Cmps, 4),
        ("Cmpsq_m64_m64", Str::Cmps, 8),
        ("Scasb_AL_m8", Str::Scas, 1),
        ("Scasw_AX_m16", Str::Scas, 2),
        ("Scasd_EAX_m32", Str::Scas, 4),
        ("Scasq_RAX_m64", Str::Scas, 8),
    ];
    for (n, s, size) in strs {
        let c = code(n);
        let mn = mnemonic(n).to_string();
        let reps: &[(&str, RepPrefixKind)] = match s {
            Str::Cmps | Str::Scas => &[
                ("", RepPrefixKind::None),
                (":repe", RepPrefixKind::Repe),
                (":repne", RepPrefixKind::Repne),
            ],
            _ => &[("", RepPrefixKind::None), (":rep", RepPrefixKind::Repe)],
        };
        for &(suffix, rep) in reps {
            push(
                &mut out,
                format!("{n}{suffix}"),
                c,
                Kind::String(s, size, rep),
                false,
                &mn,
                n,
            );
        }
    }
    let names: BTreeSet<String> = out.iter().map(|f| format!("{:?}", f.code)).collect();
    out.extend(simd_forms(&names));
    out
}

/// Does `name` match the `--forms` pattern? Case-insensitive; `|` or `,` separate
/// alternatives; `^` and `$` anchor an alternative; `.*` (or `*`) matches anything; otherwise an
/// alternative matches as a substring. (A small subset of regular expressions.)
pub fn matches_filter(name: &str, pattern: &str) -> bool {
    let name = name.to_ascii_lowercase();
    pattern
        .split(['|', ','])
        .filter(|a| !a.is_empty())
        .any(|alt| {
            let alt = alt.to_ascii_lowercase();
            let (anchored_start, rest) = match alt.strip_prefix('^') {
                Some(r) => (true, r),
                None => (false, alt.as_str()),
            };
            let (anchored_end, rest) = match rest.strip_suffix('$') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let parts: Vec<&str> = rest.split(".*").flat_map(|p| p.split('*')).collect();
            glob(&name, &parts, anchored_start, anchored_end)
        })
}

fn glob(s: &str, parts: &[&str], start: bool, end: bool) -> bool {
    let mut pos = 0usize;
    for (i, p) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if i == 0 && start {
            if !s.starts_with(p) {
                return false;
            }
            pos = p.len();
            if last && end {
                return s.len() == p.len();
            }
            continue;
        }
        if last && end {
            return s.len() >= pos + p.len() && s.ends_with(p);
        }
        match s[pos..].find(p) {
            Some(at) => pos += at + p.len(),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn table_builds_with_unique_names_and_covers_the_families() {
        let t = table();
        let names: BTreeSet<&str> = t.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names.len(), t.len(), "duplicate form names");
        for must in [
            "Add_rm8_r8:r",
            "Add_rm64_imm8:m:lock",
            "Mov_rm8_r8:m",
            "Cmovg_r16_rm16:m",
            "Div_rm64:r",
            "Idiv_rm8:m",
            "Shld_rm16_r16_CL:m",
            "VEX_Pdep_r64_r64_rm64:r",
            "Cmpxchg16b_m128:lock",
            "Jg_rel8_64",
            "Loopne_rel8_64_ECX",
            "Scasq_RAX_m64:repne",
            "Movsb_m8_m8:rep",
            "Enterq_imm16_imm8",
            "Add_rm32_r32:r:lock#UD",
            "Bt_rm64_r64:m",
        ] {
            assert!(names.contains(must), "missing {must}");
        }
        assert!(t.len() > 600, "only {} forms", t.len());
        let bt = t.iter().find(|f| f.name == "Bt_rm64_r64:m").unwrap();
        assert_eq!(bt.needs, need::SMALL);
        assert_eq!(bt.undef_flags, OF | SF | AF | PF);
        let div = t.iter().find(|f| f.name == "Div_rm32:m").unwrap();
        assert!(matches!(div.kind, Kind::Div(_)));
        assert_eq!(div.undef_flags, STATUS);
        let mulx = t.iter().find(|f| f.name.starts_with("VEX_Mulx")).unwrap();
        assert_eq!(mulx.feature, Feature::Bmi2);
        assert!(
            t.iter()
                .find(|f| f.name == "Bsf_r32_rm32:r")
                .unwrap()
                .undef_result
        );
        assert!(
            !t.iter()
                .find(|f| f.name == "Bswap_r32")
                .unwrap()
                .undef_result
        );
    }

    #[test]
    fn filter_subset_of_regex() {
        assert!(matches_filter("Mov_rm8_r8:r", "^mov_"));
        assert!(!matches_filter("Movzx_r16_rm8:r", "^mov_"));
        assert!(matches_filter("Movzx_r16_rm8:r", "movzx|nop"));
        assert!(matches_filter("Nopd", "^Mov_|^Nop"));
        assert!(matches_filter("Add_rm8_r8:m:lock", "add.*lock$"));
        assert!(!matches_filter("Add_rm8_r8:m", "add.*lock$"));
        assert!(matches_filter("Jg_rel8_64", "^J*64$"));
        assert!(!matches_filter("Xadd_rm8_r8:r", "^add"));
    }
}
