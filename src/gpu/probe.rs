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
