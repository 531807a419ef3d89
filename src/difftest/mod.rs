//! `lockstep difftest`: differential testing of the interpreter against this host's CPU.
//!
//! Generated instruction sequences run natively in a ptrace'd child ([`native`]) and in the
//! interpreter ([`sim`]) at the same addresses with the same registers, flags and data; then
//! registers, status flags + DF, RIP, exceptions and every data byte are compared
//! ([`outcome`]). The generator ([`gen`]) draws from a table of instruction forms ([`forms`]);
//! failing cases are minimised and printed with a `--replay` command ([`report`]).
//! See `docs/difftest.md` and `docs/undefined-flags.md`.

pub mod case;
pub mod forms;
pub mod forms_simd;
pub mod gen;
mod gen_simd;
pub mod host;
pub mod native;
pub mod outcome;
pub mod report;
pub mod run;
pub mod seq;
pub mod sim;
pub mod simd;

pub use case::Case;
pub use outcome::{Diff, End, Outcome, Verdict};
pub use run::{run, Config, FailKind, Failure, Harness, Run, Summary, UndefMode};

use crate::seed::Seed;
use std::path::PathBuf;

/// Fixed addresses shared by the native child and the interpreter's test machine.
pub mod layout {
    /// The code page (the sequence, then INT3 fill).
    pub const CODE_ADDR: u64 = 0x1000_0000;
    pub const CODE_LEN: usize = 0x1000;
    /// The data pages; the last one holds the stack.
    pub const DATA_ADDR: u64 = 0x2000_0000;
    pub const DATA_LEN: usize = 0x4000;
    /// Unmapped distance kept around both areas on both sides.
    pub const GUARD: u64 = 0x20_0000;
    /// Longest code of one case, INT3 included.
    pub const MAX_CODE: usize = 0x400;
}

/// `lockstep difftest` arguments.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// Run seed (hex, up to 64 digits). Default: derived from the time, and printed.
    #[arg(long)]
    pub seed: Option<String>,
    /// Number of generated cases.
    #[arg(long, default_value_t = 10_000)]
    pub cases: u64,
    /// Only forms whose name matches: substring, `|`/`,` alternatives, `^`/`$` anchors, `.*`.
    /// See `--list-forms` for the names.
    #[arg(long)]
    pub forms: Option<String>,
    /// At most this many forms per case.
    #[arg(long, default_value_t = 4)]
    pub len: usize,
    /// Write a markdown report (coverage per form, failures) to this path.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Stop at the first failing case.
    #[arg(long)]
    pub stop_on_first: bool,
    /// Re-run one case printed by an earlier run.
    #[arg(long, value_name = "HEX")]
    pub replay: Option<String>,
    /// Compare undefined flags: auto (only on the policy host), compare, mask.
    #[arg(long, value_enum, default_value = "auto")]
    pub undefined: UndefMode,
    /// Detailed failures kept per form.
    #[arg(long, default_value_t = 3)]
    pub examples: usize,
    /// List the form table (name, ISA group, feature, undefined flags) and exit.
    #[arg(long)]
    pub list_forms: bool,
    /// ISA groups to draw from, comma-separated: gp, mmx, sse, sse2, sse3, ssse3, sse4.1,
    /// sse4.2, x87, avx, avx2, fma, f16c, xsave; `simd` = all but gp; `all`.
    #[arg(long, default_value = "all")]
    pub isa: String,
    /// Keep drawing forms the interpreter does not implement (default: drop a form after its
    /// first "not implemented", so the remaining cases test forms that run).
    #[arg(long)]
    pub keep_unimplemented: bool,
    /// Count "not implemented" in SIMD/x87 forms as a failure too (default: only in gp forms).
    #[arg(long)]
    pub strict: bool,
}

