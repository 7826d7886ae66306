//! The long decode-step tables: per cell, throughput and ITL with their changes against
//! eager-sync (of the medians, unpaired), forward occupancy and the host-bound gap.

use super::index::{group_title, Index};
use crate::report::change::relative_change;
use crate::report::format::{fmt_interval, fmt_num, fmt_pct, table_cell, BASELINE_ARM};
use crate::results::csv::{CellKey, Row, KIND_STEP};
use std::fmt::{self, Write};

/// Every cell of each step group: throughput, ITL and their changes against eager-sync (of
/// the medians, unpaired; the paired step change is in the compact table above), forward
/// occupancy and the host-bound gap.
pub(super) fn write_steps(out: &mut String, index: &Index) -> fmt::Result {
    for (group, cells) in index.groups(KIND_STEP) {
        writeln!(
            out,
            "### Decode step — {}\n",
            group_title(index, KIND_STEP, group)
        )?;
        writeln!(
            out,
            "| bs | block | arm | throughput (tok/s) | Δ throughput vs {BASELINE_ARM} | ITL median (µs) | ITL p90 (µs) | Δ ITL vs {BASELINE_ARM} | forward occupancy | host-bound gap (µs) |"
        )?;
        writeln!(out, "|---:|---:|---|---:|---|---:|---:|---|---:|---:|")?;
        for sorted in cells {
            let cell = &sorted.cell;
            let baseline = sorted.with_arm(BASELINE_ARM);
            let metric = |name: &str| index.get(cell, name);
            let change = |name: &str| -> String {
                if cell.arm == BASELINE_ARM {
                    return "baseline".to_string();
                }
                match (index.get(&baseline, name), metric(name)) {
                    (Some(base), Some(new)) => match relative_change(base, new) {
                        Some(c) => {
                            format!("{} {}", fmt_pct(c.pct), fmt_interval(c.lo_pct, c.hi_pct))
                        }
                        None => "n/a".to_string(),
                    },
                    _ => "—".to_string(),
                }
            };
            let median = |name: &str| metric(name).map_or("—".to_string(), |r| fmt_num(r.median));
            let itl_p90 = metric("itl_us").map_or("—".to_string(), |r| fmt_num(r.p90));
            let occupancy = metric("occupancy").map_or("—".to_string(), fmt_ratio);
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell.batch_size,
                cell.block_size,
                arm_label(index, cell),
                median("throughput_tok_s"),
                change("throughput_tok_s"),
                median("itl_us"),
                itl_p90,
                change("itl_us"),
                occupancy,
                median("gap_us"),
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn arm_label(index: &Index, cell: &CellKey) -> String {
    if index.throttled(cell) {
        format!("{} ⚠ throttled", table_cell(&cell.arm))
    } else {
        table_cell(&cell.arm)
    }
}

/// Occupancy is stored as a ratio (or already in percent with unit `%`).
fn fmt_ratio(row: &Row) -> String {
    match row.unit.as_str() {
        "%" => format!("{:.1}%", row.median),
        _ => format!("{:.1}%", row.median * 100.0),
    }
}

#[cfg(test)]
mod tests {

    use crate::results::csv::{Row, STEP_RATIO_VS_EAGER_SYNC};

    use crate::report::summary::fixtures::step;
    use crate::report::summary::render_summary;

    use crate::results::env::test_env;

    #[test]
    fn step_table_shows_change_against_eager_sync() {
        let rows = vec![
            step("eager-sync", "throughput_tok_s", 1000.0),
            step("graph", "throughput_tok_s", 1250.0),
            step("eager-sync", "itl_us", 200.0),
            step("graph", "itl_us", 160.0),
            step("graph", "occupancy", 0.975),
            Row {
                ci_lo: 0.870,
                ci_hi: 0.890,
                ..step("graph", STEP_RATIO_VS_EAGER_SYNC, 0.880)
            },
        ];
        let text = render_summary(&rows, &test_env());
        assert!(
            text.contains(
                "| 1 | 5 | eager-sync | 1,000 | baseline | 200 | 210 | baseline | — | — |"
            ),
            "{text}"
        );
        let graph = text
            .lines()
            .find(|l| l.starts_with("| 1 | 5 | graph |"))
            .unwrap();
        assert!(graph.contains("| 1,250 | +25.0% ["), "{graph}");
        assert!(graph.contains("| 160 | 168 | -20.0% ["), "{graph}");
        assert!(graph.contains("| 97.5% |"), "{graph}");
        // The paired change is the compact table's, not a near-duplicate column beside Δ ITL.
        assert!(!graph.contains("-12.0%"), "{graph}");
        assert!(
            text.contains("| bs | block | graph |\n|---:|---:|---|\n| 1 | 5 | -12.0% [-13.0, -11.0] **faster** |"),
            "{text}"
        );
    }

    #[test]
    fn missing_baseline_leaves_a_dash_not_a_number() {
        let rows = vec![step("graph", "itl_us", 160.0)];
        let text = render_summary(&rows, &test_env());
        let graph = text.lines().find(|l| l.contains("| graph |")).unwrap();
        assert_eq!(graph, "| 1 | 5 | graph | — | — | 160 | 168 | — | — | — |");
    }
}
