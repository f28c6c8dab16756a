//! Plans Flink's window table-valued functions, `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))`.

use std::sync::Arc;

use datafusion_common::{DFSchema, DataFusionError, ScalarValue, plan_err};
use datafusion_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion_expr::{Expr, Extension, LogicalPlan};
use datafusion_sql::sqlparser::ast::{self, FunctionArg, FunctionArgExpr, FunctionArguments};

use super::nodes::{WindowKind, WindowTvf};

/// Turns `TABLE(TUMBLE(...))`, `HOP`, `CUMULATE` and `SESSION` into [`WindowTvf`] nodes.
#[derive(Debug, Default)]
pub struct WindowTvfPlanner;

impl RelationPlanner for WindowTvfPlanner {
    fn plan_relation(
        &self,
        relation: ast::TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> datafusion_common::Result<RelationPlanning> {
        let ast::TableFactor::TableFunction {
            expr: ast::Expr::Function(function),
            alias,
        } = &relation
        else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let name = function.name.to_string().to_ascii_uppercase();
        if !matches!(name.as_str(), "TUMBLE" | "HOP" | "SESSION" | "CUMULATE") {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        }
        let FunctionArguments::List(list) = &function.args else {
            return plan_err!("{name} needs arguments: (TABLE t, DESCRIPTOR(ts), ...)");
        };
        let args: Vec<&ast::Expr> = list
            .args
            .iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                other => plan_err!("{name}: unsupported argument {other}"),
            })
            .collect::<datafusion_common::Result<_>>()?;
        let expected = if matches!(name.as_str(), "TUMBLE" | "SESSION") {
            3
        } else {
            4
        };
        if args.len() != expected {
            return plan_err!(
                "{name} takes {expected} arguments (TABLE t, DESCRIPTOR(ts), {}), got {}",
                if expected == 3 { "size" } else { "slide, size" },
                args.len()
            );
        }
        let input = plan_table_argument(&name, args[0], context)?;
        let time_name = descriptor_column(&name, args[1], context)?;
        let (_, field) = input
            .schema()
            .qualified_field_with_unqualified_name(&time_name)
            .map_err(|_| {
                DataFusionError::Plan(format!(
                    "{name}: DESCRIPTOR column '{time_name}' is not a column of the input"
                ))
            })?;
        if !matches!(
            field.data_type(),
            arrow::datatypes::DataType::Timestamp(_, _)
        ) {
            return plan_err!(
                "{name}: DESCRIPTOR column '{time_name}' must be a TIMESTAMP, not {}",
                field.data_type()
            );
        }
        let time_column = input.schema().columns_with_unqualified_name(&time_name)[0].clone();
        let mut durations = Vec::new();
        for arg in &args[2..] {
            durations.push(interval_millis(&name, arg, context)?);
        }
        let kind = match (name.as_str(), durations.as_slice()) {
            ("TUMBLE", [size]) => WindowKind::Tumble { size: *size },
            ("SESSION", [gap]) => WindowKind::Session { gap: *gap },
            ("HOP", [slide, size]) => {
                if size % slide != 0 {
                    return plan_err!(
                        "HOP: size ({size} ms) must be a multiple of slide ({slide} ms)"
                    );
                }
                WindowKind::Hop {
                    slide: *slide,
                    size: *size,
                }
            }
            ("CUMULATE", [step, size]) => {
                if size % step != 0 {
                    return plan_err!(
                        "CUMULATE: size ({size} ms) must be a multiple of step ({step} ms)"
                    );
                }
                WindowKind::Cumulate {
                    step: *step,
                    size: *size,
                }
            }
            _ => unreachable!("argument count checked above"),
        };
        let node = WindowTvf::try_new(input, kind, time_column)?;
        let plan = LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        });
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan,
            alias.clone(),
        ))))
    }
}

fn plan_table_argument(
    name: &str,
    arg: &ast::Expr,
    context: &mut dyn RelationPlannerContext,
) -> datafusion_common::Result<LogicalPlan> {
    let object_name = match arg {
        ast::Expr::Identifier(ident) => ast::ObjectName::from(vec![ident.clone()]),
        ast::Expr::CompoundIdentifier(idents) => ast::ObjectName::from(idents.clone()),
        other => {
            return plan_err!("{name}: the first argument must be TABLE <name>, got {other}");
        }
    };
    // Planned as `FROM name` is, so that a WITH query's name resolves too.
    let plan = context.plan(ast::TableFactor::Table {
        name: object_name,
        alias: None,
        args: None,
        with_hints: Vec::new(),
        version: None,
        with_ordinality: false,
        partitions: Vec::new(),
        json_path: None,
        sample: None,
        index_hints: Vec::new(),
    })?;
    Ok(plan)
}

fn descriptor_column(
    name: &str,
    arg: &ast::Expr,
    context: &mut dyn RelationPlannerContext,
) -> datafusion_common::Result<String> {
    if let ast::Expr::Function(f) = arg
        && f.name.to_string().eq_ignore_ascii_case("DESCRIPTOR")
        && let FunctionArguments::List(list) = &f.args
        && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Identifier(ident)))] =
            list.args.as_slice()
    {
        return Ok(context.normalize_ident(ident.clone()));
    }
    plan_err!("{name}: the second argument must be DESCRIPTOR(<time column>), got {arg}")
}

fn interval_millis(
    name: &str,
    arg: &ast::Expr,
    context: &mut dyn RelationPlannerContext,
) -> datafusion_common::Result<i64> {
    let expr = context.sql_to_expr(arg.clone(), &DFSchema::empty())?;
    let millis = match &expr {
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            Some(v.days as i64 * 86_400_000 + v.milliseconds as i64)
        }
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.months == 0 => {
            Some(v.days as i64 * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        _ => None,
    };
    match millis {
        Some(ms) if ms > 0 => Ok(ms),
        _ => plan_err!(
            "{name}: expected a positive INTERVAL of days or less (e.g. INTERVAL '10' SECOND), got {arg}"
        ),
    }
}
