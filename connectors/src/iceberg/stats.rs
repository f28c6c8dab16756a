//! A data file's column statistics as a manifest records them (value and null counts,
//! lower and upper bounds by field id), taken from the Parquet footer the writer just
//! wrote: readers skip the files whose bounds exclude a filter's values.
//!
//! Bounds are Iceberg's single-value serialization: little-endian for `int`, `long`,
//! `float`, `double`, `date`, `time` and timestamps (what Parquet's plain encoding of
//! their statistics is), the bytes of strings and binaries, one byte for booleans, and
//! the big-endian two's-complement unscaled value for decimals.

use arrow::datatypes::{DataType, Schema};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;

/// A data file's statistics by field id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStats {
    /// Values (nulls included) of each column.
    pub value_counts: Vec<(i32, i64)>,
    /// Nulls of each column.
    pub null_counts: Vec<(i32, i64)>,
    /// The least value of each column that has one.
    pub lower_bounds: Vec<(i32, Vec<u8>)>,
    /// The greatest value of each column that has one.
    pub upper_bounds: Vec<(i32, Vec<u8>)>,
}

/// A bound while row groups are combined.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Bound {
    Boolean(bool),
    Int(i64),
    Float(f64),
    Decimal(i128),
    Bytes(Vec<u8>),
}

impl Bound {
    /// The bounds of one row group's column, `None` without statistics or values.
    fn of(statistics: &Statistics, decimal: bool) -> Option<(Bound, Bound)> {
        let pair = |min: Option<Bound>, max: Option<Bound>| min.zip(max);
        match statistics {
            Statistics::Boolean(s) => pair(
                s.min_opt().map(|v| Bound::Boolean(*v)),
                s.max_opt().map(|v| Bound::Boolean(*v)),
            ),
            Statistics::Int32(s) if decimal => pair(
                s.min_opt().map(|v| Bound::Decimal((*v).into())),
                s.max_opt().map(|v| Bound::Decimal((*v).into())),
            ),
            Statistics::Int32(s) => pair(
                s.min_opt().map(|v| Bound::Int((*v).into())),
                s.max_opt().map(|v| Bound::Int((*v).into())),
            ),
            Statistics::Int64(s) if decimal => pair(
                s.min_opt().map(|v| Bound::Decimal((*v).into())),
                s.max_opt().map(|v| Bound::Decimal((*v).into())),
            ),
            Statistics::Int64(s) => pair(
                s.min_opt().map(|v| Bound::Int(*v)),
                s.max_opt().map(|v| Bound::Int(*v)),
            ),
            Statistics::Float(s) => pair(
                s.min_opt().map(|v| Bound::Float((*v).into())),
                s.max_opt().map(|v| Bound::Float((*v).into())),
            ),
            Statistics::Double(s) => pair(
                s.min_opt().map(|v| Bound::Float(*v)),
                s.max_opt().map(|v| Bound::Float(*v)),
            ),
            Statistics::ByteArray(_) | Statistics::FixedLenByteArray(_) => {
                let bound = |bytes: &[u8]| match decimal {
                    true => signed_big_endian(bytes).map(Bound::Decimal),
                    false => Some(Bound::Bytes(bytes.to_vec())),
                };
                pair(
                    statistics.min_bytes_opt().and_then(bound),
                    statistics.max_bytes_opt().and_then(bound),
                )
            }
            Statistics::Int96(_) => None,
        }
    }

    /// The bound in Iceberg's single-value serialization of a column of `data_type`.
    fn serialize(&self, data_type: &DataType) -> Vec<u8> {
        match (self, data_type) {
            (Bound::Boolean(b), _) => vec![u8::from(*b)],
            (Bound::Int(v), DataType::Int32 | DataType::Date32) => {
                (*v as i32).to_le_bytes().to_vec()
            }
            (Bound::Int(v), _) => v.to_le_bytes().to_vec(),
            (Bound::Float(v), DataType::Float32) => (*v as f32).to_le_bytes().to_vec(),
            (Bound::Float(v), _) => v.to_le_bytes().to_vec(),
            (Bound::Decimal(v), _) => minimal_big_endian(*v),
            (Bound::Bytes(b), _) => b.clone(),
        }
    }
}

/// A big-endian two's-complement integer of at most 16 bytes.
fn signed_big_endian(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

/// `value` as the fewest big-endian two's-complement bytes that hold it.
fn minimal_big_endian(value: i128) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (byte, next) = (bytes[start], bytes[start + 1]);
        let redundant = (byte == 0 && next & 0x80 == 0) || (byte == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

/// The statistics of a data file whose columns are `schema`'s (top-level primitives,
/// each with its field id in `PARQUET:field_id`), from its footer.
pub fn column_stats(footer: &ParquetMetaData, schema: &Schema) -> ColumnStats {
    let mut stats = ColumnStats::default();
    let rows: i64 = footer.row_groups().iter().map(|g| g.num_rows()).sum();
    for (column, field) in schema.fields().iter().enumerate() {
        let Some(id) = field
            .metadata()
            .get("PARQUET:field_id")
            .and_then(|id| id.parse::<i32>().ok())
        else {
            continue;
        };
        let decimal = matches!(field.data_type(), DataType::Decimal128(_, _));
        let mut nulls = Some(0i64);
        let mut bounds: Option<(Bound, Bound)> = None;
        let mut complete = true;
        for group in footer.row_groups() {
            let Some(statistics) = group.columns().get(column).and_then(|c| c.statistics()) else {
                nulls = None;
                complete = false;
                continue;
            };
            nulls = nulls
                .zip(statistics.null_count_opt())
                .map(|(n, more)| n + more as i64);
            let all_null = statistics.null_count_opt() == Some(group.num_rows() as u64);
            match Bound::of(statistics, decimal) {
                Some((low, high)) => {
                    bounds = Some(match bounds.take() {
                        None => (low, high),
                        Some((l, h)) => (
                            if low < l { low } else { l },
                            if high > h { high } else { h },
                        ),
                    });
                }
                None if all_null => {}
                None => complete = false,
            }
        }
        stats.value_counts.push((id, rows));
        if let Some(nulls) = nulls {
            stats.null_counts.push((id, nulls));
        }
        // A row group without bounds (but with values) leaves the file's unknown.
        if let (Some((low, high)), true) = (bounds, complete) {
            stats
                .lower_bounds
                .push((id, low.serialize(field.data_type())));
            stats
                .upper_bounds
                .push((id, high.serialize(field.data_type())));
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_the_fewest_big_endian_bytes() {
        assert_eq!(minimal_big_endian(0), vec![0]);
        assert_eq!(minimal_big_endian(127), vec![0x7f]);
        assert_eq!(minimal_big_endian(128), vec![0, 0x80]);
        assert_eq!(minimal_big_endian(-1), vec![0xff]);
        assert_eq!(minimal_big_endian(-129), vec![0xff, 0x7f]);
        for v in [
            0i128,
            1,
            -1,
            255,
            -256,
            12345678901234,
            i128::MAX,
            i128::MIN,
        ] {
            assert_eq!(signed_big_endian(&minimal_big_endian(v)), Some(v));
        }
    }
}
