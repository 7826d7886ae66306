//! Factors fitted at one untraced cell: each arm's host factor moved by a secant step on its
//! relative step error until every arm is within `TOLERANCE`, and the post-wait table's scale
//! on eager-sync − graph at a long forward (within `DIFF_TOLERANCE`), over a model given as a
//! closure (validate runs `steps` there; the tests run formulas).
//!
//! Why a fit: each arm's framework costs come from its own trace process, deflated by that
//! process's probe, and that deflation is off by a per-arm factor that differs between
//! processes (docs/calibration.md). One untraced run of the engine at a host-bound cell
//! gives each arm the factor that makes its step right there; the other cells then check it.

use anyhow::{Context, Result};
use std::collections::BTreeMap;

/// An arm is fitted when its step is within this relative error: chosen above the ~1.3% a
/// steps cell moved between two processes of one profile on an H200 (docs/calibration.md), so
/// a run at the right factor lands inside it; far inside validation's ±10%.
pub const TOLERANCE: f64 = 0.02;
/// The post-wait scale is fitted when eager-sync − graph is within this relative error: the
/// difference is a few hundred µs of two steps of several ms, so its run-to-run noise is a few
/// times a step's; a third of validation's default ±15% bar (`--diff-pct`).
pub const DIFF_TOLERANCE: f64 = 0.05;
/// Model evaluations at most (each one runs every arm).
pub const MAX_ITERATIONS: u32 = 6;
/// The factors a fit may take.
pub const BOUNDS: (f64, f64) = (0.1, 10.0);
/// Most passes of the arm factors and the post-wait scale fitted in turns ([`in_turns`]):
/// each pass fits the factors with the scale of the pass before, then the scale with those
/// factors. The factors take in the extras at the short forward and the scale the factors at
/// the long one, so one fit of each lands off (docs/h200-findings.md#profiler-and-calibration);
/// a pass leaves about a third of the scale's error, so five take a 30% error to within 1%.
pub const PASSES: usize = 5;
const _: () = assert!(PASSES >= 1, "in_turns runs one pass at least");
/// The turns stop once a pass moves the scale by less than this (relative): both fits hold.
pub const SETTLED: f64 = 0.01;
/// The second evaluation moves a factor by at least this (relative), so that whether the
/// step follows it shows above two runs' noise ([`TOLERANCE`]): a step half on the host moves
/// 10%.
const PROBE: f64 = 0.2;
/// A step that moves by less than this share of its factor's relative change, or the other
/// way, is not host-bound there: the factor cannot be fitted at that cell.
const MIN_SENSITIVITY: f64 = 0.2;
/// Factor moves smaller than this (relative) are not used to judge sensitivity (noise).
const MIN_JUDGED_MOVE: f64 = 0.05;

/// What [`in_turns`] ends with: the last pass's scale and the rest of what it returned, and
/// how many passes ran.
#[derive(Debug)]
pub struct Turns<T> {
    pub scale: f64,
    pub passes: usize,
    pub last: T,
}

/// Runs `pass` up to [`PASSES`] times, each given its number (from 1) and the scale the pass
/// before fitted (`start` for the first) and returning the scale it fitted with what else it
/// made: two fits that each hold the other's result fixed, in turns, towards the point where
/// both hold; a pass that moves the scale by less than [`SETTLED`] ends them.
pub fn in_turns<T>(
    start: f64,
    mut pass: impl FnMut(usize, f64) -> Result<(f64, T)>,
) -> Result<Turns<T>> {
    let (mut scale, mut n) = (start, 1);
    loop {
        let (next, last) = pass(n, scale)?;
        let settled = (next / scale - 1.0).abs() < SETTLED;
        scale = next;
        if settled || n == PASSES {
            return Ok(Turns {
                scale,
                passes: n,
                last,
            });
        }
        n += 1;
    }
}

/// One fitted factor (an arm's host factor, or the post-wait scale).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmFit {
    pub factor: f64,
    /// The model's relative error at `factor` (model / reference − 1).
    pub error: f64,
    /// Model evaluations until this factor was within its tolerance (or all of them).
    pub iterations: u32,
    /// Within its tolerance, or kept (`not_host_bound`: nothing to fit); else `factor` is the
    /// best of `MAX_ITERATIONS` evaluations.
    pub converged: bool,
    /// The evaluation (from 1) that ran at `factor` and gave `error`.
    pub run: u32,
    /// Where the arm's step did not follow its factor at the fit cell (GPU-bound there):
    /// how far each moved. Such an arm keeps the factor it started at (1: the trace's
    /// costs) and is settled: no factor moves its step, so validation's step bar judges its
    /// error there rather than `TOLERANCE`, which the model's run-to-run noise would fail.
    pub not_host_bound: Option<Unfollowed>,
}

/// Two runs of an arm whose step did not follow its factor: the factors and step moves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unfollowed {
    pub from: f64,
    pub to: f64,
    /// The step's relative move between the two runs.
    pub step_move: f64,
}

impl Unfollowed {
    /// The factor's relative move.
    pub fn factor_move(&self) -> f64 {
        self.to / self.from - 1.0
    }
}

impl std::fmt::Display for Unfollowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its step moved {:+.1}% when its host factor moved {:+.1}% (x{:.3} to x{:.3}): \
             the step is not host-bound at the fit cell",
            self.step_move * 100.0,
            self.factor_move() * 100.0,
            self.from,
            self.to
        )
    }
}

/// One arm's evaluations so far: (factor, relative error), in order.
#[derive(Default)]
struct History(Vec<(f64, f64)>);

