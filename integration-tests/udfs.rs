//! Python user-defined functions end to end. `udfs/` holds Python functions PyFlink and
//! Eddy both run (`udfs/udfs.py`), the queries that call them (Nexmark q14 as published
//! among them) and Flink 2.3's answers, written by
//! `~/flink-venv/bin/python bench/flink/query_answers.py integration-tests/udfs`: Eddy must
//! give Flink's rows at parallelism 1 and 4. The other tests fail functions on purpose:
//! each failure is a clear error or a restart, never a hang, and a restart loses nothing
//! and duplicates nothing.

use crate::flink_oracle::OracleDir;
use crate::support::{Scratch, run_ok, run_script, visible_lines};

#[test]
fn python_functions_give_flinks_rows() {
    OracleDir::with_queries("udfs", "integration-tests/udfs").check_all(&[
        "q14",
        "q14_pandas",
        "bands",
        "euros",
        "windows",
        "lateral",
        "lateral_cross",
        "lateral_left",
        "aggregate",
        "aggregate_retract",
        "aggregate_window",
        "aggregate_session",
    ]);
}

/// The accumulators of aggregate functions kept in the LSM store (nearly all of them
/// written to its files, the least memory it takes) give the same answers.
#[test]
fn aggregate_functions_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::with_queries("udfs", "integration-tests/udfs")
        .on_the_lsm_backend()
        .check_all(&[
            "aggregate",
            "aggregate_retract",
            "aggregate_window",
            "aggregate_session",
        ]);
}

/// Functions that fail, each in its own way.
const FAULTY: &str = r#"
import os, time

def raises(x):
    if x == 7:
        raise ValueError(f"seven is not allowed (got {x})")
    return x

def loops(x):
    while True:
        time.sleep(0.01)

def hoards(x):
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))

def dies(x):
    os.kill(os.getpid(), 9)

class Mean:
    """An aggregate (PyFlink's AggregateFunction methods, no base class needed)."""

    def create_accumulator(self):
        return [0, 0]

    def accumulate(self, accumulator, value):
        accumulator[0] += value
        accumulator[1] += 1

    def get_value(self, accumulator):
        return accumulator[0] // accumulator[1]

py_mean = Mean()

def pieces(s):
    yield s, len(s)

def dies_once(x):
    # The first worker to see the 1,500th row kills itself; the job restarts and goes on.
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "died")
    if x >= 1500 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), 9)
    return x * 3 + 1
"#;

/// A job of 20 rows through the function `name` of [`FAULTY`], failing for good.
fn faulty_job(scratch: &Scratch, name: &str, settings: &str) -> String {
    let module = scratch.write("faulty.py", FAULTY);
    format!(
        "SET 'restart-strategy.type' = 'none';
         SET 'python.files' = '{}';
         {settings}
         CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.{name}' LANGUAGE PYTHON;
         CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '20',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '20');
         CREATE TABLE out (id BIGINT, v BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT id, f(id) FROM src;",
        module.display()
    )
}

fn failure(scratch: &Scratch, script: &str) -> String {
    let started = std::time::Instant::now();
    let output = run_script(scratch, script, 1);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "the job succeeded:\n{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the failure took {:?}",
        started.elapsed()
    );
    stderr
}

#[test]
fn a_function_that_raises_fails_the_job_with_the_python_traceback() {
    let scratch = Scratch::new("udf-raises");
    let error = failure(&scratch, &faulty_job(&scratch, "raises", ""));
    assert!(
        error.contains("the Python function faulty.raises raised"),
        "{error}"
    );
    assert!(
        error.contains("Traceback (most recent call last)"),
        "{error}"
    );
    assert!(
        error.contains("ValueError: seven is not allowed (got 7)"),
        "{error}"
    );
    assert!(error.contains("faulty.py\", line 6, in raises"), "{error}");
}

#[test]
fn a_function_that_never_returns_is_stopped_at_the_timeout() {
    let scratch = Scratch::new("udf-loops");
    let settings = "SET 'python.worker.timeout' = '2 s';";
    let error = failure(&scratch, &faulty_job(&scratch, "loops", settings));
    assert!(
        error.contains("faulty.loops did not answer within 2s (python.worker.timeout)"),
        "{error}"
    );
}

#[test]
fn a_function_that_allocates_without_bound_fails_with_memory_error() {
    let scratch = Scratch::new("udf-hoards");
    let settings = "SET 'python.worker.memory' = '1gb';";
    let error = failure(&scratch, &faulty_job(&scratch, "hoards", settings));
    assert!(error.contains("faulty.hoards raised"), "{error}");
    assert!(error.contains("MemoryError"), "{error}");
}

