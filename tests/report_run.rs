//! `metaprep report` on a run folder as the committed archive keeps one: gzipped CSVs and
//! traces read as the plain files, `--out` elsewhere, charts it cannot redraw left in place.

use flate2::{write::GzEncoder, Compression};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/run_small"
    ))
}

fn report(args: &[&Path]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_metaprep"))
        .arg("report")
        .args(args)
        .output()
        .expect("running metaprep report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn gzip_into(from: &Path, to: &Path) {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&std::fs::read(from).unwrap()).unwrap();
    std::fs::write(to, gz.finish().unwrap()).unwrap();
}

#[test]
fn a_run_with_only_gzipped_files_draws_every_chart_its_data_gives() {
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(fixture().join("env.json"), run.path().join("env.json")).unwrap();
    for name in ["metaprep.csv", "telemetry.csv", "trace.json"] {
        gzip_into(
            &fixture().join(name),
            &run.path().join(format!("{name}.gz")),
        );
    }
    let out = report(&[run.path()]);
    let charts = run.path().join("charts");
    for chart in ["telemetry", "timeline", "itl_change", "speedup_prep"] {
        assert!(
            charts.join(format!("{chart}.png")).exists(),
            "{chart}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let svg = std::fs::read_to_string(charts.join("telemetry.svg")).unwrap();
    assert!(svg.contains("SM clock (MHz)"), "the samples were read");
    assert!(run.path().join("summary.md").exists());
}

#[test]
fn out_puts_the_report_elsewhere_and_a_chart_without_data_is_kept() {
    let run = tempfile::tempdir().unwrap();
    for name in ["env.json", "metaprep.csv", "telemetry.csv"] {
        std::fs::copy(fixture().join(name), run.path().join(name)).unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("report");
    report(&[run.path(), Path::new("--out"), &target]);
    assert!(target.join("summary.md").exists());
    assert!(target.join("charts/telemetry.png").exists());
    assert!(!run.path().join("summary.md").exists() && !run.path().join("charts").exists());

    // The telemetry goes missing: the chart drawn from it stays, and report says so.
    std::fs::remove_file(run.path().join("telemetry.csv")).unwrap();
    let again = report(&[run.path(), Path::new("--out"), &target]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(target.join("charts/telemetry.png").exists());
    assert!(
        stdout.contains("telemetry.png from an earlier report: no telemetry samples"),
        "{stdout}"
    );
}
