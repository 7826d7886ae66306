//! Curves against batch size: one panel per layout (or family), one line per arm, a shaded
//! band around each median (its 95% interval for a step's ITL and throughput, whose p10–p90
//! is the accept-length spread and would hide the lines; p10–p90 for a prep's cost), and
//! optional horizontal floor lines. Bands are drawn under every line, and lines that lie on
//! each other stay visible: each arm has its own marker, and earlier arms are drawn wider.

use super::{
    arm_colour, arm_order, cap_panels, check_batch, frame, layout_order, panel_grid, short_number,
    Chart, Drawn, FixedTicks, Rendered, LIGHT_GREY, PANEL_CHART_SIZE,
};
use crate::report::change::relative_change;
use crate::report::format::{copy_ceiling, AFTER_ARM, BASELINE_ARM};
use crate::report::read_paths::{recovered_rows, RECOVERED};
use crate::results::csv::{names_another_drafter, CellKey, Row, KIND_FLOOR, KIND_PREP, KIND_STEP};
use crate::results::env::EnvRecord;
use crate::stats::summary::quantile;
use anyhow::{bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// The floor items drawn as horizontal lines on the prep chart.
const FLOOR_ITEMS: [&str; 3] = ["empty-kernel", "empty-graph", "d2h-int"];
/// The floor's reads, drawn on the read-cost chart: idle, and behind running work.
const READ_FLOOR_ITEMS: [&str; 2] = ["d2h-int", "d2h-int-busy"];
const BAND_NOTE: &str = "line: median per cell; shaded band: p10–p90";
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
            super::host_profile_note(env)
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
            super::host_profile_note(env)
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
/// is what the eye sees, not two nearly identical lines.
pub fn step_change_chart(
    dir: &Path,
    rows: &[Row],
    env: &EnvRecord,
    metric: &str,
) -> Result<Rendered> {
    let base = baselines(rows, metric);
    let changes: Vec<Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric && r.arm != BASELINE_ARM)
        .filter_map(|r| {
            let mut row = r.clone();
            row.metric = format!("{metric}_change_pct");
            (row.median, row.p10, row.p90) = change_pct(base_of(&base, r)?, r);
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
        format!("decode-step model, {metric}: arm / {BASELINE_ARM} − 1 per cell"),
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
            super::host_profile_note(env)
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
    let key = CellKey {
        arm: BASELINE_ARM.to_string(),
        ..row.cell_key()
    };
    baselines.get(&key).copied()
}

/// `new` against `base` in percent, with the change's 95% interval; where either side has
/// no interval the band collapses onto the change.
fn change_pct(base: &Row, new: &Row) -> (f64, f64, f64) {
    match relative_change(base, new) {
        Some(c) => (c.pct, c.lo_pct, c.hi_pct),
        None => {
            let pct = (new.median / base.median - 1.0) * 100.0;
            (pct, pct, pct)
        }
    }
}

/// Prep cost per arm (`kind=prep`, `step_us`) against batch size, one panel per family,
/// with the floor items (`kind=floor`, `step_us`) as horizontal lines.
pub fn prep_floor_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let prep: Vec<&Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_PREP && r.metric == "step_us")
        .collect();
    if prep.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "no kind=prep rows with metric step_us".into(),
        });
    }
    let panels = family_panels(prep, &floor_levels(rows, &FLOOR_ITEMS))?;
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "Prep cost per arm vs the hardware floor".into(),
        subtitle: format!(
            "kind=prep, metric step_us, middle block size per family; dashed: floor (kind=floor step_us) — {BAND_NOTE}"
        ),
        y_desc: "prep time per step (µs, log scale)".into(),
        y_log: true,
        panels,
        env: env.clone(),
    };
    chart.write(dir, "prep_floor")
}

/// Each arm's achieved bandwidth (`kind=prep`, `gb_s`) as a share of the run's copy ceiling
/// (the `d2d-copy` floor item's `gb_s`) against batch size, one panel per family.
pub fn bandwidth_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let Some(ceiling) = copy_ceiling(rows) else {
        return Ok(Rendered::Skipped {
            reason: "no kind=floor d2d-copy row with metric gb_s (the copy ceiling)".into(),
        });
    };
    let shares = ceiling_shares(rows, ceiling);
    if shares.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "no kind=prep rows with metric gb_s".into(),
        });
    }
    let copy = vec![("d2d-copy ceiling (100%)".to_string(), 100.0)];
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "Prep bandwidth as a share of the copy ceiling".into(),
        subtitle: format!(
            "kind=prep, metric gb_s (bytes read + written over gpu_prep_us) over the d2d-copy's {} GB/s, middle block size per family — {BAND_NOTE}",
            short_number(ceiling)
        ),
        y_desc: "share of the d2d-copy ceiling (%)".into(),
        y_log: false,
        panels: family_panels(shares.iter().collect(), &copy)?,
        env: env.clone(),
    };
    chart.write(dir, "bandwidth")
}

