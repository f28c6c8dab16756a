//! `'connector' = 'postgres'`: writes a table in PostgreSQL.
//!
//! Append streams are inserted; a table with a primary key is upserted (`INSERT … ON
//! CONFLICT DO UPDATE`, deletes by key); a retract stream into a table without one inserts
//! and deletes one matching row per retraction. Rows go in batches: one statement per
//! chunk, its columns bound as arrays and expanded by `unnest`.
//!
//! A lookup join reads the table by key ([`lookup`]), with the cache its `lookup.*`
//! options ask for.
//!
//! Exactly once, each checkpoint's rows are one transaction, prepared at the barrier
//! (`PREPARE TRANSACTION`) and committed (`COMMIT PREPARED`) when the checkpoint completes;
//! its id is `eddy/{job}/{table}/{subtask}/{attempt}/{checkpoint}`, so a restarted sink
//! finds and rolls back what earlier attempts left prepared. The server must allow prepared
//! transactions (`max_prepared_transactions` > 0).

mod committer;
mod lookup;
mod statements;
mod writer;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use committer::PreparedTransactions;
use eddy_common::{EddyError, Result};
pub(crate) use statements::quote as quote_identifier;
use writer::{PostgresWriter, TransactionMode};

use super::lookup::{
    LOOKUP_KEYS, LookupCacheOptions, LookupContext, LookupKind, LookupReader, lookup_cache,
};
use super::transaction::{AttemptToken, DeliveryGuarantee, TwoPhaseCommitSink};
use super::{Options, SinkContext, SinkWriter, TableConnector};

const KEYS: &[&str] = &[
    "url",
    "table",
    "table-name",
    "username",
    "password",
    "sink.delivery-guarantee",
];

/// Configuration of a PostgreSQL table.
#[derive(Debug, Clone)]
pub struct PostgresConnector {
    table: String,
    config: tokio_postgres::Config,
    target: String,
    primary_key: Vec<String>,
    guarantee: DeliveryGuarantee,
    /// The cache a lookup join keeps of the table.
    lookup_cache: Option<LookupCacheOptions>,
    /// How often a failed lookup is tried again (`lookup.max-retries`, 3 as in Flink).
    lookup_retries: u32,
}

impl PostgresConnector {
    /// Validates the options (no connection yet).
    pub fn new(
        table: &str,
        values: &BTreeMap<String, String>,
        _schema: &SchemaRef,
        primary_key: &[String],
    ) -> Result<Self> {
        let keys: Vec<&str> = KEYS.iter().chain(LOOKUP_KEYS).copied().collect();
        let options = Options::validate(table, "postgres", values, &keys, &[])?;
        let config = connection_config(&options, ["url", "username", "password"])?;
        let target = match (options.get("table"), options.get("table-name")) {
            (Some(t), _) | (None, Some(t)) => t.to_string(),
            (None, None) => options.required("table")?.to_string(),
        };
        Ok(PostgresConnector {
            table: table.to_string(),
            config,
            target,
            primary_key: primary_key.to_vec(),
            guarantee: options
                .delivery_guarantee()?
                .unwrap_or(DeliveryGuarantee::AtLeastOnce),
            lookup_cache: lookup_cache(&options)?,
            lookup_retries: options.parse_or("lookup.max-retries", 3u32)?,
        })
    }

    fn error(&self, message: String) -> EddyError {
        EddyError::Connector {
            table: self.table.clone(),
            message,
        }
    }
}

impl TableConnector for PostgresConnector {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn commits_at_checkpoints(&self, _checkpointing: bool) -> bool {
        self.guarantee == DeliveryGuarantee::ExactlyOnce
    }

    fn is_sink(&self) -> bool {
        true
    }

    fn accepts_updates(&self) -> bool {
        true
    }

    fn lookup_kind(&self) -> Option<LookupKind> {
        Some(LookupKind::Keyed)
    }

    fn lookup_cache(&self) -> Option<LookupCacheOptions> {
        self.lookup_cache
    }

    fn create_lookup(&self, context: &LookupContext) -> Result<Box<dyn LookupReader>> {
        Ok(Box::new(lookup::PostgresLookup::new(
            Arc::new(self.clone()),
            context,
        )?))
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        let connector = Arc::new(self.clone());
        let token = AttemptToken::new(context.execution.attempt);
        let mode = match (self.guarantee, &context.completed) {
            (DeliveryGuarantee::ExactlyOnce, _) => TransactionMode::Prepared {
                prefix: committer::job_prefix(&context.execution.job, &self.target),
                writer: format!("{}/{token}", context.subtask),
            },
            (_, Some(_)) => TransactionMode::PerCheckpoint,
            (_, None) => TransactionMode::PerChunk,
        };
        let writer = PostgresWriter::new(connector.clone(), context, mode.clone());
        let TransactionMode::Prepared { prefix, .. } = mode else {
            return Ok(Box::new(writer));
        };
        let committer = PreparedTransactions::new(connector, prefix, token, context);
        Ok(Box::new(TwoPhaseCommitSink::new(
            context,
            Box::new(writer),
            Arc::new(committer),
        )?))
    }
}

/// A connection's configuration from the options named `[url, user, password]`: the URL
/// (`postgres://…`, also `jdbc:postgresql://…`), the user and password when given.
pub(crate) fn connection_config(
    options: &Options<'_>,
    [url_key, user_key, password_key]: [&str; 3],
) -> Result<tokio_postgres::Config> {
    let url = options.required(url_key)?;
    let bare = url.strip_prefix("jdbc:").unwrap_or(url);
    let mut config = tokio_postgres::Config::from_str(bare)
        .map_err(|e| options.error(format!("option '{url_key}' = '{url}': {e}")))?;
    if let Some(user) = options.get(user_key) {
        config.user(user);
    }
    if let Some(password) = options.get(password_key) {
        config.password(password);
    }
    Ok(config)
}

/// Connects, running the connection in the background.
async fn connect(connector: &PostgresConnector) -> Result<tokio_postgres::Client> {
    connect_with(&connector.config, &connector.table)
        .await
        .map_err(|e| connector.error(format!("cannot connect to PostgreSQL: {e}")))
}

/// Connects with `config` (no TLS), running the connection in the background; its failure
/// is logged for `table`.
pub(crate) async fn connect_with(
    config: &tokio_postgres::Config,
    table: &str,
) -> std::result::Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    let table = table.to_string();
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(table = %table, error = %e, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// A PostgreSQL error's detail (the server's `code: message`, or the client's error) and
/// whether trying again may succeed: connection exceptions, transaction rollbacks
/// (serialization failures, deadlocks), insufficient resources, operator intervention
/// (shutdown), or no answer from the server at all.
pub(crate) fn error_detail(e: &tokio_postgres::Error) -> (String, bool) {
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            let transient = ["08", "40", "53", "57"].iter().any(|c| code.starts_with(c));
            (format!("{code}: {}", db.message()), transient)
        }
        None => (e.to_string(), true),
    }
}

/// A PostgreSQL error about this table, with the server's detail.
fn db_error(connector: &PostgresConnector, doing: &str, e: tokio_postgres::Error) -> EddyError {
    let (detail, transient) = error_detail(&e);
    EddyError::Remote {
        table: connector.table.clone(),
        message: format!(
            "{doing} (PostgreSQL table '{}'): {detail}",
            connector.target
        ),
        transient,
    }
}
