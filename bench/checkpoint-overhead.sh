#!/usr/bin/env bash
# What checkpoints cost a job with large, growing state: one Nexmark query from the built-in
# generator at p=1, run three times — without checkpoints, with 1 s incremental checkpoints
# (the default), and with 1 s full ones (execution.checkpointing.incremental = false) — long
# enough for several checkpoints — on each state backend asked for (`rocksdb` stores its runs
# once whatever the mode: it runs without checkpoints and with them). Prints one Markdown
# table. Release build, one run per row.
# Usage: bench/checkpoint-overhead.sh [QUERY] [EVENTS] [BACKENDS] [MEMORY]
#        (defaults group_by, 100000000, "hashmap", 256mb per slot for rocksdb;
#        q7 with 30000000 keeps every bid and grows fastest)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
query="${1:-group_by}"
events="${2:-100000000}"
backends="${3:-hashmap}"
memory="${4:-256mb}"
cargo build --release --quiet --bin eddy
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source="CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING,
  url STRING, dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');"

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bench/checkpoint-overhead.sh $query $events \"$backends\" $memory"
echo
echo "| query | backend | checkpoints | events/s | events/s per CPU-s | peak RSS | taken | median duration | median written | total written | median a restore reads |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for backend in $backends; do
for mode in off incremental full; do
  [ "$backend" = rocksdb ] && [ "$mode" = full ] && continue
  settings="SET 'state.backend.type' = '$backend';
    SET 'state.backend.rocksdb.memory.fixed-per-slot' = '$memory';
    SET 'state.backend.rocksdb.localdir' = '$work/state';"
  [ "$mode" != off ] && settings="$settings SET 'execution.checkpointing.interval' = '1s';
    SET 'execution.checkpointing.dir' = '$work/checkpoints';"
  [ "$mode" = full ] && settings="$settings SET 'execution.checkpointing.incremental' = 'false';"
  { echo "$settings"; echo "$source"; cat bench/queries/nexmark/sinks.sql "bench/queries/nexmark/$query.sql"; } > "$work/job.sql"
  rm -rf "$work/checkpoints"
  (cd "$work" && EDDY_LOG=info EDDY_LOG_FORMAT=json /usr/bin/time -f "%e %U %S %M" -o "$work/times" \
    "$eddy" run -p 1 "$work/job.sql" 2> "$work/log" >/dev/null)
  python3 - "$query" "$backend" "$mode" "$events" "$work/times" "$work/log" <<'PY'
import json, statistics, sys
query, backend, mode, events, times, log = sys.argv[1:]
wall, user, system, rss_kb = (float(x) for x in open(times).read().split()[-4:])
durations, written, restored = [], [], []
for line in open(log, errors="replace"):
    if '"checkpoint complete"' in line:
        fields = json.loads(line).get("fields", {})
        durations.append(fields.get("duration_ms", 0))
        written.append(fields.get("size", 0))
        restored.append(fields.get("full_size", fields.get("size", 0)))
median = lambda xs: statistics.median(xs) if xs else 0
count = float(events)
print(f"| {query} | {backend} | {mode} | {count / wall / 1e6:.2f} M | {count / (user + system) / 1e6:.2f} M | "
      f"{rss_kb / 1024:.0f} MB | {len(durations)} | {median(durations):.0f} ms | "
      f"{median(written) / 1e6:.1f} MB | {sum(written) / 1e6:.0f} MB | {median(restored) / 1e6:.1f} MB |")
PY
done
done
