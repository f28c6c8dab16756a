//! Format metadata: what a change message states besides its rows — the database and table
//! the change was made in, when it was made and when the capture tool wrote it — read into
//! `METADATA FROM 'value.<key>'` columns with Flink's keys and types.
//!
//! A format hands each message's facts over as raw JSON ([`MessageFacts`]); they are
//! converted only for the columns a table declares ([`FactColumns`]), one value a message,
//! as Flink converts them: text as the `STRING` type reads JSON (a string's content, any
//! other value's JSON text), times as whole milliseconds (or text holding them) read as
//! `TIMESTAMP_LTZ(3)`.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{ArrayBuilder, ArrayRef, StringBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use serde_json::value::RawValue;

use super::{excerpt, malformed};

/// A fact a change message may state, read into a metadata column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// Debezium's `schema` part, as JSON text.
    Schema,
    /// When the capture tool wrote the change (`ts_ms`; Canal's and Maxwell's `ts`).
    IngestionTime,
    /// When the change was made in the database (Debezium's `source.ts_ms`, Canal's `es`).
    EventTime,
    /// The database (Debezium's `source.db`; Canal's and Maxwell's `database`).
    Database,
    /// The schema (Debezium's `source.schema`).
    SchemaName,
    /// The table (Debezium's `source.table`; Canal's and Maxwell's `table`).
    Table,
}

/// How many facts there are.
const FACTS: usize = 6;