/// Each reading arm's host-read cost (`kind=prep`, `read_cost_us`: its step time minus
/// eager-device's, paired in each round) against batch size, one panel per family, with the
/// floor's one-int reads on an idle GPU and behind running work as horizontal lines.
pub fn read_cost_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let costs: Vec<&Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_PREP && r.metric == "read_cost_us")
        .collect();
    if costs.is_empty() {
        return Ok(Rendered::Skipped {
            reason: "no kind=prep rows with metric read_cost_us".into(),
        });
    }
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "What each read path costs against device-only lengths".into(),
        subtitle: "read_cost_us: the arm's step_us − eager-device's, paired per round; middle \
                   block per family; dashed: the floor's reads; band: p10–p90"
            .into(),
        y_desc: "host read cost per step (µs)".into(),
        y_log: false,
        panels: family_panels(costs, &floor_levels(rows, &READ_FLOOR_ITEMS))?,
        env: env.clone(),
    };
    chart.write(dir, "read_cost")
}

/// The share of graph replay's gain over eager-sync that eager-pinned and eager-mapped win
/// back ([`recovered_rows`]), one panel per layout for a steps run (per family for a
/// sweep), with eager-sync at 0% and graph at 100% as horizontal lines.
pub fn read_recovery_chart(dir: &Path, rows: &[Row], env: &EnvRecord) -> Result<Rendered> {
    let shares = recovered_rows(rows);
    let steps: Vec<Row> = shares
        .iter()
        .filter(|r| r.kind == KIND_STEP)
        .cloned()
        .collect();
    let (panels, what) = if !steps.is_empty() {
        let panels = step_panels(&steps, RECOVERED)?.unwrap_or_default();
        (panels, "the decode step (steps)")
    } else if !shares.is_empty() {
        (
            family_panels(shares.iter().collect(), &[])?,
            "the prep (sweep)",
        )
    } else {
        return Ok(Rendered::Skipped {
            reason: "no eager-pinned or eager-mapped cell with paired ratios beside graph's".into(),
        });
    };
    let mut panels = panels;
    for panel in &mut panels {
        panel.floors = vec![
            (format!("{BASELINE_ARM} (0%)"), 0.0),
            (format!("{AFTER_ARM} (100%)"), 100.0),
        ];
    }
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "How much of graph's gain each read path recovers".into(),
        subtitle: format!(
            "{what}: (1 − arm/{BASELINE_ARM}) / (1 − {AFTER_ARM}/{BASELINE_ARM}) of step_us, from the paired ratios; band: both ratios' 95% intervals at their extremes"
        ),
        y_desc: format!("share of {AFTER_ARM}'s gain recovered (%)"),
        y_log: false,
        panels,
        env: env.clone(),
    };
    chart.write(dir, "read_recovery")
}

/// The prep `gb_s` rows as percentages of `ceiling` (median and p10–p90 alike).
fn ceiling_shares(rows: &[Row], ceiling: f64) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.kind == KIND_PREP && r.metric == "gb_s")
        .map(|r| {
            let mut share = r.clone();
            for v in [&mut share.median, &mut share.p10, &mut share.p90] {
                *v *= 100.0 / ceiling;
            }
            share
        })
        .collect()
}

/// Prep rows of one metric, one panel per (family, layout) at its middle block size, each
/// with `floors` as horizontal lines; the layout appears in the title when the run has more.
fn family_panels(prep: Vec<&Row>, floors: &[(String, f64)]) -> Result<Vec<Panel>> {
    let layouts: BTreeSet<&str> = prep.iter().map(|r| r.layout.as_str()).collect();
    let mut groups: BTreeMap<(String, (usize, String)), Vec<&Row>> = BTreeMap::new();
    for row in &prep {
        groups
            .entry((row.family.clone(), layout_order(&row.layout)))
            .or_default()
            .push(row);
    }
    let mut panels = Vec::new();
    for ((family, (_, layout)), group) in groups {
        let (block, chosen) = middle_block(group);
        let mut title = format!("{family} · block {block}");
        if layouts.len() > 1 {
            title = format!("{layout} · {title}");
        }
        panels.push(Panel {
            title,
            series: series_by_arm(&chosen)?,
            floors: floors.to_vec(),
        });
    }
    Ok(panels)
}

