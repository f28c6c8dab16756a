#!/usr/bin/env bash
# Change events decoded: a file of EVENTS Debezium change events (without the schema part;
# a third updates, each two rows, a tenth deletes) read through the `debezium-json` format
# by `eddy run` into a blackhole, and the same rows as plain JSON lines through the `json`
# format for comparison; then the Debezium file into an aggregate that takes every
# retraction. Prints wall time, events and rows per second, and peak resident memory (GNU
# time's maximum RSS) of each.
# Usage: bench/changes.sh [EVENTS] [EDDY]   (defaults 2000000 and the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-2000000}"
eddy="${2:-}"
if [ -z "$eddy" ]; then
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
[ -x /usr/bin/time ] || { echo "changes.sh: GNU time is missing: apt-get install time" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rows=$(python3 - "$work" "$events" <<'PY'
import json, random, sys
work, events = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
live, next_id, rows = {}, 0, 0
with open(f"{work}/changes.json", "w") as changes, open(f"{work}/rows.json", "w") as plain:
    for _ in range(events):
        roll = rng.random()
        if roll < 0.1 and live:
            key = rng.choice(list(live)) if len(live) < 1000 else next(iter(live))
            row = live.pop(key)
            event, images = {"before": row, "after": None, "op": "d"}, [row]
        elif roll < 0.43 and live:
            key = next(iter(live)) if len(live) > 1000 else rng.choice(list(live))
            before = live[key]
            after = dict(before, amount=rng.randint(1, 10_000), status="paid")
            live[key] = after
            event, images = {"before": before, "after": after, "op": "u"}, [before, after]
        else:
            row = {"id": next_id, "customer": f"customer-{rng.randint(1, 5000)}",
                   "amount": rng.randint(1, 10_000), "status": "new",
                   "ts": "2024-01-01 00:00:00.000"}
            live[next_id] = row
            next_id += 1
            event, images = {"before": None, "after": row, "op": "c"}, [row]
        event["source"] = {"db": "shop", "table": "orders", "ts_ms": 1704067200000}
        event["ts_ms"] = 1704067200000
        changes.write(json.dumps(event, separators=(",", ":")) + "\n")
        for image in images:
            plain.write(json.dumps(image, separators=(",", ":")) + "\n")
            rows += 1
print(rows)
PY
)

columns="id BIGINT, customer STRING, amount BIGINT, status STRING, ts TIMESTAMP(3)"
job() {
  local format="$1" file="$2" query="$3"
  cat > "$work/job.sql" <<SQL
CREATE TABLE orders ($columns)
  WITH ('connector' = 'filesystem', 'path' = '$work/$file', 'format' = '$format');
CREATE TABLE sink (a STRING, b BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink $query;
SQL
}

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $events events ($rows rows), $(basename "$eddy") at $eddy, $(nproc) cores"
echo
echo "| input | query | wall time | events/s | rows/s | peak RSS |"
echo "|---|---|---|---|---|---|"
run() {
  local label="$1" count="$2" query="$3"
  start=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$work/rss" "$eddy" run --parallelism 1 "$work/job.sql" > /dev/null
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  local per_event="—"
  [ "$count" = "$events" ] && per_event=$(( events * 1000 / ms ))
  echo "| $label | $query | $ms ms | $per_event | $(( rows * 1000 / ms )) | $(( $(tail -1 "$work/rss") / 1024 )) MiB |"
}
job debezium-json changes.json "SELECT customer, id FROM orders"
run "debezium-json ($events events)" "$events" "scan"
job json rows.json "SELECT customer, id FROM orders"
run "json ($rows rows: the same row images)" "$rows" "scan"
job debezium-json changes.json "SELECT customer, SUM(amount) FROM orders GROUP BY customer"
run "debezium-json ($events events)" "$events" "GROUP BY customer, SUM"
