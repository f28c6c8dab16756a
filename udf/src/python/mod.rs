//! Python functions. [`PythonFunction`] (a scalar or table function) is what a query
//! calls: a DataFusion UDF whose every call takes a worker of the job's [`PythonRuntime`],
//! sends it the chunk's arguments as one Arrow batch and takes back one Arrow column (for
//! a table function, a list of rows per row). [`PythonAggregate`] keeps its accumulators
//! in Eddy's operator state and calls workers the same way. Workers are started on a
//! task's first call and pooled (one per task calling at a time); a worker whose function
//! raised is used again, one that timed out or died is gone (the task fails and restarts).

mod aggregate;
mod coercion;
mod frame;
mod registry;
mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion_common::{DataFusionError, Result};
use datafusion_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use eddy_common::config::python::PythonConfig;

pub use aggregate::PythonAggregate;
pub use registry::{WorkerUsage, usage};
use worker::{Definition, Worker};

use crate::UdfError;

/// The Python workers of one planned job, shared by its functions: started on demand with
/// the job's `python.*` options, pooled between calls, stopped when the job's plan is
/// dropped.
#[derive(Debug, Default)]
pub struct PythonRuntime {
    config: OnceLock<PythonConfig>,
    idle: Mutex<Vec<Worker>>,
}

impl PythonRuntime {
    /// A runtime with no workers yet.
    pub fn new() -> Arc<PythonRuntime> {
        Arc::new(PythonRuntime::default())
    }

    /// Sets the options workers start with, once the job's are known (after every `SET`);
    /// only the first call counts.
    pub fn configure(&self, config: PythonConfig) {
        let _ = self.config.set(config);
    }

    fn call(
        &self,
        function: &Definition<'_>,
        action: u8,
        batches: &[&RecordBatch],
    ) -> Result<ArrayRef> {
        let config = self.config.get().ok_or_else(|| {
            DataFusionError::Internal("a Python function called before its job's options".into())
        })?;
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut worker = match idle {
            Some(worker) => worker,
            None => Worker::start(config).map_err(external)?,
        };
        let result = worker.call(function, action, batches);
        if matches!(result, Ok(_) | Err(UdfError::Raised { .. })) {
            self.idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(worker);
        }
        result.map_err(external)
    }
}

fn external(error: UdfError) -> DataFusionError {
    DataFusionError::External(Box::new(error))
}

/// What `CREATE FUNCTION` says of a Python function.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Declaration {
    /// Tells it apart from the job's other functions.
    pub id: u32,
    /// Its name, as queries call it.
    pub name: String,
    /// The Python callable, `module.attribute`.
    pub target: String,
    /// The declared parameters' types; `None`: it takes whatever it is given.
    pub arguments: Option<Vec<DataType>>,
}

/// A scalar or table function written in Python, as `CREATE FUNCTION … LANGUAGE PYTHON`
/// declares it.
#[derive(Debug)]
pub struct PythonFunction {
    declaration: Declaration,
    signature: Signature,
    kind: FunctionKind,
    result: DataType,
    /// The `D` frame defining it to a worker.
    definition: Vec<u8>,
    runtime: Arc<PythonRuntime>,
}

/// What a Python function gives for each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionKind {
    /// One value.
    Scalar,
    /// Any number of rows (a table function, called in `LATERAL TABLE(...)`): the function
    /// answers each row with a list of them.
    Table,
}

impl FunctionKind {
    fn name(self) -> &'static str {
        match self {
            FunctionKind::Scalar => "scalar",
            FunctionKind::Table => "table",
        }
    }
}

impl PythonFunction {
    /// The scalar function `declaration` declares, returning `result`.
    pub fn new(
        declaration: Declaration,
        result: DataType,
        runtime: Arc<PythonRuntime>,
    ) -> std::result::Result<PythonFunction, arrow::error::ArrowError> {
        Self::of_kind(declaration, FunctionKind::Scalar, result, runtime)
    }

    /// The table function `declaration` declares, producing rows of `columns`: its value
    /// for a row is the list of rows the Python function yields for it.
    pub fn table(
        declaration: Declaration,
        columns: arrow::datatypes::Fields,
        runtime: Arc<PythonRuntime>,
    ) -> std::result::Result<PythonFunction, arrow::error::ArrowError> {
        let rows = DataType::List(Arc::new(Field::new(
            "item",
            DataType::Struct(columns),
            true,
        )));
        Self::of_kind(declaration, FunctionKind::Table, rows, runtime)
    }

