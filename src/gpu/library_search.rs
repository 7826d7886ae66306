//! Finding a CUDA library file where the dynamic linker does not look, and loading it by path
//! so that cudarc's later request for it by name gets that same file.
//!
//! cudarc's loaders ask the linker for names (`libnvrtc.so.13`, `libcupti.so.12`, ...) and
//! panic when none loads. GPU hosts often have these libraries only inside a PyTorch venv
//! (`site-packages/nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`, ...) or a toolkit folder the
//! linker is not told about. A file loaded by path and kept loaded answers a later request for
//! its soname (glibc matches a requested name against the sonames of loaded objects), so
//! loading it first is enough; [`resolves_to`] checks that cudarc's name does land on it, so
//! two copies of one library never mix.

use crate::gpu::python_site::{split_paths, PythonEnv};
use libloading::Library;
use std::ffi::c_void;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a library file named on purpose (`source`: `--cupti-lib`, `--nccl-lib`,
/// `METAPREP_NCCL`) cannot be the library: it is no file. Checked before any GPU work, where
/// it is bad input, and again where the library loads.
pub fn named_file_problem(source: &str, path: &Path, library: &str) -> Option<String> {
    (!path.is_file()).then(|| {
        format!(
            "{source} {} is not a file: give the path of {library}",
            path.display()
        )
    })
}

/// The process environment a search reads, passed in so tests can give their own.
#[derive(Debug, Clone, Default)]
pub struct SearchEnv {
    pub ld_library_path: Option<String>,
    /// Where Python's site-packages are (NVIDIA's wheels put the libraries there).
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
}

/// Where one library is looked for: its file names (newest first), the folders under a
/// site-packages where NVIDIA's wheels put it, and the CUDA toolkit's folders.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySearch {
    pub file_names: &'static [&'static str],
    pub wheel_dirs: &'static [&'static str],
    pub toolkit_dirs: &'static [&'static str],
}

