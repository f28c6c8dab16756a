#!/usr/bin/env bash
# File formats: the same Nexmark bids written by `eddy run` (release build, parallelism 1)
# into local files as CSV, JSON and Parquet (exactly once, 10 s checkpoints), then read back
# whole (a COUNT and SUM over every column, so no reader can skip one) and by one column
# (SUM(price): Parquet reads that column only), and, reading the two long text columns,
# with a WHERE no row passes, once as a
# bound of the scan (`price < 0`: Parquet skips every row group by its statistics) and once
# hidden in an expression (`price * 2 < 0`: every row is read and filtered). Prints rows/s
# of each (over the job's wall time, start-up included), CPU-seconds, and bytes on disk.
# Usage: bench/formats.sh [EVENTS]   (default 4000000 Nexmark events, 46 of 50 are bids)
#        EDDY_BIN=path runs that eddy binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-4000000}"
bids=$(( events / 50 * 46 ))
if [ -n "${EDDY_BIN:-}" ]; then
  eddy="$EDDY_BIN"
else
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
columns="auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING"

# Runs a script; prints "wall-seconds cpu-seconds".
timed() {
  local script="$1" start end
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$work/time" "$eddy" run "$script" >/dev/null
  end=$(date +%s.%N)
  read -r user sys < "$work/time"
  echo "$(echo "$end - $start" | bc) $(echo "$user + $sys" | bc)"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "$events Nexmark events = $bids bids, parallelism 1"
echo
echo "| format | write rows/s | write CPU-s | bytes on disk | bytes/row | read rows/s | read CPU-s | one column rows/s | one column CPU-s | no row passes, hidden: wall-s / CPU-s | no row passes, bound: wall-s / CPU-s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for format in csv json parquet; do
  dir="$work/$format"
  cat > "$work/write.sql" <<SQL
SET 'execution.checkpointing.interval' = '10s';
SET 'execution.checkpointing.dir' = '$work/checkpoints-$format';
CREATE TABLE bid ($columns) WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid',
  'events.num' = '$events');
CREATE TABLE files ($columns) WITH ('connector' = 'filesystem', 'path' = '$dir',
  'format' = '$format');
INSERT INTO files SELECT * FROM bid;
SQL
  cat > "$work/read.sql" <<SQL
CREATE TABLE files ($columns) WITH ('connector' = 'filesystem', 'path' = '$dir',
  'format' = '$format');
CREATE TABLE total (n BIGINT, s BIGINT, chars BIGINT, t TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO total SELECT COUNT(*), SUM(auction + bidder + price),
  SUM(CHAR_LENGTH(channel) + CHAR_LENGTH(url) + CHAR_LENGTH(extra)), MAX(dateTime) FROM files;
SQL
  cat > "$work/narrow.sql" <<SQL
CREATE TABLE files ($columns) WITH ('connector' = 'filesystem', 'path' = '$dir',
  'format' = '$format');
CREATE TABLE total (s BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO total SELECT SUM(price) FROM files;
SQL
  # A filter no bid passes (prices are positive): as a bound of the scan, and hidden in an
  # expression, which no reader can use.
  for filter in bound hidden; do
    condition="price < 0"
    [ "$filter" = hidden ] && condition="price * 2 < 0"
    cat > "$work/$filter.sql" <<SQL
CREATE TABLE files ($columns) WITH ('connector' = 'filesystem', 'path' = '$dir',
  'format' = '$format');
CREATE TABLE total (n BIGINT, chars BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO total SELECT COUNT(*), SUM(CHAR_LENGTH(url) + CHAR_LENGTH(extra)) FROM files
  WHERE $condition;
SQL
  done
  read -r write_wall write_cpu <<< "$(timed "$work/write.sql")"
  bytes=$(du -sb "$dir" | cut -f1)
  read -r read_wall read_cpu <<< "$(timed "$work/read.sql")"
  read -r narrow_wall narrow_cpu <<< "$(timed "$work/narrow.sql")"
  read -r hidden_wall hidden_cpu <<< "$(timed "$work/hidden.sql")"
  read -r bound_wall bound_cpu <<< "$(timed "$work/bound.sql")"
  printf '| %s | %.0f | %.1f | %s | %.1f | %.0f | %.1f | %.0f | %.1f | %.2f / %.2f | %.2f / %.2f |\n' \
    "$format" "$(echo "$bids / $write_wall" | bc -l)" "$write_cpu" "$bytes" \
    "$(echo "$bytes / $bids" | bc -l)" "$(echo "$bids / $read_wall" | bc -l)" "$read_cpu" \
    "$(echo "$bids / $narrow_wall" | bc -l)" "$narrow_cpu" \
    "$hidden_wall" "$hidden_cpu" "$bound_wall" "$bound_cpu"
done
