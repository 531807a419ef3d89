#!/usr/bin/env bash
# fuzz/run.sh: build a fuzz target with coverage instrumentation on the project's own crates
# only, then run it under libFuzzer.
#
#   fuzz/run.sh TARGET [SECONDS] [extra libFuzzer arguments...]
#   fuzz/run.sh interp_vs_jit 1800
#
# TARGET is one of decode_exec, sys_exec, interp_vs_jit. The run starts from the checked-in
# corpus (fuzz/corpus/seeds for decode_exec and sys_exec, fuzz/corpus/TARGET otherwise) and
# writes new units to $FUZZ_OUT (default /tmp/lockstep-fuzz-TARGET); crash inputs land in the
# current directory as crash-*.
#
# Why not `cargo fuzz run`: cargo-fuzz puts the SanitizerCoverage flags in RUSTFLAGS, so every
# crate is instrumented, Cranelift and regalloc2 included. interp_vs_jit compiles at every
# input, and instrumented Cranelift made it ~7x slower (2 executions per second). Here the
# flags go only to lockstep-interp and lockstep-jit (cargo's `profile-rustflags`, enabled by
# RUSTC_BOOTSTRAP=1 on a stable toolchain), with debug assertions on in those two crates (so
# the JIT keeps Cranelift's IR verifier on, see jit/src/compiler.rs) and Cranelift itself built
# as in release. Coverage then guides by our decoder, lifter and semantics, which is what the
# targets are about.
set -euo pipefail

target=${1:?usage: fuzz/run.sh TARGET [SECONDS] [libFuzzer args...]}
seconds=${2:-600}
shift $(($# >= 2 ? 2 : 1))
case "$target" in
decode_exec | sys_exec) corpus=corpus/seeds ;;
interp_vs_jit) corpus=corpus/interp_vs_jit ;;
*)
    echo "fuzz/run.sh: unknown target '$target' (decode_exec, sys_exec, interp_vs_jit)" >&2
    exit 2
    ;;
esac

cd "$(dirname "$0")"
flags='["-Cpasses=sancov-module","-Cllvm-args=-sanitizer-coverage-level=4",'
flags+='"-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",'
flags+='"-Cllvm-args=-sanitizer-coverage-pc-table",'
flags+='"-Cllvm-args=-sanitizer-coverage-trace-compares","-Cdebug-assertions"]'
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTC_BOOTSTRAP=1 CARGO_CACHE_RUSTC_INFO=0 RUSTFLAGS="--cfg fuzzing" \
    cargo build -Zprofile-rustflags \
    --config "profile.release.package.lockstep-interp.rustflags=$flags" \
    --config "profile.release.package.lockstep-jit.rustflags=$flags" \
    --release --target "$host" --bin "$target"

out=${FUZZ_OUT:-/tmp/lockstep-fuzz-$target}
mkdir -p "$out"
exec "target/$host/release/$target" "$out" "$corpus" \
    -max_total_time="$seconds" -print_final_stats=1 "$@"
