//! System and miscellaneous instructions: CPUID, RDTSC/RDTSCP, RDRAND/RDSEED, fences, CLFLUSH.
//!
//! None of these ends a block (see [`ends_block`]): they change no mode, paging or interrupt
//! state, and the virtual TSC is exact inside a block because the engine counts every
//! retired instruction as it goes.

use crate::cpuid;
use crate::decode::Handler;
use crate::fault::{Fault, Trap};
use crate::flags::set_status;
use crate::mmu::Access;
use crate::operand::write_reg;
use crate::ops::check_no_lock;
use crate::state::{flags, reg};
use crate::Ctx;
use iced_x86::{Instruction, Mnemonic};
use rand_core::RngCore;

/// CR4.TSD: RDTSC/RDTSCP are privileged when set.
const CR4_TSD: u64 = 1 << 2;

/// Handlers of this family.
pub fn lookup(ins: &Instruction) -> Option<Handler> {
    Some(match ins.mnemonic() {
        Mnemonic::Cpuid => cpuid,
        Mnemonic::Rdtsc => rdtsc,
        Mnemonic::Rdtscp => rdtscp,
        Mnemonic::Rdrand | Mnemonic::Rdseed => rdrand,
        Mnemonic::Lfence | Mnemonic::Sfence | Mnemonic::Mfence => fence,
        Mnemonic::Clflush | Mnemonic::Clflushopt => clflush,
        _ => return None,
    })
}

/// Instructions of this family that end a block: none at present. CPUID, RDTSC(P), RDRAND,
/// fences and CLFLUSH touch no state that decoded blocks or pending events depend on. (The
/// SMP/TSO issue will hook MFENCE and the serialising CPUID to drain the store buffer; that
/// is a side effect of executing them, not a reason to end the block.)
pub fn ends_block(_ins: &Instruction) -> bool {
    false
}

/// CPUID: EAX = leaf, ECX = subleaf; the fixed model in [`crate::cpuid`]. All four 64-bit
/// registers are written with their upper halves cleared.
fn cpuid(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let st = &mut x.cpu.state;
    let leaf = st.gpr[reg::RAX] as u32;
    let subleaf = st.gpr[reg::RCX] as u32;
    // vCPU 0 until the SMP issue gives each vCPU its APIC ID.
    let r = cpuid::query(leaf, subleaf, 0, cpuid::OsState::of(st));
    st.gpr[reg::RAX] = r.eax as u64;
    st.gpr[reg::RBX] = r.ebx as u64;
    st.gpr[reg::RCX] = r.ecx as u64;
    st.gpr[reg::RDX] = r.edx as u64;
    Ok(())
}

/// The virtual TSC: 1 GHz and one instruction per nanosecond, so it is the number of
/// instructions retired before this one, plus the offset a WRMSR to IA32_TSC set.
#[inline]
pub fn tsc(x: &Ctx) -> u64 {
    x.cpu.retired.wrapping_add(x.cpu.state.msr.tsc_offset)
}

fn check_tsd(x: &Ctx) -> Result<(), Fault> {
    let st = &x.cpu.state;
    if st.cr4 & CR4_TSD != 0 && st.cpl() != 0 {
        return Err(Fault::GP0);
    }
    Ok(())
}

/// RDTSC: EDX:EAX = TSC (upper halves of RAX and RDX cleared).
fn rdtsc(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_tsd(x)?;
    let t = tsc(x);
    let st = &mut x.cpu.state;
    st.gpr[reg::RAX] = t & 0xffff_ffff;
    st.gpr[reg::RDX] = t >> 32;
    Ok(())
}

/// RDTSCP: RDTSC plus ECX = IA32_TSC_AUX[31:0] (upper half of RCX cleared).
fn rdtscp(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    check_tsd(x)?;
    let t = tsc(x);
    let st = &mut x.cpu.state;
    st.gpr[reg::RAX] = t & 0xffff_ffff;
    st.gpr[reg::RDX] = t >> 32;
    st.gpr[reg::RCX] = st.tsc_aux & 0xffff_ffff;
    Ok(())
}

/// Status flags after RDRAND/RDSEED: a value is always available, so CF=1 and the other five
/// are cleared.
pub const RDRAND_FLAGS: u64 = flags::CF;

/// RDRAND/RDSEED r16/r32/r64: the next draw from the vCPU's "rng" seed-domain stream. 16- and
/// 32-bit forms take one `next_u32` (16-bit keeps the low half and leaves bits 63:16 alone),
/// 64-bit forms one `next_u64`. RDSEED draws from the same stream.
fn rdrand(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    if ins.has_repe_prefix() || ins.has_repne_prefix() {
        return Err(Fault::ud("RDRAND/RDSEED with an F2/F3 prefix").into());
    }
    let dst = ins.op0_register();
    let v = if dst.size() == 8 {
        x.cpu.rng.next_u64()
    } else {
        x.cpu.rng.next_u32() as u64
    };
    let st = &mut x.cpu.state;
    write_reg(st, dst, v);
    set_status(st, flags::STATUS, RDRAND_FLAGS);
    Ok(())
}

