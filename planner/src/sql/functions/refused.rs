//! DataFusion functions under Flink names that answer differently from Flink's, which Eddy
//! does not replace yet: planning refuses them by name instead of answering differently.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion_common::{Result, plan_err};
use datafusion_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// Each refused name, and how Flink's function differs.
const REFUSED: &[(&str, &str)] = &[
    (
        "now",
        "Flink evaluates it for every row; Eddy would fix it when the job is planned",
    ),
    (
        "current_timestamp",
        "Flink evaluates it for every row; Eddy would fix it when the job is planned",
    ),
    (
        "current_date",
        "Flink evaluates it for every row; Eddy would fix it when the job is planned",
    ),
    (
        "current_time",
        "Flink evaluates it for every row; Eddy would fix it when the job is planned",
    ),
    ("encode", "Flink's encodes a string in a character set"),
    ("decode", "Flink's decodes bytes in a character set"),
];

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    REFUSED
        .iter()
        .map(|(name, why)| {
            Arc::new(ScalarUDF::from(Refused {
                name,
                why,
                signature: Signature::variadic_any(Volatility::Volatile),
            }))
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Refused {
    name: &'static str,
    why: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for Refused {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        plan_err!(
            "unsupported: function {}() ({})",
            self.name.to_ascii_uppercase(),
            self.why
        )
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!("unsupported: function {}()", self.name.to_ascii_uppercase())
    }
}
