//! Writing a results CSV (or any table of records) atomically: the whole file or none of it.

use super::row::{Row, COLUMNS};
use crate::results::atomic::write_atomic;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// Writes `rows` as a results CSV, replacing `path` atomically: a crash or a failed write
/// leaves the previous file as it was. The header is written even with no rows.
pub fn write_rows(path: &Path, rows: &[Row]) -> Result<()> {
    write_records(path, COLUMNS, rows, |row| {
        format!("cell {} for {}", row.cell_key(), path.display())
    })
}

/// Writes `header` and each record serialised after it, atomically (the whole file or none
/// of it); `what` names a record that fails to serialise.
pub fn write_records<T: Serialize>(
    path: &Path,
    header: &[&str],
    records: impl IntoIterator<Item = T>,
    what: impl Fn(&T) -> String,
) -> Result<()> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    writer.write_record(header)?;
    for record in records {
        writer
            .serialize(&record)
            .with_context(|| format!("serialising {}", what(&record)))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("buffering {}: {}", path.display(), e.error()))?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::fixtures::sample_rows;

    use crate::results::csv::*;

    #[test]
    fn no_rows_still_writes_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim_end(),
            COLUMNS.join(",")
        );
        assert!(read_rows(&path).unwrap().is_empty());
    }

    #[test]
    fn failed_write_leaves_the_old_file_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metaprep.csv");
        write_rows(&path, &sample_rows()).unwrap();
        // Block write_atomic's temporary file with a directory of the same name, so the
        // write fails even for root (permission tricks do not).
        let tmp = dir
            .path()
            .join(format!(".metaprep.csv.tmp{}", std::process::id()));
        std::fs::create_dir(&tmp).unwrap();
        assert!(write_rows(&path, &sample_rows()[..1]).is_err());
        assert_eq!(read_rows(&path).unwrap(), sample_rows());
    }
}
