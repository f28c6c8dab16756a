//! Where streams start: table scans (and the normalization a change stream may need) and
//! the watermarks assigned to them.

use std::sync::Arc;

use datafusion_common::{Column, DFSchema, ScalarValue};
use datafusion_expr::utils::split_conjunction;
use datafusion_expr::{BinaryExpr, Expr, Operator};
use eddy_common::config::CDC_EVENTS_DUPLICATE;
use eddy_common::{EddyError, Result};
use eddy_connectors::SourceChanges;
use eddy_connectors::pushdown::{BoundOp, ColumnBound};
use eddy_operators::OrEddy;
use eddy_operators::normalize::NormalizeSpec;

use super::super::{Changelog, OperatorKind, OperatorSpec, SourceSpec};
use super::{Planner, Stream, output_schema, ttl_display, unsupported};
use crate::sql::catalog::ConnectorSource;
use crate::sql::nodes::WatermarkAssigner;

impl Planner {
    pub(super) fn plan_scan(&mut self, scan: &datafusion_expr::TableScan) -> Result<Stream> {
        if scan
            .source
            .downcast_ref::<crate::sql::catalog::VersionedSource>()
            .is_some()
        {
            return Err(unsupported(
                "a table FOR SYSTEM_TIME AS OF outside the right input of a join on \
                 equality of its columns (a lookup join)",
            ));
        }
        let source = scan
            .source
            .downcast_ref::<ConnectorSource>()
            .ok_or_else(|| {
                EddyError::Plan(format!("'{}' is not a connector table", scan.table_name))
            })?;
        if !source.connector.is_source() {
            return Err(unsupported(format!(
                "table '{}' uses the '{}' connector, which cannot be read",
                source.table,
                source.connector.name()
            )));
        }
        if !scan.filters.is_empty() || scan.fetch.is_some() {
            return Err(EddyError::Plan(
                "a table scan got pushed-down filters".into(),
            ));
        }
        // The columns above the scan needs; a change stream's are all needed to normalize
        // it by key.
        let changes = source.connector.source_changes();
        let columns_used = match changes {
            SourceChanges::Inserts => scan
                .projection
                .clone()
                .filter(|used| used.len() < source.schema.fields().len()),
            _ => None,
        };
        let filter = self.scan_filter.take();
        let bounds = match (&filter, &changes) {
            (Some(predicate), SourceChanges::Inserts) if source.connector.skips_by_bounds() => {
                column_bounds(predicate, source)
            }
            _ => Vec::new(),
        };
        let vertex = self.new_vertex(
            self.parallelism,
            Some(SourceSpec {
                table: source.table.clone(),
                connector: source.connector.clone(),
                schema: source.schema.clone(),
                metadata: source.metadata.clone(),
                columns_used,
                bounds,
                scan_operators: Vec::new(),
                watermark: None,
            }),
            Vec::new(),
        );
        let full = DFSchema::try_from_qualified_schema(scan.table_name.clone(), &source.schema)
            .or_eddy()?;
        // A changelog format's rows are a retract stream (each change carries its whole
        // before-image); an upsert source's are normalized by key into one.
        let mut stream = Stream::new(vertex, Arc::new(full), Changelog::of_changes(&changes));
        match changes {
            SourceChanges::Upsert { key } => stream = self.normalize(stream, &key)?,
            SourceChanges::All if self.cdc_events_duplicate => {
                if source.primary_key.is_empty() {
                    return Err(EddyError::Plan(format!(
                        "'{CDC_EVENTS_DUPLICATE}' is enabled, which needs every changelog \
                         source to declare a PRIMARY KEY to deduplicate by; '{}' has none",
                        source.table
                    )));
                }
                stream = self.normalize(stream, &source.primary_key)?;
            }
            SourceChanges::All | SourceChanges::Inserts => {}
        }
        let changelog = stream.changelog;
        let Some(projection) = &scan.projection else {
            return Ok(stream);
        };
        let exprs = projection
            .iter()
            .map(|i| {
                self.physical(
                    &Expr::Column(Column::from(stream.schema.qualified_field(*i))),
                    &stream.schema,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let names: Vec<String> = projection
            .iter()
            .map(|i| source.schema.field(*i).name().clone())
            .collect();
        self.push(
            &stream,
            OperatorSpec {
                description: format!("Calc(select: {})", names.join(", ")),
                changelog,
                kind: OperatorKind::Project(exprs, output_schema(&scan.projected_schema)),
            },
        );
        Ok(Stream {
            schema: scan.projected_schema.clone(),
            ..stream
        })
    }

    /// Follows an upsert source (or a changelog source that may repeat changes) with a
    /// changelog normalization in a vertex of its own, partitioned by the key (`key`
    /// columns of the source's rows): each key's last row kept, the stream made a retract
    /// stream without repeats (Flink's `ChangelogNormalize`).
    pub(super) fn normalize(&mut self, source: Stream, key: &[usize]) -> Result<Stream> {
        let exprs: Vec<Expr> = key
            .iter()
            .map(|i| Expr::Column(Column::from(source.schema.qualified_field(*i))))
            .collect();
        let partitioned = self.partitioned_exchange(&source, &exprs)?;
        let state_ttl = self.state_ttl;
        let stream = Stream::new(
            partitioned.target,
            source.schema.clone(),
            Changelog::Retract,
        );
        self.push(
            &stream,
            OperatorSpec {
                description: format!(
                    "ChangelogNormalize(key: {}{})",
                    partitioned.display,
                    ttl_display(state_ttl)
                ),
                changelog: Changelog::Retract,
                kind: OperatorKind::ChangelogNormalize(NormalizeSpec {
                    keys: partitioned.keys,
                    key_types: partitioned.types,
                    schema: output_schema(&source.schema),
                    state_ttl,
                }),
            },
        );
        Ok(stream)
    }

    pub(super) fn plan_watermark(&mut self, node: &WatermarkAssigner) -> Result<Stream> {
        let input = self.plan(&node.input)?;
        let expr = self.physical(&node.expr, &input.schema)?;
        let vertex = &mut self.vertices[input.vertex];
        let Some(source) = vertex.source.as_mut() else {
            return Err(EddyError::Plan(
                "a WATERMARK must sit directly on a table's source".into(),
            ));
        };
        source.scan_operators = std::mem::take(&mut vertex.operators);
        source.watermark = Some(expr);
        let rowtime = input
            .schema
            .fields()
            .iter()
            .position(|f| f.name() == &node.rowtime);
        Ok(Stream { rowtime, ..input })
    }
}

/// The conjuncts of `predicate` that compare a physical column of `source` with a
/// constant of the column's own type (`x > 5`, `5 <= x`, `x = 5`), as bounds for its
/// reader.
fn column_bounds(predicate: &Expr, source: &ConnectorSource) -> Vec<ColumnBound> {
    let physical = source.schema.fields().len() - source.metadata.len();
    let bound = |column: &Column, op: BoundOp, value: &ScalarValue| {
        let index = source.schema.index_of(&column.name).ok()?;
        let field = source
            .schema
            .fields()
            .get(index)
            .filter(|_| index < physical)?;
        let value = value.to_array().ok()?;
        ColumnBound::new(field.name(), field.data_type(), op, value)
    };
    split_conjunction(predicate)
        .into_iter()
        .filter_map(|conjunct| {
            let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
                return None;
            };
            let op = match op {
                Operator::Eq => BoundOp::Eq,
                Operator::Lt => BoundOp::Lt,
                Operator::LtEq => BoundOp::LtEq,
                Operator::Gt => BoundOp::Gt,
                Operator::GtEq => BoundOp::GtEq,
                _ => return None,
            };
            match (left.as_ref(), right.as_ref()) {
                (Expr::Column(column), Expr::Literal(value, _)) => bound(column, op, value),
                (Expr::Literal(value, _), Expr::Column(column)) => {
                    bound(column, op.flipped(), value)
                }
                _ => None,
            }
        })
        .collect()
}
