"""Runs one Nexmark query of bench/queries/nexmark on Apache Flink (PyFlink's local
cluster) in streaming mode at parallelism 1, over tables declared in a file, with Flink's
RocksDB state backend and checkpoints every 10 s, its rows discarded by the blackhole sinks
of bench/queries/nexmark/sinks.sql. The tables file may set options and declare Python
functions as Eddy's scripts do (see eddy_scripts.py). For bench/flink-vs-eddy.sh and
bench/udfs.sh, which measure it.

Usage: ~/flink-venv/bin/python bench/flink/run_query.py TABLES.sql QUERY.sql WORK_DIR
"""
import pathlib
import sys

import eddy_scripts
from pyflink.table import EnvironmentSettings, TableEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main() -> None:
    tables, query, work = (pathlib.Path(a) for a in sys.argv[1:4])
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    for key, value in {
        "parallelism.default": "1",
        "table.local-time-zone": "UTC",
        "state.backend.type": "rocksdb",
        "state.backend.incremental": "true",
        "state.backend.rocksdb.localdir": str(work / "flink-state"),
        "state.backend.rocksdb.memory.managed": "true",
        "taskmanager.memory.managed.size": "256mb",
        "execution.checkpointing.interval": "10s",
        "execution.checkpointing.dir": f"file://{work / 'flink-checkpoints'}",
    }.items():
        config.set(key, value)
    eddy_scripts.python_on_this_interpreter(config)
    sinks = ROOT / "bench/queries/nexmark/sinks.sql"
    for statement in eddy_scripts.statements(tables.read_text() + ";" + sinks.read_text()):
        eddy_scripts.execute(env, statement)
    (insert,) = eddy_scripts.statements(query.read_text())
    env.execute_sql(insert).wait()


if __name__ == "__main__":
    main()
