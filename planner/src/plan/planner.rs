//! Turns the logical plan of each `INSERT INTO` into vertices of the job graph:
//! operators chained while the data can stay in one task, exchanges where rows must be
//! re-partitioned by key, and the changelog kind inferred bottom-up (and `-U` dropped
//! where an upsert sink's primary key equals the stream's unique key).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion_common::tree_node::TreeNode;
use datafusion_common::{Column, DFSchema, DFSchemaRef};
use datafusion_expr::execution_props::ExecutionProps;
use datafusion_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion_physical_expr::{PhysicalExpr, create_physical_expr};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;

mod aggregate;
mod interval;
mod join;
mod lookup;
mod over;
mod rank;
mod scan;
mod temporal;

use eddy_operators::rank::RankOutput;

use super::{
    Changelog, JobGraph, OperatorKind, OperatorSpec, Partitioning, SinkSpec, SourceSpec, Vertex,
    VertexOutput,
};
use crate::sql::functions::processing_time::PROCTIME;
use crate::sql::hints::StateTtlHints;
use crate::sql::nodes::{
    Correlate, WINDOW_END, WINDOW_START, WINDOW_TIME, WatermarkAssigner, WindowKind, WindowTvf,
};
use crate::sql::{CompiledScript, PlannedInsert};

/// Plans every `INSERT INTO` of a script into one job graph.
pub fn plan_job(script: &CompiledScript) -> Result<JobGraph> {
    let mut planner = Planner {
        vertices: Vec::new(),
        parallelism: script.config.parallelism,
        props: ExecutionProps::new(),
        state_ttl: script.config.state_ttl.map(|ttl| ttl.as_millis() as i64),
        cdc_events_duplicate: script.config.cdc_events_duplicate,
        state_ttl_hints: StateTtlHints::new(),
        used_hints: BTreeSet::new(),
        scan_filter: None,
    };
    for insert in &script.inserts {
        // An error planning the statement says where it is.
        planner
            .plan_insert(insert)
            .map_err(|error| crate::sql::locate(error, insert.location))?;
    }
    let vertices = planner
        .vertices
        .into_iter()
        .map(|v| {
            Ok(Vertex {
                id: v.id,
                parallelism: v.parallelism,
                source: v.source,
                inputs: v.inputs,
                operators: v.operators,
                output: v
                    .output
                    .ok_or_else(|| EddyError::Plan(format!("vertex v{} has no output", v.id)))?,
            })
        })
        .collect::<Result<Vec<Vertex>>>()?;
    refuse_shared_exclusive_sources(&vertices)?;
    Ok(JobGraph {
        config: script.config.clone(),
        vertices,
        tables: script.catalog.tables(),
    })
}

/// Refuses a job that reads a source that takes one reader (a replication slot) twice:
/// each `INSERT INTO` scans its tables on its own, and two scans would share the slot.
fn refuse_shared_exclusive_sources(vertices: &[Vertex]) -> Result<()> {
    let mut readers: BTreeMap<String, &str> = BTreeMap::new();
    for source in vertices.iter().filter_map(|v| v.source.as_ref()) {
        let Some(resource) = source.connector.exclusive_source() else {
            continue;
        };
        if let Some(first) = readers.insert(resource.clone(), &source.table) {
            let tables = match first == source.table {
                true => format!("table '{first}' is scanned twice and both scans read"),
                false => format!("tables '{first}' and '{}' both read", source.table),
            };
            return Err(EddyError::Unsupported(format!(
                "{tables} {resource}, which one reader holds at a time (each INSERT INTO \
                 scans its tables on its own): read it in one INSERT INTO, or declare a \
                 table per INSERT INTO, each with its own 'slot.name'"
            )));
        }
    }
    Ok(())
}

/// A vertex under construction.
struct VertexBuilder {
    id: usize,
    parallelism: usize,
    source: Option<SourceSpec>,
    inputs: Vec<usize>,
    operators: Vec<OperatorSpec>,
    output: Option<VertexOutput>,
}

