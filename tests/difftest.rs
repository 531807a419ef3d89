//! Differential tests of the interpreter against this host's CPU, through the library API, and
//! self-tests of the harness (agreement, detection of a corrupted result, replay encoding,
//! child restart, SIMD/x87 state transfer and exception mapping).

use lockstep::difftest::case::Case;
use lockstep::difftest::forms::Isa;
use lockstep::difftest::gen::Rng;
use lockstep::difftest::layout::{CODE_ADDR, DATA_ADDR, DATA_LEN};
use lockstep::difftest::outcome::{compare, judge, End, Outcome};
use lockstep::difftest::report::{failure_text, summary_text};
use lockstep::difftest::run::{FailKind, Failure};
use lockstep::difftest::simd::SimdState;
use lockstep::difftest::{run, Config, Harness, UndefMode, Verdict};
use lockstep::seed::Seed;

fn seed(s: &str) -> Seed {
    s.parse().unwrap()
}

/// A case from raw bytes (INT3 appended) with registers pointing at the data area.
fn case(code: &[u8]) -> Case {
    let mut gpr = [0u64; 16];
    for (i, g) in gpr.iter_mut().enumerate() {
        *g = 0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 1);
    }
    gpr[3] = DATA_ADDR + 0x100; // rbx
    gpr[4] = DATA_ADDR + 0x3800; // rsp
    let mut c = code.to_vec();
    c.push(0xcc);
    Case {
        code: c,
        gpr,
        flags: 0x8c5,
        mem_seed: 42,
        ignore_flags: 0,
        simd: None,
        ignore_fsw: 0,
    }
}

/// A SIMD case: `case(code)` with a random SIMD/x87 state from `seed`.
fn simd_case(code: &[u8], seed: u8) -> Case {
    let mut c = case(code);
    c.simd = Some(Box::new(Rng::new([seed; 32]).simd_state()));
    c
}

fn fault(v: u8) -> End {
    End::Fault {
        vector: v,
        addr: None,
    }
}

/// The general-purpose table, 20,000 cases: every general-purpose form against the host.
#[test]
fn full_table_20k_cases_match_the_host() {
    let cfg = Config {
        seed: seed("d1ff7e57"),
        cases: 20_000,
        len: 4,
        isa: vec![Isa::Gp],
        ..Config::default()
    };
    let sum = run(&cfg).expect("difftest runs");
    assert_eq!(sum.cases, 20_000);
    assert!(sum.forms.len() > 600, "only {} forms ran", sum.forms.len());
    assert!(
        sum.forms.iter().all(|f| f.cases > 0),
        "a form was never drawn"
    );
    assert_eq!(sum.unimplemented, 0, "{}", summary_text(&sum));
    assert!(sum.ok(), "{}", summary_text(&sum));
    eprintln!("{:.0} cases/s", sum.cases_per_sec());
}

/// SIMD forms the interpreter implemented when the SIMD harness was written (SSE/SSE2 integer,
/// moves, shuffles, MXCSR access); each must run, and never hit "not implemented".
const IMPLEMENTED_SIMD: [&str; 16] = [
    "Paddb_xmm_xmmm128:r",
    "Pmaddwd_xmm_xmmm128:m",
    "Pxor_xmm_xmmm128:r",
    "Andnpd_xmm_xmmm128:m",
    "Movdqa_xmm_xmmm128:m",
    "Movdqu_xmmm128_xmm:m",
    "Movq_xmm_rm64:r",
    "Movd_rm32_xmm:m",
    "Movss_xmm_xmmm32:m",
    "Movhlps_xmm_xmm",
    "Pshufd_xmm_xmmm128_imm8:m",
    "Psraw_xmm_imm8",
    "Psrlq_xmm_xmmm128:r",
    "Pinsrw_xmm_r32m16_imm8:m",
    "Pmovmskb_r64_xmm",
    "Ldmxcsr_m32",
];

