//! The SQL front end: Flink-style scripts parsed, bound and optimized into DataFusion
//! logical plans, one per `INSERT INTO`.

mod as_of;
pub mod catalog;
mod column_type;
pub mod create_function;
mod create_table;
pub mod depth;
mod field_names;
mod flink_expressions;
pub(crate) mod functions;
mod group_window;
pub mod hints;
pub mod lateral_table;
pub mod nodes;
pub mod script;
pub mod window_tvf;

use std::sync::Arc;

use catalog::{Catalog, Provider, TableDef};
use datafusion_common::{Column, DataFusionError};
use datafusion_expr::{LogicalPlan, LogicalPlanBuilder, cast, col};
use datafusion_optimizer::analyzer::Analyzer;
use datafusion_optimizer::{Optimizer, OptimizerContext, OptimizerRule};
use datafusion_sql::planner::{NullOrdering, ParserOptions, SqlToRel};
use datafusion_sql::sqlparser::ast;
use eddy_common::config::JobConfig;
use eddy_common::error::Location;
use eddy_common::schema;
use eddy_common::{EddyError, Result};
use script::{Located, Statement};

/// One `INSERT INTO`, planned.
#[derive(Debug)]
pub struct PlannedInsert {
    /// The sink table.
    pub sink: Arc<TableDef>,
    /// The optimized logical plan of the rows written, already cast to the sink's columns.
    pub plan: LogicalPlan,
    /// The query's `STATE_TTL` hints.
    pub state_ttl_hints: hints::StateTtlHints,
    /// Where the statement starts.
    pub location: Location,
}

/// A whole script, parsed and planned.
#[derive(Debug)]
pub struct CompiledScript {
    /// The job options after every `SET` (and the command line's overrides).
    pub config: JobConfig,
    /// Its tables and views.
    pub catalog: Catalog,
    /// Its `INSERT INTO` statements, in order.
    pub inserts: Vec<PlannedInsert>,
}

/// Parses and plans a script. `overrides` are options given outside the script (the
/// command line); they win over the script's `SET`s.
pub fn compile(
    sql: &str,
    overrides: &[(String, String)],
    context: crate::PlanningContext,
) -> Result<CompiledScript> {
    let statements = script::parse_script(sql)?;
    let mut compiled = CompiledScript {
        config: JobConfig::default(),
        catalog: Catalog::default(),
        inserts: Vec::new(),
    };
    let python = eddy_udf::python::PythonRuntime::new();
    for Located { location, item } in statements {
        let at = |e: EddyError| locate(e, location);
        match item {
            Statement::Set { key, value } => compiled.config.set(&key, &value).map_err(at)?,
            Statement::CreateTable(table) => {
                let def = create_table::create_table(&compiled.catalog, *table, location, context)?;
                compiled
                    .catalog
                    .add_table(def)
                    .map_err(|m| sql_error(location, m))?;
            }
            Statement::CreateView {
                name,
                columns,
                query,
            } => {
                let hints = hints::state_ttl_hints(&query).map_err(|m| sql_error(location, m))?;
                if !hints.is_empty() {
                    return Err(sql_error(
                        location,
                        "unsupported: a STATE_TTL hint in a view (give it in the query that \
                         reads the view, naming the view)",
                    ));
                }
                let plan = bind_query(&compiled.catalog, query, location)?;
                let plan = name_view_columns(plan, &name, &columns, location)?;
                compiled
                    .catalog
                    .add_view(name, plan)
                    .map_err(|m| sql_error(location, m))?;
            }
            Statement::CreateFunction(function) => {
                create_function::create_function(
                    &mut compiled.catalog,
                    *function,
                    &python,
                    location,
                )?;
            }
            Statement::Insert { table, query } => {
                let insert = plan_insert(&compiled.catalog, &table, query, location)?;
                compiled.inserts.push(insert);
            }
        }
    }
    for (key, value) in overrides {
        compiled.config.set(key, value)?;
    }
    compiled.config.validate()?;
    python.configure(compiled.config.python.clone());
    if compiled.inserts.is_empty() {
        return Err(EddyError::Plan(
            "the script has no INSERT INTO statement, so there is nothing to run".into(),
        ));
    }
    Ok(compiled)
}

