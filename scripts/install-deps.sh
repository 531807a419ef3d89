#!/usr/bin/env bash
# Installs what Lockstep's tests and demos need on a fresh Debian 12 machine (as root, or via sudo).
set -euo pipefail
# nasm: test kernels; qemu-system-x86: reference runs of the test kernels and boot comparisons;
# busybox-static + cpio: initramfs images; linux-image-*: the Debian kernels the boot tests boot.
pkgs=(gcc musl-tools qemu-user binutils nasm qemu-system-x86 busybox-static cpio linux-image-cloud-amd64 linux-image-amd64)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v cargo >/dev/null || { echo "cargo not found: install a Rust toolchain (rustup) first" >&2; exit 1; }
