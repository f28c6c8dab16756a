#!/usr/bin/env python3
"""Checkpoint overhead and recovery time on a local cluster (release build).

1. Throughput of GROUP BY auction (COUNT/MAX) over Nexmark bids at parallelism 2 on a
   JobManager with two TaskManagers, without checkpoints and with 1 s exactly-once
   checkpoints; the number and median duration/size of the checkpoints taken.
2. Recovery: a throttled job with 1 s checkpoints; one TaskManager is SIGKILLed (a
   replacement is started at once) and we measure the time until the JobManager sees the
   restarted job's sink write again (status is polled every 20 ms; counters arrive with
   100 ms heartbeats).

3. Recovery with large state (`--state-row MB`, which prints only this, as a Markdown
   table): an unthrottled GROUP BY auction at p=2 with 1 s checkpoints runs until a
   checkpoint holds MB megabytes of keyed state; then a TaskManager is SIGKILLed and we
   measure the time until the restored job writes again, the checkpoint durations at
   that size, and what the first checkpoint after the restart wrote.

Usage: bench/recovery.sh [EVENTS]   (default 10000000 for the throughput part)
       bench/recovery.sh --state-row MB
"""
import json, os, signal, socket, statistics, subprocess, sys, tempfile, time

EDDY = os.environ.get("EDDY_BIN") or os.path.join(os.environ["CARGO_TARGET_DIR"], "release", "eddy")
STATE_ROW = sys.argv[1:2] == ["--state-row"]
EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 and not STATE_ROW else 10_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, workdir):
        self.port = free_port()
        self.address = f"http://127.0.0.1:{self.port}"
                # A directory of its own: a JobManager resumes the unfinished jobs it finds there.
        self.workdir = tempfile.mkdtemp(dir=workdir)
        self.procs = []
        self.jobmanager = self.spawn(["jobmanager", "--bind", f"127.0.0.1:{self.port}",
                                      "--checkpoint-dir", os.path.join(self.workdir, "chk"),
                                      "--heartbeat-interval-ms", "100", "--heartbeat-timeout-ms", "1000"])
        time.sleep(0.3)
        self.taskmanagers = [self.add_taskmanager() for _ in range(2)]
        time.sleep(1.0)

    def spawn(self, args):
        proc = subprocess.Popen([EDDY] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def add_taskmanager(self):
        return self.spawn(["taskmanager", "--jobmanager", self.address, "--slots", "2", "--bind", "127.0.0.1:0"])

    def cli(self, *args):
        out = subprocess.run([EDDY, *args, "--jobmanager", self.address], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def submit(self, script, parallelism):
        path = os.path.join(self.workdir, f"job-{time.time_ns()}.sql")
        with open(path, "w") as f:
            f.write(script)
        return self.cli("submit", "-p", str(parallelism), path)

    def status(self, job):
        return json.loads(self.cli("status", job, "--output", "json"))

    def close(self):
        for proc in self.procs:
            proc.kill()


def group_by(events, rate, interval):
    checkpointing = f"SET 'execution.checkpointing.interval' = '{interval}';\n" if interval else ""
    return checkpointing + f"""
CREATE TABLE bid (auction BIGINT, price BIGINT)
WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '{events}', 'events.rate' = '{rate}');
CREATE TABLE sink (auction BIGINT, bids BIGINT, max_price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
"""


def wait_finished(cluster, job):
    while True:
        status = cluster.status(job)
        if status["state"] in ("FINISHED", "FAILED", "CANCELLED"):
            return status
        time.sleep(0.05)


def throughput(workdir):
    rows = []
    for interval in (None, "1s"):
        cluster = Cluster(workdir)
        try:
            start = time.monotonic()
            job = cluster.submit(group_by(EVENTS, 0, interval), 2)
            status = wait_finished(cluster, job)
            elapsed = time.monotonic() - start
        finally:
            cluster.close()
        done = [c for c in status["checkpoints"] if c["state"] == "COMPLETED"]
        rows.append((interval or "off", EVENTS / elapsed, elapsed, done))
    base = rows[0][1]
    print(f"GROUP BY auction, p=2, 2 TaskManagers, {EVENTS} events:")
    for interval, rate, elapsed, done in rows:
        line = f"  checkpoints {interval:>3}: {rate / 1e6:.2f} M events/s ({elapsed:.2f} s)"
        if done:
            line += (f", {len(done)} checkpoints, median {statistics.median(c['duration_ms'] for c in done):.0f} ms, "
                     f"median size {statistics.median(c['size_bytes'] for c in done) / 1024:.0f} KiB, "
                     f"overhead {100 * (1 - rate / base):.1f} %")
        print(line)


def recovery(workdir):
    cluster = Cluster(workdir)
    try:
        job = cluster.submit(group_by(100_000_000, 200_000, "1s"), 4)
        while not [c for c in cluster.status(job)["checkpoints"] if c["state"] == "COMPLETED"]:
            time.sleep(0.05)
        time.sleep(0.5)
        noticed, restarted, written, status = kill_and_wait_for_output(cluster, job)
        print("Recovery (p=4, 2 TaskManagers, 1 s checkpoints, 200k events/s):")
        print(f"  SIGKILL -> failure noticed:        {1000 * noticed:.0f} ms")
        print(f"  SIGKILL -> job running again:      {1000 * restarted:.0f} ms")
        print(f"  SIGKILL -> first output restored:  {1000 * written:.0f} ms "
              f"(restored from checkpoint {status['restored_from']})")
    finally:
        cluster.close()


def sink_records(status):
    return sum(s["records_out"] for s in status["vertices"][-1]["subtasks"])


def kill_and_wait_for_output(cluster, job):
    """SIGKILLs the first TaskManager (starting a replacement) and polls every 20 ms;
    returns the seconds until the failure was noticed, the job ran again, and its sink
    wrote again, and the last status."""
    killed = time.monotonic()
    cluster.taskmanagers[0].send_signal(signal.SIGKILL)
    cluster.add_taskmanager()
    noticed = restarted = None
    while True:
        status = cluster.status(job)
        now = time.monotonic()
        if noticed is None and status["state"] != "RUNNING":
            noticed = now
        if noticed and status["state"] == "RUNNING" and restarted is None:
            restarted = now
        if restarted and sink_records(status) > 0:
            return noticed - killed, restarted - killed, now - killed, status
        if now - killed > 120:
            raise SystemExit("no output within 120 s of the kill")
        time.sleep(0.02)


def state_bytes(checkpoint):
    """What a restore of `checkpoint` reads (with incremental snapshots, more than it wrote)."""
    return checkpoint.get("full_size_bytes") or checkpoint["size_bytes"]


def state_row(workdir, megabytes):
    """The recovery row of the Nexmark table: ~`megabytes` MB of keyed state."""
    cluster = Cluster(workdir)
    try:
        job = cluster.submit(group_by(1_000_000_000, 0, "1s"), 2)
        started = time.monotonic()
        while True:
            done = [c for c in cluster.status(job)["checkpoints"] if c["state"] == "COMPLETED"]
            if done and state_bytes(done[-1]) >= megabytes * 1e6:
                break
            if time.monotonic() - started > 300:
                raise SystemExit(f"no checkpoint of {megabytes} MB within 300 s")
            time.sleep(0.1)
        large = [c for c in done if state_bytes(c) >= megabytes * 0.5e6]
        noticed, restarted, written, status = kill_and_wait_for_output(cluster, job)
        after = first_checkpoint_after_restart(cluster, job)
    finally:
        cluster.close()
    size = state_bytes(done[-1]) / 1e6
    durations = [c["duration_ms"] for c in large]
    print("| job | state at the kill | checkpoint duration at ≥ half that size (median, max) "
          "| SIGKILL → failure noticed | SIGKILL → running again | SIGKILL → first output |")
    print("|---|---|---|---|---|---|")
    print(f"| GROUP BY auction, Nexmark generator, p=2, 2 TaskManagers, 1 s checkpoints "
          f"| {size:.0f} MB (checkpoint {done[-1]['id']}; restored from "
          f"{status['restored_from']}) | {statistics.median(durations):.0f} ms, "
          f"{max(durations):.0f} ms ({len(durations)} checkpoints) | {1000 * noticed:.0f} ms "
          f"| {1000 * restarted:.0f} ms | {1000 * written:.0f} ms |")
    print(f"\nFirst checkpoint after the restart ({after['id']}): wrote "
          f"{after['size_bytes'] / 1e6:.1f} MB of {state_bytes(after) / 1e6:.1f} MB, "
          f"{after['duration_ms']} ms")


def first_checkpoint_after_restart(cluster, job):
    """The first checkpoint completed after the one the restarted job restored from."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = cluster.status(job)
        after = [c for c in status["checkpoints"]
                 if c["state"] == "COMPLETED" and c["id"] > status["restored_from"]]
        if after:
            return min(after, key=lambda c: c["id"])
        time.sleep(0.05)
    raise SystemExit("no checkpoint within 60 s of the restart")


def backpressure(workdir):
    """Aligned against unaligned checkpoints with a sink throttled to 1000 rows/s per
    subtask, so every channel is full when a barrier comes."""
    print("Checkpoints under backpressure (p=4, sink throttled to 1000 rows/s per subtask, 12 s):")
    for unaligned in ("false", "true"):
        script = (f"SET 'execution.checkpointing.unaligned' = '{unaligned}';\n"
                  + group_by(2_000_000, 40_000, "1s").replace(
                      "WITH ('connector' = 'blackhole')",
                      "WITH ('connector' = 'blackhole', 'rows-per-second' = '1000')"))
        cluster = Cluster(workdir)
        try:
            job = cluster.submit(script, 4)
            time.sleep(12)
            done = [c for c in cluster.status(job)["checkpoints"] if c["state"] == "COMPLETED"]
        finally:
            cluster.close()
        durations = [c["duration_ms"] for c in done]
        median = f"{statistics.median(durations):.0f} ms" if durations else "-"
        label = "unaligned" if unaligned == "true" else "aligned"
        print(f"  {label:>9}: {len(done)} checkpoints completed, median duration {median}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workdir:
        if STATE_ROW:
            state_row(workdir, float(sys.argv[2]) if len(sys.argv) > 2 else 100)
            sys.exit(0)
        throughput(workdir)
        recovery(workdir)
        backpressure(workdir)
