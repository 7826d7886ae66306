//! A results row ([`Row`]): its fields, the header they are written under ([`COLUMNS`], with
//! the ones older files lack), and the cell every metric row of a point shares ([`CellKey`]).

use super::family::{cell_family, named_family};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};

/// One metric of one cell. Its first seven fields are its [`CellKey`]'s ([`Row::cell_key`]),
/// kept flat rather than a `#[serde(flatten)]` key: the csv crate writes a flattened field as
/// a map, which it refuses, and reads one by guessing each field's type, which refuses an
/// empty `host_scale` and loses the column a bad field's error names.
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

/// How many of [`COLUMNS`], from the first, a [`CellKey`] serialises as: `rounds.csv`'s
/// first columns (`host_scale`, the next, is named in its family there).
pub const CELL_KEY_COLUMNS: usize = 6;

/// What identifies a cell, the one definition: every metric row of a cell shares it (a row's
/// first columns, [`Row::cell_key`]) and the harness measures a cell by it
/// ([`crate::harness::rows::CellId`]). Its fields are the columns a row writes them in.
///
/// Two keys are one cell when their kind, cell family ([`CellKey::cell_family`]: the family
/// with its host scale), arm, sizes and layout agree, and they sort in that order; so a key
/// built from a family that already names its scale (a table's group, a `rounds.csv` line)
/// is the cell's own.
#[derive(Debug, Clone)]
pub struct CellKey {
    pub kind: String,
    pub family: String,
    pub arm: String,
    pub batch_size: u32,
    pub block_size: u32,
    pub layout: String,
    /// A step cell's what-if host scale ([`Row::host_scale`]); `None` at 1 and off steps.
    pub host_scale: Option<f64>,
}

impl CellKey {
    /// The cell of `kind family/arm` at (batch size, block size) on `layout`, at no host
    /// scale.
    pub fn new(
        kind: &str,
        family: &str,
        arm: &str,
        (batch_size, block_size): (u32, u32),
        layout: &str,
    ) -> Self {
        CellKey {
            kind: kind.into(),
            family: family.into(),
            arm: arm.into(),
            batch_size,
            block_size,
            layout: layout.into(),
            host_scale: None,
        }
    }

    /// The family the cell is named by: with ` host x<scale>` after it for a host scale
    /// other than 1 ([`cell_family`]).
    pub fn cell_family(&self) -> String {
        cell_family(&self.family, self.host_scale)
    }

    /// The same cell's shape with another arm.
    pub fn with_arm(&self, arm: &str) -> CellKey {
        CellKey {
            arm: arm.into(),
            ..self.clone()
        }
    }

    /// What two keys are compared, hashed and ordered by (the cell family, not its parts).
    fn named(&self) -> CellName<'_> {
        cell_name(
            [&self.kind, &self.family, &self.arm, &self.layout],
            (self.batch_size, self.block_size),
            self.host_scale,
        )
    }
}

/// A cell as it is named, borrowed: kind, family with its host scale ([`named_family`]: a
/// scale of 1 is no scale), arm, batch, block and layout. What [`CellKey`]s are compared,
/// hashed and ordered by, and what a row's cell is without a key's strings.
pub type CellName<'a> = (&'a str, Cow<'a, str>, &'a str, u32, u32, &'a str);

/// The name of the cell of `[kind, family, arm, layout]` at `(batch, block)` and
/// `host_scale`.
fn cell_name<'a>(
    [kind, family, arm, layout]: [&'a str; 4],
    (batch_size, block_size): (u32, u32),
    host_scale: Option<f64>,
) -> CellName<'a> {
    let family = named_family(family, host_scale);
    (kind, family, arm, batch_size, block_size, layout)
}

impl PartialEq for CellKey {
    fn eq(&self, other: &Self) -> bool {
        self.named() == other.named()
    }
}

impl Eq for CellKey {}

impl Hash for CellKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.named().hash(state);
    }
}

impl PartialOrd for CellKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CellKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.named().cmp(&other.named())
    }
}

/// The first [`CELL_KEY_COLUMNS`] columns, the family as the cell is named.
impl Serialize for CellKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, family, arm, batch_size, block_size, layout) = self.named();
        let mut key = serializer.serialize_struct("CellKey", CELL_KEY_COLUMNS)?;
        key.serialize_field("kind", kind)?;
        key.serialize_field("family", &family)?;
        key.serialize_field("arm", arm)?;
        key.serialize_field("batch_size", &batch_size)?;
        key.serialize_field("block_size", &block_size)?;
        key.serialize_field("layout", layout)?;
        key.end()
    }
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, family, arm, batch_size, block_size, layout) = self.named();
        write!(
            f,
            "{kind} {family}/{arm} bs={batch_size} block={block_size} {layout}"
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

    /// The row's cell as it is named, borrowed (what its [`CellKey`] compares by).
    pub fn cell_name(&self) -> CellName<'_> {
        cell_name(
            [&self.kind, &self.family, &self.arm, &self.layout],
            (self.batch_size, self.block_size),
            self.host_scale,
        )
    }

    /// The row's cell: its first columns.
    pub fn cell_key(&self) -> CellKey {
        CellKey {
            kind: self.kind.clone(),
            family: self.family.clone(),
            arm: self.arm.clone(),
            batch_size: self.batch_size,
            block_size: self.block_size,
            layout: self.layout.clone(),
            host_scale: self.host_scale,
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
    use crate::results::csv::STEP_FAMILY;

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

    #[test]
    fn a_key_is_its_cell_family_and_every_other_field() {
        let plain = CellKey::new("step", STEP_FAMILY, "graph", (4, 3), "tp2");
        let scaled = CellKey {
            host_scale: Some(2.0),
            ..plain.clone()
        };
        // Each field on its own makes another cell; a scale of 1 is no scale.
        let others = [
            CellKey::new("prep", STEP_FAMILY, "graph", (4, 3), "tp2"),
            CellKey::new("step", "dsa_decode", "graph", (4, 3), "tp2"),
            plain.with_arm("fused"),
            CellKey::new("step", STEP_FAMILY, "graph", (8, 3), "tp2"),
            CellKey::new("step", STEP_FAMILY, "graph", (4, 5), "tp2"),
            CellKey::new("step", STEP_FAMILY, "graph", (4, 3), "tp4"),
            scaled.clone(),
        ];
        assert!(others.iter().all(|k| *k != plain), "{others:?}");
        let at_one = CellKey {
            host_scale: Some(1.0),
            ..plain.clone()
        };
        assert_eq!(at_one, plain);
        // A family naming its scale, as tables and rounds.csv name the cell, is the same
        // cell: equal, hashed alike, in the same place.
        let named = CellKey::new("step", &scaled.cell_family(), "graph", (4, 3), "tp2");
        assert_eq!(named, scaled);
        assert_eq!(HashSet::from([named.clone()]).get(&scaled), Some(&named));
        assert_eq!(named.cmp(&scaled), Ordering::Equal);
        assert_eq!(
            scaled.to_string(),
            "step dspark+dsa_target_verify host x2/graph bs=4 block=3 tp2"
        );
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        writer.serialize(&scaled).unwrap();
        assert_eq!(
            String::from_utf8(writer.into_inner().unwrap()).unwrap(),
            "step,dspark+dsa_target_verify host x2,graph,4,3,tp2\n"
        );
    }
}
