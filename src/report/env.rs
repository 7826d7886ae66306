//! The environment record (`env.json`) written beside every run's CSV.

use crate::report::atomic::write_atomic;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment record's file name inside a run directory.
pub const ENV_FILE: &str = "env.json";
/// How the notes of a steps run begin the lines that record its settings: the host profile
/// (`host profile `NAME` (...)`), the step model, and the memory per GPU with the cells left
/// out as not deployable. Charts and `--resume` read them back.
pub const HOST_PROFILE_NOTE: &str = "host profile `";
pub const STEP_MODEL_NOTE: &str = "step model:";
pub const MEMORY_NOTE: &str = "memory per GPU:";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvRecord {
    pub metaprep_version: String,
    pub git_revision: String,
    pub command_line: String,
    /// RFC 3339, UTC.
    pub date: String,
    pub hostname: String,
    /// The host's architecture (`x86_64`, `aarch64`) and CPU model; empty in older records.
    #[serde(default)]
    pub host_arch: String,
    #[serde(default)]
    pub cpu_model: String,
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

impl EnvRecord {
    /// The name of the host profile a steps run recorded in its notes.
    pub fn host_profile(&self) -> Option<&str> {
        self.notes
            .iter()
            .find_map(|n| n.strip_prefix(HOST_PROFILE_NOTE))
            .and_then(|n| n.split('`').next())
    }

    /// The notes that record a run's settings (host profile, step model, memory per GPU).
    pub fn setting_notes(&self) -> Vec<&str> {
        self.notes
            .iter()
            .map(String::as_str)
            .filter(|n| {
                [HOST_PROFILE_NOTE, STEP_MODEL_NOTE, MEMORY_NOTE]
                    .iter()
                    .any(|prefix| n.starts_with(prefix))
            })
            .collect()
    }

    /// Writes `<dir>/env.json` atomically and returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(ENV_FILE);
        let mut json = serde_json::to_string_pretty(self).context("serialising env.json")?;
        json.push('\n');
        write_atomic(&path, json.as_bytes())?;
        Ok(path)
    }

    /// Reads `<dir>/env.json`.
    pub fn read(dir: &Path) -> Result<EnvRecord> {
        let path = dir.join(ENV_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "{} has no {ENV_FILE}: every metaprep run writes one when it starts, so this is \
                 not a run directory or it was copied without it; rerun, or copy env.json too",
                dir.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a metaprep environment record ({e}): the file is damaged or from \
                 another metaprep version; regenerate the run or fix the file",
                path.display()
            )
        })
    }

    /// `Ok` when two runs measured the same hardware: same GPU model, GPU count and compute
    /// capability. Driver, CUDA and git revision may differ, since a before/after pair is
    /// usually two builds or two driver versions on one machine. The error names every field
    /// that differs, `self`'s value first.
    pub fn same_setup(&self, other: &EnvRecord) -> Result<(), String> {
        let mut differences = Vec::new();
        if self.gpu_name != other.gpu_name {
            differences.push(format!("GPU `{}` vs `{}`", self.gpu_name, other.gpu_name));
        }
        if self.gpu_count != other.gpu_count {
            differences.push(format!(
                "gpu_count {} vs {}",
                self.gpu_count, other.gpu_count
            ));
        }
        if self.compute_capability != other.compute_capability {
            differences.push(format!(
                "compute capability {} vs {}",
                self.compute_capability, other.compute_capability
            ));
        }
        if differences.is_empty() {
            Ok(())
        } else {
            Err(differences.join(", "))
        }
    }
}

/// A filled-in record for tests across the report modules.
#[cfg(test)]
pub(crate) fn test_env() -> EnvRecord {
    EnvRecord {
        metaprep_version: "0.1.0".into(),
        git_revision: "d9d035d".into(),
        command_line: "metaprep sweep --out results/x".into(),
        date: "2026-11-29T10:00:00Z".into(),
        hostname: "gpu-host".into(),
        host_arch: "x86_64".into(),
        cpu_model: "Intel(R) Xeon(R) Platinum 8480+".into(),
        gpu_name: "NVIDIA H200".into(),
        gpu_count: 1,
        compute_capability: "9.0".into(),
        sm_count: 132,
        l2_bytes: 52_428_800,
        memory_bytes: 150_754_820_096,
        driver_version: "580.159.03".into(),
        cuda_driver_version: "13.0".into(),
        nvrtc_version: "13.0".into(),
        sm_clock_max_mhz: Some(1980),
        mem_clock_max_mhz: Some(3201),
        power_limit_w: Some(700.0),
        notes: vec!["tp8 emulated on 1 GPU".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_env_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_env().write(dir.path()).unwrap();
        assert_eq!(path, dir.path().join("env.json"));
        assert_eq!(EnvRecord::read(dir.path()).unwrap(), test_env());
    }

    #[test]
    fn missing_env_json_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = format!("{:#}", EnvRecord::read(dir.path()).unwrap_err());
        assert!(error.contains("has no env.json"), "{error}");
    }

    #[test]
    fn damaged_env_json_says_where() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("env.json"), "{\n  \"gpu_name\": 3\n}").unwrap();
        let error = format!("{:#}", EnvRecord::read(dir.path()).unwrap_err());
        assert!(
            error.contains("not a metaprep environment record"),
            "{error}"
        );
        assert!(error.contains("line 2"), "{error}");
    }

    #[test]
    fn driver_and_revision_changes_are_the_same_setup() {
        let mut other = test_env();
        other.driver_version = "590.10".into();
        other.cuda_driver_version = "13.1".into();
        other.git_revision = "abcdef0".into();
        other.hostname = "other-host".into();
        assert_eq!(test_env().same_setup(&other), Ok(()));
    }

    #[test]
    fn hardware_changes_name_each_field() {
        let mut other = test_env();
        other.gpu_name = "NVIDIA H100 80GB HBM3".into();
        let error = test_env().same_setup(&other).unwrap_err();
        assert_eq!(error, "GPU `NVIDIA H200` vs `NVIDIA H100 80GB HBM3`");
        other.gpu_count = 8;
        other.compute_capability = "10.0".into();
        let error = test_env().same_setup(&other).unwrap_err();
        assert!(error.contains("gpu_count 1 vs 8"), "{error}");
        assert!(error.contains("compute capability 9.0 vs 10.0"), "{error}");
    }
}
