//! Every committed run whose CSV the archive keeps regenerates its committed `summary.md`
//! and charts byte for byte through `metaprep report` (issue 26: a refactor changes no
//! output; a change that does on purpose regenerates the archive's files with it).

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The run folders under `results/` holding a `summary.md` and the CSV it came from.
fn committed_runs(dir: &Path, runs: &mut Vec<PathBuf>) {
    let has = |name: &str| dir.join(name).is_file();
    if has("summary.md") && (has("metaprep.csv") || has("metaprep.csv.gz")) {
        runs.push(dir.to_path_buf());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for sub in entries {
        committed_runs(&sub, runs);
    }
}

#[test]
fn committed_runs_regenerate_their_summary_and_charts_byte_for_byte() {
    let mut runs = Vec::new();
    committed_runs(&Path::new(ROOT).join("results"), &mut runs);
    assert!(runs.len() >= 10, "only {} committed runs found", runs.len());
    let scratch = tempfile::tempdir().unwrap();
    let mut charts = 0;
    let mut differ = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let out = scratch.path().join(i.to_string());
        let o = Command::new(env!("CARGO_BIN_EXE_metaprep"))
            .arg("report")
            .arg(run)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "report {}: {}",
            run.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let same = |committed: &Path, made: &Path| {
            std::fs::read(committed).unwrap() == std::fs::read(made).unwrap_or_default()
        };
        if !same(&run.join("summary.md"), &out.join("summary.md")) {
            differ.push(run.join("summary.md").display().to_string());
        }
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        let Ok(entries) = std::fs::read_dir(run.join("charts")) else {
            continue;
        };
        for chart in entries.map(|e| e.unwrap().path()) {
            let made = out.join("charts").join(chart.file_name().unwrap());
            if made.is_file() {
                charts += 1;
                if !same(&chart, &made) {
                    differ.push(chart.display().to_string());
                }
            } else {
                // Not drawn again only where report says why (a timeline whose trace the
                // archive does not keep), never silently.
                let name = chart.file_stem().unwrap().to_string_lossy();
                if !said.contains(&format!("skipped {name}:")) {
                    differ.push(format!("{} (not drawn, no reason given)", chart.display()));
                }
            }
        }
    }
    assert!(differ.is_empty(), "regenerated differently: {differ:#?}");
    assert!(
        charts >= 10,
        "only {charts} committed charts were drawn again"
    );
}
