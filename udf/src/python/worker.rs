//! One Python worker process: started with the job's `python.*` options, fed frames over
//! a socket that is its standard input, stopped (killed and reaped) when dropped.

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use eddy_common::config::python::PythonConfig;

use super::frame::{self, CALL, DEFINE, ERROR, HELLO, RESULT};
use super::registry;
use crate::UdfError;

/// The worker's program, run with `python -c`.
const WORKER_SOURCE: &str = include_str!("worker.py");
/// Lines of a worker's output kept for the error that reports its death.
const OUTPUT_TAIL: usize = 20;

/// What a function tells a worker: its id and its definition frame.
pub(super) struct Definition<'a> {
    /// Unique within the job's functions.
    pub id: u32,
    /// `module.function`.
    pub target: &'a str,
    /// The `D` frame's payload.
    pub frame: &'a [u8],
}

/// A running worker.
pub(super) struct Worker {
    child: Child,
    channel: UnixStream,
    executable: String,
    timeout: Duration,
    defined: HashSet<u32>,
    output: Arc<Mutex<VecDeque<String>>>,
    /// Reused frame buffers.
    sending: Vec<u8>,
    receiving: Vec<u8>,
}

impl Worker {
    /// Starts a worker and waits until it is ready (pyarrow imported, `python.files` on
    /// its path).
    pub fn start(config: &PythonConfig) -> Result<Worker, UdfError> {
        let start_error = |source| UdfError::Start {
            executable: config.executable.clone(),
            source,
        };
        let (channel, theirs) = UnixStream::pair().map_err(start_error)?;
        let (output, output_writer) = io::pipe().map_err(start_error)?;
        let settings = serde_json::json!({
            "files": config.files,
            "memory_limit": config.memory_limit,
        });
        let mut command = Command::new(&config.executable);
        command
            .arg("-c")
            .arg(WORKER_SOURCE)
            .arg(settings.to_string())
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(output_writer.try_clone().map_err(start_error)?)
            .stderr(output_writer);
        let child = command.spawn().map_err(start_error)?;
        // The command holds this side's copies of the output pipe: dropped, the pipe ends
        // when the worker does.
        drop(command);
        let pid = child.id();
        registry::add(pid);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        forward_output(pid, output, tail.clone());
        channel
            .set_read_timeout(Some(config.timeout))
            .and_then(|()| channel.set_write_timeout(Some(config.timeout)))
            .map_err(start_error)?;
        let mut worker = Worker {
            child,
            channel,
            executable: config.executable.clone(),
            timeout: config.timeout,
            defined: HashSet::new(),
            output: tail,
            sending: Vec::new(),
            receiving: Vec::new(),
        };
        worker.await_hello()?;
        tracing::debug!(pid, "a Python worker is ready");
        Ok(worker)
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn await_hello(&mut self) -> Result<(), UdfError> {
        let startup = "(its start)";
        match frame::read_frame(&mut self.channel, &mut self.receiving) {
            Ok(HELLO) => Ok(()),
            Ok(ERROR) => Err(UdfError::Startup {
                executable: self.executable.clone(),
                traceback: String::from_utf8_lossy(&self.receiving).into_owned(),
            }),
            Ok(tag) => Err(self.unexpected(startup, tag)),
            Err(e) => Err(self.failed(startup, e)),
        }
    }

    /// Calls `function` with `action` over `batches` (a scalar function's arguments, an
    /// aggregate's accumulators and rows); the one column the worker answers.
    pub fn call(
        &mut self,
        function: &Definition<'_>,
        action: u8,
        batches: &[&RecordBatch],
    ) -> Result<ArrayRef, UdfError> {
        if !self.defined.contains(&function.id) {
            frame::write_frame(&mut self.channel, DEFINE, function.frame)
                .map_err(|e| self.failed(function.target, e))?;
            self.defined.insert(function.id);
        }
        self.sending.clear();
        self.sending.extend_from_slice(&function.id.to_le_bytes());
        self.sending.push(action);
        for batch in batches {
            frame::write_batch(&mut self.sending, batch).map_err(|source| UdfError::Arrow {
                function: function.target.into(),
                source,
            })?;
        }
        frame::write_frame(&mut self.channel, CALL, &self.sending)
            .map_err(|e| self.failed(function.target, e))?;
        match frame::read_frame(&mut self.channel, &mut self.receiving) {
            Ok(RESULT) => {
                frame::read_column(&self.receiving).map_err(|message| UdfError::Protocol {
                    function: function.target.into(),
                    message,
                })
            }
            Ok(ERROR) => Err(UdfError::Raised {
                function: function.target.into(),
                traceback: String::from_utf8_lossy(&self.receiving).into_owned(),
            }),
            Ok(tag) => Err(self.unexpected(function.target, tag)),
            Err(e) => Err(self.failed(function.target, e)),
        }
    }

    fn unexpected(&self, function: &str, tag: u8) -> UdfError {
        UdfError::Protocol {
            function: function.into(),
            message: format!("a frame tagged {:?}", char::from(tag)),
        }
    }

    /// The error for a broken conversation: a timeout, or the worker's end.
    fn failed(&mut self, function: &str, error: io::Error) -> UdfError {
        let pid = self.pid();
        if matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return UdfError::Timeout {
                function: function.into(),
                timeout: self.timeout,
                pid,
            };
        }
        let status = self.exit_status(Duration::from_secs(2));
        let output = {
            let lines = self.output.lock().unwrap_or_else(|p| p.into_inner());
            match lines.is_empty() {
                true => String::new(),
                false => format!(
                    "; its last output:\n{}",
                    lines.iter().cloned().collect::<Vec<_>>().join("\n")
                ),
            }
        };
        UdfError::Died {
            function: function.into(),
            pid,
            status: status.unwrap_or_else(|| format!("the connection broke ({error})")),
            output,
        }
    }

    /// How the worker ended, waiting up to `patience` for it to end.
    fn exit_status(&mut self, patience: Duration) -> Option<String> {
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the output thread a moment to take in the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return Some(describe(status));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Worker(pid {})", self.pid())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        registry::remove(self.pid());
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with code {code}"),
        (None, Some(9)) => "it was killed (signal 9: SIGKILL, or the kernel's OOM killer)".into(),
        (None, Some(signal)) => format!("it was ended by signal {signal}"),
        (None, None) => "it ended".into(),
    }
}

/// Logs a worker's output (its `print`s, warnings and fatal errors) and keeps the last
/// lines for the error that may report its death.
fn forward_output(pid: u32, output: io::PipeReader, tail: Arc<Mutex<VecDeque<String>>>) {
    let forwarding = std::thread::Builder::new()
        .name(format!("python-{pid}"))
        .spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { break };
                tracing::info!(target: "eddy::python", pid, "{line}");
                let mut lines = tail.lock().unwrap_or_else(|p| p.into_inner());
                if lines.len() == OUTPUT_TAIL {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });
    if let Err(e) = forwarding {
        tracing::warn!(pid, "cannot follow a Python worker's output: {e}");
    }
}
