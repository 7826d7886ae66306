//! The references that explain a call: each side's launch floors and the host-speed
//! reference, and the rules that relabel a call they prove (`floor moved`, `host moved`).

use super::super::side::{Entry, Side};
use super::Matched;
use crate::report::change::{
    better_direction, call_of_time_move, is_time, ratio_change, relative_change, Better, Change,
    Verdict,
};
use crate::report::format::{floor_of, is_launch_floor};
use crate::results::csv::{KIND_FLOOR, KIND_PREP};
use crate::results::pacing::{host_paced, TwinReference};
use std::collections::BTreeMap;

/// Each side's launch floors (empty kernel, empty graphs): each item's lowest row.
pub(super) fn launch_floors(side: &Side) -> BTreeMap<&str, &Entry> {
    let mut floors: BTreeMap<&str, &Entry> = BTreeMap::new();
    for e in side
        .entries
        .iter()
        .filter(|e| &*e.kind == KIND_FLOOR && &*e.unit == "us" && is_launch_floor(&e.arm))
    {
        let floor = floors.entry(&e.arm).or_insert(e);
        if e.median < floor.median {
            *floor = e;
        }
    }
    floors
}

/// Each twin reference's own change (the host-speed reference's, the empty graphs'), where both
/// sides timed it.
pub(super) type TwinMoves = [(TwinReference, Option<Change>); TwinReference::ALL.len()];

/// What the verdicts read beside the pair itself: each side's floors and host reference.
pub(super) struct References<'s> {
    pub(super) base_floors: BTreeMap<&'s str, &'s Entry>,
    pub(super) new_floors: BTreeMap<&'s str, &'s Entry>,
    pub(super) twin_references: TwinMoves,
    pub(super) threshold_pct: f64,
}

