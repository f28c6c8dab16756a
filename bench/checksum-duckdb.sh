#!/usr/bin/env bash
# The checksums bench/checksum-job.py has Eddy print (row count and column sums of each
# query's final rows), computed by DuckDB over the same Nexmark events: Eddy's generator
# (the defaults bench/state-backend.sh runs with) dumps the columns the queries read as CSV,
# and DuckDB answers each query in batch, with its own SQL (bench/checksum-duckdb.sql).
# An independent answer at sizes Flink takes too long for.
# Usage: bench/checksum-duckdb.sh [EVENTS] (default 100000000); EDDY_BIN as in
#        bench/state-backend.sh. Needs the Python package duckdb and about 60 bytes of disk
#        an event.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-100000000}"
if [ -n "${EDDY_BIN:-}" ]; then
  eddy="$EDDY_BIN"
else
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
python3 -c 'import duckdb' 2>/dev/null || { echo "needs the Python package duckdb (pip install duckdb)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/dump.sql" <<SQL
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '$events');
CREATE TABLE bid_csv (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '$work/bid', 'format' = 'csv');
CREATE TABLE auction_csv (id BIGINT, reserve BIGINT, dateTime TIMESTAMP(3),
  expires TIMESTAMP(3), category BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '$work/auction', 'format' = 'csv');
INSERT INTO bid_csv SELECT auction, bidder, price, dateTime FROM bid;
INSERT INTO auction_csv SELECT id, reserve, dateTime, expires, category FROM auction;
SQL
(cd "$work" && "$eddy" run -p 2 dump.sql > /dev/null 2> dump.log) || { tail "$work/dump.log" >&2; exit 1; }
python3 - "$work" <<'PY'
import sys, duckdb
work = sys.argv[1]
db = duckdb.connect()
db.execute("SET preserve_insertion_order = false")
columns = {
    "bid": "{'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT', 'dateTime': 'TIMESTAMP'}",
    "auction": "{'id': 'BIGINT', 'reserve': 'BIGINT', 'dateTime': 'TIMESTAMP', "
               "'expires': 'TIMESTAMP', 'category': 'BIGINT'}",
}
for table, types in columns.items():
    db.execute(f"CREATE TABLE {table} AS SELECT * FROM read_csv('{work}/{table}/**/*', "
               f"header = false, columns = {types}, hive_partitioning = false)")
queries = open("bench/checksum-duckdb.sql").read().split(";")
for query in filter(str.strip, queries):
    name = query.strip().splitlines()[0].removeprefix("--").strip()
    row = db.execute(query).fetchone()
    print(f"| {name} | +I[{', '.join(str(v) for v in row)}] |")
PY
