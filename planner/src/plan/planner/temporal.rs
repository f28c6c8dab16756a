//! Event-time temporal joins: `JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON
//! o.currency = r.currency`, `rates` a versioned table (a primary key and a watermark): the
//! table is read as a stream of versions, both inputs are hash-partitioned by the key, and
//! each left row joins the version valid at its time once the watermark passes it.

use datafusion_common::tree_node::{Transformed, TreeNode};
use datafusion_expr::{Expr, JoinType, LogicalPlan, LogicalPlanBuilder, col};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::join::TemporalJoinSpec;

use super::join::{on_display, where_display};
use super::lookup::VersionedSide;
use super::{Changelog, OperatorKind, OperatorSpec, Planner, Stream, output_schema, unsupported};
use crate::sql::catalog::VersionedSource;

impl Planner {
    /// A temporal join of `left` with the versioned table on the right of `join`.
    pub(super) fn plan_temporal_join(
        &mut self,
        join: &datafusion_expr::Join,
        left: Stream,
        table: VersionedSide<'_>,
    ) -> Result<Stream> {
        let def = &table.source.table;
        let name = &def.name;
        let as_of = &table.source.as_of;
        let left_time = left.rowtime.filter(|t| {
            let column = as_of.rsplit('.').next().unwrap_or(as_of);
            left.schema.field(*t).name().eq_ignore_ascii_case(column)
        });
        let Some(left_time) = left_time else {
            return Err(EddyError::Plan(format!(
                "FOR SYSTEM_TIME AS OF {as_of} with table '{name}': it must be the left \
                 input's event-time attribute (a temporal join) or a PROCTIME() column (a \
                 lookup join)"
            )));
        };
        let left_outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => {
                return Err(unsupported(format!(
                    "a {other} temporal join (a temporal join is an inner or a LEFT join)"
                )));
            }
        };
        if def.primary_key.is_empty() {
            return Err(EddyError::Plan(format!(
                "a temporal join needs a primary key on the versioned table '{name}' (PRIMARY \
                 KEY (...) NOT ENFORCED), as Flink does"
            )));
        }
        let right = self.plan(&versions_of(&join.right, table.source)?)?;
        let Some(right_time) = right.rowtime else {
            return Err(EddyError::Plan(format!(
                "a temporal join needs the versioned table '{name}' to have an event-time \
                 attribute (WATERMARK FOR ...), kept in the join's input"
            )));
        };
        joins_on_primary_key(join, name, &def.primary_key)?;
        if [&left, &right]
            .iter()
            .any(|s| s.changelog != Changelog::AppendOnly)
        {
            return Err(unsupported(
                "a temporal join of updating inputs (its left input and the versioned table \
                 must be append-only streams here)",
            ));
        }
        let keys = self.join_keys(join, &left, &right)?;
        let target = self.exchange_to_join(&left, &right, &keys, join);
        let filter = self.join_filter(join)?;
        let description = format!(
            "TemporalJoin({}, table: {name} AS OF {as_of}, on: {}{}; a row is joined with \
             the version valid at its time once the watermark passes it)",
            join.join_type.to_string().to_ascii_lowercase(),
            on_display(join),
            where_display(join)
        );
        let stream = Stream {
            rowtime: Some(left_time),
            ..Stream::new(target, join.schema.clone(), Changelog::AppendOnly)
        };
        self.push(
            &stream,
            OperatorSpec {
                description,
                changelog: Changelog::AppendOnly,
                kind: OperatorKind::TemporalJoin(TemporalJoinSpec {
                    keys: [keys.left_keys, keys.right_keys],
                    key_types: keys.key_types,
                    schemas: [output_schema(&left.schema), output_schema(&right.schema)],
                    times: [left_time, right_time],
                    filter,
                    left_outer,
                    schema: output_schema(&join.schema),
                }),
            },
        );
        Ok(stream)
    }
}

/// Checks that `join` equates every column of the versioned table's primary key.
fn joins_on_primary_key(
    join: &datafusion_expr::Join,
    name: &str,
    primary_key: &[String],
) -> Result<()> {
    let on_columns: Vec<String> = join
        .on
        .iter()
        .filter_map(|(_, r)| match r {
            Expr::Column(c) => Some(c.name.to_lowercase()),
            _ => None,
        })
        .collect();
    if let Some(missing) = primary_key
        .iter()
        .find(|k| !on_columns.contains(&k.to_lowercase()))
    {
        return Err(EddyError::Plan(format!(
            "a temporal join must join on the primary key of '{name}': its column \
             '{missing}' is not equated in ON"
        )));
    }
    Ok(())
}

/// The join's table side with the versioned table's scan replaced by the table's stream
/// (its rows, computed columns and watermark), under the scan's name and columns.
fn versions_of(right: &LogicalPlan, source: &VersionedSource) -> Result<LogicalPlan> {
    let replaced = right
        .clone()
        .transform_up(|node| {
            let LogicalPlan::TableScan(scan) = &node else {
                return Ok(Transformed::no(node));
            };
            if scan.source.downcast_ref::<VersionedSource>().is_none() {
                return Ok(Transformed::no(node));
            }
            let physical = &source.table.physical_schema;
            let columns: Vec<usize> = match &scan.projection {
                Some(projection) => projection.clone(),
                None => (0..physical.fields().len()).collect(),
            };
            let stream = LogicalPlanBuilder::from(source.table.plan.clone())
                .project(
                    columns
                        .iter()
                        .map(|i| col(format!("\"{}\"", physical.field(*i).name()))),
                )?
                .alias(scan.table_name.clone())?
                .build()?;
            Ok(Transformed::yes(stream))
        })
        .or_eddy()?;
    Ok(replaced.data)
}
