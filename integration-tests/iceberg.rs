//! `'connector' = 'iceberg'` against readers and writers Eddy did not write: pyiceberg's
//! SQL catalog on a real PostgreSQL server. pyiceberg creates a table and appends to it,
//! Eddy appends exactly once (snapshots interleaved with pyiceberg's), pyiceberg reads
//! every row back and appends on top of Eddy's snapshots; DuckDB reads the data files
//! the table's metadata lists; the example reading Avro from Kafka into a table runs. The
//! exactly-once sink under kills is part of the chaos job ([`crate::chaos`]), on S3.

use crate::avro::{Registry, expected_users, produce_users};
use crate::kafka::Broker;
use crate::postgres::Postgres;
use crate::support::{Scratch, python, run_ok, run_script};

/// pyiceberg's catalog `eddy` over `pg`, as a Python expression, with the warehouse
/// `warehouse` and more arguments `extra` (`, key=value`…).
pub fn pyiceberg_catalog(pg: &Postgres, warehouse: &str, extra: &str) -> String {
    pyiceberg_catalog_named("eddy", pg, warehouse, extra)
}

/// [`pyiceberg_catalog`] of the catalog `name`.
fn pyiceberg_catalog_named(name: &str, pg: &Postgres, warehouse: &str, extra: &str) -> String {
    format!(
        "__import__('pyiceberg.catalog.sql', fromlist=['SqlCatalog']).SqlCatalog('{name}', \
         uri='postgresql+psycopg2://postgres@127.0.0.1:{}/postgres', warehouse='{warehouse}'{extra})",
        pg.port()
    )
}

/// The `WITH` options of an Iceberg table `namespace.table` of the catalog on `pg`.
pub fn iceberg_options(pg: &Postgres, namespace: &str, table: &str, warehouse: &str) -> String {
    format!(
        "'connector' = 'iceberg', 'catalog-name' = 'eddy', 'catalog-type' = 'jdbc',
         'uri' = 'jdbc:postgresql://127.0.0.1:{}/postgres', 'jdbc.user' = 'postgres',
         'catalog-database' = '{namespace}', 'catalog-table' = '{table}',
         'warehouse' = '{warehouse}'",
        pg.port()
    )
}

/// A SQL catalog on a fresh PostgreSQL server with a local warehouse, for a test `name`:
/// the server, the scratch directory, the warehouse's `file://` URL and pyiceberg's
/// catalog over them (a Python expression).
fn local_lake(name: &str) -> (Postgres, Scratch, String, String) {
    let pg = Postgres::start(name);
    let scratch = Scratch::new(name);
    let warehouse = format!("file://{}", scratch.path().join("warehouse").display());
    let catalog = pyiceberg_catalog(&pg, &warehouse, "");
    (pg, scratch, warehouse, catalog)
}

/// pyiceberg creates `lake.orders` (six types, a required id) and appends a row; Eddy
/// appends 4000 rows at parallelism 2 with 100 ms checkpoints; pyiceberg reads all 4001
/// with their types, finds each Eddy snapshot's transaction in its summary, no data file
/// the metadata does not list, and appends again on top of Eddy's manifests; DuckDB reads
/// the listed Parquet files to the same sums.
#[test]
fn iceberg_tables_are_shared_with_pyiceberg_and_duckdb() {
    let (pg, scratch, warehouse, catalog) = local_lake("iceberg");
    python(&format!(
        r#"
import datetime, decimal, pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import *
catalog = {catalog}
catalog.create_namespace('lake')
schema = Schema(NestedField(1, 'id', LongType(), required=True),
    NestedField(2, 'name', StringType()), NestedField(3, 'price', DecimalType(10, 2)),
    NestedField(4, 'ts', TimestampType()), NestedField(5, 'day', DateType()),
    NestedField(6, 'even', BooleanType()), NestedField(7, 'note', StringType()))
table = catalog.create_table('lake.orders', schema=schema)
table.append(pa.table({{'id': pa.array([0], pa.int64()), 'name': ['zero'],
    'price': pa.array([decimal.Decimal('0.50')], pa.decimal128(10, 2)),
    'ts': pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp('us')),
    'day': pa.array([datetime.date(2024, 1, 1)]), 'even': [True],
    'note': pa.array(['py'], pa.string())}}, schema=table.schema().as_arrow()))
"#
    ));
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '20000',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4000');
             CREATE TABLE orders (id BIGINT NOT NULL, name STRING, price DECIMAL(10, 2),
               ts TIMESTAMP(3), day DATE, even BOOLEAN) WITH ({});
             INSERT INTO orders SELECT id, CONCAT('n', CAST(id AS STRING)),
               CAST(id AS DECIMAL(10, 2)) / 4,
               TIMESTAMPADD(SECOND, CAST(id AS INT), TIMESTAMP '2024-01-01 00:00:00'),
               CAST('2024-02-29' AS DATE), id % 2 = 0 FROM seq;",
            iceberg_options(&pg, "lake", "orders", &warehouse)
        ),
        2,
    );
    let printed = python(&format!(
        r#"
import datetime, decimal, glob, duckdb, pyarrow as pa
catalog = {catalog}
table = catalog.load_table('lake.orders')
rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r['id'])
def want(i):
    if i == 0:
        return {{'id': 0, 'name': 'zero', 'price': decimal.Decimal('0.50'),
            'ts': datetime.datetime(2024, 1, 1), 'day': datetime.date(2024, 1, 1), 'even': True,
            'note': 'py'}}
    return {{'id': i, 'name': f'n{{i}}', 'price': decimal.Decimal(i * 25).scaleb(-2),
        'ts': datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i),
        'day': datetime.date(2024, 2, 29), 'even': i % 2 == 0, 'note': None}}
