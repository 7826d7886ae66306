//! `telemetry.csv` kept current during a run: rewritten (atomically) after each group of
//! cells so an interrupted run keeps its telemetry, and continued on `--resume`.

use super::nvml::Sampler;
use crate::results::run_dir::TELEMETRY_CSV;
use crate::results::telemetry::{write_samples, TelemetrySample};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub struct TelemetryFile {
    path: PathBuf,
    /// Samples an earlier invocation of this run wrote; this one's follow them in time.
    earlier: Vec<TelemetrySample>,
}

impl TelemetryFile {
    pub fn open(dir: &Path, resume: bool) -> Result<Self> {
        let path = dir.join(TELEMETRY_CSV);
        let earlier = if resume && path.exists() {
            crate::results::run_dir::read_telemetry(&path)
                .with_context(|| format!("reading {} to resume it", path.display()))?
        } else {
            Vec::new()
        };
        Ok(Self { path, earlier })
    }

    /// Writes the earlier samples and `current`'s, the latter shifted to start after them.
    pub fn write(&self, current: Vec<TelemetrySample>) -> Result<()> {
        let offset = self.earlier.last().map_or(0.0, |s| s.t_s);
        let mut all = self.earlier.clone();
        all.extend(current.into_iter().map(|s| TelemetrySample {
            t_s: s.t_s + offset,
            ..s
        }));
        write_samples(&self.path, &all)
    }

    pub fn write_from(&self, sampler: Option<&Sampler>) -> Result<()> {
        match sampler {
            Some(s) => self.write(s.samples()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64) -> TelemetrySample {
        TelemetrySample {
            t_s,
            cell: "c".into(),
            sm_clock_mhz: 1980.0,
            mem_clock_mhz: 3201.0,
            power_w: 100.0,
            temp_c: 40.0,
            gpu_util_pct: 50.0,
            clock_event_reasons: "0x0000000000000000".into(),
        }
    }

    #[test]
    fn a_resumed_run_appends_after_the_earlier_samples() {
        let dir = tempfile::tempdir().unwrap();
        TelemetryFile::open(dir.path(), false)
            .unwrap()
            .write(vec![sample(0.0), sample(2.0)])
            .unwrap();
        let resumed = TelemetryFile::open(dir.path(), true).unwrap();
        resumed.write(vec![sample(0.5)]).unwrap();
        let back: Vec<TelemetrySample> = csv::Reader::from_path(dir.path().join(TELEMETRY_CSV))
            .unwrap()
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        let times: Vec<f64> = back.iter().map(|s| s.t_s).collect();
        assert_eq!(times, vec![0.0, 2.0, 2.5]);
        let fresh = TelemetryFile::open(dir.path(), false).unwrap();
        fresh.write(vec![sample(1.0)]).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(TELEMETRY_CSV))
                .unwrap()
                .lines()
                .count(),
            2,
            "a fresh run starts over"
        );
    }
}
