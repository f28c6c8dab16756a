//! Flink's ARRAY functions: the constructor `ARRAY[a, b, ...]`, element access
//! `array[i]` (from 1; NULL past either end, a constant index below 1 refused when the
//! query is planned, as Flink refuses it), `CARDINALITY(array)` and `ELEMENT(array)` (the
//! only element, NULL when empty, an error when there are more), and `CAST(array AS
//! STRING)` as Flink writes it (`[1, NULL, 3]`).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, ListArray, StringArray, StringBuilder, UInt32Array,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion_common::{DFSchema, Result, ScalarValue, exec_err, plan_err};
use datafusion_expr::expr::ScalarFunction;
use datafusion_expr::planner::{
    PlannerResult, RawFieldAccessExpr, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion_expr::type_coercion::binary::comparison_coercion;
use datafusion_expr::{
    ColumnarValue, Expr, ExprSchemable, GetFieldAccess, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion_sql::sqlparser::ast::TableFactor;

/// The functions of this module callable by name.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![udf(ArrayFunction::Cardinality), udf(ArrayFunction::Element)]
}

/// `ARRAY[exprs]`: the elements in their common type.
pub fn plan_constructor(exprs: Vec<Expr>, schema: &DFSchema) -> Result<PlannerResult<Vec<Expr>>> {
    if exprs.is_empty() {
        return plan_err!("ARRAY[] needs at least one element (Flink's rule)");
    }
    let mut common = DataType::Null;
    for expr in &exprs {
        let data_type = expr.get_type(schema)?;
        common = match common_type(&common, &data_type) {
            Some(common) => common,
            None => {
                return plan_err!(
                    "the elements of ARRAY[...] have no common type: {} and {}",
                    eddy_common::schema::sql_name(&common),
                    eddy_common::schema::sql_name(&data_type)
                );
            }
        };
    }
    let args = exprs
        .into_iter()
        .map(|e| e.cast_to(&common, schema))
        .collect::<Result<Vec<_>>>()?;
    Ok(PlannerResult::Planned(call(
        ArrayFunction::Constructor,
        args,
    )))
}

/// The least type holding both, as Calcite finds it for ARRAY's elements: numbers with
/// numbers, text with text, times with times (never text with numbers); NULL with any.
fn common_type(a: &DataType, b: &DataType) -> Option<DataType> {
    let family = |t: &DataType| {
        if t.is_numeric() {
            1
        } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
            2
        } else if t.is_temporal() {
            3
        } else {
            0
        }
    };
    match (a, b) {
        (DataType::Null, other) | (other, DataType::Null) => Some(other.clone()),
        (a, b) if a == b => Some(a.clone()),
        (a, b) if family(a) != 0 && family(a) == family(b) => comparison_coercion(a, b),
        _ => None,
    }
}

/// `array[index]`; other subscripts are left to other planners (or refused).
pub fn plan_subscript(
    access: RawFieldAccessExpr,
    schema: &DFSchema,
) -> Result<PlannerResult<RawFieldAccessExpr>> {
    let RawFieldAccessExpr { field_access, expr } = access;
    match field_access {
        GetFieldAccess::ListIndex { key } => {
            if !matches!(expr.get_type(schema)?, DataType::List(_)) {
                return plan_err!(
                    "{expr} is not an ARRAY: only an ARRAY's elements are read by [index]"
                );
            }
            if let Some(index) = constant_index(&key)
                && index < 1
            {
                return plan_err!(
                    "Array element access needs an index starting at 1 but was {index}."
                );
            }
            let key = key.cast_to(&DataType::Int64, schema)?;
            Ok(PlannerResult::Planned(call(
                ArrayFunction::Item,
                vec![expr, key],
            )))
        }
        GetFieldAccess::ListRange { .. } => {
            plan_err!("unsupported: ARRAY slices (array[from:to]); Flink has none either")
        }
        field_access => Ok(PlannerResult::Original(RawFieldAccessExpr {
            field_access,
            expr,
        })),
    }
}

/// The value of an index that is a constant (a literal, cast or negated), as Flink's
/// planner folds it.
fn constant_index(key: &Expr) -> Option<i64> {
    match key {
        Expr::Literal(value, _) => match value.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(index) => index,
            _ => None,
        },
        Expr::Cast(cast) => constant_index(&cast.expr),
        Expr::TryCast(cast) => constant_index(&cast.expr),
        Expr::Negative(inner) => constant_index(inner).map(i64::wrapping_neg),
        _ => None,
    }
}

/// `CAST(array AS STRING)` of an ARRAY of `element`s, where Eddy writes the elements as
/// Flink does; a plan error for other elements.
pub(crate) fn cast_to_text(array: Expr, element: &DataType) -> Result<Expr> {
    use DataType as D;
    match element {
        D::Boolean
        | D::Int8
        | D::Int16
        | D::Int32
        | D::Int64
        | D::Utf8
        | D::Decimal128(..)
        | D::Date32 => Ok(call(ArrayFunction::Text, vec![array])),
        other => plan_err!(
            "unsupported: CAST of an ARRAY<{}> to STRING",
            eddy_common::schema::sql_name(other)
        ),
    }
}

