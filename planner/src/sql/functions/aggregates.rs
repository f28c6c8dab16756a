//! Aggregate functions whose result type is Flink's rather than DataFusion's: `AVG` of an
//! integer column is an integer of that type (the sum divided by the count, truncated, as
//! Java divides), of a `FLOAT` a `FLOAT`. Eddy's aggregate operators compute it (the
//! accumulators of `eddy_operators::aggregate`); DataFusion only types it.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion_common::{Result, not_impl_err, plan_err};
use datafusion_expr::function::AccumulatorArgs;
use datafusion_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility};

/// The aggregate functions of this module (same names replace DataFusion's).
pub fn functions() -> Vec<Arc<AggregateUDF>> {
    vec![Arc::new(AggregateUDF::from(FlinkAvg {
        aliases: vec!["mean".to_string()],
        signature: Signature::user_defined(Volatility::Immutable),
        datafusion: datafusion_functions_aggregate::average::avg_udaf(),
    }))]
}

/// `AVG` typed as Flink types it; other argument types as DataFusion does.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FlinkAvg {
    aliases: Vec<String>,
    signature: Signature,
    datafusion: Arc<AggregateUDF>,
}

/// Argument types `AVG` keeps as they are (and returns).
fn keeps_type(data_type: &DataType) -> bool {
    data_type.is_integer() || matches!(data_type, DataType::Float32 | DataType::Float64)
}

impl AggregateUDFImpl for FlinkAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if keeps_type(t) || matches!(t, DataType::Decimal128(_, _)) => Ok(vec![t.clone()]),
            [t] => plan_err!("AVG of {t}: it averages numbers"),
            _ => plan_err!("AVG takes one argument"),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t] if keeps_type(t) => Ok(t.clone()),
            _ => self.datafusion.return_type(arg_types),
        }
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        not_impl_err!("AVG is computed by Eddy's aggregate operators")
    }
}
