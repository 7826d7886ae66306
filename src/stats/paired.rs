//! The change between two sides measured in pairs: per pair `d = ln(new / base)`; the change
//! is the Hodges–Lehmann estimate of `d` (the median of the Walsh averages `(dᵢ + dⱼ) / 2`,
//! `i ≤ j`) with the Wilcoxon signed-rank interval (Hollander & Wolfe, *Nonparametric
//! Statistical Methods*, §3.3): for `n` pairs and `M = n(n+1)/2` sorted Walsh averages, the
//! interval is `[W(t+1), W(M−t)]`, `t` the largest count with `P(T⁺ ≤ t) ≤ α/2` under the
//! null (exact for `n ≤ EXACT_UP_TO`, the normal approximation beyond). It assumes only that
//! the pairs' differences are symmetric about the change, not that the host stays in one
//! state: a state both sides of a pair share cancels in `d`.

/// The most pairs whose null distribution is counted exactly.
const EXACT_UP_TO: usize = 200;
/// The fewest pairs with a two-sided 95% interval narrower than all of them: at `n = 6`,
/// `P(T⁺ = 0) = 1/64 ≤ 0.025`.
pub const MIN_PAIRS: usize = 6;

/// A change in log space with its 95% interval, over `pairs` pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogChange {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    pub pairs: usize,
}

impl LogChange {
    /// The change as a percentage of BASE: `(e^x − 1) · 100`.
    pub fn pct(x: f64) -> f64 {
        x.exp_m1() * 100.0
    }

    /// The change of the reciprocal: ln(BASE / NEW), its interval turned over.
    pub fn flipped(&self) -> LogChange {
        LogChange {
            estimate: -self.estimate,
            lo: -self.hi,
            hi: -self.lo,
            pairs: self.pairs,
        }
    }
}

/// `ln(new / base)` of each pair with both sides finite and above zero.
pub fn log_ratios(pairs: impl IntoIterator<Item = (f64, f64)>) -> Vec<f64> {
    pairs
        .into_iter()
        .filter(|&(base, new)| base > 0.0 && new > 0.0 && base.is_finite() && new.is_finite())
        .map(|(base, new)| (new / base).ln())
        .collect()
}

/// The Hodges–Lehmann change of `d` with its 95% Wilcoxon interval; `None` with fewer than
/// [`MIN_PAIRS`] finite differences.
pub fn hodges_lehmann(d: &[f64]) -> Option<LogChange> {
    let d: Vec<f64> = d.iter().copied().filter(|x| x.is_finite()).collect();
    let n = d.len();
    if n < MIN_PAIRS {
        return None;
    }
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    walsh.sort_unstable_by(f64::total_cmp);
    let m = walsh.len();
    let t = lower_critical(n, 0.025);
    let estimate = if m % 2 == 1 {
        walsh[m / 2]
    } else {
        (walsh[m / 2 - 1] + walsh[m / 2]) / 2.0
    };
    Some(LogChange {
        estimate,
        lo: walsh[t],
        hi: walsh[m - 1 - t],
        pairs: n,
    })
}

/// The largest `t` with `P(T⁺ ≤ t) ≤ tail` for `n` pairs under the null.
fn lower_critical(n: usize, tail: f64) -> usize {
    if n > EXACT_UP_TO {
        let nf = n as f64;
        let mean = nf * (nf + 1.0) / 4.0;
        let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        // z of 0.975, with the continuity correction.
        return (mean - 1.959_964 * sd - 0.5).floor().max(0.0) as usize;
    }
    // Ways each sum of ranks can be made, as probabilities (2⁻ⁿ folded in rank by rank, so
    // no count overflows).
    let top = n * (n + 1) / 2;
    let mut p = vec![0.0f64; top + 1];
    p[0] = 1.0;
    for rank in 1..=n {
        for s in (0..=top).rev() {
            let with = if s >= rank { p[s - rank] } else { 0.0 };
            p[s] = (p[s] + with) / 2.0;
        }
    }
    let mut cumulative = 0.0;
    for (t, q) in p.iter().enumerate() {
        cumulative += q;
        if cumulative > tail {
            // P(T⁺ ≤ t) first passes the tail here: t − 1 is the last that stays within it.
            return t.saturating_sub(1).min(top);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::SplitMix64;

    fn uniform(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal by Box–Muller.
    fn normal(rng: &mut SplitMix64) -> f64 {
        let (u1, u2) = (uniform(rng).max(1e-300), uniform(rng));
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    #[test]
    fn the_critical_counts_match_the_published_table() {
        // Two-sided 0.05 lower critical values of T (Wilcoxon 1949; Hollander & Wolfe,
        // table A.4), n = 6..25.
        let table = [
            0, 2, 3, 5, 8, 10, 13, 17, 21, 25, 29, 34, 40, 46, 52, 58, 65, 73, 81, 89,
        ];
        for (i, &t) in table.iter().enumerate() {
            assert_eq!(lower_critical(6 + i, 0.025), t, "n = {}", 6 + i);
        }
        // The normal approximation beyond the exact range lands within one of the count.
        let exact = lower_critical(EXACT_UP_TO, 0.025) as i64;
        let nf = EXACT_UP_TO as f64;
        let approx = (nf * (nf + 1.0) / 4.0
            - 1.959_964 * (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt()
            - 0.5)
            .floor() as i64;
        assert!((exact - approx).abs() <= 1, "{exact} against {approx}");
    }

    #[test]
    fn too_few_pairs_give_no_interval_and_a_shift_is_estimated() {
        assert_eq!(hodges_lehmann(&[0.1; 5]), None);
        assert_eq!(hodges_lehmann(&[0.1, 0.1, 0.1, 0.1, 0.1, f64::NAN]), None);
        let d = [0.10, 0.12, 0.08, 0.11, 0.09, 0.10, 0.13, 0.07];
        let c = hodges_lehmann(&d).unwrap();
        assert!((c.estimate - 0.10).abs() < 1e-12, "{c:?}");
        assert!(c.lo <= c.estimate && c.estimate <= c.hi);
        assert!(c.lo > 0.07 - 1e-12 && c.hi < 0.13 + 1e-12, "{c:?}");
        assert_eq!(c.pairs, 8);
        assert!((LogChange::pct(20f64.ln() - 10f64.ln()) - 100.0).abs() < 1e-9);
        assert_eq!(
            log_ratios([(10.0, 11.0), (0.0, 1.0), (1.0, f64::NAN), (2.0, 2.0)]),
            vec![(1.1f64).ln(), 0.0]
        );
    }

    #[test]
    fn the_interval_covers_the_true_change_about_95_percent_of_the_time() {
        let mut rng = SplitMix64::new(20261206);
        let (trials, mut covered) = (2000, 0);
        for _ in 0..trials {
            // Heavy tails: a t-like mixture of two normals.
            let d: Vec<f64> = (0..16)
                .map(|_| {
                    let scale = if uniform(&mut rng) < 0.1 { 0.08 } else { 0.02 };
                    0.05 + scale * normal(&mut rng)
                })
                .collect();
            let c = hodges_lehmann(&d).unwrap();
            covered += usize::from(c.lo <= 0.05 && 0.05 <= c.hi);
        }
        let rate = covered as f64 / trials as f64;
        // Exact coverage at n = 16 is 1 − 2 P(T⁺ ≤ 29) = 95.6%.
        assert!((0.94..0.975).contains(&rate), "coverage {rate}");
    }
}
