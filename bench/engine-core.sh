#!/usr/bin/env bash
# Engine-core figures on the embedded cluster, release build, pinned to one core:
#   - wall time of `eddy run` for a one-row job (start-up + shutdown), median of 10;
#   - events/s of Nexmark bids -> blackhole (q0) and of GROUP BY auction COUNT/MAX.
# Usage: bench/engine-core.sh [EVENTS]   (default 10000000 Nexmark events)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-10000000}"
cargo build --release --quiet
eddy="$CARGO_TARGET_DIR/release/eddy"
pin="taskset -c 0"
command -v taskset >/dev/null || pin=""
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo

times=()
for _ in $(seq 10); do
  start=$(date +%s%N)
  $pin "$eddy" run bench/queries/startup.sql
  times+=($(( ($(date +%s%N) - start) / 1000 )))
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 5p)
echo "eddy run, one-row job, wall time (median of 10): $((median / 1000)).$(( (median % 1000) / 100 )) ms"

for query in passthrough group_by; do
  sed "s/\${EVENTS}/$events/" "bench/queries/$query.sql" > "$work/$query.sql"
  start=$(date +%s%N)
  $pin "$eddy" run "$work/$query.sql"
  elapsed_ns=$(( $(date +%s%N) - start ))
  rate=$(awk -v n="$events" -v t="$elapsed_ns" 'BEGIN { printf "%.2f", n / (t / 1e9) / 1e6 }')
  secs=$(awk -v t="$elapsed_ns" 'BEGIN { printf "%.2f", t / 1e9 }')
  echo "$query: $events events in ${secs} s = ${rate} M events/s (one core)"
done
