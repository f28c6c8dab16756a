//! The job graph: vertices (chains of operators run by one task per subtask), the
//! exchanges between them, and the changelog kind every operator produces.

pub mod explain;
pub mod fingerprint;
mod lookup;
mod planner;

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion_physical_expr::PhysicalExpr;

pub use planner::plan_job;

use crate::sql::nodes::WindowKind;
use eddy_common::Result;
use eddy_common::config::JobConfig;
use eddy_common::metrics::OperatorMetrics;
use eddy_connectors::{SourceChanges, TableConnector};
use eddy_operators::Operator;
use eddy_operators::aggregate::{
    AggregateCall, GroupAggregate, OverAggregate, OverSpec, WindowAggregate, WindowAggregateSpec,
};
use eddy_operators::calc::Calc;
use eddy_operators::correlate::Correlate;
use eddy_operators::join::{
    JoinSpec, LookupJoin, LookupJoinSpec, StreamingJoin, TemporalJoin, TemporalJoinSpec,
    WindowJoin, WindowJoinSpec,
};
use eddy_operators::normalize::{ChangelogNormalize, NormalizeSpec};
use eddy_operators::rank::{RankSpec, TopN};
use eddy_operators::state_context::StateContext;
use eddy_operators::window_assign::WindowAssign;

/// Which changes a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Changelog {
    /// Only `+I`.
    AppendOnly,
    /// Keyed `+I`, `+U`, `-D`: updates replace the row with the same key, no `-U`.
    Upsert,
    /// `+I`, `-U`, `+U`, `-D`: an update retracts the old row before adding the new.
    Retract,
}

impl Changelog {
    /// The changes a source table's rows carry, as its connector reads them.
    pub fn of_source(connector: &dyn TableConnector) -> Changelog {
        Changelog::of_changes(&connector.source_changes())
    }

    /// The changelog kind of a source's `changes`.
    pub fn of_changes(changes: &SourceChanges) -> Changelog {
        match changes {
            SourceChanges::Inserts => Changelog::AppendOnly,
            SourceChanges::All => Changelog::Retract,
            SourceChanges::Upsert { .. } => Changelog::Upsert,
        }
    }
}

impl fmt::Display for Changelog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Changelog::AppendOnly => "append-only",
            Changelog::Upsert => "upsert",
            Changelog::Retract => "retract",
        })
    }
}

/// How rows travel from one vertex to the next.
#[derive(Debug, Clone)]
pub enum Partitioning {
    /// Subtask `i` sends to subtask `i` (same parallelism).
    Forward,
    /// By the hash of key expressions, through key groups.
    Hash {
        /// The key expressions, evaluated on the sending vertex's output.
        keys: Vec<Arc<dyn PhysicalExpr>>,
        /// The keys as written, for `EXPLAIN`.
        display: String,
    },
    /// Everything to the single subtask of the next vertex.
    Single,
    /// Round-robin over the next vertex's subtasks.
    Rebalance,
}

impl fmt::Display for Partitioning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Partitioning::Forward => f.write_str("forward"),
            Partitioning::Hash { display, .. } => write!(f, "hash({display})"),
            Partitioning::Single => f.write_str("single"),
            Partitioning::Rebalance => f.write_str("rebalance"),
        }
    }
}

/// Where a vertex's output goes.
#[derive(Debug, Clone)]
pub enum VertexOutput {
    /// Into a sink table.
    Sink(SinkSpec),
    /// To another vertex.
    Exchange {
        /// The receiving vertex.
        target: usize,
        /// How rows are spread over its subtasks.
        partitioning: Partitioning,
    },
}

/// A source table read by a vertex.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The table's name.
    pub table: String,
    /// Its connector.
    pub connector: Arc<dyn TableConnector>,
    /// The physical columns read, then the metadata columns.
    pub schema: SchemaRef,
    /// The metadata keys of the columns after the physical ones.
    pub metadata: Vec<String>,
    /// The columns of `schema` the plan uses, when it uses fewer than all (the scan's
    /// projection over an insert-only source): the reader may leave the others NULL.
    pub columns_used: Option<Vec<usize>>,
    /// Bounds of the query's filter right above the scan that every row kept passes, for
    /// a reader that skips rows by them (Parquet's row groups, by their statistics).
    pub bounds: Vec<eddy_connectors::pushdown::ColumnBound>,
    /// Operators applied to the connector's rows before watermarks are taken (computed
    /// columns).
    pub scan_operators: Vec<OperatorSpec>,
    /// The `WATERMARK` expression, over the rows after `scan_operators`.
    pub watermark: Option<Arc<dyn PhysicalExpr>>,
}