assert rows == [want(i) for i in range(0, 4001)], [r for r in rows if r != want(r['id'])][:3]
snapshots = table.snapshots()
eddy = [s for s in snapshots if 'eddy.transaction' in s.summary.additional_properties]
assert len(eddy) >= 2 and len(eddy) == len(snapshots) - 1, [s.summary for s in snapshots]
transactions = [s.summary.additional_properties['eddy.transaction'] for s in eddy]
assert len(set(transactions)) == len(transactions), transactions
assert table.current_snapshot().summary.additional_properties['total-records'] == '4001'
listed = sorted(f.removeprefix('file://') for f in table.inspect.files().column('file_path').to_pylist())
on_disk = sorted(glob.glob('{warehouse_dir}/lake/orders/data/*.parquet'))
assert listed == on_disk, (listed, on_disk)
# Each file's statistics in its manifest are its values' (what readers prune files by),
# and filtered scans, which skip files by them, find every row they should.
import pyarrow.parquet as pq
for f in table.inspect.files().to_pylist():
    data = pq.read_table(f['file_path'].removeprefix('file://'))
    for column in ('id', 'name', 'price', 'ts', 'day', 'even', 'note'):
        if column not in data.column_names:
            continue
        metrics = f['readable_metrics'][column]
        values = [v for v in data.column(column).to_pylist() if v is not None]
        assert metrics['value_count'] == data.num_rows, (f['file_path'], column, metrics)
        assert metrics['null_value_count'] == data.num_rows - len(values), (column, metrics)
        if values:
            assert (metrics['lower_bound'], metrics['upper_bound']) == (min(values), max(values)), \
                (f['file_path'], column, metrics, min(values), max(values))
for condition, keep in [
        ("id >= 3990 and even = true", lambda r: r['id'] >= 3990 and r['even']),
        ("price < 2.00", lambda r: r['price'] < 2),
        ("ts >= '2024-01-01T01:06:00'", lambda r: r['ts'] >= datetime.datetime(2024, 1, 1, 1, 6)),
        ("name = 'n17'", lambda r: r['name'] == 'n17')]:
    scanned = sorted(r['id'] for r in table.scan(row_filter=condition).to_arrow().to_pylist())
    assert scanned == [r['id'] for r in rows if keep(r)], (condition, scanned[:5])
duck = duckdb.sql("SELECT count(*), sum(id), sum(price), count(note) FROM read_parquet(?, union_by_name = true)",
    params=[listed]).fetchall()
assert duck == [(4001, 8002000, decimal.Decimal('2000500.50'), 1)], duck
table.append(pa.table({{'id': pa.array([5000], pa.int64()), 'name': ['after'],
    'price': pa.array([None], pa.decimal128(10, 2)), 'ts': pa.array([None], pa.timestamp('us')),
    'day': pa.array([None], pa.date32()), 'even': pa.array([None], pa.bool_()),
    'note': pa.array([None], pa.string())}}, schema=table.schema().as_arrow()))
again = catalog.load_table('lake.orders').scan().to_arrow()
assert again.num_rows == 4002 and sorted(again.column('id').to_pylist())[-1] == 5000
print(len(eddy), len(listed))
"#,
        warehouse_dir = warehouse.trim_start_matches("file://"),
    ));
    eprintln!("snapshots by Eddy, data files: {printed}");
}

