#!/usr/bin/env bash
# Throughput of a hash-exchanged GROUP BY (Nexmark bids, COUNT/MAX per auction) at
# parallelism 4: on a cluster of a JobManager and two TaskManagers (2 slots each, separate
# processes on loopback, rows crossing between them over gRPC), in plain text and with
# TLS on every connection (mutual between the daemons) and tokens, and on the embedded
# cluster.
# Usage: bench/cluster.sh [EVENTS] [RUNS]   (default 10000000 events, 1 run of each)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
events="${1:-10000000}"
runs="${2:-1}"
cargo build --release --quiet
eddy="$CARGO_TARGET_DIR/release/eddy"
work="$(mktemp -d)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
sed "s/\${EVENTS}/$events/" bench/queries/group_by.sql > "$work/group_by.sql"

"$eddy" cert --out "$work/certs" node 2>/dev/null
"$eddy" token bench --append "$work/tokens" > "$work/token"

# Runs the job on a fresh cluster, with TLS and tokens when $1 is "tls"; prints nanoseconds.
cluster_run() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  (
    export EDDY_JOBMANAGER="http://127.0.0.1:$port"
    if [ "$1" = tls ]; then
      export EDDY_TLS_CERT="$work/certs/node.pem" EDDY_TLS_KEY="$work/certs/node-key.pem"
      export EDDY_TLS_CA="$work/certs/ca.pem" EDDY_TOKEN_FILE="$work/tokens"
      export EDDY_TOKEN="$(cat "$work/token")"
    fi
    local daemons=()
    "$eddy" jobmanager --bind "127.0.0.1:$port" --checkpoint-dir "$work/checkpoints" & daemons+=($!)
    sleep 0.3
    for i in 1 2; do "$eddy" taskmanager --slots 2 --bind 127.0.0.1:0 --id "bench-tm-$i" & daemons+=($!); done
    sleep 1.5
    local start job state
    start=$(date +%s%N)
    job=$("$eddy" submit -p 4 "$work/group_by.sql")
    while true; do
      state=$("$eddy" status "$job" --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
      case "$state" in FINISHED) break ;; FAILED|CANCELLED) echo "job $state" >&2; exit 1 ;; esac
      sleep 0.1
    done
    echo $(( $(date +%s%N) - start ))
    kill "${daemons[@]}" 2>/dev/null
    wait 2>/dev/null || true
  )
}

rate() { awk -v n="$events" -v t="$1" 'BEGIN { printf "%.2f M events/s (%.2f s)", n / (t / 1e9) / 1e6, t / 1e9 }'; }
plain=() tls=()
for _ in $(seq "$runs"); do
  plain+=("$(cluster_run plain)")
  tls+=("$(cluster_run tls)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
cluster_ns=$(median "${plain[@]}")
tls_ns=$(median "${tls[@]}")

start=$(date +%s%N)
"$eddy" run -p 4 "$work/group_by.sql"
embedded_ns=$(( $(date +%s%N) - start ))

echo "GROUP BY auction, p=4, $events events (median of $runs):"
echo "  cluster (JobManager + 2 TaskManagers x 2 slots): $(rate $cluster_ns)"
echo "  the same with TLS everywhere and tokens:          $(rate $tls_ns)"
echo "  embedded (one process):                         $(rate $embedded_ns)"
