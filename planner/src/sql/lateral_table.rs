//! Table functions in `FROM`: `t, LATERAL TABLE(f(t.x)) AS T(a, b)`, `CROSS JOIN LATERAL
//! TABLE(...)` and `LEFT JOIN LATERAL TABLE(...) ON TRUE`, as Flink writes them. The call
//! is planned as a lateral relation ([`LateralTablePlanner`], its arguments referring to the
//! left side's columns), and the join of the left side with it becomes one [`Correlate`]
//! node ([`correlate`]), which the streaming planner runs as an operator: each row joined
//! with the rows the function gives for it.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field};
use datafusion_common::tree_node::{Transformed, TreeNode};
use datafusion_common::{DFSchema, DFSchemaRef, JoinType, Result, ScalarValue, plan_err};
use datafusion_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion_expr::{
    ColumnarValue, Expr, Extension, LogicalPlan, LogicalPlanBuilder, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, UserDefinedLogicalNodeCore, Volatility,
};
use datafusion_sql::sqlparser::ast::{self, FunctionArg, FunctionArgExpr, FunctionArguments};

use super::nodes::Correlate;

/// The name a `LATERAL TABLE(f(...))` asks the catalog for `f` under: table functions are
/// found by it only.
pub(crate) const TABLE_FUNCTION: &str = "\u{1}table function ";

/// Plans `LATERAL TABLE(f(args))` into a [`LateralTable`].
#[derive(Debug, Default)]
pub struct LateralTablePlanner;

impl RelationPlanner for LateralTablePlanner {
    fn plan_relation(
        &self,
        relation: ast::TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let ast::TableFactor::Function {
            lateral: true,
            name,
            args,
            alias,
            ..
        } = &relation
        else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        if !name.to_string().eq_ignore_ascii_case("TABLE") {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        }
        let [FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Function(call)))] =
            args.as_slice()
        else {
            return plan_err!("LATERAL TABLE takes one call of a table function: TABLE(f(...))");
        };
        let mut call = call.clone();
        let function = call.name.to_string();
        if let Some(last) = call.name.0.last_mut() {
            *last = ast::ObjectNamePart::Identifier(ast::Ident::new(format!(
                "{TABLE_FUNCTION}{}",
                function.to_ascii_lowercase()
            )));
        }
        if matches!(call.args, FunctionArguments::None) {
            call.args = FunctionArguments::List(ast::FunctionArgumentList {
                duplicate_treatment: None,
                args: Vec::new(),
                clauses: Vec::new(),
            });
        }
        // The arguments refer to the left side's columns, as outer references.
        let call = context
            .sql_to_expr(ast::Expr::Function(call), &DFSchema::empty())
            .map_err(|e| match e.to_string().contains(TABLE_FUNCTION) {
                true => datafusion_common::DataFusionError::Plan(format!(
                    "'{function}' is not a table function (declare one with CREATE FUNCTION \
                     ... RETURNS TABLE (...))"
                )),
                false => e,
            })?;
        let node = LateralTable::try_new(call)?;
        let plan = LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        });
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan,
            alias.clone(),
        ))))
    }
}

/// A table function's call where a relation goes, before [`correlate`] joins it to its
/// input: its rows are the function's for one row of the left side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LateralTable {
    /// The call; its value is a list of rows.
    pub call: Expr,
    /// The function's columns.
    pub schema: DFSchemaRef,
}

impl LateralTable {
    fn try_new(call: Expr) -> Result<LateralTable> {
        let call = call.unalias();
        let data_type = match &call {
            Expr::ScalarFunction(function) => {
                function.func.return_type(&[]).unwrap_or(DataType::Null)
            }
            _ => DataType::Null,
        };
        let DataType::List(item) = data_type else {
            return plan_err!("LATERAL TABLE needs a table function, not {call}");
        };
        let DataType::Struct(columns) = item.data_type() else {
            return plan_err!("LATERAL TABLE needs a table function, not {call}");
        };
        let fields: Vec<Field> = columns.iter().map(|f| f.as_ref().clone()).collect();
        let schema = DFSchema::from_unqualified_fields(fields.into(), Default::default())?;
        Ok(LateralTable {
            call,
            schema: Arc::new(schema),
        })
    }
}

