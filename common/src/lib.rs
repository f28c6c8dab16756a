//! Eddy's core: the data model (chunks, events), their wire and state encodings, typed
//! errors, job configuration, object storage, checkpoint storage and metrics, shared by
//! every other crate. Nothing here plans SQL or runs operators.

pub mod checkpoint;
pub mod chunk;
pub mod config;
pub mod error;
pub mod event;
pub mod failpoint;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod ids;
pub mod metrics;
pub mod object_storage;
pub mod register;
pub mod schema;
pub mod secrets;
pub mod state;
pub mod wire;

pub use chunk::{Chunk, Op};
pub use error::{EddyError, Result};
pub use event::Event;
