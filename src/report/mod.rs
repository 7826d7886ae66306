//! Everything that reads or writes files: the tidy CSV, the environment record, charts,
//! the markdown summary and run comparison. Nothing here needs a GPU.

pub mod change;
pub mod charts;
pub mod compare;
pub mod format;
pub mod gpm;
pub mod read_paths;
pub mod summary;
pub mod targets;
