//! Real programs: the C programs of tests/programs/ are built with gcc (glibc) and musl-gcc,
//! at -O0 and -O2 (plus a glibc -O2 static-pie build), run natively and under
//! `lockstep user --seed 1 --stats`, and compared: stdout bytes and exit code with the native
//! run, and stdout, exit code, retired-instruction count and state hash with the goldens in
//! goldens/programs/<program>-<libc>-<opt>.golden.
//!
//! Re-bless after an intended change (the toolchain, the harness's initial state, the hash):
//!     LOCKSTEP_BLESS=1 cargo test --test programs
//! then run it again without LOCKSTEP_BLESS: the JIT and `--verify` runs are compared with the
//! goldens only then (while blessing they would race with the rewrite).
//! `LOCKSTEP_BLESS=native` writes only missing or changed stdout/exit parts from native runs
//! (retired and hash become `-`, to be blessed with LOCKSTEP_BLESS=1).
//!
//! Needs gcc and musl-gcc (Debian: apt-get install -y musl-tools); without musl-gcc the tests
//! fail and say so instead of skipping.
//!
//! Some programs add variants (programs::Program::extra_variants). The `-O3v3` ones
//! (-march=x86-64-v3) execute AVX2/FMA unconditionally: they run natively only on a host with
//! AVX2 and FMA, and under lockstep only while the interpreter advertises AVX2 in CPUID leaf 7
//! (it does since the XSAVE family exists); otherwise they are skipped with a note.

use lockstep::bench::programs::{self, Binary, Libc, SameOutput, PROGRAMS};
use lockstep::bench::run::{self, Exit, Guest, Output, Stats};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The lockstep executable: the one cargo built for this test, or `$LOCKSTEP_BIN` (e.g. a
/// release build: `LOCKSTEP_BIN=target/release/lockstep cargo test --test programs`).
fn lockstep_bin() -> String {
    std::env::var("LOCKSTEP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_lockstep").to_string())
}
const BLESS_CMD: &str = "LOCKSTEP_BLESS=1 cargo test --test programs";
const NATIVE_TIMEOUT: Duration = Duration::from_secs(30);
const LOCKSTEP_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many lines of a diff per binary in a failure report.
const MAX_DIFF_LINES: usize = 40;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bless {
    Off,
    /// Rewrite everything from lockstep runs that agree with native.
    Full,
    /// Write stdout/exit from native runs; retired/hash become unknown.
    Native,
}

fn bless_mode() -> Bless {
    match std::env::var("LOCKSTEP_BLESS").as_deref() {
        Ok("native") => Bless::Native,
        Ok(v) if !v.is_empty() && v != "0" => Bless::Full,
        _ => Bless::Off,
    }
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("goldens")
        .join("programs")
}

fn golden_path(id: &str) -> PathBuf {
    golden_dir().join(format!("{id}.golden"))
}

// ---------------------------------------------------------------------------------------------
// Building and native runs, shared by all tests of this file (each done once per process).

static TOOLCHAIN: OnceLock<String> = OnceLock::new();
static BUILT: OnceLock<Result<Vec<Binary>, String>> = OnceLock::new();
static NATIVE: OnceLock<Vec<Option<Result<Output, String>>>> = OnceLock::new();

fn toolchain() -> &'static str {
    TOOLCHAIN.get_or_init(programs::toolchain_description)
}

/// Every (program, variant) binary, built into target/tmp/programs (cached by a stamp).
fn binaries() -> &'static [Binary] {
    let built = BUILT.get_or_init(|| {
        programs::check_compilers(&[Libc::Glibc, Libc::Musl]).map_err(|e| {
            format!("{e}\nThe program tests need both compilers (CI installs musl-tools).")
        })?;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("programs");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let jobs: Vec<_> = PROGRAMS
            .iter()
            .flat_map(|p| programs::variants_of(p).into_iter().map(move |v| (p, v)))
            .collect();
        let start = Instant::now();
        let bins = programs::build_all(&jobs, &dir, toolchain(), programs::default_threads())?;
        eprintln!(
            "programs: {} binaries ready in {} ({:.1}s)",
            bins.len(),
            dir.display(),
            start.elapsed().as_secs_f64()
        );
        Ok(bins)
    });
    match built {
        Ok(b) => b,
        Err(e) => panic!("building the test programs failed:\n{e}"),
    }
}

