//! Flink's string functions where DataFusion's answer differently or are missing:
//! `CONCAT` (NULL if any argument is), `SUBSTRING`/`SUBSTR` (position 0 is 1, negative
//! positions count from the end), `LEFT`/`RIGHT` (a negative length is empty),
//! `REGEXP_REPLACE` (every match, the replacement taken literally), `REGEXP_EXTRACT`,
//! `REGEXP`, `SPLIT_INDEX`, `LOCATE` and `CHR`.

use std::collections::HashMap;
use std::sync::Arc;

use std::fmt::Write as _;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray, StringBuilder};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::DataType;
use datafusion_common::{Result, exec_err};
use datafusion_expr::{ScalarUDF, Signature, TypeSignature, Volatility};
use regex::{NoExpand, Regex};

use super::{FlinkFunction, Returns};

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
            Returns::Fixed(DataType::Utf8),
            concat,
        ),
        substr(),
        FlinkFunction::udf(
            "left",
            exact(vec![text(), int()]),
            Returns::Fixed(DataType::Utf8),
            left,
        ),
        FlinkFunction::udf(
            "right",
            exact(vec![text(), int()]),
            Returns::Fixed(DataType::Utf8),
            right,
        ),
        FlinkFunction::udf(
            "regexp_replace",
            exact(vec![text(), text(), text()]),
            Returns::Fixed(DataType::Utf8),
            regexp_replace,
        ),
        FlinkFunction::udf(
            "regexp_extract",
            either(vec![vec![text(), text()], vec![text(), text(), int()]]),
            Returns::Fixed(DataType::Utf8),
            regexp_extract,
        ),
        FlinkFunction::udf(
            "regexp",
            exact(vec![text(), text()]),
            Returns::Fixed(DataType::Boolean),
            regexp,
        ),
        FlinkFunction::udf(
            "split_index",
            exact(vec![text(), text(), int()]),
            Returns::Fixed(DataType::Utf8),
            split_index,
        ),
        FlinkFunction::udf(
            "locate",
            either(vec![vec![text(), text()], vec![text(), text(), int()]]),
            Returns::Fixed(DataType::Int64),
            locate,
        ),
        FlinkFunction::udf(
            "chr",
            exact(vec![int()]),
            Returns::Fixed(DataType::Utf8),
            chr,
        ),
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
        Returns::Fixed(DataType::Utf8),
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

/// A STRING per row, written into one builder (no string is allocated per row): `append`
/// appends the row's value, or a NULL. A row where any argument is NULL is NULL.
fn text_per_row(
    args: &[ArrayRef],
    mut append: impl FnMut(usize, &mut StringBuilder) -> Result<()>,
) -> Result<ArrayRef> {
    let rows = args.first().map_or(0, |a| a.len());
    let mut out = StringBuilder::with_capacity(rows, rows * 16);
    for row in 0..rows {
        match args.iter().any(|a| a.is_null(row)) {
            true => out.append_null(),
            false => append(row, &mut out)?,
        }
    }
    Ok(Arc::new(out.finish()))
}

fn concat(args: &[ArrayRef]) -> Result<ArrayRef> {
    let parts = args.iter().map(strings).collect::<Result<Vec<_>>>()?;
    text_per_row(args, |row, out| {
        for part in &parts {
            out.write_str(part.value(row))
                .expect("writing to a string builder");
        }
        out.append_value("");
        Ok(())
    })
}

/// The byte offset of character `index` of `text` (its length past the last character).
fn char_offset(text: &str, index: usize) -> usize {
    text.char_indices()
        .nth(index)
        .map_or(text.len(), |(at, _)| at)
}

/// Flink's substring of `text` from 1-based `pos` (0 is 1; negative counts from the end)
/// for `len` characters (NULL for a negative length).
fn substring(text: &str, pos: i64, len: Option<i64>) -> Option<&str> {
    if len.is_some_and(|l| l < 0) {
        return None;
    }
    let n = text.chars().count() as i64;
    let start = match pos {
        0 => 0,
        p if p > 0 => p - 1,
        p => n + p,
    };
    if start < 0 || start >= n {
        return Some("");
    }
    let end = len.map_or(n, |l| (start + l).min(n));
    let from = char_offset(text, start as usize);
    let to = from + char_offset(&text[from..], (end - start) as usize);
    Some(&text[from..to])
}

