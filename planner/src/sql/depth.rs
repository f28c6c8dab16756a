//! Bounds on a statement's length and depth, so that no SQL — however long, however
//! deeply nested — can overflow a stack while it is planned or while its job runs.
//!
//! SQL parses long chains of binary operators (`a = 0 OR a = 1 OR …`, `1 + 1 + …`,
//! `UNION ALL` after `UNION ALL`) into trees as deep as the chain is long, and every later
//! walk over them (binding, optimizing, Eddy's planner, evaluating) recurses. So, before
//! anything else sees a statement:
//! - its tokens are counted: a statement of more than [`MAX_OPERATORS`] operators, or
//!   nesting parentheses, `CASE` or prefix operators more than [`MAX_NESTING`] deep, is an
//!   error before it is parsed (parsing chains is iterative; this bounds the tree that
//!   dropping a refused statement walks, and what the parser recurses into);
//! - a bound plan is checked against [`MAX_PLAN_NODES`] and [`MAX_PLAN_HEIGHT`]
//!   ([`check_plan`]: views expand where they are used);
//! - chains of `AND`, `OR` and `||`, exactly associative, are rebuilt balanced (depth
//!   log2 of their length), and an `OR` of equalities of one column with literals becomes
//!   that column's `IN` list (one hash lookup instead of a chain of comparisons), as
//!   Calcite's `SEARCH` does for Flink; likewise chains of one kind of `UNION`;
//! - what remains may nest [`MAX_DEPTH`] levels (expressions within expressions, queries
//!   within queries), a chain of `+` (or another operator that is not associative) may
//!   have [`MAX_CHAIN`] operators (binding one costs time growing with the square of its
//!   length, in DataFusion's naming and typing of every level), a `FROM` [`MAX_QUERIES`]
//!   joins and set operations as many queries; more is an error naming the limit.
//!
//! Planning runs on a thread whose stack holds [`MAX_DEPTH`] levels with room to spare
//! (see [`crate::plan()`]).

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion_common::Result as DataFusionResult;
use datafusion_common::tree_node::{TreeNodeRecursion, TreeNodeVisitor};
use datafusion_expr::LogicalPlan;
use datafusion_sql::sqlparser::ast::{
    BinaryOperator, Expr, Query, SetExpr, SetOperator, Value, VisitMut, VisitorMut,
};
use datafusion_sql::sqlparser::keywords::Keyword;
use datafusion_sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// Operators one statement may have: its parsed tree is at most this deep before the
/// guard rebalances it.
pub const MAX_OPERATORS: usize = 200_000;

/// Operators a chain of a non-associative operator (`+`, `-`, `*`, `/`, comparisons) may
/// have: it nests that deep.
pub const MAX_CHAIN: usize = 500;

/// Joins one `FROM` may have, and queries a statement may join by set operations.
pub const MAX_QUERIES: usize = 1_000;

/// Levels a statement may nest in all once its associative chains are balanced
/// (expressions within expressions, queries within queries, a chain of `+` within them).
pub const MAX_DEPTH: usize = 2_000;

/// Chains longer than this are rebuilt balanced; shorter ones are left as written (so
/// that plans of ordinary queries read as their SQL).
const BALANCE_FROM: usize = 32;

/// An `OR` of at least this many equalities of one column becomes an `IN` list.
const IN_LIST_FROM: usize = 10;

/// Levels of parentheses and `CASE … END` a statement may nest (and prefix operators such
/// as `NOT` or `-` in a row).
pub const MAX_NESTING: usize = 250;

/// How deep the SQL parser may recurse: enough for [`MAX_NESTING`] levels of whatever
/// nests (each takes a few of the parser's levels), checked on the tokens first so that
/// the parser's own limit, whose error some of its branches swallow, is never met.
pub const PARSER_RECURSION_LIMIT: usize = 8 * MAX_NESTING;

/// Checks one statement's tokens before it is parsed: at most [`MAX_OPERATORS`] operators
/// and [`MAX_NESTING`] levels of nesting.
pub fn check_tokens(tokens: &[TokenWithSpan]) -> Result<(), String> {
    let operators = tokens.iter().filter(|t| is_operator(&t.token)).count();
    if operators > MAX_OPERATORS {
        return Err(format!(
            "statement too long: {operators} operators, more than the {MAX_OPERATORS} a \
             statement may have (write a long list of values as IN (...))"
        ));
    }
    let nesting = nesting(tokens);
    if nesting > MAX_NESTING {
        return Err(format!(
            "statement nested too deep: {nesting} levels of parentheses, CASE or prefix \
             operators, more than the {MAX_NESTING} a statement may nest"
        ));
    }
    Ok(())
}

