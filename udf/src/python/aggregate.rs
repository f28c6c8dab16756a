//! Python aggregate functions (PyFlink's `AggregateFunction`: `create_accumulator`,
//! `accumulate`, `retract`, `merge`, `get_value`). The accumulators live in Eddy's
//! operator state as pickles, one per group, so they are checkpointed and restored with
//! the operator's other state. A chunk costs two calls of a worker whatever its rows:
//! one updating the accumulators of the groups it touches, one reading their values.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, Int8Array, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion_common::{Result, not_impl_err};
use datafusion_expr::function::AccumulatorArgs;
use datafusion_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result as EddyResult};
use eddy_operators::OrEddy;
use eddy_operators::aggregate::{GroupAccumulator, UserAggregate};

use super::{Declaration, PythonRuntime, coercion, definition_frame};

/// Update accumulators with rows.
const UPDATE: u8 = b'U';
/// Read accumulators' values.
const VALUE: u8 = b'V';
/// Merge one accumulator into another.
const MERGE: u8 = b'M';

/// What every accumulator of one function shares.
#[derive(Debug)]
struct Core {
    declaration: Declaration,
    result: DataType,
    definition: Vec<u8>,
    runtime: Arc<PythonRuntime>,
}

/// An aggregate function written in Python, as `CREATE AGGREGATE FUNCTION … LANGUAGE
/// PYTHON` declares it. DataFusion plans calls of it; Eddy's aggregate operators evaluate
/// them with its [`UserAggregate`].
#[derive(Debug)]
pub struct PythonAggregate {
    core: Arc<Core>,
    signature: Signature,
}

impl PythonAggregate {
    /// The aggregate `declaration` declares (its target a PyFlink `AggregateFunction`),
    /// returning `result`.
    pub fn new(
        declaration: Declaration,
        result: DataType,
        runtime: Arc<PythonRuntime>,
    ) -> std::result::Result<PythonAggregate, arrow::error::ArrowError> {
        let definition = definition_frame(&declaration, "aggregate", &result)?;
        Ok(PythonAggregate {
            core: Arc::new(Core {
                declaration,
                result,
                definition,
                runtime,
            }),
            signature: Signature::user_defined(Volatility::Volatile),
        })
    }

    /// What Eddy's aggregate operators evaluate calls of it with. Its argument is one
    /// struct of the call's arguments.
    pub fn user_aggregate(&self) -> UserAggregate {
        let core = self.core.clone();
        UserAggregate {
            name: self.core.declaration.name.clone(),
            accumulator: Arc::new(move || {
                Box::new(PythonAccumulator {
                    core: core.clone(),
                    states: Vec::new(),
                    failed: None,
                })
            }),
        }
    }
}

impl PartialEq for PythonAggregate {
    fn eq(&self, other: &Self) -> bool {
        self.core.declaration == other.core.declaration
    }
}

impl Eq for PythonAggregate {}

impl std::hash::Hash for PythonAggregate {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.core.declaration.hash(state);
    }
}

impl AggregateUDFImpl for PythonAggregate {
    fn name(&self) -> &str {
        &self.core.declaration.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.core.result.clone())
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        coercion::coerce(&self.core.declaration, arg_types)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        not_impl_err!(
            "{} is evaluated by Eddy's aggregate operators",
            self.core.declaration.name
        )
    }
}

/// The accumulators of one call for every group of an operator: a pickle per group (none
/// for a group not updated yet).
#[derive(Debug)]
struct PythonAccumulator {
    core: Arc<Core>,
    states: Vec<Option<Vec<u8>>>,
    /// A failed merge (which cannot return its error), reported by the next call.
    failed: Option<EddyError>,
}

impl PythonAccumulator {
    fn call(&self, action: u8, batches: &[&RecordBatch]) -> EddyResult<ArrayRef> {
        let definition = self.core.declaration.definition(&self.core.definition);
        let result = super::blocking(|| self.core.runtime.call(&definition, action, batches));
        result.or_eddy()
    }

