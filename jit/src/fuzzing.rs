//! The body of the `interp_vs_jit` fuzz target (and of its stable test, `jit/tests/interp_vs_jit.rs`):
//! arbitrary bytes become an initial state, code and a budget schedule; the program runs on the
//! interpreter and on the JIT (compiling eagerly, so the code really runs compiled); any
//! difference in an exit, the `CpuState`, the retired count, the yield flag, RAM or the device
//! log is a finding.
//!
//! Input layout: byte 0 = JIT settings (threshold 0..3, native lowering or trampoline only,
//! chaining on/off), byte 1 = budget-slice seed, bytes 2..138 = 16 GPRs and RFLAGS (as in
//! `decode_exec`), the rest (at most 4 KiB) = code. The machine: 4 MiB RAM, CPL 3, 4 KiB pages
//! (page tables supervisor-only), code at [`CODE`], a 2 MiB window at [`MMIO_LIN`] mapped to
//! physical addresses beyond RAM (MMIO: reads give a value derived from the address, every
//! access is logged), everything else unmapped.

use crate::engine::{Jit, JitConfig};
use lockstep_interp::state::{flags, reg, CpuState};
use lockstep_interp::{Bus, Cpu, CpuConfig, Engine, Exit, ExitReason, GuestRam, Interpreter};

pub const RAM: u64 = 4 << 20;
const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
const PD: u64 = 0x3000;
const PT0: u64 = 0x4000;
pub const CODE: u64 = 0x10_0000;
pub const DATA: u64 = 0x20_0000;
pub const STACK_TOP: u64 = 0x30_0000;
pub const MMIO_LIN: u64 = 0x40_0000;
const MMIO_PHYS: u64 = 0x1000_0000;
/// Instructions per input at most.
pub const MAX_RETIRED: u64 = 3_000;

/// A bus that logs every device access and answers reads deterministically.
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct LogBus {
    /// (kind: 0 read, 1 write, 2 in, 3 out; address or port; size; value).
    pub log: Vec<(u8, u64, u8, u64)>,
}

impl LogBus {
    fn push(&mut self, e: (u8, u64, u8, u64)) {
        if self.log.len() < 4096 {
            self.log.push(e);
        }
    }
}

impl Bus for LogBus {
    fn mmio_read(&mut self, addr: u64, size: u8) -> u64 {
        let v = addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7;
        let v = if size >= 8 {
            v
        } else {
            v & ((1u64 << (size * 8)) - 1)
        };
        self.push((0, addr, size, v));
        v
    }
    fn mmio_write(&mut self, addr: u64, size: u8, value: u64) {
        self.push((1, addr, size, value));
    }
    fn pio_in(&mut self, port: u16, size: u8) -> u32 {
        self.push((2, port as u64, size, 0));
        0
    }
    fn pio_out(&mut self, port: u16, size: u8, value: u32) {
        self.push((3, port as u64, size, value as u64));
    }
}

/// One fuzz machine.
pub struct FuzzMachine {
    pub cpu: Cpu,
    pub ram: GuestRam,
    pub bus: LogBus,
}

impl FuzzMachine {
    /// The machine for `data` (see the module docs). Also returns the JIT settings byte and
    /// the slice seed.
    pub fn new(data: &[u8]) -> (Self, u8, u8) {
        let mut ram = GuestRam::new(RAM).expect("map fuzz RAM");
        let w = |ram: &mut GuestRam, a: u64, v: u64| ram.write_u64(a, v).expect("table in RAM");
        w(&mut ram, PML4, PDPT | 0x7);
        w(&mut ram, PDPT, PD | 0x7);
        // First 4 MiB: two page tables of 4 KiB pages (the first 64 KiB supervisor-only).
        for t in 0..2u64 {
            w(&mut ram, PD + t * 8, (PT0 + t * 0x1000) | 0x7);
            for i in 0..512u64 {
                let page = t * 512 + i;
                let user = if page < 16 { 0 } else { 0x4 };
                w(&mut ram, PT0 + page * 8, (page << 12) | 0x3 | user);
            }
        }
        // 2 MiB of MMIO at MMIO_LIN (a large page beyond RAM).
        w(&mut ram, PD + 2 * 8, MMIO_PHYS | 0x87);
        let mut st = CpuState::long_mode_flat(PML4, 3);
        st.gpr[reg::RSP] = STACK_TOP;
        st.rip = CODE;
        let (cfg, seed) = (
            data.first().copied().unwrap_or(0),
            data.get(1).copied().unwrap_or(0),
        );
        let rest = data.get(2..).unwrap_or(&[]);
        let (state, code) = rest.split_at(rest.len().min(136));
        for (i, chunk) in state.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            let v = u64::from_le_bytes(b);
            if i < 16 {
                // Low bits pick a region so that memory operands often hit mapped memory:
                // 1 -> data, 2 -> MMIO, 3 -> stack, else the raw value.
                st.gpr[i] = match v & 7 {
                    1 => DATA + (v >> 8 & 0xfff8),
                    2 => MMIO_LIN + (v >> 8 & 0x1ff8),
                    3 => STACK_TOP - 0x800 - (v >> 8 & 0x7f8),
                    _ => v,
                };
            } else {
                let user = flags::STATUS | flags::DF | flags::AC | flags::ID;
                st.rflags = (st.rflags & !user) | (v & user);
            }
        }
        // Keep the stack mapped most of the time.
        if st.gpr[reg::RSP] & 3 != 0 {
            st.gpr[reg::RSP] = STACK_TOP - (st.gpr[reg::RSP] >> 8 & 0xff8);
        }
        let code = &code[..code.len().min(4096)];
        ram.write_phys(CODE, code).expect("code in RAM");
        let cpu = Cpu::new(
            st,
            CpuConfig {
                syscall_to_host: true,
            },
            [5; 32],
        );
        (
            FuzzMachine {
                cpu,
                ram,
                bus: LogBus::default(),
            },
            cfg,
            seed,
        )
    }
}

