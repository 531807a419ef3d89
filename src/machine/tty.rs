//! Host side of `--interactive`: stdin polled without blocking, the terminal in raw mode while the machine runs (restored on every exit path, panics included), and the Ctrl-A escape (Ctrl-A x quits, Ctrl-A Ctrl-A sends Ctrl-A).
//!
//! Nothing here is on a guest-visible path by itself: the machine decides at which virtual
//! time the polled bytes arrive, and `--record-input` writes them down for a replay.

use std::sync::{Mutex, Once};

/// The terminal settings to put back (set while raw mode is on).
static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);
static HOOK: Once = Once::new();

const CTRL_A: u8 = 0x01;

/// Put the terminal back as it was, if raw mode is on. Safe to call more than once.
pub fn restore() {
    let saved = match SAVED.lock() {
        Ok(mut g) => g.take(),
        Err(p) => p.into_inner().take(),
    };
    if let Some(t) = saved {
        // SAFETY: fd 0 and a termios previously filled by tcgetattr; no memory is shared.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &t);
        }
    }
}

/// What one poll of stdin gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Polled {
    /// Bytes for the guest.
    pub bytes: Vec<u8>,
    /// The user typed the quit escape (Ctrl-A x).
    pub quit: bool,
}

/// Live stdin for the guest console.
pub struct Live {
    /// Stdin is a terminal in raw mode (then the Ctrl-A escape applies).
    pub raw: bool,
    eof: bool,
    after_ctrl_a: bool,
}

impl Live {
    /// Start reading stdin; a terminal goes into raw mode (output post-processing kept).
    pub fn start() -> Live {
        // SAFETY: isatty only inspects fd 0.
        let is_tty = unsafe { libc::isatty(0) } == 1;
        let mut raw = false;
        if is_tty {
            // SAFETY: termios is plain data; tcgetattr fills it for fd 0 or fails.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            // SAFETY: as above; a valid pointer to a local termios.
            if unsafe { libc::tcgetattr(0, &mut t) } == 0 {
                let saved = t;
                // SAFETY: cfmakeraw edits the local copy only.
                unsafe { libc::cfmakeraw(&mut t) };
                t.c_oflag |= libc::OPOST;
                if let Ok(mut g) = SAVED.lock() {
                    *g = Some(saved);
                }
                HOOK.call_once(|| {
                    let prev = std::panic::take_hook();
                    std::panic::set_hook(Box::new(move |info| {
                        restore();
                        prev(info);
                    }));
                });
                // SAFETY: fd 0 and a valid termios derived from the current settings.
                raw = unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } == 0;
            }
        }
        Live {
            raw,
            eof: false,
            after_ctrl_a: false,
        }
    }

    /// Read what stdin has now, waiting at most `wait_ms` for the first byte.
    pub fn poll(&mut self, wait_ms: i32) -> Polled {
        let mut out = Polled::default();
        if self.eof {
            return out;
        }
        let mut pfd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
        if r <= 0 || pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
            return out;
        }
        let mut buf = [0u8; 4096];
        // SAFETY: reading into a local buffer of the given length; poll said fd 0 is ready,
        // so this does not block.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        let n = match usize::try_from(n) {
            Ok(0) => {
                self.eof = true;
                return out;
            }
            Ok(n) => n,
            Err(_) => {
                let k = std::io::Error::last_os_error().kind();
                if !matches!(
                    k,
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) {
                    self.eof = true;
                }
                return out;
            }
        };
        for &b in &buf[..n.min(buf.len())] {
            if self.raw {
                self.escape(b, &mut out);
            } else {
                out.bytes.push(b);
            }
        }
        out
    }

    /// QEMU-style escape: Ctrl-A x quits, Ctrl-A Ctrl-A sends one Ctrl-A, Ctrl-A + anything
    /// else sends both bytes.
    fn escape(&mut self, b: u8, out: &mut Polled) {
        if self.after_ctrl_a {
            self.after_ctrl_a = false;
            match b {
                b'x' | b'X' => out.quit = true,
                CTRL_A => out.bytes.push(CTRL_A),
                _ => out.bytes.extend([CTRL_A, b]),
            }
        } else if b == CTRL_A {
            self.after_ctrl_a = true;
        } else {
            out.bytes.push(b);
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_a_escape() {
        let mut l = Live {
            raw: true,
            eof: false,
            after_ctrl_a: false,
        };
        let mut out = Polled::default();
        for &b in b"a\x01\x01b\x01cd\x01x" {
            l.escape(b, &mut out);
        }
        assert_eq!(out.bytes, b"a\x01b\x01cd");
        assert!(out.quit);
    }
}
