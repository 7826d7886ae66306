//! The decode-step charts: ITL and throughput against batch size with the interval of each
//! median as the band, each arm's change of them against eager-sync, and graph's throughput
//! change over the what-if host scale. Which step rows each chart takes and how it is titled.

use super::draw::LineChart;
use super::panels::{step_panels, Panel, Point, Series, XAxis};
use crate::report::change::relative_change;
use crate::report::charts::kit;
use crate::report::charts::kit::{layout_order, Rendered};
use crate::report::format::{AFTER_ARM, BASELINE_ARM};
use crate::results::csv::{CellKey, Row, KIND_STEP, STEP_RATIO_VS_EAGER_SYNC};
use crate::results::env::EnvRecord;
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// What the step charts' band shows.
const CI_BAND_NOTE: &str = "line: median per cell; band: its 95% interval";

/// Inter-token latency (`kind=step`, `itl_us`) against batch size.
pub fn itl_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let Some(panels) = step_panels(&with_ci_band(rows, "itl_us"), "itl_us")? else {
        return Ok(skipped("itl_us"));
    };
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "Inter-token latency vs batch size".into(),
        subtitle: format!(
            "decode-step model (kind=step, metric itl_us) — {CI_BAND_NOTE}; {}",
            kit::host_profile_note(env)
        ),
        y_desc: "ITL (µs per token)".into(),
        y_log: false,
        panels,
        env: env.clone(),
    };
    chart.write(dir, "itl")
}

/// Output throughput (`kind=step`, `throughput_tok_s`) against batch size.
pub fn throughput_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let metric = "throughput_tok_s";
    let Some(panels) = step_panels(&with_ci_band(rows, metric), metric)? else {
        return Ok(skipped(metric));
    };
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "Output throughput vs batch size".into(),
        subtitle: format!(
            "decode-step model (kind=step, metric throughput_tok_s) — {CI_BAND_NOTE}; {}",
            kit::host_profile_note(env)
        ),
        y_desc: "output throughput (tok/s)".into(),
        y_log: false,
        panels,
        env: env.clone(),
    };
    chart.write(dir, "throughput")
}

/// The step rows of `metric` with their 95% interval where the band's p10–p90 goes. A row
/// without an interval draws no band.
fn with_ci_band(rows: &[Row], metric: &str) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric)
        .map(|r| Row {
            p10: r.ci_lo,
            p90: r.ci_hi,
            ..r.clone()
        })
        .collect()
}

/// Each arm's change of a step metric against eager-sync (`throughput_tok_s` or `itl_us`),
/// in percent, with the 95% interval of the change as the band: the difference users quote
/// is what the eye sees, not two nearly identical lines. Where the run paired the step time
/// in rounds (`step_ratio_vs_eager_sync`) the change is that ratio's, which ITL follows and
/// throughput follows inversely at equal accepted tokens: two medians' intervals taken apart
/// hold the accept-length spread of each, several times as wide.
pub fn step_change_chart(
    dir: &Path,
    rows: &[Row],
    env: &EnvRecord,
    metric: &str,
) -> Result<Rendered> {
    let base = baselines(rows, metric);
    let paired: HashMap<CellKey, &Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == STEP_RATIO_VS_EAGER_SYNC)
        .map(|r| (r.cell_key(), r))
        .collect();
    let inverse = metric != "itl_us";
    let changes: Vec<Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric && r.arm != BASELINE_ARM)
        .filter_map(|r| {
            let mut row = r.clone();
            row.metric = format!("{metric}_change_pct");
            (row.median, row.p10, row.p90) = match paired.get(&r.cell_key()) {
                Some(ratio) if ratio.ci_lo.is_finite() && ratio.ci_hi.is_finite() => {
                    ratio_change_pct(ratio, inverse)
                }
                _ => change_pct(base_of(&base, r)?, r),
            };
            Some(row)
        })
        .collect();
    let name = format!("{metric}_change_pct");
    let Some(panels) = step_panels(&changes, &name)? else {
        return Ok(skipped(metric));
    };
    let (what, file) = if metric == "itl_us" {
        ("ITL", "itl_change")
    } else {
        ("Throughput", "throughput_change")
    };
    change_chart(
        XAxis::BatchSize,
        format!("{what} change against {BASELINE_ARM}"),
        format!("{metric}: arm / {BASELINE_ARM} − 1, from the paired step time"),
        what,
        panels,
        env,
    )
    .write(dir, file)
}

