//! The verdicts: each matched row's change, its change over its own floor and per unit of host
//! speed, the smallest change it could have called, and the rules that relabel a call the
//! machine explains (see the module docs of [`super`]).

use super::matching::{pair, Arms, Pair, Pairing};
use super::side::{Entry, Name, Side};
use crate::axes::floor_item::HOST_REFERENCE;
use crate::report::change::{
    better_direction, call_of_time_move, is_time, judge, ratio_change, relative_change,
    smallest_callable_pct, Better, Change, Interval, Moved, Verdict,
};
use crate::report::format::{floor_of, is_launch_floor, kind_rank};
use crate::results::csv::{KIND_FLOOR, KIND_PREP};
use crate::results::pacing::host_paced;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, HashMap};

/// How far a `step_us` or `step_fwd_us` of a sweep without rounds must move for a verdict:
/// the widest A/A change seen, by the end of its interval nearer zero, between two
/// back-to-back default sweeps of one binary on an H200 was 21.9% pinned (eager-device
/// `step_us` at bs 256) and 30.3% unpinned (`step_fwd_us` reached 11.6% and 14.1%;
/// `results/2026-11-29-h200-pinning/compare-{pinned,unpinned}.md.gz`), rounded up.
pub const NOISE_FLOOR_STEP_PCT: f64 = 35.0;

/// The same for every other metric of such a sweep: there `host_issue_us` reached 55.4%
/// pinned and 72.0% unpinned, `gpu_prep_us` 36.6% and 25.7%, `floor_multiple` 25.9% and
/// 27.8%, `read_cost_us` 22.2% and 30.8%, `host_blocked_us` 9.1% and 49.4%; rounded up.
pub const NOISE_FLOOR_HOST_PCT: f64 = 75.0;

/// The noise floor of a metric of a sweep without rounds.
pub fn noise_floor_pct(metric: &str) -> f64 {
    match metric {
        "step_us" | "step_fwd_us" => NOISE_FLOOR_STEP_PCT,
        _ => NOISE_FLOOR_HOST_PCT,
    }
}

/// A verdict on a row without rounds: kept when it calls a move and the whole interval lies
/// beyond the metric's noise floor, `uncertain` otherwise.
fn capped(change: Option<Change>, verdict: Verdict, metric: &str) -> Verdict {
    let beyond = change.is_some_and(|c| c.beyond(noise_floor_pct(metric)).is_some());
    let calls_a_move = matches!(
        verdict,
        Verdict::Faster | Verdict::Slower | Verdict::Changed
    );
    if beyond && calls_a_move {
        verdict
    } else {
        Verdict::Uncertain
    }
}

/// One matched cell and metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// Its rows' indices in BASE's and NEW's entries.
    pub base: usize,
    pub new: usize,
    pub change: Option<Change>,
    /// The change of the row over the floor each side's arm is read against; `None` for rows
    /// not read against a floor (not a prep time, a side without that floor, or two arms
    /// read against different floors).
    pub vs_floor: Option<Change>,
    /// The change of the row per unit of host speed: of its twin over the host-speed
    /// reference, formed inside each round ([`crate::results::pacing`]); `None` where a side
    /// has no twin.
    pub per_host: Option<Change>,
    /// The smallest change in the worse direction these two intervals could have called
    /// (`slower`), in percent ([`smallest_callable_pct`]).
    pub smallest_callable_pct: Option<f64>,
    /// What the change alone says (after the cap on rows without rounds, and `broken`).
    pub called: Verdict,
    /// The verdict: `called`, or `floor moved` / `host moved` where a reference explains it.
    pub verdict: Verdict,
}

/// One floor row on both sides: how the machine moved, with no verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct FloorMove {
    pub base: usize,
    pub new: usize,
    pub change: Option<Change>,
}

