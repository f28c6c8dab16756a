//! The JSON format (one object a line) with Flink's `json.timestamp-format.standard`:
//! timestamps are written as SQL writes them (`2024-01-01 23:59:33.004`, the default) or
//! as ISO 8601 (`2024-01-01T23:59:33.004`); both are read. A missing field is NULL, as
//! Flink's `json.fail-on-missing-field` = `false` has it.

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use eddy_common::Result;

use super::super::Options;

/// The option keys of the JSON format.
pub const JSON_KEYS: &[&str] = &["json.ignore-parse-errors", "json.timestamp-format.standard"];

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
}

impl JsonFormat {
    /// The format the `json.*` options describe.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        let timestamps = match options.get("json.timestamp-format.standard") {
            None => TimestampStandard::Sql,
            Some(v) if v.eq_ignore_ascii_case("SQL") => TimestampStandard::Sql,
            Some(v) if v.eq_ignore_ascii_case("ISO-8601") => TimestampStandard::Iso8601,
            Some(other) => {
                return Err(options.error(format!(
                    "option 'json.timestamp-format.standard' = '{other}': expected SQL or ISO-8601"
                )));
            }
        };
        Ok(JsonFormat { timestamps })
    }

    /// Decodes `bytes` (whole lines) into one batch of `rows` rows at most.
    pub fn decode(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
        rows: usize,
    ) -> Result<Option<RecordBatch>, ArrowError> {
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
            };
            let mut out = Vec::new();
            format.encode(&batch, &mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), text);
            let back = format.decode(&schema, text.as_bytes(), 4).unwrap().unwrap();
            assert_eq!(back, batch);
        }
    }
}