#[test]
fn a_function_that_kills_its_worker_fails_the_job_saying_so() {
    let scratch = Scratch::new("udf-dies");
    let error = failure(&scratch, &faulty_job(&scratch, "dies", ""));
    assert!(
        error.contains("running faulty.dies died: it was killed (signal 9"),
        "{error}"
    );
}

#[test]
fn a_missing_module_and_a_missing_interpreter_are_named() {
    let scratch = Scratch::new("udf-missing");
    let script = faulty_job(&scratch, "raises", "").replace("'faulty.raises'", "'absent.f'");
    let error = failure(&scratch, &script);
    assert!(
        error.contains("ModuleNotFoundError: No module named 'absent'"),
        "{error}"
    );
    let settings = "SET 'python.executable' = '/no/such/python';";
    let error = failure(&scratch, &faulty_job(&scratch, "raises", settings));
    assert!(
        error.contains("cannot start the Python worker '/no/such/python' (python.executable)"),
        "{error}"
    );
}

#[test]
fn statements_eddy_cannot_run_are_refused_at_planning() {
    let scratch = Scratch::new("udf-refused");
    let job = faulty_job(&scratch, "raises", "");
    let cases = [
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.raises' LANGUAGE PYTHON;",
            "CREATE FUNCTION f AS 'com.example.F';",
            "unsupported: CREATE FUNCTION f: LANGUAGE JAVA",
        ),
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT",
            "CREATE FUNCTION f(x BIGINT)",
            "give the result type, as in `CREATE FUNCTION f(s STRING) RETURNS INT",
        ),
        (
            "SELECT id, f(id)",
            "SELECT id, f(id, id)",
            "f takes 1 argument (BIGINT), not 2 arguments",
        ),
        (
            "CREATE FUNCTION f(x BIGINT)",
            "CREATE FUNCTION mean(x BIGINT)",
            "CREATE FUNCTION mean: a built-in function has that name, and would be called instead",
        ),
        (
            "SELECT id, f(id)",
            "SELECT id, f(CAST(id AS STRING))",
            "f's argument 1 is declared BIGINT, and a STRING is not cast to it implicitly",
        ),
        (
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.raises' LANGUAGE PYTHON;",
            "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.raises' LANGUAGE WASM;",
            "unsupported: CREATE FUNCTION f: LANGUAGE WASM",
        ),
        (
            "INSERT INTO",
            "CREATE FUNCTION f(x INT) RETURNS INT AS 'faulty.raises' LANGUAGE PYTHON;\nINSERT INTO",
            "a function named 'f' already exists",
        ),
    ];
    for (from, to, expected) in cases {
        let script = job.replacen(from, to, 1);
        assert_ne!(script, job, "{from}");
        let output = run_script(&scratch, &script, 1);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(expected),
            "{to}:\n{stderr}"
        );
        assert!(!stderr.contains("Traceback"), "{to}: ran Python:\n{stderr}");
    }
}

/// A job that checkpoints every 200 ms and restarts after failures, with [`FAULTY`]'s
/// `dies_once` declared as `f`, reading the ids 1 to 3,000 at 1,000 a second from `src`
/// (`columns`: more of its columns), then `rest`; its sink writes files into `out`.
fn restarting_job(scratch: &Scratch, columns: &str, rest: &str) -> String {
    let module = scratch.write("faulty.py", FAULTY);
    format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         SET 'restart-strategy.type' = 'fixed-delay';
         SET 'restart-strategy.fixed-delay.attempts' = '3';
         SET 'restart-strategy.fixed-delay.delay' = '200ms';
         SET 'python.files' = '{}';
         CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.dies_once' LANGUAGE PYTHON;
         CREATE TABLE src (id BIGINT{columns}) WITH ('connector' = 'datagen',
           'rows-per-second' = '1000', 'number-of-rows' = '3000',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '3000');
         {rest}",
        module.display()
    )
    .replace("$OUT", &scratch.path().join("out").display().to_string())
}

/// Runs a [`restarting_job`] at parallelism 2: it must finish after its worker died once.
/// Returns the lines of its files, sorted.
fn lines_after_a_worker_died(scratch: &Scratch, script: &str) -> Vec<String> {
    let run = run_ok(scratch, script, 2);
    assert!(
        scratch.path().join("died").exists(),
        "the worker never died: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut lines = visible_lines(&scratch.path().join("out"));
    lines.sort();
    lines
}

/// A job whose function kills its own worker once, mid-stream: the task fails, the job
/// restarts from its last checkpoint and its exactly-once files hold every row once.
#[test]
fn a_restart_after_a_worker_dies_loses_and_duplicates_nothing() {
    let scratch = Scratch::new("udf-dies-once");
    let script = restarting_job(
        &scratch,
        "",
        "CREATE TABLE out (id BIGINT, v BIGINT) WITH ('connector' = 'filesystem',
           'path' = '$OUT', 'format' = 'csv');
         INSERT INTO out SELECT id, f(id) FROM src;",
    );
    let lines = lines_after_a_worker_died(&scratch, &script);
    let mut expected: Vec<String> = (1..=3000)
        .map(|id| format!("{id},{}", id * 3 + 1))
        .collect();
    expected.sort();
    assert_eq!(lines, expected);
}