fn simd_batch() {
    let env = |k: &str| std::env::var(k).ok();
    let cfg = Config {
        seed: seed(&env("DIFFTEST_SIMD_SEED").unwrap_or_else(|| "51dd".into())),
        cases: env("DIFFTEST_SIMD_CASES")
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000),
        len: 4,
        isa: Isa::parse_list("simd").unwrap(),
        // Keep every mismatch (not only a few per form) so that each is checked below.
        examples_per_form: 1_000_000,
        strict: true,
        ..Config::default()
    };
    let sum = run(&cfg).expect("difftest runs");
    let text = summary_text(&sum);
    eprintln!("{text}");
    let mismatches: Vec<&Failure> = sum
        .failures
        .iter()
        .filter(|f| f.kind == FailKind::Mismatch)
        .collect();
    assert_eq!(mismatches.len() as u64, sum.mismatches);
    let text_of: String = mismatches.iter().map(|f| failure_text(f)).collect();
    assert!(mismatches.is_empty(), "mismatches:\n{text_of}");
    assert_eq!(sum.unimplemented_failing, 0, "{text}");
    // Issue 3's acceptance: every form of every group is implemented and drawn (about 25
    // times each at 20,000 cases), none left out except for a feature this host lacks.
    assert_eq!(sum.unimplemented, 0, "not implemented:\n{text}");
    assert!(sum.forms.len() > 2000, "{} SIMD forms ran", sum.forms.len());
    let never: Vec<&str> = sum
        .forms
        .iter()
        .filter(|f| f.cases == 0)
        .map(|f| f.name.as_str())
        .collect();
    assert!(never.is_empty(), "forms never drawn: {never:?}");
    // Off the policy host the forms with SDM-undefined results are skipped (not compared).
    if sum.compare_undefined {
        for g in &sum.isa_stats {
            assert_eq!(g.skipped_other, 0, "{:?}: forms excluded\n{text}", g.isa);
        }
    }
    for name in IMPLEMENTED_SIMD {
        let f = sum
            .forms
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} did not run"));
        assert!(f.cases > 0, "{name} never drawn");
        assert_eq!(f.unimplemented, 0, "{name} not implemented?");
    }
    let clean: usize = sum.isa_stats.iter().map(|i| i.clean).sum();
    assert!(clean >= 150, "only {clean} SIMD forms ran clean");
}

/// Every SIMD/x87 group (MMX, SSE..SSE4.2, x87, AVX, AVX2, FMA, F16C, XSAVE) with zero
/// mismatches and zero "not implemented" (strict), every form drawn (issue 3's acceptance).
/// `DIFFTEST_SIMD_SEED` /
/// `DIFFTEST_SIMD_CASES` override the seed and the case count (long runs in the optimised test
/// profile).
#[test]
fn simd_batch_strict() {
    simd_batch();
}

/// What the difftest branch's interpreter implements (MOV, NOP) runs clean end to end. The one
/// accepted difference is a known interpreter gap reported to the lead: a non-canonical
/// address with an RSP/RBP base raises #SS on the CPU but #GP in the interpreter.
#[test]
fn mov_and_nop_forms_match_the_host() {
    let cfg = Config {
        seed: seed("5eed"),
        cases: 4_000,
        filter: Some("^Mov_|^Nop".into()),
        len: 4,
        examples_per_form: 1000,
        ..Config::default()
    };
    let sum = run(&cfg).expect("difftest runs");
    assert_eq!(sum.cases, 4_000);
    assert!(sum.forms.len() >= 40, "{} forms", sum.forms.len());
    assert!(sum.forms.iter().all(|f| f.cases > 0));
    assert_eq!(sum.unimplemented, 0, "{}", summary_text(&sum));
    for f in &sum.failures {
        let known = f.diffs.len() == 1
            && f.diffs[0].field == "end"
            && f.diffs[0].native == "#SS"
            && f.diffs[0].interp.starts_with("#GP");
        assert!(known, "{}", summary_text(&sum));
    }
    assert!(
        sum.cases_per_sec() > 1000.0,
        "{} cases/s",
        sum.cases_per_sec()
    );
}

