use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{Field, Schema};
use datafusion_physical_expr::expressions::Column;

use super::*;

fn spec(ttl: Option<i64>) -> NormalizeSpec {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Utf8, true),
    ]));
    NormalizeSpec {
        keys: vec![Arc::new(Column::new("id", 0))],
        key_types: vec![DataType::Int64],
        schema,
        state_ttl: ttl,
    }
}

fn chunk(rows: &[(Op, i64, Option<&str>)]) -> Chunk {
    let spec = spec(None);
    let batch = RecordBatch::try_new(
        spec.schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap();
    Chunk::from_ops(batch, rows.iter().map(|r| r.0).collect())
}

fn lines(chunks: &[Chunk]) -> Vec<String> {
    chunks.iter().flat_map(Chunk::to_pretty).collect()
}

fn run(op: &mut ChangelogNormalize, rows: &[(Op, i64, Option<&str>)]) -> Vec<String> {
    let mut out = Vec::new();
    op.process(chunk(rows), &mut out).unwrap();
    lines(&out)
}

use Op::{Delete, UpdateAfter};

#[test]
fn upserts_become_inserts_and_updates_and_tombstones_delete_the_kept_row() {
    let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
    assert_eq!(
        run(
            &mut op,
            &[
                (UpdateAfter, 1, Some("a")),
                (UpdateAfter, 2, Some("b")),
                (UpdateAfter, 1, Some("c")),
                (UpdateAfter, 1, Some("c")),
                (Delete, 2, None),
                (Delete, 3, None),
            ]
        ),
        ["+I 1 a", "+I 2 b", "-U 1 a", "+U 1 c", "-D 2 b"]
    );
    assert_eq!(
        run(&mut op, &[(UpdateAfter, 2, Some("d")), (Delete, 1, None)]),
        ["+I 2 d", "-D 1 c"]
    );
}

#[test]
fn the_kept_rows_survive_a_snapshot_and_split_by_key_group() {
    let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
    let rows: Vec<(Op, i64, Option<&str>)> = (0..50).map(|i| (UpdateAfter, i, Some("x"))).collect();
    run(&mut op, &rows);
    let snapshot = op.snapshot(&SnapshotRequest::full(1)).unwrap();
    let bytes = snapshot.bytes.to_vec();
    let mut restored = 0;
    for subtask in 0..2 {
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
        op.restore(&[&bytes], &scope).unwrap();
        let deletes: Vec<(Op, i64, Option<&str>)> = (0..50).map(|i| (Delete, i, None)).collect();
        restored += run(&mut op, &deletes).len();
    }
    assert_eq!(restored, 50, "each key restored in exactly one subtask");
}

#[test]
fn with_a_ttl_an_unchanged_row_is_sent_again_and_an_expired_key_starts_afresh() {
    crate::ttl::test_clock::set(1_000);
    let mut op = ChangelogNormalize::new(spec(Some(100)), 128).unwrap();
    op.ttl = op.ttl.map(|t| t.with_clock(crate::ttl::test_clock::now));
    assert_eq!(
        run(
            &mut op,
            &[(UpdateAfter, 1, Some("a")), (UpdateAfter, 1, Some("a"))]
        ),
        ["+I 1 a", "-U 1 a", "+U 1 a"]
    );
    crate::ttl::test_clock::set(1_200);
    assert_eq!(run(&mut op, &[(UpdateAfter, 1, Some("b"))]), ["+I 1 b"]);
}

/// Upserts (some repeating a key's row) and deletes over `keys` keys, from a seed.
fn churn(seed: u64, keys: u64, count: usize) -> Vec<Chunk> {
    let mut next = crate::lsm_testing::xorshift(seed);
    let values = ["a", "b", "c", "d"];
    (0..count)
        .map(|_| {
            let rows: Vec<(Op, i64, Option<&str>)> = (0..400)
                .map(|_| {
                    let key = (next() % keys) as i64;
                    match next() % 5 {
                        0 => (Delete, key, None),
                        v => (UpdateAfter, key, Some(values[v as usize - 1])),
                    }
                })
                .collect();
            chunk(&rows)
        })
        .collect()
}

/// Every kept row, whether in memory or in the store (read through a restore into
/// memory), sorted.
fn all_rows(op: &mut ChangelogNormalize, dir: &std::path::Path) -> Vec<Vec<u8>> {
    use crate::lsm_testing::{hand_over, scratch};
    let state = op.snapshot(&SnapshotRequest::full(9)).unwrap();
    let name = dir.file_name().unwrap().to_str().unwrap();
    let reader = scratch("normalize", &format!("{name}-read"));
    hand_over(&state, &reader);
    let context = crate::lsm_testing::memory_context(&reader);
    let mut in_memory = ChangelogNormalize::new(spec(None), 128)
        .unwrap()
        .with_state(&context)
        .unwrap();
    in_memory
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    kept_rows(&in_memory)
}

/// The rows kept in memory, sorted.
fn kept_rows(op: &ChangelogNormalize) -> Vec<Vec<u8>> {
    let mut rows: Vec<Vec<u8>> = op.rows.iter().filter(|r| !r.is_empty()).cloned().collect();
    rows.sort();
    rows
}

#[test]
fn keys_beyond_memory_give_the_changes_keys_in_memory_give_through_a_restore() {
    use crate::lsm_testing::{hand_over, lsm_context, scratch};
    let dir = scratch("normalize", "lsm");
    let lsm_op = |dir: &std::path::Path| {
        ChangelogNormalize::new(spec(None), 128)
            .unwrap()
            .with_state(&lsm_context(dir))
            .unwrap()
    };
    let mut in_memory = ChangelogNormalize::new(spec(None), 128).unwrap();
    let mut lsm = lsm_op(&dir);
    let chunks = churn(5, 20_000, 120);
    let (first, rest) = chunks.split_at(80);
    let mut out = (Vec::new(), Vec::new());
    for chunk in first {
        in_memory.process(chunk.clone(), &mut out.0).unwrap();
        lsm.process(chunk.clone(), &mut out.1).unwrap();
        assert_eq!(lines(&out.1), lines(&out.0));
        out.0.clear();
        out.1.clear();
    }
    let cold = lsm.cold.as_ref().unwrap();
    // The budget, or the keys of the last chunk (never evicted during it).
    assert!(lsm.keys.in_use() <= cold.max_hot().max(400) && !cold.store.runs().is_empty());
    assert!(lsm.keys.in_use() * 4 < in_memory.keys.in_use());
    assert_eq!(all_rows(&mut lsm, &dir), kept_rows(&in_memory));

    // Restored from its runs, it goes on as the one in memory.
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    let again = scratch("normalize", "lsm-again");
    hand_over(&state, &again);
    let mut restored = lsm_op(&again);
    restored
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    for chunk in rest {
        in_memory.process(chunk.clone(), &mut out.0).unwrap();
        restored.process(chunk.clone(), &mut out.1).unwrap();
        assert_eq!(lines(&out.1), lines(&out.0));
        out.0.clear();
        out.1.clear();
    }

    // Split in two by key group, one subtask on each backend: together, every row.
    let state = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
    let mut together = Vec::new();
    for subtask in 0..2 {
        let sub = scratch("normalize", &format!("lsm-split-{subtask}"));
        hand_over(&state, &sub);
        let mut part = match subtask {
            0 => lsm_op(&sub),
            _ => ChangelogNormalize::new(spec(None), 128)
                .unwrap()
                .with_state(&crate::lsm_testing::memory_context(&sub))
                .unwrap(),
        };
        let scope = KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        part.restore(&[&state.bytes], &scope).unwrap();
        let rows = all_rows(&mut part, &sub);
        assert!(!rows.is_empty());
        together.extend(rows);
    }
    together.sort();
    assert_eq!(together, kept_rows(&in_memory));
}

#[test]
fn a_snapshot_of_format_one_restores_and_another_version_is_refused() {
    let row = {
        let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
        run(&mut op, &[(UpdateAfter, 7, Some("old"))]);
        op.rows.iter().find(|r| !r.is_empty()).unwrap().clone()
    };
    let op = ChangelogNormalize::new(spec(None), 128).unwrap();
    let key = op
        .keys
        .encode(&chunk(&[(Delete, 7, None)]).rows().clone())
        .unwrap()
        .unwrap();
    let mut v1 = versioned_snapshot(1);
    v1.u64(1)
        .bytes(key.row(0).data())
        .u64(5)
        .i64(Timestamp::MIN)
        .bytes(&row);
    let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
    op.restore(&[&v1.finish()], &KeyScope::everything())
        .unwrap();
    assert_eq!(run(&mut op, &[(Delete, 7, None)]), ["-D 7 old"]);

    let mut v9 = eddy_common::state::StateWriter::new();
    v9.u64(9);
    let error = op
        .restore(&[&v9.finish()], &KeyScope::everything())
        .unwrap_err()
        .to_string();
    assert!(error.contains("format version 9"), "{error}");
}
