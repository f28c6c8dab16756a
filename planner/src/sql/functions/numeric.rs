//! Numeric functions where Flink answers differently from DataFusion: `MOD`, `LOG` (one
//! argument: natural), `CEIL`/`FLOOR`/`SIGN` of an integer (an integer), and
//! `GREATEST`/`LEAST` (NULL if any argument is NULL).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Decimal128Array, Float64Array};
use arrow::compute::kernels::numeric::rem;
use arrow::compute::{cast, nullif};
use arrow::datatypes::DataType;
use datafusion_common::{Result, exec_err};
use datafusion_expr::{
    Coercion, ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, TypeSignatureClass, Volatility,
};
use datafusion_functions::math;

use super::{FlinkFunction, Returns};

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    let numeric = [DataType::Int64, DataType::Float64]
        .into_iter()
        .map(|t| TypeSignature::Exact(vec![t.clone(), t]))
        .collect();
    let modulo = FlinkFunction::udf(
        "mod",
        Signature::one_of(numeric, Volatility::Immutable),
        Returns::Argument(0),
        |args| Ok(rem(&args[0], &args[1])?),
    );
    let log = FlinkFunction::udf(
        "log",
        Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::Float64]),
                TypeSignature::Exact(vec![DataType::Float64, DataType::Float64]),
            ],
            Volatility::Immutable,
        ),
        Returns::Fixed(DataType::Float64),
        log,
    );
    let truncate = FlinkFunction::udf(
        "truncate",
        Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::Int64]),
                TypeSignature::Exact(vec![DataType::Int64, DataType::Int64]),
                TypeSignature::Coercible(vec![Coercion::new_exact(TypeSignatureClass::Decimal)]),
                TypeSignature::Coercible(vec![
                    Coercion::new_exact(TypeSignatureClass::Decimal),
                    Coercion::new_exact(TypeSignatureClass::Integer),
                ]),
                TypeSignature::Exact(vec![DataType::Float64]),
                TypeSignature::Exact(vec![DataType::Float64, DataType::Int64]),
            ],
            Volatility::Immutable,
        ),
        Returns::Truncated,
        truncate,
    );
    vec![
        modulo,
        log,
        truncate,
        IntegerPreserving::udf(None, math::ceil(), OnInteger::Same),
        IntegerPreserving::udf(None, math::floor(), OnInteger::Same),
        IntegerPreserving::udf(None, math::signum(), OnInteger::Sign),
        IntegerPreserving::udf(Some("sign"), math::signum(), OnInteger::Sign),
        NullIfAnyNull::udf(datafusion_functions::core::greatest()),
        NullIfAnyNull::udf(datafusion_functions::core::least()),
    ]
}

/// `LOG(x)`: the natural logarithm; `LOG(b, x)`: the logarithm of `x` to base `b`.
fn log(args: &[ArrayRef]) -> Result<ArrayRef> {
    let values = as_f64(&args[args.len() - 1])?;
    let result: Float64Array = match args.len() {
        1 => values.unary(f64::ln),
        _ => {
            let bases = as_f64(&args[0])?;
            arrow::compute::binary(&bases, &values, |b: f64, x: f64| x.ln() / b.ln())?
        }
    };
    Ok(Arc::new(result))
}

