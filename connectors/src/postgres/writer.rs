//! Writes one sink subtask's rows into PostgreSQL, one statement per kind of change in a
//! chunk, inside a transaction that ends per chunk, per checkpoint, or prepared for a
//! two-phase commit.

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::StreamEnd;
use eddy_common::metrics::OperatorMetrics;
use futures::FutureExt;
use futures::future::BoxFuture;
use hashbrown::HashMap;
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use super::statements::{Statements, Values, prepare};
use super::{PostgresConnector, connect, db_error};
use crate::transaction::TransactionWriter;
use crate::{SinkContext, SinkWriter};

/// Where a writer's transactions end.
#[derive(Debug, Clone)]
pub(super) enum TransactionMode {
    /// Each chunk is committed at once (the job does not checkpoint).
    PerChunk,
    /// Committed at each checkpoint barrier (at least once).
    PerCheckpoint,
    /// Prepared at each barrier for a two-phase commit (exactly once), named
    /// `{prefix}{writer}/{checkpoint}`.
    Prepared {
        /// `eddy/{job}/{table}/`.
        prefix: String,
        /// `{subtask}/{attempt}`.
        writer: String,
    },
}

/// One sink subtask's connection and statements.
pub(super) struct PostgresWriter {
    connector: Arc<PostgresConnector>,
    schema: SchemaRef,
    metrics: Arc<OperatorMetrics>,
    mode: TransactionMode,
    connection: Option<(Client, Statements)>,
    in_transaction: bool,
}

impl PostgresWriter {
    pub fn new(
        connector: Arc<PostgresConnector>,
        context: &SinkContext,
        mode: TransactionMode,
    ) -> Self {
        PostgresWriter {
            connector,
            schema: context.schema.clone(),
            metrics: context.metrics.clone(),
            mode,
            connection: None,
            in_transaction: false,
        }
    }

    async fn connected(&mut self) -> Result<&(Client, Statements)> {
        if self.connection.is_none() {
            let client = connect(&self.connector).await?;
            let key = &self.connector.primary_key;
            let statements = prepare(&client, &self.connector, &self.schema, key).await?;
            self.connection = Some((client, statements));
        }
        Ok(self.connection.as_ref().expect("connected"))
    }

    async fn execute(&mut self, sql: &str, doing: &str) -> Result<()> {
        let (client, _) = self.connected().await?;
        let result = client.batch_execute(sql).await;
        result.map_err(|e| db_error(&self.connector, doing, e))
    }

    async fn begin(&mut self) -> Result<()> {
        if !self.in_transaction {
            self.execute("BEGIN", "beginning a transaction").await?;
            self.in_transaction = true;
        }
        Ok(())
    }

    async fn commit(&mut self) -> Result<()> {
        if std::mem::take(&mut self.in_transaction) {
            self.execute("COMMIT", "committing").await?;
        }
        Ok(())
    }

    /// Writes a chunk's changes into the open transaction.
    async fn write_changes(&mut self, chunk: &Chunk) -> Result<()> {
        self.begin().await?;
        let connector = self.connector.clone();
        let (client, statements) = self.connected().await?;
        let rows = chunk.rows().columns();
        let changes = Changes::of(chunk, &statements.key)?;
        let error = |e| db_error(&connector, "writing rows", e);
        let all: Vec<usize> = (0..rows.len()).collect();
        if !changes.deletes.is_empty() {
            let delete = statements
                .delete_by_key
                .as_ref()
                .expect("keyed changes come with a key");
            let key = statements.normalize(&taken(rows, &changes.deletes)?, &statements.key)?;
            execute_arrays(client, delete, &key).await.map_err(error)?;
        }
        if !changes.upserts.is_empty() {
            let columns = statements.normalize(&taken(rows, &changes.upserts)?, &all)?;
            execute_arrays(client, &statements.insert, &columns)
                .await
                .map_err(error)?;
        }
        for run in &changes.runs {
            let columns = statements.normalize(&taken(rows, &run.rows)?, &all)?;
            match run.insert {
                true => execute_arrays(client, &statements.insert, &columns).await,
                false => delete_each(client, statements, &columns).await,
            }
            .map_err(error)?;
        }
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        Ok(())
    }
}

/// The rows at `indices` of each column.
fn taken(columns: &[ArrayRef], indices: &[u32]) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from(indices.to_vec());
    Ok(columns
        .iter()
        .map(|c| take(c, &indices, None))
        .collect::<std::result::Result<_, _>>()?)
}

async fn execute_arrays(
    client: &Client,
    statement: &tokio_postgres::Statement,
    columns: &[ArrayRef],
) -> std::result::Result<u64, tokio_postgres::Error> {
    let values: Vec<Values> = columns.iter().map(Values::of).collect();
    let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(Values::as_array).collect();
    client.execute(statement, &params).await
}

/// Deletes one matching row per retraction (a table without a key).
async fn delete_each(
    client: &Client,
    statements: &Statements,
    columns: &[ArrayRef],
) -> std::result::Result<u64, tokio_postgres::Error> {
    let values: Vec<Values> = columns.iter().map(Values::of).collect();
    let rows = columns.first().map_or(0, |c| c.len());
    let mut deleted = 0;
    for row in 0..rows {
        let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v.scalar(row)).collect();
        deleted += client.execute(&statements.delete_one, &params).await?;
    }
    Ok(deleted)
}

/// A chunk's changes, grouped into statements.
#[derive(Debug, Default, PartialEq)]
struct Changes {
    /// With a key: the last change of each key decides; rows to upsert…
    upserts: Vec<u32>,
    /// …and keys to delete.
    deletes: Vec<u32>,
    /// Without a key: runs of inserts and of retractions, in order.
    runs: Vec<Run>,
}

