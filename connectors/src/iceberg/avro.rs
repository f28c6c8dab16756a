//! Avro container files of Iceberg's metadata (manifests and manifest lists): records
//! as [`Value`] trees, encoded and decoded by a schema parsed from its JSON.
//!
//! The data of a table goes through Arrow; these files are a few records each, whose
//! schemas carry Iceberg's `field-id` attributes, which readers (pyiceberg, Java) need in
//! the file's header: the schema is written exactly as given.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::IcebergError;

/// A decoded Avro datum.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean(bool),
    /// `int` (and the int logical types).
    Int(i32),
    /// `long` (and the long logical types).
    Long(i64),
    /// `float`.
    Float(f32),
    /// `double`.
    Double(f64),
    /// `bytes` or `fixed`.
    Bytes(Vec<u8>),
    /// `string`, or an `enum` symbol.
    String(String),
    /// A record's fields by name, in the schema's order.
    Record(Vec<(String, Value)>),
    /// `array`.
    Array(Vec<Value>),
    /// `map`.
    Map(Vec<(String, Value)>),
}

impl Value {
    /// A field of a record, `None` when absent or not a record.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as a long (an int widened), if it is one.
    pub fn as_long(&self) -> Option<i64> {
        match self {
            Value::Long(v) => Some(*v),
            Value::Int(v) => Some((*v).into()),
            _ => None,
        }
    }
}

/// An Avro schema, named types resolved.
#[derive(Debug, Clone)]
pub enum Schema {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Vec<String>),
    Record(Vec<(String, Schema)>),
    Array(Box<Schema>),
    Map(Box<Schema>),
    Union(Vec<Schema>),
}

impl Schema {
    /// Parses a schema's JSON.
    pub fn parse(json: &Json) -> Result<Schema, IcebergError> {
        parse_schema(json, &mut HashMap::new())
    }
}

fn invalid_schema(what: impl std::fmt::Display) -> IcebergError {
    IcebergError::Metadata(format!("invalid Avro schema: {what}"))
}

fn parse_schema(json: &Json, named: &mut HashMap<String, Schema>) -> Result<Schema, IcebergError> {
    match json {
        Json::String(name) => primitive(name)
            .or_else(|| named.get(name.as_str()).cloned())
            .ok_or_else(|| invalid_schema(format!("unknown type '{name}'"))),
        Json::Array(branches) => Ok(Schema::Union(
            branches
                .iter()
                .map(|b| parse_schema(b, named))
                .collect::<Result<_, _>>()?,
        )),
        Json::Object(object) => {
            let kind = object
                .get("type")
                .ok_or_else(|| invalid_schema("a type without 'type'"))?;
            let Json::String(kind) = kind else {
                return parse_schema(kind, named);
            };
            let schema = match kind.as_str() {
                "record" | "error" => {
                    let fields = object
                        .get("fields")
                        .and_then(Json::as_array)
                        .ok_or_else(|| invalid_schema("a record without 'fields'"))?;
                    let mut parsed = Vec::with_capacity(fields.len());
                    for field in fields {
                        let name = field
                            .get("name")
                            .and_then(Json::as_str)
                            .ok_or_else(|| invalid_schema("a field without 'name'"))?;
                        let field_type = field
                            .get("type")
                            .ok_or_else(|| invalid_schema(format!("field '{name}' has no type")))?;
                        parsed.push((name.to_string(), parse_schema(field_type, named)?));
                    }
                    Schema::Record(parsed)
                }
                "array" => Schema::Array(Box::new(parse_schema(
                    object
                        .get("items")
                        .ok_or_else(|| invalid_schema("an array without 'items'"))?,
                    named,
                )?)),
                "map" => Schema::Map(Box::new(parse_schema(
                    object
                        .get("values")
                        .ok_or_else(|| invalid_schema("a map without 'values'"))?,
                    named,
                )?)),
                "fixed" => Schema::Fixed(
                    object
                        .get("size")
                        .and_then(Json::as_u64)
                        .ok_or_else(|| invalid_schema("a fixed without 'size'"))?
                        as usize,
                ),
                "enum" => Schema::Enum(
                    object
                        .get("symbols")
                        .and_then(Json::as_array)
                        .ok_or_else(|| invalid_schema("an enum without 'symbols'"))?
                        .iter()
                        .map(|s| s.as_str().unwrap_or_default().to_string())
                        .collect(),
                ),
                other => primitive(other)
                    .ok_or_else(|| invalid_schema(format!("unknown type '{other}'")))?,
            };
            if let Some(name) = object.get("name").and_then(Json::as_str) {
                let full = match object.get("namespace").and_then(Json::as_str) {
                    Some(namespace) if !name.contains('.') => format!("{namespace}.{name}"),
                    _ => name.to_string(),
                };
                let short = full.rsplit('.').next().unwrap_or(&full).to_string();
                named.insert(full, schema.clone());
                named.entry(short).or_insert_with(|| schema.clone());
            }
            Ok(schema)
        }
        other => Err(invalid_schema(format!("unexpected {other}"))),
    }
}

