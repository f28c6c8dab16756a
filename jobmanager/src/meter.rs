//! Rates of a subtask's counters, from the samples its heartbeats carry: each rate is the
//! change over the last few seconds divided by the time between the samples.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use eddy_proto::v1 as pb;

/// How far back rates look.
const WINDOW: Duration = Duration::from_secs(5);

/// The recent samples of one subtask.
#[derive(Debug, Default)]
pub struct SubtaskMeter {
    samples: VecDeque<(Instant, pb::TaskCounters)>,
}

impl SubtaskMeter {
    /// Takes a sample heard at `now`.
    pub fn record(&mut self, counters: pb::TaskCounters, now: Instant) {
        self.samples.push_back((now, counters));
        while self.samples.len() > 2
            && self
                .samples
                .get(1)
                .is_some_and(|(at, _)| now.duration_since(*at) >= WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// The last sample's counters.
    pub fn latest(&self) -> Option<&pb::TaskCounters> {
        self.samples.back().map(|(_, c)| c)
    }

    /// The last sample with the rates over the window (zero before two samples).
    pub fn metrics(&self) -> pb::SubtaskMetrics {
        let Some((last_at, last)) = self.samples.back() else {
            return pb::SubtaskMetrics::default();
        };
        let mut metrics = pb::SubtaskMetrics {
            totals: Some(last.clone()),
            ..Default::default()
        };
        let (first_at, first) = self.samples.front().expect("a sample");
        let seconds = last_at.duration_since(*first_at).as_secs_f64();
        if seconds <= 0.0 {
            return metrics;
        }
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / seconds;
        metrics.records_in_per_second = rate(last.records_in, first.records_in);
        metrics.records_out_per_second = rate(last.records_out, first.records_out);
        metrics.bytes_in_per_second = rate(last.bytes_in, first.bytes_in);
        metrics.bytes_out_per_second = rate(last.bytes_out, first.bytes_out);
        let share = |now: u64, then: u64| (rate(now, then) / 1000.0).clamp(0.0, 1.0);
        metrics.busy_ratio = share(last.busy_ms, first.busy_ms);
        metrics.backpressured_ratio = share(last.backpressured_ms, first.backpressured_ms);
        metrics
    }
}

/// A vertex's metrics from its subtasks': counters and rates summed, busy and
/// backpressure the highest (the subtask that limits the vertex), watermarks the lowest.
pub fn vertex_metrics(subtasks: &[pb::SubtaskMetrics]) -> pb::SubtaskMetrics {
    let mut vertex = pb::SubtaskMetrics::default();
    let mut totals = pb::TaskCounters::default();
    for (i, s) in subtasks.iter().enumerate() {
        vertex.records_in_per_second += s.records_in_per_second;
        vertex.records_out_per_second += s.records_out_per_second;
        vertex.bytes_in_per_second += s.bytes_in_per_second;
        vertex.bytes_out_per_second += s.bytes_out_per_second;
        vertex.busy_ratio = vertex.busy_ratio.max(s.busy_ratio);
        vertex.backpressured_ratio = vertex.backpressured_ratio.max(s.backpressured_ratio);
        let t = s.totals.clone().unwrap_or_default();
        totals.records_in += t.records_in;
        totals.records_out += t.records_out;
        totals.bytes_in += t.bytes_in;
        totals.bytes_out += t.bytes_out;
        totals.busy_ms += t.busy_ms;
        totals.backpressured_ms += t.backpressured_ms;
        totals.late_records_dropped += t.late_records_dropped;
        totals.parse_errors_skipped += t.parse_errors_skipped;
        totals.state_bytes += t.state_bytes;
        totals.input_queue_permille = totals.input_queue_permille.max(t.input_queue_permille);
        totals.output_queue_permille = totals.output_queue_permille.max(t.output_queue_permille);
        // The vertex's watermark is its slowest subtask's: none until every one has one.
        let lowest = |a: Option<i64>, b: Option<i64>| match i {
            0 => b,
            _ => a.zip(b).map(|(a, b)| a.min(b)),
        };
        totals.watermark_in = lowest(totals.watermark_in, t.watermark_in);
        totals.watermark_out = lowest(totals.watermark_out, t.watermark_out);
    }
    vertex.totals = Some(totals);
    vertex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(records_out: u64, busy_ms: u64, backpressured_ms: u64) -> pb::TaskCounters {
        pb::TaskCounters {
            records_out,
            busy_ms,
            backpressured_ms,
            ..Default::default()
        }
    }

    #[test]
    fn rates_are_the_change_over_the_window() {
        let mut meter = SubtaskMeter::default();
        let start = Instant::now();
        assert_eq!(meter.metrics().records_out_per_second, 0.0);
        meter.record(counters(0, 0, 0), start);
        meter.record(counters(500, 100, 700), start + Duration::from_secs(1));
        meter.record(counters(1000, 200, 1400), start + Duration::from_secs(2));
        let m = meter.metrics();
        assert_eq!(m.records_out_per_second, 500.0);
        assert!((m.busy_ratio - 0.1).abs() < 1e-9);
        assert!((m.backpressured_ratio - 0.7).abs() < 1e-9);
        // Old samples leave the window.
        for s in 3..20u64 {
            meter.record(
                counters(1000 + s * 10, 0, 0),
                start + Duration::from_secs(s),
            );
        }
        assert!(meter.samples.len() <= 7, "{}", meter.samples.len());
        assert!((meter.metrics().records_out_per_second - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_vertex_sums_rates_and_takes_the_worst_subtask() {
        let a = pb::SubtaskMetrics {
            totals: Some(pb::TaskCounters {
                watermark_out: Some(10),
                ..Default::default()
            }),
            records_out_per_second: 3.0,
            backpressured_ratio: 0.2,
            ..Default::default()
        };
        let mut b = a.clone();
        b.backpressured_ratio = 0.9;
        b.totals.as_mut().unwrap().watermark_out = Some(7);
        let v = vertex_metrics(&[a.clone(), b]);
        assert_eq!(v.records_out_per_second, 6.0);
        assert_eq!(v.backpressured_ratio, 0.9);
        assert_eq!(v.totals.unwrap().watermark_out, Some(7));
        let mut c = a.clone();
        c.totals.as_mut().unwrap().watermark_out = None;
        assert_eq!(vertex_metrics(&[a, c]).totals.unwrap().watermark_out, None);
    }
}
