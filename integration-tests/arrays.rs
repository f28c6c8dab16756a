//! ARRAY columns through Eddy's operators: grouped by (an ARRAY as a GROUP BY key, in the
//! LSM store's keys), held in a join's state, read element by element, at parallelism 1
//! and 4 (so across the exchanges' Arrow frames).

use std::collections::BTreeMap;

use crate::row;
use crate::support::{Scratch, assert_result_in};

/// Row `i`'s tags: `i % 4` of them, some repeated between rows.
fn tags(i: i64) -> Vec<String> {
    (0..i % 4).map(|j| format!("t{}", (i * j) % 5)).collect()
}

/// 300 rows of JSON: an id, its tags, and numbers with a NULL element.
fn rows(scratch: &Scratch) -> std::path::PathBuf {
    let lines: Vec<String> = (0..300)
        .map(|i| {
            serde_json::json!({"id": i, "tags": tags(i), "nums": [i, null, i * 2]}).to_string()
        })
        .collect();
    scratch.write("in/rows.json", &(lines.join("\n") + "\n"));
    scratch.path().join("in")
}

fn table(dir: &std::path::Path) -> String {
    format!(
        "CREATE TABLE src (id BIGINT, tags ARRAY<STRING>, nums ARRAY<BIGINT>) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'json');",
        dir.display()
    )
}

/// How the print sink shows an element that may be NULL.
fn shown(value: Option<&String>) -> String {
    value.cloned().unwrap_or_else(|| "null".into())
}

#[test]
fn arrays_are_group_by_keys_in_memory_and_in_the_lsm_store() {
    let scratch = Scratch::new("arrays-group");
    let dir = rows(&scratch);
    let mut groups: BTreeMap<Vec<String>, (i64, i64)> = BTreeMap::new();
    for i in 0..300 {
        let group = groups.entry(tags(i)).or_default();
        group.0 += 1;
        group.1 += i;
    }
    let expected: Vec<Vec<String>> = groups
        .iter()
        .map(|(tags, (count, sum))| {
            row![
                shown(tags.first()),
                shown(tags.get(1)),
                tags.len(),
                count,
                sum
            ]
        })
        .collect();
    for backend in ["hashmap", "rocksdb"] {
        let script = format!(
            "SET 'state.backend.type' = '{backend}';
             {}
             CREATE TABLE o (first_tag STRING, second_tag STRING, n INT, c BIGINT, s BIGINT)
               WITH ('connector' = 'print');
             INSERT INTO o SELECT tags[1], tags[2], CARDINALITY(tags), COUNT(*), SUM(id)
               FROM src GROUP BY tags;",
            table(&dir)
        );
        assert_result_in(&scratch, &script, expected.clone());
    }
}

#[test]
fn arrays_held_in_a_joins_state_come_out_whole() {
    let scratch = Scratch::new("arrays-join");
    let dir = rows(&scratch);
    let script = format!(
        "{}
         CREATE TABLE o (id BIGINT, n INT, last_tag STRING, second_num BIGINT, third_num BIGINT,
           text STRING) WITH ('connector' = 'print');
         INSERT INTO o SELECT a.id, CARDINALITY(b.tags), b.tags[CARDINALITY(b.tags)], b.nums[2],
           b.nums[3], CAST(b.nums AS STRING) FROM src a JOIN src b ON a.id = b.id + 1;",
        table(&dir)
    );
    let expected = (1..300i64)
        .map(|id| {
            let before = tags(id - 1);
            // The print sink separates columns with ", " as the array text does.
            let mut row = row![id, before.len(), shown(before.last()), "null", (id - 1) * 2];
            row.extend([
                format!("[{}", id - 1),
                "NULL".into(),
                format!("{}]", (id - 1) * 2),
            ]);
            row
        })
        .collect();
    assert_result_in(&scratch, &script, expected);
}
