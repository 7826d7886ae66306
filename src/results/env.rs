//! The environment record (`env.json`) written beside every run's CSV.

use crate::results::atomic::write_atomic;
use crate::results::settings::Settings;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment record's file name inside a run directory.
pub const ENV_FILE: &str = "env.json";
/// How the notes of a steps run begin the lines that say its settings for a reader: the host
/// profile (`host profile `NAME` (...)`), the step model, and the memory per GPU with the
/// cells left out as not deployable.
pub const HOST_PROFILE_NOTE: &str = "host profile `";
pub const STEP_MODEL_NOTE: &str = "step model:";
pub const MEMORY_NOTE: &str = "memory per GPU:";
/// How a note saying one layout was emulated begins (`emulated: tp8 needs 8 GPUs, ...`):
/// `summary.md` shows it instead of a caveat of its own.
pub const EMULATED_NOTE: &str = "emulated: ";

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
    /// What the kernels were loaded as: "cubin sm_90 (NVRTC 12.9)", or PTX and who JIT-compiled
    /// it; empty in older records.
    #[serde(default)]
    pub kernel_image: String,
    /// How the host waited in a synchronise (`auto`, `spin`, `yield`, `blocking`: the
    /// `--sync` the context was set to); empty in older records.
    #[serde(default)]
    pub sync: String,
    /// NVML readings at the start of the run; `None` without NVML.
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_max_mhz: Option<u32>,
    pub power_limit_w: Option<f64>,
    /// Free-form notes for a reader: emulated layouts, warnings (e.g. "NVML unavailable"),
    /// the settings in words.
    pub notes: Vec<String>,
    /// What a reader must see before the first table (a grid planned for another GPU than
    /// this one), each also said by a note; `summary.md` leads with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callouts: Vec<String>,
    /// What the run was asked to measure, as data (`sweep`, `steps`, `validate`, `check
    /// --dump`); `None` for the commands that record none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Settings>,
}

impl EnvRecord {
    /// The name of the host profile a steps run used.
    pub fn host_profile(&self) -> Option<&str> {
        self.settings.as_ref().and_then(Settings::host_profile)
    }

    /// Whether the run's own notes say how `layout` was emulated (so `summary.md` adds no
    /// caveat of its own): a measuring run notes each layout it emulated
    /// (`harness::run_output`).
    pub fn notes_emulation_of(&self, layout: &str) -> bool {
        let prefix = format!("{EMULATED_NOTE}{layout} ");
        self.notes.iter().any(|n| n.starts_with(&prefix))
    }

    /// The subcommand the run was started as (`sweep`, `steps`, `rank-worker`), `None` for a
    /// record without a command line.
    pub fn subcommand(&self) -> Option<&str> {
        self.command_line
            .split_whitespace()
            .nth(1)
            .filter(|a| !a.starts_with('-'))
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
        // A byte-order mark (an editor's) is no part of the record, as the CSVs read past one.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a metaprep environment record ({e}): the file is damaged or from \
                 another metaprep version; regenerate the run or fix the file",
                path.display()
            )
        })
    }

    /// `Ok` when two runs measured the same hardware: same GPU model, GPU count and compute
    /// capability, as `--resume` needs. The error names every such field that differs,
    /// `self`'s value first.
    pub fn same_setup(&self, other: &EnvRecord) -> Result<(), String> {
        let mut differences = self.machine_differences(other);
        differences.retain(|d| HARDWARE.contains(&d.name.as_str()));
        if differences.is_empty() {
            Ok(())
        } else {
            Err(describe(&differences))
        }
    }

    /// The machine and build a run measured on, field by field: what `compare` shows and
    /// never refuses (a before/after pair is often two builds, drivers or hosts).
    fn machine(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GPU", self.gpu_name.clone()),
            ("GPU count", self.gpu_count.to_string()),
            ("compute capability", self.compute_capability.clone()),
            ("driver", self.driver_version.clone()),
            ("CUDA", self.cuda_driver_version.clone()),
            ("NVRTC", self.nvrtc_version.clone()),
            ("kernel image", self.kernel_image.clone()),
            (
                "power limit (W)",
                self.power_limit_w.map_or(String::new(), |w| w.to_string()),
            ),
            ("CPU", self.cpu_model.clone()),
            ("host architecture", self.host_arch.clone()),
            ("host", self.hostname.clone()),
            ("metaprep", self.metaprep_version.clone()),
            ("git revision", self.git_revision.clone()),
        ]
    }

    /// Where the machines (and builds) of two runs differ, `self`'s value first.
    pub fn machine_differences(&self, other: &EnvRecord) -> Vec<Difference> {
        self.machine()
            .into_iter()
            .zip(other.machine())
            .filter(|((_, this), (_, that))| this != that)
            .map(|((name, this), (_, that))| Difference {
                name: name.to_string(),
                // An empty field was not recorded (an older record, no NVML).
                this: Some(this).filter(|v| !v.is_empty()),
                other: Some(that).filter(|v| !v.is_empty()),
            })
            .collect()
    }

    /// Every setting two runs recorded differently, `self`'s value first
    /// ([`Settings::differences`]). A record without settings (a command that records none)
    /// cannot be held to one that records them: that is one difference, `settings`. `--resume` refuses
    /// any difference; `compare` unless `--allow-mismatch`.
    pub fn setting_differences(&self, other: &EnvRecord) -> Vec<Difference> {
        match (&self.settings, &other.settings) {
            (Some(mine), Some(theirs)) => mine.differences(theirs),
            (None, None) => Vec::new(),
            _ => vec![Difference {
                name: "settings".to_string(),
                this: self.settings_shown(),
                other: other.settings_shown(),
            }],
        }
    }
}

