//! Speedup of graph replay over eager-sync, batch size × block size, one panel per
//! (layout, family), on a diverging colour scale centred on 1.0×.

use super::kit::{
    self, cap_panels, check_batch, frame, layout_order, panel_grid, trimmed, Chart, Drawn,
    FixedTicks, Rendered, GREY, LIGHT_GREY, PANEL_CHART_SIZE,
};
use crate::results::csv::{Row, KIND_PREP, KIND_STEP};
use crate::results::env::EnvRecord;
use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BEFORE_ARM: &str = "eager-sync";
const AFTER_ARM: &str = "graph";

/// Graph over eager-sync for one cell: `eager-sync median / graph median`, so above 1 means
/// graph replay is faster.
#[derive(Debug, Clone, PartialEq)]
pub struct Speedup {
    pub layout: String,
    pub family: String,
    pub batch_size: u32,
    pub block_size: u32,
    pub emulated: bool,
    pub speedup: f64,
}

/// The metric a kind's speedup is taken over: the median step time for both kinds. For step
/// rows this is the step's wall time, not the ITL median: an ITL sample is the wall time
/// over 1..=block + 1 tokens, so ITL samples are multimodal and their median jumps between
/// modes at small sample counts, while the step time is unimodal (ITL = step time / tokens).
fn speedup_metric(kind: &str) -> Result<&'static str> {
    match kind {
        KIND_PREP | KIND_STEP => Ok("step_us"),
        other => bail!("no speedup chart for kind {other:?}; use {KIND_PREP:?} or {KIND_STEP:?}"),
    }
}

/// Every cell of `kind` that has both an eager-sync and a graph median (finite, graph above 0),
/// sorted by layout, family, batch size and block size.
pub fn speedups(rows: &[Row], kind: &str) -> Result<Vec<Speedup>> {
    let metric = speedup_metric(kind)?;
    type Cell = ((usize, String), String, u32, u32);
    let mut pairs: BTreeMap<Cell, (Option<f64>, Option<f64>, bool)> = BTreeMap::new();
    for row in rows
        .iter()
        .filter(|r| r.kind == kind && r.metric == metric)
        .filter(|r| r.arm == BEFORE_ARM || r.arm == AFTER_ARM)
    {
        check_batch(row)?;
        let key = (
            layout_order(&row.layout),
            row.cell_family(),
            row.batch_size,
            row.block_size,
        );
        let entry = pairs.entry(key).or_default();
        let slot = if row.arm == BEFORE_ARM {
            &mut entry.0
        } else {
            &mut entry.1
        };
        if slot.replace(row.median).is_some() {
            bail!(
                "two {kind}/{metric} rows for {} {} bs {} block {} layout {}; merge or drop duplicates before plotting",
                row.cell_family(),
                row.arm,
                row.batch_size,
                row.block_size,
                row.layout
            );
        }
        entry.2 |= row.emulated;
    }
    Ok(pairs
        .into_iter()
        .filter_map(|(((_, layout), family, batch_size, block_size), cell)| {
            let (Some(before), Some(after), emulated) = cell else {
                return None;
            };
            (before.is_finite() && after.is_finite() && after > 0.0).then(|| Speedup {
                layout,
                family,
                batch_size,
                block_size,
                emulated,
                speedup: before / after,
            })
        })
        .collect())
}