/// Table and aggregate functions where Flink refuses them too, or where Eddy cannot run
/// them, refused when the job is planned.
#[test]
fn table_and_aggregate_functions_are_refused_where_they_do_not_belong() {
    let scratch = Scratch::new("udf-kinds-refused");
    let module = scratch.write("faulty.py", FAULTY);
    let job = |query: &str| {
        format!(
            "SET 'python.files' = '{}';
             CREATE FUNCTION f(x BIGINT) RETURNS BIGINT AS 'faulty.raises' LANGUAGE PYTHON;
             CREATE FUNCTION pieces(s STRING) RETURNS TABLE (piece STRING, n INT)
               AS 'faulty.pieces' LANGUAGE PYTHON;
             CREATE AGGREGATE FUNCTION py_mean(x BIGINT) RETURNS BIGINT
               AS 'faulty.py_mean' LANGUAGE PYTHON;
             CREATE TABLE src (id BIGINT, s STRING, ts TIMESTAMP(3),
               WATERMARK FOR ts AS ts) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
             CREATE TABLE out (a STRING, b BIGINT) WITH ('connector' = 'print');
             INSERT INTO out {query};",
            module.display()
        )
    };
    let cases = [
        (
            "SELECT s, pieces(s) FROM src",
            "pieces is a table function: call it in FROM, as `LATERAL TABLE(pieces(...))`",
        ),
        (
            "SELECT s, x FROM src, LATERAL TABLE(f(id)) AS T(x)",
            "'f' is not a table function",
        ),
        (
            "SELECT s, CAST(n AS BIGINT) FROM src LEFT JOIN LATERAL TABLE(pieces(s)) ON n > 2",
            "unsupported: LEFT JOIN LATERAL TABLE(...) ON a condition other than TRUE",
        ),
        (
            "SELECT s, py_mean(DISTINCT id) FROM src GROUP BY s",
            "unsupported: DISTINCT in a call of the aggregate function py_mean",
        ),
        (
            "SELECT s, py_mean(id) OVER (PARTITION BY s ORDER BY ts) FROM src",
            "unsupported: aggregate function PY_MEAN in an OVER window",
        ),
        (
            "SELECT s, py_mean(s) FROM src GROUP BY s",
            "py_mean's argument 1 is declared BIGINT, and a STRING is not cast to it implicitly",
        ),
    ];
    for (query, expected) in cases {
        let output = run_script(&scratch, &job(query), 1);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(expected),
            "{query}:\n{stderr}"
        );
    }
}

/// Aggregate functions keep their accumulators in the operator's state: a job whose
/// function kills its worker mid-stream restarts from its last checkpoint with the
/// accumulators it held then, and its exactly-once windows hold every row's value once.
#[test]
fn aggregate_functions_resume_from_their_checkpointed_accumulators() {
    let scratch = Scratch::new("udf-aggregate-restart");
    let script = restarting_job(
        &scratch,
        ", ts AS TO_TIMESTAMP_LTZ(id * 10, 3), WATERMARK FOR ts AS ts",
        "CREATE AGGREGATE FUNCTION py_mean(x BIGINT) RETURNS BIGINT
           AS 'faulty.py_mean' LANGUAGE PYTHON;
         CREATE TABLE out (w BIGINT, m BIGINT, n BIGINT) WITH ('connector' = 'filesystem',
           'path' = '$OUT', 'format' = 'csv');
         INSERT INTO out SELECT CAST(UNIX_TIMESTAMP(CAST(window_start AS STRING)) AS BIGINT),
           py_mean(f(id)), COUNT(*)
         FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '1' SECOND))
         GROUP BY window_start, window_end;",
    );
    let lines = lines_after_a_worker_died(&scratch, &script);
    // Window w holds the ids whose time (10 ms each) falls in its second.
    let mut expected: Vec<String> = (0..=30)
        .filter_map(|window: i64| {
            let ids: Vec<i64> = (window * 100..window * 100 + 100)
                .filter(|id| (1..=3000).contains(id))
                .collect();
            let values: i64 = ids.iter().map(|id| id * 3 + 1).sum();
            (!ids.is_empty())
                .then(|| format!("{window},{},{}", values / ids.len() as i64, ids.len()))
        })
        .collect();
    expected.sort();
    assert_eq!(lines, expected);
}
