//! Test fixtures of the NVML telemetry: a reading and a library name that is never there.

use super::Reading;

pub(super) const MISSING_LIB: &str = "libnvidia-ml-metaprep-test-missing.so.1";

pub(super) fn reading(cell: &str, sm: Option<f64>, reasons: Option<u64>) -> Reading {
    Reading {
        cell: cell.into(),
        sm_clock_mhz: sm,
        mem_clock_mhz: Some(2619.0),
        power_w: Some(120.5),
        temp_c: Some(40.0),
        gpu_util_pct: Some(100.0),
        reasons,
        ..Reading::default()
    }
}
