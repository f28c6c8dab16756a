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
