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
