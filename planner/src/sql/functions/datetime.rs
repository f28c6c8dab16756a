//! Flink's temporal functions: `DATE_FORMAT` and `TO_TIMESTAMP`/`TO_DATE`/`UNIX_TIMESTAMP`
//! with Java patterns, `FROM_UNIXTIME`, and `HOUR`, `MINUTE`, ..., `WEEK`. Times are
//! timestamps without time zone; Flink's session time zone is taken as UTC.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Date32Array, Int64Array, StringArray, TimestampMillisecondArray,
};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::util::display::FormatOptions;
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};
use datafusion_common::{Result, exec_err};
use datafusion_expr::{ScalarUDF, Signature, TypeSignature, Volatility};

use super::java_format::to_chrono;
use super::{ArrayFunction, FlinkFunction, Returns};

/// Flink's default pattern of `TO_TIMESTAMP`, `UNIX_TIMESTAMP` and `FROM_UNIXTIME`.
const DEFAULT_PATTERN: &str = "yyyy-MM-dd HH:mm:ss";

/// `UNIX_TIMESTAMP`'s answer to a string it cannot parse (Java's `Long.MIN_VALUE`).
const UNPARSEABLE: i64 = i64::MIN;

/// `DATE_FORMAT(timestamp, pattern)` with a Java pattern.
pub(crate) fn date_format_udf() -> Arc<ScalarUDF> {
    FlinkFunction::udf(
        "date_format",
        Signature::any(2, Volatility::Immutable),
        Returns::Fixed(DataType::Utf8),
        date_format,
    )
}

/// `eddy_timestamp_text(t)`: a timestamp of micro- or nanoseconds as SQL writes it, its
/// fraction in as many groups of three digits as it needs (`2024-03-01 10:00:00`,
/// `2023-12-31 21:30:00.250`), as Flink writes a `TIMESTAMP` literal of that precision.
/// Planned for `CAST(t AS STRING)` (such timestamps are literals here); not for queries.
pub(crate) fn timestamp_text_udf() -> Arc<ScalarUDF> {
    FlinkFunction::udf(
        "eddy_timestamp_text",
        Signature::any(1, Volatility::Immutable),
        Returns::Fixed(DataType::Utf8),
        |args| {
            let options = CastOptions {
                safe: true,
                format_options: FormatOptions::default()
                    .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f")),
            };
            Ok(cast_with_options(&args[0], &DataType::Utf8, &options)?)
        },
    )
}

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    let text = || DataType::Utf8;
    let one_or_two = |first: DataType| {
        Signature::one_of(
            vec![
                TypeSignature::Exact(vec![first.clone()]),
                TypeSignature::Exact(vec![first, text()]),
            ],
            Volatility::Immutable,
        )
    };
    let mut all = vec![
        date_format_udf(),
        FlinkFunction::udf(
            "to_timestamp",
            one_or_two(text()),
            Returns::Fixed(DataType::Timestamp(TimeUnit::Millisecond, None)),
            to_timestamp,
        ),
        FlinkFunction::udf(
            "to_date",
            one_or_two(text()),
            Returns::Fixed(DataType::Date32),
            to_date,
        ),
        FlinkFunction::udf(
            "unix_timestamp",
            one_or_two(text()),
            Returns::Fixed(DataType::Int64),
            unix_timestamp,
        ),
        FlinkFunction::udf(
            "from_unixtime",
            one_or_two(DataType::Int64),
            Returns::Fixed(DataType::Utf8),
            from_unixtime,
        ),
        FlinkFunction::udf(
            "to_timestamp_ltz",
            Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Int64]),
                    TypeSignature::Exact(vec![DataType::Int64, DataType::Int64]),
                ],
                Volatility::Immutable,
            ),
            Returns::Fixed(DataType::Timestamp(
                TimeUnit::Millisecond,
                Some("UTC".into()),
            )),
            to_timestamp_ltz,
        ),
    ];
    for (name, part) in PARTS {
        all.push(FlinkFunction::udf(
            name,
            Signature::any(1, Volatility::Immutable),
            Returns::Fixed(DataType::Int64),
            *part,
        ));
    }
    all
}

