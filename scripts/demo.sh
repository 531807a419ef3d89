#!/usr/bin/env bash
# The main job on the default image: build a static C program and run it on Lockstep's
# interpreter in user mode, twice with the same seed, showing identical stats.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --quiet
out=$(mktemp -d)
musl-gcc -static -O2 -o "$out/demo" scripts/demo.c
for i in 1 2; do
  ./target/release/lockstep user --seed 1 --stats "$out/demo" lockstep demo
done
