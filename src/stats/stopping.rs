//! When to stop measuring a sweep cell: inside a round, and when to stop adding rounds.
//!
//! The rules, inside a round and over rounds, and why: docs/rounds.md, "When a cell and a group
//! stop".

use super::rounds::{half_width, Paired};
use super::summary::{rel_half_width, summarize, Summary};
use std::time::Duration;

/// The read cost's precision bar: a 95% half-width within 1% of the cost or 0.3 µs.
pub const READ_COST_REL_CI: f64 = 0.01;
pub const READ_COST_ABS_CI_US: f64 = 0.3;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoppingRule {
    /// Target CI half-width relative to the median (0.01 = ±1%).
    pub rel_ci: f64,
    /// Absolute CI half-width (µs) that also counts as converged; `None` disables it.
    pub abs_ci_us: Option<f64>,
    pub min_samples: usize,
    pub max_samples: usize,
    pub time_cap: Duration,
}

impl Default for StoppingRule {
    /// ±1% or ±20 ns, 10 to 1000 samples, 5 s per cell. 20 ns is far below the effects this
    /// suite measures (µs per step) and near what a mean over a batch of event-timed steps
    /// resolves; at 10 samples the median's CI is `[x(2), x(9)]`, no longer held open by
    /// the two extremes (n ≥ 9 is the first for which that is so); 5 s keeps a sweep of a few
    /// hundred cells under an hour.
    fn default() -> Self {
        StoppingRule {
            rel_ci: 0.01,
            abs_ci_us: Some(0.02),
            min_samples: 10,
            max_samples: 1000,
            time_cap: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Converged,
    TimeCap,
    SampleCap,
}

impl StopReason {
    /// The value written to the results CSV's `stop_reason` column.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Converged => "ci",
            StopReason::TimeCap => "time-cap",
            StopReason::SampleCap => "sample-cap",
        }
    }
}

impl StoppingRule {
    /// `Some(reason)` once the cell should stop, given its samples (µs) and time spent.
    pub fn check(&self, samples: &[f64], elapsed: Duration) -> Option<StopReason> {
        if let Some(summary) = summarize(samples) {
            if summary.samples >= self.min_samples && self.precise(&summary) {
                return Some(StopReason::Converged);
            }
        }
        if samples.len() >= self.max_samples {
            return Some(StopReason::SampleCap);
        }
        if elapsed >= self.time_cap {
            return Some(StopReason::TimeCap);
        }
        None
    }

    /// Whether a median's 95% interval is within `rel_ci` of it or `abs_ci_us` each side
    /// (never without an interval).
    fn precise(&self, s: &Summary) -> bool {
        let half_width = (s.ci_hi - s.ci_lo) / 2.0;
        let within_abs = self.abs_ci_us.is_some_and(|abs| half_width <= abs);
        rel_half_width(s) <= self.rel_ci || within_abs
    }

    /// The rule for one of `rounds` rounds: exactly `min_samples` samples (or the time cap
    /// shared out between the rounds, whichever comes first). A round's own interval is not
    /// what is reported (the spread between rounds is), so a round that has its samples has
    /// no reason to go on (docs/rounds.md).
    pub fn per_round(&self, rounds: usize) -> StoppingRule {
        StoppingRule {
            max_samples: self.min_samples,
            time_cap: self.time_cap / rounds.max(1) as u32,
            ..self.clone()
        }
    }
}

/// When a group of cells stops adding rounds (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundsRule {
    pub min_rounds: usize,
    pub max_rounds: usize,
    /// The precision every arm's `step_us` must reach; its time cap and sample counts are
    /// the within-round rule's and not used here.
    pub step: StoppingRule,
    /// The group's measuring time (all its cells, all rounds) after which it gets no further
    /// round beyond `min_rounds`.
    pub time_cap: Duration,
    /// The most rounds a GPU-paced arm gets ([`RoundsRule::gpu_paced_stop`]); at or below
    /// `max_rounds`, none beyond its group's.
    pub gpu_paced_max_rounds: usize,
    /// The half-width, relative to the median, a GPU-paced arm's intervals are taken to.
    pub gpu_paced_rel_ci: f64,
}

/// Why a group's rounds stopped: the `stop_reason` of the rows measured in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsStop {
    Precision,
    MaxRounds,
    TimeCap,
    /// A GPU-paced arm's own cap, past its group's `max_rounds`.
    GpuPacedMaxRounds,
}

