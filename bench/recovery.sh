#!/usr/bin/env bash
# Checkpoint overhead and recovery time on a local cluster; see recovery.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
cargo build --release --quiet
python3 bench/recovery.py "$@"
