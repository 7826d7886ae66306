//! Where `libnccl.so.2` is looked for. cudarc's loader dlopens bare names (`libnccl.so`,
//! `libnccl.so.<cuda major>`, `.12`, ..., `.1`: never `.so.2`, NCCL's real soname), and
//! LD_LIBRARY_PATH is read by the dynamic linker only when a process starts; so metaprep
//! finds the file itself and opens it by absolute path.

use crate::gpu::python_site::{split_paths, PythonEnv};
use std::path::{Path, PathBuf};

/// The file every NCCL 2.x install has (pip wheels ship only this name).
pub const NCCL_SONAME: &str = "libnccl.so.2";
/// The environment variable naming the library file (as `--nccl-lib` does).
pub const NCCL_ENV: &str = "METAPREP_NCCL";

/// One place searched, in order, and what it gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    /// How the place is named in an error (`--nccl-lib`, `LD_LIBRARY_PATH`, ...).
    pub source: &'static str,
    pub path: PathBuf,
}

impl Place {
    /// Named on purpose (`--nccl-lib`, `METAPREP_NCCL`) rather than found by the search.
    pub fn is_named(&self) -> bool {
        self.source == "--nccl-lib" || self.source == NCCL_ENV
    }
}

/// The places to search for NCCL, best first: an explicit file (flag, then env), each
/// LD_LIBRARY_PATH folder, Python site-packages' `nvidia/nccl/lib` (the NVIDIA pip wheels
/// PyTorch installs; [`PythonEnv::site_packages`]), then the system's library folders.
pub fn places(
    explicit: Option<&Path>,
    env: Option<&Path>,
    ld_library_path: Option<&str>,
    site_packages: &[PathBuf],
) -> Vec<Place> {
    let mut out = Vec::new();
    if let Some(p) = explicit {
        out.push(Place {
            source: "--nccl-lib",
            path: p.to_path_buf(),
        });
    }
    if let Some(p) = env {
        out.push(Place {
            source: NCCL_ENV,
            path: p.to_path_buf(),
        });
    }
    let in_dir = |source, dir: &Path| Place {
        source,
        path: dir.join(NCCL_SONAME),
    };
    for dir in split_paths(ld_library_path) {
        out.push(in_dir("LD_LIBRARY_PATH", &dir));
    }
    for sp in site_packages {
        out.push(in_dir("python site-packages", &sp.join("nvidia/nccl/lib")));
    }
    for dir in system_dirs() {
        out.push(in_dir("system", Path::new(dir)));
    }
    out
}

/// The system library folders NCCL's packages (apt `libnccl2`, CUDA toolkits) install into.
fn system_dirs() -> &'static [&'static str] {
    if cfg!(target_arch = "aarch64") {
        &[
            "/usr/lib/aarch64-linux-gnu",
            "/usr/local/cuda/lib64",
            "/usr/lib64",
        ]
    } else {
        &[
            "/usr/lib/x86_64-linux-gnu",
            "/usr/local/cuda/lib64",
            "/usr/lib64",
        ]
    }
}

/// The library named on purpose in this process's environment, if any: `explicit`
/// (`--nccl-lib`), else `$METAPREP_NCCL`; the first of [`places_here`] when it is named.
pub fn named_place(explicit: Option<&Path>) -> Option<Place> {
    let env = std::env::var_os(NCCL_ENV).map(PathBuf::from);
    let first = places(explicit, env.as_deref(), None, &[])
        .into_iter()
        .next();
    first.filter(Place::is_named)
}

/// The places of this process's environment (`--nccl-lib` given as `explicit`).
pub fn places_here(explicit: Option<&Path>) -> Vec<Place> {
    let env = std::env::var_os(NCCL_ENV).map(PathBuf::from);
    let ld = std::env::var("LD_LIBRARY_PATH").ok();
    let sites = PythonEnv::from_process().site_packages();
    places(explicit, env.as_deref(), ld.as_deref(), &sites)
}

/// The last resort, run only when no other place has NCCL: where the `python3` on PATH
/// imports `nvidia.nccl` from (a pyenv shim or a conda Python hides its site-packages from
/// the folders above). `None` without such a Python or package.
pub fn place_from_python() -> Option<Place> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import nvidia.nccl as n; print(list(n.__path__)[0])"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dir = String::from_utf8(out.stdout).ok()?;
    Some(Place {
        source: "python3 (import nvidia.nccl)",
        path: Path::new(dir.trim()).join("lib").join(NCCL_SONAME),
    })
}

/// The one-line error for no usable NCCL: every place searched, grouped by source.
pub fn not_found(places: &[Place], failures: &[String]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for p in places {
        let shown = p.path.display().to_string();
        match groups.iter_mut().find(|(s, _)| *s == p.source) {
            Some((_, list)) => list.push(shown),
            None => groups.push((p.source, vec![shown])),
        }
    }
    let searched: Vec<String> = groups
        .iter()
        .map(|(s, l)| format!("{s}: {}", l.join(", ")))
        .collect();
    let failed = if failures.is_empty() {
        String::new()
    } else {
        format!("; found but not loadable: {}", failures.join("; "))
    };
    format!(
        "NCCL ({NCCL_SONAME}) not found; searched {}{failed}. Install NCCL (pip install \
         nvidia-nccl-cu13, or the libnccl2 package) or pass --nccl-lib PATH / set {NCCL_ENV}",
        searched.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_then_env_then_ld_path_then_python_then_system() {
        let p = places(
            Some(Path::new("/x/libnccl.so.2")),
            Some(Path::new("/env/libnccl.so.2")),
            Some("/a::/b"),
            &[PathBuf::from("/venv/lib/python3.12/site-packages")],
        );
        let paths: Vec<String> = p.iter().map(|p| p.path.display().to_string()).collect();
        assert_eq!(paths[0], "/x/libnccl.so.2");
        assert_eq!(paths[1], "/env/libnccl.so.2");
        assert_eq!(paths[2], "/a/libnccl.so.2");
        assert_eq!(paths[3], "/b/libnccl.so.2", "empty entries skipped");
        assert_eq!(
            paths[4],
            "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
        );
        assert!(paths[5..]
            .iter()
            .any(|p| p == "/usr/local/cuda/lib64/libnccl.so.2"));
        assert_eq!(p[4].source, "python site-packages");
    }

    #[test]
    fn the_error_names_every_place_in_one_line() {
        let p = places(None, None, Some("/a:/b"), &[]);
        let e = not_found(&p, &["/b/libnccl.so.2: bad ELF".into()]);
        assert!(!e.contains('\n'), "{e}");
        assert!(
            e.contains("LD_LIBRARY_PATH: /a/libnccl.so.2, /b/libnccl.so.2"),
            "{e}"
        );
        assert!(e.contains("system: "), "{e}");
        assert!(e.contains("bad ELF"), "{e}");
        assert!(e.contains("--nccl-lib") && e.contains(NCCL_ENV), "{e}");
    }
}
