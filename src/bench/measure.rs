//! One program's measurement for `lockstep bench`: `runs` rounds, each running it natively,
//! under qemu-x86_64 and under each lockstep engine, in an order that rotates from round to
//! round, with every output checked against the native one.
//!
//! Why rotate: on the benchmark host a run right after a qemu-x86_64 run took a few percent
//! longer than the same run after a lockstep one (heap, 15 interleaved rounds each: ours
//! 0.3106 s after ours, 0.3147 s after qemu; qemu's own 0.3214 s after ours, 0.3317 s after
//! qemu). With a fixed order (native, qemu, lockstep) lockstep always took that slot; now
//! every runner takes every slot equally often (over a multiple of the runner count).

use super::run::{self, Guest, Output};
use super::{describe_failure, median, note, self_checks_failed, Item, Row};
use std::path::Path;
use std::time::Duration;

/// Who runs the program in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runner {
    Native,
    Qemu,
    /// `lockstep user --engine interp` (0) or `jit` (1).
    Engine(usize),
}

const ENGINES: [&str; 2] = ["interp", "jit"];

/// The order of `runners` in round `round`: rotated left by `round`, so round 0 keeps the
/// given order (native first: its output is the reference the others are checked against).
fn round_order(runners: &[Runner], round: usize) -> Vec<Runner> {
    let mut order = runners.to_vec();
    if !order.is_empty() {
        let n = round % order.len();
        order.rotate_left(n);
    }
    order
}

/// What the rounds have gathered so far.
struct Tally<'a> {
    row: Row,
    guest: &'a Guest,
    /// How to run it: the lockstep executable, qemu-x86_64 (if it runs), `--seed`, the
    /// timeout of one run.
    lockstep: &'a Path,
    qemu: Option<&'a Path>,
    seed: &'a str,
    timeout: Duration,
    native_t: Vec<f64>,
    qemu_t: Vec<f64>,
    engine_t: [Vec<f64>; 2],
    /// The first native run's output: every other run must print the same and exit alike.
    reference: Option<Output>,
    qemu_ok: bool,
    engine_ok: [bool; 2],
    /// The state hash of the first lockstep run: both engines must reach the same state.
    hash: Option<String>,
}

impl Tally<'_> {
    /// Runs `who` once; `false` when the native run failed (no reference: stop measuring).
    fn run(&mut self, who: Runner) -> bool {
        match who {
            Runner::Native => return self.native(),
            Runner::Qemu => self.qemu(),
            Runner::Engine(e) => self.engine(e),
        }
        true
    }

    fn native(&mut self) -> bool {
        let native = run::run_native(self.guest, self.timeout);
        if let Some(n) = describe_failure("native", &native) {
            note(&mut self.row, n);
            return false;
        }
        let native = native.expect("checked above");
        self.native_t.push(native.wall.as_secs_f64());
        if self_checks_failed(&native.stdout) {
            note(
                &mut self.row,
                "native: the program's self-checks failed".into(),
            );
        }
        self.reference.get_or_insert(native);
        true
    }

    /// Whether `out` printed and exited as the native reference did (the reference is set by
    /// round 0, whose first runner is the native one).
    fn agrees(&self, out: &Output) -> Result<(), String> {
        match &self.reference {
            Some(r) if out.stdout != r.stdout || out.exit != r.exit => {
                Err(format!("{} vs {}", out.exit, r.exit))
            }
            _ => Ok(()),
        }
    }

    fn qemu(&mut self) {
        let Some(q) = self.qemu.filter(|_| self.qemu_ok) else {
            return;
        };
        let out = run::run_qemu(q, self.guest, self.timeout);
        if let Some(n) = describe_failure("qemu", &out) {
            note(&mut self.row, n);
            self.qemu_ok = false;
            return;
        }
        let out = out.expect("checked above");
        if self.agrees(&out).is_err() {
            note(&mut self.row, format!("qemu output differs ({})", out.exit));
        }
        self.qemu_t.push(out.wall.as_secs_f64());
    }

    fn engine(&mut self, ei: usize) {
        if !self.engine_ok[ei] {
            return;
        }
        let engine = ENGINES[ei];
        let what = format!("lockstep --engine {engine}");
        // (Timed without the JIT's statistics, which count every chained jump; they come from
        // one more run after the rounds.)
        let out = run::run_lockstep_env(
            self.lockstep,
            &["--engine", engine],
            &[],
            self.seed,
            self.guest,
            self.timeout,
        );
        if let Some(n) = describe_failure(&what, &out) {
            note(&mut self.row, n);
            self.engine_ok[ei] = false;
            return;
        }
        let out = out.expect("checked above");
        let (_, stats) = run::split_stats(&out.stderr);
        let s = match stats {
            Ok(s) => s,
            Err(e) => {
                let line = super::first_stderr_line(&out);
                note(
                    &mut self.row,
                    format!("{what}: {}: {e}; stderr: {line}", out.exit),
                );
                self.engine_ok[ei] = false;
                return;
            }
        };
        if let Err(how) = self.agrees(&out) {
            note(
                &mut self.row,
                format!("{what}: output differs from native ({how})"),
            );
        }
        if self.row.retired.is_some_and(|r| r != s.retired) {
            note(
                &mut self.row,
                format!("{what}: retired count differs between runs"),
            );
        }
        if self.hash.as_ref().is_some_and(|h| *h != s.hash) {
            note(
                &mut self.row,
                format!("{what}: state hash differs between runs"),
            );
        }
        self.row.retired = Some(s.retired);
        self.hash = Some(s.hash);
        self.engine_t[ei].push(out.wall.as_secs_f64());
    }
}

