//! Splits a SQL script into statements and parses them, Flink syntax included
//! (`CREATE TABLE ... WITH (...)`, `WATERMARK FOR`, `SET 'key' = 'value'`, window TVFs).

use arrow::datatypes::DataType;
use datafusion_sql::sqlparser::ast;
use datafusion_sql::sqlparser::dialect::GenericDialect;
use datafusion_sql::sqlparser::keywords::Keyword;
use datafusion_sql::sqlparser::parser::{Parser, ParserError};
use datafusion_sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};
use eddy_common::error::Location;
use eddy_common::{EddyError, Result};

use super::column_type::parse_type;
use super::depth;

/// A statement with the position of its first token.
#[derive(Debug, Clone)]
pub struct Located<T> {
    /// Where the statement starts.
    pub location: Location,
    /// The statement.
    pub item: T,
}

/// One statement of a script.
#[derive(Debug, Clone)]
pub enum Statement {
    /// `SET 'key' = 'value'`.
    Set {
        /// The option's key.
        key: String,
        /// Its value.
        value: String,
    },
    /// `CREATE TABLE name (...) WITH (...)`.
    CreateTable(Box<TableStatement>),
    /// `CREATE [TEMPORARY] VIEW name [(column, ...)] AS query`.
    CreateView {
        /// The view's name.
        name: String,
        /// The names of its columns, when given (else the query's).
        columns: Vec<String>,
        /// Its query.
        query: Box<ast::Query>,
    },
    /// `CREATE [TEMPORARY [SYSTEM]] [AGGREGATE] FUNCTION name ... AS 'module.function'
    /// LANGUAGE ...`.
    CreateFunction(Box<super::create_function::FunctionStatement>),
    /// `INSERT INTO table query`.
    Insert {
        /// The sink table.
        table: String,
        /// The query whose changes are written into it.
        query: Box<ast::Query>,
    },
}

/// The parts of a `CREATE TABLE` statement.
#[derive(Debug, Clone)]
pub struct TableStatement {
    /// The table's name.
    pub name: String,
    /// Its columns, physical and computed, in order.
    pub columns: Vec<ColumnStatement>,
    /// `WATERMARK FOR column AS expression`.
    pub watermark: Option<(String, ast::Expr)>,
    /// `PRIMARY KEY (...) NOT ENFORCED`.
    pub primary_key: Vec<String>,
    /// `PARTITIONED BY (...)`.
    pub partition_keys: Vec<String>,
    /// The `WITH (...)` options, in order.
    pub options: Vec<(String, String)>,
}

/// One column of a `CREATE TABLE`.
#[derive(Debug, Clone)]
pub struct ColumnStatement {
    /// The column's name.
    pub name: String,
    /// Where it is declared.
    pub location: Location,
    /// A physical column with a type, or a computed one.
    pub kind: ColumnKind,
}

/// Whether a column is read from the connector or computed from other columns.
#[derive(Debug, Clone)]
pub enum ColumnKind {
    /// Read from (or written to) the connector.
    Physical {
        /// The Arrow type.
        data_type: DataType,
        /// `NOT NULL` was given.
        not_null: bool,
    },
    /// `name AS expression`.
    Computed(Box<ast::Expr>),
    /// `name TYPE METADATA [FROM 'key'] [VIRTUAL]`: a value the connector (or its format)
    /// knows about each row.
    Metadata {
        /// The Arrow type.
        data_type: DataType,
        /// The connector's metadata key (the column's name when no `FROM` is given).
        key: String,
        /// `VIRTUAL`: read only, not part of what is written to the table.
        is_virtual: bool,
    },
}

