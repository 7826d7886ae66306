//! The timing harness on one GPU: the floor, one cell's measurement and its sampling loop,
//! the rounds' visiting order, the step timeline's timers (events, CUPTI), NVML telemetry, CPU
//! pinning, the environment record of a run, and the recorder that turns measurements into
//! rows (bandwidth rows among them) and files.

pub mod bandwidth;
pub mod environment;
pub mod floor;
pub mod gpm;
pub mod memory;
pub mod nvml;
pub mod pin;
pub mod prep_cell;
pub mod process_group;
pub mod rendezvous;
pub mod rounds_file;
pub mod rows;
pub mod run_output;
pub mod sampling;
pub mod schedule;
pub mod speed_reference;
pub mod telemetry_file;
pub mod timer;
pub mod topology;