/// Entry point; returns the process exit code (0 pass, 1 mismatch, 2 error).
pub fn main(args: DiffArgs) -> i32 {
    if let Some(hex) = &args.replay {
        return replay(hex);
    }
    let isa = match forms::Isa::parse_list(&args.isa) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("lockstep difftest: --isa: {e}");
            return 2;
        }
    };
    if args.list_forms {
        use std::io::Write;
        let host = host::HostInfo::detect();
        let mut out = std::io::stdout().lock();
        for f in forms::table().into_iter().filter(|f| isa.contains(&f.isa)) {
            if let Some(p) = &args.forms {
                if !forms::matches_filter(&f.name, p) {
                    continue;
                }
            }
            let line = writeln!(
                out,
                "{:<48} {:<7} {:<12} undefined flags: {:<16}{}{}{}{}",
                f.name,
                f.isa.name(),
                f.feature.name(),
                outcome::flag_names(f.undef_flags, f.undef_flags),
                if f.undef_fsw != 0 {
                    format!(" undefined FSW bits {:#06x}", f.undef_fsw)
                } else {
                    String::new()
                },
                if f.undef_result {
                    " (result undefined for some inputs)"
                } else {
                    ""
                },
                if host.has(f.feature) {
                    ""
                } else {
                    " [host lacks it]"
                },
                match f.excluded {
                    Some(why) => format!(" [excluded: {why}]"),
                    None => String::new(),
                }
            );
            if line.is_err() {
                break; // e.g. a closed pipe
            }
        }
        return 0;
    }
    let seed = match &args.seed {
        Some(s) => match s.parse::<Seed>() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("lockstep difftest: {e}");
                return 2;
            }
        },
        None => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            format!("{t:x}").parse().unwrap_or_default()
        }
    };
    let cfg = Config {
        seed,
        cases: args.cases,
        filter: args.forms.clone(),
        len: args.len.max(1),
        stop_on_first: args.stop_on_first,
        undefined: args.undefined,
        examples_per_form: args.examples,
        isa,
        drop_unimplemented: !args.keep_unimplemented,
        strict: args.strict,
    };
    let sum = match run::run(&cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lockstep difftest: {e}");
            return 2;
        }
    };
    print!("{}", report::summary_text(&sum));
    if let Some(p) = &args.report {
        if let Err(e) = std::fs::write(p, report::markdown(&sum)) {
            eprintln!("lockstep difftest: cannot write {}: {e}", p.display());
            return 2;
        }
        println!("report written to {}", p.display());
    }
    if sum.ok() {
        0
    } else {
        1
    }
}

/// `--replay HEX`: run one case on both sides and print everything about it.
pub fn replay(hex: &str) -> i32 {
    let case = match Case::from_hex(hex) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lockstep difftest: {e}");
            return 2;
        }
    };
    let mut h = match Harness::new() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("lockstep difftest: {e}");
            return 2;
        }
    };
    let r = match h.run(&case) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lockstep difftest: {e}");
            return 2;
        }
    };
    println!("code:");
    for l in case.disassembly() {
        println!("  {l}");
    }
    println!("initial state:");
    print!("{}", report::initial_state(&case));
    for (side, o) in [("native", &r.native), ("interp", &r.interp)] {
        println!(
            "{side}: {} rip={:#x} flags={} {}",
            o.end.describe(),
            o.rip,
            outcome::flag_names(o.flags, forms::STATUS | forms::DF),
            o.note
        );
    }
    match &r.verdict {
        Verdict::Match => {
            println!("MATCH");
            0
        }
        Verdict::Unimplemented { what, .. } => {
            println!("NOT IMPLEMENTED in the interpreter: {what}");
            1
        }
        Verdict::Approx { ulp, diffs } => {
            println!(
                "APPROXIMATE: x87 transcendental result(s) within {ulp} ULP of the host \
                 (native | interpreter):"
            );
            for x in diffs {
                println!("  {:<22} {} | {}", x.field, x.native, x.interp);
            }
            0
        }
        Verdict::Mismatch(d) => {
            println!("MISMATCH (native | interpreter):");
            for x in d {
                println!("  {:<22} {} | {}", x.field, x.native, x.interp);
            }
            1
        }
    }
}
