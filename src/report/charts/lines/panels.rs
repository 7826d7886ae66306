//! Rows into what a line chart draws: panels (one per layout, or per family), each a series
//! per arm of points (median and band) at its middle block size, and the x axis they are
//! drawn against. Duplicate cells and a batch size of 0 are errors naming the cell.

use crate::report::charts::kit::{arm_order, check_batch, layout_order, short_number};
use crate::results::csv::{names_another_drafter, Row, KIND_STEP};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};

/// Step rows of one metric, one panel per (layout, family) at its middle block size, named
/// in the title; the family appears there only when the run has more than one.
pub(super) fn step_panels(rows: &[Row], metric: &str) -> Result<Option<Vec<Panel>>> {
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
pub(super) fn middle_block(rows: Vec<&Row>) -> (u32, Vec<&Row>) {
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
pub(super) fn series_by_arm(rows: &[&Row]) -> Result<Vec<Series>> {
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

pub(super) struct Point {
    /// Where the point sits on the x axis, as [`XAxis`] reads it.
    pub(super) key: u32,
    pub(super) median: f64,
    pub(super) p10: f64,
    pub(super) p90: f64,
}

pub(super) struct Series {
    pub(super) arm: String,
    pub(super) points: Vec<Point>,
}

pub(super) struct Panel {
    pub(super) title: String,
    pub(super) series: Vec<Series>,
    pub(super) floors: Vec<(String, f64)>,
}

/// What a chart's x axis shows. Points carry their x as an integer key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum XAxis {
    /// Requests per step, log2 scale.
    BatchSize,
    /// The what-if factor on every host cost, in thousandths, log2 scale.
    HostScaleMilli,
}

impl XAxis {
    pub(super) fn x(self, key: u32) -> f64 {
        match self {
            XAxis::BatchSize => f64::from(key).log2(),
            XAxis::HostScaleMilli => (f64::from(key) / 1000.0).log2(),
        }
    }

    pub(super) fn description(self) -> &'static str {
        match self {
            XAxis::BatchSize => "batch size (requests, log2 scale)",
            XAxis::HostScaleMilli => {
                "host cost scale (every host segment and op x this, log2 scale)"
            }
        }
    }

    pub(super) fn label(self, x: f64) -> String {
        match self {
            XAxis::BatchSize => format!("{}", x.exp2().round()),
            XAxis::HostScaleMilli => format!("{}x", short_number(x.exp2())),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::results::csv::{Row, KIND_STEP};

    use super::*;

    use crate::report::charts::test_row as row;

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
