//! Lookups in a PostgreSQL table: the keys of a chunk go in one query, bound as text arrays
//! and expanded by `unnest ... WITH ORDINALITY` (each row comes back with the index of the
//! key it matched), cast on the server to the key columns' types so that an index on them
//! serves. Columns come back cast to what Arrow reads simply (a timestamp as epoch
//! milliseconds). A failed query is retried on a new connection (`lookup.max-retries`).

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, StringBuilder,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_postgres::{Client, Row, Statement};

use super::{PostgresConnector, connect, db_error};
use crate::lookup::{LookupContext, LookupReader};

/// How one column is read: the SQL selecting it, and the Arrow type it is read as.
#[derive(Debug, Clone)]
struct ColumnRead {
    sql: String,
    read_as: DataType,
}

/// Looks rows of one PostgreSQL table up.
#[derive(Debug)]
pub(super) struct PostgresLookup {
    connector: Arc<PostgresConnector>,
    schema: SchemaRef,
    query: String,
    reads: Vec<ColumnRead>,
    max_retries: u32,
    connection: Option<(Client, Statement)>,
}

impl PostgresLookup {
    /// A lookup of `context.schema`'s columns by `context.key_columns`; types Eddy cannot
    /// read or compare are refused here, before the job runs.
    pub(super) fn new(connector: Arc<PostgresConnector>, context: &LookupContext) -> Result<Self> {
        let unsupported = |what: String| connector.error(format!("unsupported: {what}"));
        let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
        let reads = context
            .schema
            .fields()
            .iter()
            .map(|f| {
                column_read(&format!("t.{}", quote(f.name())), f.data_type()).ok_or_else(|| {
                    unsupported(format!(
                        "column '{}' of type {} in a PostgreSQL lookup",
                        f.name(),
                        f.data_type()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut conditions = Vec::new();
        for (i, column) in context.key_columns.iter().enumerate() {
            let field = context.schema.field(*column);
            let pg_type = key_type(field.data_type()).ok_or_else(|| {
                unsupported(format!(
                    "a lookup key '{}' of type {}",
                    field.name(),
                    field.data_type()
                ))
            })?;
            conditions.push(format!("t.{} = u.k{i}::{pg_type}", quote(field.name())));
        }
        let params: Vec<String> = (1..=context.key_columns.len())
            .map(|i| format!("${i}::text[]"))
            .collect();
        let names: Vec<String> = (0..context.key_columns.len())
            .map(|i| format!("k{i}"))
            .collect();
        let query = format!(
            "SELECT {}, u.eddy_key FROM unnest({}) WITH ORDINALITY AS u({}, eddy_key) \
             JOIN {} AS t ON {}",
            reads
                .iter()
                .map(|r| r.sql.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            params.join(", "),
            names.join(", "),
            connector.target,
            conditions.join(" AND ")
        );
        Ok(PostgresLookup {
            max_retries: connector.lookup_retries,
            connector,
            schema: context.schema.clone(),
            query,
            reads,
            connection: None,
        })
    }

    /// One try: connects (and prepares the query) if needed, then runs it.
    async fn query(&mut self, keys: &[Vec<Option<String>>]) -> Result<Vec<Row>> {
        if self.connection.is_none() {
            let client = connect(&self.connector).await?;
            let statement = client
                .prepare(&self.query)
                .await
                .map_err(|e| db_error(&self.connector, "preparing the lookup", e))?;
            self.connection = Some((client, statement));
        }
        let (client, statement) = self.connection.as_ref().expect("connected above");
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = keys
            .iter()
            .map(|k| k as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let rows = client.query(statement, &params).await;
        rows.map_err(|e| {
            self.connection = None;
            db_error(&self.connector, "looking rows up", e)
        })
    }

    /// The rows read, as a batch of the table's columns, and the key each matched.
    fn to_batch(&self, rows: &[Row]) -> Result<(RecordBatch, Vec<u32>)> {
        let mut columns = Vec::with_capacity(self.reads.len());
        for (c, read) in self.reads.iter().enumerate() {
            let column = read_column(rows, c, &read.read_as)?;
            let target = self.schema.field(c).data_type();
            columns.push(match column.data_type() == target {
                true => column,
                false => cast(&column, target)?,
            });
        }
        let key_index = self.reads.len();
        let matched = rows
            .iter()
            .map(|r| (r.get::<_, i64>(key_index) - 1) as u32)
            .collect();
        Ok((RecordBatch::try_new(self.schema.clone(), columns)?, matched))
    }
}

impl LookupReader for PostgresLookup {
    fn lookup<'a>(
        &'a mut self,
        keys: &'a [ArrayRef],
    ) -> BoxFuture<'a, Result<(RecordBatch, Vec<u32>)>> {
        async move {
            let texts = keys
                .iter()
                .map(|k| {
                    let text = cast(k, &DataType::Utf8)?;
                    let text = text.as_any().downcast_ref::<arrow::array::StringArray>();
                    let text = text.expect("cast to Utf8");
                    Ok(text.iter().map(|v| v.map(str::to_string)).collect())
                })
                .collect::<Result<Vec<Vec<Option<String>>>>>()?;
            let mut attempt = 0;
            loop {
                match self.query(&texts).await {
                    Ok(rows) => return self.to_batch(&rows),
                    Err(error) if attempt < self.max_retries && is_transient(&error) => {
                        attempt += 1;
                        tracing::warn!(%error, attempt, "a PostgreSQL lookup failed; retrying");
                        tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        .boxed()
    }
}

fn is_transient(error: &EddyError) -> bool {
    matches!(
        error,
        EddyError::Remote {
            transient: true,
            ..
        } | EddyError::Connector { .. }
    )
}

/// The PostgreSQL type a key of `data_type` is compared as.
fn key_type(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Int8 | DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        DataType::Int64 => "bigint",
        DataType::Utf8 | DataType::LargeUtf8 => "text",
        DataType::Boolean => "boolean",
        DataType::Float32 | DataType::Float64 => "double precision",
        _ => return None,
    })
}

/// How a column of `data_type` is selected and read.
fn column_read(column: &str, data_type: &DataType) -> Option<ColumnRead> {
    let (sql, read_as) = match data_type {
        DataType::Int8 | DataType::Int16 => (format!("{column}::smallint"), DataType::Int16),
        DataType::Int32 => (format!("{column}::integer"), DataType::Int32),
        DataType::Int64 => (format!("{column}::bigint"), DataType::Int64),
        DataType::Float32 => (format!("{column}::real"), DataType::Float32),
        DataType::Float64 => (format!("{column}::double precision"), DataType::Float64),
        DataType::Boolean => (format!("{column}::boolean"), DataType::Boolean),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Decimal128(_, _) => {
            (format!("{column}::text"), DataType::Utf8)
        }
        DataType::Timestamp(_, _) => (
            format!("(extract(epoch from {column}) * 1000)::bigint"),
            DataType::Int64,
        ),
        DataType::Date32 => (
            format!("({column}::date - date '1970-01-01')::integer"),
            DataType::Int32,
        ),
        _ => return None,
    };
    Some(ColumnRead { sql, read_as })
}

/// Column `c` of `rows`, read as `read_as`.
fn read_column(rows: &[Row], c: usize, read_as: &DataType) -> Result<ArrayRef> {
    fn build<B: ArrayBuilder, T>(
        rows: &[Row],
        c: usize,
        mut builder: B,
        append: impl Fn(&mut B, Option<T>),
    ) -> Result<ArrayRef>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        for row in rows {
            let value = row.try_get::<_, Option<T>>(c).map_err(|e| {
                EddyError::Internal(format!("reading column {c} of a PostgreSQL lookup: {e}"))
            })?;
            append(&mut builder, value);
        }
        Ok(builder.finish())
    }
    match read_as {
        DataType::Int16 => build(rows, c, Int16Builder::new(), |b, v: Option<i16>| {
            b.append_option(v)
        }),
        DataType::Int32 => build(rows, c, Int32Builder::new(), |b, v: Option<i32>| {
            b.append_option(v)
        }),
        DataType::Int64 => build(rows, c, Int64Builder::new(), |b, v: Option<i64>| {
            b.append_option(v)
        }),
        DataType::Float32 => build(rows, c, Float32Builder::new(), |b, v: Option<f32>| {
            b.append_option(v)
        }),
        DataType::Float64 => build(rows, c, Float64Builder::new(), |b, v: Option<f64>| {
            b.append_option(v)
        }),
        DataType::Boolean => build(rows, c, BooleanBuilder::new(), |b, v: Option<bool>| {
            b.append_option(v)
        }),
        _ => build(rows, c, StringBuilder::new(), |b, v: Option<String>| {
            b.append_option(v)
        }),
    }
}
