"""Eddy's SQL files as PyFlink runs them: statements split at `;` with comments dropped,
`SET 'key' = 'value'` applied to the environment's configuration, and Eddy's typed
`CREATE [AGGREGATE] FUNCTION name(arg type, ...) RETURNS type AS ...` written as Flink
writes it (Flink takes a Python function's kind and types from its decorator)."""

import pathlib
import re
import sys


def statements(text):
    """The statements of SQL text, comments dropped."""
    body = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def flink_function(statement):
    """A `CREATE FUNCTION` without Eddy's AGGREGATE, argument list and RETURNS; other
    statements as they are."""
    statement = re.sub(r"\bAGGREGATE\s+FUNCTION\b", "FUNCTION", statement, flags=re.IGNORECASE)
    head = re.search(r"\bFUNCTION\s+(IF\s+NOT\s+EXISTS\s+)?[\w`]+", statement, re.IGNORECASE)
    body = re.search(r"\s+AS\s+'", statement, re.IGNORECASE)
    if not head or not body:
        return statement
    return statement[: head.end()] + statement[body.start() :]


def python_on_this_interpreter(config):
    """Python functions run on this interpreter (the one with PyFlink)."""
    config.set("python.executable", sys.executable)
    config.set("python.client.executable", sys.executable)


def execute(env, statement):
    """Runs one statement of an Eddy script: a SET is applied to the configuration (and
    `python.files` put on this interpreter's path too: PyFlink's client imports a function
    to plan it), anything else executed as Flink writes it."""
    setting = re.match(r"SET\s+'([^']+)'\s*=\s*'([^']*)'$", statement, re.IGNORECASE)
    if not setting:
        return env.execute_sql(flink_function(statement))
    key, value = setting.groups()
    env.get_config().set(key, value)
    if key == "python.files":
        for path in value.split(","):
            sys.path.insert(0, str(pathlib.Path(path.strip()).parent))
    return None