/// The JIT settings byte: bits 0-1 threshold, bit 2 trampoline only, bit 3 no chaining,
/// bits 4-5 batch size, bit 6 the baseline tier the other way from the default, bit 7
/// baseline functions of any length promoted to Cranelift after 2 runs (instead of the
/// default's counts).
pub fn jit_config(cfg: u8) -> JitConfig {
    let d = JitConfig::default();
    JitConfig {
        threshold: (cfg & 3) as u32,
        batch: 1 + (cfg >> 4 & 3) as usize,
        native: cfg & 4 == 0,
        chain: cfg & 8 == 0,
        baseline: d.baseline != (cfg & 0x40 != 0),
        promote: if cfg & 0x80 != 0 { 2 } else { d.promote },
        promote_min_insns: if cfg & 0x80 != 0 {
            0
        } else {
            d.promote_min_insns
        },
        ..d
    }
}

/// Budget slices from the seed: seed 0 runs everything in one call.
fn slices(seed: u8) -> impl Iterator<Item = u64> {
    let mut x = seed as u64;
    core::iter::repeat_with(move || {
        if seed == 0 {
            return MAX_RETIRED;
        }
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        1 + (x >> 33) % (seed as u64 % 61 + 1)
    })
}

/// Run `data` on both engines. `Err` describes the first difference.
pub fn interp_vs_jit(data: &[u8]) -> Result<Exit, String> {
    let (mut a, cfg, seed) = FuzzMachine::new(data);
    let (mut b, _, _) = FuzzMachine::new(data);
    let mut jit = Jit::new(jit_config(cfg));
    let mut last = Exit {
        retired: 0,
        reason: ExitReason::Budget,
    };
    for (n, s) in slices(seed).enumerate() {
        let left = MAX_RETIRED - a.cpu.retired;
        if left == 0 {
            break;
        }
        let s = s.min(left);
        let ea = Interpreter.run(&mut a.cpu, &mut a.ram, &mut a.bus, s);
        let eb = jit.run(&mut b.cpu, &mut b.ram, &mut b.bus, s);
        let ctx = || {
            format!(
                "slice {n} (budget {s}, retired {}, jit {cfg:#x}, seed {seed})",
                a.cpu.retired
            )
        };
        if ea != eb {
            return Err(format!(
                "exit differs in {}: interp {ea:?} jit {eb:?}",
                ctx()
            ));
        }
        if a.cpu.state != b.cpu.state {
            return Err(format!(
                "state differs after {}: {}",
                ctx(),
                state_diff(&a.cpu.state, &b.cpu.state)
            ));
        }
        if a.cpu.retired != b.cpu.retired || a.cpu.yield_requested != b.cpu.yield_requested {
            return Err(format!("retired/yield flag differ after {}", ctx()));
        }
        if a.bus != b.bus {
            return Err(format!(
                "device log differs after {}: {:?} vs {:?}",
                ctx(),
                a.bus.log,
                b.bus.log
            ));
        }
        last = ea;
        if !matches!(ea.reason, ExitReason::Budget | ExitReason::Yield) {
            break;
        }
    }
    if a.ram.bytes() != b.ram.bytes() {
        let (x, y) = (a.ram.bytes(), b.ram.bytes());
        let i = x.iter().zip(y).position(|(p, q)| p != q).unwrap_or(0);
        return Err(format!(
            "RAM differs at {i:#x}: interp {:#x} jit {:#x} (jit {cfg:#x}, seed {seed})",
            x[i], y[i]
        ));
    }
    Ok(last)
}

/// The fields of two states that differ, as text.
pub fn state_diff(a: &CpuState, b: &CpuState) -> String {
    let (da, db) = (format!("{a:#x?}"), format!("{b:#x?}"));
    let mut out = String::new();
    for (x, y) in da.lines().zip(db.lines()) {
        if x != y {
            out.push_str(&format!("\n  interp {}\n  jit    {}", x.trim(), y.trim()));
        }
    }
    out
}