fn primitive(name: &str) -> Option<Schema> {
    Some(match name {
        "null" => Schema::Null,
        "boolean" => Schema::Boolean,
        "int" => Schema::Int,
        "long" => Schema::Long,
        "float" => Schema::Float,
        "double" => Schema::Double,
        "bytes" => Schema::Bytes,
        "string" => Schema::String,
        _ => return None,
    })
}

/// Appends `value` encoded as `schema` says. A record's fields are taken by name; a field
/// the value lacks is written as null (its union's null branch).
pub fn encode(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<(), IcebergError> {
    match (schema, value) {
        (Schema::Null, Value::Null) => {}
        (Schema::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
        (Schema::Int, Value::Int(v)) => write_long(out, (*v).into()),
        (Schema::Long, v) if v.as_long().is_some() => write_long(out, v.as_long().unwrap_or(0)),
        (Schema::Float, Value::Float(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Schema::Double, Value::Double(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Schema::Bytes, Value::Bytes(b)) => write_bytes(out, b),
        (Schema::String, Value::String(s)) => write_bytes(out, s.as_bytes()),
        (Schema::Fixed(size), Value::Bytes(b)) if b.len() == *size => out.extend_from_slice(b),
        (Schema::Enum(symbols), Value::String(s)) => {
            let index = symbols
                .iter()
                .position(|symbol| symbol == s)
                .ok_or_else(|| invalid_value(schema, value))?;
            write_long(out, index as i64);
        }
        (Schema::Record(fields), Value::Record(_)) => {
            for (name, field_schema) in fields {
                let field = value.field(name).unwrap_or(&Value::Null);
                encode(field_schema, field, out)?;
            }
        }
        (Schema::Array(items), Value::Array(values)) => {
            if !values.is_empty() {
                write_long(out, values.len() as i64);
                for item in values {
                    encode(items, item, out)?;
                }
            }
            write_long(out, 0);
        }
        (Schema::Map(values_schema), Value::Map(entries)) => {
            if !entries.is_empty() {
                write_long(out, entries.len() as i64);
                for (key, item) in entries {
                    write_bytes(out, key.as_bytes());
                    encode(values_schema, item, out)?;
                }
            }
            write_long(out, 0);
        }
        (Schema::Union(branches), value) => {
            let branch = branches
                .iter()
                .position(|b| {
                    matches!(b, Schema::Null) == (*value == Value::Null) && fits(b, value)
                })
                .ok_or_else(|| invalid_value(schema, value))?;
            write_long(out, branch as i64);
            encode(&branches[branch], value, out)?;
        }
        _ => return Err(invalid_value(schema, value)),
    }
    Ok(())
}

/// Whether `value` can be written as `schema` (shallowly: a union picks its branch so).
fn fits(schema: &Schema, value: &Value) -> bool {
    matches!(
        (schema, value),
        (Schema::Null, Value::Null)
            | (Schema::Boolean, Value::Boolean(_))
            | (Schema::Int, Value::Int(_))
            | (Schema::Long, Value::Long(_) | Value::Int(_))
            | (Schema::Float, Value::Float(_))
            | (Schema::Double, Value::Double(_))
            | (Schema::Bytes | Schema::Fixed(_), Value::Bytes(_))
            | (Schema::String | Schema::Enum(_), Value::String(_))
            | (Schema::Record(_), Value::Record(_))
            | (Schema::Array(_), Value::Array(_))
            | (Schema::Map(_), Value::Map(_))
    )
}

fn invalid_value(schema: &Schema, value: &Value) -> IcebergError {
    IcebergError::Metadata(format!("cannot write {value:?} as Avro {schema:?}"))
}

fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}

/// Reads Avro's binary encoding from a byte slice.
struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
    file: &'a str,
}

impl Decoder<'_> {
    fn truncated(&self) -> IcebergError {
        IcebergError::Unreadable {
            file: self.file.to_string(),
            message: format!("Avro data cut short at byte {}", self.at),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], IcebergError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| self.truncated())?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn long(&mut self) -> Result<i64, IcebergError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(IcebergError::Unreadable {
            file: self.file.to_string(),
            message: format!("an Avro varint longer than 10 bytes at byte {}", self.at),
        })
    }

    fn length(&mut self) -> Result<usize, IcebergError> {
        let length = self.long()?;
        usize::try_from(length)
            .ok()
            .filter(|n| *n <= self.bytes.len() - self.at)
            .ok_or_else(|| self.truncated())
    }

    fn bytes(&mut self) -> Result<Vec<u8>, IcebergError> {
        let length = self.length()?;
        Ok(self.take(length)?.to_vec())
    }

    fn string(&mut self) -> Result<String, IcebergError> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes).map_err(|_| IcebergError::Unreadable {
            file: self.file.to_string(),
            message: format!("an Avro string that is not UTF-8 before byte {}", self.at),
        })
    }

    /// A block count of an array or map (a negative count is followed by a byte size).
    fn block_count(&mut self) -> Result<usize, IcebergError> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
        }
        usize::try_from(count.unsigned_abs())
            .ok()
            .filter(|n| *n <= self.bytes.len() - self.at)
            .ok_or_else(|| self.truncated())
    }

    fn value(&mut self, schema: &Schema) -> Result<Value, IcebergError> {
        Ok(match schema {
            Schema::Null => Value::Null,
            Schema::Boolean => Value::Boolean(self.take(1)?[0] != 0),
            Schema::Int => Value::Int(self.long()? as i32),
            Schema::Long => Value::Long(self.long()?),
            Schema::Float => Value::Float(f32::from_le_bytes(
                self.take(4)?.try_into().unwrap_or_default(),
            )),
            Schema::Double => Value::Double(f64::from_le_bytes(
                self.take(8)?.try_into().unwrap_or_default(),
            )),
            Schema::Bytes => Value::Bytes(self.bytes()?),
            Schema::String => Value::String(self.string()?),
            Schema::Fixed(size) => Value::Bytes(self.take(*size)?.to_vec()),
            Schema::Enum(symbols) => {
                let index = self.long()?;
                let symbol = usize::try_from(index).ok().and_then(|i| symbols.get(i));
                Value::String(symbol.ok_or_else(|| self.truncated())?.clone())
            }
            Schema::Record(fields) => Value::Record(
                fields
                    .iter()
                    .map(|(name, field)| Ok((name.clone(), self.value(field)?)))
                    .collect::<Result<_, IcebergError>>()?,
            ),
            Schema::Array(items) => {
                let mut values = Vec::new();
                loop {
                    let count = self.block_count()?;
                    if count == 0 {
                        break Value::Array(values);
                    }
                    for _ in 0..count {
                        values.push(self.value(items)?);
                    }
                }
            }
            Schema::Map(values_schema) => {
                let mut entries = Vec::new();
                loop {
                    let count = self.block_count()?;
                    if count == 0 {
                        break Value::Map(entries);
                    }
                    for _ in 0..count {
                        let key = self.string()?;
                        entries.push((key, self.value(values_schema)?));
                    }
                }
            }
            Schema::Union(branches) => {
                let index = self.long()?;
                let branch = usize::try_from(index).ok().and_then(|i| branches.get(i));
                self.value(branch.ok_or_else(|| self.truncated())?)?
            }
        })
    }
}

