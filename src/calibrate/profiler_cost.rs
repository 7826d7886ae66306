//! The profiler's own cost in any window of a trace, fitted from the probe file beside it
//! (as `calibrate` takes it off): what `gaps` subtracts from a step.

use super::analysis::Analysis;
use super::probe::{fit, probe_path, EventCosts, ProbeFile};
use super::trace::{Span, Trace};
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One probe workload's overhead under the profiler, µs a repetition: as timed and as the
/// fitted per-event costs give it (how well one cost per kind of event explains the probes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResidual {
    pub workload: String,
    pub overhead_us: f64,
    pub fitted_us: f64,
}

impl ProbeResidual {
    /// fitted − measured, in percent of measured; `None` where the profiled timing came out no
    /// slower than the bare one (no overhead to be a share of).
    pub fn miss_pct(&self) -> Option<f64> {
        (self.overhead_us > 0.0).then(|| 100.0 * (self.fitted_us / self.overhead_us - 1.0))
    }
}

/// A trace's events and what each kind cost the host while the profiler recorded.
pub struct ProfilerCost<'t> {
    analysis: Analysis<'t>,
    costs: EventCosts,
    /// The probe file the costs were fitted from.
    pub probe_file: PathBuf,
    /// Each probe workload's overhead, measured and fitted.
    pub residuals: Vec<ProbeResidual>,
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
    let residuals = (fitted.rows.iter())
        .map(|r| ProbeResidual {
            workload: r.workload.clone(),
            overhead_us: r.overhead_us,
            fitted_us: r.fitted_us,
        })
        .collect();
    Ok(Some(ProfilerCost {
        analysis,
        costs: fitted.costs,
        probe_file,
        residuals,
    }))
}
