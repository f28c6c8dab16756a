//! Flink's group windows, `GROUP BY TUMBLE(ts, size)` (`HOP(ts, slide, size)`,
//! `SESSION(ts, gap)`) with `TUMBLE_START(...)`, `TUMBLE_END(...)` and `TUMBLE_ROWTIME(...)`
//! in the select list, rewritten into the window TVF Eddy plans:
//! `FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size)) GROUP BY window_start, window_end`,
//! the window functions becoming `window_start`, `window_end` and `window_time`. Their
//! results are the same: each window is emitted once, when the watermark passes its end;
//! a session window is per grouping key, as the window aggregate keeps it.

use std::ops::ControlFlow;

use datafusion_sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, SetExpr,
    TableFactor, visit_expressions_mut,
};
use datafusion_sql::sqlparser::dialect::GenericDialect;
use datafusion_sql::sqlparser::parser::Parser;

use super::script::PARTITION_MARKER;

const WINDOWS: [&str; 3] = ["TUMBLE", "HOP", "SESSION"];

/// Rewrites every group window of `query` (and of its subqueries and set operations).
pub fn rewrite(query: &mut ast::Query) -> Result<(), String> {
    rewrite_body(&mut query.body)
}

fn rewrite_body(body: &mut SetExpr) -> Result<(), String> {
    match body {
        SetExpr::Select(select) => rewrite_select(select),
        SetExpr::Query(query) => rewrite(query),
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_body(left)?;
            rewrite_body(right)
        }
        _ => Ok(()),
    }
}

