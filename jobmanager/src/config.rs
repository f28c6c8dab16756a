//! How a JobManager runs.

use std::time::Duration;

use eddy_proto::auth::Guard;
use eddy_proto::tls::Tls;

use crate::leadership::LeaseSettings;
use crate::policy::SubmitPolicy;

/// High availability: JobManagers sharing the checkpoint root elect a leader there.
#[derive(Debug, Clone)]
pub struct HighAvailability {
    /// The lease's timing.
    pub lease: LeaseSettings,
    /// Where TaskManagers and clients reach this JobManager when it leads.
    pub advertise: String,
    /// This JobManager's id in the lease.
    pub id: String,
    /// Where the lease is kept, if not in the checkpoint root.
    pub storage_dir: Option<String>,
}

/// How often TaskManagers heartbeat, unless configured.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
/// Silence after which a TaskManager is lost, unless configured.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);
/// Where checkpoints go unless configured (or set by a job).
pub const CHECKPOINT_ROOT: &str = "./eddy-data/checkpoints";

/// How a JobManager runs.
#[derive(Debug, Clone)]
pub struct JobManagerConfig {
    /// How often TaskManagers heartbeat.
    pub heartbeat_interval: Duration,
    /// Silence after which a TaskManager is considered lost.
    pub heartbeat_timeout: Duration,
    /// Where checkpoints go unless a job says otherwise.
    pub checkpoint_root: String,
    /// Where the HTTP port (REST API, dashboard, `/metrics`) listens, if anywhere.
    pub http_bind: Option<std::net::SocketAddr>,
    /// TLS on both ports, mutual towards TaskManagers, if set.
    pub tls: Option<Tls>,
    /// Who may use the job service and the HTTP port.
    pub guard: Guard,
    /// What submitted jobs may do.
    pub policy: SubmitPolicy,
    /// Standby JobManagers and a leader lease, if set.
    pub high_availability: Option<HighAvailability>,
    /// The lease this JobManager leads by, once it leads: its term fences the jobs'
    /// commit logs (0 without high availability), and it is shown with each job.
    pub lease: Option<crate::leadership::Lease>,
    /// How it plans: a daemon keeps secret references (its TaskManagers read them); an
    /// embedded one, whose TaskManagers take its plan as it is, reads them.
    pub planning: eddy_planner::PlanningContext,
}

impl JobManagerConfig {
    /// The leader term this JobManager acts in: its lease's, 0 without high availability.
    pub fn term(&self) -> u64 {
        self.lease.as_ref().map_or(0, |lease| lease.term)
    }
}

impl Default for JobManagerConfig {
    fn default() -> Self {
        JobManagerConfig {
            heartbeat_interval: HEARTBEAT_INTERVAL,
            heartbeat_timeout: HEARTBEAT_TIMEOUT,
            checkpoint_root: CHECKPOINT_ROOT.into(),
            http_bind: None,
            tls: None,
            guard: Guard::default(),
            policy: SubmitPolicy::default(),
            high_availability: None,
            lease: None,
            planning: eddy_planner::PlanningContext::CHECKING,
        }
    }
}
