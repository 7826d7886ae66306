//! Pairing two sides and judging every pair: each row's call, then the relabels the
//! references prove.

use super::super::matching::{pair, Arms, Pair, Pairing};
use super::super::side::Entry;
use super::super::side::Side;
use super::explain::{launch_floors, References};
use super::noise_floor::capped;
use super::{Comparison, FloorMove, Matched};
use crate::report::change::{
    better_direction, judge, relative_change, smallest_callable_pct, Change, Interval, Verdict,
};
use crate::results::csv::{KIND_FLOOR, KIND_PREP, STEP_RATIO_VS_EAGER_SYNC};
use crate::results::pacing::{host_paced, twin_of, TwinReference};
use anyhow::{bail, Result};
use std::collections::HashMap;

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
/// Of `floors`, the step time of the floor row `arm` (`base`'s entries name them).
pub(super) fn floor_move<'f>(
    floors: &'f [FloorMove],
    base: &Side,
    arm: &str,
) -> Option<&'f FloorMove> {
    floors.iter().find(|f| {
        let e = &base.entries[f.base];
        &*e.arm == arm && &*e.metric == "step_us"
    })
}

/// Compares `base` with `new` (two runs, or with `arms` two arms) at `threshold_pct`. Fails
/// when a side holds a row twice, has no rows of an arm asked for, or when no cell but floors
/// matches.
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
    let moves = TwinReference::ALL.map(|r| {
        (
            r,
            floor_move(&floors, &base, r.floor_arm()).and_then(|f| f.change),
        )
    });
    let matched = judge_all(&base, &new, &cells, &twins, moves, threshold_pct);
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
/// the rows derived from a cell's times ([`followed`]): floor multiples (their cell's
/// `step_us`), ratios over eager-sync (the arm's and eager-sync's `step_us`) and bandwidths
/// (their cell's `gpu_prep_us`, the time they are the bytes over).
fn judge_all(
    base: &Side,
    new: &Side,
    cells: &[Pair],
    twins: &[Option<Pair>],
    twin_references: [(TwinReference, Option<Change>); 2],
    threshold_pct: f64,
) -> Vec<Matched> {
    let refs = References {
        base_floors: launch_floors(base),
        new_floors: launch_floors(new),
        twin_references,
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
            let twin_reference =
                twin.and_then(|(tb, _)| Some(twin_of(&base.entries[tb].metric)?.1));
            let mut m = Matched {
                base: b,
                new: n,
                change,
                vs_floor: refs.vs_floor(be, ne),
                per_host,
                twin_reference,
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
        let sibling = |index: &HashMap<CellOf, usize>, cell: &CellOf| index.get(cell).copied();
        let step = sibling(&steps, &cell);
        // The rows a derived row is made of, each with whether it moves the same way: a ratio
        // over eager-sync rises when eager-sync's step falls.
        let sources: Vec<(usize, bool)> = match &*ne.metric {
            "floor_multiple" => {
                let step_change = step.and_then(|s| matched[s].change);
                if refs.explain_multiple(&matched[i], be, ne, step_change) {
                    matched[i].verdict = Verdict::FloorMoved;
                    continue;
                }
                step.map(|s| (s, true)).into_iter().collect()
            }
            STEP_RATIO_VS_EAGER_SYNC => {
                let sync = (
                    cell.0,
                    cell.1,
                    cell.2,
                    cell.3,
                    cell.4,
                    "eager-sync",
                    "eager-sync",
                );
                let sync = sibling(&steps, &sync);
                [step.map(|s| (s, true)), sync.map(|s| (s, false))]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            "gb_s" if &*ne.kind == KIND_PREP => {
                let same_bytes =
                    sibling(&bytes, &cell).is_some_and(|b| matched[b].verdict == Verdict::Same);
                let prep = sibling(&preps, &cell).filter(|_| same_bytes);
                prep.map(|p| (p, true)).into_iter().collect()
            }
            _ => continue,
        };
        let sources: Vec<(&Matched, bool)> = sources
            .into_iter()
            .map(|(j, same)| (&matched[j], same))
            .collect();
        let paced_by_host = host_paced(&ne.arm, &ne.metric);
        let verdict = followed(&matched[i], paced_by_host, &sources);
        // A host-paced derived row calls only what a source calls too: it can see no smaller
        // change than the most powerful of them.
        let sources_power = (sources.iter())
            .filter_map(|(s, _)| s.smallest_callable_pct)
            .reduce(f64::min);
        let row = &mut matched[i];
        if let Some(verdict) = verdict {
            row.verdict = verdict;
        }
        if paced_by_host {
            row.smallest_callable_pct = [row.smallest_callable_pct, sources_power]
                .into_iter()
                .flatten()
                .reduce(f64::max);
        }
    }
    matched
}

/// Slower for faster and back: the call a source moving the other way makes on its row.
fn mirrored(verdict: Verdict, same_way: bool) -> Verdict {
    match (verdict, same_way) {
        (Verdict::Slower, false) => Verdict::Faster,
        (Verdict::Faster, false) => Verdict::Slower,
        (v, _) => v,
    }
}

/// The verdict of a derived row called `slower` or `faster`, from the rows it is made of
/// (`sources`, each with whether it moves the same way), where they do not make its call:
/// a source whose own call it was but that a reference explains lends it that label
/// (`floor moved`, `host moved`, `uncertain`); with no source making the call, a host-paced
/// derived row is `uncertain`. Within a round the ratio cancels what its two times share, so
/// its interval is narrow, but between processes it moves as its times do: in an A/A pair of
/// default sweeps on the H200 the eager arms' floor multiples moved −8 … −22% with intervals
/// excluding zero in 35 cells whose `step_us` was not called, and the ratios over eager-sync
/// were `slower` in 7 (results/2026-12-01-h200-sweep-gpu-paced-aa/main-s6/aa1-aa2.md). `None`:
/// the verdict stands.
fn followed(row: &Matched, host_paced: bool, sources: &[(&Matched, bool)]) -> Option<Verdict> {
    if !row.called.is_call() || row.verdict != row.called || sources.is_empty() {
        return None;
    }
    let makes = |v: Verdict, same_way| mirrored(v, same_way) == row.called;
    if sources
        .iter()
        .any(|(s, same_way)| makes(s.verdict, *same_way))
    {
        return None;
    }
    let explained = sources
        .iter()
        .find(|(s, same_way)| makes(s.called, *same_way))
        .map(|(s, _)| s.verdict);
    explained.or(host_paced.then_some(Verdict::Uncertain))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, verdicts};
    use crate::report::change::Verdict;
    use crate::report::compare::compare_rows;
    use crate::results::csv::test_rows::row;

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

    /// One cell of dsa_decode at bs 4: the empty kernel (unchanged), eager-sync's step and
    /// graph's, each (median, ±%), and the rows made of them: eager-sync's floor multiple
    /// (±1%), graph's (±0.5%) and graph's ratio over eager-sync (±1%).
    fn derived_side(
        sync: (f64, f64),
        multiples: (f64, f64),
        ratio: f64,
    ) -> Vec<crate::results::csv::Row> {
        use super::super::fixtures::floor;
        vec![
            floor("empty-kernel", 4.0, 5.0),
            cell("eager-sync", "step_us", sync.0, sync.1),
            cell("graph", "step_us", 10.0, 0.5),
            cell("eager-sync", "floor_multiple", multiples.0, 1.0),
            cell("graph", "floor_multiple", multiples.1, 0.5),
            cell("graph", "step_ratio_vs_eager_sync", ratio, 1.0),
        ]
    }

    #[test]
    fn a_host_paced_ratio_calls_only_what_a_time_it_is_made_of_calls() {
        use super::super::fixtures::row_of;
        let base = derived_side((40.0, 10.0), (10.0, 2.0), 0.25);
        // As in an A/A pair on the H200: the eager floor multiple −20% with a narrow interval
        // while its step moved −1% within ±10%; the graph arm's GPU-paced multiple the same.
        let aa = derived_side((39.6, 10.0), (8.0, 1.6), 0.20);
        let c = compare_rows(&base, &aa, None, 2.0).unwrap();
        let of = |arm, metric| {
            let m = row_of(&c, arm, metric);
            (m.called, m.verdict)
        };
        assert_eq!(
            of("eager-sync", "step_us"),
            (Verdict::Uncertain, Verdict::Uncertain)
        );
        assert_eq!(
            of("eager-sync", "floor_multiple"),
            (Verdict::Faster, Verdict::Uncertain)
        );
        assert_eq!(
            of("graph", "step_ratio_vs_eager_sync"),
            (Verdict::Faster, Verdict::Uncertain)
        );
        assert_eq!(
            of("graph", "floor_multiple"),
            (Verdict::Faster, Verdict::Faster),
            "the GPU paces it: its own call stands"
        );
        let m = row_of(&c, "eager-sync", "floor_multiple");
        let step = row_of(&c, "eager-sync", "step_us");
        assert!(
            m.smallest_callable_pct >= step.smallest_callable_pct,
            "it can see no less than its step: {m:?} {step:?}"
        );

        // Eager-sync's step slower beyond its interval: the ratio over it falls, called.
        let slower_sync = derived_side((60.0, 3.0), (15.0, 2.0), 0.166);
        let c = compare_rows(&base, &slower_sync, None, 2.0).unwrap();
        let of = |arm, metric| row_of(&c, arm, metric).verdict;
        assert_eq!(of("eager-sync", "step_us"), Verdict::Slower);
        assert_eq!(of("eager-sync", "floor_multiple"), Verdict::Slower);
        assert_eq!(of("graph", "step_ratio_vs_eager_sync"), Verdict::Faster);
    }

    #[test]
    fn a_bandwidth_takes_the_verdict_of_its_prep_time_when_the_host_explains_or_clouds_it() {
        use super::super::fixtures::{floor, row_of, twin};
        use crate::axes::floor_item::HOST_REFERENCE;
        // Eager-device's prep time +30% raw, +0.5% per unit of host speed, the host reference
        // unchanged: the prep time is uncertain, and so its bandwidth.
        let side = |prep: f64, gb_s: f64, per_host: f64| {
            vec![
                floor(HOST_REFERENCE, 1.5, 0.3),
                cell("eager-device", "gpu_prep_us", prep, 3.0),
                twin("eager-device", "gpu_prep_us_per_host_ref", per_host, 0.5),
                cell("eager-device", "bytes", 8000.0, 0.0),
                cell("eager-device", "gb_s", gb_s, 3.0),
            ]
        };
        let c = compare_rows(&side(10.0, 0.8, 6.0), &side(13.0, 0.615, 6.03), None, 2.0).unwrap();
        let prep = row_of(&c, "eager-device", "gpu_prep_us");
        assert_eq!(
            (prep.called, prep.verdict),
            (Verdict::Slower, Verdict::Uncertain)
        );
        let gb_s = row_of(&c, "eager-device", "gb_s");
        assert_eq!(
            (gb_s.called, gb_s.verdict),
            (Verdict::Slower, Verdict::Uncertain)
        );
        // Per unit of host speed the prep rose as much: both slower.
        let c = compare_rows(&side(10.0, 0.8, 6.0), &side(13.0, 0.615, 7.8), None, 2.0).unwrap();
        assert_eq!(row_of(&c, "eager-device", "gb_s").verdict, Verdict::Slower);
    }
}
