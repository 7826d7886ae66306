//! The noise floor a row of a sweep without rounds must move beyond for a verdict.

use crate::report::change::{Change, Verdict};

/// How far a `step_us` or `step_fwd_us` of a sweep without rounds must move for a verdict:
/// the widest A/A change two such sweeps showed, rounded up (docs/h200-findings.md: sweeps
/// without rounds).
pub const NOISE_FLOOR_STEP_PCT: f64 = 35.0;

/// The same for every other metric of such a sweep.
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
pub(super) fn capped(change: Option<Change>, verdict: Verdict, metric: &str) -> Verdict {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cell, verdicts};
    use super::*;
    use crate::results::csv::Row;

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
}
