use super::*;
use arrow::array::ArrayRef;
use arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{Field, Schema, TimeUnit};
use datafusion_physical_expr::expressions::Column;

fn side(value: &str) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("currency", DataType::Utf8, true),
        Field::new(value, DataType::Int64, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]))
}

/// orders(currency, amount, t) JOIN rates FOR SYSTEM_TIME AS OF t ON currency.
fn temporal_join(left_outer: bool) -> TemporalJoin {
    let fields: Vec<_> = side("amount")
        .fields()
        .iter()
        .chain(side("rate").fields().iter())
        .cloned()
        .collect();
    let key = || vec![Arc::new(Column::new("currency", 0)) as Arc<dyn PhysicalExpr>];
    let spec = TemporalJoinSpec {
        keys: [key(), key()],
        key_types: vec![DataType::Utf8],
        schemas: [side("amount"), side("rate")],
        times: [2, 2],
        filter: None,
        left_outer,
        schema: Arc::new(Schema::new(fields)),
    };
    TemporalJoin::new(spec, 128).unwrap()
}

fn rows(input: usize, rows: &[(&str, i64, i64)], op: Op) -> Chunk {
    let batch = RecordBatch::try_new(
        side(["amount", "rate"][input]),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                rows.iter().map(|r| r.2),
            )),
        ],
    )
    .unwrap();
    Chunk::from_ops(batch, vec![op; rows.len()])
}

fn feed(join: &mut TemporalJoin, input: usize, chunk: Chunk) {
    let mut out = Vec::new();
    join.process_input(input, chunk, &mut out).unwrap();
    assert!(out.is_empty(), "rows wait for the watermark");
}

/// Rows emitted as `+I currency amount rate`, sorted.
fn advance(join: &mut TemporalJoin, watermark: i64) -> Vec<String> {
    let mut out = Vec::new();
    join.on_watermark(watermark, &mut out).unwrap();
    assert!(out.iter().all(Chunk::is_append_only));
    let mut lines: Vec<String> = out
        .iter()
        .flat_map(|chunk| chunk.to_pretty_columns(&[0, 1, 4]))
        .collect();
    lines.sort();
    lines
}

#[test]
fn each_row_joins_the_version_valid_at_its_time_once_the_watermark_passes_it() {
    let mut join = temporal_join(false);
    feed(
        &mut join,
        1,
        rows(
            1,
            &[("EUR", 114, 0), ("EUR", 116, 10), ("USD", 100, 5)],
            Op::Insert,
        ),
    );
    feed(
        &mut join,
        0,
        rows(
            0,
            &[("EUR", 1, 5), ("EUR", 2, 12), ("USD", 3, 2), ("EUR", 4, 10)],
            Op::Insert,
        ),
    );
    // USD's first version is from 5: the order at 2 finds none.
    assert_eq!(advance(&mut join, 9), ["+I EUR 1 114"]);
    assert_eq!(join.held(), (2, 3));
    assert_eq!(advance(&mut join, 20), ["+I EUR 2 116", "+I EUR 4 116"]);
    // Only the versions valid at the watermark are kept.
    assert_eq!(join.held(), (0, 2));
    // A deletion ends a key's versions.
    feed(&mut join, 1, rows(1, &[("EUR", 116, 25)], Op::Delete));
    feed(
        &mut join,
        0,
        rows(0, &[("EUR", 5, 24), ("EUR", 6, 26)], Op::Insert),
    );
    assert_eq!(advance(&mut join, 30), ["+I EUR 5 116"]);
    assert_eq!(join.held(), (0, 1));
}

