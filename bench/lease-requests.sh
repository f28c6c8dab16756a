#!/usr/bin/env bash
# What the leader lease costs in storage requests, measured at the S3 server: a moto server
# on loopback logs every request; one JobManager leads alone for SECONDS, then a second one
# stands by beside it for SECONDS; the requests under `_leader/` are counted per method and
# per second. No job runs (a job's commit log costs its own requests per checkpoint).
# Usage: bench/lease-requests.sh [SECONDS]   (default 60; the default lease: 10s, renewed
#        every 2s). EDDY_BIN=path uses that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
seconds="${1:-60}"
if [ -z "${EDDY_BIN:-}" ]; then
  cargo build --release --quiet --bin eddy
  EDDY_BIN="$CARGO_TARGET_DIR/release/eddy"
fi
command -v moto_server >/dev/null || { echo "lease-requests: moto_server is missing (pip install 'moto[server]')" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

s3_port="$(free_port)"
moto_server -H 127.0.0.1 -p "$s3_port" >"$work/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -s "http://127.0.0.1:$s3_port/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -s -X PUT "http://127.0.0.1:$s3_port/eddy" >/dev/null
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
export AWS_ENDPOINT="http://127.0.0.1:$s3_port" AWS_ALLOW_HTTP=true

jobmanager() {
  local port
  port="$(free_port)"
  "$EDDY_BIN" jobmanager --bind "127.0.0.1:$port" --checkpoint-dir s3://eddy/lease \
    --high-availability object-store --advertise "http://127.0.0.1:$port" \
    >"$work/jm-$port.log" 2>&1 &
  pids+=($!)
}

# Requests under _leader/ logged so far, by method.
leader_requests() { grep '_leader' "$work/moto.log" | grep -oE '"(GET|PUT|DELETE|HEAD|POST) ' | tr -d '" ' | sort | uniq -c; }
count() { grep -c '_leader' "$work/moto.log" || true; }

jobmanager
sleep 3 # it takes the lease
start="$(count)"
sleep "$seconds"
alone=$(($(count) - start))
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); command: bench/lease-requests.sh $seconds"
echo
echo "| JobManagers | requests under _leader/ in ${seconds} s | per second |"
echo "|---|---|---|"
awk -v n="$alone" -v s="$seconds" 'BEGIN { printf "| the leader alone | %d | %.2f |\n", n, n / s }'
jobmanager
sleep 1
start="$(count)"
sleep "$seconds"
both=$(($(count) - start))
awk -v n="$both" -v s="$seconds" 'BEGIN { printf "| the leader and one standby | %d | %.2f |\n", n, n / s }'
echo
echo "By method over the whole run (both phases):"
leader_requests