/// `HOUR(t)`, ...: one field of a timestamp or date, as a BIGINT.
const PARTS: &[(&str, ArrayFunction)] = &[
    ("year", |a| part(a, |t| t.year() as i64)),
    ("quarter", |a| part(a, |t| t.month0() as i64 / 3 + 1)),
    ("month", |a| part(a, |t| t.month() as i64)),
    ("week", |a| part(a, |t| t.iso_week().week() as i64)),
    ("dayofyear", |a| part(a, |t| t.ordinal() as i64)),
    ("dayofmonth", |a| part(a, |t| t.day() as i64)),
    ("dayofweek", |a| {
        part(a, |t| t.weekday().number_from_sunday() as i64)
    }),
    ("hour", |a| part(a, |t| t.hour() as i64)),
    ("minute", |a| part(a, |t| t.minute() as i64)),
    ("second", |a| part(a, |t| t.second() as i64)),
];

fn part(args: &[ArrayRef], field: fn(&NaiveDateTime) -> i64) -> Result<ArrayRef> {
    let times = date_times(&args[0])?;
    let result: Int64Array = times.iter().map(|t| t.as_ref().map(field)).collect();
    Ok(Arc::new(result))
}

/// The values of a timestamp, date or string array as date-times (NULL where a string is
/// not a timestamp).
pub(super) fn date_times(array: &ArrayRef) -> Result<Vec<Option<NaiveDateTime>>> {
    let millis = match array.data_type() {
        DataType::Timestamp(..)
        | DataType::Date32
        | DataType::Date64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Null => {
            let safe = CastOptions::default();
            cast_with_options(
                array,
                &DataType::Timestamp(TimeUnit::Millisecond, None),
                &safe,
            )?
        }
        other => return exec_err!("a timestamp, date or string is expected, not {other}"),
    };
    let millis = millis
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .expect("cast to milliseconds");
    Ok(millis
        .iter()
        .map(|ms| ms.and_then(|ms| DateTime::from_timestamp_millis(ms).map(|t| t.naive_utc())))
        .collect())
}

/// Java patterns translated once each.
#[derive(Default)]
struct Patterns(HashMap<String, String>);

impl Patterns {
    fn chrono(&mut self, pattern: &str) -> Result<&str> {
        if !self.0.contains_key(pattern) {
            self.0.insert(pattern.to_string(), to_chrono(pattern)?);
        }
        Ok(&self.0[pattern])
    }
}

/// The pattern of each row: the second argument, or `default`.
fn patterns<'a>(args: &'a [ArrayRef], default: &'a str) -> impl Fn(usize) -> Option<&'a str> {
    let given = args.get(1).map(|a| {
        a.as_any()
            .downcast_ref::<StringArray>()
            .expect("a STRING pattern")
    });
    move |row| match given {
        Some(p) if p.is_null(row) => None,
        Some(p) => Some(p.value(row)),
        None => Some(default),
    }
}

fn strings(array: &ArrayRef) -> &StringArray {
    array
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("a STRING argument")
}

fn format(time: &NaiveDateTime, chrono_format: &str) -> Option<String> {
    let mut out = String::new();
    write!(out, "{}", time.format(chrono_format)).ok()?;
    Some(out)
}

/// `DATE_FORMAT(t, pattern)`: a timestamp, date or timestamp string, formatted.
fn date_format(args: &[ArrayRef]) -> Result<ArrayRef> {
    let times = date_times(&args[0])?;
    let args = [
        args[0].clone(),
        cast_with_options(&args[1], &DataType::Utf8, &CastOptions::default())?,
    ];
    let pattern_of = patterns(&args, DEFAULT_PATTERN);
    let mut cache = Patterns::default();
    let mut out = Vec::with_capacity(times.len());
    for (row, time) in times.iter().enumerate() {
        let value = match (time, pattern_of(row)) {
            (Some(time), Some(pattern)) => format(time, cache.chrono(pattern)?),
            _ => None,
        };
        out.push(value);
    }
    Ok(Arc::new(StringArray::from(out)))
}

/// A string parsed with a Java pattern: a date-time, or a date at midnight when the
/// pattern has no time of day.
fn parse(text: &str, chrono_format: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, chrono_format)
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, chrono_format)
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
}

/// Each row of a string array parsed with its pattern (NULL where it does not parse).
fn parsed(args: &[ArrayRef], default: &str) -> Result<Vec<Option<NaiveDateTime>>> {
    let text = strings(&args[0]);
    let pattern_of = patterns(args, default);
    let mut cache = Patterns::default();
    let mut out = Vec::with_capacity(text.len());
    for row in 0..text.len() {
        let value = match (text.is_null(row), pattern_of(row)) {
            (false, Some(pattern)) => {
                let format = cache.chrono(pattern)?;
                parse(text.value(row), format).or_else(|| {
                    // The default pattern also takes a fraction of a second, or a date.
                    let lenient = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d"];
                    match args.len() {
                        1 => lenient.iter().find_map(|f| parse(text.value(row), f)),
                        _ => None,
                    }
                })
            }
            _ => None,
        };
        out.push(value);
    }
    Ok(out)
}

