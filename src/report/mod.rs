//! What a finished run shows: the markdown summary, the charts, run comparison (`compare`),
//! speed targets and formatters, read from `results` only. Nothing here needs a GPU.

pub mod change;
pub mod charts;
pub mod compare;
pub mod format;
pub mod gpm;
pub mod summary;
pub mod targets;

use crate::results::atomic::Staging;
use crate::results::run_dir::RunDir;
use anyhow::{bail, Result};
use charts::{chart_files, ChartSet, Trace, CHARTS, CHARTS_DIR};
use std::path::{Path, PathBuf};

/// A run directory `report` is about to write into, checked, with a staging folder made in
/// it: every problem found here is the user's to fix (a file where `charts/` goes, a folder
/// where a chart goes, a folder it cannot write), found before anything is drawn.
pub struct ReportTarget {
    dir: PathBuf,
    staging: Staging,
}

/// What [`ReportTarget::write`] put in place.
pub struct Written {
    pub summary: PathBuf,
    pub charts: ChartSet,
}

impl ReportTarget {
    pub fn new(dir: &Path) -> Result<ReportTarget> {
        let charts = dir.join(CHARTS_DIR);
        if charts.symlink_metadata().is_ok() && !charts.is_dir() {
            bail!(
                "{} is not a folder: report writes its charts into {CHARTS_DIR}/ there; move \
                 the file away",
                charts.display()
            );
        }
        let summary = dir.join(summary::SUMMARY_FILE);
        let tables = dir.join(summary::TABLES_FILE);
        let outputs = CHARTS
            .iter()
            .flat_map(|name| chart_files(dir, name))
            .chain([summary, tables]);
        for path in outputs {
            if path.is_dir() {
                bail!(
                    "{} is a folder where report writes a file: move it away",
                    path.display()
                );
            }
        }
        Ok(ReportTarget {
            dir: dir.to_path_buf(),
            staging: Staging::new(dir, "report", "report")?,
        })
    }

    /// Draws every chart and the summary into the staging folder, then moves them into the
    /// run directory together; the old files of charts that have no data this time stay.
    /// Any failure leaves the run's charts and summary as they were.
    pub fn write(self, run: &RunDir, traces: &[Trace]) -> Result<Written> {
        let staged = self.staging.path().to_path_buf();
        let mut set = charts::render_parsed(&staged, &run.rows, &run.env, &run.telemetry, traces)?;
        let [staged_summary, staged_tables] = summary::write_summary(&staged, &run.rows, &run.env)?;
        let in_run = |built: &Path| self.dir.join(built.strip_prefix(&staged).unwrap_or(built));
        let chart_moves = set.files.iter().map(|f| (f.clone(), in_run(f)));
        let summary = in_run(&staged_summary);
        let tables = in_run(&staged_tables);
        let moves: Vec<(PathBuf, PathBuf)> = chart_moves
            .chain([(staged_summary, summary.clone()), (staged_tables, tables)])
            .collect();
        // A chart without data this time is left as an earlier report drew it: report
        // never deletes a chart it cannot redraw (it says it kept it).
        self.staging.commit(&moves)?;
        set.files = set.files.iter().map(|f| in_run(f)).collect();
        Ok(Written {
            summary,
            charts: set,
        })
    }
}
