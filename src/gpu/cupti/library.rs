//! Finding and loading `libcupti` at run time, before cudarc's first CUPTI call.
//!
//! cudarc's CUPTI loader asks the dynamic linker for `libcupti.so`, `libcupti.so.13`, ... by
//! name and panics when none loads. GPU hosts often have CUPTI only inside a PyTorch venv
//! (`site-packages/nvidia/cu13/lib` or `nvidia/cuda_cupti/lib`) or under
//! `/usr/local/cuda/extras/CUPTI/lib64`, where the linker does not look. So we search those
//! folders (or take `--cupti-lib`), load the file we found and keep it loaded: the linker then
//! answers cudarc's request for its soname with that same library. When the linker already
//! resolves one of cudarc's names (a toolkit in the loader's path), that one is used as it is.
//! Before any CUPTI call from a file we loaded we check that cudarc's first name does resolve
//! to it, so two CUPTIs never mix.

use crate::gpu::probe::GpuUnavailable;
use crate::gpu::python_site::{split_paths, PythonEnv};
use libloading::Library;
use std::ffi::c_void;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// File names tried in every folder, newest CUPTI first.
const FILE_NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

/// Folders under a Python `site-packages` where NVIDIA's wheels put CUPTI (CUDA 13 wheels
/// share `nvidia/cu13/lib`; CUDA 12 wheels have one folder per component).
const WHEEL_DIRS: [&str; 3] = [
    "nvidia/cu13/lib",
    "nvidia/cuda_cupti/lib",
    "nvidia/cu12/lib",
];

/// Where the CUDA toolkit installs CUPTI.
const TOOLKIT_DIRS: [&str; 2] = [
    "/usr/local/cuda/extras/CUPTI/lib64",
    "/usr/local/cuda/lib64",
];

/// The process environment the search reads, passed in so tests can give their own.
#[derive(Debug, Clone, Default)]
pub struct SearchEnv {
    pub ld_library_path: Option<String>,
    /// Where Python's site-packages are (the wheels' CUPTI lives there).
    pub python: PythonEnv,
}

impl SearchEnv {
    pub fn from_process() -> SearchEnv {
        SearchEnv {
            ld_library_path: std::env::var("LD_LIBRARY_PATH")
                .ok()
                .filter(|v| !v.is_empty()),
            python: PythonEnv::from_process(),
        }
    }

    /// The folders searched, in order: `LD_LIBRARY_PATH`, the wheels in every site-packages
    /// [`PythonEnv::site_packages`] finds, then the toolkit's.
    pub fn folders(&self) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = split_paths(self.ld_library_path.as_deref());
        for site in self.python.site_packages() {
            folders.extend(WHEEL_DIRS.iter().map(|d| site.join(d)));
        }
        folders.extend(TOOLKIT_DIRS.iter().map(PathBuf::from));
        let mut seen = std::collections::HashSet::new();
        folders.retain(|f| seen.insert(f.clone()));
        folders
    }

    /// Every CUPTI file that exists in [`SearchEnv::folders`], in search order.
    pub fn candidates(&self) -> Vec<PathBuf> {
        self.folders()
            .iter()
            .flat_map(|folder| FILE_NAMES.iter().map(move |name| folder.join(name)))
            .filter(|file| file.is_file())
            .collect()
    }
}

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
            if let Some((found, library)) = linkers_cupti()? {
                *loaded = Some((found.clone(), library));
                return Ok(found);
            }
            env.candidates()
        }
    };
    let mut failures = Vec::new();
    for path in candidates {
        // SAFETY: loading CUPTI runs only its initialisers, which touch no state of ours.
        match unsafe { Library::new(&path) } {
            Ok(library) => {
                let found = CuptiLibrary {
                    api_version: api_version(&library, &path)?,
                    path,
                };
                same_as_cudarcs(&library, &found.path)?;
                *loaded = Some((found.clone(), library));
                return Ok(found);
            }
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    let tried = if failures.is_empty() {
        format!(
            "no libcupti file in {}",
            env.folders()
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        failures.join("; ")
    };
    Err(GpuUnavailable(format!(
        "CUPTI not found ({tried}); install it (pip install nvidia-cuda-cupti, or the CUDA \
         toolkit's extras/CUPTI), add its folder to LD_LIBRARY_PATH, or pass --cupti-lib FILE"
    )))
}

type GetVersion = unsafe extern "C" fn(*mut u32) -> i32;

fn get_version_symbol(library: &Library) -> Option<*const c_void> {
    // SAFETY: the symbol is looked up, not called.
    unsafe { library.get::<GetVersion>(b"cuptiGetVersion\0") }
        .ok()
        .map(|f| *f as *const c_void)
}

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
            .get::<GetVersion>(b"cuptiGetVersion\0")
            .map_err(|_| not_cupti())?;
        let mut version = 0u32;
        (f(&mut version) == 0)
            .then_some(version)
            .ok_or_else(not_cupti)
    }
}

