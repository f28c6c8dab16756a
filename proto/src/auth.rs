//! Users' bearer tokens: the token file, checking a presented token, and the guards of the
//! gRPC `JobService` and of the HTTP ports.
//!
//! The token file holds one `name = sha256:HEX [read-only]` entry per line (`#` starts a
//! comment): the SHA-256 of each token, never the token itself. A presented token is hashed
//! and compared with every entry in constant time. Tokens are random (`eddy token` makes
//! 256-bit ones), so a plain hash is as strong as a slow one would be.

use std::path::Path;
use std::sync::Arc;

use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read jobs, checkpoints and metrics.
    ReadOnly,
    /// Also submit, cancel, savepoint and stop jobs.
    ReadWrite,
}

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's name in the token file (`local` when no tokens are configured).
    pub name: String,
    /// What it may do.
    pub access: Access,
}

impl Principal {
    /// The principal of a cluster without tokens (reachable on loopback only, or run with
    /// `--insecure`).
    pub fn local() -> Principal {
        Principal {
            name: "local".into(),
            access: Access::ReadWrite,
        }
    }

    /// This principal, if it may change jobs.
    pub fn may_write(self) -> Result<Principal, AuthError> {
        match self.access {
            Access::ReadWrite => Ok(self),
            Access::ReadOnly => Err(AuthError::ReadOnly(self.name)),
        }
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer …` was given.
    #[error(
        "this JobManager needs a token: pass --token (or EDDY_TOKEN), or send 'Authorization: Bearer <token>'"
    )]
    Missing,
    /// The token is in no entry of the token file.
    #[error("the token presented is not valid")]
    Unknown,
    /// A read-only token asked to change something.
    #[error("token '{0}' is read-only: it cannot submit, cancel, stop or savepoint jobs")]
    ReadOnly(String),
}

/// A bad token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// It could not be read.
    #[error("cannot read token file '{path}': {source}")]
    Read {
        /// Its path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not an entry.
    #[error("token file '{path}', line {line}: {message}")]
    Syntax {
        /// Its path.
        path: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    hash: [u8; 32],
    access: Access,
}

/// The tokens a daemon accepts.
#[derive(Debug, Clone)]
pub struct Tokens {
    entries: Vec<Entry>,
}

impl Tokens {
    /// Reads a token file.
    pub fn load(path: &Path) -> Result<Tokens, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Tokens::parse(&text, &path.display().to_string())
    }

    /// Parses a token file's text (`path` names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<Tokens, TokenFileError> {
        let mut entries = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let entry = parse_entry(line).map_err(|message| TokenFileError::Syntax {
                path: path.to_string(),
                line: index + 1,
                message,
            })?;
            if entries.iter().any(|e: &Entry| e.name == entry.name) {
                return Err(TokenFileError::Syntax {
                    path: path.to_string(),
                    line: index + 1,
                    message: format!("'{}' is named twice", entry.name),
                });
            }
            entries.push(entry);
        }
        Ok(Tokens { entries })
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Who presents `authorization` (an `Authorization` header's value).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, AuthError> {
        let token = authorization.and_then(bearer).ok_or(AuthError::Missing)?;
        let presented = sha256(token);
        // Compare with every entry, each in constant time, so timing tells nothing.
        let mut found = None;
        for entry in &self.entries {
            if constant_time_eq(&entry.hash, &presented) {
                found = Some(entry);
            }
        }
        found
            .map(|entry| Principal {
                name: entry.name.clone(),
                access: entry.access,
            })
            .ok_or(AuthError::Unknown)
    }
}

fn parse_entry(line: &str) -> Result<Entry, String> {
    let (name, rest) = line
        .split_once('=')
        .ok_or("expected 'name = sha256:HEX [read-only]'")?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Err(format!(
            "bad token name '{name}' (letters, digits, - _ . @)"
        ));
    }
    let mut words = rest.split_whitespace();
    let hash = words.next().ok_or("no hash after '='")?;
    let hex = hash
        .strip_prefix("sha256:")
        .ok_or("the hash must be written 'sha256:HEX' (see eddy token)")?;
    let hash = decode_hex32(hex).ok_or("'sha256:' must be followed by 64 hex digits")?;
    let access = match words.next() {
        None => Access::ReadWrite,
        Some("read-only") => Access::ReadOnly,
        Some(other) => return Err(format!("unknown flag '{other}' (only 'read-only')")),
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected '{extra}'"));
    }
    Ok(Entry {
        name: name.to_string(),
        hash,
        access,
    })
}

fn decode_hex32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn sha256(token: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
    out
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// A new random token (256 bits, hex) and its token-file hash `sha256:HEX`.
pub fn generate() -> (String, String) {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source");
    let token = format!("eddy_{}", hex(&bytes));
    let hash = hash_of(&token);
    (token, hash)
}

/// The token-file hash of `token`: `sha256:HEX`.
pub fn hash_of(token: &str) -> String {
    format!("sha256:{}", hex(&sha256(token)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who may call a daemon's user-facing services: everyone (no tokens configured) or the
/// holders of a token.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    tokens: Option<Arc<Tokens>>,
}

impl Guard {
    /// A guard checking `tokens`, or letting everyone in when `None`.
    pub fn new(tokens: Option<Tokens>) -> Guard {
        Guard {
            tokens: tokens.map(Arc::new),
        }
    }

    /// Whether tokens are demanded.
    pub fn enabled(&self) -> bool {
        self.tokens.is_some()
    }

    /// Who sends `authorization`.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, AuthError> {
        match &self.tokens {
            None => Ok(Principal::local()),
            Some(tokens) => tokens.authenticate(authorization),
        }
    }

    /// Who sends `authorization`, if they may change jobs.
    pub fn authorize_write(&self, authorization: Option<&str>) -> Result<Principal, AuthError> {
        self.authenticate(authorization)?.may_write()
    }
}

/// A tonic interceptor authenticating every call: the caller's [`Principal`] goes into the
/// request's extensions, for the handlers to check writes with [`require_write`].
impl tonic::service::Interceptor for Guard {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        match self.authenticate(authorization) {
            Ok(principal) => {
                request.extensions_mut().insert(principal);
                Ok(request)
            }
            Err(error) => {
                tracing::warn!(%error, peer = ?request.remote_addr(), "call refused");
                Err(tonic::Status::unauthenticated(error.to_string()))
            }
        }
    }
}

/// The caller of a request let in by a [`Guard`], if it may change jobs.
pub fn require_write<T>(request: &tonic::Request<T>) -> Result<Principal, tonic::Status> {
    let principal = request.extensions().get::<Principal>().cloned();
    principal
        .unwrap_or_else(Principal::local)
        .may_write()
        .map_err(|error| {
            tracing::warn!(%error, "call refused");
            tonic::Status::permission_denied(error.to_string())
        })
}

/// Sends a token with every call of a gRPC client.
#[derive(Debug, Clone)]
pub struct BearerToken(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl BearerToken {
    /// Sends `token`, or nothing when `None`. Fails on a token that is not visible ASCII.
    pub fn new(token: Option<&str>) -> Result<BearerToken, AuthError> {
        token
            .map(|t| {
                format!("Bearer {}", t.trim())
                    .parse()
                    .map_err(|_| AuthError::Unknown)
            })
            .transpose()
            .map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// An axum middleware letting in HTTP requests that carry a valid token: any token for
/// `GET` and `HEAD`, a read-write one for everything else. Refusals are
/// `{"error", "status"}` JSON with 401 or 403.
pub async fn http_guard(
    axum::extract::State(guard): axum::extract::State<Guard>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{Method, StatusCode, header};
    use axum::response::IntoResponse;
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    let checked = match reading {
        true => guard.authenticate(authorization),
        false => guard.authorize_write(authorization),
    };
    match checked {
        Ok(principal) => {
            let mut request = request;
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            let status = match error {
                AuthError::ReadOnly(_) => StatusCode::FORBIDDEN,
                AuthError::Missing | AuthError::Unknown => StatusCode::UNAUTHORIZED,
            };
            tracing::warn!(%error, path = %request.uri().path(), "http request refused");
            let body = axum::Json(serde_json::json!({
                "error": error.to_string(), "status": status.as_u16(),
            }));
            let challenge = [(header::WWW_AUTHENTICATE, "Bearer")];
            (status, challenge, body).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_against_their_hashes() {
        let (alice, alice_hash) = generate();
        let (reader, reader_hash) = generate();
        let text = format!(
            "# users\nalice = {alice_hash}\ngrafana = {reader_hash} read-only # dashboards\n"
        );
        let tokens = Tokens::parse(&text, "tokens").unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(!text.contains(&alice), "the file holds hashes, not tokens");
        let bearer = |t: &str| format!("Bearer {t}");
        assert_eq!(
            tokens.authenticate(Some(&bearer(&alice))).unwrap(),
            Principal {
                name: "alice".into(),
                access: Access::ReadWrite
            }
        );
        assert_eq!(
            tokens.authenticate(Some(&bearer(&reader))).unwrap().access,
            Access::ReadOnly
        );
        assert_eq!(tokens.authenticate(None), Err(AuthError::Missing));
        assert_eq!(tokens.authenticate(Some(&alice)), Err(AuthError::Missing));
        assert_eq!(
            tokens.authenticate(Some("Bearer nope")),
            Err(AuthError::Unknown)
        );
        let guard = Guard::new(Some(tokens));
        assert_eq!(
            guard.authorize_write(Some(&bearer(&reader))),
            Err(AuthError::ReadOnly("grafana".into()))
        );
        assert!(Guard::new(None).authorize_write(None).is_ok());
    }

    #[test]
    fn bad_token_files_name_the_line() {
        for (text, expected) in [
            ("alice sha256:00", "line 1: expected"),
            ("\nalice = md5:00", "line 2: the hash must be written"),
            ("alice = sha256:abcd", "64 hex digits"),
            (
                &format!("a = sha256:{0}\na = sha256:{0}", "0".repeat(64)),
                "line 2: 'a' is named twice",
            ),
            (
                &format!("a = sha256:{} admin", "0".repeat(64)),
                "unknown flag 'admin'",
            ),
        ] {
            let error = Tokens::parse(text, "t.txt").unwrap_err().to_string();
            assert!(
                error.contains(expected) && error.contains("t.txt"),
                "{error}"
            );
        }
    }
}
