//! `FOR SYSTEM_TIME AS OF`: checked on the bound plan, before optimization prunes the time
//! column (nothing else reads it). A table read AS OF a processing-time attribute of the
//! join's left input (`PROCTIME()`) is a lookup join; AS OF another column, an event-time
//! temporal join (the streaming planner checks it is the left input's event-time
//! attribute), whose plan keeps every column so that the time reaches the join.

use datafusion_expr::{Expr, LogicalPlan};

use super::catalog::VersionedSource;
use super::functions::processing_time::PROCTIME;

/// Whether `plan` holds an event-time temporal join; an error for a table read AS OF a
/// column its join's left input does not have.
pub fn check_as_of(plan: &LogicalPlan) -> Result<bool, String> {
    let mut event_time = false;
    visit(plan, &mut event_time)?;
    Ok(event_time)
}

fn visit(plan: &LogicalPlan, event_time: &mut bool) -> Result<(), String> {
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
        let processing_time = defines_proctime(&join.left, column);
        let _ = source.processing_time.set(processing_time);
        *event_time |= !processing_time;
    }
    plan.inputs()
        .into_iter()
        .try_for_each(|input| visit(input, event_time))
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
