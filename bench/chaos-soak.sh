#!/usr/bin/env bash
# Chaos soak: bench/chaos-soak.sh [KILLS] [RUNS] [RATE]
#
# Each run starts PostgreSQL, an S3-compatible server (moto), a Kafka-protocol broker
# (noida-db), a JobManager and three TaskManagers, and runs an exactly-once job into all of
# them (see integration-tests/soak.rs) while KILLS failures land 2-4 s apart: TaskManagers
# SIGKILLed and replaced, the JobManager SIGKILLed and restarted on the same port and
# storage (at least a third), TaskManagers cut off past the heartbeat timeout, and
# replacements started with failpoints; and as many faults of the external systems
# (EDDY_SOAK_EXTERNAL=0 turns them off): PostgreSQL restarted or its sessions ended
# mid-commit, the broker frozen past its clients' request timeouts
# (EDDY_SOAK_BROKER_RESTARTS=1 restarts it instead: noida-db loses transactions across
# restarts), S3 behind a fault-injecting proxy answering 503s or hanging. The output is
# compared with a failure-free run of the same job; every run prints its failures, restarts, rows checked and each difference.
# Beside that job, a postgres-cdc job mirrors a table (20 000 rows, then a writer's
# transactions of inserts, updates, key changes and deletes, some rolled back) and keeps
# its per-customer totals, into PostgreSQL exactly once, through the same failures; after
# them the mirror must equal the table and the totals the same query on it, and a cancel
# must leave no slot or publication.
# A third job part joins every bid with its auction (a regular join: all bids kept) and totals
# them per category into PostgreSQL; a fourth totals a LEFT interval join (auctions with the
# bids of their first 5 s) per category and an event-time temporal join (bids with their
# bidder as of the bid) per state, into PostgreSQL. EDDY_SOAK_STATE_BACKEND=rocksdb runs the
# soaked job (not the failure-free one) on the LSM state backend with EDDY_SOAK_STATE_MEMORY
# (default 2mb) a subtask, so most of its keyed state lives on disk and in shared runs.
# EDDY_SOAK_HA=1 runs two JobManagers electing a leader: a JobManager failure is then the
# leader SIGKILLed (a new standby takes its ports) or paused past its lease and woken.
# The job runs with every option at its default but for a shorter restart backoff (100 ms
# to 1 s): the restart budget is Flink's default, unlimited (it resets after an hour without
# failing). The long mode is the same with more failures a run, e.g. `bench/chaos-soak.sh
# 300 1` (about half an hour; events grow with KILLS so the job outlasts them).
# RATE is the source's events per second (default 20000). EDDY_TEST_SEED replays a run;
# EDDY_SOAK_PROFILE=dev soaks the debug build the test suite already built (default: a
# release build).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
export EDDY_SOAK_KILLS="${1:-50}"
export EDDY_SOAK_RUNS="${2:-1}"
export EDDY_SOAK_RATE="${3:-20000}"
for tool in moto_server python3; do
  command -v "$tool" >/dev/null || { echo "chaos-soak: $tool is missing (.ci/run installs the test services)" >&2; exit 1; }
done
python3 -c 'import noida_db' 2>/dev/null || { echo "chaos-soak: noida-db is missing: pip install noida-db==0.2.3" >&2; exit 1; }
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "chaos-soak: PostgreSQL is missing: apt-get install postgresql" >&2; exit 1; }
profile="${EDDY_SOAK_PROFILE:-release}"
exec cargo test --profile "$profile" --test integration -- --ignored --exact soak::chaos_soak --nocapture
