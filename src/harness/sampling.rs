//! The sampling loop: run batches of steps until the stopping rule says enough.

use crate::stats::stopping::{StopReason, StoppingRule};
use anyhow::Result;
use std::time::{Duration, Instant};

/// Per-step times of one metric, one value per batch of steps.
#[derive(Debug, Clone)]
pub struct Sampled {
    /// Mean µs per step of each batch.
    pub per_step_us: Vec<f64>,
    pub stop: StopReason,
}

/// Calls `batch(steps_per_sample)`, which runs that many steps and returns how long they
/// took, until `rule` stops; a sample is the batch's time divided by its steps, so timer
/// resolution and per-batch overhead are spread over many steps.
pub fn sample_per_step(
    rule: &StoppingRule,
    steps_per_sample: usize,
    mut batch: impl FnMut(usize) -> Result<Duration>,
) -> Result<Sampled> {
    let start = Instant::now();
    let mut per_step_us = Vec::new();
    loop {
        let took = batch(steps_per_sample)?;
        per_step_us.push(took.as_secs_f64() * 1e6 / steps_per_sample as f64);
        if let Some(stop) = rule.check(&per_step_us, start.elapsed()) {
            return Ok(Sampled { per_step_us, stop });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_per_step_and_stop_when_the_rule_says() {
        let rule = StoppingRule {
            min_samples: 10,
            ..Default::default()
        };
        let mut calls = 0;
        let sampled = sample_per_step(&rule, 50, |steps| {
            calls += 1;
            assert_eq!(steps, 50);
            Ok(Duration::from_micros(500)) // 10 µs a step, no noise: converges at once
        })
        .unwrap();
        assert_eq!(sampled.stop, StopReason::Converged);
        assert_eq!(calls, 10);
        assert!(sampled.per_step_us.iter().all(|&v| (v - 10.0).abs() < 1e-9));
    }

    #[test]
    fn noisy_batches_run_to_the_sample_cap_and_errors_propagate() {
        let rule = StoppingRule {
            max_samples: 40,
            abs_ci_us: None,
            ..Default::default()
        };
        let mut k = 0u64;
        let sampled = sample_per_step(&rule, 1, |_| {
            k += 1;
            Ok(Duration::from_micros(if k.is_multiple_of(2) {
                10
            } else {
                30
            }))
        })
        .unwrap();
        assert_eq!(
            (sampled.stop, sampled.per_step_us.len()),
            (StopReason::SampleCap, 40)
        );
        let failing = sample_per_step(&rule, 1, |_| anyhow::bail!("kernel faulted"));
        assert!(failing.unwrap_err().to_string().contains("kernel faulted"));
    }
}
