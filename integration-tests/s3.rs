//! The filesystem connector against a real S3-compatible server (moto) on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::row;
use crate::support::{Scratch, assert_result_in, python, run_script};

/// A moto S3 server on a free loopback port, stopped on drop.
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Holds the secret key, which tables name by reference (`${file:…}`), as a cluster
    /// demands.
    secrets: Scratch,
}

impl S3Server {
    /// Starts `moto_server` and creates `bucket`.
    pub fn start(bucket: &str) -> S3Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start moto_server ({e}); `.ci/run` installs it, or: pip install 'moto[server]'")
            });
        let secrets = Scratch::new("s3-secret");
        secrets.write("secret-access-key", "test\n");
        let server = S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            secrets,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        server.request(&format!("PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
        server
    }

    /// Runs a Python program with `s3`, a boto3 client of this server (boto3 comes with
    /// moto); returns what it printed.
    ///
    /// The program ends with `os._exit(0)` once it has printed: pyarrow's and boto3's
    /// threads can abort the interpreter's teardown ("terminate called without an active
    /// exception", seen once in CI), after the answer is complete.
    fn boto3(&self, program: &str) -> String {
        python(&format!(
            "import boto3, json, os, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n{program}\n\
             sys.stdout.flush()\nos._exit(0)",
            self.endpoint
        ))
    }

    /// Overwrites object `key` of `bucket` with `body`.
    pub fn put(&self, bucket: &str, key: &str, body: &str) {
        self.boto3(&format!(
            "s3.put_object(Bucket='{bucket}', Key='{key}', Body=b'{body}')"
        ));
    }

    /// Every object of `bucket` under `prefix`, as (key, body), sorted by key.
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<(String, String)> {
        let printed = self.boto3(&format!(
            "keys = [o['Key'] for p in s3.get_paginator('list_objects_v2').paginate(\
             Bucket='{bucket}', Prefix='{prefix}') for o in p.get('Contents', [])]\n\
             print(json.dumps([[k, s3.get_object(Bucket='{bucket}', Key=k)['Body'].read()\
             .decode()] for k in sorted(keys)]))"
        ));
        serde_json::from_str(&printed).unwrap()
    }

    /// The keys of every object of `bucket` under `prefix`, sorted (bodies not read: they
    /// may be binary).
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let printed = self.boto3(&format!(
            "print(json.dumps(sorted(o['Key'] for p in s3.get_paginator('list_objects_v2')\
             .paginate(Bucket='{bucket}', Prefix='{prefix}') for o in p.get('Contents', []))))"
        ));
        serde_json::from_str(&printed).unwrap()
    }

    /// The rows of the Parquet files of `bucket` under `prefix` as pyarrow reads them
    /// (each value as Python prints it, NULL as the empty string), sorted; and the keys of
    /// the hidden (uncommitted) files.
    pub fn parquet_rows(&self, bucket: &str, prefix: &str) -> (Vec<Vec<String>>, Vec<String>) {
        let printed = self.boto3(&format!(
            "import io, pyarrow.parquet as pq\n\
             rows, hidden = [], []\n\
             for p in s3.get_paginator('list_objects_v2').paginate(Bucket='{bucket}', \
             Prefix='{prefix}'):\n\
             \x20   for o in p.get('Contents', []):\n\
             \x20       name = o['Key'].rsplit('/', 1)[-1]\n\
             \x20       if name.startswith('.'):\n\
             \x20           hidden.append(o['Key'])\n\
             \x20       elif not name.startswith('_'):\n\
             \x20           body = s3.get_object(Bucket='{bucket}', Key=o['Key'])['Body'].read()\n\
             \x20           table = pq.read_table(io.BytesIO(body))\n\
             \x20           rows += [['' if v is None else str(v) for v in r.values()] \
             for r in table.to_pylist()]\n\
             print(json.dumps([sorted(rows), sorted(hidden)]))"
        ));
        serde_json::from_str(&printed).unwrap()
    }

    fn request(&self, text: &str) -> String {
        let address = self.endpoint.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        response
    }

    /// The environment that points a daemon's object storage (`s3://` checkpoints, the
    /// leader lease) at this server.
    pub fn env(&self) -> [(&'static str, &str); 5] {
        [
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ]
    }

    /// The `WITH` options that point a filesystem table at this server; the secret key is
    /// read from a file by the process that connects.
    pub fn options(&self) -> String {
        self.options_at(&self.endpoint)
    }

    /// The same options, reaching the server at `endpoint` (a proxy in front of it).
    pub fn options_at(&self, endpoint: &str) -> String {
        format!(
            "'s3.endpoint' = '{}', 's3.allow-http' = 'true', 's3.region' = 'us-east-1', \
             's3.access-key-id' = 'test', 's3.secret-access-key' = '${{file:{}}}'",
            endpoint,
            self.secrets.path().join("secret-access-key").display()
        )
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn filesystem_tables_on_s3_round_trip() {
    let s3 = S3Server::start("eddy");
    let scratch = Scratch::new("s3");
    let options = s3.options();
    let write = format!(
        "CREATE TABLE seq (id BIGINT, k AS id % 3) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '500');
         CREATE TABLE out (id BIGINT, k BIGINT) WITH ('connector' = 'filesystem', 'path' = 's3://eddy/data', 'format' = 'csv', {options});
         INSERT INTO out SELECT id, k FROM seq;"
    );
    let output = run_script(&scratch, &write, 2);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = format!(
        "CREATE TABLE src (id BIGINT, k BIGINT) WITH ('connector' = 'filesystem', 'path' = 's3://eddy/data', 'format' = 'csv', {options});
         CREATE TABLE o (k BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT k, COUNT(*), SUM(id) FROM src GROUP BY k;"
    );
    let expected = (0..3)
        .map(|k| {
            let ids: Vec<i64> = (1..=500).filter(|i| i % 3 == k).collect();
            row![k, ids.len(), ids.iter().sum::<i64>()]
        })
        .collect();
    assert_result_in(&scratch, &read, expected);
}

/// A partitioned table on S3, exactly once with success files: the objects are named as
/// Flink names partition directories (`:` escaped as `%3A`, NULL as the default name), and
/// reading the table back gives every row with its partition values.
#[test]
fn partitioned_tables_on_s3_round_trip() {
    let s3 = S3Server::start("parts");
    let scratch = Scratch::new("s3-partitioned");
    let options = s3.options();
    let table = |name: &str, extra: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT, hm STRING, k BIGINT) PARTITIONED BY (hm, k)
               WITH ('connector' = 'filesystem', 'path' = 's3://parts/t', 'format' = 'csv',
               {options}{extra});"
        )
    };
    let write = format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         CREATE TABLE seq (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300');
         {}
         INSERT INTO out SELECT id, CONCAT('10:0', CAST(id % 2 AS STRING)),
           CASE WHEN id % 3 = 0 THEN CAST(NULL AS BIGINT) ELSE id % 3 END FROM seq;",
        table(
            "out",
            ", 'sink.delivery-guarantee' = 'exactly-once', \
             'sink.partition-commit.policy.kind' = 'success-file'"
        )
    );
    let output = run_script(&scratch, &write, 2);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let keys: Vec<String> = s3.objects("parts", "t/").into_iter().map(|o| o.0).collect();
    for partition in [
        "t/hm=10%3A00/k=1/",
        "t/hm=10%3A01/k=2/",
        "t/hm=10%3A00/k=__DEFAULT_PARTITION__/",
    ] {
        assert!(
            keys.iter().any(|k| k == &format!("{partition}_SUCCESS")),
            "{partition}_SUCCESS in {keys:?}"
        );
        assert!(
            keys.iter()
                .any(|k| k.starts_with(&format!("{partition}part-"))),
            "a part file in {partition}: {keys:?}"
        );
    }
    assert!(
        !keys.iter().any(|k| k.contains("/.part-")),
        "nothing left hidden: {keys:?}"
    );
    let read = format!(
        "{}
         CREATE TABLE o (hm STRING, k BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT hm, k, COUNT(*), SUM(id) FROM src GROUP BY hm, k;",
        table("src", "")
    );
    let mut expected = Vec::new();
    for m in 0..2 {
        for k in [Some(1), Some(2), None] {
            let ids: Vec<i64> = (1..=300)
                .filter(|i| i % 2 == m && (if i % 3 == 0 { None } else { Some(i % 3) }) == k)
                .collect();
            if ids.is_empty() {
                continue;
            }
            let k = k.map_or("null".to_string(), |k| k.to_string());
            expected.push(row![
                format!("10:0{m}"),
                k,
                ids.len(),
                ids.iter().sum::<i64>()
            ]);
        }
    }
    assert_result_in(&scratch, &read, expected);
}
