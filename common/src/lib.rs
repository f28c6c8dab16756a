//! Eddy's engine: the data model, SQL planning, streaming operators, connectors and
//! configuration shared by the JobManager and the TaskManagers.

pub mod checkpoint;
pub mod checkpointing;
pub mod chunk;
pub mod codec;
pub mod config;
pub mod connectors;
pub mod error;
pub mod event;
pub mod failpoint;
pub mod metrics;
pub mod operators;
pub mod partition;
pub mod plan;
pub mod sql;
pub mod state;
pub mod storage;

pub use chunk::{Chunk, Op};
pub use error::{EddyError, Result};
pub use event::Event;
