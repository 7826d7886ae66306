//! The environment record of a run: the GPU from the driver, clocks and driver version from
//! NVML, the build's git revision, the command line and the date.

use super::nvml;
use crate::gpu::Gpu;
use crate::results::env::EnvRecord;
use crate::results::settings::Settings;

/// Builds the record; without NVML, the NVML fields stay empty and a note says why.
pub fn env_record(gpu: &Gpu, notes: Vec<String>) -> EnvRecord {
    let info = &gpu.info;
    let mut env = EnvRecord {
        gpu_name: info.name.clone(),
        gpu_count: info.device_count,
        compute_capability: format!(
            "{}.{}",
            info.compute_capability.0, info.compute_capability.1
        ),
        sm_count: info.sm_count,
        l2_bytes: info.l2_bytes,
        memory_bytes: info.memory_bytes,
        cuda_driver_version: info.cuda_driver_version.clone(),
        nvrtc_version: info.nvrtc_version.clone(),
        kernel_image: info.kernel_image.to_string(),
        sync: info.sync.to_string(),
        ..host_record(notes)
    };
    match nvml::read_static(&info.pci_bus_id) {
        Ok(stat) => stat.fill_env(&mut env),
        Err(e) => env.notes.push(format!("NVML unavailable: {e}")),
    }
    // The driver's CUDA version comes from the driver API, which is the one kernels run on.
    env.cuda_driver_version = info.cuda_driver_version.clone();
    env
}

/// The record of a command that opened no GPU (`check --dump --cpu-only`): the build, command
/// line, date and host; every GPU, driver and NVML field empty (`gpu_count` 0).
pub fn host_record(notes: Vec<String>) -> EnvRecord {
    EnvRecord {
        metaprep_version: env!("CARGO_PKG_VERSION").into(),
        git_revision: env!("METAPREP_GIT_REV").into(),
        command_line: command_line(),
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        hostname: std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        host_arch: std::env::consts::ARCH.into(),
        cpu_model: cpu_model(),
        notes,
        ..Default::default()
    }
}

/// This process's command line, its arguments joined by spaces.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The CPU model from /proc/cpuinfo: x86's `model name`, or on Arm (Grace) its implementer
/// and part numbers; empty where neither is there.
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpu_model_from(&info)
}

fn cpu_model_from(cpuinfo: &str) -> String {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    if let Some(model) = field("model name") {
        return model;
    }
    match (field("CPU implementer"), field("CPU part")) {
        (Some(implementer), Some(part)) => format!("Arm implementer {implementer} part {part}"),
        _ => String::new(),
    }
}

/// The record for a run in `dir` of `settings`: a fresh one, or on `--resume` the run's own
/// record with a note of the resumption (see `resumed_record`).
pub fn env_for_run(
    gpu: &Gpu,
    dir: &std::path::Path,
    resume: bool,
    notes: Vec<String>,
    settings: Settings,
) -> anyhow::Result<EnvRecord> {
    let fresh = EnvRecord {
        settings: Some(settings),
        ..env_record(gpu, notes)
    };
    if !resume || !dir.join(crate::results::env::ENV_FILE).exists() {
        return Ok(fresh);
    }
    resumed_record(dir, fresh)
}

/// The record of the run in `dir` continued by the invocation `fresh` describes, refused when
/// the GPU differs from the one the run started on or any setting differs.
fn resumed_record(dir: &std::path::Path, fresh: EnvRecord) -> anyhow::Result<EnvRecord> {
    let mut original = EnvRecord::read(dir)?;
    if let Err(why) = original.same_setup(&fresh) {
        anyhow::bail!(
            "cannot resume {} on this machine: {why}; start a new run with another --out",
            dir.display()
        );
    }
    // The same settings `compare` checks: command, flags and axes, host profile and model.
    original.check_resume(dir, &fresh)?;
    original.notes.push(format!(
        "resumed {} with: {}",
        fresh.date, fresh.command_line
    ));
    // Notes of the resuming invocation (a newly emulated layout, a model line) not yet there.
    for note in fresh.notes {
        if !original.notes.contains(&note) {
            original.notes.push(note);
        }
    }
    Ok(original)
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn a_record_without_a_gpu_fills_the_host_and_leaves_the_gpu_empty() {
        let env = host_record(vec!["no GPU".into()]);
        assert_eq!(env.metaprep_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(env.host_arch, std::env::consts::ARCH);
        assert!(env.date.ends_with('Z') && !env.command_line.is_empty());
        assert_eq!(env.notes, ["no GPU"]);
        assert_eq!((env.gpu_name.as_str(), env.gpu_count), ("", 0));
        assert_eq!(
            (env.driver_version.as_str(), env.kernel_image.as_str()),
            ("", "")
        );
        assert_eq!((env.sm_clock_max_mhz, env.power_limit_w), (None, None));
        assert_eq!(env.settings, None);
    }

    #[test]
    fn cpu_models_of_x86_and_grace() {
        let x86 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: x\n";
        assert_eq!(cpu_model_from(x86), "Intel(R) Xeon(R) Platinum 8480+");
        let grace = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n";
        assert_eq!(cpu_model_from(grace), "Arm implementer 0x41 part 0xd4f");
        assert_eq!(cpu_model_from(""), "");
    }

    #[test]
    fn a_resume_must_repeat_the_settings() {
        use crate::results::settings::{test_sweep, Settings, SweepSettings};
        let dir = tempfile::tempdir().unwrap();
        let original = EnvRecord {
            command_line: "/a/metaprep sweep --out r --seed 1".into(),
            settings: Some(Settings::Sweep(test_sweep())),
            ..EnvRecord::default()
        };
        original.write(dir.path()).unwrap();
        let resumed = |seed: u64, notes: &[&str]| {
            let fresh = EnvRecord {
                command_line: format!("metaprep sweep --out r --seed {seed} --resume"),
                notes: notes.iter().map(|n| n.to_string()).collect(),
                date: "later".into(),
                settings: Some(Settings::Sweep(SweepSettings {
                    seed,
                    ..test_sweep()
                })),
                ..EnvRecord::default()
            };
            resumed_record(dir.path(), fresh).map_err(|e| e.to_string())
        };
        let record = resumed(1, &["tp8 emulated"]).unwrap();
        // Notes that are not settings (emulation, resumption) may be added.
        assert_eq!(record.command_line, original.command_line);
        assert!(record.notes.contains(&"tp8 emulated".to_string()));
        let why = resumed(2, &[]).unwrap_err();
        assert!(why.contains("seed: `1` vs `2`"), "{why}");
    }
}
