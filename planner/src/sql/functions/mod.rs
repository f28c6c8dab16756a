//! Flink's built-in scalar functions under Flink's names, with Flink's semantics.
//!
//! DataFusion's functions are the base. Where DataFusion has a function under a Flink name
//! that answers differently (`DATE_FORMAT` with `%` patterns, `LOG(x)` in base 10, `CONCAT`
//! skipping NULLs, `SUBSTRING` from position 0, ...), Eddy's own implementation replaces
//! it. A Flink function Eddy cannot yet evaluate as Flink does is refused by name at
//! planning ([`refused`]), never answered differently. `integration-tests/functions.rs`
//! checks the answers against Apache Flink's.

mod conditional;
pub(crate) mod datetime;
mod java_format;
mod numeric;
pub(crate) mod ranking;
mod refused;
mod strings;

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use datafusion_common::Result;
use datafusion_expr::planner::{ExprPlanner, PlannerResult};
use datafusion_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
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
            Returns::FirstArgument => arg_types[0].clone(),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let all_scalars = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let result = (self.invoke)(&arrays)?;
        if all_scalars && result.len() == 1 {
            let scalar = datafusion_common::ScalarValue::try_from_array(&result, 0)?;
            return Ok(ColumnarValue::Scalar(scalar));
        }
        Ok(ColumnarValue::Array(result))
    }
}

/// What a [`FlinkFunction`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Returns {
    /// This type, whatever the arguments.
    Fixed(DataType),
    /// The type of its first argument.
    FirstArgument,
}

/// Every function of this module, to register over DataFusion's (same names replace
/// DataFusion's).
pub fn all() -> Vec<Arc<ScalarUDF>> {
    let mut all = Vec::new();
    all.extend(numeric::functions());
    all.extend(strings::functions());
    all.extend(datetime::functions());
    all.extend(conditional::functions());
    all.extend(refused::functions());
    all
}

/// Plans the SQL syntax forms of Flink functions (`SUBSTRING(s FROM i FOR n)`) with Flink's
/// implementations instead of DataFusion's.
#[derive(Debug, Default)]
pub struct FlinkSyntaxPlanner;

impl ExprPlanner for FlinkSyntaxPlanner {
    fn plan_substring(&self, args: Vec<Expr>) -> Result<PlannerResult<Vec<Expr>>> {
        let substr = strings::substr();
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            datafusion_expr::expr::ScalarFunction::new_udf(substr, args),
        )))
    }
}
