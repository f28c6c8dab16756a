//! `'connector' = 'blackhole'`: discards every row (for benchmarks).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Options, SinkContext, SinkWriter, TableConnector};
use crate::Result;
use crate::chunk::Chunk;
use crate::metrics::OperatorMetrics;

/// A sink that keeps nothing.
#[derive(Debug)]
pub struct BlackholeConnector;

impl BlackholeConnector {
    /// Validates that no options are given.
    pub fn new(table: &str, values: &BTreeMap<String, String>) -> Result<Self> {
        Options::validate(table, "blackhole", values, &[], &[])?;
        Ok(BlackholeConnector)
    }
}

impl TableConnector for BlackholeConnector {
    fn name(&self) -> &'static str {
        "blackhole"
    }

    fn is_sink(&self) -> bool {
        true
    }

    fn accepts_updates(&self) -> bool {
        true
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(BlackholeWriter {
            metrics: context.metrics.clone(),
        }))
    }
}

struct BlackholeWriter {
    metrics: Arc<OperatorMetrics>,
}

impl SinkWriter for BlackholeWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        async { Ok(()) }.boxed()
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<()>> {
        async { Ok(()) }.boxed()
    }
}
