//! Query hints (`SELECT /*+ NAME(...) */ ...`). Flink's `STATE_TTL('name' = '1d', ...)`
//! gives the regular joins and unbounded GROUP BYs whose inputs are the named tables,
//! views or aliases their own state TTL, over `table.exec.state.ttl`. Other hints are
//! refused rather than ignored.

use std::collections::BTreeMap;

use datafusion_sql::sqlparser::ast::{Query, Select, SetExpr, TableFactor, TableWithJoins};
use eddy_common::config::checkpointing::parse_duration;

/// The `STATE_TTL` hints of a query: the state TTL in milliseconds by input name
/// (lowercase).
pub type StateTtlHints = BTreeMap<String, i64>;

/// Every `STATE_TTL` hint of the SELECTs of `query` (its subqueries and WITH queries
/// too); an error for another hint, a malformed one, or a name given two TTLs.
pub fn state_ttl_hints(query: &Query) -> Result<StateTtlHints, String> {
    let mut hints = StateTtlHints::new();
    visit_query(query, &mut hints)?;
    Ok(hints)
}

fn visit_query(query: &Query, hints: &mut StateTtlHints) -> Result<(), String> {
    if let Some(with) = &query.with {
        for cte in &with.cte_tables {
            visit_query(&cte.query, hints)?;
        }
    }
    visit_set_expr(&query.body, hints)
}

fn visit_set_expr(body: &SetExpr, hints: &mut StateTtlHints) -> Result<(), String> {
    match body {
        SetExpr::Select(select) => visit_select(select, hints),
        SetExpr::Query(query) => visit_query(query, hints),
        SetExpr::SetOperation { left, right, .. } => {
            visit_set_expr(left, hints)?;
            visit_set_expr(right, hints)
        }
        _ => Ok(()),
    }
}

fn visit_select(select: &Select, hints: &mut StateTtlHints) -> Result<(), String> {
    for hint in &select.optimizer_hints {
        if !hint.prefix.is_empty() {
            continue;
        }
        for (name, arguments) in parse_hints(&hint.text)? {
            if !name.eq_ignore_ascii_case("STATE_TTL") {
                return Err(format!(
                    "unsupported: the query hint {name} (Eddy knows STATE_TTL)"
                ));
            }
            for (key, value) in parse_options(&arguments)? {
                let ttl = parse_duration(&key, &value).map_err(|e| e.to_string())?;
                let ttl = ttl.as_millis() as i64;
                let key = key.to_lowercase();
                match hints.insert(key.clone(), ttl) {
                    Some(other) if other != ttl => {
                        return Err(format!(
                            "STATE_TTL gives '{key}' two TTLs ({other} ms and {ttl} ms)"
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    for table in &select.from {
        visit_table(table, hints)?;
    }
    Ok(())
}

fn visit_table(table: &TableWithJoins, hints: &mut StateTtlHints) -> Result<(), String> {
    visit_factor(&table.relation, hints)?;
    for join in &table.joins {
        visit_factor(&join.relation, hints)?;
    }
    Ok(())
}

fn visit_factor(factor: &TableFactor, hints: &mut StateTtlHints) -> Result<(), String> {
    match factor {
        TableFactor::Derived { subquery, .. } => visit_query(subquery, hints),
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => visit_table(table_with_joins, hints),
        _ => Ok(()),
    }
}

/// `NAME(arguments) [,] NAME(arguments) ...` as (name, arguments) pairs.
fn parse_hints(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut hints = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let open = rest
            .find('(')
            .ok_or_else(|| format!("malformed query hint '{}': expected NAME(...)", text.trim()))?;
        let name = rest[..open].trim().trim_start_matches(',').trim();
        let close = closing_parenthesis(&rest[open..]).ok_or_else(|| {
            format!(
                "malformed query hint '{}': a '(' is not closed",
                text.trim()
            )
        })?;
        hints.push((name.to_string(), rest[open + 1..open + close].to_string()));
        rest = rest[open + close + 1..].trim_start_matches([' ', ',', '\n', '\t']);
    }
    Ok(hints)
}

/// Where the parenthesis opening `text` closes, skipping quoted text.
fn closing_parenthesis(text: &str) -> Option<usize> {
    let (mut depth, mut quoted) = (0usize, false);
    for (i, c) in text.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `'key' = 'value', ...` as pairs.
fn parse_options(arguments: &str) -> Result<Vec<(String, String)>, String> {
    let malformed = || {
        format!("malformed STATE_TTL hint options ({arguments}): expected 'name' = 'duration', ...")
    };
    let mut options = Vec::new();
    let mut rest = arguments.trim();
    while !rest.is_empty() {
        let (key, after) = quoted(rest).ok_or_else(malformed)?;
        let after = after.trim_start().strip_prefix('=').ok_or_else(malformed)?;
        let (value, after) = quoted(after.trim_start()).ok_or_else(malformed)?;
        options.push((key, value));
        rest = after.trim_start();
        if let Some(next) = rest.strip_prefix(',') {
            rest = next.trim_start();
        } else if !rest.is_empty() {
            return Err(malformed());
        }
    }
    Ok(options)
}

/// A single-quoted string at the start of `text` (`''` for a quote) and the text after it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('\'')?.char_indices().peekable();
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        if c != '\'' {
            value.push(c);
        } else if chars.peek().is_some_and(|(_, next)| *next == '\'') {
            chars.next();
            value.push('\'');
        } else {
            return Some((value, &text[i + 2..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion_sql::sqlparser::dialect::GenericDialect;
    use datafusion_sql::sqlparser::parser::Parser;

    fn hints(sql: &str) -> Result<StateTtlHints, String> {
        let statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let datafusion_sql::sqlparser::ast::Statement::Query(query) = statement else {
            panic!("not a query");
        };
        state_ttl_hints(&query)
    }

    #[test]
    fn state_ttl_hints_are_found_in_every_select() {
        let found = hints(
            "SELECT /*+ STATE_TTL('O'='3d', 'l' = '12h') */ * FROM orders o JOIN
               (SELECT /*+ STATE_TTL('x' = '500ms') */ k, COUNT(*) FROM x GROUP BY k) l ON o.k = l.k",
        )
        .unwrap();
        assert_eq!(
            found,
            StateTtlHints::from([
                ("o".into(), 3 * 86_400_000),
                ("l".into(), 12 * 3_600_000),
                ("x".into(), 500),
            ])
        );
    }

    #[test]
    fn other_or_malformed_hints_are_refused() {
        let error = hints("SELECT /*+ BROADCAST(t) */ * FROM t").unwrap_err();
        assert!(
            error.contains("unsupported: the query hint BROADCAST"),
            "{error}"
        );
        let error = hints("SELECT /*+ STATE_TTL('t') */ * FROM t").unwrap_err();
        assert!(error.contains("malformed STATE_TTL"), "{error}");
        let error = hints("SELECT /*+ STATE_TTL('t' = 'soon') */ * FROM t").unwrap_err();
        assert!(error.contains("expected a duration"), "{error}");
        let error = hints(
            "SELECT /*+ STATE_TTL('t' = '1s') */ * FROM (SELECT /*+ STATE_TTL('t' = '2s') */ * FROM t)",
        )
        .unwrap_err();
        assert!(error.contains("two TTLs"), "{error}");
    }
}
