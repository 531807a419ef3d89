//! The SIMD, x87 and state-management forms, data-driven from iced: every legacy and VEX
//! encoding whose CPUID feature is one of MMX, SSE, SSE2, SSE3, SSSE3, SSE4.1, SSE4.2, x87
//! (incl. FCMOV/FCOMI and SSE3's FISTTP), AVX, AVX2, FMA, F16C, FXSR, XSAVE(OPT), CLFLUSH(OPT)
//! and PAUSE, grouped by ISA extension ([`Isa`]). Operands come from the iced code name
//! (`Pshufd_xmm_xmmm128_imm8`: `xmm`, `xmmm128` = XMM or m128 (a `:r` and a `:m` form),
//! `imm8`); the few forms that need a setup get their own [`Kind`]. A form the interpreter does
//! not implement yet shows up as "not implemented" in the report, not as a failure.

use super::forms::{need, Form, Kind, Op};
use super::host::Feature;
use super::simd::fsw;
use iced_x86::{Code, CpuidFeature as C, EncodingKind, Mnemonic as M, Register};
use std::collections::BTreeSet;

/// ISA groups of the form table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// General-purpose instructions (incl. BMI1/2, ADX, MOVBE, LZCNT, POPCNT).
    Gp,
    Mmx,
    Sse,
    Sse2,
    Sse3,
    Ssse3,
    Sse41,
    Sse42,
    X87,
    Avx,
    Avx2,
    Fma,
    F16c,
    /// FXSAVE/FXRSTOR, XSAVE/XRSTOR/XSAVEOPT, XGETBV/XSETBV.
    Xsave,
}

impl Isa {
    pub const ALL: [Isa; 14] = [
        Isa::Gp,
        Isa::Mmx,
        Isa::Sse,
        Isa::Sse2,
        Isa::Sse3,
        Isa::Ssse3,
        Isa::Sse41,
        Isa::Sse42,
        Isa::X87,
        Isa::Avx,
        Isa::Avx2,
        Isa::Fma,
        Isa::F16c,
        Isa::Xsave,
    ];

    /// The `--isa` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Gp => "gp",
            Isa::Mmx => "mmx",
            Isa::Sse => "sse",
            Isa::Sse2 => "sse2",
            Isa::Sse3 => "sse3",
            Isa::Ssse3 => "ssse3",
            Isa::Sse41 => "sse4.1",
            Isa::Sse42 => "sse4.2",
            Isa::X87 => "x87",
            Isa::Avx => "avx",
            Isa::Avx2 => "avx2",
            Isa::Fma => "fma",
            Isa::F16c => "f16c",
            Isa::Xsave => "xsave",
        }
    }

    /// Parse an `--isa` list: names separated by `,` or `|`; `all`, and `simd` (every group
    /// but `gp`). Also accepts `sse41`/`sse42`.
    pub fn parse_list(s: &str) -> Result<Vec<Isa>, String> {
        let mut out: Vec<Isa> = Vec::new();
        for w in s.split([',', '|']).map(str::trim).filter(|w| !w.is_empty()) {
            let w = w.to_ascii_lowercase();
            match w.as_str() {
                "all" => out.extend(Isa::ALL),
                "simd" => out.extend(Isa::ALL.iter().filter(|&&i| i != Isa::Gp)),
                "sse41" => out.push(Isa::Sse41),
                "sse42" => out.push(Isa::Sse42),
                _ => match Isa::ALL.iter().find(|i| i.name() == w) {
                    Some(&i) => out.push(i),
                    None => {
                        let names: Vec<&str> = Isa::ALL.iter().map(|i| i.name()).collect();
                        return Err(format!(
                            "unknown ISA group '{w}' (known: {}, simd, all)",
                            names.join(", ")
                        ));
                    }
                },
            }
        }
        out.sort();
        out.dedup();
        if out.is_empty() {
            return Err("empty --isa list".into());
        }
        Ok(out)
    }

    /// Does this group use the SIMD/x87 state (set and compared per case)?
    pub fn is_simd(self) -> bool {
        self != Isa::Gp
    }
}