/// The deepest nesting of parentheses and `CASE … END` in `tokens`, or the longest run of
/// prefix operators if that is longer.
fn nesting(tokens: &[TokenWithSpan]) -> usize {
    let mut open: Vec<&Token> = Vec::new();
    let (mut deepest, mut prefixes, mut longest_run) = (0, 0, 0);
    for token in tokens.iter().map(|t| &t.token) {
        let keyword = match token {
            Token::Word(word) => word.keyword,
            _ => Keyword::NoKeyword,
        };
        match (token, keyword) {
            (Token::LParen, _) | (_, Keyword::CASE) => open.push(token),
            (Token::RParen, _) if open.last() == Some(&&Token::LParen) => {
                open.pop();
            }
            (_, Keyword::END) if open.last().is_some_and(|t| *t != &Token::LParen) => {
                open.pop();
            }
            _ => {}
        }
        deepest = deepest.max(open.len());
        let prefix =
            matches!(token, Token::Minus | Token::Plus | Token::Tilde) || keyword == Keyword::NOT;
        prefixes = if prefix { prefixes + 1 } else { 0 };
        longest_run = longest_run.max(prefixes);
    }
    deepest.max(longest_run)
}

fn is_operator(token: &Token) -> bool {
    match token {
        Token::Word(word) => matches!(word.keyword, Keyword::AND | Keyword::OR),
        Token::Plus
        | Token::Minus
        | Token::Mul
        | Token::Div
        | Token::Mod
        | Token::StringConcat
        | Token::Eq
        | Token::DoubleEq
        | Token::Neq
        | Token::Lt
        | Token::Gt
        | Token::LtEq
        | Token::GtEq => true,
        _ => false,
    }
}

/// Operators a bound query's plan may have, views expanded where they are used (a view
/// used twice counts twice: views built on views that use each other twice double at each
/// level).
pub const MAX_PLAN_NODES: usize = 20_000;

/// Operators a bound query's plan may nest (views on views, joins in a row).
pub const MAX_PLAN_HEIGHT: usize = 500;

/// Checks a bound plan (subqueries included) against [`MAX_PLAN_NODES`] and
/// [`MAX_PLAN_HEIGHT`], stopping at the first node past either, so that the check costs at
/// most that many nodes however large the plan is.
pub fn check_plan(plan: &LogicalPlan) -> Result<(), String> {
    let mut size = PlanSize::default();
    // The visitor only counts; an error is a stop, and the verdict is in `size`.
    let _ = plan.visit_with_subqueries(&mut size);
    if size.nodes > MAX_PLAN_NODES {
        return Err(format!(
            "query too large: more than {MAX_PLAN_NODES} operators in its plan, views \
             expanded where they are used"
        ));
    }
    if size.deepest > MAX_PLAN_HEIGHT {
        return Err(format!(
            "query nested too deep: its plan nests more than {MAX_PLAN_HEIGHT} operators \
             (views on views, joins in a row)"
        ));
    }
    Ok(())
}

#[derive(Default)]
struct PlanSize {
    nodes: usize,
    height: usize,
    deepest: usize,
}

impl<'n> TreeNodeVisitor<'n> for PlanSize {
    type Node = LogicalPlan;

    fn f_down(&mut self, _: &'n LogicalPlan) -> DataFusionResult<TreeNodeRecursion> {
        self.nodes += 1;
        self.height += 1;
        self.deepest = self.deepest.max(self.height);
        match self.nodes > MAX_PLAN_NODES || self.height > MAX_PLAN_HEIGHT {
            true => Ok(TreeNodeRecursion::Stop),
            false => Ok(TreeNodeRecursion::Continue),
        }
    }

    fn f_up(&mut self, _: &'n LogicalPlan) -> DataFusionResult<TreeNodeRecursion> {
        self.height -= 1;
        Ok(TreeNodeRecursion::Continue)
    }
}

