//! Finding and loading NVRTC before cudarc's first NVRTC call (cudarc panics when none
//! loads). What the dynamic linker resolves comes first (a toolkit on `LD_LIBRARY_PATH` or in
//! the loader's cache); else the first `libnvrtc` file [`library_search`] finds where CUPTI
//! is looked for too: the NVIDIA wheels in Python's site-packages (a PyTorch venv's
//! `nvidia/cu13/lib` or `nvidia/cuda_nvrtc/lib`), then the CUDA toolkit's `lib64`.
//!
//! NVRTC opens its builtins library (`libnvrtc-builtins.so.13.0`) by name when it first
//! compiles, and the linker would not find that one either: the builtins beside the file
//! found are loaded first, so NVRTC's request lands on them.

use crate::gpu::library_search::{self, LibrarySearch, SearchEnv};
use crate::gpu::probe::GpuUnavailable;
use libloading::Library;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Where NVRTC is looked for: newest file names first; the wheels' folders (CUDA 13 wheels
/// share `nvidia/cu13/lib`, CUDA 12's `nvidia-cuda-nvrtc-cu12` has its own); the toolkit's.
pub const NVRTC: LibrarySearch = LibrarySearch {
    file_names: &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
    wheel_dirs: &[
        "nvidia/cu13/lib",
        "nvidia/cuda_nvrtc/lib",
        "nvidia/cu12/lib",
    ],
    toolkit_dirs: &["/usr/local/cuda/lib64"],
};

/// The symbol an NVRTC file is recognised (and located) by.
const VERSION_SYMBOL: &[u8] = b"nvrtcVersion\0";

/// How the NVRTC in use was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The dynamic linker resolved one of cudarc's names by itself.
    Linker,
    /// Found by the search and loaded by path (with its builtins).
    Search,
}

/// The NVRTC this process uses, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrtcLibrary {
    pub path: PathBuf,
    pub found: Found,
}

impl NvrtcLibrary {
    /// `/path/libnvrtc.so.13 (found by the dynamic linker)`.
    pub fn describe(&self) -> String {
        let how = match self.found {
            Found::Linker => "found by the dynamic linker",
            Found::Search => "found in the NVIDIA wheels' or toolkit's folders, loaded by path",
        };
        format!("{} ({how})", self.path.display())
    }
}

/// The loaded files (NVRTC last), kept for the process's lifetime: cudarc calls into them.
static LOADED: Mutex<Option<(NvrtcLibrary, Vec<Library>)>> = Mutex::new(None);

/// Makes NVRTC loadable for cudarc and says where it is; missing or unusable NVRTC is a
/// [`GpuUnavailable`] naming every folder searched and what to install.
pub fn load_nvrtc() -> Result<NvrtcLibrary, GpuUnavailable> {
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((library, _)) = loaded.as_ref() {
        return Ok(library.clone());
    }
    if let Some(resolved) = library_search::linkers("nvrtc", VERSION_SYMBOL) {
        let found = NvrtcLibrary {
            path: resolved.path,
            found: Found::Linker,
        };
        *loaded = Some((found.clone(), vec![resolved.library]));
        return Ok(found);
    }
    let env = SearchEnv::from_process();
    let none = || {
        format!(
            "the dynamic linker has none, and no libnvrtc file is in {}",
            NVRTC.folder_list(&env)
        )
    };
    let (path, libraries) =
        library_search::first_loadable(NVRTC.candidates(&env), none, load_with_builtins).map_err(
            |tried| {
                GpuUnavailable(format!(
                    "no NVRTC found ({tried}); install NVRTC into the Python environment you run \
                 from (`pip install nvidia-cuda-nvrtc-cu12==12.9.*`, or `nvidia-cuda-nvrtc` for \
                 CUDA 13) or the CUDA toolkit, or add the folder holding libnvrtc.so to \
                 LD_LIBRARY_PATH"
                ))
            },
        )?;
    let found = NvrtcLibrary {
        path,
        found: Found::Search,
    };
    *loaded = Some((found.clone(), libraries));
    Ok(found)
}

/// Loads the builtins beside `path`, then `path`, and checks that cudarc's name for NVRTC
/// resolves to it.
fn load_with_builtins(path: &Path) -> Result<Vec<Library>, String> {
    let mut libraries = Vec::new();
    for builtins in builtins_beside(path) {
        libraries.push(library_search::open(&builtins)?);
    }
    let nvrtc = library_search::open(path)?;
    library_search::resolves_to("nvrtc", VERSION_SYMBOL, &nvrtc, path)?;
    libraries.push(nvrtc);
    Ok(libraries)
}

/// The builtins libraries in `nvrtc`'s folder (`libnvrtc-builtins.so.<major>.<minor>`; the
/// `.alt.` variants are for NVRTC's alternative ABI and are left alone), sorted.
fn builtins_beside(nvrtc: &Path) -> Vec<PathBuf> {
    let Some(entries) = nvrtc.parent().and_then(|d| std::fs::read_dir(d).ok()) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so.") && !n.contains(".alt."))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::python_site::PythonEnv;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"").unwrap();
    }

    #[test]
    fn nvrtc_is_found_in_a_venvs_wheels_as_cupti_and_nccl_are() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let cu12 = venv.join("lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
        touch(&cu12);
        let env = SearchEnv {
            python: PythonEnv {
                virtual_env: Some(venv.clone()),
                ..PythonEnv::default()
            },
            ..SearchEnv::default()
        };
        assert_eq!(NVRTC.candidates(&env), vec![cu12.clone()]);
        // A CUDA 13 wheel beside it is newer and its folder comes first.
        let cu13 = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13");
        touch(&cu13);
        assert_eq!(NVRTC.candidates(&env), vec![cu13, cu12]);
    }

    #[test]
    fn the_builtins_beside_nvrtc_are_loaded_but_not_the_alternative_abi() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "libnvrtc.so.13",
            "libnvrtc-builtins.so.13.0",
            "libnvrtc-builtins.alt.so.13.0",
            "libnvrtc.alt.so.13",
        ] {
            touch(&dir.path().join(name));
        }
        assert_eq!(
            builtins_beside(&dir.path().join("libnvrtc.so.13")),
            [dir.path().join("libnvrtc-builtins.so.13.0")]
        );
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_message_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("libnvrtc.so.13");
        fs::write(&fake, b"not an ELF file").unwrap();
        let error = load_with_builtins(&fake).err().unwrap();
        assert!(error.contains(&fake.display().to_string()), "{error}");
    }

    /// With a real NVRTC in a wheel folder and nothing on the linker's path (.ci/run: the
    /// venv it installs NVRTC into, LD_LIBRARY_PATH unset), the search loads it and a
    /// compile works, builtins included.
    #[test]
    #[ignore = "needs NVRTC (a venv's nvidia/*/lib or the linker's path); .ci/run installs it"]
    #[allow(clippy::print_stdout)]
    fn the_nvrtc_found_compiles() {
        let found = load_nvrtc().unwrap_or_else(|e| panic!("{e}"));
        println!("NVRTC: {}", found.describe());
        let output =
            crate::gpu::nvrtc::compile("k.cu", "__global__ void k(int *x) { *x = 1; }", 90, true)
                .unwrap_or_else(|e| panic!("{e:#}"));
        assert!(matches!(output, crate::gpu::nvrtc::Output::Cubin(_)));
    }
}
