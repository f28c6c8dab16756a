//! `JSON_VALUE(json, path)`: the scalar at a SQL/JSON path of a JSON string, as a STRING,
//! as Flink answers it (the `RETURNING` and `ON EMPTY`/`ON ERROR` clauses are not parsed, so
//! they are refused). A path is `$` followed by `.key`, `."key"`, `['key']` or `[index]`
//! steps, in lax mode (or with `lax`/`strict` before it). Where the path finds nothing, an
//! object or an array, or the JSON is malformed, the answer is NULL, as Flink's default
//! `NULL ON EMPTY` and `NULL ON ERROR` have it. A number is answered as Java's `BigDecimal`
//! writes the number as the JSON has it (`1.50` stays `1.50`, `1e3` is `1E+3`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use datafusion_common::{Result, exec_err};
use datafusion_expr::{ScalarUDF, Signature, Volatility};

use super::{FlinkFunction, Returns};

/// The functions of this module.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![FlinkFunction::udf(
        "json_value",
        Signature::any(2, Volatility::Immutable),
        Returns::Fixed(DataType::Utf8),
        json_value,
    )]
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Parses `$.a['b'][0]`-style paths.
fn parse_path(path: &str) -> Result<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix("lax ")
        .or_else(|| path.strip_prefix("strict "))
        .unwrap_or(path)
        .trim_start();
    let Some(mut rest) = path.strip_prefix('$') else {
        return exec_err!("JSON_VALUE: the path '{path}' does not start with $");
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            if let Some(quoted) = after.strip_prefix('"') {
                let Some(end) = quoted.find('"') else {
                    return exec_err!("JSON_VALUE: unclosed quote in the path '{path}'");
                };
                steps.push(Step::Key(quoted[..end].to_string()));
                rest = &quoted[end + 1..];
            } else {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let key = &after[..end];
                if key.is_empty() || key == "*" {
                    return exec_err!("JSON_VALUE: unsupported step in the path '{path}'");
                }
                steps.push(Step::Key(key.to_string()));
                rest = &after[end..];
            }
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return exec_err!("JSON_VALUE: unclosed [ in the path '{path}'");
            };
            let inside = after[..end].trim();
            let key = inside
                .strip_prefix('\'')
                .and_then(|k| k.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|k| k.strip_suffix('"')));
            match (key, inside.parse::<usize>()) {
                (Some(key), _) => steps.push(Step::Key(key.to_string())),
                (None, Ok(index)) => steps.push(Step::Index(index)),
                _ => {
                    return exec_err!(
                        "JSON_VALUE: unsupported step [{inside}] in the path '{path}'"
                    );
                }
            }
            rest = &after[end + 1..];
        } else {
            return exec_err!("JSON_VALUE: cannot read the path '{path}' from '{rest}'");
        }
    }
    Ok(steps)
}

/// The scalar `steps` lead to in `json`, as text. The document must be valid JSON; the
/// path is then followed over its text, so a number keeps the digits the JSON wrote.
fn value_at(json: &str, steps: &[Step]) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(json).ok()?;
    let mut value = json.trim();
    for step in steps {
        value = match step {
            Step::Key(key) => member(value, key)?,
            Step::Index(index) => element(value, *index)?,
        };
    }
    match value.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(value).ok(),
        b't' | b'f' => Some(value.to_string()),
        b'-' | b'0'..=b'9' => java_decimal(value),
        _ => None,
    }
}