impl<'s> References<'s> {
    /// The floor rows each side's cell is read against, when both read it against the same
    /// item: an eager arm against a graph arm has no common floor, nor has a run with graph
    /// floors of several nodes against one without.
    fn own_floor(&self, base: &Entry, new: &Entry) -> Option<(&'s Entry, &'s Entry)> {
        let (item, base_floor) = floor_of(&self.base_floors, &base.arm, &base.family)?;
        let (new_item, new_floor) = floor_of(&self.new_floors, &new.arm, &new.family)?;
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

    /// The call a reference's `change` makes on a row improving `better`: the reference moved
    /// beyond the threshold, and a row that moved with it is called so.
    fn pushes(&self, change: Option<Change>, better: Better) -> Option<Verdict> {
        call_of_time_move(change?.beyond(self.threshold_pct)?, better)
    }

    /// A host-paced row's call that its own floor or the host explains: the reference moved
    /// beyond the threshold the way that makes this call, and the row's change over that
    /// reference is shown within the threshold. Nothing else is proof: a floor the row is not
    /// read against, or a change over the floor not shown to be small, explains nothing.
    /// A GPU-paced row's `uncertain` is `same` where its twin shows it ([`Self::shown_same`]).
    pub(super) fn explain(&self, m: &Matched, base: &Entry, new: &Entry) -> Option<Verdict> {
        if base.arm != new.arm {
            return None;
        }
        if !host_paced(&new.arm, &new.metric) {
            return self.shown_same(m).then_some(Verdict::Same);
        }
        if !m.called.is_call() {
            return None;
        }
        let better = better_direction(&new.metric, &new.unit);
        let t = self.threshold_pct;
        let floor = self
            .own_floor(base, new)
            .and_then(|(b, n)| relative_change(b, n));
        if self.pushes(floor, better) == Some(m.called) && m.vs_floor.is_some_and(|c| c.within(t)) {
            return Some(Verdict::FloorMoved);
        }
        let reference = self
            .twin_references
            .iter()
            .find(|(r, _)| Some(*r) == m.twin_reference)
            .and_then(|(_, change)| *change);
        if self.pushes(reference, better) == Some(m.called)
            && m.per_host.is_some_and(|c| c.within(t))
        {
            return Some(Verdict::HostMoved);
        }
        // Between runs the host's speed moves by more than one run's rounds can see (the
        // host reference ±13–19% between back-to-back sweeps on the H200): a raw call on a
        // host-paced row stands only where the row's change per unit of host speed makes it
        // too.
        if m.per_host.is_some() && self.pushes(m.per_host, better) != Some(m.called) {
            return Some(Verdict::Uncertain);
        }
        None
    }

    /// Whether a GPU-paced row the raw change leaves `uncertain` is shown unchanged by its twin
    /// over the two-node empty graph: the raw median within the threshold and the twin's whole
    /// interval too. A process draws how fast the GPU starts a graph's work, and a graph arm's
    /// step carries that draw (fused's per-process level r = 0.78 with the two-node graph's on
    /// the H200), so its raw interval spans the processes' spread; over the same round's
    /// two-node graph the spread narrows (fused bs 8: 2.37% to 1.73% between processes), and a
    /// change of the code moves the twin as it moves the row, the floor being no code of the
    /// run's. No call is made or excused this way: a raw `slower` stands.
    fn shown_same(&self, m: &Matched) -> bool {
        let t = self.threshold_pct;
        m.called == Verdict::Uncertain
            && m.twin_reference == Some(TwinReference::EmptyGraph2)
            && m.change.is_some_and(|c| c.median_beyond(t).is_none())
            && m.per_host.is_some_and(|c| c.within(t))
    }

    /// A floor multiple's call its floor explains: the floor's median moved beyond the
    /// threshold the other way (a faster floor raises the multiple) and the floor is not
    /// shown unchanged, while the cell's own `step_us`, which is gated itself, does not make
    /// the call. The multiple is the step over the floor of the same round: with the step
    /// not called, its call is the floor's move, which a launch floor makes between
    /// processes (the empty graph −12.6% [−20.7, +2.9] in an A/A pair on the H200).
    pub(super) fn explain_multiple(
        &self,
        m: &Matched,
        base: &Entry,
        new: &Entry,
        step: Option<Change>,
    ) -> bool {
        let t = self.threshold_pct;
        let floor = self
            .own_floor(base, new)
            .and_then(|(b, n)| relative_change(b, n))
            .filter(|f| !f.within(t));
        let floor_median = floor.and_then(|f| f.median_beyond(t));
        let raises = match floor_median.and_then(|moved| call_of_time_move(moved, Better::Lower)) {
            Some(Verdict::Faster) => Some(Verdict::Slower),
            Some(Verdict::Slower) => Some(Verdict::Faster),
            _ => None,
        };
        m.called.is_call()
            && raises == Some(m.called)
            && step.is_some()
            && self.pushes(step, Better::Lower) != Some(m.called)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, floor, row_of, verdicts};
    use super::super::Comparison;
    use crate::axes::floor_item::HOST_REFERENCE;
    use crate::report::change::Verdict;
    use crate::report::compare::compare_rows;
    use crate::results::csv::Row;
    use crate::results::pacing::TwinReference;

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
        assert_eq!(c.moved_floors().len(), 1);
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

    /// BASE and NEW of one eager-sync host time (±3%, as real eager rows have at best), the
    /// empty kernel (its floor) and the two-node empty graph (the floor of DSA decode's graph
    /// arm, not of eager-sync): NEW's row `row_pct` slower, its floors as given.
    fn eager_against(
        row_pct: f64,
        kernel_pct: f64,
        graph_pct: f64,
        floor_width: f64,
    ) -> Comparison {
        let up = |v: f64, pct: f64| v * (1.0 + pct / 100.0);
        let base = vec![
            floor("empty-kernel", 4.0, floor_width),
            floor("empty-graph-2", 5.0, floor_width),
            cell("eager-sync", "host_issue_us", 10.0, 0.3),
        ];
        let new = vec![
            floor("empty-kernel", up(4.0, kernel_pct), floor_width),
            floor("empty-graph-2", up(5.0, graph_pct), floor_width),
            cell("eager-sync", "host_issue_us", up(10.0, row_pct), 0.3),
        ];
        compare_rows(&base, &new, None, 2.0).unwrap()
    }

    #[test]
    fn only_a_rows_own_floor_moved_the_same_way_with_the_change_over_it_shown_small_excuses_it() {
        // (row, its own floor, the graph's floor, both floors' width) in %, and the verdict.
        let cases = [
            // Its own floor 20% slower, the row 20% slower, tight enough to show ~0% over it.
            ((20.0, 20.0, 0.0, 0.3), Verdict::FloorMoved),
            // Another floor moving excuses nothing: the row is not read against the graph's
            // floor. (A rule asking whether *any* launch floor moved, or whether all that moved
            // agree, would relabel this one.)
            ((20.0, 0.0, 20.0, 0.3), Verdict::Slower),
            // Its floor moved the other way: no excuse.
            ((20.0, -20.0, 0.0, 0.3), Verdict::Slower),
            // The row moved further than its floor: +18% over it is not within the threshold.
            ((30.0, 10.0, 10.0, 0.3), Verdict::Slower),
            // With floors as wide as a real empty kernel's (±8%) the change over the floor
            // cannot be shown within ±2%: not proven, so the call stands.
            ((20.0, 20.0, 20.0, 8.0), Verdict::Slower),
        ];
        for ((row, kernel, graph, width), expected) in cases {
            let c = eager_against(row, kernel, graph, width);
            assert_eq!(
                c.matched[0].verdict, expected,
                "{row} {kernel} {graph} {width}"
            );
        }
        // A row the GPU paces is never excused by a launch floor.
        let base = vec![
            floor("empty-graph-2", 5.0, 0.3),
            cell("graph", "step_us", 10.0, 0.3),
        ];
        let new = vec![
            floor("empty-graph-2", 6.0, 0.3),
            cell("graph", "step_us", 12.0, 0.3),
        ];
        assert_eq!(verdicts(&base, &new), [Verdict::Slower]);
    }

    #[test]
    fn the_host_reference_excuses_host_paced_rows_only_with_their_twin_within_the_threshold() {
        let up = |v: f64, pct: f64| v * (1.0 + pct / 100.0);
        let side = |host_pct: f64, row_pct: f64, twin_pct: f64| {
            vec![
                floor(HOST_REFERENCE, up(1.5, host_pct), 0.3),
                cell("graph", "host_issue_us", up(1.3, row_pct), 3.0),
                cell(
                    "graph",
                    "host_issue_us_per_host_ref",
                    up(0.9, twin_pct),
                    0.5,
                ),
            ]
        };
        let base = side(0.0, 0.0, 0.0);
        let c = compare_rows(&base, &side(50.0, 50.0, 0.2), None, 2.0).unwrap();
        assert_eq!(c.matched.len(), 1, "the twin rides with its row");
        let m = &c.matched[0];
        assert_eq!((m.called, m.verdict), (Verdict::Slower, Verdict::HostMoved));
        assert!(m.per_host.unwrap().pct.abs() < 0.5);
        assert!((c.host().unwrap().change.unwrap().pct - 50.0).abs() < 1e-9);
        // The row moved beyond the host: per unit of host speed +10%.
        assert_eq!(verdicts(&base, &side(50.0, 65.0, 10.0)), [Verdict::Slower]);
        // The host did not move: nothing to excuse it, and per unit of host speed the row
        // rose as much.
        assert_eq!(verdicts(&base, &side(0.0, 50.0, 50.0)), [Verdict::Slower]);
        // The host got faster: it explains no row called slower.
        assert_eq!(
            verdicts(&base, &side(-30.0, 50.0, 114.0)),
            [Verdict::Slower]
        );
    }

    /// As wide as an A/A pair of sweeps on the H200 (results/2026-12-01-h200-sweep-aa/, in git
    /// history at c86e24c): the
    /// host reference ±13–19% between processes, fused `host_issue_us` +34.7% [+3.3, +54.5]
    /// raw and +23.8% [−0.8, +41.6] per unit of host speed.
    #[test]
    fn a_host_paced_call_its_change_per_unit_of_host_speed_does_not_make_is_uncertain() {
        let side = |host: f64, raw: f64, raw_pct: f64, twin_us: f64, twin_pct: f64| {
            vec![
                floor(HOST_REFERENCE, host, 13.0),
                cell("fused", "host_issue_us", raw, raw_pct),
                cell("fused", "host_issue_us_per_host_ref", twin_us, twin_pct),
            ]
        };
        let base = side(1.21, 1.22, 4.0, 1.00, 4.0);
        let c = compare_rows(&base, &side(1.24, 1.64, 14.0, 1.24, 18.0), None, 2.0).unwrap();
        let m = &c.matched[0];
        assert_eq!((m.called, m.verdict), (Verdict::Slower, Verdict::Uncertain));
        // The twin's power is the row's: what it could call is no smaller than the twin could.
        assert!(m.smallest_callable_pct.unwrap() > 20.0);
        // Per unit of host speed the rise holds too: the call stands.
        assert_eq!(
            verdicts(&base, &side(1.24, 1.64, 4.0, 1.32, 4.0)),
            [Verdict::Slower]
        );
        // Without a twin (a run from before the host reference) the raw call stands.
        let bare = |v: &[Row]| v[..2].to_vec();
        assert_eq!(
            verdicts(&bare(&base), &bare(&side(1.24, 1.64, 4.0, 1.24, 14.0))),
            [Verdict::Slower]
        );
    }

    #[test]
    fn a_floor_multiple_is_excused_only_when_its_floor_moved_and_its_step_is_shown_unchanged() {
        let base = vec![
            floor("empty-graph-2", 2.2, 0.5),
            cell("graph", "step_us", 10.0, 0.5),
            cell("graph", "floor_multiple", 4.5, 0.5),
        ];
        let with = |floor_us: f64, step_us: f64| {
            vec![
                floor("empty-graph-2", floor_us, 0.5),
                cell("graph", "step_us", step_us, 0.5),
                cell("graph", "floor_multiple", step_us / floor_us, 0.5),
            ]
        };
        let multiple = |new: &[Row]| {
            let c = compare_rows(&base, new, None, 2.0).unwrap();
            row_of(&c, "graph", "floor_multiple").verdict
        };
        // The floor 9% faster, the step held: the multiple's rise is the machine's.
        assert_eq!(multiple(&with(2.0, 10.0)), Verdict::FloorMoved);
        // The step rose too: the call stands.
        assert_eq!(multiple(&with(2.0, 11.0)), Verdict::Slower);
        // The step not called (+1.5% with ±0.5% each side: uncertain): the step, gated on
        // its own, holds no regression, so the floor's move is the call.
        assert_eq!(multiple(&with(2.0, 10.15)), Verdict::FloorMoved);
        // A floor whose median moved less than the threshold explains nothing.
        assert_eq!(multiple(&with(2.178, 10.15)), Verdict::Slower);
        // A floor that got slower cannot explain a rising multiple.
        let slower_floor = [
            floor("empty-graph-2", 2.5, 0.5),
            cell("graph", "step_us", 10.0, 0.5),
            cell("graph", "floor_multiple", 5.0, 0.5),
        ];
        assert_eq!(multiple(&slower_floor), Verdict::Slower);
    }

    /// A graph arm's host issue is read over the one-node empty graph of its round: the CPU
    /// work moving explains nothing of it, the empty graph moving does.
    #[test]
    fn a_replays_host_issue_is_excused_only_by_the_empty_graph_it_is_read_over() {
        let up = |v: f64, pct: f64| v * (1.0 + pct / 100.0);
        let side = |host_pct: f64, graph_pct: f64, row_pct: f64, twin_pct: f64| {
            vec![
                floor(HOST_REFERENCE, up(1.5, host_pct), 0.3),
                floor("empty-graph", up(1.9, graph_pct), 0.3),
                cell("graph", "host_issue_us", up(1.3, row_pct), 3.0),
                cell(
                    "graph",
                    "host_issue_us_per_empty_graph",
                    up(0.7, twin_pct),
                    0.5,
                ),
            ]
        };
        let base = side(0.0, 0.0, 0.0, 0.0);
        let c = compare_rows(&base, &side(0.0, 50.0, 50.0, 0.2), None, 2.0).unwrap();
        let m = row_of(&c, "graph", "host_issue_us");
        assert_eq!((m.called, m.verdict), (Verdict::Slower, Verdict::HostMoved));
        assert_eq!(m.twin_reference, Some(TwinReference::EmptyGraph));
        // The CPU work moved as much, the empty graph did not: the twin over the empty graph
        // holds, so the raw call is not shown, but nothing moved that explains it.
        let c = compare_rows(&base, &side(50.0, 0.0, 50.0, 0.2), None, 2.0).unwrap();
        let m = row_of(&c, "graph", "host_issue_us");
        assert_eq!((m.called, m.verdict), (Verdict::Slower, Verdict::Uncertain));
        // Over the empty graph the row rose too: slower.
        assert_eq!(
            verdicts(&base, &side(0.0, 50.0, 80.0, 20.0)),
            [Verdict::Slower]
        );
    }

    /// A graph arm's GPU-paced times with intervals as wide as fused's bs 8 rows in an H200
    /// A/A (±2.5–3.5%), and their twins over the two-node empty graph at what that graph's
    /// spread left of them.
    #[test]
    fn a_gpu_paced_row_is_same_only_where_its_twin_over_the_two_node_graph_shows_it() {
        let up = |v: f64, pct: f64| v * (1.0 + pct / 100.0);
        let side = |row_pct: f64, twin_pct: f64, twin_width: f64| {
            vec![
                floor("empty-graph-2", 2.27, 1.0),
                cell("fused", "step_us", up(2.86, row_pct), 2.8),
                cell(
                    "fused",
                    "step_us_per_empty_graph_2",
                    up(1.26, twin_pct),
                    twin_width,
                ),
                cell("fused", "gpu_prep_us", up(2.0, row_pct), 2.8),
                cell(
                    "fused",
                    "gpu_prep_us_per_empty_graph_2",
                    up(0.88, twin_pct),
                    twin_width,
                ),
                cell("fused", "bytes", 8000.0, 0.0),
                cell("fused", "gb_s", 4.0 / (1.0 + row_pct / 100.0), 2.8),
            ]
        };
        let base = side(0.0, 0.0, 0.6);
        let judged = |new: &[Row]| {
            let c = compare_rows(&base, new, None, 2.0).unwrap();
            let of = |metric| {
                let m = row_of(&c, "fused", metric);
                (m.called, m.verdict)
            };
            (of("step_us"), of("gpu_prep_us"), of("gb_s"), c.shown_same())
        };
        use Verdict::*;
        // +1% raw with ±4% between the two sides: uncertain; over the two-node graph +0.5%
        // within ±1%: same, and the bandwidth with its device time.
        let (step, prep, gb_s, shown) = judged(&side(1.0, 0.5, 0.6));
        assert_eq!(step, (Uncertain, Same));
        assert_eq!(prep, (Uncertain, Same));
        assert_eq!(gb_s, (Uncertain, Same));
        assert_eq!(shown, 3);
        // The twin as wide as the raw row shows nothing: uncertain stays.
        let (step, _, gb_s, shown) = judged(&side(1.0, 0.5, 2.8));
        assert_eq!(
            (step, gb_s, shown),
            ((Uncertain, Uncertain), (Uncertain, Uncertain), 0)
        );
        // A raw median beyond the threshold is no `same`, however narrow the twin.
        let (step, ..) = judged(&side(2.5, 0.5, 0.6));
        assert_eq!(step, (Uncertain, Uncertain));
        // A twin that moved beyond the threshold keeps the row uncertain.
        let (step, ..) = judged(&side(1.0, 1.8, 0.6));
        assert_eq!(step, (Uncertain, Uncertain));
        // A raw call is never excused by the twin: +20% stands with its twin held (a fixture
        // edited in one row), and is called with a twin that moved with it.
        let (step, ..) = judged(&side(20.0, 0.0, 0.6));
        assert_eq!(step, (Slower, Slower));
        let (step, ..) = judged(&side(20.0, 20.0, 0.6));
        assert_eq!(step, (Slower, Slower));
    }
}
