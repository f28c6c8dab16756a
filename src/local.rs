//! The embedded cluster of `eddy run`: a JobManager and TaskManagers in this process,
//! built from the same components the daemons use.

use anyhow::{Context, Result};
use eddy_common::plan::JobGraph;
use eddy_jobmanager::{JobManager, JobOutcome};
use eddy_taskmanager::{StopRequest, TaskManager};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Runs `graph` on `taskmanagers` in-process TaskManagers with just enough slots. The
/// first Ctrl-C stops the sources cleanly (what was read is written); a second one exits.
pub async fn run(graph: JobGraph, taskmanagers: usize) -> Result<JobOutcome> {
    let slots = graph.slots_needed().div_ceil(taskmanagers);
    let cluster = JobManager::new(
        (0..taskmanagers)
            .map(|i| TaskManager::new(format!("local-tm-{i}"), slots))
            .collect(),
    );
    let (stop_tx, stop_rx) = watch::channel(None);
    // Registered before the job starts, so that no Ctrl-C finds the default handler.
    let mut interrupts = signal(SignalKind::interrupt()).context("cannot handle Ctrl-C")?;
    tokio::spawn(async move {
        if interrupts.recv().await.is_some() {
            eprintln!("stopping: sources end now, sinks flush (Ctrl-C again to abort)");
            let _ = stop_tx.send(Some(StopRequest::Drain));
            if interrupts.recv().await.is_some() {
                std::process::exit(130);
            }
        }
    });
    let name = graph.config.name.clone();
    cluster
        .run(graph, stop_rx)
        .await
        .with_context(|| format!("job '{name}' failed"))
}