/// The stream a logical node produces: which vertex its rows leave, their schema and
/// changelog, and what later nodes need to know about it.
struct Stream {
    vertex: usize,
    schema: DFSchemaRef,
    changelog: Changelog,
    /// Columns that identify a row of an updating stream (a group aggregate's keys),
    /// with the operator that could drop `-U` for an upsert sink.
    unique_key: Option<(Vec<usize>, (usize, usize))>,
    /// The window TVF the rows came through, if its columns are still there.
    window: Option<WindowKind>,
    /// The column holding each row's window end, when the rows belong to windows that
    /// close with the watermark (a window TVF's or a window aggregate's rows).
    window_end: Option<usize>,
    /// The kind of the windows `window_end` closes, and the column of their
    /// `window_start`, while it passes unchanged (a window aggregate or join can follow).
    window_start: Option<(WindowKind, usize)>,
    /// The event-time attribute: the column the watermark was declared on (or a window
    /// TVF's `window_time`), while it passes unchanged.
    rowtime: Option<usize>,
    /// The processing-time attribute: a `PROCTIME()` column, while it passes unchanged.
    proctime: Option<usize>,
    /// `window` windows by processing time (its time column was `proctime`).
    processing_window: bool,
}

impl Stream {
    /// The stream of `vertex`, with no unique key, window or time attribute.
    fn new(vertex: usize, schema: DFSchemaRef, changelog: Changelog) -> Stream {
        Stream {
            vertex,
            schema,
            changelog,
            unique_key: None,
            window: None,
            window_end: None,
            window_start: None,
            rowtime: None,
            proctime: None,
            processing_window: false,
        }
    }
}

/// The vertex a keyed operator runs in, and its `PARTITION BY` keys.
struct PartitionedBy {
    target: usize,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    types: Vec<arrow::datatypes::DataType>,
    display: String,
}

struct Planner {
    vertices: Vec<VertexBuilder>,
    parallelism: usize,
    props: ExecutionProps,
    /// `table.exec.state.ttl` in milliseconds, for the operators whose keyed state would
    /// otherwise grow for good.
    state_ttl: Option<i64>,
    /// `table.exec.source.cdc-events-duplicate`.
    cdc_events_duplicate: bool,
    /// The `STATE_TTL` hints of the query being planned, and the names they matched.
    state_ttl_hints: StateTtlHints,
    used_hints: BTreeSet<String>,
    /// The predicate of the filter right above the table scan being planned, whose
    /// bounds the scan gives its reader.
    scan_filter: Option<Expr>,
}

/// Whether `plan` is a table scan (under aliases): a filter on it bounds what it reads.
fn scanned(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::SubqueryAlias(alias) => scanned(&alias.input),
        _ => false,
    }
}

fn unsupported(what: impl Into<String>) -> EddyError {
    EddyError::Unsupported(what.into())
}

/// An Arrow schema for operator output: the logical one with every field nullable.
fn output_schema(schema: &DFSchema) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new(fields))
}

/// An operator's state TTL as `EXPLAIN` shows it beside the operator.
fn ttl_display(ttl: Option<i64>) -> String {
    match ttl {
        Some(ttl) => format!(", state TTL {ttl} ms"),
        None => String::new(),
    }
}

/// The table, view or alias a plan reads, as a `STATE_TTL` hint names it.
fn input_name(plan: &LogicalPlan) -> Option<String> {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => Some(alias.alias.table().to_lowercase()),
        LogicalPlan::TableScan(scan) => Some(scan.table_name.table().to_lowercase()),
        LogicalPlan::Projection(projection) => input_name(&projection.input),
        LogicalPlan::Filter(filter) => input_name(&filter.input),
        _ => None,
    }
}

fn strip_alias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => strip_alias(&alias.expr),
        other => other,
    }
}

impl Planner {
    /// The state TTL of an operator reading `input`: its `STATE_TTL` hint's when the query
    /// gives one for the input's name, else `table.exec.state.ttl`.
    fn state_ttl_of(&mut self, input: &LogicalPlan) -> Option<i64> {
        let hinted = input_name(input).and_then(|name| {
            let ttl = *self.state_ttl_hints.get(&name)?;
            self.used_hints.insert(name);
            Some(ttl)
        });
        hinted.or(self.state_ttl)
    }

