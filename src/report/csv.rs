//! The tidy results CSV: one row per (cell, metric).
//!
//! A *cell* is one point of a sweep: (kind, family, arm, batch size, block size, layout).
//! Every metric of a cell is its own row so that charts, summaries and `compare` can filter
//! without knowing which metrics exist.

use serde::{Deserialize, Serialize};

/// Which harness produced a row.
pub const KIND_PREP: &str = "prep"; // one arm's metadata prep, timed per step
pub const KIND_FLOOR: &str = "floor"; // empty launch, empty graph, bare D2H/H2D round trips
pub const KIND_STEP: &str = "step"; // the whole decode-step model

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `prep`, `floor` or `step`.
    pub kind: String,
    /// Metadata family (`dspark_draft_block`, `dsa_decode`, ...); `floor` for floor rows;
    /// for step rows, the family pair the step prepares (`dspark+dsa_target_verify`).
    pub family: String,
    /// `eager-sync`, `eager-device`, `graph`, `fused`; for floor rows the floor item
    /// (`empty-kernel`, `empty-graph`, `d2h-int`, `h2d-pinned`, `h2d-pageable`).
    pub arm: String,
    pub batch_size: u32,
    /// Draft block size (gamma) for dspark, draft tokens per request (N) for the DSA families.
    pub block_size: u32,
    /// `tp1`, `tp2`, `tp4`, `tp8`, `dep2`, `dep4`.
    pub layout: String,
    /// True when the layout needs more GPUs than the run had and one rank ran on one GPU.
    pub emulated: bool,
    /// Metric name, e.g. `step_us`, `gpu_prep_us`, `host_issue_us`, `host_blocked_us`,
    /// `floor_multiple`, `itl_us`, `throughput_tok_s`, `occupancy`, `gap_us`.
    pub metric: String,
    /// `us`, `tok/s`, `ratio`, `x`.
    pub unit: String,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// 95% confidence interval of the median.
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub samples: u64,
    /// `ci` (converged), `time-cap`, `sample-cap` or `fixed`.
    pub stop_reason: String,
    /// NVML saw a throttle / clock-event reason other than idle during the cell.
    pub throttled: bool,
    /// Raw NVML clock-event (throttle) reason bits OR-ed over the cell, hex; empty without NVML.
    pub clock_event_reasons: String,
    /// NVML medians over the cell; empty without NVML.
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
}
