//! The interpreter side: a `TestMachine` whose page tables mirror the native child's address
//! space (only the code page and the data pages are mapped, both user read/write/execute), so
//! the same case runs at the same addresses and faults at the same addresses.
//!
//! Like Linux for the native child, the machine runs with CR4.OSXSAVE set and XCR0 = x87 | SSE
//! | AVX (the model's CPUID stops at AVX2), so VEX instructions are enabled. SIMD cases load
//! `CpuState::ymm`, `mxcsr` and `x87` (registers in physical order) before the run.

use super::case::Case;
use super::layout::{CODE_ADDR, CODE_LEN, DATA_ADDR, DATA_LEN};
use super::native::{BASE_FLAGS, CASE_FLAGS};
use super::outcome::{End, Outcome};
use super::simd::SimdState;
use lockstep_interp::state::{ctl, CpuState};
use lockstep_interp::testkit::TestMachine;
use lockstep_interp::{ExitReason, Fault};

/// Instruction budget per case: far above any generated sequence (REP strings included), so
/// running out means the interpreter did not reach the final INT3.
pub const BUDGET: u64 = 200_000;

/// Physical pages (inside the machine's supervisor-only first 2 MiB) for our page tables.
const PD: u64 = 0x3000; // TestMachine's page directory for the first GiB
const PT_CODE: u64 = 0x10000;
const PT_DATA: u64 = 0x11000;
const USER_RW_P: u64 = 0x7;

/// The interpreter under test with the harness's memory layout.
pub struct InterpRunner {
    m: TestMachine,
    /// Length of the previous case's code, to refill with INT3.
    prev_len: usize,
}

impl Default for InterpRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl InterpRunner {
    pub fn new() -> Self {
        let mut m = TestMachine::new();
        let ram = &mut m.ram;
        for i in 0..512u64 {
            ram.write_u64(PD + i * 8, 0).expect("PD in RAM");
        }
        let pde = |a: u64| PD + ((a >> 21) & 0x1ff) * 8;
        let pte = |pt: u64, a: u64| pt + ((a >> 12) & 0x1ff) * 8;
        ram.write_u64(pde(CODE_ADDR), PT_CODE | USER_RW_P).unwrap();
        ram.write_u64(pde(DATA_ADDR), PT_DATA | USER_RW_P).unwrap();
        for k in 0..(CODE_LEN as u64 / 4096) {
            let a = CODE_ADDR + k * 4096;
            ram.write_u64(pte(PT_CODE, a), a | USER_RW_P).unwrap();
        }
        for k in 0..(DATA_LEN as u64 / 4096) {
            let a = DATA_ADDR + k * 4096;
            ram.write_u64(pte(PT_DATA, a), a | USER_RW_P).unwrap();
        }
        m.load(CODE_ADDR, &[0xcc; CODE_LEN]);
        m.cpu.state.cr4 |= ctl::CR4_OSXSAVE;
        m.cpu.state.xcr0 = 7;
        m.cpu.flush_caches();
        InterpRunner { m, prev_len: 0 }
    }

    /// The data pages after the last run.
    pub fn data(&self) -> &[u8] {
        &self.m.ram.bytes()[DATA_ADDR as usize..DATA_ADDR as usize + DATA_LEN]
    }

    /// Run `case` with the data area initialised to `data`.
    pub fn run(&mut self, case: &Case, data: &[u8]) -> Outcome {
        let n = case.code.len().max(self.prev_len).min(CODE_LEN);
        let mut page = vec![0xcc; n];
        page[..case.code.len()].copy_from_slice(&case.code);
        self.m.load(CODE_ADDR, &page);
        self.prev_len = case.code.len();
        self.m.load(DATA_ADDR, data);
        let st = &mut self.m.cpu.state;
        st.gpr = case.gpr;
        st.rip = CODE_ADDR;
        st.rflags = BASE_FLAGS | (case.flags & CASE_FLAGS);
        if let Some(s) = &case.simd {
            load_simd(st, s);
        }
        let exit = self.m.run(BUDGET);
        let st = &self.m.cpu.state;
        let mut o = Outcome {
            end: End::Done,
            rip: st.rip,
            gpr: st.gpr,
            flags: st.rflags,
            simd: case.simd.as_ref().map(|_| store_simd(st)),
            note: String::new(),
        };
        match exit.reason {
            ExitReason::Exception(Fault::Breakpoint) => {}
            ExitReason::Exception(f @ Fault::InvalidOpcode { what }) => {
                let in_code = st.rip >= CODE_ADDR && st.rip < CODE_ADDR + CODE_LEN as u64;
                let at_int3 = in_code && self.m.ram.bytes()[st.rip as usize] == 0xcc;
                if at_int3 && what.contains("not implemented") {
                    // INT3 itself not implemented yet: it is the end marker, treat it as reached.
                    o.rip += 1;
                    o.note = "INT3 reached (interpreter lacks INT3; treated as #BP)".into();
                } else {
                    o.end = End::Fault {
                        vector: f.vector(),
                        addr: None,
                    };
                    o.note = f.to_string();
                }
            }
            ExitReason::Exception(f) => {
                let addr = match f {
                    Fault::PageFault { addr, .. } => Some(addr),
                    _ => None,
                };
                o.end = End::Fault {
                    vector: f.vector(),
                    addr,
                };
                o.note = f.to_string();
            }
            ExitReason::Budget => {
                o.end = End::Other(format!("no INT3 reached within {BUDGET} instructions"));
            }
            ExitReason::Syscall => o.end = End::Other("stopped at SYSCALL".into()),
            ExitReason::Halt => o.end = End::Other("stopped at HLT".into()),
            // The difftest machine has no devices, so nothing can ask to yield.
            ExitReason::Yield => o.end = End::Other("stopped for a device access".into()),
        }
        o
    }
}

/// Put a case's SIMD/x87 state into the interpreter's CPU state (FOP/FIP/FDP as given).
pub fn load_simd(st: &mut CpuState, s: &SimdState) {
    st.ymm = s.ymm;
    st.mxcsr = s.mxcsr;
    let x = &mut st.x87;
    for (r, v) in x.regs.iter_mut().zip(s.st.iter()) {
        *r = [0; 16];
        r[..10].copy_from_slice(v);
    }
    x.fcw = s.fcw;
    x.fsw = s.fsw;
    x.ftw = s.ftw;
    x.fop = s.fop;
    x.fip = s.fip;
    x.fdp = s.fdp;
}

/// Read the interpreter's SIMD/x87 state.
pub fn store_simd(st: &CpuState) -> SimdState {
    let x = &st.x87;
    let mut regs = [[0u8; 10]; 8];
    for (r, v) in regs.iter_mut().zip(x.regs.iter()) {
        r.copy_from_slice(&v[..10]);
    }
    SimdState {
        ymm: st.ymm,
        mxcsr: st.mxcsr,
        fcw: x.fcw,
        fsw: x.fsw,
        ftw: x.ftw,
        st: regs,
        fop: x.fop,
        fip: x.fip,
        fdp: x.fdp,
    }
}