/// A sink table written by a vertex.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    /// The table's name.
    pub table: String,
    /// Its connector.
    pub connector: Arc<dyn TableConnector>,
    /// The columns written.
    pub schema: SchemaRef,
    /// The changes it receives.
    pub changelog: Changelog,
}

/// One vertex: a source or inputs, a chain of operators, and an output.
#[derive(Debug, Clone)]
pub struct Vertex {
    /// Index in [`JobGraph::vertices`].
    pub id: usize,
    /// How many subtasks run it.
    pub parallelism: usize,
    /// The source it reads, if it is a source vertex.
    pub source: Option<SourceSpec>,
    /// The vertices sending to it.
    pub inputs: Vec<usize>,
    /// Its operators, in order.
    pub operators: Vec<OperatorSpec>,
    /// Where its rows go.
    pub output: VertexOutput,
}

impl Vertex {
    /// A short name for logs and metrics.
    pub fn name(&self) -> String {
        match &self.source {
            Some(source) => format!("v{}:{}", self.id, source.table),
            None => format!("v{}", self.id),
        }
    }
}

/// The whole job.
#[derive(Debug, Clone)]
pub struct JobGraph {
    /// The job's options.
    pub config: JobConfig,
    /// Its vertices; inputs always come before the vertices they feed.
    pub vertices: Vec<Vertex>,
    /// Every table the script declares, in the order declared (used or not): what a
    /// cluster checks against its policy.
    pub tables: Vec<Arc<crate::sql::catalog::TableDef>>,
}

impl JobGraph {
    /// Slots needed: with slot sharing, one slot runs one parallel slice of every vertex.
    pub fn slots_needed(&self) -> usize {
        self.vertices
            .iter()
            .map(|v| v.parallelism)
            .max()
            .unwrap_or(0)
    }

    /// Whether a sink of the job commits at completed checkpoints (two-phase commit), so
    /// that the job must restore its newest complete checkpoint or none.
    pub fn commits_at_checkpoints(&self) -> bool {
        let checkpointing = self.config.checkpoints.interval.is_some();
        self.vertices.iter().any(|v| match &v.output {
            VertexOutput::Sink(sink) => sink.connector.commits_at_checkpoints(checkpointing),
            VertexOutput::Exchange { .. } => false,
        })
    }

    /// The plan as text, for `eddy explain`.
    pub fn explain(&self) -> String {
        explain::render(self)
    }
}

/// A lookup join and the table it reads.
#[derive(Debug, Clone)]
pub struct LookupTable {
    /// The join.
    pub spec: LookupJoinSpec,
    /// The table's name.
    pub table: String,
    /// Its connector.
    pub connector: Arc<dyn TableConnector>,
    /// Its columns (what a lookup returns).
    pub schema: SchemaRef,
    /// The columns looked up by.
    pub key_columns: Vec<usize>,
}

/// An operator as planned: what it does, what it produces, and how to build it.
#[derive(Debug, Clone)]
pub struct OperatorSpec {
    /// A description for `EXPLAIN` and metrics.
    pub description: String,
    /// The changes it emits.
    pub changelog: Changelog,
    /// What to build.
    pub kind: OperatorKind,
}

/// The operator kinds.
#[derive(Debug, Clone)]
pub enum OperatorKind {
    /// A filter.
    Filter(Arc<dyn PhysicalExpr>),
    /// A projection producing `schema`.
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
    /// Window assignment.
    WindowAssign {
        /// Which windows.
        kind: WindowKind,
        /// The event-time column.
        time_column: usize,
        /// Output rows: input plus window columns.
        schema: SchemaRef,
    },
    /// Unbounded `GROUP BY`.
    GroupAggregate {
        /// Grouping expressions.
        keys: Vec<Arc<dyn PhysicalExpr>>,
        /// Their types.
        key_types: Vec<DataType>,
        /// Aggregate calls.
        calls: Vec<AggregateCall>,
        /// Emit `-U` rows (retract) or not (upsert).
        emit_update_before: bool,
        /// Output rows.
        schema: SchemaRef,
        /// Milliseconds a group lives after its last update (`None`: for good).
        state_ttl: Option<i64>,
    },
    /// Window aggregate.
    WindowAggregate(WindowAggregateSpec),
    /// Regular or interval equi-join of the vertex's two inputs (always its first
    /// operator).
    Join(JoinSpec),
    /// Window join of the vertex's two inputs (always its first operator).
    WindowJoin(WindowJoinSpec),
    /// Lookup join of the stream with a table read by key.
    LookupJoin(LookupTable),
    /// Event-time temporal join of the vertex's two inputs (always its first operator).
    TemporalJoin(TemporalJoinSpec),
    /// Top-N or deduplication (`ROW_NUMBER() OVER (...)` filtered by its rank).
    TopN(RankSpec),
    /// An upsert stream made a retract stream by keeping each key's last row.
    ChangelogNormalize(NormalizeSpec),
    /// OVER aggregates on event time.
    Over(OverSpec),
    /// A table function joined to each row (`LATERAL TABLE(f(...))`).
    Correlate {
        /// The call: for each row, the list of rows the function gives.
        call: Arc<dyn PhysicalExpr>,
        /// `LEFT JOIN`: a row the function gives nothing for is kept, padded with NULLs.
        keep_unmatched: bool,
        /// Output rows: the input's columns, then the function's.
        schema: SchemaRef,
    },
}

