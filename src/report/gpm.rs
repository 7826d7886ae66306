//! The GPM lines of `summary.md`: the range of each GPM metric over a run's cells, the cell
//! that used the most DRAM bandwidth, and how much of its GPM intervals a cell filled.

use crate::report::format::fmt_num;
use crate::results::csv::{CellKey, Row};
use std::collections::BTreeMap;
use std::fmt::{self, Write};

/// One GPM figure of every cell that has it.
struct Column {
    values: Vec<f64>,
}

impl Column {
    fn of(cells: &[&Row], field: fn(&Row) -> Option<f64>) -> Self {
        Column {
            values: cells
                .iter()
                .filter_map(|r| field(r))
                .filter(|v| v.is_finite())
                .collect(),
        }
    }

    /// `lo–hi` with `unit`, or `None` when no cell has the figure.
    fn range(&self, unit: &str) -> Option<String> {
        let lo = self.values.iter().copied().reduce(f64::min)?;
        let hi = self.values.iter().copied().reduce(f64::max)?;
        Some(format!("{}–{}{unit}", fmt_num(lo), fmt_num(hi)))
    }
}

/// Writes the GPM callout for `rows`; nothing when no row has a GPM figure (a run without
/// GPM, or from a metaprep before it: its notes say why).
pub fn write_gpm(out: &mut String, rows: &[Row]) -> fmt::Result {
    // Every row of a cell carries the same GPM figures: one row per cell.
    let mut by_cell: BTreeMap<CellKey, &Row> = BTreeMap::new();
    for row in rows {
        by_cell.entry(row.cell_key()).or_insert(row);
    }
    let cells: Vec<&Row> = by_cell
        .into_values()
        .filter(|r| r.gpm_sm_util_pct.is_some() || r.gpm_dram_bw_util_pct.is_some())
        .collect();
    if cells.is_empty() {
        return Ok(());
    }
    let sm = Column::of(&cells, |r| r.gpm_sm_util_pct);
    let dram = Column::of(&cells, |r| r.gpm_dram_bw_util_pct);
    let rx = Column::of(&cells, |r| r.gpm_nvlink_rx_mib_s);
    let tx = Column::of(&cells, |r| r.gpm_nvlink_tx_mib_s);
    let share = Column::of(&cells, |r| r.gpm_cell_share_pct);
    let figures: Vec<String> = [
        sm.range("%").map(|r| format!("SM activity {r}")),
        dram.range("%")
            .map(|r| format!("DRAM bandwidth {r} of peak")),
        rx.range(" MiB/s").map(|r| format!("NVLink RX {r}")),
        tx.range(" MiB/s").map(|r| format!("NVLink TX {r}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    writeln!(
        out,
        "> GPM (NVML, per cell, over {} cells): {}.",
        cells.len(),
        figures.join(", ")
    )?;
    let busiest = cells
        .iter()
        .filter_map(|r| Some((r, r.gpm_dram_bw_util_pct.filter(|v| v.is_finite())?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((row, dram)) = busiest {
        let sm = row
            .gpm_sm_util_pct
            .map(|v| format!(", SM activity {}%", fmt_num(v)))
            .unwrap_or_default();
        writeln!(
            out,
            "> Most DRAM bandwidth: {} ({}%{sm}).",
            row.cell_key(),
            fmt_num(dram),
        )?;
    }
    if let Some(range) = share.range("%") {
        writeln!(
            out,
            "> A cell's share of the GPM intervals behind its figures: {range} \
             (`gpm_cell_share_pct`; GPM needs 100 ms between samples, so a cell that ran for \
             less at a time is blended with the cells around it)."
        )?;
    }
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::test_rows::row;

    fn with_gpm(arm: &str, bs: u32, metric: &str, sm: f64, dram: f64, share: f64) -> Row {
        Row {
            gpm_sm_util_pct: Some(sm),
            gpm_dram_bw_util_pct: Some(dram),
            gpm_nvlink_rx_mib_s: Some(0.0),
            gpm_nvlink_tx_mib_s: None,
            gpm_cell_share_pct: Some(share),
            ..row("prep", "dsa_target_verify", arm, bs, metric, 10.0)
        }
    }

    fn render(rows: &[Row]) -> String {
        let mut out = String::new();
        write_gpm(&mut out, rows).unwrap();
        out
    }

    #[test]
    fn ranges_over_cells_and_the_busiest_cell() {
        let rows = [
            with_gpm("graph", 1, "step_us", 12.0, 3.5, 40.0),
            with_gpm("graph", 1, "gpu_prep_us", 12.0, 3.5, 40.0), // same cell: counted once
            with_gpm("eager-sync", 256, "step_us", 91.0, 57.25, 100.0),
            row("prep", "dsa_target_verify", "fused", 8, "step_us", 5.0), // no GPM
        ];
        let text = render(&rows);
        assert!(
            text.contains(
                "> GPM (NVML, per cell, over 2 cells): SM activity 12.0–91.0%, \
                 DRAM bandwidth 3.50–57.2% of peak, NVLink RX 0.00–0.00 MiB/s."
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "> Most DRAM bandwidth: prep dsa_target_verify/eager-sync bs=256 block=5 tp1 \
                 (57.2%, SM activity 91.0%)."
            ),
            "{text}"
        );
        assert!(
            text.contains("GPM intervals behind its figures: 40.0–100%"),
            "{text}"
        );
        assert!(!text.contains("NVLink TX"), "{text}");
    }

    #[test]
    fn a_run_without_gpm_gets_no_lines() {
        let rows = [row("prep", "dsa_decode", "graph", 4, "step_us", 20.0)];
        assert_eq!(render(&rows), "");
        assert_eq!(render(&[]), "");
    }
}
