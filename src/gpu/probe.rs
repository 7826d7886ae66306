//! Find the CUDA driver and NVRTC before the first cudarc call: with dynamic loading, cudarc
//! panics (with a backtrace) when a library is missing; we want one clear line and exit 3 (no
//! GPU or driver).

pub use crate::exit::GpuUnavailable;
use std::path::PathBuf;

pub fn require_driver() -> Result<(), GpuUnavailable> {
    // SAFETY: only tries to dlopen the candidate library names; no symbol is called.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuUnavailable(
            "no CUDA driver found: libcuda.so could not be loaded; run this command on a host \
             with an NVIDIA GPU and its driver installed"
                .into(),
        ))
    }
}

/// NVRTC where the linker finds it or where the NVIDIA wheels and the toolkit put it
/// ([`crate::gpu::nvrtc_library`]), loaded so cudarc's own loader finds it.
pub fn require_nvrtc() -> Result<(), GpuUnavailable> {
    crate::gpu::nvrtc_library::load_nvrtc().map(|_| ())
}

/// The driver library the linker resolves and the CUDA version it supports ("13.0"), read
/// without initialising the driver.
pub fn driver_library() -> Result<(PathBuf, String), GpuUnavailable> {
    require_driver()?;
    let path = crate::gpu::library_search::linkers("cuda", b"cuInit\0")
        .map(|resolved| resolved.path)
        .unwrap_or_else(|| PathBuf::from("libcuda.so"));
    let mut version = 0;
    // SAFETY: a plain out-parameter query; the library is present (checked above).
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| GpuUnavailable(format!("reading the driver's CUDA version: {e}")))?;
    Ok((path, cuda_version(version)))
}

/// A CUDA version as the driver API encodes it (13000) in the usual form ("13.0").
pub fn cuda_version(encoded: i32) -> String {
    format!("{}.{}", encoded / 1000, (encoded % 1000) / 10)
}

/// The devices the driver sees and the total memory of device `ordinal`, without creating a
/// context (a parent that starts one process per GPU keeps none of its own).
pub fn devices(ordinal: usize) -> Result<(u32, u64), GpuUnavailable> {
    require_driver()?;
    use cudarc::driver::result;
    let unavailable = |what: &str, e: cudarc::driver::DriverError| {
        GpuUnavailable(format!("{what}: the driver answered {e}"))
    };
    result::init().map_err(|e| unavailable("initialising the CUDA driver", e))?;
    let count = result::device::get_count().map_err(|e| unavailable("counting devices", e))?;
    let count = count.max(0) as u32;
    if count as usize <= ordinal {
        return Err(GpuUnavailable(format!(
            "no CUDA device {ordinal}: the driver sees {count} device(s)"
        )));
    }
    let dev = result::device::get(ordinal as i32)
        .map_err(|e| unavailable(&format!("opening device {ordinal}"), e))?;
    // SAFETY: `dev` is a device handle the driver just returned; the query needs no context.
    let memory = unsafe { result::device::total_mem(dev) }
        .map_err(|e| unavailable("reading the device's memory", e))?;
    Ok((count, memory as u64))
}

/// The PCI bus id of CUDA device `ordinal` as NVML writes one (`00000000:18:00.0`). NVML
/// numbers devices in PCI order and ignores `CUDA_VISIBLE_DEVICES`, so telemetry opens its
/// device by this id, never by the CUDA ordinal.
pub fn pci_bus_id(ordinal: usize) -> Result<String, GpuUnavailable> {
    devices(ordinal)?;
    use cudarc::driver::{result, sys::CUdevice_attribute as Attr};
    let dev = result::device::get(ordinal as i32).map_err(|e| {
        GpuUnavailable(format!("opening device {ordinal}: the driver answered {e}"))
    })?;
    let attr = |a: Attr| {
        // SAFETY: `dev` is a device handle the driver just returned; the query needs no context.
        unsafe { result::device::get_attribute(dev, a) }.map_err(|e| {
            GpuUnavailable(format!(
                "reading device {ordinal}'s PCI address ({a:?}): the driver answered {e}"
            ))
        })
    };
    Ok(pci_bus_id_text(
        attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
        attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
        attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
    ))
}

/// `domain:bus:device.0` in NVML's spelling (upper-case hex, an 8-digit domain); a GPU is
/// function 0.
pub fn pci_bus_id_text(domain: i32, bus: i32, device: i32) -> String {
    format!("{domain:08X}:{bus:02X}:{device:02X}.0")
}

#[cfg(test)]
mod pci_tests {
    use super::pci_bus_id_text;

    #[test]
    fn the_bus_id_is_spelled_as_nvml_spells_it() {
        // As an H200 host's NVML printed its GPU.
        assert_eq!(pci_bus_id_text(0, 0, 6), "00000000:00:06.0");
        assert_eq!(pci_bus_id_text(1, 0x18, 0x1f), "00000001:18:1F.0");
    }
}
