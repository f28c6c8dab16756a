//! Outer joins (LEFT, RIGHT, FULL) over the Nexmark oracle data, appending and updating
//! inputs, give Apache Flink's final rows at parallelism 1 and 4: a preserved row with no
//! partner is padded with NULLs, and the padded row is taken back when a partner arrives.
//! The queries are in `outer_joins/`, Flink's answers in `nexmark/`
//! (bench/flink/query_answers.py integration-tests/nexmark --queries
//! integration-tests/outer_joins).

use crate::flink_oracle::OracleDir;

#[test]
fn outer_joins_give_flinks_rows() {
    OracleDir::with_queries("nexmark", "integration-tests/outer_joins").check_all(&[
        "people_and_their_auctions",
        "auctions_and_bids_over_reserve",
        "sellers_and_bidders",
    ]);
}