impl RoundsStop {
    /// The rule sweep groups and step cells share after `rounds` rounds: nothing before
    /// `min`; then `precise()` (asked only then), the round maximum and the time cap, in
    /// that order.
    pub fn after(
        rounds: usize,
        (min, max): (usize, usize),
        precise: impl FnOnce() -> bool,
        elapsed: Duration,
        cap: Duration,
    ) -> Option<RoundsStop> {
        if rounds < min {
            None
        } else if precise() {
            Some(RoundsStop::Precision)
        } else if rounds >= max {
            Some(RoundsStop::MaxRounds)
        } else if elapsed >= cap {
            Some(RoundsStop::TimeCap)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RoundsStop::Precision => "precision",
            RoundsStop::MaxRounds => "max-rounds",
            RoundsStop::TimeCap => "time-cap",
            RoundsStop::GpuPacedMaxRounds => "gpu-paced-max-rounds",
        }
    }
}

impl RoundsRule {
    /// `Some(reason)` once a group should get no further round, given its rounds so far,
    /// each arm's `step_us` over those rounds, the paired read cost of each reading arm it
    /// has (against eager-device), and its measuring time. Precise only when every step and
    /// every read cost is; a `None` step summary (no finite sample) is imprecise.
    pub fn check(
        &self,
        rounds: usize,
        steps: &[Option<Summary>],
        read_costs: &[Paired],
        elapsed: Duration,
    ) -> Option<RoundsStop> {
        let precise = || {
            let steps_precise = steps
                .iter()
                .all(|s| s.as_ref().is_some_and(|s| self.step.precise(s)));
            steps_precise
                && read_costs.iter().all(|cost| {
                    let bar =
                        (READ_COST_REL_CI * cost.estimate.point.abs()).max(READ_COST_ABS_CI_US);
                    half_width(&cost.estimate) <= bar
                })
        };
        let bounds = (self.min_rounds, self.max_rounds);
        RoundsStop::after(rounds, bounds, precise, elapsed, self.time_cap)
    }

