//! Each side's launch floors, and a row's change over the floor it is read against: shown
//! beside its change, never a verdict.

use super::side::{Entry, Side};
use crate::report::change::{is_time, ratio_change, Change};
use crate::report::format::{floor_of, lowest_launch_floors};
use crate::results::csv::KIND_PREP;
use std::collections::BTreeMap;

/// Each side's launch floors (empty kernel, empty graphs): each item's lowest row.
pub(super) fn launch_floors(side: &Side) -> BTreeMap<&str, &Entry> {
    lowest_launch_floors(&side.entries, |e| (&e.kind, &e.unit, &e.arm, e.median))
}

/// Each side's launch floors, which a row's change is read against.
pub(super) struct Floors<'s> {
    pub(super) base: BTreeMap<&'s str, &'s Entry>,
    pub(super) new: BTreeMap<&'s str, &'s Entry>,
}

impl<'s> Floors<'s> {
    pub(super) fn of(base: &'s Side, new: &'s Side) -> Self {
        Floors {
            base: launch_floors(base),
            new: launch_floors(new),
        }
    }

    /// The floor rows each side's cell is read against, when both read it against the same
    /// item: an eager arm against a graph arm has no common floor, nor has a run with graph
    /// floors of several nodes against one without.
    fn own_floor(&self, base: &Entry, new: &Entry) -> Option<(&'s Entry, &'s Entry)> {
        let (item, base_floor) = floor_of(&self.base, &base.arm, &base.family)?;
        let (new_item, new_floor) = floor_of(&self.new, &new.arm, &new.family)?;
        (item == new_item).then_some((base_floor, new_floor))
    }

    /// The row's change over its own floor: prep times only.
    pub(super) fn vs_floor(&self, base: &Entry, new: &Entry) -> Option<Change> {
        if &*base.kind != KIND_PREP || !is_time(&new.metric, &new.unit) {
            return None;
        }
        let (base_floor, new_floor) = self.own_floor(base, new)?;
        ratio_change(&[new, base_floor], &[base, new_floor])
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, floor, row_of};
    use crate::axes::floor_item::HOST_REFERENCE;
    use crate::report::change::Verdict;
    use crate::report::compare::compare_rows;

    #[test]
    fn floors_get_no_verdict_and_are_yardsticks_for_their_own_arms() {
        let base = vec![
            floor("empty-kernel", 5.0, 1.0),
            floor("empty-graph", 2.0, 1.0),
            cell("eager-sync", "step_us", 50.0, 1.0),
            cell("eager-device", "step_us", 30.0, 1.0),
            cell("fused", "step_us", 10.0, 1.0),
        ];
        let mut new = base.clone();
        new[0] = floor("empty-kernel", 10.0, 1.0);
        let c = compare_rows(&base, &new, None, 2.0).unwrap();
        assert_eq!(c.matched.len(), 3, "floors are not cells");
        assert_eq!(c.count(Verdict::Same), 3);
        let moved: Vec<(&str, f64)> = c
            .floors
            .iter()
            .map(|f| (&*c.floor_entries(f).0.arm, f.change.unwrap().pct.round()))
            .collect();
        assert_eq!(moved, [("empty-kernel", 100.0), ("empty-graph", 0.0)]);
        let vs = |arm| row_of(&c, arm, "step_us").vs_floor.unwrap().pct.round();
        assert_eq!((vs("eager-sync"), vs("fused")), (-50.0, 0.0));
        // Two arms read against one floor share a yardstick; eager against graph does not.
        let arms = |b, n| compare_rows(&base, &new, Some((b, n)), 2.0).unwrap();
        let eager = arms("eager-sync", "eager-device");
        assert_eq!(
            eager.matched[0].vs_floor.unwrap().pct.round(),
            -70.0,
            "(30/10)/(50/5)"
        );
        assert_eq!(arms("eager-sync", "fused").matched[0].vs_floor, None);
        assert_eq!(
            arms("eager-sync", "fused").floors.len(),
            2,
            "floors move in arm mode"
        );
    }

    /// A row's call is its own change's: a floor (or the host-speed reference) that moved as
    /// the row did relabels nothing, and the change over the row's own floor is shown beside it.
    #[test]
    fn a_call_stands_whatever_the_floors_and_the_host_did() {
        let up = |v: f64, pct: f64| v * (1.0 + pct / 100.0);
        let side = |pct: f64| {
            vec![
                floor("empty-kernel", up(4.0, pct), 0.3),
                floor("empty-graph-2", up(2.2, -pct), 0.5),
                floor(HOST_REFERENCE, up(1.5, pct), 0.3),
                cell("eager-sync", "host_issue_us", up(10.0, pct), 0.3),
                cell("graph", "step_us", 10.0, 0.5),
                cell("graph", "floor_multiple", 10.0 / up(2.2, -pct), 0.5),
            ]
        };
        let c = compare_rows(&side(0.0), &side(20.0), None, 2.0).unwrap();
        // Eager-sync's `host_issue_us` 20% slower, as its floor (the empty kernel) and the host.
        let issue = row_of(&c, "eager-sync", "host_issue_us");
        assert_eq!(
            (issue.called, issue.verdict),
            (Verdict::Slower, Verdict::Slower)
        );
        assert!(issue.vs_floor.unwrap().within(2.0), "{issue:?}");
        // Graph's floor multiple risen only because its floor got faster: its own call.
        let multiple = row_of(&c, "graph", "floor_multiple");
        assert_eq!(multiple.verdict, Verdict::Slower);
        assert_eq!(row_of(&c, "graph", "step_us").verdict, Verdict::Same);
        assert_eq!(c.count(Verdict::Slower), 2);
    }
}
