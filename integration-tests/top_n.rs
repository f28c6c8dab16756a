//! Top-N and deduplication (`ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` filtered by
//! its rank), over append-only and updating inputs and over windows: every query of
//! `top_n/` over `top_n/bids.csv` gives Apache Flink's final rows at parallelism 1 and 4,
//! and what Flink refuses (`RANK()` on a stream) Eddy refuses.

use crate::flink_oracle::OracleDir;

#[test]
fn top_n_and_deduplication_give_flinks_rows() {
    OracleDir::new("top_n").check_all(&[
        "top3",
        "top3_rank_dropped",
        "ranks_2_to_3",
        "dedup_last",
        "dedup_first",
        "top_of_updating",
        "top_of_updating_per_group",
        "window_top",
        "window_top_aggregate",
        "window_dedup",
        "rank",
        "dense_rank_window",
        "nulls_first",
        "nulls_last",
    ]);
}

/// The same queries with their partitions (also of windows, and the window aggregates
/// feeding them) in LSM stores with the least memory they take, give the same rows.
#[test]
fn top_n_on_the_lsm_backend_gives_flinks_rows() {
    OracleDir::new("top_n").on_the_lsm_backend().check_all(&[
        "top3",
        "dedup_last",
        "top_of_updating_per_group",
        "window_top",
        "window_top_aggregate",
        "window_dedup",
        "dense_rank_window",
    ]);
}
