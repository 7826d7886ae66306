//! `metaprep report`: charts and summary.md beside a run's CSV.

use crate::results::run_dir::RunDir;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
    /// A run directory written by `metaprep sweep` or `metaprep steps`.
    pub(crate) run_dir: PathBuf,
}

pub(crate) fn report(dir: &std::path::Path) -> Result<ExitCode> {
    let run = RunDir::open(dir)?;
    let charts = crate::report::charts::render_all(
        dir,
        &run.rows,
        &run.env,
        &run.telemetry,
        &run.traces
            .iter()
            .map(|(name, json)| (name.as_str(), json.as_str()))
            .collect::<Vec<_>>(),
    )?;
    let summary = crate::report::summary::write_summary(dir, &run.rows, &run.env)?;
    println!(
        "wrote {} and {} chart files under {}",
        summary.display(),
        charts.files.len(),
        dir.join("charts").display()
    );
    for (chart, reason) in &charts.skipped {
        println!("skipped {chart}: {reason}");
    }
    Ok(ExitCode::SUCCESS)
}
