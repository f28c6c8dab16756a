use super::*;
use crate::join::{Filtering, IntervalBounds};
use crate::lsm_testing::hand_over;
use arrow::array::{Array, AsArray};
use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::DataType;
use arrow::datatypes::{Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion_expr::Operator as BinaryOp;
use datafusion_physical_expr::PhysicalExpr;
use datafusion_physical_expr::expressions::{BinaryExpr, Column, col};
use eddy_common::chunk::Op;
use eddy_common::state::StateKind;

/// Interval joins on the LSM backend, against the same joins in memory.
mod interval_lsm;

fn schema(names: &[(&str, DataType)]) -> SchemaRef {
    Arc::new(Schema::new(
        names
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), true))
            .collect::<Vec<_>>(),
    ))
}

/// bids(auction, price) JOIN auctions(id, name) ON auction = id [AND price > 10].
fn join(filter: bool, nulls_equal: bool) -> StreamingJoin {
    let bids = schema(&[("auction", DataType::Int64), ("price", DataType::Int64)]);
    let auctions = schema(&[("id", DataType::Int64), ("name", DataType::Utf8)]);
    let joined = schema(&[
        ("auction", DataType::Int64),
        ("price", DataType::Int64),
        ("id", DataType::Int64),
        ("name", DataType::Utf8),
    ]);
    let filter: Option<Arc<dyn PhysicalExpr>> = filter.then(|| {
        let literal = datafusion_physical_expr::expressions::lit(10i64);
        Arc::new(BinaryExpr::new(
            col("price", &joined).unwrap(),
            BinaryOp::Gt,
            literal,
        )) as Arc<dyn PhysicalExpr>
    });
    let spec = JoinSpec {
        left_keys: vec![Arc::new(Column::new("auction", 0))],
        right_keys: vec![Arc::new(Column::new("id", 0))],
        key_types: vec![DataType::Int64],
        left_schema: bids,
        right_schema: auctions,
        filter,
        nulls_equal,
        schema: joined,
        kind: JoinKind::Inner,
        retention: Retention::StateTtl([None, None]),
    };
    StreamingJoin::new(&spec, 128).unwrap()
}

/// l(k, t) JOIN r(k, t) ON l.k = r.k, an interval join with `l.t - r.t` in [-10 s, 0].
fn interval_join() -> StreamingJoin {
    let side = schema(&[
        ("k", DataType::Int64),
        (
            "t",
            DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
        ),
    ]);
    let joined = Arc::new(arrow::datatypes::Schema::new(
        [side.fields().to_vec(), side.fields().to_vec()].concat(),
    ));
    let spec = JoinSpec {
        left_keys: vec![Arc::new(Column::new("k", 0))],
        right_keys: vec![Arc::new(Column::new("k", 0))],
        key_types: vec![DataType::Int64],
        left_schema: side.clone(),
        right_schema: side,
        filter: None,
        nulls_equal: false,
        schema: joined,
        kind: JoinKind::Inner,
        retention: Retention::Interval(IntervalBounds {
            left_time: 1,
            right_time: 1,
            lower: -10_000,
            upper: 0,
        }),
    };
    StreamingJoin::new(&spec, 128).unwrap()
}

fn timed(rows: &[(i64, i64)]) -> Chunk {
    let k = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let t = arrow::array::TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.1));
    let names = [
        ("k", DataType::Int64),
        (
            "t",
            DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
        ),
    ];
    chunk(
        &names,
        vec![Arc::new(k), Arc::new(t)],
        &vec![Op::Insert; rows.len()],
    )
}

