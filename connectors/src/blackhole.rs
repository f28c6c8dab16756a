//! `'connector' = 'blackhole'`: discards every row (for benchmarks). With
//! `'rows-per-second'` it takes rows no faster than that, to make a deliberately slow sink.

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_common::Result;
use eddy_common::chunk::Chunk;
use eddy_common::event::StreamEnd;
use eddy_common::metrics::OperatorMetrics;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::throttle::{Throttle, pace};
use super::{Options, SinkContext, SinkWriter, TableConnector};

/// A sink that keeps nothing.
#[derive(Debug)]
pub struct BlackholeConnector {
    rows_per_second: Option<u64>,
}

impl BlackholeConnector {
    /// Validates the options.
    pub fn new(table: &str, values: &BTreeMap<String, String>) -> Result<Self> {
        let options = Options::validate(table, "blackhole", values, &["rows-per-second"], &[])?;
        let rows_per_second = options
            .parse_opt::<u64>("rows-per-second")?
            .filter(|r| *r > 0);
        Ok(BlackholeConnector { rows_per_second })
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
            throttle: Throttle::new(self.rows_per_second),
        }))
    }
}

struct BlackholeWriter {
    metrics: Arc<OperatorMetrics>,
    throttle: Option<Throttle>,
}

impl SinkWriter for BlackholeWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        let pause = pace(self.throttle.as_mut(), chunk.num_rows());
        async move {
            pause.await;
            Ok(())
        }
        .boxed()
    }

    fn finish(&mut self, _end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        async { Ok(()) }.boxed()
    }
}
