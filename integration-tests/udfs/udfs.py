"""Python functions run by both Apache Flink (PyFlink) and Eddy, for the oracle's answers.

Each kind Eddy runs is here: plain functions called a row at a time, a pandas function
called a batch at a time, a ScalarFunction class with state set up in `open`, and table
functions (a generator of rows, and a TableFunction class yielding bare values), and
aggregate functions (with and without retract and merge).
"""

import decimal
import re
import zlib

from pyflink.table import DataTypes
from pyflink.common import Row
from pyflink.table.udf import AggregateFunction, ScalarFunction, TableFunction, udaf, udf, udtf


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


@udtf(result_types=[DataTypes.STRING(), DataTypes.INT()])
def pieces(s):
    """The pieces of `s` between its letters 'a', each with its length; none for NULL."""
    if s is None:
        return
    for piece in s.split("a"):
        if piece:
            yield piece, len(piece)


class Copies(TableFunction):
    """`price % n` rows numbered from 0: none for a multiple of `n`."""

    def eval(self, price, n):
        for i in range(price % n):
            yield i


copies = udtf(Copies(), result_types=[DataTypes.INT()])


class WeightedAvg(AggregateFunction):
    """The average of values weighted by weights (rounded down), NULL for no weight: it
    retracts, so it aggregates updating inputs too."""

    def create_accumulator(self):
        return Row(0, 0)

    def accumulate(self, accumulator, value, weight):
        if value is not None and weight is not None:
            accumulator[0] += value * weight
            accumulator[1] += weight

    def retract(self, accumulator, value, weight):
        if value is not None and weight is not None:
            accumulator[0] -= value * weight
            accumulator[1] -= weight

    def merge(self, accumulator, accumulators):
        for other in accumulators:
            accumulator[0] += other[0]
            accumulator[1] += other[1]

    def get_value(self, accumulator):
        return None if accumulator[1] == 0 else accumulator[0] // accumulator[1]


weighted_avg = udaf(
    WeightedAvg(),
    result_type=DataTypes.BIGINT(),
    accumulator_type=DataTypes.ROW(
        [DataTypes.FIELD("f0", DataTypes.BIGINT()), DataTypes.FIELD("f1", DataTypes.BIGINT())]
    ),
)


class Longest(AggregateFunction):
    """The longest string (of equally long ones the greatest), without retract."""

    def create_accumulator(self):
        return Row("")

    def accumulate(self, accumulator, s):
        if s is not None and (len(s), s) > (len(accumulator[0]), accumulator[0]):
            accumulator[0] = s

    def merge(self, accumulator, accumulators):
        for other in accumulators:
            self.accumulate(accumulator, other[0])

    def get_value(self, accumulator):
        return accumulator[0]


longest = udaf(
    Longest(),
    result_type=DataTypes.STRING(),
    accumulator_type=DataTypes.ROW([DataTypes.FIELD("f0", DataTypes.STRING())]),
)
