//! When a step cell stops: on the precision of what users quote, not on a step count.
//!
//! A (layout, batch, block) cell runs its arms in rounds, the arms back to back in each
//! round (their order rotated), every arm's clean pass `steps` measured steps long. What a
//! pull request quotes is an arm's step time against eager-sync's, so that is the quantity
//! the cell stops on: each arm's step time over eager-sync's, formed inside each round and
//! summarised over rounds ([`crate::stats::rounds::paired`]). After `min` rounds the cell
//! stops as soon as every such ratio's 95% interval is within ±`precision_pct` percentage
//! points (`precision`); or when the cell has run `cap` (`time-cap`), or `max` rounds
//! (`max-rounds`). A cell always runs `min` rounds: with long steps its passes get shorter
//! instead ([`StepRounds::pass_length`]), so those rounds take about the cap. Without
//! eager-sync among the arms, each arm's own step time over rounds must be within
//! ±`precision_pct` percent instead.

use crate::axes::Arm;
use crate::stats::rounds::{half_width, over_rounds, paired, MAX_ROUNDS, MIN_ROUNDS, ONE_PROCESS};
use crate::stats::stopping::RoundsStop;
use crate::stats::summary::{rel_half_width, Estimate};
use anyhow::{ensure, Result};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepRounds {
    pub min: usize,
    pub max: usize,
    /// Measured steps of one arm's clean pass in one round.
    pub steps: usize,
    /// Target 95% half-width of each arm's step change against eager-sync, in percentage
    /// points of eager-sync's step time.
    pub precision_pct: f64,
    /// Time cap of one cell (all its arms and rounds).
    pub cap: Duration,
}

impl StepRounds {
    pub fn new(
        min: usize,
        max: usize,
        steps: usize,
        precision_pct: f64,
        cap: Duration,
    ) -> Result<Self> {
        ensure!(
            min >= MIN_ROUNDS && max >= min && max <= MAX_ROUNDS,
            "--min-rounds ({min}) must be at least {MIN_ROUNDS} (fewer round medians give no \
             95% interval) and --max-rounds ({max}) at least --min-rounds and at most \
             {MAX_ROUNDS}"
        );
        ensure!(steps >= 2, "--round-steps ({steps}) must be at least 2");
        ensure!(
            precision_pct.is_finite() && precision_pct > 0.0 && precision_pct <= 100.0,
            "--precision-pct ({precision_pct}) must be a positive number of percentage points, \
             at most 100 (a change known to ±100 points is not known)"
        );
        Ok(StepRounds {
            min,
            max,
            steps,
            precision_pct,
            cap,
        })
    }

    /// Why the cell stops after `rounds_done` rounds and `elapsed`, given each arm's step
    /// times per round (`step_us[i]` is `arms[i]`'s); `None` to run another round.
    pub fn check(
        &self,
        arms: &[Arm],
        step_us: &[impl AsRef<[Vec<f64>]>],
        rounds_done: usize,
        elapsed: Duration,
    ) -> Option<RoundsStop> {
        let precise = || self.precise(arms, step_us);
        RoundsStop::after(
            rounds_done,
            (self.min, self.max),
            precise,
            elapsed,
            self.cap,
        )
    }

    /// Warm-up and measured steps of each arm's pass in the next round, given the mean step
    /// time seen so far (`None` before the first round): `warmup` and `steps` while a round
    /// of all `arms` fits in cap / (min + 1); fewer for long steps (3 warm-up and 5 measured
    /// at least), so the `min` rounds a cell always runs take about its cap.
    pub fn pass_length(&self, arms: usize, step_us: Option<f64>, warmup: usize) -> (usize, usize) {
        let Some(step_us) = step_us.filter(|s| *s > 0.0) else {
            return (warmup, self.steps);
        };
        let budget_us = self.cap.as_secs_f64() * 1e6 / (self.min + 1) as f64 / arms.max(1) as f64;
        let fits = (budget_us / step_us) as usize;
        if fits >= warmup + self.steps {
            return (warmup, self.steps);
        }
        let warm = warmup.min((fits / 4).max(3));
        (warm, fits.saturating_sub(warm).clamp(5, self.steps))
    }

    fn precise(&self, arms: &[Arm], step_us: &[impl AsRef<[Vec<f64>]>]) -> bool {
        let within = |half: f64| 100.0 * half <= self.precision_pct;
        match arms.iter().position(|&a| a == Arm::EagerSync) {
            Some(sync) => (0..arms.len()).filter(|&i| i != sync).all(|i| {
                step_ratio(step_us[i].as_ref(), step_us[sync].as_ref())
                    .is_some_and(|e| within(half_width(&e)))
            }),
            // NaN without an interval: never within.
            None => step_us.iter().all(|rounds| {
                over_rounds(rounds.as_ref(), ONE_PROCESS)
                    .is_some_and(|s| within(rel_half_width(&s)))
            }),
        }
    }
}

