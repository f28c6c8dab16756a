//! Expressions that Flink answers differently from Arrow's kernels, rewritten into ones
//! that answer as Flink does:
//! - `CAST(b AS STRING)` of a BOOLEAN is `'TRUE'` or `'FALSE'` (Arrow's cast gives
//!   `true`/`false`), and of a `TIMESTAMP(3)` is `2024-01-01 23:59:33.004`, as SQL writes it
//!   (Arrow's cast gives ISO 8601's `T`);
//! - `CAST(a AS STRING)` of an ARRAY is `[1, NULL, 3]`;
//! - a `DECIMAL` divided by a `DECIMAL` (or an integer) has Flink's scale,
//!   `max(6, s1 + p2 + 1)`, rounded half up (Arrow's keeps `s1 + 4`, truncated).

use arrow::datatypes::{DataType, TimeUnit};
use datafusion_common::tree_node::{Transformed, TreeNode};
use datafusion_common::{DFSchema, Result, ScalarValue};
use datafusion_expr::expr::{Cast, TryCast};
use datafusion_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, lit, when};
use datafusion_optimizer::optimizer::ApplyOrder;
use datafusion_optimizer::{OptimizerConfig, OptimizerRule};

use super::functions::datetime::{date_format_udf, timestamp_text_udf};

/// The optimizer rule that rewrites such expressions.
#[derive(Debug, Default)]
pub struct FlinkExpressions;

impl OptimizerRule for FlinkExpressions {
    fn name(&self) -> &str {
        "flink_expressions"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let mut schema = DFSchema::empty();
        for input in plan.inputs() {
            schema.merge(input.schema());
        }
        plan.map_expressions(|expr| {
            expr.transform_up(|e| match e {
                Expr::BinaryExpr(BinaryExpr {
                    op: Operator::Divide,
                    ..
                }) => decimal_division(e, &schema),
                e => rewrite_cast(e, &schema),
            })
        })
    }
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// `CAST(x AS STRING)` of a BOOLEAN as `CASE WHEN b THEN 'TRUE' WHEN NOT b THEN 'FALSE' END`,
/// of a timestamp in seconds or milliseconds as `DATE_FORMAT` with SQL's pattern (finer
/// ones, literals, with as many fraction digits as they need).
fn rewrite_cast(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (inner, to) = match &expr {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            (expr.as_ref(), field.data_type().clone())
        }
        _ => return Ok(Transformed::no(expr)),
    };
    if !is_text(&to) {
        return Ok(Transformed::no(expr));
    }
    let inner_type = inner.get_type(schema).ok();
    // A TIMESTAMP_LTZ is shown in the session's time zone (UTC), as a TIMESTAMP is.
    let local;
    let (inner, inner_type) = match inner_type {
        Some(DataType::Timestamp(unit, Some(_))) => {
            local = inner
                .clone()
                .cast_to(&DataType::Timestamp(unit, None), schema)?;
            (&local, Some(DataType::Timestamp(unit, None)))
        }
        other => (inner, other),
    };
    let text = match inner_type {
        Some(DataType::Boolean) => when(inner.clone(), lit("TRUE"))
            .when(Expr::Not(Box::new(inner.clone())), lit("FALSE"))
            .end()?,
        Some(DataType::Timestamp(unit @ (TimeUnit::Second | TimeUnit::Millisecond), None)) => {
            let pattern = match unit {
                TimeUnit::Second => "yyyy-MM-dd HH:mm:ss",
                _ => "yyyy-MM-dd HH:mm:ss.SSS",
            };
            date_format_udf().call(vec![inner.clone(), lit(pattern)])
        }
        Some(DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, None)) => {
            timestamp_text_udf().call(vec![inner.clone()])
        }
        Some(DataType::List(element)) => {
            super::functions::arrays::cast_to_text(inner.clone(), element.data_type())?
        }
        _ => return Ok(Transformed::no(expr)),
    };
    Ok(Transformed::yes(text.cast_to(&to, schema)?))
}