/// Graph's throughput change against eager-sync over the what-if host scale (`steps
/// --host-scale`): one panel per batch size, one line per layout, the band the change's 95%
/// interval. Where the line leaves zero is where the fix starts to matter.
pub fn host_scale_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let metric = "throughput_tok_s";
    let scales: BTreeSet<u64> = rows
        .iter()
        .filter(|r| r.kind == KIND_STEP)
        .map(|r| r.host_scale().to_bits())
        .collect();
    if scales.len() < 2 {
        return Ok(Rendered::Skipped {
            reason: "no steps run with more than one --host-scale".into(),
        });
    }
    let base = baselines(rows, metric);
    let mut panels: BTreeMap<u32, BTreeMap<(usize, String), Vec<Point>>> = BTreeMap::new();
    for after in rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric && r.arm == AFTER_ARM)
    {
        let scale = after.host_scale();
        let Some(base) = base_of(&base, after) else {
            continue;
        };
        let (pct, lo, hi) = change_pct(base, after);
        if !pct.is_finite() {
            continue;
        }
        panels
            .entry(after.batch_size)
            .or_default()
            .entry(layout_order(&after.layout))
            .or_default()
            .push(Point {
                key: (scale * 1000.0).round() as u32,
                median: pct,
                p10: lo,
                p90: hi,
            });
    }
    if panels.is_empty() {
        return Ok(skipped(metric));
    }
    let panels = panels
        .into_iter()
        .map(|(bs, layouts)| Panel {
            title: format!("bs {bs}"),
            series: layouts
                .into_iter()
                .map(|((_, layout), mut points)| {
                    points.sort_by_key(|p| p.key);
                    Series {
                        arm: layout,
                        points,
                    }
                })
                .collect(),
            floors: Vec::new(),
        })
        .collect();
    change_chart(
        XAxis::HostScaleMilli,
        format!("Where the fix matters: {AFTER_ARM}'s throughput change vs host cost"),
        format!("{AFTER_ARM} / {BASELINE_ARM} − 1 of throughput_tok_s, one line per layout"),
        "Throughput",
        panels,
        env,
    )
    .write(dir, "host_scale")
}

/// A chart of changes against eager-sync in percent, with a 0% line on every panel.
fn change_chart(
    x_axis: XAxis,
    title: String,
    what_is_drawn: String,
    quantity: &str,
    mut panels: Vec<Panel>,
    env: &EnvRecord,
) -> LineChart {
    for panel in &mut panels {
        panel.floors = vec![(format!("{BASELINE_ARM} (0%)"), 0.0)];
    }
    LineChart {
        x_axis,
        title,
        subtitle: format!(
            "{what_is_drawn}; band: 95% interval of the change; {}",
            kit::host_profile_note(env)
        ),
        y_desc: format!("{quantity} change vs {BASELINE_ARM} (%)"),
        y_log: false,
        panels,
        env: env.clone(),
    }
}

/// The eager-sync step rows of `metric`, by cell: what a step change is measured against.
fn baselines<'a>(rows: &'a [Row], metric: &str) -> HashMap<CellKey, &'a Row> {
    rows.iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric && r.arm == BASELINE_ARM)
        .map(|r| (r.cell_key(), r))
        .collect()
}

/// `row`'s baseline: the eager-sync row of its cell.
fn base_of<'a>(baselines: &HashMap<CellKey, &'a Row>, row: &Row) -> Option<&'a Row> {
    let key = row.cell_key().with_arm(BASELINE_ARM);
    baselines.get(&key).copied()
}

/// `new` against `base` in percent, with the change's 95% interval; where either side has
/// no interval the band collapses onto the change.
/// The change a paired step ratio (arm / eager-sync) gives, in percent with its interval:
/// the ratio's own, or its inverse's for a rate (throughput).
fn ratio_change_pct(ratio: &Row, inverse: bool) -> (f64, f64, f64) {
    let pct = |x: f64| (x - 1.0) * 100.0;
    match inverse {
        false => (pct(ratio.median), pct(ratio.ci_lo), pct(ratio.ci_hi)),
        true => (
            pct(1.0 / ratio.median),
            pct(1.0 / ratio.ci_hi),
            pct(1.0 / ratio.ci_lo),
        ),
    }
}

fn change_pct(base: &Row, new: &Row) -> (f64, f64, f64) {
    match relative_change(base, new) {
        Some(c) => (c.pct, c.lo_pct, c.hi_pct),
        None => {
            let pct = (new.median / base.median - 1.0) * 100.0;
            (pct, pct, pct)
        }
    }
}

fn skipped(metric: &str) -> Rendered {
    Rendered::Skipped {
        reason: format!("no kind=step rows with metric {metric}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::results::csv::{KIND_PREP, KIND_STEP};

    use super::*;

    use crate::report::charts::test_row as row;

    #[test]
    fn a_change_is_the_paired_step_ratios_where_the_run_has_one() {
        let mut ratio = row(KIND_STEP, "graph", 1, STEP_RATIO_VS_EAGER_SYNC, 0.9);
        (ratio.ci_lo, ratio.ci_hi) = (0.88, 0.92);
        let (pct, lo, hi) = ratio_change_pct(&ratio, false);
        assert!((pct + 10.0).abs() < 1e-9 && (lo + 12.0).abs() < 1e-9 && (hi + 8.0).abs() < 1e-9);
        // Throughput moves inversely: 1/0.9 − 1 = +11.1%, the bounds swapped.
        let (pct, lo, hi) = ratio_change_pct(&ratio, true);
        assert!((pct - 100.0 / 9.0).abs() < 1e-9, "{pct}");
        assert!(lo < pct && pct < hi && (lo - (1.0 / 0.92 - 1.0) * 100.0).abs() < 1e-9);
    }

    #[test]
    fn the_step_charts_band_is_the_interval_of_the_median_not_the_spread() {
        let mut wide = row(KIND_STEP, "graph", 1, "itl_us", 1000.0);
        (wide.p10, wide.p90, wide.ci_lo, wide.ci_hi) = (700.0, 2500.0, 990.0, 1012.0);
        let rows = with_ci_band(&[wide, row(KIND_PREP, "graph", 1, "itl_us", 5.0)], "itl_us");
        let panels = step_panels(&rows, "itl_us").unwrap().unwrap();
        let point = &panels[0].series[0].points[0];
        assert_eq!(
            (point.p10, point.median, point.p90),
            (990.0, 1000.0, 1012.0)
        );
    }
}
