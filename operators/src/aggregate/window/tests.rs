use super::*;
use crate::aggregate::AggregateKind;
use arrow::datatypes::{Field, Schema, TimeUnit};
use datafusion_physical_expr::expressions::Column;

/// `COUNT(*)` per `k` in the windows given by each row's (start, end).
fn counting() -> WindowAggregate {
    counting_on(None)
}

/// `COUNT(*)` per `k` in session windows of `gap`, each row's (start, end) its proto-window.
fn counting_sessions(gap: i64) -> WindowAggregate {
    let mut spec = counting_spec(None);
    spec.session_gap = Some(gap);
    WindowAggregate::new(spec, Arc::new(OperatorMetrics::default()), 128).unwrap()
}

/// [`counting`], on processing time with windows of `kind` if given.
fn counting_on(processing_time: Option<WindowKind>) -> WindowAggregate {
    WindowAggregate::new(
        counting_spec(processing_time),
        Arc::new(OperatorMetrics::default()),
        128,
    )
    .unwrap()
}

/// What [`counting_on`] computes.
fn counting_spec(processing_time: Option<WindowKind>) -> WindowAggregateSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new(
            "window_start",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
        Field::new(
            "window_end",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
        Field::new("c", DataType::Int64, true),
    ]));
    WindowAggregateSpec {
        keys: vec![Arc::new(Column::new("k", 0))],
        key_types: vec![DataType::Int64],
        columns: WindowColumns {
            start: 1,
            end: 2,
            layout: vec![
                OutputColumn::Key(0),
                OutputColumn::WindowStart,
                OutputColumn::WindowEnd,
            ],
        },
        session_gap: None,
        calls: vec![AggregateCall {
            kind: AggregateKind::Count,
            arg: Arc::new(Column::new("k", 0)),
            filter: None,
            input_type: DataType::Int64,
            output_type: DataType::Int64,
            append_only: true,
        }],
        schema,
        processing_time,
    }
}

/// Rows (k, start, end).
fn rows(rows: &[(i64, i64, i64)]) -> Chunk {
    let ts = |f: fn(&(i64, i64, i64)) -> i64| -> ArrayRef {
        Arc::new(TimestampMillisecondArray::from_iter_values(
            rows.iter().map(f),
        ))
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("e", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]));
    let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
    Chunk::inserts(RecordBatch::try_new(schema, vec![keys, ts(|r| r.1), ts(|r| r.2)]).unwrap())
}

/// Every fired row as (k, start, end, count), sorted.
fn fire_all(aggregate: &mut WindowAggregate) -> Vec<(i64, i64, i64, i64)> {
    let mut out = Vec::new();
    crate::lsm_testing::pass_watermark(aggregate, Timestamp::MAX, &mut out);
    fired(out)
}

/// The rows of `out` as (k, start, end, count), sorted.
fn fired(out: Vec<Chunk>) -> Vec<(i64, i64, i64, i64)> {
    let mut fired = Vec::new();
    for chunk in out {
        let column = |i: usize| millis(chunk.rows().column(i)).unwrap();
        let (k, s, e, c) = (column(0), column(1), column(2), column(3));
        fired.extend(
            (0..chunk.num_rows()).map(|i| (k.value(i), s.value(i), e.value(i), c.value(i))),
        );
    }
    fired.sort();
    fired
}

#[test]
fn windows_fire_in_end_order_and_split_by_key_group_on_restore() {
    let mut aggregate = counting();
    let mut input = Vec::new();
    for k in 0..300 {
        for w in 0..3 {
            for _ in 0..=(k % 3) {
                input.push((k, w * 10, w * 10 + 10));
            }
        }
    }
    aggregate.process(rows(&input), &mut Vec::new()).unwrap();
    let mut out = Vec::new();
    aggregate.on_watermark(10, &mut out).unwrap();
    assert_eq!(
        out.iter().map(Chunk::num_rows).sum::<usize>(),
        300,
        "the first window"
    );
    let snapshot = aggregate.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
    let expected = fire_all(&mut aggregate);
    assert_eq!(expected.len(), 600);
    assert!(expected.iter().all(|(k, _, _, c)| *c == k % 3 + 1));

    let mut split = Vec::new();
    for subtask in 0..2 {
        let mut part = counting();
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        part.restore(&[&snapshot], &scope).unwrap();
        let fired = fire_all(&mut part);
        assert!(
            fired.len() > 100,
            "subtask {subtask} owns a share: {}",
            fired.len()
        );
        split.extend(fired);
    }
    split.sort();
    assert_eq!(split, expected);
}

thread_local! {
    static NOW: std::cell::Cell<Timestamp> = const { std::cell::Cell::new(0) };
}

fn test_clock() -> Timestamp {
    NOW.with(|now| now.get())
}

