//! `TIMESTAMPADD(unit, n, t)` and `TIMESTAMPDIFF(unit, t1, t2)` as Flink has them. The unit
//! is a keyword (`SECOND`, `MINUTE`, `HOUR`, `DAY`, `WEEK`, `MONTH`, `QUARTER`, `YEAR`), which
//! the script's tokens pass on as a string. Adding months clamps to the month's last day
//! (`TIMESTAMPADD(MONTH, 1, DATE '2024-01-31')` is `2024-02-29`); a difference counts whole
//! units, truncated toward zero, months as calendar months.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, Int64Array, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};
use chrono::{Months, NaiveDate, NaiveDateTime, TimeDelta};
use datafusion_common::{Result, exec_err, plan_err};
use datafusion_expr::{ScalarUDF, Signature, Volatility};

use super::datetime::date_times;
use super::{FlinkFunction, Returns};

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        FlinkFunction::udf(
            "timestampadd",
            Signature::any(3, Volatility::Immutable),
            Returns::Argument(2),
            timestamp_add,
        ),
        FlinkFunction::udf(
            "timestampdiff",
            Signature::any(3, Volatility::Immutable),
            Returns::Fixed(DataType::Int32),
            timestamp_diff,
        ),
    ]
}

/// A unit of `TIMESTAMPADD`/`TIMESTAMPDIFF`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A fixed length, in milliseconds.
    Millis(i64),
    /// A number of calendar months.
    Months(i64),
}

impl Unit {
    fn parse(name: &str) -> Result<Unit> {
        Ok(match name {
            "SECOND" => Unit::Millis(1_000),
            "MINUTE" => Unit::Millis(60_000),
            "HOUR" => Unit::Millis(3_600_000),
            "DAY" => Unit::Millis(86_400_000),
            "WEEK" => Unit::Millis(7 * 86_400_000),
            "MONTH" => Unit::Months(1),
            "QUARTER" => Unit::Months(3),
            "YEAR" => Unit::Months(12),
            other => {
                return plan_err!(
                    "unsupported: time unit {other} (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, \
                     QUARTER or YEAR)"
                );
            }
        })
    }
}

/// The unit of the first argument: a constant, the same in every row.
fn unit(args: &[ArrayRef]) -> Result<Unit> {
    let units = cast(&args[0], &DataType::Utf8)?;
    let units = units
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .expect("cast to Utf8");
    match (0..units.len()).find(|i| units.is_valid(*i)) {
        Some(i) => Unit::parse(&units.value(i).to_ascii_uppercase()),
        None => Unit::parse("SECOND"),
    }
}

fn millis(time: &NaiveDateTime) -> i64 {
    time.and_utc().timestamp_millis()
}

/// `t` plus `n` units, `None` past the calendar's end.
fn add(time: NaiveDateTime, n: i64, unit: Unit) -> Option<NaiveDateTime> {
    match unit {
        Unit::Millis(length) => {
            time.checked_add_signed(TimeDelta::milliseconds(n.checked_mul(length)?))
        }
        Unit::Months(length) => {
            let months = n.checked_mul(length)?;
            let magnitude = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
            match months >= 0 {
                true => time.checked_add_months(magnitude),
                false => time.checked_sub_months(magnitude),
            }
        }
    }
}

/// `TIMESTAMPADD(unit, n, t)`: a timestamp or date `n` units later, of `t`'s type.
fn timestamp_add(args: &[ArrayRef]) -> Result<ArrayRef> {
    let unit = unit(args)?;
    let counts = cast(&args[1], &DataType::Int64)?;
    let counts = counts
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64");
    let times = date_times(&args[2])?;
    let result: TimestampMillisecondArray = times
        .iter()
        .zip(counts.iter())
        .map(|(time, n)| add((*time)?, n?, unit).map(|t| millis(&t)))
        .collect();
    let result: ArrayRef = Arc::new(result);
    match args[2].data_type() {
        DataType::Timestamp(TimeUnit::Millisecond, None) => Ok(result),
        DataType::Date32 | DataType::Timestamp(_, _) => Ok(cast(&result, args[2].data_type())?),
        other => exec_err!("TIMESTAMPADD: a timestamp or date is expected, not {other}"),
    }
}

/// Whole calendar months from `from` to `to`, as Calcite (and so Flink) counts them: months
/// between the dates (adding months clamps to a month's last day), one fewer when adding
/// them lands on `to`'s date but `to`'s time of day is earlier than `from`'s.
fn months_between(from: NaiveDateTime, to: NaiveDateTime) -> Option<i64> {
    let mut months = date_months(to.date(), from.date())?;
    let landed = add_months(from.date(), months)?;
    if landed == to.date() && to.time() < from.time() {
        months -= 1;
    }
    Some(months)
}

/// Calcite's months from date `start` to date `end`: the most months that, added to
/// `start`, do not pass `end` (negated, the other way round).
fn date_months(end: NaiveDate, start: NaiveDate) -> Option<i64> {
    if end < start {
        return date_months(start, end).map(|m| -m);
    }
    let mut months = (end - start).num_days() / 31;
    loop {
        if add_months(start, months)? >= end || add_months(start, months + 1)? > end {
            return Some(months);
        }
        months += 1;
    }
}

fn add_months(date: NaiveDate, months: i64) -> Option<NaiveDate> {
    let magnitude = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    match months >= 0 {
        true => date.checked_add_months(magnitude),
        false => date.checked_sub_months(magnitude),
    }
}

/// `TIMESTAMPDIFF(unit, t1, t2)`: whole units from `t1` to `t2`, an INT.
fn timestamp_diff(args: &[ArrayRef]) -> Result<ArrayRef> {
    let unit = unit(args)?;
    let (starts, ends) = (date_times(&args[1])?, date_times(&args[2])?);
    let result: Int32Array = starts
        .iter()
        .zip(&ends)
        .map(|(start, end)| {
            let (start, end) = ((*start)?, (*end)?);
            let units = match unit {
                Unit::Millis(length) => (millis(&end) - millis(&start)) / length,
                Unit::Months(length) => months_between(start, end)? / length,
            };
            i32::try_from(units).ok()
        })
        .collect();
    Ok(Arc::new(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn months_are_counted_when_day_and_time_are_reached() {
        let months = |a, b| months_between(at(a), at(b)).unwrap();
        // One month after January 31 is February 29 (clamped), as Calcite adds months.
        assert_eq!(months("2024-01-31 00:00:00", "2024-02-29 00:00:00"), 1);
        assert_eq!(months("2024-01-31 00:00:00", "2024-02-28 00:00:00"), 0);
        assert_eq!(months("2024-01-31 00:00:00", "2024-03-31 00:00:00"), 2);
        assert_eq!(months("2024-01-15 12:00:00", "2024-02-15 11:59:59"), 0);
        assert_eq!(months("2024-01-15 12:00:00", "2024-02-15 12:00:00"), 1);
        assert_eq!(months("2025-03-01 00:00:00", "2024-01-01 00:00:00"), -14);
        // Backwards, the time of day is compared as Calcite compares it (Flink answers -2).
        assert_eq!(months("2024-03-15 12:00:00", "2024-01-15 13:00:00"), -2);
    }

    #[test]
    fn adding_months_clamps_to_the_last_day() {
        let added = add(at("2024-01-31 10:00:00"), 1, Unit::Months(1)).unwrap();
        assert_eq!(added, at("2024-02-29 10:00:00"));
        let back = add(at("2024-03-31 10:00:00"), -1, Unit::Months(3)).unwrap();
        assert_eq!(back, at("2023-12-31 10:00:00"));
    }
}
