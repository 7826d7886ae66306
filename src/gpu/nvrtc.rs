//! A thin layer over NVRTC for what cudarc's `compile_ptx` does not give: a cubin for an
//! exact architecture (`nvrtcGetCUBIN`), the architectures this NVRTC knows
//! (`nvrtcGetSupportedArchs`) and its version. The caller probes for the library first
//! ([`super::probe::require_nvrtc`]): cudarc panics when it is missing.

use anyhow::{anyhow, Context, Result};
use cudarc::nvrtc::{result, sys};
use std::ffi::{c_char, c_int, CString};

/// What one compile produced.
pub enum Output {
    /// PTX text for a virtual architecture (`compute_XY`), JIT-compiled by the driver at load.
    Ptx(String),
    /// Machine code for one real architecture (`sm_XY`), loaded as is.
    Cubin(Vec<u8>),
}

/// NVRTC's version, e.g. `(12, 9)`.
pub fn version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameter query.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .context("reading the NVRTC version")?;
    Ok((major, minor))
}

/// The architectures this NVRTC compiles for, as `major * 10 + minor` (90, 100, 103, ...),
/// ascending.
pub fn supported_archs() -> Result<Vec<u32>> {
    let mut count: c_int = 0;
    // SAFETY: out-parameter query, then a buffer of exactly the size NVRTC reported.
    let archs = unsafe {
        sys::nvrtcGetNumSupportedArchs(&mut count)
            .result()
            .context("asking NVRTC how many architectures it supports")?;
        let mut archs = vec![0 as c_int; count.max(0) as usize];
        sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
            .result()
            .context("asking NVRTC which architectures it supports")?;
        archs
    };
    let mut archs: Vec<u32> = archs.into_iter().map(|a| a.max(0) as u32).collect();
    archs.sort_unstable();
    Ok(archs)
}

/// Compiles `source` (named `file_name` in NVRTC's log) for `arch`: with `cubin`, for the
/// real architecture `sm_<arch>`, else PTX for the virtual `compute_<arch>`. A compile
/// error carries NVRTC's log.
pub fn compile(file_name: &str, source: &str, arch: u32, cubin: bool) -> Result<Output> {
    let target = if cubin {
        format!("sm_{arch}")
    } else {
        format!("compute_{arch}")
    };
    let src = CString::new(source).map_err(|_| anyhow!("kernels/{file_name} holds a NUL byte"))?;
    let name = CString::new(file_name).map_err(|_| anyhow!("{file_name:?} holds a NUL byte"))?;
    let prog = result::create_program(&src, Some(&name))
        .map_err(|e| anyhow!("NVRTC could not create a program for kernels/{file_name}: {e:?}"))?;
    // SAFETY: `prog` was just created and is destroyed once, below; `src` and `name` outlive it.
    let output = unsafe { compiled(prog, file_name, &target, cubin) };
    // SAFETY: as above; the program is not used after this.
    let destroyed = unsafe { result::destroy_program(prog) };
    let output = output?;
    destroyed.map_err(|e| {
        anyhow!("NVRTC could not release its program for kernels/{file_name}: {e:?}")
    })?;
    Ok(output)
}

/// Compiles `prog` for `target` and takes its PTX or cubin.
///
/// # Safety
/// `prog` must come from `create_program` and not be destroyed yet.
unsafe fn compiled(
    prog: sys::nvrtcProgram,
    file_name: &str,
    target: &str,
    cubin: bool,
) -> Result<Output> {
    let options = [format!("--gpu-architecture={target}"), "--std=c++17".into()];
    if let Err(e) = result::compile_program(prog, &options) {
        let log = result::get_program_log(prog)
            .map(|log| c_text(&log))
            .unwrap_or_else(|log_error| format!("(no log: {log_error:?})"));
        return Err(if e.0 == sys::nvrtcResult::NVRTC_ERROR_COMPILATION {
            anyhow!("NVRTC could not compile kernels/{file_name} for {target}:\n{log}")
        } else {
            anyhow!("NVRTC failed on kernels/{file_name} for {target}: {e:?}\n{log}")
        });
    }
    if !cubin {
        return result::get_ptx(prog)
            .map(|ptx| Output::Ptx(c_text(&ptx)))
            .map_err(|e| anyhow!("NVRTC gave no PTX for kernels/{file_name}: {e:?}"));
    }
    let mut size = 0usize;
    sys::nvrtcGetCUBINSize(prog, &mut size)
        .result()
        .map_err(|e| anyhow!("NVRTC gave no cubin size for kernels/{file_name}: {e:?}"))?;
    let mut image = vec![0u8; size];
    sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast())
        .result()
        .map_err(|e| anyhow!("NVRTC gave no cubin for kernels/{file_name}: {e:?}"))?;
    Ok(Output::Cubin(image))
}

/// A NUL-terminated buffer from NVRTC as text.
fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: CI installs it from PyPI (`cargo test --lib nvrtc -- --ignored`).
    #[test]
    #[ignore = "needs NVRTC (on the linker path or in a Python venv); .ci/run installs one"]
    fn a_compile_error_reports_the_nvrtc_log() {
        crate::gpu::probe::require_nvrtc().expect("NVRTC");
        for cubin in [false, true] {
            let err = compile("broken.cu", "__global__ void broken( { }", 90, cubin)
                .err()
                .expect("a compile error");
            let message = format!("{err:#}");
            let target = if cubin { "sm_90" } else { "compute_90" };
            assert!(
                message.contains(&format!(
                    "NVRTC could not compile kernels/broken.cu for {target}"
                )),
                "{message}"
            );
            assert!(message.contains("error"), "the log is included: {message}");
        }
    }

    #[test]
    #[ignore = "needs NVRTC (on the linker path or in a Python venv); .ci/run installs one"]
    fn nvrtc_reports_its_version_and_the_architectures_ci_needs() {
        crate::gpu::probe::require_nvrtc().expect("NVRTC");
        let (major, minor) = version().unwrap();
        assert!(major >= 12, "NVRTC {major}.{minor}");
        let archs = supported_archs().unwrap();
        assert!(archs.windows(2).all(|w| w[0] < w[1]), "{archs:?}");
        // CI installs 12.9, the first NVRTC that knows GB300's sm_103.
        for arch in [90, 100, 103] {
            assert!(archs.contains(&arch), "NVRTC {major}.{minor}: {archs:?}");
        }
    }
}