fn guest(b: &Binary) -> Guest {
    Guest::new(&b.path, b.program.test_args)
}

/// Whether the interpreter advertises AVX2 (CPUID.(EAX=7,ECX=0):EBX bit 5).
fn interp_has_avx2() -> bool {
    lockstep_interp::cpuid::query(7, 0, 0, lockstep_interp::cpuid::OsState::RESET).ebx & (1 << 5)
        != 0
}

/// Why `b` is not run natively on this host, if it is not.
fn native_skip(b: &Binary) -> Option<&'static str> {
    let host_ok = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    (b.variant.opt.needs_avx2() && !host_ok).then_some("needs AVX2 and FMA, which this host lacks")
}

/// Why `b` is not run under lockstep, if it is not.
fn lockstep_skip(b: &Binary) -> Option<&'static str> {
    native_skip(b).or_else(|| {
        (b.variant.opt.needs_avx2() && !interp_has_avx2())
            .then_some("needs AVX2, which the interpreter does not advertise in CPUID yet")
    })
}

/// Native results, in the order of `binaries()` (`None`: skipped, see `native_skip`).
fn native_results() -> &'static [Option<Result<Output, String>>] {
    NATIVE.get_or_init(|| {
        let bins = binaries();
        programs::parallel_map(bins, programs::default_threads() * 2, |b| {
            native_skip(b).is_none().then(|| {
                run::run_native(&guest(b), NATIVE_TIMEOUT).map_err(|e| format!("cannot run: {e}"))
            })
        })
    })
}

fn find_binary(id: &str) -> &'static Binary {
    binaries()
        .iter()
        .find(|b| b.id == id)
        .unwrap_or_else(|| panic!("no binary {id}"))
}

// ---------------------------------------------------------------------------------------------
// Golden files.

/// `exit: <code>\nretired: <n or ->\nhash: <16 hex or ->\nstdout:\n<raw stdout bytes>`
#[derive(Clone, Debug, PartialEq)]
struct Golden {
    exit: i32,
    retired: Option<u64>,
    hash: Option<String>,
    stdout: Vec<u8>,
}

impl Golden {
    fn parse(bytes: &[u8]) -> Result<Golden, String> {
        let mut rest = bytes;
        let mut field = |name: &str| -> Result<String, String> {
            let nl = rest
                .iter()
                .position(|&b| b == b'\n')
                .ok_or("truncated header")?;
            let line = std::str::from_utf8(&rest[..nl]).map_err(|_| "header is not UTF-8")?;
            rest = &rest[nl + 1..];
            let value = line
                .strip_prefix(name)
                .and_then(|l| l.strip_prefix(':'))
                .ok_or_else(|| format!("expected `{name}:`, found {line:?}"))?;
            Ok(value.trim().to_string())
        };
        let exit = field("exit")?
            .parse::<i32>()
            .map_err(|e| format!("exit: {e}"))?;
        let retired = match field("retired")?.as_str() {
            "-" => None,
            v => Some(v.parse::<u64>().map_err(|e| format!("retired: {e}"))?),
        };
        let hash = match field("hash")?.as_str() {
            "-" => None,
            v if v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit()) => Some(v.to_string()),
            v => return Err(format!("hash: expected 16 hex digits, found {v:?}")),
        };
        let marker = field("stdout")?;
        if !marker.is_empty() {
            return Err(format!("unexpected text after `stdout:`: {marker:?}"));
        }
        Ok(Golden {
            exit,
            retired,
            hash,
            stdout: rest.to_vec(),
        })
    }

    fn render(&self) -> Vec<u8> {
        let mut out = format!(
            "exit: {}\nretired: {}\nhash: {}\nstdout:\n",
            self.exit,
            self.retired.map_or("-".to_string(), |r| r.to_string()),
            self.hash.as_deref().unwrap_or("-")
        )
        .into_bytes();
        out.extend_from_slice(&self.stdout);
        out
    }
}

fn read_golden(id: &str) -> Result<Option<Golden>, String> {
    match std::fs::read(golden_path(id)) {
        Ok(bytes) => Golden::parse(&bytes)
            .map(Some)
            .map_err(|e| format!("{id}.golden: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{id}.golden: {e}")),
    }
}