impl LibrarySearch {
    /// The folders searched, in order: `LD_LIBRARY_PATH`, the wheels in every site-packages
    /// [`PythonEnv::site_packages`] finds, then the toolkit's; none twice.
    pub fn folders(&self, env: &SearchEnv) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = split_paths(env.ld_library_path.as_deref());
        for site in env.python.site_packages() {
            folders.extend(self.wheel_dirs.iter().map(|d| site.join(d)));
        }
        folders.extend(self.toolkit_dirs.iter().map(PathBuf::from));
        let mut seen = std::collections::HashSet::new();
        folders.retain(|f| seen.insert(f.clone()));
        folders
    }

    /// Every file of [`LibrarySearch::file_names`] that exists in the folders, in search order.
    pub fn candidates(&self, env: &SearchEnv) -> Vec<PathBuf> {
        self.folders(env)
            .iter()
            .flat_map(|folder| self.file_names.iter().map(move |name| folder.join(name)))
            .filter(|file| file.is_file())
            .collect()
    }

    /// The folders as one list for an error message.
    pub fn folder_list(&self, env: &SearchEnv) -> String {
        self.folders(env)
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A library the linker resolves for one of cudarc's names.
pub struct Resolved {
    /// The name cudarc asks for that loaded (`libnvrtc.so.13`).
    pub name: String,
    /// The file it came from, where the loader says (else the name itself).
    pub path: PathBuf,
    pub library: Library,
}

/// The first of cudarc's names for `lib_name` (`"nvrtc"`, `"cupti"`, `"cuda"`) that the
/// dynamic linker loads, and the file holding its `symbol` (NUL-terminated); `None` when no
/// name loads.
pub fn linkers(lib_name: &str, symbol: &[u8]) -> Option<Resolved> {
    cudarc::get_lib_name_candidates(lib_name)
        .into_iter()
        .find_map(|name| {
            // SAFETY: loading a CUDA library runs only its initialisers, which touch no state of
            // ours; no symbol is called here.
            let library = unsafe { Library::new(&name) }.ok()?;
            let path = symbol_file(&library, symbol).unwrap_or_else(|| PathBuf::from(&name));
            Some(Resolved {
                name,
                path,
                library,
            })
        })
}

/// The first of `candidates` that `load` accepts, with its path; else what was tried for an
/// error message: each candidate's failure, or `none()` when there was no candidate.
pub fn first_loadable<T>(
    candidates: Vec<PathBuf>,
    none: impl FnOnce() -> String,
    mut load: impl FnMut(&Path) -> Result<T, String>,
) -> Result<(PathBuf, T), String> {
    let mut failures = Vec::new();
    for path in candidates {
        match load(&path) {
            Ok(loaded) => return Ok((path, loaded)),
            Err(e) => failures.push(e),
        }
    }
    Err(match failures.is_empty() {
        true => none(),
        false => failures.join("; "),
    })
}

/// Opens `path` (a library file) by its absolute path.
pub fn open(path: &Path) -> Result<Library, String> {
    // SAFETY: as in `linkers`: the library's initialisers only.
    unsafe { Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether cudarc's first name for `lib_name` that loads is `ours` (compared by the address
/// of `symbol` in each): `Err` names what it got instead.
pub fn resolves_to(
    lib_name: &str,
    symbol: &[u8],
    ours: &Library,
    path: &Path,
) -> Result<(), String> {
    let ours = symbol_address(ours, symbol);
    match linkers(lib_name, symbol) {
        Some(theirs) if symbol_address(&theirs.library, symbol) == ours => Ok(()),
        Some(theirs) => Err(format!(
            "two copies of lib{lib_name}: cudarc would load `{}` ({}) from the linker's path, \
             not {}; remove the other from LD_LIBRARY_PATH",
            theirs.name,
            theirs.path.display(),
            path.display()
        )),
        None => Err(format!(
            "{} has a soname cudarc does not ask for (it tries {}); add a link named one of \
             those to it in its folder and put that folder on LD_LIBRARY_PATH",
            path.display(),
            cudarc::get_lib_name_candidates(lib_name)
                .into_iter()
                .filter(|n| n.contains(".so"))
                .take(3)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn symbol_address(library: &Library, symbol: &[u8]) -> Option<*const c_void> {
    // SAFETY: the symbol is looked up, never called; the type is only a pointer.
    unsafe { library.get::<*const c_void>(symbol) }
        .ok()
        .map(|s| *s)
}

/// The file `library` was loaded from, found through its `symbol` (`dladdr`).
pub fn symbol_file(library: &Library, symbol: &[u8]) -> Option<PathBuf> {
    let address = symbol_address(library, symbol)?;
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the address and fills `info`; dli_fname, when set, points to
    // a NUL-terminated string the loader owns for as long as the library stays loaded.
    unsafe {
        if libc::dladdr(address, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(info.dli_fname);
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const TEST_LIB: LibrarySearch = LibrarySearch {
        file_names: &["libx.so.13", "libx.so.12", "libx.so"],
        wheel_dirs: &["nvidia/cu13/lib", "nvidia/x/lib"],
        toolkit_dirs: &["/usr/local/cuda/lib64"],
    };

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"").unwrap();
    }

    #[test]
    fn ld_library_path_then_wheels_then_the_toolkit_newer_names_first() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        touch(&own.join("libx.so"));
        touch(&own.join("libx.so.12"));
        let conda = dir.path().join("conda");
        let wheel = conda.join("lib/python3.11/site-packages/nvidia/x/lib/libx.so.12");
        touch(&wheel);
        let env = SearchEnv {
            ld_library_path: Some(own.display().to_string()),
            python: PythonEnv {
                conda_prefix: Some(conda),
                ..PythonEnv::default()
            },
        };
        assert_eq!(
            TEST_LIB.candidates(&env),
            vec![own.join("libx.so.12"), own.join("libx.so"), wheel]
        );
        let folders = TEST_LIB.folders(&env);
        assert_eq!(folders.last().unwrap(), Path::new("/usr/local/cuda/lib64"));
        assert!(TEST_LIB.folder_list(&env).contains("nvidia/cu13/lib"));
    }

    #[test]
    fn folders_hold_no_duplicates() {
        let env = SearchEnv {
            ld_library_path: Some("/usr/local/cuda/lib64:/usr/local/cuda/lib64".into()),
            ..SearchEnv::default()
        };
        assert_eq!(
            TEST_LIB.folders(&env),
            [PathBuf::from("/usr/local/cuda/lib64")]
        );
    }

    #[test]
    fn a_file_that_is_not_a_library_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("libx.so.13");
        fs::write(&fake, b"not an ELF file").unwrap();
        let error = open(&fake).err().unwrap();
        assert!(error.starts_with(&fake.display().to_string()), "{error}");
    }

    #[test]
    fn the_c_library_is_found_through_a_symbol() {
        // libc is loaded in every test process: the loader names its file.
        let libc = open(Path::new("libc.so.6")).unwrap();
        let file = symbol_file(&libc, b"malloc\0").unwrap();
        assert!(
            file.to_string_lossy().contains("libc"),
            "{}",
            file.display()
        );
    }
}
