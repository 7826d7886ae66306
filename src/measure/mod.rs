//! Timing support that needs no GPU: statistics, the stopping rule, and NVML telemetry.

pub mod nvml;
pub mod stats;
pub mod stopping;