#[test]
fn trivially_agreeing_cases_match() {
    let mut h = Harness::new().unwrap();
    // mov rax, rbx ; mov [rbx+8], rax ; mov ecx, [rbx+0x10]
    let c = case(&[0x48, 0x89, 0xd8, 0x48, 0x89, 0x43, 0x08, 0x8b, 0x4b, 0x10]);
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");
    assert_eq!(r.native.end, End::Done);
    assert_eq!(r.native.rip, CODE_ADDR + c.code.len() as u64);
    assert_eq!(r.native.gpr[0], c.gpr[3]);
    assert_eq!(
        &h.native_data()[0x108..0x110],
        &(DATA_ADDR + 0x100).to_le_bytes()
    );
    // A store just past the data area faults at the same address on both sides.
    let mut c = case(&[0x88, 0x03]); // mov [rbx], al
    c.gpr[3] = DATA_ADDR + DATA_LEN as u64;
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");
    assert_eq!(
        r.native.end,
        End::Fault {
            vector: 14,
            addr: Some(DATA_ADDR + DATA_LEN as u64)
        }
    );
    assert_eq!(r.native.rip, CODE_ADDR);
    // UD2: #UD at the instruction on both sides.
    let r = h.run(&case(&[0x0f, 0x0b])).unwrap();
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");
    assert_eq!(
        r.native.end,
        End::Fault {
            vector: 6,
            addr: None
        }
    );
}

#[test]
fn a_corrupted_interpreter_result_is_detected() {
    let mut h = Harness::new().unwrap();
    let c = case(&[0x48, 0x89, 0x43, 0x08]); // mov [rbx+8], rax
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match);
    let nd = h.native_data().to_vec();
    let id = h.interp_data().to_vec();
    let check = |i: &Outcome, idata: &[u8], field: &str| {
        let d = compare(&c, &r.native, &nd, i, idata);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].field.starts_with(field), "{d:?}");
        assert!(matches!(
            judge(&c, &r.native, &nd, i, idata),
            Verdict::Mismatch(_)
        ));
    };
    let mut bad = r.interp.clone();
    bad.gpr[9] ^= 1;
    check(&bad, &id, "r9");
    let mut bad = r.interp.clone();
    bad.flags ^= 1 << 6; // ZF
    check(&bad, &id, "rflags");
    let mut bad = r.interp.clone();
    bad.rip += 1;
    check(&bad, &id, "rip");
    let mut bad = r.interp.clone();
    bad.end = End::Fault {
        vector: 13,
        addr: None,
    };
    check(&bad, &id, "end");
    let mut bad_mem = id.clone();
    bad_mem[0x10a] ^= 0x80;
    check(
        &r.interp,
        &bad_mem,
        &format!("mem[{:#x}", DATA_ADDR + 0x10a),
    );
}

#[test]
fn replay_encoding_round_trips_and_reproduces_the_verdict() {
    let mut h = Harness::new().unwrap();
    let c = case(&[0x48, 0x8b, 0x4b, 0x20]); // mov rcx, [rbx+0x20]
    let hex = c.to_hex();
    let back = Case::from_hex(&hex).unwrap();
    assert_eq!(back, c);
    let a = h.run(&c).unwrap();
    let b = h.run(&back).unwrap();
    assert_eq!(a.native, b.native);
    assert_eq!(a.interp, b.interp);
    assert!(Case::from_hex(&hex[1..]).is_err());
    assert!(Case::from_hex("4c44").is_err());
}

#[test]
fn the_native_child_is_restarted_when_it_dies() {
    let mut h = Harness::new().unwrap();
    let c = case(&[0x48, 0x89, 0xd8]);
    assert_eq!(h.run(&c).unwrap().verdict, Verdict::Match);
    h.kill_native_child();
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match);
    assert_eq!(h.restarts(), 1);
}

#[test]
fn same_seed_same_cases_and_masking_mode_runs() {
    let cfg = Config {
        seed: seed("abc"),
        cases: 300,
        filter: Some("^Mov_r".into()),
        undefined: UndefMode::Mask,
        ..Config::default()
    };
    let a = run(&cfg).unwrap();
    let b = run(&cfg).unwrap();
    assert!(!a.compare_undefined);
    let counts =
        |s: &lockstep::difftest::Summary| s.forms.iter().map(|f| f.cases).collect::<Vec<_>>();
    assert_eq!(counts(&a), counts(&b));
    assert_eq!(a.mismatches, b.mismatches);
}

#[test]
fn simd_state_survives_the_round_trip_on_both_sides() {
    let mut h = Harness::new().unwrap();
    for k in 0..40u8 {
        // Only INT3: both sides must hand back exactly the state they were given (x87 registers
        // raw, unnormals and pseudo-denormals included; YMM upper halves; MXCSR with DAZ/FTZ).
        let c = simd_case(&[], k);
        let r = h.run(&c).unwrap();
        assert_eq!(r.verdict, Verdict::Match, "{r:?}");
        let (n, i) = (r.native.simd.unwrap(), r.interp.simd.unwrap());
        let want = c.simd.as_deref().unwrap();
        assert_eq!(&n, want, "native changed the state");
        assert_eq!(&i, want, "interpreter changed the state");
    }
}

