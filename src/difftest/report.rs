//! Rendering: the stdout summary, the markdown report (`--report`), and re-runnable failures.

use super::case::{Case, GPR_NAMES};
use super::forms::{DF, STATUS};
use super::host::{POLICY_FAMILY, POLICY_MODEL, POLICY_VENDOR};
use super::outcome::{flag_names, Outcome};
use super::run::{FailKind, Failure, IsaStat, Summary};
use super::simd::{f80_hex, fsw_text, mxcsr_text, ymm_hex};
use std::fmt::Write;

/// The exact command that re-runs one case.
pub fn replay_command(case: &Case) -> String {
    format!("lockstep difftest --replay {}", case.to_hex())
}

/// The initial state of a case, four registers a line.
pub fn initial_state(case: &Case) -> String {
    let mut s = String::new();
    for row in 0..4 {
        s.push_str("   ");
        for c in 0..4 {
            let r = row * 4 + c;
            let _ = write!(s, " {:>3}={:#018x}", GPR_NAMES[r], case.gpr[r]);
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "    flags: {}   data seed: {:#018x}{}",
        flag_names(case.flags, STATUS | DF),
        case.mem_seed,
        if case.ignore_flags != 0 {
            format!(
                "   not compared (undefined): {}",
                flag_names(case.ignore_flags, case.ignore_flags)
            )
        } else {
            String::new()
        }
    );
    if let Some(st) = &case.simd {
        let _ = writeln!(
            s,
            "    mxcsr {}   fcw {:#06x}   fsw {}   ftw {:08b}{}",
            mxcsr_text(st.mxcsr),
            st.fcw,
            fsw_text(st.fsw),
            st.ftw,
            if case.ignore_fsw != 0 {
                format!("   fsw bits not compared: {:#06x}", case.ignore_fsw)
            } else {
                String::new()
            }
        );
        for r in 0..16 {
            let _ = write!(s, "    ymm{r:<2} {}", ymm_hex(&st.ymm[r]));
            s.push(if r % 2 == 1 { '\n' } else { ' ' });
        }
        for p in 0..8 {
            let _ = write!(
                s,
                "    R{p}{} {}",
                if st.ftw & (1 << p) != 0 { "*" } else { " " },
                f80_hex(&st.st[p])
            );
            s.push(if p % 4 == 3 { '\n' } else { ' ' });
        }
        let _ = writeln!(s, "    (R* = tagged valid; ST(0) = R{})", st.top());
    }
    s
}

fn outcome_line(o: &Outcome) -> String {
    let mut s = format!("{} rip={:#x}", o.end.describe(), o.rip);
    if !o.note.is_empty() {
        let _ = write!(s, " [{}]", o.note);
    }
    s
}

/// A failure as text: code with disassembly, initial state, differing fields, replay command.
pub fn failure_text(f: &Failure) -> String {
    let mut s = String::new();
    match f.kind {
        FailKind::Mismatch => {
            let _ = writeln!(
                s,
                "MISMATCH in {} (minimised from {} to {} form group{})",
                f.form,
                f.original_groups,
                f.minimal_groups,
                if f.minimal_groups == 1 { "" } else { "s" }
            );
        }
        FailKind::Unimplemented => {
            let _ = writeln!(
                s,
                "NOT IMPLEMENTED in the interpreter, inside {}: {}",
                f.form, f.interp.note
            );
        }
    }
    s.push_str("  code:\n");
    for l in f.case.disassembly() {
        let _ = writeln!(s, "    {l}");
    }
    s.push_str("  initial state:\n");
    s.push_str(&initial_state(&f.case));
    let _ = writeln!(s, "  native: {}", outcome_line(&f.native));
    let _ = writeln!(s, "  interp: {}", outcome_line(&f.interp));
    if !f.diffs.is_empty() {
        s.push_str("  differences (native | interpreter):\n");
        for d in &f.diffs {
            let _ = writeln!(s, "    {:<22} {} | {}", d.field, d.native, d.interp);
        }
    }
    let _ = writeln!(s, "  re-run: {}", replay_command(&f.case));
    s
}

fn policy_line(sum: &Summary) -> String {
    let policy = format!("{POLICY_VENDOR} family {POLICY_FAMILY} model {POLICY_MODEL:#x}");
    match (sum.compare_undefined, sum.host.is_policy_host()) {
        (true, true) => "undefined flags: compared exactly (this is the policy host)".into(),
        (true, false) => format!(
            "undefined flags: compared exactly although this is not the policy host ({policy}) \
             (forced with --undefined compare)"
        ),
        (false, true) => "undefined flags: MASKED per form (forced with --undefined mask); forms \
             with SDM-undefined results are skipped"
            .into(),
        (false, false) => format!(
            "undefined flags: MASKED per form; this host is not the policy host ({policy}), so \
             flags the SDM calls undefined are not compared and forms with SDM-undefined results \
             are skipped"
        ),
    }
}

/// The summary printed to stdout.
pub fn summary_text(sum: &Summary) -> String {
    let mut s = String::new();
    for f in sum.failures.iter().filter(|f| f.kind == FailKind::Mismatch) {
        s.push_str(&failure_text(f));
        s.push('\n');
    }
    let _ = writeln!(s, "host: {}", sum.host);
    let _ = writeln!(s, "{}", policy_line(sum));
    let n = sum.cases.max(1) as f64;
    let _ = writeln!(
        s,
        "seed {}: {} cases in {:.2} s = {:.0} cases/s (native {:.1} us/case, interpreter {:.1} us/case), {} forms run, {} skipped",
        sum.seed,
        sum.cases,
        sum.elapsed.as_secs_f64(),
        sum.cases_per_sec(),
        sum.native_time.as_secs_f64() * 1e6 / n,
        sum.interp_time.as_secs_f64() * 1e6 / n,
        sum.forms.len(),
        sum.skipped.len()
    );
    if sum.restarts > 0 {
        let _ = writeln!(s, "native child restarted {} times", sum.restarts);
    }
    if sum.exhausted {
        let _ = writeln!(
            s,
            "stopped early: every selected form was dropped as not implemented"
        );
    }
    if sum.isa_stats.iter().any(|i| i.isa.is_simd()) {
        let _ = writeln!(s, "host SIMD: {}", sum.host.simd_line());
    }
    let _ = writeln!(s, "coverage per ISA group:");
    for i in &sum.isa_stats {
        let _ = writeln!(s, "  {}", isa_line(i));
    }
    if !sum.skipped.is_empty() {
        let _ = writeln!(s, "skipped forms:");
        for (f, why) in sum.skipped.iter().take(20) {
            let _ = writeln!(s, "  {f}: {why}");
        }
        if sum.skipped.len() > 20 {
            let _ = writeln!(s, "  ... {} more (see the report)", sum.skipped.len() - 20);
        }
    }
    if sum.approx > 0 {
        let _ = writeln!(s, "{}", approx_line(sum));
    }
    if sum.unimplemented > 0 {
        let _ = writeln!(
            s,
            "interpreter '#UD not implemented' in {} cases ({} counted as failures{}); by instruction (iced code at the faulting RIP):",
            sum.unimplemented,
            sum.unimplemented_failing,
            if sum.strict { ", --strict" } else { ": general-purpose forms only" }
        );
        let mut v: Vec<_> = sum.unimplemented_codes.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let line: Vec<String> = v.iter().map(|(c, k)| format!("{c} {k}")).collect();
        const MAX_CODES: usize = 36;
        for chunk in line[..line.len().min(MAX_CODES)].chunks(6) {
            let _ = writeln!(s, "  {}", chunk.join(", "));
        }
        if line.len() > MAX_CODES {
            let _ = writeln!(
                s,
                "  ... {} more instructions (see --report)",
                line.len() - MAX_CODES
            );
        }
    }
    let _ = writeln!(
        s,
        "{}: {} mismatches, {} not implemented in the interpreter ({} failing)",
        if sum.ok() { "PASS" } else { "FAIL" },
        sum.mismatches,
        sum.unimplemented,
        sum.unimplemented_failing
    );
    s
}

fn approx_line(sum: &Summary) -> String {
    let mut per: Vec<String> = sum
        .forms
        .iter()
        .filter(|f| f.approx > 0)
        .map(|f| format!("{} {}", f.name, f.approx))
        .collect();
    per.sort();
    format!(
        "x87 transcendentals within {} ULP of the host (not mismatches): {} cases, largest distance {} ULP ({})",
        super::outcome::APPROX_ULP,
        sum.approx,
        sum.approx_max_ulp,
        per.join(", ")
    )
}

/// One ISA group's coverage on one line.
pub fn isa_line(i: &IsaStat) -> String {
    format!(
        "{:<7} forms {:>4}: run {:>4} (clean {:>4}, not implemented {:>4}, mismatching {:>3}), skipped: host lacks feature {:>3}, other {:>3} | cases {:>7}, mismatches {:>5}, not implemented {:>5}",
        i.isa.name(),
        i.forms,
        i.run,
        i.clean,
        i.unimplemented_forms,
        i.mismatching_forms,
        i.skipped_host,
        i.skipped_other,
        i.cases,
        i.mismatches,
        i.unimplemented
    )
}

/// The markdown report written to `--report PATH`.
pub fn markdown(sum: &Summary) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# lockstep difftest report\n");
    let _ = writeln!(s, "- host: {}", sum.host);
    let _ = writeln!(s, "- {}", policy_line(sum));
    let _ = writeln!(s, "- seed: `{}`", sum.seed);
    let _ = writeln!(
        s,
        "- cases: {} in {:.2} s ({:.0} cases/s; native {:.1} µs/case, interpreter {:.1} µs/case)",
        sum.cases,
        sum.elapsed.as_secs_f64(),
        sum.cases_per_sec(),
        sum.native_time.as_secs_f64() * 1e6 / sum.cases.max(1) as f64,
        sum.interp_time.as_secs_f64() * 1e6 / sum.cases.max(1) as f64
    );
    let _ = writeln!(
        s,
        "- result: **{}** — {} mismatches, {} cases with `#UD not implemented` in the interpreter ({} counted as failures)",
        if sum.ok() { "PASS" } else { "FAIL" },
        sum.mismatches,
        sum.unimplemented,
        sum.unimplemented_failing
    );
    if sum.restarts > 0 {
        let _ = writeln!(s, "- native child restarts: {}", sum.restarts);
    }
    if sum.exhausted {
        let _ = writeln!(
            s,
            "- stopped early: every selected form was dropped as not implemented"
        );
    }
    let _ = writeln!(s, "- host SIMD features: {}", sum.host.simd_line());
    if sum.approx > 0 {
        let _ = writeln!(s, "- {}", approx_line(sum));
    }
    let _ = writeln!(s, "\n## Coverage per ISA group\n");
    let _ = writeln!(
        s,
        "| group | forms | run | clean | not implemented | mismatching | skipped: host lacks feature | skipped: other | cases | mismatches | not-implemented cases |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for i in &sum.isa_stats {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i.isa.name(),
            i.forms,
            i.run,
            i.clean,
            i.unimplemented_forms,
            i.mismatching_forms,
            i.skipped_host,
            i.skipped_other,
            i.cases,
            i.mismatches,
            i.unimplemented
        );
    }
    let _ = writeln!(s, "\n## Coverage per form\n");
    let _ = writeln!(
        s,
        "| form | group | cases | reached | mismatches | not implemented | native exceptions |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
    for f in &sum.forms {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            f.name,
            f.isa.name(),
            f.cases,
            f.reached,
            f.mismatches,
            f.unimplemented,
            f.native_faults
        );
    }
    if !sum.unimplemented_codes.is_empty() {
        let _ = writeln!(
            s,
            "\n## Not implemented in the interpreter (by instruction at the faulting RIP)\n"
        );
        let _ = writeln!(s, "| iced code | cases |\n|---|---:|");
        for (c, k) in &sum.unimplemented_codes {
            let _ = writeln!(s, "| `{c}` | {k} |");
        }
    }
    if !sum.skipped.is_empty() {
        let _ = writeln!(s, "\n## Skipped forms\n");
        for (f, why) in &sum.skipped {
            let _ = writeln!(s, "- `{f}`: {why}");
        }
    }
    if !sum.failures.is_empty() {
        let _ = writeln!(s, "\n## Failures (minimised, re-runnable)\n");
        for f in &sum.failures {
            let _ = writeln!(s, "```text\n{}```\n", failure_text(f));
        }
    }
    s
}
