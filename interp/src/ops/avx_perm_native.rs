//! Native comparison of the AVX2 rearrangement, masked-move and gather families
//! with the host CPU: each instruction's bytes run natively inside a generated function
//! (load ymm0..3 from a frame, run, store ymm0..3 back) and in the interpreter, over fixed-seed
//! pseudo-random registers and memory; registers and memory must agree bit for bit.
//!
//! Faults are checked natively too: the memory operand sits next to a PROT_NONE guard page and
//! a SIGSEGV handler (installed with raw syscalls for the duration of one case, serialised by a
//! lock) resumes at the store-back code, so the registers as the fault left them are compared
//! with the interpreter's, which has an unmapped 2 MiB page at the same relative place.

use super::avx_common::{get_ymm, set_ymm, V256};
use crate::cpu::ExitReason;
use crate::fault::Fault;
use crate::ops::native::XorShift;
use crate::state::reg;
use crate::testkit::{TestMachine, CODE_BASE};
use iced_x86::code_asm::*;
use memmap2::{Mmap, MmapMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// ymm0..3 as exchanged with the native code.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame(pub [[u128; 2]; 4]);

/// Memory window shared by both sides: `PAGE` bytes ending at a guard page (natively a
/// PROT_NONE page; in the interpreter an unmapped 2 MiB page at [`GUARD`]).
pub const PAGE: usize = 4096;
/// Interpreter address of the first unmapped byte (PD entry 8: 16 MiB .. 18 MiB unmapped).
pub const GUARD: u64 = 0x0100_0000;
const PD: u64 = 0x3000; // testkit's page directory (identity map of the first GiB)

pub fn avx2_host() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// One native case: code, a window of memory before a guard page.
pub struct Native {
    code: Mmap,
    recover: u64,
    window: MmapMut,
}

fn prologue() -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    for (i, r) in [ymm0, ymm1, ymm2, ymm3].into_iter().enumerate() {
        a.vmovdqu(r, ymmword_ptr(rdi + 32 * i as i32)).unwrap();
    }
    a.assemble(0).unwrap()
}

fn epilogue() -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    for (i, r) in [ymm0, ymm1, ymm2, ymm3].into_iter().enumerate() {
        a.vmovdqu(ymmword_ptr(rdi + 32 * i as i32), r).unwrap();
    }
    a.vzeroupper().unwrap();
    a.ret().unwrap();
    a.assemble(0).unwrap()
}

static RECOVER: AtomicU64 = AtomicU64::new(0);
static FAULT_ADDR: AtomicU64 = AtomicU64::new(0);
static FAULT_LOCK: Mutex<()> = Mutex::new(());

#[repr(C)]
struct KSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

core::arch::global_asm!(
    ".globl lockstep_avx_native_restorer",
    "lockstep_avx_native_restorer:",
    "mov eax, 15",
    "syscall",
);

extern "C" {
    fn lockstep_avx_native_restorer();
}

/// SIGSEGV handler: note the fault address and resume at the store-back code.
extern "C" fn on_segv(_sig: i32, info: *mut u8, uc: *mut u8) {
    // SAFETY: the kernel passes a valid siginfo (si_addr at offset 16) and ucontext (x86-64
    // mcontext gregs start at offset 40; REG_RIP is index 16).
    unsafe {
        FAULT_ADDR.store(*(info.add(16) as *const u64), Ordering::SeqCst);
        *(uc.add(40 + 16 * 8) as *mut u64) = RECOVER.load(Ordering::SeqCst);
    }
}

fn rt_sigaction(act: *const KSigaction, old: *mut KSigaction) {
    // SAFETY: rt_sigaction(SIGSEGV, act, old, 8) with valid pointers; clobbers rcx/r11/rax.
    unsafe {
        core::arch::asm!("syscall", inlateout("rax") 13u64 => _, in("rdi") 11u64,
            in("rsi") act, in("rdx") old, in("r10") 8u64, lateout("rcx") _, lateout("r11") _);
    }
}

