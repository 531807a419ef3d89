//! How a case ended on one side, and the comparison of the two sides field by field.

use super::case::{Case, GPR_NAMES};
use super::forms::{AF, CF, DF, OF, PF, SF, STATUS, ZF};
use super::layout::DATA_ADDR;
use super::native::{NativeStop, NATIVE_TIMEOUT};
use super::simd::{self, SimdState};
use iced_x86::{CpuidFeature, Decoder, DecoderOptions, Mnemonic, OpKind};
use std::fmt::Write;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// The final INT3 was reached (RIP is after it).
    Done,
    /// An exception; `addr` is the faulting linear address of a #PF.
    Fault { vector: u8, addr: Option<u64> },
    /// Anything else (an unexpected signal, budget exhausted, ...).
    Other(String),
}

/// The observable result of one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub end: End,
    pub rip: u64,
    pub gpr: [u64; 16],
    pub flags: u64,
    /// YMM/MXCSR/x87 state at the end (SIMD cases only).
    pub simd: Option<SimdState>,
    /// Human-readable detail (the interpreter's fault text, the native signal).
    pub note: String,
}

/// Exception mnemonic of a vector.
pub fn vector_name(v: u8) -> &'static str {
    match v {
        0 => "#DE",
        1 => "#DB",
        3 => "#BP",
        4 => "#OF",
        5 => "#BR",
        6 => "#UD",
        7 => "#NM",
        8 => "#DF",
        10 => "#TS",
        11 => "#NP",
        12 => "#SS",
        13 => "#GP",
        14 => "#PF",
        16 => "#MF",
        17 => "#AC",
        19 => "#XM",
        _ => "#?",
    }
}

impl End {
    pub fn describe(&self) -> String {
        match self {
            End::Done => "reached INT3".into(),
            End::Fault {
                vector,
                addr: Some(a),
            } => format!("{} at address {a:#x}", vector_name(*vector)),
            End::Fault { vector, .. } => vector_name(*vector).to_string(),
            End::Other(s) => s.clone(),
        }
    }
}

/// `si_code` values of SIGFPE (asm-generic/siginfo.h).
const FPE_INTDIV: i32 = 1;
const FPE_INTOVF: i32 = 2;

/// Which floating-point exception the instruction at `rip` in `code` raises: x87
/// instructions and FWAIT only #MF (16); MMX instructions (EMMS included) and instructions with
/// an MMX register operand #MF when an x87 exception is pending (`x87_pending`: FSW.ES after the
/// stop), else #XM (CVTPI2PS & co. can raise either); everything else #XM (19).
pub fn fp_vector(code: &[u8], rip: u64, x87_pending: bool) -> u8 {
    let off = rip.wrapping_sub(super::layout::CODE_ADDR) as usize;
    if off >= code.len() {
        return 19;
    }
    let mut d = Decoder::with_ip(64, &code[off..], rip, DecoderOptions::NONE);
    let ins = d.decode();
    let x87 = ins.mnemonic() == Mnemonic::Wait
        || ins.cpuid_features().iter().any(|f| {
            matches!(
                f,
                CpuidFeature::FPU | CpuidFeature::FPU287 | CpuidFeature::FPU387
            )
        });
    let mmx = ins.cpuid_features().contains(&CpuidFeature::MMX)
        || (0..ins.op_count()).any(|i| {
            ins.op_kind(i) == OpKind::Register
                && (iced_x86::Register::MM0..=iced_x86::Register::MM7).contains(&ins.op_register(i))
        });
    if x87 || (mmx && x87_pending) {
        16
    } else {
        19
    }
}

