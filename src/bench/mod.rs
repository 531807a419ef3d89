//! `lockstep bench`: runs benchmark programs natively, under `qemu-x86_64` and under
//! `lockstep user` with each engine (`--engine interp` and `--engine jit`), and reports wall
//! times (median of N runs), guest instructions, MIPS per engine, the ratios between them,
//! and the JIT's compile statistics, all measured in the same invocation.
//!
//! The benchmark programs are the C programs of the test suite (tests/programs/, embedded in
//! the binary by [`programs`]) with bigger inputs; they are built with the host's gcc (or
//! musl-gcc) on first use. Prebuilt binaries can be given instead (`--programs DIR`).

mod measure;
pub mod programs;
pub mod run;

use programs::{Libc, Opt, Variant};
use run::{Exit, Guest, Output};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `lockstep bench` arguments.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Runs per program and engine; the table shows the median wall time.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// What to run: a directory of prebuilt static x86-64 binaries, or a comma-separated list
    /// of built-in benchmark names and/or paths to binaries. Default: every built-in benchmark.
    #[arg(long)]
    pub programs: Option<String>,
    /// Print the results as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// C library for building the built-in benchmarks: glibc (gcc -static) or musl
    /// (musl-gcc -static). They are built at -O2.
    #[arg(long, default_value = "glibc")]
    pub libc: String,
    /// Where to build the built-in benchmarks (default: $TMPDIR/lockstep-bench).
    #[arg(long)]
    pub build_dir: Option<PathBuf>,
    /// The lockstep executable to measure (default: this one).
    #[arg(long)]
    pub lockstep: Option<PathBuf>,
    /// Do not run qemu-x86_64.
    #[arg(long)]
    pub no_qemu: bool,
    /// Seed for `lockstep user --seed`.
    #[arg(long, default_value = "1")]
    pub seed: String,
    /// Timeout of a single run, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Lockstep engines to measure (comma-separated: interp, jit).
    #[arg(long, default_value = "interp,jit")]
    pub engines: String,
}

/// One program to measure.
#[derive(Clone, Debug)]
struct Item {
    name: String,
    guest: Guest,
}

/// Measurements of one program.
#[derive(Debug, Default)]
struct Row {
    name: String,
    args: Vec<String>,
    retired: Option<u64>,
    native: Option<f64>,
    qemu: Option<f64>,
    /// `lockstep user --engine interp` and `--engine jit` wall times.
    interp: Option<f64>,
    jit: Option<f64>,
    /// The JIT's statistics line of the last run (`compiled`, `us/block`, `entries`, `code`,
    /// `hit-rate`, `chain-rate`, `native`, `compiled-runs`, …).
    jit_stats: std::collections::BTreeMap<String, f64>,
    /// Problems seen (failed runs, differing output); empty when all is well.
    notes: Vec<String>,
}

impl Row {
    fn mips(&self, t: Option<f64>) -> Option<f64> {
        match (self.retired, t) {
            (Some(r), Some(w)) if w > 0.0 => Some(r as f64 / w / 1e6),
            _ => None,
        }
    }

    /// `a / b` (how many times slower `a` is than `b`).
    fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
        match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        }
    }

    fn stat(&self, k: &str) -> Option<f64> {
        self.jit_stats.get(k).copied()
    }
}