    fn of_kind(
        declaration: Declaration,
        kind: FunctionKind,
        result: DataType,
        runtime: Arc<PythonRuntime>,
    ) -> std::result::Result<PythonFunction, arrow::error::ArrowError> {
        let definition = definition_frame(&declaration, kind.name(), &result)?;
        Ok(PythonFunction {
            declaration,
            // Never folded into a constant at planning (that would run Python in the
            // planner), and never assumed to answer alike twice. The arguments are checked
            // against the declaration by `coerce_types`.
            signature: Signature::user_defined(Volatility::Volatile),
            kind,
            result,
            definition,
            runtime,
        })
    }

    /// Whether it is a scalar or a table function.
    pub fn kind(&self) -> FunctionKind {
        self.kind
    }

    /// The Python callable, `module.function`.
    pub fn target(&self) -> &str {
        &self.declaration.target
    }
}

impl Declaration {
    /// What a worker is told of the function: its id, target and definition frame.
    fn definition<'a>(&'a self, frame: &'a [u8]) -> Definition<'a> {
        Definition {
            id: self.id,
            target: &self.target,
            frame,
        }
    }

    /// A worker's answer, checked to be `rows` values of the `expected` type.
    fn checked(
        &self,
        answer: ArrayRef,
        rows: usize,
        expected: &DataType,
    ) -> std::result::Result<ArrayRef, UdfError> {
        let wrong = |message: String| UdfError::Protocol {
            function: self.target.clone(),
            message,
        };
        if answer.len() != rows {
            return Err(wrong(format!("{} values for {rows} rows", answer.len())));
        }
        if answer.data_type() != expected {
            return Err(wrong(format!(
                "values of type {}, not the declared {expected}",
                answer.data_type()
            )));
        }
        Ok(answer)
    }
}

impl PartialEq for PythonFunction {
    fn eq(&self, other: &Self) -> bool {
        self.declaration == other.declaration
    }
}

impl Eq for PythonFunction {}

impl std::hash::Hash for PythonFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.declaration.hash(state);
    }
}

impl ScalarUDFImpl for PythonFunction {
    fn name(&self) -> &str {
        &self.declaration.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.result.clone())
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coercion::coerce(&self.declaration, arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let columns = args
            .args
            .iter()
            .map(|arg| arg.to_array(rows))
            .collect::<Result<Vec<_>>>()?;
        // A constant argument is marked: vectorized functions take it as one plain value,
        // as PyFlink passes it.
        let fields: Vec<Field> = columns
            .iter()
            .zip(&args.args)
            .enumerate()
            .map(|(i, (column, arg))| {
                let field = Field::new(format!("a{i}"), column.data_type().clone(), true);
                match arg {
                    ColumnarValue::Scalar(_) => field.with_metadata(constant_marker()),
                    ColumnarValue::Array(_) => field,
                }
            })
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let batch =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)?;
        let definition = self.declaration.definition(&self.definition);
        let result = blocking(|| self.runtime.call(&definition, SCALAR, &[&batch]))?;
        let result = self.declaration.checked(result, rows, &self.result);
        result.map(ColumnarValue::Array).map_err(external)
    }
}

/// The action of a scalar or table function's call: the arguments in, the values out.
const SCALAR: u8 = b'S';

/// The `D` frame defining a function to a worker: an IPC schema of its result, its id,
/// target and kind (`scalar`, `table`, `aggregate`) in the metadata.
fn definition_frame(
    declaration: &Declaration,
    kind: &str,
    result: &DataType,
) -> std::result::Result<Vec<u8>, arrow::error::ArrowError> {
    let metadata = HashMap::from([
        ("eddy.id".to_string(), declaration.id.to_string()),
        ("eddy.function".to_string(), declaration.target.clone()),
        ("eddy.kind".to_string(), kind.to_string()),
    ]);
    let schema =
        Schema::new(vec![Field::new("result", result.clone(), true)]).with_metadata(metadata);
    let mut definition = Vec::new();
    frame::write_ipc(&mut definition, &schema, None)?;
    Ok(definition)
}

/// The metadata of an argument's field that says the argument is a constant.
fn constant_marker() -> HashMap<String, String> {
    HashMap::from([("eddy.constant".to_string(), "true".to_string())])
}

/// Runs `work`, which waits on a worker, off the async runtime's scheduling where it can:
/// the other tasks of a multi-threaded runtime move to other threads meanwhile.
pub(super) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

#[cfg(test)]
mod tests;
