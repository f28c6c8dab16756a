#!/usr/bin/env python3
"""Runs a command and every process it starts in memory and cpuacct cgroups (v1, as root),
the memory capped, and prints one line of JSON: whether it finished, wall seconds, CPU
seconds of all its processes, peak RSS summed over its processes (sampled every 100 ms),
and the memory cgroup's peak (page cache included).

Usage: bench/cgroup-run.py CAP_BYTES -- COMMAND ...  (stdout and stderr of the command go
to the files named by $OUT and $ERR, /dev/null when unset)
"""
import json
import os
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup"


def group(controller: str) -> str:
    path = f"{ROOT}/{controller}/eddy-bench-{os.getpid()}"
    os.makedirs(path, exist_ok=True)
    return path


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def rss_of(pids: list[str]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def main() -> None:
    cap, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    memory, cpu = group("memory"), group("cpuacct")
    with open(f"{memory}/memory.limit_in_bytes", "w") as f:
        f.write(cap)
    out = open(os.environ.get("OUT", "/dev/null"), "w")
    err = open(os.environ.get("ERR", "/dev/null"), "w")

    def enter() -> None:
        for path in (memory, cpu):
            with open(f"{path}/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    start = time.monotonic()
    process = subprocess.Popen(command, stdout=out, stderr=err, preexec_fn=enter)
    peak_rss = 0
    while process.poll() is None:
        peak_rss = max(peak_rss, rss_of(read(f"{memory}/cgroup.procs").split()))
        time.sleep(0.1)
    wall = time.monotonic() - start
    oom_kills = [
        int(line.split()[1])
        for line in read(f"{memory}/memory.oom_control").splitlines()
        if line.startswith("oom_kill ")
    ]
    result = {
        "finished": process.returncode == 0,
        "exit": process.returncode,
        "oom_killed": sum(oom_kills) > 0,
        "wall_s": round(wall, 2),
        "cpu_s": round(int(read(f"{cpu}/cpuacct.usage")) / 1e9, 2),
        "peak_rss_mb": peak_rss // 2**20,
        "cgroup_peak_mb": int(read(f"{memory}/memory.max_usage_in_bytes")) // 2**20,
    }
    print(json.dumps(result))
    for path in (memory, cpu):
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.1)


if __name__ == "__main__":
    main()
