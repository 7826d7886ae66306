//! What the tests that drive the metaprep binary on a GPU host share: where the binary is
//! (a bundle's tests find `../metaprep`, or $METAPREP_BIN) and how many GPUs there are.

use std::path::{Path, PathBuf};

pub fn metaprep_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("METAPREP_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().unwrap();
    // bundle/tests/gpu_ranks-* → bundle/metaprep
    if let Some(bundled) = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("metaprep"))
    {
        if bundled.is_file() {
            return bundled;
        }
    }
    PathBuf::from(env!("CARGO_BIN_EXE_metaprep"))
}

pub fn gpus() -> u32 {
    metaprep::gpu::probe::devices(0)
        .expect("these tests need a CUDA GPU")
        .0
}

/// Prints `SKIPPED` with the GPU count where the host has fewer than `needs`: a one-GPU
/// host cannot say anything about such a test.
pub fn skipped(needs: u32) -> bool {
    let have = gpus();
    if have < needs {
        println!("SKIPPED: needs {needs} GPUs, this host has {have}");
    }
    have < needs
}
