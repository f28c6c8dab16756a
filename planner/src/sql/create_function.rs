//! `CREATE [TEMPORARY [SYSTEM]] FUNCTION [IF NOT EXISTS] name [(arg type, ...)] RETURNS type
//! AS 'module.function' LANGUAGE PYTHON`: Flink's statement, with the types Flink reads
//! from PyFlink's `@udf(result_type=...)` written in the statement (Rust cannot read a
//! Python decorator without running Python at planning). Without an argument list the
//! function takes whatever it is given. `RETURNS TABLE (name type, ...)` declares a table
//! function (PyFlink's `@udtf(result_types=[...])`), called as `LATERAL TABLE(f(...))`;
//! `CREATE AGGREGATE FUNCTION` an aggregate (PyFlink's `AggregateFunction`, `@udaf`).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields};
use datafusion_expr::{AggregateUDF, ScalarUDF};
use datafusion_sql::sqlparser::parser::{Parser, ParserError};
use datafusion_sql::sqlparser::tokenizer::Token;
use eddy_common::error::Location;
use eddy_common::{EddyError, Result};
use eddy_udf::python::{Declaration, FunctionKind, PythonAggregate, PythonFunction, PythonRuntime};

use super::catalog::{Catalog, Provider, UserFunction};
use super::column_type::parse_type;
use super::script::{eat_word, expect_word, parse_name, peek_word};
use super::sql_error;

/// The parts of a `CREATE FUNCTION` statement.
#[derive(Debug, Clone)]
pub struct FunctionStatement {
    /// The function's name, as queries call it.
    pub name: String,
    /// `TEMPORARY SYSTEM`: found before the built-in functions (else after them).
    pub system: bool,
    /// `CREATE AGGREGATE FUNCTION`: an aggregate (PyFlink's `AggregateFunction`).
    pub aggregate: bool,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
    /// The declared arguments' types, if an argument list is given.
    pub arguments: Option<Vec<DataType>>,
    /// `RETURNS type` or `RETURNS TABLE (name type, ...)`.
    pub returns: Option<Returns>,
    /// `AS 'module.function'`.
    pub target: String,
    /// `LANGUAGE ...` (upper case; `JAVA`, Flink's default, when not given).
    pub language: String,
}

/// What a function returns.
#[derive(Debug, Clone)]
pub enum Returns {
    /// A value of this type for each row: a scalar function.
    Value(DataType),
    /// Rows of these columns for each row: a table function.
    Table(Fields),
}

/// Parses the rest of a `CREATE [TEMPORARY] [AGGREGATE] FUNCTION` after `FUNCTION`;
/// `system` says whether `SYSTEM` came before it, `aggregate` whether `AGGREGATE` did.
pub(super) fn parse(
    parser: &mut Parser,
    system: bool,
    aggregate: bool,
) -> Result<FunctionStatement, ParserError> {
    let if_not_exists = eat_word(parser, "IF");
    if if_not_exists {
        expect_word(parser, "NOT")?;
        expect_word(parser, "EXISTS")?;
    }
    let name = parse_name(parser)?;
    let arguments = match parser.consume_token(&Token::LParen) {
        true => Some(parse_arguments(parser, &name)?),
        false => None,
    };
    let returns = match eat_word(parser, "RETURNS") {
        false => None,
        true if eat_word(parser, "TABLE") => {
            parser.expect_token(&Token::LParen)?;
            Some(Returns::Table(parse_columns(parser, &name)?))
        }
        true => Some(Returns::Value(parse_type(
            parser,
            &format!("{name}'s result"),
        )?)),
    };
    expect_word(parser, "AS")?;
    let target = parser.parse_literal_string()?;
    let language = match eat_word(parser, "LANGUAGE") {
        true => parser.parse_identifier()?.value.to_ascii_uppercase(),
        false => "JAVA".to_string(),
    };
    if peek_word(parser, "USING") {
        return parser.expected("no USING JAR (Eddy runs no Java)", parser.peek_token());
    }
    Ok(FunctionStatement {
        name,
        system,
        aggregate,
        if_not_exists,
        arguments,
        returns,
        target,
        language,
    })
}

