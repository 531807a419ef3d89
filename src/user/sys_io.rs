//! File-descriptor system calls. The guest has exactly three descriptors: 0 reads the host's
//! stdin, 1 and 2 write to the host's stdout and stderr. They look like character devices.
//! There is no file system: every path lookup fails with ENOENT.

use super::guest::Guest;
use super::syscall::errno::*;
use super::syscall::{err, Kernel, SysErr, SysResult, EPOCH_2000};
use lockstep_interp::mmu::Access;
use std::io::{IsTerminal, Read, Write};

/// Most bytes one read or write moves (Linux's MAX_RW_COUNT).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// Most bytes one read from stdin returns (a deterministic short-read size).
const MAX_READ: u64 = 1 << 20;
/// Piece size for copying guest memory to the host.
const CHUNK: u64 = 1 << 16;
/// Most iovecs in one readv/writev (IOV_MAX).
const IOV_MAX: u64 = 1024;
const AT_FDCWD: i64 = -100;
const AT_EMPTY_PATH: u64 = 0x1000;
const PATH_MAX: usize = 4096;

fn is_stdio(fd: u64) -> bool {
    fd <= 2
}

fn io_errno(e: &std::io::Error) -> i64 {
    e.raw_os_error().map(|c| c as i64).unwrap_or(EPIPE)
}

/// Send bytes to the host's stdout or stderr at once, so that the interleaving of the two
/// streams is the guest's.
///
/// Stdout is written past Rust's line buffer (flushed first, under its lock), so that one
/// guest write is one host write when the host takes it whole: through the `LineWriter` a
/// guest's 4 KiB write of text became two (up to its last newline, then the rest) — libm's
/// run made 928 writes for the 469 it makes natively.
fn host_write(fd: u64, data: &[u8]) -> Result<(), i64> {
    let r = if fd == 1 {
        let mut o = std::io::stdout().lock();
        o.flush().and_then(|_| {
            use std::os::fd::{AsRawFd, FromRawFd};
            // SAFETY: the descriptor is the process's stdout, open for its whole life (Rust's
            // `Stdout` holds it the same way); `ManuallyDrop` keeps this `File` from closing
            // it. The stdout lock is held, so nothing else writes in between.
            let mut f =
                std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(o.as_raw_fd()) });
            f.write_all(data)
        })
    } else {
        let mut e = std::io::stderr().lock();
        e.write_all(data).and_then(|_| e.flush())
    };
    r.map_err(|e| io_errno(&e))
}

/// Read up to `n` bytes from the host's stdin. Deterministic policy: unless stdin is a terminal,
/// keep reading until `n` bytes or end of file, so that the guest sees the same short reads
/// whatever the pipe timing.
fn host_read(n: usize) -> Result<Vec<u8>, i64> {
    let mut buf = vec![0u8; n];
    let mut got = 0usize;
    let stdin = std::io::stdin();
    let tty = stdin.is_terminal();
    let mut lock = stdin.lock();
    while got < n {
        match lock.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => {
                got += k;
                if tty {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if got == 0 {
                    return Err(io_errno(&e));
                }
                break;
            }
        }
    }
    buf.truncate(got);
    Ok(buf)
}

