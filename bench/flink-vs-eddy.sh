#!/usr/bin/env bash
# Eddy and Apache Flink side by side on state larger than memory: one Nexmark query over the
# same events (Eddy's generator dumped as CSV, read back by both through the filesystem
# connector), parallelism 1, 10 s checkpoints, Eddy's LSM backend (`rocksdb`) and Flink's
# RocksDB backend with 256 MB of managed memory each, each engine's processes together in a
# memory cgroup capped at CAP. Prints events/s, events per CPU-second (every process
# counted: Flink's JVM and its Python driver) and peak RSS (summed over the processes).
# Usage: bench/flink-vs-eddy.sh [QUERY] [EVENTS] [CAP]   (defaults q20, 10000000, 2G)
#        EDDY_BIN as in bench/state-backend.sh; FLINK_PYTHON (default ~/flink-venv/bin/python,
#        with apache-flink==2.3.0); FLINK_JAVA_OPTS (default -Xmx1g: the JVM's heap, which
#        by default is a quarter of the machine's memory, fits the cap). Root, for the cgroups.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
query="${1:-q20}"
events="${2:-10000000}"
cap="${3:-2G}"
flink_python="${FLINK_PYTHON:-$HOME/flink-venv/bin/python}"
[ -x "$flink_python" ] || { echo "needs PyFlink: python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0" >&2; exit 1; }
if [ -n "${EDDY_BIN:-}" ]; then
  eddy="$EDDY_BIN"
else
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
cap_bytes=$(numfmt --from=iec "$cap")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

columns_bid="auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  \`dateTime\` TIMESTAMP(3), extra STRING"
columns_auction="id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, \`dateTime\` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT,
  category BIGINT, extra STRING"
cat > "$work/dump.sql" <<SQL
CREATE TABLE gen_bid ($columns_bid)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');
CREATE TABLE gen_auction ($columns_auction)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '$events');
CREATE TABLE bid_csv ($columns_bid)
  WITH ('connector' = 'filesystem', 'path' = '$work/data/bid', 'format' = 'csv');
CREATE TABLE auction_csv ($columns_auction)
  WITH ('connector' = 'filesystem', 'path' = '$work/data/auction', 'format' = 'csv');
INSERT INTO bid_csv SELECT * FROM gen_bid;
INSERT INTO auction_csv SELECT * FROM gen_auction;
SQL
(cd "$work" && "$eddy" run -p 2 dump.sql > /dev/null 2> dump.log) || { tail "$work/dump.log" >&2; exit 1; }
cat > "$work/tables.sql" <<SQL
CREATE TABLE bid ($columns_bid)
  WITH ('connector' = 'filesystem', 'path' = '$work/data/bid', 'format' = 'csv');
CREATE TABLE auction ($columns_auction)
  WITH ('connector' = 'filesystem', 'path' = '$work/data/auction', 'format' = 'csv');
SQL
{ echo "SET 'execution.checkpointing.interval' = '10s';
    SET 'execution.checkpointing.dir' = '$work/checkpoints';
    SET 'state.backend.type' = 'rocksdb';
    SET 'state.backend.rocksdb.memory.fixed-per-slot' = '256mb';
    SET 'state.backend.rocksdb.localdir' = '$work/state';
    SET 'restart-strategy.type' = 'none';"
  cat "$work/tables.sql" bench/queries/nexmark/sinks.sql "bench/queries/nexmark/$query.sql"; } > "$work/eddy.sql"

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bench/flink-vs-eddy.sh $query $events $cap; $(nproc) cores"
echo
echo "| engine | query | events | result | events/s | events per CPU-s | peak RSS | cgroup peak |"
echo "|---|---|---|---|---|---|---|---|"
report() {
  python3 - "$1" "$query" "$events" "$2" <<'PY'
import json, sys
engine, query, events, line = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.loads(line)
result = "finished" if r["finished"] else ("killed by the OOM killer" if r["oom_killed"] else f"failed (exit {r['exit']})")
rate = f"{events / r['wall_s'] / 1e6:.3g} M" if r["finished"] else "-"
per_cpu = f"{events / r['cpu_s'] / 1e6:.3g} M" if r["finished"] else "-"
print(f"| {engine} | {query} | {events / 1e6:g} M | {result} | {rate} | {per_cpu} | {r['peak_rss_mb']} MB | {r['cgroup_peak_mb']} MB |")
PY
}
eddy_run=$(cd "$work" && ERR="$work/eddy.log" python3 "$OLDPWD/bench/cgroup-run.py" "$cap_bytes" -- "$eddy" run -p 1 eddy.sql)
echo "$eddy_run" >&2
report Eddy "$eddy_run"
flink_run=$(JAVA_TOOL_OPTIONS="${FLINK_JAVA_OPTS:--Xmx1g}" ERR="$work/flink.log" OUT="$work/flink.out" python3 bench/cgroup-run.py "$cap_bytes" -- \
  "$flink_python" bench/flink/run_query.py "$work/tables.sql" "bench/queries/nexmark/$query.sql" "$work")
echo "$flink_run" >&2
report "Flink 2.3" "$flink_run"
grep -q '"finished": false' <<< "$flink_run" && tail -5 "$work/flink.log" >&2 || true
