//! A running job in the terminal: the per-vertex table of `eddy status` and `eddy top`, and
//! the progress line of `eddy run`.

use std::fmt::Write as _;

use eddy_proto::v1 as pb;

/// A count with a k/M/G suffix.
fn count(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.1}G", n / 1e9),
        n if n >= 1e6 => format!("{:.1}M", n / 1e6),
        n if n >= 1e4 => format!("{:.1}k", n / 1e3),
        n => format!("{n:.0}"),
    }
}

/// Event time as `HH:MM:SS.mmm` of its day (UTC), or `-`.
fn event_time(ms: Option<i64>) -> String {
    match ms {
        Some(ms) if (0..i64::MAX / 2).contains(&ms) => {
            let of_day = ms.rem_euclid(86_400_000);
            format!(
                "{:02}:{:02}:{:02}.{:03}",
                of_day / 3_600_000,
                of_day / 60_000 % 60,
                of_day / 1000 % 60,
                of_day % 1000
            )
        }
        Some(_) => "end".into(),
        None => "-".into(),
    }
}

/// One line per vertex: rates, busy and backpressure, watermark, state size.
pub fn vertex_table(job: &pb::JobInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<24} {:>3} {:>9} {:>9} {:>6} {:>9} {:>13} {:>10}",
        "VERTEX", "P", "IN/S", "OUT/S", "BUSY", "BACKPRES.", "WATERMARK", "STATE"
    );
    for v in &job.vertices {
        let m = v.metrics.clone().unwrap_or_default();
        let t = m.totals.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<24} {:>3} {:>9} {:>9} {:>5.0}% {:>8.0}% {:>13} {:>10}",
            v.name,
            v.parallelism,
            count(m.records_in_per_second),
            count(m.records_out_per_second),
            m.busy_ratio * 100.0,
            m.backpressured_ratio * 100.0,
            event_time(t.watermark_out),
            format!("{}B", count(t.state_bytes as f64)),
        );
    }
    out
}

/// The vertices no edge feeds: the sources.
fn sources(job: &pb::JobInfo) -> impl Iterator<Item = &pb::VertexInfo> {
    job.vertices
        .iter()
        .filter(|v| !job.edges.iter().any(|e| e.to_vertex == v.id))
}

/// `eddy run`'s progress: events read, events/s, watermark, last checkpoint.
pub fn progress_line(job: &pb::JobInfo) -> String {
    let (mut read, mut rate, mut watermark) = (0u64, 0.0, None::<i64>);
    for (i, v) in sources(job).enumerate() {
        let m = v.metrics.clone().unwrap_or_default();
        let t = m.totals.unwrap_or_default();
        read += t.records_out;
        rate += m.records_out_per_second;
        watermark = match i {
            0 => t.watermark_out,
            _ => watermark.zip(t.watermark_out).map(|(a, b)| a.min(b)),
        };
    }
    let last = job
        .checkpoints
        .iter()
        .rev()
        .find(|c| c.state == pb::CheckpointState::Completed as i32)
        .map_or("none".to_string(), |c| {
            format!("#{} ({} ms)", c.id, c.duration_ms)
        });
    format!(
        "read {} events, {}/s, watermark {}, last checkpoint {last}",
        count(read as f64),
        count(rate),
        event_time(watermark)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_sums_the_sources() {
        let vertex = |id: u32, out: u64, rate: f64, wm: Option<i64>| pb::VertexInfo {
            id,
            metrics: Some(pb::SubtaskMetrics {
                totals: Some(pb::TaskCounters {
                    records_out: out,
                    watermark_out: wm,
                    ..Default::default()
                }),
                records_out_per_second: rate,
                ..Default::default()
            }),
            ..Default::default()
        };
        let job = pb::JobInfo {
            vertices: vec![
                vertex(0, 20_000, 1000.0, Some(3_723_004)),
                vertex(1, 5, 10.0, Some(9_000_000)),
                vertex(2, 7, 10.0, None),
            ],
            edges: vec![pb::EdgeInfo {
                from_vertex: 0,
                to_vertex: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            progress_line(&job),
            "read 20.0k events, 1010/s, watermark 01:02:03.004, last checkpoint none"
        );
        assert!(vertex_table(&job).lines().count() == 4);
    }
}
