//! Top-N with its partitions in an LSM store: the same changes as in memory, through
//! eviction, restore, rescale, backend switches and a state TTL.

use super::tests::{changes, chunk, holds, spec, top_n, windowed_spec};
use super::*;
use crate::lsm_testing::{hand_over, lsm_context, scratch, xorshift};
use eddy_common::chunk::Op::{Delete, Insert as I};

/// Rows over `keys` partitions, inserted and (unless `append_only`) some retracted again,
/// from a seed.
fn churn(seed: u64, keys: u64, count: usize, append_only: bool) -> Vec<Chunk> {
    let mut next = xorshift(seed);
    let mut live: Vec<(i64, i64, String)> = Vec::new();
    let mut chunks = Vec::new();
    let mut named = 0;
    let as_chunk = |op: Op, rows: &[(i64, i64, String)]| {
        let rows: Vec<_> = rows
            .iter()
            .map(|(k, v, n)| (op, *k, *v, n.as_str()))
            .collect();
        chunk(&rows, 0)
    };
    for _ in 0..count {
        let inserted: Vec<(i64, i64, String)> = (0..500)
            .map(|_| {
                named += 1;
                let (k, v) = ((next() % keys) as i64, (next() % 1000) as i64);
                (k, v, format!("r{named}"))
            })
            .collect();
        chunks.push(as_chunk(Op::Insert, &inserted));
        if append_only {
            continue;
        }
        live.extend(inserted);
        let retracted: Vec<_> = (0..150)
            .map(|_| live.swap_remove((next() % live.len() as u64) as usize))
            .collect();
        chunks.push(as_chunk(Delete, &retracted));
    }
    chunks
}

/// Processes `chunk`, returning what was emitted.
fn process(op: &mut TopN, chunk: Chunk) -> Vec<String> {
    let mut out = Vec::new();
    op.process(chunk, &mut out).unwrap();
    changes(out)
}

/// Every partition an operator holds, as its key and rows, sorted, whether in memory or in
/// its store (read through a restore into memory).
fn all_partitions(op: &mut TopN, spec: &RankSpec, dir: &std::path::Path) -> Vec<String> {
    let state = op.snapshot(&SnapshotRequest::full(99)).unwrap();
    let name = dir.file_name().unwrap().to_str().unwrap();
    let reader = scratch("top-n", &format!("{name}-read"));
    hand_over(&state, &reader);
    let context = crate::lsm_testing::memory_context(&reader);
    let mut in_memory = top_n(spec.clone()).with_state(&context).unwrap();
    in_memory
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    contents(&in_memory)
}

/// The partitions in memory, as their key and rows, sorted.
fn contents(op: &TopN) -> Vec<String> {
    let mut held: Vec<String> = op
        .live_slots()
        .into_iter()
        .map(|slot| {
            let partition = &op.partitions[slot as usize];
            let rows: Vec<_> = (0..partition.len()).map(|i| partition.get(i).1).collect();
            format!("{:?} {rows:?}", op.keys.key(slot))
        })
        .collect();
    held.sort();
    held
}

/// The two Top-N kinds: over updates (every row held), and over inserts only.
fn specs() -> [RankSpec; 2] {
    [
        spec(3, RankOutput::Number, false),
        spec(2, RankOutput::Dropped, true),
    ]
}

#[test]
fn partitions_beyond_memory_give_the_changes_partitions_in_memory_give() {
    for spec in specs() {
        let append_only = spec.append_only_input;
        let dir = scratch("top-n", &format!("equal-{append_only}"));
        let mut in_memory = top_n(spec.clone());
        let mut lsm = top_n(spec.clone()).with_state(&lsm_context(&dir)).unwrap();
        for chunk in churn(7, 20_000, 100, append_only) {
            let expected = process(&mut in_memory, chunk.clone());
            assert_eq!(process(&mut lsm, chunk), expected);
        }
        let cold = lsm.cold.as_ref().unwrap();
        // The budget, or the partitions of the last chunk (never evicted during it).
        let budget = cold.max_hot().max(500);
        assert!(lsm.keys.in_use() <= budget, "evicted to the budget");
        assert!(
            lsm.keys.in_use() * 4 < in_memory.keys.in_use(),
            "{} of {} partitions in memory",
            lsm.keys.in_use(),
            in_memory.keys.in_use()
        );
        assert!(!cold.store.runs().is_empty(), "partitions went to disk");
        assert_eq!(all_partitions(&mut lsm, &spec, &dir), contents(&in_memory));
    }
}

