//! What every chart draws with: sizes, the frame and footer, fonts and colours, panel grids,
//! the orders of layouts and arms, short numbers, and writing a chart's two files.

use super::render::render;
use crate::results::atomic::write_atomic;
use crate::results::csv::Row;
use crate::results::env::EnvRecord;
use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

/// Size of the multi-panel charts (curves, heatmaps).
pub const PANEL_CHART_SIZE: (u32, u32) = (1200, 800);
/// Size of the timeline and telemetry charts: wide, because time runs along x.
pub const WIDE_CHART_SIZE: (u32, u32) = (1400, 700);

/// The outcome of one chart.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    /// Both files were written.
    Files { png: PathBuf, svg: PathBuf },
    /// The input holds no data for this chart; nothing was written.
    Skipped { reason: String },
}

/// The folder charts go into, inside a run directory.
pub const CHARTS_DIR: &str = "charts";

/// The host profile a steps run used, from its notes, for chart subtitles.
pub(super) fn host_profile_note(env: &EnvRecord) -> String {
    env.host_profile()
        .map_or("host profile not recorded".to_string(), |name| {
            format!("host profile `{name}` (see summary.md for its source)")
        })
}

/// The two files of chart `name` inside `dir`'s charts folder.
pub fn chart_files(dir: &Path, name: &str) -> [PathBuf; 2] {
    ["png", "svg"].map(|ext| dir.join(CHARTS_DIR).join(format!("{name}.{ext}")))
}

/// A chart's data, drawable on any plotters backend.
pub(crate) trait Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Draws `chart` as `<dir>/charts/<name>.png` and `.svg`.
pub(super) fn write_chart(
    dir: &Path,
    name: &str,
    size: (u32, u32),
    chart: &impl Chart,
) -> Result<Rendered> {
    let (png, svg) = render(name, size, chart)?;
    let [png_path, svg_path] = chart_files(dir, name);
    write_atomic(&png_path, &png)?;
    write_atomic(&svg_path, svg.as_bytes())?;
    Ok(Rendered::Files {
        png: png_path,
        svg: svg_path,
    })
}

/// Plotters' errors are generic over the backend and not `'static`, so `?` cannot carry
/// them into `anyhow`; this keeps their message.
pub(crate) trait Drawn<T> {
    fn drawn(self) -> Result<T>;
}

impl<T, E: std::fmt::Display> Drawn<T> for std::result::Result<T, E> {
    fn drawn(self) -> Result<T> {
        self.map_err(|e| anyhow!("plotting failed: {e}"))
    }
}

const TITLE_HEIGHT: u32 = 64;
const FOOTER_HEIGHT: u32 = 26;

/// Fills the canvas, writes the title, the subtitle (what is plotted and how the spread
/// is shown) and the provenance footer; returns the area left for the plot.
pub(super) fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
    env: &EnvRecord,
) -> Result<DrawingArea<DB, Shift>> {
    root.fill(&WHITE).drawn()?;
    let (width, height) = root.dim_in_pixel();
    let centre = Pos::new(HPos::Center, VPos::Top);
    root.draw_text(
        title,
        &font(24).color(&BLACK).pos(centre),
        (width as i32 / 2, 8),
    )
    .drawn()?;
    root.draw_text(
        subtitle,
        &font(16).color(&GREY).pos(centre),
        (width as i32 / 2, 38),
    )
    .drawn()?;
    root.draw_text(
        &footer(env),
        &font(14)
            .color(&GREY)
            .pos(Pos::new(HPos::Left, VPos::Bottom)),
        (10, height as i32 - 6),
    )
    .drawn()?;
    Ok(root.margin(TITLE_HEIGHT, FOOTER_HEIGHT, 0, 0))
}

/// Provenance of every chart: what GPU and driver produced it, when, and with which build.
pub(super) fn footer(env: &EnvRecord) -> String {
    let or = |s: &str, missing: &str| {
        if s.is_empty() {
            missing.to_string()
        } else {
            s.to_string()
        }
    };
    let version = or(&env.metaprep_version, env!("CARGO_PKG_VERSION"));
    let revision = if env.git_revision.is_empty() {
        String::new()
    } else {
        format!(" ({})", env.git_revision)
    };
    format!(
        "{} · driver {} · CUDA {} · {} · metaprep {version}{revision}",
        or(&env.gpu_name, "unknown GPU"),
        or(&env.driver_version, "n/a"),
        or(&env.cuda_driver_version, "n/a"),
        or(&env.date, "undated"),
    )
}

pub(crate) const GREY: RGBColor = RGBColor(90, 90, 90);
pub(crate) const LIGHT_GREY: RGBColor = RGBColor(225, 225, 225);

/// Even sizes only: plotters' ab_glyph renderer truncates half the size when it places a
/// glyph, which lifts dots and dashes a pixel above the baseline at odd sizes.
pub(crate) fn font(size: u32) -> TextStyle<'static> {
    debug_assert!(size.is_multiple_of(2), "odd font size {size}");
    ("sans-serif", size).into_font().into()
}

