//! NVML telemetry: a background sampler tagging readings with the sweep cell now running,
//! per-cell summaries for the results CSV, and a one-shot static read for `env.json`.
//!
//! NVML missing or failing is recoverable: [`Sampler::start`] and [`read_static`] return
//! [`NvmlUnavailable`], the caller warns once and leaves the telemetry columns empty. Every
//! NVML call happens on the sampler's own thread, so a failure (or panic) while loading the
//! library ends that thread and reaches the caller as an error, never as a crash.
//!
//! NVML numbers devices in PCI order and ignores `CUDA_VISIBLE_DEVICES`: its index 0 is not
//! necessarily CUDA device 0 when that variable reorders or hides devices. So every entry
//! point takes the CUDA device's PCI bus id (`gpu::probe::pci_bus_id`) and opens it by that.
//!
//! The reason bits live in `reasons`, a reading and a cell's summary in `reading`, the
//! background thread in `sampler`, the one-shot read in `static_info`.

mod reading;
mod reasons;
mod sampler;
mod static_info;

#[cfg(test)]
mod fixtures;

use nvml_wrapper::error::NvmlError;
use std::time::Duration;

pub use reading::{summarize_cell, CellTelemetry, Reading};
pub use reasons::{
    is_throttled, reasons_hex, REASON_APPLICATIONS_CLOCKS_SETTING, REASON_DISPLAY_CLOCK_SETTING,
    REASON_GPU_IDLE, REASON_HW_POWER_BRAKE_SLOWDOWN, REASON_HW_SLOWDOWN,
    REASON_HW_THERMAL_SLOWDOWN, REASON_SW_POWER_CAP, REASON_SW_THERMAL_SLOWDOWN, REASON_SYNC_BOOST,
};
pub use sampler::Sampler;
pub use static_info::{read_static, StaticInfo};

/// How often the sampler reads the device unless told otherwise.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(50);

/// Shortest sampling period; one round of NVML reads takes about this long anyway.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The library NVML's own loader looks for on Linux.
pub(crate) const NVML_LIB: &str = "libnvidia-ml.so.1";

/// NVML could not be loaded or queried; carries NVML's own message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlUnavailable(pub String);

impl std::fmt::Display for NvmlUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "NVML unavailable ({}); telemetry columns will be empty. \
             NVML comes with the NVIDIA driver (libnvidia-ml.so.1)",
            self.0
        )
    }
}

impl std::error::Error for NvmlUnavailable {}

pub(crate) fn unavailable(what: &str, err: NvmlError) -> NvmlUnavailable {
    NvmlUnavailable(format!("{what}: {err}"))
}

/// The device at PCI bus id `pci_bus_id` (a CUDA device's, `gpu::probe::pci_bus_id`: NVML's
/// own index need not be CUDA's).
pub(crate) fn device_at<'n>(
    nvml: &'n nvml_wrapper::Nvml,
    pci_bus_id: &str,
) -> Result<nvml_wrapper::Device<'n>, NvmlUnavailable> {
    nvml.device_by_pci_bus_id(pci_bus_id)
        .map_err(|e| unavailable(&format!("opening the device at PCI {pci_bus_id}"), e))
}

fn milli_to_unit(milli: u32) -> f64 {
    f64::from(milli) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::fixtures::MISSING_LIB;
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        let any = "00000000:00:06.0";
        let err = sampler::Sampler::start_with_lib(OsStr::new(MISSING_LIB), any, DEFAULT_PERIOD)
            .err()
            .expect("a missing NVML library must fail to start");
        assert!(err.0.contains("loading NVML"), "{err}");
        assert!(err.to_string().contains("NVML unavailable"), "{err}");
        let err = static_info::read_static_with_lib(OsStr::new(MISSING_LIB), any).unwrap_err();
        assert!(err.0.contains("loading NVML"), "{err}");
    }

    /// On a machine without the driver this checks the error path of the real entry points;
    /// on a GPU host it exercises sampling end to end, on CUDA device 0 found by its PCI id.
    #[test]
    fn real_nvml_starts_or_reports_why_not() {
        let pci = crate::gpu::probe::pci_bus_id(0).unwrap_or_else(|_| "00000000:00:06.0".into());
        match Sampler::start(&pci, Duration::from_millis(5)) {
            Err(err) => {
                assert!(!err.0.is_empty());
                assert!(read_static(&pci).is_err());
            }
            Ok(sampler) => {
                sampler.set_cell("cell-a");
                std::thread::sleep(Duration::from_millis(30));
                sampler.set_cell("");
                let summary = sampler.cell_summary("cell-a").expect("readings for cell-a");
                assert!(summary.readings >= 1);
                let samples = sampler.stop();
                assert!(samples.iter().any(|s| s.cell == "cell-a"));
                assert!(samples.windows(2).all(|w| w[0].t_s <= w[1].t_s));
                let info = read_static(&pci).expect("static NVML info where sampling works");
                assert!(info.device_count >= 1 && !info.gpu_name.is_empty());
            }
        }
    }
}
