#!/usr/bin/env bash
# The state store alone (`state/`, no operator): random writes with overwrites through the
# memtable into runs, then random point reads of existing and missing keys, then narrow
# scans beside a full memtable. Prints writes/s, runs, bytes on disk, write amplification
# (bytes of runs written / bytes put), reads/s and scans/s.
# Usage: bench/state-store.sh [WRITES] [KEYS] [MEMTABLE_MIB]   (defaults 10 M, 4 M, 64)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
cargo build --release --quiet -p eddy-state --example store_bench
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores"
"$CARGO_TARGET_DIR/release/examples/store_bench" "$work/store" "${1:-10000000}" "${2:-4000000}" "${3:-64}"