/// Entry point; returns the process exit code (0: all ran and agreed, 1: some program failed
/// or disagreed, 2: setup error).
pub fn main(args: BenchArgs) -> i32 {
    match bench(&args) {
        Ok(rows) => {
            if rows.iter().all(|r| r.notes.is_empty()) {
                0
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("lockstep bench: {e}");
            2
        }
    }
}

fn bench(args: &BenchArgs) -> Result<Vec<Row>, String> {
    let runs = args.runs.max(1);
    let timeout = Duration::from_secs(args.timeout.max(1));
    let lockstep = match &args.lockstep {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?,
    };
    let lockstep = std::fs::canonicalize(&lockstep).unwrap_or(lockstep);
    let qemu = if args.no_qemu {
        None
    } else {
        run::which("qemu-x86_64")
    };
    let qemu_note = match (&qemu, args.no_qemu) {
        (_, true) => "skipped (--no-qemu)".to_string(),
        (None, false) => "qemu-x86_64 not found (Debian: apt-get install -y qemu-user)".to_string(),
        (Some(q), false) => q.display().to_string(),
    };
    let items = select(args)?;
    if items.is_empty() {
        return Err("no programs to run".into());
    }
    eprintln!(
        "lockstep bench: {} programs, {runs} runs each; lockstep = {}; qemu = {qemu_note}",
        items.len(),
        lockstep.display()
    );
    let mut rows = Vec::new();
    for item in &items {
        let engines: Vec<&str> = args.engines.split(',').map(str::trim).collect();
        let row = measure::measure(
            item,
            runs,
            &lockstep,
            qemu.as_deref(),
            &args.seed,
            timeout,
            &engines,
        );
        rows.push(row);
    }
    if args.json {
        print!("{}", to_json(&rows, runs, &qemu_note));
    } else {
        print!("{}", to_table(&rows, runs, &qemu_note));
    }
    Ok(rows)
}

/// Resolves `--programs` into the list of binaries, building the built-in ones.
fn select(args: &BenchArgs) -> Result<Vec<Item>, String> {
    let libc = match args.libc.as_str() {
        "glibc" | "gcc" => Libc::Glibc,
        "musl" | "musl-gcc" => Libc::Musl,
        other => return Err(format!("--libc {other}: expected glibc or musl")),
    };
    let mut builtin: Vec<&'static programs::Program> = Vec::new();
    let mut prebuilt: Vec<PathBuf> = Vec::new();
    match &args.programs {
        None => builtin.extend(programs::PROGRAMS.iter().filter(|p| p.bench_args.is_some())),
        Some(spec) if Path::new(spec).is_dir() => prebuilt.extend(executables_in(Path::new(spec))?),
        Some(spec) => {
            for entry in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if let Some(p) = programs::find(entry) {
                    builtin.push(p);
                } else if Path::new(entry).is_file() {
                    prebuilt.push(PathBuf::from(entry));
                } else {
                    let known: Vec<&str> = programs::PROGRAMS
                        .iter()
                        .filter(|p| p.bench_args.is_some())
                        .map(|p| p.name)
                        .collect();
                    return Err(format!(
                        "--programs: `{entry}` is neither a built-in benchmark ({}) nor a file",
                        known.join(", ")
                    ));
                }
            }
        }
    }
    let mut items = Vec::new();
    if !builtin.is_empty() {
        programs::check_compilers(&[libc])?;
        let dir = args
            .build_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("lockstep-bench"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let toolchain = programs::toolchain_description();
        let variant = Variant { libc, opt: Opt::O2 };
        let jobs: Vec<_> = builtin.iter().map(|&p| (p, variant)).collect();
        eprintln!(
            "lockstep bench: building {} programs in {}",
            jobs.len(),
            dir.display()
        );
        let bins = programs::build_all(&jobs, &dir, &toolchain, programs::default_threads())?;
        for b in bins {
            let args = b.program.bench_args.unwrap_or(b.program.test_args);
            items.push(Item {
                name: b.id.clone(),
                guest: Guest::new(&b.path, args),
            });
        }
    }
    for path in prebuilt {
        let path = std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // `sort-glibc-O2` gets the bench arguments of `sort`.
        let stem = file.split('-').next().unwrap_or("");
        let args = programs::find(stem)
            .and_then(|p| p.bench_args)
            .unwrap_or(&[]);
        items.push(Item {
            name: file,
            guest: Guest::new(&path, args),
        });
    }
    Ok(items)
}

/// The ELF executables directly inside `dir`, sorted by name.
fn executables_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        let mut magic = [0u8; 4];
        let is_elf = std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .map(|_| magic == *b"\x7fELF")
            .unwrap_or(false);
        if is_elf {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The median (the mean of the middle two for an even count).
pub(crate) fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn describe_failure(what: &str, out: &std::io::Result<Output>) -> Option<String> {
    match out {
        Err(e) => Some(format!("{what}: cannot run: {e}")),
        Ok(o) if o.exit == Exit::Timeout => Some(format!("{what}: timed out")),
        Ok(_) => None,
    }
}

/// Whether a program's output says its self-checks failed: every program in
/// `tests/programs` ends with a line `… ok (0 failures)` or `… FAILED (<n> failures)`.
/// A failing native run still serves as the reference (the engines must agree with it), but
/// a benchmark whose workload is wrong natively is noted.
fn self_checks_failed(stdout: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.contains("FAILED (") && l.ends_with(" failures)"))
}

/// Adds a note to the row once.
fn note(row: &mut Row, n: String) {
    if !row.notes.contains(&n) {
        row.notes.push(n);
    }
}

fn first_stderr_line(o: &Output) -> String {
    let text = String::from_utf8_lossy(&o.stderr);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(160).collect()
}

fn fmt_time(t: Option<f64>) -> String {
    match t {
        None => "-".into(),
        Some(s) if s < 1.0 => format!("{:.1}ms", s * 1e3),
        Some(s) => format!("{s:.2}s"),
    }
}

fn fmt_opt(v: Option<f64>, suffix: &str) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}{suffix}"))
}

