//! `PROCTIME()`: the processing-time attribute of a table (`p_time AS PROCTIME()`), the wall
//! clock when a row is read, as a `TIMESTAMP_LTZ(3)`. A window TVF over it windows by
//! processing time (see the planner).

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion_common::{Result, ScalarValue};
use datafusion_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The name the planner recognises the attribute by.
pub const PROCTIME: &str = "proctime";

/// The type of a processing-time attribute: `TIMESTAMP_LTZ(3)`.
pub fn proctime_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![Arc::new(ScalarUDF::from(Proctime {
        signature: Signature::exact(vec![], Volatility::Volatile),
    }))]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Proctime {
    signature: Signature,
}

impl ScalarUDFImpl for Proctime {
    fn name(&self) -> &str {
        PROCTIME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(proctime_type())
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = eddy_operators::wall_clock();
        Ok(ColumnarValue::Scalar(ScalarValue::TimestampMillisecond(
            Some(now),
            Some("UTC".into()),
        )))
    }
}
