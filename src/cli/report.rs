//! `metaprep report`: charts and summary.md beside a run's CSV, or in `--out DIR`.

use crate::results::run_dir::RunDir;
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
    /// A run directory written by `metaprep sweep` or `metaprep steps` (its CSVs and traces
    /// may be gzipped: `metaprep.csv.gz`, `telemetry.csv.gz`, `trace.json.gz`).
    pub(crate) run_dir: PathBuf,
    /// Where summary.md and charts/ go (made if missing); default: the run directory. A chart
    /// this run has no data for is never deleted: one an earlier report drew stays.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

pub(crate) fn report(args: &ReportArgs) -> Result<ExitCode> {
    let dir = args.run_dir.as_path();
    let out = args.out.as_deref().unwrap_or(dir);
    let run = RunDir::open(dir)?;
    std::fs::create_dir_all(out).with_context(|| format!("making --out {}", out.display()))?;
    let charts = crate::report::charts::render_all(
        out,
        &run.rows,
        &run.env,
        &run.telemetry,
        &run.traces
            .iter()
            .map(|(name, json)| (name.as_str(), json.as_str()))
            .collect::<Vec<_>>(),
    )?;
    let summary = crate::report::summary::write_summary(out, &run.rows, &run.env)?;
    println!(
        "wrote {} and {} chart files under {}",
        summary.display(),
        charts.files.len(),
        out.join("charts").display()
    );
    for (chart, reason) in &charts.skipped {
        match earlier_chart(out, chart) {
            Some(kept) => println!("kept {} from an earlier report: {reason}", kept.display()),
            None => println!("skipped {chart}: {reason}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The PNG an earlier report drew of `chart` in `out`, if it is there.
fn earlier_chart(out: &Path, chart: &str) -> Option<PathBuf> {
    Some(out.join("charts").join(format!("{chart}.png"))).filter(|p| p.exists())
}
