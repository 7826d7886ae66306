//! The environment record (`env.json`) written beside every run's CSV.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvRecord {
    pub metaprep_version: String,
    pub git_revision: String,
    pub command_line: String,
    /// RFC 3339, UTC.
    pub date: String,
    pub hostname: String,
    pub gpu_name: String,
    pub gpu_count: u32,
    pub compute_capability: String,
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    /// NVML's driver version string, e.g. `580.159.03`; empty without NVML.
    pub driver_version: String,
    /// CUDA version the driver supports, e.g. `13.0`.
    pub cuda_driver_version: String,
    pub nvrtc_version: String,
    /// NVML readings at the start of the run; `None` without NVML.
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_max_mhz: Option<u32>,
    pub power_limit_w: Option<f64>,
    /// Free-form notes: emulated layouts, warnings (e.g. "NVML unavailable").
    pub notes: Vec<String>,
}