/// Runs one program `runs` times on each runner (interleaved, in rotating order: see the
/// module documentation) and checks that outputs agree.
pub(super) fn measure(
    item: &Item,
    runs: usize,
    lockstep: &Path,
    qemu: Option<&Path>,
    seed: &str,
    timeout: Duration,
    engines: &[&str],
) -> Row {
    let mut t = Tally {
        row: Row {
            name: item.name.clone(),
            args: item.guest.args.clone(),
            ..Row::default()
        },
        guest: &item.guest,
        lockstep,
        qemu,
        seed,
        timeout,
        native_t: Vec::new(),
        qemu_t: Vec::new(),
        engine_t: [Vec::new(), Vec::new()],
        reference: None,
        qemu_ok: true,
        engine_ok: [engines.contains(&"interp"), engines.contains(&"jit")],
        hash: None,
    };
    let mut runners = vec![Runner::Native];
    if qemu.is_some() {
        runners.push(Runner::Qemu);
    }
    runners.extend(
        (0..ENGINES.len())
            .filter(|&e| t.engine_ok[e])
            .map(Runner::Engine),
    );
    'rounds: for round in 0..runs {
        eprintln!("lockstep bench: {} round {}/{runs}", item.name, round + 1);
        for who in round_order(&runners, round) {
            if !t.run(who) {
                break 'rounds;
            }
        }
    }
    if t.engine_ok[1] {
        // The JIT's statistics (compiles, cache, chain rate), untimed; the run must end in
        // the same state.
        let out = run::run_lockstep_env(
            lockstep,
            &["--engine", "jit"],
            &[("LOCKSTEP_JIT_STATS", "1")],
            seed,
            &item.guest,
            timeout,
        );
        match out {
            Ok(o) => {
                if let Some(js) = run::parse_jit_stats(&o.stderr) {
                    t.row.jit_stats = js;
                }
                let (_, stats) = run::split_stats(&o.stderr);
                if stats.is_ok_and(|s| t.hash.as_ref().is_some_and(|h| *h != s.hash)) {
                    note(
                        &mut t.row,
                        "lockstep --engine jit: state hash differs with LOCKSTEP_JIT_STATS".into(),
                    );
                }
            }
            Err(e) => note(
                &mut t.row,
                format!("lockstep --engine jit (statistics): {e}"),
            ),
        }
    }
    let mut row = t.row;
    row.native = median(&mut t.native_t);
    row.qemu = median(&mut t.qemu_t);
    row.interp = median(&mut t.engine_t[0]);
    row.jit = median(&mut t.engine_t[1]);
    row
}

#[cfg(test)]
mod tests {
    use super::{round_order, Runner};

    #[test]
    fn every_runner_takes_every_slot_and_native_starts() {
        let all = [
            Runner::Native,
            Runner::Qemu,
            Runner::Engine(0),
            Runner::Engine(1),
        ];
        assert_eq!(round_order(&all, 0), all.to_vec());
        // Over as many rounds as runners, each runner is in each slot exactly once.
        for slot in 0..all.len() {
            let mut seen: Vec<Runner> =
                (0..all.len()).map(|r| round_order(&all, r)[slot]).collect();
            seen.sort_by_key(|w| format!("{w:?}"));
            let mut want = all.to_vec();
            want.sort_by_key(|w| format!("{w:?}"));
            assert_eq!(seen, want, "slot {slot}");
        }
        // Round 1 starts with qemu, round 3 with the JIT.
        assert_eq!(round_order(&all, 1)[0], Runner::Qemu);
        assert_eq!(round_order(&all, 3)[0], Runner::Engine(1));
        assert!(round_order(&[], 5).is_empty());
    }
}
