//! Python `site-packages` folders, found without running Python. NVIDIA's pip wheels (the
//! `nvidia/...` packages a PyTorch venv installs) put NVRTC, CUPTI and NCCL there, where the
//! dynamic linker does not look; the NVRTC, CUPTI and NCCL loaders search the same folders,
//! in this order.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The environment the search reads, passed in so tests can give their own.
#[derive(Debug, Clone, Default)]
pub struct PythonEnv {
    pub virtual_env: Option<PathBuf>,
    pub conda_prefix: Option<PathBuf>,
    /// `PATH`: the prefix above each folder holding `python3` is searched.
    pub path: Option<String>,
    /// `HOME`: the user's `~/.local` prefix (`pip install --user`).
    pub home: Option<PathBuf>,
    /// The system's prefixes (`/usr/local`, `/usr` in [`PythonEnv::from_process`]).
    pub system_prefixes: Vec<PathBuf>,
}

impl PythonEnv {
    pub fn from_process() -> PythonEnv {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        PythonEnv {
            virtual_env: var("VIRTUAL_ENV").map(PathBuf::from),
            conda_prefix: var("CONDA_PREFIX").map(PathBuf::from),
            path: var("PATH").and_then(|p| p.into_string().ok()),
            home: var("HOME").map(PathBuf::from),
            system_prefixes: ["/usr/local", "/usr"].map(PathBuf::from).to_vec(),
        }
    }

    /// Existing `lib*/python3*/{site,dist}-packages` folders, best first: the active venv's,
    /// the conda env's, those of every `python3` on `PATH` (in `PATH` order), the user's,
    /// then the system's; each prefix's versions sorted, none twice.
    pub fn site_packages(&self) -> Vec<PathBuf> {
        let mut prefixes: Vec<PathBuf> = [&self.virtual_env, &self.conda_prefix]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        prefixes.extend(
            split_paths(self.path.as_deref())
                .into_iter()
                .filter(|bin| bin.join("python3").is_file())
                .filter_map(|bin| bin.parent().map(Path::to_path_buf)),
        );
        prefixes.extend(self.home.as_ref().map(|h| h.join(".local")));
        prefixes.extend(self.system_prefixes.iter().cloned());
        let mut found = Vec::new();
        for prefix in prefixes {
            for version in python_dirs(&prefix) {
                for leaf in ["site-packages", "dist-packages"] {
                    let dir = version.join(leaf);
                    if dir.is_dir() && !found.contains(&dir) {
                        found.push(dir);
                    }
                }
            }
        }
        found
    }
}

/// The folders of a `:`-separated list such as `PATH` or `LD_LIBRARY_PATH`, empty ones left out.
pub fn split_paths(list: Option<&str>) -> Vec<PathBuf> {
    list.map(|l| {
        std::env::split_paths(OsStr::new(l))
            .filter(|p| !p.as_os_str().is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// `PREFIX/{lib,lib64}/python3*` folders, sorted within each.
fn python_dirs(prefix: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        found.extend(dirs);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn site(prefix: &Path, rest: &str) -> PathBuf {
        let dir = prefix.join(rest);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn venv_conda_path_user_then_system_each_once() {
        let root = tempfile::tempdir().unwrap();
        let p = |name: &str| root.path().join(name);
        let venv = site(&p("venv"), "lib/python3.12/site-packages");
        let conda = site(&p("conda"), "lib/python3.11/site-packages");
        // Two Pythons on PATH, the first also the active venv's.
        fs::create_dir_all(p("venv/bin")).unwrap();
        fs::write(p("venv/bin/python3"), "").unwrap();
        fs::create_dir_all(p("other/bin")).unwrap();
        fs::write(p("other/bin/python3"), "").unwrap();
        let other = site(&p("other"), "lib64/python3.10/site-packages");
        let user = site(&p("home/.local"), "lib/python3.12/site-packages");
        let system_dist = site(&p("usr"), "lib/python3/dist-packages");
        let system_site = site(&p("usr"), "lib/python3.13/site-packages");
        let env = PythonEnv {
            virtual_env: Some(p("venv")),
            conda_prefix: Some(p("conda")),
            path: Some(format!(
                "/nonexistent::{}:{}",
                p("venv/bin").display(),
                p("other/bin").display()
            )),
            home: Some(p("home")),
            system_prefixes: vec![p("usr")],
        };
        assert_eq!(
            env.site_packages(),
            [venv, conda, other, user, system_dist, system_site]
        );
    }

    #[test]
    fn nothing_set_finds_nothing_and_empty_list_entries_are_skipped() {
        assert!(PythonEnv::default().site_packages().is_empty());
        assert_eq!(
            split_paths(Some("/a::/b")),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(split_paths(None).is_empty());
    }
}
