//! Finding and loading `libcupti` at run time, before cudarc's first CUPTI call: from
//! `--cupti-lib`, from what the dynamic linker resolves, or from the first file
//! [`library_search`] finds (a PyTorch venv's `site-packages/nvidia/cu13/lib` or
//! `nvidia/cuda_cupti/lib`, `/usr/local/cuda/extras/CUPTI/lib64`), loaded and kept loaded so
//! cudarc's request for its soname lands on that same file.

use crate::gpu::library_search::{self, LibrarySearch, SearchEnv};
use crate::gpu::probe::GpuUnavailable;
use libloading::Library;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Where CUPTI is looked for: newest file names first; the folders under a Python
/// `site-packages` where NVIDIA's wheels put it (CUDA 13 wheels share `nvidia/cu13/lib`; CUDA
/// 12 wheels have one folder per component); then where the CUDA toolkit installs it.
pub const CUPTI: LibrarySearch = LibrarySearch {
    file_names: &["libcupti.so.13", "libcupti.so.12", "libcupti.so"],
    wheel_dirs: &[
        "nvidia/cu13/lib",
        "nvidia/cuda_cupti/lib",
        "nvidia/cu12/lib",
    ],
    toolkit_dirs: &[
        "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/lib64",
    ],
};

/// The symbol a CUPTI file is recognised (and located) by.
const VERSION_SYMBOL: &[u8] = b"cuptiGetVersion\0";

/// The CUPTI this process loaded: where it came from and the API version it reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuptiLibrary {
    pub path: PathBuf,
    pub api_version: u32,
}

impl CuptiLibrary {
    /// One line for `info` and `env.json`.
    pub fn describe(&self) -> String {
        format!(
            "CUPTI API version {} from {}",
            self.api_version,
            self.path.display()
        )
    }
}

/// The library loaded for the process's lifetime (cudarc keeps calling into it).
static LOADED: Mutex<Option<(CuptiLibrary, Library)>> = Mutex::new(None);

/// Why `--cupti-lib PATH` cannot be CUPTI: it is no file. `steps` asks before any GPU work
/// (bad input there); [`load_cupti`] refuses such a path too, for callers that did not ask.
pub fn named_problem(path: &Path) -> Option<String> {
    library_search::named_file_problem(
        "--cupti-lib",
        path,
        "libcupti.so (e.g. .../site-packages/nvidia/cu13/lib/libcupti.so.13)",
    )
}

/// Loads CUPTI from `explicit` (`--cupti-lib`) or the first file the search finds. Missing or
/// unusable CUPTI is a [`GpuUnavailable`] naming what was tried and what to do.
pub fn load_cupti(explicit: Option<&Path>) -> Result<CuptiLibrary, GpuUnavailable> {
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((library, _)) = loaded.as_ref() {
        return match explicit {
            Some(path) if path != library.path => Err(GpuUnavailable(format!(
                "CUPTI is already loaded from {}; this process cannot also load {}",
                library.path.display(),
                path.display()
            ))),
            _ => Ok(library.clone()),
        };
    }
    let env = SearchEnv::from_process();
    let candidates = match explicit {
        Some(path) if !path.is_file() => {
            return Err(GpuUnavailable(format!(
                "--cupti-lib {}: no such file; give the path of libcupti.so (e.g. \
                 .../site-packages/nvidia/cu13/lib/libcupti.so.13)",
                path.display()
            )))
        }
        Some(path) => vec![path.to_path_buf()],
        None => {
            // What the linker gives cudarc needs no preloading and cannot conflict.
            if let Some(resolved) = library_search::linkers("cupti", VERSION_SYMBOL) {
                let found = CuptiLibrary {
                    api_version: api_version(&resolved.library, &resolved.path)?,
                    path: resolved.path,
                };
                *loaded = Some((found.clone(), resolved.library));
                return Ok(found);
            }
            CUPTI.candidates(&env)
        }
    };
    let none = || format!("no libcupti file in {}", CUPTI.folder_list(&env));
    let load = |path: &Path| {
        let library = library_search::open(path)?;
        let api_version = api_version(&library, path).map_err(|e| e.0)?;
        library_search::resolves_to("cupti", VERSION_SYMBOL, &library, path)?;
        Ok((api_version, library))
    };
    let (path, (api_version, library)) = library_search::first_loadable(candidates, none, load)
        .map_err(|tried| {
            GpuUnavailable(format!(
                "CUPTI not found ({tried}); install it (pip install nvidia-cuda-cupti, or the \
                 CUDA toolkit's extras/CUPTI), add its folder to LD_LIBRARY_PATH, or pass \
                 --cupti-lib FILE"
            ))
        })?;
    let found = CuptiLibrary { api_version, path };
    *loaded = Some((found.clone(), library));
    Ok(found)
}

