//! A table's partition spec as the sink applies it: each field a transform of a source
//! column (spec "Partition Transforms"), rows split by their partition tuple so that each
//! data file holds one, and the tuple recorded in the file's manifest entry (readers
//! prune files by it) and summarized in the manifest list.
//!
//! Transforms: `identity` (boolean, int, long, float, double, date, timestamps, string),
//! `year`, `month`, `day` (date, timestamps), `hour` (timestamps), `bucket[N]` (int,
//! long, date, timestamps, string: Murmur3 x86 32-bit of the spec's byte encoding),
//! `truncate[W]` (int, long, string) and `void`; other pairs are refused by name.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, RecordBatch, StringArray, UInt32Array, new_null_array,
};
use arrow::compute::take_record_batch;
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimeUnit,
    TimestampMicrosecondType,
};
use arrow::row::{RowConverter, SortField};
use serde_json::{Value as Json, json};

use super::IcebergError;
use super::avro::Value;
use super::metadata::{IcebergField, TableMetadata};

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// A partition transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transform {
    Identity,
    Year,
    Month,
    Day,
    Hour,
    Bucket(u32),
    Truncate(u32),
    Void,
}

impl Transform {
    fn parse(text: &str) -> Option<Transform> {
        let argument = |prefix: &str| {
            text.strip_prefix(prefix)?
                .strip_suffix(']')?
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
        };
        Some(match text {
            "identity" => Transform::Identity,
            "year" => Transform::Year,
            "month" => Transform::Month,
            "day" => Transform::Day,
            "hour" => Transform::Hour,
            "void" => Transform::Void,
            _ => match argument("bucket[") {
                Some(n) => Transform::Bucket(n),
                None => Transform::Truncate(argument("truncate[")?),
            },
        })
    }

    /// Whether the sink can apply the transform to a column of type `source`.
    fn applies_to(self, source: &DataType) -> bool {
        use DataType::*;
        let timestamp = matches!(source, Timestamp(TimeUnit::Microsecond, _));
        match self {
            Transform::Identity => {
                timestamp
                    || matches!(
                        source,
                        Boolean | Int32 | Int64 | Float32 | Float64 | Date32 | Utf8
                    )
            }
            Transform::Year | Transform::Month | Transform::Day => timestamp || *source == Date32,
            Transform::Hour => timestamp,
            Transform::Bucket(_) => timestamp || matches!(source, Int32 | Int64 | Date32 | Utf8),
            Transform::Truncate(_) => matches!(source, Int32 | Int64 | Utf8),
            Transform::Void => true,
        }
    }

    /// The transformed column.
    fn apply(self, column: &ArrayRef) -> ArrayRef {
        let days = |column: &ArrayRef| -> Int32Array {
            match column.data_type() {
                DataType::Date32 => column.as_primitive::<Date32Type>().reinterpret_cast(),
                _ => column
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary(|t| t.div_euclid(MICROS_PER_DAY) as i32),
            }
        };
        match self {
            Transform::Identity => column.clone(),
            Transform::Void => new_null_array(column.data_type(), column.len()),
            Transform::Day => Arc::new(days(column)),
            Transform::Year => Arc::new(
                days(column).unary::<_, Int32Type>(|d| (civil_from_days(d.into()).0 - 1970) as i32),
            ),
            Transform::Month => Arc::new(days(column).unary::<_, Int32Type>(|d| {
                let (year, month) = civil_from_days(d.into());
                ((year - 1970) * 12 + i64::from(month) - 1) as i32
            })),
            Transform::Hour => Arc::new(
                column
                    .as_primitive::<TimestampMicrosecondType>()
                    .unary::<_, Int32Type>(|t| t.div_euclid(MICROS_PER_HOUR) as i32),
            ),
            Transform::Bucket(n) => Arc::new(bucket(column, n)),
            Transform::Truncate(width) => truncate(column, width),
        }
    }
}

