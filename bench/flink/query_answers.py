"""Apache Flink's answers to the queries of a test directory.

A directory (e.g. integration-tests/top_n) holds `tables.sql`, the statements that create
its tables (`$DIR` stands for the directory), and queries `NAME.sql`: each one SELECT, or
one `INSERT INTO sink SELECT ...` whose SELECT is taken. With `--queries QDIR` the queries
come from QDIR instead (the benchmark's Nexmark queries). With a `data.sql` in the
directory, Eddy first runs it to write the tables' data into a temporary directory (`$DATA`
in both files): Eddy's Nexmark generator, dumped as CSV.

Flink runs every query in streaming mode at parallelism 1 in UTC, casts its columns to
STRING (as the tests' sink casts Eddy's), and writes the rows its changelog ends with,
each as `v1, v2, ...` and sorted, to `NAME.flink` in the
directory. (Queries listed in the directory's `batch-mode.txt` are answered by Flink in
batch mode, with the reason there.) A query Flink refuses to plan gets `NAME.flink` holding one line:
`error (N columns): ` and the start of Flink's message. The integration tests compare
Eddy's final rows with these files; they do not need Flink.

Usage: ~/flink-venv/bin/python bench/flink/query_answers.py DIR [--queries QDIR] [NAME ...]
(EDDY_BIN: the eddy binary that writes data.sql's data; else `cargo run` builds one)
(PyFlink from PyPI: python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0)
"""

import argparse
import os
import pathlib
import re
import subprocess
import tempfile

import eddy_scripts
from pyflink.common import RowKind
from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.expressions import col, concat, lit

ROOT = pathlib.Path(__file__).resolve().parents[2]


def counted_lines(env, query):
    """`query`'s rows as lines (every column cast to STRING by Flink, as the tests' sink
    casts Eddy's, joined by `, `), counted per distinct line. Flink may send a query's
    updates to `collect()` as an upsert stream on a key it does not say (a Top-1 sends
    `+U` rows only); counting by the line, an aggregate that needs the retractions,
    makes every change name its row."""
    table = env.sql_query(query)
    names = table.get_schema().get_field_names()
    parts = []
    for i, name in enumerate(names):
        if i:
            parts.append(lit(", "))
        parts.append(col(name).cast(DataTypes.STRING()).if_null("null"))
    line = concat(*parts).alias("line")
    return (
        table.select(line)
        .group_by(col("line"))
        .select(col("line"), lit(1).count.alias("n"))
    )


def select_of(text):
    """The SELECT of a query file (comments dropped, an `INSERT INTO sink` head cut)."""
    body = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))
    body = body.strip().rstrip(";")
    return re.sub(r"^INSERT\s+INTO\s+\S+\s+", "", body, flags=re.IGNORECASE)


def final_rows(table):
    """The lines `table` ends with: each change sets (or, retracting, removes) a count."""
    counts = {}
    with table.execute().collect() as results:
        for row in results:
            line, n = row[0], row[1]
            if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                counts[line] = n
            else:
                counts.pop(line, None)
    return sorted(line for line, n in counts.items() for _ in range(n))


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
    return "".join(f"{r}\n" for r in final_rows(counted_lines(env, query)))


def batch_mode(directory):
    """The queries whose answer is taken in batch mode (`NAME: why` lines of the directory's
    batch-mode.txt): Flink's streaming changelog of them cannot be applied."""
    listed = directory / "batch-mode.txt"
    if not listed.exists():
        return set()
    return {line.split(":")[0].strip() for line in listed.read_text().splitlines() if ":" in line}


def write_data(directory, data):
    """Runs the directory's data.sql with Eddy, writing into `data`."""
    script = (directory / "data.sql").read_text().replace("$DATA", str(data))
    job = data / "data.sql"
    job.write_text(script)
    # EDDY_BIN: an eddy binary already built (else cargo builds one).
    eddy = os.environ.get("EDDY_BIN")
    command = [eddy] if eddy else ["cargo", "run", "--quiet", "--bin", "eddy", "--"]
    subprocess.run(command + ["run", str(job)], cwd=ROOT, check=True)
    job.unlink()


def environment(directory, data, batch=False):
    settings = EnvironmentSettings.in_batch_mode() if batch else EnvironmentSettings.in_streaming_mode()
    env = TableEnvironment.create(settings)
    config = env.get_config()
    config.set("parallelism.default", "1")
    config.set("table.local-time-zone", "UTC")
    eddy_scripts.python_on_this_interpreter(config)
    tables = (directory / "tables.sql").read_text()
    tables = tables.replace("$DIR", str(directory)).replace("$DATA", str(data))
    for statement in eddy_scripts.statements(tables):
        eddy_scripts.execute(env, statement)
    return env


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--queries")
    parser.add_argument("names", nargs="*")
    args = parser.parse_intermixed_args()
    directory = pathlib.Path(args.directory).resolve()
    queries = pathlib.Path(args.queries).resolve() if args.queries else directory
    with tempfile.TemporaryDirectory() as data:
        data = pathlib.Path(data)
        if (directory / "data.sql").exists():
            write_data(directory, data)
        env = environment(directory, data)
        batch_env = environment(directory, data, batch=True)
        batch = batch_mode(directory)
        for query in sorted(queries.glob("*.sql")):
            if query.name in ("tables.sql", "data.sql", "sinks.sql") or query.name.endswith(".job.sql"):
                continue
            if args.names and query.stem not in args.names:
                continue
            text = answer(batch_env if query.stem in batch else env, select_of(query.read_text()))
            rows = text.strip() if text.startswith("error") else f"{text.count(chr(10))} rows"
            print(f"{query.name}: {rows}")
            (directory / f"{query.stem}.flink").write_text(text)


if __name__ == "__main__":
    main()
