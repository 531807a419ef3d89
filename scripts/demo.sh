#!/usr/bin/env bash
# The main job on the default image: boot Debian 12's cloud kernel (from /boot, installed by
# install-deps.sh) with a busybox initramfs on Lockstep, run a shell script and a static C
# program in its userspace, power off; twice with the same seed, showing identical stats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --quiet
out=$(mktemp -d)
musl-gcc -static -O2 -o "$out/demo" scripts/demo.c
cat > "$out/run.sh" <<'SH'
echo "--- inside the guest ---"
uname -a
cat /proc/cpuinfo | grep -E 'model name|flags' | head -2
for i in 1 2 3; do echo "shell loop $i"; done
/bin/demo lockstep demo
echo "uptime: $(cat /proc/uptime)"
SH
./target/release/lockstep mkinitramfs --script "$out/run.sh" --add "$out/demo:/bin/demo" -o "$out/initrd.cpio"
kernel=$(ls /boot/vmlinuz-*-cloud-amd64 | sort | tail -1)
for i in 1 2; do
  echo "=== boot $i: $kernel ==="
  ./target/release/lockstep --boot "$kernel" --initrd "$out/initrd.cpio" \
    --append "console=ttyS0 quiet panic=-1" --seed 1 --stats
done
