//! NVML telemetry samples, written as `telemetry.csv` beside the results CSV.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySample {
    /// Seconds since the start of the run.
    pub t_s: f64,
    /// The cell running when the sample was taken (`family/arm/bs/block/layout`), empty between cells.
    pub cell: String,
    pub sm_clock_mhz: f64,
    pub mem_clock_mhz: f64,
    pub power_w: f64,
    pub temp_c: f64,
    pub gpu_util_pct: f64,
    /// Raw clock-event (throttle) reason bits, hex (`0x0000000000000001`).
    pub clock_event_reasons: String,
}