/// Most panels one chart shows: beyond this they get too small to read.
const MAX_PANELS: usize = 12;

/// Keeps the first [`MAX_PANELS`] panels, and says so in the subtitle when some are left out.
pub(super) fn cap_panels<T>(panels: &mut Vec<T>, subtitle: &mut String) {
    if panels.len() > MAX_PANELS {
        subtitle.push_str(&format!(" — first {MAX_PANELS} of {} panels", panels.len()));
        panels.truncate(MAX_PANELS);
    }
}

/// Splits `area` into a near-square grid with one cell per panel, row by row.
pub(super) fn panel_grid<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panels: usize,
) -> Vec<DrawingArea<DB, Shift>> {
    let cols = (1..=panels).find(|c| c * c >= panels).unwrap_or(1);
    let rows = panels.div_ceil(cols);
    let mut cells = area.split_evenly((rows, cols));
    cells.truncate(panels);
    cells
}

/// A linear axis with ticks exactly where the chart wants them (the batch sizes run,
/// decades of a log axis, heatmap cells, timeline lanes). Plotters' own `WithKeyPoints`
/// cannot be used with f64 axes: it loses their tick formatting and so their mesh.
#[derive(Clone)]
pub(super) struct FixedTicks {
    axis: RangedCoordf64,
    ticks: Vec<f64>,
}

impl FixedTicks {
    pub(super) fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Self {
        Self {
            axis: range.into(),
            ticks,
        }
    }
}

impl Ranged for FixedTicks {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.axis.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Only bold lines: a light grid between hand-picked ticks would be noise.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.axis.range()
    }
}

/// Layouts in the order a reader scans them: tensor parallel by degree, then DEP.
pub(super) fn layout_order(layout: &str) -> (usize, String) {
    const KNOWN: [&str; 6] = ["tp1", "tp2", "tp4", "tp8", "dep2", "dep4"];
    let rank = KNOWN
        .iter()
        .position(|k| *k == layout)
        .unwrap_or(KNOWN.len());
    (rank, layout.to_string())
}

/// Arms from the "before" to the "after" (the tables' order), so legends read in the
/// design's order; other names after them.
pub(super) fn arm_order(arm: &str) -> (u8, String) {
    (crate::report::format::arm_rank(arm), arm.to_string())
}

/// One fixed colour per known arm (and per layout, for charts whose lines are layouts), so
/// the same series looks the same in every chart and no two known ones share a colour.
pub(super) fn arm_colour(arm: &str) -> RGBColor {
    match arm {
        "tp1" => RGBColor(140, 86, 75),
        "tp2" => RGBColor(227, 119, 194),
        "tp4" => RGBColor(23, 190, 207),
        "tp8" => RGBColor(188, 189, 34),
        "dep2" => RGBColor(127, 127, 127),
        "dep4" => RGBColor(0, 0, 128),
        "eager-sync" => RGBColor(214, 39, 40),
        "eager-device" => RGBColor(255, 127, 14),
        "graph" => RGBColor(31, 119, 180),
        "graph-upload" => RGBColor(148, 103, 189),
        "fused" => RGBColor(44, 160, 44),
        // eager-sync's kin, lighter and darker: Tableau-20's light red and a dark red.
        "eager-pinned" => RGBColor(255, 152, 150),
        "eager-mapped" => RGBColor(140, 20, 30),
        other => categorical(other.bytes().map(usize::from).sum()),
    }
}

/// The category colours [`categorical`] has before it repeats one.
pub(crate) const CATEGORIES: usize = 7;

/// Tableau-10 minus the five arm colours, for anything else that needs a category colour.
pub(crate) fn categorical(index: usize) -> RGBColor {
    const COLOURS: [RGBColor; CATEGORIES] = [
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
    ];
    COLOURS[index % COLOURS.len()]
}

/// Axis numbers short enough for a tick: 3.21, 45.4, 350, 1.2k, 35k, 1.5M.
pub(super) fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trimmed(v / 1e6, 1))
    } else if a >= 10_000.0 {
        format!("{}k", trimmed(v / 1000.0, 0))
    } else if a >= 1000.0 {
        format!("{}k", trimmed(v / 1000.0, 1))
    } else if a >= 100.0 {
        trimmed(v, 0)
    } else if a >= 10.0 {
        trimmed(v, 1)
    } else {
        trimmed(v, 2)
    }
}

/// `v` with at most `decimals` decimals and no trailing zeros: 5, 2.5, 0.67.
pub(super) fn trimmed(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Rejects a batch size of 0 before it becomes log2(0) on a log axis.
pub(super) fn check_batch(row: &Row) -> Result<()> {
    if row.batch_size == 0 {
        anyhow::bail!(
            "row {}/{}/{}/{} has batch_size 0; batch sizes must be at least 1 — fix the CSV",
            row.kind,
            row.cell_family(),
            row.arm,
            row.layout
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
