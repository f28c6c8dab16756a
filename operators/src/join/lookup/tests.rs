use super::*;
use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::datatypes::{Field, Schema};
use datafusion_physical_expr::expressions::Column;
use std::sync::Mutex;
use std::time::Duration;

/// A dimension table `(id, name)` in memory; counts the keys it was asked for.
#[derive(Debug)]
struct Names {
    rows: Arc<Mutex<Vec<(i64, String)>>>,
    asked: Arc<Mutex<Vec<i64>>>,
}

impl Lookup for Names {
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<(RecordBatch, Vec<u32>)> {
        let keys = keys[0].as_primitive::<arrow::datatypes::Int64Type>();
        let (mut ids, mut names, mut matched) = (Vec::new(), Vec::new(), Vec::new());
        for (k, key) in keys.values().iter().enumerate() {
            self.asked.lock().unwrap().push(*key);
            for (id, name) in self.rows.lock().unwrap().iter() {
                if id == key {
                    ids.push(*id);
                    names.push(name.clone());
                    matched.push(k as u32);
                }
            }
        }
        let batch = RecordBatch::try_new(
            table(),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
            ],
        )?;
        Ok((batch, matched))
    }
}

fn table() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn stream_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

struct Fixture {
    rows: Arc<Mutex<Vec<(i64, String)>>>,
    asked: Arc<Mutex<Vec<i64>>>,
}

/// `stream JOIN names FOR SYSTEM_TIME AS OF ... ON k = id`.
fn lookup_join(left_outer: bool, cache: Option<LookupCache>) -> (LookupJoin, Fixture) {
    let rows = Arc::new(Mutex::new(vec![
        (1, "one".to_string()),
        (2, "two".to_string()),
        (2, "deux".to_string()),
    ]));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let fields: Vec<_> = stream_schema()
        .fields()
        .iter()
        .chain(table().fields().iter())
        .cloned()
        .collect();
    let spec = LookupJoinSpec {
        keys: vec![Arc::new(Column::new("k", 0))],
        key_types: vec![DataType::Int64],
        table_side: Vec::new(),
        table_schema: table(),
        filter: None,
        left_outer,
        schema: Arc::new(Schema::new(fields)),
        cache,
    };
    let names = Names {
        rows: rows.clone(),
        asked: asked.clone(),
    };
    let mut join = LookupJoin::new(spec, Box::new(names)).unwrap();
    join.clock = crate::ttl::test_clock::now;
    (join, Fixture { rows, asked })
}

fn stream(rows: &[(Option<i64>, i64)], op: Op) -> Chunk {
    let batch = RecordBatch::try_new(
        stream_schema(),
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .unwrap();
    Chunk::from_ops(batch, vec![op; rows.len()])
}

fn run(join: &mut LookupJoin, chunk: Chunk) -> Vec<String> {
    let mut out = Vec::new();
    join.process(chunk, &mut out).unwrap();
    out.iter().flat_map(Chunk::to_pretty).collect()
}

#[test]
fn each_row_joins_the_rows_its_key_holds_when_it_is_processed() {
    let (mut join, fixture) = lookup_join(false, None);
    assert_eq!(
        run(
            &mut join,
            stream(
                &[(Some(2), 10), (Some(3), 11), (None, 12), (Some(2), 13)],
                Op::Insert
            )
        ),
        [
            "+I 2 10 2 two",
            "+I 2 10 2 deux",
            "+I 2 13 2 two",
            "+I 2 13 2 deux"
        ]
    );
    // One lookup per distinct key of a chunk; a NULL key is not looked up.
    assert_eq!(*fixture.asked.lock().unwrap(), [2, 3]);
    // Without a cache the table's change is seen at once.
    fixture.rows.lock().unwrap().push((3, "three".into()));
    assert_eq!(
        run(&mut join, stream(&[(Some(3), 14)], Op::Delete)),
        ["-D 3 14 3 three"]
    );
}

#[test]
fn a_left_lookup_join_pads_rows_that_find_nothing() {
    let (mut join, _) = lookup_join(true, None);
    assert_eq!(
        run(
            &mut join,
            stream(&[(Some(3), 1), (Some(1), 2), (None, 3)], Op::Insert)
        ),
        ["+I 3 1 . .", "+I 1 2 1 one", "+I . 3 . ."]
    );
}

#[test]
fn the_cache_answers_until_its_entries_expire() {
    use crate::ttl::test_clock;
    let cache = LookupCache {
        max_rows: 1,
        expire_after_write: Some(Duration::from_millis(100)),
        expire_after_access: None,
        cache_missing_keys: true,
    };
    let (mut join, fixture) = lookup_join(false, Some(cache));
    test_clock::set(0);
    assert_eq!(
        run(&mut join, stream(&[(Some(1), 1)], Op::Insert)),
        ["+I 1 1 1 one"]
    );
    fixture.rows.lock().unwrap()[0].1 = "uno".into();
    test_clock::set(99);
    assert_eq!(
        run(&mut join, stream(&[(Some(1), 2)], Op::Insert)),
        ["+I 1 2 1 one"]
    );
    test_clock::set(100);
    assert_eq!(
        run(&mut join, stream(&[(Some(1), 3)], Op::Insert)),
        ["+I 1 3 1 uno"]
    );
    // A missing key is cached too; one key at most: 4 pushes 1 out.
    assert!(run(&mut join, stream(&[(Some(4), 4)], Op::Insert)).is_empty());
    assert!(run(&mut join, stream(&[(Some(4), 5)], Op::Insert)).is_empty());
    assert_eq!(
        run(&mut join, stream(&[(Some(1), 6)], Op::Insert)),
        ["+I 1 6 1 uno"]
    );
    assert_eq!(*fixture.asked.lock().unwrap(), [1, 1, 4, 1]);
}