fn skipped(metric: &str) -> Rendered {
    Rendered::Skipped {
        reason: format!("no kind=step rows with metric {metric}"),
    }
}

/// The floor items of `items` present in `rows`, each the median over its rows' medians.
fn floor_levels(rows: &[Row], items: &[&str]) -> Vec<(String, f64)> {
    items
        .iter()
        .filter_map(|item| {
            let values: Vec<f64> = rows
                .iter()
                .filter(|r| r.kind == KIND_FLOOR && r.metric == "step_us" && r.arm == *item)
                .map(|r| r.median)
                .collect();
            quantile(&values, 0.5).map(|v| (format!("{item} {} µs", short_number(v)), v))
        })
        .collect()
}

/// Step rows of one metric, one panel per (layout, family) at its middle block size, named
/// in the title; the family appears there only when the run has more than one.
fn step_panels(rows: &[Row], metric: &str) -> Result<Option<Vec<Panel>>> {
    let step: Vec<&Row> = rows
        .iter()
        .filter(|r| r.kind == KIND_STEP && r.metric == metric)
        .collect();
    if step.is_empty() {
        return Ok(None);
    }
    let families: BTreeSet<String> = step.iter().map(|r| r.cell_family()).collect();
    let mut groups: BTreeMap<((usize, String), String), Vec<&Row>> = BTreeMap::new();
    for row in step {
        groups
            .entry((layout_order(&row.layout), row.cell_family()))
            .or_default()
            .push(row);
    }
    let mut panels = Vec::new();
    for (((_, layout), family), group) in groups {
        let blocks: BTreeSet<u32> = group.iter().map(|r| r.block_size).collect();
        let (block, group) = middle_block(group);
        let mut title = layout;
        if group.iter().any(|r| r.emulated) {
            title.push_str(" (emulated)");
        }
        // A run of one drafter's steps names it unless it is DSpark's, the default.
        if families.len() > 1 || names_another_drafter(&family) {
            title.push_str(&format!(" · {family}"));
        }
        title.push_str(&format!(" · block {block}"));
        if blocks.len() > 1 {
            let all: Vec<String> = blocks.iter().map(u32::to_string).collect();
            title.push_str(&format!(" (of {})", all.join(", ")));
        }
        panels.push(Panel {
            title,
            series: series_by_arm(&group)?,
            floors: Vec::new(),
        });
    }
    Ok(Some(panels))
}

/// The rows of a panel's middle block size (the lower of two middles). One block per
/// panel keeps one line per arm and the panels readable; the speedup heatmap shows every
/// block size.
fn middle_block(rows: Vec<&Row>) -> (u32, Vec<&Row>) {
    let blocks: BTreeSet<u32> = rows.iter().map(|r| r.block_size).collect();
    let middle = blocks
        .iter()
        .copied()
        .nth(blocks.len().saturating_sub(1) / 2)
        .unwrap_or(0);
    let chosen = rows
        .into_iter()
        .filter(|r| r.block_size == middle)
        .collect();
    (middle, chosen)
}

/// One series per arm, points sorted by batch size. Two rows for the same arm and batch
/// size in one panel would make the line ambiguous, so they are an error.
fn series_by_arm(rows: &[&Row]) -> Result<Vec<Series>> {
    let mut by_arm: BTreeMap<(u8, String), BTreeMap<u32, Point>> = BTreeMap::new();
    for row in rows {
        check_batch(row)?;
        // A cell without a finite median (a failed or empty cell) has nothing to draw; a
        // missing spread draws as no band.
        let finite_or_median = |v: f64| if v.is_finite() { v } else { row.median };
        let point = Point {
            key: row.batch_size,
            median: row.median,
            p10: finite_or_median(row.p10),
            p90: finite_or_median(row.p90),
        };
        let points = by_arm.entry(arm_order(&row.arm)).or_default();
        if points.insert(row.batch_size, point).is_some() {
            bail!(
                "two {}/{} rows for {} {} bs {} block {} layout {}; merge or drop duplicates before plotting",
                row.kind,
                row.metric,
                row.cell_family(),
                row.arm,
                row.batch_size,
                row.block_size,
                row.layout
            );
        }
    }
    Ok(by_arm
        .into_iter()
        .map(|((_, arm), points)| Series {
            arm,
            points: points
                .into_values()
                .filter(|p| p.median.is_finite())
                .collect(),
        })
        .collect())
}

