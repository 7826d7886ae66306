//! The one-shot read of NVML facts that do not change during a run, for `env.json`.

use super::{milli_to_unit, unavailable, NvmlUnavailable, NVML_LIB};
use crate::harness::gpm;
use crate::results::env::EnvRecord;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;
use std::ffi::OsStr;

/// NVML facts that do not change during a run, for `env.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticInfo {
    pub gpu_name: String,
    pub device_count: u32,
    /// e.g. `580.159.03`.
    pub driver_version: String,
    /// The CUDA version the driver supports, e.g. `13.0`.
    pub cuda_driver_version: String,
    pub sm_clock_max_mhz: Option<u32>,
    pub mem_clock_max_mhz: Option<u32>,
    /// Enforced power limit.
    pub power_limit_w: Option<f64>,
    /// Why GPM metrics are unavailable, one line; `None` when they are available.
    pub gpm_note: Option<String>,
}

impl StaticInfo {
    /// Fills the NVML fields of `env`; the GPU name and count only where the CUDA side left
    /// them empty, since CUDA's view (with `CUDA_VISIBLE_DEVICES`) is what the run used.
    pub fn fill_env(&self, env: &mut EnvRecord) {
        if env.gpu_name.is_empty() {
            env.gpu_name = self.gpu_name.clone();
        }
        if env.gpu_count == 0 {
            env.gpu_count = self.device_count;
        }
        env.driver_version = self.driver_version.clone();
        env.cuda_driver_version = self.cuda_driver_version.clone();
        env.sm_clock_max_mhz = self.sm_clock_max_mhz;
        env.mem_clock_max_mhz = self.mem_clock_max_mhz;
        env.power_limit_w = self.power_limit_w;
        if let Some(note) = &self.gpm_note {
            if !env.notes.contains(note) {
                env.notes.push(note.clone());
            }
        }
    }
}

/// Reads [`StaticInfo`] for the device at PCI bus id `pci_bus_id` (a CUDA device's:
/// `gpu::probe::pci_bus_id`).
pub fn read_static(pci_bus_id: &str) -> Result<StaticInfo, NvmlUnavailable> {
    read_static_with_lib(OsStr::new(NVML_LIB), pci_bus_id)
}

pub(super) fn read_static_with_lib(
    lib: &OsStr,
    pci_bus_id: &str,
) -> Result<StaticInfo, NvmlUnavailable> {
    let lib = lib.to_owned();
    let pci_bus_id = pci_bus_id.to_string();
    // On its own thread for the same reason as the sampler: a panic while loading NVML
    // becomes an error.
    std::thread::spawn(move || {
        let nvml = Nvml::builder()
            .lib_path(&lib)
            .init()
            .map_err(|e| unavailable("loading NVML", e))?;
        let device = super::device_at(&nvml, &pci_bus_id)?;
        let cuda = nvml
            .sys_cuda_driver_version()
            .map_err(|e| unavailable("reading the CUDA driver version", e))?;
        Ok(StaticInfo {
            gpu_name: device
                .name()
                .map_err(|e| unavailable("reading the GPU name", e))?,
            device_count: nvml
                .device_count()
                .map_err(|e| unavailable("counting devices", e))?,
            driver_version: nvml
                .sys_driver_version()
                .map_err(|e| unavailable("reading the driver version", e))?,
            cuda_driver_version: format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(cuda),
                nvml_wrapper::cuda_driver_version_minor(cuda)
            ),
            sm_clock_max_mhz: device.max_clock_info(Clock::SM).ok(),
            mem_clock_max_mhz: device.max_clock_info(Clock::Memory).ok(),
            power_limit_w: device.enforced_power_limit().ok().map(milli_to_unit),
            gpm_note: gpm::unavailable_reason(&device),
        })
    })
    .join()
    .unwrap_or_else(|_| Err(NvmlUnavailable("a panic while reading NVML".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_info_fills_env_without_overriding_cuda_view() {
        let info = StaticInfo {
            gpu_name: "NVIDIA H200".into(),
            device_count: 8,
            driver_version: "580.159.03".into(),
            cuda_driver_version: "13.0".into(),
            sm_clock_max_mhz: Some(1980),
            mem_clock_max_mhz: Some(3201),
            power_limit_w: Some(700.0),
            gpm_note: Some("GPM metrics unavailable: test".into()),
        };
        let mut env = EnvRecord::default();
        info.fill_env(&mut env);
        assert_eq!((env.gpu_name.as_str(), env.gpu_count), ("NVIDIA H200", 8));
        assert_eq!(env.driver_version, "580.159.03");
        assert_eq!(env.cuda_driver_version, "13.0");
        assert_eq!(env.sm_clock_max_mhz, Some(1980));
        assert_eq!(env.power_limit_w, Some(700.0));
        assert_eq!(env.notes, vec!["GPM metrics unavailable: test".to_string()]);
        info.fill_env(&mut env);
        assert_eq!(env.notes.len(), 1, "the note is added once");
        let mut cuda_env = EnvRecord {
            gpu_name: "NVIDIA H200 (CUDA)".into(),
            gpu_count: 2,
            ..EnvRecord::default()
        };
        info.fill_env(&mut cuda_env);
        assert_eq!(
            (cuda_env.gpu_name.as_str(), cuda_env.gpu_count),
            ("NVIDIA H200 (CUDA)", 2)
        );
    }
}
