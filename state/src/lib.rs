//! Keyed state that may outgrow memory: a log-structured merge tree made for operator state.
//!
//! An operator subtask owns one [`Store`]: it alone writes it, and it flushes at every
//! checkpoint barrier. That shapes the design, which differs from a general key-value
//! engine's:
//! - no write-ahead log: a checkpoint is the durable copy and a failure restores from it;
//! - runs are immutable files, written once and named, so a checkpoint is the list of
//!   runs it needs and shares the unchanged ones with the checkpoint before it;
//! - keys start with their key group, so a subtask's share after a rescale is a key range.

mod cache;
pub mod error;
pub mod key;
mod merge;
pub mod run;
mod sorted_run;
pub mod store;

pub use error::{Result, StateError};
pub use run::{Lookup, Run, RunMeta, RunWriter};
pub use store::{Store, StoreOptions, StoreStats};
