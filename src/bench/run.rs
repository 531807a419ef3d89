//! Running a guest program natively, under `qemu-x86_64` or under `lockstep user`, with a
//! timeout, capturing its output; and parsing the `--stats` line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed by us after the timeout.
    Timeout,
}

impl Exit {
    /// The shell's view: a signal `s` reads as `128 + s`.
    pub fn shell_code(self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(c),
            Exit::Signal(s) => Some(128 + s),
            Exit::Timeout => None,
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
            Exit::Timeout => write!(f, "timed out"),
        }
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct Output {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Wall time from spawn to exit.
    pub wall: Duration,
}

/// What to run: a guest binary with its arguments, started in `dir` as `./<file name>` so that
/// argv[0] (and with it the initial stack layout) does not depend on where the tree lives.
#[derive(Clone, Debug)]
pub struct Guest {
    pub path: PathBuf,
    pub args: Vec<String>,
}

impl Guest {
    pub fn new(path: &Path, args: &[&str]) -> Guest {
        Guest {
            path: path.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// `./<file name>`.
    pub fn arg0(&self) -> String {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        format!("./{}", name.unwrap_or_default())
    }
}

/// Runs `cmd` to completion or until `timeout`, capturing stdout and stderr.
/// stdin is /dev/null and the environment is empty.
pub fn run_command(cmd: Command, timeout: Duration) -> std::io::Result<Output> {
    run_command_env(cmd, &[], timeout)
}

/// [`run_command`] with only the variables `env` in the environment.
pub fn run_command_env(
    mut cmd: Command,
    env: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .envs(env.iter().copied());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let mut err_pipe = child.stderr.take().expect("stderr is piped");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let exit = loop {
        if let Some(status) = child.try_wait()? {
            break exit_of(status);
        }
        if start.elapsed() > timeout {
            // The child is ours; kill it by its pid (Child::kill) and reap it.
            let _ = child.kill();
            let _ = child.wait();
            break Exit::Timeout;
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    let wall = start.elapsed();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Output {
        exit,
        stdout,
        stderr,
        wall,
    })
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

/// Runs the guest directly on the host.
pub fn run_native(guest: &Guest, timeout: Duration) -> std::io::Result<Output> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(&guest.path);
    cmd.arg0(guest.arg0())
        .args(&guest.args)
        .current_dir(guest.dir());
    run_command(cmd, timeout)
}

/// Runs the guest under `qemu` (path to qemu-x86_64).
pub fn run_qemu(qemu: &Path, guest: &Guest, timeout: Duration) -> std::io::Result<Output> {
    let mut cmd = Command::new(qemu);
    cmd.arg(guest.arg0())
        .args(&guest.args)
        .current_dir(guest.dir());
    run_command(cmd, timeout)
}

/// Runs the guest under `lockstep user --seed <seed> --stats`.
pub fn run_lockstep(
    lockstep: &Path,
    seed: &str,
    guest: &Guest,
    timeout: Duration,
) -> std::io::Result<Output> {
    run_lockstep_with(lockstep, &[], seed, guest, timeout)
}

/// [`run_lockstep`] with extra `lockstep user` options (e.g. `--engine jit`).
pub fn run_lockstep_with(
    lockstep: &Path,
    options: &[&str],
    seed: &str,
    guest: &Guest,
    timeout: Duration,
) -> std::io::Result<Output> {
    run_lockstep_env(lockstep, options, &[], seed, guest, timeout)
}

/// [`run_lockstep_with`] with extra environment variables (e.g. `LOCKSTEP_JIT_STATS=1`).
pub fn run_lockstep_env(
    lockstep: &Path,
    options: &[&str],
    env: &[(&str, &str)],
    seed: &str,
    guest: &Guest,
    timeout: Duration,
) -> std::io::Result<Output> {
    let mut cmd = Command::new(lockstep);
    cmd.args(["user", "--seed", seed, "--stats"])
        .args(options)
        .arg(guest.arg0())
        .args(&guest.args)
        .current_dir(guest.dir());
    run_command_env(cmd, env, timeout)
}

/// The `--stats` line: `retired=<n> hash=<16 hex> wall=<s> mips=<x>`.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub retired: u64,
    /// The 16 hex digits as printed.
    pub hash: String,
    pub wall: Option<f64>,
    pub mips: Option<f64>,
}

/// Splits lockstep's stderr into the guest's own stderr and the stats line (the last line
/// that contains `retired=`; the guest's output may lack a final newline, so the stats text
/// can follow it on the same line).
pub fn split_stats(stderr: &[u8]) -> (Vec<u8>, Result<Stats, String>) {
    let Some(pos) = stderr.windows(8).rposition(|w| w == b"retired=") else {
        return (
            stderr.to_vec(),
            Err("no `retired=` stats line on stderr".into()),
        );
    };
    let end = stderr[pos..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(stderr.len(), |i| pos + i);
    let stats = parse_stats(&String::from_utf8_lossy(&stderr[pos..end]));
    (stderr[..pos].to_vec(), stats)
}

/// Parses `retired=<n> hash=<16 hex> wall=<s> mips=<x>` (wall and mips optional).
pub fn parse_stats(line: &str) -> Result<Stats, String> {
    let mut retired = None;
    let mut hash = None;
    let mut wall = None;
    let mut mips = None;
    for field in line.split_whitespace() {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        match k {
            "retired" => retired = v.parse::<u64>().ok(),
            "hash" if v.len() == 16 && v.bytes().all(|b| b.is_ascii_hexdigit()) => {
                hash = Some(v.to_ascii_lowercase());
            }
            "wall" => wall = v.trim_end_matches('s').parse::<f64>().ok(),
            "mips" => mips = v.parse::<f64>().ok(),
            _ => {}
        }
    }
    match (retired, hash) {
        (Some(retired), Some(hash)) => Ok(Stats {
            retired,
            hash,
            wall,
            mips,
        }),
        _ => Err(format!("malformed stats line: {line:?}")),
    }
}

/// The JIT's statistics line (`jit: compiled=… us/block=… …`, printed with
/// `LOCKSTEP_JIT_STATS=1`) as key/value pairs, units and `%` stripped.
pub fn parse_jit_stats(stderr: &[u8]) -> Option<std::collections::BTreeMap<String, f64>> {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().rev().find(|l| l.starts_with("jit: "))?;
    let mut m = std::collections::BTreeMap::new();
    for field in line.split_whitespace().skip(1) {
        if let Some((k, v)) = field.split_once('=') {
            let v = v.trim_end_matches('%').trim_end_matches("KiB");
            if let Ok(x) = v.parse::<f64>() {
                m.insert(k.to_string(), x);
            }
        }
    }
    Some(m)
}

/// Finds an executable by name on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stats_line() {
        let s = parse_stats("retired=12345 hash=00ff00ff00ff00FF wall=0.25 mips=49.4").unwrap();
        assert_eq!(s.retired, 12345);
        assert_eq!(s.hash, "00ff00ff00ff00ff");
        assert_eq!(s.wall, Some(0.25));
        assert_eq!(s.mips, Some(49.4));
        assert!(parse_stats("retired=1 hash=123").is_err());
        assert!(parse_stats("hash=0000000000000000").is_err());
    }

    #[test]
    fn parses_jit_stats_line() {
        let err = b"guest\nretired=5 hash=0123456789abcdef wall=0.1 mips=1.0\njit: compiled=12 us/block=80.5 code=33KiB hit-rate=99.5% chain-rate=97.0% errors=0\n";
        let m = parse_jit_stats(err).expect("jit line");
        assert_eq!(m.get("compiled"), Some(&12.0));
        assert_eq!(m.get("us/block"), Some(&80.5));
        assert_eq!(m.get("code"), Some(&33.0));
        assert_eq!(m.get("chain-rate"), Some(&97.0));
        assert_eq!(parse_jit_stats(b"retired=5 hash=0123456789abcdef"), None);
    }

    #[test]
    fn splits_guest_stderr_from_stats() {
        let (guest, stats) =
            split_stats(b"warn\npartial retired=7 hash=0123456789abcdef wall=1s mips=0\n");
        assert_eq!(guest, b"warn\npartial ");
        assert_eq!(stats.unwrap().retired, 7);
        let (guest, stats) = split_stats(b"no stats here\n");
        assert_eq!(guest, b"no stats here\n");
        assert!(stats.is_err());
    }

    #[test]
    fn native_run_captures_output_and_code() {
        let out = run_command(
            {
                let mut c = Command::new("/bin/sh");
                c.args(["-c", "echo out; echo err >&2; exit 3"]);
                c
            },
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Code(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        let out = run_command(
            {
                let mut c = Command::new("/bin/sh");
                c.args(["-c", "exec sleep 5"]);
                c
            },
            Duration::from_millis(100),
        )
        .unwrap();
        assert_eq!(out.exit, Exit::Timeout);
    }
}
