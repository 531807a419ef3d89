//! The deterministic Linux system-call layer: one `match` on the number, one small fn per call.
//!
//! Nothing the guest sees comes from the host except the bytes it reads from stdin: time is
//! virtual (retired instructions, 1 ns each, plus time slept), randomness comes from the seed,
//! identities and limits are fixed. File-descriptor calls live in `sys_io.rs`, memory calls in
//! `sys_mm.rs`.

use super::guest::{Guest, MemFault};
use super::loader::{GUEST_PID, GUEST_PPID};
use super::memory::{STACK_SIZE, TASK_SIZE};
use super::sysnames;
use lockstep_interp::state::{reg, sreg};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;

/// errno values used here.
pub mod errno {
    pub const EPERM: i64 = 1;
    pub const ENOENT: i64 = 2;
    pub const ESRCH: i64 = 3;
    pub const EBADF: i64 = 9;
    pub const EAGAIN: i64 = 11;
    pub const ENOMEM: i64 = 12;
    pub const EFAULT: i64 = 14;
    pub const EEXIST: i64 = 17;
    pub const ENODEV: i64 = 19;
    pub const EINVAL: i64 = 22;
    pub const ENOTTY: i64 = 25;
    pub const ESPIPE: i64 = 29;
    pub const EPIPE: i64 = 32;
    pub const ERANGE: i64 = 34;
    pub const ENAMETOOLONG: i64 = 36;
    pub const ENOSYS: i64 = 38;
    pub const ETIMEDOUT: i64 = 110;

    /// Symbolic name for traces.
    pub fn name(e: i64) -> Option<&'static str> {
        Some(match e {
            EPERM => "EPERM",
            ENOENT => "ENOENT",
            ESRCH => "ESRCH",
            5 => "EIO",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            13 => "EACCES",
            EFAULT => "EFAULT",
            EEXIST => "EEXIST",
            ENODEV => "ENODEV",
            EINVAL => "EINVAL",
            ENOTTY => "ENOTTY",
            28 => "ENOSPC",
            ESPIPE => "ESPIPE",
            EPIPE => "EPIPE",
            ERANGE => "ERANGE",
            ENAMETOOLONG => "ENAMETOOLONG",
            ENOSYS => "ENOSYS",
            ETIMEDOUT => "ETIMEDOUT",
            _ => return None,
        })
    }
}
use errno::*;

/// Wall-clock time of virtual time zero: 2000-01-01T00:00:00Z, in seconds since 1970.
pub const EPOCH_2000: u64 = 946_684_800;
const NS: u64 = 1_000_000_000;

/// Why the process stopped inside a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// exit / exit_group with this status (low 8 bits).
    Exit(i32),
    /// Killed by a signal it sent itself (default action: terminate).
    Signal(u32),
    /// Guest physical memory ran out.
    Oom,
}

/// A failed system call: an errno for the guest, or the end of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysErr {
    Errno(i64),
    Stop(Stop),
}

impl From<MemFault> for SysErr {
    fn from(m: MemFault) -> Self {
        match m {
            MemFault::Fault => SysErr::Errno(EFAULT),
            MemFault::Oom => SysErr::Stop(Stop::Oom),
        }
    }
}

/// Result of a system call handler: the value for RAX, or an error.
pub type SysResult = Result<u64, SysErr>;

/// `Err(errno)` shorthand.
pub fn err(e: i64) -> SysResult {
    Err(SysErr::Errno(e))
}

