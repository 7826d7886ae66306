//! A parent's validated config handed to its workers as a file (`rank-worker --settings`,
//! `sweep-worker --settings`), in place of its command line to parse and validate again:
//! written whole as JSON, atomically, and read back as written (serde_json's
//! `float_roundtrip`); a missing or malformed file is a [`BadInput`] naming it.

use super::atomic::write_atomic;
use crate::exit::BadInput;
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// A config a worker runs from, as its parent validated it.
pub trait ConfigFile: Serialize + DeserializeOwned {
    /// The command it configures, as its messages name it (`steps`, `sweep`).
    const COMMAND: &'static str;

    /// Writes this config whole to `path` as JSON, atomically.
    fn write_json(&self, path: &Path) -> Result<()> {
        let mut json = serde_json::to_string_pretty(self)
            .with_context(|| format!("serialising the {} config", Self::COMMAND))?;
        json.push('\n');
        write_atomic(path, json.as_bytes())
    }

    /// Reads a config [`ConfigFile::write_json`] wrote. A missing or malformed file is a
    /// [`BadInput`] naming it.
    fn read_json(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            BadInput(format!(
                "reading the {} settings {}: {e}",
                Self::COMMAND,
                path.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| {
            BadInput(format!(
                "{}: not a {} config that this metaprep writes ({e})",
                path.display(),
                Self::COMMAND
            ))
            .into()
        })
    }
}