    /// `Some(reason)` once a GPU-paced arm should get no further round, its group having
    /// stopped for `group` (the reason and its rounds then), given the arm's rounds so far, its
    /// metrics over them (`step_us` and `gpu_prep_us`: imprecise if `None`) and its group's
    /// measuring time. It stops once every metric is within `gpu_paced_rel_ci` (or `abs_ci_us`),
    /// at `gpu_paced_max_rounds`, or at the time cap, in that order; an arm that stops at its
    /// group's round stops for its group's reason.
    pub fn gpu_paced_stop(
        &self,
        group: (RoundsStop, usize),
        rounds: usize,
        metrics: &[Option<Summary>],
        elapsed: Duration,
    ) -> Option<RoundsStop> {
        let bar = StoppingRule {
            rel_ci: self.gpu_paced_rel_ci,
            ..self.step.clone()
        };
        let precise = (metrics.iter()).all(|s| s.as_ref().is_some_and(|s| bar.precise(s)));
        let own = if precise {
            RoundsStop::Precision
        } else if rounds >= self.gpu_paced_max_rounds {
            RoundsStop::GpuPacedMaxRounds
        } else if elapsed >= self.time_cap {
            RoundsStop::TimeCap
        } else {
            return None;
        };
        Some(if rounds <= group.1 { group.0 } else { own })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_millis(1);

    fn rule() -> StoppingRule {
        StoppingRule {
            abs_ci_us: None,
            ..StoppingRule::default()
        }
    }

    /// Feeds samples one at a time, as a sweep does, and returns when and why it stopped.
    fn run(rule: &StoppingRule, source: impl Fn(usize) -> f64) -> (usize, StopReason) {
        let mut samples = Vec::new();
        loop {
            samples.push(source(samples.len()));
            if let Some(reason) = rule.check(&samples, SHORT) {
                return (samples.len(), reason);
            }
        }
    }

    /// Deterministic noise in [-0.5, 0.5).
    fn noise(i: usize) -> f64 {
        let x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }

    #[test]
    fn csv_strings() {
        assert_eq!(StopReason::Converged.as_str(), "ci");
        assert_eq!(StopReason::TimeCap.as_str(), "time-cap");
        assert_eq!(StopReason::SampleCap.as_str(), "sample-cap");
    }

    #[test]
    fn tight_sequence_converges_at_min_samples() {
        // ±0.1% noise around 24 µs: converged as soon as min_samples is reached, not before.
        let (n, reason) = run(&rule(), |i| 24.0 * (1.0 + 0.002 * noise(i)));
        assert_eq!((n, reason), (rule().min_samples, StopReason::Converged));
    }

    #[test]
    fn noisy_sequence_runs_to_the_sample_cap() {
        // ±50% noise: the median's CI stays far wider than ±1% within 1000 samples.
        let (n, reason) = run(&rule(), |i| 24.0 * (1.0 + noise(i)));
        assert_eq!((n, reason), (rule().max_samples, StopReason::SampleCap));
    }

    #[test]
    fn moderate_noise_converges_between_the_bounds() {
        // ±5% noise needs roughly a hundred samples for a ±1% CI of the median.
        let (n, reason) = run(&rule(), |i| 24.0 * (1.0 + 0.1 * noise(i)));
        assert_eq!(reason, StopReason::Converged);
        assert!(n > 20 && n < 500, "stopped at {n}");
    }

    #[test]
    fn time_cap_fires() {
        let r = rule();
        let noisy: Vec<f64> = (0..50).map(|i| 1.0 + noise(i)).collect();
        assert_eq!(r.check(&noisy, r.time_cap / 2), None);
        assert_eq!(r.check(&noisy, r.time_cap), Some(StopReason::TimeCap));
        // Also with no samples at all (e.g. every batch failed to time).
        assert_eq!(r.check(&[], r.time_cap), Some(StopReason::TimeCap));
    }

    #[test]
    fn sample_cap_counts_non_finite_samples() {
        let r = StoppingRule {
            max_samples: 5,
            ..rule()
        };
        assert_eq!(r.check(&[f64::NAN; 4], SHORT), None);
        assert_eq!(r.check(&[f64::NAN; 5], SHORT), Some(StopReason::SampleCap));
    }

    #[test]
    fn min_samples_counts_only_finite_samples() {
        let mut samples = vec![5.0; 9];
        samples.push(f64::NAN);
        assert_eq!(rule().check(&samples, SHORT), None);
        samples.push(5.0);
        assert_eq!(rule().check(&samples, SHORT), Some(StopReason::Converged));
    }

    #[test]
    fn a_round_takes_min_samples_within_its_share_of_the_time_cap() {
        let r = rule().per_round(6);
        assert_eq!(r.time_cap, rule().time_cap / 6);
        assert_eq!(
            (r.min_samples, r.max_samples, r.rel_ci),
            (rule().min_samples, rule().min_samples, rule().rel_ci)
        );
        // Noise far beyond ±1% no longer holds a round open past its samples.
        let (n, reason) = run(&r, |i| 24.0 * (1.0 + 0.5 * noise(i)));
        assert_eq!((n, reason), (rule().min_samples, StopReason::SampleCap));
    }

    fn rounds_rule() -> RoundsRule {
        RoundsRule {
            min_rounds: 6,
            max_rounds: 10,
            step: StoppingRule::default(),
            time_cap: Duration::from_secs(2),
            gpu_paced_max_rounds: 36,
            gpu_paced_rel_ci: 0.007,
        }
    }

    /// `n` rounds of a cell at `level` µs whose round medians spread by `spread` (relative).
    fn rounds_at(level: f64, spread: f64, n: usize) -> Vec<Vec<f64>> {
        (0..n)
            .map(|i| {
                let m = level * (1.0 + spread * noise(i));
                vec![m * 0.999, m, m * 1.001]
            })
            .collect()
    }

    fn check_rounds(
        rule: &RoundsRule,
        arms: &[Vec<Vec<f64>>],
        read: bool,
        elapsed: Duration,
    ) -> Option<RoundsStop> {
        use crate::stats::rounds::{over_rounds, paired};
        let rounds = arms[0].len();
        let steps: Vec<_> = arms.iter().map(|a| over_rounds(a, &[])).collect();
        let cost = paired(&arms[0], &arms[1], |x, y| x - y, &[]);
        let costs: Vec<Paired> = cost.filter(|_| read).into_iter().collect();
        rule.check(rounds, &steps, &costs, elapsed)
    }

    #[test]
    fn rounds_stop_for_precision_only_when_every_read_cost_is_precise() {
        // Two reading arms against one eager-device: one read cost tight, one drifting apart.
        // At the round maximum the group stops for the rounds, not for precision.
        use crate::stats::rounds::{over_rounds, paired};
        let r = rounds_rule();
        let alternating = |level: f64, swing: f64| -> Vec<Vec<f64>> {
            (0..10)
                .map(|i| vec![level + swing * (i % 2) as f64])
                .collect()
        };
        let (tight, wide, device) = (
            alternating(40.0, 0.35),
            alternating(40.35, -0.35),
            alternating(20.0, 0.35),
        );
        let steps: Vec<_> = [&tight, &wide, &device]
            .map(|a| over_rounds(a, &[]))
            .to_vec();
        let tight_cost = paired(&tight, &device, |x, y| x - y, &[]).unwrap();
        let wide_cost = paired(&wide, &device, |x, y| x - y, &[]).unwrap();
        let check = |costs: &[Paired]| r.check(10, &steps, costs, SHORT);
        assert_eq!(
            check(std::slice::from_ref(&tight_cost)),
            Some(RoundsStop::Precision)
        );
        for costs in [[tight_cost, wide_cost], [wide_cost, tight_cost]] {
            assert_eq!(check(&costs), Some(RoundsStop::MaxRounds));
        }
    }

    #[test]
    fn rounds_stop_at_precision_once_min_rounds_are_in() {
        let r = rounds_rule();
        // Round medians within ±0.2%: precise, but not before the sixth round.
        let tight = [rounds_at(40.0, 0.004, 6), rounds_at(20.0, 0.004, 6)];
        assert_eq!(
            check_rounds(&r, &tight, true, SHORT),
            Some(RoundsStop::Precision)
        );
        let five = [tight[0][..5].to_vec(), tight[1][..5].to_vec()];
        assert_eq!(
            check_rounds(&r, &five, true, r.time_cap * 2),
            None,
            "min rounds first"
        );
        assert_eq!(RoundsStop::Precision.as_str(), "precision");
    }

    #[test]
    fn rounds_go_on_while_an_arm_or_the_read_cost_is_wide() {
        let r = rounds_rule();
        // One arm drifts by ±10% between rounds: not precise; more rounds until the cap.
        let drifting = [rounds_at(40.0, 0.2, 6), rounds_at(20.0, 0.004, 6)];
        assert_eq!(check_rounds(&r, &drifting, false, SHORT), None);
        let at_max = [rounds_at(40.0, 0.2, 10), rounds_at(20.0, 0.004, 10)];
        assert_eq!(
            check_rounds(&r, &at_max, false, SHORT),
            Some(RoundsStop::MaxRounds)
        );
        assert_eq!(
            check_rounds(&r, &drifting, false, r.time_cap),
            Some(RoundsStop::TimeCap)
        );
        assert_eq!(RoundsStop::MaxRounds.as_str(), "max-rounds");
        assert_eq!(RoundsStop::TimeCap.as_str(), "time-cap");
        // Both arms' rounds within ±0.9% of their medians (each precise). Drifting together,
        // their difference moves by ±0.18 µs: precise. Drifting apart, by ±0.53 µs: wider
        // than max(1% of 20 µs, 0.3 µs), so the read cost holds the group back.
        let alternating = |level: f64, swing: f64| -> Vec<Vec<f64>> {
            (0..6)
                .map(|i| vec![level + swing * (i % 2) as f64])
                .collect()
        };
        let together = [alternating(40.0, 0.7), alternating(20.0, 0.35)];
        assert_eq!(
            check_rounds(&r, &together, true, SHORT),
            Some(RoundsStop::Precision)
        );
        let apart = [alternating(40.0, 0.7), alternating(20.35, -0.35)];
        assert_eq!(
            check_rounds(&r, &apart, false, SHORT),
            Some(RoundsStop::Precision)
        );
        assert_eq!(check_rounds(&r, &apart, true, SHORT), None);
    }

    /// Rounds of a GPU-paced arm after its group stopped at `max_rounds` (10) for the
    /// round maximum, one at a time from its eleventh, its `step_us` and `gpu_prep_us` each
    /// `level(round)` µs: when and why it stopped.
    fn gpu_paced_run(rule: &RoundsRule, level: impl Fn(usize) -> f64) -> (usize, RoundsStop) {
        use crate::stats::rounds::over_rounds;
        let group = (RoundsStop::MaxRounds, rule.max_rounds);
        let mut rounds: Vec<Vec<f64>> = (0..rule.max_rounds).map(|r| vec![level(r)]).collect();
        loop {
            rounds.push(vec![level(rounds.len())]);
            let step = over_rounds(&rounds, &[]);
            let metrics = [step, step];
            if let Some(stop) = rule.gpu_paced_stop(group, rounds.len(), &metrics, SHORT) {
                return (rounds.len(), stop);
            }
            assert!(rounds.len() < 1000, "never stopped");
        }
    }

    /// `n` one-sample rounds, 20 and 20.8 µs in turn: ±2% wide.
    fn alternating_rounds(n: usize) -> Vec<Vec<f64>> {
        (0..n).map(|r| vec![[20.0, 20.8][r % 2]]).collect()
    }

    /// Round medians 2% either side of 20 µs in turn for `wide` rounds, then 20 µs.
    fn settling(wide: usize) -> impl Fn(usize) -> f64 {
        move |r| match r < wide {
            true => 20.0 * (1.0 + 0.02 * [-1.0, 1.0][r % 2]),
            false => 20.0,
        }
    }

    #[test]
    fn a_gpu_paced_arm_that_converges_stops_there() {
        let r = rounds_rule();
        // 10 rounds at ±2%, then steady: the median's interval leaves the wide rounds for the
        // steady ones at the 20th round, and the arm stops there, past max_rounds (10).
        assert_eq!(gpu_paced_run(&r, settling(10)), (20, RoundsStop::Precision));
        assert_eq!(
            RoundsStop::GpuPacedMaxRounds.as_str(),
            "gpu-paced-max-rounds"
        );
        // Its intervals are taken to gpu_paced_rel_ci: at ±2.5% the ±2% rounds pass at once,
        // and an arm stopping at its group's round stops for its group's reason.
        let loose = RoundsRule {
            gpu_paced_rel_ci: 0.025,
            ..r.clone()
        };
        assert_eq!(
            gpu_paced_run(&loose, settling(1000)),
            (11, RoundsStop::Precision)
        );
        let group = (RoundsStop::MaxRounds, 10);
        let wide = crate::stats::rounds::over_rounds(&alternating_rounds(10), &[]);
        let metrics = [wide, wide];
        assert_eq!(
            loose.gpu_paced_stop(group, 10, &metrics, SHORT),
            Some(RoundsStop::MaxRounds)
        );
        assert_eq!(r.gpu_paced_stop(group, 10, &metrics, SHORT), None);
        // Without a summary (no finite sample) no metric is precise.
        assert_eq!(r.gpu_paced_stop(group, 11, &[None], SHORT), None);
    }

    #[test]
    fn a_gpu_paced_arm_that_never_converges_stops_at_its_cap_or_the_time_cap() {
        let r = rounds_rule();
        assert_eq!(
            gpu_paced_run(&r, settling(1000)),
            (r.gpu_paced_max_rounds, RoundsStop::GpuPacedMaxRounds)
        );
        let group = (RoundsStop::MaxRounds, 10);
        let wide = crate::stats::rounds::over_rounds(&alternating_rounds(12), &[]);
        let metrics = [wide, wide];
        assert_eq!(
            r.gpu_paced_stop(group, 12, &metrics, r.time_cap),
            Some(RoundsStop::TimeCap)
        );
        // A group stopped by its time cap gives its arms no round of their own.
        let spent = (RoundsStop::TimeCap, 10);
        assert_eq!(
            r.gpu_paced_stop(spent, 10, &metrics, r.time_cap),
            Some(RoundsStop::TimeCap)
        );
        // A cap at the group's rounds: the arm stops with its group.
        let none = RoundsRule {
            gpu_paced_max_rounds: 10,
            ..r.clone()
        };
        assert_eq!(
            gpu_paced_run(&none, settling(1000)).1,
            RoundsStop::GpuPacedMaxRounds
        );
        assert_eq!(
            none.gpu_paced_stop(group, 10, &metrics, SHORT),
            Some(RoundsStop::MaxRounds)
        );
    }

    #[test]
    fn absolute_floor_converges_sub_microsecond_cells() {
        // 0.5 µs ± 25%: ±1% relative needs ~2400 samples, ±20 ns absolute ~150.
        let source = |i| 0.5 * (1.0 + 0.5 * noise(i));
        let (_, without_floor) = run(&rule(), source);
        assert_eq!(without_floor, StopReason::SampleCap);
        let (n, with_floor) = run(&StoppingRule::default(), source);
        assert_eq!(with_floor, StopReason::Converged);
        assert!(n < rule().max_samples, "stopped at {n}");
    }
}
