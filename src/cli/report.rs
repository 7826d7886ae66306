//! `metaprep report`: charts and summary.md beside a run's CSV, or in `--out DIR`.

use super::common::usage;
use crate::exit::Exit;
use crate::report::charts::parse_traces;
use crate::report::ReportTarget;
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

/// Bad input (a run that cannot be read, a damaged trace, an --out that cannot take the
/// charts) exits 2 before anything is drawn; the charts and summary then replace the old
/// ones together, or not at all (exit 1). A chart this run has no data for is left as an
/// earlier report drew it.
pub(crate) fn report(args: &ReportArgs) -> Result<ExitCode> {
    let dir = args.run_dir.as_path();
    let out = args.out.as_deref().unwrap_or(dir);
    let checked = (|| {
        let run = RunDir::open(dir)?;
        let traces = parse_traces(
            &run.traces
                .iter()
                .map(|(name, json)| (name.as_str(), json.as_str()))
                .collect::<Vec<_>>(),
        )?;
        super::common::writable_folder(out, "--out")?;
        another_runs_folder(dir, out)?;
        summary_of_its_own(out)?;
        std::fs::create_dir_all(out).with_context(|| format!("making --out {}", out.display()))?;
        Ok((run, traces, ReportTarget::new(out)?))
    })();
    let (run, traces, target) = match usage(checked) {
        Ok(checked) => checked,
        Err(code) => return Ok(code),
    };
    let written = target.write(&run, &traces)?;
    crate::outln!(
        "wrote {} (every block size in {}) and {} chart files under {}",
        written.summary.display(),
        crate::report::summary::TABLES_FILE,
        written.charts.files.len(),
        out.join(crate::report::charts::CHARTS_DIR).display()
    );
    for (chart, reason) in &written.charts.skipped {
        match earlier_chart(out, chart) {
            Some(kept) => crate::outln!("kept {} from an earlier report: {reason}", kept.display()),
            None => crate::outln!("skipped {chart}: {reason}"),
        }
    }
    Ok(Exit::Ok.into())
}

/// Refuses an `--out` that is another run's folder (it holds a results CSV or an env.json):
/// the report would replace that run's own summary and leave its charts beside this run's.
fn another_runs_folder(dir: &Path, out: &Path) -> Result<()> {
    use crate::results::{compressed::run_file, env::ENV_FILE, run_dir::RESULTS_CSV};
    if crate::results::atomic::same_file(dir, out) {
        return Ok(());
    }
    let holds = [run_file(out, RESULTS_CSV), out.join(ENV_FILE)];
    if let Some(file) = holds.iter().find(|f| f.exists()) {
        anyhow::bail!(
            "--out {} is another run's folder (it holds {}): give a new folder, or leave \
             --out out to write the report into {}",
            out.display(),
            file.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Refuses an `--out` (or run folder) whose summary.md or tables.md `report` did not write:
/// replacing it would lose a user's file.
fn summary_of_its_own(out: &Path) -> Result<()> {
    use crate::report::summary::{ENVIRONMENT_LINE, SUMMARY_FILE, TABLES_FILE};
    for name in [SUMMARY_FILE, TABLES_FILE] {
        let path = out.join(name);
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        let ours = String::from_utf8_lossy(&text)
            .lines()
            .any(|l| l.starts_with(ENVIRONMENT_LINE));
        anyhow::ensure!(
            ours,
            "{} is not a summary `metaprep report` wrote (it has no `{}` line): move it, or \
             give --out another folder",
            path.display(),
            ENVIRONMENT_LINE.trim()
        );
    }
    Ok(())
}

/// The PNG an earlier report drew of `chart` in `out`, if it is there.
fn earlier_chart(out: &Path, chart: &str) -> Option<PathBuf> {
    let [png, _svg] = crate::report::charts::chart_files(out, chart);
    Some(png).filter(|p| p.exists())
}