/// An arm's step time over eager-sync's, paired within rounds.
pub fn step_ratio(arm: &[Vec<f64>], eager_sync: &[Vec<f64>]) -> Option<Estimate> {
    paired(arm, eager_sync, |a, s| a / s, ONE_PROCESS).map(|p| p.estimate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(max: usize, cap_ms: u64) -> StepRounds {
        StepRounds::new(6, max, 30, 0.5, Duration::from_millis(cap_ms)).unwrap()
    }

    /// `rounds` rounds of an arm whose step is `level` × a drift shared by every arm, with
    /// `jitter` (a fraction) of its own, alternating in sign from round to round.
    fn arm(level: f64, rounds: usize, jitter: f64) -> Vec<Vec<f64>> {
        (0..rounds)
            .map(|r| {
                let drift = 1.0 + 0.2 * ((r % 3) as f64 - 1.0);
                let own = if r % 2 == 0 {
                    1.0 + jitter
                } else {
                    1.0 - jitter
                };
                vec![level * drift * own; 5]
            })
            .collect()
    }

    #[test]
    fn a_cell_stops_when_every_arm_against_eager_sync_is_precise() {
        let arms = [Arm::EagerSync, Arm::Graph];
        let r = rule(20, 60_000);
        let steady = [arm(1000.0, 6, 0.0), arm(900.0, 6, 0.001)];
        assert_eq!(
            r.check(&arms, &steady, 6, Duration::ZERO)
                .map(RoundsStop::as_str),
            Some("precision")
        );
        // The same data one round short of the minimum runs on.
        let five = [arm(1000.0, 5, 0.0), arm(900.0, 5, 0.001)];
        assert_eq!(
            r.check(&arms, &five, 5, Duration::ZERO)
                .map(RoundsStop::as_str),
            None
        );
        // ±2% of the graph arm's own per round: ±2 points apart, above 0.5.
        let noisy = [arm(1000.0, 6, 0.0), arm(900.0, 6, 0.02)];
        assert_eq!(
            r.check(&arms, &noisy, 6, Duration::ZERO)
                .map(RoundsStop::as_str),
            None
        );
        assert_eq!(
            r.check(&arms, &noisy, 6, Duration::from_secs(61))
                .map(RoundsStop::as_str),
            Some("time-cap")
        );
        assert_eq!(
            rule(6, 60_000)
                .check(&arms, &noisy, 6, Duration::ZERO)
                .map(RoundsStop::as_str),
            Some("max-rounds")
        );
        // The cap never cuts a cell below its minimum rounds.
        assert_eq!(
            r.check(&arms, &five, 5, Duration::from_secs(61))
                .map(RoundsStop::as_str),
            None
        );
    }

    #[test]
    fn long_steps_get_shorter_passes_so_the_minimum_rounds_fit_the_cap() {
        // 60 s cap, 6 rounds at least: 60 s / 7 / 4 arms = 2.14 s per pass.
        let r = rule(20, 60_000);
        assert_eq!(r.pass_length(4, None, 10), (10, 30));
        assert_eq!(r.pass_length(4, Some(5_000.0), 10), (10, 30)); // 428 steps fit
        assert_eq!(r.pass_length(4, Some(100_000.0), 10), (5, 16)); // 21 fit
        assert_eq!(r.pass_length(4, Some(1_000_000.0), 10), (3, 5)); // 2 fit: the floor
    }

    #[test]
    fn shared_drift_does_not_hold_a_cell_open_but_unpaired_drift_would() {
        // ±20% drift shared by both arms: paired, the ratio is exact.
        let arms = [Arm::EagerSync, Arm::Graph];
        let both = [arm(1000.0, 6, 0.0), arm(880.0, 6, 0.0)];
        let ratio = step_ratio(&both[1], &both[0]).unwrap();
        assert!((ratio.point - 0.88).abs() < 1e-12);
        assert_eq!(
            rule(20, 60_000)
                .check(&arms, &both, 6, Duration::ZERO)
                .map(RoundsStop::as_str),
            Some("precision")
        );
        // Without eager-sync each arm is read alone, and the drift is its interval.
        assert_eq!(
            rule(20, 60_000)
                .check(&[Arm::Graph], &both[1..], 6, Duration::ZERO)
                .map(RoundsStop::as_str),
            None
        );
    }

    #[test]
    fn bad_rules_are_refused_with_the_flag() {
        let e = StepRounds::new(5, 10, 30, 0.5, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("--min-rounds (5)"), "{e}");
        let e = StepRounds::new(6, 5, 30, 0.5, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("--max-rounds (5)"), "{e}");
        let e = StepRounds::new(6, 6, 1, 0.5, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("--round-steps"), "{e}");
        let e = StepRounds::new(6, 6, 30, f64::NAN, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("--precision-pct"), "{e}");
    }
}
