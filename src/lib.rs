//! metaprep: what a host read of device sequence lengths costs a speculative-decoding step,
//! and what graph replay with device-only lengths wins back.
//!
//! Layers, bottom up: `gpu` owns the driver (context, NVRTC modules, graphs, the capture
//! guard); `prep` holds the metadata families, their CPU reference and the four arms over
//! one plan; `measure` times them (events, stopping rule, statistics, NVML); `step` models a
//! decode step across TP layouts; `report` writes and reads CSVs, charts and summaries.

pub mod axes;
pub mod cli;
pub mod gpu;
pub mod harness;
pub mod model;
pub mod prep;
pub mod report;
pub mod results;
pub mod runs;
pub mod stats;
