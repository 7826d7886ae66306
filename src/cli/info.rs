//! `metaprep info`: the GPU and the host.

use super::common::DeviceArgs;
use crate::exit::Exit;
use anyhow::Result;
use std::process::ExitCode;

pub(crate) fn info(args: &DeviceArgs) -> Result<ExitCode> {
    let gpu = args.open()?;
    let i = &gpu.info;
    crate::outln!("GPU {}: {} (PCI {})", i.ordinal, i.name, i.pci_bus_id);
    crate::outln!(
        "  compute capability  {}.{}",
        i.compute_capability.0,
        i.compute_capability.1
    );
    crate::outln!("  SMs                 {}", i.sm_count);
    crate::outln!("  L2                  {} MiB", i.l2_bytes >> 20);
    crate::outln!(
        "  memory              {:.1} GiB",
        i.memory_bytes as f64 / (1u64 << 30) as f64
    );
    crate::outln!("  CUDA (driver)       {}", i.cuda_driver_version);
    crate::outln!("  NVRTC               {}", i.nvrtc_version);
    crate::outln!("  kernels             {}", i.kernel_image);
    crate::outln!("  synchronise         {}", i.sync);
    crate::outln!("  devices visible     {}", i.device_count);
    match crate::gpu::cupti::load_cupti(None) {
        Ok(cupti) => crate::outln!(
            "  CUPTI               {} (steps --timer cupti)",
            cupti.describe()
        ),
        Err(e) => crate::outln!("  CUPTI               none: steps --timer cupti unavailable; {e}"),
    }
    crate::outln!("  GPM                 {}", gpm_line(&i.pci_bus_id));
    crate::outln!(
        "host {} ({})",
        std::env::consts::ARCH,
        crate::harness::environment::cpu_model()
    );
    Ok(Exit::Ok.into())
}

/// What `sweep` and `steps` will put in their `gpm_*` columns on this device.
fn gpm_line(pci_bus_id: &str) -> String {
    match crate::harness::nvml::read_static(pci_bus_id) {
        Ok(info) => match info.gpm_note {
            None => "SM util, DRAM bandwidth util, NVLink RX/TX per cell (gpm_* columns)".into(),
            Some(note) => format!("none: {note}"),
        },
        Err(e) => format!("none: {e}"),
    }
}
