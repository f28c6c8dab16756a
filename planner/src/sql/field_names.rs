//! Names of ROW field accesses. `SELECT bid.auction FROM datagen`, where `bid` is a ROW
//! column, gives a column named `auction` in Flink (the field's name); DataFusion would
//! name it `datagen.bid[auction]`, which a view's readers could not refer to. A select
//! item `row.field` without an alias gets the field's name as its alias before planning.

use std::collections::HashSet;

use datafusion_sql::sqlparser::ast::{self, SelectItem, SetExpr, TableFactor};

use super::script::normalize;

/// Aliases every unaliased `row.field` select item of `query` (and of its subqueries) whose
/// `row` is one of `row_columns` (names of ROW columns, normalized) with `field`.
pub fn name_row_fields(query: &mut ast::Query, row_columns: &HashSet<String>) {
    if row_columns.is_empty() {
        return;
    }
    if let Some(with) = &mut query.with {
        for table in &mut with.cte_tables {
            name_row_fields(&mut table.query, row_columns);
        }
    }
    name_in_body(&mut query.body, row_columns);
}

fn name_in_body(body: &mut SetExpr, row_columns: &HashSet<String>) {
    match body {
        SetExpr::Select(select) => name_in_select(select, row_columns),
        SetExpr::Query(query) => name_row_fields(query, row_columns),
        SetExpr::SetOperation { left, right, .. } => {
            name_in_body(left, row_columns);
            name_in_body(right, row_columns);
        }
        _ => {}
    }
}

fn name_in_select(select: &mut ast::Select, row_columns: &HashSet<String>) {
    for item in &mut select.projection {
        if let SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(parts)) = item
            && let [row, field] = parts.as_slice()
            && row_columns.contains(&normalize(row))
        {
            let alias = field.clone();
            let expr = ast::Expr::CompoundIdentifier(parts.clone());
            *item = SelectItem::ExprWithAlias { expr, alias };
        }
    }
    for table in &mut select.from {
        name_in_factor(&mut table.relation, row_columns);
        for join in &mut table.joins {
            name_in_factor(&mut join.relation, row_columns);
        }
    }
}

fn name_in_factor(factor: &mut TableFactor, row_columns: &HashSet<String>) {
    if let TableFactor::Derived { subquery, .. } = factor {
        name_row_fields(subquery, row_columns);
    }
}