#[test]
fn a_restored_store_goes_on_as_the_original_and_splits_by_key_group() {
    let spec = spec(3, RankOutput::Number, false);
    let dir = scratch("top-n", "restore");
    let mut in_memory = top_n(spec.clone());
    let mut lsm = top_n(spec.clone()).with_state(&lsm_context(&dir)).unwrap();
    let chunks = churn(11, 8_000, 60, false);
    let (first, rest) = chunks.split_at(60);
    for chunk in first {
        process(&mut in_memory, chunk.clone());
        process(&mut lsm, chunk.clone());
    }
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(!state.files.is_empty());
    // Changes after the snapshot are not in it.
    for chunk in rest.iter().take(6) {
        process(&mut lsm, chunk.clone());
    }
    drop(lsm);
    let again = scratch("top-n", "restore-again");
    hand_over(&state, &again);
    let mut restored = top_n(spec.clone())
        .with_state(&lsm_context(&again))
        .unwrap();
    restored
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    for chunk in rest {
        let expected = process(&mut in_memory, chunk.clone());
        assert_eq!(process(&mut restored, chunk.clone()), expected);
    }
    let everything = all_partitions(&mut restored, &spec, &again);
    assert_eq!(everything, contents(&in_memory));

    // At parallelism 3 each subtask keeps its key groups (on either backend); together,
    // every partition.
    let state = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
    let mut split = Vec::new();
    for subtask in 0..3 {
        let sub = scratch("top-n", &format!("split-{subtask}"));
        hand_over(&state, &sub);
        let context = match subtask {
            0 => crate::lsm_testing::memory_context(&sub),
            _ => lsm_context(&sub),
        };
        let mut part = top_n(spec.clone()).with_state(&context).unwrap();
        let scope = KeyScope {
            subtask,
            parallelism: 3,
            max_parallelism: 128,
        };
        part.restore(&[&state.bytes], &scope).unwrap();
        let held = all_partitions(&mut part, &spec, &sub);
        assert!(!held.is_empty() && held.len() < everything.len());
        split.extend(held);
    }
    split.sort();
    assert_eq!(split, everything);
}

#[test]
fn a_snapshot_in_memory_restores_into_a_store_that_goes_on_alike() {
    let spec = spec(2, RankOutput::Number, false);
    let dir = scratch("top-n", "switch");
    let mut in_memory = top_n(spec.clone());
    let chunks = churn(3, 5_000, 30, false);
    let (first, rest) = chunks.split_at(30);
    for chunk in first {
        process(&mut in_memory, chunk.clone());
    }
    let inline = in_memory.snapshot(&SnapshotRequest::full(1)).unwrap();
    assert!(inline.files.is_empty());
    let mut lsm = top_n(spec.clone()).with_state(&lsm_context(&dir)).unwrap();
    lsm.restore(&[&inline.bytes], &KeyScope::everything())
        .unwrap();
    for chunk in rest {
        let expected = process(&mut in_memory, chunk.clone());
        assert_eq!(process(&mut lsm, chunk.clone()), expected);
    }
    assert!(!lsm.cold.as_ref().unwrap().store.runs().is_empty());
    assert_eq!(all_partitions(&mut lsm, &spec, &dir), contents(&in_memory));
}

#[test]
fn a_partition_in_the_store_expires_by_its_ttl() {
    use crate::ttl::test_clock;
    let spec = RankSpec {
        state_ttl: Some(1000),
        ..spec(1, RankOutput::Number, true)
    };
    let dir = scratch("top-n", "ttl");
    let mut op = top_n(spec).with_state(&lsm_context(&dir)).unwrap();
    op.ttl = op.ttl.take().map(|t| t.with_clock(test_clock::now));
    let batch = |from: i64, v: i64| {
        let names: Vec<String> = (from..from + 3000).map(|k| format!("n{k}")).collect();
        let rows: Vec<_> = (from..from + 3000)
            .zip(&names)
            .map(|(k, n)| (I, k, v, n.as_str()))
            .collect();
        chunk(&rows, 0)
    };
    test_clock::set(0);
    process(&mut op, batch(0, 10));
    test_clock::set(500);
    // Partitions 3000.. push 0..3000 out of memory (their last write was at 0).
    process(&mut op, batch(3000, 10));
    assert!(
        !holds(&op, 0) && holds(&op, 3000),
        "partition 0 is in the store only"
    );
    test_clock::set(1200);
    // Partition 0 expired in the store: a lower row is its new top. Partition 3000,
    // written at 500, still holds its row: a lower one changes nothing.
    let fresh = process(&mut op, chunk(&[(I, 0, 5, "b"), (I, 3000, 5, "c")], 0));
    assert_eq!(fresh, ["+I b 1"]);
}