/// Everything a comparison found.
#[derive(Debug)]
pub struct Comparison {
    pub base: Side,
    pub new: Side,
    /// `Some((base arm, new arm))` when two arms are compared.
    pub arms: Option<(String, String)>,
    pub threshold_pct: f64,
    /// In table order: kind, family, layout, batch size, block size, arm, metric.
    pub matched: Vec<Matched>,
    /// In the floor's order: launches, copies, the harness and the host-speed reference.
    pub floors: Vec<FloorMove>,
    /// BASE's rows NEW lacks and NEW's rows BASE lacks (indices into each side's entries).
    pub only_in_base: Vec<usize>,
    pub only_in_new: Vec<usize>,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.matched.iter().filter(|m| m.verdict == verdict).count()
    }

    pub fn entries(&self, m: &Matched) -> (&Entry, &Entry) {
        (&self.base.entries[m.base], &self.new.entries[m.new])
    }

    pub fn floor_entries(&self, f: &FloorMove) -> (&Entry, &Entry) {
        (&self.base.entries[f.base], &self.new.entries[f.new])
    }

    /// Rows only BASE holds that fail the comparison (unless `--allow-missing`): its cells'
    /// rows between two runs; none between two arms, which hold different metrics by design.
    /// A floor NEW lacks (an item an older build did not time) is a yardstick, not a result:
    /// floors never fail the comparison.
    pub fn missing(&self) -> Vec<usize> {
        self.only_in_base(false)
    }

    /// Rows only BASE holds that are not findings: between two arms all of them, between two
    /// runs its floors.
    pub fn base_extras(&self) -> Vec<usize> {
        self.only_in_base(true)
    }

    fn only_in_base(&self, extras: bool) -> Vec<usize> {
        let finding =
            |i: &&usize| self.arms.is_none() && &*self.base.entries[**i].kind != KIND_FLOOR;
        (self.only_in_base.iter())
            .filter(|i| finding(i) != extras)
            .copied()
            .collect()
    }

    /// Missing and broken rows: findings that fail the comparison unless `--allow-missing`.
    pub fn findings(&self) -> usize {
        self.missing().len() + self.count(Verdict::Broken)
    }

    /// The host-speed reference's move, where both sides timed it.
    pub fn host(&self) -> Option<&FloorMove> {
        host_move(&self.floors, &self.base)
    }

    /// The floor times whose whole interval moved beyond the threshold.
    pub fn moved_floors(&self) -> Vec<&FloorMove> {
        self.floors
            .iter()
            .filter(|f| &*self.floor_entries(f).0.metric == "step_us")
            .filter(|f| {
                f.change
                    .is_some_and(|c| c.beyond(self.threshold_pct).is_some())
            })
            .collect()
    }

    /// What size of change each class of rows could have called: see [`PowerClass`].
    pub fn power(&self) -> Vec<PowerClass> {
        let mut classes: BTreeMap<(u8, Name, Name, &'static str), Vec<Option<f64>>> =
            BTreeMap::new();
        for m in &self.matched {
            let (b, n) = self.entries(m);
            // A metric of unknown direction (a prep's bytes) is `changed`, never a regression.
            if better_direction(&n.metric, &n.unit) == Better::Unknown {
                continue;
            }
            let pacing = pacing_of(b, n);
            classes
                .entry((kind_rank(&n.kind), n.kind.clone(), n.metric.clone(), pacing))
                .or_default()
                .push(m.smallest_callable_pct);
        }
        classes
            .into_iter()
            .map(|((_, kind, metric, pacing), smallest)| {
                PowerClass::of(kind.to_string(), metric.to_string(), pacing, &smallest)
            })
            .collect()
    }
}

/// Who paces a row: `host` (see [`host_paced`]), `GPU`, or `model` for the decode-step model's
/// rows, which mix both.
fn pacing_of(base: &Entry, new: &Entry) -> &'static str {
    if &*new.kind != KIND_PREP {
        "model"
    } else if host_paced(&base.arm, &base.metric) || host_paced(&new.arm, &new.metric) {
        "host"
    } else {
        "GPU"
    }
}

/// The power of one class of rows (kind, metric, who paces it): the smallest change its rows
/// could have called, as the median row and the 90th-percentile row have it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PowerClass {
    pub kind: String,
    pub metric: String,
    pub paced_by: &'static str,
    pub rows: usize,
    /// Rows without the intervals to call anything.
    pub without_interval: usize,
    pub median_pct: Option<f64>,
    pub p90_pct: Option<f64>,
}

impl PowerClass {
    fn of(kind: String, metric: String, paced_by: &'static str, smallest: &[Option<f64>]) -> Self {
        let mut values: Vec<f64> = smallest.iter().flatten().copied().collect();
        values.sort_unstable_by(f64::total_cmp);
        // The nearest-rank percentile of the sorted values.
        let at = |q: f64| {
            (!values.is_empty()).then(|| {
                let rank = (q * values.len() as f64).ceil() as usize;
                values[rank.clamp(1, values.len()) - 1]
            })
        };
        PowerClass {
            kind,
            metric,
            paced_by,
            rows: smallest.len(),
            without_interval: smallest.len() - values.len(),
            median_pct: at(0.5),
            p90_pct: at(0.9),
        }
    }
}