impl EnvRecord {
    /// What a record says of its settings, in a word: `sweep run`, `check run without settings`.
    fn settings_shown(&self) -> Option<String> {
        match (&self.settings, self.subcommand()) {
            (Some(settings), _) => Some(format!("{} run", settings.command())),
            (None, Some(command)) => Some(format!("{command} run without settings")),
            (None, None) => None,
        }
    }

    /// Refuses to continue the run in `dir`, recorded as `self`, with the invocation `fresh`
    /// records when a setting differs; the error names each.
    pub fn check_resume(&self, dir: &Path, fresh: &EnvRecord) -> Result<()> {
        let differences = self.setting_differences(fresh);
        if !differences.is_empty() {
            return Err(crate::exit::BadInput(format!(
                "cannot resume {}: its settings differ from this command's (the run vs now: {}); \
                 resume with the same command, or start a new run with another --out",
                dir.display(),
                describe(&differences)
            ))
            .into());
        }
        Ok(())
    }
}

/// The machine fields `--resume` refuses to change: the numbers of another GPU would mix in.
const HARDWARE: [&str; 3] = ["GPU", "GPU count", "compute capability"];

/// A setting or machine field two runs recorded differently; `None` where a run did not
/// record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub name: String,
    pub this: Option<String>,
    pub other: Option<String>,
}

/// Differences as one line: `a: `1` vs `2`; b: ...` (values may hold commas).
pub fn describe(differences: &[Difference]) -> String {
    differences
        .iter()
        .map(Difference::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl fmt::Display for Difference {
    /// `name: `this` vs `other``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = |v: &Option<String>| match v {
            Some(v) => code(v),
            None => "not recorded".to_string(),
        };
        write!(
            f,
            "{}: {} vs {}",
            self.name,
            value(&self.this),
            value(&self.other)
        )
    }
}

