//! Eddy's planner: the SQL front end ([`sql`]: Flink-style scripts parsed, bound and
//! optimized into DataFusion logical plans) and the streaming planner ([`plan`]: logical
//! plans into a job graph of operator chains, exchanges and changelog kinds). The only
//! crate that parses SQL.

pub mod plan;
pub mod sql;

use eddy_common::Result;

pub use plan::JobGraph;

/// Parses and plans a SQL script into a job graph. `overrides` (from the command line)
/// win over the script's `SET` statements.
pub fn plan(script: &str, overrides: &[(String, String)]) -> Result<JobGraph> {
    let compiled = sql::compile(script, overrides)?;
    plan::plan_job(&compiled)
}
