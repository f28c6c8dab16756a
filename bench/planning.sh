#!/usr/bin/env bash
# Planning long and deep SQL, release build: `eddy explain` of generated scripts (an OR of
# 10 000 equalities, which becomes an IN list; an IN list of 10 000 values; an OR of 10 000
# comparisons, balanced; a chain of 500 `+`, the longest accepted; 200 views on views;
# 1 000 UNION ALL branches) and of a few refused past a limit. Prints the median wall time
# of RUNS runs and the peak resident memory (GNU time's maximum RSS) of each.
# Usage: bench/planning.sh [RUNS] [EDDY]   (defaults 5 and the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
runs="${1:-5}"
eddy="${2:-}"
if [ -z "$eddy" ]; then
  cargo build --release --quiet --bin eddy
  eddy="$CARGO_TARGET_DIR/release/eddy"
fi
[ -x /usr/bin/time ] || { echo "planning.sh: GNU time is missing: apt-get install time" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
tables = ("CREATE TABLE s (a BIGINT) WITH ('connector' = 'datagen');\n"
          "CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n")
def write(name, body):
    open(f"{work}/{name}.sql", "w").write(tables + body + "\n")
n = 10_000
write("or-equalities-10000", "INSERT INTO o SELECT a FROM s WHERE " + " OR ".join(f"a = {i}" for i in range(n)) + ";")
write("in-list-10000", "INSERT INTO o SELECT a FROM s WHERE a IN (" + ", ".join(str(i) for i in range(n)) + ");")
write("or-comparisons-10000", "INSERT INTO o SELECT a FROM s WHERE " + " OR ".join(f"a > {i}" for i in range(n)) + ";")
write("plus-chain-500", "INSERT INTO o SELECT " + " + ".join(["a"] * 500) + " FROM s;")
views = "CREATE VIEW v0 AS SELECT a FROM s;\n" + "".join(f"CREATE VIEW v{i} AS SELECT a + 1 AS a FROM v{i-1};\n" for i in range(1, 200))
write("views-200", views + "INSERT INTO o SELECT a FROM v199;")
write("union-all-1000", "INSERT INTO o " + " UNION ALL ".join(["SELECT a FROM s"] * 1_000) + ";")
write("refused-plus-chain-100000", "INSERT INTO o SELECT " + "+".join(["a"] * 100_000) + " FROM s;")
write("refused-operators-300000", "INSERT INTO o SELECT " + "+".join(["1"] * 300_000) + " FROM s;")
PY

echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $runs runs each, $(basename "$eddy") at $eddy"
echo
echo "| script | outcome | wall time (median) | peak RSS |"
echo "|---|---|---|---|"
for script in "$work"/*.sql; do
  name="$(basename "$script" .sql)"
  walls=() peak=0 outcome=planned
  for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    if ! /usr/bin/time -f "%M" -o "$work/rss" "$eddy" explain "$script" > /dev/null 2> "$work/err"; then
      outcome="refused: $(grep -o 'statement [a-z ]*too [a-z]*\|query [a-z ]*too [a-z]*' "$work/err" | head -1)"
    fi
    walls+=($(( ($(date +%s%N) - start) / 1000000 )))
    rss=$(tail -1 "$work/rss")
    [ "$rss" -gt "$peak" ] && peak=$rss
  done
  wall=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  echo "| $name | $outcome | $wall ms | $((peak / 1024)) MiB |"
done
