//! Markdown formatters and table orders shared by `summary.md` and `compare`, and the
//! run-wide readings (launch floors, the copy ceiling) `summary.md` and the charts share.

use crate::axes::{Arm, Family, FloorItem, Layout};
use crate::results::csv::{Row, KIND_FLOOR, KIND_PREP, KIND_STEP};
use std::collections::BTreeMap;

/// The arm every other arm is measured against: the "before" of the design.
pub(crate) const BASELINE_ARM: &str = "eager-sync";
/// The "after" the headlines and change charts set against the baseline: graph replay with
/// device-only lengths.
pub(crate) const AFTER_ARM: &str = "graph";
/// The arm with device lengths and eager launches: the host read is its difference to the
/// baseline.
pub(crate) const DEVICE_ARM: &str = "eager-device";

/// Whether a floor item is one a prep's cost is read against: an empty kernel or an empty
/// graph (of any node count), the least it can cost to put that launch on the GPU.
pub(crate) fn is_launch_floor(item: &str) -> bool {
    FloorItem::ALL.iter().any(|i| {
        i.name() == item && matches!(i, FloorItem::EmptyKernel | FloorItem::EmptyGraphNodes(_))
    })
}

/// The launch floors of a run (empty kernel, empty graphs): each item's row with the
/// lowest median.
pub(crate) fn launch_floors(rows: &[Row]) -> BTreeMap<&str, &Row> {
    lowest_launch_floors(rows, |r| (&r.kind, &r.unit, &r.arm, r.median))
}

/// Each launch floor item's lowest `items` (an item's kind, unit, arm and median as
/// `fields` reads them), by item name.
pub(crate) fn lowest_launch_floors<'a, T>(
    items: impl IntoIterator<Item = &'a T>,
    fields: impl for<'t> Fn(&'t T) -> (&'t str, &'t str, &'t str, f64),
) -> BTreeMap<&'a str, &'a T> {
    let mut floors: BTreeMap<&str, &T> = BTreeMap::new();
    for item in items {
        let (kind, unit, arm, median) = fields(item);
        if kind != KIND_FLOOR || unit != "us" || !is_launch_floor(arm) {
            continue;
        }
        let floor = floors.entry(arm).or_insert(item);
        if median < fields(floor).3 {
            *floor = item;
        }
    }
    floors
}

/// The floor a prep cell is read against, as the sweep forms `floor_multiple`
/// ([`FloorItem::of_cell`]), found in `floors`; in a run from before the floor had graphs of
/// several nodes, what that run read it against (the one-node empty graph). Eager arms and
/// unknown ones are read against the empty kernel.
pub(crate) fn floor_of<'a, T>(
    floors: &BTreeMap<&str, &'a T>,
    arm: &str,
    family: &str,
) -> Option<(&'static str, &'a T)> {
    let arm = arm.parse::<Arm>().ok();
    let like = match (arm, family.parse::<Family>()) {
        (Some(arm), Ok(family)) => FloorItem::of_cell(arm, family),
        _ => FloorItem::EmptyKernel,
    };
    let old = arm.map_or(FloorItem::EmptyKernel, FloorItem::of_arm_one_node);
    [like, old]
        .into_iter()
        .find_map(|item| floors.get(item.name()).map(|row| (item.name(), *row)))
}

/// The median of floor item `item`'s `metric` in `rows`.
pub(crate) fn floor_median(rows: &[Row], item: FloorItem, metric: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.kind == KIND_FLOOR && r.arm == item.name() && r.metric == metric)
        .map(|r| r.median)
}

/// The run's bandwidth ceiling: the d2d-copy floor item's `gb_s` (bytes read and written).
pub(crate) fn copy_ceiling(rows: &[Row]) -> Option<f64> {
    floor_median(rows, FloorItem::D2dCopy, "gb_s").filter(|v| v.is_finite() && *v > 0.0)
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

/// Table order of arms ([`Arm::SHOWN`]); `u8::MAX` for a name no arm has.
pub(crate) fn arm_rank(arm: &str) -> u8 {
    Arm::SHOWN
        .iter()
        .position(|a| a.name() == arm)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn floor_row(item: &str, us: f64) -> Row {
        crate::results::csv::test_rows::row(KIND_FLOOR, "", item, 0, "step_us", us)
    }

    #[test]
    fn a_cell_is_read_against_its_like_floor_or_what_an_older_run_used() {
        let rows = [
            floor_row("empty-kernel", 2.0),
            floor_row("empty-graph", 2.5),
            floor_row("empty-graph-2", 5.0),
            floor_row("empty-graph-3", 6.0),
        ];
        let floors = launch_floors(&rows);
        let of = |arm, family| floor_of(&floors, arm, family).map(|(item, _)| item);
        assert_eq!(of("graph", "dsa_decode"), Some("empty-graph-2"));
        assert_eq!(
            of("graph-upload", "dspark_draft_block"),
            Some("empty-graph-3")
        );
        assert_eq!(of("fused", "dspark_draft_block"), Some("empty-graph"));
        assert_eq!(of("eager-sync", "dsa_decode"), Some("empty-kernel"));
        assert_eq!(of("unknown-arm", "dsa_decode"), Some("empty-kernel"));
        // A run from before the chained graphs: graph arms were read against the one node.
        let old = launch_floors(&rows[..2]);
        assert_eq!(
            floor_of(&old, "graph", "dsa_decode").map(|(item, r)| (item, r.median)),
            Some(("empty-graph", 2.5))
        );
    }
}