fn write_golden(id: &str, g: &Golden) {
    std::fs::create_dir_all(golden_dir()).expect("create goldens/programs");
    std::fs::write(golden_path(id), g.render()).expect("write golden");
}

// ---------------------------------------------------------------------------------------------
// Reporting helpers.

/// A line diff (longest common subsequence) with two lines of context, `-` expected and `+`
/// actual, at most MAX_DIFF_LINES lines.
fn diff(expected: &[u8], actual: &[u8]) -> String {
    let a = String::from_utf8_lossy(expected);
    let b = String::from_utf8_lossy(actual);
    let mut a: Vec<&str> = a.split_inclusive('\n').collect();
    let mut b: Vec<&str> = b.split_inclusive('\n').collect();
    // Trim the common prefix and suffix so the quadratic table stays small.
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let ctx_before: Vec<&str> = a[prefix.saturating_sub(2)..prefix].to_vec();
    let ctx_after: Vec<&str> = a[a.len() - suffix..].iter().take(2).copied().collect();
    a = a[prefix..a.len() - suffix].to_vec();
    b = b[prefix..b.len() - suffix].to_vec();
    a.truncate(400);
    b.truncate(400);
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u16; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<String> = vec![format!("@@ line {} @@", prefix.saturating_sub(2) + 1)];
    let show = |sign: char, l: &str| match l.strip_suffix('\n') {
        Some(line) => format!("{sign}{line}"),
        None => format!("{sign}{l}  (no newline at end)"),
    };
    lines.extend(ctx_before.iter().map(|l| show(' ', l)));
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            lines.push(show(' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(show('-', a[i]));
            i += 1;
        } else {
            lines.push(show('+', b[j]));
            j += 1;
        }
    }
    lines.extend(ctx_after.iter().map(|l| show(' ', l)));
    if lines.len() > MAX_DIFF_LINES {
        let more = lines.len() - MAX_DIFF_LINES;
        lines.truncate(MAX_DIFF_LINES);
        lines.push(format!("... ({more} more lines)"));
    }
    let mut out = String::from("--- expected\n+++ actual\n");
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// At most this many failures are shown in full; the rest are listed by name.
const MAX_DETAILED: usize = 12;

fn fail_report(what: &str, failures: &[String], total: usize, hint: &str) -> ! {
    let mut msg = format!("{what}: {} of {total} failed\n\n", failures.len());
    for f in failures.iter().take(MAX_DETAILED) {
        msg.push_str(f);
        msg.push('\n');
    }
    if failures.len() > MAX_DETAILED {
        msg.push_str("also failed (details omitted):");
        for f in &failures[MAX_DETAILED..] {
            msg.push(' ');
            msg.push_str(f.split([' ', ':']).next().unwrap_or(""));
        }
        msg.push_str("\n\n");
    }
    msg.push_str(hint);
    panic!("{msg}");
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn catalog_lists_every_program() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("programs");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/programs")
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".c"))
                .map(String::from)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = PROGRAMS.iter().map(|p| p.name.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "tests/programs/*.c and src/bench/programs.rs PROGRAMS disagree"
    );
}

#[test]
fn toolchain_matches_goldens() {
    let path = golden_dir().join("TOOLCHAIN");
    let now = toolchain();
    if bless_mode() != Bless::Off {
        std::fs::create_dir_all(golden_dir()).expect("create goldens/programs");
        std::fs::write(&path, now).expect("write TOOLCHAIN");
        return;
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        recorded == now,
        "the goldens in goldens/programs were made with another toolchain; retired counts and \
         hashes depend on the exact compiler and C libraries.\n{}\nIf this toolchain is the new \
         reference, re-bless with:\n    {BLESS_CMD}",
        diff(recorded.as_bytes(), now.as_bytes())
    );
}