type GetVersion = unsafe extern "C" fn(*mut u32) -> i32;

fn api_version(library: &Library, path: &Path) -> Result<u32, GpuUnavailable> {
    let not_cupti = || {
        GpuUnavailable(format!(
            "{} is not a usable CUPTI (cuptiGetVersion failed)",
            path.display()
        ))
    };
    // SAFETY: cuptiGetVersion(uint32_t*) writes one integer; CUPTI_SUCCESS is 0.
    unsafe {
        let f = library
            .get::<GetVersion>(VERSION_SYMBOL)
            .map_err(|_| not_cupti())?;
        let mut version = 0u32;
        (f(&mut version) == 0)
            .then_some(version)
            .ok_or_else(not_cupti)
    }
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
    fn finds_cupti_in_the_wheels_of_the_python_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        touch(&venv.join("bin/python3"));
        let wheel = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
        touch(&wheel);
        let env = SearchEnv {
            python: PythonEnv {
                path: Some(format!("/nonexistent:{}", venv.join("bin").display())),
                ..PythonEnv::default()
            },
            ..SearchEnv::default()
        };
        assert_eq!(CUPTI.candidates(&env), vec![wheel]);
    }

    #[test]
    fn a_cuda_12_wheel_is_found_in_its_own_folder_and_the_toolkit_comes_last() {
        let dir = tempfile::tempdir().unwrap();
        let conda = dir.path().join("conda");
        let wheel = conda.join("lib/python3.11/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12");
        touch(&wheel);
        let env = SearchEnv {
            python: PythonEnv {
                conda_prefix: Some(conda),
                ..PythonEnv::default()
            },
            ..SearchEnv::default()
        };
        assert_eq!(CUPTI.candidates(&env), vec![wheel]);
        let folders = CUPTI.folders(&env);
        assert_eq!(
            folders.last().unwrap(),
            Path::new("/usr/local/cuda/lib64"),
            "the toolkit's folders come last"
        );
    }

    #[test]
    fn a_python_without_cupti_wheels_adds_folders_but_no_candidates() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("lib/python3.12/site-packages")).unwrap();
        let env = SearchEnv {
            python: PythonEnv {
                virtual_env: Some(dir.path().to_path_buf()),
                ..PythonEnv::default()
            },
            ..SearchEnv::default()
        };
        assert!(CUPTI.folders(&env).contains(
            &dir.path()
                .join("lib/python3.12/site-packages/nvidia/cu13/lib")
        ));
        assert!(CUPTI
            .candidates(&env)
            .iter()
            .all(|c| !c.starts_with(dir.path())));
    }

    #[test]
    fn a_missing_explicit_file_is_a_clear_error() {
        let e = load_cupti(Some(Path::new("/nonexistent/libcupti.so.13"))).unwrap_err();
        assert!(
            e.0.contains("--cupti-lib /nonexistent/libcupti.so.13: no such file"),
            "{e}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_library_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("libcupti.so.13");
        fs::write(&fake, b"not an ELF file").unwrap();
        let e = load_cupti(Some(&fake)).unwrap_err();
        assert!(e.0.contains("CUPTI not found"), "{e}");
        assert!(e.0.contains(&fake.display().to_string()), "{e}");
    }
}
