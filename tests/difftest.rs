//! Differential tests of the interpreter against this host's CPU, through the library API, and
//! self-tests of the harness (agreement, detection of a corrupted result, replay encoding,
//! child restart).

use lockstep::difftest::case::Case;
use lockstep::difftest::layout::{CODE_ADDR, DATA_ADDR, DATA_LEN};
use lockstep::difftest::outcome::{compare, judge, End, Outcome};
use lockstep::difftest::report::summary_text;
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
    }
}

/// The full table, 20,000 cases: every general-purpose form against the host.
/// Passes only once every instruction family is integrated (in the difftest branch alone the
/// interpreter implements MOV/NOP/JMP/UD2/SYSCALL); remove the `ignore` at integration.
#[test]

fn full_table_20k_cases_match_the_host() {
    let cfg = Config {
        seed: seed("d1ff7e57"),
        cases: 20_000,
        len: 4,
        ..Config::default()
    };
    let sum = run(&cfg).expect("difftest runs");
    assert_eq!(sum.cases, 20_000);
    assert!(sum.forms.len() > 600, "only {} forms ran", sum.forms.len());
    assert!(
        sum.forms.iter().all(|f| f.cases > 0),
        "a form was never drawn"
    );
    assert!(sum.ok(), "{}", summary_text(&sum));
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