#[test]
fn an_interval_join_drops_rows_the_watermark_put_out_of_reach() {
    let mut join = interval_join();
    let mut out = Vec::new();
    join.process_input(1, timed(&[(1, 100_000), (2, 120_000)]), &mut out)
        .unwrap();
    join.process_input(0, timed(&[(1, 95_000), (2, 111_000)]), &mut out)
        .unwrap();
    assert_eq!(out.iter().map(Chunk::num_rows).sum::<usize>(), 2);
    assert_eq!(join.state_rows(), (2, 2));
    // A right row at t joins left rows up to t: gone once the watermark passes t (and
    // the rest of its second).
    join.on_watermark(100_998, &mut out).unwrap();
    assert_eq!(join.state_rows(), (2, 2));
    join.on_watermark(100_999, &mut out).unwrap();
    assert_eq!(join.state_rows(), (2, 1));
    // A left row at t joins right rows up to t + 10 s: kept until then.
    join.on_watermark(105_998, &mut out).unwrap();
    assert_eq!(join.state_rows(), (2, 1));
    join.on_watermark(105_999, &mut out).unwrap();
    assert_eq!(join.state_rows(), (1, 1));
    let snapshot = join.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
    let mut restored = interval_join();
    restored
        .restore(&[&snapshot], &KeyScope::everything())
        .unwrap();
    assert_eq!(restored.state_rows(), (1, 1));
    restored.on_watermark(122_000, &mut out).unwrap();
    assert_eq!(restored.state_rows(), (0, 0), "restored rows expire too");
    // A row already out of reach is joined with what is held but not held itself.
    let mut late = Vec::new();
    restored
        .process_input(1, timed(&[(3, 50_000)]), &mut late)
        .unwrap();
    assert_eq!(restored.state_rows(), (0, 0));
}

#[test]
fn an_outer_interval_join_pads_a_row_once_when_it_expires_unmatched() {
    let mut join = interval_join();
    join.kind = JoinKind::Full;
    let keys = |out: &[Chunk]| -> Vec<(Option<i64>, Option<i64>)> {
        let mut pairs = Vec::new();
        for chunk in out {
            assert!(
                chunk.is_append_only(),
                "an outer interval join only inserts"
            );
            let rows = chunk.rows();
            let key = |c: usize, i: usize| {
                let column = rows.column(c).as_primitive::<arrow::datatypes::Int64Type>();
                column.is_valid(i).then(|| column.value(i))
            };
            pairs.extend((0..rows.num_rows()).map(|i| (key(0, i), key(2, i))));
        }
        pairs
    };
    let mut out = Vec::new();
    join.process_input(1, timed(&[(1, 100_000), (2, 100_000)]), &mut out)
        .unwrap();
    join.process_input(0, timed(&[(1, 95_000), (3, 96_000)]), &mut out)
        .unwrap();
    assert_eq!(keys(&out), [(Some(1), Some(1))], "no padding before expiry");
    // The right rows expire past 100 s: 2 joined nothing; 1 did.
    out.clear();
    join.on_watermark(101_000, &mut out).unwrap();
    assert_eq!(keys(&out), [(None, Some(2))]);
    // The left rows expire past t + 10 s: 3 joined nothing.
    out.clear();
    join.on_watermark(107_000, &mut out).unwrap();
    assert_eq!(keys(&out), [(Some(3), None)]);
    // A row too late to be held, joining nothing, is padded at once.
    out.clear();
    join.process_input(1, timed(&[(4, 50_000)]), &mut out)
        .unwrap();
    assert_eq!(keys(&out), [(None, Some(4))]);
    assert_eq!(join.watermark_delay(), 10_000);
}

fn chunk(names: &[(&str, DataType)], columns: Vec<ArrayRef>, ops: &[Op]) -> Chunk {
    let batch = RecordBatch::try_new(schema(names), columns).unwrap();
    Chunk::from_ops(batch, ops.to_vec())
}

fn bids(rows: &[(Option<i64>, i64)], ops: &[Op]) -> Chunk {
    let auction = Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
    let price = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
    let names = [("auction", DataType::Int64), ("price", DataType::Int64)];
    chunk(&names, vec![Arc::new(auction), Arc::new(price)], ops)
}

fn auctions(rows: &[(i64, &str)], ops: &[Op]) -> Chunk {
    let id = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let name = StringArray::from_iter_values(rows.iter().map(|r| r.1));
    let names = [("id", DataType::Int64), ("name", DataType::Utf8)];
    chunk(&names, vec![Arc::new(id), Arc::new(name)], ops)
}

/// Every output row as `op auction price id name`.
fn lines(out: &[Chunk]) -> Vec<String> {
    out.iter().flat_map(Chunk::to_pretty).collect()
}

fn run(join: &mut StreamingJoin, input: usize, chunk: Chunk) -> Vec<String> {
    let mut out = Vec::new();
    join.process_input(input, chunk, &mut out).unwrap();
    lines(&out)
}

use Op::{Delete, Insert, UpdateAfter, UpdateBefore};

