//! Apache Flink as the oracle: a directory holds `tables.sql` (its tables, `$DIR` for the
//! directory), queries `NAME.sql` (or they come from another directory: the benchmark's
//! Nexmark queries) and Flink's final rows for each, `NAME.flink`, written by
//! `bench/flink/query_answers.py DIR [--queries QDIR]`. A query is one SELECT, or one
//! `INSERT INTO sink SELECT ...` whose SELECT is taken. With a `data.sql` in the directory,
//! Eddy first writes the tables' data with it (`$DATA`: the Nexmark generator as CSV).
//! Eddy runs each query at parallelism 1 and 4; its changelog, applied, must give Flink's
//! rows. Where Flink refused the query (`error (N columns): ...` in `NAME.flink`), Eddy
//! must refuse it too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{Scratch, materialize, parse_changes, run_script};

/// A directory of queries with Flink's answers, under `integration-tests/`.
pub struct OracleDir {
    dir: PathBuf,
    queries: PathBuf,
    /// The statements creating the tables (the directory's `tables.sql` unless replaced).
    tables: PathBuf,
    /// Where `data.sql` wrote the tables' data, if the directory has one.
    data: Option<Scratch>,
    /// `SET` statements run before the tables are created.
    settings: String,
}

/// What Flink answered to one query.
enum Answer {
    /// The final rows, each as `v1, v2, ...`.
    Rows(Vec<String>),
    /// Flink refused the query of this many columns, saying this.
    Refused(usize, String),
}

impl OracleDir {
    /// The directory `integration-tests/NAME`, its queries in it.
    pub fn new(name: &str) -> OracleDir {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("integration-tests")
            .join(name);
        OracleDir {
            queries: dir.clone(),
            tables: dir.join("tables.sql"),
            dir,
            data: None,
            settings: String::new(),
        }
    }

