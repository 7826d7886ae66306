//! The host-read cost timed in alternation: batches of eager-sync steps and of eager-device
//! steps take turns inside one round, and each pair's difference per step is a sample.
//!
//! Measured one arm after the other, the two sides of `read_cost_us` sit tens of
//! milliseconds apart, and on a host whose speed drifts over milliseconds (a KVM guest,
//! frequency scaling) each round's difference carries that drift: on an H200 guest the
//! rounds' read costs spread ±5% around 18 µs. Alternating batches a few milliseconds long
//! puts both sides of every sample in the same stretch of host time, and the order flips
//! every pair (ABBA...) so a steady drift cancels inside each two pairs.

use crate::stats::stopping::StoppingRule;
use anyhow::Result;
use std::time::Instant;

/// Which side of the difference a batch steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The minuend (eager-sync).
    First,
    /// The subtrahend (eager-device).
    Second,
}

/// Samples of (first's − second's) wall time per step, each from one batch of
/// `steps_per_sample` steps of each side back to back, until `rule` stops. `step(side)`
/// issues one step of that side; `drain` waits for the GPU after each batch.
pub fn alternating_difference(
    rule: &StoppingRule,
    steps_per_sample: usize,
    mut step: impl FnMut(Side) -> Result<()>,
    mut drain: impl FnMut() -> Result<()>,
) -> Result<Vec<f64>> {
    let mut batch = |side: Side| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..steps_per_sample {
            step(side)?;
        }
        drain()?;
        Ok(start.elapsed().as_secs_f64() * 1e6 / steps_per_sample as f64)
    };
    let start = Instant::now();
    let mut differences = Vec::new();
    loop {
        let (first, second) = if differences.len() % 2 == 0 {
            let first = batch(Side::First)?;
            (first, batch(Side::Second)?)
        } else {
            let second = batch(Side::Second)?;
            (batch(Side::First)?, second)
        };
        differences.push(first - second);
        if rule.check(&differences, start.elapsed()).is_some() {
            return Ok(differences);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn batches_alternate_abba_and_each_pair_gives_first_minus_second() {
        let rule = StoppingRule {
            min_samples: 4,
            max_samples: 4,
            ..StoppingRule::default()
        };
        let mut order = Vec::new();
        let mut drains = 0;
        let samples = alternating_difference(
            &rule,
            2,
            |side| {
                order.push(side);
                // The first side costs 3 ms a step more: far above any scheduler noise.
                if side == Side::First {
                    std::thread::sleep(Duration::from_millis(3));
                }
                Ok(())
            },
            || {
                drains += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(samples.len(), 4);
        assert!(samples.iter().all(|&us| us > 2500.0), "{samples:?}");
        assert_eq!(drains, 8, "the GPU is drained after every batch");
        use Side::{First as F, Second as S};
        assert_eq!(
            order,
            [F, F, S, S, S, S, F, F, F, F, S, S, S, S, F, F],
            "ABBA: the order flips every pair"
        );
    }

    #[test]
    fn a_failing_step_ends_the_measurement() {
        let rule = StoppingRule::default();
        let err = alternating_difference(&rule, 3, |_| anyhow::bail!("launch failed"), || Ok(()))
            .unwrap_err();
        assert_eq!(err.to_string(), "launch failed");
    }
}