/// Heatmap of [`speedups`] for `kind` (`prep` or `step`), written as `speedup_<kind>`.
pub fn speedup_chart(dir: &Path, rows: &[Row], env: &EnvRecord, kind: &str) -> Result<Rendered> {
    let metric = speedup_metric(kind)?;
    let cells = speedups(rows, kind)?;
    if cells.is_empty() {
        return Ok(Rendered::Skipped {
            reason: format!(
                "no kind={kind} cell with both {BEFORE_ARM} and {AFTER_ARM} rows for {metric}"
            ),
        });
    }
    let mut panels: Vec<Panel> = Vec::new();
    for cell in cells {
        let title = |c: &Speedup| {
            let emulated = if c.emulated { " (emulated)" } else { "" };
            format!("{}{emulated} · {}", c.layout, c.family)
        };
        match panels.last_mut() {
            Some(p) if p.layout == cell.layout && p.family == cell.family => {
                if cell.emulated {
                    p.title = title(&cell);
                }
                p.cells
                    .insert((cell.batch_size, cell.block_size), cell.speedup);
            }
            _ => panels.push(Panel {
                title: title(&cell),
                layout: cell.layout.clone(),
                family: cell.family.clone(),
                cells: BTreeMap::from([((cell.batch_size, cell.block_size), cell.speedup)]),
            }),
        }
    }
    let largest = panels
        .iter()
        .flat_map(|p| p.cells.values())
        .map(|v| v.log2().abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let what = if kind == KIND_PREP {
        "prep time"
    } else {
        "decode step time"
    };
    let mut subtitle = format!(
        "median {metric} of {BEFORE_ARM} / median of {AFTER_ARM} (kind={kind}); above 1× graph is faster"
    );
    if kind == KIND_STEP {
        subtitle.push_str(&format!("; {}", kit::host_profile_note(env)));
    }
    cap_panels(&mut panels, &mut subtitle);
    let chart = Heatmap {
        title: format!("Speedup of graph replay over eager-sync ({what})"),
        subtitle,
        panels,
        // Never saturate on noise: the scale spans at least 0.67×–1.5×.
        extent: largest.max(1.5f64.log2()),
        env: env.clone(),
    };
    kit::write_chart(dir, &format!("speedup_{kind}"), PANEL_CHART_SIZE, &chart)
}

struct Panel {
    title: String,
    layout: String,
    family: String,
    /// (batch size, block size) → speedup.
    cells: BTreeMap<(u32, u32), f64>,
}

struct Heatmap {
    title: String,
    subtitle: String,
    panels: Vec<Panel>,
    /// |log2 speedup| that maps to the deepest colour.
    extent: f64,
    env: EnvRecord,
}

const SLOWER: RGBColor = RGBColor(178, 24, 43);
const NEUTRAL: RGBColor = RGBColor(247, 247, 247);
const FASTER: RGBColor = RGBColor(33, 102, 172);

/// Position of a speedup on the colour scale: -1 (deepest red, graph slower) through 0
/// (1.0×) to 1 (deepest blue, graph faster); symmetric in log2, so 2× and 0.5× mirror.
fn scale_position(speedup: f64, extent: f64) -> f64 {
    (speedup.log2() / extent).clamp(-1.0, 1.0)
}

fn scale_colour(position: f64) -> RGBColor {
    let (end, t) = if position >= 0.0 {
        (FASTER, position)
    } else {
        (SLOWER, -position)
    };
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8;
    RGBColor(
        mix(NEUTRAL.0, end.0),
        mix(NEUTRAL.1, end.1),
        mix(NEUTRAL.2, end.2),
    )
}

/// Ticks on the colour bar, in speedup; only those inside the scale are drawn.
const BAR_TICKS: [f64; 13] = [
    0.125, 0.25, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0,
];

impl Heatmap {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: &Panel,
    ) -> Result<()> {
        let batches: Vec<u32> = panel
            .cells
            .keys()
            .map(|k| k.0)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let blocks: Vec<u32> = panel
            .cells
            .keys()
            .map(|k| k.1)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let index_keys = |n: usize| (0..n).map(|i| i as f64).collect::<Vec<_>>();
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, kit::font(18))
            .margin(8)
            .x_label_area_size(44)
            .y_label_area_size(58)
            .build_cartesian_2d(
                FixedTicks::new(-0.5..batches.len() as f64 - 0.5, index_keys(batches.len())),
                FixedTicks::new(-0.5..blocks.len() as f64 - 0.5, index_keys(blocks.len())),
            )
            .drawn()?;
        let label = |values: &[u32], i: f64| {
            values
                .get(i.round() as usize)
                .map_or(String::new(), u32::to_string)
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("batch size (requests)")
            .y_desc("block size (γ or draft tokens N)")
            .axis_desc_style(kit::font(14))
            .label_style(kit::font(14))
            .x_label_formatter(&|x| label(&batches, *x))
            .y_label_formatter(&|y| label(&blocks, *y))
            .draw()
            .drawn()?;

        for (xi, batch) in batches.iter().enumerate() {
            for (yi, block) in blocks.iter().enumerate() {
                let (x, y) = (xi as f64, yi as f64);
                let value = panel.cells.get(&(*batch, *block));
                let (fill, text, ink) = match value {
                    Some(v) => {
                        let position = scale_position(*v, self.extent);
                        let ink = if position.abs() > 0.6 { WHITE } else { BLACK };
                        (scale_colour(position), format!("{v:.2}×"), ink)
                    }
                    None => (LIGHT_GREY, "n/a".to_string(), GREY),
                };
                chart
                    .draw_series([
                        Rectangle::new([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)], fill.filled()),
                        Rectangle::new([(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)], WHITE),
                    ])
                    .drawn()?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (x, y),
                        kit::font(14)
                            .color(&ink)
                            .pos(Pos::new(HPos::Center, VPos::Center)),
                    )))
                    .drawn()?;
            }
        }
        Ok(())
    }

    fn draw_colour_bar<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let e = self.extent;
        let ticks: Vec<f64> = BAR_TICKS
            .iter()
            .map(|t| t.log2())
            .filter(|t| t.abs() <= e + 1e-9)
            .collect();
        let mut bar = ChartBuilder::on(area)
            .caption("speedup", kit::font(14))
            .margin_top(40)
            .margin_bottom(60)
            .margin_left(8)
            .margin_right(8)
            .y_label_area_size(50)
            .right_y_label_area_size(0)
            .build_cartesian_2d(0.0..1.0, FixedTicks::new(-e..e, ticks))
            .drawn()?;
        bar.configure_mesh()
            .disable_mesh()
            .disable_x_axis()
            .label_style(kit::font(14))
            .y_label_formatter(&|y| format!("{}×", trimmed(y.exp2(), 2)))
            .draw()
            .drawn()?;
        const STEPS: usize = 100;
        bar.draw_series((0..STEPS).map(|i| {
            let lo = -e + 2.0 * e * i as f64 / STEPS as f64;
            let hi = -e + 2.0 * e * (i + 1) as f64 / STEPS as f64;
            let colour = scale_colour(scale_position(((lo + hi) / 2.0).exp2(), e));
            Rectangle::new([(0.0, lo), (1.0, hi)], colour.filled())
        }))
        .drawn()?;
        Ok(())
    }
}

