use std::sync::Arc;

use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{Field, Schema, TimeUnit};
use datafusion_physical_expr::expressions::Column;

use super::*;
use eddy_common::state::StateWriter;

/// Input rows: (k, v, name, window_end).
fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new(
            "window_end",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
    ]))
}

/// Top-`end` per `k` by `v` descending.
pub(super) fn spec(end: u64, output: RankOutput, append_only_input: bool) -> RankSpec {
    let input = input_schema();
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("rn", DataType::Int64, false));
    RankSpec {
        partition_keys: vec![Arc::new(Column::new("k", 0))],
        partition_types: vec![DataType::Int64],
        order: vec![SortKey {
            expr: Arc::new(Column::new("v", 1)),
            data_type: DataType::Int64,
            options: SortOptions {
                descending: true,
                nulls_first: false,
            },
        }],
        start: 1,
        end,
        ties: Ties::FirstArrivedFirst,
        output,
        append_only_input,
        state_ttl: None,
        window_end: None,
        input_schema: input,
        schema: Arc::new(Schema::new(fields)),
    }
}

/// Top-2 per `k` and window (by `v`, over inserts): window Top-N partitions by the window
/// too.
pub(super) fn windowed_spec() -> RankSpec {
    let mut spec = spec(2, RankOutput::Number, true);
    spec.window_end = Some(3);
    spec.partition_keys
        .push(Arc::new(Column::new("window_end", 3)));
    spec.partition_types
        .push(DataType::Timestamp(TimeUnit::Millisecond, None));
    spec
}

pub(super) fn top_n(spec: RankSpec) -> TopN {
    TopN::new(spec, Arc::new(OperatorMetrics::default()), 128).unwrap()
}

/// A chunk of `(op, k, v, name)` rows in window `end`.
pub(super) fn chunk(rows: &[(Op, i64, i64, &str)], end: i64) -> Chunk {
    let batch = RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                rows.iter().map(|_| end),
            )),
        ],
    )
    .unwrap();
    Chunk::from_ops(batch, rows.iter().map(|r| r.0).collect())
}

/// Each emitted row as `op name rn`.
pub(super) fn changes(out: Vec<Chunk>) -> Vec<String> {
    out.iter()
        .flat_map(|chunk| chunk.to_pretty_columns(&[2, 4]))
        .collect()
}