/// [`join`] without a condition, preserving the inputs `outer` says.
fn outer_join(outer: [bool; 2]) -> StreamingJoin {
    let mut j = join(false, false);
    j.kind = match outer {
        [true, false] => JoinKind::Left,
        [false, true] => JoinKind::Right,
        [true, true] => JoinKind::Full,
        [false, false] => JoinKind::Inner,
    };
    j
}

#[test]
fn a_left_join_pads_until_a_partner_comes_and_after_the_last_leaves() {
    let mut j = outer_join([true, false]);
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])),
        ["+I 1 5 . .", "+I . 6 . ."]
    );
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
        ["-D 1 5 . .", "+I 1 5 1 a", "+I 1 5 1 b"]
    );
    // An update of one partner in one chunk: the pair goes and comes back, and the
    // padded row never shows while another partner remains.
    assert_eq!(
        run(
            &mut j,
            1,
            auctions(&[(1, "a"), (1, "a2")], &[UpdateBefore, UpdateAfter])
        ),
        ["-U 1 5 1 a", "+U 1 5 1 a2"]
    );
    assert_eq!(
        run(
            &mut j,
            1,
            auctions(&[(1, "b"), (1, "a2")], &[Delete, Delete])
        ),
        ["-D 1 5 1 b", "-D 1 5 1 a2", "+I 1 5 . ."]
    );
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])),
        ["-D 1 5 . ."]
    );
    assert_eq!(j.state_rows(), (0, 0));
}

#[test]
fn a_full_join_pads_both_sides_and_its_counts_survive_a_restore() {
    let mut j = outer_join([true, true]);
    assert_eq!(
        run(&mut j, 1, auctions(&[(2, "x")], &[Insert])),
        ["+I . . 2 x"]
    );
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(2), 1), (Some(3), 4)], &[Insert; 2])),
        ["-D . . 2 x", "+I 2 1 2 x", "+I 3 4 . ."]
    );
    let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert_eq!(snapshot.kind, eddy_common::state::StateKind::Full);
    let mut restored = outer_join([true, true]);
    restored
        .restore(&[&snapshot.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(
        run(&mut restored, 0, bids(&[(Some(2), 1)], &[Delete])),
        ["-D 2 1 2 x", "+I . . 2 x"]
    );
    assert_eq!(
        run(&mut restored, 1, auctions(&[(3, "y")], &[Insert])),
        ["-D 3 4 . .", "+I 3 4 3 y"]
    );
}

/// bids semi- or anti-joined with auctions on `auction = id`.
fn filtering_join(filtering: Filtering) -> StreamingJoin {
    let mut j = join(false, false);
    j.kind = match filtering {
        Filtering::Semi => JoinKind::LeftSemi,
        Filtering::Anti => JoinKind::LeftAnti,
    };
    j.pair_schema = j.schema.clone();
    j.schema = schema(&[("auction", DataType::Int64), ("price", DataType::Int64)]);
    j
}

#[test]
fn a_semi_join_emits_a_row_with_its_first_match_and_takes_it_back_with_its_last() {
    let mut j = filtering_join(Filtering::Semi);
    assert!(run(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])).is_empty());
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
        ["+I 1 5"]
    );
    // A row arriving with partners held comes at once, once.
    assert_eq!(run(&mut j, 0, bids(&[(Some(1), 7)], &[Insert])), ["+I 1 7"]);
    assert!(run(&mut j, 1, auctions(&[(1, "a")], &[Delete])).is_empty());
    let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut restored = filtering_join(Filtering::Semi);
    restored
        .restore(&[&snapshot.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(
        run(&mut restored, 1, auctions(&[(1, "b")], &[Delete])),
        ["-D 1 5", "-D 1 7"]
    );
    assert!(run(&mut restored, 0, bids(&[(Some(1), 5)], &[Delete])).is_empty());
}

#[test]
fn an_anti_join_emits_a_row_until_its_first_match_and_after_its_last() {
    let mut j = filtering_join(Filtering::Anti);
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])),
        ["+I 1 5", "+I . 6"]
    );
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
        ["-D 1 5"]
    );
    assert!(run(&mut j, 0, bids(&[(Some(1), 7)], &[Insert])).is_empty());
    assert!(run(&mut j, 1, auctions(&[(1, "a")], &[Delete])).is_empty());
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "b")], &[Delete])),
        ["+I 1 5", "+I 1 7"]
    );
    assert_eq!(run(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])), ["-D 1 5"]);
}