/// Parses a whole script into statements.
pub fn parse_script(sql: &str) -> Result<Vec<Located<Statement>>> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| EddyError::Sql {
            location: Location {
                line: e.location.line,
                column: e.location.column,
            },
            message: e.message,
        })?;
    let tokens = rewrite_flink_syntax(
        tokens
            .into_iter()
            // Whitespace and comments go, but for query hints (`/*+ ... */`).
            .filter(|t| match &t.token {
                Token::Whitespace(Whitespace::MultiLineComment(comment)) => {
                    comment.starts_with('+')
                }
                Token::Whitespace(_) => false,
                _ => true,
            })
            .map(fold_backquoted)
            .collect(),
    );
    for statement in tokens.split(|t| t.token == Token::SemiColon) {
        if let Some(first) = statement.first() {
            depth::check_tokens(statement).map_err(|message| EddyError::Sql {
                location: location_of(first),
                message,
            })?;
        }
    }
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(depth::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        let next = parser.peek_token();
        if next.token == Token::EOF {
            break;
        }
        let location = location_of(&next);
        let mut item = parse_statement(&mut parser).map_err(|e| sql_error(e, location))?;
        guard(&mut item).map_err(|message| EddyError::Sql { location, message })?;
        let after = parser.peek_token();
        if !matches!(after.token, Token::SemiColon | Token::EOF) {
            return Err(EddyError::Sql {
                location: location_of(&after),
                message: format!("expected ';' after the statement, found '{}'", after.token),
            });
        }
        statements.push(Located { location, item });
    }
    Ok(statements)
}

/// Balances a statement's long associative chains and bounds its depth (see
/// [`depth`]).
fn guard(statement: &mut Statement) -> std::result::Result<(), String> {
    match statement {
        Statement::Set { .. } | Statement::CreateFunction(_) => Ok(()),
        Statement::CreateView { query, .. } | Statement::Insert { query, .. } => {
            depth::guard_query(query)
        }
        Statement::CreateTable(table) => {
            let computed = table.columns.iter_mut().filter_map(|c| match &mut c.kind {
                ColumnKind::Computed(expr) => Some(expr.as_mut()),
                ColumnKind::Physical { .. } | ColumnKind::Metadata { .. } => None,
            });
            let watermark = table.watermark.as_mut().map(|(_, expr)| expr);
            computed.chain(watermark).try_for_each(depth::guard_expr)
        }
    }
}

fn parse_statement(parser: &mut Parser) -> Result<Statement, ParserError> {
    if eat_word(parser, "SET") {
        let key = parse_option_text(parser)?;
        parser.expect_token(&Token::Eq)?;
        let value = parse_option_text(parser)?;
        return Ok(Statement::Set { key, value });
    }
    if eat_word(parser, "CREATE") {
        let temporary = eat_word(parser, "TEMPORARY");
        let system = temporary && eat_word(parser, "SYSTEM");
        let aggregate = eat_word(parser, "AGGREGATE");
        if aggregate || eat_word(parser, "FUNCTION") {
            if aggregate {
                expect_word(parser, "FUNCTION")?;
            }
            return super::create_function::parse(parser, system, aggregate)
                .map(|f| Statement::CreateFunction(Box::new(f)));
        }
        if system {
            return parser.expected("FUNCTION after TEMPORARY SYSTEM", parser.peek_token());
        }
        if eat_word(parser, "TABLE") {
            return parse_create_table(parser).map(|t| Statement::CreateTable(Box::new(t)));
        }
        if eat_word(parser, "VIEW") {
            skip_if_not_exists(parser);
            let name = parse_name(parser)?;
            let columns = match parser.peek_token().token {
                Token::LParen => parse_name_list(parser)?,
                _ => Vec::new(),
            };
            expect_word(parser, "AS")?;
            let query = parser.parse_query()?;
            return Ok(Statement::CreateView {
                name,
                columns,
                query,
            });
        }
        return parser.expected("TABLE, VIEW or FUNCTION after CREATE", parser.peek_token());
    }
    if eat_word(parser, "INSERT") {
        expect_word(parser, "INTO")?;
        let table = parse_name(parser)?;
        let query = parser.parse_query()?;
        return Ok(Statement::Insert { table, query });
    }
    parser.expected(
        "SET, CREATE TABLE, CREATE VIEW, CREATE FUNCTION or INSERT INTO",
        parser.peek_token(),
    )
}

