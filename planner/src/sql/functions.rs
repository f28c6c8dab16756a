//! Flink SQL functions DataFusion does not have under Flink's name.

use std::sync::Arc;

use arrow::compute::kernels::numeric::rem;
use arrow::datatypes::DataType;
use datafusion_common::Result;
use datafusion_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

/// `MOD(a, b)`: the remainder of `a / b`, with the sign of `a` (as `a % b`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Mod {
    signature: Signature,
}

impl ScalarUDFImpl for Mod {
    fn name(&self) -> &str {
        "mod"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(rem(&arrays[0], &arrays[1])?))
    }
}

/// The functions of this module, to register beside DataFusion's.
pub fn all() -> Vec<Arc<ScalarUDF>> {
    let numeric = [DataType::Int64, DataType::Float64]
        .into_iter()
        .map(|t| TypeSignature::Exact(vec![t.clone(), t]))
        .collect();
    let modulo = Mod {
        signature: Signature::one_of(numeric, Volatility::Immutable),
    };
    vec![Arc::new(ScalarUDF::from(modulo))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::Field;
    use datafusion_common::config::ConfigOptions;

    #[test]
    fn mod_keeps_the_sign_of_the_dividend() {
        let f = &all()[0];
        let args = ScalarFunctionArgs {
            args: vec![
                ColumnarValue::Array(Arc::new(Int64Array::from(vec![7, -7, 246]))),
                ColumnarValue::Array(Arc::new(Int64Array::from(vec![3, 3, 123]))),
            ],
            arg_fields: vec![
                Arc::new(Field::new("a", DataType::Int64, false)),
                Arc::new(Field::new("b", DataType::Int64, false)),
            ],
            number_rows: 3,
            return_field: Arc::new(Field::new("m", DataType::Int64, false)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let ColumnarValue::Array(result) = f.invoke_with_args(args).unwrap() else {
            panic!("an array");
        };
        let result = result.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(result.values().to_vec(), vec![1, -1, 0]);
    }
}
