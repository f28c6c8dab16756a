//! Flink's string functions where DataFusion's answer differently or are missing:
//! `CONCAT` (NULL if any argument is), `SUBSTRING`/`SUBSTR` (position 0 is 1, negative
//! positions count from the end), `LEFT`/`RIGHT` (a negative length is empty),
//! `REGEXP_REPLACE` (every match, the replacement taken literally), `REGEXP_EXTRACT`,
//! `REGEXP`, `SPLIT_INDEX`, `LOCATE` and `CHR`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::DataType;
use datafusion_common::{Result, exec_err};
use datafusion_expr::{ScalarUDF, Signature, TypeSignature, Volatility};
use regex::{NoExpand, Regex};

use super::{BIGINT, BOOLEAN, FlinkFunction, STRING, returns};

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    let text = || DataType::Utf8;
    let int = || DataType::Int64;
    let exact = |types: Vec<DataType>| Signature::exact(types, Volatility::Immutable);
    let either = |forms: Vec<Vec<DataType>>| {
        Signature::one_of(
            forms.into_iter().map(TypeSignature::Exact).collect(),
            Volatility::Immutable,
        )
    };
    vec![
        FlinkFunction::udf(
            "concat",
            Signature::variadic(vec![text()], Volatility::Immutable),
            returns::<STRING>,
            concat,
        ),
        substr(),
        FlinkFunction::udf("left", exact(vec![text(), int()]), returns::<STRING>, left),
        FlinkFunction::udf(
            "right",
            exact(vec![text(), int()]),
            returns::<STRING>,
            right,
        ),
        FlinkFunction::udf(
            "regexp_replace",
            exact(vec![text(), text(), text()]),
            returns::<STRING>,
            regexp_replace,
        ),
        FlinkFunction::udf(
            "regexp_extract",
            either(vec![vec![text(), text()], vec![text(), text(), int()]]),
            returns::<STRING>,
            regexp_extract,
        ),
        FlinkFunction::udf(
            "regexp",
            exact(vec![text(), text()]),
            returns::<BOOLEAN>,
            regexp,
        ),
        FlinkFunction::udf(
            "split_index",
            exact(vec![text(), text(), int()]),
            returns::<STRING>,
            split_index,
        ),
        FlinkFunction::udf(
            "locate",
            either(vec![vec![text(), text()], vec![text(), text(), int()]]),
            returns::<BIGINT>,
            locate,
        ),
        FlinkFunction::udf("chr", exact(vec![int()]), returns::<STRING>, chr),
    ]
}

/// `SUBSTRING(s FROM pos [FOR len])` / `SUBSTR(s, pos[, len])`.
pub fn substr() -> Arc<ScalarUDF> {
    let forms = vec![
        TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64]),
        TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64, DataType::Int64]),
    ];
    let udf = FlinkFunction::udf(
        "substr",
        Signature::one_of(forms, Volatility::Immutable),
        returns::<STRING>,
        substr_values,
    );
    Arc::new(udf.as_ref().clone().with_aliases(["substring"]))
}

fn strings(array: &ArrayRef) -> Result<StringArray> {
    let array = cast_with_options(array, &DataType::Utf8, &CastOptions::default())?;
    Ok(array
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("cast to Utf8")
        .clone())
}

fn ints(array: &ArrayRef) -> Result<Int64Array> {
    let array = cast_with_options(array, &DataType::Int64, &CastOptions::default())?;
    Ok(array
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64")
        .clone())
}

/// A value per row, NULL where any argument is NULL.
fn per_row<T>(
    args: &[ArrayRef],
    mut value: impl FnMut(usize) -> Result<Option<T>>,
) -> Result<Vec<Option<T>>> {
    let rows = args.first().map_or(0, |a| a.len());
    (0..rows)
        .map(|row| match args.iter().any(|a| a.is_null(row)) {
            true => Ok(None),
            false => value(row),
        })
        .collect()
}

