//! Interval joins (both inputs' event-time attributes bounding each other), inner and
//! outer (padded rows emitted when a row expires unmatched), over the Nexmark oracle data
//! give Apache Flink's rows at parallelism 1 and 4, also when a window aggregate follows on
//! the join's time attribute. The queries are in `interval_joins/`,
//! Flink's answers in `nexmark/` (bench/flink/query_answers.py integration-tests/nexmark
//! --queries integration-tests/interval_joins).

use crate::flink_oracle::OracleDir;

#[test]
fn interval_joins_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/interval_joins").check_all(&[
        "bids_in_auctions_first_seconds",
        "sellers_new_auctions",
        "windows_after_interval_join",
        "auctions_and_their_first_bids",
        "people_and_auctions_near_in_time",
        "windows_after_left_interval_join",
    ]);
}

/// The same joins with their rows in LSM stores with the least memory they take (nearly
/// every key read back from the store, and expired through its stored timers) give the
/// same rows.
#[test]
fn interval_joins_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/interval_joins")
        .on_the_lsm_backend()
        .check_all(&[
            "bids_in_auctions_first_seconds",
            "auctions_and_their_first_bids",
            "people_and_auctions_near_in_time",
            "windows_after_left_interval_join",
        ]);
}
