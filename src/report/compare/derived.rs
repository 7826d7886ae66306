//! Rows derived from a cell's times: floor multiples (the cell's `step_us` over its floor),
//! ratios over eager-sync (the arm's and eager-sync's `step_us`) and bandwidths (the bytes
//! over the cell's `gpu_prep_us`). A host-paced one calls only what a row it is made of calls.

use super::comparison::Matched;
use super::side::{Entry, Side};
use crate::report::change::Verdict;
use crate::results::csv::{KIND_PREP, STEP_RATIO_VS_EAGER_SYNC};
use crate::results::pacing::host_paced;
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
/// Relabels the host-paced derived rows of `matched` (each judged on its own): such a row
/// calls only what a row it is made of calls ([`followed`]). A GPU-paced one keeps its call.
pub(super) fn follow_derived(base: &Side, new: &Side, matched: &mut [Matched]) {
    let by_cell = |metric: &str, matched: &[Matched]| -> HashMap<CellOf, usize> {
        matched
            .iter()
            .enumerate()
            .filter(|(_, m)| &*new.entries[m.new].metric == metric)
            .map(|(i, m)| (cell_of(&base.entries[m.base], &new.entries[m.new]), i))
            .collect()
    };
    let steps = by_cell("step_us", matched);
    let preps = by_cell("gpu_prep_us", matched);
    let bytes = by_cell("bytes", matched);
    for i in 0..matched.len() {
        let (be, ne) = (&base.entries[matched[i].base], &new.entries[matched[i].new]);
        // Two arms are two programs: a derived row of one against the other's is judged on
        // its own, as their times are.
        if be.arm != ne.arm || !host_paced(&ne.arm, &ne.metric) {
            continue;
        }
        let cell = cell_of(be, ne);
        let sibling = |index: &HashMap<CellOf, usize>, cell: &CellOf| index.get(cell).copied();
        let step = sibling(&steps, &cell);
        // The rows a derived row is made of, each with whether it moves the same way (a ratio
        // over eager-sync rises when eager-sync's step falls).
        let sources: Vec<(usize, bool)> = match &*ne.metric {
            "floor_multiple" => step.map(|s| (s, true)).into_iter().collect(),
            STEP_RATIO_VS_EAGER_SYNC => {
                let (kind, family, layout, bs, block, _, _) = cell;
                let sync = (kind, family, layout, bs, block, "eager-sync", "eager-sync");
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
        let verdict = followed(&matched[i], &sources);
        // It calls only what a source calls too: it can see no smaller change than the most
        // powerful source moving its way (a source moving the other way has its power the
        // other way, which its row does not give).
        let sources_power = (sources.iter())
            .filter(|(_, same_way)| *same_way)
            .filter_map(|(s, _)| s.smallest_callable_pct)
            .reduce(f64::min);
        let row = &mut matched[i];
        if let Some(verdict) = verdict {
            row.verdict = verdict;
        }
        row.smallest_callable_pct = [row.smallest_callable_pct, sources_power]
            .into_iter()
            .flatten()
            .reduce(f64::max);
    }
}

/// Slower for faster and back: the call a source moving the other way makes on its row.
fn mirrored(verdict: Verdict, same_way: bool) -> Verdict {
    match (verdict, same_way) {
        (Verdict::Slower, false) => Verdict::Faster,
        (Verdict::Faster, false) => Verdict::Slower,
        (v, _) => v,
    }
}

/// The verdict of a host-paced derived row called `slower` or `faster` that none of the rows
/// it is made of (`sources`, each with whether it moves the same way) calls so: `uncertain`.
/// Within a round the ratio cancels what its two times share, so its interval is narrow, but
/// between processes it moves as its times do (docs/h200-findings.md: derived rows in an
/// A/A). `None`: the verdict stands.
fn followed(row: &Matched, sources: &[(&Matched, bool)]) -> Option<Verdict> {
    let makes = |s: &Matched, same_way| mirrored(s.verdict, same_way) == row.called;
    let made = sources.iter().any(|(s, same_way)| makes(s, *same_way));
    (row.called.is_call() && !sources.is_empty() && !made).then_some(Verdict::Uncertain)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::cell;
    use crate::report::change::Verdict;
    use crate::report::compare::compare_rows;

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
        // An A/A pair whose eager floor multiple moved −20% with a narrow interval while its
        // step moved −1% within ±10%; the graph arm's GPU-paced multiple the same.
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
    fn a_host_paced_bandwidth_calls_only_what_its_prep_time_calls() {
        use super::super::fixtures::row_of;
        // Eager-device's prep time +3% with ±3% each side (uncertain), its bandwidth −3%
        // with ±0.5% (called raw): uncertain, as its prep time.
        let side = |prep: f64, gb_s: f64| {
            vec![
                cell("eager-device", "gpu_prep_us", prep, 3.0),
                cell("eager-device", "bytes", 8000.0, 0.0),
                cell("eager-device", "gb_s", gb_s, 0.5),
            ]
        };
        let c = compare_rows(&side(10.0, 0.8), &side(10.3, 0.776), None, 2.0).unwrap();
        let of = |c: &crate::report::compare::Comparison, metric| {
            let m = row_of(c, "eager-device", metric);
            (m.called, m.verdict)
        };
        assert_eq!(
            of(&c, "gpu_prep_us"),
            (Verdict::Uncertain, Verdict::Uncertain)
        );
        assert_eq!(of(&c, "gb_s"), (Verdict::Slower, Verdict::Uncertain));
        // The prep time 30% slower: both slower.
        let c = compare_rows(&side(10.0, 0.8), &side(13.0, 0.615), None, 2.0).unwrap();
        assert_eq!(of(&c, "gb_s"), (Verdict::Slower, Verdict::Slower));
    }
}