#[test]
fn rows_idle_for_the_ttl_join_nothing_and_keep_their_times_through_a_restore() {
    use crate::ttl::test_clock;
    let ttl_join = || {
        let mut j = join(false, false);
        j.retention = Retention::StateTtl([Some(1000), Some(1000)]);
        j.clock = test_clock::now;
        j
    };
    let mut j = ttl_join();
    test_clock::set(0);
    assert!(run(&mut j, 0, bids(&[(Some(1), 5)], &[Insert])).is_empty());
    test_clock::set(600);
    assert!(run(&mut j, 0, bids(&[(Some(1), 6)], &[Insert])).is_empty());
    // The bid of 0 is gone at 1000; the bid of 600 is not.
    test_clock::set(1000);
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a")], &[Insert])),
        ["+I 1 6 1 a"]
    );
    let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut restored = ttl_join();
    restored
        .restore(&[&snapshot.bytes], &KeyScope::everything())
        .unwrap();
    // At 1600 the bid of 600 is gone there too; the auction of 1000 is not.
    test_clock::set(1600);
    assert!(run(&mut restored, 1, auctions(&[(1, "b")], &[Insert])).is_empty());
    assert_eq!(
        run(&mut restored, 0, bids(&[(Some(1), 7)], &[Insert])),
        ["+I 1 7 1 a", "+I 1 7 1 b"]
    );
    test_clock::set(5000);
    let empty = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
    let mut last = ttl_join();
    last.restore(&[&empty.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(last.state_rows(), (0, 0), "expired rows are not written");
}

#[test]
fn each_side_keeps_its_own_ttl() {
    use crate::ttl::test_clock;
    let mut j = join(false, false);
    j.retention = Retention::StateTtl([Some(1000), None]);
    j.clock = test_clock::now;
    test_clock::set(0);
    assert!(run(&mut j, 0, bids(&[(Some(1), 5)], &[Insert])).is_empty());
    assert!(run(&mut j, 1, auctions(&[(2, "b")], &[Insert])).is_empty());
    test_clock::set(50_000);
    // The bid expired; the auction, on a side without a TTL, did not.
    assert!(run(&mut j, 1, auctions(&[(1, "a")], &[Insert])).is_empty());
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(2), 6)], &[Insert])),
        ["+I 2 6 2 b"]
    );
    let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut restored = join(false, false);
    restored.retention = Retention::StateTtl([Some(1000), None]);
    restored.clock = test_clock::now;
    restored
        .restore(&[&snapshot.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(restored.state_rows(), (1, 2));
}

#[test]
fn rows_meet_whichever_side_comes_first() {
    let mut j = join(false, false);
    assert!(run(&mut j, 0, bids(&[(Some(1), 5), (Some(2), 7)], &[Insert; 2])).is_empty());
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a"), (3, "c")], &[Insert; 2])),
        ["+I 1 5 1 a"]
    );
    assert_eq!(
        run(
            &mut j,
            0,
            bids(&[(Some(1), 6), (Some(3), 8), (Some(4), 9)], &[Insert; 3])
        ),
        ["+I 1 6 1 a", "+I 3 8 3 c"]
    );
    assert_eq!(j.state_rows(), (5, 2));
}

#[test]
fn retractions_take_back_what_their_rows_joined() {
    let mut j = join(false, false);
    run(
        &mut j,
        0,
        bids(&[(Some(1), 5), (Some(1), 5), (Some(1), 6)], &[Insert; 3]),
    );
    assert_eq!(
        run(&mut j, 1, auctions(&[(1, "a")], &[Insert])),
        ["+I 1 5 1 a", "+I 1 5 1 a", "+I 1 6 1 a"]
    );
    // The auction is renamed: every joined row is updated.
    assert_eq!(
        run(
            &mut j,
            1,
            auctions(&[(1, "a"), (1, "b")], &[UpdateBefore, UpdateAfter])
        ),
        [
            "-U 1 5 1 a",
            "-U 1 5 1 a",
            "-U 1 6 1 a",
            "+U 1 5 1 b",
            "+U 1 5 1 b",
            "+U 1 6 1 b"
        ]
    );
    // One of the two equal bids is deleted: one copy goes.
    assert_eq!(
        run(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])),
        ["-D 1 5 1 b"]
    );
    assert_eq!(j.state_rows(), (2, 1));
    // A retraction of a row never held emits nothing and keeps nothing.
    assert!(run(&mut j, 1, auctions(&[(7, "x")], &[Delete])).is_empty());
    assert_eq!(j.state_rows(), (2, 1));
}