impl OperatorSpec {
    /// Whether the operator keeps state between chunks (and emits one chunk per chunk
    /// otherwise).
    pub fn is_stateful(&self) -> bool {
        matches!(
            self.kind,
            OperatorKind::GroupAggregate { .. }
                | OperatorKind::WindowAggregate(_)
                | OperatorKind::Join(_)
                | OperatorKind::WindowJoin(_)
                | OperatorKind::LookupJoin(_)
                | OperatorKind::TemporalJoin(_)
                | OperatorKind::TopN(_)
                | OperatorKind::Over(_)
                | OperatorKind::ChangelogNormalize(_)
        )
    }

    /// Builds the operator for one subtask; keyed state is split into `max_parallelism` key
    /// groups and kept where `state` says.
    pub fn instantiate(
        &self,
        metrics: Arc<OperatorMetrics>,
        max_parallelism: usize,
        state: &StateContext,
    ) -> Result<Box<dyn Operator>> {
        let operator: Box<dyn Operator> = match &self.kind {
            OperatorKind::Filter(predicate) => Box::new(Calc::filter(predicate.clone())),
            OperatorKind::Project(exprs, schema) => {
                Box::new(Calc::project(exprs.clone(), schema.clone()))
            }
            OperatorKind::Correlate {
                call,
                keep_unmatched,
                schema,
            } => Box::new(Correlate::new(
                call.clone(),
                *keep_unmatched,
                schema.clone(),
            )),
            OperatorKind::WindowAssign {
                kind,
                time_column,
                schema,
            } => Box::new(WindowAssign::new(*kind, *time_column, schema.clone())),
            OperatorKind::GroupAggregate {
                keys,
                key_types,
                calls,
                emit_update_before,
                schema,
                state_ttl,
            } => Box::new(
                GroupAggregate::new(
                    keys.clone(),
                    key_types.clone(),
                    calls.clone(),
                    *emit_update_before,
                    schema.clone(),
                    max_parallelism,
                )?
                .with_state_ttl(*state_ttl)
                .with_state(state)?,
            ),
            OperatorKind::WindowAggregate(spec) => Box::new(
                WindowAggregate::new(spec.clone(), metrics, max_parallelism)?.with_state(state)?,
            ),
            OperatorKind::Join(spec) => {
                Box::new(StreamingJoin::new(spec, max_parallelism)?.with_state(state)?)
            }
            OperatorKind::LookupJoin(table) => Box::new(LookupJoin::new(
                table.spec.clone(),
                Box::new(lookup::BlockingLookup::open(table, metrics)?),
            )?),
            OperatorKind::TemporalJoin(spec) => {
                Box::new(TemporalJoin::new(spec.clone(), max_parallelism)?.with_state(state)?)
            }
            OperatorKind::WindowJoin(spec) => Box::new(
                WindowJoin::new(spec.clone(), metrics, max_parallelism)?.with_state(state)?,
            ),
            OperatorKind::TopN(spec) => {
                Box::new(TopN::new(spec.clone(), metrics, max_parallelism)?.with_state(state)?)
            }
            OperatorKind::Over(spec) => Box::new(
                OverAggregate::new(spec.clone(), metrics, max_parallelism)?.with_state(state)?,
            ),
            OperatorKind::ChangelogNormalize(spec) => {
                Box::new(ChangelogNormalize::new(spec.clone(), max_parallelism)?.with_state(state)?)
            }
        };
        Ok(operator)
    }
}