fn run(op: &mut TopN, rows: &[(Op, i64, i64, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    op.process(chunk(rows, 0), &mut out).unwrap();
    changes(out)
}

use Op::{Delete as D, Insert as I, UpdateAfter as UA, UpdateBefore as UB};

#[test]
fn a_row_entering_the_top_updates_the_ranks_below_it() {
    let mut op = top_n(spec(2, RankOutput::Number, true));
    assert_eq!(run(&mut op, &[(I, 1, 10, "a")]), ["+I a 1"]);
    assert_eq!(run(&mut op, &[(I, 1, 5, "b")]), ["+I b 2"]);
    assert_eq!(run(&mut op, &[(I, 1, 1, "c")]), Vec::<String>::new());
    // d tops a and b: rank 1 becomes d, rank 2 becomes a, b leaves.
    assert_eq!(
        run(&mut op, &[(I, 1, 20, "d")]),
        ["-U a 1", "-U b 2", "+U d 1", "+U a 2"]
    );
    // Another partition is ranked on its own; a tie keeps the earlier row first.
    assert_eq!(
        run(&mut op, &[(I, 2, 7, "e"), (I, 2, 7, "f"), (I, 2, 7, "g")]),
        ["+I e 1", "+I f 2"]
    );
    assert_eq!(op.partitions.iter().map(Partition::len).sum::<usize>(), 4);
}

#[test]
fn without_the_rank_only_rows_entering_and_leaving_are_emitted() {
    let mut op = top_n(spec(2, RankOutput::Dropped, true));
    run(&mut op, &[(I, 1, 10, "a"), (I, 1, 5, "b")]);
    assert_eq!(run(&mut op, &[(I, 1, 20, "d")]), ["-D b 0", "+I d 0"]);
    assert_eq!(
        run(&mut op, &[(I, 1, 15, "e"), (I, 1, 1, "f")]),
        ["-D a 0", "+I e 0"]
    );
}

#[test]
fn a_retracted_top_row_is_replaced_and_comes_back_when_re_added() {
    let mut op = top_n(spec(2, RankOutput::Number, false));
    run(&mut op, &[(I, 1, 10, "a"), (I, 1, 5, "b"), (I, 1, 1, "c")]);
    // An update moves a out of the top (its value drops), so c moves in.
    assert_eq!(
        run(&mut op, &[(UB, 1, 10, "a"), (UA, 1, 0, "a")]),
        ["-U a 1", "-U b 2", "+U b 1", "+U c 2"]
    );
    // ... and back in.
    assert_eq!(
        run(&mut op, &[(UB, 1, 0, "a"), (UA, 1, 12, "a")]),
        ["-U b 1", "-U c 2", "+U a 1", "+U b 2"]
    );
    // Retracting rows the Top-N never held takes nothing back.
    assert!(run(&mut op, &[(D, 1, 99, "zz"), (D, 9, 1, "q")]).is_empty());
    // Emptying a partition deletes its rows and frees it.
    assert_eq!(
        run(&mut op, &[(D, 1, 12, "a"), (D, 1, 5, "b"), (D, 1, 1, "c")]),
        ["-D a 1", "-D b 2"]
    );
    assert_eq!(op.keys.in_use(), 0);
}

#[test]
fn deduplication_keeps_the_first_or_the_last_row_of_a_tie() {
    // Ordered by time ascending (v here): the first row wins a tie.
    let mut first = spec(1, RankOutput::Dropped, true);
    first.order[0].options.descending = false;
    let mut first = top_n(first);
    assert_eq!(
        run(&mut first, &[(I, 1, 5, "a"), (I, 1, 5, "b")]),
        ["+I a 0"]
    );
    assert_eq!(run(&mut first, &[(I, 1, 4, "c")]), ["-D a 0", "+I c 0"]);
    // Ordered by time descending, keep-last: a later row of the same time replaces it.
    let mut last = spec(1, RankOutput::Dropped, true);
    last.ties = Ties::LastArrivedFirst;
    let mut last = top_n(last);
    assert_eq!(run(&mut last, &[(I, 1, 5, "a")]), ["+I a 0"]);
    assert_eq!(run(&mut last, &[(I, 1, 5, "b")]), ["-D a 0", "+I b 0"]);
    assert!(run(&mut last, &[(I, 1, 4, "c")]).is_empty(), "an older row");
}

#[test]
fn window_top_n_emits_once_at_the_window_end_and_drops_the_window() {
    let mut op = top_n(windowed_spec());
    let mut out = Vec::new();
    op.process(
        chunk(&[(I, 1, 1, "a"), (I, 1, 3, "b"), (I, 1, 2, "c")], 1000),
        &mut out,
    )
    .unwrap();
    op.process(chunk(&[(I, 1, 9, "later")], 2000), &mut out)
        .unwrap();
    assert!(out.is_empty(), "nothing before the window closes");
    op.on_watermark(998, &mut out).unwrap();
    assert!(out.is_empty());
    op.on_watermark(999, &mut out).unwrap();
    assert_eq!(changes(std::mem::take(&mut out)), ["+I b 1", "+I c 2"]);
    assert_eq!(op.keys.in_use(), 1, "the first window's state is dropped");
    // A row of the emitted window is late.
    op.process(chunk(&[(I, 1, 100, "late")], 1000), &mut out)
        .unwrap();
    op.on_watermark(5000, &mut out).unwrap();
    assert_eq!(changes(out), ["+I later 1"]);
    assert_eq!(
        op.metrics
            .late_records_dropped
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(op.keys.in_use(), 0);
}

/// Whether `op` holds the partition of `k`.
pub(super) fn holds(op: &TopN, k: i64) -> bool {
    let batch = RecordBatch::try_new(
        input_schema(),
        vec![
            Arc::new(Int64Array::from(vec![k])),
            Arc::new(Int64Array::from(vec![0])),
            Arc::new(StringArray::from(vec![""])),
            Arc::new(TimestampMillisecondArray::from(vec![0])),
        ],
    )
    .unwrap();
    let keys = op.keys.encode(&batch).unwrap().unwrap();
    op.keys.find(keys.row(0).data()).is_some()
}

#[test]
fn state_is_split_by_key_group_on_restore() {
    let mut op = top_n(spec(2, RankOutput::Number, true));
    let rows: Vec<(Op, i64, i64, String)> =
        (0..40).map(|i| (I, i % 8, i, format!("r{i}"))).collect();
    let borrowed: Vec<(Op, i64, i64, &str)> = rows
        .iter()
        .map(|(o, k, v, n)| (*o, *k, *v, n.as_str()))
        .collect();
    run(&mut op, &borrowed);
    let snapshot = op.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut restored: Vec<TopN> = (0..2)
        .map(|subtask| {
            let mut half = top_n(spec(2, RankOutput::Number, true));
            let scope = KeyScope {
                subtask,
                parallelism: 2,
                max_parallelism: 128,
            };
            half.restore(&[&snapshot.bytes], &scope).unwrap();
            half
        })
        .collect();
    let held: Vec<usize> = restored.iter().map(|t| t.keys.in_use()).collect();
    assert_eq!(
        held.iter().sum::<usize>(),
        8,
        "each partition in one subtask: {held:?}"
    );
    assert!(held.iter().all(|h| *h > 0), "{held:?}");
    // The restored top rows still rank: a new top row for k=0 pushes out the second.
    let owner = restored.iter_mut().find(|t| holds(t, 0)).unwrap();
    assert_eq!(
        run(owner, &[(I, 0, 100, "top")]),
        ["-U r32 1", "-U r24 2", "+U top 1", "+U r32 2"]
    );
}

#[test]
fn a_snapshot_of_another_version_is_refused() {
    let mut out = StateWriter::new();
    out.u64(9);
    let mut op = top_n(spec(2, RankOutput::Number, true));
    let error = op
        .restore(&[&out.finish()], &KeyScope::everything())
        .unwrap_err()
        .to_string();
    assert!(error.contains("format version 9"), "{error}");
}

#[test]
fn a_partition_idle_for_the_ttl_starts_afresh_also_after_a_restore() {
    use crate::ttl::test_clock;
    let ttl_top_n = || {
        let mut op = top_n(RankSpec {
            state_ttl: Some(1000),
            ..spec(1, RankOutput::Number, true)
        });
        op.ttl = op.ttl.take().map(|t| t.with_clock(test_clock::now));
        op
    };
    let mut op = ttl_top_n();
    test_clock::set(0);
    assert_eq!(
        run(&mut op, &[(I, 1, 10, "a"), (I, 2, 10, "x")]),
        ["+I a 1", "+I x 1"]
    );
    test_clock::set(700);
    assert_eq!(run(&mut op, &[(I, 2, 20, "y")]), ["-U x 1", "+U y 1"]);
    // Partition 1, last written at 0, is gone at 1000: a lower row is its new top.
    test_clock::set(1000);
    assert_eq!(run(&mut op, &[(I, 1, 5, "b")]), ["+I b 1"]);
    let snapshot = op.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
    let mut restored = ttl_top_n();
    restored
        .restore(&[&snapshot], &KeyScope::everything())
        .unwrap();
    // Partition 2 was written at 700: at 1699 it still holds y, at 1700 it is gone.
    test_clock::set(1699);
    assert!(run(&mut restored, &[(I, 2, 15, "z")]).is_empty());
    test_clock::set(1700);
    assert_eq!(run(&mut restored, &[(I, 2, 1, "w")]), ["+I w 1"]);
    assert_eq!(
        restored
            .partitions
            .iter()
            .map(Partition::len)
            .sum::<usize>(),
        2
    );
}
