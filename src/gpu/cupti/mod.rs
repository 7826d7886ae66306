//! CUPTI's activity API for the step timeline: `library` finds and loads `libcupti` (no
//! panic when it is missing), `records` copies activity records into plain values,
//! `collector` runs one collection with external ids tagging the launches.

pub mod collector;
pub mod library;
pub mod records;

pub use collector::{Collected, Collector};
pub use library::{load_cupti, CuptiLibrary};
pub use records::{Activity, GpuActivity, GpuWork};