/// Native runs: exit codes as the catalog says, self-checks pass, all variants of a program
/// print the same, and stdout/exit agree with the goldens.
#[test]
fn native_runs_are_correct() {
    let bins = binaries();
    let natives = native_results();
    let bless = bless_mode();
    let mut failures = Vec::new();
    for (b, native) in bins.iter().zip(natives) {
        let out = match native {
            None => {
                println!(
                    "{}: not run natively: {}",
                    b.id,
                    native_skip(b).unwrap_or("?")
                );
                continue;
            }
            Some(Ok(o)) => o,
            Some(Err(e)) => {
                failures.push(format!("{}: {e}", b.id));
                continue;
            }
        };
        let mut problems = String::new();
        if out.exit != Exit::Code(b.program.test_exit) {
            let _ = writeln!(
                problems,
                "{}, expected exit code {}",
                out.exit, b.program.test_exit
            );
        }
        if String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with("FAIL"))
        {
            let _ = writeln!(
                problems,
                "self-check failed:\n{}",
                indent(&tail(&out.stdout, 20))
            );
        }
        // Every variant of a program must print what its first variant printed (for
        // SameOutput::PerLibc: the first variant with the same C library).
        let first = bins
            .iter()
            .position(|x| {
                std::ptr::eq(x.program, b.program)
                    && (b.program.output == SameOutput::All || x.variant.libc == b.variant.libc)
            })
            .expect("present");
        if let Some(Ok(first_out)) = &natives[first] {
            if first_out.stdout != out.stdout {
                let _ = writeln!(
                    problems,
                    "stdout differs from {}:\n{}",
                    bins[first].id,
                    indent(&diff(&first_out.stdout, &out.stdout))
                );
            }
        }
        let code = out.exit.shell_code().unwrap_or(-1);
        match (read_golden(&b.id), bless) {
            (Err(e), _) => {
                let _ = writeln!(problems, "{e}");
            }
            (Ok(g), Bless::Native) => {
                if !matches!(&g, Some(g) if g.stdout == out.stdout && g.exit == code) {
                    let g = Golden {
                        exit: code,
                        retired: None,
                        hash: None,
                        stdout: out.stdout.clone(),
                    };
                    write_golden(&b.id, &g);
                }
            }
            (Ok(_), Bless::Full) => {} // lockstep_matches_native_and_goldens writes them
            (Ok(None), Bless::Off) => {
                let _ = writeln!(problems, "no golden {}", golden_path(&b.id).display());
            }
            (Ok(Some(g)), Bless::Off) => {
                if g.exit != code {
                    let _ = writeln!(
                        problems,
                        "golden says exit code {}, native gave {}",
                        g.exit, out.exit
                    );
                }
                if g.stdout != out.stdout {
                    let _ = writeln!(
                        problems,
                        "stdout differs from golden:\n{}",
                        indent(&diff(&g.stdout, &out.stdout))
                    );
                }
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{}:\n{}", b.id, indent(&problems)));
        }
    }
    if !failures.is_empty() {
        fail_report(
            "native runs",
            &failures,
            bins.len(),
            "Golden stdout comes from native runs: LOCKSTEP_BLESS=native cargo test --test programs",
        );
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The shell command that repeats a lockstep run by hand.
fn replay(b: &Binary, seed: &str) -> String {
    let g = guest(b);
    let dir = b
        .path
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let mut cmd = format!(
        "cd {} && {} user --seed {seed} --stats {}",
        shell_quote(&dir),
        shell_quote(&lockstep_bin()),
        g.arg0()
    );
    for a in &g.args {
        cmd.push(' ');
        cmd.push_str(&shell_quote(a));
    }
    cmd
}

/// The result of one lockstep run.
struct LockstepRun {
    out: Output,
    guest_stderr: Vec<u8>,
    stats: Result<Stats, String>,
}

/// A lockstep run with the reference interpreter (the JIT runs are below).
fn run_lockstep(b: &Binary, seed: &str) -> Result<LockstepRun, String> {
    run_lockstep_opts(b, seed, &["--engine", "interp"])
}

/// A lockstep run with extra `lockstep user` options (`--engine jit`, `--verify`).
fn run_lockstep_opts(b: &Binary, seed: &str, options: &[&str]) -> Result<LockstepRun, String> {
    let bin = lockstep_bin();
    let out = run::run_lockstep_with(Path::new(&bin), options, seed, &guest(b), LOCKSTEP_TIMEOUT)
        .map_err(|e| format!("cannot run {bin}: {e}"))?;
    let (guest_stderr, stats) = run::split_stats(&out.stderr);
    Ok(LockstepRun {
        out,
        guest_stderr,
        stats,
    })
}

/// Compares one binary's lockstep run with its native run and its golden; returns the
/// problems found (empty: all good).
fn check_lockstep(b: &Binary, native: &Output, run: &LockstepRun, bless: Bless) -> String {
    let mut problems = String::new();
    let out = &run.out;
    let context = || {
        format!(
            "  guest stderr (last lines):\n{}",
            indent(&tail(&run.guest_stderr, 8))
        )
    };
    if out.exit == Exit::Timeout {
        let _ = writeln!(
            problems,
            "timed out after {}s\n{}",
            LOCKSTEP_TIMEOUT.as_secs(),
            context()
        );
        return problems;
    }
    if out.exit != native.exit {
        let _ = writeln!(problems, "lockstep: {}, native: {}", out.exit, native.exit);
    }
    if out.stdout != native.stdout {
        let _ = writeln!(
            problems,
            "stdout differs from native:\n{}",
            indent(&diff(&native.stdout, &out.stdout))
        );
    }
    let stats = match &run.stats {
        Ok(s) => Some(s),
        Err(e) => {
            let _ = writeln!(problems, "{e}");
            None
        }
    };
    if !problems.is_empty() {
        problems.push_str(&context());
        return problems;
    }
    let stats = stats.expect("no problems means stats parsed");
    let code = out.exit.shell_code().unwrap_or(-1);
    let now = Golden {
        exit: code,
        retired: Some(stats.retired),
        hash: Some(stats.hash.clone()),
        stdout: out.stdout.clone(),
    };
    if bless == Bless::Full {
        write_golden(&b.id, &now);
        return problems;
    }
    match read_golden(&b.id) {
        Err(e) => {
            let _ = writeln!(problems, "{e}");
        }
        Ok(None) => {
            let _ = writeln!(problems, "no golden {}", golden_path(&b.id).display());
        }
        Ok(Some(g)) => {
            if g.exit != now.exit {
                let _ = writeln!(
                    problems,
                    "exit code {} but golden says {}",
                    now.exit, g.exit
                );
            }
            if g.stdout != now.stdout {
                let _ = writeln!(
                    problems,
                    "stdout differs from golden:\n{}",
                    indent(&diff(&g.stdout, &now.stdout))
                );
            }
            match g.retired {
                None => {
                    let _ = writeln!(problems, "golden has no retired count yet (retired: -)");
                }
                Some(r) if r != stats.retired => {
                    let _ = writeln!(
                        problems,
                        "retired {} but golden says {r} ({:+})",
                        stats.retired,
                        stats.retired as i128 - r as i128
                    );
                }
                Some(_) => {}
            }
            match &g.hash {
                None => {
                    let _ = writeln!(problems, "golden has no hash yet (hash: -)");
                }
                Some(h) if *h != stats.hash => {
                    let _ = writeln!(problems, "hash {} but golden says {h}", stats.hash);
                }
                Some(_) => {}
            }
        }
    }
    problems
}

/// Every binary under `lockstep user --seed 1 --stats`: stdout and exit code equal the native
/// run's, and stdout, exit code, retired count and hash equal the golden.
#[test]
fn lockstep_matches_native_and_goldens() {
    let bless = bless_mode();
    if bless == Bless::Off {
        let recorded = std::fs::read_to_string(golden_dir().join("TOOLCHAIN")).unwrap_or_default();
        assert!(
            recorded == toolchain(),
            "goldens/programs/TOOLCHAIN does not match this toolchain (see toolchain_matches_goldens); \
             re-bless with:\n    {BLESS_CMD}"
        );
    }
    let bins = binaries();
    let natives = native_results();
    let start = Instant::now();
    let runs = programs::parallel_map(bins, programs::default_threads(), |b| {
        lockstep_skip(b).is_none().then(|| run_lockstep(b, "1"))
    });
    let elapsed = start.elapsed();
    let mut failures = Vec::new();
    let mut summary = String::new();
    let mut total_retired = 0u64;
    for ((b, native), run) in bins.iter().zip(natives).zip(&runs) {
        let problems = match (native, run) {
            (_, None) | (None, _) => {
                let why = lockstep_skip(b).unwrap_or("?");
                let _ = writeln!(summary, "{:<24} skipped: {why}", b.id);
                continue;
            }
            (Some(Err(e)), _) => format!("native run: {e}\n"),
            (_, Some(Err(e))) => format!("{e}\n"),
            (Some(Ok(native)), Some(Ok(run))) => {
                if let Ok(s) = &run.stats {
                    total_retired += s.retired;
                    let _ = writeln!(
                        summary,
                        "{:<24} {:>12} retired  {:>8.3}s  {}",
                        b.id,
                        s.retired,
                        run.out.wall.as_secs_f64(),
                        s.hash
                    );
                }
                check_lockstep(b, native, run, bless)
            }
        };
        if !problems.is_empty() {
            failures.push(format!(
                "{}:\n{}    replay: {}\n",
                b.id,
                indent(&problems),
                replay(b, "1")
            ));
        }
    }
    println!(
        "{summary}total: {total_retired} instructions in {:.1}s",
        elapsed.as_secs_f64()
    );
    if !failures.is_empty() {
        fail_report(
            "lockstep runs",
            &failures,
            bins.len(),
            &format!(
                "If the differences from the goldens are intended, re-bless with:\n    {BLESS_CMD}"
            ),
        );
    }
}

/// Every binary under the JIT (`--engine jit`, and `--jit-threshold 2` so that nearly all
/// code runs compiled): stdout and exit code equal the native run's, and stdout, exit code,
/// retired count and state hash equal the interpreter's goldens.
#[test]
fn jit_matches_native_and_goldens() {
    engine_matches_goldens("jit", &["--engine", "jit"], |_| true);
    engine_matches_goldens(
        "jit-t2",
        &["--engine", "jit", "--jit-threshold", "2"],
        |_| true,
    );
}

/// `--verify` (JIT and interpreter compared block by block) finds no divergence on the O2
/// builds, and the results still equal the goldens.
#[test]
fn jit_verify_finds_no_divergence() {
    engine_matches_goldens(
        "verify",
        &["--verify", "--jit-threshold", "2"],
        |b: &Binary| b.id.ends_with("-O2"),
    );
}

fn engine_matches_goldens(what: &str, options: &[&str], pick: impl Fn(&Binary) -> bool) {
    if bless_mode() != Bless::Off {
        // lockstep_matches_native_and_goldens is rewriting the goldens right now, in parallel:
        // comparing with them would race. The run after blessing checks these.
        println!("{what}: skipped while LOCKSTEP_BLESS is set; run again without it");
        return;
    }
    let bins: Vec<&Binary> = binaries()
        .iter()
        .filter(|b| pick(b) && lockstep_skip(b).is_none())
        .collect();
    let natives = native_results();
    let runs = programs::parallel_map(&bins, programs::default_threads(), |b| {
        run_lockstep_opts(b, "1", options)
    });
    let mut failures = Vec::new();
    for (b, run) in bins.iter().zip(&runs) {
        let i = binaries()
            .iter()
            .position(|x| x.id == b.id)
            .expect("binary listed");
        let problems = match (&natives[i], run) {
            (None, _) => continue,
            (Some(Err(e)), _) => format!("native run: {e}\n"),
            (_, Err(e)) => format!("{e}\n"),
            (Some(Ok(native)), Ok(run)) => check_lockstep(b, native, run, Bless::Off),
        };
        if !problems.is_empty() {
            failures.push(format!(
                "{} ({what}: {}):\n{}    replay: {}\n",
                b.id,
                options.join(" "),
                indent(&problems),
                replay(b, "1").replacen(" user ", &format!(" user {} ", options.join(" ")), 1)
            ));
        }
    }
    if !failures.is_empty() {
        fail_report(
            &format!("lockstep runs ({what})"),
            &failures,
            bins.len(),
            "The JIT must give exactly the interpreter's results (goldens).",
        );
    }
}

/// Two runs with the same seed: identical output, guest stderr (which carries the random
/// bytes for `entropy`), retired count and hash.
#[test]
fn lockstep_same_seed_same_result() {
    for id in ["entropy-glibc-O2", "heap-musl-O2", "strings-glibc-O2pie"] {
        let b = find_binary(id);
        let one = run_lockstep(b, "1").unwrap_or_else(|e| panic!("{id}: {e}"));
        let two = run_lockstep(b, "1").unwrap_or_else(|e| panic!("{id}: {e}"));
        let s1 = one.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        let s2 = two.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(
            one.out.exit, two.out.exit,
            "{id}: exit differs between two runs with seed 1"
        );
        assert!(
            one.out.stdout == two.out.stdout,
            "{id}: stdout differs between two runs with seed 1:\n{}",
            diff(&one.out.stdout, &two.out.stdout)
        );
        assert!(
            one.guest_stderr == two.guest_stderr,
            "{id}: stderr differs between two runs with seed 1:\n{}",
            diff(&one.guest_stderr, &two.guest_stderr)
        );
        assert_eq!(
            (s1.retired, &s1.hash),
            (s2.retired, &s2.hash),
            "{id}: retired/hash differ between two runs with seed 1"
        );
    }
}

/// A different seed changes only what the guest draws from AT_RANDOM and getrandom: programs
/// that print nothing random give the same output and retired count; `entropy` (which prints
/// its random bytes to stderr) sees different bytes and ends in a different state.
#[test]
fn lockstep_seed_changes_only_entropy() {
    for id in ["sort-glibc-O2", "sort-musl-O2"] {
        let b = find_binary(id);
        let one = run_lockstep(b, "1").unwrap_or_else(|e| panic!("{id}: {e}"));
        let two = run_lockstep(b, "2").unwrap_or_else(|e| panic!("{id}: {e}"));
        let s1 = one.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        let s2 = two.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(
            one.out.exit, two.out.exit,
            "{id}: exit code depends on the seed"
        );
        assert!(
            one.out.stdout == two.out.stdout,
            "{id}: stdout depends on the seed:\n{}",
            diff(&one.out.stdout, &two.out.stdout)
        );
        // sort draws no randomness; only AT_RANDOM (stack canary, pointer guard) differs,
        // which changes data but not the instruction path.
        assert_eq!(
            s1.retired, s2.retired,
            "{id}: retired count depends on the seed"
        );
    }
    let id = "entropy-musl-O2";
    let b = find_binary(id);
    let one = run_lockstep(b, "1").unwrap_or_else(|e| panic!("{id}: {e}"));
    let two = run_lockstep(b, "2").unwrap_or_else(|e| panic!("{id}: {e}"));
    let s1 = one.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
    let s2 = two.stats.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
    assert_eq!(
        one.out.exit,
        Exit::Code(0),
        "{id}: {}",
        String::from_utf8_lossy(&one.out.stdout)
    );
    assert!(
        one.out.stdout == two.out.stdout,
        "{id}: stdout must not depend on the seed"
    );
    let lines = |s: &[u8]| {
        String::from_utf8_lossy(s)
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let (l1, l2) = (lines(&one.guest_stderr), lines(&two.guest_stderr));
    for key in ["getrandom=", "AT_RANDOM="] {
        let a = l1.iter().find(|l| l.starts_with(key));
        let b = l2.iter().find(|l| l.starts_with(key));
        assert!(
            a.is_some() && b.is_some(),
            "{id}: no `{key}` line on stderr"
        );
        assert_ne!(a, b, "{id}: {key} bytes are the same with seeds 1 and 2");
    }
    assert_ne!(
        s1.hash, s2.hash,
        "{id}: getrandom bytes differ but the state hash does not"
    );
}

#[test]
fn golden_format_round_trips() {
    let g = Golden {
        exit: 3,
        retired: Some(42),
        hash: Some("0123456789abcdef".into()),
        stdout: b"a\nb".to_vec(),
    };
    assert_eq!(Golden::parse(&g.render()).unwrap(), g);
    let u = Golden {
        exit: 0,
        retired: None,
        hash: None,
        stdout: Vec::new(),
    };
    assert_eq!(Golden::parse(&u.render()).unwrap(), u);
    assert!(Golden::parse(b"exit: 0\nretired: x\nhash: -\nstdout:\n").is_err());
    let d = diff(b"a\nb\nc\nd\n", b"a\nb\nX\nd\n");
    assert!(
        d.contains("-c\n") && d.contains("+X\n") && d.contains(" b\n"),
        "{d}"
    );
}
