//! The reader of a lookup join's table, made on the TaskManager that runs the join: the
//! connector's own keyed lookup, or the whole table read and kept. Its queries are
//! asynchronous; the join, an operator called between awaits of its task, waits for each
//! chunk's lookup without holding up the other tasks of the runtime (`block_in_place`).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};
use eddy_connectors::lookup::{LookupContext, LookupKind, LookupReader, full_table_lookup};
use eddy_operators::join::Lookup;

use super::LookupTable;

/// A connector's lookup reader, waited for in place.
#[derive(Debug)]
pub struct BlockingLookup {
    reader: Box<dyn LookupReader>,
}

impl BlockingLookup {
    /// The reader of `table` (no I/O yet).
    pub fn open(table: &LookupTable, metrics: Arc<OperatorMetrics>) -> Result<Self> {
        let context = LookupContext {
            table: table.table.clone(),
            schema: table.schema.clone(),
            key_columns: table.key_columns.clone(),
            metrics,
        };
        let reader = match table.connector.lookup_kind() {
            Some(LookupKind::Keyed) => table.connector.create_lookup(&context)?,
            Some(LookupKind::FullScan { reload_after }) => {
                full_table_lookup(table.connector.clone(), context, reload_after)?
            }
            None => {
                return Err(EddyError::Plan(format!(
                    "table '{}' cannot be looked up",
                    table.table
                )));
            }
        };
        Ok(BlockingLookup { reader })
    }
}

impl Lookup for BlockingLookup {
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<(RecordBatch, Vec<u32>)> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            EddyError::Internal("a lookup join runs outside a Tokio runtime".into())
        })?;
        tokio::task::block_in_place(|| runtime.block_on(self.reader.lookup(keys)))
    }
}
