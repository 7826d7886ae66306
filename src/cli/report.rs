//! `metaprep report`: charts and summary.md beside a run's CSV.

use super::common::usage;
use crate::report::charts::parse_traces;
use crate::report::ReportTarget;
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

/// Bad input (a run that cannot be read, a damaged trace, a run folder that cannot take the
/// charts) exits 2 before anything is drawn; the charts and summary then replace the old
/// ones together, or not at all (exit 1).
pub(crate) fn report(dir: &std::path::Path) -> Result<ExitCode> {
    let checked = (|| {
        let run = RunDir::open(dir)?;
        let traces = parse_traces(
            &run.traces
                .iter()
                .map(|(name, json)| (name.as_str(), json.as_str()))
                .collect::<Vec<_>>(),
        )?;
        Ok((run, traces, ReportTarget::new(dir)?))
    })();
    let (run, traces, target) = match usage(checked) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    let written = target.write(&run, &traces)?;
    println!(
        "wrote {} and {} chart files under {}",
        written.summary.display(),
        written.charts.files.len(),
        dir.join(crate::report::charts::CHARTS_DIR).display()
    );
    for (chart, reason) in &written.charts.skipped {
        println!("skipped {chart}: {reason}");
    }
    Ok(ExitCode::SUCCESS)
}