    fn physical(&self, expr: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
        let subquery = expr.exists(|e| {
            Ok(matches!(
                e,
                Expr::InSubquery(_) | Expr::Exists(_) | Expr::ScalarSubquery(_)
            ))
        });
        if subquery.unwrap_or(false) {
            return Err(unsupported(
                "a subquery in an expression other than a conjunct of WHERE (... AND a IN \
                 (SELECT ...) AND [NOT] EXISTS (...), which are semi and anti joins), or a \
                 scalar subquery",
            ));
        }
        create_physical_expr(
            expr,
            schema,
            &self.props,
            &PhysicalPlanningContext::default(),
        )
        .or_eddy()
    }

    fn new_vertex(
        &mut self,
        parallelism: usize,
        source: Option<SourceSpec>,
        inputs: Vec<usize>,
    ) -> usize {
        let id = self.vertices.len();
        self.vertices.push(VertexBuilder {
            id,
            parallelism,
            source,
            inputs,
            operators: Vec::new(),
            output: None,
        });
        id
    }

    fn push(&mut self, stream: &Stream, op: OperatorSpec) -> usize {
        let ops = &mut self.vertices[stream.vertex].operators;
        ops.push(op);
        ops.len() - 1
    }

    /// Ends the stream's vertex with an exchange into a new vertex.
    fn exchange(
        &mut self,
        stream: &Stream,
        partitioning: Partitioning,
        parallelism: usize,
    ) -> usize {
        let target = self.new_vertex(parallelism, None, vec![stream.vertex]);
        self.vertices[stream.vertex].output = Some(VertexOutput::Exchange {
            target,
            partitioning,
        });
        target
    }

    fn plan_insert(&mut self, insert: &PlannedInsert) -> Result<()> {
        self.state_ttl_hints = insert.state_ttl_hints.clone();
        self.used_hints.clear();
        let first_vertex = self.vertices.len();
        let stream = self.plan(&insert.plan)?;
        if let Some(unused) = self
            .state_ttl_hints
            .keys()
            .find(|name| !self.used_hints.contains(*name))
        {
            return Err(EddyError::Plan(format!(
                "STATE_TTL names '{unused}', which is no input of a regular join or an \
                 unbounded GROUP BY of the query (name a table, view or alias they read)"
            )));
        }
        if stream
            .window
            .is_some_and(|w| matches!(w, WindowKind::Session { .. }))
        {
            return Err(unsupported(
                "a SESSION window TVF must be aggregated (GROUP BY window_start, window_end, ...)",
            ));
        }
        if stream.processing_window {
            return Err(unsupported(
                "a window TVF on processing time (PROCTIME()) must be aggregated (GROUP BY \
                 window_start, window_end, ...)",
            ));
        }
        let sink = &insert.sink;
        let mut changelog = stream.changelog;
        if changelog != Changelog::AppendOnly && !sink.connector.accepts_updates() {
            return Err(EddyError::Sql {
                location: insert.location,
                message: format!(
                    "table '{}' ({} connector) accepts only inserts, but the query produces a {} \
                     changelog (updates and deletes) from {}; write it to a table that takes \
                     updates (postgres, upsert-kafka, print, an iceberg table with a PRIMARY KEY), \
                     or aggregate in windows",
                    sink.name,
                    sink.connector.name(),
                    changelog,
                    self.update_origin(first_vertex),
                ),
            });
        }
        if changelog == Changelog::Retract && !sink.primary_key.is_empty() {
            let pk: Option<Vec<usize>> = sink
                .primary_key
                .iter()
                .map(|k| sink.physical_schema.index_of(k).ok())
                .collect();
            if let (Some(mut pk), Some((mut key, (vertex, op)))) = (pk, stream.unique_key.clone()) {
                pk.sort();
                key.sort();
                if pk == key
                    && let OperatorKind::GroupAggregate {
                        emit_update_before, ..
                    } = &mut self.vertices[vertex].operators[op].kind
                {
                    *emit_update_before = false;
                    changelog = Changelog::Upsert;
                    self.vertices[vertex].operators[op].changelog = Changelog::Upsert;
                    for later in &mut self.vertices[vertex].operators[op + 1..] {
                        later.changelog = Changelog::Upsert;
                    }
                    for v in &mut self.vertices[vertex + 1..] {
                        for o in &mut v.operators {
                            if o.changelog == Changelog::Retract {
                                o.changelog = Changelog::Upsert;
                            }
                        }
                    }
                }
            }
        }
        let vertex = self.sink_vertex(&stream, sink)?;
        self.vertices[vertex].output = Some(VertexOutput::Sink(SinkSpec {
            table: sink.name.clone(),
            connector: sink.connector.clone(),
            schema: sink.physical_schema.clone(),
            changelog,
        }));
        Ok(())
    }

