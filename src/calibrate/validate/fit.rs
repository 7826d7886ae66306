//! The per-arm host factors fitted at one untraced cell: each arm's factor moved by a
//! secant step on its relative step error until every arm is within `TOLERANCE`, over a
//! model given as a closure (validate runs `steps` there; the tests run formulas).
//!
//! Why a fit: each arm's framework costs come from its own trace process, deflated by that
//! process's probe, and that deflation is off by a per-arm factor that differs between
//! processes (docs/calibration.md). One untraced run of the engine at a host-bound cell
//! gives each arm the factor that makes its step right there; the other cells then check it.

use crate::axes::Arm;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

/// An arm is fitted when its step is within this relative error.
pub const TOLERANCE: f64 = 0.005;
/// Model evaluations at most (each one runs every arm).
pub const MAX_ITERATIONS: u32 = 6;
/// The factors a fit may take.
pub const BOUNDS: (f64, f64) = (0.1, 10.0);
/// The second evaluation moves a factor by at least this (relative), so that whether the
/// step follows it is measured above the model's noise.
const PROBE: f64 = 0.1;
/// A step that moves by less than this share of its factor's relative change is not
/// host-bound there: the factor cannot be fitted at that cell.
const MIN_SENSITIVITY: f64 = 0.2;
/// Factor moves smaller than this (relative) are not used to judge sensitivity (noise).
const MIN_JUDGED_MOVE: f64 = 0.05;

/// One arm's fitted factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmFit {
    pub factor: f64,
    /// The model's relative step error at `factor` (model / reference − 1).
    pub error: f64,
    /// Model evaluations until this arm was within `TOLERANCE` (or all of them).
    pub iterations: u32,
    /// Within `TOLERANCE`; else `factor` is the best of `MAX_ITERATIONS` evaluations.
    pub converged: bool,
}

/// One arm's evaluations so far: (factor, relative error), in order.
#[derive(Default)]
struct History(Vec<(f64, f64)>);

impl History {
    fn best(&self) -> (f64, f64) {
        *self
            .0
            .iter()
            .min_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .expect("evaluated at least once")
    }

    /// The next factor: after one evaluation a proportional guess (a host-bound step is
    /// about proportional to its host costs) moved at least `PROBE`, then secant steps.
    fn next(&self) -> f64 {
        let n = self.0.len();
        let (k, e) = self.0[n - 1];
        let next = if n == 1 {
            let guess = k / (1.0 + e);
            if (guess / k - 1.0).abs() >= PROBE {
                guess
            } else if e > 0.0 {
                k * (1.0 - PROBE)
            } else {
                k * (1.0 + PROBE)
            }
        } else {
            let (k0, e0) = self.0[n - 2];
            if e == e0 {
                // No slope to follow (a move too small to judge that changed nothing).
                k / (1.0 + e)
            } else {
                k - e * (k - k0) / (e - e0)
            }
        };
        next.clamp(BOUNDS.0, BOUNDS.1)
    }

    /// Refuses the last move when the step did not follow the factor.
    fn check_moves(&self, arm: Arm) -> Result<()> {
        let n = self.0.len();
        if n < 2 {
            return Ok(());
        }
        let ((k0, e0), (k1, e1)) = (self.0[n - 2], self.0[n - 1]);
        let factor_move = k1 / k0 - 1.0;
        let step_move = (1.0 + e1) / (1.0 + e0) - 1.0;
        if factor_move.abs() >= MIN_JUDGED_MOVE
            && step_move.abs() < MIN_SENSITIVITY * factor_move.abs()
        {
            bail!(
                "{arm}: its step moved {:+.1}% when its host factor moved {:+.1}% (x{k0:.3} to \
                 x{k1:.3}): the step is not host-bound at the fit cell, so no host factor \
                 fits it there; fit at a shorter forward (reference_loop.py --no-traces \
                 --forward-us 100 --batch-sizes 1)",
                step_move * 100.0,
                factor_move * 100.0
            );
        }
        Ok(())
    }
}