/// ISA group and CPUID feature of an iced code, if it belongs to the SIMD/x87 table.
fn classify(code: Code) -> Option<(Isa, Feature)> {
    if !matches!(code.encoding(), EncodingKind::Legacy | EncodingKind::VEX) {
        return None;
    }
    if code.mnemonic() == M::Wait {
        return Some((Isa::X87, Feature::Base));
    }
    let f = code.cpuid_features();
    if f.iter()
        .any(|x| matches!(x, C::FPU | C::FPU287 | C::FPU387))
    {
        let rest_ok = f
            .iter()
            .all(|x| matches!(x, C::FPU | C::FPU287 | C::FPU387 | C::CMOV | C::SSE3));
        if !rest_ok {
            return None;
        }
        let feat = if f.contains(&C::SSE3) {
            Feature::Sse3
        } else {
            Feature::Base
        };
        return Some((Isa::X87, feat));
    }
    let [one] = f else { return None };
    Some(match one {
        C::MMX => (Isa::Mmx, Feature::Base),
        C::SSE => (Isa::Sse, Feature::Base),
        C::SSE2 => (Isa::Sse2, Feature::Base),
        C::SSE3 => (Isa::Sse3, Feature::Sse3),
        C::SSSE3 => (Isa::Ssse3, Feature::Ssse3),
        C::SSE4_1 => (Isa::Sse41, Feature::Sse41),
        C::SSE4_2 => (Isa::Sse42, Feature::Sse42),
        C::AVX => (Isa::Avx, Feature::Avx),
        C::AVX2 => (Isa::Avx2, Feature::Avx2),
        C::FMA => (Isa::Fma, Feature::Fma),
        C::F16C => (Isa::F16c, Feature::F16c),
        C::FXSR => (Isa::Xsave, Feature::Base),
        C::XSAVE => (Isa::Xsave, Feature::Xsave),
        C::XSAVEOPT => (Isa::Xsave, Feature::Xsaveopt),
        // XSAVEC has no host feature of its own in the harness: every host with XSAVEC has
        // XSAVE (the reverse does not hold; such a host would report XSAVEC forms as faults).
        C::XSAVEC => (Isa::Xsave, Feature::Xsave),
        C::CLFSH | C::PAUSE => (Isa::Sse2, Feature::Base),
        C::CLFLUSHOPT => (Isa::Sse2, Feature::Clflushopt),
        _ => return None,
    })
}

/// Forms left out on purpose, with the reason (none at the moment: XGETBV, whose XCR0
/// differs by design, is compared masked to the model's components, see [`Kind::Xgetbv`]).
fn exclusion(_code: Code) -> Option<&'static str> {
    None
}

/// One operand token of a code name: a plain operand, or an r/m pair (register | memory).
enum Tok {
    One(Op),
    RegOrMem(Op, Op),
    /// `rDI` (MASKMOV*) or a VSIB operand: the form needs its own builder.
    Special,
}

fn token(t: &str) -> Option<Tok> {
    let num = |p: &str| t.strip_prefix(p).and_then(|s| s.parse::<u16>().ok());
    let mem = |bits: u16| Op::Mem(bits / 8);
    Some(match t {
        "xmm" => Tok::One(Op::Xmm),
        "ymm" => Tok::One(Op::Ymm),
        "mm" => Tok::One(Op::Mm),
        "sti" => Tok::One(Op::Sti),
        "st0" => Tok::One(Op::Fixed(Register::ST0)),
        "AX" => Tok::One(Op::Fixed(Register::AX)),
        "imm8" => Tok::One(Op::Imm(8)),
        "r16" => Tok::One(Op::R(2)),
        "r32" => Tok::One(Op::R(4)),
        "r64" => Tok::One(Op::R(8)),
        "mem" => Tok::One(Op::Mem(XSAVE_LEN)),
        "rDI" | "vm32x" | "vm32y" | "vm64x" | "vm64y" => Tok::Special,
        "m32fp" | "m32int" => Tok::One(Op::Mem(4)),
        "m64fp" | "m64int" => Tok::One(Op::Mem(8)),
        "m80fp" | "m80bcd" => Tok::One(Op::Mem(10)),
        "m16int" => Tok::One(Op::Mem(2)),
        _ => {
            if let Some(b) = num("xmmm") {
                Tok::RegOrMem(Op::Xmm, mem(b))
            } else if let Some(b) = num("ymmm") {
                Tok::RegOrMem(Op::Ymm, mem(b))
            } else if let Some(b) = num("mmm") {
                Tok::RegOrMem(Op::Mm, mem(b))
            } else if let Some(b) = num("rm") {
                Tok::RegOrMem(Op::R((b / 8) as u8), Op::M((b / 8) as u8))
            } else if let Some(rest) = t.strip_suffix("byte") {
                Tok::One(Op::Mem(rest.strip_prefix('m')?.parse().ok()?))
            } else if let Some(b) = num("m") {
                Tok::One(mem(b))
            } else if let Some((r, m)) = t.split_once('m').filter(|(r, _)| r.starts_with('r')) {
                // r32m8, r64m16, r64m32: a GPR of one size or memory of another.
                let r: u8 = r[1..].parse().ok()?;
                let m: u8 = m.parse().ok()?;
                Tok::RegOrMem(Op::R(r / 8), Op::M(m / 8))
            } else {
                return None;
            }
        }
    })
}

