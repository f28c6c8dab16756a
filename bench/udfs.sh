#!/usr/bin/env bash
# Python functions, Eddy against Apache Flink (PyFlink): each query of bench/queries/udfs
# (a trivial function and Nexmark q14's count_char, as a built-in expression, a Python
# function called a row at a time and a pandas function) over the same bids (Eddy's
# Nexmark generator dumped as CSV, read by both through the filesystem connector) into a
# blackhole, at parallelism 1. Each run's processes are measured together in a cgroup
# (bench/cgroup-run.py): Eddy's with its Python worker, Flink's JVM with its Python
# driver and Beam workers. Prints events/s and events per CPU-second.
# Usage: bench/udfs.sh [EVENTS] [QUERY ...]   (default 2000000 events, every query)
#        EDDY_BIN as in bench/state-backend.sh; FLINK_PYTHON (default ~/flink-venv/bin/python,
#        with apache-flink==2.3.0; its interpreter runs both engines' Python functions).
#        Root, for the cgroups.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-2000000}"
shift || true
queries=("$@")
[ ${#queries[@]} -gt 0 ] || queries=(plus_builtin plus_python plus_pandas count_builtin count_python count_pandas)
flink_python="${FLINK_PYTHON:-$HOME/flink-venv/bin/python}"
[ -x "$flink_python" ] || { echo "needs PyFlink: python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0" >&2; exit 1; }
if [ -n "${EDDY_BIN:-}" ]; then
  eddy="$EDDY_BIN"
else
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cap_bytes=$(numfmt --from=iec 4G)

columns="auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  \`dateTime\` TIMESTAMP(3), extra STRING"
cat > "$work/dump.sql" <<SQL
CREATE TABLE gen_bid ($columns)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');
CREATE TABLE bid_csv ($columns)
  WITH ('connector' = 'filesystem', 'path' = '$work/data/bid', 'format' = 'csv');
INSERT INTO bid_csv SELECT * FROM gen_bid;
SQL
(cd "$work" && "$eddy" run -p 2 dump.sql > /dev/null 2> dump.log) || { tail "$work/dump.log" >&2; exit 1; }
bids=$(cat "$work"/data/bid/* | wc -l)
{ echo "CREATE TABLE bid ($columns)
    WITH ('connector' = 'filesystem', 'path' = '$work/data/bid', 'format' = 'csv');
  SET 'python.executable' = '$flink_python';"
  sed "s|\$DIR|$PWD/bench/queries/udfs|" bench/queries/udfs/functions.sql; } > "$work/tables.sql"

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bench/udfs.sh $events ${queries[*]}; $(nproc) cores; $bids bids"
echo
echo "| engine | query | bids/s | bids per CPU-s | peak RSS |"
echo "|---|---|---|---|---|"
report() {
  python3 - "$1" "$2" "$bids" "$3" <<'PY'
import json, sys
engine, query, bids, line = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.loads(line)
if not r["finished"]:
    print(f"| {engine} | {query} | failed (exit {r['exit']}) | - | - |")
else:
    print(f"| {engine} | {query} | {bids / r['wall_s'] / 1e3:.0f} k | {bids / r['cpu_s'] / 1e3:.0f} k | {r['peak_rss_mb']} MB |")
PY
}
for query in "${queries[@]}"; do
  { echo "SET 'restart-strategy.type' = 'none';"
    cat "$work/tables.sql" "bench/queries/udfs/$query.sql"; } > "$work/eddy.sql"
  run=$(cd "$work" && ERR="$work/eddy-$query.log" python3 "$OLDPWD/bench/cgroup-run.py" "$cap_bytes" -- "$eddy" run -p 1 eddy.sql)
  echo "$run" >&2
  grep -q '"finished": false' <<< "$run" && tail -5 "$work/eddy-$query.log" >&2
  report Eddy "$query" "$run"
done
for query in "${queries[@]}"; do
  run=$(ERR="$work/flink-$query.log" OUT="$work/flink-$query.out" python3 bench/cgroup-run.py "$cap_bytes" -- \
    "$flink_python" bench/flink/run_query.py "$work/tables.sql" "bench/queries/udfs/$query.sql" "$work")
  echo "$run" >&2
  grep -q '"finished": false' <<< "$run" && tail -5 "$work/flink-$query.log" >&2
  report "Flink 2.3" "$query" "$run"
done
