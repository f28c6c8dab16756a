#!/usr/bin/env bash
# postgres-cdc replication: a throwaway PostgreSQL (wal_level = logical) with a table of ROWS
# rows; `eddy run` mirrors it into another table exactly once (1 s checkpoints) — first the
# snapshot, then ROWS more rows a writer inserts (transactions of 1 000 rows) and ROWS/2
# updates. Prints each phase's rows per second, from the first row to the mirror holding
# them all, and the peak resident memory of `eddy run` (GNU time's maximum RSS).
# Usage: bench/postgres-cdc.sh [ROWS] [EDDY]   (defaults 200000 and the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
rows="${1:-200000}"
eddy="${2:-}"
if [ -z "$eddy" ]; then
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
[ -x /usr/bin/time ] || { echo "postgres-cdc.sh: GNU time is missing: apt-get install time" >&2; exit 1; }
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
[ -x "$bin/initdb" ] || { echo "postgres-cdc.sh: PostgreSQL is missing: apt-get install postgresql" >&2; exit 1; }
work="$(mktemp -d)"
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_postgres "$bin/initdb" -D "$work/data" --auth=trust --username=postgres --no-sync >/dev/null
as_postgres "$bin/pg_ctl" -D "$work/data" -l "$work/log" -w -o "-p $port -k $work \
  -c listen_addresses=127.0.0.1 -c wal_level=logical -c max_prepared_transactions=16 \
  -c fsync=off -c synchronous_commit=off" start >/dev/null
eddy_pid=""
cleanup() {
  [ -n "$eddy_pid" ] && kill "$eddy_pid" 2>/dev/null || true
  as_postgres "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
sql() { psql -h 127.0.0.1 -p "$port" -U postgres -At -v ON_ERROR_STOP=1 -c "$1"; }

sql "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount NUMERIC(12, 2),
       status TEXT, at TIMESTAMPTZ);
     ALTER TABLE orders REPLICA IDENTITY FULL;
     CREATE TABLE mirror (LIKE orders);
     ALTER TABLE mirror ADD PRIMARY KEY (id);
     INSERT INTO orders SELECT g, g % 5000, g % 10000 / 100.0, 'new', now()
       FROM generate_series(1, $rows) g;" >/dev/null

cat > "$work/job.sql" <<EOF
SET 'execution.checkpointing.interval' = '1s';
CREATE TABLE orders (id BIGINT, customer INT, amount DECIMAL(12, 2), status STRING,
  at TIMESTAMP_LTZ(6), PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '$port',
        'username' = 'postgres', 'database-name' = 'postgres', 'table-name' = 'orders',
        'slot.name' = 'bench');
CREATE TABLE mirror (id BIGINT, customer INT, amount DECIMAL(12, 2), status STRING,
  at TIMESTAMP_LTZ(6), PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres', 'url' = 'postgres://postgres@127.0.0.1:$port/postgres',
        'table' = 'mirror', 'sink.delivery-guarantee' = 'exactly-once');
INSERT INTO mirror SELECT * FROM orders;
EOF

now() { date +%s.%N; }
wait_for() { # until the query answers $2
  until [ "$(sql "$1")" = "$2" ]; do sleep 0.2; done
}
rate() { python3 -c "import sys; n, a, b = map(float, sys.argv[1:]); print(f'{n / (b - a):,.0f}')" "$@"; }

started=$(now)
/usr/bin/time -v -o "$work/time" "$eddy" run "$work/job.sql" >/dev/null 2>"$work/eddy.log" &
eddy_pid=$!
wait_for "SELECT count(*) FROM mirror" "$rows"
snapshot_done=$(now)
echo "snapshot:  $rows rows in $(python3 -c "print(f'{$snapshot_done - $started:.1f}')") s (start-up included): $(rate "$rows" "$started" "$snapshot_done") rows/s"

write_started=$(now)
sql "DO \$\$ BEGIN
       FOR batch IN 0 .. $rows / 1000 - 1 LOOP
         INSERT INTO orders SELECT $rows + batch * 1000 + g, g % 5000, g / 10.0, 'new', now()
           FROM generate_series(1, 1000) g;
         COMMIT;
       END LOOP;
       FOR batch IN 0 .. $rows / 2000 - 1 LOOP
         UPDATE orders SET status = 'paid', amount = amount + 1
           WHERE id > batch * 2000 AND id <= batch * 2000 + 1000;
         COMMIT;
       END LOOP;
     END \$\$" >/dev/null
written=$(now)
wait_for "SELECT count(*) FROM mirror WHERE status = 'paid'" "$((rows / 2))"
wait_for "SELECT count(*) FROM mirror" "$((rows * 2))"
streamed=$(now)
changes=$((rows + rows / 2))
echo "streaming: $changes changes ($rows inserts, $((rows / 2)) updates) written in $(python3 -c "print(f'{$written - $write_started:.1f}')") s, mirrored after $(python3 -c "print(f'{$streamed - $write_started:.1f}')") s: $(rate "$changes" "$write_started" "$streamed") changes/s"
[ "$(sql "SELECT count(*) FROM (SELECT * FROM orders EXCEPT SELECT * FROM mirror) d")" = 0 ] \
  || { echo "postgres-cdc.sh: the mirror differs from the table" >&2; exit 1; }
pkill -INT -P "$eddy_pid"  # eddy, not GNU time (which ignores SIGINT)
wait "$eddy_pid" || true
eddy_pid=""
echo "peak RSS of eddy run: $(awk -F': ' '/Maximum resident/ {printf "%.0f MiB", $2 / 1024}' "$work/time")"
