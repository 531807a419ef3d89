//! Unit tests of the system-call layer and the run loop on small hand-built guests.

use super::elf::tests::{build, load_seg};
use super::elf::{ET_EXEC, PF_R, PF_W, PF_X};
use super::guest::Guest;
use super::loader::{self, Setup};
use super::memory::{MMAP_BASE, PROT_READ, PROT_WRITE};
use super::syscall::{errno::*, nr, Kernel, Stop, EPOCH_2000};
use super::{run, EngineKind, EXIT_MAX_INSNS};
use crate::seed::Seed;
use iced_x86::code_asm::*;
use lockstep_interp::state::{reg, sreg};

const TEXT: u64 = 0x40_0000;
const ENTRY: u64 = TEXT + 0x1000;
const DATA: u64 = 0x60_0000;

/// A guest whose text page at ENTRY holds `code`, with 64 KiB of .bss at DATA.
fn guest_with(code: &[u8]) -> Guest {
    let code_off = 0x1000u64;
    let mut tail = vec![0u8; (code_off as usize) - (64 + 2 * 56)];
    tail.extend_from_slice(code);
    let file_len = code_off + code.len() as u64;
    let f = build(
        ET_EXEC,
        ENTRY,
        &[
            load_seg(0, TEXT, file_len, file_len, PF_R | PF_X),
            load_seg(file_len, DATA, 0, 0x1_0000, PF_R | PF_W),
        ],
        &tail,
    );
    let (g, _) = loader::load(&Setup {
        file: &f,
        argv: vec![b"prog".to_vec()],
        execfn: b"prog".to_vec(),
        ram_bytes: 64 << 20,
        random: [0; 16],
        rng_seed: [0; 32],
    })
    .unwrap();
    g
}

fn asm(f: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>) -> Vec<u8> {
    let mut a = CodeAssembler::new(64).unwrap();
    f(&mut a).unwrap();
    a.assemble(ENTRY).unwrap()
}

fn kernel() -> Kernel {
    Kernel::new(false, Seed::default().stream("getrandom"))
}

/// Issue system call `n` directly; returns RAX as a signed value.
fn sys(g: &mut Guest, k: &mut Kernel, n: u64, args: &[u64]) -> Result<i64, Stop> {
    let regs = [reg::RDI, reg::RSI, reg::RDX, reg::R10, reg::R8, reg::R9];
    g.cpu.state.gpr[reg::RAX] = n;
    for (i, &r) in regs.iter().enumerate() {
        g.cpu.state.gpr[r] = args.get(i).copied().unwrap_or(0);
    }
    k.syscall(g)?;
    Ok(g.cpu.state.gpr[reg::RAX] as i64)
}

fn ok(g: &mut Guest, k: &mut Kernel, n: u64, args: &[u64]) -> i64 {
    sys(g, k, n, args).unwrap()
}

#[test]
fn unknown_syscall_is_enosys_and_rcx_r11_are_set() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    g.cpu.state.rip = 0x1234;
    assert_eq!(ok(&mut g, &mut k, 57, &[]), -ENOSYS); // fork
    assert_eq!(ok(&mut g, &mut k, 9999, &[]), -ENOSYS);
    assert_eq!(g.cpu.state.gpr[reg::RCX], 0x1234);
    assert_eq!(g.cpu.state.gpr[reg::R11], g.cpu.state.rflags);
}

#[test]
fn exit_and_self_signals_stop_the_process() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    assert_eq!(
        sys(&mut g, &mut k, nr::EXIT_GROUP, &[300]),
        Err(Stop::Exit(44))
    );
    assert_eq!(sys(&mut g, &mut k, nr::EXIT, &[3]), Err(Stop::Exit(3)));
    assert_eq!(
        sys(&mut g, &mut k, nr::TGKILL, &[1000, 1000, 6]),
        Err(Stop::Signal(6))
    );
    assert_eq!(ok(&mut g, &mut k, nr::KILL, &[1000, 0]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::KILL, &[1000, 17]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::KILL, &[42, 9]), -ESRCH);
}

#[test]
fn bad_pointers_give_efault_not_panics() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    for p in [0u64, 0x10, TEXT - 1, 0xffff_8000_0000_0000, u64::MAX - 3] {
        assert_eq!(ok(&mut g, &mut k, nr::WRITE, &[1, p, 4]), -EFAULT, "{p:#x}");
        assert_eq!(ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[0, p]), -EFAULT);
        assert_eq!(ok(&mut g, &mut k, nr::UNAME, &[p]), -EFAULT);
        assert_eq!(
            ok(&mut g, &mut k, nr::OPENAT, &[-100i64 as u64, p, 0, 0]),
            -EFAULT
        );
    }
    // Read-only text cannot be a destination.
    assert_eq!(ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[0, ENTRY]), -EFAULT);
    assert_eq!(ok(&mut g, &mut k, nr::WRITE, &[1, DATA, 0]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::WRITE, &[5, DATA, 1]), -EBADF);
    assert_eq!(ok(&mut g, &mut k, nr::READ, &[3, DATA, 1]), -EBADF);
}

