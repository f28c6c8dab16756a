use super::*;
use arrow::array::{Int64Array, TimestampMillisecondArray};
use arrow::datatypes::{Field, Schema, TimeUnit};
use datafusion_expr::Operator as BinaryOp;
use datafusion_physical_expr::expressions::{BinaryExpr, Column};

fn side(value: &str) -> SchemaRef {
    let time = DataType::Timestamp(TimeUnit::Millisecond, None);
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("window_start", time.clone(), true),
        Field::new("window_end", time, true),
        Field::new(value, DataType::Int64, true),
    ]))
}

fn joined(kind: JoinKind) -> SchemaRef {
    let fields: Vec<_> = match kind {
        JoinKind::LeftSemi | JoinKind::LeftAnti => side("a").fields().iter().cloned().collect(),
        _ => side("a")
            .fields()
            .iter()
            .chain(side("b").fields().iter())
            .cloned()
            .collect(),
    };
    Arc::new(Schema::new(fields))
}

/// l(k, window, a) JOIN r(k, window, b) ON k, window_start and window_end
/// [AND a < b], with tumbling windows of 10 ms.
fn window_join(kind: JoinKind, filter: bool) -> WindowJoin {
    let column = |name: &str, i: usize| Arc::new(Column::new(name, i)) as Arc<dyn PhysicalExpr>;
    let keys = || {
        vec![
            column("k", 0),
            column("window_start", 1),
            column("window_end", 2),
        ]
    };
    let time = DataType::Timestamp(TimeUnit::Millisecond, None);
    let filter = filter.then(|| {
        Arc::new(BinaryExpr::new(
            column("a", 3),
            BinaryOp::Lt,
            column("b", 7),
        )) as Arc<dyn PhysicalExpr>
    });
    let spec = WindowJoinSpec {
        keys: [keys(), keys()],
        key_types: vec![DataType::Int64, time.clone(), time],
        schemas: [side("a"), side("b")],
        windows: [(1, 2), (1, 2)],
        filter,
        nulls_equal: false,
        kind,
        schema: joined(kind),
    };
    WindowJoin::new(spec, Arc::default(), 128).unwrap()
}

