//! Column types as `CREATE TABLE` writes them: Flink's type names, `ROW<name TYPE, ...>`
//! (also `ROW(name TYPE, ...)`) as an Arrow struct, and `ARRAY<TYPE>` (also Flink's
//! postfix `TYPE ARRAY`) as an Arrow list.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field};
use datafusion_sql::sqlparser::parser::{Parser, ParserError};
use datafusion_sql::sqlparser::tokenizer::Token;
use eddy_common::schema::arrow_type;

use super::script::{eat_word, expect_word, parse_name, parser_error, peek_word, skip_comment};

/// The type of `column` (a column's name, or a ROW field's path), at the parser.
pub(super) fn parse_type(parser: &mut Parser, column: &str) -> Result<DataType, ParserError> {
    let mut angles = Angles::default();
    let data_type = parse_nested(parser, column, &mut angles, false)?;
    if angles.pending {
        return parser_error(
            &format!("one '>' too many in the type of column '{column}'"),
            parser,
        );
    }
    Ok(data_type)
}

/// The closing `>`s of nested types: the tokenizer reads `ARRAY<ARRAY<INT>>`'s end as one
/// `>>`, which closes two types; the inner one takes it and leaves one pending.
#[derive(Debug, Default)]
struct Angles {
    pending: bool,
}

impl Angles {
    /// Takes one `>`: a pending one, or the next token's.
    fn close(&mut self, parser: &mut Parser) -> Result<(), ParserError> {
        if std::mem::take(&mut self.pending) {
            return Ok(());
        }
        match parser.peek_token().token {
            Token::Gt => {}
            Token::ShiftRight => self.pending = true,
            _ => return parser_error("expected '>'", parser),
        }
        parser.next_token();
        Ok(())
    }
}

/// A type, then any postfix `ARRAY`s; `in_row` when it is a ROW field's (a ROW may not
/// hold a ROW).
fn parse_nested(
    parser: &mut Parser,
    column: &str,
    angles: &mut Angles,
    in_row: bool,
) -> Result<DataType, ParserError> {
    let mut data_type = if peek_word(parser, "ROW") {
        if in_row {
            return parser_error(
                &format!("unsupported: a ROW inside ROW column '{column}'"),
                parser,
            );
        }
        parser.next_token();
        parse_row(parser, column, angles)?
    } else if peek_word(parser, "ARRAY") {
        parser.next_token();
        parse_array(parser, column, angles, in_row)?
    } else {
        parse_scalar(parser, column)?
    };
    // `INT ARRAY`: Flink's postfix form (not after a `>` still pending for an outer type).
    while !angles.pending && eat_word(parser, "ARRAY") {
        data_type = list_of(data_type, true);
    }
    Ok(data_type)
}

/// A Flink scalar type name.
fn parse_scalar(parser: &mut Parser, column: &str) -> Result<DataType, ParserError> {
    let type_token = parser.peek_token();
    let sql_type = parser.parse_data_type()?;
    let type_text = sql_type.to_string();
    arrow_type(&type_text).ok_or_else(|| {
        ParserError::ParserError(format!(
            "unsupported column type {type_text} for column '{column}' (supported: BOOLEAN, \
             TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), STRING, VARCHAR, \
             BYTES, DATE, TIMESTAMP(p), TIMESTAMP_LTZ(p), ROW<name TYPE, ...>, ARRAY<TYPE>){}",
            type_token.span.start
        ))
    })
}

/// `<TYPE [NOT NULL]>`, after `ARRAY`.
fn parse_array(
    parser: &mut Parser,
    column: &str,
    angles: &mut Angles,
    in_row: bool,
) -> Result<DataType, ParserError> {
    if !parser.consume_token(&Token::Lt) {
        return parser_error(
            &format!("expected '<' after ARRAY in column '{column}'"),
            parser,
        );
    }
    let element = parse_nested(parser, &format!("{column}[]"), angles, in_row)?;
    let mut nullable = true;
    if !angles.pending && eat_word(parser, "NOT") {
        expect_word(parser, "NULL")?;
        nullable = false;
    }
    angles.close(parser)?;
    Ok(list_of(element, nullable))
}

