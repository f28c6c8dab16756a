#!/usr/bin/env python3
"""Checkpoints against the size of the state, and recovery with large state, on the LSM
backend (release build, a local cluster: a JobManager and two TaskManagers).

Nexmark q20 (every bid joined with its category-10 auction, every column) at a fixed event
rate, so that the state grows by the same amount between checkpoints while what the job
holds grows without bound. Its join state lives in LSM stores (`state.backend.type` =
`rocksdb`), 256 MB of memory per slot. The script follows every completed checkpoint
(duration, bytes it wrote, bytes a restore reads) until one holds TARGETS' largest size;
once a checkpoint holds RECOVERY_GB it SIGKILLs a TaskManager (starting a replacement) and
measures the time until the restored job writes again.

Prints a Markdown table: the checkpoints around each size of TARGETS (within ±20 %), with
median and largest duration and bytes written, and the event rate reached meanwhile; then
the recovery. Every checkpoint goes to `$OUT` (default state-size.csv) as CSV.

Usage: bench/state-size.py [RATE] [TARGETS_GB] [RECOVERY_GB]
       (defaults 200000 events/s, "1 4 16", 4)
"""
import csv, json, os, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery  # noqa: E402
from recovery import kill_and_wait_for_output  # noqa: E402

RATE = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
TARGETS = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1 4 16").split()]
RECOVERY_GB = float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
OUT = os.environ.get("OUT", "state-size.csv")
PARALLELISM = 2
GB = 1e9


class Cluster(recovery.Cluster):
    """The benchmark's cluster, every process logging JSON into a file of the work
    directory. The JobManager's "checkpoint complete" lines give each checkpoint's bytes
    written and held (shared runs included, which the status API of builds before bec2675
    left out); the TaskManagers' "state restored" lines how long a restore fetched files
    and read them."""

    def spawn(self, args):
        log = os.path.join(self.workdir, f"{args[0]}-{len(self.procs)}.log")
        if args[0] == "jobmanager":
            self.log, self.log_read = log, 0
        env = dict(os.environ, EDDY_LOG="info", EDDY_LOG_FORMAT="json")
        proc = subprocess.Popen([recovery.EDDY] + args, stdout=subprocess.DEVNULL,
                                stderr=open(log, "w"), env=env)
        self.procs.append(proc)
        return proc

    def restores(self):
        """Each task's restore the TaskManagers logged: files, bytes, and milliseconds
        fetching them and restoring the operators from them."""
        found = []
        for name in sorted(os.listdir(self.workdir)):
            if not (name.startswith("taskmanager-") and name.endswith(".log")):
                continue
            with open(os.path.join(self.workdir, name), errors="replace") as log:
                for line in log:
                    if '"state restored"' in line:
                        found.append(json.loads(line).get("fields", {}))
        return found

    def new_checkpoints(self):
        """The checkpoints completed since the last call: id, duration, bytes written and
        held (the log is read on from where the last call stopped, whole lines only)."""
        done = []
        with open(self.log, errors="replace") as log:
            log.seek(self.log_read)
            for line in iter(log.readline, ""):
                if not line.endswith("\n"):
                    break
                self.log_read = log.tell()
                if '"checkpoint complete"' in line:
                    f = json.loads(line).get("fields", {})
                    done.append(dict(id=f["checkpoint"], duration_ms=f["duration_ms"],
                                     size_bytes=f["size"], full_size_bytes=f["full_size"]))
        return done


def state_bytes(checkpoint):
    return checkpoint["full_size_bytes"]


def job(rate):
    columns = {
        "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
               "dateTime TIMESTAMP(3), extra STRING",
        "auction": "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, "
                   "reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, "
                   "category BIGINT, extra STRING",
    }
    tables = "\n".join(
        f"CREATE TABLE {name} ({cols}) WITH ('connector' = 'nexmark', 'nexmark.table' = "
        f"'{name}', 'events.rate' = '{rate}');" for name, cols in columns.items())
    here = os.path.dirname(os.path.abspath(__file__))
    sinks = open(os.path.join(here, "queries/nexmark/sinks.sql")).read()
    query = open(os.path.join(here, "queries/nexmark/q20.sql")).read()
    return f"""SET 'state.backend.type' = 'rocksdb';
SET 'state.backend.rocksdb.memory.fixed-per-slot' = '256mb';
SET 'execution.checkpointing.interval' = '10s';
{tables}
{sinks}
{query}"""


def source_records(status):
    """Bids the bid source has emitted in this run of the job (its vertex is named after
    the table)."""
    sources = [v for v in status["vertices"] if v["name"].endswith(":bid")]
    return sum(s["records_out"] for v in sources for s in v["subtasks"])


