use super::*;
use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::array_value_to_string;
use datafusion_physical_expr::expressions::Column;
use eddy_common::state::StateKind;

use crate::aggregate::AggregateKind;
use crate::lsm_testing::{hand_over, lsm_context, restores_go_on_as_never_restored, xorshift};

/// A fresh directory for an LSM store's test.
fn scratch(name: &str) -> std::path::PathBuf {
    crate::lsm_testing::scratch("group", name)
}

/// `SELECT k, COUNT(v), MAX(v) ... GROUP BY k` over an updating input.
fn count_and_max() -> GroupAggregate {
    let call = |kind| AggregateCall {
        kind,
        arg: Arc::new(Column::new("v", 1)),
        filter: None,
        input_type: DataType::Int64,
        output_type: DataType::Int64,
        append_only: false,
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("c", DataType::Int64, true),
        Field::new("m", DataType::Int64, true),
    ]));
    GroupAggregate::new(
        vec![Arc::new(Column::new("k", 0))],
        vec![DataType::Int64],
        vec![call(AggregateKind::Count), call(AggregateKind::Max)],
        true,
        schema,
        128,
    )
    .unwrap()
}

fn rows(rows: &[(i64, i64)], op: Op) -> Chunk {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]));
    let k = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let v = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(k), Arc::new(v)]).unwrap();
    Chunk::from_ops(batch, vec![op; rows.len()])
}

fn apply(aggregate: &mut GroupAggregate, chunk: Chunk) {
    aggregate.process(chunk, &mut Vec::new()).unwrap();
}

/// Every group as "key rows count max", sorted.
fn contents(aggregate: &GroupAggregate) -> Vec<String> {
    let live: Vec<u32> = (0..aggregate.slots.len as u32)
        .filter(|g| aggregate.row_counts[*g as usize] > 0)
        .collect();
    let keys = aggregate.key_columns(&live).unwrap();
    let values = aggregate.accumulators.evaluate(&live).unwrap();
    let mut groups: Vec<String> = (0..live.len())
        .map(|i| {
            let show = |a: &ArrayRef| array_value_to_string(a, i).unwrap();
            let rows = aggregate.row_counts[live[i] as usize];
            format!(
                "{} {rows} {} {}",
                show(&keys[0]),
                show(&values[0]),
                show(&values[1])
            )
        })
        .collect();
    groups.sort();
    groups
}

/// [`count_and_max`] with a state TTL of 1 s on the test clock.
fn count_and_max_with_ttl() -> GroupAggregate {
    let mut aggregate = count_and_max().with_state_ttl(Some(1000));
    aggregate.ttl = aggregate
        .ttl
        .map(|ttl| ttl.with_clock(crate::ttl::test_clock::now));
    aggregate
}

/// The changes a chunk makes, as "op key count max".
fn changes(aggregate: &mut GroupAggregate, chunk: Chunk) -> Vec<String> {
    let mut out = Vec::new();
    aggregate.process(chunk, &mut out).unwrap();
    out.iter().flat_map(Chunk::to_pretty).collect()
}

