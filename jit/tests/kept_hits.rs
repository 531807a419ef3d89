//! TLB hits the baseline tier keeps after R8 and R9 take another access (`Emit::kept`): an
//! access through the register of a kept hit takes its host delta from the frame instead of
//! probing. It must give the interpreter's values, stop (leave for the interpreter, fault
//! exactly) where the access leaves the kept hit's page, and never outlive a write to its
//! register.

mod common;

use common::{baseline_config, compare};
use iced_x86::code_asm::*;
use lockstep_interp::state::reg;
use lockstep_interp::testkit::{TestMachine, DATA_BASE, TEST_RAM};
use lockstep_interp::{ExitReason, Fault};
use lockstep_jit::JitConfig;

/// Single blocks, each compiled to the baseline tier at once.
fn config() -> JitConfig {
    JitConfig {
        region_blocks: 1,
        ..baseline_config()
    }
}

/// A loop of twelve rounds through `block` (a block of its own, ending in a JMP), R15 set to
/// `warm` before it and to `last` for the last round (after `set_up`'s registers).
fn last_round_differs(
    warm: u64,
    last: u64,
    set_up: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>,
    block: impl Fn(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Vec<u8> {
    TestMachine::assemble(|a| {
        let mut top = a.create_label();
        let mut skip = a.create_label();
        let mut blk = a.create_label();
        let mut back = a.create_label();
        a.mov(r15, warm)?;
        set_up(a)?;
        a.mov(ecx, 12)?;
        a.set_label(&mut top)?;
        a.cmp(ecx, 1)?;
        a.jne(skip)?;
        a.mov(r15, last)?;
        a.set_label(&mut skip)?;
        a.jmp(blk)?;
        a.set_label(&mut blk)?;
        block(a)?;
        a.jmp(back)?;
        a.set_label(&mut back)?;
        a.dec(ecx)?;
        a.jne(top)?;
        a.hlt()
    })
}

/// Loads through RBX and R12 in turn (each access displaces the other register's hit), run
/// on addresses inside a page first (compiled, the kept hits taken back), then with RBX near
/// the start of the first user page, where `[rbx - 8]` lies in the supervisor-only first
/// 2 MiB, or at the end of RAM, where `[rbx + 4]` runs past it: the JIT must fault where
/// the interpreter does. Checked:
/// without the host delta stored in its frame slot the host reads through a delta of 0
/// (crash); without the kept hit's span checked, the JIT reads the supervisor page.
#[test]
fn kept_hits_match_the_interpreter_and_stop_at_page_boundaries() {
    for (warm, last) in [
        (0x20_0040u64, 0x20_0004u64),
        (DATA_BASE + 0x1800, TEST_RAM - 6),
    ] {
        let code = last_round_differs(
            warm,
            last,
            |a| a.mov(r12, DATA_BASE + 0x3010),
            |a| {
                a.mov(rbx, r15)?;
                a.mov(eax, dword_ptr(rbx + 4))?;
                a.add(edx, dword_ptr(r12))?;
                a.add(eax, dword_ptr(rbx - 8))?;
                a.add(edx, dword_ptr(r12 + 8))?;
                a.add(esi, dword_ptr(rbx))?;
                a.add(edi, dword_ptr(r12 - 4))
            },
        );
        let setup = |m: &mut TestMachine| {
            let words = |seed: u32| -> Vec<u8> {
                (0..16u32)
                    .flat_map(|k| (seed + k * 7).to_le_bytes())
                    .collect()
            };
            m.load(DATA_BASE + 0x3000, &words(0x1000));
            if warm >= DATA_BASE {
                m.load(warm - 32, &words(0x50));
            }
        };
        let (m, jit, exit) = compare(&code, &[1 << 20], config(), &setup);
        assert!(
            matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
            "{warm:#x}: {exit:?}"
        );
        assert_eq!(m.gpr(reg::RBX), last);
        assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
    }
}

/// A hit kept for RBX, then RBX loaded with an address in the supervisor-only first 2 MiB:
/// the access through it must probe (and fault), not take the kept hit. Checked: with kept
/// hits surviving a write to their register, the JIT reads the supervisor page and the run
/// differs from the interpreter's.
#[test]
fn a_kept_hit_dies_with_its_register() {
    let code = last_round_differs(
        DATA_BASE + 0x2000,
        0x1_0000,
        |a| a.mov(r12, DATA_BASE + 0x3000),
        |a| {
            a.mov(rbx, DATA_BASE + 0x2000)?;
            a.mov(eax, dword_ptr(rbx + 16))?;
            a.add(edx, dword_ptr(r12))?;
            a.mov(rbx, r15)?;
            a.add(esi, dword_ptr(rbx + 8))
        },
    );
    let (_, jit, exit) = compare(&code, &[1 << 20], config(), &|m| {
        m.load(DATA_BASE + 0x2008, &77u32.to_le_bytes());
        m.load(DATA_BASE + 0x3000, &5u32.to_le_bytes());
    });
    assert!(
        matches!(exit.reason, ExitReason::Exception(Fault::PageFault { .. })),
        "{exit:?}"
    );
    assert!(jit.stats.baseline >= 1, "{}", jit.stats.summary());
}