/// Without a table in the catalog Eddy creates it (unpartitioned, the columns' types, a
/// NOT NULL column required) and pyiceberg reads it; a job whose columns do not fit the
/// table's schema fails before writing, naming the column; an updating query is refused.
#[test]
fn eddy_creates_missing_tables_and_refuses_columns_that_do_not_fit() {
    let pg = Postgres::start("iceberg-create");
    let scratch = Scratch::new("iceberg-create");
    let warehouse = scratch.path().join("wh").display().to_string();
    let options = iceberg_options(&pg, "made", "events", &warehouse);
    let source = "CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen',
        'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '500');";
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             {source}
             CREATE TABLE events (id BIGINT NOT NULL, score DOUBLE, at TIMESTAMP_LTZ(3))
               WITH ({options});
             INSERT INTO events SELECT id, CAST(id AS DOUBLE) / 8, TO_TIMESTAMP_LTZ(id, 3)
               FROM seq;"
        ),
        1,
    );
    let printed = python(&format!(
        r#"
catalog = {}
table = catalog.load_table('made.events')
print(table.schema())
rows = table.scan().to_arrow()
assert rows.num_rows == 500 and sum(rows.column('id').to_pylist()) == 125250
assert sum(rows.column('score').to_pylist()) == 125250 / 8
assert str(rows.schema.field('at').type) == 'timestamp[us, tz=UTC]', rows.schema
assert min(rows.column('at').to_pylist()).timestamp() == 0.001
print('snapshots', len(table.snapshots()))
"#,
        pyiceberg_catalog(&pg, "", "")
    ));
    assert!(printed.contains("1: id: required long"), "{printed}");
    assert!(printed.contains("2: score: optional double"), "{printed}");
    assert!(printed.contains("3: at: optional timestamptz"), "{printed}");
    let failing = |statements: &str| {
        let output = run_script(
            &scratch,
            &format!(
                "SET 'execution.checkpointing.interval' = '100ms';
                 SET 'restart-strategy.type' = 'none';
                 {source}
                 {statements}"
            ),
            1,
        );
        assert!(!output.status.success(), "{statements} succeeded");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    for (columns, select, message) in [
        (
            "id STRING, score DOUBLE",
            "CAST(id AS STRING), 0.5",
            "column 'id' is Utf8 but Iceberg field 'id' is \"long\"",
        ),
        (
            "id BIGINT, score DOUBLE",
            "id, 0.5",
            "column 'id' may be NULL but Iceberg field 'id' is required",
        ),
        (
            "id BIGINT NOT NULL, other INT",
            "id, 1",
            "column 'other' is not in the Iceberg table",
        ),
    ] {
        let stderr = failing(&format!(
            "CREATE TABLE events ({columns}) WITH ({options});
             INSERT INTO events SELECT {select} FROM seq;"
        ));
        assert!(stderr.contains(message), "{stderr}");
    }
    let stderr = failing(&format!(
        "CREATE TABLE counts (id BIGINT NOT NULL, score DOUBLE) WITH ({options});
         INSERT INTO counts SELECT id % 3, CAST(COUNT(*) AS DOUBLE) FROM seq GROUP BY id % 3;"
    ));
    assert!(stderr.contains("accepts only inserts"), "{stderr}");
    // The failed jobs committed nothing.
    let after = python(&format!(
        "print('snapshots', len({}.load_table('made.events').snapshots()))",
        pyiceberg_catalog(&pg, "", "")
    ));
    assert!(printed.ends_with(&after), "{printed} then {after}");
}

/// pyiceberg creates three tables partitioned by every transform Eddy applies (identity
/// and day; bucket and truncate of ints and strings; year, month and hour) and one by a
/// transform Eddy refuses; Eddy writes 3000 rows into each at parallelism 2 and creates a
/// fourth `PARTITIONED BY` a column. pyiceberg reads every row back, finds each data
/// file's partition tuple equal to its own transforms of every row in the file, and
/// filtered scans, which prune files by those tuples and the manifest lists' summaries,
/// find exactly the rows they should while planning fewer files.
/// Twelve sink subtasks (three tables at parallelism 4) start on a PostgreSQL server that
/// has no catalog tables yet, so all of them create the catalog's tables at once (without
/// restarts: the job may not fail), and every table registers once.
#[test]
fn a_new_catalog_is_created_by_many_subtasks_at_once() {
    let pg = Postgres::start("iceberg-race");
    let scratch = Scratch::new("iceberg-race");
    let warehouse = scratch.path().join("wh").display().to_string();
    let tables: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|t| {
            let options = iceberg_options(&pg, "race", t, &warehouse);
            format!("CREATE TABLE {t} (id BIGINT) WITH ({options});")
        })
        .collect();
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             SET 'restart-strategy.type' = 'none';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
             {}
             INSERT INTO a SELECT id FROM seq;
             INSERT INTO b SELECT id FROM seq;
             INSERT INTO c SELECT id FROM seq;",
            tables.join("\n")
        ),
        4,
    );
    let printed = python(&format!(
        "catalog = {}\nprint([catalog.load_table('race.' + t).scan().to_arrow().num_rows \
         for t in 'abc'])",
        pyiceberg_catalog(&pg, "", "")
    ));
    assert_eq!(printed.trim(), "[300, 300, 300]");
}

