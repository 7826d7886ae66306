//! Test fixtures of the verdicts: rows with intervals, and look-ups in a comparison.

use super::comparison::{Comparison, Matched};
use crate::report::change::Verdict;
use crate::report::compare::compare_rows;
use crate::results::csv::test_rows::row;
use crate::results::csv::Row;

/// `row` with its interval `pct` percent either side of the median.
pub(super) fn wide(mut r: Row, pct: f64) -> Row {
    let f = pct / 100.0;
    (r.ci_lo, r.ci_hi) = (r.median * (1.0 - f), r.median * (1.0 + f));
    r
}

pub(super) fn floor(item: &str, median: f64, pct: f64) -> Row {
    wide(row("floor", "floor", item, 1, "step_us", median), pct)
}

pub(super) fn cell(arm: &str, metric: &str, median: f64, pct: f64) -> Row {
    wide(row("prep", "dsa_decode", arm, 4, metric, median), pct)
}

pub(super) fn verdicts(base: &[Row], new: &[Row]) -> Vec<Verdict> {
    let c = compare_rows(base, new, None, 2.0).unwrap();
    c.matched.iter().map(|m| m.verdict).collect()
}

pub(super) fn row_of<'c>(c: &'c Comparison, arm: &str, metric: &str) -> &'c Matched {
    c.matched
        .iter()
        .find(|m| {
            let (b, _) = c.entries(m);
            &*b.arm == arm && &*b.metric == metric
        })
        .unwrap_or_else(|| panic!("no {arm} {metric}"))
}
