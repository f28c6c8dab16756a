//! The ids that name a job's runs and tasks, as small types instead of strings and tuples.

use std::fmt;
use std::str::FromStr;

/// One run (attempt) of a job: every deployment of a job is a new execution, and messages
/// of an earlier one are fenced off by it. Written `{job}.{attempt}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId {
    /// The job's id.
    pub job: String,
    /// The attempt, counting from 1 (0: a run outside a cluster's bookkeeping).
    pub attempt: u32,
}

impl ExecutionId {
    /// Attempt `attempt` of job `job`.
    pub fn new(job: impl Into<String>, attempt: u32) -> Self {
        ExecutionId {
            job: job.into(),
            attempt,
        }
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.job, self.attempt)
    }
}

/// An execution id that is not `{job}.{attempt}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not an execution id ({{job}}.{{attempt}})")]
pub struct BadExecutionId(pub String);

impl FromStr for ExecutionId {
    type Err = BadExecutionId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadExecutionId(text.to_string());
        let (job, attempt) = text.rsplit_once('.').ok_or_else(bad)?;
        if job.is_empty() {
            return Err(bad());
        }
        Ok(ExecutionId::new(job, attempt.parse().map_err(|_| bad())?))
    }
}

/// One parallel instance of a vertex of a job graph: subtask `subtask` of vertex `vertex`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey {
    /// The vertex's index in the job graph.
    pub vertex: usize,
    /// The subtask's index, below the vertex's parallelism.
    pub subtask: usize,
}

impl TaskKey {
    /// Subtask `subtask` of vertex `vertex`.
    pub fn new(vertex: usize, subtask: usize) -> Self {
        TaskKey { vertex, subtask }
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}[{}]", self.vertex, self.subtask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_execution_id_reads_back_what_it_writes() {
        let id = ExecutionId::new("0001a2b3c4d5e6f7", 12);
        assert_eq!(id.to_string(), "0001a2b3c4d5e6f7.12");
        assert_eq!(id.to_string().parse::<ExecutionId>(), Ok(id));
    }

    #[test]
    fn malformed_execution_ids_are_refused() {
        for text in ["", "job", ".3", "job.", "job.x", "job.-1"] {
            assert!(text.parse::<ExecutionId>().is_err(), "{text}");
        }
        // Only the last dot separates the attempt.
        assert_eq!(
            "a.b.7".parse::<ExecutionId>(),
            Ok(ExecutionId::new("a.b", 7))
        );
    }
}
