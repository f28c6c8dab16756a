"""Apache Flink's layout of a partitioned filesystem table.

Runs `integration-tests/partitioned/q10_official.job.sql` (Nexmark q10 into a table
partitioned by day and minute, committed with success files) in Flink over the bids of the
directory's `data.sql` (written by Eddy, as query_answers.py writes them), then writes what
Flink left in the table's directory to `layout.flink`: each partition directory as Flink
named it, how many rows its visible files hold, and whether it has its success file.
Hidden files (a name starting with `.` or `_`, other than the success file) are left out.
The test writes the same table with Eddy and compares.

Usage: ~/flink-venv/bin/python bench/flink/partition_layout.py
"""

import pathlib
import tempfile

from query_answers import ROOT, environment, write_data

DIRECTORY = ROOT / "integration-tests" / "partitioned"


def layout(table):
    """`partition: N rows[, _SUCCESS]` for each partition directory under `table`."""
    lines = []
    for directory in sorted(p for p in table.rglob("*") if p.is_dir()):
        files = [f for f in directory.iterdir() if f.is_file()]
        if not files:
            continue
        visible = [f for f in files if not f.name.startswith((".", "_"))]
        rows = sum(len(f.read_text().splitlines()) for f in visible)
        success = any(f.name == "_SUCCESS" for f in files)
        relative = directory.relative_to(table).as_posix()
        lines.append(f"{relative}: {rows} rows" + (", _SUCCESS" if success else "") + "\n")
    return "".join(lines)


def main():
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as out:
        data = pathlib.Path(data)
        write_data(DIRECTORY, data)
        env = environment(DIRECTORY, data)
        env.get_config().set("execution.checkpointing.interval", "1 s")
        job = (DIRECTORY / "q10_official.job.sql").read_text().replace("$OUT", out)
        job = "\n".join(l for l in job.splitlines() if not l.lstrip().startswith("--"))
        for statement in filter(str.strip, job.split(";")):
            result = env.execute_sql(statement)
            if statement.strip().upper().startswith("INSERT"):
                result.wait()
        text = layout(pathlib.Path(out))
        print(text, end="")
        (DIRECTORY / "layout.flink").write_text(text)


if __name__ == "__main__":
    main()