impl Native {
    /// Build the function around `ins` (instruction bytes).
    pub fn new(ins: &[u8]) -> Self {
        let (p, e) = (prologue(), epilogue());
        let mut m = MmapMut::map_anon(4096).expect("map code");
        m[..p.len()].copy_from_slice(&p);
        m[p.len()..p.len() + ins.len()].copy_from_slice(ins);
        m[p.len() + ins.len()..p.len() + ins.len() + e.len()].copy_from_slice(&e);
        let code = m.make_exec().expect("exec");
        let recover = code.as_ptr() as u64 + (p.len() + ins.len()) as u64;
        let mut window = MmapMut::map_anon(2 * PAGE).expect("map window");
        let guard = window.as_mut_ptr() as u64 + PAGE as u64;
        // SAFETY: mprotect(guard, 4096, PROT_NONE) on a page of our own mapping.
        let rc: i64;
        unsafe {
            core::arch::asm!("syscall", inlateout("rax") 10i64 => rc, in("rdi") guard,
                in("rsi") PAGE as u64, in("rdx") 0u64, lateout("rcx") _, lateout("r11") _);
        }
        assert_eq!(rc, 0, "mprotect");
        Native {
            code,
            recover,
            window,
        }
    }

    /// The window's bytes (the page before the guard).
    pub fn mem(&mut self) -> &mut [u8] {
        &mut self.window[..PAGE]
    }

    /// Run with `rsi` = window start + `rsi_off`. Returns the fault address if it faulted.
    pub fn run(&mut self, f: &mut Frame, rsi_off: i64) -> Option<u64> {
        let _g = FAULT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let p = (self.window.as_mut_ptr() as u64).wrapping_add(rsi_off as u64);
        RECOVER.store(self.recover, Ordering::SeqCst);
        FAULT_ADDR.store(u64::MAX, Ordering::SeqCst);
        let act = KSigaction {
            handler: on_segv as extern "C" fn(i32, *mut u8, *mut u8) as usize,
            flags: 0x4 | 0x0400_0000 | 0x4000_0000, // SA_SIGINFO | SA_RESTORER | SA_NODEFER
            restorer: lockstep_avx_native_restorer as unsafe extern "C" fn() as usize,
            mask: 0,
        };
        let mut old = KSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        rt_sigaction(&act, &mut old);
        // SAFETY: the generated code reads/writes the 128-byte frame at rdi and touches memory
        // only through rsi inside the window (or faults on the guard page, handled above).
        unsafe {
            let func: extern "sysv64" fn(*mut Frame, u64) =
                core::mem::transmute(self.code.as_ptr());
            func(f, p);
        }
        rt_sigaction(&old, core::ptr::null_mut());
        let a = FAULT_ADDR.load(Ordering::SeqCst);
        (a != u64::MAX).then(|| a.wrapping_sub(self.window.as_ptr() as u64))
    }
}

/// The interpreter side: same bytes, ymm0..3, the window at `GUARD - PAGE`, rsi likewise.
/// Returns the fault (with a page-fault address relative to the window) if any.
pub fn interp(ins: &[u8], f: &mut Frame, mem: &mut [u8], rsi_off: i64) -> Option<(Fault, u64)> {
    let mut m = TestMachine::new();
    m.ram.write_u64(PD + 8 * (GUARD >> 21), 0).unwrap();
    let base = GUARD - PAGE as u64;
    m.load(base, mem);
    for i in 0..4 {
        set_ymm(&mut m.cpu.state, i, f.0[i]);
    }
    m.cpu.state.gpr[reg::RSI] = base.wrapping_add(rsi_off as u64);
    let e = m.run_code(ins, 1);
    for i in 0..4 {
        f.0[i] = get_ymm(&m.cpu.state, i);
    }
    m.ram.read_phys(base, mem).unwrap();
    match e.reason {
        ExitReason::Budget => None,
        ExitReason::Exception(fl) => {
            assert_eq!(
                m.cpu.state.rip, CODE_BASE,
                "fault leaves RIP at the instruction"
            );
            let a = match fl {
                Fault::PageFault { addr, .. } => addr.wrapping_sub(base),
                _ => u64::MAX,
            };
            Some((fl, a))
        }
        r => panic!("unexpected exit {r:?}"),
    }
}

