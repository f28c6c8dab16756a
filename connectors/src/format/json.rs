//! The JSON format (one object a line) with Flink's `json.timestamp-format.standard`:
//! timestamps are written as SQL writes them (`2024-01-01 23:59:33.004`, the default) or
//! as ISO 8601 (`2024-01-01T23:59:33.004`); both are read. A missing field is NULL, as
//! Flink has it, or, with `json.fail-on-missing-field` = `true`, a malformed record (an
//! explicit `null` is not missing).

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use eddy_common::Result;

use super::super::Options;

/// The option keys of the JSON format.
pub const JSON_KEYS: &[&str] = &[
    "json.ignore-parse-errors",
    "json.timestamp-format.standard",
    "json.fail-on-missing-field",
];

/// How timestamps are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampStandard {
    /// `yyyy-MM-dd HH:mm:ss.SSS`.
    #[default]
    Sql,
    /// `yyyy-MM-ddTHH:mm:ss.SSS`.
    Iso8601,
}

/// The JSON format, as its options set it.
#[derive(Debug, Clone, Default)]
pub struct JsonFormat {
    timestamps: TimestampStandard,
    /// `json.fail-on-missing-field`.
    fail_on_missing_field: bool,
}

impl TimestampStandard {
    /// The standard option `<format>.timestamp-format.standard` names (SQL by default).
    pub fn from_options(options: &Options<'_>, format: &str) -> Result<Self> {
        let key = format!("{format}.timestamp-format.standard");
        match options.get(&key) {
            None => Ok(TimestampStandard::Sql),
            Some(v) if v.eq_ignore_ascii_case("SQL") => Ok(TimestampStandard::Sql),
            Some(v) if v.eq_ignore_ascii_case("ISO-8601") => Ok(TimestampStandard::Iso8601),
            Some(other) => Err(options.error(format!(
                "option '{key}' = '{other}': expected SQL or ISO-8601"
            ))),
        }
    }
}

impl JsonFormat {
    /// The format the `json.*` options describe.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        Ok(JsonFormat {
            timestamps: TimestampStandard::from_options(options, "json")?,
            fail_on_missing_field: options.flag("json.fail-on-missing-field", false)?,
        })
    }

    /// Decodes `bytes` (whole lines) into one batch of `rows` rows at most.
    pub fn decode(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
        rows: usize,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        if self.fail_on_missing_field {
            check_fields(schema, bytes)?;
        }
        let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(rows)
            .build_decoder()?;
        super::feed(bytes, |rest| decoder.decode(rest))?;
        decoder.flush()
    }

    /// Appends the rows, encoded, to `out`.
    pub fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        let format = match self.timestamps {
            TimestampStandard::Sql => "%Y-%m-%d %H:%M:%S%.3f",
            TimestampStandard::Iso8601 => "%Y-%m-%dT%H:%M:%S%.3f",
        };
        let mut writer = arrow::json::WriterBuilder::new()
            .with_timestamp_format(format.to_string())
            .build::<_, arrow::json::writer::LineDelimited>(out);
        writer.write(batch)?;
        writer.finish()?;
        Ok(())
    }
}

/// Fails on the first line (object) that lacks one of `schema`'s fields.
fn check_fields(schema: &SchemaRef, bytes: &[u8]) -> Result<(), ArrowError> {
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(line)
            .map_err(|e| ArrowError::JsonError(format!("not a JSON object: {e}")))?;
        if let Some(field) = schema
            .fields()
            .iter()
            .find(|f| !object.contains_key(f.name()))
        {
            return Err(ArrowError::JsonError(format!(
                "field '{}' is missing ('json.fail-on-missing-field' = 'true')",
                field.name()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::TimestampMillisecondArray;
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    #[test]
    fn timestamps_are_written_in_the_chosen_standard_and_both_are_read() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(TimestampMillisecondArray::from(vec![
                1_704_153_573_004,
            ]))],
        )
        .unwrap();
        for (standard, text) in [
            (
                TimestampStandard::Sql,
                "{\"ts\":\"2024-01-01 23:59:33.004\"}\n",
            ),
            (
                TimestampStandard::Iso8601,
                "{\"ts\":\"2024-01-01T23:59:33.004\"}\n",
            ),
        ] {
            let format = JsonFormat {
                timestamps: standard,
                ..JsonFormat::default()
            };
            let mut out = Vec::new();
            format.encode(&batch, &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), text);
            let back = format.decode(&schema, text.as_bytes(), 4).unwrap().unwrap();
            assert_eq!(back, batch);
        }
    }

    #[test]
    fn a_missing_field_is_null_or_with_the_option_an_error() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]));
        let lines = b"{\"a\": 1, \"b\": null}\n{\"a\": 2}\n";
        let lenient = JsonFormat::default();
        let rows = lenient.decode(&schema, lines, 2).unwrap().unwrap();
        assert_eq!(rows.num_rows(), 2);
        assert_eq!(rows.column(1).null_count(), 2);
        let strict = JsonFormat {
            fail_on_missing_field: true,
            ..JsonFormat::default()
        };
        let error = strict.decode(&schema, lines, 2).unwrap_err().to_string();
        assert!(error.contains("field 'b' is missing"), "{error}");
        assert!(
            strict.decode(&schema, &lines[..20], 1).unwrap().is_some(),
            "null is present"
        );
    }
}