    /// What first turns the rows of the query whose vertices start at `first_vertex` into
    /// updates: a changelog source, or an operator (an unbounded GROUP BY, a regular join).
    fn update_origin(&self, first_vertex: usize) -> String {
        for vertex in &self.vertices[first_vertex..] {
            if let Some(source) = &vertex.source
                && Changelog::of_source(source.connector.as_ref()) != Changelog::AppendOnly
            {
                return format!("the changelog source '{}'", source.table);
            }
            if let Some(op) = vertex
                .operators
                .iter()
                .find(|o| o.changelog != Changelog::AppendOnly)
            {
                return op.description.clone();
            }
        }
        "the query".into()
    }

    /// The vertex that writes the sink: the stream's own, or, for a sink that wants each
    /// partition's rows in one subtask (a filesystem table committing partitions), a new
    /// one hash-partitioned by the partition columns.
    fn sink_vertex(
        &mut self,
        stream: &Stream,
        sink: &crate::sql::catalog::TableDef,
    ) -> Result<usize> {
        let columns = sink.connector.sink_partitioned_by();
        if columns.is_empty() {
            return Ok(stream.vertex);
        }
        let exprs = columns
            .iter()
            .map(|name| {
                let index = sink.physical_schema.index_of(name)?;
                Ok(Expr::Column(Column::from(
                    stream.schema.qualified_field(index),
                )))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(self.partitioned_exchange(stream, &exprs)?.target)
    }

    fn plan(&mut self, plan: &LogicalPlan) -> Result<Stream> {
        match plan {
            LogicalPlan::TableScan(scan) => self.plan_scan(scan),
            LogicalPlan::Projection(projection) => {
                let input = match projection.input.as_ref() {
                    LogicalPlan::Filter(filter) => match rank::TopNShape::of(filter)? {
                        Some(shape) => {
                            let output = shape.output_under(projection);
                            self.plan_top_n(filter, shape, output)?
                        }
                        None => self.plan(&projection.input)?,
                    },
                    input => self.plan(input)?,
                };
                self.plan_projection(projection, input)
            }
            LogicalPlan::Filter(filter) => {
                if let Some(shape) = rank::TopNShape::of(filter)? {
                    return self.plan_top_n(filter, shape, RankOutput::Number);
                }
                let input = match scanned(&filter.input) {
                    true => {
                        self.scan_filter = Some(filter.predicate.clone());
                        let planned = self.plan(&filter.input);
                        self.scan_filter = None;
                        planned?
                    }
                    false => self.plan(&filter.input)?,
                };
                let predicate = self.physical(&filter.predicate, &input.schema)?;
                self.push(
                    &input,
                    OperatorSpec {
                        description: format!("Calc(where: {})", filter.predicate),
                        changelog: input.changelog,
                        kind: OperatorKind::Filter(predicate),
                    },
                );
                // A filter on an updating stream can turn an update into a delete, so the
                // stream no longer qualifies for upsert.
                Ok(Stream {
                    unique_key: None,
                    ..input
                })
            }
            LogicalPlan::SubqueryAlias(alias) => {
                let input = self.plan(&alias.input)?;
                Ok(Stream {
                    schema: alias.schema.clone(),
                    ..input
                })
            }
            LogicalPlan::Aggregate(aggregate) => self.plan_aggregate(aggregate),
            LogicalPlan::Union(union) => {
                let inputs = union
                    .inputs
                    .iter()
                    .map(|i| self.plan(i))
                    .collect::<Result<Vec<_>>>()?;
                let target = self.new_vertex(self.parallelism, None, Vec::new());
                let mut changelog = Changelog::AppendOnly;
                for input in &inputs {
                    self.vertices[input.vertex].output = Some(VertexOutput::Exchange {
                        target,
                        partitioning: Partitioning::Rebalance,
                    });
                    self.vertices[target].inputs.push(input.vertex);
                    changelog = changelog.max(input.changelog);
                }
                Ok(Stream::new(target, union.schema.clone(), changelog))
            }
            LogicalPlan::Extension(extension) => {
                let node = extension.node.as_any();
                if let Some(watermark) = node.downcast_ref::<WatermarkAssigner>() {
                    return self.plan_watermark(watermark);
                }
                if let Some(window) = node.downcast_ref::<WindowTvf>() {
                    return self.plan_window_tvf(window);
                }
                if let Some(correlate) = node.downcast_ref::<Correlate>() {
                    return self.plan_correlate(correlate);
                }
                Err(unsupported(format!("plan node {}", extension.node.name())))
            }
            LogicalPlan::Join(join) => self.plan_join(join),
            LogicalPlan::Sort(_) => Err(unsupported(
                "ORDER BY on an unbounded stream (sort within windows or use a sink that orders)",
            )),
            LogicalPlan::Limit(_) => Err(unsupported("LIMIT on an unbounded stream")),
            LogicalPlan::Window(window) => self.plan_over(window),
            LogicalPlan::EmptyRelation(_) | LogicalPlan::Values(_) => Err(unsupported(
                "a query without a source table (streams need a table to read)",
            )),
            other => Err(unsupported(format!(
                "{} in a streaming query",
                other.display()
            ))),
        }
    }

    /// A table function joined to its input's rows, chained after them: the input's
    /// columns keep their places (and so its time attributes), the function's follow.
    fn plan_correlate(&mut self, correlate: &Correlate) -> Result<Stream> {
        let input = self.plan(&correlate.input)?;
        let call = self.physical(&correlate.call, &input.schema)?;
        let join = if correlate.keep_unmatched {
            "LEFT"
        } else {
            "INNER"
        };
        self.push(
            &input,
            OperatorSpec {
                description: format!("Correlate({}, {join})", correlate.call),
                changelog: input.changelog,
                kind: OperatorKind::Correlate {
                    call,
                    keep_unmatched: correlate.keep_unmatched,
                    schema: Arc::new(correlate.schema.as_arrow().clone()),
                },
            },
        );
        Ok(Stream {
            schema: correlate.schema.clone(),
            unique_key: None,
            ..input
        })
    }

    /// Ends `input`'s vertex with an exchange by `PARTITION BY` expressions into a new vertex
    /// (into a single subtask when there are none).
    fn partitioned_exchange(&mut self, input: &Stream, exprs: &[Expr]) -> Result<PartitionedBy> {
        let keys = exprs
            .iter()
            .map(|e| self.physical(e, &input.schema))
            .collect::<Result<Vec<_>>>()?;
        let types = exprs
            .iter()
            .map(|e| e.get_type(&input.schema))
            .collect::<Result<Vec<_>, _>>()
            .or_eddy()?;
        let display = exprs
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let (partitioning, parallelism) = match keys.is_empty() {
            true => (Partitioning::Single, 1),
            false => (
                Partitioning::Hash {
                    keys: keys.clone(),
                    display: display.clone(),
                },
                self.parallelism,
            ),
        };
        let target = self.exchange(input, partitioning, parallelism);
        Ok(PartitionedBy {
            target,
            keys,
            types,
            display,
        })
    }

    /// A projection over `input`, chained into its vertex.
    fn plan_projection(
        &mut self,
        projection: &datafusion_expr::Projection,
        input: Stream,
    ) -> Result<Stream> {
        let exprs = projection
            .expr
            .iter()
            .map(|e| self.physical(e, &input.schema))
            .collect::<Result<Vec<_>>>()?;
        let description = format!(
            "Calc(select: {})",
            projection
                .expr
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        // Where an input column is passed on unchanged, if it is.
        let passed = |k: usize| {
            let column = Column::from(input.schema.qualified_field(k));
            projection
                .expr
                .iter()
                .position(|e| matches!(strip_alias(e), Expr::Column(c) if *c == column))
        };
        let unique_key = input.unique_key.as_ref().and_then(|(key, op)| {
            let mapped: Option<Vec<usize>> = key.iter().map(|k| passed(*k)).collect();
            mapped.map(|m| (m, *op))
        });
        let keeps_window = [WINDOW_START, WINDOW_END]
            .iter()
            .all(|name| projection.schema.fields().iter().any(|f| f.name() == name));
        self.push(
            &input,
            OperatorSpec {
                description,
                changelog: input.changelog,
                kind: OperatorKind::Project(exprs, output_schema(&projection.schema)),
            },
        );
        Ok(Stream {
            vertex: input.vertex,
            schema: projection.schema.clone(),
            changelog: input.changelog,
            unique_key,
            window: input.window.filter(|_| keeps_window),
            window_end: input.window_end.and_then(passed),
            window_start: input
                .window_start
                .and_then(|(kind, start)| Some((kind, passed(start)?))),
            rowtime: input.rowtime.and_then(passed),
            proctime: input.proctime.and_then(passed).or_else(|| {
                projection.expr.iter().position(
                    |e| matches!(strip_alias(e), Expr::ScalarFunction(f) if f.name() == PROCTIME),
                )
            }),
            // Any window column left makes the rows still processing-time windowed.
            processing_window: input.processing_window
                && [WINDOW_START, WINDOW_END, WINDOW_TIME]
                    .iter()
                    .any(|name| projection.schema.fields().iter().any(|f| f.name() == name)),
        })
    }

    fn plan_window_tvf(&mut self, node: &WindowTvf) -> Result<Stream> {
        let input = self.plan(&node.input)?;
        if input.changelog != Changelog::AppendOnly {
            return Err(unsupported(
                "a window TVF over an updating (non append-only) input",
            ));
        }
        let time_column = input.schema.index_of_column(&node.time_column).or_eddy()?;
        let processing = input.proctime == Some(time_column);
        if processing && matches!(node.kind, WindowKind::Session { .. }) {
            return Err(unsupported(
                "a SESSION window on processing time (PROCTIME())",
            ));
        }
        let schema = datafusion_expr::UserDefinedLogicalNodeCore::schema(node).clone();
        let time = if processing {
            "processing time"
        } else {
            "event time"
        };
        self.push(
            &input,
            OperatorSpec {
                description: format!(
                    "WindowTvf({} on {}, {time})",
                    node.kind, node.time_column.name
                ),
                changelog: Changelog::AppendOnly,
                kind: OperatorKind::WindowAssign {
                    // On processing time the window aggregate assigns windows as rows
                    // arrive; each row passes once, with the tumbling window of its time.
                    kind: match (processing, node.kind) {
                        (
                            true,
                            WindowKind::Hop { size, .. } | WindowKind::Cumulate { size, .. },
                        ) => WindowKind::Tumble { size },
                        (_, kind) => kind,
                    },
                    time_column,
                    schema: output_schema(&schema),
                },
            },
        );
        let window_end = schema.fields().iter().position(|f| f.name() == WINDOW_END);
        let window_start = schema
            .fields()
            .iter()
            .position(|f| f.name() == WINDOW_START);
        // The input's time attribute stays one (a window deduplication orders by it).
        Ok(Stream {
            vertex: input.vertex,
            schema,
            changelog: Changelog::AppendOnly,
            unique_key: None,
            window: Some(node.kind),
            // Processing-time windows close with the clock, not the watermark.
            window_end: window_end.filter(|_| !processing),
            window_start: window_start
                .filter(|_| !processing)
                .map(|start| (node.kind, start)),
            rowtime: input.rowtime,
            proctime: input.proctime,
            processing_window: processing,
        })
    }
}
