//! Semi and anti joins (`IN (SELECT ...)`, `EXISTS`, `NOT EXISTS` as conjuncts of WHERE),
//! regular ones over append-only and updating inputs and window ones, over the Nexmark
//! oracle data give Apache Flink's rows at parallelism 1 and 4. The queries are in
//! `semi_joins/`, Flink's answers in `nexmark/` (bench/flink/query_answers.py
//! integration-tests/nexmark --queries integration-tests/semi_joins).

use crate::flink_oracle::OracleDir;

#[test]
fn semi_and_anti_joins_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/semi_joins").check_all(&[
        "people_who_sell",
        "auctions_without_bids",
        "sellers_of_high_bids",
        "auctions_bid_on_in_their_window",
        "sellers_without_bids_in_their_window",
    ]);
}
