//! One NVML reading, its `telemetry.csv` row, and the summary of one cell's readings.

use super::reasons::{is_throttled, reasons_hex};
use crate::harness::gpm::CellGpm;
use crate::results::telemetry::TelemetrySample;
use crate::stats::summary::summarize;

/// One reading of one device. A field is `None` when its NVML call failed (unsupported on
/// this part, or a transient error); the other fields are still kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// The cell label set by [`Sampler::set_cell`](super::Sampler::set_cell) when the reading began; empty between cells.
    pub cell: String,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// Raw clock-event (throttle) reason bits.
    pub reasons: Option<u64>,
}

impl Reading {
    /// The `telemetry.csv` row; a missing value becomes NaN and missing reasons an empty string.
    pub fn to_sample(&self) -> TelemetrySample {
        let value = |v: Option<f64>| v.unwrap_or(f64::NAN);
        TelemetrySample {
            t_s: self.t_s,
            cell: self.cell.clone(),
            sm_clock_mhz: value(self.sm_clock_mhz),
            mem_clock_mhz: value(self.mem_clock_mhz),
            power_w: value(self.power_w),
            temp_c: value(self.temp_c),
            gpu_util_pct: value(self.gpu_util_pct),
            clock_event_reasons: self.reasons.map(reasons_hex).unwrap_or_default(),
        }
    }
}

/// What NVML saw during one cell: medians of each reading, and the reason bits OR-ed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellTelemetry {
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// `None` when no reading of the cell got reason bits, so the CSV column stays empty
    /// rather than claiming "no reasons".
    pub reasons_or: Option<u64>,
    pub throttled: bool,
    /// Readings the summary was built from.
    pub readings: usize,
    /// GPM over the cell; `None` where GPM is unavailable or no interval overlapped it.
    pub gpm: Option<CellGpm>,
}

/// Summarises one cell's readings; `None` when there are none.
pub fn summarize_cell<'a>(
    readings: impl IntoIterator<Item = &'a Reading>,
) -> Option<CellTelemetry> {
    let readings: Vec<&Reading> = readings.into_iter().collect();
    if readings.is_empty() {
        return None;
    }
    let median = |field: fn(&Reading) -> Option<f64>| {
        let values: Vec<f64> = readings.iter().filter_map(|r| field(r)).collect();
        summarize(&values).map(|s| s.median)
    };
    let reasons_or = readings
        .iter()
        .filter_map(|r| r.reasons)
        .reduce(|acc, bits| acc | bits);
    Some(CellTelemetry {
        sm_clock_mhz: median(|r| r.sm_clock_mhz),
        mem_clock_mhz: median(|r| r.mem_clock_mhz),
        power_w: median(|r| r.power_w),
        temp_c: median(|r| r.temp_c),
        gpu_util_pct: median(|r| r.gpu_util_pct),
        reasons_or,
        throttled: reasons_or.is_some_and(is_throttled),
        readings: readings.len(),
        gpm: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::reading;
    use super::*;
    use crate::harness::nvml::reasons::*;

    #[test]
    fn cell_summary_takes_medians_and_ors_reasons() {
        let readings = [
            reading("a", Some(1980.0), Some(REASON_GPU_IDLE)),
            reading("a", Some(1500.0), Some(REASON_SW_POWER_CAP)),
            reading("a", Some(1900.0), None),
            reading("a", None, Some(REASON_APPLICATIONS_CLOCKS_SETTING)),
        ];
        let t = summarize_cell(&readings).unwrap();
        assert_eq!(t.sm_clock_mhz, Some(1900.0)); // median of the three present
        assert_eq!(t.power_w, Some(120.5));
        assert_eq!(t.reasons_or, Some(0x7));
        assert!(t.throttled);
        assert_eq!(t.readings, 4);
    }

    #[test]
    fn cell_summary_without_slowdown_is_not_throttled() {
        let readings = [
            reading("a", Some(1980.0), Some(REASON_GPU_IDLE)),
            reading("a", Some(1970.0), Some(REASON_APPLICATIONS_CLOCKS_SETTING)),
        ];
        let t = summarize_cell(&readings).unwrap();
        assert_eq!(t.sm_clock_mhz, Some(1975.0));
        assert_eq!(t.reasons_or, Some(0x3));
        assert!(!t.throttled);
    }

    #[test]
    fn cell_summary_keeps_missing_values_missing() {
        assert!(summarize_cell(&[]).is_none());
        let t = summarize_cell(&[reading("a", None, None)]).unwrap();
        assert_eq!(
            (t.sm_clock_mhz, t.reasons_or, t.throttled),
            (None, None, false)
        );
    }

    #[test]
    fn reading_to_sample_marks_missing_values() {
        let full = reading("dspark/graph/4/5/tp1", Some(1980.0), Some(0x44)).to_sample();
        assert_eq!(full.cell, "dspark/graph/4/5/tp1");
        assert_eq!(full.sm_clock_mhz, 1980.0);
        assert_eq!(full.clock_event_reasons, "0x0000000000000044");
        let empty = reading("", None, None).to_sample();
        assert!(empty.sm_clock_mhz.is_nan());
        assert_eq!(empty.clock_event_reasons, "");
    }
}
