//! Shared helpers of the JIT tests: run the same code on the interpreter and the JIT and
//! compare everything that can differ.
#![allow(dead_code)]

use lockstep_interp::testkit::{TestMachine, CODE_BASE, DATA_BASE, STACK_TOP};
use lockstep_interp::{Engine, Exit};
use lockstep_jit::{Jit, JitConfig};

/// The test programs end in HLT, which at the test machine's CPL 3 raises #GP(0).
pub fn ran_to_hlt(exit: &Exit) -> bool {
    exit.reason == lockstep_interp::ExitReason::Exception(lockstep_interp::Fault::GP0)
}

/// A JIT that compiles every block on its first run (threshold 1, batches of 1).
pub fn eager_config() -> JitConfig {
    JitConfig {
        threshold: 1,
        batch: 1,
        ..JitConfig::default()
    }
}

/// [`eager_config`] with every loop compiled as a Cranelift region at once (not to the
/// baseline tier first, `JitConfig::loops_base_first`): for tests of the regions' code.
pub fn region_config() -> JitConfig {
    JitConfig {
        loops_base_first: false,
        ..eager_config()
    }
}

/// [`eager_config`] with the baseline tier on.
pub fn baseline_config() -> JitConfig {
    JitConfig {
        baseline: true,
        ..eager_config()
    }
}

/// Budget slices of 1..=13 instructions (every stopping point inside short blocks) and one
/// run to the end.
pub fn short_slices() -> Vec<u64> {
    let mut v: Vec<u64> = (0..300).map(|i| 1 + (i * 7) % 13).collect();
    v.push(1 << 20);
    v
}

/// Memory windows compared between the engines: code, data, stack.
pub const WINDOWS: [(u64, u64); 3] = [
    (CODE_BASE, 0x4000),
    (DATA_BASE, 0x10000),
    (STACK_TOP - 0x10000, 0x10000),
];

pub fn machine(code: &[u8], setup: &dyn Fn(&mut TestMachine)) -> TestMachine {
    let mut m = TestMachine::new();
    m.load(CODE_BASE, code);
    m.cpu.state.rip = CODE_BASE;
    setup(&mut m);
    m
}

/// `code` run under `Verify` with `config` for at most `budget` instructions, which must find
/// no difference and end at the program's HLT; the engine, for its statistics.
pub fn verified_to_hlt(code: &[u8], config: JitConfig, budget: u64) -> lockstep_jit::Verify {
    let mut m = machine(code, &|_| {});
    let mut v = lockstep_jit::Verify::new(config);
    let e = v
        .run_checked(&mut m.cpu, &mut m.ram, &mut m.bus, budget)
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(ran_to_hlt(&e), "{e:?}");
    v
}

/// Run `code` on both engines with the same budget slices; panic on any difference.
pub fn compare(
    code: &[u8],
    slices: &[u64],
    config: JitConfig,
    setup: &dyn Fn(&mut TestMachine),
) -> (TestMachine, Jit, Exit) {
    let mut a = machine(code, setup);
    let mut b = machine(code, setup);
    let mut jit = Jit::new(config);
    let mut last = Exit {
        retired: 0,
        reason: lockstep_interp::ExitReason::Budget,
    };
    for (n, &s) in slices.iter().enumerate() {
        let ea: Exit = a.run(s);
        let eb: Exit = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, s);
        assert_eq!(ea, eb, "exit of slice {n} (budget {s})");
        assert_eq!(a.cpu.state, b.cpu.state, "state after slice {n}");
        assert_eq!(a.cpu.retired, b.cpu.retired, "retired after slice {n}");
        for (base, len) in WINDOWS {
            let ma = &a.ram.bytes()[base as usize..(base + len) as usize];
            let mb = &b.ram.bytes()[base as usize..(base + len) as usize];
            if ma != mb {
                let i = ma.iter().zip(mb).position(|(x, y)| x != y).unwrap();
                panic!(
                    "memory differs after slice {n} at {:#x}: interp {:#x} jit {:#x}",
                    base + i as u64,
                    ma[i],
                    mb[i]
                );
            }
        }
        last = ea;
        if ea.reason != lockstep_interp::ExitReason::Budget {
            break;
        }
    }
    (b, jit, last)
}

