//! PostgreSQL values in text form, as the snapshot's queries and `pgoutput` both give them,
//! gathered column by column into Arrow: each column's texts are kept in one string array
//! and converted to the table's type at once (Arrow's casts, with errors, not NULLs, for a
//! value that does not convert), so nothing is allocated per value.

use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, StringArray, StringBuilder, make_array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::schema::sql_name;

/// A column of the watched table as PostgreSQL's catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceColumn {
    pub name: String,
    pub type_oid: u32,
    /// `format_type`'s name (`numeric(10,2)`, `timestamp with time zone`, `integer[]`).
    pub type_name: String,
    /// `pg_type.typcategory`: `A` for arrays, `S` strings, `N` numbers, ...
    pub category: char,
}

/// Type OIDs the conversions below tell apart.
mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const OID: u32 = 26;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const DATE: u32 = 1082;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const NUMERIC: u32 = 1700;
}

/// Whether PostgreSQL's integers.
pub(crate) fn is_integer(type_oid: u32) -> bool {
    matches!(type_oid, oid::INT2 | oid::INT4 | oid::INT8 | oid::OID)
}

/// Why a PostgreSQL column cannot be read as a table column of type `to`, if it cannot.
pub(crate) fn incompatibility(column: &SourceColumn, to: &DataType) -> Option<String> {
    if column.category == 'A' {
        return Some(format!(
            "column '{}' is an array ({}) in PostgreSQL: arrays are not supported",
            column.name, column.type_name
        ));
    }
    let number = is_integer(column.type_oid)
        || matches!(column.type_oid, oid::FLOAT4 | oid::FLOAT8 | oid::NUMERIC);
    let fits = match to {
        // Every type has a text form.
        DataType::Utf8 => true,
        DataType::Boolean => column.type_oid == oid::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            is_integer(column.type_oid)
        }
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) => number,
        DataType::Date32 => column.type_oid == oid::DATE,
        DataType::Timestamp(_, None) => column.type_oid == oid::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => column.type_oid == oid::TIMESTAMPTZ,
        DataType::Binary => column.type_oid == oid::BYTEA,
        _ => false,
    };
    (!fits).then(|| {
        format!(
            "column '{}' is {} in PostgreSQL and cannot be read as {}",
            column.name,
            column.type_name,
            sql_name(to)
        )
    })
}

/// Rows being gathered: each column's texts, and each row's kind.
pub(crate) struct TextRows {
    schema: SchemaRef,
    columns: Vec<StringBuilder>,
    ops: Vec<Op>,
}

impl TextRows {
    pub fn new(schema: SchemaRef) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|_| StringBuilder::new())
            .collect();
        TextRows {
            schema,
            columns,
            ops: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Adds a row: its kind and each column's text (`None`: NULL), in the table's order.
    pub fn push<'a>(&mut self, op: Op, values: impl IntoIterator<Item = Option<&'a [u8]>>) {
        for (builder, value) in self.columns.iter_mut().zip(values) {
            // Text from PostgreSQL in a UTF8 session; anything else is replaced, not lost
            // silently: it fails the conversion of a non-text column.
            match value.map(String::from_utf8_lossy) {
                Some(text) => builder.append_value(text),
                None => builder.append_null(),
            }
        }
        self.ops.push(op);
    }

    /// The rows gathered so far as a chunk of the table's types, and an empty gatherer.
    pub fn take(&mut self) -> Result<Option<Chunk>, String> {
        if self.ops.is_empty() {
            return Ok(None);
        }
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let columns = self
            .columns
            .iter_mut()
            .zip(self.schema.fields())
            .map(|(builder, field)| {
                let texts = builder.finish();
                convert(&texts, field.data_type(), &options)
                    .map_err(|e| format!("column '{}': {e}", field.name()))
            })
            .collect::<Result<Vec<ArrayRef>, String>>()?;
        let rows = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| e.to_string())?;
        Ok(Some(Chunk::from_ops(rows, std::mem::take(&mut self.ops))))
    }
}