/// `name type, ...)`: each argument named, as `(s STRING, c STRING)`.
fn parse_arguments(parser: &mut Parser, function: &str) -> Result<Vec<DataType>, ParserError> {
    let mut types = Vec::new();
    if parser.consume_token(&Token::RParen) {
        return Ok(types);
    }
    loop {
        let argument = parse_name(parser)?;
        types.push(parse_type(
            parser,
            &format!("{function}'s argument {argument}"),
        )?);
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(types)
}

/// `name type, ...)`: a table function's columns.
fn parse_columns(parser: &mut Parser, function: &str) -> Result<Fields, ParserError> {
    let mut columns = Vec::new();
    loop {
        let column = parse_name(parser)?;
        let data_type = parse_type(parser, &format!("{function}'s column {column}"))?;
        columns.push(Field::new(column, data_type, true));
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok(columns.into())
}

/// Adds the function a `CREATE FUNCTION` declares to `catalog`; its workers come from
/// `runtime`.
pub(super) fn create_function(
    catalog: &mut Catalog,
    statement: FunctionStatement,
    runtime: &Arc<PythonRuntime>,
    location: Location,
) -> Result<()> {
    let error = |message: String| sql_error(location, message);
    let name = statement.name;
    if catalog.has_function(&name) {
        return match statement.if_not_exists {
            true => Ok(()),
            false => Err(error(format!("a function named '{name}' already exists"))),
        };
    }
    // Flink resolves a name to its built-in function before a catalog function, and Eddy's
    // built-ins include DataFusion's under names Flink lacks (`mean`, `md5`, ...): rather
    // than a call answered by another function than the one declared, the clash is refused.
    if !statement.system && Provider::is_built_in(&name) {
        return Err(error(format!(
            "CREATE FUNCTION {name}: a built-in function has that name, and would be called \
             instead (Flink's order); declare it TEMPORARY SYSTEM to call yours, or rename it"
        )));
    }
    match statement.language.as_str() {
        "PYTHON" => {}
        "JAVA" | "SCALA" => {
            return Err(error(format!(
                "unsupported: CREATE FUNCTION {name}: LANGUAGE {} (Eddy runs no JVM; write \
                 the function in Python, LANGUAGE PYTHON)",
                statement.language
            )));
        }
        other => {
            return Err(error(format!(
                "unsupported: CREATE FUNCTION {name}: LANGUAGE {other} (Eddy runs functions \
                 written in Python, LANGUAGE PYTHON)"
            )));
        }
    }
    let Some(returns) = statement.returns else {
        return Err(error(format!(
            "CREATE FUNCTION {name}: give the result type, as in `CREATE FUNCTION {name}(s \
             STRING) RETURNS INT AS '{}' LANGUAGE PYTHON` (Flink reads it from PyFlink's \
             @udf(result_type=...); Eddy reads it from the statement)",
            statement.target
        )));
    };
    let id =
        u32::try_from(catalog.function_count()).map_err(|_| error("too many functions".into()))?;
    let declaration = Declaration {
        id,
        name: name.clone(),
        target: statement.target,
        arguments: statement.arguments,
    };
    let runtime = runtime.clone();
    if statement.aggregate {
        let Returns::Value(result) = returns else {
            return Err(error(format!(
                "CREATE AGGREGATE FUNCTION {name}: an aggregate returns a value, not a TABLE"
            )));
        };
        let function = PythonAggregate::new(declaration, result, runtime)
            .map_err(|e| EddyError::Internal(format!("CREATE FUNCTION {name}: {e}")))?;
        catalog.add_aggregate(
            name,
            statement.system,
            AggregateUDF::new_from_impl(function),
        );
        return Ok(());
    }
    let function = match returns {
        Returns::Value(result) => PythonFunction::new(declaration, result, runtime),
        Returns::Table(columns) => PythonFunction::table(declaration, columns, runtime),
    }
    .map_err(|e| EddyError::Internal(format!("CREATE FUNCTION {name}: {e}")))?;
    catalog.add_function(UserFunction {
        name,
        system: statement.system,
        table: function.kind() == FunctionKind::Table,
        udf: Arc::new(ScalarUDF::new_from_impl(function)),
    });
    Ok(())
}
