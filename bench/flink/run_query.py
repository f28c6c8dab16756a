"""Runs one Nexmark query of bench/queries/nexmark on Apache Flink (PyFlink's local
cluster) in streaming mode at parallelism 1, over tables declared in a file, with Flink's
RocksDB state backend and checkpoints every 10 s, its rows discarded by the blackhole sinks
of bench/queries/nexmark/sinks.sql. For bench/flink-vs-eddy.sh, which measures it.

Usage: ~/flink-venv/bin/python bench/flink/run_query.py TABLES.sql QUERY.sql WORK_DIR
"""
import pathlib
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]


def statements(path: pathlib.Path) -> list[str]:
    """The statements of a SQL file, comments dropped."""
    text = "\n".join(
        line for line in path.read_text().splitlines() if not line.lstrip().startswith("--")
    )
    return [s.strip() for s in text.split(";") if s.strip()]


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
    for statement in statements(tables) + statements(ROOT / "bench/queries/nexmark/sinks.sql"):
        env.execute_sql(statement)
    (insert,) = statements(query)
    env.execute_sql(insert).wait()


if __name__ == "__main__":
    main()
