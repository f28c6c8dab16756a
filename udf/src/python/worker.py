"""Eddy's Python worker: runs the Python functions of one job for one TaskManager task.

It talks to the TaskManager over the socket it was given as its standard input, in frames
of a one-byte tag, a little-endian u32 length and a payload:
  TaskManager -> worker
    D  defines a function: an Arrow IPC stream holding only a schema, the result's field,
       the function and its kind (scalar, table, aggregate) in the schema's metadata
    C  calls one: a u32 function id, an action byte, then Arrow IPC streams of one batch
       each, every stream after its u32 length. Scalar and table functions: action S,
       the arguments. Aggregates: U (the accumulators of the groups a chunk touches, as
       pickles, NULL for a new one; the rows: group, sign, arguments) answered with the
       new accumulators; V (accumulators) answered with their values; M (two
       accumulators) answered with the first merged with the second
  worker -> TaskManager
    H  hello: the worker is ready (JSON: the interpreter's version)
    R  a call's result: an Arrow IPC stream of one batch of one column
    E  a failure: the Python traceback, as text
One batch per call, never a row per call. The worker ends when its socket closes.
"""

import functools
import importlib
import json
import os
import pickle
import socket
import struct
import sys
import traceback
import types


def main():
    config = json.loads(sys.argv[1])
    channel = socket.socket(fileno=os.dup(0))
    # Standard input and output belong to user code from here on: a `print` goes to the
    # TaskManager's log, never into the protocol.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    incoming = channel.makefile("rb")
    try:
        setup(config)
        import pyarrow  # noqa: F401  (the worker cannot run without it)
    except BaseException:
        send(channel, b"E", traceback.format_exc().encode())
        return
    send(channel, b"H", json.dumps({"python": sys.version.split()[0]}).encode())
    functions = {}
    while True:
        header = incoming.read(5)
        if len(header) < 5:
            return
        tag, length = struct.unpack("<cI", header)
        payload = incoming.read(length)
        if len(payload) < length:
            return
        try:
            if tag == b"D":
                function = Function(payload)
                functions[function.id] = function
                continue
            function_id, action = struct.unpack_from("<Ic", payload)
            batches = read_batches(memoryview(payload)[5:])
            result = functions[function_id].call(action, batches)
        except BaseException:
            send(channel, b"E", traceback.format_exc().encode())
            continue
        send(channel, b"R", result)


def setup(config):
    limit = config.get("memory_limit")
    if limit:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for path in reversed(config.get("files", [])):
        # Flink's python.files: a .py file's directory, a directory, or an archive.
        entry = os.path.dirname(os.path.abspath(path)) if path.endswith(".py") else path
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        import pyflink.table.udf  # noqa: F401  (PyFlink itself is installed here)
    except ImportError:
        install_pyflink_stand_in()


def read_batches(payload):
    """The batches of a call, each an IPC stream after its u32 length."""
    import pyarrow as pa

    batches, at = [], 0
    while at < len(payload):
        (length,) = struct.unpack_from("<I", payload, at)
        stream = pa.py_buffer(payload[at + 4 : at + 4 + length])
        batches.append(pa.ipc.open_stream(stream).read_next_batch())
        at += 4 + length
    return batches


def send(channel, tag, payload):
    channel.sendall(struct.pack("<cI", tag, len(payload)) + payload)


