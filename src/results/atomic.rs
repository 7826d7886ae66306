//! Results files are written to a temporary file beside the target and renamed over it, so
//! an interrupted run never leaves a half-written file.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why `path` cannot be written by renaming a file over it, if it exists and is no regular
/// file (following links): a device (`/dev/stdout`, `/dev/null`), a FIFO or a socket, which the
/// rename would replace and a reader of it would block on.
pub fn not_a_regular_file(path: &Path) -> Option<String> {
    let kind = std::fs::metadata(path).ok()?.file_type();
    (!kind.is_file() && !kind.is_dir()).then(|| {
        format!(
            "{} is a device, FIFO or socket, not a regular file: metaprep writes a temporary \
             file and renames it into place; name a regular file",
            path.display()
        )
    })
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes).map_err(Into::into))
}

/// The same, the contents written by `write` into the temporary file (through a buffer), so a
/// large file need not be held in memory whole first.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Some(problem) = not_a_regular_file(path) {
        anyhow::bail!("writing {problem}");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .context("results path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut file)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// A folder a command makes, with every missing folder above it, so that a command that
/// fails can leave the filesystem as it found it ([`NewFolder::discard`]).
#[derive(Debug)]
pub struct NewFolder {
    /// The topmost folder this made (`None`: the folder was there already).
    made: Option<PathBuf>,
}

impl NewFolder {
    /// Makes `dir` and its missing parents.
    pub fn create(dir: &Path) -> Result<NewFolder> {
        let made = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && a.symlink_metadata().is_err())
            .last()
            .map(Path::to_path_buf);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(NewFolder { made })
    }

    /// Removes every folder this made, with whatever is in it now.
    pub fn discard(self) {
        if let Some(top) = self.made {
            let _ = std::fs::remove_dir_all(top);
        }
    }
}

/// Outputs of several files or folders built in a staging folder and moved into place
/// together by [`Staging::commit`], so that a failure anywhere leaves every target as it was:
/// `report`'s charts and summary, a `check --dump` folder. The staging folder sits beside the
/// targets (renames do not cross filesystems) and goes when this is dropped, with whatever a
/// failed or finished commit left in it.
pub struct Staging {
    root: PathBuf,
}

impl Staging {
    /// A new staging folder `<folder>/.<label>.tmp<pid>`; an error names `folder` (the place
    /// that is not writable) and `flag`, the option that named it.
    pub fn new(folder: &Path, label: &str, flag: &str) -> Result<Staging> {
        let root = folder.join(format!(".{label}.tmp{}", std::process::id()));
        if root.exists() {
            std::fs::remove_dir_all(&root)
                .with_context(|| format!("removing the leftover {}", root.display()))?;
        }
        std::fs::create_dir(&root).map_err(|e| {
            anyhow::anyhow!(
                "{flag} {}: cannot write there ({e}): choose a folder you can write to",
                folder.display()
            )
        })?;
        Ok(Staging { root })
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Moves each `(built, target)`: an existing target is moved aside first, a missing
    /// parent folder of a target is created. On any failure every step already taken is
    /// undone, so the targets are left whole.
    pub fn commit(self, moves: &[(PathBuf, PathBuf)]) -> Result<()> {
        let aside = self.root.join(".replaced");
        std::fs::create_dir(&aside).with_context(|| format!("creating {}", aside.display()))?;
        let mut undo: Vec<Undo> = Vec::new();
        let set_aside = |target: &Path, undo: &mut Vec<Undo>| -> Result<()> {
            if target.symlink_metadata().is_ok() {
                let place = aside.join(undo.len().to_string());
                rename(target, &place)?;
                undo.push(Undo::Rename(place, target.to_path_buf()));
            }
            Ok(())
        };
        let done = (|| -> Result<()> {
            for (built, target) in moves {
                if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                    if !parent.exists() {
                        std::fs::create_dir(parent)
                            .with_context(|| format!("creating {}", parent.display()))?;
                        undo.push(Undo::RemoveDir(parent.to_path_buf()));
                    }
                }
                set_aside(target, &mut undo)?;
                rename(built, target)?;
                undo.push(Undo::Rename(target.clone(), built.clone()));
            }
            Ok(())
        })();
        if let Err(e) = done {
            for step in undo.iter().rev() {
                let undone = match step {
                    Undo::Rename(from, to) => std::fs::rename(from, to),
                    Undo::RemoveDir(dir) => std::fs::remove_dir(dir),
                };
                if let Err(u) = undone {
                    eprintln!("metaprep: undoing a move: {step:?}: {u}");
                }
            }
            return Err(e.context("nothing was replaced"));
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            eprintln!(
                "metaprep: could not remove the staging folder {}: {e}",
                self.root.display()
            );
        }
    }
}

