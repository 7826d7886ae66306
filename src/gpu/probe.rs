//! Find the CUDA driver and NVRTC before the first cudarc call: with dynamic loading, cudarc
//! panics (with a backtrace) when a library is missing; we want one clear line and exit 3 (no GPU or driver).

use std::fmt;

/// The exit status of a [`GpuUnavailable`]: distinct from a bad flag (2), so a script can
/// tell them apart.
pub const EXIT_NO_GPU: u8 = 3;

/// No CUDA driver, no NVRTC, no device, or a GPU library the command needs (CUPTI, NCCL)
/// missing: the command needs a GPU host that has it; it exits with [`EXIT_NO_GPU`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUnavailable(pub String);

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GpuUnavailable {}

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

pub fn require_nvrtc() -> Result<(), GpuUnavailable> {
    // SAFETY: as above, only a dlopen.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuUnavailable(
            "no NVRTC found: libnvrtc.so could not be loaded; install the CUDA toolkit's NVRTC \
             (or add its lib64 folder to LD_LIBRARY_PATH)"
                .into(),
        ))
    }
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
