//! The C test programs (tests/programs/*.c, embedded here) and how they are built: the catalog
//! shared by `tests/programs.rs` and `lockstep bench`.
//!
//! Every program is built in five variants: glibc and musl, each at -O0 and -O2, plus a
//! glibc -O2 `-static-pie` build; a program may add more (`extra_variants`: -O3, and
//! -O3 -march=x86-64-v3, whose binaries run AVX2/FMA unconditionally). A binary is named
//! `<program>-<libc>-<opt>`, e.g. `sort-musl-O2`; its golden file is
//! `goldens/programs/<program>-<libc>-<opt>.golden`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One C program of the suite.
#[derive(Debug)]
pub struct Program {
    /// File stem of tests/programs/<name>.c.
    pub name: &'static str,
    /// The C source text.
    pub source: &'static str,
    /// Arguments (after argv[0]) for the test suite: small inputs, a few million
    /// instructions at most.
    pub test_args: &'static [&'static str],
    /// The exit code the program returns with `test_args` when all its self-checks pass.
    pub test_exit: i32,
    /// Arguments for `lockstep bench` (bigger inputs); `None`: not a benchmark.
    pub bench_args: Option<&'static [&'static str]>,
    /// Linked with `-lm`.
    pub libm: bool,
    /// Which variants must print the same bytes.
    pub output: SameOutput,
    /// Variants built for this program in addition to `VARIANTS`.
    pub extra_variants: &'static [Variant],
}

/// Which binaries of one program must print the same stdout (each binary is always compared
/// with its own native run too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SameOutput {
    /// Every variant.
    All,
    /// Variants linked with the same C library (glibc and musl format `%La` differently, and
    /// their libm functions may round differently).
    PerLibc,
}

macro_rules! program {
    ($name:literal, $test_args:expr, $exit:expr, $bench:expr) => {
        program!($name, $test_args, $exit, $bench; false, SameOutput::All, &[])
    };
    ($name:literal, $test_args:expr, $exit:expr, $bench:expr; $libm:expr, $output:expr, $extra:expr) => {
        Program {
            name: $name,
            source: include_str!(concat!("../../tests/programs/", $name, ".c")),
            test_args: $test_args,
            test_exit: $exit,
            bench_args: $bench,
            libm: $libm,
            output: $output,
            extra_variants: $extra,
        }
    };
}

const GLIBC_O3: Variant = Variant {
    libc: Libc::Glibc,
    opt: Opt::O3,
};
const MUSL_O3: Variant = Variant {
    libc: Libc::Musl,
    opt: Opt::O3,
};
const GLIBC_O3V3: Variant = Variant {
    libc: Libc::Glibc,
    opt: Opt::O3V3,
};
/// For loops the compiler vectorises: -O3 with SSE2, and -O3 with AVX2/FMA.
const VECTOR_VARIANTS: &[Variant] = &[GLIBC_O3, MUSL_O3, GLIBC_O3V3];

/// Every program in tests/programs/ (the test checks that this list matches the directory).
pub static PROGRAMS: &[Program] = &[
    program!("hello", &[], 0, None),
    program!("arith", &[], 0, Some(&["4000000"])),
    program!("hash", &[], 0, Some(&["4194304"])),
    program!("sort", &[], 0, Some(&["200000"])),
    program!("strings", &["alpha", "two words", "", "ünïcödé"], 5, None),
    program!("primes", &[], 0, Some(&["10000000"])),
    program!("bignum", &[], 0, Some(&["8000"])),
    program!("bits", &[], 3, Some(&["200000"])),
    program!("recursion", &[], 61, Some(&["35"])),
    program!("collatz", &[], 7, Some(&["1000000"])),
    program!("nbody", &[], 0, Some(&["30000"])),
    program!("bf", &[], 0, Some(&["255"])),
    program!("heap", &[], 0, Some(&["200000"])),
    program!("entropy", &[], 0, None),
    program!("fpmath", &[], 0, Some(&["2000000"]); true, SameOutput::All, &[GLIBC_O3V3]),
    program!("ldouble", &[], 0, Some(&["1000000"]); true, SameOutput::PerLibc, &[]),
    program!("libm", &[], 0, Some(&["2000"]); true, SameOutput::PerLibc, &[GLIBC_O3V3]),
    program!("matrix", &[], 0, Some(&["200"]); true, SameOutput::All, VECTOR_VARIANTS),
    program!("mandel", &[], 0, Some(&["400"]); false, SameOutput::All, &[GLIBC_O3V3]),
    program!("vecint", &[], 0, None; false, SameOutput::All, VECTOR_VARIANTS),
];

