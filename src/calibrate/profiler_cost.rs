//! The profiler's own cost in any window of a trace, fitted from the probe file beside it
//! (as `calibrate` takes it off): what `gaps` subtracts from a step.

use super::analysis::Analysis;
use super::probe::{fit, probe_path, EventCosts, FitRow, ProbeFile};
use super::trace::{Span, Trace};
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};

/// A trace's events and what each kind cost the host while the profiler recorded.
pub struct ProfilerCost<'t> {
    analysis: Analysis<'t>,
    costs: EventCosts,
    /// The probe file the costs were fitted from.
    pub probe_file: PathBuf,
    /// Each probe workload's line of the fit: how well one cost per kind of event explains
    /// the probes.
    pub fit_rows: Vec<FitRow>,
}

impl ProfilerCost<'_> {
    /// What the events recorded inside `span` on the trace's main thread cost the host, µs.
    pub fn in_span(&self, span: Span) -> f64 {
        self.costs.of(self.analysis.events_in(span))
    }

    /// What each kind of recorded event was fitted to cost, µs.
    pub fn costs(&self) -> EventCosts {
        self.costs
    }
}

/// The profiler's costs from the probe file beside `path` (`x.json` → `x.probe.json`), fitted
/// on the probes `trace` holds; `None` where there is no such file.
pub fn beside<'t>(
    file: &'t str,
    path: &Path,
    trace: &'t Trace,
) -> Result<Option<ProfilerCost<'t>>> {
    let probe_file = probe_path(path);
    if !probe_file.exists() {
        return Ok(None);
    }
    let probe = ProbeFile::read(&probe_file)?;
    let analysis = Analysis::of_events(file, trace)?;
    let fitted = fit(&probe, &analysis.probe_counts(&probe)).map_err(|e| {
        anyhow!(
            "{}: the probes in {file} do not fit: {e:#}",
            probe_file.display()
        )
    })?;
    Ok(Some(ProfilerCost {
        analysis,
        costs: fitted.costs,
        probe_file,
        fit_rows: fitted.rows,
    }))
}