/// A ratio against qemu, to two decimals: the target is a ratio above 1.0 per program and
/// 1.5 in the geometric mean, which one decimal would round across (0.96 and 1.04 both
/// "1.0x").
fn fmt_ratio2(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}x"))
}

fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or(""))
        .collect();
    groups.join(",")
}

fn median_mips(rows: &[Row], t: impl Fn(&Row) -> Option<f64>) -> Option<f64> {
    let mut m: Vec<f64> = rows.iter().filter_map(|r| r.mips(t(r))).collect();
    median(&mut m)
}

/// Geometric mean of the values that exist.
fn geomean(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let xs: Vec<f64> = v.flatten().filter(|x| *x > 0.0).collect();
    if xs.is_empty() {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

fn to_table(rows: &[Row], runs: usize, qemu_note: &str) -> String {
    let header = [
        "program",
        "guest insns",
        "native",
        "qemu",
        "interp",
        "jit",
        "interp MIPS",
        "jit MIPS",
        "jit/native",
        "qemu/jit",
        "interp/jit",
        "blocks",
        "us/block",
        "cache",
        "hit%",
        "chain%",
    ];
    let mut cells: Vec<[String; 16]> = Vec::new();
    for r in rows {
        let cache = match (r.stat("entries"), r.stat("code")) {
            (Some(e), Some(c)) => format!("{e}/{c}KiB"),
            _ => "-".into(),
        };
        cells.push([
            r.name.clone(),
            r.retired.map_or("-".into(), fmt_count),
            fmt_time(r.native),
            fmt_time(r.qemu),
            fmt_time(r.interp),
            fmt_time(r.jit),
            fmt_opt(r.mips(r.interp), ""),
            fmt_opt(r.mips(r.jit), ""),
            fmt_opt(Row::ratio(r.jit, r.native), "x"),
            fmt_ratio2(Row::ratio(r.qemu, r.jit)),
            fmt_opt(Row::ratio(r.interp, r.jit), "x"),
            r.stat("compiled")
                .map_or("-".into(), |x| fmt_count(x as u64)),
            fmt_opt(r.stat("us/block"), ""),
            cache,
            fmt_opt(r.stat("hit-rate"), ""),
            fmt_opt(r.stat("chain-rate"), ""),
        ]);
    }
    let mut width = header.map(str::len);
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c.iter()) {
            *w = (*w).max(s.chars().count());
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "wall times: median of {runs} runs; qemu: {qemu_note}");
    let line = |out: &mut String, c: &[String]| {
        for (i, (s, w)) in c.iter().zip(width.iter()).enumerate() {
            if i == 0 {
                let _ = write!(out, "{s:<w$}");
            } else {
                let _ = write!(out, "  {s:>w$}");
            }
        }
        out.push('\n');
    };
    line(&mut out, &header.map(String::from));
    for c in &cells {
        line(&mut out, c);
    }
    let counted =
        |t: fn(&Row) -> Option<f64>| rows.iter().filter(|r| r.mips(t(r)).is_some()).count();
    let _ = writeln!(
        out,
        "median MIPS: interp {} (over {} of {n} programs), jit {} (over {} of {n})",
        fmt_opt(median_mips(rows, |r| r.interp), ""),
        counted(|r| r.interp),
        fmt_opt(median_mips(rows, |r| r.jit), ""),
        counted(|r| r.jit),
        n = rows.len()
    );
    let _ = writeln!(
        out,
        "geometric mean: qemu/jit {}, interp/jit {}",
        fmt_ratio2(geomean(rows.iter().map(|r| Row::ratio(r.qemu, r.jit)))),
        fmt_opt(
            geomean(rows.iter().map(|r| Row::ratio(r.interp, r.jit))),
            "x"
        ),
    );
    for r in rows {
        for n in &r.notes {
            let _ = writeln!(out, "note: {}: {n}", r.name);
        }
    }
    out
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x}"),
        _ => "null".into(),
    }
}