/// Encoding-alias suffixes in iced names (`_0F11`, `_DCD0`, `_E9`): no operand.
fn is_alias(t: &str) -> bool {
    (t.len() == 2 || t.len() == 4)
        && t.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase())
}

/// Bytes XSAVE writes with EDX:EAX within x87 | SSE | AVX: legacy area, header, YMM_Hi128.
pub const XSAVE_LEN: u16 = 832;

/// x87 condition codes the SDM leaves undefined after an instruction.
fn undef_fsw(mn: M) -> u16 {
    const C023: u16 = fsw::C0 | fsw::C2 | fsw::C3;
    match mn {
        M::Fadd
        | M::Faddp
        | M::Fiadd
        | M::Fsub
        | M::Fsubp
        | M::Fisub
        | M::Fsubr
        | M::Fsubrp
        | M::Fisubr
        | M::Fmul
        | M::Fmulp
        | M::Fimul
        | M::Fdiv
        | M::Fdivp
        | M::Fidiv
        | M::Fdivr
        | M::Fdivrp
        | M::Fidivr
        | M::Fabs
        | M::Fchs
        | M::Fld
        | M::Fild
        | M::Fbld
        | M::Fst
        | M::Fstp
        | M::Fstpnce
        | M::Fist
        | M::Fistp
        | M::Fisttp
        | M::Fbstp
        | M::Fsqrt
        | M::Frndint
        | M::Fscale
        | M::Fxtract
        | M::Fxch
        | M::Fcmovb
        | M::Fcmove
        | M::Fcmovbe
        | M::Fcmovu
        | M::Fcmovnb
        | M::Fcmovne
        | M::Fcmovnbe
        | M::Fcmovnu
        | M::Fdecstp
        | M::Fincstp
        | M::Fld1
        | M::Fldl2t
        | M::Fldl2e
        | M::Fldpi
        | M::Fldlg2
        | M::Fldln2
        | M::Fldz
        | M::F2xm1
        | M::Fyl2x
        | M::Fyl2xp1
        | M::Fpatan => C023,
        M::Fsin | M::Fcos | M::Fsincos | M::Fptan => fsw::C0 | fsw::C3,
        M::Fclex
        | M::Fnclex
        | M::Fldcw
        | M::Fstcw
        | M::Fnstcw
        | M::Fstsw
        | M::Fnstsw
        | M::Fstenv
        | M::Fnstenv
        | M::Ffree
        | M::Ffreep
        | M::Fnop
        | M::Feni
        | M::Fneni
        | M::Fdisi
        | M::Fndisi
        | M::Fsetpm
        | M::Fnsetpm => fsw::CC,
        _ => 0,
    }
}

/// Results the SDM leaves implementation-specific: approximations (RCP*, RSQRT*) and the x87
/// transcendentals. Compared only where undefined behaviour is compared (the policy host).
fn undef_result(mn: M) -> bool {
    matches!(
        mn,
        M::Rcpps
            | M::Rcpss
            | M::Rsqrtps
            | M::Rsqrtss
            | M::Vrcpps
            | M::Vrcpss
            | M::Vrsqrtps
            | M::Vrsqrtss
            | M::Fsin
            | M::Fcos
            | M::Fsincos
            | M::Fptan
            | M::Fpatan
            | M::F2xm1
            | M::Fyl2x
            | M::Fyl2xp1
    )
}