    /// The pickles of `groups`, as a batch.
    fn accumulators(&self, groups: &[u32]) -> EddyResult<RecordBatch> {
        let pickles: BinaryArray = groups
            .iter()
            .map(|g| self.states[*g as usize].as_deref())
            .collect();
        let schema = Schema::new(vec![Field::new("accumulator", DataType::Binary, true)]);
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(pickles)],
        )?)
    }

    /// Stores the new pickles the worker answered for `groups`.
    fn store(&mut self, groups: &[u32], answer: &ArrayRef) -> EddyResult<()> {
        let pickles = answer
            .as_binary_opt::<i32>()
            .filter(|p| p.len() == groups.len() && p.null_count() == 0)
            .ok_or_else(|| {
                EddyError::Internal(format!(
                    "the Python aggregate {} answered {} accumulators for {}",
                    self.core.declaration.target,
                    answer.len(),
                    groups.len()
                ))
            })?;
        for (group, pickle) in groups.iter().zip(pickles.iter()) {
            self.states[*group as usize] = pickle.map(<[u8]>::to_vec);
        }
        Ok(())
    }

    fn take_failure(&mut self) -> EddyResult<()> {
        match self.failed.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl GroupAccumulator for PythonAccumulator {
    fn resize(&mut self, groups: usize) {
        self.states.resize(groups, None);
    }

    fn update(&mut self, groups: &[u32], signs: &[i8], values: &ArrayRef) -> EddyResult<()> {
        self.take_failure()?;
        // The groups the chunk touches, in order, and each counted row's place among them.
        let mut touched = Vec::new();
        let mut slot_of: HashMap<u32, u32> = HashMap::new();
        let (mut rows, mut slots, mut row_signs) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (group, sign)) in groups.iter().zip(signs).enumerate() {
            if *sign == 0 {
                continue;
            }
            let next = touched.len() as u32;
            let slot = *slot_of.entry(*group).or_insert_with(|| {
                touched.push(*group);
                next
            });
            rows.push(i as u32);
            slots.push(slot);
            row_signs.push(*sign);
        }
        if rows.is_empty() {
            return Ok(());
        }
        let arguments = values.as_struct_opt().ok_or_else(|| {
            EddyError::Internal("a Python aggregate's arguments are not a struct".into())
        })?;
        let rows = UInt32Array::from(rows);
        let mut fields = vec![
            Field::new("group", DataType::UInt32, false),
            Field::new("sign", DataType::Int8, false),
        ];
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(slots)),
            Arc::new(Int8Array::from(row_signs)),
        ];
        for (field, column) in arguments.fields().iter().zip(arguments.columns()) {
            fields.push(field.as_ref().clone().with_nullable(true));
            columns.push(take(column.as_ref(), &rows, None)?);
        }
        let rows = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        let accumulators = self.accumulators(&touched)?;
        let answer = self.call(UPDATE, &[&accumulators, &rows])?;
        self.store(&touched, &answer)
    }

    fn evaluate(&self, groups: &[u32]) -> EddyResult<ArrayRef> {
        if let Some(error) = &self.failed {
            return Err(EddyError::Internal(error.to_string()));
        }
        let accumulators = self.accumulators(groups)?;
        let values = self.call(VALUE, &[&accumulators])?;
        let checked = self
            .core
            .declaration
            .checked(values, groups.len(), &self.core.result);
        checked.map_err(|e| EddyError::DataFusion(Box::new(e)))
    }

    fn merge(&mut self, into: u32, from: u32) {
        if self.states[from as usize].is_none() {
            return;
        }
        let merged = self
            .accumulators(&[into, from])
            .and_then(|accumulators| self.call(MERGE, &[&accumulators]))
            .and_then(|answer| self.store(&[into], &answer));
        if let Err(error) = merged {
            self.failed.get_or_insert(error);
        }
    }

    fn reset(&mut self, group: u32) {
        self.states[group as usize] = None;
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        match &self.states[group as usize] {
            Some(pickle) => out.i64(1).bytes(pickle),
            None => out.i64(0),
        };
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> EddyResult<()> {
        self.states[group as usize] = match input.i64()? {
            0 => None,
            _ => Some(input.bytes()?.to_vec()),
        };
        Ok(())
    }
}