/// The CUPTI the dynamic linker resolves for the first name cudarc asks for, if any, with the
/// file it came from.
fn linkers_cupti() -> Result<Option<(CuptiLibrary, Library)>, GpuUnavailable> {
    for name in cudarc::get_lib_name_candidates("cupti") {
        // SAFETY: as in load_cupti; CUPTI's initialisers only.
        let Ok(library) = (unsafe { Library::new(&name) }) else {
            continue;
        };
        let path = get_version_symbol(&library)
            .and_then(file_of)
            .unwrap_or_else(|| PathBuf::from(&name));
        let found = CuptiLibrary {
            api_version: api_version(&library, &path)?,
            path,
        };
        return Ok(Some((found, library)));
    }
    Ok(None)
}

/// The file a loaded symbol lives in (`dladdr`).
fn file_of(symbol: *const c_void) -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the address and fills `info`; dli_fname, when set, points to
    // a NUL-terminated string the loader owns for as long as the library stays loaded.
    unsafe {
        if libc::dladdr(symbol, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(info.dli_fname);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
    }
}

/// Checks that the first name cudarc will ask the dynamic linker for resolves to `ours`.
fn same_as_cudarcs(ours: &Library, path: &Path) -> Result<(), GpuUnavailable> {
    let ours = get_version_symbol(ours);
    for name in cudarc::get_lib_name_candidates("cupti") {
        // SAFETY: as in load_cupti; CUPTI's initialisers only.
        let Ok(theirs) = (unsafe { Library::new(&name) }) else {
            continue;
        };
        return if get_version_symbol(&theirs) == ours {
            Ok(())
        } else {
            Err(GpuUnavailable(format!(
                "two CUPTI libraries: cudarc would load `{name}` from the linker's path, not {}; \
                 remove the other from LD_LIBRARY_PATH or pass it as --cupti-lib",
                path.display()
            )))
        };
    }
    Err(GpuUnavailable(format!(
        "{} has a soname cudarc does not ask for (it tries libcupti.so, libcupti.so.13, \
         libcupti.so.12, ...); add a libcupti.so link to it in its folder and put that folder on \
         LD_LIBRARY_PATH",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(env.candidates(), vec![wheel]);
    }

    #[test]
    fn ld_library_path_comes_before_wheels_and_newer_names_first() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        touch(&own.join("libcupti.so"));
        touch(&own.join("libcupti.so.12"));
        let conda = dir.path().join("conda");
        let wheel = conda.join("lib/python3.11/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12");
        touch(&wheel);
        let env = SearchEnv {
            ld_library_path: Some(own.display().to_string()),
            python: PythonEnv {
                conda_prefix: Some(conda),
                ..PythonEnv::default()
            },
        };
        assert_eq!(
            env.candidates(),
            vec![own.join("libcupti.so.12"), own.join("libcupti.so"), wheel]
        );
    }

    #[test]
    fn folders_end_with_the_toolkit_and_hold_no_duplicates() {
        let env = SearchEnv {
            ld_library_path: Some(format!("{0}:{0}", TOOLKIT_DIRS[0])),
            ..SearchEnv::default()
        };
        let folders = env.folders();
        assert_eq!(
            folders,
            vec![
                PathBuf::from(TOOLKIT_DIRS[0]),
                PathBuf::from(TOOLKIT_DIRS[1])
            ]
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
        assert!(env.folders().contains(
            &dir.path()
                .join("lib/python3.12/site-packages/nvidia/cu13/lib")
        ));
        assert!(env.candidates().iter().all(|c| !c.starts_with(dir.path())));
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