#[test]
fn partitioned_tables_hold_each_tuple_in_its_own_files_as_pyiceberg_computes_them() {
    let (pg, scratch, warehouse, catalog) = local_lake("iceberg-partitioned");
    python(&format!(
        r#"
from pyiceberg.schema import Schema
from pyiceberg.types import *
from pyiceberg.partitioning import PartitionSpec, PartitionField
from pyiceberg.transforms import *
catalog = {catalog}
catalog.create_namespace('lake')
schema = Schema(NestedField(1, 'id', LongType(), required=True),
    NestedField(2, 'region', StringType()), NestedField(3, 'ts', TimestampType()),
    NestedField(4, 'amount', IntegerType()), NestedField(5, 'note', StringType()),
    NestedField(6, 'price', DecimalType(9, 2)))
def spec(*fields):
    return PartitionSpec(*[PartitionField(source, 1000 + i, transform, name)
        for i, (source, transform, name) in enumerate(fields)])
catalog.create_table('lake.by_day', schema=schema,
    partition_spec=spec((2, IdentityTransform(), 'region'), (3, DayTransform(), 'ts_day')))
catalog.create_table('lake.by_bucket', schema=schema,
    partition_spec=spec((1, BucketTransform(3), 'id_bucket'), (4, TruncateTransform(30), 'amount_trunc'),
        (2, TruncateTransform(1), 'region_trunc')))
catalog.create_table('lake.by_hour', schema=schema,
    partition_spec=spec((3, YearTransform(), 'ts_year'), (3, MonthTransform(), 'ts_month'),
        (3, HourTransform(), 'ts_hour')))
catalog.create_table('lake.by_price', schema=schema,
    partition_spec=spec((6, BucketTransform(4), 'price_bucket')))
"#
    ));
    let columns = "id BIGINT NOT NULL, region STRING, ts TIMESTAMP(3), amount INT, note STRING";
    let tables: Vec<String> = ["by_day", "by_bucket", "by_hour"]
        .iter()
        .map(|t| {
            format!(
                "CREATE TABLE {t} ({columns}) WITH ({});",
                iceberg_options(&pg, "lake", t, &warehouse)
            )
        })
        .collect();
    let select = "SELECT id,
          CASE WHEN id % 11 = 0 THEN NULL WHEN id % 3 = 0 THEN 'eu' WHEN id % 3 = 1 THEN 'us' ELSE 'ap' END,
          TIMESTAMPADD(MINUTE, CAST(id AS INT), TIMESTAMP '2024-02-28 22:00:00'),
          CAST(id % 50 AS INT) - 25,
          CASE WHEN id % 7 = 0 THEN NULL ELSE CONCAT('n', CAST(id AS STRING)) END FROM seq";
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '300ms';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '3000',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '3000');
             {}
             CREATE TABLE made ({columns}) PARTITIONED BY (region) WITH ({});
             INSERT INTO by_day {select};
             INSERT INTO by_bucket {select};
             INSERT INTO by_hour {select};
             INSERT INTO made {select};",
            tables.join("\n"),
            iceberg_options(&pg, "lake", "made", &warehouse)
        ),
        2,
    );
    let printed = python(&format!(
        r#"
import datetime
import pyarrow.parquet as pq
from pyiceberg.utils.datetime import datetime_to_micros, date_to_days
catalog = {catalog}
def want(i):
    region = None if i % 11 == 0 else ['eu', 'us', 'ap'][i % 3]
    return {{'id': i, 'region': region,
        'ts': datetime.datetime(2024, 2, 28, 22) + datetime.timedelta(minutes=i),
        'amount': i % 50 - 25, 'note': None if i % 7 == 0 else f'n{{i}}'}}
expected = [want(i) for i in range(1, 3001)]
def internal(value):
    if isinstance(value, datetime.datetime):
        return datetime_to_micros(value)
    if isinstance(value, datetime.date):
        return date_to_days(value)
    return value
report = []
for name in ['by_day', 'by_bucket', 'by_hour', 'made']:
    table = catalog.load_table('lake.' + name)
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r['id'])
    rows = [{{k: v for k, v in r.items() if k != 'price'}} for r in rows]
    assert rows == expected, (name, [r for r in rows if r != want(r['id'])][:3])
    spec = table.spec()
    sources = [(table.schema().find_field(f.source_id), f.transform) for f in spec.fields]
    tasks = list(table.scan().plan_files())
    tuples = set()
    for task in tasks:
        data = pq.read_table(task.file.file_path.removeprefix('file://')).to_pylist()
        assert len(data) == task.file.record_count > 0
        got = tuple(internal(task.file.partition[i]) for i in range(len(sources)))
        tuples.add(got)
        for row in data:
            computed = tuple(t.transform(f.field_type)(internal(row[f.name])) for f, t in sources)
            assert computed == got, (name, task.file.file_path, row, computed, got)
    report.append(f'{{name}}: {{len(tasks)}} files, {{len(tuples)}} tuples')
    if name == 'made':
        assert [str(f.transform) for f in spec.fields] == ['identity'], spec
        assert table.schema().find_field(spec.fields[0].source_id).name == 'region'
        continue
    for condition, keep in [
            ("region = 'eu'", lambda r: r['region'] == 'eu'),
            ("region is null", lambda r: r['region'] is None),
            ("ts >= '2024-03-01T05:00:00' and ts < '2024-03-01T07:30:00'",
                lambda r: datetime.datetime(2024, 3, 1, 5) <= r['ts'] < datetime.datetime(2024, 3, 1, 7, 30)),
            ("id = 1717", lambda r: r['id'] == 1717),
            ("amount < -5", lambda r: r['amount'] < -5),
            ("note = 'n2024'", lambda r: r['note'] == 'n2024')]:
        scan = table.scan(row_filter=condition)
        scanned = sorted(r['id'] for r in scan.to_arrow().to_pylist())
        assert scanned == [r['id'] for r in expected if keep(r)], (name, condition, scanned[:5])
    pruned = {{'by_day': "region = 'eu'", 'by_bucket': 'id = 1717', 'by_hour': "ts < '2024-02-29T00:00:00'"}}[name]
    planned = len(list(table.scan(row_filter=pruned).plan_files()))
    assert 0 < planned < len(tasks), (name, pruned, planned, len(tasks))
print('; '.join(report))
"#
    ));
    eprintln!("{printed}");
    let output = run_script(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             SET 'restart-strategy.type' = 'none';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
             CREATE TABLE by_price (id BIGINT NOT NULL, price DECIMAL(9, 2)) WITH ({});
             INSERT INTO by_price SELECT id, CAST(id AS DECIMAL(9, 2)) AS price FROM seq;",
            iceberg_options(&pg, "lake", "by_price", &warehouse)
        ),
        1,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("partition field 'price_bucket': transform 'bucket[4]' of field 'price'"),
        "{stderr}"
    );
}