/// Rows `(k, time, value)` of the tumbling 10 ms window holding `time`.
fn rows(input: usize, rows: &[(Option<i64>, i64, i64)]) -> Chunk {
    let start = |t: i64| t - t.rem_euclid(10);
    let schema = side(["a", "b"][input]);
    Chunk::inserts(
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                Arc::new(TimestampMillisecondArray::from_iter_values(
                    rows.iter().map(|r| start(r.1)),
                )),
                Arc::new(TimestampMillisecondArray::from_iter_values(
                    rows.iter().map(|r| start(r.1) + 10),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap(),
    )
}

/// Output rows as `op k window_end value…`, sorted, without window starts and with
/// window ends in milliseconds.
fn lines(out: &[Chunk]) -> Vec<String> {
    let mut lines: Vec<String> = out
        .iter()
        .flat_map(|chunk| {
            let columns = chunk
                .rows()
                .columns()
                .iter()
                .enumerate()
                .map(|(c, column)| {
                    let column = match c % 4 {
                        2 => arrow::compute::cast(column, &DataType::Int64).unwrap(),
                        _ => column.clone(),
                    };
                    (format!("c{c}"), column)
                });
            let millis = RecordBatch::try_from_iter(columns).unwrap();
            let shown: Vec<usize> = (0..millis.num_columns()).filter(|c| c % 4 != 1).collect();
            chunk.with_rows(millis).to_pretty_columns(&shown)
        })
        .collect();
    lines.sort();
    lines
}

fn feed(join: &mut WindowJoin, input: usize, chunk: Chunk) {
    let mut out = Vec::new();
    join.process_input(input, chunk, &mut out).unwrap();
    assert!(
        out.is_empty(),
        "a window join emits only when a window closes"
    );
}

fn advance(join: &mut WindowJoin, watermark: i64) -> Vec<String> {
    let mut out = Vec::new();
    crate::lsm_testing::pass_watermark(join, watermark, &mut out);
    lines(&out)
}

#[test]
fn a_window_is_joined_when_the_watermark_closes_it_and_then_dropped() {
    let mut join = window_join(JoinKind::Inner, false);
    feed(
        &mut join,
        0,
        rows(
            0,
            &[(Some(1), 1, 100), (Some(2), 5, 200), (Some(1), 12, 300)],
        ),
    );
    feed(
        &mut join,
        1,
        rows(1, &[(Some(1), 9, 7), (Some(1), 15, 8), (Some(3), 2, 9)]),
    );
    assert_eq!(join.held_rows(), [3, 3]);
    assert!(advance(&mut join, 8).is_empty());
    // The first window [0, 10) closes at watermark 9: key 1 meets key 1 in it only.
    assert_eq!(advance(&mut join, 9), ["+I 1 10 100 1 10 7"]);
    assert_eq!(join.held_rows(), [1, 1]);
    // A row of a closed window is late: dropped, not joined later.
    feed(&mut join, 1, rows(1, &[(Some(2), 3, 1)]));
    assert_eq!(join.held_rows(), [1, 1]);
    assert_eq!(
        join.metrics
            .late_records_dropped
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(advance(&mut join, i64::MAX), ["+I 1 20 300 1 20 8"]);
    assert_eq!(join.held_rows(), [0, 0]);
}

#[test]
fn outer_window_joins_pad_the_rows_that_joined_nothing_once() {
    let left = [(Some(1), 1, 100), (Some(2), 5, 200), (None, 6, 300)];
    let right = [(Some(1), 9, 7), (Some(3), 2, 9), (Some(1), 3, 10)];
    let run = |kind, filter| {
        let mut join = window_join(kind, filter);
        feed(&mut join, 0, rows(0, &left));
        feed(&mut join, 1, rows(1, &right));
        advance(&mut join, i64::MAX)
    };
    assert_eq!(
        run(JoinKind::Left, false),
        [
            "+I . 10 300 . . .",
            "+I 1 10 100 1 10 10",
            "+I 1 10 100 1 10 7",
            "+I 2 10 200 . . ."
        ]
    );
    assert_eq!(
        run(JoinKind::Right, false),
        [
            "+I . . . 3 10 9",
            "+I 1 10 100 1 10 10",
            "+I 1 10 100 1 10 7"
        ]
    );
    // The rest of the condition decides what joined: 100 < 7 and 100 < 10 fail.
    assert_eq!(
        run(JoinKind::Full, true),
        [
            "+I . . . 1 10 10",
            "+I . . . 1 10 7",
            "+I . . . 3 10 9",
            "+I . 10 300 . . .",
            "+I 1 10 100 . . .",
            "+I 2 10 200 . . ."
        ]
    );
    assert_eq!(run(JoinKind::LeftSemi, false), ["+I 1 10 100"]);
    assert_eq!(
        run(JoinKind::LeftAnti, false),
        ["+I . 10 300", "+I 2 10 200"]
    );
    assert!(run(JoinKind::LeftSemi, true).is_empty());
}

#[test]
fn a_restore_keeps_the_owned_key_groups_of_every_open_window() {
    let mut join = window_join(JoinKind::Full, false);
    let keys: Vec<(Option<i64>, i64, i64)> = (0..40).map(|k| (Some(k), k % 30, k)).collect();
    feed(&mut join, 0, rows(0, &keys));
    feed(&mut join, 1, rows(1, &keys[10..]));
    assert_eq!(advance(&mut join, 9).len(), 20);
    let snapshot = join.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
    let expected = advance(&mut join, i64::MAX);
    assert_eq!(expected.len(), 20);
    let mut restored = Vec::new();
    for subtask in 0..2 {
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        let mut part = window_join(JoinKind::Full, false);
        part.restore(&[&snapshot], &scope).unwrap();
        // The restored watermark keeps the closed window closed.
        feed(&mut part, 0, rows(0, &[(Some(0), 1, 0)]));
        restored.extend(advance(&mut part, i64::MAX));
    }
    restored.sort();
    assert_eq!(restored, expected);
}

#[test]
fn a_snapshot_of_another_format_or_cut_short_is_refused() {
    let mut join = window_join(JoinKind::Inner, false);
    feed(&mut join, 0, rows(0, &[(Some(1), 1, 100)]));
    let snapshot = join
        .snapshot(&SnapshotRequest::full(1))
        .unwrap()
        .bytes
        .to_vec();
    let mut other_version = snapshot.clone();
    other_version[..8].copy_from_slice(&9u64.to_le_bytes());
    let cut = &snapshot[..snapshot.len() - 3];
    for (bytes, says) in [(&other_version[..], "format version 9"), (cut, "corrupt")] {
        let error = window_join(JoinKind::Inner, false)
            .restore(&[bytes], &KeyScope::everything())
            .unwrap_err();
        assert!(error.to_string().contains(says), "{error}");
    }
}

mod lsm {
    use super::*;
    use crate::lsm_testing::{hand_over, lsm_context, scratch, xorshift};

    const KINDS: [JoinKind; 6] = [
        JoinKind::Inner,
        JoinKind::Left,
        JoinKind::Right,
        JoinKind::Full,
        JoinKind::LeftSemi,
        JoinKind::LeftAnti,
    ];

    /// Per step, rows of both inputs over `keys` keys (some NULL) in the 10 ms windows of
    /// times in [step, step + 15), from a seed; each step with the watermark after it.
    fn steps(seed: u64, keys: u64, count: i64) -> Vec<([Chunk; 2], i64)> {
        let mut next = xorshift(seed);
        (0..count)
            .map(|step| {
                let mut side = |input: usize| {
                    let held: Vec<(Option<i64>, i64, i64)> = (0..200)
                        .map(|_| {
                            let k = (next() % (keys + keys / 50)) as i64;
                            let time = step + (next() % 15) as i64;
                            let k = (k < keys as i64).then_some(k);
                            (k, time, (next() % 100) as i64)
                        })
                        .collect();
                    rows(input, &held)
                };
                ([side(0), side(1)], step - 1)
            })
            .collect()
    }

    fn step(join: &mut WindowJoin, chunks: &[Chunk; 2], watermark: i64) -> Vec<String> {
        feed(join, 0, chunks[0].clone());
        feed(join, 1, chunks[1].clone());
        advance(join, watermark)
    }

    /// The join on the LSM backend, joining a stored window's rows a few at a time (so
    /// that batches end within a window, at a key's end).
    fn lsm_join(kind: JoinKind, filter: bool, dir: &std::path::Path) -> WindowJoin {
        let mut join = window_join(kind, filter)
            .with_state(&lsm_context(dir))
            .unwrap();
        let cold = join.cold.as_mut().unwrap();
        cold.fire_rows = 7;
        cold.spilled.part = 20;
        join
    }

    #[test]
    fn rows_beyond_memory_join_as_rows_in_memory_do() {
        for (kind, filter) in KINDS.iter().flat_map(|k| [(*k, false), (*k, true)]) {
            let dir = scratch("window-join", &format!("equal-{kind:?}-{filter}"));
            let mut in_memory = window_join(kind, filter);
            let mut lsm = lsm_join(kind, filter, &dir);
            let mut spilled = 0;
            let mut emitted = 0;
            for (chunks, watermark) in steps(17, 400, 40) {
                let expected = step(&mut in_memory, &chunks, watermark);
                emitted += expected.len();
                assert_eq!(step(&mut lsm, &chunks, watermark), expected, "{kind:?}");
                spilled = spilled.max(lsm.cold.as_ref().unwrap().spilled.len());
            }
            assert!(emitted > 100, "{kind:?} emitted {emitted}");
            assert!(spilled >= 1, "{kind:?}: windows spilled");
            let expected = advance(&mut in_memory, i64::MAX);
            assert_eq!(advance(&mut lsm, i64::MAX), expected, "{kind:?}");
            let cold = lsm.cold.as_ref().unwrap();
            assert!(cold.spilled.first().is_none() && lsm.windows.is_empty());
            assert!(cold.store.entries_from(b"").unwrap().next().is_none());
        }
    }

    #[test]
    fn a_stored_window_restores_at_another_parallelism_and_into_memory() {
        let dir = scratch("window-join", "restore");
        let mut lsm = lsm_join(JoinKind::Full, true, &dir);
        for (chunks, watermark) in steps(23, 300, 20) {
            step(&mut lsm, &chunks, watermark);
        }
        assert!(!lsm.cold.as_ref().unwrap().spilled.is_empty());
        assert!(!lsm.windows.is_empty(), "rows in memory too");
        let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
        let expected = advance(&mut lsm, i64::MAX);
        assert!(expected.len() > 500);

        let mut split = Vec::new();
        for subtask in 0..3 {
            let sub = scratch("window-join", &format!("split-{subtask}"));
            hand_over(&state, &sub);
            let mut part = lsm_join(JoinKind::Full, true, &sub);
            let scope = KeyScope {
                subtask,
                parallelism: 3,
                max_parallelism: 128,
            };
            part.restore(&[&state.bytes], &scope).unwrap();
            let joined = advance(&mut part, i64::MAX);
            assert!(!joined.is_empty() && joined.len() < expected.len());
            split.extend(joined);
        }
        split.sort();
        assert_eq!(split, expected);

        let reader = scratch("window-join", "into-memory");
        hand_over(&state, &reader);
        let mut in_memory = window_join(JoinKind::Full, true)
            .with_state(&crate::lsm_testing::memory_context(&reader))
            .unwrap();
        in_memory
            .restore(&[&state.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(advance(&mut in_memory, i64::MAX), expected);
    }

    #[test]
    fn rows_after_a_restore_join_with_the_stored_rows_of_their_window() {
        let dir = scratch("window-join", "after-restore");
        let mut lsm = lsm_join(JoinKind::Full, false, &dir);
        let input = steps(29, 300, 30);
        let (first, rest) = input.split_at(15);
        for (chunks, watermark) in first {
            step(&mut lsm, chunks, *watermark);
        }
        let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
        let again = scratch("window-join", "after-restore-again");
        hand_over(&state, &again);
        let mut restored = lsm_join(JoinKind::Full, false, &again);
        restored
            .restore(&[&state.bytes], &KeyScope::everything())
            .unwrap();
        // New rows are numbered after the stored ones, which they would replace otherwise.
        let numbered = |join: &WindowJoin| join.cold.as_ref().unwrap().next_row;
        assert!(numbered(&lsm) > 0);
        assert_eq!(numbered(&restored), numbered(&lsm));
        for (chunks, watermark) in rest {
            let expected = step(&mut lsm, chunks, *watermark);
            assert_eq!(step(&mut restored, chunks, *watermark), expected);
        }
        let expected = advance(&mut lsm, i64::MAX);
        assert!(!expected.is_empty());
        assert_eq!(advance(&mut restored, i64::MAX), expected);
    }
}
