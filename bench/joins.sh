#!/usr/bin/env bash
# Interval join against the same join without the bound the planner recognises
# (bench/queries/joins/): events/s and peak RSS of each, at parallelism 1, release build.
# Usage: bench/joins.sh [EVENTS]     (default 10000000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-10000000}"
cargo build --release --quiet --bin eddy
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "| join | events | events/s | peak RSS |"
echo "|---|---|---|---|"
for join in interval regular; do
  sed "s/\$EVENTS/$events/g" "bench/queries/joins/$join.sql" > "$work/job.sql"
  (cd "$work" && /usr/bin/time -f "%e %M" -o "$work/times" "$eddy" run -p 1 "$work/job.sql" >/dev/null 2>&1)
  read -r wall rss_kb < "$work/times"
  python3 -c "import sys; e, w, r = map(float, sys.argv[1:]); print(f'| $join | {int(e)} | {e / w:,.0f} | {r / 1024:.0f} MB |')" "$events" "$wall" "$rss_kb"
done