struct Point {
    /// Where the point sits on the x axis, as [`XAxis`] reads it.
    key: u32,
    median: f64,
    p10: f64,
    p90: f64,
}

struct Series {
    arm: String,
    points: Vec<Point>,
}

struct Panel {
    title: String,
    series: Vec<Series>,
    floors: Vec<(String, f64)>,
}

/// What a chart's x axis shows. Points carry their x as an integer key.
#[derive(Debug, Clone, Copy, PartialEq)]
enum XAxis {
    /// Requests per step, log2 scale.
    BatchSize,
    /// The what-if factor on every host cost, in thousandths, log2 scale.
    HostScaleMilli,
}

impl XAxis {
    fn x(self, key: u32) -> f64 {
        match self {
            XAxis::BatchSize => f64::from(key).log2(),
            XAxis::HostScaleMilli => (f64::from(key) / 1000.0).log2(),
        }
    }

    fn description(self) -> &'static str {
        match self {
            XAxis::BatchSize => "batch size (requests, log2 scale)",
            XAxis::HostScaleMilli => {
                "host cost scale (every host segment and op x this, log2 scale)"
            }
        }
    }

    fn label(self, x: f64) -> String {
        match self {
            XAxis::BatchSize => format!("{}", x.exp2().round()),
            XAxis::HostScaleMilli => format!("{}x", short_number(x.exp2())),
        }
    }
}

struct LineChart {
    x_axis: XAxis,
    title: String,
    subtitle: String,
    y_desc: String,
    /// Plot log10 of the values: prep arms and floors span orders of magnitude.
    y_log: bool,
    panels: Vec<Panel>,
    env: EnvRecord,
}

const LEGEND_HEIGHT: u32 = 30;
const FLOOR_COLOURS: [RGBColor; 3] = [
    RGBColor(60, 60, 60),
    RGBColor(120, 90, 160),
    RGBColor(150, 110, 40),
];

impl LineChart {
    fn write(mut self, dir: &Path, name: &str) -> Result<Rendered> {
        cap_panels(&mut self.panels, &mut self.subtitle);
        super::write_chart(dir, name, PANEL_CHART_SIZE, &self)
    }

    fn y(&self, v: f64) -> f64 {
        if self.y_log {
            v.max(1e-3).log10()
        } else {
            v
        }
    }

