//! What the source asks PostgreSQL over an ordinary connection: the watched table's
//! columns, key and replica identity; the publication and replication slot (made when
//! missing, dropped when the job is cancelled); and the snapshot's chunks.

use tokio_postgres::Client;

use super::lsn::Lsn;
use super::protocol::quote_literal;
use super::snapshot::{ChunkMark, Key, KeyOrder, TransactionSnapshot};
use super::values::{SourceColumn, is_integer};
use crate::postgres::quote_identifier;

/// The comment Eddy puts on a publication it creates, so cancelling drops only those.
const CREATED_BY_EDDY: &str = "created by Eddy's postgres-cdc source";

/// The watched table as the catalog describes it.
#[derive(Debug, Clone)]
pub(crate) struct TableDescription {
    pub columns: Vec<SourceColumn>,
    /// The primary key's columns, in key order.
    pub primary_key: Vec<String>,
    /// `d`, `n`, `f` or `i`, as `pg_class.relreplident`.
    pub replica_identity: char,
    /// Whether each column can be compared with `COLLATE "C"`.
    collatable: Vec<bool>,
}

impl TableDescription {
    pub fn column(&self, name: &str) -> Option<&SourceColumn> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// How each key column is ordered, or why a column cannot split the snapshot.
    pub fn key_orders(&self, key: &[String]) -> Result<Vec<KeyOrder>, String> {
        key.iter()
            .map(|name| {
                let column = self
                    .column(name)
                    .ok_or_else(|| format!("no column '{name}'"))?;
                if is_integer(column.type_oid) {
                    return Ok(KeyOrder::Integer);
                }
                // Strings, dates and times, booleans, UUIDs: their text sorts as they do.
                match column.category {
                    'S' | 'D' | 'B' | 'U' if column.type_name != "jsonb" => Ok(KeyOrder::Text),
                    _ => Err(format!(
                        "the snapshot is read in primary-key order and key column '{name}' \
                         ({}) cannot be ordered by it; use 'scan.startup.mode' = \
                         'latest-offset'",
                        column.type_name
                    )),
                }
            })
            .collect()
    }
}

/// Reads the table's description; `None` if there is no such table.
pub(crate) async fn describe(
    client: &Client,
    schema: &str,
    table: &str,
) -> Result<Option<TableDescription>, tokio_postgres::Error> {
    let found = client
        .query_opt(
            "SELECT c.oid, c.relreplident::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&schema, &table],
        )
        .await?;
    let Some(found) = found else {
        return Ok(None);
    };
    let oid: u32 = found.get(0);
    let replica_identity: String = found.get(1);
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod), \
             t.typcategory::text, t.typcollation <> 0 \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )
        .await?;
    let columns = rows
        .iter()
        .map(|row| SourceColumn {
            name: row.get(0),
            type_oid: row.get(1),
            type_name: row.get(2),
            category: row.get::<_, String>(3).chars().next().unwrap_or('X'),
        })
        .collect();
    let collatable = rows.iter().map(|row| row.get(4)).collect();
    let key = client
        .query(
            "SELECT a.attname::text FROM pg_index i \
             JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.n",
            &[&oid],
        )
        .await?;
    Ok(Some(TableDescription {
        columns,
        primary_key: key.iter().map(|row| row.get(0)).collect(),
        replica_identity: replica_identity.chars().next().unwrap_or('d'),
        collatable,
    }))
}

/// What is known of a replication slot.
#[derive(Debug, Clone)]
pub(crate) struct SlotInfo {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active_pid: Option<i32>,
    pub confirmed_flush: Option<Lsn>,
}

/// The slot named `slot`, if it exists.
pub(crate) async fn slot(
    client: &Client,
    slot: &str,
) -> Result<Option<SlotInfo>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|row| SlotInfo {
        plugin: row.get(0),
        database: row.get(1),
        active_pid: row.get(2),
        confirmed_flush: row
            .get::<_, Option<String>>(3)
            .and_then(|lsn| lsn.parse().ok()),
    }))
}

/// Creates a logical slot for pgoutput; returns where its stream begins.
pub(crate) async fn create_slot(client: &Client, slot: &str) -> Result<Lsn, String> {
    slot_position(
        client,
        "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
        slot,
    )
    .await
}

/// Moves an idle slot to the end of the WAL (its changes up to there are skipped);
/// returns its new position.
pub(crate) async fn advance_slot(client: &Client, slot: &str) -> Result<Lsn, String> {
    slot_position(
        client,
        "SELECT end_lsn::text FROM pg_replication_slot_advance($1, pg_current_wal_lsn())",
        slot,
    )
    .await
}