/// Each side's launch floors (empty kernel, empty graphs): each item's lowest row.
fn launch_floors(side: &Side) -> BTreeMap<&str, &Entry> {
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

/// What the verdicts read beside the pair itself: each side's floors and host reference.
struct References<'s> {
    base_floors: BTreeMap<&'s str, &'s Entry>,
    new_floors: BTreeMap<&'s str, &'s Entry>,
    /// The host-speed reference's change, where both sides timed it.
    host: Option<Change>,
    threshold_pct: f64,
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
    fn vs_floor(&self, base: &Entry, new: &Entry) -> Option<Change> {
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
    fn explain(&self, m: &Matched, base: &Entry, new: &Entry) -> Option<Verdict> {
        let one_arm = base.arm == new.arm;
        if !m.called.is_call() || !one_arm || !host_paced(&new.arm, &new.metric) {
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
        if self.pushes(self.host, better) == Some(m.called)
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

    /// A floor multiple's call its floor explains: the floor's median moved beyond the
    /// threshold the other way (a faster floor raises the multiple) and the floor is not
    /// shown unchanged, while the cell's own `step_us`, which is gated itself, does not make
    /// the call. The multiple is the step over the floor of the same round: with the step
    /// not called, its call is the floor's move, which a launch floor makes between
    /// processes (the empty graph −12.6% [−20.7, +2.9] in an A/A pair on the H200).
    fn explain_multiple(
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
        let floor_median = floor.and_then(|f| match f.pct {
            p if p > t => Some(Moved::Up),
            p if p < -t => Some(Moved::Down),
            _ => None,
        });
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

/// The cell of a matched row (its key less the metric), to find its sibling rows.
type CellOf<'e> = (&'e str, &'e str, &'e str, u32, u32, &'e str, &'e str);

fn cell_of<'e>(base: &'e Entry, new: &'e Entry) -> CellOf<'e> {
    (
        &base.kind,
        &base.family,
        &base.layout,
        base.batch_size,
        base.block_size,
        &base.arm,
        &new.arm,
    )
}

/// Compares `base` with `new` (two runs, or with `arms` two arms) at `threshold_pct`. Fails
/// when a side holds a row twice, has no rows of an arm asked for, or when no cell but floors
/// matches.
/// Of `floors`, the host-speed reference's step time (`base`'s entries name them).
fn host_move<'f>(floors: &'f [FloorMove], base: &Side) -> Option<&'f FloorMove> {
    floors.iter().find(|f| {
        let e = &base.entries[f.base];
        &*e.arm == HOST_REFERENCE && &*e.metric == "step_us"
    })
}

pub fn compare(base: Side, new: Side, arms: Arms, threshold_pct: f64) -> Result<Comparison> {
    for (side, arm, flag) in [
        (&base, arms.map(|a| a.0), "--base-arm"),
        (&new, arms.map(|a| a.1), "--new-arm"),
    ] {
        let has_cells = side
            .entries
            .iter()
            .any(|e| &*e.kind != KIND_FLOOR && arm.is_none_or(|a| &*e.arm == a));
        if has_cells {
            continue;
        }
        let which = side.which.as_str();
        match arm {
            Some(arm) => bail!(
                "{flag} {arm}: {which} has no rows for that arm; its arms are: {}",
                side.arms()
            ),
            None => bail!("{which} has no result rows (floors aside): nothing to compare"),
        }
    }
    let Pairing {
        cells,
        twins,
        floors,
        only_in_base,
        only_in_new,
    } = pair(&base, &new, arms)?;
    if cells.is_empty() {
        bail!(
            "no cell of BASE matches a cell of NEW on (kind, family, batch size, block size, \
             layout, metric{}): are they runs of the same sweep? (arms in BASE: {}; in NEW: {})",
            if arms.is_some() { "" } else { ", arm" },
            base.arms(),
            new.arms()
        );
    }
    let floors: Vec<FloorMove> = floors
        .into_iter()
        .map(|(b, n)| FloorMove {
            base: b,
            new: n,
            change: relative_change(&base.entries[b], &new.entries[n]),
        })
        .collect();
    let host = host_move(&floors, &base).and_then(|f| f.change);
    let matched = judge_all(&base, &new, &cells, &twins, host, threshold_pct);
    Ok(Comparison {
        arms: arms.map(|(b, n)| (b.to_string(), n.to_string())),
        threshold_pct,
        matched,
        floors,
        only_in_base,
        only_in_new,
        base,
        new,
    })
}

/// Judges every pair, then relabels what a reference explains: host-paced rows first, then
/// floor multiples (which read their cell's `step_us`), then bandwidths (which follow their
/// cell's `gpu_prep_us`, the time they are the bytes over).
fn judge_all(
    base: &Side,
    new: &Side,
    cells: &[Pair],
    twins: &[Option<Pair>],
    host: Option<Change>,
    threshold_pct: f64,
) -> Vec<Matched> {
    let refs = References {
        base_floors: launch_floors(base),
        new_floors: launch_floors(new),
        host,
        threshold_pct,
    };
    let mut matched: Vec<Matched> = cells
        .iter()
        .zip(twins)
        .map(|(&(b, n), twin)| {
            let (be, ne) = (&base.entries[b], &new.entries[n]);
            let better = better_direction(&ne.metric, &ne.unit);
            let (change, mut called) = judge(be, ne, better, threshold_pct);
            if be.without_rounds() || ne.without_rounds() {
                called = capped(change, called, &ne.metric);
            }
            if be.has_interval() && !ne.has_interval() {
                called = Verdict::Broken;
            }
            let per_host =
                twin.and_then(|(tb, tn)| relative_change(&base.entries[tb], &new.entries[tn]));
            let mut m = Matched {
                base: b,
                new: n,
                change,
                vs_floor: refs.vs_floor(be, ne),
                per_host,
                // A host-paced call must hold per unit of host speed too (`explain`): the
                // smaller of the two powers.
                smallest_callable_pct: [
                    Some((be, ne)),
                    twin.map(|(tb, tn)| (&base.entries[tb], &new.entries[tn])),
                ]
                .into_iter()
                .flatten()
                .filter_map(|(b, n)| smallest_callable_pct(b, n, better, threshold_pct))
                .reduce(f64::max),
                called,
                verdict: called,
            };
            m.verdict = refs.explain(&m, be, ne).unwrap_or(called);
            m
        })
        .collect();

    let by_cell = |metric: &str, matched: &[Matched]| -> HashMap<CellOf, usize> {
        matched
            .iter()
            .enumerate()
            .filter(|(_, m)| &*new.entries[m.new].metric == metric)
            .map(|(i, m)| (cell_of(&base.entries[m.base], &new.entries[m.new]), i))
            .collect()
    };
    let steps = by_cell("step_us", &matched);
    let preps = by_cell("gpu_prep_us", &matched);
    let bytes = by_cell("bytes", &matched);
    for i in 0..matched.len() {
        let (be, ne) = (&base.entries[matched[i].base], &new.entries[matched[i].new]);
        let cell = cell_of(be, ne);
        let sibling = |index: &HashMap<CellOf, usize>| index.get(&cell).map(|&j| &matched[j]);
        let relabel = match &*ne.metric {
            "floor_multiple" => {
                let step = sibling(&steps).and_then(|s| s.change);
                refs.explain_multiple(&matched[i], be, ne, step)
                    .then_some(Verdict::FloorMoved)
            }
            "gb_s" if &*ne.kind == KIND_PREP => {
                let same_bytes = sibling(&bytes).is_some_and(|b| b.verdict == Verdict::Same);
                sibling(&preps)
                    .filter(|p| {
                        same_bytes
                            && matches!(p.verdict, Verdict::FloorMoved | Verdict::HostMoved)
                            && p.called == matched[i].called
                    })
                    .map(|p| p.verdict)
            }
            _ => None,
        };
        if let Some(verdict) = relabel {
            matched[i].verdict = verdict;
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::super::compare_rows;
    use super::*;
    use crate::results::csv::test_rows::row;
    use crate::results::csv::Row;

    /// `row` with its interval `pct` percent either side of the median.
    fn wide(mut r: Row, pct: f64) -> Row {
        let f = pct / 100.0;
        (r.ci_lo, r.ci_hi) = (r.median * (1.0 - f), r.median * (1.0 + f));
        r
    }

    fn floor(item: &str, median: f64, pct: f64) -> Row {
        wide(row("floor", "floor", item, 1, "step_us", median), pct)
    }

    fn cell(arm: &str, metric: &str, median: f64, pct: f64) -> Row {
        wide(row("prep", "dsa_decode", arm, 4, metric, median), pct)
    }

    fn verdicts(base: &[Row], new: &[Row]) -> Vec<Verdict> {
        let c = compare_rows(base, new, None, 2.0).unwrap();
        c.matched.iter().map(|m| m.verdict).collect()
    }

    fn row_of<'c>(c: &'c Comparison, arm: &str, metric: &str) -> &'c Matched {
        c.matched
            .iter()
            .find(|m| {
                let (b, _) = c.entries(m);
                &*b.arm == arm && &*b.metric == metric
            })
            .unwrap_or_else(|| panic!("no {arm} {metric}"))
    }

    #[test]
    fn cells_match_on_arm_and_one_sided_rows_are_kept_apart() {
        let base = vec![
            row("prep", "dsa_decode", "graph", 4, "step_us", 20.0),
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 40.0),
        ];
        let new = vec![
            row("prep", "dsa_decode", "graph", 4, "step_us", 25.0),
            row("prep", "dsa_decode", "graph", 8, "step_us", 21.0),
        ];
        let c = compare_rows(&base, &new, None, 2.0).unwrap();
        assert_eq!(c.matched.len(), 1);
        assert_eq!(c.matched[0].verdict, Verdict::Slower);
        assert_eq!(c.missing().len(), 1, "a finding");
        assert!(c.base_extras().is_empty());
        assert_eq!(c.findings(), 1);
        assert!(c.base.entries[c.only_in_base[0]]
            .cell()
            .to_string()
            .contains("eager-sync bs=4"));
        assert_eq!(c.new.entries[c.only_in_new[0]].batch_size, 8);
    }

    #[test]
    fn two_arms_of_one_run_match_each_other_and_lack_no_rows() {
        let rows = vec![
            row("prep", "dsa_decode", "eager-sync", 4, "step_us", 40.0),
            row("prep", "dsa_decode", "eager-sync", 4, "read_cost_us", 18.0),
            row(
                "prep",
                "dsa_decode",
                "eager-sync",
                4,
                "floor_multiple",
                10.0,
            ),
            row("prep", "dsa_decode", "graph", 4, "step_us", 20.0),
            row("prep", "dsa_decode", "graph", 4, "floor_multiple", 12.0),
            row("prep", "dsa_decode", "eager-device", 4, "step_us", 25.0),
        ];
        let c = compare_rows(&rows, &rows, Some(("eager-sync", "graph")), 2.0).unwrap();
        assert_eq!(
            c.matched.len(),
            1,
            "only step_us: each arm has its own floor"
        );
        let (b, n) = c.entries(&c.matched[0]);
        assert_eq!((&*b.arm, &*n.arm), ("eager-sync", "graph"));
        assert_eq!(c.matched[0].verdict, Verdict::Faster);
        assert_eq!(
            c.only_in_base.len(),
            1,
            "the read cost, which graph has not"
        );
        assert_eq!(c.findings(), 0, "arms hold different metrics: not missing");
        let error = compare_rows(&rows, &rows, Some(("eager-sync", "fused")), 2.0).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--new-arm fused: NEW has no rows for that arm; its arms are: eager-device, eager-sync, graph"
        );
        assert_eq!(
            compare_rows(&rows, &rows, None, 2.0).unwrap().matched.len(),
            6,
            "a run against itself keeps every metric"
        );
    }

    #[test]
    fn a_row_that_lost_its_interval_is_broken_and_one_that_never_had_one_uncertain() {
        let base = cell("graph", "step_us", 20.0, 1.0);
        let mut bare = row("prep", "dsa_decode", "graph", 4, "step_us", 26.0);
        (bare.ci_lo, bare.ci_hi) = (f64::NAN, f64::NAN);
        assert_eq!(
            verdicts(std::slice::from_ref(&base), std::slice::from_ref(&bare)),
            [Verdict::Broken]
        );
        let c = compare_rows(&[base], &[bare.clone()], None, 2.0).unwrap();
        assert_eq!(c.findings(), 1);
        assert_eq!(verdicts(&[bare.clone()], &[bare.clone()]), [Verdict::Same]);
        let mut other = bare.clone();
        other.median = 30.0;
        assert_eq!(verdicts(&[bare], &[other]), [Verdict::Uncertain]);
    }

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
                wide(
                    row(
                        "prep",
                        "dsa_decode",
                        "graph",
                        4,
                        "host_issue_us_per_host_ref",
                        up(0.9, twin_pct),
                    ),
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

    /// As wide as an A/A pair of sweeps on the H200 (results/2026-12-01-h200-sweep-aa/): the
    /// host reference ±13–19% between processes, fused `host_issue_us` +34.7% [+3.3, +54.5]
    /// raw and +23.8% [−0.8, +41.6] per unit of host speed.
    #[test]
    fn a_host_paced_call_its_change_per_unit_of_host_speed_does_not_make_is_uncertain() {
        let side = |host: f64, raw: f64, raw_pct: f64, twin: f64, twin_pct: f64| {
            vec![
                floor(HOST_REFERENCE, host, 13.0),
                cell("fused", "host_issue_us", raw, raw_pct),
                wide(
                    row(
                        "prep",
                        "dsa_decode",
                        "fused",
                        4,
                        "host_issue_us_per_host_ref",
                        twin,
                    ),
                    twin_pct,
                ),
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

    #[test]
    fn rows_without_rounds_need_a_change_beyond_the_noise_floor() {
        let old = |metric: &str, median: f64| Row {
            rounds: 0,
            ..cell("graph", metric, median, 1.0)
        };
        let one = |b: &Row, n: &Row| verdicts(std::slice::from_ref(b), std::slice::from_ref(n))[0];
        let base = cell("graph", "step_us", 100.0, 1.0);
        let new = cell("graph", "step_us", 110.0, 1.0);
        assert_eq!(one(&base, &new), Verdict::Slower);
        assert_eq!(one(&old("step_us", 100.0), &new), Verdict::Uncertain);
        assert_eq!(
            one(&old("step_us", 100.0), &base),
            Verdict::Uncertain,
            "same is capped"
        );
        assert_eq!(
            one(&old("step_us", 100.0), &old("step_us", 200.0)),
            Verdict::Slower
        );
        let host = |m| old("host_issue_us", m);
        assert_eq!(one(&host(10.0), &host(15.0)), Verdict::Uncertain);
        assert_eq!(one(&host(10.0), &host(20.0)), Verdict::Slower);
        assert_eq!(
            (
                noise_floor_pct("step_fwd_us"),
                noise_floor_pct("read_cost_us")
            ),
            (NOISE_FLOOR_STEP_PCT, NOISE_FLOOR_HOST_PCT)
        );
    }

    #[test]
    fn power_is_given_per_class_of_rows() {
        let base = vec![
            cell("eager-sync", "step_us", 40.0, 8.0),
            wide(
                row("prep", "dsa_decode", "eager-sync", 8, "step_us", 40.0),
                4.0,
            ),
            cell("graph", "step_us", 10.0, 1.0),
            cell("graph", "bytes", 1e6, 0.0),
        ];
        let c = compare_rows(&base, &base, None, 2.0).unwrap();
        let power = c.power();
        let classes: Vec<(&str, &str, usize)> = power
            .iter()
            .map(|p| (p.metric.as_str(), p.paced_by, p.rows))
            .collect();
        assert_eq!(classes, [("step_us", "GPU", 1), ("step_us", "host", 2)]);
        let host = &power[1];
        assert!(host.median_pct.unwrap() < host.p90_pct.unwrap());
        assert!(c.matched.iter().all(|m| m.smallest_callable_pct.is_some()));
    }

    #[test]
    fn duplicates_and_disjoint_runs_are_bad_input() {
        let a = row("prep", "dsa_decode", "graph", 4, "step_us", 20.0);
        let error =
            compare_rows(&[a.clone(), a.clone()], std::slice::from_ref(&a), None, 2.0).unwrap_err();
        assert!(error
            .to_string()
            .contains("BASE holds two rows for prep dsa_decode/graph bs=4"));
        let mut b = a.clone();
        b.family = "dsa_target_verify".into();
        let error = compare_rows(&[a], &[b], None, 2.0).unwrap_err();
        assert!(error
            .to_string()
            .contains("no cell of BASE matches a cell of NEW"));
    }
}
