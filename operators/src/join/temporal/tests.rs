use super::*;
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
