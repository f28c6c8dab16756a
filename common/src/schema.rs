//! SQL column types (Flink's names) and the Arrow types they map to.

use arrow::datatypes::{DataType, TimeUnit};

/// Maps a column type as written in `CREATE TABLE` (`BIGINT`, `DECIMAL(10, 2)`,
/// `TIMESTAMP(3)`, `STRING`, ...) to its Arrow type; `None` for a type Eddy lacks.
pub fn arrow_type(sql_type: &str) -> Option<DataType> {
    let normalized = sql_type.trim().to_ascii_uppercase();
    let (name, args) = split_arguments(&normalized)?;
    let arg = |i: usize| args.get(i).copied();
    let data_type = match name.as_str() {
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "TINYINT" => DataType::Int8,
        "SMALLINT" => DataType::Int16,
        "INT" | "INTEGER" => DataType::Int32,
        "BIGINT" => DataType::Int64,
        "FLOAT" | "REAL" => DataType::Float32,
        "DOUBLE" | "DOUBLE PRECISION" => DataType::Float64,
        "DECIMAL" | "DEC" | "NUMERIC" => {
            let (precision, scale) = (arg(0).unwrap_or(10), arg(1).unwrap_or(0));
            // Flink's bounds: 1 <= precision <= 38, 0 <= scale <= precision.
            if !(1..=38).contains(&precision) || scale > precision {
                return None;
            }
            DataType::Decimal128(precision as u8, scale as i8)
        }
        "STRING" | "VARCHAR" | "CHAR" | "TEXT" | "CHARACTER VARYING" | "CHARACTER" => {
            DataType::Utf8
        }
        "BYTES" | "VARBINARY" | "BINARY" => DataType::Binary,
        "DATE" => DataType::Date32,
        "TIMESTAMP" | "TIMESTAMP WITHOUT TIME ZONE" => {
            DataType::Timestamp(time_unit(arg(0).unwrap_or(6))?, None)
        }
        "TIMESTAMP_LTZ" | "TIMESTAMP WITH LOCAL TIME ZONE" | "TIMESTAMP WITH TIME ZONE" => {
            DataType::Timestamp(time_unit(arg(0).unwrap_or(6))?, Some("UTC".into()))
        }
        _ => return None,
    };
    Some(data_type)
}

/// A type's name and its numeric arguments: `TIMESTAMP(3) WITH LOCAL TIME ZONE` is
/// `("TIMESTAMP WITH LOCAL TIME ZONE", [3])`. `None` when the parentheses do not close
/// once, in order, or an argument is not a number.
fn split_arguments(sql_type: &str) -> Option<(String, Vec<u32>)> {
    let Some(open) = sql_type.find('(') else {
        return Some((sql_type.to_string(), Vec::new()));
    };
    let close = open + sql_type[open..].find(')')?;
    let (inside, after) = (&sql_type[open + 1..close], &sql_type[close + 1..]);
    if after.contains(['(', ')']) {
        return None;
    }
    let args = inside
        .split(',')
        .map(|arg| arg.trim().parse::<u32>().ok())
        .collect::<Option<Vec<u32>>>()?;
    let name = format!("{} {}", sql_type[..open].trim(), after.trim());
    Some((name.trim().to_string(), args))
}

/// The Arrow unit holding a timestamp precision (0 to 9, as Flink allows).
fn time_unit(precision: u32) -> Option<TimeUnit> {
    Some(match precision {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        7..=9 => TimeUnit::Nanosecond,
        _ => return None,
    })
}

/// How a type is written in SQL, for messages and `EXPLAIN`.
pub fn sql_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING".into(),
        DataType::Binary => "BYTES".into(),
        DataType::Date32 => "DATE".into(),
        DataType::Timestamp(unit, tz) => {
            let precision = match unit {
                TimeUnit::Second => 0,
                TimeUnit::Millisecond => 3,
                TimeUnit::Microsecond => 6,
                TimeUnit::Nanosecond => 9,
            };
            match tz {
                None => format!("TIMESTAMP({precision})"),
                Some(_) => format!("TIMESTAMP_LTZ({precision})"),
            }
        }
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| format!("{} {}", f.name(), sql_name(f.data_type())))
                .collect();
            format!("ROW<{}>", fields.join(", "))
        }
        DataType::List(element) | DataType::LargeList(element) => {
            let not_null = if element.is_nullable() {
                ""
            } else {
                " NOT NULL"
            };
            format!("ARRAY<{}{not_null}>", sql_name(element.data_type()))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_flink_types() {
        assert_eq!(arrow_type("bigint"), Some(DataType::Int64));
        assert_eq!(
            arrow_type("DECIMAL(10, 2)"),
            Some(DataType::Decimal128(10, 2))
        );
        assert_eq!(
            arrow_type("TIMESTAMP(3)"),
            Some(DataType::Timestamp(TimeUnit::Millisecond, None))
        );
        assert_eq!(arrow_type("VARCHAR(20)"), Some(DataType::Utf8));
        assert_eq!(arrow_type("VARCHAR(2147483647)"), Some(DataType::Utf8));
        assert_eq!(arrow_type("GEOMETRY"), None);
        assert_eq!(
            arrow_type("TIMESTAMP(3) WITH LOCAL TIME ZONE"),
            Some(DataType::Timestamp(
                TimeUnit::Millisecond,
                Some("UTC".into())
            ))
        );
    }

    #[test]
    fn refuses_malformed_and_out_of_range_types() {
        for bad in [
            "K ) AS (X",
            ") (",
            "DECIMAL(x)",
            "DECIMAL(39, 0)",
            "DECIMAL(5, 6)",
            "DECIMAL(0)",
            "TIMESTAMP(10)",
            "BIGINT(1)(2)",
            "VARCHAR(-1)",
        ] {
            assert_eq!(arrow_type(bad), None, "{bad}");
        }
        assert_eq!(sql_name(&DataType::Int64), "BIGINT");
    }
}
