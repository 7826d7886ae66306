//! Pairing two sides and judging every pair: each row's call, then the derived rows'.

use super::comparison::{Comparison, FloorMove, Matched};
use super::derived::follow_derived;
use super::floors::Floors;
use super::gate::Gate;
use super::matching::{pair, Arms, Pair, Pairing};
use super::side::Side;
use crate::report::change::{
    better_direction, judge, relative_change, smallest_callable_pct, Interval, Verdict,
};
use crate::results::csv::KIND_FLOOR;
use anyhow::{bail, Result};

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
    let matched = judge_all(&base, &new, &cells, threshold_pct);
    Ok(Comparison {
        arms: arms.map(|(b, n)| (b.to_string(), n.to_string())),
        threshold_pct,
        gate: Gate::All,
        matched,
        floors,
        only_in_base,
        only_in_new,
        base,
        new,
    })
}

/// Judges every pair, then the rows derived from a cell's times ([`follow_derived`]).
fn judge_all(base: &Side, new: &Side, cells: &[Pair], threshold_pct: f64) -> Vec<Matched> {
    let floors = Floors::of(base, new);
    let mut matched: Vec<Matched> = cells
        .iter()
        .map(|&(b, n)| {
            let (be, ne) = (&base.entries[b], &new.entries[n]);
            let better = better_direction(&ne.metric, &ne.unit);
            let (change, mut called) = judge(be, ne, better, threshold_pct);
            if be.has_interval() && !ne.has_interval() {
                called = Verdict::Broken;
            }
            Matched {
                base: b,
                new: n,
                change,
                vs_floor: floors.vs_floor(be, ne),
                smallest_callable_pct: smallest_callable_pct(be, ne, better, threshold_pct),
                called,
                verdict: called,
            }
        })
        .collect();
    follow_derived(base, new, &mut matched);
    matched
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
}