/// Balances the associative chains of a query and checks its depth.
pub fn guard_query(query: &mut Query) -> Result<(), String> {
    guard(query)
}

/// Balances the associative chains of an expression and checks its depth.
pub fn guard_expr(expr: &mut Expr) -> Result<(), String> {
    guard(expr)
}

fn guard(node: &mut impl VisitMut) -> Result<(), String> {
    match node.visit(&mut Guard { depth: 0 }) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(error) => Err(error),
    }
}

/// Rebalances and counts levels on the way down; the walk never goes deeper than
/// [`MAX_DEPTH`] levels, since a level past it stops it (and never into a chain longer
/// than [`MAX_CHAIN`], which stops it at its top).
struct Guard {
    depth: usize,
}

impl Guard {
    fn enter(&mut self) -> ControlFlow<String> {
        self.depth += 1;
        match self.depth > MAX_DEPTH {
            true => ControlFlow::Break(format!(
                "statement nested too deep: expressions and queries nested more than \
                 {MAX_DEPTH} levels deep"
            )),
            false => ControlFlow::Continue(()),
        }
    }
}

impl VisitorMut for Guard {
    type Break = String;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<String> {
        self.enter()?;
        balance_set_operations(&mut query.body);
        check_set_expr(&query.body)
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<String> {
        self.enter()?;
        balance_expr(expr);
        let chain = left_spine(expr);
        match chain > MAX_CHAIN {
            true => ControlFlow::Break(format!(
                "statement nested too deep: a chain of {chain} operators (such as + or -), \
                 more than the {MAX_CHAIN} a chain may have"
            )),
            false => ControlFlow::Continue(()),
        }
    }

    fn post_visit_expr(&mut self, _: &mut Expr) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

/// How many binary operators are nested down the left of `expr` (a chain written
/// without parentheses nests that way).
fn left_spine(mut expr: &Expr) -> usize {
    let mut length = 0;
    while let Expr::BinaryOp { left, .. } = expr {
        length += 1;
        expr = left;
    }
    length
}

/// An operator that is exactly associative in SQL: `AND` and `OR` (three-valued logic
/// included) and `||`.
fn associative(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::And | BinaryOperator::Or | BinaryOperator::StringConcat
    )
}

/// Rebuilds a long chain of one associative operator balanced, an `OR` chain's
/// equalities on one column as `IN` lists.
fn balance_expr(expr: &mut Expr) {
    let Expr::BinaryOp { op, right, .. } = expr else {
        return;
    };
    // A chain as written nests down the left; one with the same operator on the right too
    // is balanced already (built here).
    let built_here = matches!(right.as_ref(), Expr::BinaryOp { op: o, .. } if o == op);
    if !associative(op) || built_here {
        return;
    }
    let op = op.clone();
    if chain_length(expr, &op) < BALANCE_FROM.min(IN_LIST_FROM) {
        return;
    }
    let taken = std::mem::replace(expr, Expr::Value(Value::Null.into()));
    let mut terms = flatten(taken, &op);
    if op == BinaryOperator::Or {
        terms = equalities_as_in_lists(terms);
    }
    *expr = match terms.len() >= BALANCE_FROM {
        true => balanced(terms, &op),
        false => left_deep(terms, &op),
    };
}

/// The terms of a chain of `op` (an upper bound: it follows left and right).
fn chain_length(expr: &Expr, op: &BinaryOperator) -> usize {
    let mut length = 1;
    let mut stack = vec![expr];
    while let Some(expr) = stack.pop() {
        if let Expr::BinaryOp { left, op: o, right } = expr
            && o == op
        {
            length += 1;
            stack.push(left);
            stack.push(right);
        }
    }
    length
}

/// The terms of a chain of `op`, in order, taken apart without recursion.
fn flatten(expr: Expr, op: &BinaryOperator) -> Vec<Expr> {
    let mut terms = Vec::new();
    let mut stack = vec![expr];
    while let Some(expr) = stack.pop() {
        match expr {
            Expr::BinaryOp { left, op: o, right } if o == *op => {
                stack.push(*right);
                stack.push(*left);
            }
            term => terms.push(term),
        }
    }
    terms
}

/// `terms` joined by `op` as written: `((a op b) op c) op d`.
fn left_deep(terms: Vec<Expr>, op: &BinaryOperator) -> Expr {
    let mut terms = terms.into_iter();
    let first = terms.next().expect("a chain has a term");
    terms.fold(first, |left, right| binary(left, op, right))
}

/// `terms` joined by `op` in a balanced tree, in order.
fn balanced(mut terms: Vec<Expr>, op: &BinaryOperator) -> Expr {
    while terms.len() > 1 {
        let mut pairs = Vec::with_capacity(terms.len().div_ceil(2));
        let mut level = terms.into_iter();
        while let Some(left) = level.next() {
            pairs.push(match level.next() {
                Some(right) => binary(left, op, right),
                None => left,
            });
        }
        terms = pairs;
    }
    terms.pop().expect("a chain has a term")
}

fn binary(left: Expr, op: &BinaryOperator, right: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(left),
        op: op.clone(),
        right: Box::new(right),
    }
}

