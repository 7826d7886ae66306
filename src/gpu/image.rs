//! Which kind of kernel image the driver loads: a cubin for the device's exact architecture
//! (no JIT at start-up, and no `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` from an NVRTC newer
//! than the driver), or PTX for the newest architecture NVRTC knows that the device can run,
//! JIT-compiled by the driver. Pure decisions and messages; `context` does the loading.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What the user asked for (`--kernel-image`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageChoice {
    /// A cubin for the device's architecture where NVRTC knows it, else PTX.
    #[default]
    Auto,
    /// A cubin for the device's architecture, or an error when NVRTC does not know it.
    Cubin,
    /// PTX, JIT-compiled by the driver (to test the fallback).
    Ptx,
}

/// The image every module of a run is compiled to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelImage {
    /// True for a cubin (`sm_<arch>`), false for PTX (`compute_<arch>`).
    pub cubin: bool,
    /// `major * 10 + minor`, as NVRTC names architectures.
    pub arch: u32,
    /// NVRTC's version, e.g. "12.9".
    pub nvrtc_version: String,
    /// The CUDA version the driver supports, e.g. "13.0": the newest PTX it can JIT.
    pub driver_cuda_version: String,
}

impl KernelImage {
    /// The image for a device of `compute_capability` with an NVRTC that supports
    /// `supported` (ascending or not). `auto` takes a cubin for the exact architecture and
    /// falls back to PTX for the newest supported architecture not above the device's (PTX for
    /// a newer one cannot run on it); `ptx` forces that fallback; `cubin` refuses it.
    pub fn choose(
        choice: ImageChoice,
        (major, minor): (i32, i32),
        supported: &[u32],
        nvrtc_version: &str,
        driver_cuda_version: &str,
    ) -> Result<KernelImage> {
        let device = (major.max(0) * 10 + minor.max(0)) as u32;
        let image = |cubin, arch| KernelImage {
            cubin,
            arch,
            nvrtc_version: nvrtc_version.into(),
            driver_cuda_version: driver_cuda_version.into(),
        };
        let knows_device = supported.contains(&device);
        if choice != ImageChoice::Ptx && knows_device {
            return Ok(image(true, device));
        }
        if choice == ImageChoice::Cubin {
            bail!(
                "--kernel-image cubin: NVRTC {nvrtc_version} cannot compile for sm_{device} (it \
                 knows {}); install an NVRTC that does (sm_100 needs 12.8 or newer, sm_103 12.9: \
                 `pip install nvidia-cuda-nvrtc-cu12==12.9.*` or the CUDA toolkit, then put its \
                 lib folder on LD_LIBRARY_PATH), or use --kernel-image auto to load PTX",
                arch_list(supported)
            );
        }
        match supported.iter().copied().filter(|&a| a <= device).max() {
            Some(arch) => Ok(image(false, arch)),
            None => bail!(
                "NVRTC {nvrtc_version} knows no architecture this GPU (compute capability \
                 {major}.{minor}) can run (it knows {}); install an NVRTC that supports sm_{device}",
                arch_list(supported)
            ),
        }
    }

    /// The `--gpu-architecture` target: `sm_90`, `compute_100`.
    pub fn target(&self) -> String {
        if self.cubin {
            format!("sm_{}", self.arch)
        } else {
            format!("compute_{}", self.arch)
        }
    }

    /// The error for PTX the driver refused with `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`: the
    /// PTX came from an NVRTC newer than the driver.
    pub fn unsupported_ptx(&self, file_name: &str) -> String {
        format!(
            "the driver (CUDA {driver}) cannot load the PTX of kernels/{file_name} that NVRTC \
             {nvrtc} wrote for {target} (CUDA_ERROR_UNSUPPORTED_PTX_VERSION: NVRTC {nvrtc} is \
             newer than the driver); install an NVIDIA driver that supports CUDA {nvrtc} or \
             newer, or an NVRTC no newer than CUDA {driver} (e.g. `pip install \
             nvidia-cuda-nvrtc-cu12` of that version, on LD_LIBRARY_PATH); with an NVRTC that \
             knows this GPU, --kernel-image auto loads a cubin and needs no JIT",
            driver = self.driver_cuda_version,
            nvrtc = self.nvrtc_version,
            target = self.target(),
        )
    }
}

