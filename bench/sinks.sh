#!/usr/bin/env bash
# Sink throughput: Nexmark bids written by `eddy run` (release build, parallelism 1) into
# PostgreSQL, local files (CSV, Parquet), an Iceberg table and a Kafka-protocol broker, at
# least once and exactly once
# (1 s checkpoints); rows/s is rows written over the job's wall time, start-up included.
# Starts its own PostgreSQL (Debian package) and noida-db broker on free loopback ports.
# Usage: bench/sinks.sh [EVENTS]   (default 2000000 Nexmark events, 46 of 50 are bids)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-2000000}"
bids=$(( events / 50 * 46 ))
cargo build --release --quiet
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
chmod 755 "$work"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# PostgreSQL, as the `postgres` user when run as root.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_port=$(free_port)
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$work/pg" && { [ "$(id -u)" != 0 ] || chown postgres "$work/pg"; }
as_owner "$pg_bin/initdb" -D "$work/pg/data" --auth=trust --username=postgres --no-sync >/dev/null
as_owner "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w start \
  -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1 -c max_prepared_transactions=16" >/dev/null
psql() { "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -At -c "$1"; }
url="postgres://postgres@127.0.0.1:$pg_port/postgres"

# The broker.
kafka_port=$(free_port)
noida=$(python3 -c 'import noida_db, os; print(os.path.join(os.path.dirname(noida_db.__file__), "noida-db"))')
"$noida" start --only kafka --kafka-port "$kafka_port" --data-dir "$work/kafka" >/dev/null 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; as_owner "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null; rm -rf "$work"' EXIT
until (echo > "/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null; do sleep 0.1; done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "$events Nexmark events = $bids bids, parallelism 1"
echo
echo "| sink | guarantee | rows written | seconds | rows/s |"
echo "|---|---|---|---|---|"

# run NAME GUARANTEE ROWS SINK_DDL [SETTINGS]
run() {
  local name="$1" guarantee="$2" sink="$3" settings="${4:-}" query="${5:-SELECT auction, bidder, price FROM bid}"
  cat > "$work/$name.sql" <<SQL
$settings
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$events');
CREATE TABLE out $sink;
INSERT INTO out $query;
SQL
  local start elapsed
  start=$(date +%s%N)
  "$eddy" run -p 1 "$work/$name.sql"
  elapsed=$(( $(date +%s%N) - start ))
  echo "$elapsed"
}

report() {
  local sink="$1" guarantee="$2" rows="$3" elapsed="$4"
  awk -v s="$sink" -v g="$guarantee" -v n="$rows" -v t="$elapsed" \
    'BEGIN { printf "| %s | %s | %d | %.2f | %.0f |\n", s, g, n, t / 1e9, n / (t / 1e9) }'
}

checkpoints="SET 'execution.checkpointing.interval' = '1s';"
for guarantee in at-least-once exactly-once; do
  table="bids_${guarantee//-/_}"
  psql "CREATE TABLE $table (auction BIGINT, bidder BIGINT, price BIGINT)" >/dev/null
  settings=""
  [ "$guarantee" = exactly-once ] && settings="$checkpoints"
  elapsed=$(run "pg-$guarantee" "$guarantee" "(auction BIGINT, bidder BIGINT, price BIGINT) WITH (
    'connector' = 'postgres', 'url' = '$url', 'table' = '$table', 'sink.delivery-guarantee' = '$guarantee')" "$settings")
  report "PostgreSQL, append (INSERT … unnest)" "$guarantee" "$(psql "SELECT count(*) FROM $table")" "$elapsed"
done

psql "CREATE TABLE per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top BIGINT)" >/dev/null
elapsed=$(run pg-upsert exactly-once "(auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'postgres', 'url' = '$url', 'table' = 'per_auction', 'sink.delivery-guarantee' = 'exactly-once')" \
  "$checkpoints" "SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction")
report "PostgreSQL, upsert GROUP BY (input bids)" exactly-once "$bids" "$elapsed"

for guarantee in at-least-once exactly-once; do
  elapsed=$(run "files-$guarantee" "$guarantee" "(auction BIGINT, bidder BIGINT, price BIGINT) WITH (
    'connector' = 'filesystem', 'path' = '$work/files-$guarantee', 'format' = 'csv',
    'sink.delivery-guarantee' = '$guarantee')" "$checkpoints")
  report "files, local CSV" "$guarantee" "$(cat "$work/files-$guarantee"/* | wc -l)" "$elapsed"
done

for guarantee in at-least-once exactly-once; do
  elapsed=$(run "kafka-$guarantee" "$guarantee" "(auction BIGINT, bidder BIGINT, price BIGINT) WITH (
    'connector' = 'kafka', 'topic' = 'bids-$guarantee', 'format' = 'csv',
    'properties.bootstrap.servers' = '127.0.0.1:$kafka_port', 'sink.delivery-guarantee' = '$guarantee')" "$checkpoints")
  report "Kafka (noida-db), CSV records" "$guarantee" "$bids" "$elapsed"
done

# Lake sinks, exactly once: Parquet part files, and an Iceberg table (Parquet data files, a
# snapshot per checkpoint, committed in a SQL catalog on the PostgreSQL above).
elapsed=$(run parquet exactly-once "(auction BIGINT, bidder BIGINT, price BIGINT) WITH (
  'connector' = 'filesystem', 'path' = '$work/parquet', 'format' = 'parquet')" "$checkpoints")
report "files, local Parquet" exactly-once \
  "$(python3 -c "import pyarrow.dataset as d; print(d.dataset('$work/parquet').count_rows())")" "$elapsed"

elapsed=$(run iceberg exactly-once "(auction BIGINT, bidder BIGINT, price BIGINT) WITH (
  'connector' = 'iceberg', 'catalog-name' = 'bench', 'uri' = '$url', 'catalog-database' = 'nexmark',
  'catalog-table' = 'bids', 'warehouse' = '$work/warehouse')" "$checkpoints")
rows=$(python3 -c "
from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog('bench', uri='postgresql+psycopg2://postgres@127.0.0.1:$pg_port/postgres').load_table('nexmark.bids')
print(table.current_snapshot().summary['total-records'])")
report "Iceberg, local warehouse (SQL catalog on PostgreSQL)" exactly-once "$rows" "$elapsed"

# The same upsert GROUP BY as PostgreSQL's, into an Iceberg table with a primary key:
# equality deletes of keys committed before, position deletes of keys updated again between
# two checkpoints. The rows read back (iceberg-rust through DataFusion) are the auctions.
elapsed=$(run iceberg-upsert exactly-once "(auction BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'iceberg', 'catalog-name' = 'bench', 'uri' = '$url', 'catalog-database' = 'nexmark',
  'catalog-table' = 'per_auction', 'warehouse' = '$work/warehouse')" \
  "$checkpoints" "SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction")
python3 - <<PY >&2
import datafusion
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg_core.datafusion import IcebergDataFusionTable
table = SqlCatalog('bench', uri='postgresql+psycopg2://postgres@127.0.0.1:$pg_port/postgres').load_table('nexmark.per_auction')
ctx = datafusion.SessionContext()
ctx.register_table('t', IcebergDataFusionTable(identifier=list(table.name()),
    metadata_location=table.metadata_location, file_io_properties={}))
auctions = ctx.sql('SELECT count(*) AS n FROM t').to_pylist()[0]['n']
summary = table.current_snapshot().summary
print(f"iceberg upsert: {auctions} auctions; {summary['total-equality-deletes']} equality and "
      f"{summary['total-position-deletes']} position deletes in {summary['total-delete-files']} delete files, "
      f"{summary['total-data-files']} data files")
PY
report "Iceberg, upsert GROUP BY (input bids; equality + position deletes)" exactly-once "$bids" "$elapsed"
