//! Event-time temporal joins (`JOIN t FOR SYSTEM_TIME AS OF s.rowtime`, `t` a versioned
//! table: a primary key and a watermark) over the Nexmark oracle data give Apache Flink's
//! rows at parallelism 1 and 4: inner and LEFT, a versioned table with one version per key
//! and one whose every row is a new version of its key. The queries are in
//! `temporal_joins/`, Flink's answers in `nexmark/` (bench/flink/query_answers.py
//! integration-tests/nexmark --queries integration-tests/temporal_joins).

use crate::flink_oracle::OracleDir;

#[test]
fn temporal_joins_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/temporal_joins").check_all(&[
        "bids_with_their_bidder",
        "bids_and_the_bidders_latest_sale",
        "high_bids_on_the_sellers_latest_auction",
    ]);
}

/// The same joins with the versioned tables' keys in LSM stores with the least memory they
/// take give the same rows.
#[test]
fn temporal_joins_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/temporal_joins")
        .on_the_lsm_backend()
        .check_all(&[
            "bids_with_their_bidder",
            "bids_and_the_bidders_latest_sale",
            "high_bids_on_the_sellers_latest_auction",
        ]);
}