    /// The directory `integration-tests/NAME` answering the queries of `queries` (relative
    /// to the repository), its data written first when it has a `data.sql`.
    pub fn with_queries(name: &str, queries: &str) -> OracleDir {
        let mut oracle = OracleDir::new(name);
        oracle.queries = Path::new(env!("CARGO_MANIFEST_DIR")).join(queries);
        if oracle.dir.join("data.sql").exists() {
            let data = Scratch::new(&format!("{name}-data"));
            let script = std::fs::read_to_string(oracle.dir.join("data.sql"))
                .unwrap()
                .replace("$DATA", &data.path().display().to_string());
            let output = run_script(&data, &script, 1);
            assert!(
                output.status.success(),
                "{name}/data.sql: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            oracle.data = Some(data);
        }
        oracle
    }

    /// The tables are created by the directory's file `name` instead of `tables.sql`.
    pub fn with_tables(mut self, name: &str) -> OracleDir {
        self.tables = self.dir.join(name);
        self
    }

    /// Runs every query after `settings` (`SET` statements).
    pub fn with_settings(mut self, settings: &str) -> OracleDir {
        self.settings = settings.to_string();
        self
    }

    /// Runs every query on the LSM state backend with the least memory it takes, so that
    /// nearly all keyed state of a subtask is written to its store.
    pub fn on_the_lsm_backend(self) -> OracleDir {
        self.with_settings(
            "SET 'state.backend.type' = 'rocksdb';
             SET 'state.backend.rocksdb.memory.fixed-per-slot' = '1kb';
",
        )
    }

    /// Where `data.sql` wrote the tables' data.
    pub fn data(&self) -> &Path {
        self.data
            .as_ref()
            .expect("the directory has a data.sql")
            .path()
    }

    /// The directory's file `name`, read.
    pub fn file(&self, name: &str) -> String {
        let path = self.dir.join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn answer(&self, query: &str) -> Answer {
        let path = self.dir.join(format!("{query}.flink"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run bench/flink/query_answers.py)", path.display())
        });
        let refusal = text
            .strip_prefix("error (")
            .and_then(|rest| rest.split_once(" columns): "));
        match refusal {
            Some((columns, message)) => Answer::Refused(
                columns.parse().expect("a column count"),
                message.trim().to_string(),
            ),
            None => Answer::Rows(text.lines().map(str::to_string).collect()),
        }
    }

    /// The job running `query` into a print sink of `columns` STRING columns.
    fn script(&self, query: &str, columns: usize) -> String {
        let data = self
            .data
            .as_ref()
            .map_or(self.dir.clone(), |d| d.path().to_path_buf());
        let tables = std::fs::read_to_string(&self.tables)
            .unwrap()
            .replace("$DIR", &self.dir.display().to_string())
            .replace("$DATA", &data.display().to_string());
        let sink: Vec<String> = (0..columns).map(|i| format!("c{i} STRING")).collect();
        let text = std::fs::read_to_string(self.queries.join(format!("{query}.sql"))).unwrap();
        format!(
            "{}{tables}\nCREATE TABLE answer ({}) WITH ('connector' = 'print');\n\
             INSERT INTO answer {};\n",
            self.settings,
            sink.join(", "),
            select_of(&text)
        )
    }

    /// Checks Eddy against Flink on `query`; the failure says what differs.
    pub fn check(&self, scratch: &Scratch, query: &str) -> Result<(), String> {
        match self.answer(query) {
            Answer::Rows(rows) => {
                let columns = rows.first().map_or(1, |r| r.split(", ").count());
                let script = self.script(query, columns);
                for parallelism in [1, 4] {
                    let got = eddy_rows(scratch, &script, parallelism)
                        .map_err(|e| format!("{query} at parallelism {parallelism}: {e}"))?;
                    if got != rows {
                        return Err(difference(query, parallelism, &got, &rows));
                    }
                }
                Ok(())
            }
            Answer::Refused(columns, flink) => {
                let output = run_script(scratch, &self.script(query, columns), 1);
                let stderr = String::from_utf8_lossy(&output.stderr);
                match !output.status.success() && stderr.contains("unsupported") {
                    true => Ok(()),
                    false => Err(format!(
                        "{query}: Flink refuses it ({flink}) but Eddy did not say unsupported:\n\
                         {stderr}"
                    )),
                }
            }
        }
    }

    /// Checks every query; fails the test naming each that differs.
    pub fn check_all(&self, queries: &[&str]) {
        let scratch = Scratch::new("oracle");
        let failures: Vec<String> = queries
            .iter()
            .filter_map(|q| self.check(&scratch, q).err())
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}

/// The SELECT of a query file: comments dropped, an `INSERT INTO sink` head cut.
fn select_of(text: &str) -> String {
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    let body = body.join("\n");
    let body = body.trim().trim_end_matches(';');
    let mut words = body.split_whitespace();
    let is_insert = words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("INSERT"))
        && words.next().is_some_and(|w| w.eq_ignore_ascii_case("INTO"));
    match (is_insert, words.next()) {
        (true, Some(sink)) => {
            let at = body.find(sink).expect("the sink's name") + sink.len();
            body[at..].trim().to_string()
        }
        _ => body.to_string(),
    }
}

/// Eddy's final rows for `script`, sorted.
fn eddy_rows(scratch: &Scratch, script: &str, parallelism: usize) -> Result<Vec<String>, String> {
    let output = run_script(scratch, script, parallelism);
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let rows: BTreeMap<Vec<String>, usize> =
        materialize(&parse_changes(&String::from_utf8_lossy(&output.stdout)));
    let mut rows: Vec<String> = rows
        .into_iter()
        .flat_map(|(row, n)| std::iter::repeat_n(row.join(", "), n))
        .collect();
    rows.sort();
    Ok(rows)
}

/// What Eddy answered that Flink did not, and the other way round (a few of each).
fn difference(query: &str, parallelism: usize, got: &[String], want: &[String]) -> String {
    let missing: Vec<&String> = want.iter().filter(|r| !got.contains(r)).take(5).collect();
    let extra: Vec<&String> = got.iter().filter(|r| !want.contains(r)).take(5).collect();
    format!(
        "{query} at parallelism {parallelism}: {} rows, Flink has {}\n  missing: {missing:?}\n  \
         not in Flink's: {extra:?}",
        got.len(),
        want.len()
    )
}
