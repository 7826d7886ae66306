//! The environment record of a run: the GPU from the driver, clocks and driver version from
//! NVML, the build's git revision, the command line and the date.

use super::nvml;
use crate::gpu::Gpu;
use crate::report::env::EnvRecord;

/// Builds the record; without NVML, the NVML fields stay empty and a note says why.
pub fn env_record(gpu: &Gpu, notes: Vec<String>) -> EnvRecord {
    let info = &gpu.info;
    let mut env = EnvRecord {
        metaprep_version: env!("CARGO_PKG_VERSION").into(),
        git_revision: env!("METAPREP_GIT_REV").into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        hostname: std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        host_arch: std::env::consts::ARCH.into(),
        cpu_model: cpu_model(),
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
        notes,
        ..Default::default()
    };
    match nvml::read_static(info.ordinal as u32) {
        Ok(stat) => stat.fill_env(&mut env),
        Err(e) => env.notes.push(format!("NVML unavailable: {e}")),
    }
    // The driver's CUDA version comes from the driver API, which is the one kernels run on.
    env.cuda_driver_version = info.cuda_driver_version.clone();
    env
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

/// The record for a run in `dir`: a fresh one, or on `--resume` the run's own record with a
/// note of the resumption, refused when the GPU differs from the one the run started on.
pub fn env_for_run(
    gpu: &Gpu,
    dir: &std::path::Path,
    resume: bool,
    notes: Vec<String>,
) -> anyhow::Result<EnvRecord> {
    let fresh = env_record(gpu, notes);
    if !resume || !dir.join(crate::report::env::ENV_FILE).exists() {
        return Ok(fresh);
    }
    let mut original = EnvRecord::read(dir)?;
    if let Err(why) = original.same_setup(&fresh) {
        anyhow::bail!(
            "cannot resume {} on this machine: {why}; start a new run with another --out",
            dir.display()
        );
    }
    if let Some(why) = resume_difference(&original, &fresh) {
        anyhow::bail!(
            "cannot resume {}: {why}; resume with the same command, or start a new run with \
             another --out",
            dir.display()
        );
    }
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

/// What makes `fresh` not a continuation of `original`: another command (flags, seed,
/// axes; the program's path and `--resume` aside), or another host profile or model line.
fn resume_difference(original: &EnvRecord, fresh: &EnvRecord) -> Option<String> {
    let args = |command: &str| -> Vec<String> {
        command
            .split_whitespace()
            .skip(1)
            .filter(|a| *a != "--resume")
            .map(str::to_string)
            .collect()
    };
    let (before, now) = (args(&original.command_line), args(&fresh.command_line));
    if before != now {
        return Some(format!(
            "the run was started as `{}`, this is `{}`",
            before.join(" "),
            now.join(" ")
        ));
    }
    // The setting lines a steps run records: the same flags may name a changed profile file.
    let (before, now) = (original.setting_notes(), fresh.setting_notes());
    (before != now).then(|| {
        format!(
            "its settings differ: it recorded {:?}, this run would record {:?}",
            before, now
        )
    })
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn cpu_models_of_x86_and_grace() {
        let x86 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: x\n";
        assert_eq!(cpu_model_from(x86), "Intel(R) Xeon(R) Platinum 8480+");
        let grace = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n";
        assert_eq!(cpu_model_from(grace), "Arm implementer 0x41 part 0xd4f");
        assert_eq!(cpu_model_from(""), "");
    }

    fn env(command: &str, notes: &[&str]) -> EnvRecord {
        EnvRecord {
            command_line: command.into(),
            notes: notes.iter().map(|n| n.to_string()).collect(),
            ..EnvRecord::default()
        }
    }

    #[test]
    fn a_resume_must_repeat_the_command_and_settings() {
        let original = env(
            "/a/metaprep steps --out r --seed 1",
            &["host profile `pytorch` (x)"],
        );
        let same = env(
            "bundle/metaprep steps --out r --seed 1 --resume",
            &["host profile `pytorch` (x)"],
        );
        assert_eq!(resume_difference(&original, &same), None);
        let seed = env(
            "metaprep steps --out r --seed 2 --resume",
            &["host profile `pytorch` (x)"],
        );
        let why = resume_difference(&original, &seed).unwrap();
        assert!(why.contains("--seed 2"), "{why}");
        let profile = env(
            "metaprep steps --out r --seed 1 --resume",
            &["host profile `pytorch` (y)"],
        );
        let why = resume_difference(&original, &profile).unwrap();
        assert!(why.contains("settings differ"), "{why}");
        // Another GPU's memory may leave other cells out.
        let memory = env(
            "metaprep steps --out r --seed 1 --resume",
            &[
                "host profile `pytorch` (x)",
                "memory per GPU: 80.0 GiB (device)",
            ],
        );
        let why = resume_difference(&original, &memory).unwrap();
        assert!(why.contains("memory per GPU"), "{why}");
        // Notes that are not settings (emulation, resumption) may differ.
        let notes = env(
            "metaprep steps --out r --seed 1 --resume",
            &["host profile `pytorch` (x)", "tp8 emulated"],
        );
        assert_eq!(resume_difference(&original, &notes), None);
    }
}