/// Rows over `keys` keys, each step into the window its time is in and the next one, from
/// a seed; each step with the watermark after it.
fn windowed_rows(seed: u64, keys: u64, steps: i64) -> Vec<(Vec<Chunk>, Timestamp)> {
    let mut next = xorshift(seed);
    let mut named = 0;
    (0..steps)
        .map(|step| {
            let time = step * 10;
            let end = (time / 100 + 1) * 100;
            let chunks = [end, end + 100]
                .iter()
                .map(|end| {
                    let rows: Vec<(i64, i64, String)> = (0..300)
                        .map(|_| {
                            named += 1;
                            let (k, v) = ((next() % keys) as i64, (next() % 1000) as i64);
                            (k, v, format!("r{named}"))
                        })
                        .collect();
                    let rows: Vec<_> = rows
                        .iter()
                        .map(|(k, v, n)| (I, *k, *v, n.as_str()))
                        .collect();
                    chunk(&rows, *end)
                })
                .collect();
            (chunks, time - 1)
        })
        .collect()
}

/// Window Top-N on the LSM backend, reading a window back in parts of a hundred
/// partitions or so.
fn lsm_windowed(dir: &std::path::Path) -> TopN {
    let mut op = top_n(windowed_spec())
        .with_state(&lsm_context(dir))
        .unwrap();
    op.spilled.part = 100;
    op
}

/// What `op` emits for a step's chunks and the watermark after them, sorted.
fn windowed_step(op: &mut TopN, chunks: &[Chunk], watermark: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in chunks {
        op.process(chunk.clone(), &mut out).unwrap();
    }
    crate::lsm_testing::pass_watermark(op, watermark, &mut out);
    let mut emitted = changes(out);
    emitted.sort();
    emitted
}

#[test]
fn windowed_partitions_beyond_memory_fire_what_partitions_in_memory_fire() {
    let dir = scratch("top-n", "windowed-equal");
    let mut in_memory = top_n(windowed_spec());
    let mut lsm = lsm_windowed(&dir);
    let mut spilled = 0;
    let mut fired = 0;
    for (chunks, watermark) in windowed_rows(3, 20_000, 60) {
        let expected = windowed_step(&mut in_memory, &chunks, watermark);
        fired += expected.len();
        assert_eq!(windowed_step(&mut lsm, &chunks, watermark), expected);
        spilled = spilled.max(lsm.spilled.len());
    }
    assert!(fired > 10_000, "{fired} rows fired");
    assert!(spilled >= 1, "windows spilled");
    assert!(!lsm.cold.as_ref().unwrap().store.runs().is_empty());
    let last = windowed_step(&mut in_memory, &[], Timestamp::MAX);
    assert!(!last.is_empty());
    assert_eq!(windowed_step(&mut lsm, &[], Timestamp::MAX), last);
    assert!(lsm.spilled.is_empty() && lsm.timers.is_empty());
    let store = &lsm.cold.as_ref().unwrap().store;
    assert!(
        store.entries_from(b"").unwrap().next().is_none(),
        "nothing left stored"
    );
}

#[test]
fn a_windowed_store_restores_at_another_parallelism_and_into_memory() {
    let dir = scratch("top-n", "windowed-restore");
    let mut lsm = lsm_windowed(&dir);
    for (chunks, watermark) in windowed_rows(5, 8_000, 25) {
        windowed_step(&mut lsm, &chunks, watermark);
    }
    let state = lsm.snapshot(&SnapshotRequest::full(1)).unwrap();
    let expected = windowed_step(&mut lsm, &[], Timestamp::MAX);
    assert!(expected.len() > 1_000);

    let mut split = Vec::new();
    for subtask in 0..3 {
        let sub = scratch("top-n", &format!("windowed-split-{subtask}"));
        hand_over(&state, &sub);
        let mut part = lsm_windowed(&sub);
        let scope = KeyScope {
            subtask,
            parallelism: 3,
            max_parallelism: 128,
        };
        part.restore(&[&state.bytes], &scope).unwrap();
        let fired = windowed_step(&mut part, &[], Timestamp::MAX);
        assert!(!fired.is_empty() && fired.len() < expected.len());
        split.extend(fired);
    }
    split.sort();
    assert_eq!(split, expected);

    let reader = scratch("top-n", "windowed-into-memory");
    hand_over(&state, &reader);
    let context = crate::lsm_testing::memory_context(&reader);
    let mut in_memory = top_n(windowed_spec()).with_state(&context).unwrap();
    in_memory
        .restore(&[&state.bytes], &KeyScope::everything())
        .unwrap();
    assert_eq!(windowed_step(&mut in_memory, &[], Timestamp::MAX), expected);
}
