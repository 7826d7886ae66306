//! When to stop sampling a sweep cell.
//!
//! A cell stops as soon as one of these holds, checked in this order:
//! 1. **converged** (`ci`): at least `min_samples` finite samples, and the 95% CI of the
//!    median is within `rel_ci` of the median — or its half-width is at most `abs_ci_us`.
//!    The absolute floor exists for sub-µs cells (empty launches, tiny copies), where 1% is a
//!    few nanoseconds, below what the timers resolve, and chasing it would only burn the cap;
//! 2. **sample cap** (`sample-cap`): `max_samples` samples taken, counting non-finite ones so
//!    that a broken timer cannot loop forever;
//! 3. **time cap** (`time-cap`): `time_cap` elapsed.

use super::stats::{rel_half_width, summarize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
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
            let half_width = (summary.ci_hi - summary.ci_lo) / 2.0;
            let within_abs = self.abs_ci_us.is_some_and(|abs| half_width <= abs);
            if summary.samples >= self.min_samples
                && (rel_half_width(&summary) <= self.rel_ci || within_abs)
            {
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
