//! Reproducible busybox initramfs images: a newc cpio archive with sorted entries, fixed timestamps and owners, whose `/init` runs a given script and powers the machine off.
//!
//! `lockstep mkinitramfs --script run.sh -o initrd.cpio` packs the static busybox from Debian's
//! `busybox-static` (`/bin/busybox`), its applet links, the script as `/run.sh`, any extra files
//! (`--add host:guest`), and this `/init`:
//! ```sh
//! #!/bin/busybox sh
//! mount proc, sysfs, devtmpfs; echo the marker; sh /run.sh; echo the exit status; poweroff -f
//! ```
//! The same inputs give the same bytes on every host: entries are sorted by path, mtime is 0,
//! uid/gid 0, inode numbers assigned in order.

use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;
use thiserror::Error;

/// The line `/init` prints before it runs the script; boot tests wait for it.
pub const USERSPACE_MARKER: &str = "lockstep: userspace reached";

#[derive(Debug, Error)]
pub enum InitramfsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bad --add {0:?}: expected HOST_PATH:GUEST_PATH with an absolute guest path")]
    BadAdd(String),
}

#[derive(Args, Debug)]
pub struct MkInitramfsArgs {
    /// Shell script that /init runs (as /run.sh) once userspace is up.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// A command line to run instead of a script (written to /run.sh).
    #[arg(long, conflicts_with = "script")]
    pub command: Option<String>,
    /// Extra files: HOST_PATH:GUEST_PATH (repeatable).
    #[arg(long = "add")]
    pub add: Vec<String>,
    /// The static busybox binary to pack.
    #[arg(long, default_value = "/bin/busybox")]
    pub busybox: PathBuf,
    /// Output file (uncompressed newc cpio).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Applets linked into /bin (those the /init script and typical test scripts use).
const APPLETS: &[&str] = &[
    "sh",
    "echo",
    "cat",
    "ls",
    "mount",
    "umount",
    "poweroff",
    "reboot",
    "sleep",
    "seq",
    "uname",
    "dmesg",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "grep",
    "sed",
    "awk",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "date",
    "true",
    "false",
    "test",
    "[",
    "printf",
    "md5sum",
    "sha256sum",
    "find",
    "ps",
    "kill",
    "sync",
    "tr",
    "cut",
    "env",
    "expr",
    "hostname",
    "id",
    "nproc",
    "free",
    "df",
    "dd",
    "hexdump",
    "od",
    "xargs",
    "yes",
    "time",
    "usleep",
    "touch",
    "ln",
    "chmod",
    "tee",
];

fn init_script() -> String {
    format!(
        "#!/bin/sh\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev 2>/dev/null\n\
         echo '{USERSPACE_MARKER}'\n\
         sh /run.sh\n\
         echo \"lockstep: /run.sh exited with status $?\"\n\
         sync\n\
         poweroff -f\n"
    )
}

/// One archive entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { mode: u32, data: Vec<u8> },
    Symlink(String),
}