#[test]
fn virtual_time_is_retired_instructions_plus_sleep() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    g.cpu.retired = 1234;
    assert_eq!(ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[0, DATA]), 0);
    assert_eq!(g.read_u64(DATA).unwrap(), EPOCH_2000);
    assert_eq!(g.read_u64(DATA + 8).unwrap(), 1234);
    assert_eq!(ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[1, DATA]), 0);
    assert_eq!(g.read_u64(DATA).unwrap(), 0);
    assert_eq!(ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[99, DATA]), -EINVAL);
    // Sleep 1.5 s.
    g.write_u64(DATA + 64, 1).unwrap();
    g.write_u64(DATA + 72, 500_000_000).unwrap();
    assert_eq!(ok(&mut g, &mut k, nr::NANOSLEEP, &[DATA + 64, 0]), 0);
    ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[1, DATA]);
    assert_eq!(g.read_u64(DATA).unwrap(), 1);
    assert_eq!(g.read_u64(DATA + 8).unwrap(), 500_001_234);
    // CPU time does not include sleep.
    ok(&mut g, &mut k, nr::CLOCK_GETTIME, &[2, DATA]);
    assert_eq!(g.read_u64(DATA).unwrap(), 0);
    // Absolute sleep until monotonic 3 s.
    g.write_u64(DATA + 64, 3).unwrap();
    g.write_u64(DATA + 72, 0).unwrap();
    assert_eq!(
        ok(&mut g, &mut k, nr::CLOCK_NANOSLEEP, &[1, 1, DATA + 64, 0]),
        0
    );
    assert_eq!(k.now_ns(&g), 3_000_000_000);
    assert_eq!(ok(&mut g, &mut k, nr::TIME, &[0]), (EPOCH_2000 + 3) as i64);
    assert_eq!(ok(&mut g, &mut k, nr::GETTIMEOFDAY, &[DATA, 0]), 0);
    assert_eq!(g.read_u64(DATA).unwrap(), EPOCH_2000 + 3);
    assert_eq!(g.read_u64(DATA + 8).unwrap(), 0);
    // Bad timespec.
    g.write_u64(DATA + 72, 1_000_000_000).unwrap();
    assert_eq!(ok(&mut g, &mut k, nr::NANOSLEEP, &[DATA + 64, 0]), -EINVAL);
}

#[test]
fn getrandom_is_seeded_and_checked() {
    let bytes = |seed: &str| {
        let mut g = guest_with(&[0x90]);
        let mut k = Kernel::new(false, seed.parse::<Seed>().unwrap().stream("getrandom"));
        assert_eq!(ok(&mut g, &mut k, nr::GETRANDOM, &[DATA, 5000, 0]), 5000);
        g.read_mem(DATA, 5000).unwrap()
    };
    let a = bytes("1");
    assert_eq!(a, bytes("1"));
    assert_ne!(a, bytes("2"));
    assert!(a.iter().any(|&b| b != 0));
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    assert_eq!(ok(&mut g, &mut k, nr::GETRANDOM, &[DATA, 8, 0x80]), -EINVAL);
    assert_eq!(ok(&mut g, &mut k, nr::GETRANDOM, &[0, 8, 0]), -EFAULT);
}

