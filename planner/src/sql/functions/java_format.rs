//! Java date-time patterns (`yyyy-MM-dd HH:mm:ss.SSS`, as Flink's `DATE_FORMAT`,
//! `TO_TIMESTAMP` and `UNIX_TIMESTAMP` take them) translated to chrono's `%` formats.

use datafusion_common::{Result, plan_err};

/// The chrono format of Java pattern `pattern`; an error names a pattern letter Eddy does
/// not translate (rather than print it as text).
pub fn to_chrono(pattern: &str) -> Result<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            i = quoted(&chars, i + 1, &mut out);
            continue;
        }
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        i += run;
        if !c.is_ascii_alphabetic() {
            for _ in 0..run {
                if c == '%' {
                    out.push_str("%%");
                } else {
                    out.push(c);
                }
            }
            continue;
        }
        out.push_str(letter(c, run, pattern)?);
    }
    Ok(out)
}

/// Copies the quoted text starting at `start` (after its opening quote); `''` is a quote.
/// Returns the index after the closing quote.
fn quoted(chars: &[char], start: usize, out: &mut String) -> usize {
    if chars.get(start) == Some(&'\'') {
        out.push('\'');
        return start + 1;
    }
    let mut i = start;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('\'', Some('\'')) => {
                out.push('\'');
                i += 2;
            }
            ('\'', _) => return i + 1,
            ('%', _) => {
                out.push_str("%%");
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    i
}

/// The chrono specifier of `count` repetitions of pattern letter `c`.
fn letter(c: char, count: usize, pattern: &str) -> Result<&'static str> {
    let spec = match (c, count) {
        ('y' | 'u', 2) => "%y",
        ('y' | 'u', _) => "%Y",
        ('M' | 'L', 1) => "%-m",
        ('M' | 'L', 2) => "%m",
        ('M' | 'L', 3) => "%b",
        ('M' | 'L', _) => "%B",
        ('d', 1) => "%-d",
        ('d', 2) => "%d",
        ('D', 1) => "%-j",
        ('D', 3) => "%j",
        ('H', 1) => "%-H",
        ('H', 2) => "%H",
        ('h', 1) => "%-I",
        ('h', 2) => "%I",
        ('m', 1) => "%-M",
        ('m', 2) => "%M",
        ('s', 1) => "%-S",
        ('s', 2) => "%S",
        ('S', 3) => "%3f",
        ('S', 6) => "%6f",
        ('S', 9) => "%9f",
        ('a', 1) => "%p",
        ('E', 1..=3) => "%a",
        ('E', _) => "%A",
        ('Z', 1..=3) => "%z",
        _ => {
            let letters: String = std::iter::repeat_n(c, count).collect();
            return plan_err!(
                "unsupported: the date-time pattern letter(s) '{letters}' in '{pattern}'"
            );
        }
    };
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_patterns_translate() {
        assert_eq!(
            to_chrono("yyyy-MM-dd HH:mm:ss").unwrap(),
            "%Y-%m-%d %H:%M:%S"
        );
        assert_eq!(
            to_chrono("yyyy-MM-dd HH:mm:ss.SSS").unwrap(),
            "%Y-%m-%d %H:%M:%S.%3f"
        );
        assert_eq!(to_chrono("yy/M/d h:mm a").unwrap(), "%y/%-m/%-d %-I:%M %p");
        assert_eq!(to_chrono("EEE, d MMM yyyy").unwrap(), "%a, %-d %b %Y");
        assert_eq!(to_chrono("EEEE MMMM").unwrap(), "%A %B");
    }

    #[test]
    fn quotes_and_percent_signs_are_text() {
        assert_eq!(to_chrono("yyyy'T'HH").unwrap(), "%YT%H");
        assert_eq!(to_chrono("HH'o''clock'").unwrap(), "%Ho'clock");
        assert_eq!(to_chrono("''").unwrap(), "'");
        assert_eq!(to_chrono("HH%mm").unwrap(), "%H%%%M");
    }

    #[test]
    fn unknown_letters_are_refused_by_name() {
        let error = to_chrono("yyyy QQ").unwrap_err().to_string();
        assert!(error.contains("'QQ'"), "{error}");
        assert!(
            to_chrono("SS").is_err(),
            "two fraction digits are not translated"
        );
    }
}
