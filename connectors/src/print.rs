//! `'connector' = 'print'`: writes every change to standard output as Flink does,
//! `+I[1001, 7]`, `-U[...]`, `+U[...]`, `-D[...]`, prefixed with the subtask when the sink
//! runs in parallel.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use arrow::util::display::{ArrayFormatter, FormatOptions};
use eddy_common::Result;
use eddy_common::chunk::Chunk;
use eddy_common::event::StreamEnd;
use eddy_common::metrics::OperatorMetrics;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::throttle::{Throttle, pace};
use super::{Options, SinkContext, SinkWriter, TableConnector};

const KEYS: &[&str] = &["print-identifier", "standard-error", "rows-per-second"];

/// Configuration of a print table.
#[derive(Debug)]
pub struct PrintConnector {
    identifier: Option<String>,
    standard_error: bool,
    rows_per_second: Option<u64>,
}

impl PrintConnector {
    /// Validates the options.
    pub fn new(table: &str, values: &BTreeMap<String, String>) -> Result<Self> {
        let options = Options::validate(table, "print", values, KEYS, &[])?;
        Ok(PrintConnector {
            identifier: options.get("print-identifier").map(str::to_string),
            standard_error: options.flag("standard-error", false)?,
            rows_per_second: options.parse_opt("rows-per-second")?,
        })
    }
}

impl TableConnector for PrintConnector {
    fn name(&self) -> &'static str {
        "print"
    }

    fn is_sink(&self) -> bool {
        true
    }

    fn accepts_updates(&self) -> bool {
        true
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        let prefix = match (&self.identifier, context.parallelism > 1) {
            (Some(id), true) => format!("{id}:{}> ", context.subtask + 1),
            (Some(id), false) => format!("{id}> "),
            (None, true) => format!("{}> ", context.subtask + 1),
            (None, false) => String::new(),
        };
        Ok(Box::new(PrintWriter {
            prefix,
            standard_error: self.standard_error,
            metrics: context.metrics.clone(),
            text: String::new(),
            throttle: Throttle::new(self.rows_per_second),
        }))
    }
}

struct PrintWriter {
    prefix: String,
    standard_error: bool,
    metrics: std::sync::Arc<OperatorMetrics>,
    text: String,
    throttle: Option<Throttle>,
}

impl PrintWriter {
    fn print(&mut self, chunk: &Chunk) -> Result<()> {
        let options = FormatOptions::default().with_null("null");
        let formatters = chunk
            .rows()
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        self.text.clear();
        for row in 0..chunk.num_rows() {
            let _ = write!(self.text, "{}{}[", self.prefix, chunk.op(row).short_name());
            for (i, f) in formatters.iter().enumerate() {
                if i > 0 {
                    self.text.push_str(", ");
                }
                let _ = write!(self.text, "{}", f.value(row));
            }
            self.text.push_str("]\n");
        }
        let result = if self.standard_error {
            std::io::stderr().lock().write_all(self.text.as_bytes())
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(self.text.as_bytes())
                .and_then(|_| out.flush())
        };
        result?;
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        Ok(())
    }
}

impl SinkWriter for PrintWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        let result = self.print(chunk);
        let pause = pace(self.throttle.as_mut(), chunk.num_rows());
        async move {
            pause.await;
            result
        }
        .boxed()
    }

    fn finish(&mut self, _end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        async { Ok(()) }.boxed()
    }
}