fn sql_error(location: Location, message: impl Into<String>) -> EddyError {
    EddyError::Sql {
        location,
        message: message.into(),
    }
}

/// Attaches a statement's position to an error that has none.
pub(crate) fn locate(error: EddyError, location: Location) -> EddyError {
    match error {
        EddyError::Sql { .. } => error,
        other => sql_error(location, other.to_string()),
    }
}

/// Turns a DataFusion error into a SQL error at the position DataFusion names, or else at
/// the statement.
fn bind_error(error: DataFusionError, statement: Location) -> EddyError {
    let location = error
        .diagnostic()
        .and_then(|d| d.span)
        .map(|span| Location {
            line: span.start.line,
            column: span.start.column,
        })
        .filter(|l| l.line > 0)
        .unwrap_or(statement);
    let message = error.strip_backtrace();
    let message = message
        .strip_prefix("Error during planning: ")
        .unwrap_or(&message)
        .to_string();
    let (message, parsed) = script::split_location(&message);
    sql_error(parsed.unwrap_or(location), message)
}

fn sql_to_rel<'a>(provider: &'a Provider<'a>) -> SqlToRel<'a, Provider<'a>> {
    let options = ParserOptions::new()
        .with_map_string_types_to_utf8view(false)
        .with_collect_spans(true)
        // Flink orders NULLs first ascending and last descending (Calcite's LOW collation).
        .with_default_null_ordering(NullOrdering::NullsMin)
        // A literal with a fraction is an exact DECIMAL, as in Flink (`0.908 * price`).
        .with_parse_float_as_decimal(true);
    SqlToRel::new_with_options(provider, options)
}

fn bind_query(
    catalog: &Catalog,
    mut query: Box<ast::Query>,
    location: Location,
) -> Result<LogicalPlan> {
    group_window::rewrite(&mut query).map_err(|message| sql_error(location, message))?;
    field_names::name_row_fields(&mut query, &catalog.row_columns());
    let provider = Provider::new(catalog);
    let planner = sql_to_rel(&provider);
    let plan = planner
        .sql_statement_to_plan(ast::Statement::Query(query))
        .and_then(lateral_table::correlate)
        .map_err(|e| bind_error(e, location))?;
    depth::check_plan(&plan).map_err(|message| sql_error(location, message))?;
    analyze(plan).map_err(|e| bind_error(e, location))
}

/// The view `name`'s plan with its columns named `columns` (in order), as Flink's
/// `CREATE VIEW name (columns) AS query`; the query's names when none are given.
fn name_view_columns(
    plan: LogicalPlan,
    name: &str,
    columns: &[String],
    location: Location,
) -> Result<LogicalPlan> {
    if columns.is_empty() {
        return Ok(plan);
    }
    let schema = plan.schema().clone();
    if columns.len() != schema.fields().len() {
        return Err(sql_error(
            location,
            format!(
                "CREATE VIEW {name}: {} column names are given for a query of {} columns",
                columns.len(),
                schema.fields().len()
            ),
        ));
    }
    let renamed = columns.iter().enumerate().map(|(i, column)| {
        let (qualifier, field) = schema.qualified_field(i);
        col(Column::from((qualifier, field))).alias(column)
    });
    let bind = |e: DataFusionError| bind_error(e, location);
    LogicalPlanBuilder::from(plan)
        .project(renamed)
        .map_err(bind)?
        .build()
        .map_err(bind)
}

