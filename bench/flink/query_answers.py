"""Apache Flink's answers to the queries of a test directory.

A directory (e.g. integration-tests/top_n) holds `tables.sql`, the statements that create
its tables (`$DIR` stands for the directory), and queries `NAME.sql`, each one SELECT.
Flink runs every query in streaming mode at parallelism 1 in UTC, applies its changelog,
and writes the final rows, each as `v1, v2, ...` and sorted, to `NAME.flink`. A query Flink
refuses gets `NAME.flink` holding one line: `error (N columns): ` and the start of Flink's
message.
The integration tests compare Eddy's final rows with these files; they do not need Flink.

Usage: ~/flink-venv/bin/python bench/flink/query_answers.py DIR [QUERY ...]
(PyFlink from PyPI: python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0)
"""

import pathlib
import sys

from pyflink.common import RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment


def value(v):
    """A value as Eddy's print sink writes it (NULL as `null`, floats as Arrow does)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
        return f"{v:.1f}"
    return str(v)


def final_rows(env, query):
    rows = {}
    with env.execute_sql(query).collect() as results:
        for row in results:
            line = ", ".join(value(v) for v in row)
            if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                rows[line] = rows.get(line, 0) + 1
            else:
                rows[line] -= 1
    return sorted(line for line, n in rows.items() for _ in range(n))


def answer(env, query):
    """The final rows of `query` as text, or why Flink refuses to plan it. (A failure while
    the job runs is not an answer: it stops the script.)"""
    columns = 0
    try:
        plan = env.sql_query(query)
        columns = len(plan.get_schema().get_field_names())
        plan.explain()
    except Exception as error:
        message = str(error).strip().splitlines()[0][:300]
        return f"error ({columns} columns): {message}\n"
    return "".join(f"{r}\n" for r in final_rows(env, query))


def environment(directory):
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    env.get_config().set("table.local-time-zone", "UTC")
    tables = (directory / "tables.sql").read_text().replace("$DIR", str(directory))
    for statement in tables.split(";"):
        if statement.strip():
            env.execute_sql(statement)
    return env


def main():
    directory = pathlib.Path(sys.argv[1]).resolve()
    only = set(sys.argv[2:])
    env = environment(directory)
    for query in sorted(directory.glob("*.sql")):
        if query.name == "tables.sql" or (only and query.stem not in only):
            continue
        text = answer(env, query.read_text())
        print(f"{query.name}: {text if text.startswith('error') else text.count(chr(10))}")
        query.with_suffix(".flink").write_text(text)


if __name__ == "__main__":
    main()
