//! Whether a command can write where it is told to, checked before any GPU work so that a run
//! never measures for minutes and then fails to save.

use anyhow::{bail, Result};
use std::path::Path;

/// A folder a command will write into (`flag` names it): an existing one must be a folder
/// this process can write in; a missing one will be created, under its nearest existing
/// ancestor, which must be. Checked before any GPU work, so that a run never measures for
/// minutes and then fails to save.
pub fn writable_folder(dir: &Path, flag: &str) -> Result<()> {
    match name_problem(dir).or_else(|| folder_problem(dir)) {
        Some(problem) => bail!("{flag} {}: {problem}", dir.display()),
        None => Ok(()),
    }
}

/// A file a command will write (`flag` names it): not a folder nor a device, FIFO or socket,
/// and in a folder that [`writable_folder`] accepts.
pub fn writable_file(file: &Path, flag: &str) -> Result<()> {
    let shown = file.display();
    if let Some(problem) = name_problem(file) {
        bail!("{flag} {shown}: {problem}");
    }
    if file.is_dir() {
        bail!(
            "{flag} {shown} is a folder: name a file in it, such as {}",
            file.join("out.json").display()
        );
    }
    if let Some(problem) = super::atomic::not_a_regular_file(file) {
        bail!("{flag} {problem}");
    }
    let folder = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match folder_problem(folder) {
        Some(problem) => bail!("{flag} {shown}: {problem}"),
        None => Ok(()),
    }
}

/// The longest name of a file or folder on Linux's filesystems (NAME_MAX), bytes.
const NAME_MAX: usize = 255;
/// The longest path a system call takes (PATH_MAX), bytes.
const PATH_MAX: usize = 4095;

/// Why `path` is no name a file can have: a part of it or the whole longer than Linux takes
/// (a write would fail only once the work is done).
fn name_problem(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let whole = path.as_os_str().len();
    if whole > PATH_MAX {
        return Some(format!(
            "the path is {whole} bytes, over the {PATH_MAX} a path may have"
        ));
    }
    let long = path
        .components()
        .map(|c| c.as_os_str())
        .find(|c| c.len() > NAME_MAX)?;
    let shown: String = String::from_utf8_lossy(long.as_bytes())
        .chars()
        .take(40)
        .collect();
    Some(format!(
        "the name `{shown}…` is {} bytes, over the {NAME_MAX} a file or folder name may have",
        long.len()
    ))
}

/// Why `dir` cannot be written in or made: it is a file, an ancestor is, or the nearest
/// existing one refuses a new file (permissions, a read-only mount, ACLs and quotas all
/// answer that one way: by making and removing a file there).
fn folder_problem(dir: &Path) -> Option<String> {
    // A relative path's last ancestor is "", which never exists: the working folder then.
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        return Some(if existing == dir {
            format!(
                "{} is a file, not a folder: name a folder (or a new path)",
                dir.display()
            )
        } else {
            format!(
                "{} is a file, so no folder can be made under it: name another path",
                existing.display()
            )
        });
    }
    let probe = existing.join(format!(".metaprep-write-test.{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e) => Some(format!(
            "cannot write in {} ({e}): choose a folder you can write to",
            existing.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_folders_and_files_must_be_writable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "x").unwrap();
        let why = |r: Result<()>| format!("{:#}", r.unwrap_err());
        assert!(why(writable_folder(&file, "--out")).contains("afile is a file, not a folder"));
        assert!(why(writable_folder(&file.join("a/b"), "--out"))
            .contains("afile is a file, so no folder can be made under it"));
        assert!(why(writable_file(&file.join("t.json"), "--trace")).starts_with("--trace "));
        assert!(why(writable_file(dir.path(), "--trace")).contains("is a folder: name a file"));
        // sysfs takes no new file, even from root.
        assert!(
            why(writable_folder(Path::new("/sys/metaprep/run"), "--out"))
                .contains("cannot write in /sys")
        );
        writable_folder(&dir.path().join("new/run"), "--out").unwrap();
        writable_file(&dir.path().join("t.json"), "--trace").unwrap();
        assert!(!dir.path().join("new").exists(), "a check creates nothing");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no probe left"
        );
    }
}
