//! `eddy run` of a job that checkpoints: the JobManager and TaskManagers of a cluster run in
//! this process on loopback, so the job gets the cluster's checkpoints, restarts and
//! savepoints. Checkpoints go to `./eddy-data` unless the script sets
//! `execution.checkpointing.dir`.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use eddy_jobmanager::cluster::ClusterConfig;
use eddy_proto::v1 as pb;
use eddy_proto::v1::job_service_client::JobServiceClient;
use eddy_taskmanager::daemon::TaskManagerConfig;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tonic::transport::Channel;

/// Default storage of checkpoints of the embedded cluster.
const DEFAULT_STORAGE: &str = "./eddy-data";

/// Runs the script until its job finishes; Ctrl-C takes a savepoint and stops it.
pub async fn run(
    sql: String,
    overrides: Vec<(String, String)>,
    taskmanagers: usize,
    slots: usize,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot open a loopback port for the embedded JobManager")?;
    let address = format!("http://{}", listener.local_addr()?);
    // The TaskManagers stop first, so that their last reports reach the JobManager.
    let (stop_jobmanager, jobmanager_stop) = watch::channel(false);
    let (stop_taskmanagers, taskmanagers_stop) = watch::channel(false);
    let config = ClusterConfig {
        checkpoint_root: DEFAULT_STORAGE.into(),
        ..ClusterConfig::default()
    };
    let when_stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let jobmanager = tokio::spawn(eddy_jobmanager::daemon::serve(
        listener,
        config,
        false,
        when_stopped(jobmanager_stop),
    ));
    let mut daemons = Vec::new();
    for i in 0..taskmanagers {
        let config = TaskManagerConfig {
            id: format!("local-tm-{i}"),
            bind: "127.0.0.1:0".parse().expect("address"),
            advertise: None,
            jobmanager: address.clone(),
            slots,
        };
        daemons.push(tokio::spawn(eddy_taskmanager::daemon::run(
            config,
            when_stopped(taskmanagers_stop.clone()),
        )));
    }
    let result = follow(&address, sql, overrides).await;
    let _ = stop_taskmanagers.send(true);
    for daemon in daemons {
        let _ = daemon.await;
    }
    let _ = stop_jobmanager.send(true);
    let _ = jobmanager.await;
    result
}

async fn connect(address: &str) -> Result<JobServiceClient<Channel>> {
    for _ in 0..100 {
        if let Ok(client) = JobServiceClient::connect(address.to_string()).await {
            return Ok(client);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("the embedded JobManager did not start")
}

/// Submits the job and follows it to its end.
async fn follow(address: &str, sql: String, overrides: Vec<(String, String)>) -> Result<()> {
    // Registered before the job starts, so that no Ctrl-C finds the default handler.
    let mut interrupts = signal(SignalKind::interrupt()).context("cannot handle Ctrl-C")?;
    let mut client = connect(address).await?;
    let request = pb::SubmitJobRequest {
        sql,
        options: overrides.into_iter().collect::<HashMap<_, _>>(),
        restore_path: String::new(),
    };
    let job_id = client
        .submit_job(request)
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner()
        .job_id;
    tracing::info!(job = %job_id, storage = DEFAULT_STORAGE, "job submitted to the embedded cluster");
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = interrupts.recv(), if !stopping => {
                stopping = true;
                eprintln!("stopping: taking a savepoint, then stopping the job");
                let request = pb::TriggerSavepointRequest { job_id: job_id.clone(), stop: true };
                match client.trigger_savepoint(request).await {
                    Ok(response) => eprintln!("savepoint: {} (eddy run continues from it with a cluster: eddy submit --from-savepoint)", response.into_inner().path),
                    Err(status) => {
                        eprintln!("no savepoint ({}); cancelling", status.message());
                        let _ = client.cancel_job(pb::CancelJobRequest { job_id: job_id.clone() }).await;
                    }
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        let job = client
            .get_job(pb::GetJobRequest {
                job_id: job_id.clone(),
            })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        match pb::JobState::try_from(job.state).unwrap_or(pb::JobState::Unspecified) {
            pb::JobState::Finished | pb::JobState::Cancelled => {
                tracing::info!(job = %job_id, restarts = job.restarts, checkpoints = job.checkpoints.len(), "job ended");
                return Ok(());
            }
            pb::JobState::Failed => bail!("job failed: {}", job.reason),
            _ => {}
        }
    }
}
