//! What a query tells a source about the rows it wants: bounds of its `WHERE` on the
//! source's columns, by which a reader that keeps statistics (Parquet's row groups) skips
//! rows none of which can pass. The query's own filter stays; a bound only lets a reader
//! leave out rows it would drop.

use arrow::array::{Array, ArrayRef, BooleanArray, Datum, Scalar};
use arrow::compute::kernels::cmp;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::error::ArrowError;

/// An Arrow comparison kernel.
type Comparison = fn(&dyn Datum, &dyn Datum) -> Result<BooleanArray, ArrowError>;

/// How a column compares with a bound's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundOp {
    /// `column = value`.
    Eq,
    /// `column < value`.
    Lt,
    /// `column <= value`.
    LtEq,
    /// `column > value`.
    Gt,
    /// `column >= value`.
    GtEq,
}

impl BoundOp {
    /// The operator with its sides swapped (`5 < x` is `x > 5`).
    pub fn flipped(self) -> BoundOp {
        match self {
            BoundOp::Eq => BoundOp::Eq,
            BoundOp::Lt => BoundOp::Gt,
            BoundOp::LtEq => BoundOp::GtEq,
            BoundOp::Gt => BoundOp::Lt,
            BoundOp::GtEq => BoundOp::LtEq,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            BoundOp::Eq => "=",
            BoundOp::Lt => "<",
            BoundOp::LtEq => "<=",
            BoundOp::Gt => ">",
            BoundOp::GtEq => ">=",
        }
    }
}

/// A comparison every row the query keeps passes: `column op value`.
#[derive(Debug, Clone)]
pub struct ColumnBound {
    /// The source column's name.
    pub column: String,
    /// The comparison.
    pub op: BoundOp,
    /// The value compared with: one non-NULL value of the column's type.
    pub value: ArrayRef,
}

impl ColumnBound {
    /// A bound of `column`, whose values are of `column_type`; `None` when `value` is not
    /// one non-NULL value of that type or the type is not one whose statistics bound it
    /// exactly (floating point, with its NaNs, text, whose statistics may be cut, and
    /// nanosecond times are left to the query's filter).
    pub fn new(column: &str, column_type: &DataType, op: BoundOp, value: ArrayRef) -> Option<Self> {
        let exact = matches!(
            column_type,
            DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Decimal128(..)
                | DataType::Date32
                // Not nanoseconds: old writers' INT96 times, which read as such, have no
                // defined order for their statistics.
                | DataType::Timestamp(
                    TimeUnit::Second | TimeUnit::Millisecond | TimeUnit::Microsecond,
                    _
                )
        );
        (exact && value.data_type() == column_type && value.len() == 1 && value.null_count() == 0)
            .then(|| ColumnBound {
                column: column.to_string(),
                op,
                value,
            })
    }

    /// Whether a set of rows whose non-NULL values of the column lie within `min..=max`
    /// (one-value arrays of the column's type; NULL when unknown) can hold a row that
    /// passes. Unknown or mistyped statistics can.
    pub fn may_pass(&self, min: &ArrayRef, max: &ArrayRef) -> bool {
        let known = |a: &ArrayRef| {
            a.len() == 1 && a.null_count() == 0 && a.data_type() == self.value.data_type()
        };
        if !known(min) || !known(max) {
            return true;
        }
        let value = Scalar::new(self.value.clone());
        let holds = |compare: Comparison, side: &ArrayRef| {
            compare(side, &value).map_or(true, |passed| passed.value(0))
        };
        match self.op {
            BoundOp::Eq => holds(cmp::lt_eq, min) && holds(cmp::gt_eq, max),
            BoundOp::Lt => holds(cmp::lt, min),
            BoundOp::LtEq => holds(cmp::lt_eq, min),
            BoundOp::Gt => holds(cmp::gt, max),
            BoundOp::GtEq => holds(cmp::gt_eq, max),
        }
    }
}

impl std::fmt::Display for ColumnBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = arrow::util::display::array_value_to_string(&self.value, 0)
            .unwrap_or_else(|_| "?".into());
        write!(f, "{} {} {value}", self.column, self.op.symbol())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};

    use super::*;

    fn one(v: Option<i64>) -> ArrayRef {
        Arc::new(Int64Array::from(vec![v]))
    }

    fn bound(op: BoundOp, v: i64) -> ColumnBound {
        ColumnBound::new("x", &DataType::Int64, op, one(Some(v))).unwrap()
    }

    #[test]
    fn rows_are_skipped_only_when_their_range_misses_the_bound() {
        let (min, max) = (one(Some(10)), one(Some(20)));
        let cases = [
            (BoundOp::Eq, 9, false),
            (BoundOp::Eq, 10, true),
            (BoundOp::Eq, 20, true),
            (BoundOp::Eq, 21, false),
            (BoundOp::Lt, 10, false),
            (BoundOp::Lt, 11, true),
            (BoundOp::LtEq, 10, true),
            (BoundOp::LtEq, 9, false),
            (BoundOp::Gt, 20, false),
            (BoundOp::Gt, 19, true),
            (BoundOp::GtEq, 20, true),
            (BoundOp::GtEq, 21, false),
        ];
        for (op, v, expected) in cases {
            assert_eq!(bound(op, v).may_pass(&min, &max), expected, "{op:?} {v}");
        }
        // Unknown statistics skip nothing.
        assert!(bound(BoundOp::Eq, 99).may_pass(&one(None), &max));
    }

    #[test]
    fn only_exactly_bounded_types_and_single_values_make_bounds() {
        let float: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        assert!(ColumnBound::new("x", &DataType::Float64, BoundOp::Eq, float).is_none());
        let text: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
        assert!(ColumnBound::new("x", &DataType::Utf8, BoundOp::Eq, text).is_none());
        assert!(ColumnBound::new("x", &DataType::Int64, BoundOp::Eq, one(None)).is_none());
        assert!(ColumnBound::new("x", &DataType::Int32, BoundOp::Eq, one(Some(1))).is_none());
        assert_eq!(bound(BoundOp::GtEq, 5).to_string(), "x >= 5");
    }
}
