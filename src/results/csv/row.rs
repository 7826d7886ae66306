//! A results row ([`Row`]): its fields, the header they are written under ([`COLUMNS`], with
//! the ones older files lack), and the cell every metric row of a point shares ([`CellKey`]).

use super::family::cell_family;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `prep`, `floor` or `step`.
    pub kind: String,
    /// Metadata family (`dspark_draft_block`, `dsa_decode`, ...); `floor` for floor rows;
    /// for step rows, the family pair the step prepares (`dspark+dsa_target_verify`), with
    /// ` host x<scale>` after it for what-if host scales other than 1.
    pub family: String,
    /// `eager-sync`, `eager-device`, `graph`, `graph-upload`, `fused`; for floor rows the
    /// floor item ([`crate::axes::FloorItem::name`]) or `harness`.
    pub arm: String,
    pub batch_size: u32,
    /// Draft block size (gamma) for dspark, draft tokens per request (N) for the DSA families.
    pub block_size: u32,
    /// `tp1`, `tp2`, `tp4`, `tp8`, `dep2`, `dep4`.
    pub layout: String,
    /// A step row's what-if factor on every host cost (`steps --host-scale`); empty at 1, on
    /// every other row, and in CSVs of a metaprep before the column (whose step rows name the
    /// scale in `family`, read back into this column).
    #[serde(default)]
    pub host_scale: Option<f64>,
    /// True when the layout needs more GPUs than the run had and one rank ran on one GPU.
    pub emulated: bool,
    /// Metric name, e.g. `step_us`, `gpu_prep_us`, `host_issue_us`, `host_blocked_us`,
    /// `floor_multiple`, `read_cost_us`, `step_ratio_vs_eager_sync`, `bytes`, `gb_s`,
    /// `itl_us`, `throughput_tok_s`, `occupancy`, `gap_us`.
    pub metric: String,
    /// `us`, `tok/s`, `ratio`, `x`, `B`, `GB/s`.
    pub unit: String,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// 95% confidence interval of the median.
    pub ci_lo: f64,
    pub ci_hi: f64,
    /// Finite samples behind the median (over all rounds of a row measured in rounds).
    pub samples: u64,
    /// Rounds the row was measured in (`sweep`: its median is the median of the rounds'
    /// medians and its interval spans the rounds); 0 for a row measured in one stretch
    /// (`steps`, and every row of a sweep by a metaprep before rounds, whose CSV has no such
    /// column).
    #[serde(default)]
    pub rounds: u32,
    /// Measured in rounds: `precision`, `max-rounds` or `time-cap` (what stopped the cell's
    /// rounds); in one stretch: `ci` (converged), `time-cap`, `sample-cap` or `fixed`;
    /// `derived` for a difference or ratio of other rows.
    pub stop_reason: String,
    /// NVML saw a throttle / clock-event reason other than idle during the cell.
    pub throttled: bool,
    /// Raw NVML clock-event (throttle) reason bits OR-ed over the cell, hex; empty without NVML.
    pub clock_event_reasons: String,
    /// NVML medians over the cell; empty without NVML.
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub power_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub gpu_util_pct: Option<f64>,
    /// NVML GPM over the cell (Hopper and newer), each the mean over the GPM intervals the
    /// cell ran in, weighted by its time in each: SM activity (% of time an SM had a warp),
    /// DRAM bandwidth utilisation (% of peak), NVLink receive / transmit over all links
    /// (MiB/s). Empty where GPM is unavailable (env.json's notes say why) and in CSVs of a
    /// metaprep before GPM.
    #[serde(default)]
    pub gpm_sm_util_pct: Option<f64>,
    #[serde(default)]
    pub gpm_dram_bw_util_pct: Option<f64>,
    #[serde(default)]
    pub gpm_nvlink_rx_mib_s: Option<f64>,
    #[serde(default)]
    pub gpm_nvlink_tx_mib_s: Option<f64>,
    /// The cell's share (%) of the time covered by the GPM intervals behind those figures:
    /// GPM needs 100 ms between samples, so a cell visited for a few ms at a time is blended
    /// with the cells around it, and this says by how much.
    #[serde(default)]
    pub gpm_cell_share_pct: Option<f64>,
}

/// The header of a results CSV, in `Row` field order. `read_rows` checks a file's header
/// against it so that a CSV from another tool or version fails with the columns named.
pub const COLUMNS: &[&str] = &[
    "kind",
    "family",
    "arm",
    "batch_size",
    "block_size",
    "layout",
    "host_scale",
    "emulated",
    "metric",
    "unit",
    "median",
    "p10",
    "p90",
    "ci_lo",
    "ci_hi",
    "samples",
    "rounds",
    "stop_reason",
    "throttled",
    "clock_event_reasons",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "temp_c",
    "gpu_util_pct",
    "gpm_sm_util_pct",
    "gpm_dram_bw_util_pct",
    "gpm_nvlink_rx_mib_s",
    "gpm_nvlink_tx_mib_s",
    "gpm_cell_share_pct",
];

/// Columns an older metaprep did not write: a file without them reads with their defaults.
pub(crate) const OPTIONAL_COLUMNS: &[&str] = &[
    "host_scale",
    "rounds",
    "gpm_sm_util_pct",
    "gpm_dram_bw_util_pct",
    "gpm_nvlink_rx_mib_s",
    "gpm_nvlink_tx_mib_s",
    "gpm_cell_share_pct",
];

/// How many of [`COLUMNS`], from the first, are a [`CellKey`]'s fields, in its field order.
pub const CELL_KEY_COLUMNS: usize = 6;

/// Identifies one cell of a sweep: every metric row of a cell shares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CellKey {
    pub kind: String,
    pub family: String,
    pub arm: String,
    pub batch_size: u32,
    pub block_size: u32,
    pub layout: String,
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{} bs={} block={} {}",
            self.kind, self.family, self.arm, self.batch_size, self.block_size, self.layout
        )
    }
}

impl Row {
    /// The row's family with its host scale ([`cell_family`]): what its cell is keyed and
    /// named by.
    pub fn cell_family(&self) -> String {
        cell_family(&self.family, self.host_scale)
    }

    /// The what-if host scale of the row (1 for every row not at one).
    pub fn host_scale(&self) -> f64 {
        self.host_scale.unwrap_or(1.0)
    }

    pub fn cell_key(&self) -> CellKey {
        CellKey {
            kind: self.kind.clone(),
            family: self.cell_family(),
            arm: self.arm.clone(),
            batch_size: self.batch_size,
            block_size: self.block_size,
            layout: self.layout.clone(),
        }
    }
}

/// The cells that already have rows. A sweep writes the whole file atomically after each
/// cell, so a cell present in the file is complete and `--resume` can skip it.
pub fn completed_cells(rows: &[Row]) -> HashSet<CellKey> {
    rows.iter().map(Row::cell_key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::fixtures::sample_rows;

    #[test]
    fn columns_match_the_row_serialisation() {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(&sample_rows()[0]).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
    }

    #[test]
    fn completed_cells_group_metrics_of_a_cell() {
        let cells = completed_cells(&sample_rows());
        assert_eq!(cells.len(), 2);
        assert!(cells.contains(&sample_rows()[0].cell_key()));
        let mut other = sample_rows()[0].clone();
        other.batch_size = 8;
        assert!(!cells.contains(&other.cell_key()));
    }
}