/// Python defining `rust_rows(table, file_io={})`: the rows of a pyiceberg table as
/// iceberg-rust reads them (pyiceberg-core through DataFusion), which applies equality and
/// position deletes (pyiceberg does not read equality deletes). Not a format string.
pub const RUST_READER: &str = "
import datafusion
from pyiceberg_core.datafusion import IcebergDataFusionTable
def rust_rows(table, file_io={}):
    ctx = datafusion.SessionContext()
    ctx.register_table('t', IcebergDataFusionTable(identifier=list(table.name()),
        metadata_location=table.metadata_location, file_io_properties=file_io))
    return ctx.sql('SELECT * FROM t').to_arrow_table().to_pylist()
";

/// A SQL catalog on a SQLite file, as pyiceberg keeps it: pyiceberg creates a table there
/// and appends; Eddy appends at parallelism 2 (its subtasks' commits contend for the
/// file's compare-and-set) and creates a second table with a primary key, which takes an
/// aggregate's updates; pyiceberg reads the first whole, iceberg-rust the second.
#[test]
fn sqlite_catalogs_are_shared_with_pyiceberg() {
    let scratch = Scratch::new("iceberg-sqlite");
    let database = scratch.path().join("catalog.db");
    let warehouse = format!("file://{}", scratch.path().join("warehouse").display());
    let catalog = format!(
        "__import__('pyiceberg.catalog.sql', fromlist=['SqlCatalog']).SqlCatalog('lite', \
         uri='sqlite:///{}', warehouse='{warehouse}')",
        database.display()
    );
    python(&format!(
        r#"
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
catalog = {catalog}
catalog.create_namespace('lake')
table = catalog.create_table('lake.numbers', schema=Schema(NestedField(1, 'n', LongType())))
table.append(pa.table({{'n': pa.array([0], pa.int64())}}))
"#
    ));
    let options = |table: &str| {
        format!(
            "'connector' = 'iceberg', 'catalog-name' = 'lite', 'uri' = 'jdbc:sqlite:{}',
             'catalog-database' = 'lake', 'catalog-table' = '{table}', 'warehouse' = '{warehouse}'",
            database.display()
        )
    };
    run_ok(
        &scratch,
        &format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             CREATE TABLE seq (n BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '5000',
               'fields.n.kind' = 'sequence', 'fields.n.start' = '1', 'fields.n.end' = '3000');
             CREATE TABLE numbers (n BIGINT) WITH ({});
             CREATE TABLE residues (r BIGINT NOT NULL, c BIGINT, PRIMARY KEY (r) NOT ENFORCED)
               WITH ({});
             INSERT INTO numbers SELECT n FROM seq;
             INSERT INTO residues SELECT n % 7, COUNT(*) FROM seq GROUP BY n % 7;",
            options("numbers"),
            options("residues")
        ),
        2,
    );
    let printed = python(&format!(
        r#"{RUST_READER}
catalog = {catalog}
numbers = catalog.load_table('lake.numbers')
assert sorted(numbers.scan().to_arrow().column('n').to_pylist()) == list(range(0, 3001))
residues = catalog.load_table('lake.residues')
rows = sorted((r['r'], r['c']) for r in rust_rows(residues))
assert rows == [(r, len(range(r or 7, 3001, 7))) for r in range(7)], rows
print(len(numbers.snapshots()), len(residues.snapshots()))
"#
    ));
    eprintln!("snapshots of numbers and residues: {printed}");
}

