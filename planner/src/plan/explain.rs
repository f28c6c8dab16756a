//! Renders a job graph as text.

use std::fmt::Write as _;

use super::{Changelog, JobGraph, Vertex, VertexOutput};

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
        let p = vertex.parallelism;
        for (i, op) in operators(vertex).iter().enumerate() {
            let input = match (i, feeding.is_empty()) {
                (0, true) => "none".to_string(),
                (0, false) => feeding.join(", "),
                _ => "forward (chained)".to_string(),
            };
            let _ = writeln!(
                out,
                "  {}  changelog={}  parallelism={p}  input={input}",
                op.description, op.changelog
            );
        }
        if let VertexOutput::Exchange {
            target,
            partitioning,
        } = &vertex.output
        {
            let _ = writeln!(out, "  -> {partitioning} to v{target}");
        }
    }
    out
}

/// An operator of a vertex as `EXPLAIN` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainedOperator {
    /// What it does, e.g. `Source: bid [nexmark]` or `GroupAggregate: ...`.
    pub description: String,
    /// The changes it emits (`append-only`, `retract`, `upsert`).
    pub changelog: String,
}

/// The operators of a vertex in order, its source and sink included.
pub fn operators(vertex: &Vertex) -> Vec<ExplainedOperator> {
    let explained = |description: String, changelog: String| ExplainedOperator {
        description,
        changelog,
    };
    let mut out = Vec::new();
    if let Some(source) = &vertex.source {
        let changelog = Changelog::of_source(source.connector.as_ref());
        let mut description = format!("Source: {} [{}]", source.table, source.connector.name());
        if !source.bounds.is_empty() {
            let bounds: Vec<String> = source.bounds.iter().map(|b| b.to_string()).collect();
            description.push_str(&format!(" (skips by statistics: {})", bounds.join(" AND ")));
        }
        out.push(explained(description, changelog.to_string()));
        for op in &source.scan_operators {
            out.push(explained(op.description.clone(), op.changelog.to_string()));
        }
        if source.watermark.is_some() {
            out.push(explained("WatermarkAssigner".into(), changelog.to_string()));
        }
    }
    for op in &vertex.operators {
        out.push(explained(op.description.clone(), op.changelog.to_string()));
    }
    if let VertexOutput::Sink(sink) = &vertex.output {
        out.push(explained(
            format!("Sink: {} [{}]", sink.table, sink.connector.name()),
            sink.changelog.to_string(),
        ));
    }
    out
}
