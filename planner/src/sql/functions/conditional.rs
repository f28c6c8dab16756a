//! `IF(condition, then, else)`, which DataFusion lacks: `then` where the condition is TRUE,
//! `else` where it is FALSE or NULL, in the common type of the two.

use std::sync::Arc;

use arrow::array::{Array, BooleanArray};
use arrow::compute::kernels::zip::zip;
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::DataType;
use datafusion_common::{Result, plan_err};
use datafusion_expr::type_coercion::binary::comparison_coercion;
use datafusion_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![Arc::new(ScalarUDF::from(If {
        signature: Signature::user_defined(Volatility::Immutable),
    }))]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct If {
    signature: Signature,
}

impl ScalarUDFImpl for If {
    fn name(&self) -> &str {
        "if"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [condition, then, otherwise] = arg_types else {
            return plan_err!(
                "IF takes a condition and two values, not {} arguments",
                arg_types.len()
            );
        };
        if !matches!(condition, DataType::Boolean | DataType::Null) {
            return plan_err!("the condition of IF must be BOOLEAN, not {condition}");
        }
        let Some(common) = comparison_coercion(then, otherwise) else {
            return plan_err!("IF's values have no common type: {then} and {otherwise}");
        };
        Ok(vec![DataType::Boolean, common.clone(), common])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[1].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let condition = arrays[0]
            .as_any()
            .downcast_ref::<BooleanArray>()
            .expect("a BOOLEAN condition");
        // A NULL condition takes the else branch.
        let condition = match condition.null_count() {
            0 => condition.clone(),
            _ => prep_null_mask_filter(condition),
        };
        Ok(ColumnarValue::Array(zip(
            &condition, &arrays[1], &arrays[2],
        )?))
    }
}
