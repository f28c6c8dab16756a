//! Real workers on the machine's `python3` (with pyarrow, as CI installs it).

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type};
use datafusion_common::config::ConfigOptions;
use datafusion_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl};
use eddy_common::config::python::PythonConfig;
use eddy_operators::aggregate::GroupAccumulator;

use super::{Declaration, PythonFunction, PythonRuntime, usage};

/// A module of functions in a directory of its own.
struct Module {
    dir: std::path::PathBuf,
}

impl Module {
    fn new(name: &str, source: &str) -> Module {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("eddy-udf-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.py")), source).unwrap();
        Module { dir }
    }

    fn runtime(&self, timeout: Duration, memory_limit: Option<usize>) -> Arc<PythonRuntime> {
        let runtime = PythonRuntime::new();
        runtime.configure(PythonConfig {
            executable: "python3".into(),
            files: vec![self.dir.display().to_string()],
            timeout,
            memory_limit,
        });
        runtime
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const FUNCTIONS: &str = r#"
import os, time
from pyflink.table import DataTypes
from pyflink.table.udf import udf, ScalarFunction

@udf(result_type=DataTypes.BIGINT())
def length(s):
    return None if s is None else len(s)

def plain_length(s):
    return None if s is None else len(s)

@udf(result_type=DataTypes.BIGINT(), func_type="arrow")
def arrow_length(s):
    import pyarrow.compute as pc
    return pc.utf8_length(s)

class Offset(ScalarFunction):
    def open(self, function_context):
        self.offset = 100
    def eval(self, s):
        return self.offset + len(s)

offset = udf(Offset(), result_type=DataTypes.BIGINT())

def fails(s):
    if s == "bad":
        raise ValueError(f"cannot take {s!r}")
    return len(s)

def wrong_type(s):
    return "not a number"

def loops(s):
    while True:
        time.sleep(0.01)

def dies(s):
    os.kill(os.getpid(), 9)

def hoards(s):
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))
"#;

fn function(runtime: &Arc<PythonRuntime>, id: u32, target: &str) -> PythonFunction {
    PythonFunction::new(
        declared(id, target, "functions"),
        DataType::Int64,
        runtime.clone(),
    )
    .unwrap()
}

/// The function `module.name`, taking one argument of `Utf8` type (`Int64` in the
/// aggregates module).
fn declared(id: u32, name: &str, module: &str) -> Declaration {
    let argument = match module {
        "aggregates" => DataType::Int64,
        _ => DataType::Utf8,
    };
    Declaration {
        id,
        name: name.to_string(),
        target: format!("{module}.{name}"),
        arguments: Some(vec![argument]),
    }
}

fn call(function: &PythonFunction, values: &[Option<&str>]) -> datafusion_common::Result<ArrayRef> {
    let column: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
    let args = ScalarFunctionArgs {
        args: vec![ColumnarValue::Array(column)],
        arg_fields: vec![Arc::new(Field::new("s", DataType::Utf8, true))],
        number_rows: values.len(),
        return_field: Arc::new(Field::new("r", DataType::Int64, true)),
        config_options: Arc::new(ConfigOptions::default()),
    };
    match function.invoke_with_args(args)? {
        ColumnarValue::Array(array) => Ok(array),
        ColumnarValue::Scalar(_) => panic!("a scalar for an array"),
    }
}

fn lengths(array: &ArrayRef) -> Vec<Option<i64>> {
    array.as_primitive::<Int64Type>().iter().collect()
}

