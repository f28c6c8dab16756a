//! Changelog formats: the JSON envelopes change-data-capture tools write for each change of
//! a database row — Debezium ([`debezium`]), Canal ([`canal`]) and Maxwell ([`maxwell`]) —
//! read as Flink's `debezium-json`, `canal-json` and `maxwell-json` formats read them:
//! every envelope becomes zero or more rows with their kind (`+I`, `-U`, `+U`, `-D`).
//!
//! An envelope is taken apart with `serde_json`, borrowing the row images as raw JSON text;
//! the images of a whole block of envelopes are then decoded by Arrow's JSON decoder at
//! once, with the table's types (the same conversions the `json` format makes). Only
//! Canal's and Maxwell's before-images, which merge the changed columns (`old`) into the
//! new row (`data`), are rewritten per row.

pub mod canal;
pub mod debezium;
pub mod maxwell;

use std::borrow::Cow;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use eddy_common::chunk::{Chunk, Op};
use serde_json::value::RawValue;

use super::super::Options;
use super::JsonFormat;
use super::json::TimestampStandard;

/// Decodes whole lines, one message a line, each taken apart by `push_message` into the
/// row images it carries; empty messages (Kafka tombstones, blank lines) carry none.
pub(crate) fn decode_messages(
    schema: &SchemaRef,
    bytes: &[u8],
    mut push_message: impl FnMut(&[u8], &mut ChangeRows) -> Result<(), ArrowError>,
) -> Result<Option<Chunk>, ArrowError> {
    let mut rows = ChangeRows::default();
    for message in bytes.split(|b| *b == b'\n') {
        if !is_tombstone(message) {
            push_message(message, &mut rows)?;
        }
    }
    rows.decode(schema)
}

/// Row images decoded from a block of envelopes, in order: JSON objects, one a line, and
/// the kind of each.
#[derive(Debug, Default)]
pub(crate) struct ChangeRows {
    text: Vec<u8>,
    ops: Vec<Op>,
}

impl ChangeRows {
    /// Adds a row image given as a JSON object.
    pub(crate) fn push(&mut self, op: Op, image: &RawValue) -> Result<(), ArrowError> {
        let text = image.get();
        if !text.starts_with('{') {
            return Err(malformed(format!(
                "a row image must be a JSON object, not {}",
                excerpt(text)
            )));
        }
        self.text.extend_from_slice(text.as_bytes());
        self.text.push(b'\n');
        self.ops.push(op);
        Ok(())
    }

    /// Adds an update as Canal and Maxwell write one: `-U` of the before-image, then `+U`
    /// of `after`. The before-image is the columns of `schema` that `old` holds (the
    /// changed columns) with their old values, the others as `after` has them. (Flink
    /// looks a column up in a Canal message's whole `old` array instead of the row's own
    /// old values, so a column changed in one row of a multi-row update reads as NULL in
    /// the before-images of the rows where it did not change, retracting rows that never
    /// existed; Eddy reads each row's own.)
    pub(crate) fn push_update(
        &mut self,
        schema: &SchemaRef,
        old: &JsonObject<'_>,
        after: &RawValue,
    ) -> Result<(), ArrowError> {
        let merged = JsonObject::parse(after, "data")?;
        self.push_before_image(schema, old, &merged)?;
        self.push(Op::UpdateAfter, after)
    }

    fn push_before_image(
        &mut self,
        schema: &SchemaRef,
        old: &JsonObject<'_>,
        after: &JsonObject<'_>,
    ) -> Result<(), ArrowError> {
        self.text.push(b'{');
        let mut first = true;
        for field in schema.fields() {
            let name = field.name().as_str();
            let Some(value) = old.get(name).or_else(|| after.get(name)) else {
                continue;
            };
            if !first {
                self.text.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut self.text, name)
                .map_err(|e| ArrowError::JsonError(e.to_string()))?;
            self.text.push(b':');
            self.text.extend_from_slice(value.get().as_bytes());
        }
        self.text.extend_from_slice(b"}\n");
        self.ops.push(Op::UpdateBefore);
        Ok(())
    }

