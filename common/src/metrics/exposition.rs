//! Metrics in the Prometheus text format (version 0.0.4), for `GET /metrics`.
//!
//! Metrics here are read when scraped, not kept in a registry: tasks come and go with
//! their jobs, so every scrape gathers [`Families`] from the live state and
//! `prometheus-client` encodes them.

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A label set: `(name, value)` pairs.
pub type Labels = Vec<(Cow<'static, str>, String)>;

/// One metric with its samples, one per label set.
#[derive(Debug)]
struct Family {
    /// Without `_total`: counters get it when encoded.
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels, f64)>,
}

/// The metrics of one scrape, in the order they were first named.
#[derive(Debug, Default)]
pub struct Families {
    families: Vec<Family>,
}

impl Families {
    /// Adds a sample of counter `name` (`_total` is appended when encoded).
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.family(name, help, MetricType::Counter)
            .push((labels, value));
    }

    /// Adds a sample of gauge `name`.
    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.family(name, help, MetricType::Gauge)
            .push((labels, value));
    }

    fn family(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: MetricType,
    ) -> &mut Vec<(Labels, f64)> {
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(index) => index,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[index].samples
    }

    /// The metrics in the Prometheus text format.
    pub fn render(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
            .expect("writing to a String cannot fail");
        text
    }
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            let mut metric =
                encoder.encode_descriptor(family.name, family.help, None, family.kind)?;
            for (labels, value) in &family.samples {
                let sample = metric.encode_family(labels)?;
                match family.kind {
                    MetricType::Counter => ConstCounter::new(*value).encode(sample)?,
                    _ => ConstGauge::new(*value).encode(sample)?,
                }
            }
        }
        Ok(())
    }
}

/// A label.
pub fn label(name: &'static str, value: impl ToString) -> (Cow<'static, str>, String) {
    (Cow::Borrowed(name), value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_total_and_labels_are_escaped() {
        let mut families = Families::default();
        families.counter(
            "eddy_task_records_in",
            "Rows in.",
            vec![label("vertex", "v0 \"x\"")],
            3.0,
        );
        families.counter(
            "eddy_task_records_in",
            "Rows in.",
            vec![label("vertex", "v1")],
            4.0,
        );
        families.gauge("eddy_job_up", "Up.", vec![], 1.0);
        let text = families.render();
        assert!(
            text.contains("# TYPE eddy_task_records_in_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("eddy_task_records_in_total{vertex=\"v0 \\\"x\\\"\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("eddy_task_records_in_total{vertex=\"v1\"} 4"),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE eddy_task_records_in_total").count(), 1);
        assert!(text.contains("eddy_job_up 1"), "{text}");
    }
}
