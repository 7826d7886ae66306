//! PNG and SVG charts of a run: latency and throughput curves, speedup heatmaps, prep cost
//! against the hardware floor, prep bandwidth against the copy ceiling, each read path's cost
//! and the share of graph's gain it recovers, a step timeline from
//! a Chrome trace, with real ranks each rank's wait at the collectives, and NVML telemetry.
//!
//! Every chart is drawn twice through the same generic code, once into an RGB buffer that
//! is encoded as PNG and once into an SVG string, then both are written with
//! [`write_atomic`](crate::results::atomic::write_atomic), so a crash never leaves a
//! half-written chart. Text is rendered with DejaVu Sans embedded in the binary: no fontconfig,
//! no system fonts, identical output on every machine. The SVG keeps text as `<text>` elements, so series names stay searchable.

mod clocks;
mod heatmap;
mod kit;
mod lines;
mod render;
mod stragglers;
mod timeline;

pub use clocks::telemetry_chart;
pub use heatmap::{speedup_chart, speedups, Speedup};
use kit::*;
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

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;

    #[test]
    fn panel_grid_is_near_square_and_has_one_cell_per_panel() {
        let mut buf = vec![0u8; 120 * 80 * 3];
        let root = BitMapBackend::with_buffer(&mut buf, (120, 80)).into_drawing_area();
        for (panels, cols) in [(1, 1), (2, 2), (4, 2), (5, 3), (6, 3), (7, 3)] {
            let cells = panel_grid(&root, panels);
            assert_eq!(cells.len(), panels);
            let distinct_x: std::collections::BTreeSet<i32> =
                cells.iter().map(|c| c.get_base_pixel().0).collect();
            assert_eq!(distinct_x.len(), cols, "{panels} panels");
        }
    }

    #[test]
    fn panels_beyond_the_cap_are_dropped_with_a_note() {
        let mut subtitle = "s".to_string();
        let mut panels: Vec<u32> = (0..20).collect();
        cap_panels(&mut panels, &mut subtitle);
        assert_eq!(panels, (0..12).collect::<Vec<_>>());
        assert!(subtitle.contains("first 12 of 20"), "{subtitle}");
        let mut few = vec![1, 2];
        cap_panels(&mut few, &mut subtitle);
        assert_eq!((few.len(), subtitle.matches("panels").count()), (2, 1));
    }

    #[test]
    fn footer_names_gpu_driver_date_and_version() {
        let env = EnvRecord {
            gpu_name: "NVIDIA H200".into(),
            driver_version: "580.159.03".into(),
            cuda_driver_version: "13.0".into(),
            date: "2026-11-29T10:00:00Z".into(),
            metaprep_version: "9.9.9".into(),
            git_revision: "abc1234".into(),
            ..Default::default()
        };
        let text = footer(&env);
        for part in [
            "NVIDIA H200",
            "580.159.03",
            "2026-11-29T10:00:00Z",
            "9.9.9",
            "abc1234",
        ] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
        let bare = footer(&EnvRecord::default());
        assert!(bare.contains("unknown GPU") && bare.contains(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn short_numbers_fit_a_tick() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(5.0), "5");
        assert_eq!(short_number(3.214), "3.21");
        assert_eq!(short_number(45.44), "45.4");
        assert_eq!(short_number(350.0), "350");
        assert_eq!(short_number(1234.0), "1.2k");
        assert_eq!(short_number(2000.0), "2k");
        assert_eq!(short_number(35_000.0), "35k");
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(trimmed(10.0, 2), "10");
        assert_eq!(trimmed(0.669, 2), "0.67");
    }

    #[test]
    fn no_two_known_series_share_a_colour() {
        let known = [
            "tp1",
            "tp2",
            "tp4",
            "tp8",
            "dep2",
            "dep4",
            "eager-sync",
            "eager-pinned",
            "eager-mapped",
            "eager-device",
            "graph",
            "graph-upload",
            "fused",
        ];
        let colours: std::collections::BTreeSet<(u8, u8, u8)> = known
            .iter()
            .map(|k| {
                let c = arm_colour(k);
                (c.0, c.1, c.2)
            })
            .collect();
        assert_eq!(colours.len(), known.len());
    }

    #[test]
    fn known_orders_put_before_first_and_unknowns_last() {
        let mut arms = vec!["fused", "zeta", "graph", "eager-sync", "eager-device"];
        arms.sort_by_key(|a| arm_order(a));
        assert_eq!(
            arms,
            ["eager-sync", "eager-device", "graph", "fused", "zeta"]
        );
        let mut layouts = vec!["dep4", "tp8", "tp1", "ep9", "tp2"];
        layouts.sort_by_key(|l| layout_order(l));
        assert_eq!(layouts, ["tp1", "tp2", "tp8", "dep4", "ep9"]);
    }
}