fn udf(function: ArrayFunction) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::from(function))
}

fn call(function: ArrayFunction, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(udf(function), args))
}

/// One of the ARRAY functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ArrayFunction {
    /// `ARRAY[...]`, its arguments already in one type.
    Constructor,
    /// `array[index]`, the index a BIGINT.
    Item,
    /// `CARDINALITY(array)`.
    Cardinality,
    /// `ELEMENT(array)`.
    Element,
    /// `CAST(array AS STRING)`.
    Text,
}

impl ArrayFunction {
    /// The array argument's element field; an error naming the function otherwise.
    fn element_field(self, arg_types: &[DataType]) -> Result<FieldRef> {
        match arg_types.first() {
            Some(DataType::List(element)) => Ok(element.clone()),
            Some(other) => plan_err!(
                "{}() takes an ARRAY, not {}",
                self.name().to_uppercase(),
                eddy_common::schema::sql_name(other)
            ),
            None => plan_err!("{}() takes an ARRAY", self.name().to_uppercase()),
        }
    }
}

impl ScalarUDFImpl for ArrayFunction {
    fn name(&self) -> &str {
        match self {
            ArrayFunction::Constructor => "array",
            ArrayFunction::Item => "item",
            ArrayFunction::Cardinality => "cardinality",
            ArrayFunction::Element => "element",
            ArrayFunction::Text => "array_text",
        }
    }

    fn signature(&self) -> &Signature {
        static SIGNATURE: std::sync::LazyLock<Signature> =
            std::sync::LazyLock::new(|| Signature::variadic_any(Volatility::Immutable));
        &SIGNATURE
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self {
            ArrayFunction::Constructor => DataType::List(Arc::new(Field::new_list_field(
                arg_types.first().cloned().unwrap_or(DataType::Null),
                true,
            ))),
            ArrayFunction::Item | ArrayFunction::Element => {
                self.element_field(arg_types)?.data_type().clone()
            }
            ArrayFunction::Cardinality => {
                self.element_field(arg_types)?;
                DataType::Int32
            }
            ArrayFunction::Text => DataType::Utf8,
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let types = super::argument_types(&args);
        let expected = match self {
            ArrayFunction::Constructor => None,
            ArrayFunction::Item => Some(2),
            ArrayFunction::Cardinality | ArrayFunction::Element | ArrayFunction::Text => Some(1),
        };
        if let Some(expected) = expected
            && types.len() != expected
        {
            return plan_err!(
                "{}() takes {expected} argument(s), not {}",
                self.name().to_uppercase(),
                types.len()
            );
        }
        // The constructor never makes a NULL array; every other result may be NULL.
        let nullable = *self != ArrayFunction::Constructor;
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            nullable,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::over_arrays(&args.args, |arrays| match self {
            // As long as the arguments (one row when every one is a constant).
            ArrayFunction::Constructor => construct(arrays, arrays[0].len()),
            ArrayFunction::Item => item(arrays[0].as_list::<i32>(), &arrays[1]),
            ArrayFunction::Cardinality => Ok(cardinality(arrays[0].as_list::<i32>())),
            ArrayFunction::Element => element(arrays[0].as_list::<i32>()),
            ArrayFunction::Text => text(arrays[0].as_list::<i32>()),
        })
    }
}

/// Each row's array of the arguments' values in that row.
fn construct(columns: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let width = columns.len();
    let element = Arc::new(Field::new_list_field(columns[0].data_type().clone(), true));
    let picks: Vec<(usize, usize)> = (0..rows)
        .flat_map(|row| (0..width).map(move |column| (column, row)))
        .collect();
    let refs: Vec<&dyn Array> = columns.iter().map(|c| c.as_ref()).collect();
    let values = arrow::compute::interleave(&refs, &picks)?;
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(width, rows));
    Ok(Arc::new(ListArray::try_new(
        element, offsets, values, None,
    )?))
}

/// The row's element at the row's index (from 1), NULL when either is NULL or the index
/// is past the array's ends.
fn item(lists: &ListArray, indexes: &ArrayRef) -> Result<ArrayRef> {
    let indexes = indexes.as_primitive::<arrow::datatypes::Int64Type>();
    let offsets = lists.value_offsets();
    let picks: UInt32Array = (0..lists.len())
        .map(|row| {
            if lists.is_null(row) || indexes.is_null(row) {
                return None;
            }
            let (start, end) = (offsets[row] as i64, offsets[row + 1] as i64);
            let at = start + indexes.value(row) - 1;
            (indexes.value(row) >= 1 && at < end).then_some(at as u32)
        })
        .collect();
    Ok(arrow::compute::take(lists.values(), &picks, None)?)
}

/// Each row's number of elements (NULL for a NULL array).
fn cardinality(lists: &ListArray) -> ArrayRef {
    let offsets = lists.value_offsets();
    let counts: Int32Array = (0..lists.len())
        .map(|row| (!lists.is_null(row)).then(|| offsets[row + 1] - offsets[row]))
        .collect();
    Arc::new(counts)
}