impl PartialOrd for LateralTable {
    fn partial_cmp(&self, _other: &Self) -> Option<Ordering> {
        None
    }
}

impl UserDefinedLogicalNodeCore for LateralTable {
    fn name(&self) -> &str {
        "LateralTable"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        Vec::new()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![self.call.clone()]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "LateralTable: {}", self.call)
    }

    fn with_exprs_and_inputs(&self, mut exprs: Vec<Expr>, _: Vec<LogicalPlan>) -> Result<Self> {
        Ok(LateralTable {
            call: exprs.swap_remove(0),
            schema: self.schema.clone(),
        })
    }
}

/// Every join of a relation with a [`LateralTable`] as one [`Correlate`]: an inner join
/// (comma, `CROSS JOIN`, `JOIN ... ON cond`: a condition other than `TRUE` filters the
/// joined rows) or `LEFT JOIN ... ON TRUE`, as Flink takes them.
pub(super) fn correlate(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up(|node| {
        let LogicalPlan::Join(join) = &node else {
            return Ok(Transformed::no(node));
        };
        let Some(table) = lateral_table(&join.right) else {
            return Ok(Transformed::no(node));
        };
        let condition = join
            .on
            .iter()
            .map(|(l, r)| l.clone().eq(r.clone()))
            .chain(join.filter.clone())
            .filter(|e| !matches!(e, Expr::Literal(ScalarValue::Boolean(Some(true)), _)))
            .reduce(Expr::and);
        let keep_unmatched = match (join.join_type, &condition) {
            (JoinType::Inner, _) => false,
            (JoinType::Left, None) => true,
            (JoinType::Left, Some(_)) => {
                return plan_err!(
                    "unsupported: LEFT JOIN LATERAL TABLE(...) ON a condition other than TRUE \
                     (as in Flink, write ON TRUE and filter in WHERE)"
                );
            }
            (other, _) => {
                return plan_err!("unsupported: a {other} JOIN of LATERAL TABLE(...)");
            }
        };
        let call = table
            .call
            .clone()
            .transform(|e| match e {
                Expr::OuterReferenceColumn(_, column) => Ok(Transformed::yes(Expr::Column(column))),
                other => Ok(Transformed::no(other)),
            })?
            .data;
        let correlated = LogicalPlan::Extension(Extension {
            node: Arc::new(Correlate::try_new(
                join.left.as_ref().clone(),
                call,
                keep_unmatched,
                join.schema.clone(),
            )?),
        });
        let plan = match condition {
            Some(condition) => LogicalPlanBuilder::from(correlated)
                .filter(condition)?
                .build()?,
            None => correlated,
        };
        Ok(Transformed::yes(plan))
    })
    .map(|t| t.data)
}

/// The [`LateralTable`] a join's right side is, under its aliases (`AS T(a, b)` renames
/// its columns in a projection).
fn lateral_table(plan: &LogicalPlan) -> Option<&LateralTable> {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => lateral_table(&alias.input),
        LogicalPlan::Subquery(subquery) => lateral_table(&subquery.subquery),
        LogicalPlan::Projection(projection) if renames(projection) => {
            lateral_table(&projection.input)
        }
        LogicalPlan::Extension(extension) => extension.node.as_any().downcast_ref(),
        _ => None,
    }
}

/// Whether a projection only renames its input's columns, in order.
fn renames(projection: &datafusion_expr::Projection) -> bool {
    let input = projection.input.schema();
    projection.expr.len() == input.fields().len()
        && projection.expr.iter().enumerate().all(|(i, expr)| {
            matches!(expr.clone().unalias(), Expr::Column(column)
                if input.index_of_column(&column).ok() == Some(i))
        })
}

/// The function a table function's name gives where a scalar is wanted: it refuses to be
/// planned, saying where it belongs.
pub(crate) fn misplaced(name: &str) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::from(Misplaced {
        name: name.to_string(),
        signature: Signature::variadic_any(Volatility::Volatile),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Misplaced {
    name: String,
    signature: Signature,
}

impl ScalarUDFImpl for Misplaced {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        plan_err!(
            "{} is a table function: call it in FROM, as `LATERAL TABLE({}(...))`",
            self.name,
            self.name
        )
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!("{} is a table function", self.name)
    }
}
