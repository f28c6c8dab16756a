#!/usr/bin/env bash
# Start-up of `eddy run` on the embedded cluster, release build: a one-row job into a
# blackhole, without checkpoints and with a 1 s checkpoint interval (its final checkpoint is
# taken at once). Prints the median of RUNS runs of the process's wall time and, from
# `--metrics`, of the time from submission until every task was deployed.
# Usage: bench/startup.sh [RUNS] [EDDY]   (defaults 20 and the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
runs="${1:-20}"
eddy="${2:-}"
if [ -z "$eddy" ]; then
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $runs runs each"
echo
echo "| job | wall time (median) | time to running (median) |"
echo "|---|---|---|"
for mode in off 1s; do
  settings=""
  [ "$mode" = 1s ] && settings="SET 'execution.checkpointing.interval' = '1s';"
  cat > "$work/job.sql" <<SQL
$settings
CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO o SELECT id FROM t;
SQL
  walls=() runnings=()
  for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    (cd "$work" && "$eddy" run --metrics job.sql 2> "$work/err" >/dev/null)
    walls+=($(( ($(date +%s%N) - start) / 1000 )))
    runnings+=("$(sed -n 's/^time to running: \([0-9.]*\) ms.*/\1/p' "$work/err")")
  done
  wall=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  running=$(printf '%s\n' "${runnings[@]}" | grep . | sort -g | sed -n "$(( (runs + 1) / 2 ))p" || true)
  echo "| checkpoints $mode | $((wall / 1000)).$(( (wall % 1000) / 100 )) ms | ${running:-not reported} ms |"
done