/// Runs a slot function on `slot` whose one value is a WAL position.
async fn slot_position(client: &Client, statement: &str, slot: &str) -> Result<Lsn, String> {
    let row = client
        .query_one(statement, &[&slot])
        .await
        .map_err(|e| describe_error(&e))?;
    row.get::<_, String>(0).parse()
}

/// Drops a slot, ending the session that holds it first.
pub(crate) async fn drop_slot(client: &Client, slot: &str) -> Result<bool, tokio_postgres::Error> {
    client
        .execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE slot_name = $1 AND active_pid IS NOT NULL",
            &[&slot],
        )
        .await?;
    let dropped = client
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(dropped > 0)
}

/// Whether publication `name` exists, and whether it publishes `schema.table`.
pub(crate) async fn publication(
    client: &Client,
    name: &str,
    schema: &str,
    table: &str,
) -> Result<Option<bool>, tokio_postgres::Error> {
    let exists = client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        return Ok(None);
    }
    let covers = client
        .query_opt(
            "SELECT 1 FROM pg_publication_tables \
             WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&name, &schema, &table],
        )
        .await?
        .is_some();
    Ok(Some(covers))
}

/// Creates a publication of the one table, marked as Eddy's.
pub(crate) async fn create_publication(
    client: &Client,
    name: &str,
    schema: &str,
    table: &str,
) -> Result<(), tokio_postgres::Error> {
    let publication = quote_identifier(name);
    client
        // Committed synchronously, so that its commit is in the flushed WAL a slot is then
        // moved to: pgoutput reads the publication as of each change it decodes, and a
        // slot moved to before the commit (left in the WAL buffers under
        // `synchronous_commit = off`) would not find it.
        .batch_execute(&format!(
            "BEGIN; SET LOCAL synchronous_commit = on; \
             CREATE PUBLICATION {publication} FOR TABLE {}.{}; \
             COMMENT ON PUBLICATION {publication} IS {}; COMMIT",
            quote_identifier(schema),
            quote_identifier(table),
            quote_literal(CREATED_BY_EDDY),
        ))
        .await
}

/// Drops publication `name` if Eddy created it; returns whether it did.
pub(crate) async fn drop_own_publication(
    client: &Client,
    name: &str,
) -> Result<bool, tokio_postgres::Error> {
    let own = client
        .query_opt(
            "SELECT 1 FROM pg_publication p \
             WHERE p.pubname = $1 AND obj_description(p.oid, 'pg_publication') = $2",
            &[&name, &CREATED_BY_EDDY],
        )
        .await?
        .is_some();
    if own {
        client
            .batch_execute(&format!("DROP PUBLICATION {}", quote_identifier(name)))
            .await?;
    }
    Ok(own)
}

/// One chunk of the snapshot: its rows' texts (in the table's column order) and its mark.
pub(crate) struct Chunk {
    pub rows: Vec<tokio_postgres::Row>,
    pub mark: ChunkMark,
}

/// How the snapshot's chunks are read: the statement, and where each key column is in it.
#[derive(Debug, Clone)]
pub(crate) struct ChunkQuery {
    first: String,
    after: String,
    /// Positions of the key columns among the selected ones.
    pub key_positions: Vec<usize>,
}

