//! Markdown formatters and table orders shared by `summary.md` and `compare`, and the
//! run-wide readings (launch floors, the copy ceiling) `summary.md` and the charts share.

use crate::axes::{FloorItem, Layout};
use crate::results::csv::{Row, KIND_FLOOR, KIND_PREP, KIND_STEP};
use std::collections::BTreeMap;

/// The arm every other arm is measured against: the "before" of the design.
pub(crate) const BASELINE_ARM: &str = "eager-sync";
/// The arm with device lengths and eager launches: the host read is its difference to the
/// baseline.
pub(crate) const DEVICE_ARM: &str = "eager-device";

/// Floor items whose cheaper one is the floor a prep's cost is a multiple of: the least
/// it can cost to put any work on the GPU.
const LAUNCH_FLOORS: [&str; 2] = ["empty-kernel", "empty-graph"];

/// The launch floors of a run (empty kernel, empty graph): each item's row with the
/// lowest median.
pub(crate) fn launch_floors(rows: &[Row]) -> BTreeMap<&str, &Row> {
    let mut floors: BTreeMap<&str, &Row> = BTreeMap::new();
    for r in rows.iter().filter(|r| {
        r.kind == KIND_FLOOR && r.unit == "us" && LAUNCH_FLOORS.contains(&r.arm.as_str())
    }) {
        let floor = floors.entry(r.arm.as_str()).or_insert(r);
        if r.median < floor.median {
            *floor = r;
        }
    }
    floors
}

/// The floor an arm is read against, as the sweep forms `floor_multiple`: arms that replay
/// a graph against the empty graph, eager arms (and unknown ones) against the empty kernel.
pub(crate) fn floor_of_arm(arm: &str) -> &'static str {
    arm.parse()
        .map_or(FloorItem::EmptyKernel, FloorItem::of_arm)
        .name()
}

/// The run's bandwidth ceiling: the d2d-copy floor item's `gb_s` (bytes read and written).
pub(crate) fn copy_ceiling(rows: &[Row]) -> Option<f64> {
    rows.iter()
        .find(|r| r.kind == KIND_FLOOR && r.arm == FloorItem::D2dCopy.name() && r.metric == "gb_s")
        .map(|r| r.median)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Table order of floor items: launches, then copies, then anything else.
pub(crate) fn floor_rank(item: &str) -> u8 {
    FloorItem::ALL
        .iter()
        .position(|i| i.name() == item)
        .map_or(u8::MAX, |p| p as u8)
}

/// Table order of kinds: the step (what a PR reader wants first), then prep, then floor.
pub(crate) fn kind_rank(kind: &str) -> u8 {
    [KIND_STEP, KIND_PREP, KIND_FLOOR]
        .iter()
        .position(|k| *k == kind)
        .map_or(u8::MAX, |p| p as u8)
}

/// Table order of layouts: by parallelism, not alphabetically (`tp8` before `dep2`).
pub(crate) fn layout_rank(layout: &str) -> u8 {
    Layout::all()
        .iter()
        .position(|l| l.to_string() == layout)
        .map_or(u8::MAX, |p| p as u8)
}

/// Table order of arms: from the "before" to the closest to the floor.
pub(crate) fn arm_rank(arm: &str) -> u8 {
    [BASELINE_ARM, DEVICE_ARM, "graph-upload", "graph", "fused"]
        .iter()
        .position(|a| *a == arm)
        .map_or(u8::MAX, |p| p as u8)
}

/// A number with as many digits as its size deserves: 2,280 · 412 · 45.2 · 4.50.
pub(crate) fn fmt_num(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_string();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        let digits = format!("{:.0}", magnitude);
        let mut grouped = String::new();
        for (i, digit) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        format!("{}{grouped}", if value < 0.0 { "-" } else { "" })
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

pub(crate) fn fmt_pct(pct: f64) -> String {
    format!("{pct:+.1}%")
}

pub(crate) fn fmt_interval(lo_pct: f64, hi_pct: f64) -> String {
    format!("[{lo_pct:+.1}, {hi_pct:+.1}]")
}

/// Text safe inside a markdown table cell: a `|` would end the cell.
pub(crate) fn table_cell(text: &str) -> String {
    text.replace('|', "\\|")
}