/// The terms of an `OR` with the equalities of one column and a literal (at least
/// [`IN_LIST_FROM`] of them, literals of one kind) replaced by that column's `IN` list, in
/// the place of the first; `a = 1 OR a = 2` is `a IN (1, 2)` by SQL's definition.
fn equalities_as_in_lists(terms: Vec<Expr>) -> Vec<Expr> {
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, term) in terms.iter().enumerate() {
        if let Some((column, value)) = column_equals_literal(term) {
            groups
                .entry(format!("{column}\u{0}{}", literal_kind(value)))
                .or_default()
                .push(i);
        }
    }
    let mut folded: HashMap<usize, Vec<usize>> = groups
        .into_values()
        .filter(|members| members.len() >= IN_LIST_FROM)
        .map(|members| (members[0], members))
        .collect();
    if folded.is_empty() {
        return terms;
    }
    let mut slots: Vec<Option<Expr>> = terms.into_iter().map(Some).collect();
    let mut result = Vec::new();
    for i in 0..slots.len() {
        if let Some(members) = folded.remove(&i) {
            let mut column = None;
            let list = members
                .iter()
                .filter_map(|&m| slots[m].take())
                .filter_map(|term| {
                    let (c, v) = into_column_and_literal(term)?;
                    column.get_or_insert(c);
                    Some(v)
                })
                .collect();
            result.push(Expr::InList {
                expr: Box::new(column.expect("a group has a column")),
                list,
                negated: false,
            });
        } else if let Some(term) = slots[i].take() {
            result.push(term);
        }
    }
    result
}

/// `column = literal` or `literal = column`, for a column named plainly or qualified.
fn column_equals_literal(term: &Expr) -> Option<(&Expr, &Expr)> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = term
    else {
        return None;
    };
    let is_column = |e: &Expr| matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
    let is_literal = |e: &Expr| !literal_kind(e).is_empty();
    match (&**left, &**right) {
        (l, r) if is_column(l) && is_literal(r) => Some((l, r)),
        (l, r) if is_literal(l) && is_column(r) => Some((r, l)),
        _ => None,
    }
}

fn into_column_and_literal(term: Expr) -> Option<(Expr, Expr)> {
    let Expr::BinaryOp { left, right, .. } = term else {
        return None;
    };
    match literal_kind(&right).is_empty() {
        false => Some((*left, *right)),
        true => Some((*right, *left)),
    }
}

/// `number` or `string` for a literal of that kind, empty for anything else (values of
/// one `IN` list are of one kind, so that its common type is the one each equality had).
fn literal_kind(expr: &Expr) -> &'static str {
    match expr {
        Expr::Value(value) => match &value.value {
            Value::Number(..) => "number",
            Value::SingleQuotedString(_) => "string",
            _ => "",
        },
        _ => "",
    }
}