impl ChunkQuery {
    /// Selects `columns` (as text) of `schema.table` in `key` order, `size` rows a chunk.
    pub fn new(
        description: &TableDescription,
        schema: &str,
        table: &str,
        columns: &[String],
        key: &[String],
        size: usize,
    ) -> Self {
        let select = columns
            .iter()
            .map(|c| format!("t.{}::text", quote_identifier(c)))
            .collect::<Vec<_>>()
            .join(", ");
        let collated = |name: &String, expression: String| {
            let index = description.columns.iter().position(|c| &c.name == name);
            match index.is_some_and(|i| description.collatable[i]) {
                true => format!("{expression} COLLATE \"C\""),
                false => expression,
            }
        };
        // Qualified: an output column (`"id"::text` is named `id`) would otherwise be
        // what ORDER BY sorts by.
        let ordered: Vec<String> = key
            .iter()
            .map(|k| collated(k, format!("t.{}", quote_identifier(k))))
            .collect();
        let bounds: Vec<String> = key
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let column = description.column(k).expect("key columns exist");
                collated(k, format!("${}::text::{}", i + 1, column.type_name))
            })
            .collect();
        let from = format!(
            "{}.{} AS t",
            quote_identifier(schema),
            quote_identifier(table)
        );
        let order = ordered.join(", ");
        ChunkQuery {
            first: format!("SELECT {select} FROM {from} ORDER BY {order} LIMIT {size}"),
            after: format!(
                "SELECT {select} FROM {from} WHERE ({order}) > ({}) ORDER BY {order} LIMIT {size}",
                bounds.join(", ")
            ),
            key_positions: key
                .iter()
                .map(|k| columns.iter().position(|c| c == k).expect("key selected"))
                .collect(),
        }
    }

    /// Reads the chunk after `after` (from the start: `None`) in a transaction of its own.
    pub async fn read(
        &self,
        client: &mut Client,
        after: Option<&Key>,
        size: usize,
    ) -> Result<Chunk, ChunkError> {
        let transaction = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let snapshot: String = transaction
            .query_one("SELECT pg_current_snapshot()::text", &[])
            .await?
            .get(0);
        let rows = match after {
            None => transaction.query(&self.first, &[]).await?,
            Some(key) => {
                let texts: Vec<String> = key
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = texts
                    .iter()
                    .map(|t| t as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                transaction.query(&self.after, &params).await?
            }
        };
        // Where WAL is inserted, not where it is written: with `synchronous_commit = off`
        // a transaction the read saw may have its commit still in the WAL buffers, past
        // the written position, and the stream must not forget this chunk before it.
        let wal_after: String = transaction
            .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
            .await?
            .get(0);
        transaction.commit().await?;
        let last = match rows.len() < size {
            true => None,
            false => rows.last().map(|row| self.key_of(row)),
        };
        Ok(Chunk {
            mark: ChunkMark {
                last,
                snapshot: TransactionSnapshot::parse(&snapshot).map_err(ChunkError::Malformed)?,
                wal_after: wal_after.parse().map_err(ChunkError::Malformed)?,
            },
            rows,
        })
    }

    /// The key of a row read by a chunk.
    pub fn key_of(&self, row: &tokio_postgres::Row) -> Key {
        self.key_positions
            .iter()
            .map(|i| {
                row.get::<_, Option<&str>>(*i)
                    .unwrap_or_default()
                    .as_bytes()
                    .to_vec()
            })
            .collect()
    }
}

/// Why a chunk could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChunkError {
    /// The server failed the read.
    #[error("{}", describe_error(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// The server's answer made no sense.
    #[error("{0}")]
    Malformed(String),
}

/// A PostgreSQL error's code and message.
fn describe_error(e: &tokio_postgres::Error) -> String {
    crate::postgres::error_detail(e).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, type_oid: u32, type_name: &str, category: char) -> SourceColumn {
        SourceColumn {
            name: name.into(),
            type_oid,
            type_name: type_name.into(),
            category,
        }
    }

    #[test]
    fn chunks_order_by_the_table_columns_with_text_keys_in_byte_order() {
        let description = TableDescription {
            columns: vec![
                column("region", 25, "text", 'S'),
                column("id", 20, "bigint", 'N'),
                column("note", 25, "text", 'S'),
            ],
            primary_key: vec!["region".into(), "id".into()],
            replica_identity: 'f',
            collatable: vec![true, false, true],
        };
        let key = ["region".to_string(), "id".to_string()];
        let columns = ["id".to_string(), "region".to_string(), "note".to_string()];
        let query = ChunkQuery::new(&description, "public", "orders", &columns, &key, 100);
        // Qualified: the selected `"id"::text` is also named `id`, and ORDER BY would take
        // the output column (sorting numbers as text) if it were not.
        assert_eq!(
            query.after,
            "SELECT t.\"id\"::text, t.\"region\"::text, t.\"note\"::text FROM \"public\".\"orders\" \
             AS t WHERE (t.\"region\" COLLATE \"C\", t.\"id\") > ($1::text::text COLLATE \"C\", \
             $2::text::bigint) ORDER BY t.\"region\" COLLATE \"C\", t.\"id\" LIMIT 100"
        );
        assert_eq!(query.key_positions, [1, 0]);
        assert_eq!(
            description.key_orders(&key),
            Ok(vec![KeyOrder::Text, KeyOrder::Integer])
        );
        let numeric = TableDescription {
            columns: vec![column("amount", 1700, "numeric", 'N')],
            primary_key: vec!["amount".into()],
            replica_identity: 'd',
            collatable: vec![false],
        };
        assert!(numeric.key_orders(&["amount".into()]).is_err());
    }
}