fn parse_create_table(parser: &mut Parser) -> Result<TableStatement, ParserError> {
    skip_if_not_exists(parser);
    let name = parse_name(parser)?;
    parser.expect_token(&Token::LParen)?;
    let mut table = TableStatement {
        name,
        columns: Vec::new(),
        watermark: None,
        primary_key: Vec::new(),
        partition_keys: Vec::new(),
        options: Vec::new(),
    };
    loop {
        if eat_word(parser, "WATERMARK") {
            expect_word(parser, "FOR")?;
            let column = parse_name(parser)?;
            expect_word(parser, "AS")?;
            let expr = parser.parse_expr()?;
            if table.watermark.replace((column, expr)).is_some() {
                return parser_error("a table can have only one WATERMARK", parser);
            }
        } else if peek_word(parser, "PRIMARY") {
            parser.next_token();
            expect_word(parser, "KEY")?;
            table.primary_key = parse_name_list(parser)?;
            if eat_word(parser, "NOT") {
                expect_word(parser, "ENFORCED")?;
            }
        } else {
            table.columns.push(parse_column(parser)?);
        }
        if parser.consume_token(&Token::Comma) {
            continue;
        }
        parser.expect_token(&Token::RParen)?;
        break;
    }
    skip_comment(parser)?;
    if eat_word(parser, "PARTITIONED") {
        expect_word(parser, "BY")?;
        table.partition_keys = parse_name_list(parser)?;
    }
    if eat_word(parser, "WITH") {
        parser.expect_token(&Token::LParen)?;
        loop {
            let key = parse_option_text(parser)?;
            parser.expect_token(&Token::Eq)?;
            let value = parse_option_text(parser)?;
            table.options.push((key, value));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    }
    Ok(table)
}

fn parse_column(parser: &mut Parser) -> Result<ColumnStatement, ParserError> {
    let location = location_of(&parser.peek_token());
    let name = parse_name(parser)?;
    if eat_word(parser, "AS") {
        let expr = parser.parse_expr()?;
        skip_comment(parser)?;
        return Ok(ColumnStatement {
            name,
            location,
            kind: ColumnKind::Computed(Box::new(expr)),
        });
    }
    let data_type = parse_type(parser, &name)?;
    let mut not_null = false;
    loop {
        if eat_word(parser, "NOT") {
            expect_word(parser, "NULL")?;
            not_null = true;
        } else if eat_word(parser, "NULL") {
            not_null = false;
        } else if eat_word(parser, "METADATA") {
            let key = match eat_word(parser, "FROM") {
                true => parse_option_text(parser)?,
                false => name.clone(),
            };
            let is_virtual = eat_word(parser, "VIRTUAL");
            skip_comment(parser)?;
            return Ok(ColumnStatement {
                name,
                location,
                kind: ColumnKind::Metadata {
                    data_type,
                    key,
                    is_virtual,
                },
            });
        } else {
            break;
        }
    }
    skip_comment(parser)?;
    Ok(ColumnStatement {
        name,
        location,
        kind: ColumnKind::Physical {
            data_type,
            not_null,
        },
    })
}

pub(super) fn skip_comment(parser: &mut Parser) -> Result<(), ParserError> {
    if eat_word(parser, "COMMENT") {
        parser.parse_literal_string()?;
    }
    Ok(())
}

fn skip_if_not_exists(parser: &mut Parser) {
    if peek_word(parser, "IF") {
        parser.next_token();
        eat_word(parser, "NOT");
        eat_word(parser, "EXISTS");
    }
}

/// A name quoted with backticks, folded to lower case as an unquoted one is: Flink matches
/// names case-sensitively whether quoted or not, so a script that declares `dateTime` and
/// reads `` `dateTime` `` (backticks are how Flink 2 reads its reserved word DATETIME as a
/// name) must find one column. Eddy folds every name, so it accepts what Flink accepts
/// (names differing only in case aside).
fn fold_backquoted(mut token: TokenWithSpan) -> TokenWithSpan {
    if let Token::Word(word) = &mut token.token
        && word.quote_style == Some('`')
    {
        word.value = word.value.to_ascii_lowercase();
    }
    token
}

/// A table, view or column name: unquoted names are folded to lower case, as DataFusion
/// does when it binds queries.
pub(super) fn parse_name(parser: &mut Parser) -> Result<String, ParserError> {
    let ident = parser.parse_identifier()?;
    Ok(normalize(&ident))
}

/// `(name, ...)`.
fn parse_name_list(parser: &mut Parser) -> Result<Vec<String>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let mut names = Vec::new();
    loop {
        names.push(parse_name(parser)?);
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(names)
}

/// Normalizes an identifier the way the query binder does.
pub fn normalize(ident: &ast::Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_ascii_lowercase(),
    }
}