#[test]
fn the_rest_of_the_condition_filters_pairs() {
    let mut j = join(true, false);
    run(&mut j, 1, auctions(&[(1, "a")], &[Insert]));
    assert_eq!(
        run(
            &mut j,
            0,
            bids(&[(Some(1), 5), (Some(1), 50)], &[Insert; 2])
        ),
        ["+I 1 50 1 a"]
    );
}

#[test]
fn null_keys_match_only_when_nulls_are_equal() {
    let mut j = join(false, false);
    run(&mut j, 0, bids(&[(None, 5)], &[Insert]));
    assert_eq!(
        j.state_rows(),
        (0, 0),
        "a NULL key can never match: not kept"
    );
    let mut j = join(false, true);
    run(&mut j, 0, bids(&[(None, 5)], &[Insert]));
    assert_eq!(j.state_rows(), (1, 0));
}

#[test]
fn snapshots_restore_only_the_owned_key_groups() {
    let mut j = join(false, false);
    let many: Vec<(Option<i64>, i64)> = (0..200).map(|i| (Some(i), i * 10)).collect();
    run(&mut j, 0, bids(&many, &vec![Insert; many.len()]));
    run(&mut j, 1, auctions(&[(3, "c"), (150, "x")], &[Insert; 2]));
    let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;

    let mut whole = join(false, false);
    let scope = |subtask| KeyScope {
        subtask,
        parallelism: 2,
        max_parallelism: 128,
    };
    let everything = KeyScope::everything();
    whole.restore(&[&snapshot], &everything).unwrap();
    assert_eq!(whole.state_rows(), (200, 2));
    assert_eq!(
        run(&mut whole, 0, bids(&[(Some(3), 1)], &[Insert])),
        ["+I 3 1 3 c"]
    );

    let (mut a, mut b) = (join(false, false), join(false, false));
    a.restore(&[&snapshot], &scope(0)).unwrap();
    b.restore(&[&snapshot], &scope(1)).unwrap();
    let (a_rows, b_rows) = (a.state_rows(), b.state_rows());
    assert_eq!(a_rows.0 + b_rows.0, 200);
    assert_eq!(a_rows.1 + b_rows.1, 2);
    assert!(
        a_rows.0 > 50 && b_rows.0 > 50,
        "split: {a_rows:?} {b_rows:?}"
    );

    let mut truncated = join(false, false);
    let error = truncated
        .restore(&[&snapshot[..snapshot.len() - 2]], &everything)
        .unwrap_err()
        .to_string();
    assert!(error.contains("corrupt snapshot of a join"), "{error}");
}

/// A side's keys, each with its rows (all row-encoded), sorted.
type Held = Vec<(Vec<u8>, Vec<Vec<u8>>)>;

/// Each side's rows by key: the state, whatever the slots.
fn held(j: &StreamingJoin) -> Vec<Held> {
    j.sides
        .iter()
        .map(|side| {
            let mut keys: Vec<_> = side
                .keys(None)
                .map(|(_, key)| {
                    (
                        key.to_vec(),
                        side.matches(key).map(<[u8]>::to_vec).collect(),
                    )
                })
                .collect();
            keys.sort();
            keys
        })
        .collect()
}

