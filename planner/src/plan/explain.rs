//! Renders a job graph as text.

use std::fmt::Write as _;

use super::{JobGraph, VertexOutput};

/// One line per operator: what it is, the changes it emits, its parallelism and the
/// exchange feeding it.
pub fn render(graph: &JobGraph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== Streaming plan: {} ==", graph.config.name);
    for vertex in &graph.vertices {
        let feeding: Vec<String> = vertex
            .inputs
            .iter()
            .map(|input| match &graph.vertices[*input].output {
                VertexOutput::Exchange { partitioning, .. } => {
                    format!("{partitioning} from v{input}")
                }
                VertexOutput::Sink(_) => format!("v{input}"),
            })
            .collect();
        let _ = writeln!(
            out,
            "Vertex v{} (parallelism {}){}",
            vertex.id,
            vertex.parallelism,
            if feeding.is_empty() {
                String::new()
            } else {
                format!(" <- {}", feeding.join(", "))
            }
        );
        let mut input = if feeding.is_empty() {
            "none".to_string()
        } else {
            feeding.join(", ")
        };
        let p = vertex.parallelism;
        if let Some(source) = &vertex.source {
            let _ = writeln!(
                out,
                "  Source: {} [{}]  changelog=append-only  parallelism={p}  input=none",
                source.table,
                source.connector.name()
            );
            for op in &source.scan_operators {
                let _ = writeln!(
                    out,
                    "  {}  changelog={}  parallelism={p}  input=forward (chained)",
                    op.description, op.changelog
                );
            }
            if source.watermark.is_some() {
                let _ = writeln!(
                    out,
                    "  WatermarkAssigner  changelog=append-only  parallelism={p}  input=forward (chained)"
                );
            }
            input = "forward (chained)".into();
        }
        for op in &vertex.operators {
            let _ = writeln!(
                out,
                "  {}  changelog={}  parallelism={p}  input={input}",
                op.description, op.changelog
            );
            input = "forward (chained)".into();
        }
        match &vertex.output {
            VertexOutput::Sink(sink) => {
                let _ = writeln!(
                    out,
                    "  Sink: {} [{}]  changelog={}  parallelism={p}  input={input}",
                    sink.table,
                    sink.connector.name(),
                    sink.changelog
                );
            }
            VertexOutput::Exchange {
                target,
                partitioning,
            } => {
                let _ = writeln!(out, "  -> {partitioning} to v{target}");
            }
        }
    }
    out
}