/// The Cranelift IR of the functions compiled for blocks starting in the first 0x200 bytes
/// of code (with `JitConfig::keep_ir`).
pub fn code_irs(jit: &Jit) -> Vec<String> {
    (CODE_BASE..CODE_BASE + 0x200)
        .filter_map(|rip| {
            let key = lockstep_interp::decode::BlockKey {
                phys: rip,
                rip,
                bitness: 64,
                cut: 0,
            };
            jit.block_info(&key)?.1.map(str::to_owned)
        })
        .collect()
}

/// The iced `Code` named `name` (its `Debug` spelling, e.g. `"Paddb_xmm_xmmm128"`).
pub fn code(name: &str) -> iced_x86::Code {
    use std::collections::BTreeMap;
    use std::sync::OnceLock;
    static MAP: OnceLock<BTreeMap<String, iced_x86::Code>> = OnceLock::new();
    let m = MAP.get_or_init(|| {
        iced_x86::Code::values()
            .map(|c| (format!("{c:?}"), c))
            .collect()
    });
    *m.get(name).unwrap_or_else(|| panic!("no iced Code {name}"))
}

/// Run the same system machine on the interpreter (`a`) and the JIT (`b`, with `jit`, which
/// compiles on a block's second run) in slices of `slice` instructions, comparing exits, state,
/// retired counts and all of RAM after each slice; returns the JIT and the first exit that
/// is neither a budget nor a yield exit.
pub fn run_sys(
    a: &mut lockstep_interp::testkit_sys::SysMachine,
    b: &mut lockstep_interp::testkit_sys::SysMachine,
    slice: u64,
) -> (Jit, lockstep_interp::ExitReason) {
    let config = JitConfig {
        threshold: 2,
        batch: 1,
        ..JitConfig::default()
    };
    run_sys_with(a, b, slice, config)
}

/// [`run_sys`] with the JIT configured by `config`.
pub fn run_sys_with(
    a: &mut lockstep_interp::testkit_sys::SysMachine,
    b: &mut lockstep_interp::testkit_sys::SysMachine,
    slice: u64,
    config: JitConfig,
) -> (Jit, lockstep_interp::ExitReason) {
    use lockstep_interp::ExitReason;
    let mut jit = Jit::new(config);
    for n in 0..1_000_000 {
        let ea = lockstep_interp::Interpreter.run(&mut a.cpu, &mut a.ram, &mut a.bus, slice);
        let eb = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, slice);
        assert_eq!(ea, eb, "exit of slice {n}");
        assert_eq!(a.cpu.state, b.cpu.state, "state after slice {n}");
        assert_eq!(a.cpu.retired, b.cpu.retired, "retired after slice {n}");
        assert!(a.ram.bytes() == b.ram.bytes(), "RAM after slice {n}");
        if !matches!(ea.reason, ExitReason::Budget | ExitReason::Yield) {
            return (jit, ea.reason);
        }
    }
    panic!("no stop in a million slices");
}

/// Four-level page tables at `pml4` (PDPT, PD and a 4 KiB page table in the three pages
/// after it): the first 2 MiB through the page table, whose entry for each page `p` is
/// `pte(p)`, the rest of the first GiB identity-mapped with 2 MiB pages.
pub fn paging(
    m: &mut lockstep_interp::testkit_sys::SysMachine,
    pml4: u64,
    pte: &dyn Fn(u64) -> u64,
) {
    let (pdpt, pd, pt) = (pml4 + 0x1000, pml4 + 0x2000, pml4 + 0x3000);
    m.ram.write_u64(pml4, pdpt | 3).unwrap();
    m.ram.write_u64(pdpt, pd | 3).unwrap();
    m.ram.write_u64(pd, pt | 3).unwrap();
    for i in 1..512u64 {
        m.ram.write_u64(pd + i * 8, (i << 21) | 0x83).unwrap();
    }
    for i in 0..512u64 {
        m.ram.write_u64(pt + i * 8, pte(i << 12)).unwrap();
    }
}

/// A fixed-seed xorshift64* generator for test operands (the seed must not be 0).
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
