//! `ROW_NUMBER`, `RANK` and `DENSE_RANK`: the ranking functions Flink allows in an `OVER`
//! clause. They are never evaluated over a window frame here: the streaming planner turns
//! an `OVER (PARTITION BY … ORDER BY …)` filtered by its rank into a Top-N or
//! deduplication operator, and refuses every other use.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion_common::{Result, plan_err};
use datafusion_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion_expr::{PartitionEvaluator, Signature, Volatility, WindowUDF, WindowUDFImpl};

/// How a ranking function numbers rows that tie on the `ORDER BY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankingKind {
    /// 1, 2, 3, … whatever the ties.
    RowNumber,
    /// Ties share a number; the next row skips as many numbers as tied (1, 1, 3).
    Rank,
    /// Ties share a number; the next row takes the next one (1, 1, 2).
    DenseRank,
}

impl RankingKind {
    /// The kind a window function of this name is, if it is a ranking function.
    pub fn of(name: &str) -> Option<Self> {
        match name {
            "row_number" => Some(RankingKind::RowNumber),
            "rank" => Some(RankingKind::Rank),
            "dense_rank" => Some(RankingKind::DenseRank),
            _ => None,
        }
    }

    /// The function's name, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            RankingKind::RowNumber => "row_number",
            RankingKind::Rank => "rank",
            RankingKind::DenseRank => "dense_rank",
        }
    }
}

/// The three ranking functions as DataFusion window functions (Flink's result type,
/// `BIGINT NOT NULL`).
pub fn functions() -> Vec<Arc<WindowUDF>> {
    [
        RankingKind::RowNumber,
        RankingKind::Rank,
        RankingKind::DenseRank,
    ]
    .into_iter()
    .map(|kind| {
        Arc::new(WindowUDF::from(Ranking {
            kind,
            signature: Signature::nullary(Volatility::Immutable),
        }))
    })
    .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Ranking {
    kind: RankingKind,
    signature: Signature,
}

impl WindowUDFImpl for Ranking {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn partition_evaluator(
        &self,
        _: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        plan_err!(
            "{} is computed by the streaming Top-N operator, not over a window frame",
            self.kind.name().to_uppercase()
        )
    }

    fn field(&self, args: WindowUDFFieldArgs) -> Result<FieldRef> {
        Ok(Arc::new(Field::new(args.name(), DataType::Int64, false)))
    }
}