/// A group window call: its kind and arguments.
fn window_call(expr: &ast::Expr) -> Option<(String, Vec<ast::Expr>)> {
    let ast::Expr::Function(function) = expr else {
        return None;
    };
    let name = function.name.to_string().to_ascii_uppercase();
    if !WINDOWS.contains(&name.as_str()) {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let args = list
        .args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((name, args))
}

fn rewrite_select(select: &mut ast::Select) -> Result<(), String> {
    for table in &mut select.from {
        if let TableFactor::Derived { subquery, .. } = &mut table.relation {
            rewrite(subquery)?;
        }
    }
    rewrite_group_window(select)?;
    resolve_window_partitions(select)
}

fn rewrite_group_window(select: &mut ast::Select) -> Result<(), String> {
    let GroupByExpr::Expressions(keys, _) = &mut select.group_by else {
        return Ok(());
    };
    let Some(position) = keys.iter().position(|k| window_call(k).is_some()) else {
        return Ok(());
    };
    let (kind, args) = window_call(&keys[position]).expect("found above");
    let expected = if kind == "HOP" { 3 } else { 2 };
    if args.len() != expected {
        return Err(format!(
            "the group window {kind} takes {expected} arguments, got {}",
            args.len()
        ));
    }
    let [table] = select.from.as_mut_slice() else {
        return Err(unsupported(&kind, "over several tables"));
    };
    if !table.joins.is_empty() {
        return Err(unsupported(&kind, "over a join"));
    }
    // A group window's session is per grouping key.
    let partition = match kind.as_str() {
        "SESSION" => keys
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != position)
            .map(|(_, key)| {
                column_name(key).ok_or_else(|| unsupported(&kind, "grouped by an expression"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => Vec::new(),
    };
    table.relation = window_relation(&kind, &table.relation, &args, &partition)?;
    keys.splice(
        position..=position,
        [ident("window_start"), ident("window_end")],
    );
    if replace_window_properties(select, &kind)? {
        // The window's time depends on its bounds: grouping by it too changes nothing.
        if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
            keys.push(ident("window_time"));
        }
    }
    Ok(())
}

fn unsupported(kind: &str, over: &str) -> String {
    format!(
        "unsupported: the group window {kind}(...) {over}; declare a view for its input, or \
         write the window TVF TABLE({kind}(TABLE t, DESCRIPTOR(ts), ...))"
    )
}

fn ident(name: &str) -> ast::Expr {
    ast::Expr::Identifier(Ident::new(name))
}

/// `TABLE(KIND(t, DESCRIPTOR(time), intervals...)) AS alias` for the table `relation`.
fn window_relation(
    kind: &str,
    relation: &TableFactor,
    args: &[ast::Expr],
    partition: &[String],
) -> Result<TableFactor, String> {
    let TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = relation
    else {
        return Err(unsupported(kind, "over a subquery"));
    };
    let time = match &args[0] {
        ast::Expr::Identifier(ident) => ident.clone(),
        ast::Expr::CompoundIdentifier(idents) => idents.last().expect("a name").clone(),
        other => {
            return Err(format!(
                "the group window {kind} needs a time attribute column first, not {other}"
            ));
        }
    };
    let intervals: Vec<String> = args[1..].iter().map(ToString::to_string).collect();
    let alias = match alias {
        Some(alias) if alias.columns.is_empty() => alias.name.to_string(),
        Some(_) => return Err(unsupported(kind, "over a table renamed with column names")),
        None => name.0.last().map(ToString::to_string).unwrap_or_default(),
    };
    // What the script reader makes of `TABLE t [PARTITION BY (keys)]`.
    let table = match partition {
        [] => name.to_string(),
        keys => format!("{PARTITION_MARKER}({name}, {})", keys.join(", ")),
    };
    let text = format!(
        "TABLE({kind}({table}, DESCRIPTOR({time}), {})) AS {alias}",
        intervals.join(", ")
    );
    Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut parser| parser.parse_table_factor())
        .map_err(|e| format!("rewriting the group window {kind}: {e}"))
}

/// The column a grouping key names, if it is a column.
fn column_name(expr: &ast::Expr) -> Option<String> {
    match expr {
        ast::Expr::Identifier(ident) => Some(ident.value.to_ascii_lowercase()),
        ast::Expr::CompoundIdentifier(idents) => {
            idents.last().map(|i| i.value.to_ascii_lowercase())
        }
        _ => None,
    }
}

/// Checks the `PARTITION BY` of the window TVFs the select reads (as the script reader
/// marked it) and drops the mark. Eddy computes a session per grouping key, which is
/// Flink's answer only when the session's `PARTITION BY` names exactly the grouping keys
/// besides the window's bounds: otherwise the select is refused, never answered
/// differently.
fn resolve_window_partitions(select: &mut ast::Select) -> Result<(), String> {
    let grouping: Option<Vec<String>> = match &select.group_by {
        GroupByExpr::Expressions(keys, _) => keys
            .iter()
            .map(column_name)
            .filter(|k| {
                !matches!(
                    k.as_deref(),
                    Some("window_start" | "window_end" | "window_time")
                )
            })
            .collect(),
        _ => None,
    };
    for table in &mut select.from {
        let TableFactor::TableFunction {
            expr: ast::Expr::Function(function),
            ..
        } = &mut table.relation
        else {
            continue;
        };
        let kind = function.name.to_string().to_ascii_uppercase();
        let FunctionArguments::List(list) = &mut function.args else {
            continue;
        };
        let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) = list.args.first_mut() else {
            continue;
        };
        let (table_name, partition) = match window_call_or_marker(first) {
            Some(marked) => marked,
            None => (first.clone(), Vec::new()),
        };
        *first = table_name;
        if kind != "SESSION" {
            if !partition.is_empty() {
                return Err(format!(
                    "unsupported: PARTITION BY in {kind}; only SESSION takes it"
                ));
            }
            continue;
        }
        let mut expected = partition.clone();
        expected.sort();
        let grouped = grouping.clone().map(|mut keys| {
            keys.sort();
            keys
        });
        if grouped.as_ref() != Some(&expected) {
            return Err(format!(
                "unsupported: a SESSION window whose PARTITION BY ({}) is not the GROUP BY keys \
                 besides window_start and window_end ({}); Eddy computes each session per \
                 grouping key, so write PARTITION BY with exactly those keys",
                partition.join(", "),
                grouping.map_or("no GROUP BY in the same SELECT".into(), |g| g.join(", "))
            ));
        }
    }
    Ok(())
}

/// `eddy_partition_by(t, k1, k2)` as the table `t` and the keys.
fn window_call_or_marker(expr: &ast::Expr) -> Option<(ast::Expr, Vec<String>)> {
    let ast::Expr::Function(function) = expr else {
        return None;
    };
    if !function
        .name
        .to_string()
        .eq_ignore_ascii_case(PARTITION_MARKER)
    {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let mut args = list.args.iter().map(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
        _ => None,
    });
    let table = args.next()??;
    let keys = args
        .map(|key| key.as_ref().and_then(column_name))
        .collect::<Option<Vec<_>>>()?;
    Some((table, keys))
}

/// `KIND_START(...)`, `KIND_END(...)` and `KIND_ROWTIME(...)` become the window's columns;
/// true if the window's time is used.
fn replace_window_properties(select: &mut ast::Select, kind: &str) -> Result<bool, String> {
    let mut failure = None;
    let mut uses_time = false;
    let mut replace = |expr: &mut ast::Expr| {
        if let ast::Expr::Function(function) = expr {
            let name = function.name.to_string().to_ascii_uppercase();
            let column = match name.strip_prefix(kind).and_then(|s| s.strip_prefix('_')) {
                Some("START") => "window_start",
                Some("END") => "window_end",
                Some("ROWTIME") => {
                    uses_time = true;
                    "window_time"
                }
                Some(other) => {
                    failure = Some(format!("unsupported: {name} ({kind}_{other})"));
                    return ControlFlow::Break(());
                }
                None => return ControlFlow::Continue(()),
            };
            *expr = ident(column);
        }
        ControlFlow::Continue(())
    };
    for item in &mut select.projection {
        let _ = visit_expressions_mut(item, &mut replace);
    }
    if let Some(having) = &mut select.having {
        let _ = visit_expressions_mut(having, &mut replace);
    }
    match failure {
        Some(failure) => Err(failure),
        None => Ok(uses_time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String, String> {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).unwrap();
        let ast::Statement::Query(query) = &mut statements[0] else {
            panic!("a query");
        };
        rewrite(query)?;
        Ok(query.to_string())
    }

    #[test]
    fn a_group_window_becomes_a_window_tvf() {
        let sql = "SELECT k, TUMBLE_START(ts, INTERVAL '1' SECOND), COUNT(*) FROM t \
                   GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), k";
        assert_eq!(
            rewritten(sql).unwrap(),
            "SELECT k, window_start, COUNT(*) FROM TABLE(TUMBLE(t, DESCRIPTOR(ts), \
             INTERVAL '1' SECOND)) AS t GROUP BY window_start, window_end, k"
        );
    }

    #[test]
    fn the_rowtime_groups_by_the_windows_time_and_proctime_is_refused() {
        let sql = "SELECT HOP_ROWTIME(ts, INTERVAL '1' SECOND, INTERVAL '2' SECOND) FROM t AS x \
                   GROUP BY HOP(ts, INTERVAL '1' SECOND, INTERVAL '2' SECOND)";
        let query = rewritten(sql).unwrap();
        assert!(
            query.ends_with("AS x GROUP BY window_start, window_end, window_time"),
            "{query}"
        );
        let sql = "SELECT SESSION_PROCTIME(ts, INTERVAL '1' SECOND) FROM t \
                   GROUP BY SESSION(ts, INTERVAL '1' SECOND)";
        assert!(rewritten(sql).unwrap_err().contains("SESSION_PROCTIME"));
    }
}