impl History {
    /// The evaluation closest to the reference: its index (from 0), factor and error.
    fn best(&self) -> (usize, f64, f64) {
        let (i, &(k, e)) = (self.0.iter().enumerate())
            .min_by(|a, b| a.1 .1.abs().total_cmp(&b.1 .1.abs()))
            .expect("evaluated at least once");
        (i, k, e)
    }

    /// The next factor: after one evaluation a proportional guess (a host-bound step is
    /// about proportional to its host costs) moved at least `PROBE`; then a Newton step from
    /// the latest evaluation along the slope of the two evaluations furthest apart. Two close
    /// evaluations' slope is mostly the model's noise; the widest pair's is the step's.
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
            let ((ki, ei), (kj, ej)) = self.widest();
            let slope = (ej - ei) / (kj - ki);
            // `unfollowed` ended an arm whose step did not follow its factor over the first
            // two runs; a later pair's slope that has noise turn it flat or back falls back
            // to the proportional step.
            if slope > 0.0 && slope.is_finite() {
                k - e / slope
            } else {
                k / (1.0 + e)
            }
        };
        next.clamp(BOUNDS.0, BOUNDS.1)
    }

    /// The two evaluations whose factors are furthest apart, in the order they ran (two or
    /// more evaluations).
    fn widest(&self) -> ((f64, f64), (f64, f64)) {
        let n = self.0.len();
        let spread = |&(i, j): &(usize, usize)| (self.0[j].0 - self.0[i].0).abs();
        let (i, j) = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .max_by(|a, b| spread(a).total_cmp(&spread(b)))
            .expect("two evaluations");
        (self.0[i], self.0[j])
    }

    /// Whether the arm's step failed to follow its factor from its first run to the probe
    /// (at least `PROBE` apart, so the model's noise cannot decide it), judged once, when the
    /// probe has run: a later run within `TOLERANCE` is a fit whatever the pairs after the
    /// probe's say (a run that converged is never thrown away for a noisy slope).
    fn unfollowed(&self) -> Option<Unfollowed> {
        let [(k0, e0), (k1, e1)] = self.0[..] else {
            return None;
        };
        let found = Unfollowed {
            from: k0,
            to: k1,
            step_move: (1.0 + e1) / (1.0 + e0) - 1.0,
        };
        let factor_move = found.factor_move();
        // Signed: a step that moved against its factor did not follow it, however far.
        (factor_move.abs() >= MIN_JUDGED_MOVE && found.step_move / factor_move < MIN_SENSITIVITY)
            .then_some(found)
    }
}

/// Each of `arms`' factor, fitted: `model` gives every arm's relative error (model /
/// reference − 1) at the factors it is handed (all in one call). The keys are arms for the
/// host factors (`TOLERANCE`) and one for the post-wait scale (`DIFF_TOLERANCE`). Every
/// factor starts at 1; an arm within `tolerance` keeps its factor while the others move. An
/// arm whose step does not follow its factor (GPU-bound at the cell) keeps its first factor,
/// says so in `not_host_bound`, and is settled. One no run brought within `tolerance` keeps
/// its closest run, `converged` false (validate fails on it).
pub fn fit_factors<K: Ord + Copy + std::fmt::Display>(
    arms: &[K],
    tolerance: f64,
    mut model: impl FnMut(&BTreeMap<K, f64>) -> Result<BTreeMap<K, f64>>,
) -> Result<BTreeMap<K, ArmFit>> {
    let mut factors: BTreeMap<K, f64> = arms.iter().map(|&a| (a, 1.0)).collect();
    let mut histories: BTreeMap<K, History> =
        arms.iter().map(|&a| (a, History::default())).collect();
    let mut done: BTreeMap<K, ArmFit> = BTreeMap::new();
    for iteration in 1..=MAX_ITERATIONS {
        let errors = model(&factors)?;
        for &arm in arms {
            if done.contains_key(&arm) {
                continue;
            }
            let e = *errors
                .get(&arm)
                .with_context(|| format!("the model gave no error for {arm}"))?;
            anyhow::ensure!(
                e.is_finite() && e > -1.0,
                "{arm}: the model's error {e} is no error"
            );
            let history = histories.get_mut(&arm).expect("every arm has a history");
            history.0.push((factors[&arm], e));
            if let Some(unfollowed) = history.unfollowed() {
                let (start, e0) = history.0[0];
                let fit = ArmFit {
                    factor: start,
                    error: e0,
                    iterations: iteration,
                    converged: true,
                    run: 1,
                    not_host_bound: Some(unfollowed),
                };
                done.insert(arm, fit);
                factors.insert(arm, start);
            } else if e.abs() <= tolerance && history.0.len() >= 2 {
                // Within the tolerance, once the step has been seen to follow the factor: the
                // closest run so far (the first, at x1, may have been closer than this one).
                let (index, factor, error) = history.best();
                let fit = ArmFit {
                    factor,
                    error,
                    iterations: iteration,
                    converged: true,
                    run: index as u32 + 1,
                    not_host_bound: None,
                };
                factors.insert(arm, factor);
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
            let (index, factor, error) = histories[&arm].best();
            ArmFit {
                factor,
                error,
                iterations: MAX_ITERATIONS,
                // Never before the step was seen to follow the factor (the first run).
                converged: error.abs() <= tolerance && index > 0,
                run: index as u32 + 1,
                not_host_bound: None,
            }
        });
    }
    Ok(done)
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