impl Fact {
    /// The type of the fact's column.
    pub fn data_type(self) -> DataType {
        match self {
            Fact::IngestionTime | Fact::EventTime => crate::metadata::timestamp_ltz(),
            _ => DataType::Utf8,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A format's metadata key: the fact it reads, or, for a key Flink offers whose type Eddy's
/// columns cannot hold, that type's name.
#[derive(Debug, Clone, Copy)]
pub struct FactKey {
    /// The key, as Flink names it (`source.table`).
    pub key: &'static str,
    /// The fact read, or the SQL type that Eddy has no columns of.
    pub reads: Result<Fact, &'static str>,
}

const fn key(key: &'static str, fact: Fact) -> FactKey {
    FactKey {
        key,
        reads: Ok(fact),
    }
}

const fn unsupported(key: &'static str, sql_type: &'static str) -> FactKey {
    FactKey {
        key,
        reads: Err(sql_type),
    }
}

/// `debezium-json`'s metadata keys.
pub const DEBEZIUM: &[FactKey] = &[
    key("schema", Fact::Schema),
    key("ingestion-timestamp", Fact::IngestionTime),
    key("source.timestamp", Fact::EventTime),
    key("source.database", Fact::Database),
    key("source.schema", Fact::SchemaName),
    key("source.table", Fact::Table),
    unsupported("source.properties", "MAP<STRING, STRING>"),
];

/// `canal-json`'s metadata keys.
pub const CANAL: &[FactKey] = &[
    key("database", Fact::Database),
    key("table", Fact::Table),
    unsupported("sql-type", "MAP<STRING, INT>"),
    unsupported("pk-names", "ARRAY<STRING>"),
    key("ingestion-timestamp", Fact::IngestionTime),
    key("event-timestamp", Fact::EventTime),
];

/// `maxwell-json`'s metadata keys.
pub const MAXWELL: &[FactKey] = &[
    key("database", Fact::Database),
    key("table", Fact::Table),
    unsupported("primary-key-columns", "ARRAY<STRING>"),
    key("ingestion-timestamp", Fact::IngestionTime),
];

/// What one message states, as raw JSON, converted only when a column asks for it.
#[derive(Debug, Default)]
pub(crate) struct MessageFacts<'a> {
    pub schema: Option<&'a RawValue>,
    pub ingestion: Option<&'a RawValue>,
    /// `ingestion` is in seconds, not milliseconds (Maxwell's `ts`).
    pub ingestion_in_seconds: bool,
    pub event: Option<&'a RawValue>,
    pub database: Option<&'a RawValue>,
    pub schema_name: Option<&'a RawValue>,
    pub table: Option<&'a RawValue>,
}

impl<'a> MessageFacts<'a> {
    fn raw(&self, fact: Fact) -> Option<&'a RawValue> {
        match fact {
            Fact::Schema => self.schema,
            Fact::IngestionTime => self.ingestion,
            Fact::EventTime => self.event,
            Fact::Database => self.database,
            Fact::SchemaName => self.schema_name,
            Fact::Table => self.table,
        }
    }

    /// The fact as milliseconds since the epoch, if stated.
    fn millis(&self, fact: Fact) -> Result<Option<i64>, ArrowError> {
        let Some(millis) = whole_number(self.raw(fact))? else {
            return Ok(None);
        };
        match fact == Fact::IngestionTime && self.ingestion_in_seconds {
            true => millis
                .checked_mul(1000)
                .map(Some)
                .ok_or_else(|| malformed(format!("'ts' {millis} is out of range"))),
            false => Ok(Some(millis)),
        }
    }
}

/// A JSON value as the `STRING` type reads it: a string's content, `null` as none, any
/// other value as its JSON text without insignificant whitespace.
pub(crate) fn json_text(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let text = raw?.get();
    if text == "null" {
        return None;
    }
    if text.starts_with('"') {
        return serde_json::from_str::<Cow<'_, str>>(text).ok();
    }
    Some(compact(text))
}

/// JSON text without whitespace outside strings.
fn compact(text: &str) -> Cow<'_, str> {
    if !text.bytes().any(|b| b.is_ascii_whitespace()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else if c.is_ascii_whitespace() {
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// A whole number, given as a JSON number or as text holding one (as Flink reads `BIGINT`).
fn whole_number(raw: Option<&RawValue>) -> Result<Option<i64>, ArrowError> {
    let Some(text) = json_text(raw) else {
        return Ok(None);
    };
    text.trim().parse().map(Some).map_err(|_| {
        malformed(format!(
            "a time of the message, {}, is not a whole number of milliseconds",
            excerpt(raw.map_or("", RawValue::get))
        ))
    })
}

/// The columns of the facts a table reads, one value a message.
#[derive(Debug)]
pub(crate) struct FactColumns {
    facts: Vec<Fact>,
    columns: Vec<FactColumn>,
}

#[derive(Debug)]
enum FactColumn {
    Text(StringBuilder),
    Time(TimestampMillisecondBuilder),
}

impl FactColumns {
    /// Columns of `facts`, in order.
    pub fn new(facts: &[Fact]) -> Self {
        let columns = facts
            .iter()
            .map(|fact| match fact.data_type() {
                DataType::Utf8 => FactColumn::Text(StringBuilder::new()),
                _ => FactColumn::Time(TimestampMillisecondBuilder::new().with_timezone("UTC")),
            })
            .collect();
        FactColumns {
            facts: facts.to_vec(),
            columns,
        }
    }

    /// How many messages the columns hold.
    pub fn len(&self) -> usize {
        match self.columns.first() {
            Some(FactColumn::Text(builder)) => builder.len(),
            Some(FactColumn::Time(builder)) => builder.len(),
            None => 0,
        }
    }

    /// Adds a message's facts: all of them, or (on an error) none.
    pub fn push(&mut self, facts: &MessageFacts<'_>) -> Result<(), ArrowError> {
        let mut times = [None; FACTS];
        for fact in &self.facts {
            if fact.data_type() != DataType::Utf8 {
                times[fact.index()] = facts.millis(*fact)?;
            }
        }
        for (fact, column) in self.facts.iter().zip(&mut self.columns) {
            match column {
                FactColumn::Text(builder) => {
                    builder.append_option(json_text(facts.raw(*fact)).as_deref())
                }
                FactColumn::Time(builder) => builder.append_option(times[fact.index()]),
            }
        }
        Ok(())
    }

    /// Adds a message that states nothing (a tombstone, a blank line).
    pub fn push_none(&mut self) {
        for column in &mut self.columns {
            match column {
                FactColumn::Text(builder) => builder.append_null(),
                FactColumn::Time(builder) => builder.append_null(),
            }
        }
    }

    /// The columns, in the order of the facts asked for.
    pub fn finish(self) -> Vec<ArrayRef> {
        self.columns
            .into_iter()
            .map(|column| -> ArrayRef {
                match column {
                    FactColumn::Text(mut builder) => Arc::new(builder.finish()),
                    FactColumn::Time(mut builder) => Arc::new(builder.finish()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::TimestampMillisecondType;
    use arrow::util::display::array_value_to_string;

    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn text_is_read_as_flinks_string_type_reads_json() {
        let cases = [
            (r#""orders""#, Some("orders")),
            (r#""a\"b""#, Some("a\"b")),
            ("null", None),
            ("42", Some("42")),
            (
                r#"{ "a" : [1, 2],  "b": "x y" }"#,
                Some(r#"{"a":[1,2],"b":"x y"}"#),
            ),
            (r#"{"s":"q\" } "}"#, Some(r#"{"s":"q\" } "}"#)),
        ];
        for (json, expected) in cases {
            let value = raw(json);
            assert_eq!(json_text(Some(&value)).as_deref(), expected, "{json}");
        }
    }

    #[test]
    fn times_are_whole_milliseconds_and_maxwell_writes_seconds() {
        let (number, text, bad) = (raw("1700000000123"), raw(r#""17""#), raw("1.5"));
        let facts = MessageFacts {
            ingestion: Some(&number),
            event: Some(&text),
            ..Default::default()
        };
        assert_eq!(
            facts.millis(Fact::IngestionTime).unwrap(),
            Some(1700000000123)
        );
        assert_eq!(facts.millis(Fact::EventTime).unwrap(), Some(17));
        let seconds = MessageFacts {
            ingestion: Some(&text),
            ingestion_in_seconds: true,
            ..Default::default()
        };
        assert_eq!(seconds.millis(Fact::IngestionTime).unwrap(), Some(17_000));
        let error = MessageFacts {
            event: Some(&bad),
            ..Default::default()
        }
        .millis(Fact::EventTime)
        .unwrap_err();
        assert!(
            error.to_string().contains("1.5, is not a whole number"),
            "{error}"
        );
    }

    #[test]
    fn a_message_with_a_bad_time_adds_no_value_to_any_column() {
        let mut columns = FactColumns::new(&[Fact::Table, Fact::EventTime]);
        let (table, bad, good) = (raw(r#""t""#), raw(r#""x""#), raw("5"));
        let broken = MessageFacts {
            table: Some(&table),
            event: Some(&bad),
            ..Default::default()
        };
        assert!(columns.push(&broken).is_err());
        assert_eq!(columns.len(), 0);
        let fine = MessageFacts {
            table: Some(&table),
            event: Some(&good),
            ..Default::default()
        };
        columns.push(&fine).unwrap();
        columns.push_none();
        let arrays = columns.finish();
        assert_eq!(arrays[0].len(), 2);
        assert_eq!(array_value_to_string(&arrays[0], 0).unwrap(), "t");
        assert!(arrays[1].is_null(1));
        let times = arrays[1].as_primitive::<TimestampMillisecondType>();
        assert_eq!(times.value(0), 5);
    }
}