const MAGIC: &[u8; 4] = b"Obj\x01";

/// Writes an Avro container file: `schema` (its JSON written as given) and `metadata` in
/// the header, then `records` in one uncompressed block.
pub fn write_container(
    schema_json: &str,
    metadata: &[(&str, String)],
    records: &[Value],
) -> Result<Vec<u8>, IcebergError> {
    let schema: Json = serde_json::from_str(schema_json)
        .map_err(|e| invalid_schema(format!("{e} in {schema_json}")))?;
    let schema = Schema::parse(&schema)?;
    let mut out = MAGIC.to_vec();
    let mut header: Vec<(&str, &[u8])> = vec![
        ("avro.schema", schema_json.as_bytes()),
        ("avro.codec", b"null"),
    ];
    header.extend(metadata.iter().map(|(k, v)| (*k, v.as_bytes())));
    write_long(&mut out, header.len() as i64);
    for (key, value) in header {
        write_bytes(&mut out, key.as_bytes());
        write_bytes(&mut out, value);
    }
    write_long(&mut out, 0);
    let sync: [u8; 16] = *uuid::Uuid::new_v4().as_bytes();
    out.extend_from_slice(&sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        for record in records {
            encode(&schema, record, &mut block)?;
        }
        write_long(&mut out, records.len() as i64);
        write_bytes(&mut out, &block);
        out.extend_from_slice(&sync);
    }
    Ok(out)
}