/// One step of a commit, as it is undone.
#[derive(Debug)]
enum Undo {
    Rename(PathBuf, PathBuf),
    RemoveDir(PathBuf),
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("moving {} to {}", from.display(), to.display()))
}

/// Whether two paths name one file: the same device and inode, so a hard link, a symbolic
/// link or another spelling of a path (`./t.json`, an absolute path) counts. `false` when
/// either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discarded_new_folder_takes_the_parents_it_made_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let there = root.path().join("there");
        std::fs::create_dir(&there).unwrap();
        std::fs::write(there.join("keep.txt"), "a user's").unwrap();
        let deep = there.join("a/b/c");
        let made = NewFolder::create(&deep).unwrap();
        std::fs::write(deep.join("half.json"), "{").unwrap();
        made.discard();
        assert!(!there.join("a").exists());
        assert_eq!(
            std::fs::read_to_string(there.join("keep.txt")).unwrap(),
            "a user's"
        );
        // A folder that was there stays, with what it held.
        NewFolder::create(&there).unwrap().discard();
        assert!(there.join("keep.txt").exists());
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn a_commit_replaces_and_moves_then_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        write(&run.join("summary.md"), "old summary");
        std::fs::create_dir(run.join("charts")).unwrap();
        write(&run.join("charts/stale.png"), "stale");
        let staging = Staging::new(run, "report", "RUN").unwrap();
        let root = staging.path().to_path_buf();
        write(&root.join("summary.md"), "new summary");
        write(&root.join("itl.png"), "new chart");
        staging
            .commit(&[
                (root.join("summary.md"), run.join("summary.md")),
                (root.join("itl.png"), run.join("charts/itl.png")),
            ])
            .unwrap();
        assert_eq!(read(&run.join("summary.md")), "new summary");
        assert_eq!(read(&run.join("charts/itl.png")), "new chart");
        // A file no move targets stays (a chart without data this time keeps its old one).
        assert_eq!(read(&run.join("charts/stale.png")), "stale");
        assert!(!root.exists(), "the staging folder goes");
    }

    #[test]
    fn a_failed_commit_puts_every_target_back() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path();
        write(&run.join("summary.md"), "old summary");
        write(&run.join("stale.png"), "stale");
        write(&run.join("a-file"), "in the way");
        let staging = Staging::new(run, "report", "RUN").unwrap();
        let root = staging.path().to_path_buf();
        write(&root.join("summary.md"), "new summary");
        write(&root.join("chart.png"), "new chart");
        std::fs::create_dir(root.join("charts")).unwrap();
        let error = staging
            .commit(&[
                (root.join("summary.md"), run.join("summary.md")),
                (root.join("new-folder/x"), run.join("new-folder/x")),
                (root.join("chart.png"), run.join("a-file/chart.png")),
            ])
            .unwrap_err();
        assert!(
            format!("{error:#}").contains("nothing was replaced"),
            "{error:#}"
        );
        assert_eq!(read(&run.join("summary.md")), "old summary");
        assert_eq!(read(&run.join("stale.png")), "stale");
        assert_eq!(read(&run.join("a-file")), "in the way");
        assert!(!run.join("new-folder").exists());
        assert!(!root.exists());
    }

    #[test]
    fn staging_in_a_folder_that_is_a_file_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        write(&file, "x");
        let error = Staging::new(&file, "dump", "--dump")
            .err()
            .expect("a file holds no folder");
        let text = format!("{error:#}");
        assert!(
            text.starts_with("--dump ") && text.contains("afile: cannot write there"),
            "{text}"
        );
    }

    #[test]
    fn same_file_sees_hard_links_and_other_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("t.json");
        write(&a, "{}");
        let link = dir.path().join("link.json");
        std::fs::hard_link(&a, &link).unwrap();
        let spelled = dir.path().join(".").join("t.json");
        assert!(same_file(&a, &link) && same_file(&a, &spelled));
        let other = dir.path().join("other.json");
        write(&other, "{}");
        assert!(!same_file(&a, &other));
        assert!(!same_file(&a, &dir.path().join("missing")));
    }
}
