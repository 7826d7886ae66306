//! Measurement rounds: a cell is measured in several rounds spread over the run, so drift of
//! the host or GPU lands between rounds, where the interval sees it.
//!
//! * A cell's estimate is the median of its rounds' medians, and its 95% interval the
//!   distribution-free interval of that median over the round medians (order statistics, as
//!   in [`super::summary`]): [`MIN_ROUNDS`] rounds at least, or there is no interval. p10, p90
//!   and the sample count are those of all rounds' samples together.
//! * A quantity formed from two arms (an arm's step time over eager-sync's, the read cost) is
//!   formed inside each round, where the two ran back to back, and summarised over rounds
//!   the same way: a paired estimate, which drift common to both arms does not widen.
//! * Rounds measured by worker processes (`sweep --processes`) are counted by process where
//!   they span [`MIN_ROUNDS`] processes or more ([`units`]): a process's rounds share its
//!   draw, so they are one unit of the interval, not several.
//! * The samples inside a round are the within-round stopping rule's concern only.

use super::summary::{summarize, Estimate, Summary, MIN_CI_SAMPLES};
use std::borrow::Cow;

/// The fewest rounds whose medians give a 95% interval (6: `[min, max]` covers 96.9%).
pub const MIN_ROUNDS: usize = MIN_CI_SAMPLES;
/// More rounds than any cell needs (`sweep` and `steps --max-rounds`): a larger value is a
/// typo, and one that large would run for days.
pub const MAX_ROUNDS: usize = 100;

/// Median of each round's samples (non-finite samples dropped; an empty round is skipped).
pub fn round_medians(rounds: &[Vec<f64>]) -> Vec<f64> {
    rounds
        .iter()
        .filter_map(|r| summarize(r).map(|s| s.median))
        .collect()
}

/// The process map of rounds all measured in one process (`steps`, `sweep --processes 1`):
/// the rounds are the units.
pub const ONE_PROCESS: &[u32] = &[];

/// The units a cell's estimate and interval are over, `processes[r]` having measured round
/// `r`: one per process, holding its rounds' samples together (in the order the processes
/// came), where rounds with a finite sample span at least [`MIN_ROUNDS`] processes; else the
/// rounds as they are (one process measured them all, too few did for an interval over
/// processes, or `processes` does not cover them).
///
/// A process draws its state once for all its rounds (where its memory and the driver's
/// structures landed, its CPU's state), so its rounds are not independent draws. Counted one
/// by one they weigh that draw as often as the process had rounds and narrow the interval as
/// if each were a fresh process (docs/h200-findings.md: a process's draw).
pub fn units<'r>(rounds: &'r [Vec<f64>], processes: &[u32]) -> Cow<'r, [Vec<f64>]> {
    let Some(processes) = processes.get(..rounds.len()) else {
        return Cow::Borrowed(rounds);
    };
    let mut order: Vec<u32> = Vec::new();
    for (round, &process) in rounds.iter().zip(processes) {
        // A round with no finite sample is no unit's (`round_medians` skips it).
        if round.iter().any(|v| v.is_finite()) && !order.contains(&process) {
            order.push(process);
        }
    }
    if order.len() < MIN_ROUNDS {
        return Cow::Borrowed(rounds);
    }
    Cow::Owned(
        order
            .iter()
            .map(|&p| {
                (rounds.iter().zip(processes))
                    .filter(|&(_, &of)| of == p)
                    .flat_map(|(round, _)| round.iter().copied())
                    .collect()
            })
            .collect(),
    )
}

/// A cell's summary over rounds (see the module docs; [`units`] says what the interval is
/// over); `None` without a finite sample.
pub fn over_rounds(rounds: &[Vec<f64>], processes: &[u32]) -> Option<Summary> {
    let between = summarize(&round_medians(&units(rounds, processes)))?;
    let pooled = summarize(&rounds.concat())?;
    Some(Summary {
        median: between.median,
        ci_lo: between.ci_lo,
        ci_hi: between.ci_hi,
        ..pooled
    })
}

