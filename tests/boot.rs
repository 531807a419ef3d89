//! Linux boot tests: Debian 12's kernels (from /boot, installed by scripts/install-deps.sh) boot from their bzImage — and the cloud kernel also as an ELF vmlinux through the PVH entry, extracted with `lockstep extract-vmlinux` — with a busybox initramfs to userspace, run a shell loop and a static C program, and power off — identically in the interpreter and the JIT, and identically to the golden in goldens/boot/ (serial log, retired count, state hash, keyed by kernel version; `<version>-pvh.golden` for the PVH boot).
//!
//! Re-bless after Debian updates a kernel: `LOCKSTEP_BLESS=1 cargo test --test boot`
//! (writes goldens/boot/<kernel-version>.golden and <kernel-version>-pvh.golden; review the diff before committing).

use std::path::{Path, PathBuf};
use std::process::Command;

const SEED: &str = "1";
const APPEND: &str = "console=ttyS0 panic=-1";
const MARKER: &str = "lockstep: userspace reached";

fn lockstep_bin() -> String {
    std::env::var("LOCKSTEP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_lockstep").to_string())
}

fn tmp(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("boot")
        .join(tag);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The newest /boot/vmlinuz-* whose name contains `flavour` ("cloud-amd64", or "amd64"
/// without "cloud").
fn kernel(flavour: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("vmlinuz-")
                && n.ends_with(flavour)
                && (flavour.contains("cloud") || !n.contains("cloud"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// The initramfs: a shell loop and a static C program.
fn initramfs(tag: &str) -> PathBuf {
    let dir = tmp(tag);
    let c = dir.join("hello.c");
    std::fs::write(
        &c,
        "#include <stdio.h>\nint main(void){unsigned long h=5381;for(int i=0;i<100000;i++)h=h*33+i;\
         printf(\"static C program: hash %lx\\n\",h);return 0;}\n",
    )
    .unwrap();
    let exe = dir.join("hello");
    let st = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .expect("gcc");
    assert!(st.success());
    let script = dir.join("run.sh");
    std::fs::write(
        &script,
        "for i in 1 2 3; do echo \"shell loop $i\"; done\n/bin/hello\nuname -r\n",
    )
    .unwrap();
    let out = dir.join("initrd.cpio");
    let st = Command::new(lockstep_bin())
        .arg("mkinitramfs")
        .arg("--script")
        .arg(&script)
        .arg("--add")
        .arg(format!("{}:/bin/hello", exe.display()))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "mkinitramfs failed");
    out
}

struct Run {
    code: i32,
    serial: String,
    stats: String,
    stderr: String,
}

fn boot(kernel: &Path, initrd: &Path, engine: &str) -> Run {
    let out = Command::new(lockstep_bin())
        .arg("--boot")
        .arg(kernel)
        .arg("--initrd")
        .arg(initrd)
        .args(["--append", APPEND, "--seed", SEED, "--ram-mb", "256"])
        .args(["--engine", engine, "--stats"])
        .args(["--max-insns", "40000000000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    Run {
        code: out.status.code().unwrap_or(-1),
        serial: String::from_utf8_lossy(&out.stdout).into_owned(),
        stats: stderr
            .lines()
            .filter(|l| l.contains("retired"))
            .collect::<Vec<_>>()
            .join("\n"),
        stderr,
    }
}

/// How the kernel is booted.
#[derive(Clone, Copy, PartialEq)]
enum Loader {
    BzImage,
    /// `extract-vmlinux` first, then boot the ELF through the PVH entry.
    Pvh,
}

/// `lockstep extract-vmlinux bzimage -o <tmp>/vmlinux`.
fn extract_vmlinux(bzimage: &Path, tag: &str) -> PathBuf {
    let out = tmp(tag).join("vmlinux");
    let o = Command::new(lockstep_bin())
        .arg("extract-vmlinux")
        .arg(bzimage)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "extract-vmlinux failed: {msg}");
    assert!(msg.contains("PVH entry 0x"), "{msg}");
    out
}

fn check(flavour: &str, loader: Loader) {
    let Some(k) = kernel(flavour) else {
        panic!(
            "no /boot/vmlinuz-*{flavour}: run scripts/install-deps.sh (installs Debian's kernels)"
        );
    };
    let version = k
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("vmlinuz-")
        .to_string();
    let (k, tag, golden_name) = match loader {
        Loader::BzImage => (k, flavour.to_string(), format!("{version}.golden")),
        Loader::Pvh => {
            let tag = format!("{flavour}-pvh");
            (
                extract_vmlinux(&k, &tag),
                tag,
                format!("{version}-pvh.golden"),
            )
        }
    };
    let rd = initramfs(&tag);
    let i = boot(&k, &rd, "interp");
    if loader == Loader::Pvh {
        assert!(i.stderr.contains("PVH vmlinux: entry"), "{}", i.stderr);
    }
    assert!(
        i.serial.contains(MARKER),
        "{version}: userspace marker not reached (exit {}):\n{}\n{}",
        i.code,
        tail(&i.serial),
        i.stats
    );
    assert!(i.serial.contains("shell loop 3"), "{}", tail(&i.serial));
    assert!(
        i.serial.contains("static C program: hash"),
        "{}",
        tail(&i.serial)
    );
    assert_eq!(
        i.code,
        0,
        "{version}: did not power off cleanly:\n{}",
        tail(&i.serial)
    );

    let j = boot(&k, &rd, "jit");
    assert_eq!(j.code, 0, "{version} (jit):\n{}", tail(&j.serial));
    assert_eq!(j.serial, i.serial, "{version}: JIT serial output differs");
    assert_eq!(
        j.stats, i.stats,
        "{version}: JIT retired count / state hash differ"
    );

    let golden_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("goldens/boot")
        .join(&golden_name);
    let actual = format!("{}\n--- serial ---\n{}", i.stats, i.serial);
    if std::env::var_os("LOCKSTEP_BLESS").is_some() {
        std::fs::create_dir_all(golden_path.parent().unwrap()).unwrap();
        std::fs::write(&golden_path, &actual).unwrap();
        eprintln!("blessed {}", golden_path.display());
        return;
    }
    match std::fs::read_to_string(&golden_path) {
        Ok(g) => assert_eq!(
            actual, g,
            "{version}: differs from {} (re-bless with LOCKSTEP_BLESS=1 if the kernel or machine changed on purpose)",
            golden_path.display()
        ),
        Err(_) => panic!(
            "no golden for kernel {version} at {}: bless it with LOCKSTEP_BLESS=1 cargo test --test boot",
            golden_path.display()
        ),
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[test]
fn debian_cloud_kernel_boots_to_userspace() {
    check("cloud-amd64", Loader::BzImage);
}

#[test]
fn debian_cloud_vmlinux_boots_through_pvh() {
    check("cloud-amd64", Loader::Pvh);
}

/// Both of Debian's compressions (LZ4 for the cloud kernel, XZ with the x86 BCJ filter for the
/// generic one) extract to an ELF vmlinux with a PVH entry note.
#[test]
fn extract_vmlinux_from_both_debian_kernels() {
    for flavour in ["cloud-amd64", "amd64"] {
        let k = kernel(flavour).unwrap_or_else(|| panic!("no /boot/vmlinuz-*{flavour}"));
        let v = extract_vmlinux(&k, &format!("{flavour}-extract"));
        let elf = std::fs::read(&v).unwrap();
        assert_eq!(&elf[..5], b"\x7fELF\x02", "{flavour}: not an ELF64 file");
        std::fs::remove_file(&v).unwrap();
    }
    // Not a bzImage: exit code 2 and a message naming the problem.
    let o = Command::new(lockstep_bin())
        .arg("extract-vmlinux")
        .arg(env!("CARGO_BIN_EXE_lockstep"))
        .args(["-o", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a Linux bzImage"));
}

#[test]
fn debian_generic_kernel_boots_to_userspace() {
    check("amd64", Loader::BzImage);
}