/// The precision Flink gives an operand of a decimal operation: an integer's own type's
/// (`INT` 10, `BIGINT` 19, an integer literal that fits an `INT` being one), else its
/// decimal precision. DataFusion has cast integers to decimals by then.
fn flink_precision(operand: &Expr, schema: &DFSchema) -> Option<(u8, i8)> {
    let integer_precision = |t: &DataType| match t {
        DataType::Int8 => Some(3),
        DataType::Int16 => Some(5),
        DataType::Int32 => Some(10),
        DataType::Int64 => Some(19),
        _ => None,
    };
    let inner = match operand {
        Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) => expr.as_ref(),
        other => other,
    };
    if let Expr::Literal(ScalarValue::Int64(Some(v)), _) = inner
        && i32::try_from(*v).is_ok()
    {
        return Some((10, 0));
    }
    let inner_type = inner.get_type(schema).ok()?;
    if let Some(p) = integer_precision(&inner_type) {
        return Some((p, 0));
    }
    match operand.get_type(schema).ok()? {
        DataType::Decimal128(p, s) => Some((p, s)),
        _ => None,
    }
}

/// Flink's type of `DECIMAL(p1, s1) / DECIMAL(p2, s2)`: scale `max(6, s1 + p2 + 1)`, digits
/// `p1 - s1 + s2 + scale`; past 38 digits the scale gives way, down to 6.
fn flink_quotient_type((p1, s1): (u8, i8), (p2, s2): (u8, i8)) -> (u8, i8) {
    let (p1, s1, p2, s2) = (p1 as i32, s1 as i32, p2 as i32, s2 as i32);
    let scale = 6.max(s1 + p2 + 1);
    let precision = p1 - s1 + s2 + scale;
    if precision <= 38 {
        return (precision as u8, scale as i8);
    }
    let integral = precision - scale;
    let scale = (38 - integral).max(scale.min(6));
    (38, scale as i8)
}

/// A decimal division at Flink's scale: the dividend scaled so that Arrow's quotient
/// (dividend scale + 4, truncated) has a digit more than Flink's, then rounded half up by
/// the cast to Flink's type.
fn decimal_division(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = &expr else {
        return Ok(Transformed::no(expr));
    };
    let (Ok(DataType::Decimal128(_, _)), Ok(DataType::Decimal128(_, _))) =
        (left.get_type(schema), right.get_type(schema))
    else {
        return Ok(Transformed::no(expr));
    };
    let (Some(dividend), Some(divisor)) = (
        flink_precision(left, schema),
        flink_precision(right, schema),
    ) else {
        return Ok(Transformed::no(expr));
    };
    let (precision, scale) = flink_quotient_type(dividend, divisor);
    let (p1, s1) = dividend;
    let left_scale = s1.max(scale - 3);
    let left_precision = (p1 as i32 - s1 as i32 + left_scale as i32).clamp(1, 38) as u8;
    let scaled = left
        .as_ref()
        .clone()
        .cast_to(&DataType::Decimal128(left_precision, left_scale), schema)?;
    let quotient = Expr::BinaryExpr(BinaryExpr::new(
        Box::new(scaled),
        Operator::Divide,
        right.clone(),
    ));
    Ok(Transformed::yes(quotient.cast_to(
        &DataType::Decimal128(precision, scale),
        schema,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotients_have_flinks_decimal_types() {
        // 7.0 / 2 (an INT): scale max(6, 1 + 10 + 1).
        assert_eq!(flink_quotient_type((2, 1), (10, 0)), (13, 12));
        // Small operands keep at least 6 decimals.
        assert_eq!(flink_quotient_type((5, 2), (2, 1)), (10, 6));
        // Past 38 digits the scale gives way, down to 6.
        assert_eq!(flink_quotient_type((38, 10), (38, 10)), (38, 6));
        assert_eq!(flink_quotient_type((20, 0), (10, 2)), (33, 11));
    }
}