/// The fields of a `ROW<...>` or `ROW(...)`, after `ROW`.
fn parse_row(
    parser: &mut Parser,
    column: &str,
    angles: &mut Angles,
) -> Result<DataType, ParserError> {
    let angled = match parser.next_token().token {
        Token::Lt => true,
        Token::LParen => false,
        _ => {
            return parser_error(
                &format!("expected '<' after ROW in column '{column}'"),
                parser,
            );
        }
    };
    let mut fields = Vec::new();
    loop {
        let name = parse_name(parser)?;
        let data_type = parse_nested(parser, &format!("{column}.{name}"), angles, true)?;
        let mut nullable = true;
        if !angles.pending {
            if eat_word(parser, "NOT") {
                expect_word(parser, "NULL")?;
                nullable = false;
            }
            skip_comment(parser)?;
        }
        if fields.iter().any(|f: &Field| f.name() == &name) {
            return parser_error(
                &format!("field '{name}' is declared twice in '{column}'"),
                parser,
            );
        }
        fields.push(Field::new(name, data_type, nullable));
        if angles.pending || !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    match angled {
        true => angles.close(parser)?,
        false => {
            parser.expect_token(&Token::RParen)?;
        }
    }
    Ok(DataType::Struct(fields.into()))
}

/// An ARRAY of `element`.
fn list_of(element: DataType, nullable: bool) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, nullable)))
}

#[cfg(test)]
mod tests {
    use datafusion_sql::sqlparser::dialect::GenericDialect;

    use super::*;

    fn parsed(text: &str) -> Result<DataType, ParserError> {
        let dialect = GenericDialect {};
        let mut parser = Parser::new(&dialect).try_with_sql(text)?;
        let data_type = parse_type(&mut parser, "c")?;
        match parser.peek_token().token {
            Token::EOF => Ok(data_type),
            other => Err(ParserError::ParserError(format!("left over: {other}"))),
        }
    }

    fn list(element: DataType) -> DataType {
        list_of(element, true)
    }

    #[test]
    fn arrays_in_both_forms_nest_and_close_with_one_token() {
        assert_eq!(parsed("ARRAY<INT>").unwrap(), list(DataType::Int32));
        assert_eq!(parsed("BIGINT ARRAY").unwrap(), list(DataType::Int64));
        assert_eq!(
            parsed("ARRAY<ARRAY<STRING>>").unwrap(),
            list(list(DataType::Utf8))
        );
        assert_eq!(
            parsed("INT ARRAY ARRAY").unwrap(),
            list(list(DataType::Int32))
        );
        assert_eq!(
            parsed("ARRAY<INT NOT NULL>").unwrap(),
            list_of(DataType::Int32, false)
        );
        let rows = parsed("ARRAY<ROW<a INT, tags ARRAY<STRING>>>").unwrap();
        let DataType::List(element) = &rows else {
            panic!("{rows}")
        };
        let DataType::Struct(fields) = element.data_type() else {
            panic!("{rows}")
        };
        assert_eq!(fields[1].data_type(), &list(DataType::Utf8));
        let row = parsed("ROW(a ARRAY<DOUBLE> NOT NULL COMMENT 'x', b INT)").unwrap();
        let DataType::Struct(fields) = &row else {
            panic!("{row}")
        };
        assert!(!fields[0].is_nullable());
        assert_eq!(fields[0].data_type(), &list(DataType::Float64));
    }

    #[test]
    fn malformed_arrays_are_refused_by_what_is_wrong() {
        let error = |text: &str| parsed(text).unwrap_err().to_string();
        assert!(
            error("ARRAY<INT").contains("expected '>'"),
            "{}",
            error("ARRAY<INT")
        );
        assert!(error("ARRAY(INT)").contains("expected '<' after ARRAY"));
        assert!(error("ARRAY<INT>>").contains("one '>' too many"));
        assert!(error("ARRAY<GEOMETRY>").contains("GEOMETRY"));
        assert!(error("ROW<a ARRAY<ROW<b INT>>>").contains("a ROW inside ROW column 'c.a[]'"));
    }
}
