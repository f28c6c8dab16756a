//! A job's lifecycle: the one place that says which state a job moves to on which event.
//!
//! ```text
//!             Scheduled              AllTasksFinished
//!   Created ─────────────▶ Running ──────────────────▶ Finished
//!     ▲  │                 │  │ │
//!     │  │ Failed{restart} │  │ │ Stopped (drained, or after a stop-with-savepoint)
//!     │  │  ┌──────────────┘  │ └────────────────────▶ Cancelled
//!     │  ▼  ▼                 │ Failed{no restart}
//!    Restarting ──────────────┴──────────────────────▶ Failed
//!      RestartDue   Unrestorable
//! ```
//! A job a JobManager recovered from the job store waits as `Restarting`; `Adopted` moves
//! it straight to `Running` when its run's tasks all still run (see [`crate::adoption`]).
//! `CancelRequested` ends any state that is not final in `Cancelled`.

use std::fmt;

use eddy_proto::v1 as pb;
use serde::{Deserialize, Serialize};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// Accepted and planned; waiting for free slots (the first run, or a restart's).
    Created,
    /// Its tasks are deployed.
    Running,
    /// A run failed; the job waits (backoff) to restart from its latest checkpoint.
    Restarting,
    /// Every task finished: every source read all its input.
    Finished,
    /// Cancelled, or stopped, on request.
    Cancelled,
    /// Failed for good.
    Failed,
}

/// What happens to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Slots were found and its tasks deployed.
    Scheduled,
    /// Every task finished.
    AllTasksFinished,
    /// Its tasks ended because they were told to stop (drained, or after a
    /// stop-with-savepoint), not because their input ended.
    Stopped,
    /// A run failed (a task failed, a TaskManager was lost, too many checkpoints
    /// failed); `restart` when its restart strategy allows another attempt.
    Failed {
        /// Whether it restarts.
        restart: bool,
    },
    /// The restart's backoff is over and its checkpoint chosen: it waits for slots.
    RestartDue,
    /// The restart cannot happen (its checkpoint cannot be restored).
    Unrestorable,
    /// The run a recovered job waited to restart still runs whole: it continues.
    Adopted,
    /// A user cancelled it.
    CancelRequested,
}

/// A transition a state does not allow: a stale event (e.g. of a run that ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {from} job does not take {transition:?}")]
pub struct IllegalTransition {
    /// The state.
    pub from: JobState,
    /// The event.
    pub transition: Transition,
}

impl JobState {
    /// The state after `transition`, if this state allows it.
    pub fn apply(self, transition: Transition) -> Result<JobState, IllegalTransition> {
        use JobState::*;
        use Transition as T;
        let next = match (self, transition) {
            (Created, T::Scheduled) => Running,
            (Running, T::AllTasksFinished) => Finished,
            (Running, T::Stopped) => Cancelled,
            (Created | Running, T::Failed { restart: true }) => Restarting,
            (Created | Running, T::Failed { restart: false }) => Failed,
            (Restarting, T::RestartDue) => Created,
            (Restarting, T::Unrestorable) => Failed,
            (Restarting, T::Adopted) => Running,
            (Created | Running | Restarting, T::CancelRequested) => Cancelled,
            (from, transition) => return Err(IllegalTransition { from, transition }),
        };
        Ok(next)
    }

    /// Whether `transition` applies.
    pub fn allows(self, transition: Transition) -> bool {
        self.apply(transition).is_ok()
    }

    /// Finished, cancelled or failed: nothing moves it any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Cancelled | JobState::Failed
        )
    }

    /// As the API shows it.
    pub fn to_proto(self) -> pb::JobState {
        match self {
            JobState::Created => pb::JobState::Created,
            JobState::Running => pb::JobState::Running,
            JobState::Restarting => pb::JobState::Restarting,
            JobState::Finished => pb::JobState::Finished,
            JobState::Cancelled => pb::JobState::Cancelled,
            JobState::Failed => pb::JobState::Failed,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.to_proto().as_str_name();
        f.write_str(name.trim_start_matches("JOB_STATE_"))
    }
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::Transition as T;
    use super::*;

    const STATES: [JobState; 6] = [Created, Running, Restarting, Finished, Cancelled, Failed];
    const TRANSITIONS: [Transition; 9] = [
        T::Scheduled,
        T::AllTasksFinished,
        T::Stopped,
        T::Failed { restart: true },
        T::Failed { restart: false },
        T::RestartDue,
        T::Unrestorable,
        T::Adopted,
        T::CancelRequested,
    ];

    #[test]
    fn a_job_runs_to_its_end() {
        assert_eq!(Created.apply(T::Scheduled), Ok(Running));
        assert_eq!(Running.apply(T::AllTasksFinished), Ok(Finished));
        assert_eq!(Running.apply(T::Stopped), Ok(Cancelled));
    }

    #[test]
    fn a_failed_run_restarts_through_waiting_for_slots_or_fails() {
        let restarting = Running.apply(T::Failed { restart: true }).unwrap();
        assert_eq!(restarting, Restarting);
        // The backoff is over: the restart waits for slots like a new job.
        assert_eq!(restarting.apply(T::RestartDue), Ok(Created));
        assert_eq!(restarting.apply(T::Unrestorable), Ok(Failed));
        assert_eq!(Running.apply(T::Failed { restart: false }), Ok(Failed));
        // A failure while waiting for slots (e.g. a deploy refused) counts too.
        assert_eq!(Created.apply(T::Failed { restart: true }), Ok(Restarting));
    }

    #[test]
    fn a_restart_cannot_begin_twice_nor_a_failure_repeat() {
        // Two failures of one run (two tasks reporting) make one restart.
        assert!(!Restarting.allows(T::Failed { restart: true }));
        assert!(!Restarting.allows(T::Scheduled));
        assert!(!Running.allows(T::RestartDue));
    }

    #[test]
    fn only_a_waiting_restart_is_adopted() {
        assert_eq!(Restarting.apply(T::Adopted), Ok(Running));
        for state in [Created, Running] {
            assert!(!state.allows(T::Adopted), "{state}");
        }
    }

    #[test]
    fn cancel_ends_every_state_that_is_not_final() {
        for state in [Created, Running, Restarting] {
            assert_eq!(state.apply(T::CancelRequested), Ok(Cancelled), "{state}");
        }
    }

    #[test]
    fn final_states_take_no_transition() {
        for state in STATES.into_iter().filter(|s| s.is_final()) {
            for transition in TRANSITIONS {
                assert_eq!(
                    state.apply(transition),
                    Err(IllegalTransition {
                        from: state,
                        transition
                    })
                );
            }
        }
    }

    #[test]
    fn only_final_states_are_final() {
        let final_states: Vec<JobState> = STATES.into_iter().filter(|s| s.is_final()).collect();
        assert_eq!(final_states, vec![Finished, Cancelled, Failed]);
        // Every other state has a way out.
        for state in STATES.into_iter().filter(|s| !s.is_final()) {
            assert!(TRANSITIONS.iter().any(|t| state.allows(*t)), "{state}");
        }
    }

    #[test]
    fn states_are_stored_by_their_api_names() {
        for state in STATES {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{state}\""));
            assert_eq!(serde_json::from_str::<JobState>(&json).unwrap(), state);
        }
    }
}