fn set_clock(now: Timestamp) {
    NOW.with(|cell| cell.set(now));
}

#[test]
fn processing_time_windows_follow_the_clock_not_the_rows_or_the_watermark() {
    let mut aggregate = counting_on(Some(WindowKind::Hop { slide: 5, size: 10 }));
    aggregate.clock = test_clock;
    set_clock(12);
    // The rows' own window columns say 100..110: ignored.
    aggregate
        .process(rows(&[(1, 100, 110), (2, 100, 110)]), &mut Vec::new())
        .unwrap();
    set_clock(16);
    aggregate
        .process(rows(&[(1, 100, 110)]), &mut Vec::new())
        .unwrap();
    assert_eq!(
        aggregate.processing_timer(),
        Some(15),
        "the earliest window's end"
    );
    let mut out = Vec::new();
    aggregate.on_watermark(1_000, &mut out).unwrap();
    assert!(
        out.is_empty(),
        "event time does not fire processing-time windows"
    );
    aggregate.on_processing_time(15, &mut out).unwrap();
    assert_eq!(
        fired(std::mem::take(&mut out)),
        [(1, 5, 15, 1), (2, 5, 15, 1)]
    );
    assert_eq!(aggregate.processing_timer(), Some(20));
    aggregate.on_processing_time(21, &mut out).unwrap();
    assert_eq!(
        fired(std::mem::take(&mut out)),
        [(1, 10, 20, 2), (2, 10, 20, 1)]
    );
    assert_eq!(aggregate.processing_timer(), Some(25));
    // Rows arriving now belong to windows holding now: none is late.
    set_clock(21);
    aggregate
        .process(rows(&[(3, 0, 1)]), &mut Vec::new())
        .unwrap();
    aggregate.on_watermark(Timestamp::MAX, &mut out).unwrap();
    assert!(
        out.is_empty(),
        "the end of the input does not fire them (as in Flink)"
    );
    aggregate.on_processing_time(31, &mut out).unwrap();
    assert_eq!(fired(out), [(1, 15, 25, 1), (3, 15, 25, 1), (3, 20, 30, 1)]);
}

#[test]
fn event_time_windows_have_no_processing_timer() {
    let mut aggregate = counting();
    aggregate
        .process(rows(&[(1, 0, 10)]), &mut Vec::new())
        .unwrap();
    assert_eq!(aggregate.processing_timer(), None);
    let mut out = Vec::new();
    aggregate.on_processing_time(i64::MAX, &mut out).unwrap();
    assert!(out.is_empty());
}

mod lsm {
    use super::*;
    use crate::lsm_testing::{hand_over, lsm_context, xorshift};
    use eddy_common::state::StateWriter;
    use std::path::{Path, PathBuf};

    fn scratch(name: &str) -> PathBuf {
        crate::lsm_testing::scratch("window-aggregate", name)
    }

    /// [`counting`] on the LSM backend, reading a window back from the store in parts of
    /// a hundred keys or so.
    fn lsm_counting(dir: &Path) -> WindowAggregate {
        let mut aggregate = counting().with_state(&lsm_context(dir)).unwrap();
        aggregate.spilled.part = 100;
        aggregate
    }

    /// Rows over `keys` keys in hopping windows (30 wide, every 10), two time units a
    /// chunk, from a seed; each chunk with the watermark after it (5 behind).
    fn hopping(seed: u64, keys: u64, chunks: usize) -> Vec<(Chunk, Timestamp)> {
        let mut next = xorshift(seed);
        (0..chunks)
            .map(|c| {
                let t0 = c as i64 * 2;
                let mut input = Vec::new();
                for _ in 0..400 {
                    let k = (next() % keys) as i64;
                    let t = t0 + (next() % 2) as i64;
                    let last = t - t.rem_euclid(10);
                    for w in 0..3 {
                        input.push((k, last - 10 * w, last - 10 * w + 30));
                    }
                }
                (rows(&input), t0 + 1 - 5)
            })
            .collect()
    }

    /// What `aggregate` fires for a chunk and the watermark after it.
    fn step(
        aggregate: &mut WindowAggregate,
        chunk: &Chunk,
        watermark: Timestamp,
    ) -> Vec<(i64, i64, i64, i64)> {
        aggregate.process(chunk.clone(), &mut Vec::new()).unwrap();
        let mut out = Vec::new();
        crate::lsm_testing::pass_watermark(aggregate, watermark, &mut out);
        fired(out)
    }