/// Random 256-bit value with element-level variety: small counts, sign patterns, random bits.
pub fn rand_v(r: &mut XorShift) -> V256 {
    let mut q = [0u64; 4];
    for e in q.iter_mut() {
        *e = match r.next() % 4 {
            0 => {
                let lo = r.next() % 70;
                let hi = r.next() % 70;
                lo | (hi << 32) | (r.next() & 0x8000_0000_8000_0000)
            }
            1 => r.next() | 0x8000_0000_8000_0000,
            _ => r.next(),
        };
    }
    [
        (q[0] as u128) | ((q[1] as u128) << 64),
        (q[2] as u128) | ((q[3] as u128) << 64),
    ]
}

/// Run `ins` on both sides over `cases` random states; registers, window memory and the fault
/// (address) must agree. `rsi_off` picks where rsi points in the window.
pub fn compare(
    name: &str,
    ins: &[u8],
    cases: usize,
    rsi_off: impl Fn(&mut XorShift) -> i64,
) -> usize {
    compare_with(name, ins, cases, true, &|_, _| {}, rsi_off)
}

/// [`compare`]; with `exact_addr` false only the presence of a page fault is compared, not its
/// address (this host's CR2 for a faulting masked store is not the faulting element's first
/// byte and is not modelled).
pub fn compare_with(
    name: &str,
    ins: &[u8],
    cases: usize,
    exact_addr: bool,
    prep: &dyn Fn(&mut Frame, &mut XorShift),
    rsi_off: impl Fn(&mut XorShift) -> i64,
) -> usize {
    let mut nat = Native::new(ins);
    let mut r = XorShift::new(0x5eed ^ ins.iter().fold(0u64, |h, &b| h.rotate_left(5) ^ b as u64));
    let mut bad = 0;
    for c in 0..cases {
        let mut f = Frame([[0; 2]; 4]);
        for v in f.0.iter_mut() {
            *v = rand_v(&mut r);
        }
        prep(&mut f, &mut r);
        for b in nat.mem().iter_mut() {
            *b = r.next() as u8;
        }
        let off = rsi_off(&mut r);
        let mut mem = nat.mem().to_vec();
        let mut fi = f;
        let fault_n = nat.run(&mut f, off);
        let fault_i = interp(ins, &mut fi, &mut mem, off);
        let same_fault = match (fault_n, fault_i) {
            (None, None) => true,
            (Some(a), Some((Fault::PageFault { .. }, b))) => a == b || !exact_addr,
            _ => false,
        };
        if f != fi || mem != nat.mem() || !same_fault {
            bad += 1;
            if bad <= 3 {
                eprintln!(
                    "{name} case {c}: rsi_off {off} mem same {}\n host   {:x?} fault {fault_n:x?}\n interp {:x?} fault {fault_i:x?}",
                    mem == nat.mem(),
                    f.0,
                    fi.0
                );
            }
        }
    }
    bad
}

