//! A PostgreSQL replication connection: the frontend/backend protocol over TCP as far as
//! logical replication needs it — startup in `replication=database` mode, password
//! authentication (cleartext, MD5, SCRAM-SHA-256), `START_REPLICATION`, and the copy-both
//! stream of WAL data and keepalives, answered with standby status updates.
//!
//! `tokio-postgres` has no copy-both mode, so this speaks the protocol itself, with the
//! message builders and SCRAM client of `postgres-protocol` (the crate under
//! `tokio-postgres`). Values are read in text form, so the session's settings that shape
//! text output (time zone, date style, float digits, bytea output) are fixed at startup.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::lsn::Lsn;
use crate::postgres::quote_identifier;

/// Most bytes one backend message may hold: a WAL message carries one change, and a row
/// is at most 1 GB in PostgreSQL; anything larger is a broken or hostile stream.
const MAX_MESSAGE: usize = 1 << 30;

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
pub(crate) const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Session settings that fix how values are written as text.
pub(crate) const TEXT_SETTINGS: &[(&str, &str)] = &[
    ("client_encoding", "UTF8"),
    ("DateStyle", "ISO"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "3"),
    ("bytea_output", "hex"),
];

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<String>,
    pub database: String,
}

/// What went wrong on a replication connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered with an error.
    #[error("{code}: {message}")]
    Server {
        /// Its SQLSTATE.
        code: String,
        /// Its message (and detail, if any).
        message: String,
    },
    /// The server sent something this client does not expect.
    #[error("protocol: {0}")]
    Unexpected(String),
}

impl ProtocolError {
    /// Whether the server refused because another session holds the slot.
    pub fn is_slot_busy(&self) -> bool {
        matches!(self, ProtocolError::Server { code, .. } if code == "55006")
    }

    /// Whether trying again later may succeed: the connection broke, or the server is
    /// shutting down, out of resources, or the slot is busy.
    pub fn is_transient(&self) -> bool {
        match self {
            ProtocolError::Io(_) => true,
            ProtocolError::Server { code, .. } => ["08", "53", "57", "55006"]
                .iter()
                .any(|c| code.starts_with(c)),
            ProtocolError::Unexpected(_) => false,
        }
    }
}

/// One message of the replication stream.
#[derive(Debug)]
pub(crate) enum WalMessage {
    /// A pgoutput message.
    Data { data: Bytes },
    /// The server is alive; it has sent everything up to `end`. `reply` asks for a status
    /// update at once.
    Keepalive { end: Lsn, reply: bool },
}

/// A connection in replication mode.
pub(crate) struct ReplicationConnection {
    stream: TcpStream,
    input: BytesMut,
    output: BytesMut,
    streaming: bool,
    /// The server process serving the connection.
    process: i32,
}

impl ReplicationConnection {
    /// Connects and authenticates.
    pub async fn connect(endpoint: &Endpoint) -> Result<Self, ProtocolError> {
        let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
        stream.set_nodelay(true)?;
        let mut connection = ReplicationConnection {
            stream,
            input: BytesMut::with_capacity(64 * 1024),
            output: BytesMut::new(),
            streaming: false,
            process: 0,
        };
        let mut parameters = vec![
            ("user", endpoint.user.as_str()),
            ("database", endpoint.database.as_str()),
            ("replication", "database"),
            ("application_name", "eddy-postgres-cdc"),
        ];
        parameters.extend_from_slice(TEXT_SETTINGS);
        frontend::startup_message(parameters, &mut connection.output)?;
        connection.flush().await?;
        connection.authenticate(endpoint).await?;
        connection.ready().await?;
        Ok(connection)
    }