/// An Avro container file read whole: its header's metadata and its records.
#[derive(Debug)]
pub struct Container {
    /// The header's metadata (besides the schema and codec).
    pub metadata: HashMap<String, Vec<u8>>,
    /// The records.
    pub records: Vec<Value>,
}

/// Reads an Avro container file (codec null, deflate, snappy or zstandard); `file` names
/// it in errors.
pub fn read_container(bytes: &[u8], file: &str) -> Result<Container, IcebergError> {
    let unreadable = |message: String| IcebergError::Unreadable {
        file: file.to_string(),
        message,
    };
    if !bytes.starts_with(MAGIC) {
        return Err(unreadable("not an Avro container file".into()));
    }
    let mut decoder = Decoder {
        bytes,
        at: MAGIC.len(),
        file,
    };
    let Value::Map(header) = decoder.value(&Schema::Map(Box::new(Schema::Bytes)))? else {
        return Err(unreadable("a header that is not a map".into()));
    };
    let mut metadata: HashMap<String, Vec<u8>> = header
        .into_iter()
        .filter_map(|(k, v)| match v {
            Value::Bytes(b) => Some((k, b)),
            _ => None,
        })
        .collect();
    let schema_json = metadata
        .remove("avro.schema")
        .ok_or_else(|| unreadable("no avro.schema in the header".into()))?;
    let schema: Json = serde_json::from_slice(&schema_json)
        .map_err(|e| unreadable(format!("the header's schema: {e}")))?;
    let schema = Schema::parse(&schema)?;
    let codec = metadata
        .remove("avro.codec")
        .unwrap_or_else(|| b"null".to_vec());
    let sync = decoder.take(16)?.to_vec();
    let mut records = Vec::new();
    while decoder.at < bytes.len() {
        let count = decoder.long()?;
        let block = decoder.bytes()?;
        if decoder.take(16)? != sync.as_slice() {
            return Err(unreadable(format!(
                "a bad sync marker before byte {}",
                decoder.at
            )));
        }
        let block = decompress(&codec, block).map_err(&unreadable)?;
        let mut inner = Decoder {
            bytes: &block,
            at: 0,
            file,
        };
        for _ in 0..count {
            records.push(inner.value(&schema)?);
        }
    }
    Ok(Container { metadata, records })
}

