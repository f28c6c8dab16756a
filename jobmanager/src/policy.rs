//! What a cluster lets a submitted job do: where its connectors and checkpoints may read
//! and write, which connectors it may use, how large and wide it may be, how many jobs a
//! user may run, and that it names secrets by reference instead of writing them out.
//! Checked at submission, so a refused job never runs; the error says why.

use std::path::{Path, PathBuf};

use eddy_common::object_storage::lexically_normal;
use eddy_common::secrets::{Reference, is_written_out};
use eddy_planner::JobGraph;

/// A cluster's rules for submitted jobs.
#[derive(Debug, Clone)]
pub struct SubmitPolicy {
    /// The largest SQL script taken, in bytes.
    pub max_sql_bytes: usize,
    /// The largest parallelism of any vertex.
    pub max_parallelism: usize,
    /// Jobs one user (token name) may have unfinished at once, if limited.
    pub max_jobs_per_user: Option<usize>,
    /// Where jobs may read and write (table paths, checkpoint and savepoint directories,
    /// `${file:}` secrets): local path prefixes and `s3://bucket/prefix` prefixes. `None`
    /// allows everything.
    pub allowed_locations: Option<Vec<String>>,
    /// Connectors jobs may not use.
    pub forbidden_connectors: Vec<String>,
    /// Whether secret options may hold the secret itself instead of a `${env:}` or
    /// `${file:}` reference (only where the job is never stored: `eddy run`).
    pub allow_literal_secrets: bool,
    /// The prefix of the environment variables `${env:}` may name (a job must not read,
    /// say, the TaskManagers' own cloud credentials into an option it sends elsewhere);
    /// empty: any.
    pub secret_env_prefix: String,
}

/// The default [`SubmitPolicy::secret_env_prefix`].
pub const SECRET_ENV_PREFIX: &str = "EDDY_SECRET_";
/// The default [`SubmitPolicy::max_sql_bytes`].
pub const MAX_SQL_BYTES: usize = 1 << 20;
/// The default [`SubmitPolicy::max_parallelism`].
pub const MAX_PARALLELISM: usize = 1024;

impl Default for SubmitPolicy {
    fn default() -> Self {
        SubmitPolicy {
            max_sql_bytes: MAX_SQL_BYTES,
            max_parallelism: MAX_PARALLELISM,
            max_jobs_per_user: None,
            allowed_locations: None,
            forbidden_connectors: Vec::new(),
            allow_literal_secrets: false,
            secret_env_prefix: SECRET_ENV_PREFIX.into(),
        }
    }
}

/// Why a job was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused by the cluster's policy: {0}")]
pub struct PolicyViolation(pub String);

impl SubmitPolicy {
    /// Checks a script's size before it is parsed.
    pub fn check_text(&self, sql: &str) -> Result<(), PolicyViolation> {
        if sql.len() > self.max_sql_bytes {
            return Err(PolicyViolation(format!(
                "the script is {} bytes, above the limit of {} (--max-sql-bytes)",
                sql.len(),
                self.max_sql_bytes
            )));
        }
        Ok(())
    }

    /// Checks a planned job: its parallelism, connectors, locations and secrets.
    pub fn check_plan(
        &self,
        graph: &JobGraph,
        restore_path: Option<&str>,
    ) -> Result<(), PolicyViolation> {
        if let Some(v) = graph
            .vertices
            .iter()
            .find(|v| v.parallelism > self.max_parallelism)
        {
            return Err(PolicyViolation(format!(
                "vertex v{} has parallelism {}, above the limit of {} (--max-parallelism)",
                v.id, v.parallelism, self.max_parallelism
            )));
        }
        for table in &graph.tables {
            let connector = table.connector.name();
            let at = format!("table '{}' (line {})", table.name, table.location.line);
            if self.forbidden_connectors.iter().any(|c| c == connector) {
                return Err(PolicyViolation(format!(
                    "{at}: the '{connector}' connector is not allowed on this cluster"
                )));
            }
            if let Some(location) = table.connector.storage_location() {
                self.check_location(&at, location)?;
            }
            for (key, value) in &table.options {
                self.check_option(&at, key, value)?;
            }
        }
        let checkpoints = &graph.config.checkpoints;
        if let Some(dir) = &checkpoints.directory {
            self.check_location("execution.checkpointing.dir", dir)?;
        }
        if let Some(path) = restore_path {
            self.check_location("the savepoint to restore", path)?;
        }
        Ok(())
    }

    fn check_option(&self, at: &str, key: &str, value: &str) -> Result<(), PolicyViolation> {
        match Reference::parse(value) {
            Some(Reference::File(path)) => {
                self.check_location(&format!("{at}, option '{key}'"), path)
            }
            Some(Reference::Env(name)) if !name.starts_with(&self.secret_env_prefix) => {
                Err(PolicyViolation(format!(
                    "{at}, option '{key}': jobs may only name environment variables starting \
                     with '{}' (--secret-env-prefix), not '{name}'",
                    self.secret_env_prefix
                )))
            }
            Some(Reference::Env(_)) => Ok(()),
            None if is_written_out(key, value)
                && !self.allow_literal_secrets
                && !value.is_empty() =>
            {
                Err(PolicyViolation(format!(
                    "{at}: option '{key}' holds a secret written out; jobs are stored and \
                     shown, so write it as '${{env:NAME}}' or '${{file:/path}}', resolved on \
                     the TaskManagers"
                )))
            }
            None => Ok(()),
        }
    }