    async fn authenticate(&mut self, endpoint: &Endpoint) -> Result<(), ProtocolError> {
        let password = || {
            endpoint.password.as_deref().ok_or_else(|| {
                ProtocolError::Unexpected("the server asks for a password and none is set".into())
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, mut body) = self.message().await?;
            if tag != b'R' {
                return Err(unexpected("authentication", tag));
            }
            match body.get_i32() {
                0 => return Ok(()),
                3 => frontend::password_message(password()?.as_bytes(), &mut self.output)?,
                5 => {
                    let mut salt = [0; 4];
                    body.copy_to_slice(&mut salt);
                    let hash = md5_hash(endpoint.user.as_bytes(), password()?.as_bytes(), salt);
                    frontend::password_message(hash.as_bytes(), &mut self.output)?;
                }
                10 => {
                    let mechanisms = cstrings(&body);
                    if !mechanisms.iter().any(|m| m == SCRAM_SHA_256) {
                        return Err(ProtocolError::Unexpected(format!(
                            "no supported SASL mechanism among {mechanisms:?}"
                        )));
                    }
                    let client =
                        ScramSha256::new(password()?.as_bytes(), ChannelBinding::unsupported());
                    frontend::sasl_initial_response(
                        SCRAM_SHA_256,
                        client.message(),
                        &mut self.output,
                    )?;
                    scram = Some(client);
                }
                11 => {
                    let client = scram.as_mut().ok_or_else(|| unexpected("SASL", tag))?;
                    client.update(&body)?;
                    frontend::sasl_response(client.message(), &mut self.output)?;
                }
                12 => {
                    let client = scram.as_mut().ok_or_else(|| unexpected("SASL", tag))?;
                    client.finish(&body)?;
                    continue;
                }
                other => {
                    return Err(ProtocolError::Unexpected(format!(
                        "authentication method {other} is not supported (use password, md5 \
                         or scram-sha-256)"
                    )));
                }
            }
            self.flush().await?;
        }
    }

    /// The server process serving the connection (in `pg_stat_replication.pid`).
    pub fn process(&self) -> i32 {
        self.process
    }

    /// Waits for ReadyForQuery, skipping parameter statuses and notices.
    async fn ready(&mut self) -> Result<(), ProtocolError> {
        loop {
            match self.message().await? {
                (b'Z', _) => return Ok(()),
                (b'K', mut body) if body.remaining() >= 4 => self.process = body.get_i32(),
                (b'S' | b'K' | b'N' | b'C' | b'T' | b'D', _) => {}
                (tag, _) => return Err(unexpected("a command's end", tag)),
            }
        }
    }

    /// Starts streaming `slot`'s changes of `publication` from `from` (pgoutput, protocol
    /// version 1: whole transactions, in commit order).
    pub async fn start(
        &mut self,
        slot: &str,
        publication: &str,
        from: Lsn,
    ) -> Result<(), ProtocolError> {
        let command = format!(
            "START_REPLICATION SLOT {} LOGICAL {from} (proto_version '1', publication_names {})",
            quote_identifier(slot),
            quote_literal(&quote_identifier(publication)),
        );
        frontend::query(&command, &mut self.output)?;
        self.flush().await?;
        loop {
            match self.message().await? {
                (b'W', _) => break,
                (b'N', _) => {}
                (tag, _) => return Err(unexpected("START_REPLICATION", tag)),
            }
        }
        self.streaming = true;
        Ok(())
    }

    /// The next message of the stream, or `None` if none came within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Result<Option<WalMessage>, ProtocolError> {
        if !self.streaming {
            return Err(ProtocolError::Unexpected("not streaming".into()));
        }
        loop {
            let message = match tokio::time::timeout(wait, self.message()).await {
                Err(_) => return Ok(None),
                Ok(message) => message?,
            };
            let mut body = match message {
                (b'd', body) => body,
                (b'N', _) => continue,
                (b'c', _) => {
                    return Err(ProtocolError::Unexpected(
                        "the server ended the replication stream".into(),
                    ));
                }
                (tag, _) => return Err(unexpected("the replication stream", tag)),
            };
            let kind = read_u8(&mut body)?;
            return match kind {
                b'w' => {
                    if body.remaining() < 24 {
                        return Err(short("XLogData"));
                    }
                    // The message's WAL start, the server's WAL end and its clock.
                    body.advance(24);
                    Ok(Some(WalMessage::Data { data: body }))
                }
                b'k' => {
                    if body.remaining() < 17 {
                        return Err(short("keepalive"));
                    }
                    let end = Lsn(body.get_u64());
                    body.advance(8);
                    Ok(Some(WalMessage::Keepalive {
                        end,
                        reply: body.get_u8() == 1,
                    }))
                }
                other => Err(ProtocolError::Unexpected(format!(
                    "unknown replication message '{}'",
                    other as char
                ))),
            };
        }
    }