/// Each of `arms`' host factor, fitted: `model` gives every arm's relative step error
/// (model / reference − 1) at the factors it is handed (all arms in one call). Every factor
/// starts at 1; an arm within `TOLERANCE` keeps its factor while the others move. An arm
/// whose step does not follow its factor is an error, never a factor of 1.
pub fn fit_factors(
    arms: &[Arm],
    mut model: impl FnMut(&BTreeMap<Arm, f64>) -> Result<BTreeMap<Arm, f64>>,
) -> Result<BTreeMap<Arm, ArmFit>> {
    let mut factors: BTreeMap<Arm, f64> = arms.iter().map(|&a| (a, 1.0)).collect();
    let mut histories: BTreeMap<Arm, History> =
        arms.iter().map(|&a| (a, History::default())).collect();
    let mut done: BTreeMap<Arm, ArmFit> = BTreeMap::new();
    for iteration in 1..=MAX_ITERATIONS {
        let errors = model(&factors)?;
        for &arm in arms {
            if done.contains_key(&arm) {
                continue;
            }
            let e = *errors
                .get(&arm)
                .with_context(|| format!("the model gave no step error for {arm}"))?;
            anyhow::ensure!(
                e.is_finite() && e > -1.0,
                "{arm}: the model's step error {e} is no error"
            );
            let history = histories.get_mut(&arm).expect("every arm has a history");
            history.0.push((factors[&arm], e));
            history.check_moves(arm)?;
            // Within the tolerance, but only once the step has been seen to follow the factor.
            if e.abs() <= TOLERANCE && history.0.len() >= 2 {
                let fit = ArmFit {
                    factor: factors[&arm],
                    error: e,
                    iterations: iteration,
                    converged: true,
                };
                done.insert(arm, fit);
            } else {
                factors.insert(arm, history.next());
            }
        }
        if done.len() == arms.len() {
            break;
        }
    }
    // Past the last evaluation: the best one, said to be unconverged where it is.
    for &arm in arms {
        done.entry(arm).or_insert_with(|| {
            let (factor, error) = histories[&arm].best();
            ArmFit {
                factor,
                error,
                iterations: MAX_ITERATIONS,
                converged: error.abs() <= TOLERANCE,
            }
        });
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARMS: [Arm; 4] = [
        Arm::EagerSync,
        Arm::EagerDevice,
        Arm::Graph,
        Arm::GraphUpload,
    ];

    /// Fits against references `step(arm, truth[arm])` µs of a model `step(arm, k)`: the fits
    /// and how many times the model ran.
    fn fit(
        truth: &BTreeMap<Arm, f64>,
        step: impl Fn(Arm, f64) -> f64,
    ) -> (Result<BTreeMap<Arm, ArmFit>>, u32) {
        let arms: Vec<Arm> = truth.keys().copied().collect();
        let mut calls = 0;
        let fits = fit_factors(&arms, |factors| {
            calls += 1;
            Ok(factors
                .iter()
                .map(|(&arm, &k)| (arm, step(arm, k) / step(arm, truth[&arm]) - 1.0))
                .collect())
        });
        (fits, calls)
    }

    fn truth(factors: [f64; 4]) -> BTreeMap<Arm, f64> {
        ARMS.into_iter().zip(factors).collect()
    }

    /// A host-bound step: a fixed GPU share plus host costs times the factor.
    fn linear(arm: Arm, k: f64) -> f64 {
        let (gpu, host) = match arm {
            Arm::EagerSync => (100.0, 400.0),
            Arm::EagerDevice => (100.0, 250.0),
            Arm::Graph => (100.0, 120.0),
            _ => (40.0, 200.0),
        };
        gpu + host * k
    }

    #[test]
    fn a_host_bound_step_recovers_each_arm_s_factor_within_six_evaluations() {
        let want = truth([1.0, 1.3, 0.7, 2.5]);
        let (fits, calls) = fit(&want, linear);
        let fits = fits.unwrap();
        assert!(calls <= MAX_ITERATIONS, "{calls}");
        for (arm, f) in &fits {
            assert!(f.converged && f.error.abs() <= TOLERANCE, "{arm}: {f:?}");
            assert!((f.factor / want[arm] - 1.0).abs() < 0.01, "{arm}: {f:?}");
            assert!(f.iterations <= calls);
        }
        // An arm right at 1 is still moved once, to see that its step follows the factor.
        assert!(fits[&Arm::EagerSync].iterations >= 2);
    }

    #[test]
    fn a_noisy_host_bound_step_still_converges() {
        // ±0.3% run to run, alternating: under the tolerance, over the secant's slope noise.
        let want = truth([0.9, 1.3, 0.7, 1.6]);
        let mut calls = 0u32;
        let arms: Vec<Arm> = want.keys().copied().collect();
        let fits = fit_factors(&arms, |factors| {
            calls += 1;
            let noise = if calls.is_multiple_of(2) {
                1.003
            } else {
                0.997
            };
            Ok(factors
                .iter()
                .map(|(&a, &k)| (a, noise * linear(a, k) / linear(a, want[&a]) - 1.0))
                .collect())
        })
        .unwrap();
        for (arm, f) in &fits {
            assert!(f.converged, "{arm}: {f:?}");
            assert!((f.factor / want[arm] - 1.0).abs() < 0.02, "{arm}: {f:?}");
        }
    }

    /// A step bound by the GPU (`gpu` µs) or by the host (`base` + `host` × k), whichever is
    /// longer.
    fn bound(k: f64) -> f64 {
        f64::max(100.0, 20.0 + 130.0 * k)
    }

    #[test]
    fn a_step_that_turns_gpu_bound_is_fitted_while_it_follows_and_refused_below_the_gpu() {
        // Host-bound at 1 (150 µs), the reference at 110 µs: k = 90 / 130, near the kink.
        let reachable = BTreeMap::from([(Arm::EagerDevice, 90.0 / 130.0)]);
        let (fits, _) = fit(&reachable, |_, k| bound(k));
        let f = fits.unwrap()[&Arm::EagerDevice];
        assert!(
            f.converged && (f.factor * 130.0 / 90.0 - 1.0).abs() < 0.01,
            "{f:?}"
        );
        // A reference under the GPU's floor: no factor reaches it, and the step stops
        // following once the host hides behind the GPU.
        let e = fit_factors(&[Arm::Graph], |factors| {
            Ok(factors
                .iter()
                .map(|(&a, &k)| (a, bound(k) / 95.0 - 1.0))
                .collect())
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("graph") && e.contains("shorter forward"), "{e}");
    }

    #[test]
    fn an_arm_whose_step_ignores_its_factor_is_an_error_naming_it() {
        for at_one in [1.0, 1.2] {
            let e = fit_factors(&ARMS, |factors| {
                Ok(factors
                    .iter()
                    .map(|(&arm, &k)| match arm {
                        // GPU-bound: the step is what it is.
                        Arm::GraphUpload => (arm, at_one - 1.0),
                        _ => (arm, linear(arm, k) / linear(arm, 1.0) - 1.0),
                    })
                    .collect())
            })
            .unwrap_err()
            .to_string();
            assert!(
                e.starts_with("graph-upload:") && e.contains("host-bound"),
                "{e}"
            );
        }
    }

    #[test]
    fn factors_stay_within_their_bounds_and_an_unreached_one_says_so() {
        let (fits, calls) = fit(&truth([20.0, 0.02, 1.0, 1.0]), |_, k| 500.0 * k);
        let fits = fits.unwrap();
        assert_eq!(calls, MAX_ITERATIONS);
        let (high, low) = (fits[&Arm::EagerSync], fits[&Arm::EagerDevice]);
        assert_eq!(high.factor, BOUNDS.1);
        assert_eq!(low.factor, BOUNDS.0);
        assert!(!high.converged && !low.converged);
        assert!(fits[&Arm::Graph].converged);
    }

    #[test]
    fn a_model_that_leaves_an_arm_out_is_an_error() {
        let e = fit_factors(&[Arm::Graph], |_| Ok(BTreeMap::new()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("graph"), "{e}");
    }
}
