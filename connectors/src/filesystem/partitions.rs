//! Hive-style partition directories, named as Flink's filesystem connector names them:
//! `key=value/key=value/` under the table's path, keys and values escaped, a NULL or empty
//! value written as the default partition name. The files inside hold the other columns.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, new_null_array};
use arrow::compute::{cast, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::{EddyError, Result};

/// `partition.default-name`'s default: the directory of NULL and empty values.
pub const DEFAULT_PARTITION_NAME: &str = "__DEFAULT_PARTITION__";

/// The partition columns of a table, and how rows map to directories and back.
#[derive(Debug, Clone)]
pub struct PartitionColumns {
    /// The partition keys, in `PARTITIONED BY` order.
    keys: Vec<String>,
    /// Their indexes in the table's schema, in the same order.
    key_indexes: Vec<usize>,
    /// Their types.
    key_types: Vec<DataType>,
    /// The indexes of the other columns, which the files hold.
    data_indexes: Vec<usize>,
    /// The schema of the files: the table's columns without the partition keys.
    data_schema: SchemaRef,
    /// The full schema.
    schema: SchemaRef,
    /// The directory name of NULL and empty values.
    default_name: String,
}

impl PartitionColumns {
    /// The partitioning of a table with `schema` by `keys`. A key must be a column of a
    /// type whose text Flink writes and reads alike (strings, integers, booleans).
    pub fn new(
        schema: &SchemaRef,
        keys: &[String],
        default_name: &str,
    ) -> std::result::Result<Self, String> {
        let mut key_indexes = Vec::with_capacity(keys.len());
        let mut key_types = Vec::with_capacity(keys.len());
        for key in keys {
            let index = schema
                .index_of(key)
                .map_err(|_| format!("partition column '{key}' is not a physical column"))?;
            let data_type = schema.field(index).data_type();
            if !partition_type(data_type) {
                return Err(format!(
                    "unsupported: partition column '{key}' of type {}; partition columns can be \
                     STRING, BOOLEAN, TINYINT, SMALLINT, INT or BIGINT",
                    eddy_common::schema::sql_name(data_type)
                ));
            }
            if key_indexes.contains(&index) {
                return Err(format!("partition column '{key}' is named twice"));
            }
            key_indexes.push(index);
            key_types.push(data_type.clone());
        }
        if key_indexes.len() == schema.fields().len() {
            return Err("every column is a partition column: the files would hold nothing".into());
        }
        let data_indexes: Vec<usize> = (0..schema.fields().len())
            .filter(|i| !key_indexes.contains(i))
            .collect();
        let data_schema = Arc::new(schema.project(&data_indexes).map_err(|e| e.to_string())?);
        if default_name.is_empty() {
            return Err("option 'partition.default-name' must not be empty".into());
        }
        Ok(PartitionColumns {
            keys: keys.to_vec(),
            key_indexes,
            key_types,
            data_indexes,
            data_schema,
            schema: schema.clone(),
            default_name: default_name.to_string(),
        })
    }

    /// The partition keys.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The columns the files hold.
    pub fn data_schema(&self) -> &SchemaRef {
        &self.data_schema
    }

    /// Splits rows by partition: each partition's directory (`k=v/k=v`, escaped) with its
    /// rows' data columns, in the order the rows came. Rows of one partition in a row
    /// (the usual case) are found without hashing.
    pub fn split(&self, rows: &RecordBatch) -> Result<Vec<(String, RecordBatch)>> {
        let texts = self.key_texts(rows)?;
        let data = rows.project(&self.data_indexes)?;
        let mut groups: HashMap<Vec<Option<&str>>, Vec<u32>> = HashMap::new();
        let mut order: Vec<Vec<Option<&str>>> = Vec::new();
        let mut current: Vec<Option<&str>> = Vec::with_capacity(texts.len());
        let mut next: Vec<Option<&str>> = Vec::with_capacity(texts.len());
        let mut run: Vec<u32> = Vec::new();
        for row in 0..rows.num_rows() {
            next.clear();
            next.extend(texts.iter().map(|t| t.is_valid(row).then(|| t.value(row))));
            if row > 0 && next != current {
                flush_run(&mut groups, &mut order, &current, &mut run);
            }
            std::mem::swap(&mut current, &mut next);
            run.push(row as u32);
        }
        if rows.num_rows() > 0 {
            flush_run(&mut groups, &mut order, &current, &mut run);
        }
        if order.len() == 1 {
            return Ok(vec![(self.directory(&order[0]), data)]);
        }
        order
            .iter()
            .map(|values| {
                let indexes = UInt32Array::from(groups.remove(values).unwrap_or_default());
                Ok((self.directory(values), take_record_batch(&data, &indexes)?))
            })
            .collect()
    }

    /// The directory of one partition's values: `k=v/k=v`, escaped as Flink escapes.
    fn directory(&self, values: &[Option<&str>]) -> String {
        let mut out = String::new();
        for (key, value) in self.keys.iter().zip(values) {
            if !out.is_empty() {
                out.push('/');
            }
            let value = value
                .filter(|v| !v.is_empty())
                .unwrap_or(&self.default_name);
            escape_into(key, &mut out);
            out.push('=');
            escape_into(value, &mut out);
        }
        out
    }

    /// The partition keys' values as text, as Flink writes them.
    fn key_texts(&self, rows: &RecordBatch) -> Result<Vec<StringArray>> {
        self.key_indexes
            .iter()
            .map(|&i| {
                let text = cast(rows.column(i), &DataType::Utf8)?;
                Ok(text
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .cloned()
                    .expect("cast to Utf8 gives a StringArray"))
            })
            .collect()
    }

    /// The values of the partition keys a file's path names (relative to the table's
    /// path): `None` for a key the path does not name or names with the default name.
    pub fn values_of(&self, relative_path: &str) -> Vec<Option<String>> {
        let mut found: HashMap<String, String> = HashMap::new();
        for component in relative_path.split('/') {
            if let Some((key, value)) = component.split_once('=')
                && !key.is_empty()
                && !value.is_empty()
            {
                found.insert(unescape(key), unescape(value));
            }
        }
        self.keys
            .iter()
            .map(|key| found.remove(key).filter(|v| *v != self.default_name))
            .collect()
    }

    /// The table's rows from a file's data columns and its partition's values (from
    /// [`PartitionColumns::values_of`]); `file` names the file in errors.
    pub fn attach(
        &self,
        data: &RecordBatch,
        values: &[Option<String>],
        file: &str,
    ) -> Result<RecordBatch> {
        let rows = data.num_rows();
        let mut columns: Vec<Option<ArrayRef>> = vec![None; self.schema.fields().len()];
        for (&index, column) in self.data_indexes.iter().zip(data.columns()) {
            columns[index] = Some(column.clone());
        }
        for ((&index, data_type), value) in self.key_indexes.iter().zip(&self.key_types).zip(values)
        {
            let column = match value {
                None => new_null_array(data_type, rows),
                Some(text) => {
                    let texts: ArrayRef = Arc::new(StringArray::from(vec![text.as_str(); rows]));
                    let options = arrow::compute::CastOptions {
                        safe: false,
                        ..Default::default()
                    };
                    arrow::compute::cast_with_options(&texts, data_type, &options).map_err(
                        |_| {
                            EddyError::Internal(format!(
                                "the path of '{file}' gives partition column '{}' the value \
                             '{text}', which is not a {}",
                                self.schema.field(index).name(),
                                eddy_common::schema::sql_name(data_type)
                            ))
                        },
                    )?
                }
            };
            columns[index] = Some(column);
        }
        let columns = columns
            .into_iter()
            .map(|c| c.expect("every column is data or a partition key"))
            .collect();
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

fn flush_run<'a>(
    groups: &mut HashMap<Vec<Option<&'a str>>, Vec<u32>>,
    order: &mut Vec<Vec<Option<&'a str>>>,
    values: &[Option<&'a str>],
    run: &mut Vec<u32>,
) {
    match groups.get_mut(values) {
        Some(rows) => rows.append(run),
        None => {
            order.push(values.to_vec());
            groups.insert(values.to_vec(), std::mem::take(run));
        }
    }
}

fn partition_type(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
    )
}

/// Whether Flink escapes a character in a partition directory's name: control
/// characters and `"#%'*/:=?\{[]^` and DEL.
fn needs_escape(c: char) -> bool {
    (c as u32) < 0x20 || "\"#%'*/:=?\\\u{7f}{[]^".contains(c)
}

/// Appends `text` escaped as `%XX` where Flink escapes it.
fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        if needs_escape(c) {
            let _ = write!(out, "%{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
}

/// Undoes [`escape`]: `%XX` (two hex digits) is the character XX; anything else stays.
pub fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if bytes[i] == b'%'
            && let Some(code) = text
                .get(i + 1..i + 3)
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .and_then(char::from_u32)
        {
            out.push(code);
            i += 3;
            continue;
        }
        let c = text[i..].chars().next().expect("inside the text");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, Int64Array};
    use arrow::datatypes::{Field, Schema};

    fn escape(text: &str) -> String {
        let mut out = String::new();
        escape_into(text, &mut out);
        out
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("dt", DataType::Utf8, true),
            Field::new("hm", DataType::Utf8, true),
            Field::new("n", DataType::Int32, true),
        ]))
    }

    fn partitions() -> PartitionColumns {
        let keys = ["dt".to_string(), "hm".to_string()];
        PartitionColumns::new(&schema(), &keys, DEFAULT_PARTITION_NAME).unwrap()
    }

    fn batch(rows: &[(i64, Option<&str>, Option<&str>, i32)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    fn ids(batch: &RecordBatch) -> Vec<i64> {
        let ids = batch.column(0).as_any().downcast_ref::<Int64Array>();
        ids.unwrap().values().to_vec()
    }

    #[test]
    fn escapes_as_flink_does() {
        assert_eq!(escape("12:30"), "12%3A30");
        assert_eq!(escape("a/b=c d"), "a%2Fb%3Dc d");
        assert_eq!(escape("100%\n"), "100%25%0A");
        assert_eq!(escape("héllo"), "héllo");
        for text in ["12:30", "a/b=c d", "100%\n", "héllo", "%", "%4"] {
            assert_eq!(unescape(&escape(text)), text);
        }
        assert_eq!(unescape("%zz%4"), "%zz%4");
    }

    #[test]
    fn rows_split_by_partition_in_arrival_order() {
        let rows = batch(&[
            (1, Some("2024-01-01"), Some("10:00"), 1),
            (2, Some("2024-01-01"), Some("10:00"), 2),
            (3, Some("2024-01-02"), None, 3),
            (4, Some("2024-01-01"), Some("10:00"), 4),
            (5, Some(""), Some("10:01"), 5),
        ]);
        let split = partitions().split(&rows).unwrap();
        let dirs: Vec<&str> = split.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(
            dirs,
            [
                "dt=2024-01-01/hm=10%3A00",
                "dt=2024-01-02/hm=__DEFAULT_PARTITION__",
                "dt=__DEFAULT_PARTITION__/hm=10%3A01"
            ]
        );
        assert_eq!(ids(&split[0].1), [1, 2, 4]);
        assert_eq!(ids(&split[1].1), [3]);
        assert_eq!(
            split[0].1.schema().fields().len(),
            2,
            "only id and n are written"
        );
    }

    #[test]
    fn values_come_back_from_the_path() {
        let partitions = partitions();
        let values = partitions.values_of("dt=2024-01-01/hm=10%3A00/part-1.csv");
        assert_eq!(values, [Some("2024-01-01".into()), Some("10:00".into())]);
        let values = partitions.values_of("dt=__DEFAULT_PARTITION__/part-1.csv");
        assert_eq!(values, [None, None]);
        let data = batch(&[(7, None, None, 8)]).project(&[0, 3]).unwrap();
        let values = [Some("2024-01-01".to_string()), None];
        let rows = partitions.attach(&data, &values, "f").unwrap();
        assert_eq!(rows.schema(), schema());
        assert_eq!(
            rows.column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0),
            "2024-01-01"
        );
        assert!(rows.column(2).is_null(0));
    }

    #[test]
    fn refuses_keys_flink_would_write_differently() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Float64, true),
            Field::new("b", DataType::Int64, true),
        ]));
        let error = PartitionColumns::new(&schema, &["a".into()], DEFAULT_PARTITION_NAME);
        assert!(
            error
                .unwrap_err()
                .contains("unsupported: partition column 'a' of type DOUBLE")
        );
        let error = PartitionColumns::new(&schema, &["c".into()], DEFAULT_PARTITION_NAME);
        assert!(error.unwrap_err().contains("'c' is not a physical column"));
        let schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Int64, true)]));
        assert!(PartitionColumns::new(&schema, &["b".into()], DEFAULT_PARTITION_NAME).is_err());
    }
}