impl Chart for Heatmap {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = frame(root, &self.title, &self.subtitle, &self.env)?;
        let (width, _) = body.dim_in_pixel();
        let (plots, bar) = body.split_horizontally(width.saturating_sub(120));
        for (area, panel) in panel_grid(&plots, self.panels.len())
            .iter()
            .zip(&self.panels)
        {
            self.draw_panel(area, panel)?;
        }
        self.draw_colour_bar(&bar)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_row;
    use super::*;

    fn row(arm: &str, bs: u32, block: u32, metric: &str, median: f64) -> Row {
        let mut row = test_row(KIND_PREP, arm, bs, metric, median);
        row.block_size = block;
        row
    }

    #[test]
    fn speedup_is_eager_sync_over_graph_per_cell() {
        let rows = vec![
            row("eager-sync", 1, 4, "step_us", 40.0),
            row("graph", 1, 4, "step_us", 20.0),
            row("fused", 1, 4, "step_us", 5.0),
            row("eager-sync", 8, 4, "step_us", 30.0),
            row("graph", 8, 4, "step_us", 60.0),
            // No graph partner: no cell.
            row("eager-sync", 16, 4, "step_us", 30.0),
            // Another metric is not mixed in.
            row("graph", 16, 4, "gpu_prep_us", 1.0),
        ];
        let cells = speedups(&rows, KIND_PREP).unwrap();
        let got: Vec<(u32, f64)> = cells.iter().map(|c| (c.batch_size, c.speedup)).collect();
        assert_eq!(got, [(1, 2.0), (8, 0.5)]);
    }

    #[test]
    fn step_speedup_uses_step_time_and_other_kinds_are_refused() {
        let mut rows = vec![
            row("eager-sync", 1, 5, "step_us", 30.0),
            row("graph", 1, 5, "step_us", 10.0),
            row("eager-sync", 1, 5, "itl_us", 99.0),
            row("graph", 1, 5, "itl_us", 1.0),
        ];
        for r in &mut rows {
            r.kind = KIND_STEP.into();
        }
        assert_eq!(speedups(&rows, KIND_STEP).unwrap()[0].speedup, 3.0);
        assert!(speedups(&rows, KIND_PREP).unwrap().is_empty());
        let err = speedups(&rows, "floor").unwrap_err().to_string();
        assert!(err.contains("floor"), "{err}");
    }

    #[test]
    fn non_finite_medians_give_no_speedup() {
        let rows = vec![
            row("eager-sync", 1, 4, "step_us", 40.0),
            row("graph", 1, 4, "step_us", f64::NAN),
            row("eager-sync", 2, 4, "step_us", f64::INFINITY),
            row("graph", 2, 4, "step_us", 20.0),
            row("eager-sync", 4, 4, "step_us", 40.0),
            row("graph", 4, 4, "step_us", 0.0),
        ];
        assert!(speedups(&rows, KIND_PREP).unwrap().is_empty());
    }

    #[test]
    fn duplicate_arm_rows_for_a_cell_are_an_error() {
        let rows = vec![
            row("graph", 2, 4, "step_us", 20.0),
            row("graph", 2, 4, "step_us", 21.0),
        ];
        assert!(speedups(&rows, KIND_PREP).is_err());
    }

    #[test]
    fn colour_scale_is_neutral_at_one_and_symmetric_in_log2() {
        assert_eq!(scale_colour(scale_position(1.0, 1.0)), NEUTRAL);
        assert_eq!(scale_colour(scale_position(4.0, 1.0)), FASTER);
        assert_eq!(scale_colour(scale_position(0.25, 1.0)), SLOWER);
        assert_eq!(scale_position(2.0, 2.0), -scale_position(0.5, 2.0));
        assert!((scale_position(2.0, 2.0) - 0.5).abs() < 1e-12);
    }
}
