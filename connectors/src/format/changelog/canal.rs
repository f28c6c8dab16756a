//! `canal-json`: Canal's change messages. A message holds the rows one statement changed
//! (`data`, an array): `INSERT` rows are `+I`, `DELETE` rows `-D`, and each `UPDATE` row is
//! `-U` of its before-image then `+U` of `data`, the before-image being `data` with the
//! changed columns' old values from `old`. `CREATE` (a DDL event) carries no rows; other
//! types are errors. `canal-json.database.include` and `canal-json.table.include` keep only
//! messages whose `database` / `table` match the regular expression (whole names).

use std::borrow::Cow;

use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use eddy_common::chunk::Op;
use regex::Regex;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::facts::{MessageFacts, json_text};
use super::{ChangeFormat, ChangeRows, JsonObject, excerpt, malformed, parse_envelope};
use crate::Options;

/// The option keys of `canal-json`.
pub const KEYS: &[&str] = &[
    "canal-json.ignore-parse-errors",
    "canal-json.timestamp-format.standard",
    "canal-json.database.include",
    "canal-json.table.include",
];

/// The `canal-json` format, as its options set it.
#[derive(Debug, Clone, Default)]
pub struct CanalJson {
    database: Option<Regex>,
    table: Option<Regex>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    data: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    old: Option<Vec<&'a RawValue>>,
    #[serde(rename = "type", default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    database: Option<&'a RawValue>,
    #[serde(borrow, default)]
    table: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ts: Option<&'a RawValue>,
    #[serde(borrow, default)]
    es: Option<&'a RawValue>,
}

impl CanalJson {
    /// The format the `canal-json.*` options describe.
    pub fn from_options(options: &Options<'_>) -> eddy_common::Result<Self> {
        super::validate_common(options, "canal-json")?;
        let pattern = |key: &str| -> eddy_common::Result<Option<Regex>> {
            options
                .get(key)
                .map(|p| {
                    Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                        options.error(format!(
                            "option '{key}' = '{p}' is not a regular expression: {e}"
                        ))
                    })
                })
                .transpose()
        };
        Ok(CanalJson {
            database: pattern("canal-json.database.include")?,
            table: pattern("canal-json.table.include")?,
        })
    }
}

