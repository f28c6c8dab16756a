#!/usr/bin/env bash
# Compares two `eddy` binaries on the engine-core queries, pinned to one core, runs
# alternating so that drift of the machine hits both alike; prints each run and the median
# events/s of each binary, and their stripped sizes.
# Usage: bench/compare-binaries.sh BEFORE AFTER [EVENTS] [RUNS]
#   e.g. the cost of a change: build the commit before it and after it in release, then
#   bench/compare-binaries.sh /tmp/eddy-before target/release/eddy 10000000 5
set -euo pipefail
cd "$(dirname "$0")/.."
before="$1" after="$2" events="${3:-10000000}" runs="${4:-5}"
pin="taskset -c 0"
command -v taskset >/dev/null || pin=""
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for binary in "$before" "$after"; do
  cp "$binary" "$work/stripped" && strip "$work/stripped" 2>/dev/null || true
  echo "$binary: $(stat -c %s "$binary") bytes, stripped $(stat -c %s "$work/stripped") bytes"
done

for query in passthrough group_by; do
  sed "s/\${EVENTS}/$events/" "bench/queries/$query.sql" > "$work/$query.sql"
  declare -A rates=([before]="" [after]="")
  for run in $(seq "$runs"); do
    for side in before after; do
      binary=$before
      [ "$side" = after ] && binary=$after
      start=$(date +%s%N)
      $pin "$binary" run "$work/$query.sql" >/dev/null
      elapsed=$(( $(date +%s%N) - start ))
      rate=$(awk -v n="$events" -v t="$elapsed" 'BEGIN { printf "%.3f", n / (t / 1e9) / 1e6 }')
      rates[$side]+="$rate "
      echo "$query run $run $side: $rate M events/s"
    done
  done
  median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
  b=$(echo "${rates[before]}" | median) a=$(echo "${rates[after]}" | median)
  echo "$query: median before $b, after $a M events/s ($(awk -v b="$b" -v a="$a" 'BEGIN { printf "%+.1f", (a / b - 1) * 100 }') %)"
done