#[test]
fn simd_semantics_and_exceptions_are_observed_natively() {
    let mut h = Harness::new().unwrap();
    // paddb xmm0, xmm1: both sides agree, and the native result is the lane-wise sum.
    let c = simd_case(&[0x66, 0x0f, 0xfc, 0xc1], 1);
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");
    let s0 = c.simd.as_deref().unwrap();
    let want: Vec<u8> = (0..16)
        .map(|b| {
            let lane = |reg: usize| (s0.ymm[reg][b / 8] >> (8 * (b % 8))) as u8;
            lane(0).wrapping_add(lane(1))
        })
        .collect();
    let got = r.native.simd.as_ref().unwrap().ymm[0];
    let got: Vec<u8> = (0..16)
        .map(|b| (got[b / 8] >> (8 * (b % 8))) as u8)
        .collect();
    assert_eq!(got, want);
    // Legacy SSE leaves YMM0's upper half alone.
    assert_eq!(r.native.simd.as_ref().unwrap().ymm[0][2..], s0.ymm[0][2..]);

    // movaps xmm0, [rbx+1]: misaligned -> #GP on both sides.
    let r = h.run(&simd_case(&[0x0f, 0x28, 0x43, 0x01], 2)).unwrap();
    assert_eq!(r.native.end, fault(13));
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");

    // divss xmm0, xmm1 with 0.0 in xmm1 and #Z unmasked: #XM (SIGFPE from an SSE instruction).
    let mut c = simd_case(&[0xf3, 0x0f, 0x5e, 0xc1], 3);
    let st = c.simd.as_deref_mut().unwrap();
    st.ymm[0][0] = 0x3f80_0000;
    st.ymm[1][0] = 0;
    st.mxcsr = 0x1f80 & !(1 << 9);
    let r = h.run(&c).unwrap();
    assert_eq!(r.native.end, fault(19), "{r:?}");
    assert_eq!(r.native.rip, CODE_ADDR);
    assert_ne!(r.native.simd.as_ref().unwrap().mxcsr & 4, 0, "ZE flag set");

    // fld1 ; fldz ; fdivp ; fwait with #Z unmasked: #MF reported at FWAIT.
    let mut c = simd_case(&[0xd9, 0xe8, 0xd9, 0xee, 0xde, 0xf9, 0x9b], 4);
    let st = c.simd.as_deref_mut().unwrap();
    st.fcw = 0x037f & !4;
    st.fsw = 0;
    st.ftw = 0;
    let r = h.run(&c).unwrap();
    assert_eq!(r.native.end, fault(16), "{r:?}");
    assert_eq!(r.native.rip, CODE_ADDR + 6);

    // div rcx with rcx = 0: #DE (SIGFPE FPE_INTDIV), also in a SIMD case.
    let mut c = simd_case(&[0x48, 0xf7, 0xf1], 5);
    c.gpr[1] = 0;
    let r = h.run(&c).unwrap();
    assert_eq!(r.native.end, fault(0));

    // fld st(0) with TOP = 5 and R5 valid: TOP 4, R4 = R5, R4 tagged valid (checks the
    // physical/stack order mapping of the XSAVE image).
    let mut c = simd_case(&[0xd9, 0xc0], 10);
    let st = c.simd.as_deref_mut().unwrap();
    st.fcw = 0x037f;
    st.fsw = 5 << 11;
    st.ftw = 1 << 5;
    st.st[5] = [1, 2, 3, 4, 5, 6, 7, 0x80, 0xff, 0x3f];
    let r = h.run(&c).unwrap();
    let n = r.native.simd.as_ref().unwrap();
    assert_eq!((n.top(), n.ftw), (4, 0b0011_0000), "{r:?}");
    assert_eq!(n.st[4], [1, 2, 3, 4, 5, 6, 7, 0x80, 0xff, 0x3f]);

    // emms: every x87 tag empty afterwards; paddb mm0, mm1: TOP = 0 and every tag valid.
    let r = h.run(&simd_case(&[0x0f, 0x77], 6)).unwrap();
    assert_eq!(r.native.simd.as_ref().unwrap().ftw, 0);
    let r = h.run(&simd_case(&[0x0f, 0xfc, 0xc1], 7)).unwrap();
    let n: &SimdState = r.native.simd.as_ref().unwrap();
    assert_eq!((n.ftw, n.top()), (0xff, 0));
}

