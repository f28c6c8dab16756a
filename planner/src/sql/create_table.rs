//! `CREATE TABLE`: a table's columns, connector, metadata columns and watermark.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion_common::{Column, DataFusionError};
use datafusion_expr::{Expr, ExprSchemable, Extension, LogicalPlan, LogicalPlanBuilder};
use datafusion_sql::planner::{PlannerContext, SqlToRel};
use datafusion_sql::sqlparser::ast;
use eddy_common::Result;
use eddy_common::error::Location;
use eddy_common::schema;

use super::catalog::{Catalog, ConnectorSource, MetadataColumn, Provider, TableDef};
use super::nodes::WatermarkAssigner;
use super::script::{ColumnKind, TableStatement};
use super::{analyze, bind_error, locate, sql_error, sql_to_rel};

/// A `CREATE TABLE`: its connector, its columns (physical, metadata, computed) and its
/// watermark, as the logical plan a scan of it starts from.
pub(super) fn create_table(
    catalog: &Catalog,
    table: TableStatement,
    location: Location,
    context: crate::PlanningContext,
) -> Result<TableDef> {
    let physical_schema = physical_schema(&table, location)?;
    let options: BTreeMap<String, String> = table.options.iter().cloned().collect();
    let connector = eddy_connectors::create(
        &table.name,
        &options,
        &physical_schema,
        &table.primary_key,
        &table.partition_keys,
        context.secrets,
    )
    .map_err(|e| locate(e, location))?;
    let (metadata, scan_schema) = metadata_columns(&table, &physical_schema, connector.as_ref())?;
    let source = Arc::new(ConnectorSource {
        table: table.name.clone(),
        schema: scan_schema,
        metadata: metadata.iter().map(|m| m.key.clone()).collect(),
        connector: connector.clone(),
        primary_key: table
            .primary_key
            .iter()
            .filter_map(|k| physical_schema.index_of(k).ok())
            .collect(),
    });
    let provider = Provider::new(catalog);
    let planner = sql_to_rel(&provider);
    let bind = |e: DataFusionError| bind_error(e, location);
    let plan = LogicalPlanBuilder::scan(table.name.as_str(), source, None)
        .map_err(bind)?
        .build()
        .map_err(bind)?;
    let plan = project_columns(plan, &table, &planner, location)?;
    let plan = match table.watermark {
        Some((rowtime, expr)) => {
            assign_watermark(plan, &table.name, rowtime, expr, &planner, location)?
        }
        None => plan,
    };
    let plan = analyze(plan).map_err(bind)?;
    check_watermark_type(&plan, location)?;
    Ok(TableDef {
        name: table.name,
        location,
        physical_schema,
        metadata,
        primary_key: table.primary_key,
        partition_keys: table.partition_keys,
        options,
        connector,
        plan,
    })
}

/// The table's physical columns, each declared once, with its key and partition columns
/// among them.
fn physical_schema(table: &TableStatement, location: Location) -> Result<SchemaRef> {
    let mut physical = Vec::new();
    for column in &table.columns {
        if let ColumnKind::Physical {
            data_type,
            not_null,
        } = &column.kind
        {
            if physical.iter().any(|f: &Field| f.name() == &column.name) {
                return Err(sql_error(
                    column.location,
                    format!("column '{}' is declared twice", column.name),
                ));
            }
            physical.push(Field::new(&column.name, data_type.clone(), !not_null));
        }
    }
    let physical_schema = Arc::new(Schema::new(physical));
    let keys = [
        ("PRIMARY KEY", &table.primary_key),
        ("PARTITIONED BY", &table.partition_keys),
    ];
    for (clause, key) in keys
        .iter()
        .flat_map(|(c, ks)| ks.iter().map(move |k| (c, k)))
    {
        if physical_schema.field_with_name(key).is_err() {
            return Err(sql_error(
                location,
                format!(
                    "{clause} column '{key}' is not a physical column of '{}'",
                    table.name
                ),
            ));
        }
    }
    Ok(physical_schema)
}

/// The scan `plan` projected to the table's columns in their declared order, metadata
/// columns cast to their declared types and computed columns computed; the scan itself
/// when every column is physical.
fn project_columns(
    plan: LogicalPlan,
    table: &TableStatement,
    planner: &SqlToRel<Provider>,
    location: Location,
) -> Result<LogicalPlan> {
    let bind = |e: DataFusionError| bind_error(e, location);
    if table
        .columns
        .iter()
        .all(|c| matches!(c.kind, ColumnKind::Physical { .. }))
    {
        return Ok(plan);
    }
    let mut exprs = Vec::new();
    for column in &table.columns {
        let expr = match &column.kind {
            ColumnKind::Physical { .. } => {
                Expr::Column(Column::new(Some(table.name.as_str()), &column.name))
            }
            // Read as the metadata's type, cast to the declared one (as Flink does).
            ColumnKind::Metadata { data_type, .. } => {
                Expr::Column(Column::new(Some(table.name.as_str()), &column.name))
                    .cast_to(data_type, plan.schema())
                    .map_err(bind)?
                    .alias(&column.name)
            }
            ColumnKind::Computed(ast_expr) => planner
                .sql_to_expr(
                    ast_expr.as_ref().clone(),
                    plan.schema(),
                    &mut PlannerContext::new(),
                )
                .map_err(|e| bind_error(e, column.location))?
                .alias(&column.name),
        };
        exprs.push(expr);
    }
    LogicalPlanBuilder::from(plan)
        .project(exprs)
        .map_err(bind)?
        .build()
        .map_err(bind)
}

