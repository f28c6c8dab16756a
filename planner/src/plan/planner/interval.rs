//! Interval joins: a join condition that bounds `left.t - right.t` between two constants,
//! `t` each input's event-time attribute (`l.t BETWEEN r.t - INTERVAL '10' SECOND AND r.t`,
//! or the same with `>=`, `>`, `<=`, `<`), lets the join drop rows the watermark has put
//! out of reach, as Flink's interval join does.

use datafusion_common::{Column, ScalarValue};
use datafusion_expr::utils::split_conjunction;
use datafusion_expr::{BinaryExpr, Expr, Operator};

/// The bounds `(lower, upper)` in milliseconds of `left.t - right.t` that `filter` sets,
/// when it sets both.
pub(super) fn interval_bounds(
    filter: &Expr,
    left_time: &Column,
    right_time: &Column,
) -> Option<(i64, i64)> {
    let (mut lower, mut upper) = (None::<i64>, None::<i64>);
    for conjunct in split_conjunction(filter) {
        let comparisons = match conjunct {
            Expr::Between(between) if !between.negated => vec![
                (between.expr.as_ref(), Operator::GtEq, between.low.as_ref()),
                (between.expr.as_ref(), Operator::LtEq, between.high.as_ref()),
            ],
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                vec![(left.as_ref(), *op, right.as_ref())]
            }
            _ => continue,
        };
        for (a, op, b) in comparisons {
            let (Some((col_a, off_a)), Some((col_b, off_b))) = (time_offset(a), time_offset(b))
            else {
                continue;
            };
            // a op b, a = col_a + off_a, b = col_b + off_b; as `left.t - right.t op' c`.
            let (op, c) = if &col_a == left_time && &col_b == right_time {
                (op, off_b - off_a)
            } else if &col_a == right_time && &col_b == left_time {
                (op.swap()?, off_a - off_b)
            } else {
                continue;
            };
            match op {
                Operator::GtEq => lower = Some(lower.map_or(c, |l| l.max(c))),
                Operator::Gt => lower = Some(lower.map_or(c + 1, |l| l.max(c + 1))),
                Operator::LtEq => upper = Some(upper.map_or(c, |u| u.min(c))),
                Operator::Lt => upper = Some(upper.map_or(c - 1, |u| u.min(c - 1))),
                _ => {}
            }
        }
    }
    Some((lower?, upper?))
}

/// `column`, `column + INTERVAL` or `column - INTERVAL`, as the column and the offset in
/// milliseconds.
fn time_offset(expr: &Expr) -> Option<(Column, i64)> {
    match expr {
        Expr::Column(column) => Some((column.clone(), 0)),
        Expr::Cast(cast) => time_offset(&cast.expr),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, offset) = time_offset(left)?;
            let interval = interval_millis(right)?;
            match op {
                Operator::Plus => Some((column, offset + interval)),
                Operator::Minus => Some((column, offset - interval)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A constant interval of days and smaller units, in milliseconds.
fn interval_millis(expr: &Expr) -> Option<i64> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            Some(v.days as i64 * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            Some(v.days as i64 * 86_400_000 + v.milliseconds as i64)
        }
        ScalarValue::DurationMillisecond(Some(v)) => Some(*v),
        ScalarValue::DurationSecond(Some(v)) => Some(v * 1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion_expr::{col, lit};

    fn seconds(n: i64) -> Expr {
        lit(ScalarValue::IntervalMonthDayNano(Some(
            arrow::datatypes::IntervalMonthDayNano::new(0, 0, n * 1_000_000_000),
        )))
    }

    #[test]
    fn bounds_come_from_between_and_comparisons_on_either_side() {
        let (l, r) = (
            Column::from_qualified_name("a.t"),
            Column::from_qualified_name("b.t"),
        );
        let between = col("a.t").between(col("b.t") - seconds(10), col("b.t"));
        assert_eq!(interval_bounds(&between, &l, &r), Some((-10_000, 0)));
        let flipped = col("b.t")
            .lt(col("a.t") + seconds(5))
            .and(col("b.t").gt_eq(col("a.t") - seconds(1)));
        assert_eq!(interval_bounds(&flipped, &l, &r), Some((-4_999, 1_000)));
        let one_sided = col("a.t").gt_eq(col("b.t"));
        assert_eq!(interval_bounds(&one_sided, &l, &r), None);
        let months = col("a.t").between(
            col("b.t")
                - lit(ScalarValue::IntervalMonthDayNano(Some(
                    arrow::datatypes::IntervalMonthDayNano::new(1, 0, 0),
                ))),
            col("b.t"),
        );
        assert_eq!(interval_bounds(&months, &l, &r), None);
    }
}