fn plan_insert(
    catalog: &Catalog,
    table: &str,
    query: Box<ast::Query>,
    location: Location,
) -> Result<PlannedInsert> {
    let sink = catalog
        .table(table)
        .cloned()
        .ok_or_else(|| sql_error(location, format!("INSERT INTO '{table}': no such table")))?;
    if !sink.connector.is_sink() {
        let reason = sink.connector.write_refusal().unwrap_or_else(|| {
            format!(
                "the '{}' connector cannot be written to",
                sink.connector.name()
            )
        });
        return Err(sql_error(
            location,
            format!("INSERT INTO '{table}': {reason}"),
        ));
    }
    if let Some(column) = sink.metadata.iter().find(|m| !m.is_virtual) {
        return Err(sql_error(
            location,
            format!(
                "INSERT INTO '{table}': metadata column '{}' (metadata '{}') cannot be \
                 written; declare it VIRTUAL",
                column.name, column.key
            ),
        ));
    }
    let state_ttl_hints = hints::state_ttl_hints(&query).map_err(|m| sql_error(location, m))?;
    let plan = bind_query(catalog, query, location)?;
    let target = &sink.physical_schema;
    let produced = plan.schema();
    if produced.fields().len() != target.fields().len() {
        return Err(sql_error(
            location,
            format!(
                "INSERT INTO '{table}': the query produces {} columns but the table has {} ({})",
                produced.fields().len(),
                target.fields().len(),
                target
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let mut exprs = Vec::new();
    for (i, field) in target.fields().iter().enumerate() {
        let (qualifier, source) = produced.qualified_field(i);
        let column = col(Column::from((qualifier, source)));
        let expr = if source.data_type() == field.data_type() {
            column
        } else if arrow::compute::can_cast_types(source.data_type(), field.data_type()) {
            cast(column, field.data_type().clone())
        } else {
            return Err(sql_error(
                location,
                format!(
                    "INSERT INTO '{table}': column {} '{}' is {} but the query gives {}",
                    i + 1,
                    field.name(),
                    schema::sql_name(field.data_type()),
                    schema::sql_name(source.data_type())
                ),
            ));
        };
        exprs.push(expr.alias(field.name()));
    }
    let bind = |e: DataFusionError| bind_error(e, location);
    let plan = LogicalPlanBuilder::from(plan)
        .project(exprs)
        .map_err(bind)?
        .build()
        .map_err(bind)?;
    let plan = analyze(plan).map_err(bind)?;
    let temporal = as_of::check_as_of(&plan).map_err(|m| sql_error(location, m))?;
    // An event-time temporal join reads its left input's time, which nothing in the plan
    // refers to: its columns are all kept.
    let plan = optimize(plan, !temporal).map_err(bind)?;
    Ok(PlannedInsert {
        sink,
        plan,
        state_ttl_hints,
        location,
    })
}

fn analyze(plan: LogicalPlan) -> datafusion_common::Result<LogicalPlan> {
    Analyzer::new().execute_and_check(plan, Provider::config_options(), |_, _| {})
}

/// The optimizer rules that keep streaming semantics: expression simplification, filter
/// push-down (into joins too), join keys taken out of join conditions, and column pruning. (Rules that rewrite `COUNT(DISTINCT)` into two
/// aggregations, or add sorts and limits, are left out.)
fn optimize(plan: LogicalPlan, prune_columns: bool) -> datafusion_common::Result<LogicalPlan> {
    use datafusion_optimizer::common_subexpr_eliminate::CommonSubexprEliminate;
    use datafusion_optimizer::decorrelate_predicate_subquery::DecorrelatePredicateSubquery;
    use datafusion_optimizer::eliminate_filter::EliminateFilter;
    use datafusion_optimizer::extract_equijoin_predicate::ExtractEquijoinPredicate;
    use datafusion_optimizer::optimize_projections::OptimizeProjections;
    use datafusion_optimizer::push_down_filter::PushDownFilter;
    use datafusion_optimizer::replace_distinct_aggregate::ReplaceDistinctWithAggregate;
    use datafusion_optimizer::simplify_expressions::SimplifyExpressions;
    let mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>> = vec![
        Arc::new(flink_expressions::FlinkExpressions),
        Arc::new(SimplifyExpressions::new()),
        Arc::new(ReplaceDistinctWithAggregate::new()),
        // `IN (SELECT ...)` and `EXISTS` (negated or not) as semi and anti joins.
        Arc::new(DecorrelatePredicateSubquery::new()),
        Arc::new(EliminateFilter::new()),
        Arc::new(PushDownFilter::new()),
        Arc::new(ExtractEquijoinPredicate::new()),
        Arc::new(CommonSubexprEliminate::new()),
    ];
    if prune_columns {
        rules.push(Arc::new(OptimizeProjections::new()));
    }
    let context = OptimizerContext::new().with_skip_failing_rules(false);
    Optimizer::with_rules(rules).optimize(plan, &context, |_, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    const BID: &str = "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = \
                       'nexmark', 'nexmark.table' = 'bid', 'events.num' = '10');\n";

    fn compiled(sql: &str) -> Result<CompiledScript> {
        compile(
            &format!("{BID}{sql}"),
            &[],
            crate::PlanningContext::CHECKING,
        )
    }

    #[test]
    fn a_view_takes_the_column_names_it_lists() {
        let view = "CREATE VIEW v (a, `Total`) AS SELECT auction, SUM(price) FROM bid GROUP BY \
                    auction;\nCREATE TABLE o (x BIGINT, y BIGINT) WITH ('connector' = 'print');\n";
        compiled(&format!("{view}INSERT INTO o SELECT a, `Total` FROM v;")).unwrap();
        let error = compiled(&format!(
            "{view}INSERT INTO o SELECT auction, `Total` FROM v;"
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(error.contains("auction"), "{error}");
    }

    #[test]
    fn a_view_listing_too_few_or_too_many_names_is_refused_where_it_is() {
        for list in ["(a)", "(a, b, c)"] {
            let error = compiled(&format!(
                "CREATE VIEW v {list} AS SELECT auction, price FROM bid;"
            ))
            .err()
            .unwrap()
            .to_string();
            assert!(error.contains("at 2:1"), "{error}");
            assert!(error.contains("for a query of 2 columns"), "{error}");
        }
    }

    #[test]
    fn array_expressions_are_typed_and_refused_as_flink_refuses_them() {
        let table = "CREATE TABLE o (a ARRAY<BIGINT>, e BIGINT, n INT) WITH ('connector' = \
                     'print');\n";
        compiled(&format!(
            "{table}INSERT INTO o SELECT ARRAY[auction, price], ARRAY[auction, price][2], \
             CARDINALITY(ARRAY[auction]) FROM bid;"
        ))
        .unwrap();
        let refused = |select: &str| {
            compiled(&format!("{table}INSERT INTO o {select} FROM bid;"))
                .err()
                .unwrap()
                .to_string()
        };
        let error = refused("SELECT ARRAY[price], ARRAY[price][0], 1");
        assert!(
            error.contains("Array element access needs an index starting at 1 but was 0."),
            "{error}"
        );
        let error = refused("SELECT ARRAY[price], ARRAY[price][-CAST(2 AS INT)], 1");
        assert!(error.contains("starting at 1 but was -2."), "{error}");
        let error = refused("SELECT ARRAY[price], price[1], 1");
        assert!(error.contains("is not an ARRAY"), "{error}");
        let error = refused("SELECT ARRAY[price], 1, CARDINALITY(price)");
        assert!(
            error.contains("CARDINALITY() takes an ARRAY, not BIGINT"),
            "{error}"
        );
        let error = refused("SELECT ARRAY[price, 'x'], 1, 1");
        assert!(error.contains("no common type"), "{error}");
        let error = compiled(&format!(
            "{table}INSERT INTO o SELECT ARRAY[x], x, 1 FROM bid CROSS JOIN UNNEST(ARRAY[price]) \
             AS t(x);"
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(error.contains("unsupported: UNNEST"), "{error}");
    }
}