/// Rebuilds long chains of one kind of `UNION` (`ALL` or distinct) balanced.
fn balance_set_operations(body: &mut Box<SetExpr>) {
    let SetExpr::SetOperation {
        op: SetOperator::Union,
        set_quantifier,
        ..
    } = body.as_ref()
    else {
        return;
    };
    let quantifier = *set_quantifier;
    let mut branches = Vec::new();
    let mut stack = vec![std::mem::replace(
        body,
        Box::new(SetExpr::Values(empty_values())),
    )];
    while let Some(set) = stack.pop() {
        match *set {
            SetExpr::SetOperation {
                op: SetOperator::Union,
                set_quantifier,
                left,
                right,
            } if set_quantifier == quantifier => {
                stack.push(right);
                stack.push(left);
            }
            other => branches.push(Box::new(other)),
        }
    }
    let union = |left, right| {
        Box::new(SetExpr::SetOperation {
            op: SetOperator::Union,
            set_quantifier: quantifier,
            left,
            right,
        })
    };
    if branches.len() < BALANCE_FROM {
        let mut branches = branches.into_iter();
        let first = branches.next().expect("a union has branches");
        *body = branches.fold(first, union);
        return;
    }
    while branches.len() > 1 {
        let mut pairs = Vec::with_capacity(branches.len().div_ceil(2));
        let mut level = branches.into_iter();
        while let Some(left) = level.next() {
            pairs.push(match level.next() {
                Some(right) => union(left, right),
                None => left,
            });
        }
        branches = pairs;
    }
    *body = branches.pop().expect("a union has branches");
}

fn empty_values() -> datafusion_sql::sqlparser::ast::Values {
    datafusion_sql::sqlparser::ast::Values {
        explicit_row: false,
        value_keyword: false,
        rows: Vec::new(),
    }
}