#[test]
fn a_corrupted_simd_result_is_detected() {
    let mut h = Harness::new().unwrap();
    let c = simd_case(&[0x66, 0x0f, 0xef, 0xd3], 8); // pxor xmm2, xmm3
    let r = h.run(&c).unwrap();
    assert_eq!(r.verdict, Verdict::Match, "{r:?}");
    let (nd, id) = (h.native_data().to_vec(), h.interp_data().to_vec());
    let check = |edit: &dyn Fn(&mut SimdState), field: &str| {
        let mut bad = r.interp.clone();
        edit(bad.simd.as_mut().unwrap());
        let d = compare(&c, &r.native, &nd, &bad, &id);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].field.starts_with(field), "{d:?}");
        assert!(matches!(
            judge(&c, &r.native, &nd, &bad, &id),
            Verdict::Mismatch(_)
        ));
    };
    check(&|s| s.ymm[2][1] ^= 1 << 63, "xmm2");
    check(&|s| s.ymm[15][3] ^= 1, "ymm15[255:128]");
    check(&|s| s.mxcsr ^= 1 << 15, "mxcsr");
    check(&|s| s.fcw ^= 1 << 10, "fcw");
    check(&|s| s.fsw ^= 1 << 14, "fsw");
    check(&|s| s.ftw ^= 0x10, "ftw");
    let valid = c.simd.as_deref().unwrap().ftw;
    if let Some(p) = (0..8).find(|p| valid & (1 << p) != 0) {
        check(&|s| s.st[p][3] ^= 4, &format!("x87 R{p}"));
    }
    // An empty register's contents are not compared; FOP/FIP/FDP are not compared.
    if let Some(p) = (0..8).find(|p| valid & (1 << p) == 0) {
        let mut same = r.interp.clone();
        same.simd.as_mut().unwrap().st[p][0] ^= 1;
        same.simd.as_mut().unwrap().fip ^= 1;
        assert!(compare(&c, &r.native, &nd, &same, &id).is_empty());
    }
    // A missing SIMD state on one side is a mismatch too.
    let mut bad = r.interp.clone();
    bad.simd = None;
    assert_eq!(
        compare(&c, &r.native, &nd, &bad, &id)[0].field,
        "simd state"
    );
}

#[test]
fn simd_replay_round_trips() {
    let mut h = Harness::new().unwrap();
    let c = simd_case(&[0x66, 0x0f, 0x70, 0xc1, 0x1b], 9); // pshufd xmm0, xmm1, 1bh
    let back = Case::from_hex(&c.to_hex()).unwrap();
    assert_eq!(back, c);
    let (a, b) = (h.run(&c).unwrap(), h.run(&back).unwrap());
    assert_eq!(a.native, b.native);
    assert_eq!(a.interp, b.interp);
    assert_eq!(a.verdict, Verdict::Match, "{a:?}");
}

/// The native side of SIMD cases is a function of the case: running each generated case twice
/// gives the same outcome and memory (guards against state the harness does not control, such
/// as a non-canonical control word that the kernel may or may not hand back as loaded).
#[test]
fn native_simd_outcomes_are_repeatable() {
    use lockstep::difftest::forms::table;
    use lockstep::difftest::gen::Generator;
    use lockstep::difftest::host::HostInfo;
    use lockstep::difftest::run::select_forms;
    let forms = table();
    let host = HostInfo::detect();
    let simd = Isa::parse_list("simd").unwrap();
    let (enabled, _) = select_forms(&forms, &host, None, &simd, true);
    let mut g = Generator::new(forms, enabled, true, 4, [0x5e; 32]);
    let mut h = Harness::new().unwrap();
    let n: usize = std::env::var("DIFFTEST_REPEAT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    for _ in 0..n {
        let (c, _) = g.next_case().unwrap().to_case().unwrap();
        let a = h.run(&c).unwrap();
        let da = h.native_data().to_vec();
        let b = h.run(&c).unwrap();
        assert_eq!(a.native, b.native, "{}", c.to_hex());
        assert!(da == h.native_data(), "memory differs: {}", c.to_hex());
    }
}
