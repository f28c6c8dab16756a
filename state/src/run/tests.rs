use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;

/// A fresh directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-state-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

fn write(path: &Path, entries: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> RunMeta {
    let mut writer = RunWriter::create(path).unwrap();
    for (k, v) in entries {
        writer.add(k, v.as_deref()).unwrap();
    }
    writer.finish().unwrap()
}

#[test]
fn a_run_answers_for_every_key_it_holds_and_no_other() {
    let dir = scratch("answers");
    let entries: BTreeMap<_, _> = (0..20_000u32)
        .map(|i| {
            (
                key(i * 2),
                (i % 7 != 0).then(|| vec![i as u8; (i % 50) as usize]),
            )
        })
        .collect();
    let meta = write(&dir.join("a.run"), &entries);
    assert_eq!(meta.entries, 20_000);
    assert_eq!(
        meta.deletions,
        entries.values().filter(|v| v.is_none()).count() as u64
    );
    let run = Run::open(dir.join("a.run")).unwrap();
    assert!(
        run.blocks.len() > 10,
        "spans many blocks: {}",
        run.blocks.len()
    );
    for i in (0..20_000u32).step_by(37) {
        let expected = match &entries[&key(i * 2)] {
            Some(v) => Lookup::Found(v.clone()),
            None => Lookup::Deleted,
        };
        assert_eq!(run.get(&key(i * 2)).unwrap(), expected);
        assert_eq!(run.get(&key(i * 2 + 1)).unwrap(), Lookup::Absent);
    }
    assert_eq!(
        run.get(b"zzz").unwrap(),
        Lookup::Absent,
        "past the last key"
    );
    assert_eq!(run.get(b"").unwrap(), Lookup::Absent);
    let from: Vec<_> = run.entries_from(&key(39_990)).map(Result::unwrap).collect();
    let expected: Vec<_> = entries
        .range(key(39_990)..)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(from, expected);
    assert_eq!(run.entries_from(b"").count(), 20_000);
}

#[test]
fn keys_out_of_order_are_refused_and_leave_no_file() {
    let dir = scratch("order");
    let mut writer = RunWriter::create(dir.join("b.run")).unwrap();
    writer.add(b"b", Some(b"1")).unwrap();
    let error = writer.add(b"a", Some(b"2")).unwrap_err();
    assert!(error.to_string().contains("added after"), "{error}");
    assert!(
        writer.add(b"b", None).is_err(),
        "a repeated key is out of order too"
    );
    drop(writer);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn an_empty_run_opens_and_holds_nothing() {
    let dir = scratch("empty");
    write(&dir.join("e.run"), &BTreeMap::new());
    let run = Run::open(dir.join("e.run")).unwrap();
    assert_eq!(run.get(b"a").unwrap(), Lookup::Absent);
    assert_eq!(run.entries_from(b"").count(), 0);
}

#[test]
fn every_corrupted_byte_is_refused_naming_the_file_never_read_as_data() {
    let dir = scratch("corrupt");
    let entries: BTreeMap<_, _> = (0..300u32).map(|i| (key(i), Some(key(i + 1)))).collect();
    let path = dir.join("c.run");
    write(&path, &entries);
    let good = std::fs::read(&path).unwrap();
    let damaged = dir.join("damaged.run");
    // Flip each byte in turn: the run either fails to open, or fails where it reads the
    // damaged part; it never answers with other data.
    for at in (0..good.len()).step_by(7) {
        let mut bytes = good.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&damaged, &bytes).unwrap();
        let read =
            Run::open(&damaged).and_then(|run| run.entries_from(b"").collect::<Result<Vec<_>>>());
        match read {
            Ok(read) => panic!("byte {at} flipped, yet {} entries read", read.len()),
            Err(error) => assert!(error.to_string().contains("damaged.run"), "{error}"),
        }
    }
    std::fs::write(&damaged, &good[..good.len() - 1]).unwrap();
    let error = Run::open(&damaged).unwrap_err();
    assert!(error.to_string().contains("magic"), "truncated: {error}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn a_run_reads_back_what_was_written(
        entries in prop::collection::btree_map(
            prop::collection::vec(any::<u8>(), 0..40),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..300)),
            0..400,
        ),
        probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..50),
    ) {
        let dir = scratch("prop");
        write(&dir.join("p.run"), &entries);
        let run = Run::open(dir.join("p.run")).unwrap();
        for probe in probes.iter().chain(entries.keys()) {
            let expected = match entries.get(probe) {
                Some(Some(v)) => Lookup::Found(v.clone()),
                Some(None) => Lookup::Deleted,
                None => Lookup::Absent,
            };
            prop_assert_eq!(run.get(probe).unwrap(), expected);
        }
        let all: BTreeMap<_, _> = run.entries_from(b"").map(Result::unwrap).collect();
        prop_assert_eq!(all, entries);
    }
}
