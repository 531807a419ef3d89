//! A small flat test machine: 1 GiB of identity-mapped RAM at CPL 3, for unit tests, the
//! differential harness and fuzzing. Not used by the real machine.

use crate::cpu::{Cpu, CpuConfig, Engine, Exit, Interpreter};
use crate::mem::{GuestRam, NullBus};
use crate::state::{reg, CpuState};

/// RAM size of the test machine.
pub const TEST_RAM: u64 = 1 << 30;
/// Where [`TestMachine::run_code`] places code.
pub const CODE_BASE: u64 = 0x0020_0000;
/// A data area free for tests.
pub const DATA_BASE: u64 = 0x0040_0000;
/// Initial RSP (stack grows down from here).
pub const STACK_TOP: u64 = 0x0080_0000;

const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
const PD: u64 = 0x3000;

/// Identity-mapped flat machine. The first 2 MiB (page tables) are supervisor-only; the rest of
/// the first GiB is user read/write/execute.
pub struct TestMachine {
    pub cpu: Cpu,
    pub ram: GuestRam,
    pub bus: NullBus,
}

impl Default for TestMachine {
    fn default() -> Self {
        Self::new()
    }
}

impl TestMachine {
    pub fn new() -> Self {
        let mut ram = GuestRam::new(TEST_RAM).expect("map test RAM");
        ram.write_u64(PML4, PDPT | 0x7).unwrap();
        ram.write_u64(PDPT, PD | 0x7).unwrap();
        for i in 0..512u64 {
            let user = if i == 0 { 0 } else { 0x4 };
            ram.write_u64(PD + i * 8, (i << 21) | 0x83 | user).unwrap();
        }
        let mut st = CpuState::long_mode_flat(PML4, 3);
        st.gpr[reg::RSP] = STACK_TOP;
        st.rip = CODE_BASE;
        let cpu = Cpu::new(
            st,
            CpuConfig {
                syscall_to_host: true,
            },
            [7; 32],
        );
        TestMachine {
            cpu,
            ram,
            bus: NullBus,
        }
    }

    /// Copy bytes into guest memory (physical = linear here).
    pub fn load(&mut self, addr: u64, bytes: &[u8]) {
        self.ram
            .write_phys(addr, bytes)
            .expect("load within test RAM");
    }

    /// Run the interpreter for at most `budget` instructions.
    pub fn run(&mut self, budget: u64) -> Exit {
        Interpreter.run(&mut self.cpu, &mut self.ram, &mut self.bus, budget)
    }

    /// Place `code` at [`CODE_BASE`], point RIP at it and run up to `budget` instructions.
    pub fn run_code(&mut self, code: &[u8], budget: u64) -> Exit {
        self.load(CODE_BASE, code);
        self.cpu.state.rip = CODE_BASE;
        self.run(budget)
    }

    /// Assemble with iced's code assembler at [`CODE_BASE`]; panics on assembler errors (tests only).
    pub fn assemble(
        f: impl FnOnce(&mut iced_x86::code_asm::CodeAssembler) -> Result<(), iced_x86::IcedError>,
    ) -> Vec<u8> {
        let mut a = iced_x86::code_asm::CodeAssembler::new(64).unwrap();
        f(&mut a).unwrap();
        a.assemble(CODE_BASE).unwrap()
    }

    pub fn gpr(&self, r: usize) -> u64 {
        self.cpu.state.gpr[r]
    }

    pub fn read_u64(&self, addr: u64) -> u64 {
        self.ram.read_u64(addr).unwrap()
    }
}

/// Fuzz entry shared by the `decode_exec` cargo-fuzz target and the stable no-panic test:
/// the first 136 bytes set the 16 GPRs and RFLAGS, the rest is code run for at most 2,000
/// instructions at CPL 3. Any architectural outcome is fine; a host panic is the bug.
pub fn fuzz_decode_exec(data: &[u8]) -> Exit {
    let mut m = TestMachine::new();
    let (state, code) = data.split_at(data.len().min(136));
    for (i, chunk) in state.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        let v = u64::from_le_bytes(b);
        if i < 16 {
            m.cpu.state.gpr[i] = v;
        } else {
            // Status flags and DF/AC/ID only; fixed bit 1 and IF stay set.
            let user = crate::state::flags::STATUS
                | crate::state::flags::DF
                | crate::state::flags::AC
                | crate::state::flags::ID;
            m.cpu.state.rflags = (m.cpu.state.rflags & !user) | (v & user);
        }
    }
    // Keep the stack inside mapped memory half the time, to reach deeper code.
    if m.cpu.state.gpr[reg::RSP] & 1 == 0 {
        m.cpu.state.gpr[reg::RSP] = STACK_TOP - (m.cpu.state.gpr[reg::RSP] & 0xfff8);
    }
    let code = &code[..code.len().min(4096)];
    m.run_code(code, 2_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::ExitReason;
    use crate::fault::Fault;
    use iced_x86::code_asm::*;

    #[test]
    fn mov_and_jmp_run_and_budget_is_exact() {
        let code = TestMachine::assemble(|a| {
            let mut top = a.create_label();
            a.mov(rax, 5u64)?;
            a.set_label(&mut top)?;
            a.mov(rbx, rax)?;
            a.mov(qword_ptr(0x400000u64), rbx)?;
            a.jmp(top)
        });
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 10);
        assert_eq!(
            e,
            Exit {
                retired: 10,
                reason: ExitReason::Budget
            }
        );
        assert_eq!(m.gpr(reg::RBX), 5);
        assert_eq!(m.read_u64(DATA_BASE), 5);
        assert_eq!(m.cpu.retired, 10);
    }

    #[test]
    fn page_tables_are_protected_from_user_code() {
        let code = TestMachine::assemble(|a| a.mov(qword_ptr(0x1000u64), rax));
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 10);
        assert_eq!(
            e.reason,
            ExitReason::Exception(Fault::PageFault {
                addr: 0x1000,
                code: 0x7
            })
        );
        assert_eq!(m.cpu.state.rip, CODE_BASE);
        assert_eq!(e.retired, 0);
    }

    #[test]
    fn self_modifying_code_is_exact() {
        // Overwrite the immediate of a later `mov eax, imm32` within the same block.
        let code = TestMachine::assemble(|a| {
            a.mov(dword_ptr(CODE_BASE + 11 + 1), 0x1234u32)?; // 11 bytes; patches imm of next insn
            a.mov(eax, 1u32)?; // 5 bytes at CODE_BASE+11
            a.ud2()
        });
        let mut m = TestMachine::new();
        let e = m.run_code(&code, 100);
        assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")));
        assert_eq!(m.gpr(reg::RAX), 0x1234);
    }
}
