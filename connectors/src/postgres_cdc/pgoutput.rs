//! Decodes the messages of PostgreSQL's `pgoutput` logical decoding plugin (protocol
//! version 1): transaction bounds, relation descriptions and row changes, with column
//! values in text form. Every read is bounds-checked: a truncated or malformed message is
//! an error naming what was being read, never a panic.

use bytes::{Buf, Bytes};

use super::lsn::Lsn;

/// A column's value in a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// SQL NULL.
    Null,
    /// A TOASTed value the change did not touch: not sent.
    UnchangedToast,
    /// The value's text form.
    Text(Bytes),
}

/// A relation's description, sent before its first change in a session and after each
/// change of its definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relation {
    pub id: u32,
    pub namespace: String,
    pub name: String,
    /// `d` (default: the primary key), `n` (nothing), `f` (full), `i` (an index).
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

/// A column of a [`Relation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelationColumn {
    pub name: String,
    /// Part of the replica identity key.
    pub key: bool,
    pub type_oid: u32,
    pub type_modifier: i32,
}

/// Which image of the old row an update or delete carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OldImage {
    /// The replica identity's key columns only (others are NULL).
    Key,
    /// The whole row (`REPLICA IDENTITY FULL`).
    Full,
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    Begin {
        xid: u32,
        /// When it committed, in microseconds since 2000-01-01 (PostgreSQL's epoch).
        committed_at: i64,
    },
    Commit {
        /// Where the transaction's commit record ends: a stream started here skips it.
        end: Lsn,
    },
    Relation(Relation),
    Insert {
        relation: u32,
        new: Vec<Value>,
    },
    Update {
        relation: u32,
        old: Option<(OldImage, Vec<Value>)>,
        new: Vec<Value>,
    },
    Delete {
        relation: u32,
        old: (OldImage, Vec<Value>),
    },
    Truncate {
        relations: Vec<u32>,
    },
    /// Origins, types and logical messages: nothing a table's changelog needs.
    Other,
}

/// A message that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed pgoutput message: {0}")]
pub(crate) struct DecodeError(String);

/// Decodes one message.
pub(crate) fn decode(mut data: Bytes) -> Result<Message, DecodeError> {
    let input = &mut data;
    let message = match u8_of(input, "message type")? {
        b'B' => {
            skip(input, 8, "BEGIN")?; // final LSN
            let committed_at = u64_of(input, "BEGIN")? as i64;
            Message::Begin {
                committed_at,
                xid: u32_of(input, "BEGIN")?,
            }
        }
        b'C' => {
            skip(input, 9, "COMMIT")?; // flags, commit LSN
            let end = Lsn(u64_of(input, "COMMIT")?);
            skip(input, 8, "COMMIT")?;
            Message::Commit { end }
        }
        b'R' => Message::Relation(relation(input)?),
        b'I' => {
            let relation = u32_of(input, "INSERT")?;
            expect(input, b'N', "INSERT")?;
            Message::Insert {
                relation,
                new: tuple(input)?,
            }
        }
        b'U' => {
            let relation = u32_of(input, "UPDATE")?;
            let old = match u8_of(input, "UPDATE")? {
                b'K' => Some((OldImage::Key, tuple(input)?)),
                b'O' => Some((OldImage::Full, tuple(input)?)),
                b'N' => None,
                other => return Err(bad(format!("UPDATE with tuple kind {other}"))),
            };
            if old.is_some() {
                expect(input, b'N', "UPDATE")?;
            }
            Message::Update {
                relation,
                old,
                new: tuple(input)?,
            }
        }
        b'D' => {
            let relation = u32_of(input, "DELETE")?;
            let image = match u8_of(input, "DELETE")? {
                b'K' => OldImage::Key,
                b'O' => OldImage::Full,
                other => return Err(bad(format!("DELETE with tuple kind {other}"))),
            };
            Message::Delete {
                relation,
                old: (image, tuple(input)?),
            }
        }
        b'T' => {
            let count = u32_of(input, "TRUNCATE")?;
            skip(input, 1, "TRUNCATE")?;
            let relations = (0..count)
                .map(|_| u32_of(input, "TRUNCATE"))
                .collect::<Result<_, _>>()?;
            Message::Truncate { relations }
        }
        b'O' | b'Y' | b'M' => return Ok(Message::Other),
        other => return Err(bad(format!("unknown message type {other}"))),
    };
    match input.has_remaining() {
        true => Err(bad(format!("{} bytes after a message", input.remaining()))),
        false => Ok(message),
    }
}