    #[test]
    fn keys_beyond_memory_fire_what_keys_in_memory_fire() {
        let dir = scratch("equal");
        let mut in_memory = counting();
        let mut lsm = lsm_counting(&dir);
        let mut spilled_windows = 0;
        for (chunk, watermark) in hopping(5, 20_000, 150) {
            let expected = step(&mut in_memory, &chunk, watermark);
            assert_eq!(
                step(&mut lsm, &chunk, watermark),
                expected,
                "at {watermark}"
            );
            spilled_windows = spilled_windows.max(lsm.spilled.len());
        }
        let cold = lsm.cold.as_ref().unwrap();
        // The 1 200 slots a chunk touches stay; the rest are evicted down to the budget.
        assert!(
            lsm.slots.in_use() <= cold.max_hot() + 1_200,
            "{} slots in memory",
            lsm.slots.in_use()
        );
        assert!(!cold.store.runs().is_empty(), "keys went to disk");
        assert!(
            spilled_windows >= 2,
            "open windows spilled: {spilled_windows}"
        );
        let expected = fire_all(&mut in_memory);
        assert!(expected.len() > 10_000);
        let mut out = Vec::new();
        let calls = crate::lsm_testing::pass_watermark(&mut lsm, Timestamp::MAX, &mut out);
        assert!(calls > 1, "the stored windows fired in parts");
        assert_eq!(fired(out), expected);
        assert!(lsm.spilled.is_empty() && lsm.timers.is_empty());
        let cold = lsm.cold.as_ref().unwrap();
        assert!(
            cold.entries_with_prefix(0, &[], None, 1)
                .unwrap()
                .is_empty()
                && cold.store.entries_from(b"").unwrap().next().is_none(),
            "fired windows leave nothing in the store"
        );
    }

    #[test]
    fn a_restored_store_fires_as_the_original_and_splits_by_key_group() {
        restores_as_the_original("restore", counting, &hopping(9, 6_000, 60));
    }