#[test]
fn every_kind_of_function_answers_a_batch_at_a_time() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let input = [Some("a"), None, Some("héllo"), Some("")];
    let length = function(&runtime, 0, "length");
    assert_eq!(
        lengths(&call(&length, &input).unwrap()),
        [Some(1), None, Some(5), Some(0)]
    );
    let plain = function(&runtime, 1, "plain_length");
    assert_eq!(
        lengths(&call(&plain, &input).unwrap()),
        [Some(1), None, Some(5), Some(0)]
    );
    let arrow = function(&runtime, 2, "arrow_length");
    assert_eq!(
        lengths(&call(&arrow, &input).unwrap()),
        [Some(1), None, Some(5), Some(0)]
    );
    let offset = function(&runtime, 3, "offset");
    assert_eq!(
        lengths(&call(&offset, &[Some("abc")]).unwrap()),
        [Some(103)]
    );
    // One worker served them all, one call after another.
    assert_eq!(runtime.idle.lock().unwrap().len(), 1);
}

#[test]
fn a_raised_exception_is_reported_with_its_traceback_and_the_worker_stays() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let fails = function(&runtime, 0, "fails");
    let error = call(&fails, &[Some("ok"), Some("bad")])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the Python function functions.fails raised"),
        "{error}"
    );
    assert!(error.contains("ValueError: cannot take 'bad'"), "{error}");
    assert!(error.contains("functions.py"), "{error}");
    let wrong = function(&runtime, 1, "wrong_type");
    let error = call(&wrong, &[Some("x")]).unwrap_err().to_string();
    assert!(error.contains("are not int64"), "{error}");
    // The worker survived both and still answers.
    assert_eq!(lengths(&call(&fails, &[Some("ok")]).unwrap()), [Some(2)]);
    assert_eq!(runtime.idle.lock().unwrap().len(), 1);
}

#[test]
fn a_function_that_never_returns_is_stopped_at_the_timeout() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_millis(1500), None);
    let loops = function(&runtime, 0, "loops");
    let started = std::time::Instant::now();
    let error = call(&loops, &[Some("x")]).unwrap_err().to_string();
    assert!(error.contains("did not answer within 1.5s"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The stopped worker is not pooled.
    assert!(runtime.idle.lock().unwrap().is_empty());
}

#[test]
fn a_worker_that_dies_is_reported_with_how_it_ended() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let dies = function(&runtime, 0, "dies");
    let error = call(&dies, &[Some("x")]).unwrap_err().to_string();
    assert!(error.contains("died: it was killed (signal 9"), "{error}");
    assert!(runtime.idle.lock().unwrap().is_empty());
    // The next call starts a new worker.
    let length = function(&runtime, 1, "length");
    assert_eq!(lengths(&call(&length, &[Some("ab")]).unwrap()), [Some(2)]);
}

#[test]
fn a_worker_over_its_memory_limit_raises_memory_error() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), Some(1 << 30));
    let hoards = function(&runtime, 0, "hoards");
    let error = call(&hoards, &[Some("x")]).unwrap_err().to_string();
    assert!(error.contains("MemoryError"), "{error}");
}

#[test]
fn a_module_that_cannot_be_imported_and_a_missing_interpreter_are_named() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let missing = PythonFunction::new(
        declared(0, "f", "no_such_module"),
        DataType::Int64,
        runtime.clone(),
    )
    .unwrap();
    let error = call(&missing, &[Some("x")]).unwrap_err().to_string();
    assert!(
        error.contains("ModuleNotFoundError: No module named 'no_such_module'"),
        "{error}"
    );
    let runtime = PythonRuntime::new();
    runtime.configure(PythonConfig {
        executable: "/no/such/python".into(),
        files: Vec::new(),
        timeout: Duration::from_secs(5),
        memory_limit: None,
    });
    let f = function(&runtime, 0, "length");
    let error = call(&f, &[Some("x")]).unwrap_err().to_string();
    assert!(
        error.contains("cannot start the Python worker '/no/such/python'"),
        "{error}"
    );
}

#[test]
fn workers_are_counted_and_stopped_with_their_runtime() {
    let module = Module::new("functions", FUNCTIONS);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let length = function(&runtime, 0, "length");
    call(&length, &[Some("x")]).unwrap();
    let pids: Vec<u32> = runtime
        .idle
        .lock()
        .unwrap()
        .iter()
        .map(|w| w.pid())
        .collect();
    assert_eq!(pids.len(), 1);
    let now = usage();
    assert!(now.workers >= 1 && now.resident_bytes > 0, "{now:?}");
    drop(length);
    drop(runtime);
    assert!(!std::path::Path::new(&format!("/proc/{}", pids[0])).exists());
}