def follow(cluster, job_id):
    """Polls the job until a checkpoint holds the largest target; SIGKILLs a TaskManager
    once one holds RECOVERY_GB. Returns the checkpoints seen (with the rate of bids between
    each and the one before) and the recovery's timings."""
    seen, recovery, last = {}, None, None
    deadline = time.monotonic() + 3 * 3600
    while time.monotonic() < deadline:
        status = cluster.status(job_id)
        if status["state"] in ("FAILED", "CANCELLED", "FINISHED"):
            raise SystemExit(f"the job ended: {status['state']} {status['reason']}")
        now, events = time.monotonic(), source_records(status)
        for c in cluster.new_checkpoints():
            rate = None
            if last and events >= last[1] and now > last[0]:
                rate = (events - last[1]) / (now - last[0])
            seen[c["id"]] = dict(c, bids_per_s=rate)
            last = (now, events)
            print(f"checkpoint {c['id']}: holds {state_bytes(c) / GB:.2f} GB, wrote "
                  f"{c['size_bytes'] / 1e6:.0f} MB in {c['duration_ms']} ms", file=sys.stderr)
        newest = max(seen.values(), key=lambda c: c["id"], default=None)
        if newest and recovery is None and state_bytes(newest) >= RECOVERY_GB * GB:
            noticed, restarted, written, after = kill_and_wait_for_output(cluster, job_id)
            recovery = dict(state=state_bytes(newest), restored_from=after["restored_from"],
                            noticed=noticed, restarted=restarted, written=written)
            last = None
        if newest and state_bytes(newest) >= max(TARGETS) * GB:
            return list(seen.values()), recovery
        time.sleep(0.5)
    raise SystemExit("the largest state was not reached within 3 hours")


def report(checkpoints, recovery):
    print(f"q20 at {RATE} events/s, p={PARALLELISM}, 2 TaskManagers, LSM backend, 256 MB a slot, "
          "10 s checkpoints\n")
    print("| state held | checkpoints | duration: median, largest | written: median, largest "
          "| bids/s |")
    print("|---|---|---|---|---|")
    for target in TARGETS:
        near = [c for c in checkpoints if abs(state_bytes(c) / GB - target) <= 0.2 * target]
        if not near:
            print(f"| {target:g} GB | none | | | |")
            continue
        durations = [c["duration_ms"] for c in near]
        written = [c["size_bytes"] / 1e6 for c in near]
        rates = [c["bids_per_s"] for c in near if c["bids_per_s"]]
        rate = f"{statistics.median(rates) / 1e3:.0f} k" if rates else "-"
        print(f"| {target:g} GB | {len(near)} | {statistics.median(durations):.0f} ms, "
              f"{max(durations)} ms | {statistics.median(written):.0f} MB, {max(written):.0f} MB "
              f"| {rate} |")
    if recovery:
        print(f"\nA TaskManager SIGKILLed at {recovery['state'] / GB:.2f} GB of state (restored "
              f"from checkpoint {recovery['restored_from']}): failure noticed after "
              f"{1000 * recovery['noticed']:.0f} ms, running again after "
              f"{1000 * recovery['restarted']:.0f} ms, first output after "
              f"{1000 * recovery['written']:.0f} ms.")
        restores = [r for r in recovery["restores"] if r.get("bytes")]
        if restores:
            print("\nThe restores of the tasks with state (fetching the files a checkpoint "
                  "refers to, then restoring the operators from them):\n")
            print("| task files | bytes | fetch | restore |")
            print("|---|---|---|---|")
            for r in restores:
                print(f"| {r['files']} | {r['bytes'] / 1e6:.0f} MB | {r['fetch_ms']} ms "
                      f"| {r['restore_ms']} ms |")


def main():
    with tempfile.TemporaryDirectory(dir=os.environ.get("WORKDIR")) as workdir:
        cluster = Cluster(workdir)
        try:
            job_id = cluster.submit(job(RATE), PARALLELISM)
            checkpoints, recovery = follow(cluster, job_id)
            if recovery:
                # Read at the end: a task may still be restoring at the first output.
                recovery["restores"] = cluster.restores()
        finally:
            cluster.close()
    with open(OUT, "w", newline="") as f:
        fields = ["id", "full_size_bytes", "size_bytes", "duration_ms", "alignment_ms",
                  "bids_per_s"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(sorted(checkpoints, key=lambda c: c["id"]))
    report(checkpoints, recovery)


if __name__ == "__main__":
    main()
