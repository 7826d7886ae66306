//! Statistics over per-sample values (a sample is the mean time per step of one batch, µs).
//!
//! Conventions used throughout:
//! * **Non-finite values are dropped.** A NaN or infinite sample means a broken reading, and
//!   one bad batch should not wipe out a cell; `Summary::samples` counts the values kept, so
//!   a caller can compare it with the number it passed in.
//! * **Quantiles** use linear interpolation between order statistics, Hyndman & Fan type 7
//!   (numpy's and R's default): for sorted `x[0..n]`, `h = (n - 1) p` and
//!   `q(p) = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋ + 1] − x[⌊h⌋])`.
//! * **The 95% CI of the median** is distribution-free, from order statistics: the number of
//!   samples below the true median is Binomial(n, ½), so `[x(l), x(n+1−l)]` (1-based ranks)
//!   covers it with probability `1 − 2 P(B ≤ l − 1)`; we take the largest `l` keeping that at
//!   least 95%, with the exact binomial for every n (log-space, so large n cannot underflow).
//!   With n ≤ 5 even `[min, max]` covers less than 95% (n = 5: 93.75%, n = 1: 0%), so the CI
//!   is undefined there and reported as NaN: a one-sample "interval" of zero width would
//!   claim a certainty the data does not have, and comparisons then say "uncertain".
//! * **Differences and ratios** of two cells are formed round by round, where both ran back
//!   to back, and summarised like any other values (see [`super::rounds::paired`]).

/// Summary of one cell's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// 95% confidence interval of the median (order statistics, see the module docs).
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub mean: f64,
    /// Finite samples used.
    pub samples: usize,
}

/// A point estimate with a 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub point: f64,
    pub lo: f64,
    pub hi: f64,
}

const CONFIDENCE: f64 = 0.95;
/// The fewest samples whose order statistics can cover the median with 95% (n = 6: 96.9%).
pub const MIN_CI_SAMPLES: usize = 6;

/// Summarises `samples`, dropping non-finite values; `None` when no finite value is left.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let sorted = sorted_finite(samples);
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let (lo_rank, hi_rank) = median_ci_ranks(n);
    let (ci_lo, ci_hi) = if n >= MIN_CI_SAMPLES {
        (sorted[lo_rank - 1], sorted[hi_rank - 1])
    } else {
        (f64::NAN, f64::NAN)
    };
    Some(Summary {
        median: quantile_sorted(&sorted, 0.5),
        p10: quantile_sorted(&sorted, 0.1),
        p90: quantile_sorted(&sorted, 0.9),
        ci_lo,
        ci_hi,
        mean: sorted.iter().sum::<f64>() / n as f64,
        samples: n,
    })
}

/// Half the CI's width over the median's magnitude. A zero-width CI gives 0 even at a zero
/// median; any other CI around a zero median gives infinity (never converged).
pub fn rel_half_width(summary: &Summary) -> f64 {
    let half = (summary.ci_hi - summary.ci_lo) / 2.0;
    if half == 0.0 {
        0.0
    } else {
        half / summary.median.abs()
    }
}

fn sorted_finite(samples: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted
}

/// Type-7 quantile `p` in [0, 1] of `samples` (non-finite ones dropped); `None` when none
/// is finite.
pub fn quantile(samples: &[f64], p: f64) -> Option<f64> {
    let sorted = sorted_finite(samples);
    (!sorted.is_empty()).then(|| quantile_sorted(&sorted, p))
}

/// Type-7 quantile of a non-empty sorted slice, `p` in [0, 1].
pub(crate) fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let below = h.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let frac = h - below as f64;
    if frac == 0.0 {
        // Exact rank: avoids `inf - inf` style NaNs and keeps constant data exact.
        sorted[below]
    } else {
        sorted[below] + frac * (sorted[above] - sorted[below])
    }
}

