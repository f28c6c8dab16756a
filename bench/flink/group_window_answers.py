"""Apache Flink's answers to the group-window queries of integration-tests/group_windows/.

Each `NAME.sql` there is a query over the table `clicks` (the rows of `clicks.csv`, event
time `ts` with a watermark 1 s behind). Flink runs it in streaming mode and its final rows,
each written as `v1, v2, ...` and sorted, go to `NAME.flink`. The integration test compares
Eddy's rows with these; it does not need Flink.

Usage: ~/flink-venv/bin/python bench/flink/group_window_answers.py
(PyFlink from PyPI: python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0)
"""

import pathlib

from pyflink.common import RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment

DIR = pathlib.Path(__file__).resolve().parents[2] / "integration-tests" / "group_windows"


def clicks_table(csv):
    return f"""CREATE TABLE clicks (ts TIMESTAMP(3), user_id BIGINT, amount BIGINT,
      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
      WITH ('connector' = 'filesystem', 'path' = '{csv}', 'format' = 'csv')"""


def final_rows(env, query):
    rows = {}
    with env.execute_sql(query).collect() as results:
        for row in results:
            line = ", ".join("null" if v is None else str(v) for v in row)
            if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                rows[line] = rows.get(line, 0) + 1
            else:
                rows[line] -= 1
    return sorted(line for line, n in rows.items() for _ in range(n))


def main():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    env.get_config().set("table.local-time-zone", "UTC")
    env.execute_sql(clicks_table(DIR / "clicks.csv"))
    for query in sorted(DIR.glob("*.sql")):
        rows = final_rows(env, query.read_text())
        query.with_suffix(".flink").write_text("".join(f"{r}\n" for r in rows))
        print(f"{query.name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
