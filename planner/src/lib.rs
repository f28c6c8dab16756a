//! Eddy's planner: the SQL front end ([`sql`]: Flink-style scripts parsed, bound and
//! optimized into DataFusion logical plans) and the streaming planner ([`plan`](mod@plan): logical
//! plans into a job graph of operator chains, exchanges and changelog kinds). The only
//! crate that parses SQL.

pub mod plan;
pub mod sql;

use eddy_common::secrets::SecretReferences;
use eddy_common::{EddyError, Result};

pub use plan::JobGraph;

/// What planning may depend on besides the script: given explicitly by whoever plans, so
/// that two processes planning one script differ only where they say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanningContext {
    /// Whether connectors read the secrets their options name (where they will connect)
    /// or keep the references (where the plan is only checked, stored or shown).
    pub secrets: SecretReferences,
}

impl PlanningContext {
    /// Planning where the plan runs: connectors read the secrets they name.
    pub const CONNECTING: PlanningContext = PlanningContext {
        secrets: SecretReferences::Resolve,
    };
    /// Planning to check, store or show a plan: secret references stay as written.
    pub const CHECKING: PlanningContext = PlanningContext {
        secrets: SecretReferences::Keep,
    };
}

/// The name of the threads that plan: a panic on one is a failed plan, not a dead daemon.
pub const PLANNING_THREAD: &str = "eddy-planner";

/// The stack of a planning thread. Statements nest at most
/// [`sql::depth::MAX_DEPTH`] levels once balanced, but a rejected one may be as deep as it
/// has operators ([`sql::depth::MAX_OPERATORS`]) when its tree is dropped, and every walk
/// over it (DataFusion's binder and optimizer, Eddy's planner) recurses. Reserved, not
/// resident: only the pages a deep statement touches take memory.
const PLANNING_STACK: usize = 512 << 20;

/// Parses and plans a SQL script into a job graph. `overrides` (from the command line)
/// win over the script's `SET` statements. The work runs on a planning thread (see
/// [`on_planning_thread`]).
pub fn plan(
    script: &str,
    overrides: &[(String, String)],
    context: PlanningContext,
) -> Result<JobGraph> {
    on_planning_thread(|| {
        let compiled = sql::compile(script, overrides, context)?;
        plan::plan_job(&compiled)
    })
}

/// Runs `work` on a thread of its own with a stack for the deepest statement the planner
/// accepts, so that no script can overflow its caller's (a tokio worker's 2 MiB); a panic
/// in `work` is an error.
pub fn on_planning_thread<T: Send>(work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| {
        let planning = std::thread::Builder::new()
            .name(PLANNING_THREAD.into())
            .stack_size(PLANNING_STACK)
            .spawn_scoped(scope, work)
            .map_err(|e| EddyError::Internal(format!("cannot start a planning thread: {e}")))?;
        planning.join().unwrap_or_else(|panic| {
            let message = eddy_common::error::panic_message(&*panic, "a panic");
            Err(EddyError::Internal(format!("planning panicked: {message}")))
        })
    })
}