/// The builder a code needs, if not [`Kind::Plain`].
fn special_kind(code: Code, name: &str, ops: &[Tok]) -> Option<Kind> {
    let k = match code {
        Code::Xsave_mem | Code::Xsaveopt_mem => Kind::Xsave {
            restore: false,
            save: code,
        },
        Code::Xsave64_mem | Code::Xsaveopt64_mem => Kind::Xsave {
            restore: false,
            save: code,
        },
        Code::Xsavec_mem | Code::Xsavec64_mem => Kind::Xsave {
            restore: false,
            save: code,
        },
        Code::Xrstor_mem => Kind::Xsave {
            restore: true,
            save: Code::Xsave_mem,
        },
        Code::Xrstor64_mem => Kind::Xsave {
            restore: true,
            save: Code::Xsave64_mem,
        },
        Code::Fxrstor_m512byte => Kind::AfterSave {
            save: Code::Fxsave_m512byte,
            size: 512,
        },
        Code::Fxrstor64_m512byte => Kind::AfterSave {
            save: Code::Fxsave64_m512byte,
            size: 512,
        },
        Code::Frstor_m94byte => Kind::AfterSave {
            save: Code::Fnsave_m94byte,
            size: 94,
        },
        Code::Frstor_m108byte => Kind::AfterSave {
            save: Code::Fnsave_m108byte,
            size: 108,
        },
        Code::Fldenv_m14byte => Kind::AfterSave {
            save: Code::Fnstenv_m14byte,
            size: 14,
        },
        Code::Fldenv_m28byte => Kind::AfterSave {
            save: Code::Fnstenv_m28byte,
            size: 28,
        },
        Code::Ldmxcsr_m32 | Code::VEX_Vldmxcsr_m32 => Kind::LoadCtl { mxcsr: true },
        Code::Fldcw_m2byte => Kind::LoadCtl { mxcsr: false },
        // F2XM1: -1 <= x <= 1; FYL2XP1: |x| < 1 - sqrt(2)/2 (0.2928...; 0.29 here).
        Code::F2xm1 => Kind::X87Domain {
            max: 0x3ff0_0000_0000_0000,
        },
        Code::Fyl2xp1 => Kind::X87Domain {
            max: 0x3fd2_8f5c_28f5_c28f,
        },
        Code::Xgetbv => Kind::Xgetbv,
        _ => {
            if !ops.iter().any(|t| matches!(t, Tok::Special)) {
                return None;
            }
            if name.contains("_rDI_") {
                let reg = if name.contains("_mm_") {
                    Op::Mm
                } else {
                    Op::Xmm
                };
                Kind::MaskMov(reg)
            } else {
                let toks: Vec<&str> = name.split('_').collect();
                let vm = toks.iter().find(|t| t.starts_with("vm"))?;
                let mn = format!("{:?}", code.mnemonic()).to_ascii_lowercase();
                Kind::Gather {
                    ymm: toks.get(2) == Some(&"ymm"),
                    ymm_index: vm.ends_with('y'),
                    index_q: vm.starts_with("vm64"),
                    elem_q: mn.ends_with('q') || mn.ends_with("pd"),
                }
            }
        }
    };
    Some(k)
}

/// Every SIMD/x87 form; `skip` holds code names already in the general-purpose table.
pub fn simd_forms(skip: &BTreeSet<String>) -> Vec<Form> {
    let mut out = Vec::new();
    for code in Code::values() {
        let Some((isa, feature)) = classify(code) else {
            continue;
        };
        let name = format!("{code:?}");
        if skip.contains(&name) {
            continue;
        }
        let body = name.strip_prefix("VEX_").unwrap_or(&name);
        let toks: Option<Vec<Tok>> = body
            .split('_')
            .skip(1)
            .filter(|t| !is_alias(t))
            .map(token)
            .collect();
        let Some(toks) = toks else {
            // A name this parser does not know: listed as excluded so it is visible.
            out.push(form(name, code, Kind::Plain(Vec::new()), isa, feature));
            let f = out.last_mut().expect("just pushed");
            f.excluded = Some("operand kinds not understood by the form parser");
            continue;
        };
        let mn = code.mnemonic();
        if let Some(kind) = special_kind(code, &name, &toks) {
            let mut f = form(name, code, kind, isa, feature);
            f.undef_result = undef_result(mn);
            f.needs = match f.kind {
                Kind::MaskMov(_) => need::RDI,
                _ => 0,
            };
            out.push(f);
            continue;
        }
        let rm = toks.iter().position(|t| matches!(t, Tok::RegOrMem(..)));
        let pick = |mem: bool| -> Vec<Op> {
            toks.iter()
                .map(|t| match *t {
                    Tok::One(o) => o,
                    Tok::RegOrMem(r, m) => {
                        if mem {
                            m
                        } else {
                            r
                        }
                    }
                    Tok::Special => Op::One,
                })
                .collect()
        };
        let variants = match rm {
            None => vec![(name.clone(), pick(false))],
            Some(_) => vec![
                (format!("{name}:r"), pick(false)),
                (format!("{name}:m"), pick(true)),
            ],
        };
        for (n, ops) in variants {
            let mut f = form(n, code, Kind::Plain(ops), isa, feature);
            f.excluded = exclusion(code);
            f.undef_fsw = undef_fsw(mn);
            f.undef_result = undef_result(mn);
            out.push(f);
        }
    }
    out
}

