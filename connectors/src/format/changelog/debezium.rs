//! `debezium-json`: Debezium's change events, as its JSON converter writes them, with or
//! without the `schema` part (`debezium-json.schema-include`). `op` `c` (create) and `r`
//! (a snapshot read) are `+I` of `after`; `u` is `-U` of `before` then `+U` of `after`;
//! `d` is `-D` of `before`; tombstones (empty messages) carry nothing. An update or delete
//! without `before` (PostgreSQL's default `REPLICA IDENTITY`) cannot be retracted and is
//! an error naming the cause, as in Flink.

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use eddy_common::chunk::Op;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::facts::MessageFacts;
use super::{ChangeFormat, ChangeRows, excerpt, malformed, parse_envelope};
use crate::Options;

/// The option keys of `debezium-json`.
pub const KEYS: &[&str] = &[
    "debezium-json.schema-include",
    "debezium-json.ignore-parse-errors",
    "debezium-json.timestamp-format.standard",
];

/// The `debezium-json` format, as its options set it.
#[derive(Debug, Clone, Default)]
pub struct DebeziumJson {
    /// Messages are `{"schema": ..., "payload": <envelope>}`.
    schema_include: bool,
}

/// A change event's fields that matter here.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    before: Option<&'a RawValue>,
    #[serde(borrow, default)]
    after: Option<&'a RawValue>,
    #[serde(default)]
    op: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts_ms: Option<&'a RawValue>,
    #[serde(borrow, default)]
    source: Option<&'a RawValue>,
}

/// A message with the `schema` part.
#[derive(Deserialize)]
struct WithSchema<'a> {
    #[serde(borrow, default)]
    schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

/// The facts of an event's `source` that are metadata (Flink reads `source` as a map of
/// text).
#[derive(Deserialize, Default)]
struct Source<'a> {
    #[serde(borrow, default)]
    db: Option<&'a RawValue>,
    #[serde(borrow, default)]
    schema: Option<&'a RawValue>,
    #[serde(borrow, default)]
    table: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts_ms: Option<&'a RawValue>,
}

impl DebeziumJson {
    /// The format the `debezium-json.*` options describe.
    pub fn from_options(options: &Options<'_>) -> eddy_common::Result<Self> {
        super::validate_common(options, "debezium-json")?;
        Ok(DebeziumJson {
            schema_include: options.flag("debezium-json.schema-include", false)?,
        })
    }
}

impl ChangeFormat for DebeziumJson {
    fn push_message(
        &self,
        _schema: &SchemaRef,
        message: &[u8],
        rows: &mut ChangeRows,
    ) -> Result<(), ArrowError> {
        let (envelope, schema): (Envelope<'_>, _) = if self.schema_include {
            let outer: WithSchema<'_> = parse_envelope("Debezium", message)?;
            let payload = outer.payload.ok_or_else(|| {
                malformed(
                    "the message has no 'payload' ('debezium-json.schema-include' = 'true' \
                     expects {\"schema\": ..., \"payload\": ...})"
                        .into(),
                )
            })?;
            let envelope = parse_envelope("Debezium", payload.get().as_bytes())?;
            (envelope, outer.schema)
        } else {
            (parse_envelope("Debezium", message)?, None)
        };
        if rows.wants_facts() {
            let source: Source<'_> = match envelope.source {
                Some(source) if source.get() != "null" => serde_json::from_str(source.get())
                    .map_err(|_| {
                        malformed(format!(
                            "'source' must be a JSON object, not {}",
                            excerpt(source.get())
                        ))
                    })?,
                _ => Source::default(),
            };
            rows.state_facts(&MessageFacts {
                schema,
                ingestion: envelope.ts_ms,
                event: source.ts_ms,
                database: source.db,
                schema_name: source.schema,
                table: source.table,
                ..MessageFacts::default()
            })?;
        }
        let Some(op) = envelope.op else {
            if envelope.payload.is_some() {
                return Err(malformed(
                    "the message has a 'payload' and no 'op': it includes its schema, so set \
                     'debezium-json.schema-include' = 'true'"
                        .into(),
                ));
            }
            return Err(malformed("the message has no 'op'".into()));
        };
        let image = |value, which| required_image(value, which, &op);
        match op.as_ref() {
            "c" | "r" => rows.push(Op::Insert, image(envelope.after, "after")?),
            "u" => {
                rows.push(Op::UpdateBefore, image(envelope.before, "before")?)?;
                rows.push(Op::UpdateAfter, image(envelope.after, "after")?)
            }
            "d" => rows.push(Op::Delete, image(envelope.before, "before")?),
            other => Err(malformed(format!(
                "unknown \"op\" value \"{}\" (Debezium writes c, r, u and d)",
                excerpt(other)
            ))),
        }
    }
}

