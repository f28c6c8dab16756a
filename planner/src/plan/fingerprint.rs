//! What a TaskManager checks before it runs a JobManager's job: that the graph it planned
//! from the same script is the JobManager's, operator by operator, and that its build keeps
//! state in the same formats. Two builds (a rolling upgrade) or a planner depending on
//! anything local would otherwise run different graphs on different nodes, silently.
//!
//! The fingerprint is text, compared line by line, so a refusal can name the first line
//! where the two differ: the `EXPLAIN` of the graph, the columns of each source and sink,
//! the settings that shape state (key groups, state TTL) and the state format versions.
//! It holds no option values, so no secret travels in it.

use std::fmt::Write as _;

use arrow::datatypes::SchemaRef;
use eddy_common::schema::sql_name;

use super::{JobGraph, VertexOutput};

/// A job graph as the JobManager and each TaskManager must both have planned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFingerprint {
    /// The build that planned it (Eddy's version).
    pub build: String,
    /// The graph, one line per item.
    pub plan: String,
    /// The state format versions of the build, `name=version` each.
    pub state_formats: String,
}

/// This build's name, as fingerprints carry it.
pub const BUILD: &str = concat!("eddy ", env!("CARGO_PKG_VERSION"));

impl JobGraph {
    /// The graph's fingerprint in this build.
    pub fn fingerprint(&self) -> PlanFingerprint {
        let mut plan = self.explain();
        let config = &self.config;
        let _ = writeln!(
            plan,
            "key groups {}; state TTL {:?}; batch size {}",
            config.max_parallelism, config.state_ttl, config.batch_size
        );
        for vertex in &self.vertices {
            if let Some(source) = &vertex.source {
                let _ = writeln!(
                    plan,
                    "v{} source {} reads {} metadata [{}] watermark {}",
                    vertex.id,
                    source.table,
                    columns(&source.schema),
                    source.metadata.join(", "),
                    source
                        .watermark
                        .as_ref()
                        .map_or("none".to_string(), |w| w.to_string())
                );
            }
            if let VertexOutput::Sink(sink) = &vertex.output {
                let _ = writeln!(
                    plan,
                    "v{} sink {} writes {} ({})",
                    vertex.id,
                    sink.table,
                    columns(&sink.schema),
                    sink.changelog
                );
            }
        }
        PlanFingerprint {
            build: BUILD.to_string(),
            plan,
            state_formats: state_formats(),
        }
    }
}

/// Every state format this build writes, `name=version`, space-separated.
pub fn state_formats() -> String {
    let mut formats = eddy_operators::state_formats();
    formats.extend(eddy_connectors::position_formats());
    formats.push(("checkpoint", eddy_common::checkpoint::SNAPSHOT_FORMAT));
    formats.sort_unstable();
    formats
        .iter()
        .map(|(name, version)| format!("{name}={version}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn columns(schema: &SchemaRef) -> String {
    let fields: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), sql_name(f.data_type())))
        .collect();
    format!("({})", fields.join(", "))
}

impl PlanFingerprint {
    /// Checks that `jobmanager`'s fingerprint is this one (this TaskManager's); the error
    /// names both builds and the first difference.
    pub fn check(&self, jobmanager: &PlanFingerprint) -> Result<(), String> {
        let builds = format!(
            "the JobManager runs {}, this TaskManager {}",
            jobmanager.build, self.build
        );
        if self.state_formats != jobmanager.state_formats {
            return Err(format!(
                "this TaskManager keeps state in other formats than the JobManager ({builds}): \
                 the JobManager's are [{}], this TaskManager's [{}]",
                jobmanager.state_formats, self.state_formats
            ));
        }
        if self.plan == jobmanager.plan {
            return Ok(());
        }
        let (theirs, ours) = (lines(&jobmanager.plan), lines(&self.plan));
        let at = theirs
            .iter()
            .zip(&ours)
            .position(|(a, b)| a != b)
            .unwrap_or(theirs.len().min(ours.len()));
        let line = |lines: &[&str]| match lines.get(at) {
            Some(line) => format!("`{}`", line.trim()),
            None => "nothing".to_string(),
        };
        Err(format!(
            "this TaskManager planned a different job graph than the JobManager ({builds}): at \
             line {} of the plan the JobManager has {} and this TaskManager {}",
            at + 1,
            line(&theirs),
            line(&ours)
        ))
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan_job;
    use crate::sql::compile;

    fn fingerprint(sql: &str) -> PlanFingerprint {
        plan_job(&compile(sql, &[], crate::PlanningContext::CHECKING).unwrap())
            .unwrap()
            .fingerprint()
    }

    const JOB: &str = "CREATE TABLE src (id BIGINT, ts TIMESTAMP(3),
          WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH ('connector' = 'datagen', 'number-of-rows' = '10');
        CREATE TABLE out (id BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
        INSERT INTO out SELECT id, COUNT(*) FROM src GROUP BY id;";

    #[test]
    fn the_same_script_gives_the_same_fingerprint() {
        let (a, b) = (fingerprint(JOB), fingerprint(JOB));
        assert_eq!(a, b);
        assert!(a.check(&b).is_ok());
        assert!(a.plan.contains("watermark"), "{}", a.plan);
        assert!(
            a.state_formats.contains("aggregate="),
            "{}",
            a.state_formats
        );
    }

    #[test]
    fn a_different_graph_or_state_format_is_named() {
        let ours = fingerprint(JOB);
        let other = fingerprint(&JOB.replace("COUNT(*)", "SUM(id)"));
        let error = ours.check(&other).unwrap_err();
        assert!(
            error.contains("at line")
                && error.contains("sum(src.id)")
                && error.contains("count(Int64(1))"),
            "{error}"
        );
        let mut older = ours.clone();
        older.build = "eddy 0.0.9".into();
        older.state_formats = older.state_formats.replace("aggregate=", "aggregate=9");
        let error = ours.check(&older).unwrap_err();
        assert!(
            error.contains("eddy 0.0.9") && error.contains(BUILD) && error.contains("formats"),
            "{error}"
        );
        let mut shorter = ours.clone();
        let sink = ours.plan.rfind(" sink ").unwrap();
        shorter
            .plan
            .truncate(ours.plan[..sink].rfind('\n').unwrap() + 1);
        let error = ours.check(&shorter).unwrap_err();
        assert!(error.contains("the JobManager has nothing"), "{error}");
    }
}
