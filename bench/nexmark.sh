#!/usr/bin/env bash
# The Nexmark benchmark: each query Eddy runs, in Flink SQL as in the public Nexmark suite
# (bench/queries/nexmark/; all but q6, q14), into a blackhole,
#   - from the built-in generator (EVENTS events) and, for queries of bids alone, from a CSV
#     file of bids (CSV_EVENTS events' bids, made once by this script: parsing is paid as
#     other engines pay it),
#   - at parallelism 1 and 2, without checkpoints and with 1 s exactly-once checkpoints to
#     a local directory,
# plus a "limit" row (the same generator summing a column with no engine) — and prints one
# Markdown table; then the recovery row: a GROUP BY with STATE_MB (default 100) MB of keyed
# state on a multi-process cluster, a TaskManager SIGKILLed (bench/recovery.py --state-row).
# Release build; one run per cell (noisy machine: under ~10 % is noise).
# Usage: bench/nexmark.sh [EVENTS] [CSV_EVENTS]      (defaults 10000000 and 5434783,
#        the latter being 5 M bids)      QUERIES="q0 q2" limits the queries;
#        SETTINGS="SET 'k' = 'v';" adds options to the checkpointed runs (e.g.
#        execution.checkpointing.incremental = false, for a before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-10000000}"
csv_events="${2:-5434783}"
queries="${QUERIES:-q0 q1 q2 q3 q4 q5 q7 q8 q9 q10 q11 q12 q13 q15 q16 q17 q18 q19 q20 q21 q22 group_by tumble_count}"
cargo build --release --quiet --bin eddy --example nexmark-limit
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
columns="auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING, p_time AS PROCTIME(),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND"
# Persons and auctions, for the queries that read them (always from the generator).
others="CREATE TABLE person (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, \`state\` STRING, dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '$events');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING, WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '$events');
CREATE TABLE side_input (key BIGINT, \`value\` STRING)
  WITH ('connector' = 'filesystem', 'path' = '$work/side_input', 'format' = 'csv');"

# Nexmark q13's side input: a value for each of 10,000 keys.
mkdir -p "$work/side_input"
seq 0 9999 | awk '{ print $1 ",side-" $1 }' > "$work/side_input/part-0.csv"

# The CSV file of bids (a directory holding one part file), made by Eddy itself.
csv="$work/bids"
cat > "$work/make-csv.sql" <<SQL
CREATE TABLE gen (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$csv_events');
CREATE TABLE out (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$csv', 'format' = 'csv',
        'sink.rolling-policy.file-size' = '100000000000');
INSERT INTO out SELECT * FROM gen;
SQL
"$eddy" run -p 1 "$work/make-csv.sql"
csv_bids=$(cat "$csv"/* | wc -l)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "command: bench/nexmark.sh $events $csv_events"
echo
echo "| query | input | p | checkpoints | events/s | events/s per CPU-s | peak RSS | checkpoints taken | median checkpoint | median size (written / restored) | median alignment |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"

# Prints one table row for a run; its stderr (JSON logs) holds the checkpoints.
row() {
  local query="$1" input="$2" p="$3" mode="$4" count="$5" times="$6" log="$7"
  python3 - "$query" "$input" "$p" "$mode" "$count" "$times" "$log" <<'PY'
import json, statistics, sys
query, source, p, mode, count, times, log = sys.argv[1:]
wall, user, system, rss_kb = (float(x) for x in open(times).read().split()[-4:])
durations, sizes, full_sizes, alignments = [], [], [], []
for line in open(log, errors="replace"):
    if '"checkpoint complete"' not in line:
        continue
    fields = json.loads(line).get("fields", {})
    durations.append(fields.get("duration_ms", 0))
    sizes.append(fields.get("size", 0))
    full_sizes.append(fields.get("full_size", fields.get("size", 0)))
    alignments.append(fields.get("alignment_ms", 0))
med = lambda xs, unit: f"{statistics.median(xs):.0f} {unit}" if xs else "–"
# Written per checkpoint, and what a restore reads (more when snapshots are incremental).
size = (f"{statistics.median(sizes) / 1e6:.1f} / {statistics.median(full_sizes) / 1e6:.1f} MB"
        if sizes else "–")
count = float(count)
print(f"| {query} | {source} | {p} | {mode} | {count / wall / 1e6:.2f} M | "
      f"{count / max(user + system, 1e-9) / 1e6:.2f} M | {rss_kb / 1024:.0f} MB | {len(durations)} | "
      f"{med(durations, 'ms')} | {size} | {med(alignments, 'ms')} |")
PY
}

for query in $queries; do
  inputs="generator csv"
  # A query reading persons or auctions runs on the generator only (the CSV holds bids).
  grep -qiE '\b(person|auction) +(AS +)?[A-Z]\b|FROM +(person|auction)\b|JOIN +(person|auction)\b|TABLE +(person|auction)\b' \
    "bench/queries/nexmark/$query.sql" && inputs="generator"
  for input in $inputs; do
    case "$input" in
      generator) source="CREATE TABLE bid ($columns) WITH ('connector' = 'nexmark',
                   'nexmark.table' = 'bid', 'events.num' = '$events');"
                 count=$events ;;
      csv) source="CREATE TABLE bid ($columns) WITH ('connector' = 'filesystem',
             'path' = '$csv', 'format' = 'csv');"
           count=$csv_bids ;;
    esac
    for p in 1 2; do
      for mode in off 1s; do
        settings=""
        [ "$mode" = 1s ] && settings="SET 'execution.checkpointing.interval' = '1s';
          SET 'execution.checkpointing.dir' = '$work/checkpoints'; ${SETTINGS:-}"
        { echo "$settings"; echo "$source"; echo "$others"; cat bench/queries/nexmark/sinks.sql "bench/queries/nexmark/$query.sql"; } > "$work/job.sql"
        rm -rf "$work/checkpoints" "$work/eddy-data"
        (cd "$work" && EDDY_LOG=info EDDY_LOG_FORMAT=json /usr/bin/time -f "%e %U %S %M" -o "$work/times" \
          "$eddy" run -p "$p" "$work/job.sql" 2> "$work/log" >/dev/null)
        row "$query" "$input" "$p" "$mode" "$count" "$work/times" "$work/log"
      done
    done
  done
done
limit=$("$CARGO_TARGET_DIR/release/examples/nexmark-limit" "$events")
echo
echo "$limit (generator alone, summing price: the ceiling for the generator rows)"
echo
python3 bench/recovery.py --state-row "${STATE_MB:-100}"
