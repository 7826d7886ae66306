//! NVML telemetry samples, written as `telemetry.csv` beside the results CSV.

use serde::{Deserialize, Serialize};

/// The header of `telemetry.csv`, in `TelemetrySample` field order.
pub const TELEMETRY_COLUMNS: &[&str] = &[
    "t_s",
    "cell",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "gpu_util_pct",
    "clock_event_reasons",
];

/// The most a percentage reading may be: GPM's utilisations and a cell's share are ratios of
/// counters and times that can land a little above 100 (counter skew, rounding), and a file
/// holding them must still read; past this, no reading is one.
pub const MOST_PCT: f64 = 105.0;

/// Why `value` is no NVML or GPM reading of the column `name`: not finite, negative, or a
/// percentage (`_pct`) over [`MOST_PCT`]. A results row and a telemetry sample ask alike.
pub fn reading_problem(name: &str, value: f64) -> Option<String> {
    let most = match name.ends_with("_pct") {
        true => MOST_PCT,
        false => f64::INFINITY,
    };
    let range = match most.is_finite() {
        true => format!("(0 to {most}): NVML and GPM percentages are at most {most}"),
        false => "(finite, 0 or more)".to_string(),
    };
    (!(value.is_finite() && value >= 0.0 && value <= most))
        .then(|| format!("column `{name}`: {value} is no reading {range}"))
}

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

impl TelemetrySample {
    /// The raw clock-event reason bits: `None` where NVML gave no reading (empty), an error
    /// where the text is no hex number (`0x…` as the writers give it).
    pub fn reason_bits(&self) -> Result<Option<u64>, String> {
        let text = self.clock_event_reasons.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let digits = (text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))).unwrap_or(text);
        u64::from_str_radix(digits, 16)
            .map(Some)
            .map_err(|_| format!("clock_event_reasons {text:?} is not a hex number"))
    }

    /// Why a sample cannot be one metaprep wrote: a time that is not a time since the start,
    /// or a reading that is none ([`reading_problem`]; a reading NVML did not give is NaN).
    pub fn check(&self) -> Result<(), String> {
        if !(self.t_s.is_finite() && self.t_s >= 0.0) {
            return Err(format!(
                "column `t_s`: {} is not seconds since the start",
                self.t_s
            ));
        }
        let readings = [
            ("sm_clock_mhz", self.sm_clock_mhz),
            ("mem_clock_mhz", self.mem_clock_mhz),
            ("power_w", self.power_w),
            ("temp_c", self.temp_c),
            ("gpu_util_pct", self.gpu_util_pct),
        ];
        // NaN is a reading NVML did not give.
        match (readings.iter().filter(|(_, v)| !v.is_nan()))
            .find_map(|&(name, v)| reading_problem(name, v))
        {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }
}

/// Writes `telemetry.csv` atomically.
pub fn write_samples(path: &std::path::Path, samples: &[TelemetrySample]) -> anyhow::Result<()> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    if samples.is_empty() {
        writer.write_record(TELEMETRY_COLUMNS)?;
    }
    for s in samples {
        writer.serialize(s)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("encoding telemetry: {e}"))?;
    crate::results::atomic::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_samples_have_the_documented_header_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("telemetry.csv");
        let sample = TelemetrySample {
            t_s: 0.5,
            cell: "prep dsa_decode/graph bs=8".into(),
            sm_clock_mhz: 1980.0,
            mem_clock_mhz: 3201.0,
            power_w: 130.5,
            temp_c: 41.0,
            gpu_util_pct: 12.0,
            clock_event_reasons: "0x0000000000000001".into(),
        };
        write_samples(&path, std::slice::from_ref(&sample)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().next().unwrap(), TELEMETRY_COLUMNS.join(","));
        let back: Vec<TelemetrySample> = csv::Reader::from_path(&path)
            .unwrap()
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(back, vec![sample.clone()]);
        write_samples(&path, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            1,
            "header only"
        );
        // What no NVML reading is; a reading NVML did not give is NaN.
        let spoilt = |edit: fn(&mut TelemetrySample)| {
            let mut s = sample.clone();
            edit(&mut s);
            s.check()
        };
        assert!(spoilt(|s| s.gpu_util_pct = f64::NAN).is_ok());
        assert!(spoilt(|s| s.gpu_util_pct = 999.0)
            .unwrap_err()
            .contains("at most 105"));
        assert!(spoilt(|s| s.power_w = -1.0)
            .unwrap_err()
            .contains("`power_w`"));
        assert!(spoilt(|s| s.t_s = f64::INFINITY)
            .unwrap_err()
            .contains("`t_s`"));
    }
}