    /// Runs `input` through an aggregate `make` makes, in memory and on the LSM backend,
    /// with a snapshot of the latter half-way restored: into a store (going on as the
    /// original), at parallelism 3, and into memory.
    fn restores_as_the_original(
        name: &str,
        make: impl Fn() -> WindowAggregate,
        input: &[(Chunk, Timestamp)],
    ) {
        let on_lsm = |dir: &Path| {
            let mut aggregate = make().with_state(&lsm_context(dir)).unwrap();
            aggregate.spilled.part = 100;
            aggregate
        };
        let scratch = |part: &str| scratch(&format!("{name}-{part}"));
        let mut in_memory = make();
        let mut lsm = on_lsm(&scratch("original"));
        let (first, rest) = input.split_at(input.len() / 2);
        for (chunk, watermark) in first {
            step(&mut in_memory, chunk, *watermark);
            step(&mut lsm, chunk, *watermark);
        }
        let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
        assert!(!state.files.is_empty());
        // What comes after the snapshot is not in it.
        for (chunk, watermark) in rest.iter().take(3) {
            step(&mut lsm, chunk, *watermark);
        }
        drop(lsm);
        let again = scratch("again");
        hand_over(&state, &again);
        let mut restored = on_lsm(&again);
        restored
            .restore(&[&state.bytes], &KeyScope::everything())
            .unwrap();
        for (chunk, watermark) in &rest[..rest.len() * 2 / 3] {
            let expected = step(&mut in_memory, chunk, *watermark);
            assert_eq!(step(&mut restored, chunk, *watermark), expected);
        }

        // At parallelism 3 on the LSM backend, and at 1 in memory, the open windows fire
        // as they would have.
        let state = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
        let expected = fire_all(&mut in_memory);
        let mut split = Vec::new();
        for subtask in 0..3 {
            let sub = scratch(&format!("split-{subtask}"));
            hand_over(&state, &sub);
            let mut part = on_lsm(&sub);
            let scope = KeyScope {
                subtask,
                parallelism: 3,
                max_parallelism: 128,
            };
            part.restore(&[&state.bytes], &scope).unwrap();
            let fired = fire_all(&mut part);
            assert!(!fired.is_empty() && fired.len() < expected.len());
            split.extend(fired);
        }
        split.sort();
        assert_eq!(split, expected);
        let reader = scratch("into-memory");
        hand_over(&state, &reader);
        let mut back = make()
            .with_state(&crate::lsm_testing::memory_context(&reader))
            .unwrap();
        back.restore(&[&state.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(fire_all(&mut back), expected);
    }

    #[test]
    fn an_in_memory_snapshot_restores_into_a_store_and_one_of_format_5_too() {
        let mut in_memory = counting();
        for (chunk, watermark) in hopping(3, 3_000, 20) {
            step(&mut in_memory, &chunk, watermark);
        }
        let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
        let expected = fire_all(&mut in_memory);
        assert!(!expected.is_empty());

        let mut lsm = lsm_counting(&scratch("from-inline"));
        lsm.restore(&[&inline], &KeyScope::everything()).unwrap();
        assert_eq!(fire_all(&mut lsm), expected);

        // Format 5 had no stored windows and no layout after the watermark.
        let mut restored_watermark = counting();
        restored_watermark
            .restore(&[&inline], &KeyScope::everything())
            .unwrap();
        let head = |version: u64| {
            let mut out = StateWriter::with_capacity(16);
            out.u64(version).compact();
            out.i64(restored_watermark.watermark);
            out.finish()
        };
        let head_6 = head(6);
        assert_eq!(inline[..head_6.len()], head_6[..]);
        assert_eq!(inline[head_6.len()..head_6.len() + 2], [0, 0]);
        let mut format_5 = head(5);
        format_5.extend_from_slice(&inline[head_6.len() + 2..]);
        let mut old = lsm_counting(&scratch("from-format-5"));
        old.restore(&[&format_5], &KeyScope::everything()).unwrap();
        assert_eq!(fire_all(&mut old), expected);
    }

    #[test]
    fn a_missing_state_file_is_named() {
        let dir = scratch("missing");
        let mut lsm = lsm_counting(&dir);
        lsm.process(rows(&[(1, 0, 10)]), &mut Vec::new()).unwrap();
        let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
        let mut restored = lsm_counting(&scratch("missing-restore"));
        let error = restored
            .restore(&[&state.bytes], &KeyScope::everything())
            .unwrap_err();
        assert!(error.to_string().contains(&state.files[0].name), "{error}");
    }

    /// Rows over a few hot keys (sessions that keep merging) and `keys` others (sessions of
    /// a row or two), at two time units a chunk, from a seed; each chunk with the
    /// watermark after it (5 behind).
    fn sessions_input(seed: u64, keys: u64, chunks: usize) -> Vec<(Chunk, Timestamp)> {
        let mut next = xorshift(seed);
        (0..chunks)
            .map(|c| {
                let t0 = c as i64 * 2;
                let input: Vec<_> = (0..400)
                    .map(|i| {
                        let k = match i % 2 {
                            0 => (next() % 50) as i64,
                            _ => 50 + (next() % keys) as i64,
                        };
                        let t = t0 + (next() % 2) as i64;
                        (k, t, t + SESSION_GAP)
                    })
                    .collect();
                (rows(&input), t0 + 1 - 5)
            })
            .collect()
    }

    const SESSION_GAP: i64 = 7;

    #[test]
    fn sessions_beyond_memory_fire_what_sessions_in_memory_fire() {
        let dir = scratch("sessions");
        let mut in_memory = counting_sessions(SESSION_GAP);
        let mut lsm = counting_sessions(SESSION_GAP)
            .with_state(&lsm_context(&dir))
            .unwrap();
        lsm.spilled.part = 100;
        let mut most_calls = 0;
        for (chunk, watermark) in sessions_input(11, 20_000, 150) {
            let expected = step(&mut in_memory, &chunk, watermark);
            lsm.process(chunk, &mut Vec::new()).unwrap();
            let mut out = Vec::new();
            let calls = crate::lsm_testing::pass_watermark(&mut lsm, watermark, &mut out);
            most_calls = most_calls.max(calls);
            assert_eq!(fired(out), expected, "at {watermark}");
        }
        assert!(most_calls > 1, "stored sessions fired in parts");
        let cold = lsm.cold.as_ref().unwrap();
        assert!(
            lsm.sessions.in_use() <= cold.max_hot() + 400,
            "{} keys in memory",
            lsm.sessions.in_use()
        );
        assert!(!cold.store.runs().is_empty(), "sessions went to disk");
        let expected = fire_all(&mut in_memory);
        assert!(
            expected.iter().any(|(k, _, _, c)| *k < 50 && *c > 20),
            "long sessions"
        );
        assert_eq!(fire_all(&mut lsm), expected);
        let cold = lsm.cold.as_ref().unwrap();
        assert!(
            cold.store.entries_from(b"").unwrap().next().is_none(),
            "fired sessions leave neither sessions nor timers in the store"
        );
    }

    #[test]
    fn restored_sessions_fire_as_the_original_and_split_by_key_group() {
        restores_as_the_original(
            "sessions",
            || counting_sessions(SESSION_GAP),
            &sessions_input(13, 6_000, 60),
        );
    }

    #[test]
    fn in_memory_sessions_restore_into_a_store() {
        let mut in_memory = counting_sessions(SESSION_GAP);
        for (chunk, watermark) in sessions_input(17, 3_000, 20) {
            step(&mut in_memory, &chunk, watermark);
        }
        let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
        let expected = fire_all(&mut in_memory);
        assert!(!expected.is_empty());
        let mut lsm = counting_sessions(SESSION_GAP)
            .with_state(&lsm_context(&scratch("sessions-from-inline")))
            .unwrap();
        lsm.restore(&[&inline], &KeyScope::everything()).unwrap();
        assert_eq!(fire_all(&mut lsm), expected);
    }
}
