//! Casts that Flink answers differently from Arrow's cast kernels, rewritten into
//! expressions that answer as Flink does: `CAST(b AS STRING)` of a BOOLEAN is `'TRUE'` or
//! `'FALSE'` (Arrow's cast gives `true`/`false`), and of a `TIMESTAMP(3)` is
//! `2024-01-01 23:59:33.004`, as SQL writes it (Arrow's cast gives ISO 8601's `T`).

use arrow::datatypes::{DataType, TimeUnit};
use datafusion_common::tree_node::{Transformed, TreeNode};
use datafusion_common::{DFSchema, Result};
use datafusion_expr::expr::{Cast, TryCast};
use datafusion_expr::{Expr, ExprSchemable, LogicalPlan, lit, when};
use datafusion_optimizer::optimizer::ApplyOrder;
use datafusion_optimizer::{OptimizerConfig, OptimizerRule};

use super::functions::datetime::date_format_udf;

/// The optimizer rule that rewrites such casts.
#[derive(Debug, Default)]
pub struct FlinkCasts;

impl OptimizerRule for FlinkCasts {
    fn name(&self) -> &str {
        "flink_casts"
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
        plan.map_expressions(|expr| expr.transform_up(|e| rewrite(e, &schema)))
    }
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// `CAST(x AS STRING)` of a BOOLEAN as `CASE WHEN b THEN 'TRUE' WHEN NOT b THEN 'FALSE' END`,
/// of a timestamp in seconds or milliseconds as `DATE_FORMAT` with SQL's pattern.
fn rewrite(expr: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let (inner, to) = match &expr {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            (expr.as_ref(), field.data_type().clone())
        }
        _ => return Ok(Transformed::no(expr)),
    };
    if !is_text(&to) {
        return Ok(Transformed::no(expr));
    }
    let text = match inner.get_type(schema).ok() {
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
        _ => return Ok(Transformed::no(expr)),
    };
    Ok(Transformed::yes(text.cast_to(&to, schema)?))
}
