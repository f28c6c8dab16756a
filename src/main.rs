//! `eddy`: the command line of the Eddy stream processor.

mod client;
mod credentials;
mod daemons;
mod embedded;
mod security;
mod watch;

#[cfg(test)]
mod options_doc;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// jemalloc as the allocator of every Eddy process: state that comes and goes (a join's
/// rows expiring, windows closing) is given back, where glibc's malloc keeps freed blocks
/// in its per-thread arenas (Nexmark q7's peak RSS: 265 MB with glibc, 130 MB with jemalloc,
/// at the same speed; `bench/RESULTS.md`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use eddy_planner::PlanningContext;
use tracing_subscriber::EnvFilter;

/// Eddy: a distributed stream processor with Flink-style streaming SQL.
#[derive(Debug, Parser)]
#[command(name = "eddy", version, about)]
struct Cli {
    /// Log format on standard error.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "EDDY_LOG_FORMAT")]
    log_format: LogFormat,

    /// Log filter, e.g. `info` or `eddy_taskmanager=debug` (also from RUST_LOG).
    #[arg(long, global = true, env = "EDDY_LOG", default_value = "warn")]
    log: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a SQL script on an embedded cluster (a JobManager and TaskManagers in this
    /// process) until every source has ended, or until Ctrl-C stops it: with a savepoint
    /// when the job checkpoints, otherwise by draining (sources stop, sinks flush).
    Run {
        #[command(flatten)]
        job: JobArgs,
        /// TaskManagers of the embedded cluster; the job's slots are spread over them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        taskmanagers: u16,
        /// Print the per-operator counters when the job ends.
        #[arg(long)]
        metrics: bool,
    },
    /// Print the streaming plan of a SQL script: every operator with its changelog kind,
    /// parallelism and the exchange feeding it.
    Explain {
        #[command(flatten)]
        job: JobArgs,
    },
    /// Run a JobManager daemon: takes jobs, schedules them onto TaskManagers.
    Jobmanager(Box<daemons::JobManagerArgs>),
    /// Exit 0 if something accepts TCP connections at HOST:PORT (a container health
    /// check without a shell).
    Health {
        /// `host:port` or `http://host:port`.
        address: String,
    },
    /// Run a TaskManager daemon: offers slots to a JobManager and runs tasks.
    Taskmanager(Box<daemons::TaskManagerArgs>),
    /// Submit a SQL script to a JobManager; prints the job id.
    Submit {
        #[command(flatten)]
        job: JobArgs,
        #[command(flatten)]
        target: client::Target,
        /// Start from a savepoint (or a retained checkpoint directory), at any parallelism.
        #[arg(long, value_name = "PATH")]
        from_savepoint: Option<String>,
    },
    /// Take a savepoint of a running job; prints its path.
    Savepoint {
        /// The job's id.
        job_id: String,
        #[command(flatten)]
        target: client::Target,
    },
    /// Stop a job: with --savepoint, take a savepoint first and print its path.
    Stop {
        /// The job's id.
        job_id: String,
        /// Take a savepoint before stopping.
        #[arg(long)]
        savepoint: bool,
        #[command(flatten)]
        target: client::Target,
    },
    /// List the jobs of a JobManager.
    List {
        #[command(flatten)]
        target: client::Target,
        /// Output format.
        #[arg(long, value_enum, default_value_t = client::OutputFormat::Table)]
        output: client::OutputFormat,
    },
    /// Show a job: state, vertices, subtasks, their TaskManagers and counters.
    Status {
        /// The job's id.
        job_id: String,
        #[command(flatten)]
        target: client::Target,
        /// Output format.
        #[arg(long, value_enum, default_value_t = client::OutputFormat::Table)]
        output: client::OutputFormat,
        /// Also list recent checkpoints: id, trigger time, duration, size, alignment and
        /// each task's acknowledgement time.
        #[arg(long)]
        checkpoints: bool,
    },
    /// Follow a job: its per-vertex rates, busy time, backpressure and watermarks,
    /// refreshed every second until Ctrl-C or the job's end (like `top`).
    Top {
        /// The job's id.
        job_id: String,
        #[command(flatten)]
        target: client::Target,
        /// Milliseconds between refreshes.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
    },
    /// Make a cluster CA (kept and reused in --out) and certificates signed by it for
    /// the named nodes, for a test or small cluster's TLS.
    Cert(credentials::CertArgs),
    /// Make a random token for users: the token on standard output, its token-file
    /// entry (a hash, never the token) appended to --append or shown on standard error.
    Token(credentials::TokenArgs),
    /// Cancel a job.
    Cancel {
        /// The job's id.
        job_id: String,
        #[command(flatten)]
        target: client::Target,
    },
}

#[derive(Debug, Args)]
struct JobArgs {
    /// The SQL script: SET, CREATE TABLE, CREATE VIEW and INSERT INTO statements.
    file: PathBuf,
    /// Default parallelism (overrides the script's `SET 'parallelism.default'`).
    #[arg(short, long)]
    parallelism: Option<usize>,
    /// Any job option, as KEY=VALUE (overrides the script's SET statements).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

impl JobArgs {
    fn read(&self) -> Result<(String, Vec<(String, String)>)> {
        let sql = std::fs::read_to_string(&self.file)
            .with_context(|| format!("cannot read {}", self.file.display()))?;
        let mut overrides = Vec::new();
        if let Some(p) = self.parallelism {
            overrides.push(("parallelism.default".to_string(), p.to_string()));
        }
        for entry in &self.set {
            let (key, value) = entry
                .split_once('=')
                .with_context(|| format!("--set {entry}: expected KEY=VALUE"))?;
            overrides.push((key.trim().to_string(), value.trim().to_string()));
        }
        Ok((sql, overrides))
    }
}

fn init_logging(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The command line, with a daemon's `--config` file layered under its flags.
fn command_line() -> Result<Cli> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let matches = Cli::command().get_matches_from(&argv);
    let matches = daemons::config_file::layer(Cli::command(), matches, argv)?;
    Ok(Cli::from_arg_matches(&matches)?)
}

fn main() -> ExitCode {
    let cli = match command_line() {
        Ok(cli) => cli,
        Err(error) => {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    init_logging(cli.log_format, &cli.log);
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Ends the process when any of its threads panics. A JobManager's state sits behind locks
/// that a panic poisons, after which every call would panic too: it stops instead (exit
/// code 70), and a standby or a restart resumes from what is stored.
fn stop_on_panic(daemon: &'static str) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        if std::thread::current().name() == Some(eddy_planner::PLANNING_THREAD) {
            // A bug met planning a request: the request fails (see eddy_planner::plan).
            return;
        }
        tracing::error!(%info, "the {daemon} panicked; it stops");
        std::process::exit(70);
    }));
}

/// The stack of every runtime thread: tasks evaluate expressions as deep as the planner
/// accepts ([`eddy_planner::sql::depth::MAX_CHAIN`] operators in a chain) recursively.
/// Reserved, not resident: a thread touches only the pages it uses.
const THREAD_STACK: usize = 32 << 20;

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(THREAD_STACK)
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

fn execute(command: Command) -> Result<()> {
    match command {
        Command::Jobmanager(args) => {
            stop_on_panic("jobmanager");
            runtime()?.block_on(daemons::jobmanager(*args))
        }
        Command::Taskmanager(args) => runtime()?.block_on(daemons::taskmanager(*args)),
        Command::Health { address } => runtime()?.block_on(client::health(&address)),
        Command::Submit {
            job,
            target,
            from_savepoint,
        } => {
            let (sql, overrides) = job.read()?;
            runtime()?.block_on(client::submit(&target, sql, overrides, from_savepoint))
        }
        Command::Savepoint { job_id, target } => {
            runtime()?.block_on(client::savepoint(&target, job_id, false))
        }
        Command::Stop {
            job_id,
            savepoint: true,
            target,
        } => runtime()?.block_on(client::savepoint(&target, job_id, true)),
        Command::Stop {
            job_id,
            savepoint: false,
            target,
        } => runtime()?.block_on(client::cancel(&target, job_id)),
        Command::List { target, output } => runtime()?.block_on(client::list(&target, output)),
        Command::Status {
            job_id,
            target,
            output,
            checkpoints,
        } => runtime()?.block_on(client::status(&target, job_id, output, checkpoints)),
        Command::Top {
            job_id,
            target,
            interval_ms,
        } => runtime()?.block_on(client::top(&target, job_id, interval_ms)),
        Command::Cancel { job_id, target } => runtime()?.block_on(client::cancel(&target, job_id)),
        Command::Cert(args) => credentials::cert(args),
        Command::Token(args) => credentials::token(args),
        Command::Explain { job } => {
            let (sql, overrides) = job.read()?;
            let graph = eddy_planner::plan(&sql, &overrides, PlanningContext::CHECKING)
                .with_context(|| format!("in {}", job.file.display()))?;
            print!("{}", graph.explain());
            Ok(())
        }
        Command::Run {
            job,
            taskmanagers,
            metrics,
        } => run(&job, taskmanagers as usize, metrics),
    }
}

/// `eddy run`: the job on the embedded cluster, planned once.
fn run(job: &JobArgs, taskmanagers: usize, metrics: bool) -> Result<()> {
    let (sql, overrides) = job.read()?;
    // The embedded TaskManagers open the connections: secrets are read in this process.
    let graph = eddy_planner::plan(&sql, &overrides, PlanningContext::CONNECTING)
        .with_context(|| format!("in {}", job.file.display()))?;
    let name = graph.config.name.clone();
    let options = overrides.into_iter().collect();
    let outcome = runtime()?
        .block_on(embedded::run(sql, options, graph, taskmanagers))
        .with_context(|| format!("job '{name}' failed"))?;
    let time_to_running_ms = outcome.time_to_running.map(|t| t.as_secs_f64() * 1e3);
    tracing::info!(
        state = %outcome.state,
        time_to_running_ms,
        duration_ms = outcome.duration.as_secs_f64() * 1e3,
        "job ended"
    );
    if metrics {
        eprint!("{}", outcome.metrics.render());
        eprintln!(
            "time to running: {:.1} ms, duration: {:.3} s",
            time_to_running_ms.unwrap_or(f64::NAN),
            outcome.duration.as_secs_f64()
        );
    }
    Ok(())
}