/// System-call numbers served here.
pub mod nr {
    pub const READ: u64 = 0;
    pub const WRITE: u64 = 1;
    pub const OPEN: u64 = 2;
    pub const CLOSE: u64 = 3;
    pub const STAT: u64 = 4;
    pub const FSTAT: u64 = 5;
    pub const LSTAT: u64 = 6;
    pub const LSEEK: u64 = 8;
    pub const MMAP: u64 = 9;
    pub const MPROTECT: u64 = 10;
    pub const MUNMAP: u64 = 11;
    pub const BRK: u64 = 12;
    pub const RT_SIGACTION: u64 = 13;
    pub const RT_SIGPROCMASK: u64 = 14;
    pub const IOCTL: u64 = 16;
    pub const READV: u64 = 19;
    pub const WRITEV: u64 = 20;
    pub const ACCESS: u64 = 21;
    pub const SCHED_YIELD: u64 = 24;
    pub const MADVISE: u64 = 28;
    pub const NANOSLEEP: u64 = 35;
    pub const GETPID: u64 = 39;
    pub const EXIT: u64 = 60;
    pub const KILL: u64 = 62;
    pub const UNAME: u64 = 63;
    pub const GETCWD: u64 = 79;
    pub const READLINK: u64 = 89;
    pub const GETTIMEOFDAY: u64 = 96;
    pub const GETRLIMIT: u64 = 97;
    pub const GETUID: u64 = 102;
    pub const GETGID: u64 = 104;
    pub const GETEUID: u64 = 107;
    pub const GETEGID: u64 = 108;
    pub const GETPPID: u64 = 110;
    pub const SIGALTSTACK: u64 = 131;
    pub const ARCH_PRCTL: u64 = 158;
    pub const SETRLIMIT: u64 = 160;
    pub const GETTID: u64 = 186;
    pub const TKILL: u64 = 200;
    pub const TIME: u64 = 201;
    pub const FUTEX: u64 = 202;
    pub const SET_TID_ADDRESS: u64 = 218;
    pub const CLOCK_GETTIME: u64 = 228;
    pub const CLOCK_GETRES: u64 = 229;
    pub const CLOCK_NANOSLEEP: u64 = 230;
    pub const EXIT_GROUP: u64 = 231;
    pub const TGKILL: u64 = 234;
    pub const OPENAT: u64 = 257;
    pub const NEWFSTATAT: u64 = 262;
    pub const READLINKAT: u64 = 267;
    pub const FACCESSAT: u64 = 269;
    pub const SET_ROBUST_LIST: u64 = 273;
    pub const PRLIMIT64: u64 = 302;
    pub const GETRANDOM: u64 = 318;
    pub const RSEQ: u64 = 334;
    pub const FACCESSAT2: u64 = 439;
}

/// Number of arguments shown in traces (6 for calls not served here).
fn nargs(n: u64) -> usize {
    use nr::*;
    match n {
        GETPID | GETTID | GETPPID | GETUID | GETEUID | GETGID | GETEGID | SCHED_YIELD => 0,
        EXIT | EXIT_GROUP | CLOSE | BRK | UNAME | SET_TID_ADDRESS | TIME => 1,
        FSTAT | STAT | LSTAT | ACCESS | MUNMAP | ARCH_PRCTL | GETCWD | NANOSLEEP | GETTIMEOFDAY
        | GETRLIMIT | SETRLIMIT | CLOCK_GETTIME | CLOCK_GETRES | KILL | TKILL | SIGALTSTACK
        | SET_ROBUST_LIST => 2,
        READ | WRITE | READV | WRITEV | LSEEK | MPROTECT | IOCTL | MADVISE | OPEN | READLINK
        | GETRANDOM | TGKILL | FACCESSAT => 3,
        RT_SIGACTION | RT_SIGPROCMASK | OPENAT | NEWFSTATAT | READLINKAT | PRLIMIT64
        | CLOCK_NANOSLEEP | FACCESSAT2 | RSEQ => 4,
        _ => 6,
    }
}

/// The kernel side of the harness: the little state Linux would keep for the process.
pub struct Kernel {
    pub trace: bool,
    /// The "getrandom" seed stream.
    rng: ChaCha20Rng,
    /// Virtual nanoseconds slept (added to retired-instruction time).
    pub slept_ns: u64,
}

impl Kernel {
    pub fn new(trace: bool, getrandom: ChaCha20Rng) -> Self {
        Kernel {
            trace,
            rng: getrandom,
            slept_ns: 0,
        }
    }

    /// Serve the system call the guest just executed (RIP is after SYSCALL). Sets RAX, and
    /// RCX/R11 as the SYSCALL instruction and Linux's return path leave them.
    pub fn syscall(&mut self, g: &mut Guest) -> Result<(), Stop> {
        let st = &g.cpu.state;
        let n = st.gpr[reg::RAX];
        let a = [
            st.gpr[reg::RDI],
            st.gpr[reg::RSI],
            st.gpr[reg::RDX],
            st.gpr[reg::R10],
            st.gpr[reg::R8],
            st.gpr[reg::R9],
        ];
        let r = self.dispatch(g, n, a);
        // The memory calls changed page tables: their stale translations go, here for all.
        super::sys_mm::drop_stale_translations(g);
        if self.trace {
            self.trace_line(n, &a, &r);
        }
        let st = &mut g.cpu.state;
        st.gpr[reg::RCX] = st.rip;
        st.gpr[reg::R11] = st.rflags;
        match r {
            Ok(v) => st.gpr[reg::RAX] = v,
            Err(SysErr::Errno(e)) => st.gpr[reg::RAX] = (-e) as u64,
            Err(SysErr::Stop(s)) => return Err(s),
        }
        Ok(())
    }

