//! Flink's built-in scalar functions under Flink's names, with Flink's semantics.
//!
//! DataFusion's functions are the base. Where DataFusion has a function under a Flink name
//! that answers differently (`DATE_FORMAT` with `%` patterns, `LOG(x)` in base 10, `CONCAT`
//! skipping NULLs, `SUBSTRING` from position 0, ...), Eddy's own implementation replaces
//! it. A Flink function Eddy cannot yet evaluate as Flink does is refused by name at
//! planning ([`refused`]), never answered differently. `integration-tests/functions.rs`
//! checks the answers against Apache Flink's.

pub(crate) mod aggregates;
pub(crate) mod arrays;
mod conditional;
pub(crate) mod datetime;
mod java_format;
mod json;
mod numeric;
pub(crate) mod processing_time;
pub(crate) mod ranking;
mod refused;
mod strings;
mod timestamp_arithmetic;

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion_common::{Result, ScalarValue};
use datafusion_expr::planner::{ExprPlanner, PlannerResult};
use datafusion_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

/// A function's body: the arguments as arrays in, the result out.
type ArrayFunction = fn(&[ArrayRef]) -> Result<ArrayRef>;

/// A Flink function evaluated over arrays: the arguments (scalars expanded to arrays of the
/// batch's length) in, one array out. Functions are the same if their names are.
#[derive(Debug)]
pub(crate) struct FlinkFunction {
    name: &'static str,
    signature: Signature,
    return_type: Returns,
    invoke: ArrayFunction,
}

impl PartialEq for FlinkFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for FlinkFunction {}

impl std::hash::Hash for FlinkFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl FlinkFunction {
    /// A function named `name` (lower case) as a DataFusion UDF.
    fn udf(
        name: &'static str,
        signature: Signature,
        return_type: Returns,
        invoke: ArrayFunction,
    ) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(FlinkFunction {
            name,
            signature,
            return_type,
            invoke,
        }))
    }
}

impl ScalarUDFImpl for FlinkFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match &self.return_type {
            Returns::Fixed(t) => t.clone(),
            Returns::Argument(i) => arg_types[*i].clone(),
            Returns::Truncated => arg_types[0].clone(),
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let types = argument_types(&args);
        let data_type = match (&self.return_type, &types[0]) {
            (Returns::Truncated, DataType::Decimal128(precision, scale)) => {
                let places = match args.scalar_arguments.get(1) {
                    None => Some(0),
                    Some(Some(places)) => {
                        places.cast_to(&DataType::Int64).ok().and_then(|v| match v {
                            ScalarValue::Int64(places) => places,
                            _ => None,
                        })
                    }
                    Some(None) => None,
                };
                match places {
                    Some(places) => {
                        DataType::Decimal128(*precision, places.clamp(0, i64::from(*scale)) as i8)
                    }
                    None => types[0].clone(),
                }
            }
            _ => self.return_type(&types)?,
        };
        Ok(Arc::new(Field::new(self.name, data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let return_type = args.return_field.data_type().clone();
        over_arrays(&args.args, |arrays| {
            let result = (self.invoke)(arrays)?;
            match result.data_type() == &return_type {
                true => Ok(result),
                false => Ok(arrow::compute::cast(&result, &return_type)?),
            }
        })
    }
}

/// Evaluates `f` over the arguments as arrays (constants expanded); a constant when every
/// argument is one.
pub(crate) fn over_arrays(
    args: &[ColumnarValue],
    f: impl FnOnce(&[ArrayRef]) -> Result<ArrayRef>,
) -> Result<ColumnarValue> {
    let all_scalars = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let result = f(&ColumnarValue::values_to_arrays(args)?)?;
    if all_scalars && result.len() == 1 {
        let scalar = ScalarValue::try_from_array(&result, 0)?;
        return Ok(ColumnarValue::Scalar(scalar));
    }
    Ok(ColumnarValue::Array(result))
}

/// The types of a call's arguments.
pub(crate) fn argument_types(args: &ReturnFieldArgs<'_>) -> Vec<DataType> {
    args.arg_fields
        .iter()
        .map(|f| f.data_type().clone())
        .collect()
}

/// What a [`FlinkFunction`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Returns {
    /// This type, whatever the arguments.
    Fixed(DataType),
    /// The type of its argument at this position.
    Argument(usize),
    /// `TRUNCATE`'s: its first argument's, a `DECIMAL` keeping as many decimals as its
    /// second argument (a constant) says, 0 by default.
    Truncated,
}

/// Every function of this module, to register over DataFusion's (same names replace
/// DataFusion's).
pub fn all() -> Vec<Arc<ScalarUDF>> {
    let mut all = Vec::new();
    all.extend(numeric::functions());
    all.extend(strings::functions());
    all.extend(datetime::functions());
    all.extend(timestamp_arithmetic::functions());
    all.extend(json::functions());
    all.extend(conditional::functions());
    all.extend(arrays::functions());
    all.extend(processing_time::functions());
    all.extend(refused::functions());
    all
}

/// Plans the SQL syntax forms of Flink functions (`SUBSTRING(s FROM i FOR n)`, `ARRAY[...]`,
/// `array[i]`) with Flink's implementations instead of DataFusion's.
#[derive(Debug, Default)]
pub struct FlinkSyntaxPlanner;

impl ExprPlanner for FlinkSyntaxPlanner {
    fn plan_substring(&self, args: Vec<Expr>) -> Result<PlannerResult<Vec<Expr>>> {
        let substr = strings::substr();
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            datafusion_expr::expr::ScalarFunction::new_udf(substr, args),
        )))
    }

    fn plan_array_literal(
        &self,
        exprs: Vec<Expr>,
        schema: &datafusion_common::DFSchema,
    ) -> Result<PlannerResult<Vec<Expr>>> {
        arrays::plan_constructor(exprs, schema)
    }

    fn plan_field_access(
        &self,
        access: datafusion_expr::planner::RawFieldAccessExpr,
        schema: &datafusion_common::DFSchema,
    ) -> Result<PlannerResult<datafusion_expr::planner::RawFieldAccessExpr>> {
        arrays::plan_subscript(access, schema)
    }
}