impl Outcome {
    /// Map a native stop to an outcome: SIGTRAP is the final INT3; SIGFPE is #DE (si_code
    /// FPE_INTDIV), #OF (FPE_INTOVF), else a floating-point exception: #MF when the instruction
    /// at RIP is an x87/MMX/FWAIT instruction, #XM otherwise; SIGILL #UD; SIGSEGV #GP (si_code
    /// SI_KERNEL: alignment and canonical-address faults) or #PF (with si_addr); SIGBUS #SS or
    /// #AC. `code` is the case's code (to classify SIGFPE).
    pub fn from_native(s: &NativeStop, code: &[u8]) -> Outcome {
        const SI_KERNEL: i32 = 0x80;
        const BUS_ADRALN: i32 = 1;
        let fault = |vector: u8, addr: Option<u64>| End::Fault { vector, addr };
        let end = match s.signal {
            _ if s.timed_out => End::Other(format!(
                "native run did not stop within {} s (killed)",
                NATIVE_TIMEOUT.as_secs()
            )),
            libc::SIGTRAP => End::Done,
            libc::SIGFPE if s.si_code == FPE_INTDIV => fault(0, None),
            libc::SIGFPE if s.si_code == FPE_INTOVF => fault(4, None),
            libc::SIGFPE => {
                let pending = match &s.simd {
                    Some(st) => st.fsw & simd::fsw::ES != 0,
                    None => true,
                };
                fault(fp_vector(code, s.rip, pending), None)
            }
            libc::SIGILL => fault(6, None),
            libc::SIGSEGV if s.si_code == SI_KERNEL => fault(13, None),
            libc::SIGSEGV => fault(14, Some(s.si_addr)),
            libc::SIGBUS if s.si_code == SI_KERNEL => fault(12, None),
            libc::SIGBUS if s.si_code == BUS_ADRALN => fault(17, None),
            sig => End::Other(format!("signal {sig} (si_code {})", s.si_code)),
        };
        Outcome {
            end,
            rip: s.rip,
            gpr: s.gpr,
            flags: s.rflags,
            simd: s.simd.clone(),
            note: format!("signal {} si_code {:#x}", s.signal, s.si_code),
        }
    }
}

/// One field that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    pub field: String,
    pub native: String,
    pub interp: String,
}

/// The verdict on one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Match,
    /// The interpreter raised "#UD ... not implemented" where the CPU did not raise #UD.
    Unimplemented {
        rip: u64,
        what: String,
    },
    Mismatch(Vec<Diff>),
    /// The only differences are x87 registers within [`APPROX_ULP`] ULP of each other and
    /// FSW's C1/PE, in a case with an x87 transcendental (FSIN FCOS FSINCOS FPTAN FPATAN F2XM1
    /// FYL2X FYL2XP1, whose exact results the SDM leaves to the implementation): reported with
    /// the largest distance, not counted as a mismatch.
    Approx {
        ulp: u64,
        diffs: Vec<Diff>,
    },
}

/// Largest ULP distance of x87 transcendental results accepted as [`Verdict::Approx`].
pub const APPROX_ULP: u64 = 1;

/// Is this an x87 transcendental instruction?
pub fn is_transcendental(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Fsin
            | Mnemonic::Fcos
            | Mnemonic::Fsincos
            | Mnemonic::Fptan
            | Mnemonic::Fpatan
            | Mnemonic::F2xm1
            | Mnemonic::Fyl2x
            | Mnemonic::Fyl2xp1
    )
}

/// Distance in units in the last place of two finite 80-bit values of the same sign (zeros,
/// denormals and normals; None for NaN/infinity, unnormals, or different signs).
pub fn ulp80(a: &[u8; 10], b: &[u8; 10]) -> Option<u64> {
    fn ord(v: &[u8; 10]) -> Option<(bool, u128)> {
        let mut m = [0u8; 8];
        m.copy_from_slice(&v[..8]);
        let man = u64::from_le_bytes(m) as u128;
        let se = u16::from_le_bytes([v[8], v[9]]);
        let (neg, exp) = (se & 0x8000 != 0, (se & 0x7fff) as u128);
        let j = man >> 63 == 1;
        match exp {
            0x7fff => None,
            0 => Some((neg, man)),
            _ if !j => None,
            // Normals continue where the denormals (exponent 0, same scale as 1) stop.
            _ => Some((neg, ((exp - 1) << 63) + man)),
        }
    }
    let (sa, oa) = ord(a)?;
    let (sb, ob) = ord(b)?;
    if sa != sb && (oa != 0 || ob != 0) {
        return None;
    }
    Some(u64::try_from(oa.abs_diff(ob)).unwrap_or(u64::MAX))
}