fn concat(args: &[ArrayRef]) -> Result<ArrayRef> {
    let parts = args.iter().map(strings).collect::<Result<Vec<_>>>()?;
    let out = per_row(args, |row| {
        Ok(Some(parts.iter().map(|p| p.value(row)).collect::<String>()))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

/// Flink's substring of `chars` from 1-based `pos` (0 is 1; negative counts from the end)
/// for `len` characters (NULL for a negative length).
fn substring(text: &str, pos: i64, len: Option<i64>) -> Option<String> {
    if len.is_some_and(|l| l < 0) {
        return None;
    }
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len() as i64;
    let start = match pos {
        0 => 0,
        p if p > 0 => p - 1,
        p => n + p,
    };
    if start < 0 || start >= n {
        return Some(String::new());
    }
    let end = len.map_or(n, |l| (start + l).min(n));
    Some(chars[start as usize..end as usize].iter().collect())
}

fn substr_values(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = strings(&args[0])?;
    let pos = ints(&args[1])?;
    let len = args.get(2).map(ints).transpose()?;
    let out = per_row(args, |row| {
        let len = len.as_ref().map(|l| l.value(row));
        Ok(substring(text.value(row), pos.value(row), len))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

fn left(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, count) = (strings(&args[0])?, ints(&args[1])?);
    let out = per_row(args, |row| {
        let count = count.value(row).max(0) as usize;
        Ok(Some(
            text.value(row).chars().take(count).collect::<String>(),
        ))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

fn right(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, count) = (strings(&args[0])?, ints(&args[1])?);
    let out = per_row(args, |row| {
        let chars: Vec<char> = text.value(row).chars().collect();
        let count = (count.value(row).max(0) as usize).min(chars.len());
        Ok(Some(
            chars[chars.len() - count..].iter().collect::<String>(),
        ))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

/// Regular expressions compiled once each; a pattern Rust's engine refuses (Java's
/// look-arounds, back-references) is an error naming it.
#[derive(Default)]
struct Regexes(HashMap<String, Regex>);

impl Regexes {
    fn get(&mut self, pattern: &str) -> Result<&Regex> {
        if !self.0.contains_key(pattern) {
            match Regex::new(pattern) {
                Ok(regex) => self.0.insert(pattern.to_string(), regex),
                Err(error) => {
                    return exec_err!("unsupported regular expression '{pattern}': {error}");
                }
            };
        }
        Ok(&self.0[pattern])
    }
}

fn regexp_replace(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern, replacement) = (strings(&args[0])?, strings(&args[1])?, strings(&args[2])?);
    let mut regexes = Regexes::default();
    let out = per_row(args, |row| {
        let regex = regexes.get(pattern.value(row))?;
        let replaced = regex.replace_all(text.value(row), NoExpand(replacement.value(row)));
        Ok(Some(replaced.into_owned()))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

/// `REGEXP_EXTRACT(s, regex[, group])`: the group (by default 0, the whole match) of the
/// first match; NULL without a match or such a group.
fn regexp_extract(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0])?, strings(&args[1])?);
    let group = args.get(2).map(ints).transpose()?;
    let mut regexes = Regexes::default();
    let out = per_row(args, |row| {
        let regex = regexes.get(pattern.value(row))?;
        let index = group.as_ref().map_or(0, |g| g.value(row));
        let Ok(index) = usize::try_from(index) else {
            return Ok(None);
        };
        Ok(regex
            .captures(text.value(row))
            .and_then(|c| c.get(index))
            .map(|m| m.as_str().to_string()))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

fn regexp(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0])?, strings(&args[1])?);
    let mut regexes = Regexes::default();
    let out = per_row(args, |row| {
        Ok(Some(
            regexes.get(pattern.value(row))?.is_match(text.value(row)),
        ))
    })?;
    Ok(Arc::new(BooleanArray::from(out)))
}

/// `SPLIT_INDEX(s, delimiter, i)`: the `i`-th (from 0) piece; NULL past the last one or for
/// a negative `i`.
fn split_index(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, delimiter, index) = (strings(&args[0])?, strings(&args[1])?, ints(&args[2])?);
    let out = per_row(args, |row| {
        let Ok(index) = usize::try_from(index.value(row)) else {
            return Ok(None);
        };
        let (text, delimiter) = (text.value(row), delimiter.value(row));
        if delimiter.is_empty() {
            return Ok((index == 0).then(|| text.to_string()));
        }
        Ok(text.split(delimiter).nth(index).map(str::to_string))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

/// `LOCATE(needle, haystack[, from])`: the 1-based position of `needle` at or after
/// position `from`, 0 if there is none.
fn locate(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (needle, haystack) = (strings(&args[0])?, strings(&args[1])?);
    let from = args.get(2).map(ints).transpose()?;
    let out = per_row(args, |row| {
        let chars: Vec<char> = haystack.value(row).chars().collect();
        let needle: Vec<char> = needle.value(row).chars().collect();
        let from = from.as_ref().map_or(1, |f| f.value(row)).max(1) as usize - 1;
        let found = (from..=chars.len().saturating_sub(needle.len()))
            .find(|&i| chars.get(i..i + needle.len()) == Some(&needle[..]));
        Ok(Some(found.map_or(0, |i| i as i64 + 1)))
    })?;
    Ok(Arc::new(Int64Array::from(out)))
}

/// `CHR(n)`: the character of code `n` modulo 256; empty for a negative `n`.
fn chr(args: &[ArrayRef]) -> Result<ArrayRef> {
    let codes = ints(&args[0])?;
    let out = per_row(args, |row| {
        let code = codes.value(row);
        if code < 0 {
            return Ok(Some(String::new()));
        }
        let c = char::from_u32((code % 256) as u32).expect("a Latin-1 character");
        Ok(Some(c.to_string()))
    })?;
    Ok(Arc::new(StringArray::from(out)))
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn substrings_as_flink_takes_them() {
        let s = |pos, len| substring("hello", pos, len);
        assert_eq!(s(2, Some(3)).as_deref(), Some("ell"));
        assert_eq!(s(0, Some(2)).as_deref(), Some("he"));
        assert_eq!(s(-3, Some(2)).as_deref(), Some("ll"));
        assert_eq!(s(-2, None).as_deref(), Some("lo"));
        assert_eq!(s(10, None).as_deref(), Some(""));
        assert_eq!(s(-10, Some(2)).as_deref(), Some(""));
        assert_eq!(s(2, Some(-1)), None);
    }
}