/// Changelogs into tables with a primary key, as Flink's sink writes them (format
/// version 2 equality deletes of the key, position deletes of rows of the same commit):
/// an aggregate's upserts into a table partitioned by a key column, an aggregate whose
/// HAVING retracts rows (updates and deletes), and append-only rows deduplicated by
/// `write.upsert.enabled`; 100 ms checkpoints, so keys change across many commits and
/// within one. iceberg-rust reads each table to exactly the rows the queries end with;
/// the snapshots hold both kinds of delete; a PRIMARY KEY that leaves out a partition
/// column is refused, naming it.
#[test]
fn changelogs_land_in_tables_with_a_primary_key_as_equality_and_position_deletes() {
    let (pg, scratch, warehouse, catalog) = local_lake("iceberg-upsert");
    let options = |table: &str| iceberg_options(&pg, "cdc", table, &warehouse);
    let source = "SET 'execution.checkpointing.interval' = '100ms';
        CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '4000',
          'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '6000');
        CREATE VIEW events AS SELECT id,
          CASE WHEN id <= 3000 THEN id % 50 ELSE id % 7 END AS user_id FROM seq;";
    run_ok(
        &scratch,
        &format!(
            "{source}
             CREATE TABLE totals (region STRING NOT NULL, user_id BIGINT NOT NULL, n BIGINT,
               total BIGINT, PRIMARY KEY (region, user_id) NOT ENFORCED)
               PARTITIONED BY (region) WITH ({});
             INSERT INTO totals SELECT CONCAT('r', CAST(user_id % 3 AS STRING)), user_id,
               COUNT(*), SUM(id) FROM events
               GROUP BY CONCAT('r', CAST(user_id % 3 AS STRING)), user_id;
             CREATE TABLE small (user_id BIGINT NOT NULL, n BIGINT,
               PRIMARY KEY (user_id) NOT ENFORCED) WITH ({});
             INSERT INTO small SELECT user_id, COUNT(*) FROM events GROUP BY user_id
               HAVING COUNT(*) <= 100;
             CREATE TABLE latest (user_id BIGINT NOT NULL, tag STRING,
               PRIMARY KEY (user_id) NOT ENFORCED) WITH ({}, 'write.upsert.enabled' = 'true');
             INSERT INTO latest SELECT user_id, CONCAT('u', CAST(user_id AS STRING))
               FROM events;",
            options("totals"),
            options("small"),
            options("latest")
        ),
        2,
    );
    let printed = python(&format!(
        r#"
from collections import Counter, defaultdict{RUST_READER}
catalog = {catalog}
def read(name, columns):
    rows = rust_rows(catalog.load_table(name))
    return sorted(tuple(r[c] for c in columns) for r in rows)
users = [i % 50 if i <= 3000 else i % 7 for i in range(1, 6001)]
count, total = Counter(users), defaultdict(int)
for i, u in zip(range(1, 6001), users):
    total[u] += i
totals = read('cdc.totals', ('region', 'user_id', 'n', 'total'))
want = sorted((f'r{{u % 3}}', u, count[u], total[u]) for u in count)
assert totals == want, (len(totals), [r for r in totals if r not in want][:5])
small = read('cdc.small', ('user_id', 'n'))
assert small == sorted((u, count[u]) for u in count if count[u] <= 100), small[:5]
latest = read('cdc.latest', ('user_id', 'tag'))
assert latest == sorted((u, f'u{{u}}') for u in count), latest[:5]
deletes = {{'position': 0, 'equality': 0}}
for name in ('cdc.totals', 'cdc.small', 'cdc.latest'):
    summary = catalog.load_table(name).current_snapshot().summary.additional_properties
    for kind in deletes:
        deletes[kind] += int(summary.get(f'total-{{kind}}-deletes', '0'))
assert deletes['position'] > 0 and deletes['equality'] > 0, deletes
print(len(catalog.load_table('cdc.totals').snapshots()), deletes)
"#
    ));
    eprintln!("snapshots of totals, deletes: {printed}");
    let output = run_script(
        &scratch,
        &format!(
            "{source}
             SET 'restart-strategy.type' = 'none';
             CREATE TABLE totals (region STRING NOT NULL, user_id BIGINT NOT NULL, n BIGINT,
               total BIGINT, PRIMARY KEY (user_id) NOT ENFORCED) WITH ({});
             INSERT INTO totals SELECT CONCAT('r', CAST(user_id % 3 AS STRING)), user_id,
               COUNT(*), SUM(id) FROM events
               GROUP BY CONCAT('r', CAST(user_id % 3 AS STRING)), user_id;",
            options("totals")
        ),
        1,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("partition field 'region'"),
        "{stderr}"
    );
}

