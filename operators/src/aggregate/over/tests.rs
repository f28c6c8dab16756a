use std::sync::atomic::Ordering;

use arrow::array::{AsArray, Int64Array};
use arrow::datatypes::{Field, Int64Type, Schema, TimeUnit};
use datafusion_physical_expr::expressions::Column;

use super::*;
use crate::aggregate::AggregateKind;
use crate::partition::key_groups;

/// `SUM(v)` per `k` over rows (k, ts, v) in `frame`.
fn summing(frame: OverFrame) -> OverAggregate {
    let input = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("v", DataType::Int64, true),
    ]));
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("s", DataType::Int64, true));
    let spec = OverSpec {
        partition_keys: vec![Arc::new(Column::new("k", 0))],
        partition_types: vec![DataType::Int64],
        time_column: 1,
        frame,
        calls: vec![AggregateCall {
            kind: AggregateKind::Sum,
            arg: Arc::new(Column::new("v", 2)),
            filter: None,
            input_type: DataType::Int64,
            output_type: DataType::Int64,
            append_only: false,
        }],
        input_schema: input,
        schema: Arc::new(Schema::new(fields)),
    };
    OverAggregate::new(spec, Arc::new(OperatorMetrics::default()), 128).unwrap()
}

fn rows(op: &mut OverAggregate, rows: &[(i64, i64, i64)]) {
    let batch = RecordBatch::try_new(
        op.spec.input_schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                rows.iter().map(|r| r.1),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap();
    op.process(Chunk::inserts(batch), &mut Vec::new()).unwrap();
}

/// (k, ts, v, sum) of each row emitted when the watermark reaches `watermark`.
fn fire(op: &mut OverAggregate, watermark: Timestamp) -> Vec<(i64, i64, i64, i64)> {
    let mut out = Vec::new();
    op.on_watermark(watermark, &mut out).unwrap();
    let mut emitted = Vec::new();
    for chunk in out {
        let r = chunk.rows();
        let int = |c: usize, i: usize| r.column(c).as_primitive::<Int64Type>().value(i);
        let ts = r
            .column(1)
            .as_primitive::<arrow::datatypes::TimestampMillisecondType>();
        for i in 0..r.num_rows() {
            emitted.push((int(0, i), ts.value(i), int(2, i), int(3, i)));
        }
    }
    emitted.sort();
    emitted
}

#[test]
fn rows_frames_take_the_preceding_rows_in_time_order_at_the_watermark() {
    let mut op = summing(OverFrame::Rows(Some(1)));
    rows(&mut op, &[(1, 30, 3), (1, 10, 1), (1, 20, 2), (2, 10, 100)]);
    assert!(fire(&mut op, 5).is_empty(), "nothing before its time");
    assert_eq!(
        fire(&mut op, 20),
        [(1, 10, 1, 1), (1, 20, 2, 3), (2, 10, 100, 100)]
    );
    rows(&mut op, &[(1, 15, 50)]);
    assert_eq!(op.metrics.late_records_dropped.load(Ordering::Relaxed), 1);
    assert_eq!(
        fire(&mut op, 100),
        [(1, 30, 3, 5)],
        "the frame carried over"
    );
}

#[test]
fn range_frames_share_their_aggregates_among_rows_of_one_time() {
    let mut op = summing(OverFrame::Range(Some(10)));
    rows(
        &mut op,
        &[(1, 0, 1), (1, 10, 2), (1, 10, 4), (1, 11, 8), (1, 21, 16)],
    );
    assert_eq!(
        fire(&mut op, 100),
        [
            (1, 0, 1, 1),
            // 10 - 10 = 0: the row at 0 is still in the frame; both rows of 10 count.
            (1, 10, 2, 7),
            (1, 10, 4, 7),
            (1, 11, 8, 14),
            // 21 - 10 = 11: only the rows at 11 and 21.
            (1, 21, 16, 24),
        ]
    );
}

#[test]
fn a_restored_state_continues_split_by_key_group() {
    let (mut whole, mut before) = (
        summing(OverFrame::Rows(None)),
        summing(OverFrame::Rows(None)),
    );
    let first: Vec<(i64, i64, i64)> = (0..40).map(|i| (i % 8, i, i)).collect();
    let second: Vec<(i64, i64, i64)> = (40..80).map(|i| (i % 8, i, i)).collect();
    rows(&mut whole, &first);
    rows(&mut before, &first);
    let mut expected = fire(&mut whole, 19);
    assert_eq!(fire(&mut before, 19), expected);
    rows(&mut whole, &second);
    expected = fire(&mut whole, 1000);
    let snapshot = before.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut got = Vec::new();
    for subtask in 0..2 {
        let mut half = summing(OverFrame::Rows(None));
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        half.restore(&[&snapshot.bytes], &scope).unwrap();
        let mine: Vec<_> = second
            .iter()
            .copied()
            .filter(|(k, _, _)| {
                let keys: ArrayRef = Arc::new(Int64Array::from(vec![*k]));
                scope.owns(key_groups(&[keys], 128).unwrap()[0])
            })
            .collect();
        rows(&mut half, &mine);
        got.extend(fire(&mut half, 1000));
    }
    got.sort();
    assert_eq!(
        got, expected,
        "pending rows and running sums survive the rescale"
    );
}

mod lsm {
    use super::*;
    use crate::lsm_testing::{hand_over, lsm_context, scratch, xorshift};

    const FRAMES: [OverFrame; 4] = [
        OverFrame::Rows(Some(2)),
        OverFrame::Rows(None),
        OverFrame::Range(Some(15)),
        OverFrame::Range(None),
    ];

    /// Per step, rows over `keys` keys at times in [10 step, 10 step + 10), from a seed;
    /// each with the watermark after it (the step before's rows are due).
    /// Rows (k, ts, v) and the watermark after them.
    type Step = (Vec<(i64, i64, i64)>, Timestamp);

    fn steps(seed: u64, keys: u64, count: i64) -> Vec<Step> {
        let mut next = xorshift(seed);
        (0..count)
            .map(|step| {
                let rows = (0..300)
                    .map(|_| {
                        let k = (next() % keys) as i64;
                        (k, step * 10 + (next() % 10) as i64, (next() % 100) as i64)
                    })
                    .collect();
                (rows, step * 10 - 1)
            })
            .collect()
    }

    fn step(
        op: &mut OverAggregate,
        input: &[(i64, i64, i64)],
        watermark: Timestamp,
    ) -> Vec<(i64, i64, i64, i64)> {
        rows(op, input);
        fire(op, watermark)
    }

    fn lsm_summing(frame: OverFrame, dir: &std::path::Path) -> OverAggregate {
        summing(frame).with_state(&lsm_context(dir)).unwrap()
    }

    #[test]
    fn partitions_beyond_memory_emit_what_partitions_in_memory_emit() {
        for frame in FRAMES {
            let dir = scratch("over", &format!("equal-{frame}").replace(' ', "-"));
            let mut in_memory = summing(frame);
            let mut lsm = lsm_summing(frame, &dir);
            let mut emitted = 0;
            for (input, watermark) in steps(13, 3_000, 50) {
                let expected = step(&mut in_memory, &input, watermark);
                emitted += expected.len();
                assert_eq!(step(&mut lsm, &input, watermark), expected, "{frame}");
            }
            assert!(emitted > 10_000);
            let cold = lsm.cold.as_ref().unwrap();
            assert!(
                !cold.store.runs().is_empty(),
                "{frame}: partitions went to disk"
            );
            assert!(
                lsm.keys.in_use() < 1_000,
                "{frame}: {} in memory",
                lsm.keys.in_use()
            );
            let expected = fire(&mut in_memory, Timestamp::MAX);
            assert_eq!(fire(&mut lsm, Timestamp::MAX), expected, "{frame}");
        }
    }

    #[test]
    fn stored_partitions_restore_at_another_parallelism_and_into_memory() {
        let frame = OverFrame::Rows(Some(2));
        let dir = scratch("over", "restore");
        let mut lsm = lsm_summing(frame, &dir);
        let mut in_memory = summing(frame);
        let input = steps(19, 2_000, 30);
        let (first, rest) = input.split_at(20);
        for (rows, watermark) in first {
            step(&mut lsm, rows, *watermark);
            step(&mut in_memory, rows, *watermark);
        }
        let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
        assert!(!state.files.is_empty());
        let restore = |name: &str, scope: KeyScope, lsm: bool| {
            let dir = scratch("over", name);
            hand_over(&state, &dir);
            let mut op = match lsm {
                true => lsm_summing(frame, &dir),
                false => summing(frame)
                    .with_state(&crate::lsm_testing::memory_context(&dir))
                    .unwrap(),
            };
            op.restore(&[&state.bytes], &scope).unwrap();
            op
        };
        let mut again = restore("restore-again", KeyScope::everything(), true);
        let mut back = restore("restore-memory", KeyScope::everything(), false);
        let mut parts: Vec<(KeyScope, OverAggregate)> = (0..3)
            .map(|subtask| {
                let scope = KeyScope {
                    subtask,
                    parallelism: 3,
                    max_parallelism: 128,
                };
                (scope, restore(&format!("restore-{subtask}"), scope, true))
            })
            .collect();
        for (rows, watermark) in rest {
            let expected = step(&mut in_memory, rows, *watermark);
            assert_eq!(step(&mut again, rows, *watermark), expected);
            assert_eq!(step(&mut back, rows, *watermark), expected);
            let mut split = Vec::new();
            for (scope, part) in &mut parts {
                let owned: Vec<(i64, i64, i64)> = rows
                    .iter()
                    .copied()
                    .filter(|(k, _, _)| {
                        let key: ArrayRef = Arc::new(Int64Array::from(vec![*k]));
                        scope.owns(key_groups(&[key], 128).unwrap()[0])
                    })
                    .collect();
                split.extend(step(part, &owned, *watermark));
            }
            split.sort();
            assert_eq!(split, expected);
        }
    }
}
