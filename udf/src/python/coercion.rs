//! Which argument types a declared parameter takes without a `CAST`: conversions that lose
//! nothing (a decimal with room for every digit, a float from any number, another string
//! or timestamp representation, NULL), as Flink's implicit casts in function calls, and
//! any integer to any integer: Eddy types an integer literal BIGINT where Flink types it
//! INT, so `f(7)` must reach an INT parameter; a value out of the parameter's range fails
//! the cast (an error, never a wrapped value).

use arrow::datatypes::DataType;
use datafusion_common::{Result, plan_err};
use eddy_common::schema::sql_name;

use super::Declaration;

/// The types a call of the declared function passes its arguments as: the declared ones,
/// each given argument checked to reach its parameter implicitly; the given ones when none
/// are declared.
pub(super) fn coerce(declaration: &Declaration, given: &[DataType]) -> Result<Vec<DataType>> {
    let function = &declaration.name;
    let Some(declared) = &declaration.arguments else {
        return Ok(given.to_vec());
    };
    if given.len() != declared.len() {
        let names: Vec<String> = declared.iter().map(sql_name).collect();
        return plan_err!(
            "{function} takes {} ({}), not {}",
            arguments(declared.len()),
            names.join(", "),
            arguments(given.len())
        );
    }
    for (i, (given, wanted)) in given.iter().zip(declared).enumerate() {
        if !is_implicit(given, wanted) {
            return plan_err!(
                "{function}'s argument {} is declared {}, and a {} is not cast to it \
                 implicitly (write a CAST)",
                i + 1,
                sql_name(wanted),
                sql_name(given)
            );
        }
    }
    Ok(declared.to_vec())
}

/// "1 argument", "2 arguments".
fn arguments(n: usize) -> String {
    match n {
        1 => "1 argument".into(),
        n => format!("{n} arguments"),
    }
}

/// Whether a value of type `from` may be passed where `to` is declared.
pub(super) fn is_implicit(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || from == &Null {
        return true;
    }
    match (from, to) {
        (Float32, Float64) => true,
        (Decimal128(_, _), Float32 | Float64) => true,
        (Decimal128(p, s), Decimal128(to_p, to_s)) => {
            to_s >= s && i16::from(*to_p) - i16::from(*to_s) >= i16::from(*p) - i16::from(*s)
        }
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (Timestamp(_, from_zone), Timestamp(_, to_zone)) => {
            from_zone.is_some() == to_zone.is_some()
        }
        _ => match (integer_digits(from), integer_digits(to)) {
            (Some(_), Some(_)) => true,
            (Some(digits), None) => match to {
                Float32 | Float64 => true,
                Decimal128(p, s) => i16::from(digits) <= i16::from(*p) - i16::from(*s),
                _ => false,
            },
            _ => false,
        },
    }
}

/// The decimal digits a signed integer type holds (`TINYINT` 3 ... `BIGINT` 19).
fn integer_digits(data_type: &DataType) -> Option<u8> {
    match data_type {
        DataType::Int8 => Some(3),
        DataType::Int16 => Some(5),
        DataType::Int32 => Some(10),
        DataType::Int64 => Some(19),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType::*, TimeUnit};

    use super::*;

    #[test]
    fn only_conversions_that_lose_nothing_are_implicit() {
        let implicit = [
            (Int32, Int64),
            (Int8, Int32),
            (Int64, Int32),
            (Null, Utf8),
            (Int32, Decimal128(10, 0)),
            (Int64, Float64),
            (Decimal128(4, 4), Decimal128(6, 4)),
            (Decimal128(5, 2), Decimal128(10, 3)),
            (Decimal128(20, 2), Float64),
            (Float32, Float64),
            (LargeUtf8, Utf8),
            (
                Timestamp(TimeUnit::Millisecond, None),
                Timestamp(TimeUnit::Microsecond, None),
            ),
        ];
        for (from, to) in implicit {
            assert!(is_implicit(&from, &to), "{from} to {to}");
        }
        let refused = [
            (Int64, Decimal128(10, 0)),
            (Decimal128(6, 4), Decimal128(6, 2)),
            (Decimal128(10, 2), Decimal128(9, 2)),
            (Float64, Float32),
            (Float64, Decimal128(38, 10)),
            (Utf8, Int64),
            (Int64, Utf8),
            (
                Timestamp(TimeUnit::Millisecond, None),
                Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            ),
            (Date32, Timestamp(TimeUnit::Millisecond, None)),
        ];
        for (from, to) in refused {
            assert!(!is_implicit(&from, &to), "{from} to {to}");
        }
    }
}