/// Inline code that survives backticks in `text`: the fence is longer than any run of
/// backticks inside.
pub fn code(text: &str) -> String {
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
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
        kernel_image: "cubin sm_90 (NVRTC 13.0)".into(),
        sync: "auto".into(),
        sm_clock_max_mhz: Some(1980),
        mem_clock_max_mhz: Some(3201),
        power_limit_w: Some(700.0),
        notes: vec!["tp8 emulated on 1 GPU".into()],
        callouts: Vec::new(),
        settings: None,
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
    fn a_record_behind_a_byte_order_mark_reads() {
        let dir = tempfile::tempdir().unwrap();
        test_env().write(dir.path()).unwrap();
        let path = dir.path().join(ENV_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("\u{feff}{text}")).unwrap();
        assert_eq!(EnvRecord::read(dir.path()).unwrap(), test_env());
    }

    #[test]
    fn every_command_s_settings_round_trip_and_a_record_without_settings_loads() {
        use crate::results::settings::test_validate_and_check;
        let dir = tempfile::tempdir().unwrap();
        for settings in test_validate_and_check() {
            let env = EnvRecord {
                settings: Some(settings),
                ..test_env()
            };
            env.write(dir.path()).unwrap();
            let text = std::fs::read_to_string(dir.path().join(ENV_FILE)).unwrap();
            assert!(text.contains("\"settings\": {"), "{text}");
            assert_eq!(EnvRecord::read(dir.path()).unwrap(), env);
        }
        // A record written before `settings` (and before the fields added since): no such
        // keys at all.
        let mut old = serde_json::to_value(test_env()).unwrap();
        let fields = old.as_object_mut().unwrap();
        for newer in ["settings", "host_arch", "cpu_model", "kernel_image", "sync"] {
            fields.remove(newer);
        }
        std::fs::write(dir.path().join(ENV_FILE), old.to_string()).unwrap();
        let read = EnvRecord::read(dir.path()).unwrap();
        assert_eq!(
            (read.settings, read.gpu_name.as_str()),
            (None, "NVIDIA H200")
        );
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
        other.kernel_image = "PTX compute_90 (NVRTC 13.0), JIT by the driver (CUDA 13.1)".into();
        other.git_revision = "abcdef0".into();
        other.hostname = "other-host".into();
        assert_eq!(test_env().same_setup(&other), Ok(()));
        let shown: Vec<String> = test_env()
            .machine_differences(&other)
            .iter()
            .map(Difference::to_string)
            .collect();
        assert_eq!(
            shown,
            [
                "driver: `580.159.03` vs `590.10`",
                "CUDA: `13.0` vs `13.1`",
                "kernel image: `cubin sm_90 (NVRTC 13.0)` vs `PTX compute_90 (NVRTC 13.0), JIT by \
                 the driver (CUDA 13.1)`",
                "host: `gpu-host` vs `other-host`",
                "git revision: `d9d035d` vs `abcdef0`",
            ]
        );
    }

    #[test]
    fn hardware_changes_name_each_field() {
        let mut other = test_env();
        other.gpu_name = "NVIDIA H100 80GB HBM3".into();
        let error = test_env().same_setup(&other).unwrap_err();
        assert_eq!(error, "GPU: `NVIDIA H200` vs `NVIDIA H100 80GB HBM3`");
        other.gpu_count = 8;
        other.compute_capability = "10.0".into();
        other.cpu_model = String::new();
        let error = test_env().same_setup(&other).unwrap_err();
        assert!(error.contains("GPU count: `1` vs `8`"), "{error}");
        assert!(
            error.contains("compute capability: `9.0` vs `10.0`"),
            "{error}"
        );
        assert!(
            !error.contains("CPU"),
            "the CPU is no reason to refuse: {error}"
        );
        let cpu = test_env().machine_differences(&other).pop().unwrap();
        assert_eq!(
            cpu.to_string(),
            "CPU: `Intel(R) Xeon(R) Platinum 8480+` vs not recorded"
        );
    }

    fn differences(a: &EnvRecord, b: &EnvRecord) -> Vec<String> {
        a.setting_differences(b)
            .iter()
            .map(Difference::to_string)
            .collect()
    }

    #[test]
    fn settings_as_data_are_compared_and_name_the_host_profile_without_the_notes() {
        use crate::results::settings::{test_sweep, Settings};
        let with = |settings: Settings, command_line: &str| EnvRecord {
            command_line: command_line.into(),
            settings: Some(settings),
            ..test_env()
        };
        let dir = tempfile::tempdir().unwrap();
        let base = with(Settings::Sweep(test_sweep()), "metaprep sweep --seed 1");
        base.write(dir.path()).unwrap();
        assert_eq!(
            EnvRecord::read(dir.path()).unwrap(),
            base,
            "settings round-trip"
        );
        // Where both have settings, the command lines are not read: another spelling of the
        // same settings is no difference, and a setting is named by its field.
        let mut other = test_sweep();
        other.seed = 2;
        let other = with(
            Settings::Sweep(other),
            "metaprep sweep --seed=1 --out elsewhere",
        );
        assert_eq!(differences(&base, &other), ["seed: `1` vs `2`"]);
        let same = with(Settings::Sweep(test_sweep()), "metaprep sweep --seed 9");
        assert_eq!(differences(&base, &same), Vec::<String>::new());
        // One side without settings cannot be held to the other's.
        let none = EnvRecord {
            command_line: "metaprep sweep --seed 1".into(),
            ..test_env()
        };
        assert_eq!(
            differences(&base, &none),
            ["settings: `sweep run` vs `sweep run without settings`"]
        );
        // The host profile's name comes from the settings, whatever the notes say.
        let mut steps = serde_json::to_value(Settings::Sweep(test_sweep())).unwrap();
        steps["command"] = "steps".into();
        assert!(
            serde_json::from_value::<Settings>(steps).is_err(),
            "steps has its own fields"
        );
        let noted = EnvRecord {
            notes: vec!["host profile `native` (op 1.0 us)".into()],
            ..test_env()
        };
        assert_eq!(noted.host_profile(), None);
        assert_eq!(base.host_profile(), None);
    }
}
