//! Shared helpers of the JIT tests: run the same code on the interpreter and the JIT and
//! compare everything that can differ.
#![allow(dead_code)]

use lockstep_interp::testkit::{TestMachine, CODE_BASE, DATA_BASE, STACK_TOP};
use lockstep_interp::{Engine, Exit};
use lockstep_jit::{Jit, JitConfig};

/// A JIT that compiles every block on its first run (threshold 1, batches of 1).
pub fn eager_config() -> JitConfig {
    JitConfig {
        threshold: 1,
        batch: 1,
        ..JitConfig::default()
    }
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
