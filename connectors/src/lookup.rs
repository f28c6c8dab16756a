//! Lookups: reading a table's rows by key, for the table of a lookup join
//! (`JOIN t FOR SYSTEM_TIME AS OF o.proc_time`). A connector either looks keys up itself
//! (PostgreSQL: one query for a chunk's keys) or is read whole and kept in memory, read
//! again after a while (a filesystem table, as Flink's filesystem lookup does).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef};
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::{Options, SourceContext, SourceEvent, TableConnector};

/// How a table is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupKind {
    /// The connector looks keys up itself ([`TableConnector::create_lookup`]).
    Keyed,
    /// The table is read whole and kept, and read again after this long.
    FullScan {
        /// How long a read of the table is used.
        reload_after: Duration,
    },
}

/// What a lookup reader needs to know.
#[derive(Debug, Clone)]
pub struct LookupContext {
    /// The table looked up.
    pub table: String,
    /// Its columns (the rows a lookup returns).
    pub schema: SchemaRef,
    /// The columns (indices into `schema`) whose values are looked up.
    pub key_columns: Vec<usize>,
    /// Counters of the join.
    pub metrics: Arc<OperatorMetrics>,
}

/// Reads the rows of a table by key.
pub trait LookupReader: Send + Debug {
    /// The rows whose key columns equal one of `keys` (distinct keys, one array per key
    /// column, in the order of [`LookupContext::key_columns`]): the rows, and for each the
    /// index of the key it matches.
    fn lookup<'a>(
        &'a mut self,
        keys: &'a [ArrayRef],
    ) -> BoxFuture<'a, Result<(RecordBatch, Vec<u32>)>>;
}

pub use eddy_common::config::LookupCache as LookupCacheOptions;

/// The option keys of a keyed lookup's cache and retries.
pub const LOOKUP_KEYS: &[&str] = &[
    "lookup.cache",
    "lookup.partial-cache.max-rows",
    "lookup.partial-cache.expire-after-write",
    "lookup.partial-cache.expire-after-access",
    "lookup.partial-cache.caching-missing-key",
    "lookup.cache.max-rows",
    "lookup.cache.ttl",
    "lookup.cache.caching-missing-key",
    "lookup.max-retries",
];

/// The cache `options` ask for: `lookup.cache` = `'PARTIAL'` with its
/// `lookup.partial-cache.*` options (or the older `lookup.cache.max-rows` and
/// `lookup.cache.ttl`); none by default, as in Flink.
pub fn lookup_cache(options: &Options<'_>) -> Result<Option<LookupCacheOptions>> {
    let legacy_rows = options.parse_opt::<usize>("lookup.cache.max-rows")?;
    let kind = options
        .get("lookup.cache")
        .map(|k| k.trim().to_ascii_uppercase());
    match kind.as_deref() {
        None if legacy_rows.is_some() => Ok(Some(LookupCacheOptions {
            max_rows: legacy_rows.unwrap_or(usize::MAX),
            expire_after_write: options.duration_opt("lookup.cache.ttl")?,
            expire_after_access: None,
            cache_missing_keys: options.flag("lookup.cache.caching-missing-key", true)?,
        })),
        None | Some("NONE") => Ok(None),
        Some("PARTIAL") => {
            let cache = LookupCacheOptions {
                max_rows: options
                    .parse_opt::<usize>("lookup.partial-cache.max-rows")?
                    .unwrap_or(usize::MAX),
                expire_after_write: options
                    .duration_opt("lookup.partial-cache.expire-after-write")?,
                expire_after_access: options
                    .duration_opt("lookup.partial-cache.expire-after-access")?,
                cache_missing_keys: options
                    .flag("lookup.partial-cache.caching-missing-key", true)?,
            };
            if cache.max_rows == usize::MAX
                && cache.expire_after_write.is_none()
                && cache.expire_after_access.is_none()
            {
                return Err(options.error(
                    "'lookup.cache' = 'PARTIAL' needs one of 'lookup.partial-cache.max-rows', \
                     'lookup.partial-cache.expire-after-write' or \
                     'lookup.partial-cache.expire-after-access' (as in Flink)"
                        .into(),
                ));
            }
            Ok(Some(cache))
        }
        Some(other) => Err(options.error(format!(
            "option 'lookup.cache' = '{other}': expected NONE or PARTIAL"
        ))),
    }
}

