//! PNG and SVG charts of a run: latency and throughput curves, speedup heatmaps, prep cost
//! against the hardware floor, prep bandwidth against the copy ceiling, each read path's cost
//! and the share of graph's gain it recovers, a step timeline from
//! a Chrome trace, with real ranks each rank's wait at the collectives, and NVML telemetry.
//!
//! Every chart is drawn twice through the same generic code, once into an RGB buffer that
//! is encoded as PNG and once into an SVG string, then both are written with
//! [`write_atomic`](crate::results::atomic::write_atomic), so a crash never leaves a
//! half-written chart. Text is rendered with DejaVu Sans embedded in the binary: no fontconfig,
//! no system fonts, identical output on every machine. The SVG keeps text as `<text>`
//! elements, so series names stay searchable.

mod clocks;
mod heatmap;
mod kit;
mod lines;
mod render;
mod stragglers;
mod timeline;

pub use clocks::telemetry_chart;
pub use heatmap::{speedup_chart, speedups, Speedup};
pub(crate) use kit::{categorical, font, Chart, Drawn, CATEGORIES, GREY, LIGHT_GREY};
pub use kit::{chart_files, Rendered, CHARTS_DIR, PANEL_CHART_SIZE, WIDE_CHART_SIZE};
pub use lines::{
    bandwidth_chart, host_scale_chart, itl_chart, prep_floor_chart, read_cost_chart,
    read_recovery_chart, step_change_chart, throughput_chart,
};
pub(crate) use render::render;
pub use stragglers::{waits, RankWaits};
pub use timeline::{parse_trace, timeline_chart, Lane, Span, Trace};

use crate::results::csv::{Row, KIND_PREP, KIND_STEP};
use crate::results::env::EnvRecord;
use crate::results::telemetry::TelemetrySample;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What [`render_parsed`] wrote and what it left out, so the caller can tell the user why a
/// chart is missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChartSet {
    /// Every file written, PNG and SVG.
    pub files: Vec<PathBuf>,
    /// `(chart name, reason)` for each chart without data.
    pub skipped: Vec<(String, String)>,
}

/// Every chart `report` draws, by file name (without `.png`/`.svg`), in drawing order.
pub const CHARTS: [&str; 14] = [
    "itl_change",
    "throughput_change",
    "itl",
    "throughput",
    "host_scale",
    "speedup_prep",
    "speedup_step",
    "prep_floor",
    "bandwidth",
    "read_cost",
    "read_recovery",
    "telemetry",
    "timeline",
    "stragglers",
];

/// Parses `(file name, JSON)` traces for [`render_parsed`]; an error names the file.
pub fn parse_traces(traces: &[(&str, &str)]) -> Result<Vec<Trace>> {
    traces
        .iter()
        .map(|(name, json)| {
            let mut trace =
                parse_trace(json).with_context(|| format!("reading the trace {name}"))?;
            trace.title.get_or_insert_with(|| name.to_string());
            Ok(trace)
        })
        .collect()
}

/// Parses `traces` ([`parse_traces`], so a malformed trace fails before any file is written)
/// and renders every chart ([`render_parsed`]).
pub fn render_all(
    dir: &Path,
    rows: &[Row],
    env: &EnvRecord,
    telemetry: &[TelemetrySample],
    traces: &[(&str, &str)],
) -> Result<ChartSet> {
    render_parsed(dir, rows, env, telemetry, &parse_traces(traces)?)
}

/// Renders every chart whose data exists into `<dir>/charts/<name>.{png,svg}`, the timeline
/// from `traces` stacked in order. Charts without data are listed as skipped, and nothing is
/// removed: `report` builds its charts in a staging folder and replaces the run's (a skipped
/// chart's old files among them) only once all of them are drawn.
pub fn render_parsed(
    dir: &Path,
    rows: &[Row],
    env: &EnvRecord,
    telemetry: &[TelemetrySample],
    traces: &[Trace],
) -> Result<ChartSet> {
    // The changes against eager-sync first (what a reader quotes), then the medians; in
    // CHARTS' order.
    let outcomes = [
        step_change_chart(dir, rows, env, "itl_us")?,
        step_change_chart(dir, rows, env, "throughput_tok_s")?,
        itl_chart(dir, rows, env)?,
        throughput_chart(dir, rows, env)?,
        host_scale_chart(dir, rows, env)?,
        speedup_chart(dir, rows, env, KIND_PREP)?,
        speedup_chart(dir, rows, env, KIND_STEP)?,
        prep_floor_chart(dir, rows, env)?,
        bandwidth_chart(dir, rows, env)?,
        read_cost_chart(dir, rows, env)?,
        read_recovery_chart(dir, rows, env)?,
        telemetry_chart(dir, telemetry, env)?,
        if traces.is_empty() {
            Rendered::Skipped {
                reason: "no Chrome trace given".into(),
            }
        } else {
            timeline::render(dir, traces, env)?
        },
        stragglers::render(dir, traces, env)?,
    ];
    let mut set = ChartSet::default();
    for (name, outcome) in CHARTS.into_iter().zip(outcomes) {
        match outcome {
            Rendered::Files { png, svg } => {
                // CHARTS names the outcomes by position: a chart out of place would have
                // the next one's skips reported under its name.
                anyhow::ensure!(
                    png.file_stem() == Some(std::ffi::OsStr::new(name)),
                    "chart `{name}` is out of place in CHARTS: its slot drew {}",
                    png.display()
                );
                set.files.extend([png, svg])
            }
            // An earlier report's file of a chart without data this time stays: a run whose
            // telemetry or trace went missing must not lose the chart drawn from it.
            Rendered::Skipped { reason } => set.skipped.push((name.to_string(), reason)),
        }
    }
    Ok(set)
}

/// A plausible row for unit tests; callers adjust the fields they test.
#[cfg(test)]
fn test_row(kind: &str, arm: &str, bs: u32, metric: &str, median: f64) -> Row {
    let mut row = crate::results::csv::test_rows::row(kind, "dsa_decode", arm, bs, metric, median);
    row.block_size = 4;
    // The chart tests read these spreads back.
    (row.p10, row.p90) = (median * 0.9, median * 1.1);
    (row.ci_lo, row.ci_hi) = (median * 0.95, median * 1.05);
    row
}
