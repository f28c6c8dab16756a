"""Apache Flink's answers to the scalar expressions of integration-tests/functions/cases.sql.

Runs each expression through Flink's SQL (batch mode, one local JVM), cast to STRING, and
writes integration-tests/functions/flink_answers.tsv: one line per expression,
`expression<TAB>answer`, where the answer is the string Flink returns, `NULL`, or
`ERROR: <Flink's message>` when Flink refuses the expression. The integration test compares
Eddy's answers with these; it does not need Flink.

Usage (PyFlink from PyPI and a Java 17 runtime):
    python3 -m venv ~/flink-venv && ~/flink-venv/bin/pip install apache-flink==2.3.0
    ~/flink-venv/bin/python bench/flink/function_answers.py [--all]

Expressions that already have an answer keep it; --all asks Flink again for every one.
"""

import pathlib
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = ROOT / "integration-tests" / "functions" / "cases.sql"
ANSWERS = ROOT / "integration-tests" / "functions" / "flink_answers.tsv"


def expressions():
    for line in CASES.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("--"):
            yield line


def answer(env, expression):
    try:
        result = env.execute_sql(f"SELECT CAST(({expression}) AS STRING)")
        with result.collect() as rows:
            values = [row[0] for row in rows]
    except Exception as error:  # Flink's refusal is an answer too
        message = str(error).strip().splitlines()
        first = next((m for m in message if "Exception" in m or "rror" in m), message[0])
        return "ERROR: " + first.strip().replace("\t", " ")[:300]
    value = values[0]
    return "NULL" if value is None else value.replace("\t", "\\t").replace("\n", "\\n")


def known_answers():
    """The answers already written, by expression (none with --all: every case runs)."""
    if "--all" in sys.argv or not ANSWERS.exists():
        return {}
    lines = ANSWERS.read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if line)


def main():
    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    env.get_config().set("parallelism.default", "1")
    env.get_config().set("table.local-time-zone", "UTC")
    known = known_answers()
    lines = []
    for expression in expressions():
        value = known.get(expression)
        if value is None:
            value = answer(env, expression)
            print(f"{expression}  =>  {value}", file=sys.stderr)
        lines.append(f"{expression}\t{value}")
    ANSWERS.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