#[test]
fn mmap_munmap_mprotect_madvise() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    const RW: u64 = (PROT_READ | PROT_WRITE) as u64;
    const ANON: u64 = 0x22; // MAP_PRIVATE | MAP_ANONYMOUS
    let a = ok(&mut g, &mut k, nr::MMAP, &[0, 8192, RW, ANON, u64::MAX, 0]) as u64;
    assert_eq!(a, MMAP_BASE - 8192);
    assert_eq!(g.read_mem(a, 8192).unwrap(), vec![0u8; 8192]);
    g.write_u64(a + 4096, 77).unwrap();
    let b = ok(&mut g, &mut k, nr::MMAP, &[0, 100, RW, ANON, u64::MAX, 0]) as u64;
    assert_eq!(b, a - 4096);
    // MAP_FIXED_NOREPLACE over a mapping fails; MAP_FIXED replaces (and zeroes).
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::MMAP,
            &[a, 4096, RW, ANON | 0x10_0000, 0, 0]
        ),
        -EEXIST
    );
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::MMAP,
            &[a + 4096, 4096, RW, ANON | 0x10, 0, 0]
        ),
        (a + 4096) as i64
    );
    assert_eq!(g.read_u64(a + 4096).unwrap(), 0);
    // Files and bad arguments.
    assert_eq!(
        ok(&mut g, &mut k, nr::MMAP, &[0, 4096, RW, 2, 3, 0]),
        -EBADF
    );
    assert_eq!(
        ok(&mut g, &mut k, nr::MMAP, &[0, 4096, RW, 2, 0, 0]),
        -ENODEV
    );
    assert_eq!(
        ok(&mut g, &mut k, nr::MMAP, &[0, 0, RW, ANON, 0, 0]),
        -EINVAL
    );
    assert_eq!(
        ok(&mut g, &mut k, nr::MMAP, &[0, 4096, RW, 0x20, 0, 0]),
        -EINVAL
    );
    assert_eq!(
        ok(&mut g, &mut k, nr::MMAP, &[0, 4096, RW, ANON, 0, 1]),
        -EINVAL
    );
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::MMAP,
            &[0x1000, 4096, RW, ANON | 0x10, 0, 0]
        ),
        -EPERM
    );
    // mprotect read-only: writes fault, reads work.
    g.write_u64(a, 5).unwrap();
    assert_eq!(
        ok(&mut g, &mut k, nr::MPROTECT, &[a, 4096, PROT_READ as u64]),
        0
    );
    assert!(g.write_u64(a, 6).is_err());
    assert_eq!(g.read_u64(a).unwrap(), 5);
    assert_eq!(ok(&mut g, &mut k, nr::MPROTECT, &[a + 1, 4096, 1]), -EINVAL);
    assert_eq!(
        ok(&mut g, &mut k, nr::MPROTECT, &[0x7000_0000, 4096, 1]),
        -ENOMEM
    );
    // madvise(DONTNEED) zeroes.
    ok(&mut g, &mut k, nr::MPROTECT, &[a, 4096, RW]);
    assert_eq!(ok(&mut g, &mut k, nr::MADVISE, &[a, 4096, 4]), 0);
    assert_eq!(g.read_u64(a).unwrap(), 0);
    // munmap: gone.
    assert_eq!(ok(&mut g, &mut k, nr::MUNMAP, &[a, 8192]), 0);
    assert!(g.read_u64(a).is_err());
    assert_eq!(ok(&mut g, &mut k, nr::MUNMAP, &[a + 1, 8192]), -EINVAL);
    assert_eq!(ok(&mut g, &mut k, nr::MUNMAP, &[a, 0]), -EINVAL);
}

#[test]
fn brk_via_syscall() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    let b0 = ok(&mut g, &mut k, nr::BRK, &[0]) as u64;
    assert_eq!(b0, DATA + 0x1_0000);
    assert_eq!(
        ok(&mut g, &mut k, nr::BRK, &[b0 + 10_000]) as u64,
        b0 + 10_000
    );
    g.write_u64(b0 + 9_000, 1).unwrap();
    assert_eq!(ok(&mut g, &mut k, nr::BRK, &[b0]) as u64, b0);
    assert!(g.write_u64(b0 + 9_000, 1).is_err());
    assert_eq!(ok(&mut g, &mut k, nr::BRK, &[1]) as u64, b0);
}

