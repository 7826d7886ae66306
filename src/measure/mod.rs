//! Timing support that needs no GPU: statistics, the stopping rules, rounds and their order,
//! and NVML telemetry.

pub mod nvml;
pub mod schedule;
pub mod sweep_rounds;
// The GPU side: the floor, one cell's measurement, the sampling loop.
pub mod environment;
pub mod floor;
pub mod pin;
pub mod prep_cell;
pub mod rows;
pub mod run_output;
pub mod sampling;
pub mod targets;
pub mod telemetry_file;