fn form(name: String, code: Code, kind: Kind, isa: Isa, feature: Feature) -> Form {
    Form {
        name,
        code,
        kind,
        lock: false,
        undef_flags: 0,
        undef_result: false,
        feature,
        needs: 0,
        isa,
        undef_fsw: undef_fsw(code.mnemonic()),
        excluded: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::difftest::forms::table;

    #[test]
    fn simd_table_covers_the_extensions_and_parses_every_name() {
        let t = table();
        let simd: Vec<&Form> = t.iter().filter(|f| f.isa.is_simd()).collect();
        assert!(simd.len() > 1500, "{} SIMD forms", simd.len());
        let unparsed: Vec<&str> = simd
            .iter()
            .filter(|f| f.excluded == Some("operand kinds not understood by the form parser"))
            .map(|f| f.name.as_str())
            .collect();
        assert!(unparsed.is_empty(), "{unparsed:?}");
        for isa in Isa::ALL {
            let n = t.iter().filter(|f| f.isa == isa).count();
            assert!(n >= 4, "{}: {n} forms", isa.name());
        }
        let get = |n: &str| {
            t.iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n}"))
        };
        assert_eq!(
            get("Paddb_xmm_xmmm128:m").kind,
            Kind::Plain(vec![Op::Xmm, Op::Mem(16)])
        );
        assert_eq!(
            get("VEX_Vblendvps_ymm_ymm_ymmm256_ymm:r").kind,
            Kind::Plain(vec![Op::Ymm, Op::Ymm, Op::Ymm, Op::Ymm])
        );
        assert_eq!(
            get("Pextrb_r32m8_xmm_imm8:m").kind,
            Kind::Plain(vec![Op::M(1), Op::Xmm, Op::Imm(8)])
        );
        assert_eq!(
            get("Fadd_st0_sti").kind,
            Kind::Plain(vec![Op::Fixed(Register::ST0), Op::Sti])
        );
        assert_eq!(get("Fld_m80fp").kind, Kind::Plain(vec![Op::Mem(10)]));
        assert_eq!(get("Fld_m80fp").undef_fsw, fsw::C0 | fsw::C2 | fsw::C3);
        assert_eq!(get("Fcom_st0_sti_DCD0").undef_fsw, 0);
        assert_eq!(get("Fisttp_m16int").feature, Feature::Sse3);
        assert_eq!(get("Fisttp_m16int").isa, Isa::X87);
        assert_eq!(get("Wait").isa, Isa::X87);
        assert!(get("Fsin").undef_result);
        assert!(get("F2xm1").undef_result);
        assert!(matches!(get("Fyl2xp1").kind, Kind::X87Domain { .. }));
        assert!(get("Rcpps_xmm_xmmm128:r").undef_result);
        assert!(matches!(
            get("VEX_Vpgatherqd_xmm_vm64y_xmm").kind,
            Kind::Gather {
                ymm: false,
                ymm_index: true,
                index_q: true,
                elem_q: false
            }
        ));
        assert!(matches!(
            get("VEX_Vgatherdpd_ymm_vm32x_ymm").kind,
            Kind::Gather {
                ymm: true,
                ymm_index: false,
                index_q: false,
                elem_q: true
            }
        ));
        assert_eq!(get("Maskmovq_rDI_mm_mm").kind, Kind::MaskMov(Op::Mm));
        assert_eq!(get("Maskmovq_rDI_mm_mm").needs, need::RDI);
        assert!(get("Xgetbv").excluded.is_none());
        assert_eq!(get("Xgetbv").kind, Kind::Xgetbv);
        assert_eq!(get("VEX_Vfmadd231ps_ymm_ymm_ymmm256:m").isa, Isa::Fma);
        assert_eq!(get("Crc32_r64_rm8:r").isa, Isa::Sse42);
        assert_eq!(get("Pause").isa, Isa::Sse2);
        assert_eq!(
            get("Fxsave64_m512byte").kind,
            Kind::Plain(vec![Op::Mem(512)])
        );
        // General-purpose forms keep their group and are not duplicated.
        assert_eq!(get("Add_rm8_r8:r").isa, Isa::Gp);
        assert!(!t.iter().any(|f| f.name == "Nop_rm32" && f.isa.is_simd()));
    }

    #[test]
    fn isa_lists_parse() {
        assert_eq!(Isa::parse_list("gp").unwrap(), vec![Isa::Gp]);
        assert_eq!(
            Isa::parse_list("SSE4.1,avx2|sse41").unwrap(),
            vec![Isa::Sse41, Isa::Avx2]
        );
        assert_eq!(Isa::parse_list("all").unwrap().len(), Isa::ALL.len());
        assert!(!Isa::parse_list("simd").unwrap().contains(&Isa::Gp));
        assert!(Isa::parse_list("sse5").is_err());
        assert!(Isa::parse_list("").is_err());
    }
}