/// The text of the value `object` (the text of a JSON object) holds under `key`.
fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = object.strip_prefix('{')?.trim_start();
    while !rest.starts_with('}') {
        let name_len = value_len(rest)?;
        let name: String = serde_json::from_str(&rest[..name_len]).ok()?;
        rest = rest[name_len..]
            .trim_start()
            .strip_prefix(':')?
            .trim_start();
        let len = value_len(rest)?;
        if name == key {
            return Some(&rest[..len]);
        }
        rest = rest[len..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    None
}

/// The text of element `index` of `array` (the text of a JSON array).
fn element(array: &str, index: usize) -> Option<&str> {
    let mut rest = array.strip_prefix('[')?.trim_start();
    let mut position = 0;
    while !rest.starts_with(']') {
        let len = value_len(rest)?;
        if position == index {
            return Some(&rest[..len]);
        }
        position += 1;
        rest = rest[len..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    None
}

/// The length of the JSON value `text` starts with (the document is known to be valid).
fn value_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    match bytes.first()? {
        b'"' => {
            let mut i = 1;
            while i < bytes.len() {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            None
        }
        b'{' | b'[' => {
            let (mut depth, mut i) = (0usize, 0);
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i += value_len(&text[i..])?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => Some(
            bytes
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(bytes.len()),
        ),
    }
}

/// A JSON number as Java's `BigDecimal(text).toString()` writes it: plain when the scale is
/// not negative and the exponent not below -6, else `d.dddE±n`.
fn java_decimal(text: &str) -> Option<String> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i64>().ok()?),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let unscaled = match digits.trim_start_matches('0') {
        "" => "0",
        significant => significant,
    };
    let scale = fraction.len() as i64 - exponent;
    let precision = unscaled.len() as i64;
    let adjusted = precision - 1 - scale;
    let sign = if negative && unscaled != "0" { "-" } else { "" };
    let body = if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        match scale {
            0 => unscaled.to_string(),
            _ if unscaled.len() > scale => {
                let point = unscaled.len() - scale;
                format!("{}.{}", &unscaled[..point], &unscaled[point..])
            }
            _ => format!("0.{}{unscaled}", "0".repeat(scale - unscaled.len())),
        }
    } else {
        let (first, rest) = unscaled.split_at(1);
        let point = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!(
            "{first}{point}E{}{adjusted}",
            if adjusted >= 0 { "+" } else { "" }
        )
    };
    Some(format!("{sign}{body}"))
}

fn json_value(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (documents, paths) = (
        cast(&args[0], &DataType::Utf8)?,
        cast(&args[1], &DataType::Utf8)?,
    );
    let documents = documents
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("Utf8");
    let paths = paths.as_any().downcast_ref::<StringArray>().expect("Utf8");
    let mut parsed: Option<(String, Vec<Step>)> = None;
    let mut out = StringBuilder::new();
    for row in 0..documents.len() {
        if documents.is_null(row) || paths.is_null(row) {
            out.append_null();
            continue;
        }
        let path = paths.value(row);
        if parsed.as_ref().is_none_or(|(p, _)| p != path) {
            parsed = Some((path.to_string(), parse_path(path)?));
        }
        let steps = &parsed.as_ref().expect("parsed above").1;
        out.append_option(value_at(documents.value(row), steps));
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_reach_scalars_and_nothing_else() {
        let json = r#"{"a": {"b": [10, "x", true, null, {"c": 1}]}, "k e y": 2.5}"#;
        let at = |path: &str| value_at(json, &parse_path(path).unwrap());
        assert_eq!(at("$.a.b[0]").as_deref(), Some("10"));
        assert_eq!(at("lax $.a['b'][1]").as_deref(), Some("x"));
        assert_eq!(at("$.a.b[2]").as_deref(), Some("true"));
        assert_eq!(at("$.\"k e y\"").as_deref(), Some("2.5"));
        assert_eq!(at("$.a.b[3]"), None, "a JSON null");
        assert_eq!(at("$.a.b"), None, "an array");
        assert_eq!(at("$.a.missing"), None);
        assert_eq!(value_at("{not json", &parse_path("$.a").unwrap()), None);
        let tricky = r#"{"a\"b": {"x": "q\"}]"}, "c": [1, [2, 3], {"d": [4]}]}"#;
        let at = |path: &str| value_at(tricky, &parse_path(path).unwrap());
        assert_eq!(at("$.c[1][1]").as_deref(), Some("3"));
        assert_eq!(at("$.c[2].d[0]").as_deref(), Some("4"));
        assert_eq!(at("$['a\"b'].x").as_deref(), Some("q\"}]"));
        assert!(parse_path("a.b").is_err());
        assert!(parse_path("$.a[*]").is_err());
    }

    #[test]
    fn numbers_are_written_as_java_big_decimals() {
        for (json, java) in [
            ("1.50", "1.50"),
            ("1e3", "1E+3"),
            ("1.5E2", "1.5E+2"),
            ("-0.000001", "-0.000001"),
            ("0.0000001", "1E-7"),
            ("12345678901234567890", "12345678901234567890"),
            ("0.00", "0.00"),
            ("-0", "0"),
            ("120e-1", "12.0"),
        ] {
            assert_eq!(java_decimal(json).as_deref(), Some(java), "{json}");
        }
    }
}
