//! The prep charts: each arm's cost against batch size over the launch floors, its bandwidth
//! as a share of the d2d-copy ceiling, each reading arm's read cost over the floor's reads,
//! and the share of graph's gain each read path recovers. One panel per (family, layout).

use super::draw::LineChart;
use super::panels::{middle_block, series_by_arm, step_panels, Panel, XAxis};
use crate::report::charts::kit::{layout_order, short_number, Rendered};
use crate::report::format::{copy_ceiling, AFTER_ARM, BASELINE_ARM};
use crate::report::summary::read_paths::{recovered_rows, RECOVERED};
use crate::results::csv::{Row, KIND_FLOOR, KIND_PREP, KIND_STEP};
use crate::results::env::EnvRecord;
use crate::stats::summary::quantile;
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floor items drawn as horizontal lines on the prep chart.
const FLOOR_ITEMS: [&str; 3] = ["empty-kernel", "empty-graph", "d2h-int"];
/// The floor's reads, drawn on the read-cost chart: idle, and behind running work.
const READ_FLOOR_ITEMS: [&str; 2] = ["d2h-int", "d2h-int-busy"];
const BAND_NOTE: &str = "line: median per cell; shaded band: p10–p90";

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
    // A band is promised only where a row has one: a derived cost may hold no p10–p90.
    let banded = costs
        .iter()
        .any(|r| r.p10.is_finite() && r.p90.is_finite() && r.p90 > r.p10);
    let chart = LineChart {
        x_axis: XAxis::BatchSize,
        title: "What each read path costs against device-only lengths".into(),
        subtitle: format!(
            "read_cost_us: the arm's step_us − eager-device's, paired per round; middle block \
             per family; dashed: the floor's reads{}",
            if banded { "; band: p10–p90" } else { "" }
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::{KIND_FLOOR, KIND_PREP};
    use crate::results::env::EnvRecord;

    use crate::report::charts::test_row as row;

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
    fn the_read_cost_chart_promises_a_band_only_where_a_row_has_one() {
        let dir = tempfile::tempdir().unwrap();
        let subtitle_says_band = |rows: &[crate::results::csv::Row]| {
            read_cost_chart(dir.path(), rows, &EnvRecord::default()).unwrap();
            let svg = std::fs::read_to_string(dir.path().join("charts/read_cost.svg")).unwrap();
            svg.contains("band: p10")
        };
        let banded = row(KIND_PREP, "eager-sync", 8, "read_cost_us", 17.0);
        assert!(subtitle_says_band(std::slice::from_ref(&banded)));
        let mut bare = banded;
        (bare.p10, bare.p90) = (f64::NAN, f64::NAN);
        assert!(!subtitle_says_band(std::slice::from_ref(&bare)));
        bare.p10 = bare.median;
        bare.p90 = bare.median;
        assert!(!subtitle_says_band(&[bare]), "a band of no width is none");
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
}
