//! The one NVML call the `nvml-wrapper` crate does not offer safely: the raw clock-event
//! reason bits.

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::Device;

/// Raw reason bits, through the NVML 13 clock-events call where the driver has it and the
/// deprecated throttle-reasons call otherwise. The wrapper only offers the latter, and drops
/// bits it does not know, so both are called through its raw symbol table.
pub fn clock_event_reasons(device: &Device) -> Result<u64, NvmlError> {
    let lib = device.nvml().lib();
    let sym = nvml_sym(
        lib.nvmlDeviceGetCurrentClocksEventReasons
            .as_ref()
            .or(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref()),
    )?;
    let mut reasons = 0;
    // SAFETY: `device` holds a live handle from this NVML instance, and `reasons` is a valid
    // out-pointer of the C type (`unsigned long long`) the symbol's signature declares.
    nvml_try(unsafe { sym(device.handle(), &mut reasons) })?;
    Ok(reasons)
}