/// Assemble one instruction.
pub fn bytes(f: impl FnOnce(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>) -> Vec<u8> {
    TestMachine::assemble(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Asm = fn(&mut CodeAssembler, u32) -> Result<(), iced_x86::IcedError>;

    /// Register forms, memory forms (rsi inside the window) and imm8 sweeps.
    #[test]
    fn permutes_broadcasts_shifts_match_host() {
        if !avx2_host() {
            return;
        }
        let m = || ymmword_ptr(rsi);
        let x = || xmmword_ptr(rsi);
        let forms: Vec<(&str, Asm, u32)> = vec![
            ("vbroadcastss x", |a, _| a.vbroadcastss(xmm0, xmm1), 1),
            ("vbroadcastss y", |a, _| a.vbroadcastss(ymm0, xmm1), 1),
            (
                "vbroadcastss m",
                |a, _| a.vbroadcastss(ymm0, dword_ptr(rsi)),
                1,
            ),
            ("vbroadcastsd y", |a, _| a.vbroadcastsd(ymm0, xmm1), 1),
            (
                "vbroadcastsd m",
                |a, _| a.vbroadcastsd(ymm0, qword_ptr(rsi)),
                1,
            ),
            (
                "vbroadcastf128",
                |a, _| a.vbroadcastf128(ymm0, xmmword_ptr(rsi)),
                1,
            ),
            (
                "vbroadcasti128",
                |a, _| a.vbroadcasti128(ymm0, xmmword_ptr(rsi)),
                1,
            ),
            ("vpbroadcastb x", |a, _| a.vpbroadcastb(xmm0, xmm1), 1),
            (
                "vpbroadcastb y",
                |a, _| a.vpbroadcastb(ymm0, byte_ptr(rsi)),
                1,
            ),
            ("vpbroadcastw y", |a, _| a.vpbroadcastw(ymm0, xmm1), 1),
            (
                "vpbroadcastw m",
                |a, _| a.vpbroadcastw(xmm0, word_ptr(rsi)),
                1,
            ),
            ("vpbroadcastd y", |a, _| a.vpbroadcastd(ymm0, xmm1), 1),
            (
                "vpbroadcastd m",
                |a, _| a.vpbroadcastd(xmm0, dword_ptr(rsi)),
                1,
            ),
            ("vpbroadcastq y", |a, _| a.vpbroadcastq(ymm0, xmm1), 1),
            (
                "vpbroadcastq m",
                |a, _| a.vpbroadcastq(xmm0, qword_ptr(rsi)),
                1,
            ),
            ("vinsertf128", |a, i| a.vinsertf128(ymm0, ymm1, xmm2, i), 2),
            (
                "vinserti128 m",
                |a, i| a.vinserti128(ymm0, ymm1, xmmword_ptr(rsi), i),
                2,
            ),
            ("vextractf128", |a, i| a.vextractf128(xmm0, ymm1, i), 2),
            (
                "vextracti128 m",
                |a, i| a.vextracti128(xmmword_ptr(rsi), ymm1, i),
                2,
            ),
            ("vperm2f128", |a, i| a.vperm2f128(ymm0, ymm1, ymm2, i), 256),
            (
                "vperm2i128 m",
                |a, i| a.vperm2i128(ymm0, ymm1, ymmword_ptr(rsi), i),
                256,
            ),
            ("vpermd", |a, _| a.vpermd(ymm0, ymm1, ymm2), 1),
            (
                "vpermps m",
                |a, _| a.vpermps(ymm0, ymm1, ymmword_ptr(rsi)),
                1,
            ),
            ("vpermq", |a, i| a.vpermq(ymm0, ymm1, i), 256),
            (
                "vpermpd m",
                |a, i| a.vpermpd(ymm0, ymmword_ptr(rsi), i),
                256,
            ),
            ("vpermilps imm x", |a, i| a.vpermilps(xmm0, xmm1, i), 256),
            (
                "vpermilps imm m",
                |a, i| a.vpermilps(ymm0, ymmword_ptr(rsi), i),
                256,
            ),
            ("vpermilps var", |a, _| a.vpermilps(ymm0, ymm1, ymm2), 1),
            (
                "vpermilps var m",
                |a, _| a.vpermilps(xmm0, xmm1, xmmword_ptr(rsi)),
                1,
            ),
            ("vpermilpd imm", |a, i| a.vpermilpd(ymm0, ymm1, i), 16),
            (
                "vpermilpd imm x",
                |a, i| a.vpermilpd(xmm0, xmmword_ptr(rsi), i),
                4,
            ),
            ("vpermilpd var", |a, _| a.vpermilpd(ymm0, ymm1, ymm2), 1),
            ("vpermilpd var x", |a, _| a.vpermilpd(xmm0, xmm1, xmm2), 1),
            ("vpblendd x", |a, i| a.vpblendd(xmm0, xmm1, xmm2, i), 256),
            (
                "vpblendd m",
                |a, i| a.vpblendd(ymm0, ymm1, ymmword_ptr(rsi), i),
                256,
            ),
            ("vpsllvd", |a, _| a.vpsllvd(ymm0, ymm1, ymm2), 1),
            (
                "vpsllvd x",
                |a, _| a.vpsllvd(xmm0, xmm1, xmmword_ptr(rsi)),
                1,
            ),
            ("vpsllvq", |a, _| a.vpsllvq(ymm0, ymm1, ymm2), 1),
            ("vpsrlvd", |a, _| a.vpsrlvd(ymm0, ymm1, ymmword_ptr(rsi)), 1),
            ("vpsrlvq x", |a, _| a.vpsrlvq(xmm0, xmm1, xmm2), 1),
            ("vpsravd", |a, _| a.vpsravd(ymm0, ymm1, ymm2), 1),
            ("vpsravd x", |a, _| a.vpsravd(xmm0, xmm1, xmm2), 1),
        ];
        let _ = (m, x);
        let mut bad = 0;
        let mut n = 0;
        for (name, f, imms) in forms {
            for i in 0..imms {
                let ins = bytes(|a| f(a, i));
                bad += compare(name, &ins, if imms > 1 { 4 } else { 200 }, |r| {
                    (r.next() % 64) as i64
                });
                n += 1;
            }
        }
        assert!(n > 40);
        assert_eq!(bad, 0, "mismatches against the host");
    }

    /// Masked loads and stores, including elements on the guard page: masked-out elements
    /// never fault, a selected one faults with nothing written.
    #[test]
    fn masked_moves_match_host_at_a_guard_page() {
        if !avx2_host() {
            return;
        }
        let forms: Vec<(&str, Asm)> = vec![
            ("vpmaskmovd ld x", |a, _| {
                a.vpmaskmovd(xmm0, xmm2, xmmword_ptr(rsi))
            }),
            ("vpmaskmovd ld y", |a, _| {
                a.vpmaskmovd(ymm0, ymm2, ymmword_ptr(rsi))
            }),
            ("vpmaskmovq ld y", |a, _| {
                a.vpmaskmovq(ymm0, ymm2, ymmword_ptr(rsi))
            }),
            ("vpmaskmovq ld x", |a, _| {
                a.vpmaskmovq(xmm0, xmm2, xmmword_ptr(rsi))
            }),
            ("vmaskmovps ld y", |a, _| {
                a.vmaskmovps(ymm0, ymm2, ymmword_ptr(rsi))
            }),
            ("vmaskmovpd ld x", |a, _| {
                a.vmaskmovpd(xmm0, xmm2, xmmword_ptr(rsi))
            }),
            ("vpmaskmovd st y", |a, _| {
                a.vpmaskmovd(ymmword_ptr(rsi), ymm2, ymm1)
            }),
            ("vpmaskmovd st x", |a, _| {
                a.vpmaskmovd(xmmword_ptr(rsi), xmm2, xmm1)
            }),
            ("vpmaskmovq st y", |a, _| {
                a.vpmaskmovq(ymmword_ptr(rsi), ymm2, ymm1)
            }),
            ("vmaskmovps st x", |a, _| {
                a.vmaskmovps(xmmword_ptr(rsi), xmm2, xmm1)
            }),
            ("vmaskmovpd st y", |a, _| {
                a.vmaskmovpd(ymmword_ptr(rsi), ymm2, ymm1)
            }),
        ];
        let mut bad = 0;
        for (name, f) in forms {
            let ins = bytes(|a| f(a, 0));
            // Anywhere from well inside the window to straddling the guard page.
            let store = name.contains(" st ");
            bad += compare_with(name, &ins, 300, !store, &|_, _| {}, |r| {
                PAGE as i64 - 40 + (r.next() % 40) as i64
            });
        }
        assert_eq!(bad, 0, "mismatches against the host");
    }

    /// Gathers with indices in [-64, 64), every scale and a displacement; inside the window and
    /// across the guard page (a fault mid-gather: partial destination and mask).
    #[test]
    fn gathers_match_host_including_faults() {
        // What a gather leaves in its mask register (after completion, and at a fault
        // mid-gather) is the modelled Intel CPU's; AMD's CPUs leave it differently.
        if !avx2_host() || !crate::ops::native::host_is_intel() {
            eprintln!("gathers_match_host_including_faults: needs an Intel host with AVX2");
            return;
        }
        type G = fn(&mut CodeAssembler, u32) -> Result<(), iced_x86::IcedError>;
        let forms: Vec<(&str, G)> = vec![
            ("vpgatherdd y", |a, s| {
                a.vpgatherdd_3(ymm0, dword_ptr(rsi + ymm1 * s + 8), ymm2)
            }),
            ("vpgatherdd x", |a, s| {
                a.vpgatherdd_3(xmm0, dword_ptr(rsi + xmm1 * s), xmm2)
            }),
            ("vpgatherdq y", |a, s| {
                a.vpgatherdq_3(ymm0, qword_ptr(rsi + xmm1 * s - 8), ymm2)
            }),
            ("vpgatherdq x", |a, s| {
                a.vpgatherdq_3(xmm0, qword_ptr(rsi + xmm1 * s), xmm2)
            }),
            ("vpgatherqd y", |a, s| {
                a.vpgatherqd_3(xmm0, dword_ptr(rsi + ymm1 * s), xmm2)
            }),
            ("vpgatherqd x", |a, s| {
                a.vpgatherqd_3(xmm0, dword_ptr(rsi + xmm1 * s + 4), xmm2)
            }),
            ("vpgatherqq y", |a, s| {
                a.vpgatherqq_3(ymm0, qword_ptr(rsi + ymm1 * s), ymm2)
            }),
            ("vpgatherqq x", |a, s| {
                a.vpgatherqq_3(xmm0, qword_ptr(rsi + xmm1 * s), xmm2)
            }),
            ("vgatherdps y", |a, s| {
                a.vgatherdps_3(ymm0, dword_ptr(rsi + ymm1 * s), ymm2)
            }),
            ("vgatherdps x", |a, s| {
                a.vgatherdps_3(xmm0, dword_ptr(rsi + xmm1 * s), xmm2)
            }),
            ("vgatherdpd y", |a, s| {
                a.vgatherdpd_3(ymm0, qword_ptr(rsi + xmm1 * s), ymm2)
            }),
            ("vgatherqps y", |a, s| {
                a.vgatherqps_3(xmm0, dword_ptr(rsi + ymm1 * s), xmm2)
            }),
            ("vgatherqps x", |a, s| {
                a.vgatherqps_3(xmm0, dword_ptr(rsi + xmm1 * s), xmm2)
            }),
            ("vgatherqpd y", |a, s| {
                a.vgatherqpd_3(ymm0, qword_ptr(rsi + ymm1 * s), ymm2)
            }),
            ("vgatherqpd x", |a, s| {
                a.vgatherqpd_3(xmm0, qword_ptr(rsi + xmm1 * s), xmm2)
            }),
        ];
        let prep_d = |f: &mut Frame, r: &mut XorShift| {
            let d: [u32; 8] = core::array::from_fn(|_| ((r.next() % 128) as u32).wrapping_sub(64));
            f.0[1] = crate::ops::avx_perm::from_d(d);
        };
        let prep_q = |f: &mut Frame, r: &mut XorShift| {
            let q: [u64; 4] = core::array::from_fn(|_| (r.next() % 128).wrapping_sub(64));
            f.0[1] = crate::ops::avx_perm::from_q(q);
        };
        let mut bad = 0;
        for (name, g) in forms {
            let q_index = name.contains("gatherq");
            let prep: &dyn Fn(&mut Frame, &mut XorShift) = if q_index { &prep_q } else { &prep_d };
            for s in [1, 2, 4, 8] {
                let ins = bytes(|a| g(a, s));
                bad += compare_with(name, &ins, 100, true, prep, |r| {
                    1024 + (r.next() % 2000) as i64
                });
                bad += compare_with(name, &ins, 200, true, prep, |r| {
                    PAGE as i64 - 300 + (r.next() % 300) as i64
                });
            }
        }
        assert_eq!(bad, 0, "mismatches against the host");
    }
}
