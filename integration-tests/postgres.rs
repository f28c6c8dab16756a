//! A throwaway PostgreSQL server on loopback (the Debian package's binaries, run as the
//! `postgres` user when the tests run as root), and the postgres sink against it.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::processes::free_port;
use crate::support::{Scratch, run_ok, run_script, visible_lines};

/// A PostgreSQL cluster in a temporary directory, stopped and removed on drop.
pub struct Postgres {
    bin: PathBuf,
    directory: PathBuf,
    port: u16,
}

/// Where `initdb` and `pg_ctl` are: `EDDY_PG_BIN`, or the newest Debian version.
fn binaries() -> PathBuf {
    if let Ok(dir) = std::env::var("EDDY_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.retain(|dir| dir.join("initdb").exists());
    versions.sort();
    versions.pop().unwrap_or_else(|| {
        panic!("PostgreSQL's server is not installed; `.ci/run` installs it, or: apt-get install postgresql")
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    /// Creates and starts a cluster allowing prepared transactions.
    pub fn start(name: &str) -> Postgres {
        Postgres::start_with(name, "")
    }

    /// [`Postgres::start`], with more server settings (`-c name=value …`). For debugging,
    /// `EDDY_TEST_PG_SETTINGS` adds settings to every test's server (say, `-c
    /// log_statement=all -c log_line_prefix=%m_%p_%x_`), and `EDDY_TEST_PG_LOG_DIR` keeps
    /// each server's log there when it stops.
    pub fn start_with(name: &str, settings: &str) -> Postgres {
        let bin = binaries();
        let port = free_port();
        let directory =
            std::env::temp_dir().join(format!("eddy-pg-{name}-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let postgres = Postgres {
            bin,
            directory,
            port,
        };
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&postgres.directory)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let data = postgres.directory.join("data");
        postgres.run_as_owner(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "--auth=trust",
                "--username=postgres",
                "--no-sync",
                "--encoding=UTF8",
            ],
        );
        let settings = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_prepared_transactions=64 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c wal_level=logical -c max_replication_slots=16 -c max_wal_senders=16 {settings} {}",
            postgres.directory.display(),
            std::env::var("EDDY_TEST_PG_SETTINGS").unwrap_or_default()
        );
        postgres.run_as_owner(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &settings,
                "-l",
                postgres.directory.join("log").to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while !answers_at(port) {
            assert!(Instant::now() < deadline, "PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        postgres
    }

    fn run_as_owner(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let output = match is_root() {
            true => Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output(),
            false => Command::new(&path).args(args).output(),
        }
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
        assert!(
            output.status.success(),
            "{program}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Adds a role that must log in with `password` over TCP (the others stay trusted).
    pub fn add_password_user(&self, name: &str, password: &str) {
        self.execute(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD '{password}'; GRANT ALL ON SCHEMA public TO {name};"
        ));
        let data = self.directory.join("data");
        let hba = data.join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).unwrap();
        let rule = format!("host all {name} 127.0.0.1/32 scram-sha-256\n");
        std::fs::write(&hba, format!("{rule}{rules}")).unwrap();
        self.run_as_owner("pg_ctl", &["-D", data.to_str().unwrap(), "reload"]);
        std::thread::sleep(Duration::from_millis(300));
    }

    /// Restarts the server (fast shutdown: open sessions are ended, prepared transactions
    /// kept).
    pub fn restart(&self) {
        let data = self.directory.join("data");
        // With its log file: the server must not hold pg_ctl's output open.
        let log = self.directory.join("log");
        let (data, log) = (data.to_str().unwrap(), log.to_str().unwrap());
        self.run_as_owner(
            "pg_ctl",
            &["-D", data, "-l", log, "-m", "fast", "-w", "restart"],
        );
    }

    /// Ends every other session, replication sessions included (a commit in flight fails
    /// mid-way, a replication stream breaks).
    pub fn cut_connections(&self) {
        self.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE pid <> pg_backend_pid() AND backend_type IN ('client backend', 'walsender')",
        );
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL, for a table's `'url'` option.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The options of a sink into `table` of this server with delivery guarantee
    /// `guarantee`, for a table's `WITH (...)`.
    pub fn sink_options(&self, table: &str, guarantee: &str) -> String {
        format!(
            "'connector' = 'postgres', 'url' = '{}', 'table' = '{table}', \
             'sink.delivery-guarantee' = '{guarantee}'",
            self.url()
        )
    }

    /// Runs SQL; returns the rows of its last result, fields split on commas.
    pub fn query(&self, sql: &str) -> Vec<Vec<String>> {
        query_at(self.port, sql)
    }

    /// Runs statements.
    pub fn execute(&self, sql: &str) {
        self.query(sql);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.directory.join("data");
        let _ = match is_root() {
            true => Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
                .output(),
            false => Command::new(self.bin.join("pg_ctl"))
                .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
                .output(),
        };
        if let Some(keep) = std::env::var_os("EDDY_TEST_PG_LOG_DIR").map(PathBuf::from) {
            let name = self.directory.file_name().unwrap_or_default();
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::copy(self.directory.join("log"), keep.join(name));
        }
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

fn psql_output(port: u16, sql: &str) -> Output {
    Command::new(binaries().join("psql"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1"])
        .args(["-At", "-F", ",", "-c", sql])
        .output()
        .expect("run psql")
}

/// Runs a script of statements in one `psql` session against the server on loopback
/// `port`; whether it succeeded.
pub fn run_script_at(port: u16, sql: &str) -> bool {
    use std::io::Write;
    let mut child = Command::new(binaries().join("psql"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run psql");
    let written = child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .is_ok();
    child.wait().is_ok_and(|s| s.success()) && written
}

/// Whether the PostgreSQL server on loopback `port` answers.
pub fn answers_at(port: u16) -> bool {
    psql_output(port, "SELECT 1").status.success()
}

/// Runs SQL on the PostgreSQL server on loopback `port`; returns the rows of its last
/// result, fields split on commas.
pub fn query_at(port: u16, sql: &str) -> Vec<Vec<String>> {
    let output = psql_output(port, sql);
    assert!(
        output.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// A bounded Nexmark bid stream, as a table named `bid`.
fn bids(events: u64) -> String {
    format!(
        "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '{events}');"
    )
}

#[test]
fn append_upsert_and_retract_streams_into_postgres() {
    let pg = Postgres::start("modes");
    pg.execute(
        "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price INT, channel TEXT);
         CREATE TABLE per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top BIGINT);
         CREATE TABLE per_channel (channel VARCHAR(20), bids NUMERIC);",
    );
    let url = pg.url();
    let script = format!(
        "{}
         CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'bids');
         CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT,
           PRIMARY KEY (auction) NOT ENFORCED)
           WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'per_auction');
         CREATE TABLE per_channel (channel VARCHAR, bids BIGINT)
           WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'per_channel');
         INSERT INTO bids SELECT auction, bidder, price, channel FROM bid WHERE price % 7 = 0;
         INSERT INTO per_auction SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
         INSERT INTO per_channel SELECT channel, COUNT(*) FROM bid GROUP BY channel;",
        bids(20_000)
    );
    let scratch = Scratch::new("pg-modes");
    run_ok(&scratch, &script, 2);
    // The same queries, computed by PostgreSQL from the appended rows of a full copy.
    let all = format!(
        "{}
         CREATE TABLE every_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'every_bid');
         INSERT INTO every_bid SELECT auction, bidder, price, channel FROM bid;",
        bids(20_000)
    );
    pg.execute(
        "CREATE TABLE every_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT)",
    );
    run_ok(&scratch, &all, 1);
    // 46 of every 50 Nexmark events are bids.
    assert_eq!(
        pg.query("SELECT count(*) FROM every_bid"),
        vec![vec!["18400".to_string()]]
    );
    let same = |got: &str, want: &str| {
        let (got, want) = (pg.query(got), pg.query(want));
        assert!(!want.is_empty());
        assert_eq!(got, want);
    };
    same(
        "SELECT * FROM bids ORDER BY 1, 2, 3, 4",
        "SELECT * FROM every_bid WHERE price % 7 = 0 ORDER BY 1, 2, 3, 4",
    );
    same(
        "SELECT * FROM per_auction ORDER BY 1",
        "SELECT auction, count(*), max(price) FROM every_bid GROUP BY auction ORDER BY 1",
    );
    same(
        "SELECT channel, bids FROM per_channel ORDER BY 1",
        "SELECT channel, count(*) FROM every_bid GROUP BY channel ORDER BY 1",
    );
}

#[test]
fn postgres_sink_errors_name_the_table_and_column() {
    let pg = Postgres::start("errors");
    pg.execute("CREATE TABLE narrow (a BIGINT)");
    let scratch = Scratch::new("pg-errors");
    let script = format!(
        "{}
         CREATE TABLE narrow (a BIGINT, b BIGINT)
           WITH ('connector' = 'postgres', 'url' = '{}', 'table' = 'narrow');
         INSERT INTO narrow SELECT auction, price FROM bid;",
        bids(10),
        pg.url()
    );
    let output = run_script(&scratch, &script, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("has no column 'b'"), "{stderr}");

    let unreachable = script.replace(&pg.url(), "postgres://postgres@127.0.0.1:1/postgres");
    let output = run_script(&scratch, &unreachable, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("cannot connect to PostgreSQL"), "{stderr}");
}

#[test]
fn exactly_once_rows_are_committed_by_the_final_checkpoint() {
    let pg = Postgres::start("final");
    pg.execute(
        "CREATE TABLE per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top BIGINT);
         CREATE TABLE cheap (auction BIGINT, price BIGINT);",
    );
    let scratch = Scratch::new("pg-final");
    let url = pg.url();
    let files = scratch.path().join("cheap");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '100ms';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '20000', 'events.rate' = '20000');
         CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT,
           PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'postgres', 'url' = '{url}',
           'table' = 'per_auction', 'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE cheap_pg (auction BIGINT, price BIGINT) WITH ('connector' = 'postgres',
           'url' = '{url}', 'table' = 'cheap', 'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE cheap_files (auction BIGINT, price BIGINT) WITH ('connector' = 'filesystem',
           'path' = '{}', 'format' = 'csv');
         INSERT INTO per_auction SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
         INSERT INTO cheap_pg SELECT auction, price FROM bid WHERE price < 1000;
         INSERT INTO cheap_files SELECT auction, price FROM bid WHERE price < 1000;",
        files.display()
    );
    run_ok(&scratch, &script, 2);
    assert!(pg.query("SELECT gid FROM pg_prepared_xacts").is_empty());
    let groups = pg.query("SELECT sum(bids) FROM per_auction");
    assert_eq!(groups, vec![vec!["18400".to_string()]]);
    let hidden = std::fs::read_dir(&files)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(hidden, 0, "uncommitted part files are left");
    let mut from_files: Vec<Vec<String>> = visible_lines(&files)
        .iter()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    from_files.sort();
    let mut from_pg = pg.query("SELECT auction, price FROM cheap");
    from_pg.sort();
    assert!(!from_pg.is_empty());
    assert_eq!(from_files, from_pg);
}