    fn trace_line(&self, n: u64, a: &[u64; 6], r: &SysResult) {
        let name = sysnames::name(n)
            .map(str::to_string)
            .unwrap_or_else(|| format!("syscall_{n}"));
        let args: Vec<String> = a[..nargs(n)].iter().map(|v| format!("{v:#x}")).collect();
        let res = match r {
            Ok(v) => format!("= {v:#x}"),
            Err(SysErr::Errno(e)) => match errno::name(*e) {
                Some(s) => format!("= -{s}"),
                None => format!("= -{e}"),
            },
            Err(SysErr::Stop(s)) => format!("-> {s:?}"),
        };
        eprintln!("lockstep: syscall {name}({}) {res}", args.join(", "));
    }

    fn dispatch(&mut self, g: &mut Guest, n: u64, a: [u64; 6]) -> SysResult {
        use nr::*;
        match n {
            READ => self.sys_read(g, a[0], a[1], a[2]),
            WRITE => self.sys_write(g, a[0], a[1], a[2]),
            READV => self.sys_readv(g, a[0], a[1], a[2]),
            WRITEV => self.sys_writev(g, a[0], a[1], a[2]),
            CLOSE => sys_close(a[0]),
            LSEEK => sys_lseek(a[0]),
            IOCTL => sys_ioctl(a[0]),
            FSTAT => sys_fstat(g, a[0], a[1]),
            NEWFSTATAT => sys_newfstatat(g, a[0], a[1], a[2], a[3]),
            STAT | LSTAT => sys_path_enoent(g, a[0]),
            OPEN | ACCESS | READLINK => sys_path_enoent(g, a[0]),
            OPENAT | FACCESSAT | FACCESSAT2 | READLINKAT => sys_path_enoent(g, a[1]),
            GETCWD => sys_getcwd(g, a[0], a[1]),
            MMAP => sys_mmap(g, a),
            MUNMAP => sys_munmap(g, a[0], a[1]),
            MPROTECT => sys_mprotect(g, a[0], a[1], a[2]),
            BRK => Ok(g.mm.set_brk(&mut g.ram, a[0])),
            MADVISE => sys_madvise(g, a[0], a[1], a[2]),
            ARCH_PRCTL => sys_arch_prctl(g, a[0], a[1]),
            SET_TID_ADDRESS => Ok(GUEST_PID),
            SET_ROBUST_LIST => sys_set_robust_list(a[1]),
            RSEQ => err(ENOSYS),
            PRLIMIT64 => sys_prlimit64(g, a[0], a[1], a[2], a[3]),
            GETRLIMIT => sys_prlimit64(g, 0, a[0], 0, a[1]),
            SETRLIMIT => sys_prlimit64(g, 0, a[0], a[1], 0),
            GETRANDOM => self.sys_getrandom(g, a[0], a[1], a[2]),
            CLOCK_GETTIME => self.sys_clock_gettime(g, a[0], a[1]),
            CLOCK_GETRES => sys_clock_getres(g, a[0], a[1]),
            GETTIMEOFDAY => self.sys_gettimeofday(g, a[0], a[1]),
            TIME => self.sys_time(g, a[0]),
            NANOSLEEP => self.sys_nanosleep(g, a[0]),
            CLOCK_NANOSLEEP => self.sys_clock_nanosleep(g, a[0], a[1], a[2]),
            UNAME => sys_uname(g, a[0]),
            GETPID | GETTID => Ok(GUEST_PID),
            GETPPID => Ok(GUEST_PPID),
            GETUID | GETEUID | GETGID | GETEGID => Ok(0),
            RT_SIGACTION => sys_rt_sigaction(g, a[0], a[2], a[3]),
            RT_SIGPROCMASK => sys_rt_sigprocmask(g, a[0], a[2], a[3]),
            SIGALTSTACK => sys_sigaltstack(g, a[1]),
            SCHED_YIELD => Ok(0),
            FUTEX => self.sys_futex(g, a),
            KILL => sys_kill(a[0], a[1]),
            TKILL => sys_kill(a[0], a[1]),
            TGKILL => {
                if a[0] != GUEST_PID {
                    return err(ESRCH);
                }
                sys_kill(a[1], a[2])
            }
            EXIT | EXIT_GROUP => Err(SysErr::Stop(Stop::Exit((a[0] & 0xff) as i32))),
            _ => {
                if self.trace {
                    match sysnames::name(n) {
                        Some(s) => eprintln!("lockstep: syscall {s} not implemented -> ENOSYS"),
                        None => eprintln!("lockstep: syscall {n} not implemented -> ENOSYS"),
                    }
                }
                err(ENOSYS)
            }
        }
    }