    fn arms(&self) -> Vec<String> {
        let arms: BTreeSet<(u8, String)> = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(|s| arm_order(&s.arm)))
            .collect();
        arms.into_iter().map(|(_, arm)| arm).collect()
    }

    /// One legend for all panels: the arms keep their colours across panels.
    fn draw_legend<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let mut x = 20;
        let y = LEGEND_HEIGHT as i32 / 2;
        let label = super::font(16).pos(Pos::new(HPos::Left, VPos::Center));
        for arm in self.arms() {
            let colour = arm_colour(&arm);
            area.draw(&PathElement::new(
                vec![(x, y), (x + 28, y)],
                colour.stroke_width(3),
            ))
            .drawn()?;
            draw_marker(area, (x + 14, y), &arm)?;
            area.draw(&Text::new(arm.clone(), (x + 36, y), label.clone()))
                .drawn()?;
            x += 60 + 9 * arm.len() as i32;
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: &Panel,
        batches: &BTreeSet<u32>,
    ) -> Result<()> {
        let axis = self.x_axis;
        let x_of = |key: u32| axis.x(key);
        let first = batches.first().copied().unwrap_or(1);
        let last = batches.last().copied().unwrap_or(1);
        let x_range = (x_of(first) - 0.3)..(x_of(last) + 0.3);
        let x_keys: Vec<f64> = batches.iter().map(|b| x_of(*b)).collect();

        let values = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().flat_map(|p| [p.median, p.p10, p.p90]))
            .chain(panel.floors.iter().map(|(_, v)| *v))
            .filter(|v| v.is_finite());
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        // A panel whose cells are all non-finite still gets sane axes.
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (1.0, 1.0) };
        let (y_range, y_keys) = if self.y_log {
            let lo = self.y(lo) - 0.15;
            let hi = self.y(hi) + 0.15;
            (lo..hi, log_ticks(lo, hi))
        } else {
            // Zero stays in view; changes below it (a lower ITL) get room too.
            let bottom = if lo < 0.0 { lo * 1.1 } else { 0.0 };
            let top = if hi > 0.0 { hi * 1.1 } else { 1.0 };
            let range = bottom..top;
            (range.clone(), RangedCoordf64::from(range).key_points(7))
        };
        let y_log = self.y_log;

        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, super::font(18))
            .margin(8)
            .margin_right(18)
            .x_label_area_size(44)
            .y_label_area_size(62)
            .build_cartesian_2d(
                FixedTicks::new(x_range, x_keys),
                FixedTicks::new(y_range, y_keys),
            )
            .drawn()?;
        chart
            .configure_mesh()
            .x_desc(axis.description())
            .y_desc(&self.y_desc)
            .axis_desc_style(super::font(14))
            .label_style(super::font(14))
            .light_line_style(LIGHT_GREY)
            .bold_line_style(LIGHT_GREY)
            .x_label_formatter(&|x| axis.label(*x))
            .y_label_formatter(&|y| short_number(if y_log { 10f64.powf(*y) } else { *y }))
            .draw()
            .drawn()?;

        // Every band under every line: a later arm's band must not cover an earlier line.
        for series in &panel.series {
            let band: Vec<(f64, f64)> = series
                .points
                .iter()
                .map(|p| (x_of(p.key), self.y(p.p90)))
                .chain(
                    series
                        .points
                        .iter()
                        .rev()
                        .map(|p| (x_of(p.key), self.y(p.p10))),
                )
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    band,
                    arm_colour(&series.arm).mix(0.12).filled(),
                )))
                .drawn()?;
        }
        let arms = self.arms();
        for series in &panel.series {
            let colour = arm_colour(&series.arm);
            let line: Vec<(f64, f64)> = series
                .points
                .iter()
                .map(|p| (x_of(p.key), self.y(p.median)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    line.clone(),
                    colour.stroke_width(line_width(&arms, &series.arm)),
                ))
                .drawn()?;
            for point in line {
                draw_marker(chart.plotting_area(), point, &series.arm)?;
            }
        }

        let (x_lo, x_hi) = (x_of(first) - 0.3, x_of(last) + 0.3);
        for (i, (item, value)) in panel.floors.iter().enumerate() {
            let colour = FLOOR_COLOURS[i % FLOOR_COLOURS.len()];
            let y = self.y(*value);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_lo, y), (x_hi, y)],
                    6,
                    4,
                    colour.stroke_width(1),
                ))
                .drawn()?;
            chart
                .draw_series(std::iter::once(Text::new(
                    item.clone(),
                    (x_hi, y),
                    super::font(12)
                        .color(&colour)
                        .pos(Pos::new(HPos::Right, VPos::Bottom)),
                )))
                .drawn()?;
        }
        Ok(())
    }
}

impl Chart for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = frame(root, &self.title, &self.subtitle, &self.env)?;
        let (legend, plots) = body.split_vertically(LEGEND_HEIGHT);
        self.draw_legend(&legend)?;
        // One x scale for every panel, so the same batch size lines up across panels.
        let batches: BTreeSet<u32> = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|p| p.key)))
            .collect();
        for (area, panel) in panel_grid(&plots, self.panels.len())
            .iter()
            .zip(&self.panels)
        {
            self.draw_panel(area, panel, &batches)?;
        }
        Ok(())
    }
}

/// The line width of `arm` among a chart's `arms` (in legend order): the first widest, so a
/// later arm's line lying on an earlier one leaves it showing on both sides (graph-upload and
/// eager-device often sit on graph's line at this scale).
fn line_width(arms: &[String], arm: &str) -> u32 {
    let later = arms.len() - 1 - arms.iter().position(|a| a == arm).unwrap_or(0);
    2 + later.min(3) as u32
}