/// An option key or value: `'quoted'`, or bare words and numbers joined by dots.
fn parse_option_text(parser: &mut Parser) -> Result<String, ParserError> {
    let token = parser.next_token();
    match token.token {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s),
        Token::Number(n, _) => Ok(n),
        Token::Word(w) => {
            let mut text = w.value;
            while parser.consume_token(&Token::Period) {
                text.push('.');
                match parser.next_token().token {
                    Token::Word(w) => text.push_str(&w.value),
                    other => {
                        return Err(ParserError::ParserError(format!(
                            "expected an option name, found '{other}'"
                        )));
                    }
                }
            }
            Ok(text)
        }
        other => Err(ParserError::ParserError(format!(
            "expected a quoted option, found '{other}'{}",
            token.span.start
        ))),
    }
}

pub(super) fn peek_word(parser: &Parser, word: &str) -> bool {
    matches!(&parser.peek_token().token, Token::Word(w)
        if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

pub(super) fn eat_word(parser: &mut Parser, word: &str) -> bool {
    let found = peek_word(parser, word);
    if found {
        parser.next_token();
    }
    found
}

pub(super) fn expect_word(parser: &mut Parser, word: &str) -> Result<(), ParserError> {
    if eat_word(parser, word) {
        return Ok(());
    }
    parser.expected(word, parser.peek_token())
}

pub(super) fn parser_error<T>(message: &str, parser: &Parser) -> Result<T, ParserError> {
    Err(ParserError::ParserError(format!(
        "{message}{}",
        parser.peek_token().span.start
    )))
}

fn location_of(token: &TokenWithSpan) -> Location {
    Location {
        line: token.span.start.line,
        column: token.span.start.column,
    }
}

/// Turns a parser error into a SQL error at the position the parser names (or, when it
/// names none, at the start of the statement).
fn sql_error(error: ParserError, statement: Location) -> EddyError {
    let text = match error {
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => s,
        ParserError::RecursionLimitExceeded => "the statement nests too deeply".to_string(),
    };
    let (message, location) = split_location(&text);
    EddyError::Sql {
        location: location.unwrap_or(statement),
        message,
    }
}

/// Splits `"... at Line: 3, Column: 7"` into the message and the position.
pub fn split_location(text: &str) -> (String, Option<Location>) {
    let Some(at) = text.rfind(" at Line: ") else {
        return (text.to_string(), None);
    };
    let rest = &text[at + " at Line: ".len()..];
    let mut parts = rest.splitn(2, ", Column: ");
    let line = parts.next().and_then(|l| l.trim().parse().ok());
    let column = parts.next().and_then(|c| {
        c.trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    });
    match (line, column) {
        (Some(line), Some(column)) => (text[..at].to_string(), Some(Location { line, column })),
        _ => (text.to_string(), None),
    }
}

const WINDOW_FUNCTIONS: &[&str] = &["TUMBLE", "HOP", "SESSION", "CUMULATE"];

/// Joins a table's name and the time column of `FOR SYSTEM_TIME AS OF` into the one name
/// the binder resolves ([`crate::sql::catalog::VersionedSource`]).
pub const AS_OF_MARKER: &str = "$for_system_time_as_of$";
const PLURAL_UNITS: &[(&str, &str)] = &[
    ("SECONDS", "SECOND"),
    ("MINUTES", "MINUTE"),
    ("HOURS", "HOUR"),
    ("DAYS", "DAY"),
];

/// Rewrites Flink-only token sequences into ones the generic parser reads:
/// `TABLE(TUMBLE(TABLE t, ...))` loses the inner `TABLE`, `SESSION(t PARTITION BY (k1, k2),
/// ...)` becomes `SESSION(eddy_partition_by(t, k1, k2), ...)` (checked against the grouping
/// keys, then dropped, before planning: see `group_window`), and `INTERVAL '5' MINUTES`
/// becomes `INTERVAL '5' MINUTE`.
fn rewrite_flink_syntax(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let is_word = |t: &TokenWithSpan, w: &str| matches!(&t.token, Token::Word(word) if word.quote_style.is_none() && word.value.eq_ignore_ascii_case(w));
    let mut i = 0;
    while i < tokens.len() {
        // t FOR SYSTEM_TIME AS OF o.time [AS] alias: one table name carrying the column.
        if i + 5 < tokens.len()
            && matches!(tokens[i].token, Token::Word(_))
            && ["FOR", "SYSTEM_TIME", "AS", "OF"]
                .iter()
                .enumerate()
                .all(|(k, w)| is_word(&tokens[i + 1 + k], w))
        {
            mark_as_of(&mut tokens, i);
        }
        if i + 4 < tokens.len()
            && is_word(&tokens[i], "TABLE")
            && tokens[i + 1].token == Token::LParen
            && WINDOW_FUNCTIONS.iter().any(|f| is_word(&tokens[i + 2], f))
            && tokens[i + 3].token == Token::LParen
            && is_word(&tokens[i + 4], "TABLE")
        {
            tokens.remove(i + 4);
            mark_partition_by(&mut tokens, i + 4);
        }
        // TIMESTAMPADD(DAY, ...), TIMESTAMPDIFF(DAY, ...): the unit, a keyword, as a string.
        if i + 3 < tokens.len()
            && (is_word(&tokens[i], "TIMESTAMPADD") || is_word(&tokens[i], "TIMESTAMPDIFF"))
            && tokens[i + 1].token == Token::LParen
            && tokens[i + 3].token == Token::Comma
            && let Token::Word(unit) = &tokens[i + 2].token
            && unit.quote_style.is_none()
        {
            tokens[i + 2].token = Token::SingleQuotedString(unit.value.to_ascii_uppercase());
        }
        if i + 2 < tokens.len()
            && is_word(&tokens[i], "INTERVAL")
            && matches!(tokens[i + 1].token, Token::SingleQuotedString(_))
        {
            for (plural, singular) in PLURAL_UNITS {
                if is_word(&tokens[i + 2], plural) {
                    tokens[i + 2].token = Token::make_word(singular, None);
                }
            }
        }
        i += 1;
    }
    tokens
}

/// Turns `t FOR SYSTEM_TIME AS OF o.time [[AS] alias]` (the table name at `start`) into
/// `"t<marker>o.time" AS alias` (`AS t` without an alias).
fn mark_as_of(tokens: &mut Vec<TokenWithSpan>, start: usize) {
    let Token::Word(table) = tokens[start].token.clone() else {
        return;
    };
    let mut column = Vec::new();
    let mut end = start + 5;
    while let Some(Token::Word(word)) = tokens.get(end).map(|t| &t.token) {
        column.push(word.value.clone());
        end += 1;
        if tokens.get(end).map(|t| &t.token) != Some(&Token::Period) {
            break;
        }
        end += 1;
    }
    tokens[start].token = Token::make_word(
        &format!("{}{AS_OF_MARKER}{}", table.value, column.join(".")),
        Some('"'),
    );
    tokens.drain(start + 1..end);
    let aliased = matches!(
        tokens.get(start + 1).map(|t| &t.token),
        Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("AS") || w.keyword == Keyword::NoKeyword
    );
    if !aliased {
        let span = tokens[start].span;
        let alias = Token::make_word(&table.value, table.quote_style);
        tokens.insert(
            start + 1,
            TokenWithSpan::new(Token::make_word("AS", None), span),
        );
        tokens.insert(start + 2, TokenWithSpan::new(alias, span));
    }
}

/// The name of the marker call that carries a window TVF's `PARTITION BY` keys to the
/// planner: `eddy_partition_by(table, key, ...)`.
pub const PARTITION_MARKER: &str = "eddy_partition_by";

/// Turns `t PARTITION BY (k1, k2)` (or `PARTITION BY k`), starting at `start`, into
/// `eddy_partition_by(t, k1, k2)`; a table without `PARTITION BY` stays as it is.
fn mark_partition_by(tokens: &mut Vec<TokenWithSpan>, start: usize) {
    let is_word = |t: &TokenWithSpan, w: &str| matches!(&t.token, Token::Word(word) if word.quote_style.is_none() && word.value.eq_ignore_ascii_case(w));
    let mut name_end = start;
    while name_end + 1 < tokens.len() && tokens[name_end + 1].token == Token::Period {
        name_end += 2;
    }
    let partition = name_end + 1;
    if partition + 1 >= tokens.len()
        || !is_word(&tokens[partition], "PARTITION")
        || !is_word(&tokens[partition + 1], "BY")
    {
        return;
    }
    // The keys run to the next comma outside parentheses.
    let mut end = partition + 2;
    let mut depth = 0i32;
    while end < tokens.len() {
        match tokens[end].token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => break,
            _ => {}
        }
        end += 1;
    }
    let mut keys: Vec<TokenWithSpan> = tokens[partition + 2..end]
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .cloned()
        .collect();
    if keys.first().is_some_and(|t| t.token == Token::LParen)
        && keys.last().is_some_and(|t| t.token == Token::RParen)
    {
        keys = keys[1..keys.len() - 1].to_vec();
    }
    let token = |t: Token| TokenWithSpan::wrap(t);
    let mut marked = vec![
        token(Token::make_word(PARTITION_MARKER, None)),
        token(Token::LParen),
    ];
    marked.extend(tokens[start..=name_end].iter().cloned());
    marked.push(token(Token::Comma));
    marked.extend(keys);
    marked.push(token(Token::RParen));
    tokens.splice(start..end, marked);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_flink_script() {
        let script = "SET 'parallelism.default' = '2';\n\
            CREATE TABLE bids (\n  auction BIGINT NOT NULL,\n  price DECIMAL(10, 2),\n  \
            ts TIMESTAMP(3),\n  doubled AS price * 2,\n  \
            WATERMARK FOR ts AS ts - INTERVAL '4' SECOND,\n  PRIMARY KEY (auction) NOT ENFORCED\n\
            ) WITH ('connector' = 'datagen', 'number-of-rows' = '10');\n\
            CREATE VIEW v AS SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECONDS));\n\
            INSERT INTO out SELECT auction FROM bids;";
        let statements = parse_script(script).unwrap();
        assert_eq!(statements.len(), 4);
        let Statement::CreateTable(table) = &statements[1].item else {
            panic!("expected CREATE TABLE");
        };
        assert_eq!(statements[1].location, Location { line: 2, column: 1 });
        assert_eq!(table.columns.len(), 4);
        assert!(matches!(table.columns[3].kind, ColumnKind::Computed(_)));
        assert_eq!(table.watermark.as_ref().unwrap().0, "ts");
        assert_eq!(table.primary_key, vec!["auction"]);
        assert_eq!(table.options[1], ("number-of-rows".into(), "10".into()));
        let Statement::CreateView { query, .. } = &statements[2].item else {
            panic!("expected CREATE VIEW");
        };
        assert!(query.to_string().contains("TUMBLE(bids"), "{query}");
    }

    #[test]
    fn metadata_columns_take_a_key_and_may_be_virtual() {
        let sql = "CREATE TABLE t (id BIGINT, ts TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL, \
                   row_kind STRING METADATA, tbl STRING METADATA FROM 'table_name') \
                   WITH ('connector' = 'postgres-cdc');";
        let statements = parse_script(sql).unwrap();
        let Statement::CreateTable(table) = &statements[0].item else {
            panic!("a CREATE TABLE");
        };
        let metadata: Vec<(&str, bool)> = table
            .columns
            .iter()
            .filter_map(|c| match &c.kind {
                ColumnKind::Metadata {
                    key, is_virtual, ..
                } => Some((key.as_str(), *is_virtual)),
                _ => None,
            })
            .collect();
        assert_eq!(
            metadata,
            [("op_ts", true), ("row_kind", false), ("table_name", false)]
        );
        assert!(parse_script("CREATE TABLE t (a INT METADATA FROM) WITH ('c' = 'd');").is_err());
    }

    #[test]
    fn row_columns_are_structs_and_tables_can_be_partitioned() {
        let sql = "CREATE TABLE t (event_type INT, bid ROW<auction BIGINT, `dateTime` TIMESTAMP(3) \
                   NOT NULL>, p ROW(id BIGINT COMMENT 'the id'), dt STRING) COMMENT 'events' \
                   PARTITIONED BY (dt) WITH ('connector' = 'nexmark');";
        let statements = parse_script(sql).unwrap();
        let Statement::CreateTable(table) = &statements[0].item else {
            panic!("a CREATE TABLE");
        };
        let ColumnKind::Physical { data_type, .. } = &table.columns[1].kind else {
            panic!("physical");
        };
        let DataType::Struct(fields) = data_type else {
            panic!("a struct: {data_type}");
        };
        assert_eq!(fields[1].name(), "datetime");
        assert!(!fields[1].is_nullable());
        assert_eq!(table.partition_keys, ["dt"]);
        let nested = "CREATE TABLE t (r ROW<a ROW<b INT>>) WITH ('connector' = 'print');";
        let error = parse_script(nested).unwrap_err().to_string();
        assert!(error.contains("a ROW inside ROW column 'r.a'"), "{error}");
    }

    #[test]
    fn reports_line_and_column() {
        let err = parse_script("SET 'a' = 'b';\nSELEC 1;").unwrap_err();
        let EddyError::Sql { location, message } = err else {
            panic!("expected a SQL error");
        };
        assert_eq!(location, Location { line: 2, column: 1 });
        assert!(message.contains("INSERT INTO"), "{message}");
        let err = parse_script("CREATE TABLE t (a GEOMETRY) WITH ('connector' = 'x')").unwrap_err();
        assert!(err.to_string().contains("GEOMETRY"), "{err}");
    }

    #[test]
    fn marks_session_partitioning_for_the_planner_to_check() {
        let query = |sql: &str| {
            let statements = parse_script(sql).unwrap();
            let Statement::Insert { query, .. } = &statements[0].item else {
                panic!("expected INSERT");
            };
            query.to_string()
        };
        let one = query(
            "INSERT INTO o SELECT * FROM TABLE(SESSION(TABLE b PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES))",
        );
        assert!(
            one.contains("SESSION(eddy_partition_by(b, k), DESCRIPTOR(ts), INTERVAL '5' MINUTE)"),
            "{one}"
        );
        let two = query(
            "INSERT INTO o SELECT * FROM TABLE(SESSION(TABLE b PARTITION BY (k, j), DESCRIPTOR(ts), INTERVAL '5' SECOND))",
        );
        assert!(
            two.contains("SESSION(eddy_partition_by(b, k, j), DESCRIPTOR(ts)"),
            "{two}"
        );
    }
}
