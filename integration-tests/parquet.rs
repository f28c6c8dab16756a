//! `'format' = 'parquet'` against readers and writers Eddy did not write: pyarrow and
//! DuckDB read what Eddy writes (rows, types, row groups with statistics and page
//! indexes), and Eddy reads what they write (their codecs, row groups, wider and narrower
//! types, columns the table lacks or the file lacks). The exactly-once Parquet sink on S3
//! under kills is part of the chaos job ([`crate::chaos`]).

use crate::row;
use crate::s3::S3Server;
use crate::support::{Scratch, assert_result_in, python, run_ok, run_script};

/// Eddy writes 5000 rows of nine types at parallelism 2, with a checkpoint every 100 ms
/// (each rolls the part files) and small row groups: pyarrow reads them with Eddy's types
/// and every value as Python computes it, every row group with statistics and page
/// indexes; DuckDB reads the same rows and types.
#[test]
fn parquet_written_by_eddy_is_read_by_pyarrow_and_duckdb() {
    let scratch = Scratch::new("parquet-write");
    let out = scratch.path().join("out");
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '20000',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '5000');
             CREATE TABLE out (id BIGINT, small INT, half DOUBLE, price DECIMAL(10, 2), name STRING,
               even BOOLEAN, maybe STRING, day DATE, ts TIMESTAMP(3))
               WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet',
               'parquet.block.size' = '8kb', 'parquet.compression' = 'zstd');
             INSERT INTO out SELECT id, CAST(id % 100 AS INT), CAST(id AS DOUBLE) / 2,
               CAST(id AS DECIMAL(10, 2)) / 4, CONCAT('n', CAST(id AS STRING)), id % 2 = 0,
               CASE WHEN id % 3 = 0 THEN CAST(NULL AS STRING) ELSE 'x' END,
               CAST('2024-02-29' AS DATE),
               TIMESTAMPADD(SECOND, CAST(id AS INT), TIMESTAMP '2024-01-01 00:00:00') FROM seq;",
            out.display()
        ),
        2,
    );
    let printed = python(&format!(
        r#"
import datetime, decimal, glob, duckdb, pyarrow as pa, pyarrow.parquet as pq
files = sorted(glob.glob('{dir}/*.parquet'))
assert files and not glob.glob('{dir}/.*'), files
expected_schema = pa.schema([('id', pa.int64()), ('small', pa.int32()), ('half', pa.float64()),
    ('price', pa.decimal128(10, 2)), ('name', pa.string()), ('even', pa.bool_()),
    ('maybe', pa.string()), ('day', pa.date32()), ('ts', pa.timestamp('ms'))])
groups = 0
for f in files:
    meta = pq.ParquetFile(f).metadata
    for g in range(meta.num_row_groups):
        groups += 1
        for c in range(meta.num_columns):
            column = meta.row_group(g).column(c)
            assert column.is_stats_set and column.statistics.has_null_count, (f, g, c)
            assert column.has_column_index and column.has_offset_index, (f, g, c)
table = pa.concat_tables([pq.read_table(f) for f in files])
assert table.schema.remove_metadata() == expected_schema, table.schema
rows = sorted(table.to_pylist(), key=lambda r: r['id'])
def want(i):
    return {{'id': i, 'small': i % 100, 'half': i / 2, 'price': decimal.Decimal(i * 25).scaleb(-2),
        'name': f'n{{i}}', 'even': i % 2 == 0, 'maybe': None if i % 3 == 0 else 'x',
        'day': datetime.date(2024, 2, 29),
        'ts': datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i)}}
assert rows == [want(i) for i in range(1, 5001)], [r for r in rows if r != want(r['id'])][:3]
duck = duckdb.sql("SELECT count(*), sum(id), sum(price), count(maybe), max(ts), "
    "typeof(any_value(price)), typeof(any_value(ts)), typeof(any_value(day)), "
    "typeof(any_value(small)) FROM read_parquet('{dir}/*.parquet')").fetchall()
assert duck == [(5000, 12502500, decimal.Decimal('3125625.00'), 3334,
    datetime.datetime(2024, 1, 1, 1, 23, 20), 'DECIMAL(10,2)', 'TIMESTAMP', 'DATE',
    'INTEGER')], duck
print(len(files), groups)
"#,
        dir = out.display()
    ));
    let counts: Vec<usize> = printed
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    // Two subtasks, rolled at checkpoints; 8 kB row groups.
    assert!(
        counts[0] >= 2 && counts[1] > counts[0],
        "files, row groups: {counts:?}"
    );
}