    // ----- time -----

    /// Virtual nanoseconds since boot: retired instructions plus time slept.
    pub fn now_ns(&self, g: &Guest) -> u64 {
        g.cpu.retired.wrapping_add(self.slept_ns)
    }

    /// The value of clock `id` in nanoseconds, or EINVAL.
    fn clock_ns(&self, g: &Guest, id: u64) -> Result<u64, SysErr> {
        let now = self.now_ns(g);
        match id as i64 {
            // REALTIME, REALTIME_COARSE, REALTIME_ALARM, TAI
            0 | 5 | 8 | 11 => Ok(EPOCH_2000 * NS + now),
            // MONOTONIC, MONOTONIC_RAW, MONOTONIC_COARSE, BOOTTIME, BOOTTIME_ALARM
            1 | 4 | 6 | 7 | 9 => Ok(now),
            // PROCESS_CPUTIME_ID, THREAD_CPUTIME_ID: time spent running, not sleeping.
            2 | 3 => Ok(g.cpu.retired),
            _ => Err(SysErr::Errno(EINVAL)),
        }
    }

    fn sys_clock_gettime(&mut self, g: &mut Guest, id: u64, tp: u64) -> SysResult {
        let t = self.clock_ns(g, id)?;
        write_timespec(g, tp, t)?;
        Ok(0)
    }

    fn sys_gettimeofday(&mut self, g: &mut Guest, tv: u64, tz: u64) -> SysResult {
        let t = EPOCH_2000 * NS + self.now_ns(g);
        if tv != 0 {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&(t / NS).to_le_bytes());
            b[8..].copy_from_slice(&((t % NS) / 1000).to_le_bytes());
            g.write_mem(tv, &b)?;
        }
        if tz != 0 {
            g.write_mem(tz, &[0u8; 8])?; // UTC, no DST
        }
        Ok(0)
    }

    fn sys_time(&mut self, g: &mut Guest, tloc: u64) -> SysResult {
        let s = EPOCH_2000 + self.now_ns(g) / NS;
        if tloc != 0 {
            g.write_u64(tloc, s)?;
        }
        Ok(s)
    }

    fn sys_nanosleep(&mut self, g: &mut Guest, req: u64) -> SysResult {
        let d = read_timespec(g, req)?;
        self.slept_ns = self.slept_ns.wrapping_add(d);
        Ok(0)
    }

    fn sys_clock_nanosleep(&mut self, g: &mut Guest, id: u64, flags: u64, req: u64) -> SysResult {
        const TIMER_ABSTIME: u64 = 1;
        if matches!(id, 2 | 3) {
            return err(EINVAL); // sleeping on a CPU-time clock of oneself
        }
        let now = self.clock_ns(g, id)?;
        let d = read_timespec(g, req)?;
        let wait = if flags & TIMER_ABSTIME != 0 {
            d.saturating_sub(now)
        } else {
            d
        };
        self.slept_ns = self.slept_ns.wrapping_add(wait);
        Ok(0)
    }

    // ----- randomness -----

    fn sys_getrandom(&mut self, g: &mut Guest, buf: u64, len: u64, flags: u64) -> SysResult {
        const GRND_ALL: u64 = 0x7; // NONBLOCK | RANDOM | INSECURE
        if flags & !GRND_ALL != 0 || flags & 6 == 6 {
            return err(EINVAL);
        }
        let len = len.min(0x01ff_ffff); // Linux returns at most 32 MiB - 1 per call
        g.probe(buf, len, lockstep_interp::mmu::Access::Write)?;
        let mut done = 0u64;
        let mut chunk = vec![0u8; 4096];
        while done < len {
            let n = (len - done).min(4096) as usize;
            self.rng.fill_bytes(&mut chunk[..n]);
            g.write_mem(buf + done, &chunk[..n])?;
            done += n as u64;
        }
        Ok(len)
    }

    // ----- futex (single thread: nobody else can wake a waiter) -----

    fn sys_futex(&mut self, g: &mut Guest, a: [u64; 6]) -> SysResult {
        const WAIT: u64 = 0;
        const WAKE: u64 = 1;
        const REQUEUE: u64 = 3;
        const CMP_REQUEUE: u64 = 4;
        const WAKE_OP: u64 = 5;
        const WAIT_BITSET: u64 = 9;
        const WAKE_BITSET: u64 = 10;
        let (uaddr, op, val, timeout) = (a[0], a[1], a[2], a[3]);
        match op & 0x7f {
            WAIT | WAIT_BITSET => {
                if uaddr & 3 != 0 {
                    return err(EINVAL);
                }
                let cur = g.read_u32(uaddr)?;
                if cur != val as u32 || timeout == 0 {
                    // A waiter without timeout would sleep forever in a single-threaded
                    // process; we report EAGAIN instead (documented deviation).
                    return err(EAGAIN);
                }
                let t = read_timespec(g, timeout)?;
                let wait = if op & 0x7f == WAIT_BITSET {
                    let clock = if op & 256 != 0 { 0 } else { 1 };
                    t.saturating_sub(self.clock_ns(g, clock)?)
                } else {
                    t
                };
                self.slept_ns = self.slept_ns.wrapping_add(wait);
                err(ETIMEDOUT)
            }
            WAKE | WAKE_BITSET | REQUEUE | CMP_REQUEUE | WAKE_OP => Ok(0),
            _ => err(ENOSYS),
        }
    }
}

