//! Helpers: scratch directories, running `eddy`, and applying a printed changelog.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `eddy` binary built for these tests; its log level is `EDDY_TEST_LOG` (default
/// `warn`), e.g. `EDDY_TEST_LOG=info,eddy_taskmanager=debug` to follow a failing test.
pub fn eddy() -> Command {
    with_test_log(Command::new(env!("CARGO_BIN_EXE_eddy")))
}

/// [`eddy`] run inside network namespace `namespace` (`ip netns exec`, which needs root).
pub fn eddy_in_namespace(namespace: &str) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", namespace, env!("CARGO_BIN_EXE_eddy")]);
    with_test_log(command)
}

fn with_test_log(mut command: Command) -> Command {
    let level = std::env::var("EDDY_TEST_LOG").unwrap_or_else(|_| "warn".into());
    command.env_remove("RUST_LOG").env("EDDY_LOG", level);
    command
}

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// A new, empty directory whose name starts with `name`.
    pub fn new(name: &str) -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "eddy-test-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create scratch directory");
        Scratch { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to `name` inside the directory (creating subdirectories).
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let file = self.path.join(name);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("create directory");
        std::fs::write(&file, contents).expect("write file");
        file
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs `eddy run` on a script at a parallelism; returns the process output.
pub fn run_script(scratch: &Scratch, script: &str, parallelism: usize) -> Output {
    let file = scratch.write(&format!("job-p{parallelism}.sql"), script);
    eddy()
        .args(["run", "--parallelism", &parallelism.to_string()])
        .arg(&file)
        .output()
        .expect("start eddy")
}

/// Held by the tests that start whole clusters and kill parts of them (chaos, Docker):
/// one at a time, so that their timing does not depend on each other on a small machine.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// `eddy explain` of the script at `path`, which must succeed; returns the plan.
pub fn explain_ok(path: &Path) -> String {
    let output = eddy().arg("explain").arg(path).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `eddy run` as [`run_script`] does and fails the test, with its stderr, unless it
/// succeeded.
pub fn run_ok(scratch: &Scratch, script: &str, parallelism: usize) -> Output {
    let output = run_script(scratch, script, parallelism);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The lines of every visible file in a directory (hidden files are uncommitted), in no
/// particular order.
pub fn visible_lines(directory: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(directory).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines
}

/// One printed change: its op (`+I`, `-U`, `+U`, `-D`) and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The op.
    pub op: String,
    /// The fields as printed.
    pub fields: Vec<String>,
}

/// Parses the print sink's lines (`+I[1, a]`, optionally prefixed by `3> `).
pub fn parse_changes(stdout: &str) -> Vec<Change> {
    stdout
        .lines()
        .filter_map(|line| {
            let line = match line.find("> ") {
                Some(i)
                    if line[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == ':') =>
                {
                    &line[i + 2..]
                }
                _ => line,
            };
            let (op, rest) = line.split_at_checked(2)?;
            if !matches!(op, "+I" | "-U" | "+U" | "-D") {
                return None;
            }
            let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
            let fields = if inner.is_empty() {
                Vec::new()
            } else {
                inner.split(", ").map(str::to_string).collect()
            };
            Some(Change {
                op: op.to_string(),
                fields,
            })
        })
        .collect()
}

/// Applies a retract changelog: the rows that remain, each with its multiplicity.
pub fn materialize(changes: &[Change]) -> BTreeMap<Vec<String>, usize> {
    let mut rows: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for change in changes {
        match change.op.as_str() {
            "+I" | "+U" => *rows.entry(change.fields.clone()).or_default() += 1,
            _ => {
                let count = rows
                    .get_mut(&change.fields)
                    .unwrap_or_else(|| panic!("retraction of a row that is not there: {change:?}"));
                *count -= 1;
                if *count == 0 {
                    rows.remove(&change.fields);
                }
            }
        }
    }
    rows
}

/// Applies an upsert changelog keyed by the fields at `key`: the last row per key.
pub fn materialize_upsert(changes: &[Change], key: &[usize]) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut rows = BTreeMap::new();
    for change in changes {
        let k: Vec<String> = key.iter().map(|i| change.fields[*i].clone()).collect();
        match change.op.as_str() {
            "+I" | "+U" => {
                rows.insert(k, change.fields.clone());
            }
            "-D" => {
                rows.remove(&k);
            }
            other => panic!("an upsert stream carries no {other}"),
        }
    }
    rows
}

/// Runs the script at parallelism 1 and 4 and checks the applied changelog equals
/// `expected` (rows given as their printed fields) both times.
pub fn assert_result(name: &str, script: &str, expected: Vec<Vec<String>>) {
    let scratch = Scratch::new(name);
    let script = script.replace("$DIR", &scratch.path().display().to_string());
    assert_result_in(&scratch, &script, expected);
}

/// As [`assert_result`], with files already in `scratch`.
pub fn assert_result_in(scratch: &Scratch, script: &str, expected: Vec<Vec<String>>) {
    let mut want: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for row in expected {
        *want.entry(row).or_default() += 1;
    }
    for parallelism in [1, 4] {
        let output = run_script(scratch, script, parallelism);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "eddy failed at parallelism {parallelism}:\n{stderr}"
        );
        let got = materialize(&parse_changes(&stdout));
        if got != want {
            let missing: Vec<_> = want
                .iter()
                .filter(|(r, n)| got.get(*r) != Some(n))
                .take(5)
                .collect();
            let extra: Vec<_> = got
                .iter()
                .filter(|(r, n)| want.get(*r) != Some(n))
                .take(5)
                .collect();
            panic!(
                "wrong result at parallelism {parallelism}: {} rows, expected {}\nmissing or miscounted: {missing:?}\nunexpected: {extra:?}\nstderr: {stderr}",
                got.values().sum::<usize>(),
                want.values().sum::<usize>(),
            );
        }
    }
}

/// Formats a float as the print sink does (Arrow's display: `21.0`, `3.5`).
pub fn float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// `row!["a", 1, 2.5]`-like helper: turns displayable values into printed fields.
#[macro_export]
macro_rules! row {
    ($($v:expr),* $(,)?) => { vec![$($v.to_string()),*] };
}

/// Runs a Python program; fails the test with its stderr unless it succeeds (the packages
/// the tests import, moto's boto3, pyarrow and DuckDB, are installed by `.ci/run`), and
/// returns what it printed.
pub fn python(program: &str) -> String {
    let output = Command::new("python3")
        .args(["-c", program])
        .output()
        .expect("start python3");
    assert!(
        output.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A number unique within this test process.
pub fn unique() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `x` as Python prints a float (and Eddy's CSV writes a DOUBLE): `3.0`, `-0.25`, and
/// `0.0` for minus zero (Python's `-0 * 0.25` is `0.0`).
pub fn python_float(x: f64) -> String {
    let x = x + 0.0;
    match x.fract() == 0.0 {
        true => format!("{x:.1}"),
        false => format!("{x}"),
    }
}
