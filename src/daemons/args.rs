//! The daemons' options, each declared once: flag, environment variable, type, default and
//! help are one clap field; `--config` files, `--help` and the README's tables come from it.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use eddy_jobmanager::config as jm;
use eddy_jobmanager::leadership::LeaseSettings;
use eddy_proto::auth::Guard;

use crate::client::DEFAULT_JOBMANAGER;
use crate::security::{self, Exposure, LimitArgs, TlsArgs};

/// Options of `eddy jobmanager`.
#[derive(Debug, Args)]
pub struct JobManagerArgs {
    /// Address to listen on (without it: port 6123 on every interface with TLS and tokens,
    /// on loopback otherwise).
    #[arg(long, env = "EDDY_BIND")]
    pub bind: Option<SocketAddr>,
    /// Milliseconds between TaskManager heartbeats.
    #[arg(long, env = "EDDY_HEARTBEAT_INTERVAL_MS",
          default_value_t = jm::HEARTBEAT_INTERVAL.as_millis() as u64)]
    pub heartbeat_interval_ms: u64,
    /// Milliseconds of silence after which a TaskManager is lost.
    #[arg(long, env = "EDDY_HEARTBEAT_TIMEOUT_MS",
          default_value_t = jm::HEARTBEAT_TIMEOUT.as_millis() as u64)]
    pub heartbeat_timeout_ms: u64,
    /// Where checkpoints go unless a job sets execution.checkpointing.dir: a path,
    /// file:///... or s3://bucket/prefix.
    #[arg(long, env = "EDDY_CHECKPOINT_DIR", default_value = jm::CHECKPOINT_ROOT)]
    pub checkpoint_dir: String,
    /// Address of the HTTP port: the web dashboard at /, the REST API under /v1, Prometheus
    /// metrics at /metrics (e.g. 0.0.0.0:8081); without it, none.
    #[arg(long, env = "EDDY_HTTP_BIND")]
    pub http_bind: Option<SocketAddr>,
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub high_availability: HighAvailabilityArgs,
    /// A TOML file of these options, keyed by their flags' names (flags and environment
    /// variables win).
    #[arg(long, env = "EDDY_CONFIG")]
    pub config: Option<PathBuf>,
}

/// High availability: several JobManagers, one leading.
#[derive(Debug, Clone, Args)]
pub struct HighAvailabilityArgs {
    /// `object-store`: this JobManager is one of several that share --checkpoint-dir (or
    /// --ha-storage-dir) and elect a leader through a lease kept there; the others stand
    /// by with their ports closed, and take over when the lease expires.
    #[arg(
        long = "high-availability",
        alias = "high-availability.type",
        env = "EDDY_HIGH_AVAILABILITY",
        value_name = "TYPE",
        default_value = "none"
    )]
    pub kind: String,
    /// Where the lease is kept (without it: --checkpoint-dir).
    #[arg(
        long = "ha-storage-dir",
        alias = "high-availability.storageDir",
        env = "EDDY_HA_STORAGE_DIR",
        value_name = "DIR"
    )]
    pub storage_dir: Option<String>,
    /// Address TaskManagers and clients reach this JobManager at while it leads, e.g.
    /// http://jm-1:6123 (without it: the bound address).
    #[arg(
        long = "advertise",
        alias = "high-availability.advertise",
        env = "EDDY_ADVERTISE"
    )]
    pub advertise: Option<String>,
    /// How long a lease not renewed lasts.
    #[arg(
        long = "ha-lease-duration",
        alias = "high-availability.lease.duration",
        env = "EDDY_HA_LEASE_DURATION",
        value_name = "DURATION",
        default_value_t = FlinkDuration(LeaseSettings::DEFAULT.duration)
    )]
    pub lease_duration: FlinkDuration,
    /// How often the leader renews its lease and standbys look at it.
    #[arg(
        long = "ha-lease-renew-interval",
        alias = "high-availability.lease.renew-interval",
        env = "EDDY_HA_LEASE_RENEW_INTERVAL",
        value_name = "DURATION",
        default_value_t = FlinkDuration(LeaseSettings::DEFAULT.renew_interval)
    )]
    pub lease_renew_interval: FlinkDuration,
}

impl HighAvailabilityArgs {
    /// The setting for a JobManager bound to `bind` under `tls`; `None` without high
    /// availability.
    pub fn resolve(
        self,
        bind: SocketAddr,
        tls: Option<&eddy_proto::tls::Tls>,
    ) -> Result<Option<jm::HighAvailability>> {
        match self.kind.as_str() {
            "none" | "NONE" => return Ok(None),
            "object-store" => {}
            other => bail!(
                "high-availability type '{other}' is not supported: use object-store (a lease in the storage directory) or none"
            ),
        }
        let lease = LeaseSettings {
            duration: self.lease_duration.0,
            renew_interval: self.lease_renew_interval.0,
        };
        if lease.renew_interval.is_zero() || lease.duration < lease.renew_interval * 2 {
            bail!(
                "the lease duration must be at least twice its renew interval (and that above zero)"
            );
        }
        let scheme = eddy_proto::tls::scheme(tls);
        let advertise = match self.advertise {
            Some(address) => address,
            None if bind.ip().is_unspecified() => {
                bail!(
                    "--advertise is needed with high availability when binding {bind}: the address others reach this JobManager at"
                )
            }
            None => format!("{scheme}://{bind}"),
        };
        Ok(Some(jm::HighAvailability {
            lease,
            advertise,
            id: format!("jm-{}-{}", super::host_name(), std::process::id()),
            storage_dir: self.storage_dir,
        }))
    }
}