#[derive(Debug, PartialEq)]
struct Run {
    insert: bool,
    rows: Vec<u32>,
}

impl Changes {
    fn of(chunk: &Chunk, key: &[usize]) -> Result<Changes> {
        let mut changes = Changes::default();
        if !key.is_empty() {
            for row in last_per_key(chunk, key)? {
                match chunk.op(row as usize) {
                    Op::Insert | Op::UpdateAfter => changes.upserts.push(row),
                    Op::UpdateBefore | Op::Delete => changes.deletes.push(row),
                }
            }
            return Ok(changes);
        }
        for row in 0..chunk.num_rows() as u32 {
            let insert = chunk.op(row as usize).is_accumulate();
            match changes.runs.last_mut() {
                Some(run) if run.insert == insert => run.rows.push(row),
                _ => changes.runs.push(Run {
                    insert,
                    rows: vec![row],
                }),
            }
        }
        Ok(changes)
    }
}

/// The last row of each key, in row order: upserting one key twice in a statement fails.
fn last_per_key(chunk: &Chunk, key: &[usize]) -> Result<Vec<u32>> {
    let columns: Vec<ArrayRef> = key
        .iter()
        .map(|&i| chunk.rows().column(i).clone())
        .collect();
    let fields = columns
        .iter()
        .map(|c| SortField::new(c.data_type().clone()))
        .collect();
    let rows = RowConverter::new(fields)?.convert_columns(&columns)?;
    let mut last: HashMap<&[u8], u32> = HashMap::with_capacity(rows.num_rows());
    for (i, row) in rows.iter().enumerate() {
        last.insert(row.data(), i as u32);
    }
    let mut winners: Vec<u32> = last.into_values().collect();
    winners.sort_unstable();
    Ok(winners)
}

impl SinkWriter for PostgresWriter {
    fn open<'a>(&'a mut self, _restored: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        async move { self.connected().await.map(|_| ()) }.boxed()
    }

    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        async move {
            self.write_changes(chunk).await?;
            if matches!(self.mode, TransactionMode::PerChunk) {
                self.commit().await?;
            }
            Ok(())
        }
        .boxed()
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        async move { self.commit().await.map(|()| Vec::new()) }.boxed()
    }

    fn finish(&mut self, _end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        self.commit().boxed()
    }
}

impl TransactionWriter for PostgresWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.write_changes(chunk).boxed()
    }

    fn prepare(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        async move {
            if !std::mem::take(&mut self.in_transaction) {
                return Ok(None);
            }
            let gid = match &self.mode {
                TransactionMode::Prepared { prefix, writer } => {
                    format!("{prefix}{writer}/{checkpoint}")
                }
                _ => return Err(self.connector.error("this writer does not prepare".into())),
            };
            self.execute(&format!("PREPARE TRANSACTION '{gid}'"), "preparing")
                .await?;
            Ok(Some(gid.into_bytes()))
        }
        .boxed()
    }

    fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
        async move {
            if std::mem::take(&mut self.in_transaction) {
                self.execute("ROLLBACK", "rolling back").await?;
            }
            Ok(())
        }
        .boxed()
    }

    /// Upserts wait on the locks of rows an earlier prepared transaction wrote, and
    /// deletes do not see them: only plain inserts are independent.
    fn depends_on_earlier(&self, chunk: &Chunk) -> bool {
        !self.connector.primary_key.is_empty() || !chunk.is_append_only()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, UInt8Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;

    fn chunk(keys: &[i64], ops: &[Op]) -> Chunk {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let rows = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(keys.to_vec()))]);
        let ops = UInt8Array::from(ops.iter().map(|o| *o as u8).collect::<Vec<_>>());
        Chunk::with_ops(rows.unwrap(), ops)
    }

    #[test]
    fn keyed_changes_keep_the_last_change_of_each_key() {
        use Op::*;
        let c = chunk(
            &[1, 2, 1, 1, 3, 2],
            &[Insert, Insert, UpdateBefore, UpdateAfter, Insert, Delete],
        );
        let changes = Changes::of(&c, &[0]).unwrap();
        assert_eq!(changes.upserts, vec![3, 4]);
        assert_eq!(changes.deletes, vec![5]);
        assert!(changes.runs.is_empty());
    }

    #[test]
    fn unkeyed_changes_keep_their_order_in_runs() {
        use Op::*;
        let c = chunk(
            &[1, 2, 1, 1, 3],
            &[Insert, Insert, UpdateBefore, UpdateAfter, Delete],
        );
        let changes = Changes::of(&c, &[]).unwrap();
        let runs: Vec<(bool, Vec<u32>)> = changes
            .runs
            .iter()
            .map(|r| (r.insert, r.rows.clone()))
            .collect();
        assert_eq!(
            runs,
            vec![
                (true, vec![0, 1]),
                (false, vec![2]),
                (true, vec![3]),
                (false, vec![4])
            ]
        );
    }

    #[test]
    fn an_append_only_chunk_into_a_keyed_table_upserts_the_last_row_per_key() {
        let c = Chunk::inserts(
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
                vec![Arc::new(Int64Array::from(vec![5, 5, 6]))],
            )
            .unwrap(),
        );
        let changes = Changes::of(&c, &[0]).unwrap();
        assert_eq!(changes.upserts, vec![1, 2]);
        assert!(changes.deletes.is_empty() && changes.runs.is_empty());
    }
}
