#!/bin/sh
# Builds every program here in every variant the tests use, into OUTDIR (default
# target/programs): <name>-glibc-O0, -glibc-O2, -glibc-O2pie (static-pie), -musl-O0, -musl-O2
# (always with -lm; the extra -O3/-O3v3 variants some programs have are not built here).
# Usage: tests/programs/build.sh [OUTDIR] [NAME...]
# The test (tests/programs.rs) and `lockstep bench` build on their own; this script is for
# looking at the binaries by hand (objdump, running them under qemu-x86_64 or lockstep user).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/programs}
[ $# -gt 0 ] && shift
mkdir -p "$out"
command -v musl-gcc >/dev/null || { echo "musl-gcc not found: apt-get install -y musl-tools" >&2; exit 1; }
names=${*:-$(cd "$here" && ls *.c | sed 's/\.c$//')}
flags="-std=gnu11 -Wall -Wextra"
jobs=$(nproc 2>/dev/null || echo 2)
for n in $names; do
    src=$here/$n.c
    echo "gcc -static -O0 $flags -o $out/$n-glibc-O0 $src -lm"
    echo "gcc -static -O2 $flags -o $out/$n-glibc-O2 $src -lm"
    echo "gcc -static-pie -fPIE -O2 $flags -o $out/$n-glibc-O2pie $src -lm"
    echo "musl-gcc -static -O0 $flags -o $out/$n-musl-O0 $src -lm"
    echo "musl-gcc -static -O2 $flags -o $out/$n-musl-O2 $src -lm"
done | xargs -P "$jobs" -I{} sh -c '{}'
echo "built into $out"
