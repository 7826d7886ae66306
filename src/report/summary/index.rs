//! The rows of a run indexed once for the summary ([`Index`]): each cell's rows by metric,
//! the throttled cells, the emulated groups, and each kind's cells grouped by (family,
//! layout) in table order; and how a group's headings name it. Every section asks this
//! index, never the rows one by one.

use crate::report::format::{arm_rank, layout_rank};
use crate::results::csv::{CellKey, Row, KIND_STEP};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Rows by cell and metric, for lookups; iteration goes through sorted groups instead. Every
/// per-cell and per-group question is answered from sets built in one pass over the rows:
/// asking the rows themselves once per cell made `report` quadratic, its time nearly all spent
/// scanning every row for each cell's throttle flag
/// (docs/h200-findings.md#host-side-costs-of-the-tools).
pub(crate) struct Index<'a> {
    pub(crate) rows: &'a [Row],
    /// Each cell's rows by metric: a lookup borrows its key, never copies it.
    by_cell: HashMap<CellKey, HashMap<&'a str, &'a Row>>,
    throttled: HashSet<CellKey>,
    /// (kind, family, layout) with an emulated row.
    emulated: HashSet<(&'a str, String, &'a str)>,
    /// Each kind's cells by group ([`Index::groups`]), formed in the same pass.
    groups: HashMap<&'a str, Groups>,
}

/// A kind's cells grouped by (family, layout), each group's cells in table order: batch
/// size, block size, arm.
pub(super) type Groups = BTreeMap<GroupKey, BTreeSet<SortedCell>>;

impl<'a> Index<'a> {
    pub(crate) fn new(rows: &'a [Row]) -> Self {
        let mut by_cell = HashMap::new();
        let mut throttled = HashSet::new();
        let mut emulated = HashSet::new();
        let mut groups: HashMap<&str, Groups> = HashMap::new();
        for row in rows {
            let key = row.cell_key();
            (groups.entry(row.kind.as_str()).or_default())
                .entry(GroupKey {
                    family: row.cell_family(),
                    layout_rank: layout_rank(&row.layout),
                    layout: row.layout.clone(),
                })
                .or_default()
                .insert(SortedCell {
                    batch_size: row.batch_size,
                    block_size: row.block_size,
                    arm_rank: arm_rank(&row.arm),
                    cell: key.clone(),
                });
            if row.throttled {
                throttled.insert(key.clone());
            }
            if row.emulated {
                emulated.insert((row.kind.as_str(), row.cell_family(), row.layout.as_str()));
            }
            by_cell
                .entry(key)
                .or_insert_with(HashMap::new)
                .entry(row.metric.as_str())
                .or_insert(row);
        }
        Index {
            rows,
            by_cell,
            throttled,
            emulated,
            groups,
        }
    }

    pub(crate) fn get(&self, cell: &CellKey, metric: &str) -> Option<&'a Row> {
        self.by_cell.get(cell)?.get(metric).copied()
    }

    /// The cells of one kind grouped by (family, layout), each group's cells in table
    /// order: batch size, block size, arm.
    pub(super) fn groups(&self, kind: &str) -> &Groups {
        static NONE: Groups = BTreeMap::new();
        self.groups.get(kind).unwrap_or(&NONE)
    }

    /// Whether any row of the cell was throttled.
    pub(super) fn throttled(&self, cell: &CellKey) -> bool {
        self.throttled.contains(cell)
    }

    pub(super) fn emulated(&self, kind: &str, group: &GroupKey) -> bool {
        self.emulated
            .contains(&(kind, group.family.clone(), group.layout.as_str()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GroupKey {
    pub(super) family: String,
    pub(super) layout_rank: u8,
    pub(super) layout: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SortedCell {
    pub(super) batch_size: u32,
    pub(super) block_size: u32,
    pub(super) arm_rank: u8,
    pub(super) cell: CellKey,
}

impl SortedCell {
    pub(super) fn with_arm(&self, arm: &str) -> CellKey {
        self.cell.with_arm(arm)
    }
}

/// `tp8 (emulated), dspark+dsa_target_verify` for a step group, `dsa_decode, tp1` for a prep
/// group: how its headings and table labels name it.
pub(super) fn group_title(index: &Index, kind: &str, group: &GroupKey) -> String {
    let layout = layout_label(index, kind, group);
    if kind == KIND_STEP {
        format!("{layout}, {}", group.family)
    } else {
        format!("{}, {layout}", group.family)
    }
}

/// A group's layout as tables name it: "tp8 (emulated)" where it ran on fewer GPUs.
pub(super) fn layout_label(index: &Index, kind: &str, group: &GroupKey) -> String {
    match index.emulated(kind, group) {
        true => format!("{} (emulated)", group.layout),
        false => group.layout.clone(),
    }
}
