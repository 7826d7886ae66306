//! Drawing a [`LineChart`]: one legend for every panel, and per panel its axes (log10 for
//! prep costs), every band under every line, each arm's line and markers (earlier arms
//! wider), and the floors as dashed lines.

use super::panels::{Panel, XAxis};
use crate::report::charts::kit;
use crate::report::charts::kit::{
    arm_colour, arm_order, cap_panels, frame, layout_order, panel_grid, short_number, Chart, Drawn,
    FixedTicks, Rendered, LIGHT_GREY, PANEL_CHART_SIZE,
};
use crate::results::env::EnvRecord;
use anyhow::Result;
use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

pub(super) struct LineChart {
    pub(super) x_axis: XAxis,
    pub(super) title: String,
    pub(super) subtitle: String,
    pub(super) y_desc: String,
    /// Plot log10 of the values: prep arms and floors span orders of magnitude.
    pub(super) y_log: bool,
    pub(super) panels: Vec<Panel>,
    pub(super) env: EnvRecord,
}

const LEGEND_HEIGHT: u32 = 30;
const FLOOR_COLOURS: [RGBColor; 3] = [
    RGBColor(60, 60, 60),
    RGBColor(120, 90, 160),
    RGBColor(150, 110, 40),
];

impl LineChart {
    pub(super) fn write(mut self, dir: &Path, name: &str) -> Result<Rendered> {
        cap_panels(&mut self.panels, &mut self.subtitle);
        kit::write_chart(dir, name, PANEL_CHART_SIZE, &self)
    }

    pub(super) fn y(&self, v: f64) -> f64 {
        if self.y_log {
            v.max(1e-3).log10()
        } else {
            v
        }
    }

    pub(super) fn arms(&self) -> Vec<String> {
        let arms: BTreeSet<(u8, String)> = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(|s| arm_order(&s.arm)))
            .collect();
        arms.into_iter().map(|(_, arm)| arm).collect()
    }

    /// One legend for all panels: the arms keep their colours across panels.
    pub(super) fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<()> {
        let mut x = 20;
        let y = LEGEND_HEIGHT as i32 / 2;
        let label = kit::font(16).pos(Pos::new(HPos::Left, VPos::Center));
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

    /// One panel: its axes over `batches` (every panel's, so the same batch size lines up
    /// across panels), its arms' bands and lines, and its floors.
    pub(super) fn draw_panel<DB: DrawingBackend>(
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
        let (y_range, y_keys) = self.y_axis(panel);
        let y_log = self.y_log;

        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, kit::font(18))
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
            .axis_desc_style(kit::font(14))
            .label_style(kit::font(14))
            .light_line_style(LIGHT_GREY)
            .bold_line_style(LIGHT_GREY)
            .x_label_formatter(&|x| axis.label(*x))
            .y_label_formatter(&|y| short_number(if y_log { 10f64.powf(*y) } else { *y }))
            .draw()
            .drawn()?;
        self.draw_arms(&mut chart, panel)?;
        self.draw_floors(&mut chart, panel, (x_of(first) - 0.3, x_of(last) + 0.3))
    }

    /// The y range of `panel` and its ticks: every finite median, band edge and floor in
    /// view (log10 with 1-2-5 ticks, or linear with zero in view).
    fn y_axis(&self, panel: &Panel) -> (Range<f64>, Vec<f64>) {
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
        if self.y_log {
            let lo = self.y(lo) - 0.15;
            let hi = self.y(hi) + 0.15;
            (lo..hi, log_ticks(lo, hi))
        } else {
            // Zero stays in view; changes below it (a lower ITL) get room too.
            let bottom = if lo < 0.0 { lo * 1.1 } else { 0.0 };
            let top = if hi > 0.0 { hi * 1.1 } else { 1.0 };
            let range = bottom..top;
            (range.clone(), RangedCoordf64::from(range).key_points(7))
        }
    }

    /// Every arm's band, then every arm's line with its markers.
    fn draw_arms<DB: DrawingBackend>(
        &self,
        chart: &mut PanelChart<DB>,
        panel: &Panel,
    ) -> Result<()> {
        let x_of = |key: u32| self.x_axis.x(key);
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
        Ok(())
    }

    /// The panel's floors as dashed lines across `(x_lo, x_hi)`, each named at its right end.
    fn draw_floors<DB: DrawingBackend>(
        &self,
        chart: &mut PanelChart<DB>,
        panel: &Panel,
        (x_lo, x_hi): (f64, f64),
    ) -> Result<()> {
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
                    kit::font(12)
                        .color(&colour)
                        .pos(Pos::new(HPos::Right, VPos::Bottom)),
                )))
                .drawn()?;
        }
        Ok(())
    }
}

/// A panel's plot: both axes fixed-tick, as [`LineChart::draw_panel`] builds it.
type PanelChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<FixedTicks, FixedTicks>>;

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
pub(super) fn line_width(arms: &[String], arm: &str) -> u32 {
    let later = arms.len() - 1 - arms.iter().position(|a| a == arm).unwrap_or(0);
    2 + later.min(3) as u32
}

/// Each known arm's marker, the same in every panel and the legend: filled circle,
/// triangle, cross, hollow circle, in the design's order.
pub(super) fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
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
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
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
    fn earlier_arms_are_drawn_wider_so_later_lines_on_them_leave_them_showing() {
        let arms: Vec<String> = ["eager-sync", "eager-device", "graph-upload", "graph"]
            .map(String::from)
            .to_vec();
        let widths: Vec<u32> = arms.iter().map(|a| line_width(&arms, a)).collect();
        assert_eq!(widths, [5, 4, 3, 2]);
        let many: Vec<String> = (0..7).map(|i| format!("arm{i}")).collect();
        assert_eq!(line_width(&many, "arm0"), 5, "capped");
    }
}
