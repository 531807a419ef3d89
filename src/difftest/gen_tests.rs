//! Unit tests of the case generator (a child module of `gen`, kept in its own file).
use super::*;
use crate::difftest::forms::{table, Isa};

#[test]
fn every_form_builds_encodes_and_respects_reserved_registers() {
    let forms = table();
    let all: Vec<usize> = (0..forms.len()).collect();
    let mut g = Generator::new(forms.clone(), all, true, 1, [3; 32]);
    for (i, f) in forms.iter().enumerate() {
        if f.excluded.is_some() {
            continue;
        }
        g.enabled = vec![i];
        g.chainable = vec![i];
        g.defined = vec![i];
        let mut built = 0;
        for _ in 0..40 {
            let Some(c) = g.try_case() else { continue };
            assert_eq!(c.groups[0].form, i);
            let (case, spans) = c.to_case().unwrap();
            assert_eq!(*case.code.last().unwrap(), 0xcc);
            assert_eq!(spans.len(), 1);
            assert_eq!(case.simd.is_some(), f.isa.is_simd(), "{}", f.name);
            // The form's instruction is really there (not a lookalike).
            let codes = crate::difftest::run::codes_in(&case.code);
            // (General-purpose forms may decode as an alias: XCHG AX,AX is NOP, LOCK#UD
            // forms are INVALID. FSTENV & co. are WAIT + FNSTENV to the decoder.)
            use iced_x86::Mnemonic as M;
            let waiting = matches!(
                f.code.mnemonic(),
                M::Fstenv
                    | M::Fstcw
                    | M::Fclex
                    | M::Finit
                    | M::Fsave
                    | M::Fstsw
                    | M::Feni
                    | M::Fdisi
                    | M::Fsetpm
            ) && codes.contains(&Code::Wait);
            // Gathers with a repeated register (3 %, #UD on purpose) decode as INVALID.
            let dup_gather =
                matches!(f.kind, Kind::Gather { .. }) && codes.contains(&Code::INVALID);
            assert!(
                !f.isa.is_simd() || waiting || dup_gather || codes.contains(&f.code),
                "{}: {codes:?}",
                f.name
            );
            built += 1;
        }
        assert!(built >= 30, "{}: built {built}/40", f.name);
    }
}

#[test]
fn branches_target_the_end_of_their_group() {
    let forms = table();
    let i = forms.iter().position(|f| f.name == "Jne_rel32_64").unwrap();
    let mut g = Generator::new(forms, vec![i], true, 1, [5; 32]);
    let (case, spans) = g.next_case().unwrap().to_case().unwrap();
    // jne rel32 (6 bytes) + 1-byte skip, then INT3: the branch skips exactly one byte.
    assert_eq!(case.code.len(), 8);
    assert_eq!(&case.code[..2], &[0x0f, 0x85]);
    assert_eq!(&case.code[2..6], &[1, 0, 0, 0]);
    assert_eq!(spans[0].end, CODE_ADDR + 7);
}

#[test]
fn masked_undefined_flags_only_in_last_position() {
    let forms = table();
    let all: Vec<usize> = (0..forms.len()).collect();
    let mut g = Generator::new(forms.clone(), all, false, 4, [9; 32]);
    for _ in 0..500 {
        let c = g.next_case().unwrap();
        let n = c.groups.len();
        for gr in &c.groups[..n - 1] {
            assert_eq!(forms[gr.form].undef_flags, 0, "{}", forms[gr.form].name);
        }
        assert_eq!(c.ignore_flags, forms[c.groups[n - 1].form].undef_flags);
        assert_eq!(c.ignore_fsw, forms[c.groups[n - 1].form].undef_fsw);
    }
}

#[test]
fn transcendentals_only_come_last() {
    let forms = table();
    let x87: Vec<usize> = (0..forms.len())
        .filter(|&i| forms[i].isa == Isa::X87)
        .collect();
    let mut g = Generator::new(forms.clone(), x87, true, 4, [10; 32]);
    let mut last = 0;
    for _ in 0..2000 {
        let c = g.next_case().unwrap();
        let n = c.groups.len();
        for gr in &c.groups[..n - 1] {
            let m = forms[gr.form].code.mnemonic();
            assert!(!is_transcendental(m), "{}", forms[gr.form].name);
        }
        last += is_transcendental(forms[c.groups[n - 1].form].code.mnemonic()) as u32;
    }
    assert!(last > 20, "{last}");
}

#[test]
fn xinuse_readers_do_not_follow_a_clearer_with_a_form_between() {
    let forms = table();
    let idx = |n: &str| forms.iter().position(|f| f.name == n).unwrap();
    let (zall, xsave, getbv, add) = (
        idx("VEX_Vzeroall"),
        idx("Xsave_mem"),
        idx("Xgetbv"),
        idx("Paddw_xmm_xmmm128:r"),
    );
    assert!(!xinuse_hazard(&forms, &[zall, xsave]));
    assert!(!xinuse_hazard(&forms, &[add, zall, getbv]));
    assert!(!xinuse_hazard(&forms, &[xsave, zall, add]));
    assert!(xinuse_hazard(&forms, &[zall, add, xsave]));
    assert!(xinuse_hazard(
        &forms,
        &[idx("Xrstor64_mem"), add, add, getbv]
    ));
}