/// LFENCE/SFENCE/MFENCE: no architectural effect on one vCPU with sequentially consistent
/// memory. The SMP/TSO issue hooks MFENCE (and SFENCE if it models non-temporal stores) to
/// drain the store buffer.
fn fence(_: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    Ok(())
}

/// CLFLUSH/CLFLUSHOPT m8: no caches are modelled, but the address is translated with the
/// permission checks of a byte load (SDM), so it can raise #PF or #GP.
fn clflush(x: &mut Ctx, ins: &Instruction) -> Result<(), Trap> {
    check_no_lock(ins)?;
    let lin = x.mem_addr(ins, 1, false)?;
    x.translate(lin, Access::Read)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cpu::{Exit, ExitReason};
    use crate::fault::Fault;
    use crate::state::{flags, reg};
    use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};
    use iced_x86::code_asm::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};

    /// Assemble `f` followed by UD2, run it and expect to stop at the UD2.
    fn run(
        m: &mut TestMachine,
        f: impl FnOnce(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>,
    ) -> Exit {
        let code = TestMachine::assemble(|a| {
            f(a)?;
            a.ud2()
        });
        let e = m.run_code(&code, 1000);
        assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")), "{e:?}");
        e
    }

    #[test]
    fn cpuid_vendor_and_features_zero_extend() {
        let mut m = TestMachine::new();
        m.cpu.state.gpr = [u64::MAX; 16];
        m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_0000_0000;
        run(&mut m, |a| a.cpuid());
        assert_eq!(m.gpr(reg::RAX), 0x1f);
        let mut v = Vec::new();
        for r in [reg::RBX, reg::RDX, reg::RCX] {
            assert_eq!(m.gpr(r) >> 32, 0);
            v.extend_from_slice(&(m.gpr(r) as u32).to_le_bytes());
        }
        assert_eq!(v, b"GenuineIntel");

        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 7;
        m.cpu.state.gpr[reg::RCX] = 0;
        run(&mut m, |a| a.cpuid());
        let leaf7_ebx = m.gpr(reg::RBX);
        for bit in [3, 5, 8, 9, 18, 19] {
            assert_ne!(leaf7_ebx & (1 << bit), 0, "leaf 7 EBX bit {bit}");
        }

        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 1;
        run(&mut m, |a| a.cpuid());
        assert_eq!(m.gpr(reg::RAX), 0x506e3);
        assert_ne!(m.gpr(reg::RDX) & (1 << 26), 0, "SSE2");
        assert_ne!(m.gpr(reg::RCX) & (1 << 30), 0, "RDRAND");
        assert_ne!(m.gpr(reg::RCX) & 1, 0, "SSE3");
        assert_ne!(m.gpr(reg::RCX) & (1 << 28), 0, "AVX");
        assert_ne!(
            m.gpr(reg::RCX) & (1 << 27),
            0,
            "OSXSAVE (CR4.OSXSAVE is set)"
        );

        // OSXSAVE follows CR4, and leaf 0xD's current size follows XCR0.
        let mut m = TestMachine::new();
        m.cpu.state.cr4 &= !crate::state::ctl::CR4_OSXSAVE;
        m.cpu.state.gpr[reg::RAX] = 1;
        run(&mut m, |a| a.cpuid());
        assert_eq!(m.gpr(reg::RCX) & (1 << 27), 0, "no OSXSAVE");
        assert_ne!(m.gpr(reg::RCX) & (1 << 26), 0, "XSAVE");
        let mut m = TestMachine::new();
        m.cpu.state.xcr0 = 3;
        m.cpu.state.gpr[reg::RAX] = 0xd;
        m.cpu.state.gpr[reg::RCX] = 0;
        run(&mut m, |a| a.cpuid());
        assert_eq!((m.gpr(reg::RBX), m.gpr(reg::RCX)), (576, 832));
    }

    #[test]
    fn cpuid_subleaf_comes_from_ecx() {
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 4;
        m.cpu.state.gpr[reg::RCX] = 0xdead_0000_0000_0003; // ECX = 3: the L3 cache
        run(&mut m, |a| a.cpuid());
        assert_eq!((m.gpr(reg::RAX) >> 5) & 7, 3);
    }

    #[test]
    fn rdtsc_is_the_retired_count() {
        let mut m = TestMachine::new();
        m.cpu.retired = 0x1_0000_0005;
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.cpu.state.gpr[reg::RDX] = u64::MAX;
        run(&mut m, |a| {
            a.nop()?;
            a.nop()?;
            a.nop()?;
            a.rdtsc()
        });
        assert_eq!(m.gpr(reg::RAX), 8);
        assert_eq!(m.gpr(reg::RDX), 1);
    }

    #[test]
    fn rdtscp_reads_tsc_aux() {
        let mut m = TestMachine::new();
        m.cpu.state.tsc_aux = 0xdead_beef_1234_5678;
        m.cpu.state.gpr[reg::RCX] = u64::MAX;
        run(&mut m, |a| {
            a.nop()?;
            a.db(&[0x0f, 0x01, 0xf9]) // rdtscp
        });
        assert_eq!(m.gpr(reg::RAX), 1);
        assert_eq!(m.gpr(reg::RDX), 0);
        assert_eq!(m.gpr(reg::RCX), 0x1234_5678);
    }

    #[test]
    fn rdtsc_with_cr4_tsd_faults_at_cpl3() {
        let mut m = TestMachine::new();
        m.cpu.state.cr4 |= super::CR4_TSD;
        let code = TestMachine::assemble(|a| a.rdtsc());
        let e = m.run_code(&code, 10);
        assert_eq!(e.reason, ExitReason::Exception(Fault::GP0));
        assert_eq!(m.cpu.state.rip, CODE_BASE);
        assert_eq!(e.retired, 0);
    }

    fn rdrand_program(m: &mut TestMachine) {
        m.cpu.state.rflags |= flags::STATUS;
        m.cpu.state.gpr[reg::RCX] = 0xffff_ffff_ffff_0000;
        run(m, |a| {
            a.rdrand(rax)?;
            a.rdrand(ebx)?;
            a.rdrand(cx)?;
            a.rdseed(rdx)
        });
    }

    #[test]
    fn rdrand_is_deterministic_per_seed() {
        let mut a = TestMachine::new();
        let mut b = TestMachine::new();
        rdrand_program(&mut a);
        rdrand_program(&mut b);
        for r in [reg::RAX, reg::RBX, reg::RCX, reg::RDX] {
            assert_eq!(a.gpr(r), b.gpr(r));
        }
        // The values are the "rng" stream's draws, in order.
        let mut rng = ChaCha20Rng::from_seed([7; 32]);
        assert_eq!(a.gpr(reg::RAX), rng.next_u64());
        assert_eq!(a.gpr(reg::RBX), rng.next_u32() as u64);
        assert_eq!(
            a.gpr(reg::RCX),
            0xffff_ffff_ffff_0000 | (rng.next_u32() as u64 & 0xffff)
        );
        assert_eq!(a.gpr(reg::RDX), rng.next_u64());
        assert_eq!(a.cpu.state.rflags & flags::STATUS, flags::CF);

        let mut c = TestMachine::new();
        c.cpu.rng = ChaCha20Rng::from_seed([9; 32]);
        rdrand_program(&mut c);
        assert_ne!(c.gpr(reg::RAX), a.gpr(reg::RAX));
    }

    #[test]
    fn fences_and_clflush_complete() {
        let mut m = TestMachine::new();
        let e = run(&mut m, |a| {
            a.lfence()?;
            a.sfence()?;
            a.mfence()?;
            a.clflush(byte_ptr(DATA_BASE))?;
            a.clflushopt(byte_ptr(DATA_BASE + 0x1234))
        });
        assert_eq!(e.retired, 5);
    }

    #[test]
    fn clflush_translates_like_a_load() {
        // Beyond the 1 GiB map: not present, user read.
        let mut m = TestMachine::new();
        let code = TestMachine::assemble(|a| a.clflush(byte_ptr(0x4000_0000u64)));
        let e = m.run_code(&code, 10);
        assert_eq!(
            e.reason,
            ExitReason::Exception(Fault::PageFault {
                addr: 0x4000_0000,
                code: 4
            })
        );
        // Supervisor-only page tables: protection fault on a user read.
        let mut m = TestMachine::new();
        let code = TestMachine::assemble(|a| a.clflush(byte_ptr(0x1000u64)));
        let e = m.run_code(&code, 10);
        assert_eq!(
            e.reason,
            ExitReason::Exception(Fault::PageFault {
                addr: 0x1000,
                code: 5
            })
        );
        assert_eq!(m.cpu.state.rip, CODE_BASE);
    }

    #[test]
    fn lock_prefix_is_ud() {
        let mut m = TestMachine::new();
        let e = m.run_code(&[0xf0, 0x0f, 0xa2], 10); // lock cpuid
        assert!(matches!(
            e.reason,
            ExitReason::Exception(Fault::InvalidOpcode { .. })
        ));
        assert_eq!(e.retired, 0);
    }
}