impl Kernel {
    /// Copy `len` guest bytes at `buf` to host fd 1 or 2. Returns bytes written; a bad pointer
    /// after some bytes were written ends the write early, like Linux.
    fn write_out(&mut self, g: &mut Guest, fd: u64, buf: u64, len: u64) -> SysResult {
        let len = len.min(MAX_RW_COUNT);
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(CHUNK);
            let data = match g.read_mem(buf.wrapping_add(done), n as usize) {
                Ok(d) => d,
                Err(e) if done == 0 => return Err(e.into()),
                Err(_) => break,
            };
            if let Err(e) = host_write(fd, &data) {
                if done == 0 {
                    return err(e);
                }
                break;
            }
            done += n;
        }
        Ok(done)
    }

    /// Read from stdin into guest memory.
    fn read_in(&mut self, g: &mut Guest, buf: u64, len: u64) -> SysResult {
        let len = len.min(MAX_READ);
        g.probe(buf, len, Access::Write)?;
        let data = host_read(len as usize).map_err(SysErr::Errno)?;
        g.write_mem(buf, &data)?;
        Ok(data.len() as u64)
    }

    pub(super) fn sys_write(&mut self, g: &mut Guest, fd: u64, buf: u64, len: u64) -> SysResult {
        match fd {
            1 | 2 => self.write_out(g, fd, buf, len),
            0 => err(EBADF), // stdin is open for reading only
            _ => err(EBADF),
        }
    }

    pub(super) fn sys_read(&mut self, g: &mut Guest, fd: u64, buf: u64, len: u64) -> SysResult {
        match fd {
            0 => self.read_in(g, buf, len),
            _ => err(EBADF),
        }
    }

    /// Read the iovec array: (base, len) pairs.
    fn iovecs(g: &mut Guest, iov: u64, cnt: u64) -> Result<Vec<(u64, u64)>, SysErr> {
        if cnt > IOV_MAX {
            return Err(SysErr::Errno(EINVAL));
        }
        let raw = g.read_mem(iov, (cnt * 16) as usize)?;
        let mut v = Vec::with_capacity(cnt as usize);
        let mut total = 0u64;
        for c in raw.chunks_exact(16) {
            let base = u64::from_le_bytes(c[..8].try_into().unwrap_or([0; 8]));
            let len = u64::from_le_bytes(c[8..].try_into().unwrap_or([0; 8]));
            if len as i64 <= -1 {
                return Err(SysErr::Errno(EINVAL));
            }
            total = total.saturating_add(len);
            v.push((base, len));
        }
        if total > i64::MAX as u64 {
            return Err(SysErr::Errno(EINVAL));
        }
        Ok(v)
    }

    pub(super) fn sys_writev(&mut self, g: &mut Guest, fd: u64, iov: u64, cnt: u64) -> SysResult {
        if fd != 1 && fd != 2 {
            return err(EBADF);
        }
        let v = Self::iovecs(g, iov, cnt)?;
        let mut done = 0u64;
        for (base, len) in v {
            let len = len.min(MAX_RW_COUNT - done);
            match self.write_out(g, fd, base, len) {
                Ok(n) => {
                    done += n;
                    if n < len {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    pub(super) fn sys_readv(&mut self, g: &mut Guest, fd: u64, iov: u64, cnt: u64) -> SysResult {
        if fd != 0 {
            return err(EBADF);
        }
        let v = Self::iovecs(g, iov, cnt)?;
        let mut done = 0u64;
        for (base, len) in v {
            if len == 0 {
                continue;
            }
            match self.read_in(g, base, len) {
                Ok(n) => {
                    done += n;
                    if n < len {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
            if done >= MAX_READ {
                break;
            }
        }
        Ok(done)
    }
}

pub(super) fn sys_close(fd: u64) -> SysResult {
    if is_stdio(fd) {
        Ok(0)
    } else {
        err(EBADF)
    }
}

pub(super) fn sys_lseek(fd: u64) -> SysResult {
    if is_stdio(fd) {
        err(ESPIPE)
    } else {
        err(EBADF)
    }
}

pub(super) fn sys_ioctl(fd: u64) -> SysResult {
    if is_stdio(fd) {
        err(ENOTTY) // not a terminal: no TCGETS, no TIOCGWINSZ
    } else {
        err(EBADF)
    }
}

/// `struct stat` (x86-64 layout, 144 bytes) of stdio descriptor `fd`: a pipe, as a harness
/// that captures a program's output gives it — mode 0600, owner root, `st_blksize` one page,
/// all times at the virtual epoch. Not a terminal, in agreement with `ioctl` (ENOTTY): until
/// session 26 the descriptors were character devices with a pseudo-terminal's numbers (136:fd),
/// which glibc takes for a terminal without asking (`DEV_TTY_P`), so glibc programs wrote their
/// stdout line by line while musl programs (which ask with TIOCGWINSZ) and the same programs
/// run natively under a harness buffered it.
pub fn stdio_stat(fd: u64) -> [u8; 144] {
    let mut b = [0u8; 144];
    let mut put =
        |off: usize, v: u64, n: usize| b[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
    put(0, 0x0c, 8); // st_dev: the pipe file system's anonymous device
    put(8, 3 + fd, 8); // st_ino
    put(16, 1, 8); // st_nlink
    put(24, 0o010_600, 4); // st_mode: S_IFIFO | 0600
    put(28, 0, 4); // st_uid
    put(32, 0, 4); // st_gid
    put(40, 0, 8); // st_rdev: none
    put(48, 0, 8); // st_size
    put(56, 4096, 8); // st_blksize
    put(64, 0, 8); // st_blocks
    for off in [72, 88, 104] {
        put(off, EPOCH_2000, 8); // st_atime, st_mtime, st_ctime (nsec fields stay 0)
    }
    b
}

pub(super) fn sys_fstat(g: &mut Guest, fd: u64, buf: u64) -> SysResult {
    if !is_stdio(fd) {
        return err(EBADF);
    }
    g.write_mem(buf, &stdio_stat(fd))?;
    Ok(0)
}

pub(super) fn sys_newfstatat(
    g: &mut Guest,
    dirfd: u64,
    path: u64,
    buf: u64,
    flags: u64,
) -> SysResult {
    const VALID: u64 = 0x100 | 0x800 | AT_EMPTY_PATH; // SYMLINK_NOFOLLOW, NO_AUTOMOUNT
    if flags & !VALID != 0 {
        return err(EINVAL);
    }
    let p = read_path(g, path)?;
    if p.is_empty() && flags & AT_EMPTY_PATH != 0 && dirfd as i64 != AT_FDCWD {
        return sys_fstat(g, dirfd, buf);
    }
    err(ENOENT)
}

/// Calls that look a path up: check the pointer, then ENOENT (there is no file system).
pub(super) fn sys_path_enoent(g: &mut Guest, path: u64) -> SysResult {
    read_path(g, path)?;
    err(ENOENT)
}

fn read_path(g: &mut Guest, path: u64) -> Result<Vec<u8>, SysErr> {
    g.read_cstr(path, PATH_MAX - 1)?
        .ok_or(SysErr::Errno(ENAMETOOLONG))
}

pub(super) fn sys_getcwd(g: &mut Guest, buf: u64, size: u64) -> SysResult {
    if size < 2 {
        return err(ERANGE);
    }
    g.write_mem(buf, b"/\0")?;
    Ok(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_stdio_is_a_pipe() {
        let b = stdio_stat(1);
        let mode = u32::from_le_bytes(b[24..28].try_into().unwrap());
        assert_eq!(mode & 0o170_000, 0o010_000);
        assert_eq!(mode & 0o777, 0o600);
        // No device numbers: glibc's DEV_TTY_P must not take it for a pseudo-terminal.
        assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 0);
        assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 4096);
        assert_eq!(
            u64::from_le_bytes(b[88..96].try_into().unwrap()),
            EPOCH_2000
        );
        assert_ne!(stdio_stat(0), stdio_stat(2));
    }
}