/// `examples/kafka_avro_to_iceberg.sql`, pointed at a broker, a schema registry and
/// PostgreSQL on loopback: records confluent-kafka's `AvroSerializer` wrote with two schema
/// versions land in the Iceberg table, read back by pyiceberg.
#[test]
fn the_example_appends_avro_records_from_kafka_to_an_iceberg_table() {
    let broker = Broker::start();
    let registry = Registry::open();
    let pg = Postgres::start("iceberg-example");
    let scratch = Scratch::new("iceberg-example");
    broker.create_topic("users", 1);
    produce_users(&broker, &registry, "users");
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/kafka_avro_to_iceberg.sql"
    ))
    .unwrap();
    let warehouse = scratch.path().join("warehouse");
    let script = example
        .replace("localhost:9092", &broker.address)
        .replace("http://localhost:8081", &registry.url)
        .replace("localhost:5432", &format!("127.0.0.1:{}", pg.port()))
        .replace("/tmp/eddy-warehouse", &warehouse.display().to_string());
    run_ok(&scratch, &script, 1);
    let printed = python(&format!(
        r#"
table = {}.load_table('crm.users')
for r in table.scan().to_arrow().to_pylist():
    ts = r['ts'].strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]
    print(f"{{r['id']}},{{r['name'] or ''}},{{r['amount']}},{{ts}}")
"#,
        pyiceberg_catalog_named("lake", &pg, "", "")
    ));
    let mut lines: Vec<&str> = printed.lines().collect();
    lines.sort();
    let expected = expected_users();
    let mut expected: Vec<&str> = expected
        .iter()
        .map(|line| line.rsplit_once(',').unwrap().0)
        .collect();
    expected.sort();
    assert_eq!(lines, expected);
}

/// The small REST catalog of `iceberg_rest.py` (pyiceberg's SQL catalog behind the REST
/// protocol), stopped on drop.
struct RestCatalog {
    child: std::process::Child,
    uri: String,
    directory: Scratch,
}

impl RestCatalog {
    /// Starts it with `args` (`--token`, `--lose-every`, `--credential`…).
    fn start(args: &[&str]) -> RestCatalog {
        use std::io::BufRead;
        let directory = Scratch::new("iceberg-rest-catalog");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/integration-tests/iceberg_rest.py"
        );
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .arg(directory.path())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the REST catalog");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("listening on ").expect("a port");
        RestCatalog {
            child,
            uri: format!("http://127.0.0.1:{port}"),
            directory,
        }
    }

    /// The rows' ids of table `lake.events`, read by pyiceberg from the catalog's database,
    /// and its snapshots' count.
    fn ids_and_snapshots(&self) -> (Vec<i64>, usize) {
        let printed = python(&format!(
            "from pyiceberg.catalog.sql import SqlCatalog
table = SqlCatalog('rest', uri='sqlite:///{}/catalog.db').load_table('lake.events')
print(sorted(table.scan().to_arrow().column('id').to_pylist()), len(table.snapshots()))",
            self.directory.path().display()
        ));
        let (ids, snapshots) = printed.trim().rsplit_once(' ').unwrap();
        (
            serde_json::from_str(ids).unwrap(),
            snapshots.parse().unwrap(),
        )
    }
}