/// Write a `struct timespec` for `ns` nanoseconds.
pub fn write_timespec(g: &mut Guest, va: u64, ns: u64) -> Result<(), SysErr> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(ns / NS).to_le_bytes());
    b[8..].copy_from_slice(&(ns % NS).to_le_bytes());
    g.write_mem(va, &b)?;
    Ok(())
}

/// Read a `struct timespec` as nanoseconds; EINVAL when out of range.
pub fn read_timespec(g: &mut Guest, va: u64) -> Result<u64, SysErr> {
    let sec = g.read_u64(va)? as i64;
    let nsec = g.read_u64(va + 8)? as i64;
    if sec < 0 || !(0..NS as i64).contains(&nsec) {
        return Err(SysErr::Errno(EINVAL));
    }
    Ok((sec as u64).saturating_mul(NS).saturating_add(nsec as u64))
}

fn sys_clock_getres(g: &mut Guest, id: u64, res: u64) -> SysResult {
    if !matches!(id, 0..=9 | 11) {
        return err(EINVAL);
    }
    if res != 0 {
        write_timespec(g, res, 1)?;
    }
    Ok(0)
}

fn sys_uname(g: &mut Guest, buf: u64) -> SysResult {
    let fields: [&str; 6] = [
        "Linux",
        "lockstep",
        "6.1.0-lockstep",
        "#1 SMP PREEMPT_DYNAMIC lockstep",
        "x86_64",
        "(none)",
    ];
    let mut b = [0u8; 6 * 65];
    for (i, f) in fields.iter().enumerate() {
        b[i * 65..i * 65 + f.len()].copy_from_slice(f.as_bytes());
    }
    g.write_mem(buf, &b)?;
    Ok(0)
}

fn sys_arch_prctl(g: &mut Guest, code: u64, addr: u64) -> SysResult {
    const SET_GS: u64 = 0x1001;
    const SET_FS: u64 = 0x1002;
    const GET_FS: u64 = 0x1003;
    const GET_GS: u64 = 0x1004;
    match code {
        SET_FS | SET_GS => {
            if addr >= TASK_SIZE {
                return err(EPERM);
            }
            let s = if code == SET_FS { sreg::FS } else { sreg::GS };
            g.cpu.state.seg[s].base = addr;
            Ok(0)
        }
        GET_FS | GET_GS => {
            let s = if code == GET_FS { sreg::FS } else { sreg::GS };
            let v = g.cpu.state.seg[s].base;
            g.write_u64(addr, v)?;
            Ok(0)
        }
        _ => err(EINVAL),
    }
}