    /// Checks that `location` lies under an allowed prefix.
    pub fn check_location(&self, what: &str, location: &str) -> Result<(), PolicyViolation> {
        let Some(allowed) = &self.allowed_locations else {
            return Ok(());
        };
        let target = Place::of(location);
        if allowed
            .iter()
            .any(|prefix| Place::of(prefix).contains(&target))
        {
            return Ok(());
        }
        Err(PolicyViolation(format!(
            "{what}: '{location}' is outside the locations jobs may use ({})",
            allowed.join(", ")
        )))
    }

    /// Checks that `user`, who has `running` unfinished jobs, may submit one more.
    pub fn check_jobs_of(&self, user: &str, running: usize) -> Result<(), PolicyViolation> {
        match self.max_jobs_per_user {
            Some(max) if running >= max => Err(PolicyViolation(format!(
                "'{user}' already has {running} unfinished jobs, the limit (--max-jobs-per-user)"
            ))),
            _ => Ok(()),
        }
    }
}

/// A location, normalised for comparing prefixes.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// A local path: absolute, `..` and `.` resolved, symbolic links of its existing part
    /// followed.
    Local(PathBuf),
    /// An object store URL: scheme and bucket, then the key's segments.
    Url {
        scheme: String,
        segments: Vec<String>,
    },
}

impl Place {
    fn of(location: &str) -> Place {
        if let Some((scheme, rest)) = location.split_once("://")
            && scheme != "file"
        {
            let mut segments = Vec::new();
            for segment in rest.split('/').filter(|s| !s.is_empty() && *s != ".") {
                match segment {
                    ".." => {
                        segments.pop();
                    }
                    s => segments.push(s.to_string()),
                }
            }
            return Place::Url {
                scheme: scheme.to_ascii_lowercase(),
                segments,
            };
        }
        let local = location.strip_prefix("file://").unwrap_or(location);
        Place::Local(real_path(Path::new(local)))
    }

    fn contains(&self, other: &Place) -> bool {
        match (self, other) {
            (Place::Local(prefix), Place::Local(path)) => path.starts_with(prefix),
            (
                Place::Url { scheme, segments },
                Place::Url {
                    scheme: other_scheme,
                    segments: other_segments,
                },
            ) => scheme == other_scheme && other_segments.starts_with(segments),
            _ => false,
        }
    }
}

/// `path` made absolute with `..` resolved, and its longest existing ancestor replaced by
/// its canonical form (symbolic links followed), so a link out of a prefix is seen.
fn real_path(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let normal = lexically_normal(&absolute);
    let mut existing = normal.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confined(prefixes: &[&str]) -> SubmitPolicy {
        SubmitPolicy {
            allowed_locations: Some(prefixes.iter().map(|p| p.to_string()).collect()),
            ..SubmitPolicy::default()
        }
    }

    #[test]
    fn locations_are_confined_to_prefixes() {
        let dir = std::env::temp_dir().join(format!("eddy-policy-{}", std::process::id()));
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::os::unix::fs::symlink("/etc", data.join("etc-link")).unwrap();
        let data_text = data.display().to_string();
        let policy = confined(&[&data_text, "s3://bucket/jobs"]);
        let ok = |l: &str| policy.check_location("t", l).is_ok();
        assert!(ok(&format!("{data_text}/out")));
        assert!(ok(&format!("file://{data_text}/new/dir/file.csv")));
        assert!(ok("s3://bucket/jobs/a/b"));
        assert!(!ok("/etc/passwd"));
        assert!(!ok(&format!("{data_text}/../../x")));
        assert!(
            !ok(&format!("{data_text}-other/x")),
            "a prefix is whole components"
        );
        assert!(
            !ok(&format!("{data_text}/etc-link/passwd")),
            "a symlink out is followed"
        );
        assert!(!ok("s3://bucket/jobs/../other"));
        assert!(!ok("s3://bucket/jobsx"));
        assert!(!ok("s3://other/jobs"));
        let error = policy
            .check_location("table 'x'", "/etc/passwd")
            .unwrap_err();
        assert!(
            error.to_string().contains("'/etc/passwd' is outside"),
            "{error}"
        );
        assert!(
            SubmitPolicy::default()
                .check_location("t", "/etc/passwd")
                .is_ok()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn limits_are_enforced() {
        let policy = SubmitPolicy {
            max_sql_bytes: 10,
            max_jobs_per_user: Some(2),
            ..SubmitPolicy::default()
        };
        assert!(policy.check_text("SELECT 1").is_ok());
        assert!(policy.check_text("SELECT 1234567").is_err());
        assert!(policy.check_jobs_of("alice", 1).is_ok());
        let error = policy.check_jobs_of("alice", 2).unwrap_err().to_string();
        assert!(error.contains("'alice' already has 2"), "{error}");
    }
}