/// 1-based ranks `(l, n + 1 − l)` of the median's 95% CI for `n ≥ 1` samples.
fn median_ci_ranks(n: usize) -> (usize, usize) {
    let max_tail = (1.0 - CONFIDENCE) / 2.0;
    // Walk the Binomial(n, ½) CDF up from 0; l − 1 is the last k with P(B ≤ k) ≤ max_tail.
    let ln_half_pow_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, k)
    let mut cdf = 0.0;
    let mut lo_rank = 1;
    for k in 0..n / 2 {
        cdf += (ln_choose + ln_half_pow_n).exp();
        if cdf > max_tail {
            break;
        }
        lo_rank = k + 1;
        ln_choose += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    (lo_rank, n + 1 - lo_rank)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::SplitMix64;

    /// Deterministic pseudo-random values in [0, 1) for synthetic noise.
    fn uniform(seed: u64, n: usize) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn empty_and_all_nan_give_none() {
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN, f64::INFINITY]).is_none());
    }

    #[test]
    fn odd_n_quantiles_match_type7() {
        // Shuffled 1..=11; type 7: p10 at h = 1.0 -> 2, p90 at h = 9.0 -> 10.
        let s = summarize(&[7.0, 3.0, 11.0, 1.0, 5.0, 9.0, 2.0, 10.0, 4.0, 8.0, 6.0]).unwrap();
        assert_eq!(s.median, 6.0);
        assert_eq!(s.p10, 2.0);
        assert_eq!(s.p90, 10.0);
        assert_eq!(s.mean, 6.0);
        assert_eq!(s.samples, 11);
    }

    #[test]
    fn even_n_interpolates() {
        // 1,2,3,4: median h = 1.5 -> 2.5; p10 h = 0.3 -> 1.3; p90 h = 2.7 -> 3.7.
        let s = summarize(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert!(close(s.median, 2.5));
        assert!(close(s.p10, 1.3));
        assert!(close(s.p90, 3.7));
    }

    #[test]
    fn too_few_samples_have_no_ci() {
        let s = summarize(&[3.5]).unwrap();
        assert_eq!((s.median, s.p10, s.p90), (3.5, 3.5, 3.5));
        assert!(
            s.ci_lo.is_nan() && s.ci_hi.is_nan(),
            "one sample cannot bound the median"
        );
        let five = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!(five.ci_lo.is_nan(), "n = 5 covers only 93.75%");
        let six = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!((six.ci_lo, six.ci_hi), (1.0, 6.0));
    }

    #[test]
    fn ci_ranks_match_binomial_tables() {
        // n ≤ 5: whole range. n = 6: 2^-6 ≤ 2.5% < 7·2^-6, so still [x(1), x(6)].
        assert_eq!(median_ci_ranks(1), (1, 1));
        assert_eq!(median_ci_ranks(5), (1, 5));
        assert_eq!(median_ci_ranks(6), (1, 6));
        // Published values (e.g. Conover, Practical Nonparametric Statistics, table A3):
        // n = 10 -> [x(2), x(9)], n = 20 -> [x(6), x(15)], n = 100 -> [x(40), x(61)].
        assert_eq!(median_ci_ranks(10), (2, 9));
        assert_eq!(median_ci_ranks(20), (6, 15));
        assert_eq!(median_ci_ranks(100), (40, 61));
        // Large n stays close to the normal approximation n/2 − 0.98·√n and does not underflow.
        let (lo, hi) = median_ci_ranks(10_000);
        assert!((4900..=4903).contains(&lo), "lo {lo}");
        assert_eq!(hi, 10_001 - lo);
    }

    #[test]
    fn ci_covers_true_median_and_shrinks_with_n() {
        // Symmetric noise around 100: the true median is 100.
        let width = |n: usize| {
            let xs: Vec<f64> = uniform(7, n)
                .iter()
                .map(|u| 100.0 + (u - 0.5) * 10.0)
                .collect();
            let s = summarize(&xs).unwrap();
            assert!(s.ci_lo <= 100.0 && 100.0 <= s.ci_hi, "n {n}: {s:?}");
            s.ci_hi - s.ci_lo
        };
        let (w30, w300, w3000) = (width(30), width(300), width(3000));
        assert!(w300 < w30 && w3000 < w300, "{w30} {w300} {w3000}");
        // Roughly 1/√n: a tenfold n cuts the width by about 3.2.
        assert!(w300 / w3000 > 2.0, "{w300} {w3000}");
    }

    #[test]
    fn constant_sequence_has_zero_width_ci() {
        let s = summarize(&[2.25; 50]).unwrap();
        assert_eq!((s.ci_lo, s.ci_hi, s.median), (2.25, 2.25, 2.25));
        assert_eq!(rel_half_width(&s), 0.0);
    }

    #[test]
    fn nan_values_are_dropped() {
        let s = summarize(&[1.0, f64::NAN, 3.0, f64::NEG_INFINITY, 2.0]).unwrap();
        assert_eq!(s.samples, 3);
        assert_eq!(s.median, 2.0);
        assert_eq!(s.mean, 2.0);
    }

    #[test]
    fn rel_half_width_is_half_width_over_median() {
        let s = Summary {
            median: 50.0,
            p10: 0.0,
            p90: 0.0,
            ci_lo: 49.0,
            ci_hi: 52.0,
            mean: 0.0,
            samples: 10,
        };
        assert!(close(rel_half_width(&s), 0.03));
        let zero = Summary { median: 0.0, ..s };
        assert!(rel_half_width(&zero).is_infinite());
    }
}