fn sys_set_robust_list(len: u64) -> SysResult {
    if len != 24 {
        return err(EINVAL);
    }
    Ok(0)
}

const RLIM_INFINITY: u64 = u64::MAX;

/// The fixed resource limits (soft, hard) reported to the guest.
pub fn rlimit(resource: u64) -> Option<(u64, u64)> {
    Some(match resource {
        3 => (STACK_SIZE, RLIM_INFINITY), // RLIMIT_STACK
        4 => (0, RLIM_INFINITY),          // RLIMIT_CORE
        6 => (4096, 4096),                // RLIMIT_NPROC
        7 => (1024, 1024 * 1024),         // RLIMIT_NOFILE
        8 => (8 << 20, 8 << 20),          // RLIMIT_MEMLOCK
        11 => (4096, 4096),               // RLIMIT_SIGPENDING
        12 => (819_200, 819_200),         // RLIMIT_MSGQUEUE
        13 | 14 => (0, 0),                // RLIMIT_NICE, RLIMIT_RTPRIO
        0..=15 => (RLIM_INFINITY, RLIM_INFINITY),
        _ => return None,
    })
}

fn sys_prlimit64(g: &mut Guest, pid: u64, resource: u64, new: u64, old: u64) -> SysResult {
    if pid != 0 && pid != GUEST_PID {
        return err(ESRCH);
    }
    let Some((cur, max)) = rlimit(resource) else {
        return err(EINVAL);
    };
    if new != 0 {
        // Accepted and forgotten: the limits are fixed.
        let c = g.read_u64(new)?;
        let m = g.read_u64(new + 8)?;
        if c > m {
            return err(EINVAL);
        }
    }
    if old != 0 {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&cur.to_le_bytes());
        b[8..].copy_from_slice(&max.to_le_bytes());
        g.write_mem(old, &b)?;
    }
    Ok(0)
}

// ----- signals: nothing is kept; a signal sent to oneself takes its default action -----

fn sys_rt_sigaction(g: &mut Guest, sig: u64, oldact: u64, sigsetsize: u64) -> SysResult {
    if sigsetsize != 8 || !(1..=64).contains(&sig) {
        return err(EINVAL);
    }
    if oldact != 0 {
        g.write_mem(oldact, &[0u8; 32])?; // SIG_DFL, no flags, no restorer, empty mask
    }
    Ok(0)
}

fn sys_rt_sigprocmask(g: &mut Guest, how: u64, oldset: u64, sigsetsize: u64) -> SysResult {
    if sigsetsize != 8 || how > 2 {
        return err(EINVAL);
    }
    if oldset != 0 {
        g.write_u64(oldset, 0)?;
    }
    Ok(0)
}

fn sys_sigaltstack(g: &mut Guest, old: u64) -> SysResult {
    if old != 0 {
        let mut b = [0u8; 24];
        b[8..12].copy_from_slice(&2u32.to_le_bytes()); // SS_DISABLE
        g.write_mem(old, &b)?;
    }
    Ok(0)
}

/// kill/tkill/tgkill: only the process itself exists.
fn sys_kill(pid: u64, sig: u64) -> SysResult {
    let pid = pid as i64;
    // kill(-1) reaches every process but the caller: none here.
    if pid != GUEST_PID as i64 && pid != 0 && pid != -(GUEST_PID as i64) {
        return err(ESRCH);
    }
    match sig {
        0 => Ok(0),
        // Ignored by default (SIGCHLD, SIGCONT, SIGURG, SIGWINCH) or job control we do not
        // model (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU).
        17..=23 | 28 => Ok(0),
        1..=64 => Err(SysErr::Stop(Stop::Signal(sig as u32))),
        _ => err(EINVAL),
    }
}

/// Short name of a signal number.
pub fn signal_name(sig: u32) -> &'static str {
    const NAMES: [&str; 32] = [
        "?",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    NAMES.get(sig as usize).copied().unwrap_or("SIGRT")
}

// The file-descriptor and memory calls are in sibling files.
use super::sys_io::{
    sys_close, sys_fstat, sys_getcwd, sys_ioctl, sys_lseek, sys_newfstatat, sys_path_enoent,
};
use super::sys_mm::{sys_madvise, sys_mmap, sys_mprotect, sys_munmap};
