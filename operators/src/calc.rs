//! Filters and projections, evaluated vectorized over whole chunks.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::{EddyError, Result};

use super::{Operator, evaluate};

/// `WHERE predicate` and/or `SELECT expressions`.
#[derive(Debug)]
pub struct Calc {
    predicate: Option<Arc<dyn PhysicalExpr>>,
    projection: Option<(Vec<Arc<dyn PhysicalExpr>>, SchemaRef)>,
}

impl Calc {
    /// A filter.
    pub fn filter(predicate: Arc<dyn PhysicalExpr>) -> Self {
        Calc {
            predicate: Some(predicate),
            projection: None,
        }
    }

    /// A projection producing `schema`.
    pub fn project(exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef) -> Self {
        Calc {
            predicate: None,
            projection: Some((exprs, schema)),
        }
    }
}

impl Operator for Calc {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let mut chunk = chunk;
        if let Some(predicate) = &self.predicate {
            let mask = evaluate(predicate, chunk.rows())?;
            let mask = mask
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| {
                    EddyError::Plan(format!(
                        "a filter gave {} values, not BOOLEAN",
                        mask.data_type()
                    ))
                })?;
            if mask.true_count() == 0 {
                return Ok(());
            }
            if mask.true_count() < chunk.num_rows() {
                chunk = chunk.filter(mask)?;
            }
        }
        if let Some((exprs, schema)) = &self.projection {
            let columns = exprs
                .iter()
                .map(|e| evaluate(e, chunk.rows()))
                .collect::<Result<Vec<_>>>()?;
            let options = RecordBatchOptions::new().with_row_count(Some(chunk.num_rows()));
            let rows = RecordBatch::try_new_with_options(schema.clone(), columns, &options)?;
            chunk = chunk.with_rows(rows);
        }
        if !chunk.is_empty() {
            out.push(chunk);
        }
        Ok(())
    }
}