fn relation(input: &mut Bytes) -> Result<Relation, DecodeError> {
    let id = u32_of(input, "RELATION")?;
    let namespace = cstring(input)?;
    let name = cstring(input)?;
    let replica_identity = u8_of(input, "RELATION")?;
    let count = u16_of(input, "RELATION")?;
    let columns = (0..count)
        .map(|_| {
            let flags = u8_of(input, "RELATION column")?;
            Ok(RelationColumn {
                name: cstring(input)?,
                key: flags & 1 == 1,
                type_oid: u32_of(input, "RELATION column")?,
                type_modifier: u32_of(input, "RELATION column")? as i32,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(Relation {
        id,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn tuple(input: &mut Bytes) -> Result<Vec<Value>, DecodeError> {
    let count = u16_of(input, "tuple")?;
    (0..count)
        .map(|_| match u8_of(input, "tuple column")? {
            b'n' => Ok(Value::Null),
            b'u' => Ok(Value::UnchangedToast),
            b't' => {
                let length = u32_of(input, "tuple value")? as usize;
                if input.remaining() < length {
                    return Err(bad(format!(
                        "a value of {length} bytes with {} left",
                        input.remaining()
                    )));
                }
                Ok(Value::Text(input.split_to(length)))
            }
            other => Err(bad(format!("tuple column kind {other}"))),
        })
        .collect()
}

fn cstring(input: &mut Bytes) -> Result<String, DecodeError> {
    let end = input
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| bad("an unterminated name".into()))?;
    let text = input.split_to(end);
    input.advance(1);
    String::from_utf8(text.to_vec()).map_err(|_| bad("a name that is not UTF-8".into()))
}

fn expect(input: &mut Bytes, tag: u8, what: &str) -> Result<(), DecodeError> {
    match u8_of(input, what)? {
        found if found == tag => Ok(()),
        found => Err(bad(format!(
            "{what}: expected '{}', found {found}",
            tag as char
        ))),
    }
}

fn need(input: &Bytes, bytes: usize, what: &str) -> Result<(), DecodeError> {
    match input.remaining() >= bytes {
        true => Ok(()),
        false => Err(bad(format!("{what} ends early"))),
    }
}

fn skip(input: &mut Bytes, bytes: usize, what: &str) -> Result<(), DecodeError> {
    need(input, bytes, what)?;
    input.advance(bytes);
    Ok(())
}

fn u8_of(input: &mut Bytes, what: &str) -> Result<u8, DecodeError> {
    need(input, 1, what)?;
    Ok(input.get_u8())
}

fn u16_of(input: &mut Bytes, what: &str) -> Result<u16, DecodeError> {
    need(input, 2, what)?;
    Ok(input.get_u16())
}

fn u32_of(input: &mut Bytes, what: &str) -> Result<u32, DecodeError> {
    need(input, 4, what)?;
    Ok(input.get_u32())
}

fn u64_of(input: &mut Bytes, what: &str) -> Result<u64, DecodeError> {
    need(input, 8, what)?;
    Ok(input.get_u64())
}

fn bad(message: String) -> DecodeError {
    DecodeError(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use proptest::prelude::*;

    fn text_tuple(out: &mut BytesMut, values: &[Option<&str>]) {
        out.put_u16(values.len() as u16);
        for value in values {
            match value {
                None => out.put_u8(b'n'),
                Some(text) => {
                    out.put_u8(b't');
                    out.put_u32(text.len() as u32);
                    out.put_slice(text.as_bytes());
                }
            }
        }
    }

    #[test]
    fn decodes_a_relation_and_its_changes() {
        let mut r = BytesMut::new();
        r.put_u8(b'R');
        r.put_u32(16384);
        r.put_slice(b"public\0orders\0");
        r.put_u8(b'f');
        r.put_u16(2);
        r.put_u8(1);
        r.put_slice(b"id\0");
        r.put_u32(20);
        r.put_i32(-1);
        r.put_u8(0);
        r.put_slice(b"note\0");
        r.put_u32(25);
        r.put_i32(-1);
        let Message::Relation(relation) = decode(r.freeze()).unwrap() else {
            panic!("not a relation");
        };
        assert_eq!(relation.name, "orders");
        assert_eq!(relation.replica_identity, b'f');
        assert!(relation.columns[0].key && !relation.columns[1].key);

        let mut u = BytesMut::new();
        u.put_u8(b'U');
        u.put_u32(16384);
        u.put_u8(b'O');
        text_tuple(&mut u, &[Some("7"), None]);
        u.put_u8(b'N');
        text_tuple(&mut u, &[Some("7"), Some("hi")]);
        assert_eq!(
            decode(u.freeze()).unwrap(),
            Message::Update {
                relation: 16384,
                old: Some((
                    OldImage::Full,
                    vec![Value::Text(Bytes::from("7")), Value::Null]
                )),
                new: vec![
                    Value::Text(Bytes::from("7")),
                    Value::Text(Bytes::from("hi"))
                ],
            }
        );
    }

    #[test]
    fn commit_gives_the_transaction_end() {
        let mut c = BytesMut::new();
        c.put_u8(b'C');
        c.put_u8(0);
        c.put_u64(0x100);
        c.put_u64(0x128);
        c.put_i64(0);
        assert_eq!(
            decode(c.freeze()).unwrap(),
            Message::Commit { end: Lsn(0x128) }
        );
    }

    #[test]
    fn truncated_and_unknown_messages_are_errors() {
        assert!(decode(Bytes::from_static(b"I\0\0")).is_err());
        assert!(decode(Bytes::from_static(b"Z")).is_err());
        assert!(decode(Bytes::new()).is_err());
        // A value longer than the message.
        let mut i = BytesMut::new();
        i.put_u8(b'I');
        i.put_u32(1);
        i.put_u8(b'N');
        i.put_u16(1);
        i.put_u8(b't');
        i.put_u32(1000);
        assert!(decode(i.freeze()).is_err());
    }

    proptest! {
        #[test]
        fn hostile_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(Bytes::from(bytes));
        }
    }
}