/// `bucket[n]`: the hash of each value's spec encoding (ints, dates and timestamps as
/// 8-byte little-endian longs, strings as UTF-8), its sign bit cleared, modulo `n`.
fn bucket(column: &ArrayRef, n: u32) -> Int32Array {
    let of = |hash: u32| ((hash & i32::MAX as u32) % n) as i32;
    let long = |v: i64| of(murmur3_32(&v.to_le_bytes()));
    match column.data_type() {
        DataType::Int32 => column.as_primitive::<Int32Type>().unary(|v| long(v.into())),
        DataType::Date32 => column
            .as_primitive::<Date32Type>()
            .unary(|v| long(v.into())),
        DataType::Int64 => column.as_primitive::<Int64Type>().unary(long),
        DataType::Utf8 => column
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(|s| of(murmur3_32(s.as_bytes()))))
            .collect(),
        _ => column
            .as_primitive::<TimestampMicrosecondType>()
            .unary(long),
    }
}

/// `truncate[w]`: numbers down to a multiple of `w` (toward negative infinity), strings
/// to their first `w` code points.
fn truncate(column: &ArrayRef, width: u32) -> ArrayRef {
    let w = i64::from(width);
    match column.data_type() {
        DataType::Int32 => Arc::new(
            column
                .as_primitive::<Int32Type>()
                .unary::<_, Int32Type>(|v| (i64::from(v) - i64::from(v).rem_euclid(w)) as i32),
        ),
        DataType::Int64 => Arc::new(
            column
                .as_primitive::<Int64Type>()
                .unary::<_, Int64Type>(|v| v - v.rem_euclid(w)),
        ),
        _ => Arc::new(
            column
                .as_string::<i32>()
                .iter()
                .map(|v| {
                    v.map(|s| match s.char_indices().nth(width as usize) {
                        Some((end, _)) => &s[..end],
                        None => s,
                    })
                })
                .collect::<StringArray>(),
        ),
    }
}

/// Murmur3 x86 32-bit with seed 0, the hash of Iceberg's bucket transform.
fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let scramble = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut hash = 0u32;
    let blocks = data.chunks_exact(4);
    let tail = blocks.remainder();
    for block in blocks {
        let k = u32::from_le_bytes(block.try_into().expect("four bytes"));
        hash = (hash ^ scramble(k))
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    if !tail.is_empty() {
        let k = tail
            .iter()
            .enumerate()
            .fold(0u32, |k, (i, b)| k ^ (u32::from(*b) << (8 * i)));
        hash ^= scramble(k);
    }
    hash ^= data.len() as u32;
    hash ^= hash >> 16;
    hash = hash.wrapping_mul(0x85eb_ca6b);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(0xc2b2_ae35);
    hash ^ (hash >> 16)
}

/// The year and month (1–12) of a day counted from 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32)
}

/// One value of a partition tuple, as the manifest's Avro record holds it: `Null`,
/// `Boolean`, `Int` (an int, a date, a year, month, day, hour or bucket number), `Long` (a
/// long or a timestamp in microseconds), `Float`, `Double` or `String`.
pub type PartitionValue = Value;