/// Options of `eddy taskmanager`.
#[derive(Debug, Args)]
pub struct TaskManagerArgs {
    /// The JobManager to register with; with high availability, every JobManager,
    /// comma-separated (it follows the leader).
    #[arg(long, env = "EDDY_JOBMANAGER", default_value = DEFAULT_JOBMANAGER)]
    pub jobmanager: String,
    /// Slots offered.
    #[arg(long, env = "EDDY_SLOTS", default_value_t = 1)]
    pub slots: usize,
    /// Address to listen on (without it: any free port, on every interface with TLS and on
    /// loopback without).
    #[arg(long, env = "EDDY_BIND")]
    pub bind: Option<SocketAddr>,
    /// Address other processes reach this TaskManager at, e.g. http://tm-1:6124 (without
    /// it: the bound address).
    #[arg(long, env = "EDDY_ADVERTISE")]
    pub advertise: Option<String>,
    /// Advertise http://<this host's name>:<bound port>: in a container, the name other
    /// containers resolve (needs a fixed port in --bind).
    #[arg(long, env = "EDDY_ADVERTISE_HOSTNAME", conflicts_with = "advertise")]
    pub advertise_hostname: bool,
    /// Unique id (without it: tm-<host>-<pid>).
    #[arg(long, env = "EDDY_TASKMANAGER_ID")]
    pub id: Option<String>,
    /// Address of the HTTP port serving Prometheus metrics at /metrics (e.g. 0.0.0.0:9249);
    /// without it, none.
    #[arg(long, env = "EDDY_HTTP_BIND")]
    pub http_bind: Option<SocketAddr>,
    #[command(flatten)]
    pub security: SecurityArgs,
    /// A TOML file of these options, keyed by their flags' names (flags and environment
    /// variables win).
    #[arg(long, env = "EDDY_CONFIG")]
    pub config: Option<PathBuf>,
}

/// How a daemon is secured: TLS, users' tokens, and whether it may listen beyond loopback
/// without them.
#[derive(Debug, Args)]
pub struct SecurityArgs {
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Users' tokens: a file of `name = sha256:HEX [read-only]` lines (`eddy token` makes
    /// them), demanded by a JobManager's job service and HTTP port and a TaskManager's
    /// /metrics. A JobManager without them listens on loopback only unless --insecure.
    #[arg(long, env = "EDDY_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Allow listening beyond loopback without TLS and tokens.
    #[arg(long, env = "EDDY_INSECURE")]
    pub insecure: bool,
}

/// A daemon's security and where it listens, checked against each other.
pub struct Secured {
    /// TLS on its ports, if configured.
    pub tls: Option<eddy_proto::tls::Tls>,
    /// Who may call it.
    pub guard: Guard,
    /// Where its gRPC port listens.
    pub bind: SocketAddr,
    /// Where its HTTP port listens, if anywhere.
    pub http_bind: Option<SocketAddr>,
}

impl SecurityArgs {
    /// The TLS and guard of daemon `what`, and its addresses: `bind` (else `port` on
    /// loopback or, secured, every interface) and `http_bind`, refused beyond loopback
    /// unless secured. A daemon that serves no users (`users` false) needs no tokens to be
    /// secured.
    pub fn secure(
        &self,
        what: &str,
        (bind, port): (Option<SocketAddr>, u16),
        http_bind: Option<SocketAddr>,
        users: bool,
    ) -> Result<Secured> {
        let tls = self.tls.server()?;
        let guard = security::guard(self.token_file.as_deref())?;
        let exposure = Exposure {
            tls: tls.is_some(),
            tokens: guard.enabled() || !users,
            insecure: self.insecure,
        };
        let bind = exposure.bind(what, bind, port)?;
        if let Some(http) = http_bind {
            exposure.check(&format!("{what} --http-bind"), http)?;
        }
        Ok(Secured {
            tls,
            guard,
            bind,
            http_bind,
        })
    }
}

/// A duration as Flink writes them (`500ms`, `10s`, `2min`), shown the same way in
/// `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlinkDuration(pub Duration);

impl FromStr for FlinkDuration {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let duration = eddy_common::config::checkpointing::parse_duration("duration", text)
            .with_context(|| format!("'{text}' is not a duration"))?;
        Ok(FlinkDuration(duration))
    }
}

impl fmt::Display for FlinkDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_millis() {
            ms if ms % 1000 == 0 => write!(f, "{}s", ms / 1000),
            ms => write!(f, "{ms}ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_show_as_flink_writes_them() {
        let lease: FlinkDuration = "10s".parse().unwrap();
        assert_eq!(lease.0, Duration::from_secs(10));
        assert_eq!(lease.to_string(), "10s");
        assert_eq!(
            FlinkDuration(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
        assert!("soon".parse::<FlinkDuration>().is_err());
    }
}