impl Drop for RestCatalog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Through a REST catalog that loses every third commit's answer (the commit applied, a
/// 503 returned): Eddy creates the table, appends 3000 rows at parallelism 2 with 50 ms
/// checkpoints (over 1.5 s, so that many commits are made however busy the machine is),
/// and a second job appends 1000 more; a retried commit finds its transaction
/// in the table and is not applied twice. A wrong token fails the job with the server's
/// answer.
#[test]
fn rest_catalogs_commit_each_transaction_once_when_answers_are_lost() {
    let catalog = RestCatalog::start(&["--token", "s3cret", "--lose-every", "3"]);
    let scratch = Scratch::new("iceberg-rest");
    let job = |auth: &str, start: i64, end: i64| {
        format!(
            "SET 'execution.checkpointing.interval' = '50ms';
             SET 'restart-strategy.type' = 'none';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen',
               'rows-per-second' = '2000', 'fields.id.kind' = 'sequence',
               'fields.id.start' = '{start}', 'fields.id.end' = '{end}');
             CREATE TABLE events (id BIGINT, label STRING) WITH ('connector' = 'iceberg',
               'catalog-name' = 'lake', 'catalog-type' = 'rest', 'uri' = '{}',
               {auth}, 'catalog-database' = 'lake', 'catalog-table' = 'events');
             INSERT INTO events SELECT id, CONCAT('e', CAST(id AS STRING)) FROM seq;",
            catalog.uri
        )
    };
    run_ok(&scratch, &job("'token' = 's3cret'", 1, 3000), 2);
    let (ids, first_snapshots) = catalog.ids_and_snapshots();
    assert_eq!(ids, (1..=3000).collect::<Vec<i64>>());
    assert!(
        first_snapshots >= 3,
        "{first_snapshots} snapshots: no answer was lost"
    );
    run_ok(&scratch, &job("'token' = 's3cret'", 3001, 4000), 1);
    let (ids, _) = catalog.ids_and_snapshots();
    assert_eq!(ids, (1..=4000).collect::<Vec<i64>>());
    let output = run_script(&scratch, &job("'token' = 'wrong'", 1, 10), 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("a bearer token is required"),
        "{stderr}"
    );
}

/// A REST catalog taking OAuth2 client credentials, whose tokens expire after 7 requests:
/// Eddy exchanges the credentials, again whenever the catalog answers that a token expired,
/// and appends every row once; unknown credentials fail the job with the server's answer.
#[test]
fn rest_catalogs_take_client_credentials_and_renew_expired_tokens() {
    let catalog = RestCatalog::start(&["--credential", "eddy:s3cret", "--expire-after", "7"]);
    let scratch = Scratch::new("iceberg-rest-oauth");
    let job = |credential: &str| {
        format!(
            "SET 'execution.checkpointing.interval' = '50ms';
             SET 'restart-strategy.type' = 'none';
             CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen',
               'rows-per-second' = '10000', 'fields.id.kind' = 'sequence',
               'fields.id.start' = '1', 'fields.id.end' = '2000');
             CREATE TABLE events (id BIGINT, label STRING) WITH ('connector' = 'iceberg',
               'catalog-type' = 'rest', 'uri' = '{}', 'credential' = '{credential}',
               'catalog-database' = 'lake', 'catalog-table' = 'events');
             INSERT INTO events SELECT id, CONCAT('e', CAST(id AS STRING)) FROM seq;",
            catalog.uri
        )
    };
    run_ok(&scratch, &job("eddy:s3cret"), 2);
    let (ids, snapshots) = catalog.ids_and_snapshots();
    assert_eq!(ids, (1..=2000).collect::<Vec<i64>>());
    let issued = std::fs::read_to_string(catalog.directory.path().join("tokens-issued")).unwrap();
    assert!(
        issued.parse::<u32>().unwrap() >= 2,
        "{issued} token(s) issued in {snapshots} snapshots: none expired"
    );
    let output = run_script(&scratch, &job("eddy:wrong"), 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("unknown client credentials"),
        "{stderr}"
    );
}
