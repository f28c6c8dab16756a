//! `maxwell-json`: Maxwell's change messages, one row each: `insert` is `+I` of `data`,
//! `delete` is `-D` of `data`, `update` is `-U` of the before-image (`data` with the changed
//! columns' old values from `old`) then `+U` of `data`. Other types (`bootstrap-*`,
//! `table-*`, ...) are errors, as in Flink.

use std::borrow::Cow;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use eddy_common::chunk::Op;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::facts::MessageFacts;
use super::{ChangeFormat, ChangeRows, JsonObject, excerpt, malformed, parse_envelope};
use crate::Options;

/// The option keys of `maxwell-json`.
pub const KEYS: &[&str] = &[
    "maxwell-json.ignore-parse-errors",
    "maxwell-json.timestamp-format.standard",
];

/// The `maxwell-json` format.
#[derive(Debug, Clone, Default)]
pub struct MaxwellJson;

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old: Option<&'a RawValue>,
    #[serde(rename = "type", default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    database: Option<&'a RawValue>,
    #[serde(borrow, default)]
    table: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts: Option<&'a RawValue>,
}

impl MaxwellJson {
    /// The format the `maxwell-json.*` options describe.
    pub fn from_options(options: &Options<'_>) -> eddy_common::Result<Self> {
        super::validate_common(options, "maxwell-json")?;
        Ok(MaxwellJson)
    }
}

impl ChangeFormat for MaxwellJson {
    fn push_message(
        &self,
        schema: &SchemaRef,
        message: &[u8],
        rows: &mut ChangeRows,
    ) -> Result<(), ArrowError> {
        let envelope: Envelope<'_> = parse_envelope("Maxwell", message)?;
        rows.state_facts(&MessageFacts {
            ingestion: envelope.ts,
            ingestion_in_seconds: true,
            database: envelope.database,
            table: envelope.table,
            ..MessageFacts::default()
        })?;
        let kind = envelope
            .kind
            .ok_or_else(|| malformed("the message has no 'type'".into()))?;
        let data = envelope
            .data
            .ok_or_else(|| malformed(format!("a '{}' message without 'data'", excerpt(&kind))))?;
        match kind.as_ref() {
            "insert" => rows.push(Op::Insert, data),
            "delete" => rows.push(Op::Delete, data),
            "update" => {
                let old = envelope
                    .old
                    .ok_or_else(|| malformed("an 'update' message without 'old'".into()))?;
                rows.push_update(schema, &JsonObject::parse(old, "old")?, data)
            }
            other => Err(malformed(format!(
                "unknown \"type\" value \"{}\" (Maxwell's rows are insert, update, delete)",
                excerpt(other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn messages_become_rows_and_updates_merge_the_old_values() {
        let lines = concat!(
            r#"{"database":"d","table":"t","type":"insert","ts":1,"xid":7,"commit":true,"data":{"id":1,"name":"a"}}"#,
            "\n",
            r#"{"database":"d","table":"t","type":"update","data":{"id":1,"name":"b"},"old":{"name":"a"}}"#,
            "\n",
            r#"{"type":"update","data":{"id":1,"name":"c"},"old":{"name":null}}"#,
            "\n",
            r#"{"database":"d","table":"t","type":"delete","data":{"id":1,"name":"c"}}"#,
        );
        let chunk = MaxwellJson
            .decode(&schema(), lines.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(
            chunk.to_pretty(),
            ["+I 1 a", "-U 1 a", "+U 1 b", "-U 1 .", "+U 1 c", "-D 1 c"]
        );
    }

    #[test]
    fn malformed_messages_are_errors_that_say_what_is_wrong() {
        super::super::assert_refused(
            |m| MaxwellJson.decode(&schema(), m),
            &[
                (
                    r#"{"type":"bootstrap-insert","data":{"id":1}}"#,
                    "unknown \"type\" value",
                ),
                (r#"{"type":"insert"}"#, "without 'data'"),
                (r#"{"type":"update","data":{"id":1}}"#, "without 'old'"),
                (r#"{"data":{"id":1}}"#, "no 'type'"),
                (r#"{"type":"insert","data":"x"}"#, "must be a JSON object"),
            ],
        );
    }
}
