//! The statements that write a PostgreSQL table, built from its catalog, and the binding
//! of Arrow columns to them: each column is one array parameter (`unnest` expands them),
//! cast to the table column's own type, so one statement writes a whole chunk.

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::Result;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Statement};

use super::{PostgresConnector, db_error};

/// How a column travels to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Bool,
    Text,
}

impl Kind {
    fn of(data_type: &DataType) -> Kind {
        match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32 => Kind::Int,
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Kind::Float,
            DataType::Boolean => Kind::Bool,
            _ => Kind::Text,
        }
    }

    fn arrow(self) -> DataType {
        match self {
            Kind::Int => DataType::Int64,
            Kind::Float => DataType::Float64,
            Kind::Bool => DataType::Boolean,
            Kind::Text => DataType::Utf8,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Kind::Int => "int8",
            Kind::Float => "float8",
            Kind::Bool => "bool",
            Kind::Text => "text",
        }
    }

    fn array_type(self) -> Type {
        match self {
            Kind::Int => Type::INT8_ARRAY,
            Kind::Float => Type::FLOAT8_ARRAY,
            Kind::Bool => Type::BOOL_ARRAY,
            Kind::Text => Type::TEXT_ARRAY,
        }
    }

    fn scalar_type(self) -> Type {
        match self {
            Kind::Int => Type::INT8,
            Kind::Float => Type::FLOAT8,
            Kind::Bool => Type::BOOL,
            Kind::Text => Type::TEXT,
        }
    }
}

/// A column of the sink, matched to the table's column.
#[derive(Debug, Clone)]
struct Column {
    /// The table column's name, quoted.
    quoted: String,
    /// The table column's type, as `format_type` writes it.
    sql_type: String,
    kind: Kind,
}

/// The prepared statements of one connection.
pub(super) struct Statements {
    /// Inserts rows (upserts them when the table has a key).
    pub insert: Statement,
    /// Deletes rows by key, when the table has one.
    pub delete_by_key: Option<Statement>,
    /// Deletes one row equal to the given values, when the table has no key.
    pub delete_one: Statement,
    /// Positions of the key columns.
    pub key: Vec<usize>,
    kinds: Vec<Kind>,
}

/// `identifier` as a quoted SQL identifier.
pub(crate) fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

/// Reads the table's columns and prepares the statements that write it.
pub(super) async fn prepare(
    client: &Client,
    connector: &PostgresConnector,
    schema: &SchemaRef,
    primary_key: &[String],
) -> Result<Statements> {
    let table = &connector.target;
    let columns = table_columns(client, connector, schema).await?;
    let key = primary_key
        .iter()
        .map(|k| {
            schema
                .index_of(k)
                .map_err(|_| connector.error(format!("primary key column '{k}' is not a column")))
        })
        .collect::<Result<Vec<_>>>()?;
    let all: Vec<usize> = (0..columns.len()).collect();
    let array_types = |positions: &[usize]| -> Vec<Type> {
        positions
            .iter()
            .map(|&i| columns[i].kind.array_type())
            .collect()
    };
    let statement = |sql: String, types: Vec<Type>| async move {
        client
            .prepare_typed(&sql, &types)
            .await
            .map_err(|e| db_error(connector, "preparing a statement", e))
    };
    let delete_by_key = match key.is_empty() {
        true => None,
        false => {
            let sql = format!(
                "DELETE FROM {table} WHERE ({}) IN ({})",
                column_names(&columns, &key),
                unnest_select(&columns, &key)
            );
            Some(statement(sql, array_types(&key)).await?)
        }
    };
    Ok(Statements {
        insert: statement(insert_sql(table, &columns, &key), array_types(&all)).await?,
        delete_by_key,
        delete_one: statement(
            delete_one_sql(table, &columns),
            columns.iter().map(|c| c.kind.scalar_type()).collect(),
        )
        .await?,
        key,
        kinds: columns.iter().map(|c| c.kind).collect(),
    })
}

/// The table's column of each of the sink's (the same name, else the same but for case).
async fn table_columns(
    client: &Client,
    connector: &PostgresConnector,
    schema: &SchemaRef,
) -> Result<Vec<Column>> {
    let table = &connector.target;
    let catalog = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_catalog.pg_attribute a \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[table],
        )
        .await
        .map_err(|e| db_error(connector, "reading the table's columns", e))?;
    let existing: Vec<(String, String)> = catalog.iter().map(|r| (r.get(0), r.get(1))).collect();
    schema
        .fields()
        .iter()
        .map(|field| {
            let name = field.name();
            let found = existing
                .iter()
                .find(|(n, _)| n == name)
                .or_else(|| existing.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)));
            let (pg_name, sql_type) = found.ok_or_else(|| {
                let names: Vec<&str> = existing.iter().map(|(n, _)| n.as_str()).collect();
                connector.error(format!(
                    "PostgreSQL table '{table}' has no column '{name}' (its columns: {})",
                    names.join(", ")
                ))
            })?;
            Ok(Column {
                quoted: quote(pg_name),
                sql_type: sql_type.clone(),
                kind: Kind::of(field.data_type()),
            })
        })
        .collect()
}