impl ChangeFormat for CanalJson {
    fn push_message(
        &self,
        schema: &SchemaRef,
        message: &[u8],
        rows: &mut ChangeRows,
    ) -> Result<(), ArrowError> {
        let envelope: Envelope<'_> = parse_envelope("Canal", message)?;
        for (filter, value, what) in [
            (&self.database, &envelope.database, "database"),
            (&self.table, &envelope.table, "table"),
        ] {
            if let Some(filter) = filter {
                let Some(value) = json_text(*value) else {
                    return Err(malformed(format!(
                        "the message has no '{what}' to match 'canal-json.{what}.include'"
                    )));
                };
                if !filter.is_match(&value) {
                    return Ok(());
                }
            }
        }
        rows.state_facts(&MessageFacts {
            ingestion: envelope.ts,
            event: envelope.es,
            database: envelope.database,
            table: envelope.table,
            ..MessageFacts::default()
        })?;
        let kind = envelope
            .kind
            .ok_or_else(|| malformed("the message has no 'type'".into()))?;
        let data = || {
            envelope
                .data
                .as_deref()
                .ok_or_else(|| malformed(format!("a {kind} message without 'data'")))
        };
        match kind.as_ref() {
            "INSERT" => data()?
                .iter()
                .try_for_each(|row| rows.push(Op::Insert, row)),
            "DELETE" => data()?
                .iter()
                .try_for_each(|row| rows.push(Op::Delete, row)),
            "UPDATE" => {
                let data = data()?;
                let old = envelope.old.as_deref().unwrap_or_default();
                if old.len() < data.len() {
                    return Err(malformed(format!(
                        "an UPDATE message with {} rows in 'data' but {} in 'old'",
                        data.len(),
                        old.len()
                    )));
                }
                let old = old
                    .iter()
                    .map(|o| JsonObject::parse(o, "old"))
                    .collect::<Result<Vec<_>, _>>()?;
                data.iter()
                    .zip(&old)
                    .try_for_each(|(after, before)| rows.push_update(schema, before, after))
            }
            // A DDL event: no rows.
            "CREATE" => Ok(()),
            other => Err(malformed(format!(
                "unknown \"type\" value \"{}\" (Canal's rows are INSERT, UPDATE, DELETE)",
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
            Field::new("weight", DataType::Float64, true),
        ]))
    }

    #[test]
    fn statements_become_rows_and_updates_merge_the_old_values() {
        // Canal writes every value as a string.
        let lines = concat!(
            r#"{"data":[{"id":"1","weight":"1.5"},{"id":"2","weight":"2.5"}],"old":null,"type":"INSERT","database":"db","table":"t","isDdl":false}"#,
            "\n",
            r#"{"data":[{"id":"1","weight":"9.5"}],"old":[{"weight":"1.5"}],"type":"UPDATE","database":"db","table":"t"}"#,
            "\n",
            r#"{"data":null,"type":"CREATE","database":"db","table":"t","isDdl":true,"sql":"CREATE TABLE t"}"#,
            "\n",
            r#"{"data":[{"id":"2","weight":"2.5"}],"old":null,"type":"DELETE","database":"db","table":"t"}"#,
        );
        let chunk = CanalJson::default()
            .decode(&schema(), lines.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(
            chunk.to_pretty(),
            ["+I 1 1.5", "+I 2 2.5", "-U 1 1.5", "+U 1 9.5", "-D 2 2.5"]
        );
    }

    #[test]
    fn each_row_of_an_update_takes_its_own_old_values() {
        // Row 2's weight did not change: its before-image is its after-image (Flink would
        // read it as NULL, since row 1's old values hold a weight).
        let line = r#"{"data":[{"id":"1","weight":"3"},{"id":"2","weight":"4"}],"old":[{"weight":"1"},{}],"type":"UPDATE"}"#;
        let chunk = CanalJson::default()
            .decode(&schema(), line.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(
            chunk.to_pretty(),
            ["-U 1 1.0", "+U 1 3.0", "-U 2 4.0", "+U 2 4.0"]
        );
    }

    #[test]
    fn include_patterns_keep_matching_messages_only() {
        let options = std::collections::BTreeMap::from([(
            "canal-json.table.include".to_string(),
            "orders|items".to_string(),
        )]);
        let options = Options::validate("t", "filesystem", &options, KEYS, &[]).unwrap();
        let format = CanalJson::from_options(&options).unwrap();
        let lines = concat!(
            r#"{"data":[{"id":"1"}],"type":"INSERT","table":"orders"}"#,
            "\n",
            r#"{"data":[{"id":"2"}],"type":"INSERT","table":"orders_archive"}"#,
            "\n",
            r#"{"data":[{"id":"3"}],"type":"INSERT","table":"items"}"#,
        );
        let chunk = format.decode(&schema(), lines.as_bytes()).unwrap().unwrap();
        assert_eq!(chunk.to_pretty(), ["+I 1 .", "+I 3 ."]);
        let error = format
            .decode(&schema(), br#"{"data":[{"id":"1"}],"type":"INSERT"}"#)
            .unwrap_err();
        assert!(error.to_string().contains("no 'table'"), "{error}");
    }

    #[test]
    fn malformed_messages_are_errors_that_say_what_is_wrong() {
        super::super::assert_refused(
            |m| CanalJson::default().decode(&schema(), m),
            &[
                (
                    r#"{"data":[{"id":"1"}],"type":"ALTER"}"#,
                    "unknown \"type\" value \"ALTER\"",
                ),
                (
                    r#"{"data":null,"type":"INSERT"}"#,
                    "INSERT message without 'data'",
                ),
                (
                    r#"{"data":[{"id":"1"}],"type":"UPDATE"}"#,
                    "1 rows in 'data' but 0 in 'old'",
                ),
                (
                    r#"{"data":[{"id":"1"}],"old":[5],"type":"UPDATE"}"#,
                    "'old' must be a JSON object",
                ),
                (r#"{"data":[{"id":"1"}]}"#, "no 'type'"),
                (
                    r#"{"data":{"id":"1"},"type":"INSERT"}"#,
                    "not a Canal JSON message",
                ),
            ],
        );
    }
}
