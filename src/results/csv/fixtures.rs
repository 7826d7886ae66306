//! Files the results CSV's tests read back: a few rows of each kind written out, a file of
//! any text, and the error reading one gives.

use super::test_rows::row;
use super::*;
use std::path::Path;

/// Two prep rows of one cell and a throttled floor row with quotes in its clock-event reasons
/// (the one free-text column the check does not hold to a vocabulary).
pub(super) fn sample_rows() -> Vec<Row> {
    let mut floor = row("floor", "floor", "empty-kernel", 1, "step_us", 4.5);
    floor.throttled = true;
    floor.clock_event_reasons = "0x0000000000000004, with \"quotes\"".into(); // must survive CSV quoting
    vec![
        row("prep", "dspark_draft_block", "graph", 4, "step_us", 21.25),
        row(
            "prep",
            "dspark_draft_block",
            "graph",
            4,
            "floor_multiple",
            4.72,
        ),
        floor,
    ]
}

/// `text` as `metaprep.csv` in `dir`.
pub(super) fn write_file(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("metaprep.csv");
    std::fs::write(&path, text).unwrap();
    path
}

/// The error reading `path` gives, with its causes.
pub(super) fn error_of(path: &Path) -> String {
    format!("{:#}", read_rows(path).unwrap_err())
}

/// [`sample_rows`] as a results CSV.
pub(super) fn good_text() -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metaprep.csv");
    write_rows(&path, &sample_rows()).unwrap();
    std::fs::read_to_string(path).unwrap()
}
