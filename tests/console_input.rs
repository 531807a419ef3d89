//! Console input under Linux (issue 6): Debian's cloud kernel boots a busybox initramfs whose script reads two lines from the console (ttyS0), fed with `--input`; the bytes wait for the tty to be opened (RTS) and reach `read` intact. One boot on the JIT (~10 s in release); engine equality and replays are covered by tests/kernels.rs (echo) and tests/boot.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn lockstep_bin() -> String {
    std::env::var("LOCKSTEP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_lockstep").to_string())
}

/// The newest /boot/vmlinuz-*-cloud-amd64.
fn cloud_kernel() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("vmlinuz-") && n.ends_with("cloud-amd64")
        })
        .collect();
    found.sort();
    found.pop()
}

fn boot(kernel: &Path, initrd: &Path, engine: &str) -> (i32, String, String) {
    // The bytes are offered at virtual time 0 and wait until Linux opens the console (RTS).
    let out = Command::new(lockstep_bin())
        .arg("--boot")
        .arg(kernel)
        .arg("--initrd")
        .arg(initrd)
        .args(["--append", "console=ttyS0 panic=-1 quiet", "--seed", "1"])
        .args(["--engine", engine, "--stats", "--max-insns", "40000000000"])
        .args(["--input", "hello world\\nfoo bar\\n"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stats = stderr
        .lines()
        .filter(|l| l.contains("retired"))
        .collect::<Vec<_>>()
        .join("\n");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stats,
    )
}

#[test]
fn linux_reads_scripted_console_input() {
    let Some(k) = cloud_kernel() else {
        panic!("no /boot/vmlinuz-*cloud-amd64: run scripts/install-deps.sh");
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console_input");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("run.sh");
    std::fs::write(
        &script,
        "echo \"type something:\"\nread line\necho \"got: [$line]\"\nread a b\necho \"second: [$b] [$a]\"\n",
    )
    .unwrap();
    let rd = dir.join("initrd.cpio");
    let st = Command::new(lockstep_bin())
        .arg("mkinitramfs")
        .arg("--script")
        .arg(&script)
        .arg("-o")
        .arg(&rd)
        .status()
        .unwrap();
    assert!(st.success(), "mkinitramfs failed");
    let (code, serial, stats) = boot(&k, &rd, "jit");
    assert_eq!(code, 0, "did not power off:\n{serial}\n{stats}");
    assert!(serial.contains("got: [hello world]"), "{serial}");
    assert!(serial.contains("second: [bar] [foo]"), "{serial}");
    assert!(stats.contains("state hash"), "{stats}");
}