/// The row image `which` (`before` or `after`) of an event with `op`, which needs it.
fn required_image<'a>(
    value: Option<&'a RawValue>,
    which: &str,
    op: &str,
) -> Result<&'a RawValue, ArrowError> {
    match value {
        Some(v) => Ok(v),
        None if which == "before" => Err(malformed(format!(
            "the \"before\" field of {} message is null: a PostgreSQL table read by \
             Debezium must have REPLICA IDENTITY FULL for its updates and deletes to be \
             retracted (ALTER TABLE ... REPLICA IDENTITY FULL)",
            if op == "u" { "UPDATE" } else { "DELETE" }
        ))),
        None => Err(malformed(format!("op '{op}' without an \"{which}\" row"))),
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
    fn every_op_becomes_its_row_kinds_and_tombstones_nothing() {
        let lines = concat!(
            r#"{"before":null,"after":{"id":1,"name":"a"},"op":"r","source":{"db":"x"},"ts_ms":1}"#,
            "\n",
            r#"{"before":null,"after":{"id":2,"name":"b"},"op":"c"}"#,
            "\n\n",
            r#"{"before":{"id":1,"name":"a"},"after":{"id":1,"name":"A"},"op":"u"}"#,
            "\nnull\n",
            r#"{"before":{"id":2,"name":"b"},"after":null,"op":"d"}"#,
        );
        let chunk = DebeziumJson::default()
            .decode(&schema(), lines.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(
            chunk.to_pretty(),
            ["+I 1 a", "+I 2 b", "-U 1 a", "+U 1 A", "-D 2 b"]
        );
    }

    #[test]
    fn the_schema_part_is_read_only_when_declared() {
        let line = r#"{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":7,"name":"s"},"op":"c"}}"#;
        let with = DebeziumJson {
            schema_include: true,
        };
        let chunk = with.decode(&schema(), line.as_bytes()).unwrap().unwrap();
        assert_eq!(chunk.to_pretty(), ["+I 7 s"]);
        let error = DebeziumJson::default()
            .decode(&schema(), line.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("schema-include' = 'true'"), "{error}");
        let plain = r#"{"before":null,"after":{"id":7,"name":"s"},"op":"c"}"#;
        let error = with.decode(&schema(), plain.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("no 'payload'"), "{error}");
    }

    #[test]
    fn malformed_envelopes_are_errors_that_say_what_is_wrong() {
        super::super::assert_refused(
            |m| DebeziumJson::default().decode(&schema(), m),
            &[
                (
                    r#"{"before":null,"after":{"id":1},"op":"x"}"#,
                    "unknown \"op\" value \"x\"",
                ),
                (
                    r#"{"before":null,"after":{"id":1},"op":"u"}"#,
                    "REPLICA IDENTITY FULL",
                ),
                (
                    r#"{"before":null,"after":null,"op":"d"}"#,
                    "DELETE message is null",
                ),
                (
                    r#"{"before":null,"after":null,"op":"c"}"#,
                    "without an \"after\" row",
                ),
                (r#"{"before":null,"after":{"id":1}}"#, "no 'op'"),
                (
                    r#"{"before":null,"after":[1,2],"op":"c"}"#,
                    "must be a JSON object",
                ),
                (r#"{"op":"c","after":{"id":"x1"}}"#, ""),
                (r#"[1,2,3]"#, "not a Debezium JSON message"),
                (r#"{"op":"c","op":"d","after":{"id":1}}"#, "duplicate field"),
            ],
        );
    }
}