/// Do the differences qualify as [`Verdict::Approx`]? Returns the largest ULP distance.
fn approx_ulp(case: &Case, n: &Outcome, i: &Outcome, d: &[Diff]) -> Option<u64> {
    let mut dec = Decoder::with_ip(
        64,
        &case.code,
        super::layout::CODE_ADDR,
        DecoderOptions::NONE,
    );
    let mut any = false;
    while dec.can_decode() {
        any |= is_transcendental(dec.decode().mnemonic());
    }
    let (ns, is) = (n.simd.as_ref()?, i.simd.as_ref()?);
    if !any
        || !d
            .iter()
            .all(|x| x.field == "fsw" || x.field.starts_with("x87 R"))
    {
        return None;
    }
    let loose = simd::fsw::C1 | 0x20; // C1 (round-up indicator) and PE
    if (ns.fsw ^ is.fsw) & !case.ignore_fsw & !loose != 0 {
        return None;
    }
    let mut worst = 0;
    for p in 0..8 {
        if ns.ftw & (1 << p) != 0 && ns.st[p] != is.st[p] {
            worst = worst.max(ulp80(&ns.st[p], &is.st[p]).filter(|&u| u <= APPROX_ULP)?);
        }
    }
    Some(worst)
}

/// Names of the set flags among `mask`.
pub fn flag_names(v: u64, mask: u64) -> String {
    let mut s = String::new();
    for (bit, n) in [
        (CF, "CF"),
        (PF, "PF"),
        (AF, "AF"),
        (ZF, "ZF"),
        (SF, "SF"),
        (DF, "DF"),
        (OF, "OF"),
    ] {
        if mask & bit != 0 && v & bit != 0 {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(n);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// Most memory difference ranges listed per case.
const MAX_MEM_DIFFS: usize = 8;

/// Every field in which the two sides differ (end, RIP, GPRs, compared flags, data bytes).
pub fn compare(case: &Case, n: &Outcome, nd: &[u8], i: &Outcome, id: &[u8]) -> Vec<Diff> {
    let mut d = Vec::new();
    let mut add = |field: String, native: String, interp: String| {
        d.push(Diff {
            field,
            native,
            interp,
        })
    };
    if n.end != i.end {
        let with_note = |o: &Outcome| {
            if o.note.is_empty() {
                o.end.describe()
            } else {
                format!("{} [{}]", o.end.describe(), o.note)
            }
        };
        add("end".into(), n.end.describe(), with_note(i));
    }
    if n.rip != i.rip {
        add(
            "rip".into(),
            format!("{:#x}", n.rip),
            format!("{:#x}", i.rip),
        );
    }
    for (r, name) in GPR_NAMES.iter().enumerate() {
        if n.gpr[r] != i.gpr[r] {
            add(
                (*name).into(),
                format!("{:#018x}", n.gpr[r]),
                format!("{:#018x}", i.gpr[r]),
            );
        }
    }
    let mask = (STATUS | DF) & !case.ignore_flags;
    if (n.flags ^ i.flags) & mask != 0 {
        add(
            "rflags".into(),
            format!("{} ({:#x})", flag_names(n.flags, mask), n.flags & mask),
            format!("{} ({:#x})", flag_names(i.flags, mask), i.flags & mask),
        );
    }
    match (&n.simd, &i.simd) {
        (Some(a), Some(b)) => {
            for (f, x, y) in simd::diff(a, b, case.ignore_fsw) {
                add(f, x, y);
            }
        }
        (None, None) => {}
        (a, b) => {
            let has = |o: &Option<SimdState>| if o.is_some() { "read" } else { "missing" };
            add("simd state".into(), has(a).into(), has(b).into());
        }
    }
    let len = nd.len().min(id.len());
    let mut pos = 0;
    let mut ranges = 0;
    while pos < len {
        if nd[pos] == id[pos] {
            pos += 1;
            continue;
        }
        // A run of differing bytes, merging gaps shorter than 8 bytes.
        let start = pos;
        let mut end = pos + 1;
        let mut k = end;
        while k < len && k < end + 8 {
            if nd[k] != id[k] {
                end = k + 1;
            }
            k += 1;
        }
        ranges += 1;
        if ranges <= MAX_MEM_DIFFS {
            add(
                format!("mem[{:#x}..+{}]", DATA_ADDR + start as u64, end - start),
                hex_bytes(&nd[start..end]),
                hex_bytes(&id[start..end]),
            );
        }
        pos = end;
    }
    if ranges > MAX_MEM_DIFFS {
        add(
            "mem".into(),
            format!("{} more differing ranges", ranges - MAX_MEM_DIFFS),
            String::new(),
        );
    }
    d
}

/// Compare and classify: an interpreter "#UD ... not implemented" against a CPU that did
/// not raise #UD is a gap, not a semantic mismatch.
pub fn judge(case: &Case, n: &Outcome, nd: &[u8], i: &Outcome, id: &[u8]) -> Verdict {
    let unimpl =
        matches!(i.end, End::Fault { vector: 6, .. }) && i.note.contains("not implemented");
    let native_ud_here = matches!(n.end, End::Fault { vector: 6, .. }) && n.rip == i.rip;
    if unimpl && !native_ud_here {
        return Verdict::Unimplemented {
            rip: i.rip,
            what: i.note.clone(),
        };
    }
    let d = compare(case, n, nd, i, id);
    if d.is_empty() {
        Verdict::Match
    } else if let Some(ulp) = approx_ulp(case, n, i, &d) {
        Verdict::Approx { ulp, diffs: d }
    } else {
        Verdict::Mismatch(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out() -> Outcome {
        Outcome {
            end: End::Done,
            rip: 0x1000_0004,
            gpr: [7; 16],
            flags: 0x202 | CF,
            simd: None,
            note: String::new(),
        }
    }

    fn case() -> Case {
        Case {
            code: vec![0xcc],
            gpr: [0; 16],
            flags: 0,
            mem_seed: 0,
            ignore_flags: 0,
            simd: None,
            ignore_fsw: 0,
        }
    }

    #[test]
    fn equal_outcomes_match_and_each_field_is_detected() {
        let (a, mem) = (out(), vec![0u8; 64]);
        assert_eq!(judge(&case(), &a, &mem, &a, &mem), Verdict::Match);
        let mut b = a.clone();
        b.gpr[13] ^= 1 << 40;
        let d = compare(&case(), &a, &mem, &b, &mem);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "r13");
        let mut b = a.clone();
        b.flags ^= OF;
        assert_eq!(compare(&case(), &a, &mem, &b, &mem)[0].field, "rflags");
        // A flag outside the compared set (TF) or an ignored one does not count.
        b.flags = a.flags ^ 0x100;
        assert!(compare(&case(), &a, &mem, &b, &mem).is_empty());
        let mut c = case();
        c.ignore_flags = AF;
        b.flags = a.flags ^ AF;
        assert!(compare(&c, &a, &mem, &b, &mem).is_empty());
        let mut m2 = mem.clone();
        m2[10] = 1;
        m2[12] = 1;
        let d = compare(&case(), &a, &mem, &a, &m2);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, format!("mem[{:#x}..+3]", DATA_ADDR + 10));
    }

    #[test]
    fn simd_state_differences_are_reported() {
        let mem = vec![0u8; 8];
        let mut rng = crate::difftest::gen::Rng::new([6; 32]);
        let mut a = out();
        a.simd = Some(rng.simd_state());
        let mut b = a.clone();
        assert!(compare(&case(), &a, &mem, &b, &mem).is_empty());
        b.simd.as_mut().unwrap().mxcsr ^= 1 << 13;
        let d = compare(&case(), &a, &mem, &b, &mem);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "mxcsr");
        b.simd = None;
        assert_eq!(compare(&case(), &a, &mem, &b, &mem)[0].field, "simd state");
    }

    #[test]
    fn sigfpe_is_classified_by_si_code_and_instruction() {
        use crate::difftest::layout::CODE_ADDR;
        let stop = |code: i32, rip: u64| NativeStop {
            gpr: [0; 16],
            rip,
            rflags: 0x202,
            signal: libc::SIGFPE,
            si_code: code,
            si_addr: 0,
            simd: None,
            timed_out: false,
        };
        // divss xmm0, xmm1 ; fwait ; fadd st, st(1) ; paddb mm0, mm1 ; cvtpi2ps xmm0, mm1 ;
        // emms ; int3
        let code = [
            0xf3, 0x0f, 0x5e, 0xc1, 0x9b, 0xd8, 0xc1, 0x0f, 0xfc, 0xc1, 0x0f, 0x2a, 0xc1, 0x0f,
            0x77, 0xcc,
        ];
        let v = |c: i32, at: u64| match Outcome::from_native(&stop(c, CODE_ADDR + at), &code).end {
            End::Fault { vector, .. } => vector,
            e => panic!("{e:?}"),
        };
        assert_eq!(v(1, 0), 0); // FPE_INTDIV: #DE whatever the instruction
        assert_eq!(v(3, 0), 19); // FPE_FLTDIV at DIVSS: #XM
        assert_eq!(v(7, 4), 16); // at FWAIT: #MF
        assert_eq!(v(6, 5), 16); // at FADD: #MF
        assert_eq!(v(7, 7), 16); // at PADDB mm: #MF (no SIMD state known: assume pending)
                                 // CVTPI2PS xmm, mm: #MF only with a pending x87 exception, else #XM (precision).
        assert_eq!(fp_vector(&code, CODE_ADDR + 10, true), 16);
        assert_eq!(fp_vector(&code, CODE_ADDR + 10, false), 19);
        assert_eq!(fp_vector(&code, CODE_ADDR + 4, false), 16);
        // EMMS (no register operand) reports a pending x87 exception.
        assert_eq!(fp_vector(&code, CODE_ADDR + 13, true), 16);
    }

    #[test]
    fn ulp_distance_of_extended_values() {
        let v = |se: u16, man: u64| {
            let mut b = [0u8; 10];
            b[..8].copy_from_slice(&man.to_le_bytes());
            b[8..].copy_from_slice(&se.to_le_bytes());
            b
        };
        let one = v(0x3fff, 1 << 63);
        assert_eq!(ulp80(&one, &one), Some(0));
        assert_eq!(ulp80(&one, &v(0x3fff, (1 << 63) + 1)), Some(1));
        // Across an exponent boundary: the largest value below 1.0 is 1 ULP away.
        assert_eq!(ulp80(&one, &v(0x3ffe, u64::MAX)), Some(1));
        // Largest denormal to smallest normal.
        assert_eq!(ulp80(&v(0, (1 << 63) - 1), &v(1, 1 << 63)), Some(1));
        assert_eq!(ulp80(&v(0x8000, 0), &v(0, 0)), Some(0));
        assert_eq!(ulp80(&one, &v(0xbfff, 1 << 63)), None);
        assert_eq!(ulp80(&one, &v(0x7fff, 1 << 63)), None);
        assert_eq!(ulp80(&one, &v(0x3fff, 1)), None); // unnormal
    }

    #[test]
    fn transcendental_results_one_ulp_off_are_approximate() {
        let mem = vec![0u8; 8];
        let mut rng = crate::difftest::gen::Rng::new([7; 32]);
        let mut c = case();
        c.code = vec![0xd9, 0xfe, 0xcc]; // fsin
        let mut a = out();
        let mut st = rng.simd_state();
        st.ftw = 0xff;
        st.st[2] = [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f];
        a.simd = Some(st);
        let mut b = a.clone();
        b.simd.as_mut().unwrap().st[2][0] = 1;
        b.simd.as_mut().unwrap().fsw ^= simd::fsw::C1;
        match judge(&c, &a, &mem, &b, &mem) {
            Verdict::Approx { ulp: 1, diffs } => assert_eq!(diffs.len(), 2),
            v => panic!("{v:?}"),
        }
        // Two ULP, another FSW bit, or no transcendental in the code: a mismatch.
        let mut b2 = b.clone();
        b2.simd.as_mut().unwrap().st[2][0] = 2;
        assert!(matches!(
            judge(&c, &a, &mem, &b2, &mem),
            Verdict::Mismatch(_)
        ));
        let mut b3 = b.clone();
        b3.simd.as_mut().unwrap().fsw ^= simd::fsw::C3;
        assert!(matches!(
            judge(&c, &a, &mem, &b3, &mem),
            Verdict::Mismatch(_)
        ));
        c.code = vec![0xd9, 0xe0, 0xcc]; // fchs
        assert!(matches!(
            judge(&c, &a, &mem, &b, &mem),
            Verdict::Mismatch(_)
        ));
    }

    #[test]
    fn unimplemented_is_classified_apart() {
        let mem = vec![0u8; 8];
        let n = out();
        let mut i = out();
        i.end = End::Fault {
            vector: 6,
            addr: None,
        };
        i.note = "#UD (instruction not implemented)".into();
        assert!(matches!(
            judge(&case(), &n, &mem, &i, &mem),
            Verdict::Unimplemented { .. }
        ));
        // Both #UD at the same instruction: compared normally.
        let mut n2 = i.clone();
        n2.note = "signal 4".into();
        assert_eq!(judge(&case(), &n2, &mem, &i, &mem), Verdict::Match);
        // The CPU raised #UD at a later instruction: still a gap in the interpreter.
        n2.rip += 3;
        assert!(matches!(
            judge(&case(), &n2, &mem, &i, &mem),
            Verdict::Unimplemented { .. }
        ));
    }
}
