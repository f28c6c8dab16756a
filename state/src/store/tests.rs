use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::run::tests::scratch;

fn small() -> StoreOptions {
    StoreOptions {
        memtable_bytes: 4096,
        fan_in: 3,
        max_runs: 8,
        block_cache_bytes: 16 << 10,
        merge_bytes_per_flush: 1 << 20,
    }
}

fn key(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn writes_spill_into_runs_and_reads_see_the_newest() {
    let dir = scratch("spill");
    let mut store = Store::create(&dir, small()).unwrap();
    for round in 0..5u32 {
        for i in 0..2_000u32 {
            store.put(&key(i), &(i * 10 + round).to_le_bytes()).unwrap();
        }
    }
    for i in (0..2_000u32).step_by(3) {
        store.delete(&key(i)).unwrap();
    }
    assert!(!store.runs().is_empty(), "the memtable spilled");
    assert!(store.runs().len() <= 8, "{} runs", store.runs().len());
    assert_eq!(
        store.get(&key(1)).unwrap(),
        Some((14u32).to_le_bytes().to_vec())
    );
    assert_eq!(store.get(&key(3)).unwrap(), None);
    assert_eq!(store.get(&key(5_000)).unwrap(), None);
    let live: Vec<_> = store
        .entries_from(&key(1_990))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<_> = (1_990..2_000u32)
        .filter(|i| i % 3 != 0)
        .map(|i| (key(i), Some((i * 10 + 4).to_le_bytes().to_vec())))
        .collect();
    assert_eq!(live, expected);
    assert_eq!(
        files(&dir),
        store.runs().len(),
        "merged runs' files are gone"
    );
}

#[test]
fn deleting_everything_gives_the_space_back() {
    let dir = scratch("reclaim");
    let mut store = Store::create(&dir, small()).unwrap();
    for i in 0..3_000u32 {
        store.put(&key(i), &[7; 20]).unwrap();
    }
    store.flush().unwrap();
    for i in 0..3_000u32 {
        store.delete(&key(i)).unwrap();
    }
    store.flush().unwrap();
    // More writes make the tiers merge down to the oldest run, where deletions go.
    for round in 0..40u32 {
        store.put(&key(10_000 + round), &[1]).unwrap();
        store.flush().unwrap();
    }
    let held: u64 = store.runs().iter().map(|r| r.meta().entries).sum();
    assert!(held < 200, "{held} entries held for 40 live keys");
    assert_eq!(store.entries_from(b"").unwrap().count(), 40);
}

#[test]
fn a_run_held_elsewhere_keeps_its_file_until_let_go() {
    let dir = scratch("held");
    let mut store = Store::create(&dir, small()).unwrap();
    store.put(b"a", b"1").unwrap();
    store.flush().unwrap();
    let held = Arc::clone(&store.runs()[0]);
    for i in 0..3u8 {
        store.put(&[b'b', i], b"2").unwrap();
        store.flush().unwrap();
    }
    assert!(
        !store.runs().iter().any(|r| Arc::ptr_eq(r, &held)),
        "merged away"
    );
    assert!(
        held.meta().path.exists(),
        "still held: an upload may be reading it"
    );
    let path = held.meta().path.clone();
    drop(held);
    assert!(!path.exists());
}

#[test]
fn bad_options_are_refused() {
    let options = StoreOptions {
        fan_in: 1,
        ..StoreOptions::default()
    };
    let error = Store::create(scratch("options"), options).unwrap_err();
    assert!(error.to_string().contains("fan_in"), "{error}");
}

#[derive(Debug, Clone)]
enum Write {
    Put(u16, Vec<u8>),
    Delete(u16),
    Flush,
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        6 => (0..500u16, prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(k, v)| Write::Put(k, v)),
        3 => (0..500u16).prop_map(Write::Delete),
        1 => Just(Write::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_store_reads_as_a_map_would(
        writes in prop::collection::vec(write(), 0..3_000),
        merge_bytes_per_flush in prop_oneof![Just(1usize << 20), 1500..6000usize],
    ) {
        let dir = scratch("model");
        let mut store = Store::create(&dir, StoreOptions { memtable_bytes: 2048, fan_in: 2, max_runs: 6, block_cache_bytes: 8 << 10, merge_bytes_per_flush }).unwrap();
        let mut model = BTreeMap::new();
        for write in &writes {
            match write {
                Write::Put(k, v) => {
                    store.put(&k.to_be_bytes(), v).unwrap();
                    model.insert(k.to_be_bytes().to_vec(), v.clone());
                }
                Write::Delete(k) => {
                    store.delete(&k.to_be_bytes()).unwrap();
                    model.remove(k.to_be_bytes().as_slice());
                }
                Write::Flush => store.flush().unwrap(),
            }
        }
        prop_assert!(store.sorted_runs() <= 6);
        // What a checkpoint lists, a merge under way included, reopens as the same state.
        let copies = store.checkpoint().unwrap().iter().map(|r| copy_run(r, &dir)).collect::<Vec<_>>();
        let reopened = Store::open(scratch("model-reopened"), store.options(), copies).unwrap();
        for store in [&store, &reopened] {
            for k in 0..500u16 {
                prop_assert_eq!(store.get(&k.to_be_bytes()).unwrap(), model.get(k.to_be_bytes().as_slice()).cloned());
            }
            let all: BTreeMap<_, _> = store
                .entries_from(b"")
                .unwrap()
                .map(|e| { let (k, v) = e.unwrap(); (k, v.unwrap()) })
                .collect();
            prop_assert_eq!(&all, &model);
        }
    }
}

/// A copy of `run`'s file under the same name in a fresh directory beside `dir`.
fn copy_run(run: &Run, dir: &Path) -> PathBuf {
    let copies = dir.with_extension("copies");
    std::fs::create_dir_all(&copies).unwrap();
    let to = copies.join(run.name());
    std::fs::copy(&run.meta().path, &to).unwrap();
    to
}

#[test]
fn a_range_of_key_groups_reads_as_a_range_of_keys() {
    let dir = scratch("key-groups");
    let mut store = Store::create(&dir, small()).unwrap();
    let mut state_key = Vec::new();
    for group in 0..128u16 {
        for k in 0..20u32 {
            crate::key::encode(group, (k % 2) as u8, &k.to_be_bytes(), &mut state_key);
            store.put(&state_key, &[group as u8]).unwrap();
        }
    }
    crate::key::encode(40, 1, &3u32.to_be_bytes(), &mut state_key);
    store.delete(&state_key).unwrap();
    let groups: Vec<u16> = store
        .entries_of_key_groups(&(32..64))
        .unwrap()
        .map(|e| crate::key::decode(&e.unwrap().0).unwrap().0)
        .collect();
    assert_eq!(groups.len(), 32 * 20 - 1);
    assert!(groups.iter().all(|g| (32..64).contains(g)));
    assert_eq!(
        store
            .entries_of_key_groups(&(120..usize::MAX))
            .unwrap()
            .count(),
        8 * 20
    );
}

#[test]
fn a_checkpoints_runs_reopen_as_the_same_state_elsewhere() {
    let dir = scratch("checkpointed");
    let mut store = Store::create(&dir, small()).unwrap();
    for i in 0..2_000u32 {
        store.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    for i in (0..2_000u32).step_by(3) {
        store.delete(&key(i)).unwrap();
    }
    let runs = store.checkpoint().unwrap();
    assert_eq!(store.memtable_bytes(), 0, "a checkpoint flushes");
    // Runs held by a checkpoint outlive a merge that replaces them.
    for i in 2_000..6_000u32 {
        store.put(&key(i), b"later").unwrap();
    }
    store.flush().unwrap();
    let copied = scratch("restored");
    let paths: Vec<_> = runs
        .iter()
        .map(|run| {
            let to = copied.join(run.name());
            std::fs::copy(&run.meta().path, &to).unwrap();
            to
        })
        .collect();
    let names: std::collections::HashSet<_> = runs.iter().map(|r| r.name().to_string()).collect();
    assert_eq!(names.len(), runs.len(), "run names are unique");
    drop(runs);

    let mut restored = Store::open(scratch("reopened"), small(), paths.clone()).unwrap();
    for i in 0..2_000u32 {
        let expected = (i % 3 != 0).then(|| i.to_le_bytes().to_vec());
        assert_eq!(restored.get(&key(i)).unwrap(), expected, "key {i}");
    }
    assert_eq!(restored.get(&key(2_500)).unwrap(), None);
    // New runs take names no other store uses; a merge retires the adopted files.
    for i in 0..3_000u32 {
        restored.put(&key(i), b"new").unwrap();
    }
    restored.flush().unwrap();
    assert!(restored.runs().iter().all(|r| !names.contains(r.name())));
    assert!(paths.iter().all(|p| !p.exists()), "merged away, deleted");
}

#[test]
fn a_large_merge_goes_on_over_later_flushes_and_reopens_midway() {
    let dir = scratch("paced");
    let budget = 16 << 10;
    // Runs enough that merges need no more than the budget to keep within them.
    let options = StoreOptions {
        merge_bytes_per_flush: budget,
        max_runs: 40,
        ..small()
    };
    let mut store = Store::create(&dir, options).unwrap();
    let (mut midway, mut checked_midway) = (0, false);
    for i in 0..40_000u32 {
        let before = store.stats().merged_bytes;
        // Overwrites and deletions among growth, so merges also drop entries.
        store.put(&key(i % 25_000), &i.to_le_bytes()).unwrap();
        if i % 7 == 0 {
            store.delete(&key(i / 2)).unwrap();
        }
        if store.memtable_bytes() != 0 {
            continue;
        }
        // A flush happened with this write: its merges wrote at most the budget and the
        // last fragment's overshoot (a block, its index and filter).
        let written = store.stats().merged_bytes - before;
        assert!(
            written <= budget as u64 + (8 << 10),
            "{written} bytes merged in one flush"
        );
        assert!(store.sorted_runs() <= options.max_runs);
        if let Some(merging) = &store.merging {
            midway += 1;
            if !checked_midway && merging.output().fragments().len() > 1 {
                checked_midway = true;
                let copies: Vec<_> = store.runs().iter().map(|r| copy_run(r, &dir)).collect();
                let reopened = Store::open(scratch("paced-reopened"), options, copies).unwrap();
                let expected: Vec<_> = store
                    .entries_from(b"")
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let got: Vec<_> = reopened
                    .entries_from(b"")
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                assert_eq!(got, expected, "reopened in the middle of a merge");
                for k in (0..25_000u32).step_by(97) {
                    assert_eq!(reopened.get(&key(k)).unwrap(), store.get(&key(k)).unwrap());
                }
            }
        }
    }
    assert!(
        midway > 10 && checked_midway,
        "merges went on over flushes ({midway})"
    );
    let largest = store.runs().iter().map(|r| r.meta().bytes).max().unwrap();
    assert!(
        largest <= budget as u64 + (8 << 10),
        "a merge's files stay near the budget: {largest}"
    );
    for k in 0..25_000u32 {
        let expected = (0..40_000u32)
            .rev()
            .find_map(|i| {
                let deleted = i % 7 == 0 && i / 2 == k;
                let put = i % 25_000 == k;
                (deleted || put).then_some((deleted, i))
            })
            .and_then(|(deleted, i)| (!deleted).then(|| i.to_le_bytes().to_vec()));
        assert_eq!(store.get(&key(k)).unwrap(), expected, "key {k}");
    }
}

#[test]
fn a_checkpoint_leaves_its_merges_to_the_next_write() {
    let mut store = Store::create(scratch("owed"), small()).unwrap();
    for round in 0..2u32 {
        for i in 0..50u32 {
            store.put(&key(round * 100 + i), b"value").unwrap();
        }
        store.checkpoint().unwrap();
    }
    // Two runs of the same size: a flush would have merged them.
    assert_eq!((store.sorted_runs(), store.stats().merges), (2, 0));
    store.put(&key(7), b"later").unwrap();
    assert_eq!((store.sorted_runs(), store.stats().merges), (1, 1));
    assert_eq!(store.get(&key(7)).unwrap(), Some(b"later".to_vec()));
    assert_eq!(store.get(&key(149)).unwrap(), Some(b"value".to_vec()));
}

#[test]
fn a_range_reads_the_memtable_and_runs_within_its_bounds() {
    let dir = scratch("range");
    let mut store = Store::create(&dir, small()).unwrap();
    for i in 0..300u32 {
        store.put(&key(i), b"old").unwrap();
    }
    store.flush().unwrap();
    for i in (0..300u32).step_by(3) {
        store.put(&key(i), b"new").unwrap();
    }
    store.delete(&key(101)).unwrap();
    let range: Vec<(Vec<u8>, Vec<u8>)> = store
        .entries_between(&key(99), Some(&key(105)))
        .unwrap()
        .map(|e| {
            let (k, v) = e.unwrap();
            (k, v.unwrap())
        })
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = [99, 100, 102, 103, 104]
        .iter()
        .map(|i| {
            (
                key(*i),
                if i % 3 == 0 {
                    b"new".to_vec()
                } else {
                    b"old".to_vec()
                },
            )
        })
        .collect();
    assert_eq!(range, expected);
    assert_eq!(store.entries_between(&key(298), None).unwrap().count(), 2);
}
