//! `FOR SYSTEM_TIME AS OF`: checked on the bound plan, before optimization prunes the time
//! column (nothing else reads it). A table read AS OF a processing-time attribute of the
//! join's left input (`PROCTIME()`) is a lookup join; AS OF anything else is refused.

use datafusion_expr::{Expr, LogicalPlan};

use super::catalog::VersionedSource;
use super::functions::processing_time::PROCTIME;

/// An error for the first table read AS OF something other than a processing-time
/// attribute of its join's left input.
pub fn check_as_of(plan: &LogicalPlan) -> Result<(), String> {
    if let LogicalPlan::Join(join) = plan
        && let Some(source) = versioned(&join.right)
    {
        let column = source.as_of.rsplit('.').next().unwrap_or(&source.as_of);
        let known = join
            .left
            .schema()
            .fields()
            .iter()
            .any(|f| f.name().eq_ignore_ascii_case(column));
        if !known {
            return Err(format!(
                "FOR SYSTEM_TIME AS OF {}: the join's left input has no column '{column}'",
                source.as_of
            ));
        }
        if !defines_proctime(&join.left, column) {
            return Err(format!(
                "unsupported: FOR SYSTEM_TIME AS OF {} with table '{}': Eddy reads a table \
                 AS OF a processing-time attribute (PROCTIME()) of the left input, a lookup \
                 join; event-time temporal joins with versioned tables are not supported yet",
                source.as_of, source.table.name
            ));
        }
    }
    plan.inputs().into_iter().try_for_each(check_as_of)
}

/// The table read AS OF that `plan` is, under aliases, projections and filters.
fn versioned(plan: &LogicalPlan) -> Option<&VersionedSource> {
    match plan {
        LogicalPlan::TableScan(scan) => scan.source.downcast_ref::<VersionedSource>(),
        LogicalPlan::SubqueryAlias(alias) => versioned(&alias.input),
        LogicalPlan::Projection(projection) => versioned(&projection.input),
        LogicalPlan::Filter(filter) => versioned(&filter.input),
        _ => None,
    }
}

/// Whether `plan` computes a column `name` as `PROCTIME()` (in a query, or a table's
/// computed column).
fn defines_proctime(plan: &LogicalPlan, name: &str) -> bool {
    let here = match plan {
        LogicalPlan::Projection(projection) => projection.expr.iter().any(|e| {
            matches!(e, Expr::Alias(alias) if alias.name.eq_ignore_ascii_case(name)
                && matches!(alias.expr.as_ref(), Expr::ScalarFunction(f) if f.name() == PROCTIME))
        }),
        _ => false,
    };
    here || plan
        .inputs()
        .into_iter()
        .any(|input| defines_proctime(input, name))
}
