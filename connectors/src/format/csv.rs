//! The CSV format with Flink's options and semantics: `csv.field-delimiter`,
//! `csv.quote-character`, `csv.escape-character`, `csv.allow-comments` and
//! `csv.null-literal`. As in Flink, an empty field is an empty STRING, not NULL, and an empty
//! number is malformed; only a field equal to the null literal (if one is set, `''` included)
//! is NULL, and NULLs are written as the null literal (by default as an empty field).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use regex::Regex;

use eddy_common::Result;

use super::super::Options;

/// The option keys of the CSV format.
pub const CSV_KEYS: &[&str] = &[
    "csv.ignore-parse-errors",
    "csv.field-delimiter",
    "csv.quote-character",
    "csv.escape-character",
    "csv.allow-comments",
    "csv.null-literal",
];

/// How a timestamp is written, as Flink's CSV format reads it (SQL's space, not ISO's `T`).
const TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.3f";

/// A batch decoded with empty fields as NULL, as Flink reads it without a null literal: the
/// NULLs of STRING columns are empty strings (an empty field's offsets already span no
/// bytes, so dropping the null mask is enough); a NULL elsewhere is an empty number, date
/// or flag, which is malformed.
fn empty_fields_as_strings(batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
    if batch.columns().iter().all(|c| c.null_count() == 0) {
        return Ok(batch);
    }
    let schema = batch.schema();
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| match column.as_string_opt::<i32>() {
            Some(strings) if strings.null_count() > 0 => {
                let (offsets, values, _) = strings.clone().into_parts();
                Ok(Arc::new(StringArray::new(offsets, values, None)) as ArrayRef)
            }
            _ if column.null_count() > 0 => Err(ArrowError::ParseError(format!(
                "empty value for column '{}' of type {} (set 'csv.null-literal' = '' to read \
                 empty fields as NULL)",
                field.name(),
                field.data_type()
            ))),
            _ => Ok(column.clone()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// A CSV dialect, as its options set it.
#[derive(Debug, Clone)]
pub struct CsvFormat {
    delimiter: u8,
    quote: u8,
    escape: Option<u8>,
    allow_comments: bool,
    null_literal: Option<String>,
    nulls: Nulls,
}

/// Which fields read as NULL.
#[derive(Debug, Clone)]
enum Nulls {
    /// None (no null literal): Arrow's decoder reads empty fields as NULL, which are then
    /// empty strings in STRING columns and malformed elsewhere.
    None,
    /// Empty fields (`csv.null-literal` = `''`): Arrow's decoder as it is.
    Empty,
    /// Fields equal to the null literal.
    Literal(Regex),
}

impl Default for CsvFormat {
    fn default() -> Self {
        CsvFormat::new(b',', b'"', None, false, None)
    }
}

impl CsvFormat {
    fn new(
        delimiter: u8,
        quote: u8,
        escape: Option<u8>,
        allow_comments: bool,
        null_literal: Option<String>,
    ) -> Self {
        let nulls = match null_literal.as_deref() {
            None => Nulls::None,
            Some("") => Nulls::Empty,
            Some(literal) => Nulls::Literal(
                Regex::new(&format!("^{}$", regex::escape(literal)))
                    .expect("an escaped literal is a valid pattern"),
            ),
        };
        CsvFormat {
            delimiter,
            quote,
            escape,
            allow_comments,
            null_literal,
            nulls,
        }
    }

    /// The dialect the `csv.*` options describe.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        let character = |key: &str, default: Option<u8>| -> Result<Option<u8>> {
            match options.get(key) {
                None => Ok(default),
                Some("\\t") => Ok(Some(b'\t')),
                Some(value) => match value.as_bytes() {
                    [b] => Ok(Some(*b)),
                    _ => Err(options.error(format!(
                        "option '{key}' = '{value}': expected one character"
                    ))),
                },
            }
        };
        Ok(CsvFormat::new(
            character("csv.field-delimiter", Some(b','))?.unwrap_or(b','),
            character("csv.quote-character", Some(b'"'))?.unwrap_or(b'"'),
            character("csv.escape-character", None)?,
            options.flag("csv.allow-comments", false)?,
            options.get("csv.null-literal").map(str::to_string),
        ))
    }

    /// Decodes `bytes` (whole lines) into one batch of `rows` rows at most.
    pub fn decode(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
        rows: usize,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        let mut builder = arrow::csv::ReaderBuilder::new(schema.clone())
            .with_header(false)
            .with_delimiter(self.delimiter)
            .with_quote(self.quote)
            .with_batch_size(rows);
        if let Nulls::Literal(literal) = &self.nulls {
            builder = builder.with_null_regex(literal.clone());
        }
        if let Some(escape) = self.escape {
            builder = builder.with_escape(escape);
        }
        if self.allow_comments {
            builder = builder.with_comment(b'#');
        }
        let mut decoder = builder.build_decoder();
        super::feed(bytes, |rest| decoder.decode(rest))?;
        decoder.decode(&[])?;
        match (&self.nulls, decoder.flush()?) {
            (Nulls::None, Some(batch)) => empty_fields_as_strings(batch).map(Some),
            (_, batch) => Ok(batch),
        }
    }

    /// Appends the rows, encoded, to `out`.
    pub fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        let mut builder = arrow::csv::WriterBuilder::new()
            .with_header(false)
            .with_delimiter(self.delimiter)
            .with_quote(self.quote)
            .with_timestamp_format(TIMESTAMP_FORMAT.to_string())
            .with_null(self.null_literal.clone().unwrap_or_default());
        if let Some(escape) = self.escape {
            builder = builder.with_escape(escape).with_double_quote(false);
        }
        builder.build(out).write(batch)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    fn read(format: &CsvFormat, text: &str) -> Result<RecordBatch, ArrowError> {
        Ok(format.decode(&schema(), text.as_bytes(), 16)?.unwrap())
    }

    #[test]
    fn an_empty_field_is_an_empty_string_and_an_empty_number_is_malformed() {
        let batch = read(&CsvFormat::default(), "a,1\n,2\n\"\",3\nnull,4").unwrap();
        let strings = batch.column(0).as_string::<i32>();
        assert_eq!(
            strings.null_count(),
            0,
            "nothing is NULL without a null literal"
        );
        assert_eq!(
            strings.iter().flatten().collect::<Vec<_>>(),
            ["a", "", "", "null"]
        );
        assert!(
            read(&CsvFormat::default(), "a,").is_err(),
            "an empty BIGINT"
        );
    }

    #[test]
    fn the_null_literal_reads_as_null_in_every_column() {
        let empty = CsvFormat::new(b',', b'"', None, false, Some(String::new()));
        let batch = read(&empty, "a,1\n,\n\"\",3").unwrap();
        assert_eq!(batch.column(0).null_count(), 2);
        assert_eq!(batch.column(1).null_count(), 1);
        let word = CsvFormat::new(b',', b'"', None, false, Some("null".into()));
        let batch = read(&word, "null,null\n,5").unwrap();
        let strings = batch.column(0).as_string::<i32>();
        assert!(strings.is_null(0));
        assert_eq!(strings.value(1), "", "an empty field is still a string");
        assert!(batch.column(1).is_null(0));
        assert_eq!(batch.column(1).as_primitive::<Int64Type>().value(1), 5);
    }

    #[test]
    fn quotes_comments_and_nulls_follow_the_options() {
        let format = CsvFormat::new(b';', b'\'', None, true, Some("N/A".into()));
        let batch = read(&format, "# a comment\n'x;y';7\nN/A;N/A").unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.column(0).as_string::<i32>().value(0), "x;y");
        let nulls = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(vec![Some("a;b"), None])),
                Arc::new(Int64Array::from(vec![None, Some(2)])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        format.encode(&nulls, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "'a;b';N/A\nN/A;2\n"
        );
        let back = read(&format, std::str::from_utf8(&out).unwrap().trim_end()).unwrap();
        assert_eq!(back, nulls);
    }
}