/// Each row's only element: NULL for an empty (or NULL) array, an error for more than one.
fn element(lists: &ListArray) -> Result<ArrayRef> {
    let offsets = lists.value_offsets();
    let mut picks = Vec::with_capacity(lists.len());
    for row in 0..lists.len() {
        let count = offsets[row + 1] - offsets[row];
        picks.push(match (lists.is_null(row), count) {
            (true, _) | (false, 0) => None,
            (false, 1) => Some(offsets[row] as u32),
            (false, count) => {
                return exec_err!("ELEMENT(): the array has {count} elements, not one");
            }
        });
    }
    Ok(arrow::compute::take(
        lists.values(),
        &UInt32Array::from(picks),
        None,
    )?)
}

/// Refuses `UNNEST(array)` in `FROM` (Flink's `CROSS JOIN UNNEST`), which Eddy cannot
/// plan yet, by name rather than by the column DataFusion fails to find in it.
#[derive(Debug, Default)]
pub struct UnnestRefusal;

impl RelationPlanner for UnnestRefusal {
    fn plan_relation(
        &self,
        relation: TableFactor,
        _context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        match relation {
            TableFactor::UNNEST { .. } => plan_err!(
                "unsupported: UNNEST (CROSS JOIN UNNEST(array) is not supported yet; read \
                 elements by index, array[i])"
            ),
            other => Ok(RelationPlanning::Original(Box::new(other))),
        }
    }
}

/// Each array as Flink writes it: `[a, b, NULL]` (booleans as `TRUE`/`FALSE`).
fn text(lists: &ListArray) -> Result<ArrayRef> {
    let values = lists.values();
    let texts = match values.data_type() {
        DataType::Boolean => {
            let flags = values.as_boolean();
            let words: StringArray = flags
                .iter()
                .map(|flag| flag.map(|f| if f { "TRUE" } else { "FALSE" }))
                .collect();
            Arc::new(words) as ArrayRef
        }
        _ => arrow::compute::cast(values, &DataType::Utf8)?,
    };
    let texts = texts.as_string::<i32>();
    let offsets = lists.value_offsets();
    let mut out = StringBuilder::new();
    let mut line = String::new();
    for row in 0..lists.len() {
        if lists.is_null(row) {
            out.append_null();
            continue;
        }
        line.clear();
        line.push('[');
        for (k, at) in (offsets[row] as usize..offsets[row + 1] as usize).enumerate() {
            if k > 0 {
                line.push_str(", ");
            }
            match texts.is_null(at) {
                true => line.push_str("NULL"),
                false => line.push_str(texts.value(at)),
            }
        }
        line.push(']');
        out.append_value(&line);
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;
    use arrow::datatypes::Int32Type;

    use super::*;

    fn lists() -> ListArray {
        ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2), Some(3)]),
            None,
            Some(vec![]),
            Some(vec![None]),
            Some(vec![Some(7)]),
        ])
    }

    #[test]
    fn items_are_read_from_one_and_null_past_the_ends() {
        let indexes: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(3),
            Some(1),
            Some(1),
            Some(1),
            None,
        ]));
        let items = item(&lists(), &indexes).unwrap();
        let items = items.as_primitive::<Int32Type>();
        let items: Vec<Option<i32>> = items.iter().collect();
        assert_eq!(items, [Some(3), None, None, None, None]);
        let past: ArrayRef = Arc::new(Int64Array::from(vec![4, 0, 1, -1, 2]));
        let items = item(&lists(), &past).unwrap();
        assert_eq!(items.null_count(), 5, "{items:?}");
    }

    #[test]
    fn cardinality_and_element_count_what_is_there() {
        let counts = cardinality(&lists());
        let counts: Vec<Option<i32>> = counts.as_primitive::<Int32Type>().iter().collect();
        assert_eq!(counts, [Some(3), None, Some(0), Some(1), Some(1)]);
        let error = element(&lists()).unwrap_err().to_string();
        assert!(error.contains("3 elements, not one"), "{error}");
        let single = lists().slice(1, 4);
        let elements = element(&single).unwrap();
        let elements: Vec<Option<i32>> = elements.as_primitive::<Int32Type>().iter().collect();
        assert_eq!(elements, [None, None, None, Some(7)]);
    }

    #[test]
    fn arrays_are_written_as_flink_writes_them() {
        let texts = text(&lists()).unwrap();
        let texts: Vec<Option<&str>> = texts.as_string::<i32>().iter().collect();
        assert_eq!(
            texts,
            [
                Some("[1, 2, 3]"),
                None,
                Some("[]"),
                Some("[NULL]"),
                Some("[7]")
            ]
        );
    }

    #[test]
    fn constructed_arrays_hold_each_rows_arguments_in_order() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None]));
        let b: ArrayRef = Arc::new(StringArray::from(vec!["b", "c"]));
        let arrays = construct(&[a, b], 2).unwrap();
        let arrays = arrays.as_list::<i32>();
        assert_eq!(arrays.value_offsets(), [0, 2, 4]);
        let values: Vec<Option<&str>> = arrays.values().as_string::<i32>().iter().collect();
        assert_eq!(values, [Some("a"), Some("b"), None, Some("c")]);
    }
}