/// Queries joined by set operations (which bounds how deep they nest), and the joins of
/// each `FROM`, within [`MAX_QUERIES`].
fn check_set_expr(body: &SetExpr) -> ControlFlow<String> {
    let mut stack = vec![body];
    let mut queries = 0;
    while let Some(set) = stack.pop() {
        match set {
            SetExpr::SetOperation { left, right, .. } => {
                stack.push(left);
                stack.push(right);
                continue;
            }
            SetExpr::Select(select) => {
                let joins: usize = select.from.iter().map(|from| from.joins.len()).sum();
                if joins > MAX_QUERIES {
                    return ControlFlow::Break(format!(
                        "statement nested too deep: {joins} joins in one FROM, more than \
                         {MAX_QUERIES}"
                    ));
                }
            }
            _ => {}
        }
        queries += 1;
        if queries > MAX_QUERIES {
            return ControlFlow::Break(format!(
                "statement too long: more than {MAX_QUERIES} queries joined by set operations \
                 (UNION, EXCEPT, INTERSECT)"
            ));
        }
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion_sql::sqlparser::ast::Statement;
    use datafusion_sql::sqlparser::dialect::GenericDialect;
    use datafusion_sql::sqlparser::parser::Parser;
    use datafusion_sql::sqlparser::tokenizer::{Tokenizer, Whitespace};

    /// The query of `sql` as the guard leaves it, or its error; on a planning thread, as
    /// the planner runs it.
    fn guarded(sql: &str) -> Result<String, String> {
        let guard = || {
            let mut statements = Parser::parse_sql(&GenericDialect {}, sql).unwrap();
            let Statement::Query(query) = &mut statements[0] else {
                panic!("a query");
            };
            Ok(guard_query(query).map(|()| query.to_string()))
        };
        crate::on_planning_thread(guard).unwrap()
    }

    fn depth(expr: &Expr) -> usize {
        match expr {
            Expr::BinaryOp { left, right, .. } => 1 + depth(left).max(depth(right)),
            _ => 0,
        }
    }

    #[test]
    fn short_chains_stay_as_written() {
        let sql = "SELECT a FROM t WHERE a = 1 OR a = 2 OR b > 3 AND c || d = 'x'";
        assert_eq!(guarded(sql).unwrap(), sql);
    }

    #[test]
    fn equalities_of_one_column_become_an_in_list_in_the_place_of_the_first() {
        let terms: Vec<String> = (0..12).map(|i| format!("t.a = {i}")).collect();
        let sql = format!(
            "SELECT a FROM t WHERE b = 'x' OR {} OR 5 = c",
            terms.join(" OR ")
        );
        assert_eq!(
            guarded(&sql).unwrap(),
            "SELECT a FROM t WHERE b = 'x' OR t.a IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11) OR 5 = c"
        );
        // Literals of two kinds are left alone (their common type would differ).
        let mixed: Vec<String> = (0..12)
            .map(|i| match i % 2 {
                0 => format!("a = {i}"),
                _ => format!("a = '{i}'"),
            })
            .collect();
        let sql = format!("SELECT a FROM t WHERE {}", mixed.join(" OR "));
        assert!(!guarded(&sql).unwrap().contains(" IN "));
    }

    #[test]
    fn long_associative_chains_are_balanced_in_order() {
        let terms: Vec<String> = (0..100_000).map(|i| format!("c{i} > {i}")).collect();
        let sql = format!("SELECT 1 FROM t WHERE {}", terms.join(" AND "));
        let mut statements = Parser::parse_sql(&GenericDialect {}, &sql).unwrap();
        let Statement::Query(query) = &mut statements[0] else {
            panic!("a query");
        };
        guard_query(query).unwrap();
        let SetExpr::Select(select) = query.body.as_ref() else {
            panic!("a select");
        };
        let selection = select.selection.as_ref().unwrap();
        assert_eq!(
            depth(selection),
            17 + 1,
            "log2(100 000) levels of AND, then >"
        );
        assert_eq!(
            flatten(selection.clone(), &BinaryOperator::And)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            terms
        );
    }

    #[test]
    fn a_long_chain_of_another_operator_is_an_error_naming_the_limit() {
        let sql = format!("SELECT {} FROM t", vec!["1"; MAX_CHAIN + 2].join(" + "));
        let error = guarded(&sql).unwrap_err();
        assert!(
            error.contains("501 operators") && error.contains("the 500 a chain"),
            "{error}"
        );
        let fits = format!("SELECT {} FROM t", vec!["1"; MAX_CHAIN + 1].join(" + "));
        assert!(guarded(&fits).is_ok());
    }

    #[test]
    fn long_unions_of_one_kind_are_balanced() {
        let branches: Vec<String> = (0..MAX_QUERIES).map(|i| format!("SELECT {i}")).collect();
        let all = guarded(&branches.join(" UNION ALL ")).unwrap();
        assert_eq!(all.matches("UNION ALL").count(), MAX_QUERIES - 1);
        let more = format!("{} UNION ALL SELECT 0", branches.join(" UNION ALL "));
        let error = guarded(&more).unwrap_err();
        assert!(error.contains("more than 1000 queries"), "{error}");
        // UNION and EXCEPT alternating do not associate: they nest down one side, as deep
        // as they are many.
        let mixed = branches
            .iter()
            .enumerate()
            .map(|(i, b)| match i {
                0 => b.clone(),
                _ if i % 2 == 0 => format!("UNION {b}"),
                _ => format!("EXCEPT {b}"),
            })
            .collect::<Vec<_>>()
            .join(" ");
        let error = guarded(&format!("{mixed} EXCEPT SELECT 0")).unwrap_err();
        assert!(error.contains("more than 1000 queries"), "{error}");
    }

    #[test]
    fn operators_and_nesting_are_counted_before_parsing() {
        // As the script parser passes them: without white space.
        let tokens = |sql: &str| {
            let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location();
            let tokens = tokens.unwrap().into_iter();
            let tokens =
                tokens.filter(|t| !matches!(t.token, Token::Whitespace(Whitespace::Space)));
            tokens.collect::<Vec<_>>()
        };
        let long = format!("SELECT {}", vec!["1"; MAX_OPERATORS + 2].join("+"));
        let error = check_tokens(&tokens(&long)).unwrap_err();
        assert!(error.contains("statement too long"), "{error}");
        let case = |n: usize| {
            (0..n).fold("a".to_string(), |e, i| {
                format!("CASE WHEN a > {i} THEN ({e}) ELSE 0 END")
            })
        };
        // Each level is a CASE and a parenthesis.
        let fits = format!("SELECT {} FROM t", case(MAX_NESTING / 2));
        assert!(check_tokens(&tokens(&fits)).is_ok());
        let deep = format!("SELECT {} FROM t", case(MAX_NESTING / 2 + 1));
        let error = check_tokens(&tokens(&deep)).unwrap_err();
        assert!(error.contains("252 levels"), "{error}");
        let nots = format!("SELECT {} a FROM t", vec!["NOT"; MAX_NESTING + 1].join(" "));
        assert!(check_tokens(&tokens(&nots)).is_err());
        // Parentheses closed in between do not add up.
        let flat = format!("SELECT {} FROM t", vec!["(a)"; 10_000].join(" + "));
        assert!(check_tokens(&tokens(&flat)).is_ok());
    }
}
