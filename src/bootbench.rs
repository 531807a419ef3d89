//! `lockstep bench-boot`: wall time from start to the userspace marker for a kernel + initrd, Lockstep (interpreter, JIT) beside qemu-system-x86_64 TCG with and without `-icount shift=0,sleep=off`, medians of several runs in one invocation.

use crate::bench::median;
use crate::initramfs::USERSPACE_MARKER;
use clap::Args;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct BenchBootArgs {
    /// Kernel (bzImage).
    #[arg(long)]
    pub kernel: PathBuf,
    /// Initrd whose /init prints the userspace marker (see `lockstep mkinitramfs`).
    #[arg(long)]
    pub initrd: PathBuf,
    /// Runs per configuration, taken in rounds of one run each (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Guest RAM in MiB.
    #[arg(long, default_value_t = 256)]
    pub ram_mb: u64,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Skip the QEMU configurations.
    #[arg(long)]
    pub no_qemu: bool,
}

const APPEND: &str = "console=ttyS0 panic=-1";

/// Seconds until a line containing the marker appeared on stdout, or None.
fn time_to_marker(mut cmd: Command, timeout: Duration) -> Option<f64> {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .ok()?;
    let out = child.stdout.take()?;
    let mut found = None;
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        if line.contains(USERSPACE_MARKER) {
            found = Some(start.elapsed().as_secs_f64());
            break;
        }
        if start.elapsed() > timeout {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    found
}

pub fn main(a: BenchBootArgs) -> i32 {
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("lockstep: cannot find my own executable: {e}");
            return 2;
        }
    };
    for p in [&a.kernel, &a.initrd] {
        if !p.exists() {
            eprintln!("lockstep: {} does not exist", p.display());
            return 2;
        }
    }
    let ram = a.ram_mb.to_string();
    let mut configs: Vec<(String, Box<dyn Fn() -> Command>)> = Vec::new();
    for engine in ["interp", "jit"] {
        let (me, k, i, ram) = (me.clone(), a.kernel.clone(), a.initrd.clone(), ram.clone());
        configs.push((
            format!("lockstep --engine {engine}"),
            Box::new(move || {
                let mut c = Command::new(&me);
                c.arg("--boot").arg(&k).arg("--initrd").arg(&i);
                c.args(["--append", APPEND, "--ram-mb", &ram, "--engine", engine]);
                c
            }),
        ));
    }
    if !a.no_qemu {
        for icount in [false, true] {
            let (k, i, ram) = (a.kernel.clone(), a.initrd.clone(), ram.clone());
            configs.push((
                if icount {
                    "qemu-system-x86_64 TCG -icount shift=0,sleep=off".to_string()
                } else {
                    "qemu-system-x86_64 TCG".to_string()
                },
                Box::new(move || {
                    let mut c = Command::new("qemu-system-x86_64");
                    c.args(["-M", "pc", "-m", &ram, "-display", "none", "-no-reboot"]);
                    c.args(["-serial", "stdio", "-kernel"]).arg(&k);
                    c.arg("-initrd").arg(&i).args(["-append", APPEND]);
                    if icount {
                        c.args(["-icount", "shift=0,sleep=off"]);
                    }
                    c
                }),
            ));
        }
    }
    let timeout = Duration::from_secs(a.timeout);
    // Round by round, one run of each configuration per round: a slow spell of a busy host
    // then falls on every configuration alike instead of on whichever ran during it. Every
    // other round runs them in reverse order, so no configuration always follows the same one.
    let mut rounds: Vec<Vec<Option<f64>>> = Vec::new();
    for r in 0..a.runs {
        let mut order: Vec<usize> = (0..configs.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        let mut round = vec![None; configs.len()];
        for c in order {
            let (name, make) = &configs[c];
            match time_to_marker(make(), timeout) {
                Some(s) => {
                    eprintln!("  round {}: {name} {:.2} s", r + 1, s);
                    round[c] = Some(s);
                }
                None => eprintln!("  round {}: {name} did not reach the marker", r + 1),
            }
        }
        rounds.push(round);
    }
    let results: Vec<(String, Option<f64>)> = configs
        .iter()
        .enumerate()
        .map(|(c, (name, _))| {
            (
                name.clone(),
                median(&mut rounds.iter().filter_map(|r| r[c]).collect::<Vec<_>>()),
            )
        })
        .collect();
    let base = results
        .iter()
        .find(|(n, _)| n.contains("icount"))
        .and_then(|(_, t)| *t);
    println!("| configuration | median seconds to userspace marker | vs QEMU icount |");
    println!("|---|---:|---:|");
    for (name, t) in &results {
        match t {
            Some(t) => println!(
                "| {name} | {t:.2} | {} |",
                base.map(|b| format!("{:.2}x", b / t))
                    .unwrap_or_else(|| "-".into())
            ),
            None => println!("| {name} | did not reach the marker | - |"),
        }
    }
    // The JIT against each QEMU configuration, round by round (the two ran minutes apart at
    // most, so a paired comparison is less exposed to the host's slow spells than medians).
    if let Some(jit) = configs.iter().position(|(n, _)| n.ends_with("jit")) {
        for (q, (name, _)) in configs
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| n.starts_with("qemu"))
        {
            let pairs: Vec<(f64, f64)> = rounds
                .iter()
                .filter_map(|r| Some((r[jit]?, r[q]?)))
                .collect();
            if let Some(ratio) = median(&mut pairs.iter().map(|(j, q)| q / j).collect::<Vec<_>>()) {
                let won = pairs.iter().filter(|(j, q)| j < q).count();
                println!(
                    "lockstep --engine jit against {name}: faster in {won} of {} rounds, median per-round speed-up {ratio:.2}x",
                    pairs.len()
                );
            }
        }
    }
    0
}