/// pyarrow (snappy, 700-row groups, microsecond times, a column the table lacks) and
/// DuckDB (zstd, 500-row groups) write 5000 rows; Eddy reads them at parallelism 1 and 4
/// (row groups dealt over the subtasks) into the table's types, a column no file has as
/// NULL.
#[test]
fn parquet_written_by_pyarrow_and_duckdb_is_read_by_eddy() {
    let scratch = Scratch::new("parquet-read");
    let dir = scratch.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    python(&format!(
        r#"
import datetime, decimal, duckdb, pyarrow as pa, pyarrow.parquet as pq
ids = range(1, 3001)
pq.write_table(pa.table({{
    'id': pa.array(ids, pa.int64()),
    'small': pa.array([i % 100 for i in ids], pa.int32()),
    'name': pa.array([None if i % 7 == 0 else f'n{{i}}' for i in ids]),
    'price': pa.array([decimal.Decimal(i).scaleb(-3) for i in ids], pa.decimal128(12, 3)),
    'ts': pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i) for i in ids],
        pa.timestamp('us')),
    'd': pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 30) for i in ids]),
    'flag': pa.array([i % 2 == 0 for i in ids]),
    'extra': pa.array([1.5] * len(ids)),
}}), '{dir}/a.parquet', row_group_size=700)
duckdb.sql("COPY (SELECT i::BIGINT AS id, (i % 100)::INTEGER AS small, "
    "CASE WHEN i % 7 = 0 THEN NULL ELSE 'n' || i END AS name, (i / 1000)::DECIMAL(12, 3) AS price, "
    "TIMESTAMP '2024-01-01' + to_seconds(i) AS ts, DATE '2024-01-01' + (i % 30)::INTEGER AS d, "
    "i % 2 = 0 AS flag FROM range(3001, 5001) r(i)) "
    "TO '{dir}/b.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 500)")
"#,
        dir = dir.display()
    ));
    let script = format!(
        "CREATE TABLE src (id BIGINT, small BIGINT, name STRING, price DECIMAL(12, 3),
           ts TIMESTAMP(3), d DATE, flag BOOLEAN, gone STRING)
           WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');
         CREATE TABLE o (flag BOOLEAN, c BIGINT, ids BIGINT, smalls BIGINT, names BIGINT,
           gone BIGINT, price DECIMAL(20, 3), last_day STRING, first_ts STRING, secs BIGINT)
           WITH ('connector' = 'print');
         INSERT INTO o SELECT flag, COUNT(*), SUM(id), SUM(small), COUNT(name), COUNT(gone),
           SUM(price), CAST(MAX(d) AS STRING), CAST(MIN(ts) AS STRING),
           SUM(EXTRACT(SECOND FROM ts)) FROM src GROUP BY flag;",
        dir.display()
    );
    let expected = [false, true]
        .into_iter()
        .map(|even| {
            let ids: Vec<i64> = (1..=5000).filter(|i| (i % 2 == 0) == even).collect();
            let sum: i64 = ids.iter().sum();
            let last_day = 1 + ids.iter().map(|i| i % 30).max().unwrap();
            row![
                even,
                ids.len(),
                sum,
                ids.iter().map(|i| i % 100).sum::<i64>(),
                ids.iter().filter(|i| *i % 7 != 0).count(),
                0,
                format!("{}.{:03}", sum / 1000, sum % 1000),
                format!("2024-01-{last_day:02}"),
                format!("2024-01-01 00:00:0{}.000", ids[0]),
                ids.iter().map(|i| i % 60).sum::<i64>()
            ]
        })
        .collect();
    assert_result_in(&scratch, &script, expected);
    // Queries that use some columns (the others are not read) or none.
    let table = script.split(';').next().unwrap();
    let counts = format!(
        "{table}; CREATE TABLE o (c BIGINT, names BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT COUNT(*), COUNT(name) FROM src WHERE small < 50;"
    );
    let names = (1..=5000).filter(|i| i % 100 < 50 && i % 7 != 0).count();
    assert_result_in(&scratch, &counts, vec![row![2500, names]]);
    let count = format!(
        "{table}; CREATE TABLE o (c BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT COUNT(*) FROM src;"
    );
    assert_result_in(&scratch, &count, vec![row![5000]]);
}