#[test]
fn groups_idle_for_the_ttl_start_afresh_and_leave_snapshots() {
    use crate::ttl::test_clock;
    let request = |checkpoint, completed| SnapshotRequest {
        checkpoint,
        completed,
        changes: true,
    };
    let mut aggregate = count_and_max_with_ttl();
    test_clock::set(0);
    apply(&mut aggregate, rows(&[(1, 10), (2, 20)], Op::Insert));
    let full = aggregate.snapshot(&request(1, None)).unwrap();
    test_clock::set(600);
    apply(&mut aggregate, rows(&[(1, 5)], Op::Insert));
    // Key 2 was last written at 0: at 1000 it is gone, its next row a new group.
    test_clock::set(1000);
    assert_eq!(
        changes(&mut aggregate, rows(&[(2, 7)], Op::Insert)),
        ["+I 2 1 7"]
    );
    assert_eq!(
        changes(&mut aggregate, rows(&[(1, 30)], Op::Insert)),
        ["-U 1 2 10", "+U 1 3 30"]
    );
    // Key 1, written at 1000, outlives key 2 (at 1000 too) by nothing: both go at 2000;
    // at 1999 a snapshot of changes still holds both.
    test_clock::set(1999);
    let changed = aggregate.snapshot(&request(2, Some(1))).unwrap();
    let mut restored = count_and_max_with_ttl();
    restored
        .restore(&[&full.bytes, &changed.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(contents(&restored), ["1 3 3 30", "2 1 1 7"]);
    // The restore kept the write times: at 2000 both are expired there too, and a
    // retraction of a gone group takes nothing back.
    test_clock::set(2000);
    assert!(changes(&mut restored, rows(&[(2, 7)], Op::Delete)).is_empty());
    assert_eq!(
        changes(&mut restored, rows(&[(1, 1)], Op::Insert)),
        ["+I 1 1 1"]
    );
    let later = restored.snapshot(&request(3, None)).unwrap();
    let mut again = count_and_max_with_ttl();
    again
        .restore(&[&later.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(
        contents(&again),
        ["1 1 1 1"],
        "expired groups are not written"
    );
}

#[test]
fn snapshots_of_changes_restore_on_top_of_the_full_one() {
    let request = |checkpoint, completed, changes| SnapshotRequest {
        checkpoint,
        completed,
        changes,
    };
    let everything = KeyScope::everything();
    let mut aggregate = count_and_max();
    let first: Vec<(i64, i64)> = (0..500).map(|i| (i % 50, i)).collect();
    apply(&mut aggregate, rows(&first, Op::Insert));
    let full = aggregate.snapshot(&request(1, None, true)).unwrap();
    assert_eq!(full.kind, StateKind::Full);

    // After 1: key 3 loses all its rows, key 7 its maximum, key 100 appears.
    let key_3: Vec<(i64, i64)> = first.iter().copied().filter(|r| r.0 == 3).collect();
    apply(&mut aggregate, rows(&key_3, Op::Delete));
    apply(&mut aggregate, rows(&[(7, 457)], Op::Delete));
    apply(&mut aggregate, rows(&[(100, 1)], Op::Insert));
    let second = aggregate.snapshot(&request(2, Some(1), true)).unwrap();
    assert_eq!(second.kind, StateKind::Changes);
    assert!(
        second.bytes.len() * 10 < full.bytes.len(),
        "{} bytes of changes, {} in all",
        second.bytes.len(),
        full.bytes.len()
    );
    let at_2 = contents(&aggregate);
    assert!(!at_2.iter().any(|g| g.starts_with("3 ")));

    // 2 never completes: 3 extends 1 with everything since. Key 3 comes back and key
    // 100 (born after 1) goes.
    apply(&mut aggregate, rows(&[(3, 9), (8, 1000)], Op::Insert));
    apply(&mut aggregate, rows(&[(100, 1)], Op::Delete));
    let third = aggregate.snapshot(&request(3, Some(1), true)).unwrap();
    assert_eq!(third.kind, StateKind::Changes);
    let at_3 = contents(&aggregate);

    // 3 completes; 4 extends it.
    apply(&mut aggregate, rows(&[(8, 1000), (9, 9)], Op::Delete));
    let fourth = aggregate.snapshot(&request(4, Some(3), true)).unwrap();
    let at_4 = contents(&aggregate);

    for (chain, expected) in [
        (vec![&full, &second], &at_2),
        (vec![&full, &third], &at_3),
        (vec![&full, &third, &fourth], &at_4),
    ] {
        let mut restored = count_and_max();
        let pieces: Vec<&[u8]> = chain.iter().map(|s| s.bytes.as_ref()).collect();
        restored.restore(&pieces, &everything).unwrap();
        assert_eq!(&contents(&restored), expected);
    }
    assert_eq!(at_3.len(), 50);
    assert!(at_4.contains(&"8 10 10 458".to_string()), "{at_4:?}");
    assert!(at_4.contains(&"9 9 9 459".to_string()), "{at_4:?}");
}

#[test]
fn a_key_removed_twice_since_the_extended_snapshot_restores_once() {
    let scope = KeyScope::everything();
    let mut aggregate = count_and_max();
    apply(&mut aggregate, rows(&[(1, 10), (2, 20)], Op::Insert));
    let full = aggregate.snapshot(&SnapshotRequest::full(1)).unwrap();
    // After 1, key 1 goes, comes back and goes again: the changes list its removal twice.
    apply(&mut aggregate, rows(&[(1, 10)], Op::Delete));
    apply(&mut aggregate, rows(&[(1, 11)], Op::Insert));
    apply(&mut aggregate, rows(&[(1, 11)], Op::Delete));
    let request = SnapshotRequest {
        checkpoint: 2,
        completed: Some(1),
        changes: true,
    };
    let extension = aggregate.snapshot(&request).unwrap();
    assert_eq!(extension.kind, StateKind::Changes);

    let mut restored = count_and_max();
    let chain = [full.bytes.as_ref(), extension.bytes.as_ref()];
    restored.restore(&chain, &scope).unwrap();
    assert_eq!(contents(&restored), ["2 1 1 20"]);
    // New keys each get a group of their own.
    for key in [3, 4, 5] {
        assert_eq!(
            changes(&mut restored, rows(&[(key, key)], Op::Insert)),
            changes(&mut aggregate, rows(&[(key, key)], Op::Insert)),
            "key {key}"
        );
    }
    assert_eq!(
        contents(&restored),
        ["2 1 1 20", "3 1 1 3", "4 1 1 4", "5 1 1 5"]
    );
}

/// Runs of small chunks over a few keys whose rows are inserted and retracted again, so
/// that groups often end and start again between snapshots; from a seed.
fn flicker(seed: u64, steps: usize) -> Vec<Vec<Chunk>> {
    let mut next = xorshift(seed);
    let mut live: Vec<(i64, i64)> = Vec::new();
    let mut value = 0;
    (0..steps)
        .map(|_| {
            (0..3)
                .map(|_| match next().is_multiple_of(2) || live.is_empty() {
                    true => {
                        let inserted: Vec<(i64, i64)> = (0..1 + next() % 4)
                            .map(|_| {
                                value += 1;
                                ((next() % 12) as i64, value)
                            })
                            .collect();
                        live.extend(&inserted);
                        rows(&inserted, Op::Insert)
                    }
                    false => {
                        let count = (1 + next() % 4).min(live.len() as u64);
                        let retracted: Vec<(i64, i64)> = (0..count)
                            .map(|_| live.swap_remove((next() % live.len() as u64) as usize))
                            .collect();
                        rows(&retracted, Op::Delete)
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn chains_of_snapshots_restore_and_go_on_as_an_operator_never_restored() {
    for seed in 1..=25 {
        let steps = flicker(seed, 60)
            .into_iter()
            .map(|chunks| chunks.into_iter().map(|c| (0, c)).collect())
            .collect();
        restores_go_on_as_never_restored(seed, steps, count_and_max, contents);
    }
}

#[test]
fn a_restored_state_is_extended_by_the_changes_since_the_restore() {
    let scope = KeyScope::everything();
    let mut before = count_and_max();
    let first: Vec<(i64, i64)> = (0..500).map(|i| (i % 50, i)).collect();
    apply(&mut before, rows(&first, Op::Insert));
    let full = before.snapshot(&SnapshotRequest::full(4)).unwrap();

    let mut aggregate = count_and_max();
    aggregate.restore(&[full.bytes.as_ref()], &scope).unwrap();
    aggregate.restored_from(4);
    let key_3: Vec<(i64, i64)> = first.iter().copied().filter(|r| r.0 == 3).collect();
    apply(&mut aggregate, rows(&key_3, Op::Delete));
    apply(&mut aggregate, rows(&[(7, 1000), (100, 1)], Op::Insert));
    let request = SnapshotRequest {
        checkpoint: 6,
        completed: Some(4),
        changes: true,
    };
    let changes = aggregate.snapshot(&request).unwrap();
    assert_eq!(changes.kind, StateKind::Changes);
    assert!(
        changes.bytes.len() * 10 < full.bytes.len(),
        "only keys 3, 7, 100"
    );

    let mut restored = count_and_max();
    let chain = [full.bytes.as_ref(), changes.bytes.as_ref()];
    restored.restore(&chain, &scope).unwrap();
    assert_eq!(contents(&restored), contents(&aggregate));
    assert!(!contents(&restored).iter().any(|g| g.starts_with("3 ")));
}

/// Every group of an operator as "key rows count max", sorted, whether in memory or in
/// its store (read through a restore into memory).
fn all_groups(aggregate: &mut GroupAggregate, dir: &std::path::Path) -> Vec<String> {
    let state = aggregate.snapshot(&SnapshotRequest::full(99)).unwrap();
    let reader = scratch(&format!(
        "{}-read",
        dir.file_name().unwrap().to_str().unwrap()
    ));
    hand_over(&state, &reader);
    let mut in_memory = count_and_max()
        .with_state(&crate::lsm_testing::memory_context(&reader))
        .unwrap();
    in_memory
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    contents(&in_memory)
}

/// Rows over `keys` keys, inserted and some retracted again, from a seed.
fn churn(seed: u64, keys: i64, count: usize) -> Vec<Chunk> {
    let mut next = xorshift(seed);
    let mut live: Vec<(i64, i64)> = Vec::new();
    let mut chunks = Vec::new();
    for _ in 0..count {
        let inserted: Vec<(i64, i64)> = (0..500)
            .map(|_| ((next() % keys as u64) as i64, (next() % 1000) as i64))
            .collect();
        live.extend(&inserted);
        chunks.push(rows(&inserted, Op::Insert));
        let retracted: Vec<(i64, i64)> = (0..100)
            .filter_map(|_| match live.is_empty() {
                true => None,
                false => Some(live.swap_remove((next() % live.len() as u64) as usize)),
            })
            .collect();
        chunks.push(rows(&retracted, Op::Delete));
    }
    chunks
}

#[test]
fn groups_beyond_memory_give_the_changes_groups_in_memory_give() {
    let dir = scratch("lsm-equal");
    let mut in_memory = count_and_max();
    let mut lsm = count_and_max().with_state(&lsm_context(&dir)).unwrap();
    for chunk in churn(7, 20_000, 120) {
        let expected = changes(&mut in_memory, chunk.clone());
        assert_eq!(changes(&mut lsm, chunk), expected);
    }
    let cold = lsm.cold.as_ref().unwrap();
    assert!(
        lsm.slots.in_use() <= cold.max_hot(),
        "evicted down to the budget"
    );
    assert!(!cold.store.runs().is_empty(), "groups went to disk");
    assert_eq!(all_groups(&mut lsm, &dir), contents(&in_memory));
}

#[test]
fn a_restored_store_goes_on_as_the_original_and_splits_by_key_group() {
    let dir = scratch("lsm-restore");
    let mut in_memory = count_and_max();
    let mut lsm = count_and_max().with_state(&lsm_context(&dir)).unwrap();
    let chunks = churn(11, 8_000, 80);
    let (first, rest) = chunks.split_at(40);
    for chunk in first {
        changes(&mut in_memory, chunk.clone());
        changes(&mut lsm, chunk.clone());
    }
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(!state.files.is_empty());
    // Changes after the snapshot are not in it.
    for chunk in rest.iter().take(5) {
        changes(&mut lsm, chunk.clone());
    }
    drop(lsm);
    let again = scratch("lsm-restore-again");
    hand_over(&state, &again);
    let mut restored = count_and_max().with_state(&lsm_context(&again)).unwrap();
    restored
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    for chunk in rest {
        let expected = changes(&mut in_memory, chunk.clone());
        assert_eq!(changes(&mut restored, chunk.clone()), expected);
    }
    let everything = all_groups(&mut restored, &again);
    assert_eq!(everything, contents(&in_memory));

    // At parallelism 3 each subtask keeps its key groups; together, every group.
    let state = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
    let mut split = Vec::new();
    for subtask in 0..3 {
        let sub = scratch(&format!("lsm-split-{subtask}"));
        hand_over(&state, &sub);
        let mut part = count_and_max().with_state(&lsm_context(&sub)).unwrap();
        let scope = KeyScope {
            subtask,
            parallelism: 3,
            max_parallelism: 128,
        };
        part.restore(&[&state.bytes], &scope).unwrap();
        let groups = all_groups(&mut part, &sub);
        assert!(!groups.is_empty() && groups.len() < everything.len());
        split.extend(groups);
    }
    split.sort();
    assert_eq!(split, everything);
}

#[test]
fn a_snapshot_in_memory_restores_into_a_store_and_back() {
    let dir = scratch("lsm-switch");
    let mut in_memory = count_and_max();
    for chunk in churn(3, 5_000, 20) {
        changes(&mut in_memory, chunk);
    }
    let expected = contents(&in_memory);
    let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap();
    let mut lsm = count_and_max().with_state(&lsm_context(&dir)).unwrap();
    lsm.restore(&[&inline.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(all_groups(&mut lsm, &dir), expected);
}

#[test]
fn a_missing_state_file_is_named() {
    let dir = scratch("lsm-missing");
    let mut lsm = count_and_max().with_state(&lsm_context(&dir)).unwrap();
    changes(&mut lsm, rows(&[(1, 1)], Op::Insert));
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    let elsewhere = scratch("lsm-missing-restore");
    let mut restored = count_and_max()
        .with_state(&lsm_context(&elsewhere))
        .unwrap();
    let error = restored
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap_err();
    assert!(error.to_string().contains(&state.files[0].name), "{error}");
}