/// Every variant `program` is built in: `VARIANTS`, then its extra variants.
pub fn variants_of(program: &Program) -> Vec<Variant> {
    let mut v = VARIANTS.to_vec();
    v.extend_from_slice(program.extra_variants);
    v
}

/// Looks a program up by name.
pub fn find(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name == name)
}

/// The C library a binary is linked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Libc {
    Glibc,
    Musl,
}

impl Libc {
    pub fn name(self) -> &'static str {
        match self {
            Libc::Glibc => "glibc",
            Libc::Musl => "musl",
        }
    }

    /// The compiler driver.
    pub fn compiler(self) -> &'static str {
        match self {
            Libc::Glibc => "gcc",
            Libc::Musl => "musl-gcc",
        }
    }
}

/// Optimisation level and link mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    O0,
    O2,
    /// -O2, linked with -static-pie (relocates itself at start-up).
    O2Pie,
    /// -O3 (more vectorisation, still SSE2 only).
    O3,
    /// -O3 -march=x86-64-v3: AVX, AVX2, FMA, BMI1/2 used without any CPUID check, so these
    /// binaries run only on CPUs (and interpreters) that advertise AVX2.
    O3V3,
}

impl Opt {
    pub fn name(self) -> &'static str {
        match self {
            Opt::O0 => "O0",
            Opt::O2 => "O2",
            Opt::O2Pie => "O2pie",
            Opt::O3 => "O3",
            Opt::O3V3 => "O3v3",
        }
    }

    /// Whether the binaries execute AVX2/FMA instructions unconditionally.
    pub fn needs_avx2(self) -> bool {
        self == Opt::O3V3
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Opt::O0 => &["-static", "-O0"],
            Opt::O2 => &["-static", "-O2"],
            Opt::O2Pie => &["-static-pie", "-fPIE", "-O2"],
            Opt::O3 => &["-static", "-O3"],
            Opt::O3V3 => &["-static", "-O3", "-march=x86-64-v3"],
        }
    }
}

/// A (libc, optimisation) combination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub libc: Libc,
    pub opt: Opt,
}

/// The variants the test suite builds, in order.
pub const VARIANTS: &[Variant] = &[
    Variant {
        libc: Libc::Glibc,
        opt: Opt::O0,
    },
    Variant {
        libc: Libc::Glibc,
        opt: Opt::O2,
    },
    Variant {
        libc: Libc::Glibc,
        opt: Opt::O2Pie,
    },
    Variant {
        libc: Libc::Musl,
        opt: Opt::O0,
    },
    Variant {
        libc: Libc::Musl,
        opt: Opt::O2,
    },
];

impl Variant {
    /// `<libc>-<opt>`, e.g. `musl-O2`.
    pub fn name(self) -> String {
        format!("{}-{}", self.libc.name(), self.opt.name())
    }
}

/// Flags common to every build (warnings are reported but never fatal).
const COMMON_FLAGS: &[&str] = &["-std=gnu11", "-Wall", "-Wextra"];

/// The argument vector of a compile (without the compiler itself).
pub fn compile_args(program: &Program, variant: Variant, src: &Path, out: &Path) -> Vec<String> {
    let mut args: Vec<String> = variant.opt.flags().iter().map(|s| s.to_string()).collect();
    args.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
    args.push("-o".into());
    args.push(out.display().to_string());
    args.push(src.display().to_string());
    if program.libm {
        args.push("-lm".into());
    }
    args
}