#[test]
fn identity_uname_stat_limits_tls() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    assert_eq!(ok(&mut g, &mut k, nr::GETPID, &[]), 1000);
    assert_eq!(ok(&mut g, &mut k, nr::GETTID, &[]), 1000);
    assert_eq!(ok(&mut g, &mut k, nr::SET_TID_ADDRESS, &[DATA]), 1000);
    assert_eq!(ok(&mut g, &mut k, nr::GETEUID, &[]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::UNAME, &[DATA]), 0);
    let u = g.read_mem(DATA, 390).unwrap();
    let field = |i: usize| {
        let f = &u[i * 65..(i + 1) * 65];
        String::from_utf8(f[..f.iter().position(|&c| c == 0).unwrap()].to_vec()).unwrap()
    };
    assert_eq!(field(0), "Linux");
    assert_eq!(field(1), "lockstep");
    assert_eq!(field(2), "6.1.0-lockstep");
    assert_eq!(field(4), "x86_64");
    // fstat and newfstatat(AT_EMPTY_PATH).
    assert_eq!(ok(&mut g, &mut k, nr::FSTAT, &[1, DATA]), 0);
    assert_eq!(g.read_u32(DATA + 24).unwrap(), 0o010_600);
    assert_eq!(ok(&mut g, &mut k, nr::FSTAT, &[7, DATA]), -EBADF);
    g.write_mem(DATA + 512, b"\0").unwrap();
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::NEWFSTATAT,
            &[2, DATA + 512, DATA + 1024, 0x1000]
        ),
        0
    );
    assert_eq!(g.read_u64(DATA + 1024 + 8).unwrap(), 5); // st_ino of fd 2
    assert_eq!(
        ok(&mut g, &mut k, nr::NEWFSTATAT, &[2, DATA + 512, DATA, 0]),
        -ENOENT
    );
    g.write_mem(DATA + 512, b"/etc/passwd\0").unwrap();
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::NEWFSTATAT,
            &[-100i64 as u64, DATA + 512, DATA, 0]
        ),
        -ENOENT
    );
    assert_eq!(
        ok(
            &mut g,
            &mut k,
            nr::OPENAT,
            &[-100i64 as u64, DATA + 512, 0, 0]
        ),
        -ENOENT
    );
    assert_eq!(
        ok(&mut g, &mut k, nr::READLINK, &[DATA + 512, DATA, 64]),
        -ENOENT
    );
    assert_eq!(ok(&mut g, &mut k, nr::IOCTL, &[1, 0x5401, DATA]), -ENOTTY);
    assert_eq!(ok(&mut g, &mut k, nr::LSEEK, &[0, 0, 0]), -ESPIPE);
    assert_eq!(ok(&mut g, &mut k, nr::CLOSE, &[2]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::CLOSE, &[3]), -EBADF);
    // Limits.
    assert_eq!(ok(&mut g, &mut k, nr::PRLIMIT64, &[0, 3, 0, DATA]), 0);
    assert_eq!(g.read_u64(DATA).unwrap(), 8 << 20);
    assert_eq!(g.read_u64(DATA + 8).unwrap(), u64::MAX);
    assert_eq!(
        ok(&mut g, &mut k, nr::PRLIMIT64, &[0, 99, 0, DATA]),
        -EINVAL
    );
    // TLS base.
    assert_eq!(
        ok(&mut g, &mut k, nr::ARCH_PRCTL, &[0x1002, 0x1234_5000]),
        0
    );
    assert_eq!(g.cpu.state.seg[sreg::FS].base, 0x1234_5000);
    assert_eq!(ok(&mut g, &mut k, nr::ARCH_PRCTL, &[0x1003, DATA]), 0);
    assert_eq!(g.read_u64(DATA).unwrap(), 0x1234_5000);
    assert_eq!(
        ok(&mut g, &mut k, nr::ARCH_PRCTL, &[0x1002, 1 << 63]),
        -EPERM
    );
    assert_eq!(ok(&mut g, &mut k, nr::ARCH_PRCTL, &[0x3001, DATA]), -EINVAL);
    // Signals are accepted and forgotten.
    assert_eq!(
        ok(&mut g, &mut k, nr::RT_SIGACTION, &[11, DATA, DATA + 64, 8]),
        0
    );
    assert_eq!(g.read_mem(DATA + 64, 32).unwrap(), vec![0; 32]);
    assert_eq!(
        ok(&mut g, &mut k, nr::RT_SIGACTION, &[11, DATA, 0, 4]),
        -EINVAL
    );
    assert_eq!(ok(&mut g, &mut k, nr::SET_ROBUST_LIST, &[DATA, 24]), 0);
    assert_eq!(ok(&mut g, &mut k, nr::RSEQ, &[DATA, 32, 0, 0]), -ENOSYS);
    // futex: value mismatch and no-timeout waits return EAGAIN, wake finds nobody.
    g.write_u64(DATA, 1).unwrap();
    assert_eq!(ok(&mut g, &mut k, nr::FUTEX, &[DATA, 128, 0, 0]), -EAGAIN);
    assert_eq!(ok(&mut g, &mut k, nr::FUTEX, &[DATA, 129, 1, 0]), 0);
}