#[test]
fn snapshots_of_changes_restore_on_top_of_the_full_one() {
    let everything = KeyScope::everything();
    let request = |checkpoint, completed, changes| SnapshotRequest {
        checkpoint,
        completed,
        changes,
    };
    let mut j = join(false, false);
    let first: Vec<(Option<i64>, i64)> = (0..100).map(|i| (Some(i % 20), i)).collect();
    run(&mut j, 0, bids(&first, &vec![Insert; first.len()]));
    run(&mut j, 1, auctions(&[(3, "c"), (4, "d")], &[Insert; 2]));
    let full = j.snapshot(&request(1, None, true)).unwrap();
    assert_eq!(full.kind, StateKind::Full, "nothing completed to extend");

    // After checkpoint 1: a bid held since before it and one added after it are
    // deleted, an equal copy of an old bid is added, an auction is replaced.
    run(
        &mut j,
        0,
        bids(&[(Some(7), 1000), (Some(3), 23)], &[Insert; 2]),
    );
    run(
        &mut j,
        0,
        bids(&[(Some(5), 5), (Some(7), 1000)], &[Delete; 2]),
    );
    run(
        &mut j,
        1,
        auctions(&[(3, "c"), (3, "c2")], &[Delete, Insert]),
    );
    let second = j.snapshot(&request(2, Some(1), true)).unwrap();
    assert_eq!(second.kind, StateKind::Changes);
    assert!(
        second.bytes.len() * 5 < full.bytes.len(),
        "{} bytes of changes, {} in all",
        second.bytes.len(),
        full.bytes.len()
    );
    let at_2 = held(&j);

    // Checkpoint 2 never completes: 3 extends 1 again, with everything since.
    run(
        &mut j,
        0,
        bids(&[(Some(3), 23), (Some(19), 77)], &[Delete, Insert]),
    );
    let third = j.snapshot(&request(3, Some(1), true)).unwrap();
    assert_eq!(third.kind, StateKind::Changes);
    let at_3 = held(&j);

    for (chain, expected) in [(vec![&full, &second], &at_2), (vec![&full, &third], &at_3)] {
        let mut restored = join(false, false);
        let pieces: Vec<&[u8]> = chain.iter().map(|s| s.bytes.as_ref()).collect();
        restored.restore(&pieces, &everything).unwrap();
        assert_eq!(&held(&restored), expected);
    }
    assert_ne!(at_2, at_3);
}

#[test]
fn a_restored_state_is_extended_by_the_changes_since_the_restore() {
    let everything = KeyScope::everything();
    let mut before = join(false, false);
    let first: Vec<(Option<i64>, i64)> = (0..100).map(|i| (Some(i % 20), i)).collect();
    run(&mut before, 0, bids(&first, &vec![Insert; first.len()]));
    run(&mut before, 1, auctions(&[(3, "c")], &[Insert]));
    let full = before.snapshot(&SnapshotRequest::full(5)).unwrap();

    let mut j = join(false, false);
    j.restore(&[full.bytes.as_ref()], &everything).unwrap();
    j.restored_from(5);
    // A restored bid and the auction go, a new bid comes.
    run(
        &mut j,
        0,
        bids(&[(Some(5), 5), (Some(8), 800)], &[Delete, Insert]),
    );
    run(&mut j, 1, auctions(&[(3, "c")], &[Delete]));
    let request = SnapshotRequest {
        checkpoint: 7,
        completed: Some(5),
        changes: true,
    };
    let changes = j.snapshot(&request).unwrap();
    assert_eq!(changes.kind, StateKind::Changes);
    assert!(
        changes.bytes.len() * 5 < full.bytes.len(),
        "only what changed"
    );

    let mut restored = join(false, false);
    let chain = [full.bytes.as_ref(), changes.bytes.as_ref()];
    restored.restore(&chain, &everything).unwrap();
    assert_eq!(held(&restored), held(&j));
    assert_ne!(held(&restored), held(&before));
}

/// A fresh directory for an LSM store's test.
fn scratch(name: &str) -> std::path::PathBuf {
    crate::lsm_testing::scratch("join", name)
}

/// The LSM backend with the least memory it takes (16 kB of hot rows).
fn on_disk(join: StreamingJoin, dir: &std::path::Path) -> StreamingJoin {
    join.with_state(&crate::lsm_testing::lsm_context(dir))
        .unwrap()
}