class Function:
    """A defined function: how to call it over a batch of arguments."""

    def __init__(self, payload):
        import pyarrow as pa

        schema = pa.ipc.open_stream(pa.py_buffer(payload)).schema
        meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        self.id = int(meta["eddy.id"])
        self.name = meta["eddy.function"]
        self.result = schema.field(schema.names[-1])
        self.result_schema = pa.schema([self.result])
        self.body, self.kind = resolve(self.name)
        declared = meta.get("eddy.kind", "scalar")
        if declared != "scalar":
            if self.kind != "general":
                raise ValueError(f"{self.name}: a {declared} function is called a row at a "
                                 f"time, not as a {self.kind} function")
            self.kind = declared
        if declared == "table":
            self.width = self.result.type.value_type.num_fields
        if declared == "aggregate":
            self.aggregate = Aggregate(self.name, self.body)

    def call(self, action, batches):
        import pyarrow as pa

        if self.kind == "aggregate":
            return self.aggregate_call(action, batches)
        (batch,) = batches
        if self.kind == "pandas":
            values = self.body(*self.vectorized(batch, lambda column: column.to_pandas()))
            result = self.array(values, batch.num_rows, from_pandas=True)
        elif self.kind == "arrow":
            values = self.body(*self.vectorized(batch, lambda column: column))
            result = self.array(values, batch.num_rows)
        else:
            columns = [column.to_pylist() for column in batch.columns]
            rows = zip(*columns) if columns else ([()] * batch.num_rows)
            body = self.body
            if self.kind == "table":
                values = [self.table_rows(body(*row)) for row in rows]
            else:
                values = [body(*row) for row in rows]
            result = self.array(values, batch.num_rows)
        return column_stream(result, self.result_schema)

    def aggregate_call(self, action, batches):
        import pyarrow as pa

        accumulators = self.aggregate.load(batches[0].column(0).to_pylist())
        if action == b"U":
            rows = batches[1]
            columns = [column.to_pylist() for column in rows.columns]
            self.aggregate.update(accumulators, *columns)
        elif action == b"M":
            self.aggregate.merge(accumulators)
            accumulators = accumulators[:1]
        elif action == b"V":
            values = [self.aggregate.value(a) for a in accumulators]
            return column_stream(self.array(values, len(accumulators)), self.result_schema)
        else:
            raise ValueError(f"unknown action {action!r}")
        pickles = pa.array([pickle.dumps(a, protocol=5) for a in accumulators], pa.binary())
        return column_stream(pickles, pa.schema([pa.field("accumulator", pa.binary())]))

    def table_rows(self, produced):
        """What a table function produced for one row (an iterable of rows, or None), as
        a list of tuples: a row is a tuple, a list or a PyFlink Row; a function of one
        column may yield bare values."""
        if produced is None:
            return []
        rows = []
        for row in produced:
            values = getattr(row, "_values", row)
            if isinstance(values, (tuple, list)):
                values = tuple(values)
            elif self.width == 1:
                values = (values,)
            if not isinstance(values, tuple) or len(values) != self.width:
                raise TypeError(f"{self.name} yielded {row!r}, not a row of {self.width} values")
            rows.append(values)
        return rows

    @staticmethod
    def vectorized(batch, convert):
        """A vectorized function's arguments: each column converted, but a constant (marked
        by the TaskManager) as one plain value, as PyFlink passes constants."""
        arguments = []
        for field, column in zip(batch.schema, batch.columns):
            constant = (field.metadata or {}).get(b"eddy.constant") == b"true"
            if constant and len(column) > 0:
                arguments.append(column[0].as_py())
            else:
                arguments.append(convert(column))
        return arguments

    def array(self, values, rows, from_pandas=False):
        import pyarrow as pa

        wanted = self.result.type
        try:
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                array = values if values.type == wanted else values.cast(wanted)
            else:
                array = pa.array(values, type=wanted, from_pandas=from_pandas)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
            raise TypeError(
                f"{self.name} returned values that are not {wanted} "
                f"(the type its CREATE FUNCTION declares): {e}"
            ) from e
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if len(array) != rows:
            raise ValueError(f"{self.name} returned {len(array)} values for {rows} rows")
        return array