/// `WATERMARK FOR rowtime AS expr` over `plan`: the column must be a timestamp.
fn assign_watermark(
    plan: LogicalPlan,
    table: &str,
    rowtime: String,
    expr: ast::Expr,
    planner: &SqlToRel<Provider>,
    location: Location,
) -> Result<LogicalPlan> {
    let field = plan
        .schema()
        .qualified_field_with_unqualified_name(&rowtime)
        .map_err(|_| {
            sql_error(
                location,
                format!("WATERMARK FOR '{rowtime}': no such column in '{table}'"),
            )
        })?
        .1;
    if !matches!(field.data_type(), DataType::Timestamp(_, _)) {
        return Err(sql_error(
            location,
            format!(
                "WATERMARK FOR '{rowtime}': the column must be TIMESTAMP(3), not {}",
                schema::sql_name(field.data_type())
            ),
        ));
    }
    let expr = planner
        .sql_to_expr(expr, plan.schema(), &mut PlannerContext::new())
        .map_err(|e| bind_error(e, location))?;
    Ok(LogicalPlan::Extension(Extension {
        node: Arc::new(WatermarkAssigner {
            input: plan,
            rowtime,
            expr,
        }),
    }))
}

/// Refuses a watermark expression (as analyzed) that does not give a timestamp.
fn check_watermark_type(plan: &LogicalPlan, location: Location) -> Result<()> {
    if let LogicalPlan::Extension(ext) = plan
        && let Some(wm) = ext.node.as_any().downcast_ref::<WatermarkAssigner>()
    {
        let data_type = wm
            .expr
            .get_type(wm.input.schema())
            .map_err(|e| bind_error(e, location))?;
        if !matches!(data_type, DataType::Timestamp(_, _)) {
            return Err(sql_error(
                location,
                format!("the WATERMARK expression must give a TIMESTAMP, not {data_type}"),
            ));
        }
    }
    Ok(())
}

/// The table's `METADATA` columns, checked against what its connector can read, and the
/// schema a scan produces: the physical columns, then the metadata columns (of the
/// metadata's own types, cast to the declared ones by the table's projection).
fn metadata_columns(
    table: &TableStatement,
    physical: &SchemaRef,
    connector: &dyn eddy_connectors::TableConnector,
) -> Result<(Vec<MetadataColumn>, SchemaRef)> {
    let readable = connector.readable_metadata();
    let mut fields: Vec<Field> = physical
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns = Vec::new();
    for column in &table.columns {
        let ColumnKind::Metadata {
            data_type,
            key,
            is_virtual,
        } = &column.kind
        else {
            continue;
        };
        let Some(found) = readable.iter().find(|m| &m.key == key) else {
            let keys: Vec<&str> = readable.iter().map(|m| m.key.as_str()).collect();
            return Err(sql_error(
                column.location,
                format!(
                    "column '{}': the '{}' connector has no metadata '{key}' \
                     (it has: {})",
                    column.name,
                    connector.name(),
                    match keys.is_empty() {
                        true => "none".to_string(),
                        false => keys.join(", "),
                    }
                ),
            ));
        };
        if let Some(refusal) = &found.refusal {
            return Err(sql_error(
                column.location,
                format!("column '{}': {refusal}", column.name),
            ));
        }
        let produced = &found.data_type;
        if !arrow::compute::can_cast_types(produced, data_type) {
            return Err(sql_error(
                column.location,
                format!(
                    "column '{}': metadata '{key}' is {} and cannot be read as {}",
                    column.name,
                    schema::sql_name(produced),
                    schema::sql_name(data_type)
                ),
            ));
        }
        if fields.iter().any(|f| f.name() == &column.name) {
            return Err(sql_error(
                column.location,
                format!("column '{}' is declared twice", column.name),
            ));
        }
        fields.push(Field::new(&column.name, produced.clone(), true));
        columns.push(MetadataColumn {
            name: column.name.clone(),
            key: key.clone(),
            is_virtual: *is_virtual,
        });
    }
    Ok((columns, Arc::new(Schema::new(fields))))
}