/// An in-memory tree written out as newc cpio in sorted order.
#[derive(Default, Debug)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    /// Add an entry and all its parent directories. `path` is relative ("bin/sh").
    pub fn add(&mut self, path: &str, e: Entry) {
        let path = path.trim_start_matches('/');
        let mut p = String::new();
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            if !p.is_empty() {
                p.push('/');
            }
            p.push_str(part);
            if i + 1 < parts.len() {
                self.entries.entry(p.clone()).or_insert(Entry::Dir);
            }
        }
        self.entries.insert(p, e);
    }

    /// The newc archive bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, (name, e)) in self.entries.iter().enumerate() {
            let (mode, data): (u32, &[u8]) = match e {
                Entry::Dir => (0o040755, &[]),
                Entry::File { mode, data } => (0o100000 | (mode & 0o7777), data),
                Entry::Symlink(t) => (0o120777, t.as_bytes()),
            };
            let nlink = if matches!(e, Entry::Dir) { 2 } else { 1 };
            write_header(&mut out, ino as u32 + 1, mode, nlink, data.len(), name);
            out.extend_from_slice(data);
            pad4(&mut out);
        }
        write_header(&mut out, 0, 0, 1, 0, "TRAILER!!!");
        // Pad to 512 bytes like cpio(1) does.
        while !out.len().is_multiple_of(512) {
            out.push(0);
        }
        out
    }
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn write_header(out: &mut Vec<u8>, ino: u32, mode: u32, nlink: u32, size: usize, name: &str) {
    let fields = [
        ino,
        mode,
        0,     // uid
        0,     // gid
        nlink, // nlink
        0,     // mtime
        size as u32,
        0, // devmajor
        0, // devminor
        0, // rdevmajor
        0, // rdevminor
        name.len() as u32 + 1,
        0, // check
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
}

fn read(p: &PathBuf) -> Result<Vec<u8>, InitramfsError> {
    std::fs::read(p).map_err(|source| InitramfsError::Read {
        path: p.clone(),
        source,
    })
}

/// Build the archive for a script (bytes of /run.sh), busybox and extra files.
pub fn build(busybox: &[u8], run_sh: &[u8], extra: &[(String, Vec<u8>)]) -> Archive {
    let mut a = Archive::default();
    for d in ["dev", "proc", "sys", "tmp", "root", "etc"] {
        a.add(d, Entry::Dir);
    }
    a.add(
        "bin/busybox",
        Entry::File {
            mode: 0o755,
            data: busybox.to_vec(),
        },
    );
    for app in APPLETS {
        a.add(&format!("bin/{app}"), Entry::Symlink("busybox".into()));
    }
    a.add("sbin", Entry::Symlink("bin".into()));
    a.add(
        "init",
        Entry::File {
            mode: 0o755,
            data: init_script().into_bytes(),
        },
    );
    a.add(
        "run.sh",
        Entry::File {
            mode: 0o755,
            data: run_sh.to_vec(),
        },
    );
    for (guest, data) in extra {
        a.add(
            guest,
            Entry::File {
                mode: 0o755,
                data: data.clone(),
            },
        );
    }
    a
}

/// `lockstep mkinitramfs`.
pub fn main(args: MkInitramfsArgs) -> i32 {
    match run(&args) {
        Ok(n) => {
            eprintln!("lockstep: wrote {} ({n} bytes)", args.output.display());
            0
        }
        Err(e) => {
            eprintln!("lockstep: {e}");
            2
        }
    }
}

fn run(args: &MkInitramfsArgs) -> Result<usize, InitramfsError> {
    let busybox = read(&args.busybox)?;
    let run_sh = match (&args.script, &args.command) {
        (Some(p), _) => read(p)?,
        (None, Some(c)) => format!("{c}\n").into_bytes(),
        (None, None) => b"echo hello from lockstep; uname -a\n".to_vec(),
    };
    let mut extra = Vec::new();
    for spec in &args.add {
        let (host, guest) = spec
            .split_once(':')
            .filter(|(h, g)| !h.is_empty() && g.starts_with('/'))
            .ok_or_else(|| InitramfsError::BadAdd(spec.clone()))?;
        extra.push((guest.to_string(), read(&PathBuf::from(host))?));
    }
    let bytes = build(&busybox, &run_sh, &extra).to_bytes();
    std::fs::write(&args.output, &bytes).map_err(|source| InitramfsError::Write {
        path: args.output.clone(),
        source,
    })?;
    Ok(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_is_sorted_reproducible_newc() {
        let a = build(
            b"BUSYBOX",
            b"echo hi\n",
            &[("/opt/x".into(), b"X".to_vec())],
        );
        let b1 = a.to_bytes();
        let b2 = build(
            b"BUSYBOX",
            b"echo hi\n",
            &[("/opt/x".into(), b"X".to_vec())],
        )
        .to_bytes();
        assert_eq!(b1, b2);
        assert_eq!(&b1[..6], b"070701");
        assert_eq!(b1.len() % 512, 0);
        // Walk the archive: names sorted, trailer last, parents before children.
        let mut off = 0;
        let mut names = Vec::new();
        loop {
            assert_eq!(&b1[off..off + 6], b"070701");
            let field = |i: usize| {
                let s = std::str::from_utf8(&b1[off + 6 + i * 8..off + 14 + i * 8]).unwrap();
                usize::from_str_radix(s, 16).unwrap()
            };
            let (mtime, size, namesize) = (field(5), field(6), field(11));
            assert_eq!(mtime, 0);
            let name = std::str::from_utf8(&b1[off + 110..off + 110 + namesize - 1])
                .unwrap()
                .to_string();
            off = (off + 110 + namesize).next_multiple_of(4);
            off = (off + size).next_multiple_of(4);
            if name == "TRAILER!!!" {
                break;
            }
            names.push(name);
        }
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(names.contains(&"init".to_string()));
        assert!(names.contains(&"opt".to_string()) && names.contains(&"opt/x".to_string()));
        assert!(names.contains(&"bin/sh".to_string()));
    }
}