/// The quoted names of the columns at `positions`, comma-separated.
fn column_names(columns: &[Column], positions: &[usize]) -> String {
    positions
        .iter()
        .map(|&i| columns[i].quoted.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inserts rows given as one array per column; with a key, an upsert.
fn insert_sql(table: &str, columns: &[Column], key: &[usize]) -> String {
    let all: Vec<usize> = (0..columns.len()).collect();
    let mut insert = format!(
        "INSERT INTO {table} ({}) {}",
        column_names(columns, &all),
        unnest_select(columns, &all)
    );
    if !key.is_empty() {
        let updates: Vec<String> = all
            .iter()
            .filter(|i| !key.contains(i))
            .map(|&i| format!("{0} = EXCLUDED.{0}", columns[i].quoted))
            .collect();
        insert.push_str(&format!(
            " ON CONFLICT ({}) DO ",
            column_names(columns, key)
        ));
        match updates.is_empty() {
            true => insert.push_str("NOTHING"),
            false => insert.push_str(&format!("UPDATE SET {}", updates.join(", "))),
        }
    }
    insert
}

/// Deletes one row equal to the given values (NULLs equal), for a table without a key.
fn delete_one_sql(table: &str, columns: &[Column]) -> String {
    let conditions: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "{} IS NOT DISTINCT FROM (${}::{})::{}",
                c.quoted,
                i + 1,
                c.kind.sql(),
                c.sql_type
            )
        })
        .collect();
    format!(
        "DELETE FROM {table} WHERE ctid = (SELECT ctid FROM {table} WHERE {} LIMIT 1)",
        conditions.join(" AND ")
    )
}

/// `SELECT u.c0::type, … FROM unnest($1::int8[], …) AS u(c0, …)` over `positions`.
fn unnest_select(columns: &[Column], positions: &[usize]) -> String {
    let casts: Vec<String> = (0..positions.len())
        .map(|j| format!("u.c{j}::{}", columns[positions[j]].sql_type))
        .collect();
    let arrays: Vec<String> = positions
        .iter()
        .enumerate()
        .map(|(j, &i)| format!("${}::{}[]", j + 1, columns[i].kind.sql()))
        .collect();
    let aliases: Vec<String> = (0..positions.len()).map(|j| format!("c{j}")).collect();
    format!(
        "SELECT {} FROM unnest({}) AS u({})",
        casts.join(", "),
        arrays.join(", "),
        aliases.join(", ")
    )
}

impl Statements {
    /// The columns at `positions`, cast to the types they travel as.
    pub fn normalize(&self, columns: &[ArrayRef], positions: &[usize]) -> Result<Vec<ArrayRef>> {
        positions
            .iter()
            .map(|&i| {
                let target = self.kinds[i].arrow();
                match columns[i].data_type() == &target {
                    true => Ok(columns[i].clone()),
                    false => Ok(cast(&columns[i], &target)?),
                }
            })
            .collect()
    }
}

/// The values of one normalized column, borrowed where they can be.
pub(super) enum Values<'a> {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<&'a str>>),
}

impl<'a> Values<'a> {
    /// The values of a column [`Statements::normalize`] made.
    pub fn of(array: &'a ArrayRef) -> Values<'a> {
        let any = array.as_any();
        if let Some(a) = any.downcast_ref::<Int64Array>() {
            Values::Int(a.iter().collect())
        } else if let Some(a) = any.downcast_ref::<Float64Array>() {
            Values::Float(a.iter().collect())
        } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
            Values::Bool(a.iter().collect())
        } else {
            let strings = any
                .downcast_ref::<StringArray>()
                .expect("a normalized column is Int64, Float64, Boolean or Utf8");
            Values::Text(strings.iter().collect())
        }
    }

    /// As an array parameter.
    pub fn as_array(&self) -> &(dyn ToSql + Sync) {
        match self {
            Values::Int(v) => v,
            Values::Float(v) => v,
            Values::Bool(v) => v,
            Values::Text(v) => v,
        }
    }

    /// The value at `row`, as a scalar parameter.
    pub fn scalar(&self, row: usize) -> &(dyn ToSql + Sync) {
        match self {
            Values::Int(v) => &v[row],
            Values::Float(v) => &v[row],
            Values::Bool(v) => &v[row],
            Values::Text(v) => &v[row],
        }
    }
}