/// pyarrow writes lists (of numbers with NULL elements and NULL lists, of strings, of
/// structs holding lists); Eddy reads them as ARRAY columns, reads elements, and writes
/// them back to Parquet, where pyarrow reads the same lists and DuckDB lists of its types.
#[test]
fn parquet_lists_are_arrays_read_and_written() {
    let scratch = Scratch::new("parquet-lists");
    let (input, out) = (scratch.path().join("in"), scratch.path().join("out"));
    std::fs::create_dir_all(&input).unwrap();
    let lists = r#"
ids = list(range(200))
def nums(i): return None if i % 11 == 0 else [None if j == 2 else i * j for j in range(i % 5)]
def items(i): return [{'sku': f's{i}_{j}', 'sizes': list(range(j))} for j in range(i % 3)]
def tags(i): return [f't{j}' for j in range(i % 4)]
"#;
    python(&format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
{lists}
item = pa.struct([('sku', pa.string()), ('sizes', pa.list_(pa.int32()))])
pq.write_table(pa.table({{'id': pa.array(ids, pa.int64()),
    'nums': pa.array([nums(i) for i in ids], pa.list_(pa.int64())),
    'items': pa.array([items(i) for i in ids], pa.list_(item)),
    'tags': pa.array([tags(i) for i in ids], pa.list_(pa.string()))}}),
    '{dir}/a.parquet', row_group_size=64)
"#,
        dir = input.display()
    ));
    let columns = "id BIGINT, nums ARRAY<BIGINT>, items ARRAY<ROW<sku STRING, sizes ARRAY<INT>>>,
        tags ARRAY<STRING>";
    run_ok(
        &scratch,
        &format!(
            "CREATE TABLE src ({columns}) WITH ('connector' = 'filesystem', 'path' = '{}',
               'format' = 'parquet');
             CREATE TABLE out ({columns}, n INT, second BIGINT) WITH ('connector' = 'filesystem',
               'path' = '{}', 'format' = 'parquet');
             INSERT INTO out SELECT *, CARDINALITY(nums), nums[2] FROM src;",
            input.display(),
            out.display()
        ),
        2,
    );
    let printed = python(&format!(
        r#"
import glob, duckdb, pyarrow as pa, pyarrow.parquet as pq
{lists}
table = pa.concat_tables([pq.read_table(f) for f in sorted(glob.glob('{dir}/*.parquet'))])
rows = sorted(table.to_pylist(), key=lambda r: r['id'])
def want(i):
    n = nums(i)
    return {{'id': i, 'nums': n, 'items': items(i), 'tags': tags(i),
        'n': None if n is None else len(n), 'second': n[1] if n and len(n) > 1 else None}}
assert rows == [want(i) for i in ids], [r for r in rows if r != want(r['id'])][:3]
total, kind = duckdb.sql("SELECT sum(len(nums)), typeof(any_value(items)) "
    "FROM read_parquet('{dir}/*.parquet')").fetchall()[0]
assert total == sum(len(nums(i)) for i in ids if nums(i) is not None), total
print(kind)
"#,
        dir = out.display()
    ));
    assert_eq!(printed.trim(), "STRUCT(sku VARCHAR, sizes INTEGER[])[]");
}