/// A quantity of two cells formed inside each round and summarised over rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// The median over rounds and its order-statistic 95% interval (NaN bounds below
    /// [`MIN_ROUNDS`] rounds).
    pub estimate: Estimate,
    /// Rounds both cells measured: those the estimate is over.
    pub rounds: usize,
}

/// `stat(median of a's round, median of b's round)` for each round both measured,
/// summarised over rounds (by process as [`units`] says, `processes[r]` having measured round
/// `r`). `None` when no round has both.
pub fn paired(
    a: &[Vec<f64>],
    b: &[Vec<f64>],
    stat: impl Fn(f64, f64) -> f64,
    processes: &[u32],
) -> Option<Paired> {
    let each = per_round(a, b, stat);
    let s = summarize(&round_medians(&units(&each, processes)))?;
    Some(Paired {
        estimate: Estimate {
            point: s.median,
            lo: s.ci_lo,
            hi: s.ci_hi,
        },
        rounds: round_medians(&each).len(),
    })
}

/// Each round's `stat` of the two cells' round medians, as a one-value round: empty where
/// either cell has no finite sample that round, so round `r` stays at index `r`.
fn per_round(a: &[Vec<f64>], b: &[Vec<f64>], stat: impl Fn(f64, f64) -> f64) -> Vec<Vec<f64>> {
    a.iter()
        .zip(b)
        .map(|(ra, rb)| match (summarize(ra), summarize(rb)) {
            (Some(x), Some(y)) => vec![stat(x.median, y.median)],
            _ => Vec::new(),
        })
        .collect()
}