/// `TO_TIMESTAMP(s[, pattern])`: NULL where `s` does not parse.
fn to_timestamp(args: &[ArrayRef]) -> Result<ArrayRef> {
    let times = parsed(args, DEFAULT_PATTERN)?;
    let millis: TimestampMillisecondArray = times
        .iter()
        .map(|t| t.map(|t| t.and_utc().timestamp_millis()))
        .collect();
    Ok(Arc::new(millis))
}

/// `TO_DATE(s[, pattern])`, by default `yyyy-MM-dd`.
fn to_date(args: &[ArrayRef]) -> Result<ArrayRef> {
    let times = parsed(args, "yyyy-MM-dd")?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("the epoch");
    let days: Date32Array = times
        .iter()
        .map(|t| t.map(|t| (t.date() - epoch).num_days() as i32))
        .collect();
    Ok(Arc::new(days))
}

/// `UNIX_TIMESTAMP(s[, pattern])`: seconds since the epoch; `Long.MIN_VALUE` where `s`
/// does not parse, as in Flink.
fn unix_timestamp(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = strings(&args[0]);
    let times = parsed(args, DEFAULT_PATTERN)?;
    let seconds: Int64Array = times
        .iter()
        .enumerate()
        .map(|(row, t)| match t {
            Some(t) => Some(t.and_utc().timestamp()),
            None if text.is_null(row) => None,
            None => Some(UNPARSEABLE),
        })
        .collect();
    Ok(Arc::new(seconds))
}

/// `TO_TIMESTAMP_LTZ(epoch[, precision])`: epoch seconds (precision 0) or milliseconds
/// (3, the default in Flink 2) as a `TIMESTAMP_LTZ(3)`; Flink knows no other precision.
fn to_timestamp_ltz(args: &[ArrayRef]) -> Result<ArrayRef> {
    let epoch = cast_with_options(&args[0], &DataType::Int64, &CastOptions::default())?;
    let epoch = epoch
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64");
    let precision = match args.get(1) {
        None => None,
        Some(p) => Some(cast_with_options(
            p,
            &DataType::Int64,
            &CastOptions::default(),
        )?),
    };
    let precision = precision.as_ref().map(|p| {
        p.as_any()
            .downcast_ref::<Int64Array>()
            .expect("cast to Int64")
    });
    let mut out = Vec::with_capacity(epoch.len());
    for row in 0..epoch.len() {
        let scale = match precision.map(|p| (!p.is_null(row)).then(|| p.value(row))) {
            None => Some(3),
            Some(p) => p,
        };
        let millis = match (epoch.is_null(row), scale) {
            (true, _) | (_, None) => None,
            (false, Some(0)) => epoch.value(row).checked_mul(1000),
            (false, Some(3)) => Some(epoch.value(row)),
            (false, Some(other)) => {
                return exec_err!(
                    "TO_TIMESTAMP_LTZ: precision {other} is not supported (0 for seconds, 3 for \
                     milliseconds)"
                );
            }
        };
        out.push(millis);
    }
    Ok(Arc::new(
        TimestampMillisecondArray::from(out).with_timezone("UTC"),
    ))
}

/// `FROM_UNIXTIME(seconds[, pattern])`: the time as a string, by default
/// `yyyy-MM-dd HH:mm:ss`.
fn from_unixtime(args: &[ArrayRef]) -> Result<ArrayRef> {
    let seconds = cast_with_options(&args[0], &DataType::Int64, &CastOptions::default())?;
    let seconds = seconds
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64");
    let pattern_of = patterns(args, DEFAULT_PATTERN);
    let mut cache = Patterns::default();
    let mut out = Vec::with_capacity(seconds.len());
    for row in 0..seconds.len() {
        let time = (!seconds.is_null(row))
            .then(|| DateTime::from_timestamp(seconds.value(row), 0))
            .flatten()
            .map(|t| t.naive_utc());
        let value = match (time, pattern_of(row)) {
            (Some(time), Some(pattern)) => format(&time, cache.chrono(pattern)?),
            _ => None,
        };
        out.push(value);
    }
    Ok(Arc::new(StringArray::from(out)))
}