/// `TRUNCATE(x[, d])`: `x` cut (toward zero) to `d` decimal places (by default 0; a
/// negative `d` zeroes digits left of the point), keeping its type.
fn truncate(args: &[ArrayRef]) -> Result<ArrayRef> {
    let places = match args.get(1) {
        Some(places) => {
            let places = cast(places, &DataType::Int64)?;
            let places = places
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .expect("cast to Int64")
                .clone();
            Some(places)
        }
        None => None,
    };
    let places_of = |row: usize| {
        places
            .as_ref()
            .map_or(Some(0), |p| p.is_valid(row).then(|| p.value(row)))
    };
    if let Some(decimals) = args[0].as_any().downcast_ref::<Decimal128Array>() {
        // Cut on the exact value, keeping its scale (the caller casts to the result's).
        let scale = i64::from(decimals.scale());
        let out: Decimal128Array = (0..decimals.len())
            .map(|row| {
                let (value, places) = (
                    decimals.is_valid(row).then(|| decimals.value(row))?,
                    places_of(row)?,
                );
                let cut = (scale - places).clamp(0, 38) as u32;
                let unit = 10i128.checked_pow(cut)?;
                Some(value / unit * unit)
            })
            .collect();
        return Ok(Arc::new(out.with_data_type(decimals.data_type().clone())));
    }
    if let Some(ints) = args[0].as_any().downcast_ref::<arrow::array::Int64Array>() {
        let out: arrow::array::Int64Array = (0..ints.len())
            .map(|row| {
                let (value, places) = (
                    ints.is_valid(row).then(|| ints.value(row))?,
                    places_of(row)?,
                );
                let unit = 10i64.checked_pow(places.clamp(-18, 0).unsigned_abs() as u32)?;
                Some(value / unit * unit)
            })
            .collect();
        return Ok(Arc::new(out));
    }
    let values = as_f64(&args[0])?;
    let out: Float64Array = (0..values.len())
        .map(|row| {
            let (value, places) = (
                values.is_valid(row).then(|| values.value(row))?,
                places_of(row)?,
            );
            Some(truncate_decimal(value, places))
        })
        .collect();
    Ok(Arc::new(out))
}

/// `value` cut to `places` decimals on its shortest decimal form (as Flink's `BigDecimal`
/// does: `TRUNCATE(0.29, 2)` is `0.29`, where `0.29 * 100` is `28.999...` in binary).
fn truncate_decimal(value: f64, places: i64) -> f64 {
    if !value.is_finite() {
        return value;
    }
    let text = format!("{value}");
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let cut = if places >= 0 {
        let keep = (places as usize).min(fraction.len());
        format!("{whole}.{}", &fraction[..keep])
    } else {
        let digits = whole.trim_start_matches('-');
        let zeroed = (places.unsigned_abs() as usize).min(digits.len());
        let kept = &digits[..digits.len() - zeroed];
        let sign = if whole.starts_with('-') { "-" } else { "" };
        format!("{sign}{kept}{}", "0".repeat(zeroed))
    };
    cut.trim_end_matches('.').parse().unwrap_or(0.0)
}

fn as_f64(array: &ArrayRef) -> Result<Float64Array> {
    let array = cast(array, &DataType::Float64)?;
    Ok(array
        .as_any()
        .downcast_ref::<Float64Array>()
        .expect("cast to Float64")
        .clone())
}

fn is_integer(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
    )
}

/// Flink's type of `CEIL`/`FLOOR` of a `DECIMAL(precision, scale)`: no fraction, and one
/// more digit where rounding up can carry (`CEIL(9.5)` is `10`).
fn integral_decimal(precision: u8, scale: i8) -> DataType {
    let digits = precision as i16 - scale.max(0) as i16 + i16::from(scale > 0);
    DataType::Decimal128(digits.clamp(1, 38) as u8, 0)
}

/// What [`IntegerPreserving`] makes of an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OnInteger {
    /// The integer itself (`CEIL`, `FLOOR`).
    Same,
    /// Its sign (`SIGN`).
    Sign,
}

/// A DataFusion math function that answers a DOUBLE for every input, answering an integer
/// for an integer as Flink does (`CEIL(7)` is `7`, not `7.0`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerPreserving {
    name: String,
    inner: Arc<ScalarUDF>,
    signature: Signature,
    on_integer: OnInteger,
}

impl IntegerPreserving {
    /// `inner` under `name` (by default its own).
    fn udf(name: Option<&str>, inner: Arc<ScalarUDF>, on_integer: OnInteger) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(IntegerPreserving {
            name: name.unwrap_or(inner.name()).to_string(),
            inner,
            signature: Signature::any(1, Volatility::Immutable),
            on_integer,
        }))
    }
}