/// Half the width of an estimate's interval; infinite when it has none.
pub fn half_width(e: &Estimate) -> f64 {
    let half = (e.hi - e.lo) / 2.0;
    if half.is_finite() {
        half
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_median_of_round_medians_and_the_interval_spans_rounds() {
        // Six rounds whose level drifts; inside each round the samples are tight.
        let rounds: Vec<Vec<f64>> = [10.0, 11.0, 10.5, 12.0, 10.2, 11.5]
            .iter()
            .map(|&level| vec![level - 0.01, level, level + 0.01])
            .collect();
        let s = over_rounds(&rounds, &[]).unwrap();
        assert!((s.median - 10.75).abs() < 1e-12, "{}", s.median);
        // Six values: the interval is [min, max] of the round medians, not the pooled CI.
        assert_eq!((s.ci_lo, s.ci_hi), (10.0, 12.0));
        assert_eq!(s.samples, 18);
        assert!(s.p10 < 10.2 && s.p90 > 11.5);
        // Five rounds are too few for a 95% interval.
        let s = over_rounds(&rounds[..5], &[]).unwrap();
        assert!(s.ci_lo.is_nan() && s.ci_hi.is_nan());
        assert_eq!(
            half_width(&Estimate {
                point: 1.0,
                lo: s.ci_lo,
                hi: s.ci_hi
            }),
            f64::INFINITY
        );
    }

    #[test]
    fn paired_estimates_cancel_drift_both_arms_share() {
        // Arm a is 10% slower than b in every round while both drift by ±20%.
        let levels = [100.0, 120.0, 80.0, 110.0, 90.0, 105.0, 95.0];
        let b: Vec<Vec<f64>> = levels.iter().map(|&l| vec![l, l + 0.5, l - 0.5]).collect();
        let a: Vec<Vec<f64>> = levels
            .iter()
            .map(|&l| vec![1.1 * l, 1.1 * (l + 0.5), 1.1 * (l - 0.5)])
            .collect();
        let ratio = paired(&a, &b, |x, y| x / y, &[]).unwrap();
        assert_eq!(ratio.rounds, 7);
        let ratio = ratio.estimate;
        assert!((ratio.point - 1.1).abs() < 1e-12);
        assert!(half_width(&ratio) < 1e-9, "{ratio:?}");
        // Unpaired, the same data's intervals are as wide as the drift.
        let (sa, sb) = (over_rounds(&a, &[]).unwrap(), over_rounds(&b, &[]).unwrap());
        assert!(sa.ci_hi / sb.ci_lo - sa.ci_lo / sb.ci_hi > 0.4);
        // A round one arm missed is left out of the pairing.
        let mut b_short = b.clone();
        b_short[2].clear();
        let diff = paired(&a, &b_short, |x, y| x - y, &[]).unwrap();
        assert_eq!(diff.rounds, 6);
        assert!(diff.estimate.point > 0.0);
    }

    #[test]
    fn a_process_is_one_unit_however_many_rounds_it_measured() {
        // Six processes of one round each near 10, then one process of ten rounds at 11: its
        // draw, counted by round, outvotes the other six.
        let mut rounds: Vec<Vec<f64>> = [10.0, 10.2, 9.8, 10.1, 9.9, 10.05]
            .iter()
            .map(|&l| vec![l - 0.01, l, l + 0.01])
            .collect();
        rounds.extend(std::iter::repeat_n(vec![10.99, 11.0, 11.01], 10));
        let mut processes: Vec<u32> = (1..=6).collect();
        processes.extend([7; 10]);
        let by_round = over_rounds(&rounds, &[]).unwrap();
        let by_process = over_rounds(&rounds, &processes).unwrap();
        assert_eq!(by_round.median, 11.0);
        assert_eq!(by_process.median, 10.05);
        assert_eq!((by_process.ci_lo, by_process.ci_hi), (9.8, 11.0));
        assert!(by_round.ci_lo > 10.0, "{by_round:?}");
        // The pooled spread and counts are every sample's either way.
        assert_eq!(by_process.samples, 48);
        assert_eq!(by_process.p90, by_round.p90);
        let units = units(&rounds, &processes);
        assert_eq!(units.len(), 7);
        assert_eq!(units[6].len(), 30);
        // Paired the same way: a's rounds over b's, per process.
        let b: Vec<Vec<f64>> = vec![vec![1.0]; rounds.len()];
        let p = paired(&rounds, &b, |x, y| x / y, &processes).unwrap();
        assert_eq!((p.estimate.point, p.rounds), (10.05, 16));
    }

    #[test]
    fn rounds_stay_the_units_below_six_processes_or_without_a_map() {
        let rounds: Vec<Vec<f64>> = (0..8).map(|r| vec![r as f64]).collect();
        // Five processes: too few for an interval over processes.
        let five = [1, 1, 2, 3, 4, 5, 5, 5];
        assert!(matches!(units(&rounds, &five), Cow::Borrowed(_)));
        // No map (one process measured them all), or one that does not cover the rounds.
        assert!(matches!(units(&rounds, &[]), Cow::Borrowed(_)));
        assert!(matches!(
            units(&rounds, &[1, 2, 3, 4, 5, 6]),
            Cow::Borrowed(_)
        ));
        // An empty round's process counts for nothing: six named, five measured.
        let mut gapped = rounds.clone();
        gapped[7].clear();
        let six = [1, 2, 3, 4, 5, 5, 5, 6];
        assert!(matches!(units(&gapped, &six), Cow::Borrowed(_)));
        gapped[7] = vec![f64::NAN, f64::INFINITY];
        assert!(matches!(units(&gapped, &six), Cow::Borrowed(_)));
        assert_eq!(units(&rounds, &six).len(), 6);
    }

    #[test]
    fn per_round_values_keep_each_rounds_place() {
        // A round either side missed leaves a gap, never shifting later rounds onto earlier
        // ones: round 2 of a third cell still pairs with round 2.
        let a = vec![vec![5.0], vec![6.0], vec![7.0], vec![8.0]];
        let b = vec![vec![1.0], vec![], vec![f64::NAN], vec![2.0]];
        assert_eq!(
            per_round(&a, &b, |x, y| x - y),
            vec![vec![4.0], vec![], vec![], vec![6.0]]
        );
    }
}
