//! User-defined functions. A Python function (`CREATE [AGGREGATE] FUNCTION … LANGUAGE
//! PYTHON`: scalar, table or aggregate) runs in worker processes beside the TaskManager
//! ([`python`]): each call hands a worker one chunk's arguments as an Arrow batch and takes
//! back one Arrow column, never a row at a time over the process boundary.

mod error;
pub mod python;

pub use error::UdfError;