/// Each known arm's marker, the same in every panel and the legend: filled circle,
/// triangle, cross, hollow circle, in the design's order.
fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    arm: &str,
) -> Result<()> {
    let colour = arm_colour(arm);
    // Lines of layouts (the host-scale chart) take their shapes in layout order.
    let rank = match arm_order(arm).0 {
        u8::MAX => layout_order(arm).0,
        known => known as usize,
    };
    match rank % 4 {
        0 => area.draw(&Circle::new(at, 4, colour.filled())),
        1 => area.draw(&TriangleMarker::new(at, 6, colour.filled())),
        2 => area.draw(&Cross::new(at, 5, colour.stroke_width(2))),
        _ => area.draw(&Circle::new(at, 5, colour.stroke_width(2))),
    }
    .drawn()
}

/// Ticks at 1, 2 and 5 times each power of ten inside `[lo, hi]` (log10 space).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    for decade in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for mantissa in [1.0f64, 2.0, 5.0] {
            let t = f64::from(decade) + mantissa.log10();
            if (lo..=hi).contains(&t) {
                ticks.push(t);
            }
        }
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::super::test_row as row;
    use super::*;

    #[test]
    fn log_ticks_are_one_two_five_per_decade() {
        let ticks: Vec<f64> = log_ticks(0.0, 2.0)
            .into_iter()
            .map(|t| 10f64.powf(t).round())
            .collect();
        assert_eq!(ticks, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    }

    #[test]
    fn floors_take_the_median_of_each_item_and_only_step_us() {
        let rows = vec![
            row(KIND_FLOOR, "empty-kernel", 1, "step_us", 2.0),
            row(KIND_FLOOR, "empty-kernel", 2, "step_us", 9.0),
            row(KIND_FLOOR, "empty-kernel", 4, "step_us", 3.0),
            row(KIND_FLOOR, "d2h-int", 1, "step_us", 11.0),
            row(KIND_FLOOR, "d2h-int", 1, "other_us", 99.0),
            row(KIND_FLOOR, "h2d-pinned", 1, "step_us", 7.0),
        ];
        assert_eq!(
            floor_levels(&rows, &FLOOR_ITEMS),
            [
                ("empty-kernel 3 µs".to_string(), 3.0),
                ("d2h-int 11 µs".to_string(), 11.0)
            ]
        );
    }

    #[test]
    fn bandwidth_is_drawn_as_a_share_of_the_copy_ceiling_per_family() {
        let mut other_family = row(KIND_PREP, "fused", 8, "gb_s", 400.0);
        other_family.family = "dsa_target_verify".into();
        let rows = vec![
            row(KIND_PREP, "graph", 8, "gb_s", 800.0),
            row(KIND_PREP, "graph", 8, "step_us", 9.0),
            other_family,
            row(KIND_FLOOR, "d2d-copy", 1, "gb_s", 4000.0),
        ];
        let shares = ceiling_shares(&rows, 4000.0);
        let round = |v: f64| (v * 1e9).round() / 1e9;
        let values: Vec<(&str, f64, f64, f64)> = shares
            .iter()
            .map(|r| (r.arm.as_str(), round(r.median), round(r.p10), round(r.p90)))
            .collect();
        // 800 / 4000 = 20%, its p10–p90 (720–880 GB/s) 18–22%; 400 GB/s is 10%.
        assert_eq!(
            values,
            [("graph", 20.0, 18.0, 22.0), ("fused", 10.0, 9.0, 11.0)]
        );
        let panels = family_panels(shares.iter().collect(), &[("copy".into(), 100.0)]).unwrap();
        let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            ["dsa_decode · block 4", "dsa_target_verify · block 4"]
        );
        assert_eq!(panels[1].floors, [("copy".to_string(), 100.0)]);
        let dir = tempfile::tempdir().unwrap();
        let without_ceiling = bandwidth_chart(dir.path(), &rows[..3], &EnvRecord::default());
        assert!(
            matches!(without_ceiling.unwrap(), Rendered::Skipped { reason } if reason.contains("d2d-copy")),
        );
        let without_gb_s = bandwidth_chart(dir.path(), &rows[1..2], &EnvRecord::default());
        assert!(matches!(without_gb_s.unwrap(), Rendered::Skipped { .. }));
    }

    #[test]
    fn step_panels_split_by_layout_and_mark_emulated() {
        let mut tp8 = row(KIND_STEP, "graph", 1, "itl_us", 10.0);
        tp8.layout = "tp8".into();
        tp8.emulated = true;
        let rows = vec![
            tp8,
            row(KIND_STEP, "graph", 1, "itl_us", 20.0),
            row(KIND_STEP, "eager-sync", 2, "itl_us", 30.0),
            row(KIND_STEP, "graph", 2, "throughput_tok_s", 30.0),
        ];
        let panels = step_panels(&rows, "itl_us").unwrap().unwrap();
        let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        // The block is named even where the run has one.
        assert_eq!(titles, ["tp1 · block 4", "tp8 (emulated) · block 4"]);
        let arms: Vec<&str> = panels[0].series.iter().map(|s| s.arm.as_str()).collect();
        assert_eq!(arms, ["eager-sync", "graph"]);
        assert!(step_panels(&rows, "gap_us").unwrap().is_none());
    }

    #[test]
    fn step_panels_name_the_eagle_drafter_even_alone() {
        let eagle = crate::axes::Drafter::Eagle.step_family();
        let rows: Vec<Row> = ["eager-sync", "graph"]
            .into_iter()
            .map(|arm| Row {
                family: eagle.into(),
                ..row(KIND_STEP, arm, 1, "itl_us", 10.0)
            })
            .collect();
        let panels = step_panels(&rows, "itl_us").unwrap().unwrap();
        assert_eq!(panels[0].title, format!("tp1 · {eagle} · block 4"));
    }

    #[test]
    fn step_panels_show_the_middle_block_of_each_layout() {
        let rows: Vec<Row> = [3, 5, 8]
            .into_iter()
            .map(|block| {
                let mut r = row(KIND_STEP, "graph", 1, "itl_us", f64::from(block));
                r.block_size = block;
                r
            })
            .collect();
        let panels = step_panels(&rows, "itl_us").unwrap().unwrap();
        assert_eq!(panels.len(), 1);
        assert_eq!(panels[0].title, "tp1 · block 5 (of 3, 5, 8)");
        assert_eq!(panels[0].series[0].points[0].median, 5.0);
        let (block, chosen) = middle_block(rows.iter().take(2).collect());
        assert_eq!((block, chosen.len()), (3, 1));
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

    #[test]
    fn earlier_arms_are_drawn_wider_so_later_lines_on_them_leave_them_showing() {
        let arms: Vec<String> = ["eager-sync", "eager-device", "graph-upload", "graph"]
            .map(String::from)
            .to_vec();
        let widths: Vec<u32> = arms.iter().map(|a| line_width(&arms, a)).collect();
        assert_eq!(widths, [5, 4, 3, 2]);
        let many: Vec<String> = (0..7).map(|i| format!("arm{i}")).collect();
        assert_eq!(line_width(&many, "arm0"), 5, "capped");
    }

    #[test]
    fn duplicate_cells_are_an_error_naming_the_cell() {
        let rows = vec![
            row(KIND_STEP, "graph", 8, "itl_us", 10.0),
            row(KIND_STEP, "graph", 8, "itl_us", 11.0),
        ];
        let err = step_panels(&rows, "itl_us").err().unwrap().to_string();
        assert!(err.contains("bs 8") && err.contains("graph"), "{err}");
    }

    #[test]
    fn non_finite_medians_are_dropped_and_missing_spread_collapses_to_the_median() {
        let mut no_spread = row(KIND_STEP, "graph", 2, "itl_us", 10.0);
        no_spread.p10 = f64::NAN;
        no_spread.p90 = f64::INFINITY;
        let rows = vec![
            row(KIND_STEP, "graph", 1, "itl_us", f64::NAN),
            no_spread,
            row(KIND_STEP, "graph", 4, "itl_us", 12.0),
        ];
        let panels = step_panels(&rows, "itl_us").unwrap().unwrap();
        let points: Vec<(u32, f64, f64)> = panels[0].series[0]
            .points
            .iter()
            .map(|p| (p.key, p.p10, p.p90))
            .collect();
        assert_eq!(points, [(2, 10.0, 10.0), (4, 12.0 * 0.9, 12.0 * 1.1)]);
    }

    #[test]
    fn batch_size_zero_is_an_error() {
        let rows = vec![row(KIND_STEP, "graph", 0, "itl_us", 10.0)];
        let err = step_panels(&rows, "itl_us").err().unwrap().to_string();
        assert!(err.contains("batch_size 0"), "{err}");
    }
}
