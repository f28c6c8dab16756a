#!/usr/bin/env bash
# Throughput of a hash-exchanged GROUP BY (Nexmark bids, COUNT/MAX per auction) at
# parallelism 4: on a cluster of a JobManager and two TaskManagers (2 slots each, separate
# processes on loopback, rows crossing between them over gRPC), and on the embedded cluster.
# Usage: bench/cluster.sh [EVENTS]   (default 10000000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-10000000}"
cargo build --release --quiet
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
sed "s/\${EVENTS}/$events/" bench/queries/group_by.sql > "$work/group_by.sql"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export EDDY_JOBMANAGER="http://127.0.0.1:$port"
"$eddy" jobmanager --bind "127.0.0.1:$port" & pids+=($!)
sleep 0.3
for i in 1 2; do "$eddy" taskmanager --slots 2 --bind 127.0.0.1:0 --id "bench-tm-$i" & pids+=($!); done
sleep 1.5

start=$(date +%s%N)
job=$("$eddy" submit -p 4 "$work/group_by.sql")
while true; do
  state=$("$eddy" status "$job" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  case "$state" in FINISHED) break ;; FAILED|CANCELLED) echo "job $state" >&2; exit 1 ;; esac
  sleep 0.1
done
cluster_ns=$(( $(date +%s%N) - start ))

start=$(date +%s%N)
"$eddy" run -p 4 "$work/group_by.sql"
embedded_ns=$(( $(date +%s%N) - start ))

rate() { awk -v n="$events" -v t="$1" 'BEGIN { printf "%.2f M events/s (%.2f s)", n / (t / 1e9) / 1e6, t / 1e9 }'; }
echo "GROUP BY auction, p=4, $events events:"
echo "  cluster (JobManager + 2 TaskManagers x 2 slots): $(rate $cluster_ns)"
echo "  embedded (one process):                         $(rate $embedded_ns)"
