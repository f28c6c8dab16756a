//! Commits and rolls back prepared transactions by id, on a connection of its own
//! (`COMMIT PREPARED` cannot run inside the writer's open transaction).

use std::collections::HashSet;
use std::sync::Arc;

use eddy_common::Result;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::{PostgresConnector, connect, db_error};
use crate::SinkContext;
use crate::transaction::{AttemptToken, TransactionCommitter};

/// `eddy/{job}/{table}/`: the start of every transaction id of a job's sink. Characters a
/// literal would need escaped are replaced.
pub(super) fn job_prefix(job: &str, table: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| match c.is_ascii_alphanumeric() || "_.-".contains(c) {
                true => c,
                false => '_',
            })
            .collect()
    };
    format!("eddy/{}/{}/", clean(job), clean(table))
}

/// The prepared transactions of one sink subtask.
pub(super) struct PreparedTransactions {
    connector: Arc<PostgresConnector>,
    prefix: String,
    subtask: usize,
    parallelism: usize,
    /// This writer's attempt token, `a{attempt}t{start}`.
    token: AttemptToken,
    client: Mutex<Option<Client>>,
}

impl PreparedTransactions {
    pub fn new(
        connector: Arc<PostgresConnector>,
        prefix: String,
        token: AttemptToken,
        context: &SinkContext,
    ) -> Self {
        PreparedTransactions {
            connector,
            prefix,
            subtask: context.subtask,
            parallelism: context.parallelism.max(1),
            token,
            client: Mutex::new(None),
        }
    }

    /// Runs `sql`; "no such prepared transaction" counts as done (committed or rolled back
    /// before). A broken connection is dropped, to be made again on the next try.
    async fn finish_transaction(&self, sql: String, doing: &str) -> Result<()> {
        let mut client = self.client.lock().await;
        if client.is_none() {
            *client = Some(connect(&self.connector).await?);
        }
        let result = client
            .as_ref()
            .expect("connected")
            .batch_execute(&sql)
            .await;
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => Ok(()),
            Err(e) => {
                if e.is_closed() || e.as_db_error().is_none() {
                    *client = None;
                }
                Err(db_error(&self.connector, doing, e))
            }
        }
    }

    /// Whether `gid` (`{prefix}{subtask}/{token}/{checkpoint}`) was left by an earlier
    /// attempt of this subtask (or of one it took over).
    fn is_leftover(&self, gid: &str) -> bool {
        let mut parts = gid
            .strip_prefix(&self.prefix)
            .unwrap_or_default()
            .split('/');
        let writer: Option<usize> = parts.next().and_then(|w| w.parse().ok());
        let token = parts.next().and_then(AttemptToken::parse);
        match (writer, token) {
            (Some(writer), Some(token)) => {
                writer % self.parallelism == self.subtask && self.token.supersedes(&token)
            }
            _ => false,
        }
    }
}

impl TransactionCommitter for PreparedTransactions {
    fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        async move {
            let gid = String::from_utf8_lossy(handle);
            self.finish_transaction(format!("COMMIT PREPARED '{gid}'"), "committing")
                .await
        }
        .boxed()
    }

    fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        async move {
            let keep: HashSet<String> = keep
                .iter()
                .map(|h| String::from_utf8_lossy(h).into_owned())
                .collect();
            let gids: Vec<String> = {
                let mut client = self.client.lock().await;
                if client.is_none() {
                    *client = Some(connect(&self.connector).await?);
                }
                let pattern = format!("{}%", self.prefix.replace('_', "\\_"));
                client
                    .as_ref()
                    .expect("connected")
                    .query(
                        "SELECT gid FROM pg_prepared_xacts \
                         WHERE database = current_database() AND gid LIKE $1",
                        &[&pattern],
                    )
                    .await
                    .map_err(|e| db_error(&self.connector, "listing prepared transactions", e))?
                    .iter()
                    .map(|row| row.get(0))
                    .collect()
            };
            for gid in gids {
                if self.is_leftover(&gid) && !keep.contains(&gid) {
                    tracing::info!(%gid, "rolling back a transaction an earlier attempt left prepared");
                    self.finish_transaction(format!("ROLLBACK PREPARED '{gid}'"), "rolling back")
                        .await?;
                }
            }
            Ok(())
        }
        .boxed()
    }
}