def column_stream(column, schema):
    """An Arrow IPC stream of one batch of one column."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([column], schema=schema))
    return sink.getvalue().to_pybytes()


class Aggregate:
    """A PyFlink AggregateFunction over pickled accumulators: create_accumulator,
    accumulate, retract (for updating inputs), merge (for session windows), get_value."""

    def __init__(self, name, function):
        self.name = name
        self.function = function
        for method in ("create_accumulator", "accumulate", "get_value"):
            if not hasattr(self.function, method):
                raise TypeError(f"{name} is not an aggregate function: it has no {method}()")

    def load(self, pickles):
        create = self.function.create_accumulator
        return [create() if p is None else pickle.loads(p) for p in pickles]

    def update(self, accumulators, groups, signs, *arguments):
        accumulate = self.function.accumulate
        retract = getattr(self.function, "retract", None)
        for group, sign, *values in zip(groups, signs, *arguments):
            if sign > 0:
                accumulate(accumulators[group], *values)
            elif retract is None:
                raise NotImplementedError(
                    f"{self.name} has no retract(): it cannot aggregate an updating input"
                )
            else:
                retract(accumulators[group], *values)

    def merge(self, accumulators):
        merge = getattr(self.function, "merge", None)
        if merge is None:
            raise NotImplementedError(f"{self.name} has no merge(): session windows need it")
        merge(accumulators[0], [accumulators[1]])

    def value(self, accumulator):
        return self.function.get_value(accumulator)


def resolve(name):
    """The callable `module.attribute` names and how it takes its arguments: `general`
    (a row at a time), `pandas` (a pandas.Series per argument) or `arrow` (a
    pyarrow.Array per argument)."""
    module, _, attribute = name.rpartition(".")
    if not module:
        raise ValueError(f"'{name}' names no module: write it as 'module.function'")
    target = getattr(importlib.import_module(module), attribute)
    kind = "general"
    # Flink's @udf wrappers (PyFlink's own or the stand-in below) keep the function and
    # its kind.
    if hasattr(target, "_func") and hasattr(target, "_func_type"):
        kind = target._func_type or "general"
        target = target._func
    if isinstance(target, type):
        target = target()
    if hasattr(target, "create_accumulator"):
        if hasattr(target, "open"):
            target.open(FunctionContext())
        return target, kind
    if hasattr(target, "eval"):
        if hasattr(target, "open"):
            target.open(FunctionContext())
        target = target.eval
    if not callable(target):
        raise TypeError(f"{name} is not callable")
    if kind not in ("general", "pandas", "arrow"):
        raise ValueError(f"{name}: unknown function type '{kind}'")
    return target, kind


class FunctionContext:
    """What PyFlink's `open(function_context)` is given, as far as Eddy has it."""

    def get_metric_group(self):
        return None

    def get_job_parameter(self, key, default_value):
        return default_value


class Row(list):
    """The stand-in's `pyflink.common.Row`: a mutable row of values (an accumulator is
    often one), pickled under PyFlink's name."""

    def __init__(self, *values, **named):
        super().__init__(values or named.values())


Row.__module__ = "pyflink.common"


def install_pyflink_stand_in():
    """Where PyFlink is not installed, a stand-in for the part of it UDF modules import
    (`pyflink.table.DataTypes`, `pyflink.table.udf`), so one module serves PyFlink and
    Eddy. Types come from Eddy's CREATE FUNCTION, so DataTypes describes only."""
    pyflink = types.ModuleType("pyflink")
    table = types.ModuleType("pyflink.table")
    udf_module = types.ModuleType("pyflink.table.udf")

    class DataTypes:
        def __getattr__(self, name):
            return lambda *args, **kwargs: (name, args)

    class UserDefinedFunction:
        def open(self, function_context):
            pass

        def close(self):
            pass

        def is_deterministic(self):
            return True

    class ScalarFunction(UserDefinedFunction):
        pass

    class TableFunction(UserDefinedFunction):
        pass

    class AggregateFunction(UserDefinedFunction):
        pass

    class Wrapper:
        def __init__(self, func, func_type):
            self._func = func
            self._func_type = func_type

        def __call__(self, *args):
            body = self._func.eval if hasattr(self._func, "eval") else self._func
            return body(*args)

    def wrap(default_type):
        def decorator(f=None, input_types=None, result_type=None, deterministic=None,
                      name=None, func_type=default_type, udf_type=None, **kwargs):
            if f is None:
                return functools.partial(decorator, func_type=udf_type or func_type)
            return Wrapper(f, udf_type or func_type)

        return decorator

    common = types.ModuleType("pyflink.common")
    common.Row = Row
    pyflink.common = common
    sys.modules["pyflink.common"] = common
    udf_module.udf = wrap("general")
    udf_module.udtf = wrap("general")
    udf_module.udaf = wrap("general")
    udf_module.ScalarFunction = ScalarFunction
    udf_module.TableFunction = TableFunction
    udf_module.AggregateFunction = AggregateFunction
    table.AggregateFunction = AggregateFunction
    table.ScalarFunction = ScalarFunction
    table.TableFunction = TableFunction
    udf_module.FunctionContext = FunctionContext
    table.DataTypes = DataTypes()
    table.udf = udf_module
    pyflink.table = table
    sys.modules.update({"pyflink": pyflink, "pyflink.table": table, "pyflink.table.udf": udf_module})


if __name__ == "__main__":
    main()