fn decompress(codec: &[u8], block: Vec<u8>) -> Result<Vec<u8>, String> {
    use std::io::Read;
    match codec {
        b"null" => Ok(block),
        b"deflate" => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(block.as_slice())
                .read_to_end(&mut out)
                .map_err(|e| format!("a deflate block: {e}"))?;
            Ok(out)
        }
        b"snappy" => {
            // Snappy blocks end with the uncompressed data's CRC-32.
            let body = &block[..block.len().saturating_sub(4)];
            snap::raw::Decoder::new()
                .decompress_vec(body)
                .map_err(|e| format!("a snappy block: {e}"))
        }
        b"zstandard" => zstd::stream::decode_all(block.as_slice())
            .map_err(|e| format!("a zstandard block: {e}")),
        other => Err(format!(
            "Avro codec '{}' is not supported",
            String::from_utf8_lossy(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "path", "type": "string", "field-id": 500},
        {"name": "count", "type": ["null", "long"], "field-id": 501},
        {"name": "parts", "type": ["null", {"type": "array", "items":
            {"type": "record", "name": "p", "fields": [
                {"name": "flag", "type": "boolean"},
                {"name": "low", "type": ["null", "bytes"]}]}}]},
        {"name": "sizes", "type": {"type": "map", "values": "long"}}]}"#;

    fn record(path: &str, count: Option<i64>) -> Value {
        Value::Record(vec![
            ("path".into(), Value::String(path.into())),
            ("count".into(), count.map_or(Value::Null, Value::Long)),
            (
                "parts".into(),
                Value::Array(vec![Value::Record(vec![
                    ("flag".into(), Value::Boolean(true)),
                    ("low".into(), Value::Bytes(vec![1, 2])),
                ])]),
            ),
            (
                "sizes".into(),
                Value::Map(vec![("1".into(), Value::Long(-7))]),
            ),
        ])
    }

    #[test]
    fn a_container_file_reads_back_its_records_and_metadata() {
        let records = vec![record("a", Some(300)), record("b", None)];
        let bytes = write_container(SCHEMA, &[("format-version", "2".into())], &records).unwrap();
        let read = read_container(&bytes, "m.avro").unwrap();
        assert_eq!(read.records, records);
        assert_eq!(read.metadata["format-version"], b"2");
        // A field the record lacks is written as null.
        let partial = Value::Record(vec![
            ("path".into(), Value::String("c".into())),
            ("parts".into(), Value::Null),
            ("sizes".into(), Value::Map(vec![])),
        ]);
        let bytes = write_container(SCHEMA, &[], std::slice::from_ref(&partial)).unwrap();
        let read = read_container(&bytes, "m.avro").unwrap();
        assert_eq!(read.records[0].field("count"), Some(&Value::Null));
    }

    #[test]
    fn a_cut_or_corrupt_file_is_an_error_naming_it() {
        let bytes = write_container(SCHEMA, &[], &[record("a", Some(1))]).unwrap();
        for cut in [3, 20, bytes.len() - 20, bytes.len() - 1] {
            let error = read_container(&bytes[..cut], "snap-1.avro").unwrap_err();
            assert!(error.to_string().contains("snap-1.avro"), "{error}");
        }
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(
            read_container(&corrupt, "x")
                .unwrap_err()
                .to_string()
                .contains("sync")
        );
    }
}