/// What `info` prints and env.json records: "cubin sm_90 (NVRTC 13.0)", or "PTX compute_100
/// (NVRTC 12.8), JIT by the driver (CUDA 13.0)".
impl fmt::Display for KernelImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cubin {
            write!(f, "cubin {} (NVRTC {})", self.target(), self.nvrtc_version)
        } else {
            write!(
                f,
                "PTX {} (NVRTC {}), JIT by the driver (CUDA {})",
                self.target(),
                self.nvrtc_version,
                self.driver_cuda_version
            )
        }
    }
}

fn arch_list(archs: &[u32]) -> String {
    if archs.is_empty() {
        return "none".into();
    }
    archs
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    // NVRTC 12.8 knows Blackwell's sm_100 and sm_120 but not GB300's sm_103.
    const NVRTC_12_8: [u32; 6] = [75, 80, 89, 90, 100, 120];
    const NVRTC_12_9: [u32; 7] = [75, 80, 89, 90, 100, 103, 120];

    fn choose(choice: ImageChoice, cc: (i32, i32), supported: &[u32]) -> Result<KernelImage> {
        KernelImage::choose(choice, cc, supported, "12.8", "13.0")
    }

    #[test]
    fn auto_takes_a_cubin_for_an_architecture_nvrtc_knows() {
        let image = choose(ImageChoice::Auto, (9, 0), &NVRTC_12_8).unwrap();
        assert!(image.cubin);
        assert_eq!(image.target(), "sm_90");
        assert_eq!(image.to_string(), "cubin sm_90 (NVRTC 12.8)");
        let b300 = KernelImage::choose(ImageChoice::Auto, (10, 3), &NVRTC_12_9, "12.9", "12.9");
        assert_eq!(b300.unwrap().target(), "sm_103");
    }

    #[test]
    fn auto_falls_back_to_ptx_for_the_newest_architecture_the_device_can_run() {
        // sm_120 is newer than GB300's 10.3: its PTX would not run there.
        let image = choose(ImageChoice::Auto, (10, 3), &NVRTC_12_8).unwrap();
        assert!(!image.cubin);
        assert_eq!(image.target(), "compute_100");
        assert_eq!(
            image.to_string(),
            "PTX compute_100 (NVRTC 12.8), JIT by the driver (CUDA 13.0)"
        );
    }

    #[test]
    fn ptx_is_forced_for_the_device_architecture_and_cubin_is_refused_without_it() {
        let forced = choose(ImageChoice::Ptx, (9, 0), &NVRTC_12_8).unwrap();
        assert_eq!(forced.target(), "compute_90");
        let why = choose(ImageChoice::Cubin, (10, 3), &NVRTC_12_8)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("NVRTC 12.8 cannot compile for sm_103"),
            "{why}"
        );
        assert!(why.contains("sm_100, sm_120"), "lists what it knows: {why}");
        assert!(why.contains("--kernel-image auto"), "{why}");
    }

    #[test]
    fn an_nvrtc_that_knows_nothing_the_device_runs_is_an_error() {
        let why = choose(ImageChoice::Auto, (7, 0), &NVRTC_12_8)
            .unwrap_err()
            .to_string();
        assert!(why.contains("compute capability 7.0"), "{why}");
        assert!(why.contains("sm_70"), "{why}");
    }

    #[test]
    fn the_unsupported_ptx_error_names_both_versions_and_what_to_install() {
        let image =
            KernelImage::choose(ImageChoice::Ptx, (9, 0), &NVRTC_12_9, "13.1", "12.8").unwrap();
        let why = image.unsupported_ptx("accept.cu");
        for part in [
            "driver (CUDA 12.8)",
            "NVRTC 13.1",
            "compute_90",
            "kernels/accept.cu",
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            "driver that supports CUDA 13.1",
            "an NVRTC no newer than CUDA 12.8",
        ] {
            assert!(why.contains(part), "lacks {part:?}: {why}");
        }
    }
}