#[test]
fn a_left_temporal_join_pads_rows_without_a_valid_version_and_survives_a_restore() {
    let mut join = temporal_join(true);
    feed(
        &mut join,
        1,
        rows(1, &[("EUR", 114, 0), ("USD", 100, 5)], Op::Insert),
    );
    feed(
        &mut join,
        0,
        rows(
            0,
            &[("USD", 3, 2), ("EUR", 1, 5), ("GBP", 7, 6)],
            Op::Insert,
        ),
    );
    let snapshot = join.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
    let expected = advance(&mut join, 10);
    assert_eq!(expected, ["+I EUR 1 114", "+I GBP 7 .", "+I USD 3 ."]);
    let mut restored = Vec::new();
    for subtask in 0..2 {
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        let mut part = temporal_join(true);
        part.restore(&[&snapshot], &scope).unwrap();
        restored.extend(advance(&mut part, 10));
    }
    restored.sort();
    assert_eq!(restored, expected);
}

/// One step of a temporal join: versions (inserts and deletions), left rows, a watermark.
struct Step {
    versions: Vec<(String, i64, i64)>,
    deletions: Vec<(String, i64, i64)>,
    orders: Vec<(String, i64, i64)>,
    watermark: i64,
}

/// Versions of `keys` keys and orders of them, their times up to 2 s behind a clock that
/// moves 500 ms a step, from a seed; the watermark trails the clock by 2 s.
fn steps(seed: u64, keys: u64, count: usize) -> Vec<Step> {
    let mut next = crate::lsm_testing::xorshift(seed);
    let mut row = |clock: i64| {
        let key = format!("k{}", next() % keys);
        (key, (next() % 1000) as i64, clock - (next() % 2000) as i64)
    };
    (0..count as i64)
        .map(|step| {
            let clock = 10_000 + 500 * step;
            Step {
                versions: (0..150).map(|_| row(clock)).collect(),
                deletions: (0..5).map(|_| row(clock)).collect(),
                orders: (0..100).map(|_| row(clock)).collect(),
                watermark: clock - 2_000,
            }
        })
        .collect()
}

/// `rows` with their keys borrowed.
fn borrowed(rows: &[(String, i64, i64)]) -> Vec<(&str, i64, i64)> {
    rows.iter().map(|(k, v, t)| (k.as_str(), *v, *t)).collect()
}

fn run_step(join: &mut TemporalJoin, step: &Step) -> Vec<String> {
    feed(join, 1, rows(1, &borrowed(&step.versions), Op::Insert));
    feed(join, 1, rows(1, &borrowed(&step.deletions), Op::Delete));
    feed(join, 0, rows(0, &borrowed(&step.orders), Op::Insert));
    advance(join, step.watermark)
}

fn on_disk(join: TemporalJoin, dir: &std::path::Path) -> TemporalJoin {
    join.with_state(&crate::lsm_testing::lsm_context(dir))
        .unwrap()
}

#[test]
fn versions_beyond_memory_join_as_versions_in_memory() {
    for left_outer in [false, true] {
        let dir = crate::lsm_testing::scratch("temporal", &format!("lsm-{left_outer}"));
        let mut in_memory = temporal_join(left_outer);
        let mut lsm = on_disk(temporal_join(left_outer), &dir);
        let (mut evicted, mut joined) = (false, 0);
        for (i, step) in steps(7, 3_000, 60).iter().enumerate() {
            let expected = run_step(&mut in_memory, step);
            joined += expected.iter().filter(|row| !row.ends_with(" .")).count();
            assert_eq!(run_step(&mut lsm, step), expected, "step {i}");
            evicted |= lsm.held().1 < in_memory.held().1 / 2;
        }
        assert!(evicted, "the versions never left memory");
        assert!(joined > 1_000, "{joined} rows found a version");
        assert_eq!(
            advance(&mut lsm, i64::MAX),
            advance(&mut in_memory, i64::MAX)
        );
    }
}

