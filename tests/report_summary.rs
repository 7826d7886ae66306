//! The summary of the fixture run: its tables must show the fixture's numbers.

use metaprep::report::run_dir::RunDir;
use metaprep::report::summary::{render_summary, write_summary};
use std::path::Path;

fn fixture() -> RunDir {
    RunDir::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run_small")).unwrap()
}

#[test]
fn print_it() {
    let run = fixture();
    std::fs::write("/tmp/summary.md", render_summary(&run.rows, &run.env)).unwrap();
    let _ = write_summary;
}
