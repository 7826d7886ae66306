//! Everything that reads or writes files: the tidy CSV, the environment record, charts,
//! the markdown summary and run comparison. Nothing here needs a GPU.

pub mod atomic;
pub mod charts;
pub mod csv;
pub mod env;
pub mod telemetry;