/// Bids and auctions over `keys` keys, inserted and some retracted, from a seed: (input,
/// chunk) in order.
fn churn(seed: u64, keys: i64, rounds: usize) -> Vec<(usize, Chunk)> {
    let mut next = crate::lsm_testing::xorshift(seed);
    let (mut held_bids, mut held_auctions) = (Vec::new(), Vec::new());
    let mut chunks = Vec::new();
    for round in 0..rounds {
        let new_bids: Vec<(Option<i64>, i64)> = (0..300)
            .map(|_| (Some((next() % keys as u64) as i64), (next() % 100) as i64))
            .collect();
        held_bids.extend(new_bids.iter().copied());
        chunks.push((0, bids(&new_bids, &vec![Insert; new_bids.len()])));
        let new_auctions: Vec<i64> = (0..60).map(|_| (next() % keys as u64) as i64).collect();
        held_auctions.extend(new_auctions.iter().copied());
        let named: Vec<(i64, &str)> = new_auctions.iter().map(|id| (*id, "a")).collect();
        chunks.push((1, auctions(&named, &vec![Insert; named.len()])));
        if round % 3 == 2 {
            let gone: Vec<(Option<i64>, i64)> = (0..80)
                .map(|_| held_bids.swap_remove((next() % held_bids.len() as u64) as usize))
                .collect();
            chunks.push((0, bids(&gone, &vec![Delete; gone.len()])));
            let gone: Vec<(i64, &str)> = (0..15)
                .map(|_| {
                    let i = (next() % held_auctions.len() as u64) as usize;
                    (held_auctions.swap_remove(i), "a")
                })
                .collect();
            chunks.push((1, auctions(&gone, &vec![Delete; gone.len()])));
        }
    }
    chunks
}

/// Runs `chunks` through both joins, dropping what they emit.
fn feed_both(joins: [&mut StreamingJoin; 2], chunks: &[(usize, Chunk)]) {
    for join in joins {
        for (input, chunk) in chunks {
            run(join, *input, chunk.clone());
        }
    }
}

#[test]
fn joins_with_keys_on_disk_emit_what_joins_in_memory_emit() {
    let kinds = [
        JoinKind::Inner,
        JoinKind::Left,
        JoinKind::Full,
        JoinKind::LeftSemi,
        JoinKind::LeftAnti,
    ];
    for kind in kinds {
        let dir = scratch(&format!("{kind:?}"));
        let with_kind = |mut j: StreamingJoin| {
            j.kind = kind;
            if let Some(filtering) = kind.filtering() {
                j = filtering_join(filtering);
            }
            j
        };
        let mut in_memory = with_kind(join(false, false));
        let mut lsm = on_disk(with_kind(join(false, false)), &dir);
        for (input, chunk) in churn(5, 4_000, 60) {
            let expected = run(&mut in_memory, input, chunk.clone());
            assert_eq!(run(&mut lsm, input, chunk), expected, "{kind:?}");
        }
        let held_rows = lsm.state_rows().0 + lsm.state_rows().1;
        let all_rows = in_memory.state_rows().0 + in_memory.state_rows().1;
        assert!(
            held_rows < all_rows / 2,
            "{kind:?}: {held_rows} of {all_rows} rows in memory"
        );
    }
}

#[test]
fn a_join_restores_its_runs_and_splits_them_by_key_group() {
    let dir = scratch("restore");
    let mut in_memory = outer_join([true, true]);
    let mut lsm = on_disk(outer_join([true, true]), &dir);
    let chunks = churn(9, 3_000, 60);
    let (first, rest) = chunks.split_at(chunks.len() / 2);
    feed_both([&mut in_memory, &mut lsm], first);
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(!state.files.is_empty(), "the keys went to runs");
    let again = scratch("restore-again");
    hand_over(&state, &again);
    let mut restored = on_disk(outer_join([true, true]), &again);
    restored
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    for (input, chunk) in rest {
        let expected = run(&mut in_memory, *input, chunk.clone());
        assert_eq!(run(&mut restored, *input, chunk.clone()), expected);
    }

    // Three subtasks in memory (the hashmap backend) split the runs by key group: each
    // holds only its keys, and together every row.
    let state = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
    let expected = held(&in_memory);
    let mut together: Vec<Held> = vec![Vec::new(), Vec::new()];
    for subtask in 0..3 {
        let sub = scratch(&format!("split-{subtask}"));
        hand_over(&state, &sub);
        let context = crate::lsm_testing::memory_context(&sub);
        let mut part = outer_join([true, true]).with_state(&context).unwrap();
        let scope = KeyScope {
            subtask,
            parallelism: 3,
            max_parallelism: 128,
        };
        part.restore(&[&state.bytes], &scope).unwrap();
        for (side, keys) in held(&part).into_iter().enumerate() {
            assert!(!keys.is_empty() && keys.len() < expected[side].len());
            together[side].extend(keys);
        }
    }
    for side in &mut together {
        side.sort();
    }
    assert_eq!(together, expected);
}