#[test]
fn run_loop_demand_pages_and_exits() {
    // Store to .bss and the stack (demand paged), then exit_group(rbx).
    let code = asm(|a| {
        a.mov(rbx, 42u64)?;
        a.mov(qword_ptr(DATA + 0x8000), rbx)?;
        a.mov(qword_ptr(rsp - 0x10_0000), rbx)?;
        a.mov(rdi, qword_ptr(DATA + 0x8000))?;
        a.mov(eax, 231u32)?;
        a.syscall()
    });
    let mut g = guest_with(&code);
    let mut k = kernel();
    assert_eq!(run(&mut g, &mut k, EngineKind::Interp, None), 42);
    assert_eq!(g.cpu.retired, 6);
    let h = g.state_hash();
    let mut g2 = guest_with(&code);
    run(&mut g2, &mut kernel(), EngineKind::Interp, None);
    assert_eq!(g2.state_hash(), h);
}

#[test]
fn run_loop_faults_and_limits() {
    let null = asm(|a| a.mov(rax, qword_ptr(0x8u64)));
    assert_eq!(
        run(
            &mut guest_with(&null),
            &mut kernel(),
            EngineKind::Interp,
            None
        ),
        139
    );
    let ro = asm(|a| a.mov(qword_ptr(ENTRY), rax));
    assert_eq!(
        run(
            &mut guest_with(&ro),
            &mut kernel(),
            EngineKind::Interp,
            None
        ),
        139
    );
    let exec_data = asm(|a| a.jmp(DATA));
    assert_eq!(
        run(
            &mut guest_with(&exec_data),
            &mut kernel(),
            EngineKind::Interp,
            None
        ),
        139
    );
    let ud = asm(|a| a.ud2());
    assert_eq!(
        run(
            &mut guest_with(&ud),
            &mut kernel(),
            EngineKind::Interp,
            None
        ),
        132
    );
    let spin = asm(|a| a.jmp(ENTRY));
    let mut g = guest_with(&spin);
    assert_eq!(
        run(&mut g, &mut kernel(), EngineKind::Interp, Some(1000)),
        EXIT_MAX_INSNS
    );
    assert_eq!(g.cpu.retired, 1000);
}

/// A small fixed pseudo-random sequence (xorshift) for the robustness tests.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn random_syscalls_never_panic() {
    let mut g = guest_with(&[0x90]);
    let mut k = kernel();
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let interesting = [
        0,
        1,
        2,
        8,
        24,
        4096,
        DATA,
        DATA + 4090,
        ENTRY,
        u64::MAX,
        1 << 47,
    ];
    for i in 0..20_000u64 {
        let n = i % 460;
        let mut a = [0u64; 6];
        for v in a.iter_mut() {
            let r = xorshift(&mut s);
            *v = if r & 1 == 0 {
                interesting[(r >> 8) as usize % interesting.len()]
            } else {
                r >> (r & 63)
            };
        }
        // Keep the host's stdio out of it: no reads of stdin, no writes to stdout/stderr.
        if matches!(n, nr::READ | nr::READV | nr::WRITE | nr::WRITEV) {
            a[0] = 7;
        }
        let _ = sys(&mut g, &mut k, n, &a);
    }
}

#[test]
fn mutated_elf_files_never_panic_the_loader() {
    let code = asm(|a| a.ud2());
    let mut g = guest_with(&code);
    let good = {
        // Rebuild the same file guest_with loads, to mutate it.
        let code_off = 0x1000u64;
        let mut tail = vec![0u8; (code_off as usize) - (64 + 2 * 56)];
        tail.extend_from_slice(&code);
        let file_len = code_off + code.len() as u64;
        build(
            ET_EXEC,
            ENTRY,
            &[
                load_seg(0, TEXT, file_len, file_len, PF_R | PF_X),
                load_seg(file_len, DATA, 0, 0x1_0000, PF_R | PF_W),
            ],
            &tail,
        )
    };
    assert_eq!(run(&mut g, &mut kernel(), EngineKind::Interp, None), 132);
    let mut s = 12345u64;
    for _ in 0..400 {
        let mut f = good.clone();
        for _ in 0..1 + xorshift(&mut s) % 4 {
            let r = xorshift(&mut s);
            // Mostly the headers, sometimes anywhere; sometimes truncate.
            let pos = if r & 3 != 0 {
                (r >> 8) as usize % 176
            } else {
                (r >> 8) as usize % f.len()
            };
            f[pos] = (r >> 40) as u8;
        }
        if xorshift(&mut s) & 7 == 0 {
            let cut = xorshift(&mut s) as usize % f.len();
            f.truncate(cut);
        }
        if let Ok((mut g, _)) = loader::load(&Setup {
            file: &f,
            argv: vec![b"p".to_vec()],
            execfn: b"p".to_vec(),
            ram_bytes: 16 << 20,
            random: [0; 16],
            rng_seed: [0; 32],
        }) {
            run(&mut g, &mut kernel(), EngineKind::Interp, Some(1000));
        }
    }
}
