"""Python functions run by both Apache Flink (PyFlink) and Eddy, for the oracle's answers.

Each kind Eddy runs is here: plain functions called a row at a time, a pandas function
called a batch at a time, and a ScalarFunction class with state set up in `open`.
"""

import decimal
import re
import zlib

from pyflink.table import DataTypes
from pyflink.table.udf import ScalarFunction, udf


@udf(result_type=DataTypes.BIGINT())
def count_char(s, c):
    """Nexmark q14's CountChar: how many bytes of `s` (UTF-8) are the first byte of `c`."""
    if s is None:
        return 0
    return s.encode().count(c.encode()[:1])


@udf(result_type=DataTypes.BIGINT(), func_type="pandas")
def count_char_pandas(s, c):
    """count_char over a whole pandas Series; a constant argument (`c`) comes as a plain
    value, as PyFlink passes it. (UTF-8 sequences of other characters hold no ASCII byte,
    so counting characters counts the bytes.)"""
    return s.fillna("").str.count(re.escape(c[:1])).astype("int64")


@udf(result_type=DataTypes.STRING())
def price_band(price):
    """A band of prices by their number of digits; NULL stays NULL."""
    if price is None:
        return None
    return f"band-{len(str(price))}"


@udf(result_type=DataTypes.DECIMAL(20, 2))
def in_euros(price, rate):
    """A price times a DECIMAL rate, rounded half up to cents."""
    if price is None or rate is None:
        return None
    cents = (decimal.Decimal(price) * rate).quantize(
        decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP
    )
    return cents


class Bucket(ScalarFunction):
    """A stable hash of a string into `n` buckets; the hash is chosen in `open`."""

    def open(self, function_context):
        self.hash = zlib.crc32

    def eval(self, s, n):
        if s is None:
            return -1
        return self.hash(s.encode()) % n


bucket = udf(Bucket(), result_type=DataTypes.INT())


@udf(result_type=DataTypes.INT())
def second_of(t):
    """The second of a TIMESTAMP (a datetime.datetime in both engines)."""
    return None if t is None else t.second
