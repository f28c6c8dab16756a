//! How Python user-defined functions run: the interpreter, the files their modules come
//! from, and the limits put on each worker process.

use std::time::Duration;

/// The `python.*` options of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonConfig {
    /// The interpreter workers run (`python.executable`).
    pub executable: String,
    /// Files, directories and archives added to the workers' module path
    /// (`python.files`, comma-separated as in Flink).
    pub files: Vec<String>,
    /// How long one call may take before its worker is stopped and the task fails.
    pub timeout: Duration,
    /// The most memory (address space) one worker may map; unset: no limit.
    pub memory_limit: Option<usize>,
}

impl PythonConfig {
    pub(super) fn unset() -> Self {
        PythonConfig {
            executable: String::new(),
            files: Vec::new(),
            timeout: Duration::ZERO,
            memory_limit: None,
        }
    }
}

/// `python.files` as Flink writes it: paths separated by commas, blanks ignored.
pub(super) fn parse_files(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_split_at_commas() {
        assert_eq!(
            parse_files(" /a/udfs.py, /b/lib.zip ,,"),
            vec!["/a/udfs.py".to_string(), "/b/lib.zip".to_string()]
        );
        assert!(parse_files("").is_empty());
    }
}