/// Whether `cmd --version` runs.
pub fn have_command(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Checks that the compilers for `libcs` exist; the error says which package to install.
pub fn check_compilers(libcs: &[Libc]) -> Result<(), String> {
    for libc in libcs {
        let cc = libc.compiler();
        if !have_command(cc) {
            let pkg = match libc {
                Libc::Glibc => "gcc libc6-dev",
                Libc::Musl => "musl-tools",
            };
            return Err(format!(
                "`{cc}` not found: the {} builds of the test programs need it \
                 (Debian: apt-get install -y {pkg})",
                libc.name()
            ));
        }
    }
    Ok(())
}

fn first_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

fn dpkg_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", package])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// One line per component that decides the bytes of the built binaries (compiler, linker, the
/// two C libraries). Goldens hold retired counts and hashes, which change with any of these.
pub fn toolchain_description() -> String {
    let unknown = || "unknown".to_string();
    let gcc = first_line("gcc", &["--version"]).unwrap_or_else(unknown);
    let ld = first_line("ld", &["--version"]).unwrap_or_else(unknown);
    let glibc = dpkg_version("libc6-dev")
        .map(|v| format!("libc6-dev {v}"))
        .or_else(|| first_line("ldd", &["--version"]))
        .unwrap_or_else(unknown);
    let musl = dpkg_version("musl-dev")
        .map(|v| format!("musl-dev {v}"))
        .or_else(|| {
            // musl's dynamic loader prints its version when run directly.
            let out = Command::new("/lib/ld-musl-x86_64.so.1").output().ok()?;
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            text.lines()
                .find(|l| l.starts_with("Version"))
                .map(|l| format!("musl {l}"))
        })
        .unwrap_or_else(unknown);
    format!("gcc: {gcc}\nld: {ld}\nglibc: {glibc}\nmusl: {musl}\n")
}

/// FNV-1a, used for build stamps (not security relevant).
fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in *part {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A built binary.
#[derive(Clone, Debug)]
pub struct Binary {
    pub program: &'static Program,
    pub variant: Variant,
    /// `<program>-<libc>-<opt>`.
    pub id: String,
    pub path: PathBuf,
}

/// Builds `program` in `variant` into `dir` (which holds the sources too). Reuses an existing
/// binary when its stamp (source, command line, toolchain) is unchanged.
pub fn build(
    program: &'static Program,
    variant: Variant,
    dir: &Path,
    toolchain: &str,
) -> Result<Binary, String> {
    let id = format!("{}-{}", program.name, variant.name());
    let src_dir = dir.join("src");
    std::fs::create_dir_all(&src_dir).map_err(|e| format!("{}: {e}", src_dir.display()))?;
    let src = src_dir.join(format!("{}.c", program.name));
    // Each build writes the source under a private name first, then renames, so parallel
    // builds of the same program never see a half-written file.
    if std::fs::read_to_string(&src).ok().as_deref() != Some(program.source) {
        let tmp = src_dir.join(format!("{}.c.{id}.tmp", program.name));
        std::fs::write(&tmp, program.source).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &src).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    let out = dir.join(&id);
    let cc = variant.libc.compiler();
    let args = compile_args(program, variant, &src, &out);
    let stamp_text = format!(
        "{:016x}\n",
        fnv64(&[
            program.source.as_bytes(),
            cc.as_bytes(),
            args.join(" ").as_bytes(),
            toolchain.as_bytes()
        ])
    );
    let stamp = dir.join(format!("{id}.stamp"));
    let binary = Binary {
        program,
        variant,
        id: id.clone(),
        path: out.clone(),
    };
    if out.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&stamp_text) {
        return Ok(binary);
    }
    let tmp_out = dir.join(format!("{id}.tmp"));
    let result = Command::new(cc)
        .args(compile_args(program, variant, &src, &tmp_out))
        .output()
        .map_err(|e| format!("{id}: cannot run {cc}: {e}"))?;
    if !result.status.success() {
        let mut msg = format!("{id}: {cc} {} failed ({})\n", args.join(" "), result.status);
        msg.push_str(&String::from_utf8_lossy(&result.stderr));
        return Err(msg);
    }
    std::fs::rename(&tmp_out, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    std::fs::write(&stamp, stamp_text).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(binary)
}

/// Builds every (program, variant) pair on `threads` worker threads; returns the binaries in
/// catalog order, or every error joined.
pub fn build_all(
    jobs: &[(&'static Program, Variant)],
    dir: &Path,
    toolchain: &str,
    threads: usize,
) -> Result<Vec<Binary>, String> {
    let results = parallel_map(jobs, threads, |&(p, v)| build(p, v, dir, toolchain));
    let mut bins = Vec::new();
    let mut errors = String::new();
    for r in results {
        match r {
            Ok(b) => bins.push(b),
            Err(e) => {
                let _ = writeln!(errors, "{e}");
            }
        }
    }
    if errors.is_empty() {
        Ok(bins)
    } else {
        Err(errors)
    }
}

/// Maps `f` over `items` on up to `threads` scoped threads; results keep the input order.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item was processed")
        })
        .collect()
}

/// Number of worker threads to use for builds and runs.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}