fn to_json(rows: &[Row], runs: usize, qemu_note: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{{\n  \"runs\": {runs},\n  \"qemu\": {},\n  \"programs\": [",
        json_str(qemu_note)
    );
    for (i, r) in rows.iter().enumerate() {
        let args: Vec<String> = r.args.iter().map(|a| json_str(a)).collect();
        let notes: Vec<String> = r.notes.iter().map(|a| json_str(a)).collect();
        let stats: Vec<String> = r
            .jit_stats
            .iter()
            .map(|(k, v)| format!("{}: {}", json_str(k), json_num(Some(*v))))
            .collect();
        let _ = write!(
            out,
            "    {{\"name\": {}, \"args\": [{}], \"retired\": {}, \"native_s\": {}, \"qemu_s\": {}, \
             \"interp_s\": {}, \"jit_s\": {}, \"interp_mips\": {}, \"jit_mips\": {}, \
             \"jit_vs_native\": {}, \"qemu_vs_jit\": {}, \"interp_vs_jit\": {}, \"jit_stats\": {{{}}}, \
             \"notes\": [{}]}}",
            json_str(&r.name),
            args.join(", "),
            r.retired.map_or("null".into(), |n| n.to_string()),
            json_num(r.native),
            json_num(r.qemu),
            json_num(r.interp),
            json_num(r.jit),
            json_num(r.mips(r.interp)),
            json_num(r.mips(r.jit)),
            json_num(Row::ratio(r.jit, r.native)),
            json_num(Row::ratio(r.qemu, r.jit)),
            json_num(Row::ratio(r.interp, r.jit)),
            stats.join(", "),
            notes.join(", "),
        );
        out.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    let _ = writeln!(
        out,
        "  ],\n  \"median_interp_mips\": {},\n  \"median_jit_mips\": {},\n  \"geomean_qemu_vs_jit\": {}\n}}",
        json_num(median_mips(rows, |r| r.interp)),
        json_num(median_mips(rows, |r| r.jit)),
        json_num(geomean(rows.iter().map(|r| Row::ratio(r.qemu, r.jit)))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn failed_self_checks_are_seen_on_the_last_line() {
        assert!(self_checks_failed(b"x=1\nFAILED (2632 failures)\n\n"));
        assert!(self_checks_failed(b"sort FAILED (1 failures)\n"));
        assert!(!self_checks_failed(b"sort ok (0 failures)\n"));
        assert!(!self_checks_failed(
            b"FAILED (3 failures)\nbut ok (0 failures)\n"
        ));
        assert!(!self_checks_failed(b""));
    }

    #[test]
    fn table_and_json_show_ratios() {
        let rows = vec![
            Row {
                name: "sort".into(),
                retired: Some(200_000_000),
                native: Some(0.01),
                qemu: Some(0.1),
                interp: Some(2.0),
                jit: Some(0.05),
                jit_stats: [
                    ("compiled", 120.0),
                    ("us/block", 80.5),
                    ("chain-rate", 97.0),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
                ..Row::default()
            },
            Row {
                name: "bad".into(),
                notes: vec!["lockstep: exit code 2".into()],
                ..Row::default()
            },
        ];
        let t = to_table(&rows, 3, "q");
        assert!(t.contains("200,000,000"), "{t}");
        assert!(t.contains("100.0") && t.contains("4000.0"), "{t}"); // MIPS
        assert!(
            t.contains("5.0x") && t.contains("2.00x") && t.contains("40.0x"),
            "{t}"
        );
        assert!(
            t.contains("80.5") && t.contains("97.0") && t.contains("120"),
            "{t}"
        );
        assert!(
            t.contains("median MIPS: interp 100.0 (over 1 of 2 programs), jit 4000.0"),
            "{t}"
        );
        assert!(
            t.contains("geometric mean: qemu/jit 2.00x, interp/jit 40.0x"),
            "{t}"
        );
        assert!(t.contains("note: bad: lockstep: exit code 2"), "{t}");
        let j = to_json(&rows, 3, "q");
        assert!(
            j.contains("\"interp_mips\": 100,") && j.contains("\"median_jit_mips\": 4000"),
            "{j}"
        );
        assert!(j.contains("\"us/block\": 80.5"), "{j}");
        assert!(j.contains("\"retired\": null"), "{j}");
    }

    #[test]
    fn counts_get_separators() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(1234), "1,234");
        assert_eq!(fmt_count(123456789), "123,456,789");
    }
}