impl ScalarUDFImpl for IntegerPreserving {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match &arg_types[0] {
            t if is_integer(t) => Ok(DataType::Int64),
            DataType::Decimal128(precision, scale) if self.on_integer == OnInteger::Same => {
                Ok(integral_decimal(*precision, *scale))
            }
            t if t.is_numeric() || t.is_null() => {
                let coerced = self
                    .inner
                    .coerce_types(arg_types)
                    .unwrap_or(arg_types.to_vec());
                self.inner.return_type(&coerced)
            }
            other => exec_err!("{}: a number is expected, not {other}", self.name),
        }
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let input = args.arg_fields[0].data_type().clone();
        if is_integer(&input) {
            let values = ColumnarValue::values_to_arrays(&args.args)?;
            let values = cast(&values[0], &DataType::Int64)?;
            let values = values
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .expect("cast to Int64");
            let on_integer = match self.on_integer {
                OnInteger::Same => |v: i64| v,
                OnInteger::Sign => i64::signum,
            };
            return Ok(ColumnarValue::Array(Arc::new(
                values.unary::<_, arrow::datatypes::Int64Type>(on_integer),
            )));
        }
        if let DataType::Decimal128(precision, scale) = input
            && self.on_integer == OnInteger::Same
        {
            // DataFusion keeps the scale (`CEIL(4.2)` is `5.0`); Flink's has none.
            let rows = args.number_rows;
            args.return_field = Arc::new(args.return_field.as_ref().clone().with_data_type(input));
            let integral = self.inner.invoke_with_args(args)?.into_array(rows)?;
            let to = integral_decimal(precision, scale);
            return Ok(ColumnarValue::Array(cast(&integral, &to)?));
        }
        if !matches!(
            input,
            DataType::Float64 | DataType::Float32 | DataType::Decimal128(..)
        ) {
            args.args = vec![args.args[0].cast_to(&DataType::Float64, None)?];
        }
        self.inner.invoke_with_args(args)
    }
}

/// `GREATEST`/`LEAST` as Flink has them: NULL if any argument is NULL (DataFusion's skip
/// NULLs).
#[derive(Debug, PartialEq, Eq, Hash)]
struct NullIfAnyNull {
    inner: Arc<ScalarUDF>,
}

impl NullIfAnyNull {
    fn udf(inner: Arc<ScalarUDF>) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(NullIfAnyNull { inner }))
    }
}

impl ScalarUDFImpl for NullIfAnyNull {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let result = self.inner.invoke_with_args(args)?.into_array(rows)?;
        let any_null: BooleanArray = (0..rows)
            .map(|row| Some(arrays.iter().any(|a| a.is_null(row))))
            .collect();
        Ok(ColumnarValue::Array(nullif(&result, &any_null)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    #[test]
    fn mod_keeps_the_sign_of_the_dividend() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![7, -7, 246]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![3, 3, 123]));
        let result = rem(&a, &b).unwrap();
        let result = result.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(result.values().to_vec(), vec![1, -1, 0]);
    }

    #[test]
    fn truncate_cuts_the_decimal_form() {
        assert_eq!(truncate_decimal(0.29, 2), 0.29);
        assert_eq!(truncate_decimal(42.324, 2), 42.32);
        assert_eq!(truncate_decimal(-42.38, 1), -42.3);
        assert_eq!(truncate_decimal(1234.5, -2), 1200.0);
        assert_eq!(truncate_decimal(-1234.5, -5), 0.0);
        assert_eq!(truncate_decimal(7.0, 0), 7.0);
    }

    #[test]
    fn log_of_one_argument_is_natural() {
        let x: ArrayRef = Arc::new(Float64Array::from(vec![std::f64::consts::E]));
        let base: ArrayRef = Arc::new(Float64Array::from(vec![10.0]));
        let hundred: ArrayRef = Arc::new(Float64Array::from(vec![100.0]));
        let ln = log(&[x]).unwrap();
        assert_eq!(
            ln.as_any().downcast_ref::<Float64Array>().unwrap().value(0),
            1.0
        );
        let log10 = log(&[base, hundred]).unwrap();
        assert_eq!(
            log10
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .value(0),
            2.0
        );
    }
}
