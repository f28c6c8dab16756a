//! The client commands: `eddy submit`, `list`, `status`, `top`, `savepoint`, `stop`,
//! `cancel` and `health`, and how they reach a JobManager.

mod render;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use eddy_proto::auth::BearerToken;
use eddy_proto::v1 as pb;
use eddy_proto::v1::job_service_client::JobServiceClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::security::TlsArgs;
pub use render::{list, status, top};

/// The JobManager clients and TaskManagers reach unless told otherwise.
pub const DEFAULT_JOBMANAGER: &str = "http://127.0.0.1:6123";

/// The JobManager a client command talks to, and how.
#[derive(Debug, Args)]
pub struct Target {
    /// The JobManager's address (`https://…` or any address with --tls-ca for TLS); with
    /// high availability, every JobManager's, comma-separated (the leader answers).
    #[arg(long, env = "EDDY_JOBMANAGER", default_value = DEFAULT_JOBMANAGER)]
    jobmanager: String,
    /// The token to present (when the JobManager demands one).
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    tls: TlsArgs,
}

/// How long a JobManager of several may take to answer before the next one is tried.
const LEADER_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A job service client sending the caller's token.
type Client = JobServiceClient<InterceptedService<Channel, BearerToken>>;

impl Target {
    /// A client of the first JobManager of `--jobmanager` (comma-separated: with high
    /// availability, standbys keep their ports closed) that answers.
    async fn connect(&self) -> Result<Client> {
        let tls = self.tls.client()?;
        let token =
            BearerToken::new(self.token.as_deref()).context("--token: a token is visible ASCII")?;
        let addresses: Vec<&str> = eddy_proto::jobmanager_addresses(&self.jobmanager).collect();
        let mut failure = None;
        for address in &addresses {
            let channel = match Self::channel(address, tls.as_ref()).await {
                Ok(channel) => channel,
                Err(error) => {
                    failure = Some(error);
                    continue;
                }
            };
            let mut client = JobServiceClient::with_interceptor(channel, token.clone());
            // Of several, the one that answers leads: a paused one accepts connections but
            // answers nothing.
            if addresses.len() > 1 {
                let probe = client.list_jobs(eddy_proto::v1::ListJobsRequest {});
                match tokio::time::timeout(LEADER_PROBE_TIMEOUT, probe).await {
                    Ok(Err(status)) if status.code() == tonic::Code::Unavailable => {
                        failure = Some(anyhow::anyhow!("the JobManager at {address}: {status}"));
                        continue;
                    }
                    Ok(_) => {}
                    Err(_) => {
                        failure = Some(anyhow::anyhow!(
                            "the JobManager at {address} does not answer"
                        ));
                        continue;
                    }
                }
            }
            return Ok(client);
        }
        Err(failure.unwrap_or_else(|| anyhow::anyhow!("--jobmanager names no address")))
    }

    async fn channel(address: &str, tls: Option<&eddy_proto::tls::Tls>) -> Result<Channel> {
        if address.starts_with("https://") && tls.is_none() {
            bail!(
                "{address} is a TLS address: pass --tls-ca (or EDDY_TLS_CA), the CA that signed the JobManager's certificate"
            );
        }
        let endpoint = eddy_proto::tls::endpoint(address, tls)
            .with_context(|| format!("bad JobManager address '{address}'"))?
            .connect_timeout(Duration::from_secs(5));
        endpoint.connect().await.with_context(|| {
            let hint = match tls {
                Some(_) => "",
                None => " (if it serves TLS, pass --tls-ca)",
            };
            format!("cannot reach the JobManager at {address}{hint}")
        })
    }
}

/// Output formats of the client commands.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    /// A table for people.
    Table,
    /// JSON for scripts.
    Json,
}

pub(crate) fn status_error(status: tonic::Status) -> anyhow::Error {
    let message = status.message();
    // A plain-text client of a TLS JobManager sees its connection dropped mid-call.
    let transport = matches!(
        status.code(),
        tonic::Code::Cancelled
            | tonic::Code::Unknown
            | tonic::Code::Unavailable
            | tonic::Code::Internal
    ) && ["canceled", "h2 protocol", "connection", "transport"]
        .iter()
        .any(|s| message.contains(s));
    match transport {
        true => anyhow::anyhow!(
            "{message} (the connection broke: if the JobManager serves TLS, use an https:// \
             address with --tls-ca)"
        ),
        false => anyhow::anyhow!("{message}"),
    }
}

/// `eddy submit`.
pub async fn submit(
    target: &Target,
    sql: String,
    options: Vec<(String, String)>,
    from_savepoint: Option<String>,
) -> Result<()> {
    let mut client = target.connect().await?;
    let request = pb::SubmitJobRequest {
        sql,
        options: options.into_iter().collect::<HashMap<_, _>>(),
        restore_path: from_savepoint.unwrap_or_default(),
    };
    let response = client.submit_job(request).await.map_err(status_error)?;
    println!("{}", response.into_inner().job_id);
    Ok(())
}

/// `eddy savepoint` and `eddy stop --savepoint`.
pub async fn savepoint(target: &Target, job_id: String, stop: bool) -> Result<()> {
    let mut client = target.connect().await?;
    let response = client
        .trigger_savepoint(pb::TriggerSavepointRequest { job_id, stop })
        .await
        .map_err(status_error)?;
    println!("{}", response.into_inner().path);
    Ok(())
}

/// `eddy cancel`.
pub async fn cancel(target: &Target, job_id: String) -> Result<()> {
    let mut client = target.connect().await?;
    client
        .cancel_job(pb::CancelJobRequest {
            job_id: job_id.clone(),
        })
        .await
        .map_err(status_error)?;
    println!("cancelled {job_id}");
    Ok(())
}

/// `eddy health ADDRESS`: whether something accepts connections there (for container
/// health checks, where there is no shell or curl).
pub async fn health(address: &str) -> Result<()> {
    let target = address
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let connect = tokio::net::TcpStream::connect(target);
    match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => bail!("{address}: {e}"),
        Err(_) => bail!("{address}: no answer within 2 s"),
    }
}
