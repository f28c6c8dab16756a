//! Lookup joins: `JOIN t FOR SYSTEM_TIME AS OF o.proc_time ON o.k = t.k`, the table read
//! by key as each row is processed. The join runs in the stream's own vertex (no
//! exchange); the table's side of the plan (the scan's columns, filters and projections
//! over them) is applied to the rows a lookup returns.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion_physical_expr::PhysicalExpr;

use datafusion_expr::{Expr, ExprSchemable, JoinType, LogicalPlan};
use eddy_common::Result;
use eddy_connectors::lookup::{LookupCacheOptions, LookupKind};
use eddy_operators::OrEddy;
use eddy_operators::join::{LookupJoinSpec, TableStep};

use super::join::where_display;
use super::{OperatorKind, OperatorSpec, Planner, Stream, output_schema, unsupported};
use crate::plan::LookupTable;
use crate::sql::catalog::VersionedSource;

/// The table side of a join when it is a table read `FOR SYSTEM_TIME AS OF`: the scan,
/// and the nodes above it up to the join, top first.
pub(super) struct VersionedSide<'a> {
    pub(super) source: &'a VersionedSource,
    pub(super) scan: &'a datafusion_expr::TableScan,
    above: Vec<&'a LogicalPlan>,
}

impl VersionedSide<'_> {
    /// Read AS OF a processing-time attribute (a lookup join), not an event-time one.
    pub(super) fn is_processing_time(&self) -> bool {
        self.source.processing_time.get() == Some(&true)
    }
}

/// The versioned table `plan` reads, when it is one under aliases, projections and
/// filters.
pub(super) fn versioned_side(plan: &LogicalPlan) -> Option<VersionedSide<'_>> {
    let mut above = Vec::new();
    let mut node = plan;
    loop {
        match node {
            LogicalPlan::TableScan(scan) => {
                let source = scan.source.downcast_ref::<VersionedSource>()?;
                return Some(VersionedSide {
                    source,
                    scan,
                    above,
                });
            }
            LogicalPlan::SubqueryAlias(alias) => node = &alias.input,
            LogicalPlan::Projection(projection) => {
                above.push(node);
                node = &projection.input;
            }
            LogicalPlan::Filter(filter) => {
                above.push(node);
                node = &filter.input;
            }
            _ => return None,
        }
    }
}

/// A lookup join's keys, one per equality of its `ON`.
#[derive(Default)]
struct LookupKeys {
    /// The left side's expressions, cast to the key columns' types.
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The key columns' types.
    types: Vec<DataType>,
    /// The key columns' indexes in the table.
    columns: Vec<usize>,
}