const AGGREGATES: &str = r#"
from pyflink.common import Row
from pyflink.table.udf import AggregateFunction, udaf

class Total(AggregateFunction):
    def create_accumulator(self):
        return Row(0)
    def accumulate(self, acc, x):
        acc[0] += x
    def retract(self, acc, x):
        acc[0] -= x
    def merge(self, acc, others):
        for other in others:
            acc[0] += other[0]
    def get_value(self, acc):
        return acc[0]

total = udaf(Total())

class Forward:
    def create_accumulator(self):
        return [0]
    def accumulate(self, acc, x):
        acc[0] += x
    def get_value(self, acc):
        return acc[0]

forward = Forward()
"#;

fn aggregate(runtime: &Arc<PythonRuntime>, target: &str) -> Box<dyn GroupAccumulator> {
    let function = super::PythonAggregate::new(
        declared(0, target, "aggregates"),
        DataType::Int64,
        runtime.clone(),
    )
    .unwrap();
    (function.user_aggregate().accumulator)()
}

/// One struct column `a0` of the values, as the planner packs an aggregate's arguments.
fn arguments(values: &[i64]) -> ArrayRef {
    let column: ArrayRef = Arc::new(arrow::array::Int64Array::from(values.to_vec()));
    let fields = vec![Field::new("a0", DataType::Int64, true)];
    Arc::new(arrow::array::StructArray::new(
        fields.into(),
        vec![column],
        None,
    ))
}

#[test]
fn an_aggregate_accumulates_retracts_merges_and_restores_its_pickled_accumulators() {
    let module = Module::new("aggregates", AGGREGATES);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let mut total = aggregate(&runtime, "total");
    total.resize(3);
    let values = arguments(&[5, 7, 11, 2, 100]);
    total
        .update(&[0, 1, 0, 1, 2], &[1, 1, 1, -1, 0], &values)
        .unwrap();
    assert_eq!(
        lengths(&total.evaluate(&[0, 1, 2]).unwrap()),
        [Some(16), Some(5), Some(0)]
    );
    total.merge(0, 1);
    assert_eq!(lengths(&total.evaluate(&[0]).unwrap()), [Some(21)]);
    // Saved and loaded into another accumulator (a restore), the state goes on.
    let mut saved = eddy_common::state::StateWriter::default();
    total.save(0, &mut saved);
    total.save(2, &mut saved);
    let bytes = saved.finish();
    let mut restored = aggregate(&runtime, "total");
    restored.resize(2);
    let mut input = eddy_common::state::StateReader::new(&bytes, "test");
    restored.load(0, &mut input).unwrap();
    restored.load(1, &mut input).unwrap();
    restored.update(&[0], &[1], &arguments(&[1])).unwrap();
    assert_eq!(
        lengths(&restored.evaluate(&[0, 1]).unwrap()),
        [Some(22), Some(0)]
    );
}

#[test]
fn an_aggregate_without_retract_says_so_when_a_row_is_retracted() {
    let module = Module::new("aggregates", AGGREGATES);
    let runtime = module.runtime(Duration::from_secs(30), None);
    let mut forward = aggregate(&runtime, "forward");
    forward.resize(1);
    forward.update(&[0], &[1], &arguments(&[3])).unwrap();
    let error = forward
        .update(&[0], &[-1], &arguments(&[3]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("forward has no retract(): it cannot aggregate an updating input"),
        "{error}"
    );
    // A failed merge is reported by the next call.
    forward.resize(2);
    forward.update(&[1], &[1], &arguments(&[4])).unwrap();
    forward.merge(0, 1);
    let error = forward.evaluate(&[0]).unwrap_err().to_string();
    assert!(error.contains("has no merge()"), "{error}");
}