    /// Decodes the row images with the table's types (as the `json` format decodes
    /// objects).
    fn decode(self, schema: &SchemaRef) -> Result<Option<Chunk>, ArrowError> {
        if self.ops.is_empty() {
            return Ok(None);
        }
        let Some(rows) = JsonFormat::default().decode(schema, &self.text, self.ops.len())? else {
            return Ok(None);
        };
        if rows.num_rows() != self.ops.len() {
            return Err(ArrowError::JsonError(format!(
                "{} row images decoded into {} rows",
                self.ops.len(),
                rows.num_rows()
            )));
        }
        Ok(Some(Chunk::from_ops(rows, self.ops)))
    }
}

/// A JSON object's members, values kept as raw text.
pub(crate) struct JsonObject<'a> {
    members: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> JsonObject<'a> {
    /// Parses `raw`, which must be a JSON object.
    pub(crate) fn parse(raw: &'a RawValue, what: &str) -> Result<Self, ArrowError> {
        let members: std::collections::BTreeMap<Cow<'a, str>, &'a RawValue> =
            serde_json::from_str(raw.get()).map_err(|_| {
                malformed(format!(
                    "'{what}' must be a JSON object, not {}",
                    excerpt(raw.get())
                ))
            })?;
        Ok(JsonObject {
            members: members.into_iter().collect(),
        })
    }

    /// The raw value of member `name`, if present (an explicit `null` is present).
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| *value)
    }
}

/// Whether a message is empty (a Kafka tombstone, a blank line): it carries no change.
fn is_tombstone(message: &[u8]) -> bool {
    message.iter().all(u8::is_ascii_whitespace) || message == b"null"
}

/// Parses one envelope, naming the format in the error.
pub(crate) fn parse_envelope<'a, T: serde::Deserialize<'a>>(
    format: &str,
    message: &'a [u8],
) -> Result<T, ArrowError> {
    serde_json::from_slice(message)
        .map_err(|e| malformed(format!("not a {format} JSON message: {e}")))
}

/// A malformed message.
pub(crate) fn malformed(message: String) -> ArrowError {
    ArrowError::JsonError(message)
}

/// The start of a JSON text, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    const MOST: usize = 60;
    match text.char_indices().nth(MOST) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// Validates `<format>.timestamp-format.standard`, which every changelog format has:
/// timestamps are read in both standards, so it changes nothing read.
pub(crate) fn validate_common(options: &Options<'_>, format: &str) -> eddy_common::Result<()> {
    TimestampStandard::from_options(options, format).map(|_| ())
}

/// Each row of a chunk as `op v1 v2 ...` (NULL for a null), for tests.
#[cfg(test)]
pub(crate) fn rendered(chunk: &Chunk) -> Vec<String> {
    use arrow::array::Array;
    use arrow::util::display::array_value_to_string;
    let rows = chunk.rows();
    (0..chunk.num_rows())
        .map(|i| {
            let mut line = chunk.op(i).short_name().to_string();
            for column in rows.columns() {
                line.push(' ');
                match column.is_null(i) {
                    true => line.push_str("NULL"),
                    false => line.push_str(&array_value_to_string(column, i).expect("a value")),
                }
            }
            line
        })
        .collect()
}

/// Asserts that each message of `cases` fails to decode with an error containing its
/// expected text, for tests.
#[cfg(test)]
pub(crate) fn assert_refused(
    decode: impl Fn(&[u8]) -> Result<Option<Chunk>, ArrowError>,
    cases: &[(&str, &str)],
) {
    for (message, expected) in cases {
        let error = decode(message.as_bytes()).unwrap_err().to_string();
        assert!(error.contains(expected), "{message}: {error}");
    }
}
