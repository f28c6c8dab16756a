//! Secrets in connector options: which option names hold secrets, references to secrets
//! kept outside the job (`${env:NAME}`, `${file:/path}`), resolving them, and redacting
//! secret values out of SQL text before it is stored, shown or logged.
//!
//! A reference is resolved only where connections are opened (a TaskManager, or the
//! embedded cluster of `eddy run`), when a connector is configured: the JobManager plans
//! with the reference itself, and stores and ships the SQL as written. Who plans says
//! which, with [`SecretReferences`].

/// What a redacted value is shown as.
pub const REDACTED: &str = "******";

/// What configuring a connector does with a secret reference in its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretReferences {
    /// Keeps the reference as written: the plan is checked, stored or shown, not run here.
    #[default]
    Keep,
    /// Reads the secret: the plan's connectors open connections here.
    Resolve,
}

/// Whether an option of this name holds a secret (`password`, `secret`, `token`, keys,
/// credentials, SASL and JAAS settings), as Flink's sensitive keys and more.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    const WORDS: [&str; 7] = [
        "password",
        "secret",
        "token",
        "credential",
        "apikey",
        "api-key",
        "jaas",
    ];
    WORDS.iter().any(|w| key.contains(w))
        || key.starts_with("sasl.")
        || key.contains(".sasl.")
        || key.ends_with(".key")
        || key.ends_with("-key")
        || key.ends_with("private-key")
}

/// A reference to a secret kept outside the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference<'a> {
    /// `${env:NAME}`: an environment variable of the resolving process.
    Env(&'a str),
    /// `${file:/path}`: a file's contents, one trailing newline dropped.
    File(&'a str),
}

impl<'a> Reference<'a> {
    /// The reference `value` is, if it is one (the whole value, nothing around it).
    pub fn parse(value: &'a str) -> Option<Reference<'a>> {
        let inner = value.trim().strip_prefix("${")?.strip_suffix('}')?;
        if let Some(name) = inner.strip_prefix("env:") {
            return Some(Reference::Env(name));
        }
        inner.strip_prefix("file:").map(Reference::File)
    }

    /// The secret it refers to.
    pub fn resolve(&self) -> Result<String, SecretError> {
        match self {
            Reference::Env(name) => {
                std::env::var(name).map_err(|_| SecretError::Env(name.to_string()))
            }
            Reference::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| SecretError::File {
                    path: path.to_string(),
                    message: e.to_string(),
                })?;
                let text = text.strip_suffix('\n').unwrap_or(&text);
                Ok(text.strip_suffix('\r').unwrap_or(text).to_string())
            }
        }
    }
}

/// Why a secret reference could not be resolved (never holding the secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The variable is not set (or not Unicode).
    #[error("environment variable '{0}' is not set")]
    Env(String),
    /// The file could not be read.
    #[error("cannot read secret file '{path}': {message}")]
    File {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// Whether option `key` holds a secret written out (not a reference to one).
pub fn is_written_out(key: &str, value: &str) -> bool {
    is_secret_key(key) && Reference::parse(value).is_none()
}

/// The value of option `key` as it may be stored or shown: [`REDACTED`] for a secret
/// written out, the value otherwise.
pub fn redacted<'a>(key: &str, value: &'a str) -> &'a str {
    match is_written_out(key, value) {
        true => REDACTED,
        false => value,
    }
}

/// `value` with a reference resolved, or as it is.
pub fn resolve(value: &str) -> Result<String, SecretError> {
    match Reference::parse(value) {
        Some(reference) => reference.resolve(),
        None => Ok(value.to_string()),
    }
}

/// `sql` with the literal value of every secret option (`'password' = '…'`) replaced by
/// [`REDACTED`]; references (`${env:…}`) stay, as they hold no secret.
pub fn redact_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    // The last quoted string seen, if only whitespace and '=' followed it so far.
    let mut pending_key: Option<String> = None;
    let mut seen_equals = false;
    while let Some(start) = rest.find('\'') {
        let between = &rest[..start];
        out.push_str(between);
        if pending_key.is_some() {
            let gap = between.trim();
            match gap {
                "" => {}
                "=" if !seen_equals => seen_equals = true,
                _ => {
                    pending_key = None;
                    seen_equals = false;
                }
            }
        }
        let (literal, after) = quoted(&rest[start..]);
        let value = unquote(literal);
        match pending_key.take() {
            Some(key)
                if seen_equals && is_secret_key(&key) && Reference::parse(&value).is_none() =>
            {
                out.push('\'');
                out.push_str(REDACTED);
                out.push('\'');
            }
            _ => {
                out.push_str(literal);
                pending_key = Some(value);
            }
        }
        seen_equals = false;
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The quoted string at the start of `text` (with its quotes; `''` escapes a quote) and what
/// follows it; an unterminated one runs to the end.
fn quoted(text: &str) -> (&str, &str) {
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return text.split_at(i + 1);
        }
        i += 1;
    }
    (text, "")
}

fn unquote(literal: &str) -> String {
    let inner = literal.strip_prefix('\'').unwrap_or(literal);
    let inner = inner.strip_suffix('\'').unwrap_or(inner);
    inner.replace("''", "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised() {
        for key in [
            "password",
            "s3.secret-access-key",
            "properties.sasl.jaas.config",
            "properties.ssl.key.password",
            "sasl.password",
            "token",
            "api-key",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "url",
            "path",
            "username",
            "key.format",
            "key.fields",
            "topic",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn references_resolve_from_the_environment_and_files() {
        let dir = std::env::temp_dir().join(format!("eddy-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "s3cr3t\n").unwrap();
        let reference = format!("${{file:{}}}", file.display());
        assert_eq!(resolve(&reference).unwrap(), "s3cr3t");
        assert_eq!(resolve("plain").unwrap(), "plain");
        assert_eq!(
            resolve("${env:PATH}").unwrap(),
            std::env::var("PATH").unwrap()
        );
        assert_eq!(
            resolve("${env:EDDY_NO_SUCH_VARIABLE}").unwrap_err(),
            SecretError::Env("EDDY_NO_SUCH_VARIABLE".into())
        );
        assert!(matches!(
            resolve("${file:/no/such}"),
            Err(SecretError::File { .. })
        ));
        assert_eq!(Reference::parse("x${env:A}"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sql_is_redacted_option_by_option() {
        let sql = "CREATE TABLE t (a INT) WITH ('connector' = 'postgres', 'password' = 'hunter''2',\n\
                   'url' = 'postgres://h/db', 's3.secret-access-key'='k3y', 'token' = '${env:TOKEN}');\n\
                   SELECT 'password', 'not-a-secret' FROM t; SET 'sasl.password' = 'pw';";
        let redacted = redact_sql(sql);
        assert!(!redacted.contains("hunter"), "{redacted}");
        assert!(!redacted.contains("k3y"), "{redacted}");
        assert!(!redacted.contains("'pw'"), "{redacted}");
        assert!(redacted.contains("'password' = '******'"), "{redacted}");
        assert!(redacted.contains("'${env:TOKEN}'"), "{redacted}");
        assert!(redacted.contains("'postgres://h/db'"), "{redacted}");
        // A list of strings is not key = value.
        assert!(
            redacted.contains("'password', 'not-a-secret'"),
            "{redacted}"
        );
        assert_eq!(
            redact_sql("'password' = 'unterminated"),
            "'password' = '******'"
        );
    }
}
