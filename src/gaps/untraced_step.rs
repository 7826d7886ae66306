//! The loop's own untraced step, where the user gives it (`--untraced-step-us`): the profiler
//! stretches host time and leaves GPU time nearly as it is, so the one factor on the traced
//! host time that makes the steps as long as the untraced step takes off what the profiler
//! cost them on the critical path, however its events cost.

use super::Step;
use crate::report::format::fmt_num;
use anyhow::{bail, Result};
use serde::Serialize;

/// The step the user measured and the factor on the traced host time that gives it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostScale {
    pub untraced_step_us: f64,
    #[serde(rename = "host_scale")]
    pub factor: f64,
}

/// The factor on each step's host-paced time (the step less its GPU work) that makes the
/// median step `untraced_step_us`, over one run's ranks (each a trace's steps, as analysed
/// unscaled): a step is its slowest rank's, as `gaps::ranks` takes it. Fails where that step is
/// no longer than the GPU work alone: it is then not this loop's step as traced.
pub fn host_scale(ranks: &[&[Step]], untraced_step_us: f64) -> Result<HostScale> {
    let steps = ranks.iter().map(|r| r.len()).min().unwrap_or(0);
    if steps == 0 {
        bail!("no steps to scale to --untraced-step-us {untraced_step_us}");
    }
    let median_at = |factor: f64| -> f64 {
        let longest: Vec<f64> = (0..steps)
            .map(|k| {
                (ranks.iter())
                    .map(|r| r[k].gpu_busy_us + factor * r[k].host_paced_us())
                    .fold(f64::MIN, f64::max)
            })
            .collect();
        crate::stats::summary::quantile(&longest, 0.5).unwrap_or(0.0)
    };
    let gpu_alone = median_at(0.0);
    if untraced_step_us <= gpu_alone {
        bail!(
            "--untraced-step-us {untraced_step_us} is no longer than the traced steps' GPU work \
             alone ({} µs a step), so it is not this loop's step: give the step (ITL) of the same \
             loop, batch size and model, measured without the profiler",
            fmt_num(gpu_alone)
        );
    }
    // The median step grows with the factor, without bound unless no step leaves the GPU idle.
    let mut high = 1.0;
    while median_at(high) < untraced_step_us {
        high *= 2.0;
        if high > 1e6 {
            bail!(
                "--untraced-step-us {untraced_step_us} would take the traced steps' host time \
                 a million times over (their median step is {} µs, their GPU idle almost none \
                 of it): give the step of this loop, batch size and model",
                fmt_num(median_at(1.0))
            );
        }
    }
    let mut low = 0.0;
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        match median_at(mid) < untraced_step_us {
            true => low = mid,
            false => high = mid,
        }
    }
    Ok(HostScale {
        untraced_step_us,
        factor: 0.5 * (low + high),
    })
}
