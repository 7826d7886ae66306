//! Everything that reads or writes files: the tidy CSV, the environment record, charts,
//! the markdown summary and run comparison. Nothing here needs a GPU.

pub mod atomic;
pub mod charts;
pub mod compare;
pub mod csv;
pub mod env;
pub mod run_dir;
pub mod summary;
pub mod telemetry;