#[test]
fn stored_versions_restore_onto_either_backend_at_any_parallelism() {
    let steps = steps(17, 2_000, 60);
    let (first, rest) = steps.split_at(30);
    let mut reference = temporal_join(true);
    let dir = crate::lsm_testing::scratch("temporal", "source");
    let mut lsm = on_disk(temporal_join(true), &dir);
    let mut in_memory = temporal_join(true);
    for step in first {
        let expected = run_step(&mut reference, step);
        assert_eq!(run_step(&mut lsm, step), expected);
        run_step(&mut in_memory, step);
    }
    // Rows waiting for the watermark are in the snapshot too.
    let extra = &rest[0];
    for join in [&mut reference, &mut lsm, &mut in_memory] {
        let later: Vec<_> = extra
            .orders
            .iter()
            .map(|(k, v, t)| (k.clone(), *v, *t + 3_000))
            .collect();
        feed(join, 0, rows(0, &borrowed(&later), Op::Insert));
    }
    let runs = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(!runs.files.is_empty(), "the versions went to runs");
    let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut expected: Vec<String> = rest
        .iter()
        .flat_map(|s| run_step(&mut reference, s))
        .collect();
    expected.extend(advance(&mut reference, i64::MAX));
    expected.sort();
    let targets = [
        ("runs-to-lsm", &runs, true, 1),
        ("runs-to-memory", &runs, false, 1),
        ("runs-to-two-in-memory", &runs, false, 2),
        ("runs-to-three-on-lsm", &runs, true, 3),
        ("memory-to-lsm", &inline, true, 1),
    ];
    for (name, state, onto_lsm, parallelism) in targets {
        let mut got = Vec::new();
        for subtask in 0..parallelism {
            let target = crate::lsm_testing::scratch("temporal", &format!("{name}-{subtask}"));
            crate::lsm_testing::hand_over(state, &target);
            let context = match onto_lsm {
                true => crate::lsm_testing::lsm_context(&target),
                false => crate::lsm_testing::memory_context(&target),
            };
            let mut part = temporal_join(true).with_state(&context).unwrap();
            let scope = KeyScope {
                subtask,
                parallelism,
                max_parallelism: 128,
            };
            part.restore(&[&state.bytes], &scope).unwrap();
            // Each subtask gets the rows of its keys.
            for step in rest {
                let owned = |rows: &[(String, i64, i64)]| -> Vec<(String, i64, i64)> {
                    rows.iter()
                        .filter(|r| owns(&part, &r.0, &scope))
                        .cloned()
                        .collect()
                };
                let step = Step {
                    versions: owned(&step.versions),
                    deletions: owned(&step.deletions),
                    orders: owned(&step.orders),
                    watermark: step.watermark,
                };
                got.extend(run_step(&mut part, &step));
            }
            got.extend(advance(&mut part, i64::MAX));
        }
        got.sort();
        assert_eq!(got, expected, "{name}");
    }
}

/// Whether the subtask of `scope` owns `key`.
fn owns(join: &TemporalJoin, key: &str, scope: &KeyScope) -> bool {
    let column: ArrayRef = Arc::new(StringArray::from(vec![key]));
    let group = crate::partition::key_groups(&[column], join.max_parallelism).unwrap()[0];
    scope.owns(group)
}

#[test]
fn a_snapshot_of_the_first_format_restores() {
    let join = temporal_join(false);
    let key = join
        .key_codec
        .convert_columns(&[Arc::new(StringArray::from(vec!["EUR"])) as ArrayRef])
        .unwrap();
    let rate = rows(1, &[("EUR", 114, 0)], Op::Insert);
    let row = join
        .right_codec
        .convert_columns(rate.rows().columns())
        .unwrap();
    let mut v1 = versioned_snapshot(1);
    v1.i64(5).u64(0).u64(1);
    v1.bytes(key.row(0).data()).u64(3).u64(1);
    v1.i64(0).u64(1).bytes(row.row(0).data());
    let mut restored = temporal_join(false);
    restored
        .restore(&[&v1.finish()], &KeyScope::everything())
        .unwrap();
    feed(&mut restored, 0, rows(0, &[("EUR", 1, 7)], Op::Insert));
    assert_eq!(advance(&mut restored, 10), ["+I EUR 1 114"]);
    let mut v3 = versioned_snapshot(3);
    v3.i64(5);
    let error = temporal_join(false)
        .restore(&[&v3.finish()], &KeyScope::everything())
        .unwrap_err();
    assert!(error.to_string().contains("versions 1 to 2"), "{error}");
}