/// The value of `column` at `row` (a transformed column of a type [`Transform::apply`]
/// yields).
fn value_at(column: &ArrayRef, row: usize) -> PartitionValue {
    if column.is_null(row) {
        return Value::Null;
    }
    match column.data_type() {
        DataType::Boolean => Value::Boolean(column.as_boolean().value(row)),
        DataType::Int32 => Value::Int(column.as_primitive::<Int32Type>().value(row)),
        DataType::Date32 => Value::Int(column.as_primitive::<Date32Type>().value(row)),
        DataType::Int64 => Value::Long(column.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => Value::Float(column.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Value::Double(column.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::String(column.as_string::<i32>().value(row).into()),
        _ => Value::Long(column.as_primitive::<TimestampMicrosecondType>().value(row)),
    }
}

/// A partition value as a tag naming its kind and Iceberg's single-value serialization
/// (empty for null), what [`from_tagged`] reads back.
pub fn tagged(value: &PartitionValue) -> (u8, Vec<u8>) {
    match value {
        Value::Boolean(v) => (1, vec![u8::from(*v)]),
        Value::Int(v) => (2, v.to_le_bytes().to_vec()),
        Value::Long(v) => (3, v.to_le_bytes().to_vec()),
        Value::Float(v) => (4, v.to_le_bytes().to_vec()),
        Value::Double(v) => (5, v.to_le_bytes().to_vec()),
        Value::String(v) => (6, v.as_bytes().to_vec()),
        _ => (0, Vec::new()),
    }
}

/// The partition value [`tagged`] gave `tag` and `bytes`; `None` when they do not fit.
pub fn from_tagged(tag: u8, bytes: &[u8]) -> Option<PartitionValue> {
    let array = |n: usize| bytes.get(..n).filter(|_| bytes.len() == n);
    Some(match tag {
        0 => Value::Null,
        1 => Value::Boolean(*array(1)?.first()? != 0),
        2 => Value::Int(i32::from_le_bytes(array(4)?.try_into().ok()?)),
        3 => Value::Long(i64::from_le_bytes(array(8)?.try_into().ok()?)),
        4 => Value::Float(f32::from_le_bytes(array(4)?.try_into().ok()?)),
        5 => Value::Double(f64::from_le_bytes(array(8)?.try_into().ok()?)),
        6 => Value::String(String::from_utf8(bytes.to_vec()).ok()?),
        _ => return None,
    })
}

fn is_nan(value: &PartitionValue) -> bool {
    match value {
        Value::Float(v) => v.is_nan(),
        Value::Double(v) => v.is_nan(),
        _ => false,
    }
}

/// Orders two values of one partition field (NaN and null excluded by the caller).
fn less_than(a: &PartitionValue, b: &PartitionValue) -> bool {
    match (a, b) {
        (Value::Boolean(a), Value::Boolean(b)) => a < b,
        (Value::Int(a), Value::Int(b)) => a < b,
        (Value::Long(a), Value::Long(b)) => a < b,
        (Value::Float(a), Value::Float(b)) => a < b,
        (Value::Double(a), Value::Double(b)) => a < b,
        (Value::String(a), Value::String(b)) => a.as_bytes() < b.as_bytes(),
        _ => false,
    }
}

/// One field of the spec, resolved against the columns the sink writes.
#[derive(Debug, Clone)]
struct PartitionField {
    field_id: i64,
    name: String,
    /// The written column it transforms.
    column: usize,
    transform: Transform,
    /// The Avro type of its values in manifests.
    avro_type: Json,
}

/// The default partition spec of a table, as the sink applies it.
#[derive(Debug, Clone)]
pub struct PartitionSpec {
    /// The spec's id (manifests record it).
    pub id: i64,
    fields: Vec<PartitionField>,
    /// The spec's fields as the metadata has them (manifests carry them in their header).
    fields_json: Json,
}

/// Rows of one partition tuple.
pub struct PartitionRows {
    /// The tuple in the row format: equal tuples have equal keys.
    pub key: Vec<u8>,
    /// The tuple.
    pub values: Vec<PartitionValue>,
    /// The rows.
    pub rows: RecordBatch,
}

impl PartitionSpec {
    /// The default spec of `metadata`, whose written fields are `written` (in the data
    /// files' column order).
    pub fn of(metadata: &TableMetadata, written: &[IcebergField]) -> Result<Self, IcebergError> {
        let (id, fields_json) = metadata.default_partition_spec()?;
        let specified = fields_json.as_array().cloned().unwrap_or_default();
        let mut fields = Vec::with_capacity(specified.len());
        for field in &specified {
            let name = field.get("name").and_then(Json::as_str).unwrap_or_default();
            let text = field.get("transform").and_then(Json::as_str);
            let source_id = field.get("source-id").and_then(Json::as_i64);
            let field_id = field.get("field-id").and_then(Json::as_i64);
            let (Some(text), Some(source_id), Some(field_id)) = (text, source_id, field_id) else {
                return Err(IcebergError::Metadata(format!(
                    "partition field without a transform, source-id or field-id: {field}"
                )));
            };
            let Some(column) = written.iter().position(|f| f.id == source_id) else {
                return Err(IcebergError::Schema(format!(
                    "partition field '{name}' ({text}) is of Iceberg field {source_id}, which \
                     no column of the table writes"
                )));
            };
            let source = &written[column];
            let source_type = source.arrow_type().unwrap_or(DataType::Null);
            let transform = Transform::parse(text)
                .filter(|t| t.applies_to(&source_type))
                .ok_or_else(|| {
                    IcebergError::Unsupported(format!(
                        "partition field '{name}': transform '{text}' of field '{}' ({})",
                        source.name, source.field_type
                    ))
                })?;
            let avro_type = avro_type(transform, &source.field_type);
            fields.push(PartitionField {
                field_id,
                name: name.to_string(),
                column,
                transform,
                avro_type,
            });
        }
        Ok(PartitionSpec {
            id,
            fields,
            fields_json: Json::Array(specified),
        })
    }

    /// Whether the spec partitions the table.
    pub fn is_partitioned(&self) -> bool {
        !self.fields.is_empty()
    }

    /// The spec's fields as JSON text (a manifest's `partition-spec`).
    pub fn fields_json(&self) -> String {
        self.fields_json.to_string()
    }

    /// The Avro fields of a manifest entry's `partition` record.
    pub fn avro_fields(&self) -> Json {
        Json::Array(
            self.fields
                .iter()
                .map(|f| {
                    json!({"name": f.name, "type": ["null", f.avro_type], "default": null,
                        "field-id": f.field_id})
                })
                .collect(),
        )
    }

    /// A manifest entry's `partition` record of a tuple.
    pub fn avro_record(&self, values: &[PartitionValue]) -> Value {
        Value::Record(
            self.fields
                .iter()
                .zip(values)
                .map(|(f, v)| (f.name.clone(), v.clone()))
                .collect(),
        )
    }

    /// A manifest list's summary of each partition field over files of `tuples`: whether
    /// one holds null or NaN, and the least and greatest other value.
    pub fn summaries<'a>(&self, tuples: impl Iterator<Item = &'a [PartitionValue]>) -> Value {
        let mut summaries: Vec<(bool, bool, Option<PartitionValue>, Option<PartitionValue>)> =
            vec![(false, false, None, None); self.fields.len()];
        for tuple in tuples {
            for (summary, value) in summaries.iter_mut().zip(tuple) {
                if *value == Value::Null {
                    summary.0 = true;
                } else if is_nan(value) {
                    summary.1 = true;
                } else {
                    if summary.2.as_ref().is_none_or(|low| less_than(value, low)) {
                        summary.2 = Some(value.clone());
                    }
                    if summary.3.as_ref().is_none_or(|high| less_than(high, value)) {
                        summary.3 = Some(value.clone());
                    }
                }
            }
        }
        // Nulls never become bounds: a bound's bytes are its single-value serialization.
        let bound =
            |v: Option<PartitionValue>| v.map_or(Value::Null, |v| Value::Bytes(tagged(&v).1));
        Value::Array(
            self.fields
                .iter()
                .zip(summaries)
                .map(|(field, (null, nan, low, high))| {
                    let floating = matches!(field.avro_type.as_str(), Some("float" | "double"));
                    Value::Record(vec![
                        ("contains_null".into(), Value::Boolean(null)),
                        (
                            "contains_nan".into(),
                            if floating {
                                Value::Boolean(nan)
                            } else {
                                Value::Null
                            },
                        ),
                        ("lower_bound".into(), bound(low)),
                        ("upper_bound".into(), bound(high)),
                    ])
                })
                .collect(),
        )
    }

    /// Splits rows (in the data files' columns) by their partition tuple; all in one
    /// part, of the empty tuple, when the table is unpartitioned.
    pub fn split(&self, rows: RecordBatch) -> Result<Vec<PartitionRows>, arrow::error::ArrowError> {
        let tuples = self.assign(&rows)?;
        if tuples.tuples.len() == 1 {
            let (key, values) = tuples.tuples.into_iter().next().expect("one tuple");
            return Ok(vec![PartitionRows { key, values, rows }]);
        }
        let mut members = vec![Vec::new(); tuples.tuples.len()];
        for (row, tuple) in tuples.of_row.iter().enumerate() {
            members[*tuple as usize].push(row as u32);
        }
        tuples
            .tuples
            .into_iter()
            .zip(members)
            .map(|((key, values), indices)| {
                Ok(PartitionRows {
                    key,
                    values,
                    rows: take_record_batch(&rows, &UInt32Array::from(indices))?,
                })
            })
            .collect()
    }

    /// The partition tuple of each row (in the data files' columns); one, empty, for
    /// every row when the table is unpartitioned.
    pub fn assign(&self, rows: &RecordBatch) -> Result<RowTuples, arrow::error::ArrowError> {
        if !self.is_partitioned() || rows.num_rows() == 0 {
            return Ok(RowTuples {
                of_row: vec![0; rows.num_rows()],
                tuples: vec![(Vec::new(), Vec::new())],
            });
        }
        let transformed = self
            .fields
            .iter()
            .map(|f| f.transform.apply(rows.column(f.column)))
            .collect::<Vec<_>>();
        let converter = RowConverter::new(
            transformed
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect(),
        )?;
        let keys = converter.convert_columns(&transformed)?;
        let mut numbers = HashMap::new();
        let mut tuples = Vec::new();
        let mut of_row = Vec::with_capacity(rows.num_rows());
        for (index, key) in keys.iter().enumerate() {
            let number = *numbers.entry(key).or_insert_with(|| {
                let values = transformed.iter().map(|c| value_at(c, index)).collect();
                tuples.push((key.as_ref().to_vec(), values));
                tuples.len() as u32 - 1
            });
            of_row.push(number);
        }
        Ok(RowTuples { of_row, tuples })
    }

    /// The columns (in the data files' order) the spec's fields transform.
    pub fn source_columns(&self) -> impl Iterator<Item = (&str, usize)> {
        self.fields.iter().map(|f| (f.name.as_str(), f.column))
    }
}

/// The partition tuples of a batch of rows.
pub struct RowTuples {
    /// Each row's tuple, by its number.
    pub of_row: Vec<u32>,
    /// The tuples by number: in the row format (equal tuples have equal keys) and as
    /// values.
    pub tuples: Vec<(Vec<u8>, Vec<PartitionValue>)>,
}

/// The Avro type of a transform's values of a field of Iceberg type `source`.
fn avro_type(transform: Transform, source: &Json) -> Json {
    let int = json!("int");
    let date = json!({"type": "int", "logicalType": "date"});
    match transform {
        Transform::Year | Transform::Month | Transform::Hour | Transform::Bucket(_) => int,
        Transform::Day => date,
        Transform::Identity | Transform::Truncate(_) | Transform::Void => {
            match source.as_str().unwrap_or_default() {
                "boolean" => json!("boolean"),
                "int" => int,
                "long" => json!("long"),
                "float" => json!("float"),
                "double" => json!("double"),
                "date" => date,
                "timestamp" => {
                    json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false})
                }
                "timestamptz" => {
                    json!({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true})
                }
                _ => json!("string"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::BooleanArray;

    fn booleans(values: &[Option<bool>]) -> ArrayRef {
        Arc::new(BooleanArray::from(values.to_vec()))
    }

    fn bucket_of(column: ArrayRef, n: u32) -> Vec<Option<i32>> {
        Transform::Bucket(n)
            .apply(&column)
            .as_primitive::<Int32Type>()
            .iter()
            .collect()
    }

    #[test]
    fn hashes_are_the_specs_reference_values() {
        // The spec's appendix: hash(34) for int and long, a date, a timestamp, a string.
        let wide = |v: u32| Some((v & i32::MAX as u32) as i32);
        let long: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![34]));
        let int: ArrayRef = Arc::new(Int32Array::from(vec![34]));
        let date: ArrayRef = Arc::new(arrow::array::Date32Array::from(vec![17_486]));
        let timestamp: ArrayRef = Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
            1_510_871_468_000_000,
        ]));
        let string: ArrayRef = Arc::new(StringArray::from(vec!["iceberg"]));
        let n = i32::MAX as u32;
        assert_eq!(bucket_of(long, n), vec![wide(2_017_239_379)]);
        assert_eq!(bucket_of(int, n), vec![wide(2_017_239_379)]);
        assert_eq!(bucket_of(date, n), vec![wide((-653_330_422i32) as u32)]);
        assert_eq!(
            bucket_of(timestamp, n),
            vec![wide((-2_047_944_441i32) as u32)]
        );
        assert_eq!(bucket_of(string, n), vec![wide(1_210_000_089)]);
    }

    #[test]
    fn time_transforms_count_from_the_epoch_and_floor_before_it() {
        let micros: ArrayRef = Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
            Some(0),
            Some(-1),
            // 2024-02-29T13:05:00
            Some(1_709_211_900_000_000),
            None,
        ]));
        let ints = |t: Transform| -> Vec<Option<i32>> {
            t.apply(&micros)
                .as_primitive::<Int32Type>()
                .iter()
                .collect()
        };
        assert_eq!(ints(Transform::Year), [Some(0), Some(-1), Some(54), None]);
        assert_eq!(ints(Transform::Month), [Some(0), Some(-1), Some(649), None]);
        assert_eq!(
            ints(Transform::Day),
            [Some(0), Some(-1), Some(19_782), None]
        );
        assert_eq!(
            ints(Transform::Hour),
            [Some(0), Some(-1), Some(474_781), None]
        );
    }

    #[test]
    fn truncation_floors_numbers_and_cuts_strings_at_code_points() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, -1, 10, 9]));
        let cut = Transform::Truncate(10).apply(&ints);
        let cut: Vec<_> = cut.as_primitive::<Int32Type>().values().to_vec();
        assert_eq!(cut, [0, -10, 10, 0]);
        let strings: ArrayRef =
            Arc::new(StringArray::from(vec![Some("iceberg"), Some("äöü"), None]));
        let cut = Transform::Truncate(2).apply(&strings);
        let cut: Vec<_> = cut.as_string::<i32>().iter().collect();
        assert_eq!(cut, [Some("ic"), Some("äö"), None]);
    }

    #[test]
    fn transforms_parse_and_refuse_what_they_cannot_apply() {
        assert_eq!(Transform::parse("bucket[16]"), Some(Transform::Bucket(16)));
        assert_eq!(
            Transform::parse("truncate[ 4]"),
            Some(Transform::Truncate(4))
        );
        assert_eq!(Transform::parse("bucket[0]"), None);
        assert_eq!(Transform::parse("zorder"), None);
        assert!(!Transform::Hour.applies_to(&DataType::Date32));
        assert!(!Transform::Truncate(3).applies_to(&DataType::Date32));
        assert!(Transform::Void.applies_to(&DataType::Boolean));
        let column = booleans(&[Some(true)]);
        assert_eq!(&Transform::Identity.apply(&column), &column);
    }

    #[test]
    fn tagged_values_read_back() {
        for value in [
            PartitionValue::Null,
            PartitionValue::Boolean(true),
            PartitionValue::Int(-3),
            PartitionValue::Long(1 << 40),
            PartitionValue::Double(0.5),
            PartitionValue::String("x=y".into()),
        ] {
            let (tag, bytes) = tagged(&value);
            assert_eq!(from_tagged(tag, &bytes), Some(value));
        }
        assert_eq!(from_tagged(2, &[1, 2]), None);
    }
}
