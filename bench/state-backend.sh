#!/usr/bin/env bash
# State larger than memory: each query on each state backend (`hashmap`, `rocksdb`) at
# parallelism 1 with 10 s checkpoints, the whole `eddy run` process in a memory cgroup capped
# at CAP (cgroup v1, as root). Prints, per run, whether it finished or was killed, events/s,
# events per CPU-second, peak RSS and the cgroup's peak usage (page cache included). Release
# build.
# Usage: bench/state-backend.sh [QUERIES] [EVENTS] [CAP] [MEMORY]
#        (defaults "group_by q20", 20000000, 1G, 256mb per slot for rocksdb)
#        EDDY_BIN=path runs that eddy binary (e.g. the static one deploy/build-images.sh
#        builds) instead of building one; BACKENDS (default "hashmap rocksdb") chooses.
#        CHECKSUM=1 writes the query's result into a view and prints a checksum of its final
#        rows (row count and sums of columns, bench/checksum-job.py) instead of discarding
#        them: compare it between backends, or with DuckDB's answer.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
queries="${1:-group_by q20}"
events="${2:-20000000}"
cap="${3:-1G}"
memory="${4:-256mb}"
cgroups=/sys/fs/cgroup/memory
[ -w "$cgroups" ] || { echo "needs the cgroup v1 memory controller, writable (run as root)" >&2; exit 1; }
if [ -n "${EDDY_BIN:-}" ]; then
  eddy="$EDDY_BIN"
else
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
work="$(mktemp -d)"
group="$cgroups/eddy-bench-$$"
trap 'rmdir "$group" 2>/dev/null; rm -rf "$work"' EXIT
mkdir "$group"
source="CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING,
  url STRING, dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING, WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '$events');
CREATE TABLE person (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, \`state\` STRING, dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '$events');
CREATE TABLE person_versions (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, \`state\` STRING, dateTime TIMESTAMP(3), extra STRING, PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '$events');"

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bench/state-backend.sh \"$queries\" $events $cap $memory; $(nproc) cores"
echo
echo "| query | backend | result | events/s | events/s per CPU-s | peak RSS | cgroup peak | checksum |"
echo "|---|---|---|---|---|---|---|---|"
for query in $queries; do
  for backend in ${BACKENDS:-hashmap rocksdb}; do
    { echo "SET 'execution.checkpointing.interval' = '10s';
        SET 'execution.checkpointing.dir' = '$work/checkpoints';
        SET 'state.backend.type' = '$backend';
        SET 'state.backend.rocksdb.memory.fixed-per-slot' = '$memory';
        SET 'state.backend.rocksdb.localdir' = '$work/state';
        SET 'restart-strategy.type' = 'none';"
      echo "$source"
      if [ -n "${CHECKSUM:-}" ]; then
        python3 bench/checksum-job.py "bench/queries/nexmark/$query.sql"
      else
        cat bench/queries/nexmark/sinks.sql "bench/queries/nexmark/$query.sql"
      fi; } > "$work/job.sql"
    rm -rf "$work/checkpoints" "$work/state"
    echo "$cap" > "$group/memory.limit_in_bytes"
    echo 0 > "$group/memory.max_usage_in_bytes" 2>/dev/null || true
    set +e
    (cd "$work" && sh -c "echo \$\$ > $group/cgroup.procs; exec /usr/bin/time -f '%e %U %S %M' -o $work/times $eddy run -p 1 $work/job.sql" > "$work/out" 2> "$work/log")
    status=$?
    set -e
    peak=$(( $(cat "$group/memory.max_usage_in_bytes") / 1048576 ))
    read -r wall user system rss_kb < <(tail -1 "$work/times" | grep -E '^[0-9.]+ ' || echo "0 0 0 0")
    result=finished
    [ "$status" -ne 0 ] && result="killed (exit $status)"
    grep -q "Command terminated by signal 9" "$work/times" 2>/dev/null && result="killed by the OOM killer"
    checksum=$(grep -E '^\+[IU]\[' "$work/out" | tail -1 || true)
    python3 - "$query" "$backend" "$result" "$events" "$wall" "$user" "$system" "$rss_kb" "$peak" "${checksum:--}" <<'PY'
import sys
query, backend, result, events, wall, user, system, rss_kb, peak, checksum = sys.argv[1:]
wall, cpu = float(wall), float(user) + float(system)
rate = f"{float(events) / wall / 1e6:.2f} M" if result == "finished" and wall > 0 else "-"
per_cpu = f"{float(events) / cpu / 1e6:.2f} M" if result == "finished" and cpu > 0 else "-"
print(f"| {query} | {backend} | {result} | {rate} | {per_cpu} | {int(rss_kb) // 1024} MB | {peak} MB | {checksum} |")
PY
  done
done