    /// Tells the server the client has received and durably handled everything before
    /// `flushed`: a logical slot's `confirmed_flush_lsn` moves there.
    pub async fn send_status(&mut self, received: Lsn, flushed: Lsn) -> Result<(), ProtocolError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let mut status = BytesMut::with_capacity(34);
        status.put_u8(b'r');
        status.put_u64(received.0.max(flushed.0));
        status.put_u64(flushed.0);
        status.put_u64(flushed.0);
        status.put_i64(now - POSTGRES_EPOCH_MICROS);
        status.put_u8(0);
        frontend::CopyData::new(status.freeze())?.write(&mut self.output);
        self.flush().await?;
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ProtocolError> {
        self.stream.write_all(&self.output).await?;
        self.output.clear();
        Ok(())
    }

    /// The next backend message: its tag and body. An error response becomes an error.
    /// Cancel-safe: a partly read message stays buffered.
    async fn message(&mut self) -> Result<(u8, Bytes), ProtocolError> {
        loop {
            if self.input.len() >= 5 {
                let length = u32::from_be_bytes(self.input[1..5].try_into().expect("4 bytes"));
                let length = length as usize;
                if !(4..=MAX_MESSAGE).contains(&length) {
                    return Err(ProtocolError::Unexpected(format!(
                        "a message of {length} bytes"
                    )));
                }
                if self.input.len() > length {
                    let mut message = self.input.split_to(length + 1).freeze();
                    let tag = message.get_u8();
                    message.advance(4);
                    if tag == b'E' {
                        return Err(server_error(&message));
                    }
                    return Ok((tag, message));
                }
                self.input.reserve(length + 1 - self.input.len());
            }
            if self.stream.read_buf(&mut self.input).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        }
    }
}

fn read_u8(body: &mut Bytes) -> Result<u8, ProtocolError> {
    match body.has_remaining() {
        true => Ok(body.get_u8()),
        false => Err(short("copy data")),
    }
}

fn short(what: &str) -> ProtocolError {
    ProtocolError::Unexpected(format!("a truncated {what} message"))
}

fn unexpected(during: &str, tag: u8) -> ProtocolError {
    ProtocolError::Unexpected(format!(
        "unexpected message '{}' during {during}",
        tag as char
    ))
}

/// The null-terminated strings of a message body.
fn cstrings(body: &[u8]) -> Vec<String> {
    body.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// An ErrorResponse's SQLSTATE, message and detail.
fn server_error(body: &[u8]) -> ProtocolError {
    let (mut code, mut message, mut detail) = (String::new(), String::new(), String::new());
    for field in body.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let value = String::from_utf8_lossy(&field[1..]).into_owned();
        match field[0] {
            b'C' => code = value,
            b'M' => message = value,
            b'D' => detail = value,
            _ => {}
        }
    }
    if !detail.is_empty() {
        message = format!("{message} ({detail})");
    }
    ProtocolError::Server { code, message }
}

/// `text` as a quoted SQL string literal.
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_responses_keep_code_message_and_detail() {
        let body = b"SERROR\0C42704\0Mreplication slot \"x\" does not exist\0Dgone\0\0";
        let ProtocolError::Server { code, message } = server_error(body) else {
            panic!("not a server error");
        };
        assert_eq!(code, "42704");
        assert_eq!(message, "replication slot \"x\" does not exist (gone)");
    }

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn only_connection_and_resource_errors_are_transient() {
        let server = |code: &str| ProtocolError::Server {
            code: code.into(),
            message: String::new(),
        };
        assert!(server("57P01").is_transient());
        assert!(server("55006").is_transient());
        assert!(!server("42704").is_transient());
    }
}
