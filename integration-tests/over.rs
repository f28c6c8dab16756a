//! OVER aggregates on event time (`agg OVER (PARTITION BY ... ORDER BY ts ROWS|RANGE ...)`):
//! every query of `over/` over the Top-N tests' bids gives Apache Flink's rows at
//! parallelism 1 and 4.

use crate::flink_oracle::OracleDir;

#[test]
fn over_aggregates_give_flinks_rows() {
    OracleDir::new("over").check_all(&[
        "rows_frame",
        "range_frame",
        "unbounded",
        "rows_unbounded_global",
    ]);
}

/// The same aggregates with their partitions in LSM stores with the least memory they take
/// give the same rows.
#[test]
fn over_aggregates_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::new("over").on_the_lsm_backend().check_all(&[
        "rows_frame",
        "range_frame",
        "unbounded",
        "rows_unbounded_global",
    ]);
}
