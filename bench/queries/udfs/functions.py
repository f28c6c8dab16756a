"""The Python functions bench/udfs.sh measures, for PyFlink and Eddy alike: a trivial one
(add_one) and Nexmark q14's count_char, each a row at a time and as a pandas function."""

import re

from pyflink.table import DataTypes
from pyflink.table.udf import udf


@udf(result_type=DataTypes.BIGINT())
def add_one(x):
    return None if x is None else x + 1


@udf(result_type=DataTypes.BIGINT(), func_type="pandas")
def add_one_pandas(x):
    return x + 1


@udf(result_type=DataTypes.BIGINT())
def count_char(s, c):
    return 0 if s is None else s.encode().count(c.encode()[:1])


@udf(result_type=DataTypes.BIGINT(), func_type="pandas")
def count_char_pandas(s, c):
    return s.fillna("").str.count(re.escape(c[:1])).astype("int64")