fn substr_values(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = strings(&args[0])?;
    let pos = ints(&args[1])?;
    let len = args.get(2).map(ints).transpose()?;
    text_per_row(args, |row, out| {
        let len = len.as_ref().map(|l| l.value(row));
        out.append_option(substring(text.value(row), pos.value(row), len));
        Ok(())
    })
}

fn left(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, count) = (strings(&args[0])?, ints(&args[1])?);
    text_per_row(args, |row, out| {
        let text = text.value(row);
        out.append_value(&text[..char_offset(text, count.value(row).max(0) as usize)]);
        Ok(())
    })
}

fn right(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, count) = (strings(&args[0])?, ints(&args[1])?);
    text_per_row(args, |row, out| {
        let text = text.value(row);
        let n = text.chars().count();
        let count = (count.value(row).max(0) as usize).min(n);
        out.append_value(&text[char_offset(text, n - count)..]);
        Ok(())
    })
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
    text_per_row(args, |row, out| {
        let regex = regexes.get(pattern.value(row))?;
        let replaced = regex.replace_all(text.value(row), NoExpand(replacement.value(row)));
        out.append_value(replaced);
        Ok(())
    })
}

/// `REGEXP_EXTRACT(s, regex[, group])`: the group (by default 0, the whole match) of the
/// first match; NULL without a match or such a group.
fn regexp_extract(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, pattern) = (strings(&args[0])?, strings(&args[1])?);
    let group = args.get(2).map(ints).transpose()?;
    let mut regexes = Regexes::default();
    text_per_row(args, |row, out| {
        let regex = regexes.get(pattern.value(row))?;
        let index = usize::try_from(group.as_ref().map_or(0, |g| g.value(row)));
        let found = index.ok().and_then(|index| {
            regex
                .captures(text.value(row))
                .and_then(|c| c.get(index))
                .map(|m| m.as_str())
        });
        out.append_option(found);
        Ok(())
    })
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
    text_per_row(args, |row, out| {
        let (text, delimiter) = (text.value(row), delimiter.value(row));
        let piece =
            usize::try_from(index.value(row))
                .ok()
                .and_then(|index| match delimiter.is_empty() {
                    true => (index == 0).then_some(text),
                    false => text.split(delimiter).nth(index),
                });
        out.append_option(piece);
        Ok(())
    })
}

/// `LOCATE(needle, haystack[, from])`: the 1-based position of `needle` at or after
/// position `from`, 0 if there is none.
fn locate(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (needle, haystack) = (strings(&args[0])?, strings(&args[1])?);
    let from = args.get(2).map(ints).transpose()?;
    let out = per_row(args, |row| {
        let haystack = haystack.value(row);
        let from = from.as_ref().map_or(1, |f| f.value(row)).max(1) as usize - 1;
        let found = match haystack.char_indices().nth(from) {
            Some((at, _)) => haystack[at..].find(needle.value(row)).map(|i| at + i),
            None if from == haystack.chars().count() => {
                needle.value(row).is_empty().then_some(haystack.len())
            }
            None => None,
        };
        let position = found.map_or(0, |at| haystack[..at].chars().count() as i64 + 1);
        Ok(Some(position))
    })?;
    Ok(Arc::new(Int64Array::from(out)))
}

/// `CHR(n)`: the character of code `n` modulo 256; empty for a negative `n`.
fn chr(args: &[ArrayRef]) -> Result<ArrayRef> {
    let codes = ints(&args[0])?;
    text_per_row(args, |row, out| {
        let code = codes.value(row);
        if code < 0 {
            out.append_value("");
            return Ok(());
        }
        let c = char::from_u32((code % 256) as u32).expect("a Latin-1 character");
        out.append_value(c.encode_utf8(&mut [0; 4]));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn substrings_as_flink_takes_them() {
        let s = |pos, len| substring("hello", pos, len);
        assert_eq!(s(2, Some(3)), Some("ell"));
        assert_eq!(s(0, Some(2)), Some("he"));
        assert_eq!(s(-3, Some(2)), Some("ll"));
        assert_eq!(s(-2, None), Some("lo"));
        assert_eq!(s(10, None), Some(""));
        assert_eq!(s(-10, Some(2)), Some(""));
        assert_eq!(s(2, Some(-1)), None);
    }
}
