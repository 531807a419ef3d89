//! Test helpers for the system-instruction families: SysMachine set-ups with code assembled
//! at a fixed address.

use crate::cpu::Exit;
use crate::testkit_sys::SysMachine;
use iced_x86::code_asm::CodeAssembler;
use iced_x86::IcedError;

/// Where the helpers place code (physical = linear).
pub const CODE: u64 = 0x10000;
/// Initial stack pointer.
pub const STACK: u64 = 0x80000;
/// Identity-mapping page tables: PML4, PDPT and PD.
pub const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
pub const PD: u64 = 0x3000;

/// Assemble `f` for `bitness` at `at`.
pub fn asm(
    bitness: u32,
    at: u64,
    f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Vec<u8> {
    let mut a = CodeAssembler::new(bitness).unwrap();
    f(&mut a).unwrap();
    a.assemble(at).unwrap()
}

/// Write identity page tables for the first GiB (2 MiB pages, user/writable) at [`PML4`].
pub fn identity_map(m: &mut SysMachine) {
    m.ram.write_u64(PML4, PDPT | 7).unwrap();
    m.ram.write_u64(PDPT, PD | 7).unwrap();
    for i in 0..512u64 {
        m.ram.write_u64(PD + i * 8, (i << 21) | 0x87).unwrap();
    }
}

/// 64-bit long mode at CPL 0 running `f`'s code at [`CODE`] (16 MiB RAM, identity map).
pub fn long_machine(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> SysMachine {
    let mut m = SysMachine::new(16);
    identity_map(&mut m);
    m.load(CODE, &asm(64, CODE, f));
    m.start_long(PML4, CODE);
    m.cpu.state.gpr[crate::state::reg::RSP] = STACK;
    m
}

/// 32-bit flat protected mode (paging off) at CPL 0 running `f`'s code at [`CODE`].
pub fn prot_machine(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> SysMachine {
    let mut m = SysMachine::new(16);
    m.load(CODE, &asm(32, CODE, f));
    m.start_protected_flat(CODE as u32);
    m.cpu.state.gpr[crate::state::reg::RSP] = STACK;
    m
}

/// Run up to `budget` instructions, resuming after yields.
pub fn run(m: &mut SysMachine, budget: u64) -> Exit {
    let mut total = 0;
    loop {
        let e = m.run(budget - total);
        total += e.retired;
        if e.reason != crate::cpu::ExitReason::Yield || total >= budget {
            return Exit {
                retired: total,
                reason: e.reason,
            };
        }
    }
}
