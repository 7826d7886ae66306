//! The folder a command that writes a folder of its own (`ab`, `gaps`) makes: checked before
//! any work, written whole or not at all.

use super::common::writable_folder;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// `--out` of a command that writes a folder of its own: one that does not exist yet or is
/// empty, and can be written.
pub(crate) fn empty_out(out: &Path) -> Result<()> {
    if let Ok(mut entries) = std::fs::read_dir(out) {
        if entries.next().is_some() {
            bail!(
                "--out {}: not empty; this command writes a folder of its own (choose a new one)",
                out.display()
            );
        }
        return Ok(());
    }
    if out.exists() {
        bail!("--out {}: not a folder", out.display());
    }
    // A new folder: one the nearest folder above it lets this process make.
    writable_folder(out, "--out")
}

/// `files` written into a staging folder beside `out`, then moved into place together: a
/// failure leaves no half-written folder (and no parent folder this call made).
pub(crate) fn write_run_folder(out: &Path, label: &str, files: &[(&str, &[u8])]) -> Result<()> {
    use crate::results::atomic::{NewFolder, Staging};
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let made = NewFolder::create(parent)?;
    let written = (|| {
        let staging = Staging::new(parent, label, "--out")?;
        let built = staging.path().join("run");
        std::fs::create_dir(&built)?;
        for (name, bytes) in files {
            std::fs::write(built.join(name), bytes).with_context(|| format!("writing {name}"))?;
        }
        if out.exists() {
            std::fs::remove_dir(out)
                .with_context(|| format!("--out {}: not empty any more", out.display()))?;
        }
        staging.commit(&[(built, out.to_path_buf())])
    })();
    if written.is_err() {
        made.discard();
    }
    written
}
