//! Where a rank's GPU sits, from NVML, for `env.json`: its PCI bus id and its active NVLinks
//! (with the PCI ids at their far ends: other GPUs, or NVSwitches on HGX boards).

use super::nvml::{device_at, unavailable, NvmlUnavailable, NVML_LIB};
use nvml_wrapper::Nvml;
use std::collections::BTreeSet;

/// NVLinks a GPU may have (nvml.h's NVML_NVLINK_MAX_LINKS).
const MAX_LINKS: u32 = 18;

/// `PCI 0000:18:00.0, 18 NVLinks active (to 4 devices: ...)`, for the device at PCI bus id
/// `pci_bus_id` (a CUDA device's: `gpu::probe::pci_bus_id`).
pub fn describe(pci_bus_id: &str) -> Result<String, NvmlUnavailable> {
    let pci_bus_id = pci_bus_id.to_string();
    // On its own thread, as every NVML use here: a panic while loading becomes an error.
    std::thread::spawn(move || {
        let nvml = Nvml::builder()
            .lib_path(std::ffi::OsStr::new(NVML_LIB))
            .init()
            .map_err(|e| unavailable("loading NVML", e))?;
        let device = device_at(&nvml, &pci_bus_id)?;
        let pci = device
            .pci_info()
            .map_err(|e| unavailable("reading the PCI id", e))?
            .bus_id;
        let mut active = 0;
        let mut remote = BTreeSet::new();
        for link in 0..MAX_LINKS {
            let link = device.link_wrapper_for(link);
            // A link past the GPU's last, or without NVLink at all, answers an error.
            if link.is_active().unwrap_or(false) {
                active += 1;
                if let Ok(p) = link.remote_pci_info() {
                    remote.insert(p.bus_id);
                }
            }
        }
        Ok(links_line(&pci, active, &remote))
    })
    .join()
    .unwrap_or_else(|_| Err(NvmlUnavailable("NVML panicked reading the topology".into())))
}

fn links_line(pci: &str, active: u32, remote: &BTreeSet<String>) -> String {
    match active {
        0 => format!("PCI {pci}, no NVLink active"),
        n => format!(
            "PCI {pci}, {n} NVLinks active (to {} device(s): {})",
            remote.len(),
            remote.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_bus_and_the_links() {
        let far: BTreeSet<String> = ["0000:05:00.0".to_string()].into();
        assert_eq!(
            links_line("0000:18:00.0", 18, &far),
            "PCI 0000:18:00.0, 18 NVLinks active (to 1 device(s): 0000:05:00.0)"
        );
        assert_eq!(
            links_line("0000:18:00.0", 0, &BTreeSet::new()),
            "PCI 0000:18:00.0, no NVLink active"
        );
    }

    #[test]
    fn without_nvml_it_is_an_error_not_a_panic() {
        // On a machine without a driver this is an error; on a GPU host, a line.
        let pci = crate::gpu::probe::pci_bus_id(0).unwrap_or_else(|_| "00000000:00:06.0".into());
        match describe(&pci) {
            Ok(line) => assert!(line.starts_with("PCI "), "{line}"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
