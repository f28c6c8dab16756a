//! Window joins (two inputs' rows of the same windows, joined on both window bounds and
//! keys: inner, LEFT, RIGHT, FULL, over window TVFs and window aggregates) over the Nexmark
//! oracle data give Apache Flink's rows at parallelism 1 and 4. The queries are in
//! `window_joins/`, Flink's answers in `nexmark/` (bench/flink/query_answers.py
//! integration-tests/nexmark --queries integration-tests/window_joins). Nexmark q5 and q8,
//! planned as window joins, are checked with the other Nexmark queries.

use crate::flink_oracle::OracleDir;

#[test]
fn window_joins_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/window_joins").check_all(&[
        "bids_on_new_auctions",
        "sellers_and_bidders_per_window",
        "auctions_and_high_bids",
        "new_people_and_their_sales",
        "windows_of_different_kinds",
    ]);
}

/// The same joins with their rows (and the window aggregates' keys) in LSM stores with the
/// least memory they take give the same rows.
#[test]
fn window_joins_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/window_joins")
        .on_the_lsm_backend()
        .check_all(&[
            "bids_on_new_auctions",
            "sellers_and_bidders_per_window",
            "auctions_and_high_bids",
            "new_people_and_their_sales",
            "windows_of_different_kinds",
        ]);
}