impl Planner {
    /// A lookup join of `left` with the versioned table on the right of `join`.
    pub(super) fn plan_lookup_join(
        &mut self,
        join: &datafusion_expr::Join,
        left: Stream,
        table: VersionedSide<'_>,
    ) -> Result<Stream> {
        let name = &table.source.table.name;
        let left_outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => {
                return Err(unsupported(format!(
                    "a {other} join with a table FOR SYSTEM_TIME AS OF (a lookup join is an \
                     inner or a LEFT join)"
                )));
            }
        };
        // `AS OF` names a processing-time attribute of the left input: the SQL layer
        // checked it (`sql::as_of`), before the column was pruned.
        let connector = table.source.table.connector.clone();
        let kind = connector.lookup_kind().ok_or_else(|| {
            unsupported(format!(
                "a lookup join with table '{name}': the '{}' connector cannot look rows up",
                connector.name()
            ))
        })?;
        if join.on.is_empty() {
            return Err(unsupported(format!(
                "a lookup join without an equality on a column of '{name}' (ON o.key = {name}.key)"
            )));
        }
        let right_schema = join.right.schema();
        let LookupKeys {
            exprs: keys,
            types: key_types,
            columns: key_columns,
        } = self.lookup_keys(join, &left, &table)?;
        let table_side = self.table_steps(&table)?;
        let filter = self.join_filter(join)?;
        let cache = connector.lookup_cache();
        let description = format!(
            "LookupJoin({}, table: {name} [{}], on: {}{}; {})",
            join.join_type.to_string().to_ascii_lowercase(),
            connector.name(),
            join.on
                .iter()
                .map(|(l, r)| format!("{l} = {r}"))
                .collect::<Vec<_>>()
                .join(" AND "),
            where_display(join),
            lookup_display(kind, cache)
        );
        let stream = Stream {
            schema: join.schema.clone(),
            unique_key: None,
            window: None,
            window_end: None,
            window_start: None,
            ..left
        };
        self.push(
            &stream,
            OperatorSpec {
                description,
                changelog: stream.changelog,
                kind: OperatorKind::LookupJoin(LookupTable {
                    spec: LookupJoinSpec {
                        keys,
                        key_types,
                        table_side,
                        table_schema: output_schema(right_schema),
                        filter,
                        left_outer,
                        schema: output_schema(&join.schema),
                        cache,
                    },
                    table: name.clone(),
                    connector,
                    schema: table.source.table.physical_schema.clone(),
                    key_columns,
                }),
            },
        );
        Ok(stream)
    }

    /// The join's keys, from its equalities.
    fn lookup_keys(
        &mut self,
        join: &datafusion_expr::Join,
        left: &Stream,
        table: &VersionedSide<'_>,
    ) -> Result<LookupKeys> {
        let name = &table.source.table.name;
        let right_schema = join.right.schema();
        let mut keys = LookupKeys::default();
        for (l, r) in &join.on {
            let Expr::Column(column) = r else {
                return Err(unsupported(format!(
                    "a lookup join key {r}: it must be a column of '{name}'"
                )));
            };
            let index = table_column(table, right_schema.index_of_column(column).or_eddy()?)
                .ok_or_else(|| {
                    unsupported(format!(
                        "a lookup join key {r}: it must be a column of '{name}' itself, not \
                         computed"
                    ))
                })?;
            let key_type = table.source.table.physical_schema.field(index).data_type();
            let l = l.clone().cast_to(key_type, &left.schema).or_eddy()?;
            keys.exprs.push(self.physical(&l, &left.schema)?);
            keys.types.push(key_type.clone());
            keys.columns.push(index);
        }
        Ok(keys)
    }

    /// The steps from the rows a lookup returns (the table's columns) to the join's table
    /// side: the scan's projection, then the filters and projections above it.
    fn table_steps(&self, table: &VersionedSide<'_>) -> Result<Vec<TableStep>> {
        let mut steps = Vec::new();
        let physical = &table.source.table.physical_schema;
        if let Some(projection) = &table.scan.projection {
            let exprs = projection
                .iter()
                .map(|i| {
                    Arc::new(datafusion_physical_expr::expressions::Column::new(
                        physical.field(*i).name(),
                        *i,
                    )) as Arc<dyn datafusion_physical_expr::PhysicalExpr>
                })
                .collect();
            steps.push(TableStep::Project(
                exprs,
                output_schema(&table.scan.projected_schema),
            ));
        }
        for node in table.above.iter().rev() {
            match node {
                LogicalPlan::Filter(filter) => steps.push(TableStep::Filter(
                    self.physical(&filter.predicate, filter.input.schema())?,
                )),
                LogicalPlan::Projection(projection) => {
                    let exprs = projection
                        .expr
                        .iter()
                        .map(|e| self.physical(e, projection.input.schema()))
                        .collect::<Result<Vec<_>>>()?;
                    steps.push(TableStep::Project(exprs, output_schema(&projection.schema)));
                }
                _ => {}
            }
        }
        Ok(steps)
    }
}

/// The table column that column `index` of the table side is, through projections of
/// plain columns; `None` for a computed column.
fn table_column(table: &VersionedSide<'_>, mut index: usize) -> Option<usize> {
    for node in &table.above {
        if let LogicalPlan::Projection(projection) = node {
            let Expr::Column(column) = strip(&projection.expr[index]) else {
                return None;
            };
            index = projection.input.schema().index_of_column(column).ok()?;
        }
    }
    match &table.scan.projection {
        Some(projection) => projection.get(index).copied(),
        None => Some(index),
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => strip(&alias.expr),
        other => other,
    }
}

/// How the table is read, for `EXPLAIN`.
fn lookup_display(kind: LookupKind, cache: Option<LookupCacheOptions>) -> String {
    let read = match kind {
        LookupKind::Keyed => "looked up by key, a chunk's keys at once".to_string(),
        LookupKind::FullScan { reload_after } => {
            format!("read whole, again every {} s", reload_after.as_secs())
        }
    };
    let Some(cache) = cache else {
        return read;
    };
    let mut parts = vec![match cache.max_rows {
        usize::MAX => "unbounded".to_string(),
        n => format!("at most {n} keys"),
    }];
    let seconds = |d: std::time::Duration| format!("{} s", d.as_secs_f64());
    if let Some(d) = cache.expire_after_write {
        parts.push(format!("expire {} after write", seconds(d)));
    }
    if let Some(d) = cache.expire_after_access {
        parts.push(format!("expire {} after access", seconds(d)));
    }
    if !cache.cache_missing_keys {
        parts.push("missing keys not cached".into());
    }
    format!("{read}, cache: {}", parts.join(", "))
}