/// A query's bounds skip the row groups whose statistics show no row can pass them (20
/// groups of 500 sorted ids, dates and decimals), and skip nothing they must not: each
/// query gives Python's answer at parallelism 1 and 4, NULLs, other types and `OR`
/// included, and `EXPLAIN` shows the bounds.
#[test]
fn row_groups_are_skipped_by_their_statistics_and_results_stay_exact() {
    let scratch = Scratch::new("parquet-skip");
    let dir = scratch.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    python(&format!(
        r#"
import datetime, decimal, pyarrow as pa, pyarrow.parquet as pq
ids = range(1, 10001)
pq.write_table(pa.table({{
    'id': pa.array(ids, pa.int64()),
    'day': pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i // 100) for i in ids]),
    'price': pa.array([decimal.Decimal(i).scaleb(-2) for i in ids], pa.decimal128(12, 2)),
    'v': pa.array([None if i % 7 == 0 else i % 50 for i in ids], pa.int32()),
    'score': pa.array([i / 4 for i in ids], pa.float64()),
}}), '{dir}/a.parquet', row_group_size=500)
"#,
        dir = dir.display()
    ));
    let table = format!(
        "CREATE TABLE src (id BIGINT, day DATE, price DECIMAL(12, 2), v INT, score DOUBLE)
           WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');
         CREATE TABLE o (c BIGINT, s BIGINT) WITH ('connector' = 'print');",
        dir.display()
    );
    // Each condition, and which ids pass it.
    type Passes = fn(i64) -> bool;
    let cases: [(&str, Passes); 12] = [
        ("id > 9000", |i| i > 9000),
        ("id > 9250", |i| i > 9250),
        ("id < 1250", |i| i < 1250),
        ("id >= 4750 AND 5250 >= id", |i| (4750..=5250).contains(&i)),
        ("id >= 501 AND id < 1001", |i| (501..1001).contains(&i)),
        ("5000 = id", |i| i == 5000),
        ("id <= 0", |_| false),
        ("day >= DATE '2024-04-01'", |i| i / 100 >= 91),
        ("price < 20.00", |i| i < 2000),
        ("v = 3 AND id > 9500", |i| {
            i > 9500 && i % 7 != 0 && i % 50 == 3
        }),
        ("id < 100 OR id > 9900", |i| !(100..=9900).contains(&i)),
        ("score > 2400", |i| i > 9600),
    ];
    for (condition, keeps) in &cases {
        let kept: Vec<i64> = (1..=10000).filter(|i| keeps(*i)).collect();
        let script =
            format!("{table} INSERT INTO o SELECT COUNT(*), SUM(id) FROM src WHERE {condition};");
        // A global aggregate of no rows emits nothing, as in Flink's streaming mode.
        let expected = match kept.is_empty() {
            true => Vec::new(),
            false => vec![row![kept.len(), kept.iter().sum::<i64>()]],
        };
        assert_result_in(&scratch, &script, expected);
    }
    // Which row groups were skipped, as the reader logs them at parallelism 1.
    let skipped = |condition: &str| {
        let script = scratch.write(
            "skip.sql",
            &format!("{table} INSERT INTO o SELECT COUNT(*), SUM(id) FROM src WHERE {condition};"),
        );
        let output = crate::support::eddy()
            .env("EDDY_LOG", "eddy_connectors::filesystem::parquet=debug")
            .arg("run")
            .arg(&script)
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stderr)
            .matches("skipped by its statistics")
            .count()
    };
    assert_eq!(skipped("id > 9000"), 18);
    assert_eq!(skipped("id > 9250"), 18);
    assert_eq!(skipped("id < 1250"), 17);
    assert_eq!(skipped("id >= 4750 AND 5250 >= id"), 18);
    assert_eq!(skipped("id >= 501 AND id < 1001"), 19);
    assert_eq!(skipped("day >= DATE '2024-04-01'"), 18);
    assert_eq!(skipped("id < 100 OR id > 9900"), 0);
    assert_eq!(skipped("score > 2400"), 0);
    let plan = scratch.write(
        "plan.sql",
        &format!("{table} INSERT INTO o SELECT COUNT(*), SUM(id) FROM src WHERE id > 9000;"),
    );
    let explained = crate::support::eddy()
        .arg("explain")
        .arg(&plan)
        .output()
        .unwrap();
    let explained = String::from_utf8_lossy(&explained.stdout);
    assert!(
        explained.contains("Source: src [filesystem] (skips by statistics: id > 9000)"),
        "{explained}"
    );
}

