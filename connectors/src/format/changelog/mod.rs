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
//!
//! A reader that appends metadata columns asks for a traced decode: the line each row came
//! from, and the format metadata ([`facts`]) each message states.

pub mod canal;
pub mod debezium;
pub mod facts;
pub mod maxwell;

use std::borrow::Cow;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use eddy_common::chunk::{Chunk, Op};
use serde_json::value::RawValue;

use self::facts::{Fact, FactColumns, MessageFacts};
use super::super::Options;
use super::json::TimestampStandard;
use super::{Decoded, JsonFormat};

/// A changelog format: takes one message apart into the row images it carries.
pub(crate) trait ChangeFormat {
    /// Adds the rows of `message` (not empty) to `rows`, and, when `rows` wants them, the
    /// facts it states ([`ChangeRows::wants_facts`]).
    fn push_message(
        &self,
        schema: &SchemaRef,
        message: &[u8],
        rows: &mut ChangeRows,
    ) -> Result<(), ArrowError>;

    /// Decodes whole lines, one message a line, rows only (for tests; readers decode
    /// through [`super::Format`]).
    #[cfg(test)]
    fn decode(&self, schema: &SchemaRef, bytes: &[u8]) -> Result<Option<Chunk>, ArrowError>
    where
        Self: Sized,
    {
        decode_changes(self, schema, bytes, None).map(|decoded| decoded.map(|d| d.chunk))
    }
}

/// Decodes whole lines, one message a line; empty messages (Kafka tombstones, blank lines)
/// carry no rows. `trace` asks for each row's line and these facts of each line.
pub(crate) fn decode_changes(
    format: &impl ChangeFormat,
    schema: &SchemaRef,
    bytes: &[u8],
    trace: Option<&[Fact]>,
) -> Result<Option<Decoded>, ArrowError> {
    let mut rows = ChangeRows {
        trace: trace.map(Trace::new),
        ..ChangeRows::default()
    };
    for (line, message) in bytes.split(|b| *b == b'\n').enumerate() {
        let facts_before = rows.trace.as_ref().map_or(0, |t| t.facts.len());
        if let Some(trace) = &mut rows.trace {
            trace.line = line as u32;
        }
        if !is_tombstone(message) {
            format.push_message(schema, message, &mut rows)?;
        }
        if let Some(trace) = &mut rows.trace
            && trace.facts.len() == facts_before
        {
            trace.facts.push_none();
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
    trace: Option<Trace>,
}

/// What a traced decode keeps besides the rows.
#[derive(Debug)]
struct Trace {
    /// The line of the message being taken apart.
    line: u32,
    /// The line of each row.
    line_of_row: Vec<u32>,
    /// The facts of each line.
    facts: FactColumns,
}

impl Trace {
    fn new(facts: &[Fact]) -> Self {
        Trace {
            line: 0,
            line_of_row: Vec::new(),
            facts: FactColumns::new(facts),
        }
    }
}

impl ChangeRows {
    /// Whether the message's facts are asked for.
    pub(crate) fn wants_facts(&self) -> bool {
        self.trace.is_some()
    }

    /// Records what the message being taken apart states (once a message).
    pub(crate) fn state_facts(&mut self, facts: &MessageFacts<'_>) -> Result<(), ArrowError> {
        match &mut self.trace {
            Some(trace) => trace.facts.push(facts),
            None => Ok(()),
        }
    }

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
        self.push_op(op);
        Ok(())
    }

    fn push_op(&mut self, op: Op) {
        self.ops.push(op);
        if let Some(trace) = &mut self.trace {
            trace.line_of_row.push(trace.line);
        }
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
        self.push_op(Op::UpdateBefore);
        Ok(())
    }

    /// Decodes the row images with the table's types (as the `json` format decodes
    /// objects).
    fn decode(self, schema: &SchemaRef) -> Result<Option<Decoded>, ArrowError> {
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
        let (line_of_row, facts) = match self.trace {
            Some(trace) => (trace.line_of_row, trace.facts.finish()),
            None => (Vec::new(), Vec::new()),
        };
        Ok(Some(Decoded {
            chunk: Chunk::from_ops(rows, self.ops),
            line_of_row,
            facts,
        }))
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