/// A lookup that reads the whole table (through its source reader) and keeps it,
/// indexed by key; it reads the table again once `reload_after` has passed.
pub fn full_table_lookup(
    connector: Arc<dyn TableConnector>,
    context: LookupContext,
    reload_after: Duration,
) -> Result<Box<dyn LookupReader>> {
    let key_codec = RowConverter::new(
        context
            .key_columns
            .iter()
            .map(|c| SortField::new(context.schema.field(*c).data_type().clone()))
            .collect(),
    )?;
    Ok(Box::new(FullTable {
        connector,
        context,
        reload_after,
        key_codec,
        loaded: None,
    }))
}

#[derive(Debug)]
struct FullTable {
    connector: Arc<dyn TableConnector>,
    context: LookupContext,
    reload_after: Duration,
    key_codec: RowConverter,
    loaded: Option<Loaded>,
}

/// The table as read, and its rows by key.
#[derive(Debug)]
struct Loaded {
    at: Instant,
    rows: RecordBatch,
    by_key: HashMap<Box<[u8]>, Vec<u32>>,
}

impl FullTable {
    /// Reads every row of the table.
    async fn load(&self) -> Result<Loaded> {
        let source = SourceContext {
            table: self.context.table.clone(),
            schema: self.context.schema.clone(),
            subtask: 0,
            parallelism: 1,
            batch_size: 4096,
            metrics: self.context.metrics.clone(),
            completed: None,
            metadata: Vec::new(),
            columns_used: None,
            bounds: Vec::new(),
        };
        let mut reader = self.connector.create_reader(&source)?;
        reader.open().await?;
        let mut batches = Vec::new();
        while let Some(event) = reader.next().await? {
            match event {
                SourceEvent::Rows { rows, .. } => batches.push(rows.rows().clone()),
                SourceEvent::SplitEnd(_) => {}
                SourceEvent::Idle => {
                    return Err(EddyError::Connector {
                        table: self.context.table.clone(),
                        message: "a table looked up whole must be bounded, but its source \
                                  waits for more rows"
                            .into(),
                    });
                }
            }
        }
        let rows = concat_batches(&self.context.schema, &batches)?;
        let keys: Vec<ArrayRef> = self
            .context
            .key_columns
            .iter()
            .map(|c| rows.column(*c).clone())
            .collect();
        let encoded = self.key_codec.convert_columns(&keys)?;
        let mut by_key: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        for (i, key) in encoded.iter().enumerate() {
            // A NULL key matches nothing.
            if keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            by_key.entry(key.data().into()).or_default().push(i as u32);
        }
        Ok(Loaded {
            at: Instant::now(),
            rows,
            by_key,
        })
    }
}

impl LookupReader for FullTable {
    fn lookup<'a>(
        &'a mut self,
        keys: &'a [ArrayRef],
    ) -> BoxFuture<'a, Result<(RecordBatch, Vec<u32>)>> {
        async move {
            let stale = self
                .loaded
                .as_ref()
                .is_none_or(|l| l.at.elapsed() >= self.reload_after);
            if stale {
                self.loaded = Some(self.load().await?);
            }
            let loaded = self.loaded.as_ref().expect("loaded above");
            let encoded = self.key_codec.convert_columns(keys)?;
            let (mut rows, mut matched) = (Vec::new(), Vec::new());
            for (k, key) in encoded.iter().enumerate() {
                for row in loaded.by_key.get(key.data()).into_iter().flatten() {
                    rows.push(*row);
                    matched.push(k as u32);
                }
            }
            let rows = arrow::compute::take_record_batch(
                &loaded.rows,
                &arrow::array::UInt32Array::from(rows),
            )?;
            Ok((rows, matched))
        }
        .boxed()
    }
}