/// A file that is not Parquet, and one whose column cannot be read as the table's type,
/// fail the job with errors naming the file; nothing panics.
#[test]
fn unreadable_parquet_files_fail_naming_the_file() {
    let scratch = Scratch::new("parquet-bad");
    let dir = scratch.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("truncated.parquet"),
        b"PAR1 not really parquet PAR1",
    )
    .unwrap();
    let script = format!(
        "CREATE TABLE src (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}',
           'format' = 'parquet');
         CREATE TABLE o (n BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT COUNT(*) FROM src;",
        dir.display()
    );
    // The job fails, without a panic, saying `expected`.
    let fails_saying = |expected: &str| {
        let output = run_script(&scratch, &script, 1);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    fails_saying("truncated.parquet': not a readable Parquet file");
    std::fs::remove_file(dir.join("truncated.parquet")).unwrap();
    python(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({{'id': ['a', 'b']}}), '{}/text.parquet')",
        dir.display()
    ));
    fails_saying("text.parquet': column 'id' is Utf8 in the file");
}

/// A partitioned Parquet table on S3 (moto), written exactly once with 100 ms checkpoints
/// and success files: pyarrow reads each partition's files (the data columns only, as
/// Flink writes them), and Eddy reads the table back with its partition values.
#[test]
fn partitioned_parquet_tables_on_s3_round_trip() {
    let s3 = S3Server::start("lake");
    let scratch = Scratch::new("parquet-s3");
    let options = s3.options();
    let table = |name: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT, note STRING, k BIGINT) PARTITIONED BY (k)
               WITH ('connector' = 'filesystem', 'path' = 's3://lake/t', 'format' = 'parquet',
               'sink.partition-commit.policy.kind' = 'success-file', {options});"
        )
    };
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen',
               'rows-per-second' = '10000', 'fields.id.kind' = 'sequence',
               'fields.id.start' = '1', 'fields.id.end' = '3000');
             {}
             INSERT INTO out SELECT id, CONCAT('n', CAST(id AS STRING)), id % 3 FROM seq;",
            table("out")
        ),
        2,
    );
    for k in 0..3 {
        let (rows, hidden) = s3.parquet_rows("lake", &format!("t/k={k}/"));
        assert!(hidden.is_empty(), "{hidden:?}");
        let mut expected: Vec<Vec<String>> = (1..=3000i64)
            .filter(|i| i % 3 == k)
            .map(|i| row![i, format!("n{i}")])
            .collect();
        expected.sort();
        assert_eq!(rows, expected, "partition k={k}");
        let keys = s3.keys("lake", &format!("t/k={k}/"));
        assert!(keys.contains(&format!("t/k={k}/_SUCCESS")), "{keys:?}");
    }
    let read = format!(
        "{}
         CREATE TABLE o (k BIGINT, c BIGINT, s BIGINT, notes BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT k, COUNT(*), SUM(id), COUNT(DISTINCT note) FROM src GROUP BY k;",
        table("src")
    );
    let expected = (0..3)
        .map(|k| {
            let ids: Vec<i64> = (1..=3000).filter(|i| i % 3 == k).collect();
            row![k, ids.len(), ids.iter().sum::<i64>(), ids.len()]
        })
        .collect();
    assert_result_in(&scratch, &read, expected);
}