/// Texts as an array of `to`: bytea's `\x…` hexadecimal decoded, everything else cast.
fn convert(texts: &StringArray, to: &DataType, options: &CastOptions) -> Result<ArrayRef, String> {
    match to {
        DataType::Utf8 => Ok(Arc::new(texts.clone())),
        DataType::Binary => texts
            .iter()
            .map(|text| text.map(decode_bytea).transpose())
            .collect::<Result<BinaryArray, String>>()
            .map(|array| Arc::new(array) as ArrayRef),
        // Texts with an offset (`+00`) parse to UTC instants; the zone is then the type's.
        DataType::Timestamp(unit, Some(zone)) => {
            let instants = cast_with_options(texts, &DataType::Timestamp(*unit, None), options)
                .map_err(|e| e.to_string())?;
            with_zone(&instants, *unit, zone.clone())
        }
        _ => cast_with_options(texts, to, options).map_err(|e| e.to_string()),
    }
}

/// Timestamps of `unit` labelled with time zone `zone` (their values unchanged: the same
/// buffers under another type).
fn with_zone(instants: &ArrayRef, unit: TimeUnit, zone: Arc<str>) -> Result<ArrayRef, String> {
    let data = instants
        .to_data()
        .into_builder()
        .data_type(DataType::Timestamp(unit, Some(zone)))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(make_array(data))
}

/// `bytea` in its hexadecimal output form (`\x0aff`).
fn decode_bytea(text: &str) -> Result<Vec<u8>, String> {
    let hex = text
        .strip_prefix("\\x")
        .ok_or_else(|| format!("'{text}' is not bytea in hex form"))?;
    if hex.len() % 2 != 0 {
        return Err(format!("bytea '{text}' has an odd number of digits"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| format!("bytea '{text}' is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field, Int64Type, Schema, TimestampMicrosecondType};

    fn column(type_oid: u32, type_name: &str, category: char) -> SourceColumn {
        SourceColumn {
            name: "c".into(),
            type_oid,
            type_name: type_name.into(),
            category,
        }
    }

    #[test]
    fn converts_postgres_text_to_the_table_types() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("ok", DataType::Boolean, true),
            Field::new("amount", DataType::Decimal128(10, 2), true),
            Field::new("blob", DataType::Binary, true),
        ]));
        let mut rows = TextRows::new(schema);
        rows.push(
            Op::Insert,
            [
                Some(&b"7"[..]),
                Some(b"2024-03-01 10:00:00.25+00"),
                Some(b"t"),
                Some(b"12.50"),
                Some(b"\\x00ff"),
            ],
        );
        rows.push(Op::Delete, [Some(&b"8"[..]), None, None, None, None]);
        let chunk = rows.take().unwrap().unwrap();
        assert!(rows.take().unwrap().is_none());
        let batch = chunk.rows();
        assert_eq!(batch.column(0).as_primitive::<Int64Type>().value(1), 8);
        assert_eq!(
            batch
                .column(1)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            1_709_287_200_250_000
        );
        assert!(batch.column(1).is_null(1));
        assert_eq!(batch.column(4).as_binary::<i32>().value(0), &[0, 255]);
        assert_eq!(chunk.op(1), Op::Delete);
    }

    #[test]
    fn a_value_that_does_not_convert_is_an_error_naming_its_column() {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int32, true)]));
        let mut rows = TextRows::new(schema);
        rows.push(Op::Insert, [Some(&b"99999999999"[..])]);
        let error = rows.take().unwrap_err();
        assert!(error.contains("column 'n'"), "{error}");
    }

    #[test]
    fn arrays_and_mismatched_types_are_refused_by_name() {
        let array = column(1007, "integer[]", 'A');
        assert!(
            incompatibility(&array, &DataType::Utf8)
                .unwrap()
                .contains("array")
        );
        let jsonb = column(3802, "jsonb", 'U');
        assert!(incompatibility(&jsonb, &DataType::Utf8).is_none());
        assert!(incompatibility(&jsonb, &DataType::Int64).is_some());
        let numeric = column(oid::NUMERIC, "numeric(10,2)", 'N');
        assert!(incompatibility(&numeric, &DataType::Decimal128(10, 2)).is_none());
    }
}
