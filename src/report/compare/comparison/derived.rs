//! Rows derived from a cell's times: floor multiples (the cell's `step_us` over its floor),
//! ratios over eager-sync (the arm's and eager-sync's `step_us`) and bandwidths (the bytes
//! over the cell's `gpu_prep_us`). Each calls only what a row it is made of calls.

use super::super::side::{Entry, Side};
use super::explain::References;
use super::Matched;
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
/// Relabels the derived rows of `matched` (judged, their times' references already read):
/// a floor multiple its floor explains is `floor moved` ([`References::explain_multiple`]),
/// the rest follow the rows they are made of ([`followed`]).
pub(super) fn follow_derived(base: &Side, new: &Side, refs: &References, matched: &mut [Matched]) {
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
        // its own, as `explain` judges their times.
        if be.arm != ne.arm {
            continue;
        }
        let cell = cell_of(be, ne);
        let sibling = |index: &HashMap<CellOf, usize>, cell: &CellOf| index.get(cell).copied();
        let step = sibling(&steps, &cell);
        // The rows a derived row is made of, each with whether it moves the same way (a ratio
        // over eager-sync rises when eager-sync's step falls), and how it follows them.
        let (sources, follows): (Vec<(usize, bool)>, Follows) = match &*ne.metric {
            "floor_multiple" => {
                let step_change = step.and_then(|s| matched[s].change);
                let follows = match refs.explain_multiple(&matched[i], be, ne, step_change) {
                    true => Follows::FloorMoved,
                    false => Follows::Calls,
                };
                (step.map(|s| (s, true)).into_iter().collect(), follows)
            }
            STEP_RATIO_VS_EAGER_SYNC => {
                let (kind, family, layout, bs, block, _, _) = cell;
                let sync = (kind, family, layout, bs, block, "eager-sync", "eager-sync");
                let sync = sibling(&steps, &sync);
                let sources = [step.map(|s| (s, true)), sync.map(|s| (s, false))];
                (sources.into_iter().flatten().collect(), Follows::Calls)
            }
            "gb_s" if &*ne.kind == KIND_PREP => {
                let same_bytes =
                    sibling(&bytes, &cell).is_some_and(|b| matched[b].verdict == Verdict::Same);
                let prep = sibling(&preps, &cell).filter(|_| same_bytes);
                (
                    prep.map(|p| (p, true)).into_iter().collect(),
                    Follows::Mirrors,
                )
            }
            _ => continue,
        };
        let sources: Vec<(&Matched, bool)> = sources
            .into_iter()
            .map(|(j, same)| (&matched[j], same))
            .collect();
        let paced_by_host = host_paced(&ne.arm, &ne.metric);
        let verdict = match follows {
            Follows::FloorMoved => Some(Verdict::FloorMoved),
            Follows::Mirrors if shown_same(&matched[i], &sources) => Some(Verdict::Same),
            _ => followed(&matched[i], paced_by_host, &sources),
        };
        // A host-paced derived row calls only what a source calls too: it can see no smaller
        // change than the most powerful source moving its way (a source moving the other way
        // has its power the other way, which its row does not give).
        let sources_power = (sources.iter())
            .filter(|(_, same_way)| *same_way)
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
}

/// How a derived row follows the rows it is made of.
enum Follows {
    /// It calls only what one of them calls ([`followed`]).
    Calls,
    /// A floor multiple its floor explains ([`References::explain_multiple`]).
    FloorMoved,
    /// A bandwidth: the same bytes over the device time, so what shows that time unchanged
    /// shows it so ([`shown_same`]), and otherwise it calls as the others do.
    Mirrors,
}

/// Whether an `uncertain` row's one source was shown `same` by its twin
/// ([`References::explain`]'s GPU-paced rule).
fn shown_same(row: &Matched, sources: &[(&Matched, bool)]) -> bool {
    row.called == Verdict::Uncertain && matches!(sources, [(s, _)] if s.shown_same())
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
/// its interval is narrow, but between processes it moves as its times do (docs/h200-findings.md:
/// derived rows in an A/A). `None`: the verdict stands.
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
        use super::super::fixtures::{floor, row_of};
        use crate::axes::floor_item::HOST_REFERENCE;
        // Eager-device's prep time +30% raw, +0.5% per unit of host speed, the host reference
        // unchanged: the prep time is uncertain, and so its bandwidth.
        let side = |prep: f64, gb_s: f64, per_host: f64| {
            vec![
                floor(HOST_REFERENCE, 1.5, 0.3),
                cell("eager-device", "gpu_prep_us", prep, 3.0),
                cell("eager-device", "gpu_prep_us_per_host_ref", per_host, 0.5),
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