/// A join snapshotted in memory (the hashmap backend) and restored onto the LSM backend
/// holds every row in memory at first, in slots the store never saw: the rows must reach
/// the store when eviction makes room, not be dropped. Checked by what the join emits and
/// by what its next snapshot restores.
#[test]
fn rows_restored_from_memory_reach_the_store_when_evicted() {
    let mut in_memory = outer_join([true, true]);
    let mut source = outer_join([true, true]);
    let chunks = churn(13, 3_000, 80);
    let (first, rest) = chunks.split_at(chunks.len() / 2);
    feed_both([&mut in_memory, &mut source], first);
    let state = source.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(state.files.is_empty(), "the hashmap backend writes no runs");
    let dir = scratch("from-memory");
    let mut lsm = on_disk(outer_join([true, true]), &dir);
    lsm.restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    for (input, chunk) in rest {
        let expected = run(&mut in_memory, *input, chunk.clone());
        assert_eq!(run(&mut lsm, *input, chunk.clone()), expected);
    }
    let held_rows = lsm.state_rows().0 + lsm.state_rows().1;
    let all_rows = in_memory.state_rows().0 + in_memory.state_rows().1;
    assert!(
        held_rows < all_rows / 2,
        "{held_rows} of {all_rows} rows in memory: nothing was evicted"
    );

    let state = lsm.snapshot(&SnapshotRequest::full(2)).unwrap();
    let context = crate::state_context::StateContext {
        restored: scratch("from-memory-again").join("restored"),
        ..crate::state_context::StateContext::in_memory()
    };
    hand_over(&state, context.restored.parent().unwrap());
    let mut again = outer_join([true, true]).with_state(&context).unwrap();
    again
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(held(&again), held(&in_memory));
}

/// Runs of small chunks of bids and auctions over a few keys, with equal rows, inserted and
/// retracted again, so that keys and rows come and go between snapshots; from a seed.
fn flicker(seed: u64, steps: usize) -> Vec<Vec<(usize, Chunk)>> {
    let mut next = crate::lsm_testing::xorshift(seed);
    let (mut held_bids, mut held_auctions) = (Vec::new(), Vec::new());
    (0..steps)
        .map(|_| {
            (0..4)
                .map(|_| {
                    let input = (next() % 2) as usize;
                    let insert = next().is_multiple_of(2);
                    let n = 1 + next() % 3;
                    match (input, insert) {
                        (0, true) => {
                            let new: Vec<(Option<i64>, i64)> = (0..n)
                                .map(|_| (Some((next() % 6) as i64), (next() % 3) as i64))
                                .collect();
                            held_bids.extend(new.iter().copied());
                            (0, bids(&new, &vec![Insert; new.len()]))
                        }
                        (0, false) => {
                            let n = n.min(held_bids.len() as u64);
                            let gone: Vec<(Option<i64>, i64)> = (0..n)
                                .map(|_| {
                                    let i = (next() % held_bids.len() as u64) as usize;
                                    held_bids.swap_remove(i)
                                })
                                .collect();
                            (0, bids(&gone, &vec![Delete; gone.len()]))
                        }
                        (_, true) => {
                            let new: Vec<i64> = (0..n).map(|_| (next() % 6) as i64).collect();
                            held_auctions.extend(new.iter().copied());
                            let named: Vec<(i64, &str)> = new.iter().map(|id| (*id, "a")).collect();
                            (1, auctions(&named, &vec![Insert; named.len()]))
                        }
                        (_, false) => {
                            let n = n.min(held_auctions.len() as u64);
                            let gone: Vec<(i64, &str)> = (0..n)
                                .map(|_| {
                                    let i = (next() % held_auctions.len() as u64) as usize;
                                    (held_auctions.swap_remove(i), "a")
                                })
                                .collect();
                            (1, auctions(&gone, &vec![Delete; gone.len()]))
                        }
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn chains_of_snapshots_restore_and_go_on_as_a_join_never_restored() {
    for seed in 1..=25 {
        let make = || join(false, false);
        crate::lsm_testing::restores_go_on_as_never_restored(seed, flicker(seed, 60), make, held);
    }
}
