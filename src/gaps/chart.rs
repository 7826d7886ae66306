//! `timeline.png`/`.svg`: three typical steps, one lane for the host's time in each sync, one
//! for the GPU's work, one for its idle stretches, each coloured by the sync it waited on.

use super::report::site_name;
use super::Gaps;
use crate::report::charts::{
    categorical, font, render, Chart, Drawn, CATEGORIES, GREY, LIGHT_GREY,
};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

const SIZE: (u32, u32) = (1400, 520);
/// Sites the legend names: as many as there are colours (the rest repeat them).
const NAMED: usize = CATEGORIES;
const GPU: RGBColor = RGBColor(44, 160, 44);

/// The timeline of `g`'s typical steps as PNG bytes and SVG text.
pub fn timeline_chart(g: &Gaps) -> Result<(Vec<u8>, String)> {
    render("timeline", SIZE, &TimelineChart { g })
}

struct TimelineChart<'g> {
    g: &'g Gaps,
}

fn colour(site: Option<usize>) -> RGBColor {
    site.map_or(LIGHT_GREY, categorical)
}

impl Chart for TimelineChart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let t = &self.g.timeline;
        root.fill(&WHITE).drawn()?;
        let (head, rest) = root.split_vertically(64);
        let title = format!("{} typical steps of {}", t.steps, self.g.file);
        head.draw_text(&title, &font(20).color(&BLACK), (20, 10))
            .drawn()?;
        let sub = "GPU idle coloured by the sync the host was in (grey: no sync); lanes: host in \
                   a sync, GPU work, GPU idle";
        head.draw_text(sub, &font(14).color(&GREY), (20, 38))
            .drawn()?;
        let (plot, legend) = rest.split_vertically(SIZE.1 - 64 - 90);
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..t.span_us.max(1.0), -0.5f64..2.5f64)
            .drawn()?;
        let lanes = ["GPU idle", "GPU work", "host in a sync"];
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(3)
            .y_label_formatter(&|y| {
                let lane = y.round();
                match (lane - y).abs() < 1e-6 && (0.0..3.0).contains(&lane) {
                    true => lanes[lane as usize].to_string(),
                    false => String::new(),
                }
            })
            .x_desc("µs from the first step's start")
            .label_style(font(14))
            .axis_desc_style(font(14))
            .draw()
            .drawn()?;
        let bar = |lane: f64, from: f64, to: f64, c: RGBColor| {
            Rectangle::new([(from, lane - 0.35), (to, lane + 0.35)], c.filled())
        };
        let syncs = t
            .syncs
            .iter()
            .map(|s| bar(2.0, s.from_us, s.to_us, colour(s.site)));
        chart.draw_series(syncs).drawn()?;
        let busy = t.gpu_busy.iter().map(|s| bar(1.0, s.from_us, s.to_us, GPU));
        chart.draw_series(busy).drawn()?;
        let idle = t
            .idle
            .iter()
            .map(|s| bar(0.0, s.from_us, s.to_us, colour(s.site)));
        chart.draw_series(idle).drawn()?;
        let starts = t
            .step_starts_us
            .iter()
            .map(|&x| PathElement::new(vec![(x, -0.5), (x, 2.5)], GREY.stroke_width(1)));
        chart.draw_series(starts).drawn()?;
        // The legend: each site the timeline shows, in the summary's order.
        let mut shown: Vec<usize> = (t.syncs.iter().chain(&t.idle))
            .filter_map(|s| s.site)
            .collect();
        shown.sort_unstable();
        shown.dedup();
        for (k, &site) in shown.iter().take(NAMED).enumerate() {
            let (x, y) = (20 + 680 * (k % 2) as i32, 8 + 20 * (k / 2) as i32);
            legend
                .draw(&Rectangle::new(
                    [(x, y), (x + 14, y + 14)],
                    colour(Some(site)).filled(),
                ))
                .drawn()?;
            let name = self
                .g
                .sites
                .get(site)
                .map_or(String::new(), |c| site_name(&c.site));
            let name = name.replace('`', "");
            legend
                .draw_text(&name, &font(14).color(&BLACK), (x + 20, y))
                .drawn()?;
        }
        Ok(())
    }
}
